"""Task runners of the benchmark formats (registered in :mod:`clip_cycles.evaluation.runners`).

- ``benchmark_cycles`` (``cycles/winoground``): the blocks of a Winoground-format root
  as exact cycles: CycleAcc beside clip_benchmark's text/image/group scores, per tag;
- ``benchmark_audit`` (``audit/<format>``): the whole audit of :mod:`.run` as one record.

Both read ``--dataset_root`` / ``--dataset-root`` and the model and feature cache of the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from clip_cycles.algebra.contrast import block_scores_from_embeddings
from clip_cycles.benchmark_audit.adapters import get_adapter, load_benchmark
from clip_cycles.benchmark_audit.audit import AuditSettings
from clip_cycles.benchmark_audit.design import ComparisonSet
from clip_cycles.benchmark_audit.run import audit_benchmark, embed_subsets
from clip_cycles.encoding.run_context import RunOutcome
from clip_cycles.evaluation.zero_shot import checked_record, score_blocks
from clip_cycles.experiments.item_sets import UNREAD_IMAGE_PREFIX, item_set_digest
from clip_cycles.fingerprints import content_hash

if TYPE_CHECKING:  # pragma: no cover
    from clip_cycles.encoding.run_context import RunContext, RunOutcome
    from clip_cycles.tasks.registry import AnyTask, TaskSpec


def _root(task: TaskSpec, context: RunContext) -> Path:
    adapter = get_adapter(task.config)
    if context.dataset_root is None:
        raise ValueError(f"task {task.name} needs a benchmark root (--dataset_root / --dataset-root) holding {adapter.expects}")
    return Path(context.dataset_root).expanduser()


def winoground_cycle_metrics(task: TaskSpec, context: RunContext) -> dict[str, Any]:
    """CycleAcc, text/image/group and counts of a format that declares its blocks, overall and per tag."""
    root = _root(task, context)
    # A subset with no block (an empty file) is not scored; one that declares no blocks is the wrong format.
    sets = [cs for cs in load_benchmark(task.config, root) if cs.n_comparisons]
    if any(cs.cycles is None for cs in sets):
        raise ValueError(
            f"{task.path}: field 'dataset_kwargs.config': format {task.config!r} declares no 2x2 blocks; "
            "audit it with the audit/ tasks or clip-cycles audit-benchmark instead"
        )
    sets, embeddings, stats = embed_subsets(
        sets,
        context.spec,
        context.cache_dir,
        context.batch_size,
        context.num_workers,
        context.skip_bad_images,
        task.format_caption,
    )
    metrics: dict[str, Any] = {}
    blocks_all, tags_all = [], []
    skipped: dict[str, int] = {}
    for cs, emb in zip(sets, embeddings):
        if cs.cycles is None or len(cs.cycles) == 0:  # every block dropped for unreadable images
            continue
        blocks_all.append(block_scores_from_embeddings(emb.images, emb.captions, cs.cycles))
        tags_all += list(cs.cycle_tags or [])
        for reason, count in cs.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + count
    if not blocks_all:
        raise ValueError(f"{root}: no block left to score (skipped: {skipped})")
    blocks = np.concatenate(blocks_all)
    metrics.update(score_blocks(blocks, task.tie_tolerance))
    metrics["tie_tolerance"] = task.tie_tolerance
    per_tag = {}
    for tag in sorted({t for ts in tags_all for t in ts}):
        mask = np.array([tag in ts for ts in tags_all], dtype=bool)
        per_tag[tag] = score_blocks(blocks[mask], task.tie_tolerance)
    metrics["per_tag"] = per_tag
    metrics["skipped"] = dict(sorted(skipped.items()))
    metrics["encoding"] = stats.to_dict()
    metrics["items_sha256"] = blocks_digest(task.config, sets)
    metrics["averaged_over"] = "the blocks of the root (each block one exact cycle); per_tag: blocks with that tag"
    return metrics


def _image_hash(item: Any) -> str:
    try:
        return content_hash(item.read_bytes())
    except (OSError, ValueError):  # features precomputed elsewhere, the file not here: by its key
        return f"{UNREAD_IMAGE_PREFIX}{item.key}"


def blocks_digest(config: str, sets: Sequence[ComparisonSet]) -> str:
    """The item-set digest (:func:`~clip_cycles.experiments.item_sets.item_set_digest`) of the blocks scored.

    Each block enters as ``[subset/k, sha256(image_0), sha256(image_1), caption_0, caption_1]`` in the
    order read, so two releases of one benchmark that differ in one caption, one image byte or one
    label (which caption goes with which image) give two digests.
    """
    items = [
        (f"{cs.name}/{k}", _image_hash(cs.images[u1]), _image_hash(cs.images[u2]), cs.captions[v1], cs.captions[v2])
        for cs in sets
        for k, (u1, u2, v1, v2) in enumerate((cs.cycles if cs.cycles is not None else np.zeros((0, 4), int)).tolist())
    ]
    return item_set_digest("test", {"kind": "benchmark", "format": config}, {}, [(0, items)])


def run_benchmark_cycles(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """``benchmark_cycles`` runner: one record per task."""
    return RunOutcome([checked_record(task, context.spec, winoground_cycle_metrics(task, context)) for task in tasks])  # type: ignore[arg-type]


def run_benchmark_audit(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """``benchmark_audit`` runner: the audit of :func:`~.run.audit_benchmark` as one record per task."""
    records = []
    for task in tasks:
        allowed = ("probe_folds", "probe_c")
        unknown = sorted(set(task.experiment_kwargs) - set(allowed))  # type: ignore[union-attr]
        if unknown:
            raise ValueError(
                f"{task.path}: field 'experiment_kwargs.{unknown[0]}': unknown setting (allowed: {', '.join(allowed)})"
            )
        settings = AuditSettings(tie_tolerance=task.tie_tolerance, **dict(task.experiment_kwargs))  # type: ignore[union-attr]
        audit = audit_benchmark(
            task.config,
            _root(task, context),
            context.spec,
            context.cache_dir,  # type: ignore[union-attr]
            settings=settings,
            batch_size=context.batch_size,
            num_workers=context.num_workers,
            skip_bad_images=context.skip_bad_images,
            caption_format=task.format_caption,
        )  # type: ignore[union-attr]
        records.append(checked_record(task, context.spec, audit.record(context.language)["metrics"]))  # type: ignore[arg-type]
    return RunOutcome(records)
