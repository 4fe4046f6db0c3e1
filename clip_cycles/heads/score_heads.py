"""Learnable score heads on frozen image and caption features, kept in a registry.

A head maps a batch of image features ``phi`` (B, d_image) and caption features
``psi`` (B, d_caption) to one logit per row pair. Every head also gives the cycle
contrast of a batch of blocks through ``cycle_delta(phi1, phi2, psi1, psi2)``:

- additive heads (image-only, text-only, additive) return exact zeros: their
  row and column effects cancel in every complete block, so the cycle loss has
  no path to their parameters (zero gradient, not a small one);
- bilinear heads use the factorization Delta = (phi1 - phi2)^T M (psi1 - psi2),
  which drops their additive parts before any rounding can occur.

Heads are created with ``make_head(name, image_dim, caption_dim, rank=None, seed=0)``;
the initial parameters depend only on the seed. ``score_pairs`` and ``head_deltas``
evaluate a head in float64 on pre-sigmoid logits, as every CycleAcc here is scored.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from clip_cycles.algebra.contrast import CHUNK_CYCLES, deltas_from_blocks, validate_cycles, validate_features
from clip_cycles.registry import Registry

#: Registered head classes by name (filled by ``register_head``).
HEADS: Registry[type[ScoreHead]] = Registry("score head")


def register_head(name: str):
    """Class decorator that registers a ScoreHead subclass under ``name``."""

    def decorate(cls: type[ScoreHead]) -> type[ScoreHead]:
        HEADS.register(name, cls)
        cls.name = name
        return cls

    return decorate


def _normal(generator: torch.Generator, shape: tuple[int, ...], std: float) -> nn.Parameter:
    return nn.Parameter(torch.randn(shape, generator=generator, dtype=torch.float32) * std)


class ScoreHead(nn.Module):
    """Base class: a score s(u, v) on frozen features plus its cycle contrast."""

    name: ClassVar[str] = "base"
    #: True when the head needs a ``rank`` argument.
    takes_rank: ClassVar[bool] = False
    #: True when the score is a(u) + b(v) (+ constant): its cycle contrast is exactly 0.
    additive: ClassVar[bool] = False

    def __init__(self, image_dim: int, caption_dim: int, rank: int | None = None, seed: int = 0) -> None:
        super().__init__()
        for what, value in (("image_dim", image_dim), ("caption_dim", caption_dim)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"head {self.name!r}: {what} must be a positive integer, got {value!r}")
        if self.takes_rank:
            if rank is None or not isinstance(rank, (int, np.integer)) or rank < 1:
                raise ValueError(f"head {self.name!r} needs a positive integer rank, got {rank!r}")
        elif rank is not None:
            raise ValueError(f"head {self.name!r} takes no rank (got rank={rank!r}); pass rank=None")
        self.image_dim = int(image_dim)
        self.caption_dim = int(caption_dim)
        self.rank = None if rank is None else int(rank)
        self.seed = int(seed)

    def forward(self, phi: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def cycle_delta(self, phi1: torch.Tensor, phi2: torch.Tensor, psi1: torch.Tensor, psi2: torch.Tensor) -> torch.Tensor:
        """Delta = s(u1,v1) + s(u2,v2) - s(u1,v2) - s(u2,v1) for a batch of blocks, shape (B,)."""
        return (self(phi1, psi1) - self(phi1, psi2)) + (self(phi2, psi2) - self(phi2, psi1))

    #: Whether Delta is computed from the differences alone (:meth:`difference_delta`): bilinear heads.
    difference_only: ClassVar[bool] = False

    def difference_delta(self, dphi: torch.Tensor, dpsi: torch.Tensor) -> torch.Tensor:
        """Delta from ``dphi = phi1 - phi2`` and ``dpsi = psi1 - psi2`` (heads with :attr:`difference_only`).

        ``cycle_delta`` of those heads is exactly this on the differences it forms first, so a
        trainer may form every cycle's differences once and gather them per batch: same bits.
        """
        raise NotImplementedError(f"head {self.name!r} does not score from differences alone")

    def bilinear_export(self) -> dict[str, Any]:
        """The interaction part as numpy float64, ready for ``contrast.bilinear_deltas(..., **export)``.

        Returns ``{"matrix": M}`` (d_image x d_caption) or ``{"factors": (A, B)}`` with M = A B^T.
        Additive heads export the zero matrix: they have no interaction.
        """
        return {"matrix": np.zeros((self.image_dim, self.caption_dim))}

    def describe(self) -> dict[str, Any]:
        """JSON-ready identity of the head (name, dims, rank, seed, parameter count)."""
        return {
            "name": self.name,
            "image_dim": self.image_dim,
            "caption_dim": self.caption_dim,
            "rank": self.rank,
            "seed": self.seed,
            "n_parameters": int(sum(p.numel() for p in self.parameters())),
        }


class _AdditiveHead(ScoreHead):
    """Scores of the form a(u) + b(v) + c; the cycle contrast is exactly zero."""

    additive = True

    def cycle_delta(self, phi1: torch.Tensor, phi2: torch.Tensor, psi1: torch.Tensor, psi2: torch.Tensor) -> torch.Tensor:
        # The row effect a(u) and column effect b(v) cancel within the block by
        # construction, so the contrast is identically zero and carries no gradient.
        return phi1.new_zeros(phi1.shape[0])


@register_head("image_only")
class ImageOnlyHead(_AdditiveHead):
    """s(u, v) = w . phi(u) + c: sees the image alone."""

    def __init__(self, image_dim: int, caption_dim: int, rank: int | None = None, seed: int = 0) -> None:
        super().__init__(image_dim, caption_dim, rank, seed)
        g = torch.Generator().manual_seed(self.seed)
        self.image_weight = _normal(g, (self.image_dim,), self.image_dim**-0.5)
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, phi: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
        return phi @ self.image_weight + self.bias


@register_head("text_only")
class TextOnlyHead(_AdditiveHead):
    """s(u, v) = w . psi(v) + c: sees the caption alone."""

    def __init__(self, image_dim: int, caption_dim: int, rank: int | None = None, seed: int = 0) -> None:
        super().__init__(image_dim, caption_dim, rank, seed)
        g = torch.Generator().manual_seed(self.seed)
        self.caption_weight = _normal(g, (self.caption_dim,), self.caption_dim**-0.5)
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, phi: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
        return psi @ self.caption_weight + self.bias


@register_head("additive")
class AdditiveHead(_AdditiveHead):
    """s(u, v) = a . phi(u) + b . psi(v) + c: both parts, never their pairing."""

    def __init__(self, image_dim: int, caption_dim: int, rank: int | None = None, seed: int = 0) -> None:
        super().__init__(image_dim, caption_dim, rank, seed)
        g = torch.Generator().manual_seed(self.seed)
        self.image_weight = _normal(g, (self.image_dim,), self.image_dim**-0.5)
        self.caption_weight = _normal(g, (self.caption_dim,), self.caption_dim**-0.5)
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, phi: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
        return phi @ self.image_weight + psi @ self.caption_weight + self.bias


@register_head("diagonal")
class DiagonalHead(ScoreHead):
    """s(u, v) = sum_k m_k phi_k psi_k, i.e. M = diag(m); needs equal feature widths."""

    def __init__(self, image_dim: int, caption_dim: int, rank: int | None = None, seed: int = 0) -> None:
        super().__init__(image_dim, caption_dim, rank, seed)
        if self.image_dim != self.caption_dim:
            raise ValueError(f"head 'diagonal' needs equal image and caption widths, got {self.image_dim} and {self.caption_dim}")
        g = torch.Generator().manual_seed(self.seed)
        # Start near the plain dot product so the head begins as a cosine-like score.
        self.diag = nn.Parameter(1.0 + 0.01 * torch.randn((self.image_dim,), generator=g))

    def forward(self, phi: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
        return (phi * self.diag * psi).sum(dim=-1)

    difference_only = True

    def cycle_delta(self, phi1: torch.Tensor, phi2: torch.Tensor, psi1: torch.Tensor, psi2: torch.Tensor) -> torch.Tensor:
        return self.difference_delta(phi1 - phi2, psi1 - psi2)

    def difference_delta(self, dphi: torch.Tensor, dpsi: torch.Tensor) -> torch.Tensor:
        return (dphi * self.diag * dpsi).sum(dim=-1)

    def bilinear_export(self) -> dict[str, Any]:
        return {"matrix": np.diag(self.diag.detach().double().cpu().numpy())}


@register_head("bilinear")
class BilinearHead(ScoreHead):
    """s(u, v) = phi(u)^T M psi(v) with a full d_image x d_caption matrix M."""

    def __init__(self, image_dim: int, caption_dim: int, rank: int | None = None, seed: int = 0) -> None:
        super().__init__(image_dim, caption_dim, rank, seed)
        g = torch.Generator().manual_seed(self.seed)
        self.matrix = _normal(g, (self.image_dim, self.caption_dim), (self.image_dim * self.caption_dim) ** -0.5)

    def forward(self, phi: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
        return ((phi @ self.matrix) * psi).sum(dim=-1)

    difference_only = True

    def cycle_delta(self, phi1: torch.Tensor, phi2: torch.Tensor, psi1: torch.Tensor, psi2: torch.Tensor) -> torch.Tensor:
        return self.difference_delta(phi1 - phi2, psi1 - psi2)

    def difference_delta(self, dphi: torch.Tensor, dpsi: torch.Tensor) -> torch.Tensor:
        return ((dphi @ self.matrix) * dpsi).sum(dim=-1)

    def bilinear_export(self) -> dict[str, Any]:
        return {"matrix": self.matrix.detach().double().cpu().numpy().copy()}


@register_head("low_rank")
class LowRankHead(ScoreHead):
    """s(u, v) = (A^T phi(u)) . (B^T psi(v)), i.e. M = A B^T of rank r."""

    takes_rank = True

    def __init__(self, image_dim: int, caption_dim: int, rank: int | None = None, seed: int = 0) -> None:
        super().__init__(image_dim, caption_dim, rank, seed)
        g = torch.Generator().manual_seed(self.seed)
        # Random (not zero) factors: A = B = 0 is a saddle where both gradients vanish.
        self.image_factor = _normal(g, (self.image_dim, self.rank), self.image_dim**-0.5)
        self.caption_factor = _normal(g, (self.caption_dim, self.rank), self.caption_dim**-0.5)

    def forward(self, phi: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
        return ((phi @ self.image_factor) * (psi @ self.caption_factor)).sum(dim=-1)

    difference_only = True

    def cycle_delta(self, phi1: torch.Tensor, phi2: torch.Tensor, psi1: torch.Tensor, psi2: torch.Tensor) -> torch.Tensor:
        return self.difference_delta(phi1 - phi2, psi1 - psi2)

    def difference_delta(self, dphi: torch.Tensor, dpsi: torch.Tensor) -> torch.Tensor:
        return ((dphi @ self.image_factor) * (dpsi @ self.caption_factor)).sum(dim=-1)

    def bilinear_export(self) -> dict[str, Any]:
        return {
            "factors": (
                self.image_factor.detach().double().cpu().numpy().copy(),
                self.caption_factor.detach().double().cpu().numpy().copy(),
            )
        }


@register_head("oe")
class OEHead(LowRankHead):
    """The paper's OE class: rank-r bilinear + image-only head alpha + caption-only head beta + bias."""

    def __init__(self, image_dim: int, caption_dim: int, rank: int | None = None, seed: int = 0) -> None:
        super().__init__(image_dim, caption_dim, rank, seed)
        # A separate stream keeps the bilinear factors identical to a plain low_rank head of the same seed.
        g = torch.Generator().manual_seed(self.seed + 1_000_003)
        self.image_weight = _normal(g, (self.image_dim,), 0.01 * self.image_dim**-0.5)
        self.caption_weight = _normal(g, (self.caption_dim,), 0.01 * self.caption_dim**-0.5)
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, phi: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
        return super().forward(phi, psi) + phi @ self.image_weight + psi @ self.caption_weight + self.bias


def make_head(name: str, image_dim: int, caption_dim: int, rank: int | None = None, seed: int = 0) -> ScoreHead:
    """Create the registered head ``name``; parameters depend only on ``seed``.

    Raises ValueError for an unknown name, a missing rank on a rank head, or a rank
    given to a head that takes none.
    """
    return HEADS.get(name)(image_dim, caption_dim, rank=rank, seed=seed)


def check_feature_tables(head: ScoreHead, image_features: object, caption_features: object) -> tuple[np.ndarray, np.ndarray]:
    """Validate two feature tables against a head's widths; returns them as float64 numpy."""
    # validate_features keeps float32 tables as float32; heads score in float64.
    phi = validate_features(image_features, "image_features").astype(np.float64, copy=False)
    psi = validate_features(caption_features, "caption_features").astype(np.float64, copy=False)
    if phi.shape[0] == 0 or psi.shape[0] == 0:
        raise ValueError(f"empty feature table: image_features has {phi.shape[0]} rows, caption_features {psi.shape[0]}")
    if phi.shape[1] != head.image_dim:
        raise ValueError(f"image_features has width {phi.shape[1]} but head {head.name!r} expects {head.image_dim}")
    if psi.shape[1] != head.caption_dim:
        raise ValueError(f"caption_features has width {psi.shape[1]} but head {head.name!r} expects {head.caption_dim}")
    return phi, psi


def float64_copy(head: ScoreHead) -> ScoreHead:
    """A float64 copy of a head for scoring; the head itself (and its optimizer) is untouched."""
    return copy.deepcopy(head).to(torch.float64).eval()


def score_pairs(
    head: ScoreHead, image_features: object, caption_features: object, image_idx: object, caption_idx: object
) -> np.ndarray:
    """Float64 logits s(image_idx[i], caption_idx[i]) of a head (pre-sigmoid), shape (N,)."""
    phi, psi = check_feature_tables(head, image_features, caption_features)
    u = np.asarray(image_idx)
    v = np.asarray(caption_idx)
    if u.ndim != 1 or v.ndim != 1 or u.shape != v.shape:
        raise ValueError(f"image_idx and caption_idx must be 1-D of equal length, got {u.shape} and {v.shape}")
    if u.shape[0] == 0:
        raise ValueError("empty pair set: no pair to score")
    for name, idx, limit in (("image_idx", u, phi.shape[0]), ("caption_idx", v, psi.shape[0])):
        if not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"{name} must hold integers, got dtype {idx.dtype}")
        bad = (idx < 0) | (idx >= limit)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name}[{i}] = {int(idx[i])} is out of range for a table of {limit} rows")
    scorer = float64_copy(head)
    phi_t = torch.from_numpy(phi)
    psi_t = torch.from_numpy(psi)
    out = np.empty(u.shape[0])
    with torch.no_grad():
        for start in range(0, u.shape[0], CHUNK_CYCLES):
            su = torch.from_numpy(u[start : start + CHUNK_CYCLES].astype(np.int64))
            sv = torch.from_numpy(v[start : start + CHUNK_CYCLES].astype(np.int64))
            out[start : start + len(su)] = scorer(phi_t[su], psi_t[sv]).numpy()
    return out


def head_blocks(head: ScoreHead, image_features: object, caption_features: object, cycles: object) -> np.ndarray:
    """The (N, 2, 2) float64 logit blocks ``[[s11, s12], [s21, s22]]`` of a head on cycles (u1, u2, v1, v2)."""
    phi, psi = check_feature_tables(head, image_features, caption_features)
    index = validate_cycles(cycles, phi.shape[0], psi.shape[0])
    out = np.empty((index.shape[0], 2, 2))
    for a in range(2):
        for b in range(2):
            out[:, a, b] = score_pairs(head, phi, psi, index[:, a], index[:, 2 + b])
    return out


def head_deltas(head: ScoreHead, image_features: object, caption_features: object, cycles: object) -> np.ndarray:
    """Delta of every cycle from the head's float64 logits (four scores per block, not the factorization).

    This is the honest evaluation path: an additive head passes only because its
    row and column effects cancel to within the tie tolerance in float64.
    """
    return deltas_from_blocks(head_blocks(head, image_features, caption_features, cycles))
