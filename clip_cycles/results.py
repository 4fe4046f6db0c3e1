"""The vocabulary of result records: how they are cleaned, summarized, named and written.

Every result JSON of clip_cycles (experiment records, clip_benchmark records, audits,
build summaries) goes through :func:`write_json`: sorted keys, two-space indent, a
trailing newline, written atomically, so equal results give equal bytes and an
interrupted run never leaves half a file. :func:`clean` makes a record JSON-safe,
:func:`mean_sd` is the one mean and sample standard deviation over seeds, and
:func:`output_path` fills clip_benchmark's ``--output`` template.

Key names shared by every record: ``tie_tolerance`` (the absolute tie tolerance of
CycleAcc) and ``unavailable_reason`` (why a result is missing).

Result files of ``clip-cycles eval`` and the clip_benchmark plugin are written by
:func:`write_result`: the JSON itself holds clip_benchmark's record with *flat* metrics
(:func:`flat_metrics`: one named number per key, so ``clip_benchmark build`` and any CSV or
dataframe reader get one number per cell), and a sibling ``<name>.detail.jsonl`` (one line:
the same record with the nested metrics, per-seed reports, intervals and audits) keeps the
detail for clip_cycles' own readers (:func:`read_result`, ``clip-cycles report``). The
sibling does not end in ``.json``, so ``clip_benchmark build <folder>`` never reads it.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from clip_cycles.outputs import check_path_length, is_stream, write_output
from clip_cycles.regular_files import read_json_file
from clip_cycles.schemas.metric_values import check_metric_values

#: clip_benchmark's task name for cycle results (the ``task`` field and ``{task}`` in --output).
RESULT_TASK = "cycles"
#: clip_benchmark's default ``--output`` template.
DEFAULT_OUTPUT = "{dataset}_{pretrained}_{model}_{language}_{task}.json"


def write_json(record: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``record`` as JSON (sorted keys, indent 2, trailing newline) atomically; returns the path.

    The parent folder is created. The file appears complete or not at all (a temporary
    sibling is renamed into place), so a reader never sees a partial record.
    """
    path = Path(path)
    write_output(path, json_bytes(record, path), what="result file")
    return path


def json_bytes(record: Any, path: str | os.PathLike[str]) -> bytes:
    """The bytes :func:`write_json` writes for ``record`` (``path`` only names the file in an error)."""
    try:
        # allow_nan=False: standard JSON only, never ``Infinity``/``NaN`` that strict readers reject.
        text = json.dumps(record, indent=2, sort_keys=True, allow_nan=False) + "\n"
    except ValueError:
        where = non_finite_field(record)
        if where is None:
            raise
        raise ValueError(
            f"{path}: field {where[0]} is {where[1]!r}, which standard JSON cannot hold; nothing was written "
            "(pass the record through clip_cycles.results.clean, which writes null, or give a finite value)"
        ) from None
    return text.encode("utf-8")


def non_finite_field(value: Any, where: str = "") -> tuple[str, float] | None:
    """The first (dotted field, value) in ``value`` that is a NaN or an infinity, else None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (where or "<top level>", value)
    if isinstance(value, Mapping):
        items: Iterable[tuple[str, Any]] = ((str(k), v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
    elif isinstance(value, (list, tuple)):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for key, child in items:
        found = non_finite_field(child, f"{where}.{key}" if where and not key.startswith("[") else f"{where}{key}")
        if found is not None:
            return found
    return None


def clean(value: Any) -> Any:
    """A JSON-safe copy of ``value``: NaN and infinities -> None, numpy scalars and arrays -> Python.

    Mappings become dicts with string keys; tuples, lists and arrays become lists;
    anything else (str, None, Python int and bool) is returned as is.
    """
    # The plain JSON types first, by exact type: a result holds thousands of them, and isinstance on
    # typing.Mapping is slow (a tenth of a warm evaluation went here). Subclasses take the general path.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        return {str(k): clean(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [clean(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return clean(value.tolist())
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def mean_sd(values: Iterable[Any], *, skip_missing: bool = False, count: bool = False) -> dict[str, Any]:
    """Mean and sample standard deviation (ddof=1; 0.0 for a single value) of per-seed results, in float64.

    Parameters
    ----------
    values:
        Numbers, one per seed.
    skip_missing:
        False (default): every value must be a finite number and there must be at least one;
        otherwise ValueError naming the first bad index. True: None, NaN, infinities and
        non-numbers are left out, and no value left gives ``{"mean": None, "sd": None}``.
    count:
        Also return ``"n"``, the number of values used.

    Returns
    -------
    ``{"mean": float | None, "sd": float | None}`` (plus ``"n"`` with ``count``).
    """
    items = list(values)
    if skip_missing:
        kept = [float(v) for v in items if _is_number(v) and math.isfinite(v)]
    else:
        for i, v in enumerate(items):
            if not _is_number(v) or not math.isfinite(v):
                raise ValueError(
                    f"mean_sd: value {i} is {v!r}, not a finite number (pass skip_missing=True to leave missing values out)"
                )
        if not items:
            raise ValueError("mean_sd needs at least one value")
        kept = [float(v) for v in items]
    out: dict[str, Any]
    if not kept:
        out = {"mean": None, "sd": None}
    else:
        array = np.asarray(kept, dtype=np.float64)
        out = {"mean": float(array.mean()), "sd": float(array.std(ddof=1)) if array.shape[0] > 1 else 0.0}
    if count:
        out["n"] = len(kept)
    return out


#: The item-set identity of a scored result, top-level fields beside ``dataset`` and ``model`` (never metrics):
#: ``split`` (the split scored), ``items_sha256`` (sha256 of exactly what was scored, plus the split, the
#: source and the build thresholds: :func:`clip_cycles.experiments.item_sets.item_set_digest`), ``source``
#: (the structured identity of the world or raw root: kind, builder, world parameters, annotation digests) and
#: ``source_line`` (one human line naming it). ``clip_benchmark build`` turns each into a CSV column.
IDENTITY_FIELDS: tuple[str, ...] = ("split", "items_sha256", "source", "source_line")
#: Where the model's weights came from (:meth:`clip_cycles.encoding.encoder.ModelSpec.source`), top-level too.
MODEL_SOURCE_FIELDS: tuple[str, ...] = ("backend", "weights_sha256")
#: What :func:`items_sha256_of` gives for a record written before item sets were recorded (or by another tool).
ITEM_SET_NOT_RECORDED = "not recorded"
#: The split a result name leaves implicit: any other split enters the file name (:func:`output_path`).
DEFAULT_SPLIT = "test"


def benchmark_record(
    dataset: str,
    model: str,
    pretrained: str | None,
    metrics: dict[str, Any],
    task: str = RESULT_TASK,
    language: str = "en",
    identity: Mapping[str, Any] | None = None,
    model_source: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """clip_benchmark's result JSON: ``{dataset, model, pretrained, task, metrics, language}``.

    ``identity``: the item-set fields (:data:`IDENTITY_FIELDS`), added at the top level when given;
    ``model_source``: where the weights came from (:data:`MODEL_SOURCE_FIELDS`), likewise.
    Declared in :class:`clip_cycles.schemas.result.ResultRecord` (``clip-cycles schema result``).
    """
    record = {
        "dataset": dataset,
        "model": model,
        "pretrained": pretrained or "",
        "task": task,
        "metrics": metrics,
        "language": language,
    }
    if identity is not None:
        unknown = sorted(set(identity) - set(IDENTITY_FIELDS))
        if unknown:
            raise ValueError(f"result of {dataset}: identity fields {unknown} are not among {list(IDENTITY_FIELDS)}")
        record.update({key: identity[key] for key in IDENTITY_FIELDS if key in identity})
    if model_source is not None:
        unknown = sorted(set(model_source) - set(MODEL_SOURCE_FIELDS))
        if unknown:
            raise ValueError(f"result of {dataset}: model source fields {unknown} are not among {list(MODEL_SOURCE_FIELDS)}")
        record.update({key: model_source[key] for key in MODEL_SOURCE_FIELDS if key in model_source})
    return record


#: File endings of weights files: a name ending so is a path, shown by its file name only.
WEIGHTS_ENDINGS = (".safetensors", ".pt", ".pth", ".bin", ".ckpt", ".npz")


def shown_name(name: Any, weights: bool = False) -> str:
    """A model or weights name as pages, reports and CSVs show it: never a machine path.

    A name is a path when it is absolute, starts with ``~``, ``./`` or ``../``, ends like a
    weights file, follows ``local-dir:`` (kept as a prefix), or (``weights``: local weights were
    hashed) holds a separator; it is then shown by its last part. Hub names (``org/repo``,
    ``hf-hub:``) and tags are kept as they are.
    """
    name, prefix = str(name or ""), ""
    if name.startswith("local-dir:"):
        prefix, name, weights = "local-dir:", name[len("local-dir:") :], True
    elif name.startswith("hf-hub:"):
        return name
    posix = name.replace("\\", "/")
    path_like = posix.startswith(("/", "~", "./", "../")) or posix.lower().endswith(WEIGHTS_ENDINGS)
    path_like = path_like or (len(posix) > 2 and posix[1] == ":" and posix[2] == "/")  # a drive letter
    if path_like or (weights and "/" in posix):
        name = posix.rstrip("/").rsplit("/", 1)[-1] or name
    return prefix + name


def shown_weights(pretrained: Any, weights_sha256: Any = None) -> str:
    """The weights a record names, as shown: a tag as is; a file by its name and the first 12 hex of its digest."""
    digest = weights_sha256[:12] if isinstance(weights_sha256, str) and weights_sha256 else None
    name = shown_name(pretrained, weights=digest is not None)
    return f"{name}, weights {digest}" if name and digest else name


def items_sha256_of(record: Mapping[str, Any]) -> str:
    """The record's ``items_sha256``, or :data:`ITEM_SET_NOT_RECORDED` when it has none (an older result)."""
    value = record.get("items_sha256")
    return value if isinstance(value, str) and value else ITEM_SET_NOT_RECORDED


def same_item_set(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two result records scored the same items: both record ``items_sha256`` and they are equal.

    A record without one is never the same as anything (not even another such record): nothing says what it scored.
    """
    digest_a, digest_b = items_sha256_of(a), items_sha256_of(b)
    return digest_a != ITEM_SET_NOT_RECORDED and digest_a == digest_b


#: Suffix of a result file's nested sibling (:func:`detail_path`), chosen so that ``*.json`` globs skip it.
DETAIL_SUFFIX = ".detail.jsonl"


#: The keys an interval repeats (a bootstrap's level, resamples and seed; a two-way interval's level and
#: degrees of freedom, :mod:`clip_cycles.algebra.crossed`): flattened once per record.
INTERVAL_SETTINGS: tuple[str, ...] = ("level", "n_resamples", "seed", "df")


def _is_interval(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("method"), str) and {"low", "high"} <= set(value)


def _flatten_into(out: dict[str, Any], prefix: str, value: Any) -> None:
    """Add the numeric leaves of ``value`` to ``out`` under ``prefix``-joined names (see :func:`flat_metrics`)."""
    if _is_interval(value):
        out[f"{prefix}low"], out[f"{prefix}high"] = clean(value["low"]), clean(value["high"])
        return
    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            item = value[key]
            if str(key) == "per_seed" and isinstance(item, Mapping):
                for seed in sorted(item, key=lambda s: (len(str(s)), str(s))):
                    _flatten_into(out, f"{prefix}seed{seed}_", item[seed])
            else:
                _flatten_into(out, f"{prefix}{key}_", item)
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _flatten_into(out, f"{prefix}{i}_", item)
        return
    name = prefix[:-1]
    if isinstance(value, (bool, np.bool_)):
        out[name] = int(value)
    elif _is_number(value):
        out[name] = clean(value)
    # Text leaves (an interval's method, an audit's failure messages) and nested None stay in the detail only.


def flat_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``metrics`` as one flat mapping of named numbers, for clip_benchmark's CSV and any table reader.

    Nested mappings join their keys with ``_`` (``additive_audit`` -> ``additive_audit_passed``);
    a ``per_seed`` mapping gives ``seed<k>_<name>`` (``seed0_cycle_acc``,
    ``additive_audit_seed0_passed``); lists give ``<name>_<i>``; a bootstrap interval gives
    ``<name>_low`` and ``<name>_high`` (``cycle_acc_ci_low``), its level, resamples and seed
    once as ``ci_level``, ``ci_n_resamples``, ``ci_seed``; booleans become 0 / 1. Text and
    nested None are left out, except the top-level ``unavailable_reason`` (why a result is
    missing); a top-level None stays (an empty cell). The nested record keeps everything.
    """
    out: dict[str, Any] = {}
    for key in sorted(metrics, key=str):
        value = metrics[key]
        if value is None:
            out[str(key)] = None
        else:
            _flatten_into(out, "", {key: value})
    intervals = [metrics[k] for k in sorted(metrics, key=str) if _is_interval(metrics[k])]
    if intervals:
        headline = metrics.get("cycle_acc_ci") if _is_interval(metrics.get("cycle_acc_ci")) else intervals[0]
        for key in INTERVAL_SETTINGS:
            if key in headline:
                out[f"ci_{key}"] = clean(headline[key])
    if isinstance(metrics.get("unavailable_reason"), str):
        out["unavailable_reason"] = metrics["unavailable_reason"]
    return out


def detail_path(path: str | os.PathLike[str]) -> Path:
    """The nested sibling of result file ``path``: ``x.json`` -> ``x.detail.jsonl``."""
    path = Path(path)
    stem = path.name[: -len(".json")] if path.name.endswith(".json") else path.name
    return path.with_name(stem + DETAIL_SUFFIX)


def write_result(record: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a clip_benchmark record: flat metrics at ``path``, the nested record in :func:`detail_path`; returns ``path``.

    The detail is written first, so a result file never points at a missing or older detail. A
    ``path`` that is a stream (``/dev/null``, ``/dev/stdout``, a FIFO) gets the flat record only:
    no detail file is created beside a device.
    """
    files = result_files(record, path)
    for name, data in files.items():  # the detail first
        write_output(name, data, what="result file")
    return Path(path)


def result_files(record: Mapping[str, Any], path: str | os.PathLike[str]) -> dict[Path, bytes]:
    """What :func:`write_result` writes, detail first: ``{detail_path(path): nested line, path: flat JSON}``.

    ``clip_cycles.outputs.write_outputs`` writes several results' files all or none.
    """
    record = clean(record)
    path = Path(path)
    record = bind_samples(record, path)
    files: dict[Path, bytes] = {}
    if not is_stream(path):
        files[detail_path(path)] = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
    # clip_benchmark's `build` makes one CSV column per top-level key: the flat file holds scalars only.
    # The objects (the structured source, the family's facts, the samples file) are in the detail.
    flat = {k: v for k, v in record.items() if not isinstance(v, (Mapping, list)) or k == "metrics"}
    files[path] = json_bytes({**flat, "metrics": flat_metrics(record["metrics"])}, path)
    return files


def bind_samples(record: Mapping[str, Any], path: str | os.PathLike[str]) -> dict[str, Any]:
    """``record`` with its ``samples.path`` relative to the folder of ``path`` (the file the record is written to).

    A result names its samples file (``{"path", "sha256"}``) relative to itself, so a result folder
    moved or copied with its samples still names them, and no machine path is written.
    """
    samples = record.get("samples")
    if not isinstance(samples, Mapping) or not isinstance(samples.get("path"), str):
        return dict(record)
    target = Path(samples["path"])
    base = Path(path).parent if not is_stream(Path(path)) else Path.cwd()
    relative = Path(os.path.relpath(target.resolve() if not target.is_absolute() else target, base.resolve()))
    return {**record, "samples": {**samples, "path": relative.as_posix()}}


def read_result(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A clip_benchmark result record, with nested metrics when its :func:`detail_path` sibling matches it.

    The sibling is used only when it names the same dataset, model, pretrained, task and
    language and its flat form equals the file's metrics (so a result rewritten by other
    tools is read as it stands). Without one, the record is returned as written: flat (from
    another writer) or nested (an older clip_cycles). Either way the item-set fields
    (:data:`IDENTITY_FIELDS`) are top-level keys when the result recorded them; a record without
    them reads as :data:`ITEM_SET_NOT_RECORDED` through :func:`items_sha256_of`. ValueError names
    the file and field.
    """
    path = Path(path)
    record = _read_record(path)
    detail = detail_path(path)
    if detail.is_file():
        try:
            nested = read_json_file(detail, MAX_RESULT_BYTES, "result detail file")
        except ValueError as error:
            raise UnreadableDetailError(f"{error}; delete it to read {path} as it stands") from None
        same = isinstance(nested, dict) and isinstance(nested.get("metrics"), dict)
        keys = ("dataset", "model", "pretrained", "task", "language", *IDENTITY_FIELDS)
        # The objects stay out of the flat file (result_files): compared where the flat file has them.
        same = same and all(nested.get(k) == record.get(k) for k in keys if k in record or not isinstance(nested.get(k), dict))
        if same and flat_metrics(nested["metrics"]) == record["metrics"]:
            check_metric_values(nested["metrics"], f"result detail file {detail}")
            return nested
    return record


class UnreadableDetailError(ValueError):
    """A result's :func:`detail_path` sibling cannot be read (the flat record itself was valid)."""


#: The largest result file :func:`read_result` reads (a record is a few hundred kB at most).
MAX_RESULT_BYTES = 64 * 1024 * 1024


def _read_record(path: Path) -> dict[str, Any]:
    record = read_json_file(path, MAX_RESULT_BYTES, "result file")
    if not isinstance(record, dict) or not isinstance(record.get("metrics"), dict):
        raise ValueError(f"result file {path}: field 'metrics' is missing; expected clip_benchmark's record")
    check_metric_values(record["metrics"], f"result file {path}")
    return record


#: Joins a non-test split to the dataset in a result's name: ``cycles/shapes_x`` scored on validation is
#: ``cycles_shapes_x@validation`` in ``{dataset}`` (no task or family name holds ``@``, so no name collides).
SPLIT_MARK = "@"


def split_suffix(split: str | None) -> str:
    """``""`` for the test split (or None), else ``@<split>``: what a non-test split adds to a result's name."""
    return "" if split in (None, DEFAULT_SPLIT) else f"{SPLIT_MARK}{split}"


def output_path(
    template: str,
    dataset: str,
    model: str,
    pretrained: str | None,
    language: str = "en",
    task: str = RESULT_TASK,
    split: str | None = DEFAULT_SPLIT,
) -> str:
    """Fill clip_benchmark's ``--output`` template fields the way its ``run`` does, the split included.

    A split other than ``test`` is part of the name, so a validation run never replaces a test
    run's file whatever the template: ``{dataset}`` becomes ``<dataset>@<split>``, and a template
    without ``{dataset}`` gets ``@<split>`` before the file's extension (``out.json`` ->
    ``out@validation.json``). A field the template names that is not one of :data:`OUTPUT_FIELDS`,
    a positional ``{}`` or an unbalanced brace is a ValueError naming the template and the fields.
    """
    pretrained = pretrained or ""
    is_file = os.path.isfile(pretrained)
    suffix = split_suffix(split)
    fields = {
        "model": model,
        "pretrained": os.path.basename(pretrained) if is_file else pretrained,
        "pretrained_full_path": pretrained.replace("/", "_") if is_file else pretrained,
        "task": task,
        "dataset": dataset.replace("/", "_") + suffix,
        "language": language,
    }
    known = " ".join("{" + name + "}" for name in OUTPUT_FIELDS)
    try:
        path = template.format(**fields)
    except KeyError as error:
        raise ValueError(f"--output {template!r}: unknown field {{{error.args[0]}}}; the fields are {known}") from None
    except (IndexError, ValueError) as error:
        raise ValueError(f"--output {template!r} is not a valid template ({error}); the fields are {known}") from None
    if suffix and suffix not in path:
        path = _before_extension(path, suffix)
    return path


def _before_extension(path: str, suffix: str) -> str:
    """``path`` with ``suffix`` inserted before the file name's last extension (or at its end)."""
    head, name = os.path.split(path)
    stem, dot, extension = name.rpartition(".")
    named = f"{stem}{suffix}.{extension}" if dot and stem else f"{name}{suffix}"
    return os.path.join(head, named) if head else named


#: The fields of an ``--output`` template (clip_benchmark's).
OUTPUT_FIELDS: tuple[str, ...] = ("dataset", "model", "pretrained", "pretrained_full_path", "task", "language")


def check_output_file(path: str | os.PathLike[str], flag: str = "--output") -> Path:
    """Refuse, before any work, a result file that cannot be written: an existing folder, a path under a file,
    or a path too long for the system."""
    path = check_path_length(path, flag)
    if path.is_dir():
        raise ValueError(f"{flag} {path} is an existing folder, not a file; name a file (e.g. {path / 'result.json'})")
    _check_parents(path, flag)
    return path


def check_output_folder(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """Refuse, before any work, an output folder that cannot be one: an existing file, a path under a file,
    or a path too long for the system."""
    path = check_path_length(path, flag)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{flag} {path} is an existing file, not a folder; choose a folder (new or existing)")
    _check_parents(path, flag)
    return path


def _check_parents(path: Path, flag: str) -> None:
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{flag} {path}: {parent} is a file, so nothing can be written under it; choose another path")
            return


def check_output_plan(paths: Mapping[str, str], template: str) -> None:
    """Refuse an ``--output`` template that sends several results to one file, or any unwritable file.

    ``paths`` maps each result (a task name) to the file the template gives it.
    """
    owners: dict[str, list[str]] = {}
    for name, path in paths.items():
        owners.setdefault(os.path.normpath(os.path.abspath(path)), []).append(name)
    for path, names in owners.items():
        if len(names) > 1:
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            raise ValueError(
                f"--output {template!r} writes {len(names)} results to the same file {path} ({shown}); "
                "add a field that differs between them, e.g. {dataset}, or print them with --output -"
            )
    for path in paths.values():
        check_output_file(path)
