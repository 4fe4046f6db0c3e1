"""Training score heads on frozen features: AdamW, model selection, exact CycleAcc on test.

Two entry points share one loop:

- ``train_on_cycles``: batches of cycles (rows ``(u1, u2, v1, v2)`` of the feature
  tables) with a ``"cycle"``-kind loss (cycle loss, four-entry BCE); the best epoch
  is chosen on validation CycleAcc.
- ``train_on_pairs``: batches of ``(image index, caption index, label)`` triples with
  a ``"pairwise"``-kind loss (pairwise BCE); the best epoch is chosen by any
  ``validate(head) -> float`` (higher is better), e.g. ``cycle_acc_validator``.

Every CycleAcc is computed by ``clip_cycles.algebra.contrast.cycle_acc`` on float64
pre-sigmoid logits. Same inputs and seed give identical parameters: the head's
initial parameters come from its own seed, batches from a seeded generator, and
torch runs with deterministic algorithms during training.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE, cycle_acc, validate_cycles, validate_features
from clip_cycles.heads.losses import get_loss

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from clip_cycles.heads.score_heads import ScoreHead


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings; ``loss`` names a registered loss (clip_cycles.heads.losses.LOSSES)."""

    lr: float = 1e-3
    weight_decay: float = 1e-4
    epochs: int = 30
    batch_size: int = 512
    seed: int = 0
    loss: str = "cycle"
    tie_tol: float = DEFAULT_TIE_TOLERANCE
    #: Intra-op torch threads while training; None leaves torch's setting alone.
    threads: int | None = None

    def __post_init__(self) -> None:
        for name in ("lr", "weight_decay", "tie_tol"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"TrainConfig.{name} must be a finite non-negative number, got {value!r}")
        if self.lr <= 0:
            raise ValueError(f"TrainConfig.lr must be positive, got {self.lr!r}")
        for name in ("epochs", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"TrainConfig.{name} must be a positive integer, got {value!r}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ValueError(f"TrainConfig.threads must be None or a positive integer, got {self.threads!r}")
        get_loss(self.loss)


@dataclass
class EpochRecord:
    """One epoch: mean training loss, optimizer steps taken, and the validation value."""

    epoch: int
    train_loss: float
    steps: int
    val: float | None


@dataclass
class TrainResult:
    """Outcome of a training run; ``head`` holds the parameters of ``best_epoch``.

    ``steps_skipped`` counts batches whose loss did not depend on any parameter
    (e.g. an additive head under the cycle loss: exactly zero gradient), so no
    optimizer step was taken.
    """

    head: ScoreHead
    config: TrainConfig
    best_epoch: int
    val_metric: str | None
    best_val: float | None
    test_cycle_acc: float | None
    n_train: int
    n_test: int
    steps_skipped: int
    history: list[EpochRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the head is described, not serialised)."""
        return {
            "head": self.head.describe(),
            "config": asdict(self.config),
            "best_epoch": self.best_epoch,
            "val_metric": self.val_metric,
            "best_val": self.best_val,
            "test_cycle_acc": self.test_cycle_acc,
            "tie_tol": self.config.tie_tol,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "steps_skipped": self.steps_skipped,
            "history": [asdict(r) for r in self.history],
        }


@contextlib.contextmanager
def deterministic_torch() -> Iterator[None]:
    """Run the block with ``torch.use_deterministic_algorithms(True)``, restoring the old setting."""
    import torch

    previous = torch.are_deterministic_algorithms_enabled()
    previous_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous, warn_only=previous_warn)


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` intra-op torch threads (None: leave as is), restoring the old count.

    Tiny heads gain nothing from parallel kernels, and on a shared machine the
    threads' spinning can make them an order of magnitude slower.
    """
    import torch

    if n is None:
        yield
        return
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"thread count must be a positive integer, got {n!r}")
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def cycle_acc_validator(
    image_features: object, caption_features: object, cycles: object, tol: float = DEFAULT_TIE_TOLERANCE
) -> Callable[[ScoreHead], float]:
    """A ``validate(head) -> CycleAcc`` function on fixed cycles (float64 logits, tie tolerance ``tol``)."""
    from clip_cycles.heads.score_heads import head_deltas

    phi = validate_features(image_features, "image_features")
    psi = validate_features(caption_features, "caption_features")
    index = validate_cycles(cycles, phi.shape[0], psi.shape[0])

    def validate(head: ScoreHead) -> float:
        return cycle_acc(head_deltas(head, phi, psi, index), tol)

    return validate


def _fit(
    head: ScoreHead,
    n_items: int,
    batch_loss: Callable[[torch.Tensor], torch.Tensor],
    config: TrainConfig,
    validate: Callable[[ScoreHead], float] | None,
    desc: str,
) -> tuple[int, float | None, int, list[EpochRecord]]:
    """The shared AdamW loop with best-epoch selection; loads the best state into ``head``."""
    import torch
    from tqdm.auto import tqdm

    generator = torch.Generator().manual_seed(config.seed)
    optimizer = torch.optim.AdamW(head.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    history: list[EpochRecord] = []
    best_epoch, best_val, best_state = config.epochs, None, None
    skipped = 0
    head.train()
    with deterministic_torch(), torch_threads(config.threads):
        for epoch in tqdm(range(1, config.epochs + 1), desc=desc, disable=None, leave=False):
            order = torch.randperm(n_items, generator=generator)
            total, steps = 0.0, 0
            for start in range(0, n_items, config.batch_size):
                batch = order[start : start + config.batch_size]
                loss = batch_loss(batch)
                total += float(loss.detach()) * len(batch)
                if not loss.requires_grad:
                    skipped += 1
                    continue
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                steps += 1
            val = None
            if validate is not None:
                head.eval()
                val = float(validate(head))
                head.train()
                # Strictly greater: the earliest of equally good epochs wins, deterministically.
                if best_val is None or val > best_val:
                    best_epoch, best_val = epoch, val
                    best_state = {k: v.detach().clone() for k, v in head.state_dict().items()}
            history.append(EpochRecord(epoch=epoch, train_loss=total / n_items, steps=steps, val=val))
    if best_state is not None:
        head.load_state_dict(best_state)
    head.eval()
    return best_epoch, best_val, skipped, history


def _tensor_tables(head: ScoreHead, image_features: object, caption_features: object):
    import torch

    from clip_cycles.heads.score_heads import check_feature_tables

    phi, psi = check_feature_tables(head, image_features, caption_features)
    return phi, psi, torch.from_numpy(phi.astype(np.float32)), torch.from_numpy(psi.astype(np.float32))


def train_on_cycles(
    head: ScoreHead,
    image_features: object,
    caption_features: object,
    train_cycles: object,
    val_cycles: object | None = None,
    test_cycles: object | None = None,
    config: TrainConfig | None = None,
) -> TrainResult:
    """Train ``head`` on cycles with a cycle-kind loss; select on validation CycleAcc; score test.

    Parameters
    ----------
    head:
        A ScoreHead (see ``clip_cycles.heads.score_heads.make_head``); trained in place.
    image_features, caption_features:
        Frozen feature tables (rows x dims); cycle indices point into them.
    train_cycles, val_cycles, test_cycles:
        (N, 4) int arrays with columns (u1, u2, v1, v2). Without ``val_cycles`` the
        last epoch is kept; without ``test_cycles`` no test CycleAcc is reported.
    config:
        TrainConfig; its ``loss`` must be of kind ``"cycle"``.
    """
    import torch

    config = config or TrainConfig()
    spec = get_loss(config.loss)
    if spec.kind != "cycle":
        raise ValueError(f"train_on_cycles needs a cycle-kind loss; {config.loss!r} is {spec.kind!r} (use train_on_pairs)")
    phi, psi, phi_t, psi_t = _tensor_tables(head, image_features, caption_features)
    train = validate_cycles(train_cycles, phi.shape[0], psi.shape[0])
    validate = None if val_cycles is None else cycle_acc_validator(phi, psi, val_cycles, config.tie_tol)
    test = None if test_cycles is None else validate_cycles(test_cycles, phi.shape[0], psi.shape[0])
    train_t = torch.from_numpy(train)

    def batch_loss(batch: torch.Tensor) -> torch.Tensor:
        rows = train_t[batch]
        return spec.fn(head, phi_t[rows[:, 0]], phi_t[rows[:, 1]], psi_t[rows[:, 2]], psi_t[rows[:, 3]])

    best_epoch, best_val, skipped, history = _fit(head, train.shape[0], batch_loss, config, validate, f"train {head.name}")
    test_acc = None if test is None else cycle_acc_validator(phi, psi, test, config.tie_tol)(head)
    return TrainResult(
        head=head,
        config=config,
        best_epoch=best_epoch,
        val_metric=None if validate is None else "cycle_acc",
        best_val=best_val,
        test_cycle_acc=test_acc,
        n_train=int(train.shape[0]),
        n_test=0 if test is None else int(test.shape[0]),
        steps_skipped=skipped,
        history=history,
    )


def validate_pairs(pairs: object, n_images: int, n_captions: int) -> np.ndarray:
    """Check an (N, 3) int array of (image index, caption index, label in {0, 1}); returns int64."""
    array = np.asarray(pairs)
    if array.ndim != 2 or array.shape[1] != 3:
        raise ValueError(f"pairs must have shape (N, 3) with columns (image, caption, label), got {array.shape}")
    if array.shape[0] == 0:
        raise ValueError("empty pair set: at least one training pair is needed")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"pairs must hold integers, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    checks = (
        ((array[:, 0] < 0) | (array[:, 0] >= n_images), f"image index out of range (table has {n_images} rows)"),
        ((array[:, 1] < 0) | (array[:, 1] >= n_captions), f"caption index out of range (table has {n_captions} rows)"),
        (~np.isin(array[:, 2], (0, 1)), "label not in {0, 1}"),
    )
    for bad, what in checks:
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"pair {i} has an {what}: {array[i].tolist()}")
    return array


def train_on_pairs(
    head: ScoreHead,
    image_features: object,
    caption_features: object,
    pairs: object,
    config: TrainConfig | None = None,
    validate: Callable[[ScoreHead], float] | None = None,
    val_metric: str = "validation",
    test_cycles: object | None = None,
) -> TrainResult:
    """Train ``head`` on labelled pairs with a pairwise-kind loss (e.g. ``TrainConfig(loss="pairwise_bce")``).

    ``pairs`` is an (N, 3) int array (image index, caption index, label 0/1).
    ``validate(head) -> float`` (higher is better) picks the best epoch; without it
    the last epoch is kept. ``test_cycles`` (optional) gives the test CycleAcc.
    """
    import torch

    config = config or TrainConfig(loss="pairwise_bce")
    spec = get_loss(config.loss)
    if spec.kind != "pairwise":
        raise ValueError(f"train_on_pairs needs a pairwise-kind loss; {config.loss!r} is {spec.kind!r}")
    phi, psi, phi_t, psi_t = _tensor_tables(head, image_features, caption_features)
    train_t = torch.from_numpy(validate_pairs(pairs, phi.shape[0], psi.shape[0]))
    test = None if test_cycles is None else validate_cycles(test_cycles, phi.shape[0], psi.shape[0])

    def batch_loss(batch: torch.Tensor) -> torch.Tensor:
        rows = train_t[batch]
        return spec.fn(head, phi_t[rows[:, 0]], psi_t[rows[:, 1]], rows[:, 2].to(torch.float32))

    best_epoch, best_val, skipped, history = _fit(head, train_t.shape[0], batch_loss, config, validate, f"train {head.name}")
    test_acc = None if test is None else cycle_acc_validator(phi, psi, test, config.tie_tol)(head)
    return TrainResult(
        head=head,
        config=config,
        best_epoch=best_epoch,
        val_metric=None if validate is None else val_metric,
        best_val=best_val,
        test_cycle_acc=test_acc,
        n_train=int(train_t.shape[0]),
        n_test=0 if test is None else int(test.shape[0]),
        steps_skipped=skipped,
        history=history,
    )
