"""Per-cycle samples files (``eval --samples``): written and read here, every line a :class:`SampleLine`.

The writer (:func:`cycle_samples`, :func:`write_samples`) builds each line through the
declared model (:mod:`clip_cycles.schemas.samples`, ``clip-cycles schema samples``) and the
readers (``compare``, ``page``) parse each line with it (:func:`read_samples`), so what one
writes the other reads, and a bad value is one sentence naming the file, line and field.
A result names its samples file and that file's sha256 (:func:`samples_reference`); each
line names the result's ``items_sha256`` and the ``weights_sha256`` scored, so a reader can
check that a samples file belongs to the result beside it (:func:`pairing_problem`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
from pydantic import TypeAdapter, ValidationError

from clip_cycles.algebra.contrast import cycle_credits, deltas_from_blocks
from clip_cycles.outputs import check_path_length, write_output
from clip_cycles.regular_files import load_json_text, read_regular_file
from clip_cycles.schemas.declared import validate
from clip_cycles.schemas.samples import SampleLine, sample_line

if TYPE_CHECKING:  # the readers (page, compare) never load the encoders
    from clip_cycles.encoding.encoder import EncodedFeatures
    from clip_cycles.tasks.registry import TaskSpec

#: Largest samples file read (bytes): about two million cycles.
MAX_SAMPLES_BYTES = 1 << 30
#: One task's cycles, keyed by ``(seed, cycle_id)``.
Key = tuple[int, str]


def image_root(item: Any) -> str | None:
    """The folder ``item``'s key is relative to (its path minus its key), or None (bytes only, or another layout)."""
    path = getattr(item, "path", None)
    if path is None:
        return None
    text, key = Path(path).as_posix(), str(item.key)
    return text[: -len(key)].rstrip("/") or None if text.endswith("/" + key) else None


def cycle_samples(
    task: TaskSpec,
    seed: int,
    rows: Any,
    encoded: EncodedFeatures,
    blocks: np.ndarray,
    bind: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One :class:`SampleLine` (as a dict) per scored cycle of ``rows`` (those :func:`cycle_index` kept, in row order).

    Keys: ``task``, ``seed``, ``split``, ``cycle_id``, ``image_0``/``image_1`` (the images'
    keys: file names relative to ``image_root``), ``caption_0``/``caption_1`` (as scored),
    ``s11 s12 s21 s22`` (row = image, column = caption), ``delta`` and ``credit`` (1 / 0.5 / 0);
    ``bind``: the ``items_sha256`` and ``weights_sha256`` of the result the lines belong to.
    """
    keys = [item.key for item in rows.image_items]
    roots = [image_root(item) for item in rows.image_items]
    kept = np.fromiter((encoded.image_rows.get(k, -1) >= 0 for k in keys), dtype=bool, count=len(keys))
    rows_kept = np.flatnonzero(kept[rows.image_index].all(axis=1))
    if rows_kept.shape[0] != blocks.shape[0]:
        raise ValueError(f"task {task.name} seed {seed}: {rows_kept.shape[0]} kept rows for {blocks.shape[0]} blocks")
    deltas = deltas_from_blocks(blocks)
    credits = cycle_credits(deltas, task.tie_tolerance)
    ids = rows.cycle_ids
    bound = dict(bind or {})
    out = []
    for k, i in enumerate(rows_kept.tolist()):
        (a, b), (c, d) = rows.image_index[i], rows.caption_index[i]
        out.append(
            sample_line(
                {
                    "task": task.name,
                    "seed": int(seed),
                    "split": task.split,
                    "cycle_id": str(ids[i]),
                    "image_0": keys[a],
                    "image_1": keys[b],
                    "caption_0": rows.captions[c],
                    "caption_1": rows.captions[d],
                    "s11": float(blocks[k, 0, 0]),
                    "s12": float(blocks[k, 0, 1]),
                    "s21": float(blocks[k, 1, 0]),
                    "s22": float(blocks[k, 1, 1]),
                    "delta": float(deltas[k]),
                    "credit": float(credits[k]),
                    "items_sha256": bound.get("items_sha256"),
                    "weights_sha256": bound.get("weights_sha256"),
                    "image_root": roots[a] if roots[a] is not None and roots[a] == roots[b] else None,
                }
            )
        )
    return out


def check_samples_path(path: str | Path) -> Path:
    """Refuse, before any work, a samples path that is a folder or whose parent is a file."""
    path = check_path_length(path, "samples file")
    if path.is_dir():
        raise ValueError(f"samples file {path} is a folder; name a file, e.g. {path / 'samples.jsonl'}")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise ValueError(f"samples file {path}: {parent} is not a folder")
    return path


def samples_bytes(samples: Sequence[dict[str, Any]]) -> bytes:
    """The bytes of a samples file: one JSON line per sample, sorted keys."""
    return "".join(json.dumps(sample, sort_keys=True) + "\n" for sample in samples).encode("utf-8")


def write_samples(samples: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write per-cycle samples as JSON lines (sorted keys) under the output policy; returns the path.

    Written whole or not at all; a FIFO or character device (``/dev/stdout``) is streamed into.
    """
    return write_output(path, samples_bytes(samples), what="samples file")


def samples_reference(path: str | Path, content: bytes) -> dict[str, str]:
    """What a result records of its samples file: ``{"path", "sha256"}`` (the path made relative when it is written)."""
    return {"path": str(path), "sha256": hashlib.sha256(content).hexdigest()}


def _line_problem(path: str | Path, number: int, field: str, message: str) -> ValueError:
    return ValueError(f"samples file {path}, line {number}: field {field!r} {message}")


#: The fields a samples line may leave out (lines written before they were declared): their defaults.
_OPTIONAL = {"items_sha256": None, "weights_sha256": None, "image_root": None}
#: Many lines validated at once (the reader's fast path); a failure is then located line by line.
_LINES: TypeAdapter[list[SampleLine]] = TypeAdapter(list[SampleLine])
#: Brackets a flat samples line holds at most for the fast path (a caption may hold a few).
_FLAT_BRACKETS = 16


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a finite number")


def _line_value(path: str | Path, number: int, line: str) -> dict[str, Any]:
    """One line parsed (bounded, :func:`load_json_text`) as an object; a ValueError naming the file and line."""
    try:
        value = load_json_text(line, f"samples file {path}, line {number}")
    except json.JSONDecodeError as error:
        raise ValueError(f"samples file {path}, line {number}: not JSON ({error.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"samples file {path}, line {number}: expected an object")
    return value


def _checked(path: str | Path, number: int, value: dict[str, Any]) -> None:
    """Refuse a line that is not a :class:`SampleLine`: one sentence naming the file, the line and the field."""
    _, problem = validate(SampleLine, value)
    if problem is not None:
        message = problem[1]
        if message.startswith(f"field {problem[0]!r} "):
            message = message[len(f"field {problem[0]!r} ") :]
        hint = "; write it with clip-cycles eval --samples" if "missing" in message else ""
        raise _line_problem(path, number, problem[0], message + hint)


def _result_file_problem(path: str | Path, raw: bytes, first: str) -> str | None:
    """The sentence for a result file (``eval --output``, or its ``.detail.jsonl``) given where samples belong, or None.

    A samples file's first line is a flat object with a ``cycle_id`` and is passed at once; otherwise the
    file is parsed whole (bounded) and an object with ``metrics`` is a result, named as one.
    """
    head = None
    if first.count("{") + first.count("[") <= _FLAT_BRACKETS:  # a deep line is never parsed here (no recursion)
        try:
            head = json.loads(first)
        except ValueError:
            head = None
    if isinstance(head, dict) and "cycle_id" in head:
        return None
    try:
        record = head if head is not None else load_json_text(raw, f"file {path}")
    except ValueError:
        return None  # neither: the line-by-line reading below names the problem
    if not isinstance(record, dict) or "metrics" not in record:
        return None
    samples = record.get("samples")
    named = ""
    if isinstance(samples, dict) and isinstance(samples.get("path"), str):  # a detail line names its samples
        named = f" (this result's samples: {Path(path).parent / samples['path']})"
    return (
        f"{path} is a result file (clip-cycles eval --output: a task's metrics), not a per-cycle samples file; pass "
        f"the samples file that eval wrote with --samples{named}"
    )


def read_samples(path: str | Path, content: bytes | None = None) -> dict[str, dict[Key, dict[str, Any]]]:
    """Task -> ``(seed, cycle_id)`` -> sample, every line parsed with :class:`SampleLine`.

    A line that is not one (a credit of 5, a null seed, a list as delta, a missing field) is a
    ValueError of one sentence naming the file, the line and the field. ``content``: the file's
    bytes when the caller already read them (to check their sha256). The lines are parsed and
    validated in one pass when they are flat objects; any problem is then found line by line.
    """
    raw = content if content is not None else read_regular_file(path, MAX_SAMPLES_BYTES, "samples file")
    lines = [(n, line) for n, line in enumerate(raw.decode("utf-8").splitlines(), start=1) if line.strip()]
    if lines and (named := _result_file_problem(path, raw, lines[0][1])) is not None:
        raise ValueError(named)
    values: list[Any] | None = None
    if all(line.count("{") + line.count("[") <= _FLAT_BRACKETS for _, line in lines):
        try:  # one C-speed parse of every line; NaN and Infinity refused as load_json_text refuses them
            values = json.loads("[" + ",".join(line for _, line in lines) + "]", parse_constant=_refuse_constant)
        except ValueError:
            values = None
    if values is None or len(values) != len(lines) or not all(isinstance(v, dict) for v in values):
        values = [_line_value(path, number, line) for number, line in lines]
    for value in values:
        if "source" in value and "image_root" not in value:  # written before the line was declared
            del value["source"]
    try:
        _LINES.validate_python(values)
    except ValidationError as error:
        first = min((e["loc"][0] for e in error.errors() if e["loc"] and isinstance(e["loc"][0], int)), default=0)
        _checked(path, lines[first][0], values[first])
        raise  # not reached: the line that failed fails alone too
    out: dict[str, dict[Key, dict[str, Any]]] = {}
    for (number, _), value in zip(lines, values):
        sample = {**_OPTIONAL, **value}
        key = (sample["seed"], sample["cycle_id"])
        task = out.setdefault(sample["task"], {})
        if key in task:
            raise ValueError(f"samples file {path}, line {number}: task {sample['task']} seed {key[0]} cycle {key[1]} twice")
        task[key] = sample
    if not out:
        raise ValueError(f"samples file {path} holds no cycles; write it with clip-cycles eval --samples")
    return out


def recorded_cycle_acc(cycles: Mapping[Key, Mapping[str, Any]]) -> float:
    """CycleAcc as a result file records it: the mean over seeds of each seed's mean credit."""
    per_seed: dict[int, list[float]] = {}
    for (seed, _), sample in cycles.items():
        per_seed.setdefault(seed, []).append(float(sample["credit"]))
    return float(np.mean([np.mean(values) for _, values in sorted(per_seed.items())]))


def pairing_problem(cycles: Mapping[Key, Mapping[str, Any]], items_sha256: str | None, weights_sha256: str | None) -> str | None:
    """Why a task's samples do not belong to the result that names them (one sentence), or None.

    The lines must carry the result's ``items_sha256`` and ``weights_sha256``; lines written
    before they carried them are taken as they are only when the result records neither.
    """
    found_items = {s.get("items_sha256") for s in cycles.values()}
    found_weights = {s.get("weights_sha256") for s in cycles.values()}
    if items_sha256 is not None and found_items != {items_sha256}:
        shown = ", ".join(sorted(str(v)[:12] for v in found_items))
        return f"the samples are of item set {shown}, the result of {items_sha256[:12]}"
    if found_weights != {weights_sha256}:
        shown = ", ".join(sorted(str(v)[:12] if v else "none recorded" for v in found_weights))
        expected = weights_sha256[:12] if weights_sha256 else "none recorded"
        return f"the samples are of weights {shown}, the result of {expected}"
    return None
