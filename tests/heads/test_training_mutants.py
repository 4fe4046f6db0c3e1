"""heads.training's edges that the loop tests leave open: each check of TrainConfig and the pair rows,
the rows a batch loss reads, the thread and determinism settings, the tie tolerance and the record.

Written against the survivors of ``benchmarks/mutation_score.py training``; expected values are
worked out here (rows indexed by hand, counts of the inputs), never by the function under test.
"""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import pytest
import torch

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE
from clip_cycles.heads.losses import LossSpec
from clip_cycles.heads.score_heads import make_head
from clip_cycles.heads.training import (
    TrainConfig,
    cycle_batch_loss,
    deterministic_torch,
    fit_head,
    loss_of_kind,
    pair_batch_loss,
    torch_threads,
    train_on_cycles,
    train_on_pairs,
    validate_pairs,
)

DIM = 4


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("lr", 0.0, r"^TrainConfig option --lr \(lr\): must be a finite positive learning rate, got 0\.0 "),
        ("lr", -1e-3, r"^TrainConfig option --lr \(lr\): must be a finite positive learning rate, got -0\.001 "),
        ("lr", math.inf, r"^TrainConfig option --lr \(lr\): must be a finite positive learning rate, got inf "),
        ("lr", math.nan, r"^TrainConfig option --lr \(lr\): must be a finite positive learning rate, got nan "),
        ("lr", "0.1", r"^TrainConfig option --lr \(lr\): must be a finite positive learning rate, got '0\.1' "),
        (
            "weight_decay",
            -1e-9,
            r"^TrainConfig option --weight-decay \(weight_decay\): must be a finite non-negative number, got -1e-09 ",
        ),
        (
            "weight_decay",
            math.inf,
            r"^TrainConfig option --weight-decay \(weight_decay\): must be a finite non-negative number, got inf ",
        ),
        ("tie_tolerance", -1e-12, r"^TrainConfig option tie_tolerance: must be a finite non-negative number, got -1e-12 "),
        ("tie_tolerance", math.nan, r"^TrainConfig option tie_tolerance: must be a finite non-negative number, got nan "),
        ("epochs", 0, r"^TrainConfig option --epochs \(epochs\): must be a positive integer of epochs, got 0 "),
        ("epochs", 2.0, r"^TrainConfig option --epochs \(epochs\): must be a positive integer of epochs, got 2\.0 "),
        ("batch_size", 0, r"^TrainConfig option --train-batch-size \(batch_size\): must be a positive integer .*, got 0 "),
        ("batch_size", "64", r"^TrainConfig option --train-batch-size \(batch_size\): must be a positive integer .*, got '64' "),
        ("threads", 0, r"^TrainConfig option threads: must be None or a positive integer of threads, got 0 "),
        ("threads", 1.0, r"^TrainConfig option threads: must be None or a positive integer of threads, got 1\.0 "),
        ("loss", "mse", r"^TrainConfig option loss: unknown loss 'mse'"),
    ],
)
def test_each_train_config_check_names_its_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{field: value})


def test_boundary_values_of_train_config_are_accepted():
    # Zero weight decay and tie tolerance, one epoch, batches of one, one thread: all legal.
    config = TrainConfig(lr=1e-9, weight_decay=0.0, epochs=1, batch_size=1, tie_tolerance=0.0, threads=1, loss="pairwise_bce")
    assert (config.weight_decay, config.tie_tolerance, config.epochs, config.batch_size, config.threads) == (0.0, 0.0, 1, 1, 1)
    assert TrainConfig(lr=2, weight_decay=1).lr == 2  # ints are numbers
    assert TrainConfig().threads is None and TrainConfig().tie_tolerance == DEFAULT_TIE_TOLERANCE


def test_loss_of_kind_points_to_the_other_entry_point():
    to_pairs = r"^fitter needs a cycle-kind loss; 'pairwise_bce' is 'pairwise' \(use train_on_pairs\)$"
    with pytest.raises(ValueError, match=to_pairs):
        loss_of_kind("pairwise_bce", "cycle", "fitter")
    with pytest.raises(ValueError, match=r"^fitter needs a pairwise-kind loss; 'cycle' is 'cycle' \(use train_on_cycles\)$"):
        loss_of_kind("cycle", "pairwise", "fitter")
    assert loss_of_kind("cycle", "cycle", "fitter").name == "cycle"


@pytest.mark.parametrize(
    "pairs,message",
    [
        (np.zeros((3, 2), dtype=int), r"^pairs must have shape \(N, 3\) with columns \(image, caption, label\), got \(3, 2\)$"),
        (np.zeros(3, dtype=int), r"^pairs must have shape \(N, 3\) with columns \(image, caption, label\), got \(3,\)$"),
        (np.zeros((0, 3), dtype=int), r"^empty pair set: at least one training pair is needed$"),
        (np.zeros((2, 3)), r"^pairs must hold integers, got dtype float64$"),
        ([[0, 0, 1], [-1, 0, 0]], r"^pair 1 has an image index out of range \(table has 3 rows\): \[-1, 0, 0\]$"),
        ([[0, 0, 1], [1, 1, 0], [3, 0, 0]], r"^pair 2 has an image index out of range \(table has 3 rows\): \[3, 0, 0\]$"),
        ([[0, -1, 1]], r"^pair 0 has an caption index out of range \(table has 5 rows\): \[0, -1, 1\]$"),
        ([[2, 4, 1], [0, 5, 1]], r"^pair 1 has an caption index out of range \(table has 5 rows\): \[0, 5, 1\]$"),
        ([[0, 0, 1], [0, 0, -1]], r"^pair 1 has an label not in \{0, 1\}: \[0, 0, -1\]$"),
    ],
)
def test_validate_pairs_names_the_bad_pair(pairs, message):
    with pytest.raises(ValueError, match=message):
        validate_pairs(pairs, 3, 5)


def test_validate_pairs_accepts_the_last_rows_and_returns_int64():
    pairs = np.array([[2, 4, 1], [0, 0, 0], [1, 3, 1]], dtype=np.int32)
    checked = validate_pairs(pairs, 3, 5)
    assert checked.dtype == np.int64 and checked.tolist() == pairs.tolist()


class RecordingLoss:
    """A loss spec whose fn records the tensors it is handed and returns their sum (a gradient-free scalar)."""

    def __init__(self, kind: str) -> None:
        self.calls: list[tuple[torch.Tensor, ...]] = []
        self.spec = LossSpec("recording", kind, self.fn)

    def fn(self, head, *tensors: torch.Tensor) -> torch.Tensor:
        self.calls.append(tensors)
        return sum(t.sum() for t in tensors)


def tables() -> tuple[torch.Tensor, torch.Tensor]:
    # Image row i is all i, caption row j is all 100 + j: a swapped column or table shows in the values.
    phi = torch.arange(6, dtype=torch.float32)[:, None].repeat(1, DIM)
    psi = (100 + torch.arange(7, dtype=torch.float32))[:, None].repeat(1, DIM)
    return phi, psi


def test_cycle_batch_loss_reads_u1_u2_from_images_and_v1_v2_from_captions():
    phi, psi = tables()
    cycles = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 0], [2, 3, 1, 5]])
    recording = RecordingLoss("cycle")
    batch_loss = cycle_batch_loss(recording.spec, make_head("bilinear", DIM, DIM), phi, psi, cycles)
    batch_loss(torch.tensor([2, 0]))
    (u1, u2, v1, v2) = recording.calls[0]
    # Rows 2 then 0 of the cycles: (2, 3, 1, 5) and (0, 1, 2, 3).
    assert u1[:, 0].tolist() == [2.0, 0.0] and u2[:, 0].tolist() == [3.0, 1.0]
    assert v1[:, 0].tolist() == [101.0, 102.0] and v2[:, 0].tolist() == [105.0, 103.0]


def test_pair_batch_loss_reads_images_captions_and_float_labels():
    phi, psi = tables()
    pairs = torch.tensor([[0, 6, 1], [5, 2, 0], [3, 3, 1]])
    recording = RecordingLoss("pairwise")
    batch_loss = pair_batch_loss(recording.spec, make_head("bilinear", DIM, DIM), phi, psi, pairs)
    batch_loss(torch.tensor([1, 2]))
    images, captions, labels = recording.calls[0]
    assert images[:, 0].tolist() == [5.0, 3.0] and captions[:, 0].tolist() == [102.0, 103.0]
    assert labels.dtype == torch.float32 and labels.tolist() == [0.0, 1.0]


def test_fit_head_trains_with_the_configured_threads_deterministically_then_restores_both():
    head = make_head("bilinear", DIM, DIM, seed=0)
    phi = torch.ones(5, DIM)
    seen: list[tuple[int, bool, bool]] = []

    def batch_loss(batch: torch.Tensor) -> torch.Tensor:
        seen.append((torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(), head.training))
        return head(phi[batch], phi[batch]).mean()

    threads_before = torch.get_num_threads()
    deterministic_before = torch.are_deterministic_algorithms_enabled()
    threads = 1 if threads_before != 1 else 2
    run = fit_head(head, 5, batch_loss, TrainConfig(epochs=2, batch_size=2, threads=threads))
    assert seen == [(threads, True, True)] * 6  # 2 epochs x batches of 2, 2 and 1
    assert (run.steps, run.steps_skipped) == (6, 0)
    assert torch.get_num_threads() == threads_before
    assert torch.are_deterministic_algorithms_enabled() == deterministic_before
    assert not head.training  # evaluation mode after the run


def test_fit_head_batch_order_is_torch_randperm_of_the_seed():
    head = make_head("bilinear", DIM, DIM, seed=0)
    phi = torch.ones(7, DIM)
    seen: list[list[int]] = []

    def batch_loss(batch: torch.Tensor) -> torch.Tensor:
        seen.append(batch.tolist())
        return head(phi[batch], phi[batch]).mean()

    fit_head(head, 7, batch_loss, TrainConfig(epochs=2, batch_size=3, seed=11, threads=1))
    generator = torch.Generator().manual_seed(11)
    expected = []
    for _ in range(2):
        order = torch.randperm(7, generator=generator).tolist()
        expected += [order[0:3], order[3:6], order[6:7]]
    assert seen == expected


def test_torch_threads_sets_and_restores_the_count_and_refuses_zero():
    before = torch.get_num_threads()
    inside = 1 if before != 1 else 2
    with torch_threads(inside):
        assert torch.get_num_threads() == inside
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match=r"^TrainConfig option threads: must be None or a positive integer of threads, got 0 "):
        with torch_threads(0):
            pass
    with pytest.raises(ValueError, match=r"^TrainConfig option threads: .*, got 1\.5 "):
        with torch_threads(1.5):  # type: ignore[arg-type]
            pass
    assert torch.get_num_threads() == before


def test_deterministic_torch_warns_only_inside_and_restores_the_setting():
    torch.use_deterministic_algorithms(False)
    with deterministic_torch():
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    assert not torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)  # a caller's strict setting survives the block
    try:
        with deterministic_torch():
            assert torch.are_deterministic_algorithms_enabled()
        assert torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


def small_task(seed: int = 0):
    rng = np.random.default_rng(seed)
    phi, psi = rng.normal(size=(12, DIM)), rng.normal(size=(12, DIM))

    def cycles(n: int) -> np.ndarray:
        return np.stack([np.concatenate([rng.choice(12, 2, replace=False), rng.choice(12, 2, replace=False)]) for _ in range(n)])

    return phi, psi, cycles(20), cycles(9), cycles(7)


def hand_cycle_acc(head, phi: np.ndarray, psi: np.ndarray, cycles: np.ndarray, tolerance: float) -> float:
    """CycleAcc written out: s(u1,v1) + s(u2,v2) - s(u1,v2) - s(u2,v1) > tol wins, |.| <= tol is half a win."""
    u1, u2, v1, v2 = cycles.T
    with torch.no_grad():
        head.double()

        def s(u: np.ndarray, v: np.ndarray) -> np.ndarray:  # one score per row pair
            return head(torch.from_numpy(phi[u]), torch.from_numpy(psi[v])).numpy()

        delta = s(u1, v1) + s(u2, v2) - s(u1, v2) - s(u2, v1)
    head.float()
    return float(np.mean(np.where(np.abs(delta) <= tolerance, 0.5, (delta > 0).astype(float))))


def test_train_on_cycles_records_counts_and_scores_test_with_the_config_tolerance():
    phi, psi, train, val, test = small_task()
    config = TrainConfig(lr=1e-2, epochs=2, batch_size=8, seed=1, threads=1)
    result = train_on_cycles(make_head("bilinear", DIM, DIM, seed=2), phi, psi, train, val, test, config)
    assert (result.n_train, result.n_test, result.val_metric) == (20, 7, "cycle_acc")
    assert result.test_cycle_acc == pytest.approx(hand_cycle_acc(result.head, phi, psi, test, config.tie_tolerance), abs=1e-12)
    assert [r.steps for r in result.history] == [3, 3]  # ceil(20 / 8) batches a epoch
    record = result.to_dict()
    assert record["config"] == config.model_dump() and record["head"] == result.head.describe()
    assert (record["n_train"], record["n_test"], record["steps_skipped"]) == (20, 7, 0)
    assert (record["best_epoch"], record["best_val"], record["test_cycle_acc"]) == (
        result.best_epoch, result.best_val, result.test_cycle_acc)  # fmt: skip
    assert record["history"] == [asdict(r) for r in result.history] and record["val_metric"] == "cycle_acc"
    # A tolerance above every |Delta|: every validation and test cycle is a tie, so CycleAcc is exactly 0.5.
    wide = TrainConfig(lr=1e-2, epochs=2, batch_size=8, seed=1, threads=1, tie_tolerance=1e6)
    tied = train_on_cycles(make_head("bilinear", DIM, DIM, seed=2), phi, psi, train, val, test, wide)
    assert tied.test_cycle_acc == 0.5 and [r.val for r in tied.history] == [0.5, 0.5] and tied.to_dict()["tie_tolerance"] == 1e6
    assert result.test_cycle_acc != 0.5  # the default tolerance scores real wins and losses here


def test_train_on_cycles_without_val_or_test_keeps_the_last_epoch_and_reports_no_test():
    phi, psi, train, _, _ = small_task()
    config = TrainConfig(epochs=3, batch_size=8, threads=1)
    result = train_on_cycles(make_head("bilinear", DIM, DIM), phi, psi, train, config=config)
    assert (result.best_epoch, result.best_val, result.val_metric) == (3, None, None)
    assert (result.test_cycle_acc, result.n_test, result.n_train) == (None, 0, 20)


def test_train_on_pairs_counts_pairs_and_test_cycles_and_honours_the_tolerance():
    phi, psi, _, _, test = small_task(1)
    pairs = np.array([[i % 12, (3 * i) % 12, i % 2] for i in range(15)])
    config = TrainConfig(lr=1e-2, epochs=2, batch_size=4, seed=0, loss="pairwise_bce", threads=1)
    result = train_on_pairs(make_head("bilinear", DIM, DIM), phi, psi, pairs, config, test_cycles=test)
    assert (result.n_train, result.n_test, result.best_epoch, result.val_metric) == (15, 7, 2, None)
    assert [r.steps for r in result.history] == [4, 4]
    assert result.test_cycle_acc == pytest.approx(hand_cycle_acc(result.head, phi, psi, test, config.tie_tolerance), abs=1e-12)
    wide = TrainConfig(lr=1e-2, epochs=2, batch_size=4, seed=0, loss="pairwise_bce", threads=1, tie_tolerance=1e6)
    assert train_on_pairs(make_head("bilinear", DIM, DIM), phi, psi, pairs, wide, test_cycles=test).test_cycle_acc == 0.5
    bare = train_on_pairs(make_head("bilinear", DIM, DIM), phi, psi, pairs, config)
    assert (bare.test_cycle_acc, bare.n_test) == (None, 0)
    # Without a config: pairwise BCE with the defaults.
    assert train_on_pairs(make_head("bilinear", DIM, DIM), phi, psi, pairs).config == TrainConfig(loss="pairwise_bce")


class StepCounter:
    """A numpy-free optimizer double: counts steps; its model is the step count."""

    def __init__(self) -> None:
        self.model = [0]

    def step(self, loss: float) -> bool:
        self.model[0] += 1
        return True

    def loss_value(self, loss: float) -> float:
        return float(loss)

    def train(self, mode: bool) -> None:
        pass

    def state(self) -> list[int]:
        return list(self.model)

    def load_state(self, state: list[int]) -> None:
        self.model[:] = state


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"epochs": 0}, r"^TrainConfig option --epochs \(epochs\): must be a positive integer of epochs, got 0 "),
        ({"batch_size": 0}, r"^TrainConfig option --train-batch-size \(batch_size\): .*, got 0 "),
        ({"n_items": 0}, r"^fit: n_items must be a positive integer, got 0$"),
        ({"epochs": 1.0}, r"^TrainConfig option --epochs \(epochs\): .*, got 1\.0 "),
    ],
)
def test_fit_names_each_bad_setting(settings, message):
    from clip_cycles.heads.training import fit

    arguments = {"epochs": 1, "batch_size": 1, "n_items": 1, **settings}
    with pytest.raises(ValueError, match=message):
        fit(StepCounter(), lambda batch: 0.0, arguments["n_items"], np.arange, arguments["epochs"], arguments["batch_size"])


def test_fit_accepts_numpy_integers_and_the_smallest_settings():
    from clip_cycles.heads.training import fit

    optimizer = StepCounter()
    run = fit(optimizer, lambda batch: float(batch[0]), np.int64(3), np.arange, np.int64(1), np.int32(1))
    assert optimizer.model == [3] and [r.steps for r in run.history] == [3]
    assert run.history[0].train_loss == pytest.approx((0 + 1 + 2) / 3)
    single = fit(StepCounter(), lambda batch: 0.0, 1, np.arange, 1, 1)
    assert (single.best_epoch, single.steps, single.steps_skipped) == (1, 1, 0)


def test_fit_names_a_nan_validation_exactly():
    from clip_cycles.heads.training import Validation, fit

    nan_rule = Validation("acc", lambda model: float("nan"))
    message = (
        r"^validation 'acc' is NaN after epoch 1: no epoch can be compared with it; check the features and the learning rate$"
    )
    with pytest.raises(ValueError, match=message):
        fit(StepCounter(), lambda batch: 0.0, 2, np.arange, 3, 2, nan_rule)
    with pytest.raises(ValueError, match=r"^Validation\.select must be one of \('best', 'last'\), got 'worst'$"):
        Validation("v", lambda model: 0.0, select="worst")


def test_numpy_adam_history_records_each_batch_loss_and_names_a_gradient_mismatch():
    from clip_cycles.heads.training import NumpyAdam, NumpyLoss, fit

    weights = np.zeros(2)
    adam = NumpyAdam([weights], lr=0.1, weight_decay=0.0)
    # Batch losses 1.0 (items 0-1) and 5.0 (item 2): the epoch's mean loss is (2 x 1 + 1 x 5) / 3.
    run = fit(adam, lambda batch: NumpyLoss(value=1.0 if batch[0] == 0 else 5.0, grads=[np.ones(2)]), 3, np.arange, 1, 2)
    assert run.history[0].train_loss == pytest.approx(7.0 / 3.0) and run.steps == 2
    # Two Adam steps on a constant gradient 1 move each weight by lr per step (m_hat / sqrt(v_hat) = 1).
    np.testing.assert_allclose(weights, [-0.2, -0.2], rtol=1e-6)
    with pytest.raises(ValueError, match=r"^NumpyAdam: 2 gradients for 1 parameter arrays$"):
        adam.step(NumpyLoss(value=0.0, grads=[np.ones(2), np.ones(1)]))


def test_validate_pairs_accepts_a_single_pair():
    assert validate_pairs(np.array([[0, 0, 1]]), 1, 1).tolist() == [[0, 0, 1]]


def test_the_record_has_exactly_its_fields():
    phi, psi, train, val, _ = small_task()
    result = train_on_cycles(
        make_head("bilinear", DIM, DIM), phi, psi, train, val, config=TrainConfig(epochs=1, batch_size=32, threads=1)
    )
    assert set(result.to_dict()) == {"head", "config", "best_epoch", "val_metric", "best_val", "test_cycle_acc", "tie_tolerance",
                                     "n_train", "n_test", "steps_skipped", "history"}  # fmt: skip
    assert result.to_dict()["tie_tolerance"] == DEFAULT_TIE_TOLERANCE and result.to_dict()["history"][0]["epoch"] == 1
