"""Example cycles for the results page, read from the samples files the results name; and their thumbnails.

Nothing is recomputed: every field an example shows (task, seed, split, cycle id, images,
captions, ``s11..s22``, Delta, credit) is a line of the samples file that ``eval --samples``
wrote (:mod:`clip_cycles.evaluation.samples`), named by the result record with its sha256.
The page shows the hardest and easiest cycles (lowest and highest Delta) of the first seed and
a seeded random sample. Thumbnails are made from the image files the lines name
(``image_root`` / key) when they are reachable; where they are not, the page says so. Without
a ``cycle_acc_ci`` in the record, a percentile bootstrap over the samples' credits (within
each seed, then the mean over seeds) gives the interval, named as the page builder's.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from PIL import Image

from clip_cycles.regular_files import read_regular_file

#: Thumbnail edge in pixels (the longer side) and JPEG quality: small enough for a page of hundreds.
THUMBNAIL_SIZE = 96
JPEG_QUALITY = 80
#: An image with more pixels than this is not decoded for a thumbnail (decompression bombs).
MAX_IMAGE_PIXELS = 64_000_000
#: The largest image file read for a thumbnail.
MAX_THUMBNAIL_SOURCE_BYTES = 64 << 20
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_LEVEL = 0.95


@dataclass(frozen=True)
class ExampleImage:
    """One image of an example: its key, and the file it was read from (None: the samples name no reachable file)."""

    key: str
    path: Path | None


@dataclass(frozen=True)
class ExampleCycle:
    """One cycle as the page shows it (a samples line)."""

    kind: str  # hardest | easiest | random
    cycle_id: str
    seed: int
    split: str
    images: tuple[ExampleImage, ExampleImage]
    captions: tuple[str, str]
    scores: tuple[tuple[float, float], tuple[float, float]]
    delta: float
    credit: float


@dataclass
class FamilyExamples:
    """A family's example cycles for one model, the samples file they come from, and a bootstrap interval."""

    key: str
    model: str
    samples_file: str
    examples: list[ExampleCycle] = field(default_factory=list)
    bootstrap: dict[str, Any] | None = None
    unavailable_reason: str | None = None
    #: The leaderboard row (family and item set) whose number these examples belong to; the family key when one.
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
        "computed_by": "page builder, from the samples' credits (the record has no cycle_acc_ci)",
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


def _image(sample: Mapping[str, Any], which: str) -> ExampleImage:
    key, root = str(sample[which]), sample.get("image_root")
    return ExampleImage(key, Path(root) / key if isinstance(root, str) and root else None)


def examples_from_samples(
    key: str,
    model: str,
    samples_file: str,
    cycles: Mapping[tuple[int, str], Mapping[str, Any]],
    n: int,
    seed: int = 0,
    interval: bool = True,
) -> FamilyExamples:
    """``model``'s example cycles of family ``key`` from its samples (``(seed, cycle_id)`` -> line).

    ``interval``: also bootstrap an interval from the credits (for a record without ``cycle_acc_ci``).
    """
    entry = FamilyExamples(key, model, samples_file)
    per_seed: dict[int, list[Mapping[str, Any]]] = {}
    for (s, _), sample in sorted(cycles.items()):
        per_seed.setdefault(s, []).append(sample)
    if not per_seed:
        entry.unavailable_reason = "the samples file holds no cycle of this family"
        return entry
    if interval:
        credits = [np.array([float(x["credit"]) for x in lines], dtype=np.float64) for _, lines in sorted(per_seed.items())]
        entry.bootstrap = bootstrap_interval(credits, seed=seed)
    first = min(per_seed)
    lines = per_seed[first]  # in the file's order of cycle ids (sorted), as the samples hold them
    deltas = np.array([float(x["delta"]) for x in lines], dtype=np.float64)
    for kind, i in pick_examples(deltas, n, seed):
        x = lines[i]
        entry.examples.append(
            ExampleCycle(
                kind,
                str(x["cycle_id"]),
                int(x["seed"]),
                str(x["split"]),
                (_image(x, "image_0"), _image(x, "image_1")),
                (str(x["caption_0"]), str(x["caption_1"])),
                ((float(x["s11"]), float(x["s12"])), (float(x["s21"]), float(x["s22"]))),
                float(x["delta"]),
                float(x["credit"]),
            )
        )
    return entry


def thumbnail(item: ExampleImage, size: int = THUMBNAIL_SIZE) -> tuple[str, bytes] | None:
    """A small JPEG of ``item`` and its file name (content-addressed); None when its file is not reachable.

    Only a regular file within a byte bound is read; an undecodable or oversized image is a ValueError.
    """
    if item.path is None:
        return None
    try:
        raw = read_regular_file(item.path, MAX_THUMBNAIL_SOURCE_BYTES, "image file")
    except (OSError, ValueError):
        return None
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
