"""The cycle contrast, exact CycleAcc with half ties, and vectorized Delta gathering.

A cycle is a complete 2x2 block over images (u1, u2) and captions (v1, v2) whose
matched pairs are (u1, v1) and (u2, v2). Everywhere in clip_cycles a set of N
cycles given by table indices is an integer array of shape (N, 4) with columns
``(u1, u2, v1, v2)``, i.e. Winoground's ``image_0, image_1, caption_0, caption_1``.

All arithmetic is float64. The tie tolerance ``DEFAULT_TIE_TOLERANCE`` is one fixed
absolute number for every block, model and run; it never scales with score size,
so adding image-only or caption-only terms changes neither Delta nor the tie call.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from clip_cycles.settings import numba_disabled

#: Absolute tolerance under which |Delta| counts as a tie (half credit). Cosine
#: scores live in [-1, 1] and Delta in [-4, 4]; float64 rounding of four products
#: of unit vectors is ~1e-15, so 1e-9 separates real signal from arithmetic noise
#: with six orders of margin while never absorbing a meaningful contrast.
DEFAULT_TIE_TOLERANCE: float = 1e-9

#: Cycles processed per chunk when gathering from embedding tables: bounds the
#: float64 temporaries to a few hundred MB whatever N is.
CHUNK_CYCLES: int = 32768

CYCLE_COLUMNS = ("u1", "u2", "v1", "v2")


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def as_float64_vector(values: object, name: str) -> np.ndarray:
    """Return ``values`` as a finite 1-D float64 array or raise ValueError naming ``name``."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 0:
        array = array.reshape(1)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per cycle), got shape {array.shape}")
    bad = ~np.isfinite(array)
    if bad.any():
        i = _first_bad(bad)
        raise ValueError(f"{name} has a non-finite value ({float(array[i])}) at index {i}")
    return array


def cycle_contrast(s11: object, s12: object, s21: object, s22: object) -> np.ndarray:
    """Cycle contrast Delta = s11 + s22 - s12 - s21, per cycle, in float64.

    Parameters
    ----------
    s11, s12, s21, s22:
        Scores of the pairs (u1,v1), (u1,v2), (u2,v1), (u2,v2); scalars or 1-D arrays
        of equal length.

    Returns
    -------
    numpy.ndarray of shape (N,).
    """
    parts = [as_float64_vector(v, n) for v, n in ((s11, "s11"), (s12, "s12"), (s21, "s21"), (s22, "s22"))]
    lengths = {p.shape[0] for p in parts}
    if len(lengths) != 1:
        raise ValueError(
            "s11, s12, s21, s22 must have the same length, got "
            + ", ".join(f"{n}={p.shape[0]}" for n, p in zip(("s11", "s12", "s21", "s22"), parts))
        )
    if parts[0].shape[0] == 0:
        raise ValueError("empty cycle set: cycle_contrast needs at least one cycle")
    # Pair the terms as (s11 - s12) + (s22 - s21) so that a row effect a(u) cancels
    # inside each parenthesis before any addition can round it.
    return (parts[0] - parts[1]) + (parts[3] - parts[2])


def cycle_credits(delta: object, tie_tolerance: float = DEFAULT_TIE_TOLERANCE) -> np.ndarray:
    """Per-cycle credit: 1 if Delta > tie_tolerance, 0.5 if |Delta| <= tie_tolerance, 0 if Delta < -tie_tolerance."""
    d = as_float64_vector(delta, "delta")
    if d.shape[0] == 0:
        raise ValueError("empty cycle set: no cycle to score")
    if not (np.isfinite(tie_tolerance) and tie_tolerance >= 0):
        raise ValueError(f"tie tolerance must be a finite non-negative number, got {tie_tolerance!r}")
    credits = np.full(d.shape, 0.5)
    credits[d > tie_tolerance] = 1.0
    credits[d < -tie_tolerance] = 0.0
    return credits


def cycle_acc(delta: object, tie_tolerance: float = DEFAULT_TIE_TOLERANCE) -> float:
    """Exact CycleAcc: mean of the per-cycle credits (1 / 0.5 / 0) with tie tolerance ``tie_tolerance``."""
    return float(cycle_credits(delta, tie_tolerance).mean())


def validate_cycles(cycles: object, n_images: int | None = None, n_captions: int | None = None) -> np.ndarray:
    """Check an (N, 4) index array with columns (u1, u2, v1, v2) and return it as int64.

    Raises ValueError for a wrong shape, an empty set, negative or out-of-range
    indices, or a degenerate block (u1 == u2 or v1 == v2), naming the first
    offending cycle.
    """
    array = np.asarray(cycles)
    if array.ndim != 2 or array.shape[1] != 4:
        raise ValueError(f"cycles must have shape (N, 4) with columns {CYCLE_COLUMNS}, got {array.shape}")
    if array.shape[0] == 0:
        raise ValueError("empty cycle set: at least one cycle is needed")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"cycle indices must be integers, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    negative = (array < 0).any(axis=1)
    if negative.any():
        i = _first_bad(negative)
        raise ValueError(f"cycle {i} has a negative index: {array[i].tolist()}")
    for cols, limit, what in (((0, 1), n_images, "image"), ((2, 3), n_captions, "caption")):
        if limit is not None:
            over = (array[:, list(cols)] >= limit).any(axis=1)
            if over.any():
                i = _first_bad(over)
                raise ValueError(f"cycle {i} has a {what} index out of range (table has {limit} rows): {array[i].tolist()}")
    same_image = array[:, 0] == array[:, 1]
    if same_image.any():
        i = _first_bad(same_image)
        raise ValueError(f"cycle {i} repeats its image (u1 == u2 == {array[i, 0]}): a block needs two distinct images")
    same_caption = array[:, 2] == array[:, 3]
    if same_caption.any():
        i = _first_bad(same_caption)
        raise ValueError(f"cycle {i} repeats its caption (v1 == v2 == {array[i, 2]}): a block needs two distinct captions")
    return array


def validate_features(features: object, name: str) -> np.ndarray:
    """Return a finite 2-D feature table or raise ValueError naming ``name`` and the first bad row.

    float32 tables stay float32 (half the memory traffic); every product is then
    formed in float64, where products of float32 values are exact. Anything else
    is converted to float64.
    """
    table = np.asarray(features)
    if table.dtype != np.float32:
        table = table.astype(np.float64, copy=False)
    if table.ndim != 2:
        raise ValueError(f"{name} must be a 2-D table (rows x dims), got shape {table.shape}")
    bad = ~np.isfinite(table).all(axis=1)
    if bad.any():
        raise ValueError(f"{name} has a non-finite value in row {_first_bad(bad)}")
    return table


def block_scores_from_embeddings(image_features: object, caption_features: object, cycles: object) -> np.ndarray:
    """The four dot-product scores of every block, shape (N, 2, 2): ``[[s11, s12], [s21, s22]]``.

    Features are used as given (normalize them first for cosine scores).
    """
    phi = validate_features(image_features, "image_features")
    psi = validate_features(caption_features, "caption_features")
    if phi.shape[1] != psi.shape[1]:
        raise ValueError(f"image and caption features differ in width: {phi.shape[1]} vs {psi.shape[1]}")
    index = validate_cycles(cycles, phi.shape[0], psi.shape[0])
    out = np.empty((index.shape[0], 2, 2))
    for start in range(0, index.shape[0], CHUNK_CYCLES):
        chunk = index[start : start + CHUNK_CYCLES]
        for a in range(2):
            images = phi[chunk[:, a]].astype(np.float64)
            for b in range(2):
                out[start : start + len(chunk), a, b] = np.einsum("ij,ij->i", images, psi[chunk[:, 2 + b]].astype(np.float64))
    return out


def deltas_from_blocks(blocks: object) -> np.ndarray:
    """Delta of each (N, 2, 2) block ``[[s11, s12], [s21, s22]]``."""
    array = np.asarray(blocks, dtype=np.float64)
    if array.ndim != 3 or array.shape[1:] != (2, 2):
        raise ValueError(f"blocks must have shape (N, 2, 2), got {array.shape}")
    return cycle_contrast(array[:, 0, 0], array[:, 0, 1], array[:, 1, 0], array[:, 1, 1])


def deltas_from_embeddings(image_features: object, caption_features: object, cycles: object) -> np.ndarray:
    """Delta of every cycle under the dot-product score, via (phi1 - phi2) . (psi1 - psi2).

    The factorized form touches two difference vectors per cycle instead of four
    dot products; it is chunked so memory stays bounded for millions of cycles.
    """
    phi = validate_features(image_features, "image_features")
    psi = validate_features(caption_features, "caption_features")
    if phi.shape[1] != psi.shape[1]:
        raise ValueError(f"image and caption features differ in width: {phi.shape[1]} vs {psi.shape[1]}")
    index = validate_cycles(cycles, phi.shape[0], psi.shape[0])
    return _factorized_deltas(phi, psi, index)


def bilinear_deltas(
    image_features: object,
    caption_features: object,
    cycles: object,
    matrix: object | None = None,
    factors: tuple[object, object] | None = None,
) -> np.ndarray:
    """Delta of every cycle under s(u, v) = phi(u)^T M psi(v).

    Uses Delta = (phi1 - phi2)^T M (psi1 - psi2). Give either ``matrix`` M of shape
    (d_image, d_caption) or ``factors`` (A, B) with M = A B^T (low rank).
    """
    phi = validate_features(image_features, "image_features")
    psi = validate_features(caption_features, "caption_features")
    index = validate_cycles(cycles, phi.shape[0], psi.shape[0])
    if (matrix is None) == (factors is None):
        raise ValueError("give exactly one of matrix (M) or factors (A, B)")
    if matrix is not None:
        m = validate_features(matrix, "matrix")
        if m.shape != (phi.shape[1], psi.shape[1]):
            raise ValueError(f"matrix must have shape {(phi.shape[1], psi.shape[1])}, got {m.shape}")
        return _factorized_deltas(phi, psi @ m.T, index)
    a = validate_features(factors[0], "factor A")
    b = validate_features(factors[1], "factor B")
    if a.shape[0] != phi.shape[1] or b.shape[0] != psi.shape[1] or a.shape[1] != b.shape[1]:
        raise ValueError(f"factors must be A (d_image x r), B (d_caption x r); got A {a.shape}, B {b.shape}")
    # Project once per table row (not per cycle): rank-r differences are cheap.
    return _factorized_deltas(phi @ a, psi @ b, index)


def _numpy_factorized_deltas(left: np.ndarray, right: np.ndarray, index: np.ndarray) -> np.ndarray:
    out = np.empty(index.shape[0])
    for start in range(0, index.shape[0], CHUNK_CYCLES):
        chunk = index[start : start + CHUNK_CYCLES]
        d_image = left[chunk[:, 0]].astype(np.float64) - left[chunk[:, 1]]
        d_caption = right[chunk[:, 2]].astype(np.float64) - right[chunk[:, 3]]
        out[start : start + len(chunk)] = np.einsum("ij,ij->i", d_image, d_caption)
    return out


_NUMBA_KERNEL: Callable | None = None


def _numba_kernel() -> Callable | None:
    """The fused gather-and-dot kernel, compiled on first use; None without numba.

    Gathering four table rows per cycle is memory-bound; fusing the gathers with the
    dot product (no temporaries) and running it on all cores roughly quadruples
    throughput over chunked numpy. Set CLIP_CYCLES_NO_NUMBA=1 to use numpy only.
    """
    global _NUMBA_KERNEL
    if _NUMBA_KERNEL is None and not numba_disabled():
        try:
            from numba import njit, prange
        except ImportError:
            return None

        @njit(parallel=True, cache=True)
        def kernel(left, right, index, out):  # pragma: no cover - compiled
            for i in prange(index.shape[0]):
                u1, u2, v1, v2 = index[i, 0], index[i, 1], index[i, 2], index[i, 3]
                acc = 0.0
                for k in range(left.shape[1]):
                    # float32 inputs are widened first: their products are exact in float64.
                    acc += (np.float64(left[u1, k]) - np.float64(left[u2, k])) * (
                        np.float64(right[v1, k]) - np.float64(right[v2, k])
                    )
                out[i] = acc

        _NUMBA_KERNEL = kernel
    return _NUMBA_KERNEL


def _factorized_deltas(left: np.ndarray, right: np.ndarray, index: np.ndarray) -> np.ndarray:
    if left.shape[1] != right.shape[1]:
        raise ValueError(f"feature widths differ after projection: {left.shape[1]} vs {right.shape[1]}")
    kernel = _numba_kernel()
    if kernel is None or left.dtype != right.dtype:
        return _numpy_factorized_deltas(left, right, index)
    out = np.empty(index.shape[0])
    kernel(np.ascontiguousarray(left), np.ascontiguousarray(right), np.ascontiguousarray(index), out)
    return out


ScoreFunction = Callable[[np.ndarray, np.ndarray], object]


def block_scores_from_score_fn(score_fn: ScoreFunction, cycles: object) -> np.ndarray:
    """The (N, 2, 2) blocks from a vectorized score function ``score_fn(image_idx, caption_idx)``.

    ``score_fn`` receives two int64 arrays of equal length and returns one score per
    pair; it is called once per block position (four calls in all), never per cycle.
    """
    index = validate_cycles(cycles)
    out = np.empty((index.shape[0], 2, 2))
    for a in range(2):
        for b in range(2):
            name = f"score_fn output for s{a + 1}{b + 1}"
            values = as_float64_vector(score_fn(index[:, a], index[:, 2 + b]), name)
            if values.shape[0] != index.shape[0]:
                raise ValueError(f"{name} has {values.shape[0]} values for {index.shape[0]} pairs")
            out[:, a, b] = values
    return out


def deltas_from_score_fn(score_fn: ScoreFunction, cycles: object) -> np.ndarray:
    """Delta of every cycle under a vectorized score function (see block_scores_from_score_fn)."""
    return deltas_from_blocks(block_scores_from_score_fn(score_fn, cycles))
