"""Training losses for score heads, kept in a registry by name.

Two kinds of loss, told apart by the data they consume:

- ``"cycle"`` losses see a batch of complete blocks (features of u1, u2, v1, v2):
  the cycle loss softplus(-Delta) and the four-entry BCE on the block;
- ``"pairwise"`` losses see a batch of (image, caption, label) pairs: pairwise BCE.

The cycle loss depends on the head only through Delta, so image-only and
caption-only terms receive no gradient from it; the four-entry BCE depends on the
absolute logits and can reward such terms (REFERENCE.md, "Training objective").
All losses act on logits, never on sigmoids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from clip_cycles.registry import Registry

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from clip_cycles.heads.score_heads import ScoreHead

LOSS_KINDS = ("cycle", "pairwise")


@dataclass(frozen=True)
class LossSpec:
    """A registered loss: its name, the kind of batch it consumes, and the function.

    ``cycle`` losses: ``fn(head, phi1, phi2, psi1, psi2) -> scalar``.
    ``pairwise`` losses: ``fn(head, phi, psi, labels) -> scalar``.
    ``difference_fn(head, dphi, dpsi)``: the same loss from each cycle's feature differences, for
    heads that score from them alone (``difference_only``); a trainer may form them once.
    """

    name: str
    kind: str
    fn: Callable[..., torch.Tensor]
    difference_fn: Callable[..., torch.Tensor] | None = None


LOSSES: Registry[LossSpec] = Registry("loss")


def register_loss(name: str, kind: str, difference_fn: Callable[..., torch.Tensor] | None = None):
    """Decorator registering ``fn`` as loss ``name`` of kind ``"cycle"`` or ``"pairwise"`` (and its difference form)."""
    if kind not in LOSS_KINDS:
        raise ValueError(f"loss kind must be one of {LOSS_KINDS}, got {kind!r}")

    def decorate(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        LOSSES.register(name, LossSpec(name=name, kind=kind, fn=fn, difference_fn=difference_fn))
        return fn

    return decorate


def get_loss(name: str) -> LossSpec:
    """The registered loss ``name`` (ValueError listing the known names otherwise)."""
    return LOSSES.get(name)


def cycle_loss(delta: torch.Tensor) -> torch.Tensor:
    """Mean over cycles of softplus(-Delta): small when matched pairs outscore the swaps."""
    import torch.nn.functional as F

    return F.softplus(-delta).mean()


def four_entry_bce(blocks: torch.Tensor) -> torch.Tensor:
    """BCE on (B, 2, 2) logit blocks: targets 1 on the diagonal (valid pairs), 0 on the swaps."""
    import torch
    import torch.nn.functional as F

    if blocks.ndim != 3 or tuple(blocks.shape[1:]) != (2, 2):
        raise ValueError(f"four_entry_bce needs logit blocks of shape (B, 2, 2), got {tuple(blocks.shape)}")
    target = torch.eye(2, dtype=blocks.dtype, device=blocks.device).expand_as(blocks)
    return F.binary_cross_entropy_with_logits(blocks, target)


def pairwise_bce(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """BCE with logits of per-pair scores against 0/1 labels."""
    import torch.nn.functional as F

    if scores.shape != labels.shape:
        raise ValueError(f"scores and labels differ in shape: {tuple(scores.shape)} vs {tuple(labels.shape)}")
    return F.binary_cross_entropy_with_logits(scores, labels.to(scores.dtype))


def _cycle_from_differences(head: ScoreHead, dphi, dpsi) -> torch.Tensor:
    return cycle_loss(head.difference_delta(dphi, dpsi))


@register_loss("cycle", kind="cycle", difference_fn=_cycle_from_differences)
def _cycle_objective(head: ScoreHead, phi1, phi2, psi1, psi2) -> torch.Tensor:
    return cycle_loss(head.cycle_delta(phi1, phi2, psi1, psi2))


@register_loss("four_entry_bce", kind="cycle")
def _four_entry_objective(head: ScoreHead, phi1, phi2, psi1, psi2) -> torch.Tensor:
    import torch

    blocks = torch.stack(
        [torch.stack([head(phi1, psi1), head(phi1, psi2)], dim=-1), torch.stack([head(phi2, psi1), head(phi2, psi2)], dim=-1)],
        dim=-2,
    )
    return four_entry_bce(blocks)


@register_loss("pairwise_bce", kind="pairwise")
def _pairwise_objective(head: ScoreHead, phi, psi, labels) -> torch.Tensor:
    return pairwise_bce(head(phi, psi), labels)
