"""The one training loop (heads.training.fit): selection rule, batch order, skipped steps, both optimizers.

Expected values are worked out in each test from the scripted inputs, or by a reference
loop written here by hand, never by calling the loop under test twice.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from clip_cycles.heads.losses import get_loss
from clip_cycles.heads.score_heads import make_head
from clip_cycles.heads.training import (
    NumpyAdam,
    NumpyLoss,
    TorchAdamW,
    TrainConfig,
    Validation,
    cycle_batch_loss,
    fit,
    fit_head,
    torch_threads,
)


class CountingOptimizer:
    """A test double: every step adds 1 to a single parameter, so its value counts the steps taken."""

    def __init__(self) -> None:
        self.model = np.zeros(1)
        self.modes: list[bool] = []

    def step(self, loss: float) -> bool:
        self.model += 1.0
        return True

    def loss_value(self, loss: float) -> float:
        return float(loss)

    def train(self, mode: bool) -> None:
        self.modes.append(mode)

    def state(self) -> np.ndarray:
        return self.model.copy()

    def load_state(self, state: np.ndarray) -> None:
        self.model[...] = state


def scripted(values: list[float], batches_per_epoch: int) -> Validation:
    """A validation whose value after epoch e is values[e - 1] (read off the step count), with select="best"."""
    return Validation("scripted", lambda model: values[int(model[0]) // batches_per_epoch - 1])


def identity_order(n: int) -> np.ndarray:
    return np.arange(n)


# n_items 10, batch 4: batches of 4, 4 and 2 items, three steps per epoch.
N, BATCH, PER_EPOCH = 10, 4, 3


def test_best_epoch_is_the_earliest_of_equally_good_ones_and_its_parameters_are_restored():
    values = [0.2, 0.7, 0.5, 0.7, 0.1]  # best 0.7 first reached after epoch 2, again after epoch 4
    optimizer = CountingOptimizer()
    run = fit(optimizer, lambda batch: 0.0, N, identity_order, len(values), BATCH, scripted(values, PER_EPOCH))
    assert run.best_epoch == 2 and run.best_val == 0.7
    # The kept parameters are those after epoch 2 (2 x 3 steps), not the last (5 x 3) nor epoch 4's (4 x 3).
    assert optimizer.model[0] == 2 * PER_EPOCH
    assert [r.val for r in run.history] == values
    assert [r.epoch for r in run.history] == [1, 2, 3, 4, 5]
    assert run.steps == 5 * PER_EPOCH and run.steps_skipped == 0
    # Training mode each epoch, evaluation mode for each validation and at the end.
    assert optimizer.modes == [True, False] * 5 + [False]


def test_a_single_best_epoch_in_the_middle_is_kept():
    values = [0.1, 0.3, 0.9, 0.4]
    optimizer = CountingOptimizer()
    run = fit(optimizer, lambda batch: 0.0, N, identity_order, len(values), BATCH, scripted(values, PER_EPOCH))
    assert (run.best_epoch, run.best_val, optimizer.model[0]) == (3, 0.9, 3 * PER_EPOCH)


def test_without_validation_the_last_epoch_is_kept():
    optimizer = CountingOptimizer()
    run = fit(optimizer, lambda batch: 0.0, N, identity_order, 4, BATCH)
    assert (run.best_epoch, run.best_val) == (4, None)
    assert optimizer.model[0] == 4 * PER_EPOCH
    assert [r.val for r in run.history] == [None] * 4


def test_select_last_keeps_the_last_epoch_even_when_an_earlier_one_was_better():
    values = [0.2, 0.9, 0.5]
    optimizer = CountingOptimizer()
    rule = Validation("scripted", scripted(values, PER_EPOCH).validate, select="last")
    run = fit(optimizer, lambda batch: 0.0, N, identity_order, 3, BATCH, rule)
    assert (run.best_epoch, run.best_val, optimizer.model[0]) == (3, 0.5, 3 * PER_EPOCH)
    assert [r.val for r in run.history] == values


def test_each_epoch_draws_the_next_permutation_and_cuts_it_into_batches():
    seen: list[list[int]] = []

    def batch_loss(batch: np.ndarray) -> float:
        seen.append([int(i) for i in batch])
        return float(np.mean(batch))

    run = fit(CountingOptimizer(), batch_loss, N, np.random.default_rng(7).permutation, 2, BATCH)
    replay = np.random.default_rng(7)
    first, second = replay.permutation(N), replay.permutation(N)
    expected = [first[0:4], first[4:8], first[8:10], second[0:4], second[4:8], second[8:10]]
    assert seen == [e.tolist() for e in expected]
    # Batch means weighted by batch size sum to the sum of all indices: 0 + ... + 9 = 45, over 10 items.
    assert [r.train_loss for r in run.history] == [4.5, 4.5]


def test_a_loss_without_gradient_path_is_a_skipped_step_and_changes_nothing():
    head = make_head("low_rank", 3, 3, rank=2, seed=0)
    before = {k: v.clone() for k, v in head.state_dict().items()}
    phi = torch.ones(N, 3)

    def batch_loss(batch: torch.Tensor) -> torch.Tensor:
        if len(batch) < BATCH:  # the short last batch of every epoch: a constant, no path to the head
            return torch.tensor(2.0)
        return head(phi[batch], phi[batch]).pow(2).mean()

    run = fit(TorchAdamW(head, lr=0.0, weight_decay=0.0), batch_loss, N, identity_order, 3, BATCH)
    assert run.steps_skipped == 3  # one short batch in each of 3 epochs
    assert [r.steps for r in run.history] == [2, 2, 2]
    # lr 0: the steps taken move nothing either, so the head is exactly as initialised.
    assert all(torch.equal(before[k], v) for k, v in head.state_dict().items())
    # Skipped batches still count in the mean training loss (weighted by their size).
    with torch.no_grad():
        full = float(head(phi[:1], phi[:1]).pow(2))  # every row of phi is the same: one value per full batch
    assert run.history[0].train_loss == pytest.approx((8 * full + 2 * 2.0) / 10)


def test_an_additive_head_under_the_cycle_loss_skips_every_step():
    head = make_head("additive", 4, 4, seed=0)
    rng = np.random.default_rng(0)
    phi = torch.from_numpy(rng.normal(size=(8, 4)).astype(np.float32))
    cycles = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7], [0, 2, 1, 3], [1, 3, 5, 7], [2, 6, 0, 4]])
    config = TrainConfig(epochs=3, batch_size=2, seed=0, threads=1)
    run = fit_head(head, 5, cycle_batch_loss(get_loss("cycle"), head, phi, phi, cycles), config)
    assert run.steps_skipped == 3 * math.ceil(5 / 2) and run.steps == 0


def reference_adamw_loop(head, phi, psi, cycles, val, epochs, batch_size, lr, weight_decay, seed):
    """The loop written out by hand (AdamW, seeded randperm, strictly-better selection) as a reference."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=weight_decay)
    best, best_state, vals = None, None, []
    for _ in range(epochs):
        order = torch.randperm(cycles.shape[0], generator=generator)
        for start in range(0, cycles.shape[0], batch_size):
            rows = cycles[order[start : start + batch_size]]
            loss = torch.nn.functional.softplus(
                -head.cycle_delta(phi[rows[:, 0]], phi[rows[:, 1]], psi[rows[:, 2]], psi[rows[:, 3]])
            ).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        value = val(head)
        vals.append(value)
        if best is None or value > best:
            best, best_state = value, {k: v.detach().clone() for k, v in head.state_dict().items()}
    head.load_state_dict(best_state)
    return vals


def test_fit_head_reproduces_a_hand_written_adamw_loop_bit_for_bit():
    rng = np.random.default_rng(3)
    phi = torch.from_numpy(rng.normal(size=(30, 6)).astype(np.float32))
    psi = torch.from_numpy(rng.normal(size=(30, 6)).astype(np.float32))
    cycles = torch.from_numpy(np.stack([rng.choice(30, 4, replace=False) for _ in range(50)]))
    probe = torch.from_numpy(rng.normal(size=(6, 6)).astype(np.float32))

    def val(head) -> float:  # any deterministic function of the parameters, coarse enough to produce ties
        with torch.no_grad():
            return round(float(head(probe, probe).sum()), 1)

    reference = make_head("low_rank", 6, 6, rank=3, seed=4)
    with torch_threads(1):
        reference_vals = reference_adamw_loop(reference, phi, psi, cycles, val, 6, 16, 5e-2, 1e-4, seed=4)
    head = make_head("low_rank", 6, 6, rank=3, seed=4)
    config = TrainConfig(lr=5e-2, weight_decay=1e-4, epochs=6, batch_size=16, seed=4, threads=1)
    run = fit_head(head, 50, cycle_batch_loss(get_loss("cycle"), head, phi, psi, cycles), config, Validation("val", val))
    assert [r.val for r in run.history] == reference_vals
    assert run.best_epoch == reference_vals.index(max(reference_vals)) + 1
    assert all(torch.equal(reference.state_dict()[k], v) for k, v in head.state_dict().items())


def test_numpy_adam_matches_torch_adam_with_l2_weight_decay():
    rng = np.random.default_rng(5)
    target, start = rng.normal(size=7), rng.normal(size=7)
    params = [start.copy()]
    adam = NumpyAdam(params, lr=0.05, weight_decay=0.01)
    reference = torch.tensor(start.copy(), requires_grad=True)
    torch_adam = torch.optim.Adam([reference], lr=0.05, weight_decay=0.01)
    for _ in range(25):
        adam.step(NumpyLoss(value=0.0, grads=[2 * (params[0] - target)]))
        torch_adam.zero_grad()
        ((reference - torch.from_numpy(target)) ** 2).sum().backward()
        torch_adam.step()
    np.testing.assert_allclose(params[0], reference.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_numpy_adam_restores_state_in_place():
    weights = np.zeros(3)
    adam = NumpyAdam([weights], lr=0.1, weight_decay=0.0)
    saved = adam.state()
    adam.step(NumpyLoss(value=0.0, grads=[np.ones(3)]))
    assert not np.array_equal(weights, saved[0])
    adam.load_state(saved)
    np.testing.assert_array_equal(weights, np.zeros(3))  # the same array object holds the restored values
    with pytest.raises(ValueError, match="2 gradients for 1 parameter arrays"):
        adam.step(NumpyLoss(value=0.0, grads=[np.ones(3), np.ones(1)]))


def test_bad_loop_settings_are_named():
    with pytest.raises(ValueError, match="Validation.select must be one of"):
        Validation("v", lambda m: 0.0, select="worst")
    with pytest.raises(ValueError, match=r"^TrainConfig option --epochs \(epochs\): .*, got 0 "):
        fit(CountingOptimizer(), lambda b: 0.0, N, identity_order, 0, BATCH)
    with pytest.raises(ValueError, match="fit: n_items must be a positive integer, got 0"):
        fit(CountingOptimizer(), lambda b: 0.0, 0, identity_order, 1, BATCH)
    with pytest.raises(ValueError, match="validation 'v' is NaN after epoch 1"):
        fit(CountingOptimizer(), lambda b: 0.0, N, identity_order, 2, BATCH, Validation("v", lambda m: float("nan")))


def test_a_described_fit_shows_one_bar_over_its_epochs_and_an_undescribed_one_none(monkeypatch: pytest.MonkeyPatch):
    """``desc`` labels a transient epoch bar that follows the -q/--progress setting; no ``desc``, no bar."""
    import tqdm.auto

    from clip_cycles.verbosity import progress_disable

    bars: list[dict] = []

    def recorder(iterable, **kwargs):
        bars.append(kwargs)
        return iterable

    monkeypatch.setattr(tqdm.auto, "tqdm", recorder)
    fit(CountingOptimizer(), lambda batch: 0.0, N, identity_order, 2, BATCH)
    assert bars == []
    fit(CountingOptimizer(), lambda batch: 0.0, N, identity_order, 2, BATCH, desc="probe")
    assert bars == [{"desc": "probe", "disable": progress_disable(), "leave": False}]
    head = make_head("additive", 4, 4, seed=0)
    phi = torch.from_numpy(np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32))
    cycles = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]])
    config = TrainConfig(epochs=1, batch_size=2, seed=0, threads=1)
    fit_head(head, 2, cycle_batch_loss(get_loss("cycle"), head, phi, phi, cycles), config, desc="head")
    assert bars[-1]["desc"] == "head" and len(bars) == 2


def test_a_numpy_loss_without_a_value_steps_the_same_and_leaves_nan_in_the_history():
    """A caller that reads only the parameters (the additive audit) skips the loss value: same steps, same
    parameters; the history says the loss was not computed (NaN), never a number it did not compute."""

    def run(with_value: bool):
        w = np.zeros(3)
        target = np.array([1.0, -2.0, 0.5])

        def batch_loss(batch):
            grad = (w - target) * len(batch) / 10.0
            return NumpyLoss(value=float(((w - target) ** 2).sum()) if with_value else None, grads=[grad])

        out = fit(NumpyAdam([w], lr=0.1, weight_decay=0.0), batch_loss, 10, np.random.default_rng(0).permutation, 3, 4)
        return w, out

    w_valued, valued = run(True)
    w_bare, bare = run(False)
    assert w_bare.tobytes() == w_valued.tobytes()
    assert bare.steps == valued.steps == 9
    assert all(math.isnan(r.train_loss) for r in bare.history)
    assert all(math.isfinite(r.train_loss) and r.train_loss > 0 for r in valued.history)
