"""Zero-shot evaluation of a model on cycle tasks: CycleAcc, Winoground scores, the additive audit.

``clip-cycles eval --task cycles/<name> --model-type open_clip --model ViT-B-32
--pretrained openai --dataset-root <built folder or raw root>`` and the clip_benchmark
plugin (:mod:`clip_cycles.integrations.clip_benchmark`) both end here:

1. tasks are resolved through the registry (:mod:`clip_cycles.tasks.registry`), collections expanded;
2. each task's dataset root is resolved: a built folder is used as is, a raw COCO/GQA
   root (or the shapes world) has the needed families built into a cache directory
   first and reused afterwards;
3. the unique images and captions of every cycle of every task and seed are encoded
   once (:func:`clip_cycles.encoding.encoder.encode`, through the feature cache);
4. each seed's (N, 2, 2) cosine blocks give CycleAcc (float64, one fixed tie tolerance)
   and text/image/group accuracy with Winoground semantics; seeds are summarized by
   mean and sample sd.

Under ``torchrun`` the encoding is sharded across ranks and rank 0 scores
(:mod:`clip_cycles.encoding.distributed`); the other ranks write nothing.

Results use clip_benchmark's JSON format ``{dataset, model, pretrained, task, metrics,
language}`` so ``clip_benchmark build`` aggregates them to CSV.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from clip_cycles.algebra.bootstrap import (
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_LEVEL,
    DEFAULT_N_RESAMPLES,
    bootstrap_ci,
)
from clip_cycles.algebra.contrast import block_scores_from_embeddings, cycle_credits, deltas_from_blocks
from clip_cycles.algebra.crossed import crossed_group_intervals
from clip_cycles.algebra.winoground import winoground_scores
from clip_cycles.encoding.backends import is_random_init
from clip_cycles.encoding.encoder import EncodedFeatures, ModelSpec
from clip_cycles.encoding.task_encoding import cycle_index, encode_tasks
from clip_cycles.evaluation.samples import check_samples_path, cycle_samples, samples_bytes, samples_reference
from clip_cycles.experiments.item_sets import family_facts, item_identity
from clip_cycles.heads.additive_audit import additive_audit
from clip_cycles.outputs import atomic_write_bytes, cache_record_replaceable, is_stream, output_error, write_output
from clip_cycles.processes import Helper, start_helper
from clip_cycles.regular_files import load_json_text, read_regular_file
from clip_cycles.results import benchmark_record, clean, mean_sd
from clip_cycles.schemas.audit_report import AdditiveAuditReport
from clip_cycles.schemas.declared import validate
from clip_cycles.schemas.result import check_result_record
from clip_cycles.settings import resolve_cache_dir, resolve_data_cache_dir
from clip_cycles.tasks.loading import TaskData
from clip_cycles.tasks.registry import AnyTask, TaskSpec, expand_tasks

# --------------------------------------------------------------------------- encoding and scoring


#: The four per-cycle means of every record, in the column order of :func:`per_cycle_scores`.
MEAN_METRICS: tuple[str, ...] = ("cycle_acc", "text_acc", "image_acc", "group_acc")


def per_cycle_scores(blocks: np.ndarray, tie_tolerance: float) -> np.ndarray:
    """(N, 4) float64 per-cycle values whose column means are :data:`MEAN_METRICS`.

    Columns: the CycleAcc credit (1 / 0.5 / 0 under ``tie_tolerance``), then Winoground's
    text, image and group correctness (0 / 1).
    """
    wino = winoground_scores(blocks)
    credits = cycle_credits(deltas_from_blocks(blocks), tie_tolerance)
    return np.stack([credits, wino.text_correct, wino.image_correct, wino.group_correct], axis=1).astype(np.float64)


def score_blocks(
    blocks: np.ndarray,
    tie_tolerance: float,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    bootstrap_seed: int = DEFAULT_BOOTSTRAP_SEED,
    intervals: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """CycleAcc (half ties under ``tie_tolerance``), text/image/group accuracy and counts of one set of blocks.

    Each mean has its percentile bootstrap interval over cycles beside it (``<name>_ci``,
    :func:`clip_cycles.algebra.bootstrap.bootstrap_ci`; one set of draws for all four).
    ``intervals``: those four intervals when already known (:func:`_task_intervals` keeps them).
    """
    deltas = deltas_from_blocks(blocks)
    values = per_cycle_scores(blocks, tie_tolerance)
    out: dict[str, Any] = {name: float(values[:, k].mean()) for k, name in enumerate(MEAN_METRICS)}
    if intervals is None:
        intervals = bootstrap_ci([values], n_resamples, seed=bootstrap_seed)
    for name, ci in zip(MEAN_METRICS, intervals):
        out[f"{name}_ci"] = ci
    out["n_cycles"] = int(blocks.shape[0])
    out["n_ties"] = int((np.abs(deltas) <= tie_tolerance).sum())
    return out


#: Bumped when the audit's cached result format changes.
AUDIT_CACHE_VERSION = 1
#: The settings a cached additive audit (:func:`_audit`) is keyed by. ``arrays`` is the content the audit
#: sees (used feature rows, in order of first use, and the re-indexed cycles), so it ignores feature rows no
#: cycle of the task uses and where the rows sit in the encoded tables (which other tasks were encoded).
AUDIT_KEY_FIELDS: tuple[str, ...] = ("version", "code", "arrays", "fit", "fit_split", "has_validation", "seed", "tie_tolerance")


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """sha256 of this package's Python sources and the numeric libraries' versions: cached audits follow the code."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for source in sorted(package.rglob("*.py")):
        h.update(source.relative_to(package).as_posix().encode("utf-8") + b"\x00" + source.read_bytes() + b"\x00")
    for name in ("torch", "numpy"):
        try:
            h.update(f"{name}={version(name)}".encode())
        except PackageNotFoundError:
            h.update(f"{name}=".encode())
    return h.hexdigest()


def _compact(phi: np.ndarray, psi: np.ndarray, parts: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The feature rows ``parts`` use (in order of first use) and ``parts`` re-indexed into them.

    The audit then depends on this task's cycles and features only, not on which other
    tasks were encoded in the same run, so its cache key is stable.
    """
    out: list[list[np.ndarray]] = [[] for _ in parts]
    tables = []
    for table, cols in ((phi, slice(0, 2)), (psi, slice(2, 4))):
        flat = np.concatenate([p[:, cols].ravel() for p in parts])
        unique, first = np.unique(flat, return_index=True)
        used = unique[np.argsort(first, kind="stable")]
        lookup = np.full(table.shape[0], -1, dtype=np.int64)
        lookup[used] = np.arange(used.shape[0])
        tables.append(np.ascontiguousarray(table[used]))
        for k, p in enumerate(parts):
            out[k].append(lookup[p[:, cols]])
    return tables[0], tables[1], [np.concatenate(cols, axis=1) for cols in out]


@dataclasses.dataclass
class _AuditInputs:
    """One seed's audit as :func:`_audit` runs it: the compacted tables and designs, and its cache record's key."""

    phi: np.ndarray
    psi: np.ndarray
    train: np.ndarray
    test: np.ndarray
    val: np.ndarray | None
    settings: dict[str, Any] | None  # None without an audit cache
    path: Path | None


def _audit_inputs(
    task: TaskSpec,
    seed: int,
    data: TaskData,
    encoded: EncodedFeatures,
    phi: np.ndarray,
    psi: np.ndarray,
    cache_dir: Path | None = None,
    test: np.ndarray | None = None,
) -> _AuditInputs:
    """What the audit of one seed fits and scores, and the record it is kept in (keyed by its inputs' content)."""
    splits = data.splits[seed]
    if test is None:
        test, _ = cycle_index(splits[task.split], encoded)
    if task.audit_fit == "scored":
        # The probes fit on the scored cycles' own pairs: the features are in memory, and the
        # audit's claim (exactly 0.5 on balanced comparisons) holds for any fit, wherever it came from.
        train, val = test, None
    else:
        train, _ = cycle_index(splits[task.train_split], encoded)
        val = cycle_index(splits["validation"], encoded)[0] if "validation" in splits else None
    parts = [train, test] if val is None else [train, test, val]
    phi_c, psi_c, indexed = _compact(phi, psi, parts)
    val_c = indexed[2] if val is not None else None
    if cache_dir is None:
        return _AuditInputs(phi_c, psi_c, indexed[0], indexed[1], val_c, None, None)
    h = hashlib.sha256()
    for array in (phi_c, psi_c, *indexed):
        h.update(repr((array.dtype.str, array.shape)).encode("utf-8") + array.tobytes())
    settings = {
        "version": AUDIT_CACHE_VERSION,
        "code": _code_digest(),
        "arrays": h.hexdigest(),
        "fit": task.audit_fit,
        # The report names the split it was fitted on: the same rows under another split name are another report.
        "fit_split": task.split if task.audit_fit == "scored" else task.train_split,
        "has_validation": val is not None,
        "seed": seed,
        "tie_tolerance": repr(task.tie_tolerance),
    }
    path = _cached_record_path(cache_dir / "audits", settings)
    return _AuditInputs(phi_c, psi_c, indexed[0], indexed[1], val_c, settings, path)


def _audit(
    task: TaskSpec,
    seed: int,
    data: TaskData,
    encoded: EncodedFeatures,
    phi: np.ndarray,
    psi: np.ndarray,
    cache_dir: Path | None = None,
    test: np.ndarray | None = None,
) -> dict[str, Any]:
    """The additive audit of one seed; cached under ``cache_dir/audits`` keyed by its inputs' content.

    ``test``: the scored split's :func:`cycle_index`, when the caller has it already.
    """
    inputs = _audit_inputs(task, seed, data, encoded, phi, psi, cache_dir, test)
    settings, path = inputs.settings, inputs.path
    if settings is not None and path is not None:
        _, cached = _cached_record(path.parent, settings)
        if isinstance(cached, dict) and cached.get("settings") == settings and isinstance(cached.get("report"), dict):
            # Served only when its checksum holds and it matches its declaration (an older layout is recomputed).
            if (
                cached.get("checksum") == _audit_checksum(settings, cached["report"])
                and validate(AdditiveAuditReport, cached["report"])[1] is None
            ):
                return cached["report"]
            # An edited (or pre-checksum) report is never the audit's result: recompute and rewrite it.
            warnings.warn(f"additive audit cache: {path} fails its checksum; the audit is recomputed", stacklevel=2)
    report = additive_audit(
        inputs.phi, inputs.psi, inputs.train, inputs.test, val_cycles=inputs.val, seed=seed, tie_tolerance=task.tie_tolerance
    ).to_dict()
    report["fit_split"] = task.split if task.audit_fit == "scored" else task.train_split
    if path is not None:
        payload = json.dumps(
            {"settings": settings, "report": report, "checksum": _audit_checksum(settings, report)}, sort_keys=True
        )
        _write_cached_record(path, payload)
    return report


#: The largest cached audit or interval record read (they are a few kB): anything larger is not one.
MAX_CACHE_RECORD_BYTES = 16 << 20


def _cached_record_path(folder: Path, settings: Mapping[str, Any]) -> Path:
    """Where the cache record keyed by ``settings`` lies under ``folder``: the sha256 of its sorted JSON, 32 digits."""
    return folder / f"{hashlib.sha256(json.dumps(settings, sort_keys=True).encode('utf-8')).hexdigest()[:32]}.json"


def _cached_record(folder: Path, settings: Mapping[str, Any]) -> tuple[Path, Any]:
    """The cache file keyed by ``settings`` under ``folder`` and its parsed JSON (None when absent or unreadable:
    the caller computes and rewrites it, after checking the settings and checksum of what it read).

    Only a regular file of at most :data:`MAX_CACHE_RECORD_BYTES` is read: a FIFO, a device or a huge
    file put there (the cache folder may be shared) reads as absent instead of hanging or filling memory.
    """
    path = _cached_record_path(folder, settings)
    try:
        # Non-finite allowed: our own records (json.dumps writes NaN), checked by their checksum; nesting still bounded.
        return path, load_json_text(read_regular_file(path, MAX_CACHE_RECORD_BYTES), str(path), allow_non_finite=True)
    except (OSError, ValueError):
        return path, None


def _write_cached_record(path: Path, payload: str) -> None:
    """Write a checksummed cache record (no fsync: a torn file fails its checksum and is recomputed).

    Only a missing or regular record is written: a FIFO, device or link at its place (which the
    reading takes for absent) is left as it is, with a warning, and the result stays this run's.
    """
    if not cache_record_replaceable(path):
        warnings.warn(f"additive audit cache: {path} is not a regular file; left as it is, the audit is not kept", stacklevel=2)
        return
    try:
        atomic_write_bytes(path, payload.encode("utf-8"), durable=False)
    except OSError as error:
        raise output_error(
            error, path, "free space there, or point the cache elsewhere with --cache-dir DIR or CLIP_CYCLES_CACHE"
        ) from error


def _audit_checksum(settings: Mapping[str, Any], report: Mapping[str, Any]) -> str:
    """sha256 of a cached audit's settings and report (sorted compact JSON), like a feature shard's checksum."""
    text = json.dumps({"settings": settings, "report": report}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _audit_jobs(loaded: Sequence[TaskData], encoded: EncodedFeatures) -> list[tuple[TaskData, int]]:
    """Every (task data, seed) whose additive audit :func:`score_task` computes, in the order it does."""
    if getattr(encoded, "block_scores", None) is not None:  # pair scorers: no features, no audit
        return []
    return [
        (data, seed)
        for data in loaded
        if data.unavailable is None and data.audit_unavailable is None and "additive_audit" in data.task.metric_names
        for seed in sorted(data.splits)
    ]


def start_audit_helper(
    loaded: Sequence[TaskData],
    encoded: EncodedFeatures,
    features: tuple[np.ndarray, np.ndarray] | None,
    cache_dir: Path | None,
) -> Helper | None:
    """A forked helper that computes the run's additive audits into the audit cache, last first, while the parent scores.

    The parent's :func:`_audit` reads a record before computing one: from the front it computes
    what the helper has not reached, and serves what it has (checked like any cached record). The
    helper skips what is cached (the parent's, a previous run's) and stops when the parent is done,
    so the two meet in the middle; the records are the same bytes whoever wrote them. None without
    an audit cache, with fewer than two audits to compute, when the last one is kept already (a warm
    run), or where no helper starts (:func:`clip_cycles.processes.start_helper`).
    """
    jobs = _audit_jobs(loaded, encoded)
    if cache_dir is None or features is None or len(jobs) < 2:
        return None
    phi, psi = features
    # The helper's first audit already kept (by this run's inputs): a warm run, with nothing to help with.
    # Asking also computes the code digest once, here, for the helper to inherit.
    data, seed = jobs[-1]
    index, _ = cycle_index(data.splits[seed][data.task.split], encoded)
    if index.shape[0]:
        record = _audit_inputs(data.task, seed, data, encoded, phi, psi, cache_dir, index).path
        if record is not None and record.is_file():
            return None

    def work(stopped: Any) -> None:
        for data, seed in reversed(jobs):
            if stopped():
                return
            index, _ = cycle_index(data.splits[seed][data.task.split], encoded)
            if index.shape[0]:
                _audit(data.task, seed, data, encoded, phi, psi, cache_dir, index)

    return start_helper(work)


def task_intervals(
    per_cycle: Sequence[np.ndarray], pairs: Sequence[np.ndarray]
) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Each seed's four intervals and the pooled four (the mean over seeds), of a task's (N, 4) per-cycle values.

    Two-way image-cluster robust (:func:`clip_cycles.algebra.crossed.crossed_group_intervals`):
    cycles that share an image, in either slot and in any seed, are dependent. Each end is
    clipped to [0, 1], where every accuracy lies. Cheap (no resampling), so nothing is cached.
    """
    per_seed, pooled = crossed_group_intervals(list(per_cycle), list(pairs), DEFAULT_LEVEL)

    def clip(ci: dict[str, Any]) -> dict[str, Any]:
        return {**ci, "low": min(max(ci["low"], 0.0), 1.0), "high": min(max(ci["high"], 0.0), 1.0)}

    return [[clip(ci) for ci in group] for group in per_seed], [clip(ci) for ci in pooled]


@dataclasses.dataclass
class _ScoredSeeds:
    """Everything of a task's scoring but its audits (:func:`_score_seeds`), for :func:`_task_metrics` to finish."""

    per_seed: dict[str, dict[str, Any]]
    pooled: list[dict[str, Any]]
    indices: dict[int, np.ndarray]  # each seed's cycle index, for its audit
    dropped_total: int


def _float64_features(encoded: EncodedFeatures) -> tuple[np.ndarray, np.ndarray] | None:
    """The feature tables in float64, as every score and audit uses them (None for pair scorers)."""
    if getattr(encoded, "block_scores", None) is not None:  # issue 18: pair scorers (clip_cycles.encoding.vlm_scores)
        return None
    return encoded.image_features.astype(np.float64), encoded.caption_features.astype(np.float64)


def _score_seeds(
    data: TaskData,
    encoded: EncodedFeatures,
    features: tuple[np.ndarray, np.ndarray] | None,
    samples: list[dict[str, Any]] | None,
    bind: Mapping[str, Any] | None,
) -> _ScoredSeeds:
    """Each seed's blocks and scores, and the intervals (the samples too, when asked): the task but its audits."""
    task = data.task
    pair_blocks = getattr(encoded, "block_scores", None)
    per_seed: dict[str, dict[str, Any]] = {}
    per_cycle: list[np.ndarray] = []
    pairs: list[np.ndarray] = []
    dropped_total = 0
    scored: list[tuple[int, Any, np.ndarray, int]] = []
    indices: dict[int, np.ndarray] = {}
    for seed in sorted(data.splits):
        rows = data.splits[seed][task.split]
        index, dropped = cycle_index(rows, encoded)
        dropped_total += dropped
        if index.shape[0] == 0:
            raise ValueError(f"task {task.name} seed {seed}: every cycle touches a skipped image; nothing to score")
        if pair_blocks:
            blocks = pair_blocks(task, index)
        else:
            assert features is not None
            blocks = block_scores_from_embeddings(features[0], features[1], index)
        scored.append((seed, rows, blocks, dropped))
        indices[seed] = index
        per_cycle.append(per_cycle_scores(blocks, task.tie_tolerance))
        pairs.append(index[:, :2])  # the cycle's two images, as rows of the one encoded image table
    seed_intervals, pooled = task_intervals(per_cycle, pairs)
    for (seed, rows, blocks, dropped), intervals in zip(scored, seed_intervals):
        per_seed[str(seed)] = score_blocks(blocks, task.tie_tolerance, intervals=intervals)
        per_seed[str(seed)]["dropped_cycles"] = dropped
        per_seed[str(seed)]["split"] = task.split  # which split these numbers come from
        if samples is not None:
            samples.extend(cycle_samples(task, seed, rows, encoded, blocks, bind))
    return _ScoredSeeds(per_seed, pooled, indices, dropped_total)


def _task_audits(
    data: TaskData,
    encoded: EncodedFeatures,
    features: tuple[np.ndarray, np.ndarray] | None,
    scored: _ScoredSeeds,
    cache_dir: Path | None,
) -> dict[str, Any]:
    """The additive audit of each seed, when the task asks for it and it can be run (else empty)."""
    if "additive_audit" not in data.task.metric_names or features is None or data.audit_unavailable is not None:
        return {}
    phi, psi = features
    return {
        str(seed): _audit(data.task, seed, data, encoded, phi, psi, cache_dir, index) for seed, index in scored.indices.items()
    }


def _task_metrics(data: TaskData, encoded: EncodedFeatures, scored: _ScoredSeeds, audits: Mapping[str, Any]) -> dict[str, Any]:
    """The task's ``metrics`` from its scored seeds and its audits."""
    task = data.task
    per_seed = scored.per_seed
    metrics: dict[str, Any] = {}
    for name, ci in zip(MEAN_METRICS, scored.pooled):
        if name in task.metric_names:
            summary = mean_sd([per_seed[s][name] for s in per_seed])
            metrics[name] = summary["mean"]
            metrics[f"{name}_sd"] = summary["sd"]
            metrics[f"{name}_ci"] = ci
    if "cycle_acc" in task.metric_names:
        # clip_benchmark's headline column is `acc`: a cycle task's headline is CycleAcc.
        metrics["acc"] = metrics["cycle_acc"]
    metrics["n_cycles"] = int(sum(v["n_cycles"] for v in per_seed.values()))
    metrics["tie_tolerance"] = task.tie_tolerance
    metrics["split"] = task.split  # the split scored (a task's test_split, or clip_benchmark's --split)
    metrics["seeds"] = [int(s) for s in per_seed]
    metrics["per_seed"] = per_seed
    pair_blocks = getattr(encoded, "block_scores", None)
    if audits:
        metrics["additive_audit"] = {"passed": all(a["passed"] for a in audits.values()), "per_seed": dict(audits)}
    elif pair_blocks and "additive_audit" in task.metric_names:
        metrics["additive_audit"] = encoded.audit_unavailable()  # type: ignore[attr-defined]
    elif "additive_audit" in task.metric_names and data.audit_unavailable is not None:
        metrics["additive_audit"] = {"passed": None, "available": False, "unavailable_reason": data.audit_unavailable}
    metrics["dropped_cycles"] = scored.dropped_total
    bad = encoded.stats.bad_images
    metrics["skipped_bad_images"] = len(bad)
    if bad:
        metrics["bad_images"] = dict(sorted(bad.items()))
    return metrics


def _finished_metrics(
    data: TaskData,
    encoded: EncodedFeatures,
    features: tuple[np.ndarray, np.ndarray] | None,
    scored: _ScoredSeeds | None,
    cache_dir: Path | None,
) -> dict[str, Any]:
    """A task's ``metrics`` from its scored seeds (None: the task is unavailable) and its audits, computed here:
    the last step of :func:`score_task` and of :func:`evaluate_tasks` alike."""
    if scored is None:
        task = data.task
        return {"available": False, "unavailable_reason": data.unavailable, "n_cycles": 0, "tie_tolerance": task.tie_tolerance}
    return _task_metrics(data, encoded, scored, _task_audits(data, encoded, features, scored, cache_dir))


def score_task(
    data: TaskData,
    encoded: EncodedFeatures,
    cache_dir: Path | None = None,
    samples: list[dict[str, Any]] | None = None,
    bind: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """clip_benchmark-style ``metrics`` of one task: per-seed values, their mean and sd, their intervals.

    ``cache_dir`` (the feature cache root) also keeps the additive audit's results.
    ``samples``, when given, receives the :func:`cycle_samples` of every scored cycle (seeds in order),
    each bound to the result by ``bind`` (its ``items_sha256`` and ``weights_sha256``).
    Every ``<name>_ci`` is two-way image-cluster robust (:func:`task_intervals`); the pooled one is
    that of the mean over seeds, the statistic that ``<name>`` reports.
    """
    features = _float64_features(encoded)
    scored = None if data.unavailable is not None else _score_seeds(data, encoded, features, samples, bind)
    return _finished_metrics(data, encoded, features, scored, cache_dir)


def result_record(
    task: TaskSpec,
    model: str,
    pretrained: str | None,
    metrics: dict[str, Any],
    language: str = "en",
    identity: Mapping[str, Any] | None = None,
    model_source: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """clip_benchmark's result JSON of one task: ``{dataset, model, pretrained, task, metrics, language}``.

    ``identity``: the item set scored (:func:`clip_cycles.experiments.item_sets.item_identity`), top-level fields;
    ``model_source``: where the weights came from (:meth:`ModelSpec.source`), likewise.
    """
    return benchmark_record(
        task.name, model, pretrained, metrics, language=language, identity=identity, model_source=model_source
    )


def recorded_pretrained(spec: ModelSpec) -> str | None:
    """The pretrained tag a record names: none for an OpenCLIP ``local-dir:``/``hf-hub:`` model.

    Such a model brings its own weights and OpenCLIP ignores the tag (the default one included),
    so recording it would name weights that were not loaded.
    """
    own_weights = spec.backend.name == "open_clip" and spec.model.startswith(("local-dir:", "hf-hub:"))
    if own_weights and not is_random_init(spec.pretrained):  # "none" says what it says: kept
        return None
    return spec.pretrained


def checked_record(task: AnyTask, spec: ModelSpec, metrics: dict[str, Any]) -> dict[str, Any]:
    """:func:`result_record` of a runner's metrics, once they hold every metric of the task's ``metric_list``
    and the record matches its declared format (:class:`clip_cycles.schemas.result.ResultRecord`).

    An unavailable result (``available: False``) reports why instead and is not checked.
    """
    missing = [m for m in task.metric_names if m not in metrics] if metrics.get("available", True) else []
    if missing:
        raise ValueError(f"{task.path}: field 'metric_list' names {missing}, which {task.output_type} did not report")
    record = result_record(task, spec.model, recorded_pretrained(spec), metrics, model_source=spec.source())  # type: ignore[arg-type]
    check_result_record(clean(record), f"{task.path}: the result record of {task.name}")  # what `schema result` promises
    return record


def evaluate(
    task_names: Sequence[str],
    spec: ModelSpec,
    dataset_root: str | Path | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    data_cache_dir: str | Path | None = None,
    batch_size: int = 64,
    num_workers: int | None = None,
    skip_bad_images: bool = False,
    seeds: Sequence[int] | None = None,
    samples_path: str | Path | None = None,
) -> tuple[list[dict[str, Any]], EncodedFeatures | None]:
    """Evaluate ``spec`` on cycle_selection tasks (collections expanded); returns result records and the encoder output.

    Under torchrun only rank 0 scores: the other ranks get ``([], None)``. Tasks of
    other output types run through :func:`clip_cycles.evaluation.runners.run_tasks`.
    ``samples_path``: also write one JSON line per scored cycle there (:func:`cycle_samples`).
    """
    tasks = expand_tasks(task_names)
    cache = resolve_cache_dir(cache_dir) if use_cache else None
    return evaluate_tasks(
        tasks,
        spec,
        dataset_root,
        cache,
        resolve_data_cache_dir(data_cache_dir, cache_dir),
        batch_size,
        num_workers,
        skip_bad_images,
        seeds,
        samples_path,
    )


def evaluate_tasks(
    tasks: Sequence[TaskSpec],
    spec: ModelSpec,
    dataset_root: str | Path | None,
    cache: Path | None,
    data_cache_dir: str | Path,
    batch_size: int = 64,
    num_workers: int | None = None,
    skip_bad_images: bool = False,
    seeds: Sequence[int] | None = None,
    samples_path: str | Path | None = None,
    staged: dict[Path, bytes] | None = None,
) -> tuple[list[dict[str, Any]], EncodedFeatures | None]:
    """:func:`evaluate` on resolved task specs, with the feature cache (None: none) and data cache already chosen.

    ``samples_path``: one JSON line per scored cycle of every task, in task then seed order; each line
    also carries its task's ``items_sha256`` and ``source`` (as the records do, with ``split``).
    ``staged``: where a regular samples file's bytes go instead of the disk, for the caller to write
    with its results as one set (a stream is written here, before any result, as ever).
    """
    other = [t.name for t in tasks if t.output_type != "cycle_selection"]
    if other:
        raise ValueError(
            f"tasks {other} are not cycle_selection tasks; run them with clip_cycles.evaluation.runners.run_tasks "
            "(`clip-cycles eval` and the clip_benchmark plugin do)"
        )
    if samples_path is not None:
        check_samples_path(samples_path)
    loaded, encoded = encode_tasks(
        tasks, spec, dataset_root, cache, data_cache_dir, batch_size, num_workers, skip_bad_images, seeds=seeds
    )
    if encoded is None:
        return [], None
    samples: list[dict[str, Any]] | None = [] if samples_path is not None else None
    records = []
    source = spec.source(None if cache is None else cache / "fingerprints")
    features = _float64_features(encoded)
    # Every task's scores first, then the audits: a helper computes the audits from the last while
    # the parent scores, and the parent's audits (from the first) then mostly read the helper's records.
    helper = start_audit_helper(loaded, encoded, features, cache)
    try:
        scored = []
        for data in loaded:
            identity = item_identity(data, encoded)
            bind = {"items_sha256": identity["items_sha256"], "weights_sha256": source.get("weights_sha256")}
            seeds_scored = None if data.unavailable is not None else _score_seeds(data, encoded, features, samples, bind)
            scored.append((data, identity, seeds_scored))
        for data, identity, seeds_scored in scored:
            metrics = _finished_metrics(data, encoded, features, seeds_scored, cache)
            record = result_record(
                data.task, spec.model, recorded_pretrained(spec), metrics, identity=identity, model_source=source
            )
            facts = family_facts(data.task)
            if facts is not None:  # what the page shows of the family, as it was when this ran
                record["family"] = facts
            records.append(record)
    finally:
        if helper is not None:
            helper.finish()
    if samples_path is not None:
        # Each line names its result's item set and weights; each record names the file and its sha256.
        content = samples_bytes(samples or [])
        if staged is not None and not is_stream(samples_path):
            staged[Path(samples_path)] = content  # written by the caller, first of its set
        else:
            write_output(samples_path, content, what="samples file")
        reference = samples_reference(samples_path, content)
        for record in records:  # a stream (/dev/stdout) is no file a record can name
            if record["metrics"].get("available", True) is not False and not is_stream(samples_path):
                record["samples"] = dict(reference)
    return records, encoded
