"""What the results page shows, read from any mix of result folders (``clip-cycles page``).

Recognised JSON files (anything else is counted and named as skipped, never dropped silently):

- experiment records of ``clip-cycles demo`` / ``probe`` / ``transfer`` / ``oe``
  (``{"experiment": "zero_shot" | "probe" | "transfer" | "oe" | "attributes", ...}``);
- clip_benchmark result JSONs ``{dataset, model, pretrained, task, metrics, language}`` as
  ``clip-cycles eval --output`` and ``clip_benchmark eval`` write them: ``cycles/<family>``
  (CycleAcc read by name, ``metrics["cycle_acc"]``, never ``acc``), ``audit/<benchmark>``
  (``audit-benchmark``'s ``audit_<name>.json``) and ``attributes/<task>``;
- ``clip-cycles splits --out``'s ``results.json`` (``grid``);
- a built folder's ``build_info.json`` (counts and exclusions per family).

Each result's item set (:mod:`clip_cycles.experiments.item_sets`: ``split``, ``items_sha256``,
``source``) decides its leaderboard row: results of a family share a row only when their
``items_sha256`` match; a family scored on several item sets gets one row per item set
(``<family>@<12 hex>``) and a note saying why (:attr:`PageData.notes`).

Files are read only when they are regular files (no symlinks followed) under a size bound.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from clip_cycles.data.folder.writer import read_build_info
from clip_cycles.encoding.backends import precomputed_backend_name
from clip_cycles.experiments.item_sets import FIELD_NOT_RECORDED, NOT_RECORDED, ItemSet, item_set_notes, item_set_of
from clip_cycles.regular_files import load_json_text
from clip_cycles.results import UnreadableDetailError, read_result, shown_name
from clip_cycles.schemas.build_info import newer_format_problem
from clip_cycles.schemas.declared import validate
from clip_cycles.schemas.result import FamilyFacts, SamplesReference

#: Largest result JSON read (bytes); a bigger file is skipped with its size named.
MAX_JSON_BYTES = 64 * 1024 * 1024
#: How deep a result folder is searched for JSON files.
MAX_DEPTH = 4
#: Files that are not results although they end in .json (the page's own manifest).
IGNORED_NAMES = ("page_manifest.json",)
CHANCE = 0.5
#: The model column of a benchmark audit run without a model (its rows are the benchmark's, not a model's).
NO_MODEL = "no model (design and length rules only)"
#: A family or benchmark name that may become a file name of the site.
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")


@dataclass(frozen=True)
class FamilyInfo:
    """One cycle family of the leaderboard: where it comes from and what it tests."""

    key: str  # the task name without ``cycles/`` (``shapes_strict_size``)
    source: str  # the raw source of its task (coco, gqa, shapes)
    builder: str  # the family builder that registers it (coco, gqa)
    family: str  # the registered family name (``strict_size``)
    predicate: str
    provenance: str
    order: int  # coarse -> strict: registration order of the builders' families

    @property
    def paper(self) -> bool:
        return self.provenance.startswith("paper")

    @property
    def recorded(self) -> bool:
        """Whether the result recorded its family's facts (older results did not: shown as "not recorded")."""
        return self.order >= 0


@dataclass
class Cell:
    """One leaderboard cell: a model's CycleAcc on a family (or a benchmark's exact cycles)."""

    model: str
    row: str
    cycle_acc: float | None
    sd: float | None = None
    ci: dict[str, Any] | None = None
    ci_note: str = ""
    audit: str = "not run"  # passed | failed | unavailable | not run
    audit_note: str = ""
    n_cycles: int | None = None
    unavailable_reason: str | None = None
    source_file: str = ""
    seeds: list[int] = field(default_factory=list)
    family: str = ""  # the family (or ``audit/<benchmark>``) key; ``row`` adds the item set when there are several
    item_set: ItemSet = field(default_factory=ItemSet)
    #: The samples file the record names (absolute path, sha256), or None (none written, or not recorded).
    samples: tuple[str, str] | None = None
    #: The record's ``weights_sha256`` (the samples' lines must carry the same).
    weights_sha256: str | None = None


#: Between a family key and an item set's ident in a cell's key while results are read (:func:`assign_rows`).
_PENDING = "\x1f"


@dataclass
class BenchmarkRow:
    """One subset (or the ``all`` row) of an ``audit-benchmark`` result."""

    benchmark: str
    subset: str
    model: str
    model_acc: float | None
    best_blind: str | None
    best_blind_acc: float | None
    cycle_acc: float | None
    n_cycles: int | None
    n_comparisons: int | None
    source_file: str
    #: The paired verdict (``best_blind_vs_model``) where the record has one.
    blind_verdict: str | None = None
    #: Exact ceilings of order-blind and length-only text scorers (``ceilings``), where recorded.
    bag_of_words_ceiling: float | None = None
    length_ceiling: float | None = None
    #: The best blind floor's 95 % interval (``best_blind_acc_ci``: low, high), where recorded.
    best_blind_ci: tuple[float, float] | None = None

    @property
    def blind_beats_model(self) -> bool:
        if self.blind_verdict is not None:
            return self.blind_verdict == "blind beats model"
        return self.model_acc is not None and self.best_blind_acc is not None and self.best_blind_acc >= self.model_acc


@dataclass
class PageData:
    """Everything the page shows, keyed for rendering."""

    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)  # (row, model) -> cell
    rows: dict[str, tuple[str, ItemSet]] = field(default_factory=dict)  # row -> (family key, item set)
    notes: list[str] = field(default_factory=list)  # why results of one family are shown apart
    families: dict[str, FamilyInfo] = field(default_factory=dict)
    benchmarks: list[BenchmarkRow] = field(default_factory=list)
    experiments: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # model -> name -> record
    attributes: list[dict[str, Any]] = field(default_factory=list)  # {model, protocol, strategies, source_file}
    builds: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (folder, build_info)
    skipped: dict[str, str] = field(default_factory=dict)  # file -> why it is not shown
    inputs: list[str] = field(default_factory=list)

    @property
    def models(self) -> list[str]:
        return sorted({c.model for c in self.cells.values()})

    def family_of(self, row: str) -> str:
        """The family (or ``audit/<benchmark>``) key of leaderboard row ``row``."""
        return self.rows[row][0] if row in self.rows else row

    def item_set(self, row: str) -> ItemSet:
        """The item set every cell of leaderboard row ``row`` scored."""
        return self.rows[row][1] if row in self.rows else ItemSet()

    def family_rows(self) -> list[str]:
        """Family rows coarse -> strict (builder order, then registration order), then anything else by name.

        A family has one row per item set its results scored (:func:`assign_rows`).
        """
        rows = {row for row, _ in self.cells if not self.family_of(row).startswith("audit/")}

        def order(row: str) -> tuple[int, str]:
            key = self.family_of(row)
            info = self.families.get(key)
            return (info.order if info is not None and info.recorded else 10**6, row)

        return sorted(rows, key=order)

    def family_keys(self) -> list[str]:
        """The families of :meth:`family_rows`, each once, in that order."""
        return list(dict.fromkeys(self.family_of(row) for row in self.family_rows()))

    def shown_path(self, path: str | os.PathLike[str]) -> str:
        """``path`` as the page shows it: relative to the input it was found under (named by its last part)."""
        text = str(path)
        for given in sorted(self.inputs, key=len, reverse=True):
            root = Path(given)
            try:
                relative = Path(text).relative_to(root)
            except ValueError:
                continue
            base = root.name or "."
            return base if str(relative) == "." else f"{base}/{relative.as_posix()}"
        return Path(text).name if Path(text).is_absolute() else text

    def benchmark_rows(self) -> list[str]:
        return sorted({row for row, _ in self.cells if self.family_of(row).startswith("audit/")})


def model_name(model: Any, pretrained: Any, backend: Any = None, weights: Any = None) -> str:
    """One display name per model, from the record: its backend, model and weights, never a machine path.

    A pretrained tag: ``model (tag)``; local weights: ``model (file name, weights <12 hex>)``, so two
    different files under one path are two models and one file under two paths is one; "random init"
    only when nothing names any weights (an open_clip model without a tag).
    """
    shown = shown_name(str(model))
    digest = weights[:12] if isinstance(weights, str) and weights else None
    if pretrained and digest is not None:
        return f"{shown} ({shown_name(str(pretrained), weights=True)}, weights {digest})"
    if pretrained:
        return f"{shown} ({shown_name(str(pretrained))})"
    if digest is not None:
        return f"{shown} (weights {digest})"
    if precomputed_backend_name(backend):
        return f"{shown} (precomputed features)"
    if isinstance(backend, str) and backend and backend != "open_clip":
        return f"{shown} ({backend} weights)"
    return f"{shown} (random init)"


def _record_name(record: dict[str, Any]) -> str:
    """:func:`model_name` of a record (its ``backend`` and ``weights_sha256`` where it carries them)."""
    weights = record.get("weights_sha256") or record.get("weights_digest")
    return model_name(record.get("model"), record.get("pretrained"), record.get("backend"), weights)


def family_info(key: str, record: Any) -> FamilyInfo:
    """Family ``key`` as the result recorded it (its ``family`` object); "not recorded" where it has none.

    Never today's registry: an old result is shown with what it recorded, or with "not recorded".
    """
    facts, problem = validate(FamilyFacts, record) if isinstance(record, dict) else (None, ("family", ""))
    if problem is not None or facts is None:
        return FamilyInfo(key, FIELD_NOT_RECORDED, FIELD_NOT_RECORDED, key, FIELD_NOT_RECORDED, FIELD_NOT_RECORDED, -1)
    assert isinstance(facts, FamilyFacts)
    return FamilyInfo(key, facts.source, facts.builder, facts.family, facts.predicate, facts.provenance, facts.order)


def samples_of(record: dict[str, Any], path: Path) -> tuple[str, str] | None:
    """The samples file a result names (``samples``: path relative to the record) as (absolute path, sha256)."""
    reference, problem = validate(SamplesReference, record.get("samples"))
    if problem is not None or reference is None:
        return None
    assert isinstance(reference, SamplesReference)
    return str(path.parent.resolve() / reference.path), reference.sha256


# --------------------------------------------------------------------------- discovery


def _json_files(root: Path, data: PageData) -> Iterable[Path]:
    """Regular JSON files under ``root`` (a file or folder), sorted, depth-bounded, symlinks skipped and named."""
    if root.is_symlink():
        data.skipped[str(root)] = "a symbolic link: not followed"
        return
    if root.is_file():
        yield root
        return
    if not root.is_dir():
        raise FileNotFoundError(f"results input {root} does not exist (give result folders or JSON files)")
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).relative_to(root).parts)
        if depth >= MAX_DEPTH:
            if dirnames:
                data.skipped[dirpath] = f"deeper than {MAX_DEPTH} folders below {root}: not searched"
            dirnames[:] = []
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(".json") or name in IGNORED_NAMES or name.startswith("."):
                continue
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                data.skipped[str(path)] = "not a regular file: not read"
                continue
            yield path


def _read(path: Path, data: PageData) -> Any:
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        data.skipped[str(path)] = f"{size} bytes, over the {MAX_JSON_BYTES}-byte bound for a result JSON"
        return None
    try:
        # Bounded (nesting, integer digits, NaN): a hostile file is a sentence and exit 2, never a traceback.
        value = load_json_text(path.read_bytes(), f"result file {path}")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        data.skipped[str(path)] = f"not valid JSON ({error})"
        return None
    if isinstance(value, dict) and isinstance(value.get("metrics"), dict):
        # A clip_benchmark record: read_result checks every metric value (a ValueError naming the file and
        # field, so the page never renders a value no run could produce) and joins the nested detail.
        try:
            return read_result(path)
        except UnreadableDetailError:
            pass  # an unreadable or foreign detail file: the flat record as it stands (its values were checked)
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _audit_verdict(audit: Any) -> tuple[str, str]:
    """The additive audit's verdict of a cycle record (passed / failed / unavailable / not run) and a note."""
    if audit is None:
        return "not run", "the record has no additive_audit"
    passed = audit.get("passed") if isinstance(audit, dict) else audit
    if passed is True:
        return "passed", "shortcut probes held at exactly 0.5"
    if passed is False:
        return "failed", "a shortcut probe moved CycleAcc off 0.5"
    reason = audit.get("unavailable_reason") if isinstance(audit, dict) else None
    return "unavailable", str(reason or "no verdict")


def _ci(metrics: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    ci = metrics.get("cycle_acc_ci")
    if isinstance(ci, dict) and _number(ci.get("low")) is not None and _number(ci.get("high")) is not None:
        return ci, ""
    low, high = _number(metrics.get("cycle_acc_ci_low")), _number(metrics.get("cycle_acc_ci_high"))
    if low is not None and high is not None:  # a flat record without its detail file (results.flat_metrics)
        flat = {"low": low, "high": high, "computed_by": "from the flat record (cycle_acc_ci_low / _high)"}
        for name in ("level", "n_resamples", "seed"):
            if metrics.get(f"ci_{name}") is not None:
                flat[name] = metrics[f"ci_{name}"]
        return flat, ""
    return None, "the record has no cycle_acc_ci"


def _pending_row(key: str, item: ItemSet) -> str:
    return f"{key}{_PENDING}{item.ident}"


def add_cycle_metrics(
    data: PageData,
    key: str,
    model: str,
    metrics: dict[str, Any],
    source_file: str,
    item: ItemSet | None = None,
    facts: Any = None,
    samples: tuple[str, str] | None = None,
    weights: str | None = None,
) -> None:
    """One leaderboard cell from a zero-shot ``metrics`` mapping scored on ``item``.

    ``facts``: the record's ``family`` object; ``samples``: the samples file it names; ``weights``:
    its ``weights_sha256``. A second record of the same family, model and item set is skipped and named.
    """
    item = item or ItemSet()
    if not SAFE_NAME.fullmatch(key):
        # The name becomes a file name of the site: never a path, never hidden.
        data.skipped[source_file] = f"family name {key!r} is not a plain name (letters, digits, '_', '-', '.')"
        return
    row = _pending_row(key, item)
    if (row, model) in data.cells:
        data.skipped[source_file] = f"{key} of {model} on this item set is already read from {data.cells[row, model].source_file}"
        return
    info = family_info(key, facts)
    if key not in data.families or (info.recorded and not data.families[key].recorded):
        data.families[key] = info
    if metrics.get("available") is False or _number(metrics.get("cycle_acc")) is None:
        reason = str(metrics.get("unavailable_reason") or "no cycle_acc in the record")
        data.cells[row, model] = Cell(
            model, row, None, unavailable_reason=reason, source_file=source_file, family=key, item_set=item
        )
        return
    verdict, note = _audit_verdict(metrics.get("additive_audit"))
    ci, ci_note = _ci(metrics)
    seeds = [int(s) for s in metrics.get("seeds", []) if isinstance(s, int)]
    data.cells[row, model] = Cell(
        model,
        row,
        float(metrics["cycle_acc"]),
        sd=_number(metrics.get("cycle_acc_sd")),
        ci=ci,
        ci_note=ci_note,
        audit=verdict,
        audit_note=note,
        n_cycles=metrics.get("n_cycles") if isinstance(metrics.get("n_cycles"), int) else None,
        source_file=source_file,
        seeds=seeds,
        family=key,
        item_set=item,
        samples=samples,
        weights_sha256=weights,
    )


def _benchmark_row(
    benchmark: str, subset: str, model: str, values: dict[str, Any], cycles: dict[str, Any], source_file: str
) -> BenchmarkRow:
    """One row of the benchmark audit table: accuracies from ``values``, the exact cycles' figures from ``cycles``."""
    return BenchmarkRow(
        benchmark,
        subset,
        model,
        _number(values.get("model_acc")),
        values.get("best_blind"),
        _number(values.get("best_blind_acc")),
        _number(cycles.get("cycle_acc")),
        cycles.get("n_cycles"),
        values.get("n_comparisons"),
        source_file,
        _paired_verdict(values),
        _ceiling(values, "bag_of_words_ceiling"),
        _ceiling(values, "length_ceiling"),
        _interval(values.get("best_blind_acc_ci")),
    )


def _interval(record: Any) -> tuple[float, float] | None:
    """``(low, high)`` of a recorded interval, else None (records written before intervals, or malformed)."""
    if not isinstance(record, dict):
        return None
    low, high = _number(record.get("low")), _number(record.get("high"))
    return (low, high) if low is not None and high is not None else None


def _ceiling(values: dict[str, Any], name: str) -> float | None:
    """Ceiling ``name`` of a subset's (or the whole benchmark's) ``ceilings`` record, else None."""
    ceilings = values.get("ceilings")
    return _number(ceilings.get(name)) if isinstance(ceilings, dict) else None


def _paired_verdict(values: dict[str, Any]) -> str | None:
    """The verdict of the record's paired blind-vs-model comparison (adjusted over subsets where recorded), or None."""
    paired = values.get("best_blind_vs_model")
    if not isinstance(paired, dict):
        return None
    verdict = paired.get("adjusted_verdict", paired.get("verdict"))
    return verdict if isinstance(verdict, str) else None


def add_benchmark_audit(
    data: PageData, benchmark: str, model: str, metrics: dict[str, Any], source_file: str, item: ItemSet | None = None
) -> None:
    """Rows of the benchmark audit table (each subset and ``all``) and the benchmark's leaderboard cell.

    An audit run without a model (``model`` empty: the design and length rules only) gives benchmark
    rows only, named as such, never a model row of the leaderboard.
    """
    subsets = metrics.get("subsets")
    if not isinstance(subsets, dict):
        data.skipped[source_file] = "an audit record without 'subsets'"
        return
    for name in sorted(subsets):
        sub = subsets[name] if isinstance(subsets[name], dict) else {}
        cycles = sub.get("cycles") if isinstance(sub.get("cycles"), dict) else {}
        data.benchmarks.append(_benchmark_row(benchmark, name, model or NO_MODEL, sub, cycles, source_file))
    data.benchmarks.append(_benchmark_row(benchmark, "all", model or NO_MODEL, metrics, metrics, source_file))
    if not model:
        return
    if not SAFE_NAME.fullmatch(benchmark):
        data.skipped[source_file] = f"benchmark name {benchmark!r} is not a plain name (letters, digits, '_', '-', '.')"
        return
    item = item or ItemSet()
    key = f"audit/{benchmark}"
    row = _pending_row(key, item)
    if (row, model) in data.cells:
        data.skipped[source_file] = f"{key} of {model} on this item set is already read from {data.cells[row, model].source_file}"
        return
    cycle_acc = _number(metrics.get("cycle_acc"))
    n_cycles = metrics.get("n_cycles") if isinstance(metrics.get("n_cycles"), int) else None
    model_acc, blind = _number(metrics.get("model_acc")), _number(metrics.get("best_blind_acc"))
    # A blind score beats the model only when the paired interval says so; records without one keep the old reading.
    verdict = _paired_verdict(metrics) or (
        "blind beats model" if model_acc is not None and blind is not None and blind >= model_acc else "model ahead"
    )
    ci, ci_note = _ci(metrics)
    data.cells[row, model] = Cell(
        model,
        row,
        cycle_acc,
        ci=ci,
        ci_note=ci_note,
        audit=verdict if model_acc is not None else "not run",
        audit_note=f"model accuracy {model_acc}, best blind {metrics.get('best_blind')} {blind}",
        n_cycles=n_cycles,
        unavailable_reason=None if cycle_acc is not None else "no exact cycles found in the benchmark",
        source_file=source_file,
        family=key,
        item_set=item,
    )


def _attribute_protocol(record: dict[str, Any]) -> str:
    parts = []
    if "world" in record:
        world = record["world"]
        parts.append(
            f"rendered shape-concept world ({world.get('concepts')} concepts, {world.get('images_per_concept')} images each)"
        )
    if "split_embedding" in record:
        parts.append(f"split embedding: {record['split_embedding']}")
    if "fold_assignment" in record:
        parts.append(f"fold assignment: {record['fold_assignment']}")
    if "seeds" in record:
        parts.append(f"seeds {record['seeds']}")
    return "; ".join(parts) or "not recorded"


def _split_dataset(dataset: str) -> tuple[str, str]:
    """``cycles/x`` -> ("cycles", "x"); a file-name form ``cycles_x`` (no slash) is read the same way."""
    if "/" in dataset:
        namespace, _, name = dataset.partition("/")
        return namespace, name
    for namespace in ("cycles", "audit", "attributes"):
        if dataset.startswith(namespace + "_"):
            return namespace, dataset[len(namespace) + 1 :]
    return "", dataset


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _item_set(data: PageData, where: str, record: dict[str, Any], fallback: dict[str, Any]) -> ItemSet | None:
    """The item set ``record`` names (missing fields from ``fallback``); None, with the file skipped and named, if malformed."""
    try:
        return item_set_of(record, fallback)
    except ValueError as error:
        data.skipped[where] = f"{error}: not shown"
        return None


def assign_rows(data: PageData) -> None:
    """Give each cell its leaderboard row: the family key, or ``<family>@<12 hex>`` when the family has several item sets.

    Adds :attr:`PageData.notes` saying why a family's results are shown apart (or not known to be comparable).
    """
    by_key: dict[str, dict[str, ItemSet]] = {}
    for cell in data.cells.values():
        by_key.setdefault(cell.family, {})[cell.item_set.ident] = cell.item_set
    rows: dict[tuple[str, str], str] = {}
    data.rows = {}
    unrecorded = []
    for key in sorted(by_key):
        items = sorted(by_key[key].values(), key=lambda i: (not i.recorded, i.ident))
        for item in items:
            row = key if len(items) == 1 else f"{key}@{item.short}"
            rows[key, item.ident] = row
            data.rows[row] = (key, item)
        if len(items) == 1 and not items[0].recorded:
            unrecorded.append(key)  # one note for all of them, below
        else:
            data.notes += item_set_notes(key, items)
    if unrecorded:
        data.notes.append(
            f"{NOT_RECORDED} for {', '.join(unrecorded)} (no items_sha256: results written before item sets were "
            "recorded): the numbers in each of these rows are not known to be of the same items"
        )
    cells = {}
    for (_, model), cell in data.cells.items():
        cell.row = rows[cell.family, cell.item_set.ident]
        cells[cell.row, model] = cell
    data.cells = cells


def add_record(data: PageData, path: Path, record: Any) -> None:
    """Classify one JSON file and add what it holds; anything unrecognised is named in ``skipped``."""
    where = str(path)
    if not isinstance(record, dict):
        data.skipped[where] = "top level is not a JSON object"
        return
    if path.name == "build_info.json":
        newer = newer_format_problem(record, path)
        if newer is not None:  # the one format gate: refused with the sentence every folder reader gives
            raise ValueError(newer)
        try:
            data.builds.append((str(path.parent), read_build_info(path.parent)))
        except ValueError as error:
            data.skipped[where] = f"not a valid build_info.json ({error})"
        return
    experiment = record.get("experiment")
    if isinstance(experiment, str):
        model = _record_name(record)
        if experiment == "zero_shot":
            # A family's items_sha256 is its own (in its metrics); split and source may be the record's.
            shared = {k: record.get(k) for k in ("split", "source", "source_line")}
            samples, weights = samples_of(record, path), _text(record.get("weights_sha256"))
            for key, metrics in sorted((record.get("families") or {}).items()):
                metrics = metrics if isinstance(metrics, dict) else {}
                item = _item_set(data, where, metrics, shared)
                if item is not None:
                    add_cycle_metrics(data, key, model, metrics, where, item, metrics.get("family"), samples, weights)
            for key, reason in sorted((record.get("unavailable") or {}).items()):
                item = _item_set(data, where, {}, shared) or ItemSet()
                unscored = ItemSet(item.split, None, item.source, item.source_line)
                add_cycle_metrics(data, key, model, {"available": False, "unavailable_reason": reason}, where, unscored)
        elif experiment == "attributes":
            data.attributes.append(
                {
                    "model": model,
                    "protocol": _attribute_protocol(record),
                    "strategies": record.get("strategies", {}),
                    "file": where,
                }
            )
        data.experiments.setdefault(model, {})[experiment] = record
        return
    if "grid" in record and isinstance(record["grid"], dict):  # clip-cycles splits --out results.json
        table = record["grid"].get("table") or {}
        for name in sorted(table):
            data.attributes.append(
                {"model": name, "protocol": _attribute_protocol(record), "strategies": table[name], "file": where}
            )
        return
    if {"dataset", "model", "metrics"} <= set(record) and isinstance(record["metrics"], dict):
        dataset, metrics = str(record["dataset"]), record["metrics"]
        model = _record_name(record)
        namespace, name = _split_dataset(dataset)
        item = _item_set(data, where, record, metrics)
        if item is None:
            return
        if namespace == "cycles" and ("cycle_acc" in metrics or metrics.get("available") is False):
            facts, weights = record.get("family"), _text(record.get("weights_sha256"))
            add_cycle_metrics(data, name, model, metrics, where, item, facts, samples_of(record, path), weights)
        elif namespace == "audit":
            add_benchmark_audit(data, name, model if record.get("model") else "", metrics, where, item)
        elif namespace == "attributes" and "f1_selectivity" in metrics:
            strategy = str(metrics.get("strategy") or name)
            data.attributes.append(
                {
                    "model": model,
                    "protocol": _attribute_protocol(metrics),
                    "strategies": {strategy: {"f1_selectivity": metrics.get("f1_selectivity"), "cs": metrics.get("cs")}},
                    "file": where,
                }
            )
        else:
            data.skipped[where] = f"clip_benchmark record of {dataset!r}: not a cycles, audit or attributes result"
        return
    data.skipped[where] = "not a clip_cycles or clip_benchmark result"


def collect(inputs: Iterable[str | os.PathLike[str]]) -> PageData:
    """Read every recognised result under ``inputs`` (folders or JSON files) into one :class:`PageData`."""
    data = PageData()
    for item in inputs:
        root = Path(item)
        data.inputs.append(str(root))
        for path in _json_files(root, data):
            record = _read(path, data)
            if record is not None:
                add_record(data, path, record)
    assign_rows(data)
    return data
