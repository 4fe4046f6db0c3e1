"""The one training loop for score heads and probes: epochs, batch order, validation, selection.

:func:`fit` owns everything that is the same for every trained thing: the epochs, a
fresh seeded permutation of the items each epoch cut into batches, the per-epoch
history, the validation rule and which epoch is kept, and the progress bar. Two
parameters say what differs:

- ``batch_loss(batch)``: the loss of one batch of item indices;
- ``optimizer``: an object that turns such a loss into an update of its parameters
  (:class:`TorchAdamW` for torch heads, :class:`NumpyAdam` for the additive audit's
  float64 numpy probes), and can snapshot and restore them.

The validation rule is a :class:`Validation`: a metric name, ``validate(model) ->
float`` (higher is better) and the selection, ``"best"`` (the best epoch; the earliest
of equally good epochs wins) or ``"last"``. Without one the last epoch is kept.

:func:`fit_head` runs the loop for a torch head (AdamW, a seeded torch generator,
deterministic algorithms, a fixed thread count). Its entry points:

- ``train_on_cycles``: batches of cycles (rows ``(u1, u2, v1, v2)`` of the feature
  tables) with a ``"cycle"``-kind loss (cycle loss, four-entry BCE); the best epoch
  is chosen on validation CycleAcc.
- ``train_on_pairs``: batches of ``(image index, caption index, label)`` triples with
  a ``"pairwise"``-kind loss (pairwise BCE); the best epoch is chosen by any
  ``validate(head) -> float`` (higher is better), e.g. ``cycle_acc_validator``.

``clip_cycles.experiments.probes.train_probe`` (probes, transfer, Cycle OE) and the
additive audit train through the same loop. Every CycleAcc is computed by
``clip_cycles.algebra.contrast.cycle_acc`` on float64 pre-sigmoid logits. Same inputs
and seed give identical parameters: the head's initial parameters come from its own
seed, batches from a seeded generator, and torch runs with deterministic algorithms
during training.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Protocol, Sequence

import numpy as np
from pydantic import Field, field_validator

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE, cycle_acc, validate_cycles, validate_features
from clip_cycles.heads.losses import LossSpec, get_loss
from clip_cycles.schemas.options import CheckedOptions
from clip_cycles.verbosity import progress_disable

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from clip_cycles.heads.score_heads import ScoreHead

#: How :func:`fit` chooses the kept epoch when validating: the best one, or the last one.
SELECTIONS: tuple[str, ...] = ("best", "last")
#: Largest table of per-cycle feature differences a cycle trainer forms up front (float32 bytes).
MAX_DIFFERENCE_BYTES = 1 << 30


def _number(default: float, flag: str | None = None, **bounds: float) -> Any:
    """A finite, strictly typed number field (an int is a number; a string is not)."""
    extra = {"flag": flag} if flag else None
    return Field(default, strict=True, allow_inf_nan=False, json_schema_extra=extra, **bounds)


class TrainConfig(CheckedOptions):
    """Optimisation settings, ranges declared on the fields; ``loss`` names a registered loss
    (clip_cycles.heads.losses.LOSSES). Built as ``TrainConfig(...)`` or ``TrainConfig.make(...)``;
    either refuses a bad value in the one option sentence."""

    lr: float = _number(1e-3, "--lr", gt=0.0, description="a finite positive learning rate")
    weight_decay: float = _number(1e-4, "--weight-decay", ge=0.0, description="a finite non-negative number")
    epochs: int = Field(30, ge=1, strict=True, json_schema_extra={"flag": "--epochs"}, description="a positive integer of epochs")
    batch_size: int = Field(
        512,
        ge=1,
        strict=True,
        json_schema_extra={"flag": "--train-batch-size"},
        description="a positive integer of items per training step",
    )
    seed: int = 0
    loss: str = "cycle"
    tie_tolerance: float = _number(DEFAULT_TIE_TOLERANCE, ge=0.0, description="a finite non-negative number")
    #: Intra-op torch threads while training; None leaves torch's setting alone.
    threads: int | None = Field(None, ge=1, strict=True, description="None or a positive integer of threads")

    @field_validator("loss")
    @classmethod
    def _registered_loss(cls, loss: str) -> str:
        get_loss(loss)
        return loss


@dataclass
class EpochRecord:
    """One epoch: mean training loss, optimizer steps taken, and the validation value."""

    epoch: int
    train_loss: float
    steps: int
    val: float | None


@dataclass(frozen=True)
class Validation:
    """The validation rule of a run: what is measured after each epoch and which epoch is kept.

    ``validate(model) -> float`` is called after every epoch (higher is better) and
    recorded in the history. ``select="best"`` keeps the epoch with the highest value,
    the earliest of equally good epochs; ``select="last"`` keeps the last epoch.
    """

    metric: str
    validate: Callable[[Any], float]
    select: str = "best"

    def __post_init__(self) -> None:
        if self.select not in SELECTIONS:
            raise ValueError(f"Validation.select must be one of {SELECTIONS}, got {self.select!r}")


@dataclass
class Fit:
    """What :func:`fit` did: the kept epoch and its validation value, skipped steps, the history."""

    best_epoch: int
    best_val: float | None
    steps_skipped: int
    history: list[EpochRecord]

    @property
    def steps(self) -> int:
        """Optimizer steps taken over all epochs."""
        return sum(r.steps for r in self.history)


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
            "config": self.config.model_dump(),
            "best_epoch": self.best_epoch,
            "val_metric": self.val_metric,
            "best_val": self.best_val,
            "test_cycle_acc": self.test_cycle_acc,
            "tie_tolerance": self.config.tie_tolerance,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "steps_skipped": self.steps_skipped,
            "history": [asdict(r) for r in self.history],
        }


class Optimizer(Protocol):
    """What :func:`fit` needs from the thing it trains: an update per batch loss, and its parameters' state."""

    #: What ``Validation.validate`` is called on (the head, or the parameters).
    model: Any

    def step(self, loss: Any) -> bool:
        """Update the parameters from one batch loss; False (nothing changed) when it has no gradient path."""

    def loss_value(self, loss: Any) -> float:
        """The batch loss as a float (mean over the batch), for the history."""

    def train(self, mode: bool) -> None:
        """Training mode on (True) or off (validation, and after the run)."""

    def state(self) -> Any:
        """A copy of the parameters, to restore the kept epoch."""

    def load_state(self, state: Any) -> None:
        """Put back parameters taken by :meth:`state`."""


def fit(
    optimizer: Optimizer,
    batch_loss: Callable[[Any], Any],
    n_items: int,
    permutation: Callable[[int], Sequence[int]],
    epochs: int,
    batch_size: int,
    validation: Validation | None = None,
    desc: str | None = None,
) -> Fit:
    """The training loop: ``epochs`` passes over ``n_items`` items in batches; keeps the selected epoch.

    Each epoch draws ``permutation(n_items)`` (a seeded generator's permutation, so the
    batch order is fixed by the seed) and cuts it into batches of ``batch_size``
    indices; ``batch_loss(batch)`` is handed to ``optimizer.step``. A batch whose loss
    has no gradient path (``step`` returns False) counts as skipped. After each epoch
    ``validation`` (if any) is measured with the model in evaluation mode; with
    ``select="best"`` the parameters of the best epoch (the earliest of equals) are put
    back at the end. ``desc`` labels a progress bar (None: no bar). The model is left in
    evaluation mode.
    """
    TrainConfig.make(epochs=int(epochs) if isinstance(epochs, np.integer) else epochs,
                     batch_size=int(batch_size) if isinstance(batch_size, np.integer) else batch_size)  # fmt: skip
    if not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise ValueError(f"fit: n_items must be a positive integer, got {n_items!r}")
    history: list[EpochRecord] = []
    best_epoch, best_val, best_state = epochs, None, None
    skipped = 0
    epoch_range: Iterable[int] = range(1, epochs + 1)
    if desc is not None:
        from tqdm.auto import tqdm  # ~50 ms to import (asyncio): only when a bar is wanted

        epoch_range = tqdm(epoch_range, desc=desc, disable=progress_disable(), leave=False)
    for epoch in epoch_range:
        optimizer.train(True)
        order = permutation(n_items)
        total, steps = 0.0, 0
        for start in range(0, n_items, batch_size):
            batch = order[start : start + batch_size]
            loss = batch_loss(batch)
            total += optimizer.loss_value(loss) * len(batch)
            if optimizer.step(loss):
                steps += 1
            else:
                skipped += 1
        val = None
        if validation is not None:
            optimizer.train(False)
            val = float(validation.validate(optimizer.model))
            if math.isnan(val):
                raise ValueError(
                    f"validation {validation.metric!r} is NaN after epoch {epoch}: no epoch can be "
                    f"compared with it; check the features and the learning rate"
                )
            if validation.select == "last":
                best_epoch, best_val = epoch, val
            # Strictly greater: the earliest of equally good epochs wins, deterministically.
            elif best_val is None or val > best_val:
                best_epoch, best_val = epoch, val
                best_state = optimizer.state()
        history.append(EpochRecord(epoch=epoch, train_loss=total / n_items, steps=steps, val=val))
    if best_state is not None:
        optimizer.load_state(best_state)
    optimizer.train(False)
    return Fit(best_epoch=best_epoch, best_val=best_val, steps_skipped=skipped, history=history)


class TorchAdamW:
    """``torch.optim.AdamW`` on a torch module: a batch loss without gradient path is a skipped step."""

    def __init__(self, model: torch.nn.Module, lr: float, weight_decay: float) -> None:
        import torch

        self.model = model
        self._optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)

    def step(self, loss: torch.Tensor) -> bool:
        # e.g. an additive head under the cycle loss: Delta is exactly zero, nothing to step on.
        if not loss.requires_grad:
            return False
        self._optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self._optimizer.step()
        return True

    def loss_value(self, loss: torch.Tensor) -> float:
        return float(loss.detach())

    def train(self, mode: bool) -> None:
        self.model.train(mode)

    def state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(state)


@dataclass
class NumpyLoss:
    """A batch loss computed in numpy: its value and the gradient of each parameter array.

    ``value`` None: not computed (a caller that reads only the fitted parameters); the history then holds NaN.
    """

    value: float | None
    grads: list[np.ndarray]


class NumpyAdam:
    """Adam with L2 weight decay (as ``torch.optim.Adam(weight_decay=...)``) on float64 numpy arrays, in place.

    ``model`` is the list of parameter arrays; ``step`` takes a :class:`NumpyLoss` whose
    ``grads`` match them one to one.
    """

    def __init__(
        self,
        params: list[np.ndarray],
        lr: float,
        weight_decay: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.model = params
        self.lr, self.weight_decay, self.betas, self.eps = lr, weight_decay, betas, eps
        self._first = [np.zeros_like(p) for p in params]
        self._second = [np.zeros_like(p) for p in params]
        self._steps = 0

    def step(self, loss: NumpyLoss) -> bool:
        if len(loss.grads) != len(self.model):
            raise ValueError(f"NumpyAdam: {len(loss.grads)} gradients for {len(self.model)} parameter arrays")
        beta1, beta2 = self.betas
        self._steps += 1
        for i, (p, g) in enumerate(zip(self.model, loss.grads)):
            g = g + self.weight_decay * p
            self._first[i] = beta1 * self._first[i] + (1 - beta1) * g
            self._second[i] = beta2 * self._second[i] + (1 - beta2) * g * g
            m_hat = self._first[i] / (1 - beta1**self._steps)
            v_hat = self._second[i] / (1 - beta2**self._steps)
            p -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
        return True

    def loss_value(self, loss: NumpyLoss) -> float:
        return math.nan if loss.value is None else float(loss.value)

    def train(self, mode: bool) -> None:
        pass  # plain arrays have no training mode

    def state(self) -> list[np.ndarray]:
        return [p.copy() for p in self.model]

    def load_state(self, state: list[np.ndarray]) -> None:
        for p, saved in zip(self.model, state):
            p[...] = saved  # in place: closures over the arrays keep seeing the parameters


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
    TrainConfig.make(threads=n)
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def fit_head(
    head: ScoreHead,
    n_items: int,
    batch_loss: Callable[[torch.Tensor], torch.Tensor],
    config: TrainConfig,
    validation: Validation | None = None,
    desc: str | None = None,
) -> Fit:
    """:func:`fit` for a torch head: AdamW, batch order from ``torch.randperm`` seeded with ``config.seed``.

    Runs with deterministic algorithms and ``config.threads`` intra-op threads; ``head``
    ends with the parameters of the kept epoch, in evaluation mode.
    """
    import torch

    generator = torch.Generator().manual_seed(config.seed)
    optimizer = TorchAdamW(head, lr=config.lr, weight_decay=config.weight_decay)
    with deterministic_torch(), torch_threads(config.threads):
        return fit(
            optimizer,
            batch_loss,
            n_items,
            lambda n: torch.randperm(n, generator=generator),
            config.epochs,
            config.batch_size,
            validation,
            desc,
        )


def loss_of_kind(name: str, kind: str, caller: str) -> LossSpec:
    """The registered loss ``name``, checked to be of ``kind`` (ValueError naming ``caller`` otherwise)."""
    spec = get_loss(name)
    if spec.kind != kind:
        other = "train_on_pairs" if spec.kind == "pairwise" else "train_on_cycles"
        raise ValueError(f"{caller} needs a {kind}-kind loss; {name!r} is {spec.kind!r} (use {other})")
    return spec


def cycle_batch_loss(
    spec: LossSpec, head: ScoreHead, phi: torch.Tensor, psi: torch.Tensor, cycles: torch.Tensor
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``batch_loss(batch)`` of a cycle-kind loss: rows ``cycles[batch]`` index the float32 tables.

    A loss with a difference form (``LossSpec.difference_fn``) on a head that scores from differences
    alone (``difference_only``) forms every cycle's ``phi1 - phi2`` and ``psi1 - psi2`` once and gathers them per batch: the same
    float32 values its ``cycle_delta`` would form per batch, so the same loss and gradients, bit for
    bit, without two of the four gathers and the subtractions of every step. Tables above
    :data:`MAX_DIFFERENCE_BYTES` keep the per-batch path.
    """
    n_bytes = int(cycles.shape[0]) * (int(phi.shape[1]) + int(psi.shape[1])) * phi.element_size()
    difference_fn = spec.difference_fn
    if difference_fn is not None and head.difference_only and n_bytes <= MAX_DIFFERENCE_BYTES:
        dphi = phi[cycles[:, 0]] - phi[cycles[:, 1]]
        dpsi = psi[cycles[:, 2]] - psi[cycles[:, 3]]

        def difference_loss(batch: torch.Tensor) -> torch.Tensor:
            return difference_fn(head, dphi[batch], dpsi[batch])

        return difference_loss

    def batch_loss(batch: torch.Tensor) -> torch.Tensor:
        rows = cycles[batch]
        return spec.fn(head, phi[rows[:, 0]], phi[rows[:, 1]], psi[rows[:, 2]], psi[rows[:, 3]])

    return batch_loss


def pair_batch_loss(
    spec: LossSpec, head: ScoreHead, phi: torch.Tensor, psi: torch.Tensor, pairs: torch.Tensor
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``batch_loss(batch)`` of a pairwise-kind loss on rows ``pairs[batch]`` = (image, caption, label)."""
    import torch

    def batch_loss(batch: torch.Tensor) -> torch.Tensor:
        rows = pairs[batch]
        return spec.fn(head, phi[rows[:, 0]], psi[rows[:, 1]], rows[:, 2].to(torch.float32))

    return batch_loss


def cycle_acc_validator(
    image_features: object, caption_features: object, cycles: object, tie_tolerance: float = DEFAULT_TIE_TOLERANCE
) -> Callable[[ScoreHead], float]:
    """A ``validate(head) -> CycleAcc`` function on fixed cycles (float64 logits, ``tie_tolerance``)."""
    from clip_cycles.heads.score_heads import head_deltas  # imports torch

    phi = validate_features(image_features, "image_features")
    psi = validate_features(caption_features, "caption_features")
    index = validate_cycles(cycles, phi.shape[0], psi.shape[0])

    def validate(head: ScoreHead) -> float:
        return cycle_acc(head_deltas(head, phi, psi, index), tie_tolerance)

    return validate


def _tensor_tables(head: ScoreHead, image_features: object, caption_features: object):
    import torch

    from clip_cycles.heads.score_heads import check_feature_tables  # imports torch

    phi, psi = check_feature_tables(head, image_features, caption_features)
    return phi, psi, torch.from_numpy(phi.astype(np.float32)), torch.from_numpy(psi.astype(np.float32))


def _result(
    head: ScoreHead,
    config: TrainConfig,
    run: Fit,
    validation: Validation | None,
    n_train: int,
    test_acc: float | None,
    n_test: int,
) -> TrainResult:
    return TrainResult(
        head=head,
        config=config,
        best_epoch=run.best_epoch,
        val_metric=None if validation is None else validation.metric,
        best_val=run.best_val,
        test_cycle_acc=test_acc,
        n_train=n_train,
        n_test=n_test,
        steps_skipped=run.steps_skipped,
        history=run.history,
    )


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
    spec = loss_of_kind(config.loss, "cycle", "train_on_cycles")
    phi, psi, phi_t, psi_t = _tensor_tables(head, image_features, caption_features)
    train = validate_cycles(train_cycles, phi.shape[0], psi.shape[0])
    validation = (
        None if val_cycles is None else Validation("cycle_acc", cycle_acc_validator(phi, psi, val_cycles, config.tie_tolerance))
    )
    test = None if test_cycles is None else validate_cycles(test_cycles, phi.shape[0], psi.shape[0])
    batch_loss = cycle_batch_loss(spec, head, phi_t, psi_t, torch.from_numpy(train))
    run = fit_head(head, train.shape[0], batch_loss, config, validation, f"train {head.name}")
    test_acc = None if test is None else cycle_acc_validator(phi, psi, test, config.tie_tolerance)(head)
    return _result(head, config, run, validation, int(train.shape[0]), test_acc, 0 if test is None else int(test.shape[0]))


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
    ``validate(head) -> float`` (higher is better, recorded as ``val_metric``) picks the
    best epoch, the earliest of equals; without it the last epoch is kept.
    ``test_cycles`` (optional) gives the test CycleAcc.
    """
    import torch

    config = config or TrainConfig(loss="pairwise_bce")
    spec = loss_of_kind(config.loss, "pairwise", "train_on_pairs")
    phi, psi, phi_t, psi_t = _tensor_tables(head, image_features, caption_features)
    train_t = torch.from_numpy(validate_pairs(pairs, phi.shape[0], psi.shape[0]))
    test = None if test_cycles is None else validate_cycles(test_cycles, phi.shape[0], psi.shape[0])
    validation = None if validate is None else Validation(val_metric, validate)
    batch_loss = pair_batch_loss(spec, head, phi_t, psi_t, train_t)
    run = fit_head(head, train_t.shape[0], batch_loss, config, validation, f"train {head.name}")
    test_acc = None if test is None else cycle_acc_validator(phi, psi, test, config.tie_tolerance)(head)
    return _result(head, config, run, validation, int(train_t.shape[0]), test_acc, 0 if test is None else int(test.shape[0]))
