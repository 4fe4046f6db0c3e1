"""A benchmark subset as linear comparisons of image-caption scores, and its exact cycles.

Every format the adapters read becomes a :class:`ComparisonSet`: comparison c is
T_c(s) = sum_e w_e s(u_e, v_e) over its edges (image, caption, signed weight), won when
T_c > tie_tolerance (credit 1, 0.5 on a tie, 0 when lost), exactly like a cycle's
contrast. A one-image hard negative (u, v+) vs (u, v-) is two edges with weights +1, -1
(:func:`clip_cycles.algebra.audits.hard_negative_edges`); a Winoground block gives its four
directional comparisons (:func:`clip_cycles.algebra.audits.winoground_comparisons`).

The per-comparison signed degrees (sparse matrices over image and caption vertices)
are what every additive score sees: T_c(a(u) + b(v)) = D_img[c] . a + D_cap[c] . b.

:func:`pair_crossing_comparisons` finds exact cycles inside a hard-negative design: two
comparisons (u1, v1 > v2) and (u2, v2 > v1) on different images together are the block
(u1, u2, v1, v2), whose contrast cancels every additive score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Hashable, Sequence

import numpy as np
from scipy import sparse

from clip_cycles.algebra.audits import DEGREE_TOL
from clip_cycles.data.sources.images import ImageItem, decode_errors, decode_rgb
from clip_cycles.data.sources.text_normalize import caption_key


@dataclass(frozen=True)
class CroppedImageItem(ImageItem):
    """An image file seen through a box ``(x, y, w, h)`` in pixels (ARO's VG crops).

    ``read_bytes`` returns the crop as PNG, so the feature cache keys it by the crop's
    content like any other image.
    """

    box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    def read_bytes(self) -> bytes:
        import io

        from PIL import Image

        raw = super().read_bytes()
        x, y, w, h = self.box
        label = f"image {self.key!r} at {self.path}"
        try:
            with Image.open(io.BytesIO(raw)) as image:
                check_box(self.box, image.size, label)  # before the crop: a box of 1e300 is no allocation
                crop = decode_rgb(image, label).crop((x, y, x + w, y + h))
            out = io.BytesIO()
            crop.save(out, format="PNG")
        except ValueError:
            raise  # already a sentence naming the image
        except decode_errors() as error:
            detail = str(error) if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
            raise ValueError(f"{label} cannot be decoded: {detail}") from error
        return out.getvalue()


def check_box(box: tuple[float, float, float, float], size: tuple[int, int], label: str) -> None:
    """Refuse a crop box ``(x, y, w, h)`` that is not finite or reaches more than one image size past the
    ``(width, height)`` image's edges (a published box lies on its image; a hostile one would make PIL
    allocate its area), with a sentence naming the image and the box."""
    x, y, w, h = box
    width, height = size
    inside = (
        all(math.isfinite(v) for v in box)
        and w > 0
        and h > 0
        and x >= -width
        and y >= -height
        and x + w <= 2 * width
        and y + h <= 2 * height
    )
    if not inside:
        raise ValueError(
            f"{label}: box x={x:g} y={y:g} w={w:g} h={h:g} does not fit its {width}x{height} image; "
            "fix the item's bbox_x, bbox_y, bbox_w, bbox_h or pass --skip-bad-images to count and skip it"
        )


@dataclass
class ComparisonSet:
    """One subset of a benchmark: vertex tables, comparisons and their signed edges.

    ``cycles`` holds exact cycles the format itself declares (Winoground blocks) as
    (N, 4) indices ``(u1, u2, v1, v2)`` into ``images`` / ``captions``; None means
    "find them by pairing crossing hard negatives".
    """

    name: str
    images: list[ImageItem]
    captions: list[str]
    comparison_ids: list[str]
    item_ids: list[str]
    edge_comparison: np.ndarray
    edge_image: np.ndarray
    edge_caption: np.ndarray
    edge_weight: np.ndarray
    #: Per edge, the length in characters of the caption as published at that edge (a merged spelling
    #: keeps its own length, where the vertex keeps the first spelling).
    edge_length: np.ndarray
    tags: list[tuple[str, ...]]
    kind: str = "comparisons"
    cycles: np.ndarray | None = None
    cycle_tags: list[tuple[str, ...]] | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    #: Caption occurrences whose text differed from their vertex's only in whitespace or case.
    caption_variants_merged: int = 0
    #: Why the subset has no comparison to audit (an empty file, every item dropped, an unreadable file); None when it has.
    unusable: str | None = None

    @property
    def n_comparisons(self) -> int:
        return len(self.comparison_ids)

    @property
    def n_items(self) -> int:
        return len(set(self.item_ids))

    def degree_matrices(self) -> tuple[sparse.csr_matrix, sparse.csr_matrix]:
        """Signed degrees per comparison: (C x images) and (C x captions), duplicates summed."""
        shape_c = self.n_comparisons
        d_img = sparse.coo_matrix(
            (self.edge_weight, (self.edge_comparison, self.edge_image)), shape=(shape_c, len(self.images))
        ).tocsr()
        d_cap = sparse.coo_matrix(
            (self.edge_weight, (self.edge_comparison, self.edge_caption)), shape=(shape_c, len(self.captions))
        ).tocsr()
        for matrix in (d_img, d_cap):
            matrix.sum_duplicates()
            # Float weights may leave rounding dust where a degree should be zero.
            matrix.data[np.abs(matrix.data) <= DEGREE_TOL] = 0.0
            matrix.eliminate_zeros()
        return d_img, d_cap

    def restrict(self, keep: np.ndarray, reason: str) -> ComparisonSet:
        """The comparisons where ``keep`` holds; the others are counted under ``reason`` in ``skipped``."""
        keep = np.asarray(keep, dtype=bool)
        dropped = int((~keep).sum())
        if not dropped:
            return self
        new_index = np.cumsum(keep) - 1
        edge_keep = keep[self.edge_comparison]
        skipped = dict(self.skipped)
        skipped[reason] = skipped.get(reason, 0) + dropped
        cycles, cycle_tags = self.cycles, self.cycle_tags
        if cycles is not None:
            # A declared cycle survives only while all its comparisons do (its images are all encoded).
            images_left = set(self.edge_image[edge_keep].tolist())
            ok = np.array([u1 in images_left and u2 in images_left for u1, u2, _, _ in cycles.tolist()], dtype=bool)
            cycles = cycles[ok]
            cycle_tags = [t for t, k in zip(cycle_tags or [() for _ in ok], ok) if k]
        return ComparisonSet(
            name=self.name,
            images=self.images,
            captions=self.captions,
            comparison_ids=[c for c, k in zip(self.comparison_ids, keep) if k],
            item_ids=[c for c, k in zip(self.item_ids, keep) if k],
            edge_comparison=new_index[self.edge_comparison[edge_keep]],
            edge_image=self.edge_image[edge_keep],
            edge_caption=self.edge_caption[edge_keep],
            edge_weight=self.edge_weight[edge_keep],
            tags=[t for t, k in zip(self.tags, keep) if k],
            kind=self.kind,
            cycles=cycles,
            cycle_tags=cycle_tags,
            skipped=skipped,
            caption_variants_merged=self.caption_variants_merged,
            edge_length=self.edge_length[edge_keep],
        )

    def caption_lengths(self) -> np.ndarray:
        """Per edge, the caption's length in characters as published (what the length rules and ceiling read)."""
        return self.edge_length


class ComparisonSetBuilder:
    """Interns images (by key) and captions (by :func:`caption_key`: whitespace and case) while comparisons are added."""

    def __init__(self, name: str, kind: str = "comparisons") -> None:
        self.name = name
        self.kind = kind
        self.images: list[ImageItem] = []
        self.image_index: dict[str, int] = {}
        self.captions: list[str] = []
        self.caption_index: dict[str, int] = {}
        self.comparison_ids: list[str] = []
        self.item_ids: list[str] = []
        self.tags: list[tuple[str, ...]] = []
        self._edges: list[tuple[int, int, int, float, float]] = []
        self.cycles: list[tuple[int, int, int, int]] = []
        self.cycle_tags: list[tuple[str, ...]] = []
        self.declares_cycles = False
        self.skipped: dict[str, int] = {}
        self.caption_variants_merged = 0

    def image(self, item: ImageItem) -> int:
        index = self.image_index.get(item.key)
        if index is None:
            index = self.image_index[item.key] = len(self.images)
            self.images.append(item)
        return index

    def caption(self, text: str) -> int:
        # Captions match under caption_key (whitespace and case), so "a dog " and "a dog" are one
        # vertex; the first spelling seen is the text kept. Merged spellings are counted.
        key = caption_key(text)
        index = self.caption_index.get(key)
        if index is None:
            index = self.caption_index[key] = len(self.captions)
            self.captions.append(text)
        elif self.captions[index] != text:
            self.caption_variants_merged += 1
        return index

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + count

    def add(
        self,
        comparison_id: str,
        item_id: str,
        images: Sequence[ImageItem],
        captions: Sequence[str],
        weights: Sequence[float],
        tags: Sequence[str] = (),
    ) -> None:
        """One comparison from parallel edge sequences (the shape :mod:`clip_cycles.algebra.audits` uses)."""
        c = len(self.comparison_ids)
        self.comparison_ids.append(comparison_id)
        self.item_ids.append(item_id)
        self.tags.append(tuple(tags))
        for item, text, weight in zip(images, captions, weights):
            self._edges.append((c, self.image(item), self.caption(text), float(weight), float(len(text))))

    def add_cycle(self, image_1: ImageItem, image_2: ImageItem, caption_1: str, caption_2: str, tags: Sequence[str] = ()) -> None:
        """Declare an exact cycle of the format (Winoground block); its comparisons are added separately."""
        self.declares_cycles = True
        self.cycles.append((self.image(image_1), self.image(image_2), self.caption(caption_1), self.caption(caption_2)))
        self.cycle_tags.append(tuple(tags))

    def build(self) -> ComparisonSet:
        """The subset; one with no comparison is returned empty with its reason (:func:`empty_subset`), never raised."""
        if not self.comparison_ids:
            if self.skipped:
                reason = f"every item dropped (skipped: {dict(sorted(self.skipped.items()))})"
            else:
                reason = "empty: the subset holds no item"
            return empty_subset(self.name, reason, self.kind, self.skipped)
        edges = np.asarray(self._edges, dtype=np.float64).reshape(-1, 5)
        cycles = np.asarray(self.cycles, dtype=np.int64).reshape(-1, 4) if self.declares_cycles else None
        return ComparisonSet(
            name=self.name,
            images=self.images,
            captions=self.captions,
            comparison_ids=self.comparison_ids,
            item_ids=self.item_ids,
            edge_comparison=edges[:, 0].astype(np.int64),
            edge_image=edges[:, 1].astype(np.int64),
            edge_caption=edges[:, 2].astype(np.int64),
            edge_weight=edges[:, 3].copy(),
            tags=self.tags,
            kind=self.kind,
            cycles=cycles,
            cycle_tags=list(self.cycle_tags) if self.declares_cycles else None,
            skipped=dict(self.skipped),
            caption_variants_merged=self.caption_variants_merged,
            edge_length=edges[:, 4].copy(),
        )


def empty_subset(name: str, reason: str, kind: str = "comparisons", skipped: dict[str, int] | None = None) -> ComparisonSet:
    """A subset with no comparison: reported as a row (count 0 and ``reason``), never audited, never an abort."""
    none = np.zeros(0, dtype=np.int64)
    return ComparisonSet(
        name=name,
        images=[],
        captions=[],
        comparison_ids=[],
        item_ids=[],
        edge_comparison=none,
        edge_image=none.copy(),
        edge_caption=none.copy(),
        edge_weight=np.zeros(0),
        edge_length=np.zeros(0),
        tags=[],
        kind=kind,
        skipped=dict(skipped or {}),
        unusable=reason,
    )


@dataclass
class CyclePairing:
    """Exact cycles found in a design: (N, 4) ``(u1, u2, v1, v2)`` and the comparisons each one joins."""

    cycles: np.ndarray
    comparisons: np.ndarray  # (N, 2): the comparisons each cycle is made of ((c, c) for a whole-cycle comparison)
    declared: bool


def _hard_negative_arrays(cs: ComparisonSet) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(comparison, image, positive caption, negative caption) arrays of the hard-negative-shaped comparisons."""
    order = np.argsort(cs.edge_comparison, kind="stable")
    counts = np.bincount(cs.edge_comparison, minlength=cs.n_comparisons)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    two = np.flatnonzero(counts == 2)
    e1, e2 = order[starts[two]], order[starts[two] + 1]
    w1, w2 = cs.edge_weight[e1], cs.edge_weight[e2]
    ok = (cs.edge_image[e1] == cs.edge_image[e2]) & (cs.edge_caption[e1] != cs.edge_caption[e2]) & (w1 == -w2) & (w1 != 0)
    first_positive = w1 > 0
    positive = np.where(first_positive, cs.edge_caption[e1], cs.edge_caption[e2])
    negative = np.where(first_positive, cs.edge_caption[e2], cs.edge_caption[e1])
    return two[ok], cs.edge_image[e1][ok], positive[ok], negative[ok]


def hard_negative_shape(cs: ComparisonSet) -> dict[int, tuple[int, int, int]]:
    """Comparisons of the shape (u, v+) - (u, v-) with v+ != v-: comparison -> (u, v+, v-)."""
    return {c: (u, p, n) for c, u, p, n in zip(*(a.tolist() for a in _hard_negative_arrays(cs)))}


def _edges_by_comparison(cs: ComparisonSet, size: int) -> dict[int, np.ndarray]:
    """The edges of every comparison that has exactly ``size`` of them."""
    order = np.argsort(cs.edge_comparison, kind="stable")
    counts = np.bincount(cs.edge_comparison, minlength=cs.n_comparisons)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return {c: order[starts[c] : starts[c] + size] for c in np.flatnonzero(counts == size).tolist()}


def cycle_shape(cs: ComparisonSet) -> dict[int, tuple[int, int, int, int]]:
    """Comparisons that are a whole cycle by themselves: comparison -> (u1, u2, v1, v2).

    Four edges on two images and two captions, weight +w on (u1, v1) and (u2, v2) and
    -w on the two swaps.
    """
    out: dict[int, tuple[int, int, int, int]] = {}
    for c, edges in _edges_by_comparison(cs, 4).items():
        cells = {(int(cs.edge_image[e]), int(cs.edge_caption[e])): float(cs.edge_weight[e]) for e in edges}
        images = sorted({u for u, _ in cells})
        captions = sorted({v for _, v in cells})
        if len(cells) != 4 or len(images) != 2 or len(captions) != 2:
            continue
        (u1, u2), (va, vb) = images, captions
        w = cells[(u1, va)]
        if w > 0 and cells[(u2, vb)] == w and cells[(u1, vb)] == -w and cells[(u2, va)] == -w:
            out[c] = (u1, u2, va, vb)
        elif w < 0 and cells[(u2, vb)] == w and cells[(u1, vb)] == -w and cells[(u2, va)] == -w:
            out[c] = (u1, u2, vb, va)
    return out


def pair_crossing_comparisons(cs: ComparisonSet) -> CyclePairing:
    """Exact cycles of a design: the format's declared ones, else the comparisons that are whole
    cycles plus crossing hard negatives paired greedily.

    Comparison (u1, v1 > v2) pairs with the first unpaired (u2, v2 > v1), u2 != u1, in
    comparison order (deterministic); captions match by vertex, and caption vertices are
    interned under :func:`clip_cycles.data.sources.text_normalize.caption_key` (whitespace and case).
    Each comparison joins at most one cycle.
    """
    if cs.cycles is not None:
        return CyclePairing(cs.cycles, np.zeros((0, 2), dtype=np.int64), declared=True)
    comparisons, images, positives, negatives = _hard_negative_arrays(cs)
    # Only comparisons whose reversed caption pair occurs at all can pair: the loop visits those alone.
    width = len(cs.captions)
    key, reverse = positives * width + negatives, negatives * width + positives
    candidate = np.isin(key, reverse)
    shapes = {
        c: (u, p, n)
        for c, u, p, n in zip(
            comparisons[candidate].tolist(),
            images[candidate].tolist(),
            positives[candidate].tolist(),
            negatives[candidate].tolist(),
        )
    }
    waiting: dict[tuple[int, int], list[int]] = {}
    whole = cycle_shape(cs)
    cycles: list[tuple[int, int, int, int]] = [whole[c] for c in sorted(whole)]
    joined: list[tuple[int, int]] = [(c, c) for c in sorted(whole)]
    for c in sorted(shapes):
        u, pos, neg = shapes[c]
        partners = waiting.get((neg, pos), [])
        match = next((i for i, other in enumerate(partners) if shapes[other][0] != u), None)
        if match is None:
            waiting.setdefault((pos, neg), []).append(c)
            continue
        other = partners.pop(match)
        u_other, pos_other, neg_other = shapes[other]
        # The earlier comparison gives (u1, v1); the block is (u1, u2, v1, v2) in Winoground order.
        cycles.append((u_other, u, pos_other, neg_other))
        joined.append((other, c))
    return CyclePairing(
        np.asarray(cycles, dtype=np.int64).reshape(-1, 4), np.asarray(joined, dtype=np.int64).reshape(-1, 2), declared=False
    )


def vertex_ids(cs: ComparisonSet) -> tuple[list[Hashable], list[Hashable], list[float]]:
    """All edges as (image key, caption text, weight) lists, the input of :func:`clip_cycles.algebra.audits.signed_degrees`."""
    keys = [item.key for item in cs.images]
    return (
        [keys[i] for i in cs.edge_image.tolist()],
        [cs.captions[i] for i in cs.edge_caption.tolist()],
        cs.edge_weight.tolist(),
    )
