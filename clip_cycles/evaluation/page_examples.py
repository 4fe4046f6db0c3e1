"""Example cycles for the results page: the blocks recomputed from the cached features, and thumbnails.

For each family task the scored split of every seed is read and encoded through the
feature cache (:func:`clip_cycles.encoding.task_encoding.encode_tasks`, the same path as
zero-shot evaluation, so nothing is re-encoded that the evaluation cached). The page shows
the two images, the two captions, the 2 x 2 cosine block ``[[s11, s12], [s21, s22]]``,
Delta and the credit of the hardest and easiest cycles (lowest and highest Delta) and
of a seeded random sample. Without a ``cycle_acc_ci`` in the record, a percentile
bootstrap over cycles (within each seed, then the mean over seeds) gives the interval.

A result names the world it scored (its item set's ``source``, :mod:`clip_cycles.experiments.item_sets`);
without ``--dataset-root`` the page reproduces that shapes world (:func:`world_root`) instead of
assuming one default world, so the recomputed blocks are of the same cycles as the number.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image

from clip_cycles.algebra.contrast import block_scores_from_embeddings, cycle_credits, deltas_from_blocks
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.data.sources.shapes_world import DEFAULT_WORLD, ShapesWorldOptions, cached_world, world_of
from clip_cycles.encoding.run_context import RunContext
from clip_cycles.encoding.task_encoding import cycle_index, encode_tasks
from clip_cycles.experiments.item_sets import ItemSet
from clip_cycles.settings import resolve_cache_dir
from clip_cycles.tasks.registry import TaskSpec, expand_tasks

#: Thumbnail edge in pixels (the longer side) and JPEG quality: small enough for a page of hundreds.
THUMBNAIL_SIZE = 96
JPEG_QUALITY = 80
#: An image with more pixels than this is not decoded for a thumbnail (decompression bombs).
MAX_IMAGE_PIXELS = 64_000_000
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_LEVEL = 0.95
#: The shapes-world parameters a result's source must name for the page to reproduce the world.
WORLD_PARAMETERS: tuple[str, ...] = ("n_images", "seed", "image_size", "val_fraction")
#: Where reproduced worlds are kept, under the cache root.
PAGE_WORLDS = "page_worlds"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExampleCycle:
    """One cycle as the page shows it."""

    kind: str  # hardest | easiest | random
    cycle_id: str
    seed: int
    split: str
    images: tuple[ImageItem, ImageItem]
    captions: tuple[str, str]
    scores: tuple[tuple[float, float], tuple[float, float]]
    delta: float
    credit: float


@dataclass
class FamilyExamples:
    """A family's example cycles for one model, the folder they come from, and a bootstrap interval."""

    key: str
    model: str
    folder: str
    build_info: dict[str, Any]
    tie_tolerance: float
    examples: list[ExampleCycle] = field(default_factory=list)
    bootstrap: dict[str, Any] | None = None
    unavailable_reason: str | None = None
    #: Mean over seeds of the recomputed CycleAcc: must equal the record's, or the examples are of other features.
    cycle_acc: float | None = None
    seeds: tuple[int, ...] = ()
    #: The leaderboard row (family and item set) whose number these examples recompute; the family key when one.
    row: str = ""


def bootstrap_interval(
    credits_per_seed: Sequence[np.ndarray], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0, level: float = BOOTSTRAP_LEVEL
) -> dict[str, Any]:
    """Percentile bootstrap of the mean over seeds of CycleAcc: cycles resampled with replacement within each seed."""
    rng = np.random.default_rng(seed)
    means = np.zeros(resamples, dtype=np.float64)
    for credits in credits_per_seed:
        draws = rng.integers(0, credits.shape[0], size=(resamples, credits.shape[0]))
        means += credits[draws].mean(axis=1)
    means /= len(credits_per_seed)
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return {
        "low": float(low),
        "high": float(high),
        "level": level,
        "n_resamples": resamples,
        "seed": seed,
        "method": "percentile",
        "unit": "cycle",
        "computed_by": "page builder (the record has no cycle_acc_ci)",
    }


def pick_examples(deltas: np.ndarray, n: int, seed: int) -> list[tuple[str, int]]:
    """(kind, position): the ``n`` lowest-Delta, ``n`` highest-Delta and ``n`` seeded random other cycles."""
    order = np.argsort(deltas, kind="stable")
    hardest = [int(i) for i in order[:n]]
    easiest = [int(i) for i in order[::-1] if int(i) not in hardest][:n]
    rest = np.array(sorted(set(range(deltas.shape[0])) - set(hardest) - set(easiest)), dtype=np.int64)
    rng = np.random.default_rng(seed)
    sample = sorted(int(i) for i in rng.choice(rest, size=min(n, rest.shape[0]), replace=False)) if rest.size else []
    return [("hardest", i) for i in hardest] + [("easiest", i) for i in easiest] + [("random", i) for i in sample]


def world_root(item: ItemSet, cache_root: Path) -> Path | None:
    """The raw root of the shapes world ``item`` names, found in the cache or generated there; None if it names none.

    A world already in the cache is reused when its ``shapes_world.json`` holds exactly the
    parameters: ``<cache>/datasets/<folder_name>`` (where the demo and root-less tasks keep it,
    :func:`clip_cycles.data.sources.shapes_world.cached_world`); otherwise it is generated once under
    ``<cache>/page_worlds/<folder_name>``. A source line naming only some parameters is a ValueError.
    """
    named = item.world()
    if named is None:
        return None
    params = {"val_fraction": DEFAULT_WORLD.val_fraction, **named}
    missing = [k for k in WORLD_PARAMETERS if k not in params]
    if missing:
        raise ValueError(
            f"the result's source {item.source!r} names a shapes world without {', '.join(missing)}; "
            "give the world with --dataset-root to recompute its example cycles"
        )
    try:
        world = ShapesWorldOptions.make(**{k: params[k] for k in WORLD_PARAMETERS})
    except ValueError as error:
        raise ValueError(
            f"the result's source {item.source!r} names a shapes world this version cannot generate ({error}); "
            "give the world with --dataset-root to recompute its example cycles"
        ) from None
    shared = cache_root / "datasets" / world.folder_name()
    if world_of(shared) == world:
        return shared
    logger.info("reproducing %s under %s for the page's example cycles", item.source, cache_root / PAGE_WORLDS)
    return cached_world(cache_root / PAGE_WORLDS, world)  # written in a staging folder, moved into place whole


def page_world_cache(context: RunContext) -> Path:
    """The cache root under which :func:`world_root` looks for and keeps worlds (the feature cache root)."""
    return Path(context.cache_dir) if context.cache_dir is not None else resolve_cache_dir(None)


def family_examples(
    context: RunContext, keys: Sequence[str], model: str, n_examples: int, seed: int = 0, split: str | None = None
) -> dict[str, FamilyExamples]:
    """Example cycles of ``cycles/<key>`` for every key, recomputed with ``context``'s model from its feature cache.

    ``split`` (the split a result scored) replaces each task's default split when given.
    """
    tasks: list[TaskSpec] = []
    for key in keys:
        found = expand_tasks([f"cycles/{key}"])
        if len(found) == 1 and isinstance(found[0], TaskSpec) and not found[0].members:
            tasks.append(dataclasses.replace(found[0], split=split) if split else found[0])
    if not tasks:
        return {}
    loaded, encoded = encode_tasks(
        tasks,
        context.spec,
        context.dataset_root,
        context.cache_dir,
        context.data_cache_dir,
        context.batch_size,
        context.num_workers,
        context.skip_bad_images,
        with_audit=False,
        seeds=context.seeds,
    )
    out: dict[str, FamilyExamples] = {}
    if encoded is None or not hasattr(encoded, "image_features"):
        return out
    phi = encoded.image_features.astype(np.float64)
    psi = encoded.caption_features.astype(np.float64)
    for data in loaded:
        task = data.task
        key = task.name.removeprefix("cycles/")
        entry = FamilyExamples(key, model, str(data.folder.root), data.folder.info, task.tie_tolerance)
        out[key] = entry
        if data.unavailable is not None or not data.splits:
            entry.unavailable_reason = data.unavailable or "no seed was read"
            continue
        credits = []
        entry.seeds = tuple(sorted(data.splits))
        for s in sorted(data.splits):
            rows = data.splits[s][task.split]
            index, dropped = cycle_index(rows, encoded)
            kept = np.arange(index.shape[0])
            if dropped:  # the row of each kept cycle, for its id, images and captions
                known = np.array([item.key in encoded.image_rows for item in rows.image_items], dtype=bool)
                kept = np.flatnonzero(known[rows.image_index].all(axis=1))
            if index.shape[0] == 0:
                continue
            blocks = block_scores_from_embeddings(phi, psi, index)
            deltas = deltas_from_blocks(blocks)
            credit = cycle_credits(deltas, task.tie_tolerance)
            credits.append(credit)
            if entry.examples:
                continue  # examples come from the first seed; every seed enters the interval
            for kind, i in pick_examples(deltas, n_examples, seed):
                row = int(kept[i])
                block = blocks[i]
                entry.examples.append(
                    ExampleCycle(
                        kind,
                        str(rows.cycle_ids[row].as_py()),
                        s,
                        task.split,
                        rows.image_pair(row),
                        rows.caption_pair(row),
                        ((float(block[0, 0]), float(block[0, 1])), (float(block[1, 0]), float(block[1, 1]))),
                        float(deltas[i]),
                        float(credit[i]),
                    )
                )
        if credits:
            entry.bootstrap = bootstrap_interval(credits, seed=seed)
            entry.cycle_acc = float(np.mean([c.mean() for c in credits]))
        else:
            entry.unavailable_reason = "every cycle touches a skipped image"
    return out


def thumbnail(item: ImageItem, size: int = THUMBNAIL_SIZE) -> tuple[str, bytes]:
    """A small JPEG of ``item`` and its file name (content-addressed, so each image is made once)."""
    raw = item.read_bytes()
    try:
        with Image.open(io.BytesIO(raw)) as image:
            width, height = image.size
            if width * height > MAX_IMAGE_PIXELS:
                raise ValueError(f"image {item.key!r} is {width}x{height} pixels, over the thumbnail bound {MAX_IMAGE_PIXELS}")
            small = image.convert("RGB")
            small.thumbnail((size, size))
    except (OSError, Image.DecompressionBombError) as error:
        raise ValueError(f"image {item.key!r} cannot be decoded for a thumbnail ({error}); restore the file") from error
    buffer = io.BytesIO()
    small.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    name = hashlib.sha256(raw).hexdigest()[:20] + f"-{size}.jpg"
    return name, buffer.getvalue()
