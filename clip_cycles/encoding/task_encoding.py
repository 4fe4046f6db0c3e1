"""Encoding what tasks need: every unique image and caption of every task and seed in one pass."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from clip_cycles.data.families.registry import check_seeds
from clip_cycles.data.folder.reader import BuiltFolder, CycleRows
from clip_cycles.encoding.backends import PRECOMPUTED_FEATURES
from clip_cycles.encoding.distributed import current, encode_sharded, main_process_first
from clip_cycles.encoding.encoder import EncodedFeatures, ModelSpec
from clip_cycles.encoding.vlm_scores import score_tasks, uses_pair_scores
from clip_cycles.processes import Helper, start_helper
from clip_cycles.settings import resolve_data_cache_dir
from clip_cycles.tasks.loading import TaskData, keep_row_decodes, load_task_data, resolve_dataset_roots, unique_items
from clip_cycles.tasks.registry import TaskSpec


def encode_tasks(
    tasks: Sequence[TaskSpec],
    spec: ModelSpec,
    dataset_root: str | Path | None,
    cache_dir: Path | None,
    data_cache_dir: str | Path | None = None,
    batch_size: int = 64,
    num_workers: int | None = None,
    skip_bad_images: bool = False,
    with_audit: bool | None = None,
    seeds: Sequence[int] | None = None,
) -> tuple[list[TaskData], EncodedFeatures | None]:
    """Load every task's cycles and encode all their unique images and captions in one pass.

    Under a process group (:func:`clip_cycles.encoding.distributed.process_group`) the encoding is
    sharded across ranks and the features come back on rank 0 only (None elsewhere).
    """
    unsupported = [t.name for t in tasks if not isinstance(t, TaskSpec) or t.members]
    if unsupported:
        raise ValueError(
            f"tasks {unsupported} are not single-family cycle tasks; their runners "
            "(clip_cycles.evaluation.runners) encode what they need"
        )
    if seeds is not None:
        check_seeds(seeds)
    data_cache = resolve_data_cache_dir(data_cache_dir, cache_dir)
    with main_process_first():  # rank 0 builds shared data folders once; the others reuse them
        folders = resolve_dataset_roots(tasks, dataset_root, data_cache)
    keep_row_decodes(folders, cache_dir)

    def load(task: TaskSpec) -> TaskData:
        # Train/validation are read (and encoded) only when the audit fits on the train split.
        audit = ("additive_audit" in task.metric_names and task.audit_fit == "train") if with_audit is None else with_audit
        return load_task_data(task, folders[task.name], seeds, audit)

    helper = _decode_beside_the_load(tasks, folders, spec, cache_dir, load)
    try:
        loaded = [load(task) for task in tasks]
    finally:
        if helper is not None:
            helper.finish()

    if uses_pair_scores(spec):  # generative VLMs score each unique (image, caption) pair instead
        return loaded, score_tasks(loaded, spec, cache_dir, batch_size, skip_bad_images)  # type: ignore[return-value]
    images, captions = unique_items(loaded)
    encoded = encode_sharded(
        images, captions, spec, cache_dir, batch_size=batch_size, num_workers=num_workers, skip_bad_images=skip_bad_images
    )
    return loaded, encoded


def _decode_beside_the_load(
    tasks: Sequence[TaskSpec],
    folders: dict[str, BuiltFolder],
    spec: ModelSpec,
    cache_dir: Path | None,
    load: Callable[[TaskSpec], TaskData],
) -> Helper | None:
    """In a run sure to load the model, a helper decodes the row files (last task first) while the model loads.

    Loading the model is mostly importing torch and the backend's library, seconds on one core; the
    helper, forked before that import, decodes the tasks' row files into the row cache
    (:func:`clip_cycles.tasks.loading.keep_row_decodes`) on another, and the parent then reads the
    kept decodes, checked as any kept decode is (what the helper did not reach, the parent decodes).
    None, and nothing loaded early, where the model may not be needed (a feature cache with this
    model's manifest: a warm run imports no backend), without a writable row cache, under torchrun,
    for pair scorers and precomputed features, or where no helper starts.
    """
    if (
        cache_dir is None
        or uses_pair_scores(spec)
        or spec.backend.can(PRECOMPUTED_FEATURES)
        or current().active
        or not any(folder.rows_cache is not None and folder.rows_cache_writable for folder in folders.values())
        or not spec.sure_to_load(cache_dir)
    ):
        return None

    def decode(stopped: Callable[[], bool]) -> None:
        for task in reversed(tasks):
            if stopped():
                return
            load(task)

    helper = start_helper(decode)
    if helper is not None:
        try:
            spec.preload()
        except BaseException:
            helper.finish()
            raise
    return helper


def cycle_index(rows: CycleRows, encoded: EncodedFeatures) -> tuple[np.ndarray, int]:
    """(N, 4) indices into the encoded tables; cycles touching a skipped image are dropped and counted."""
    image_rows, caption_rows = encoded.image_rows, encoded.caption_rows
    images = np.fromiter((image_rows.get(item.key, -1) for item in rows.image_items), dtype=np.int64, count=len(rows.image_items))
    captions = np.fromiter((caption_rows[text] for text in rows.captions), dtype=np.int64, count=len(rows.captions))
    index = np.concatenate([images[rows.image_index], captions[rows.caption_index]], axis=1)
    keep = (index[:, :2] >= 0).all(axis=1)
    if keep.all():
        return index, 0
    return np.ascontiguousarray(index[keep]), int((~keep).sum())
