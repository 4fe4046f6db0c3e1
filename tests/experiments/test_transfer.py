"""Transfer grid and alignment: planted structure, diagonal = probe result, algebra of G and the correlations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_vocabulary import assert_one_vocabulary
from scipy import stats

from clip_cycles.experiments.experiment_data import ExperimentData, planted_experiment_data
from clip_cycles.experiments.probes import ProbeSettings, run_probes
from clip_cycles.experiments.transfer import (
    TransferSettings,
    alignment_matrix,
    cycle_difference_matrix,
    off_diagonal,
    pearson,
    run_transfer,
    spearman,
)

GROUPS = {"a1": 0, "a2": 0, "b1": 1, "b2": 1, "c": 2, "few": 3}
TRAIN = {"rank": 4, "epochs": 12, "lr": 1e-2, "batch_size": 128, "seeds": (0, 1)}


@pytest.fixture(scope="module")
def planted() -> ExperimentData:
    return planted_experiment_data(
        GROUPS,
        dim=32,
        n_train=300,
        n_validation=60,
        n_test=120,
        seeds=(0, 1),
        pool_size=600,
        signal=0.2,
        cycle_counts={"few": (300, 60, 3)},
    )


@pytest.fixture(scope="module")
def record(planted: ExperimentData) -> dict:
    return run_transfer(planted, TransferSettings(**TRAIN))


def test_planted_transfer_is_high_exactly_where_alignment_is_high(record: dict) -> None:
    assert_one_vocabulary(record)
    names = record["families"]
    assert names == ["a1", "a2", "b1", "b2", "c"]
    assert record["unavailable"] == {"few": "seed 0 split 'test' has 3 cycles (minimum 20)"}
    assert record["n_pairs"] == 20
    same = np.array([[GROUPS[a] == GROUPS[b] for b in names] for a in names])
    off = ~np.eye(len(names), dtype=bool)
    alignment = np.asarray(record["mean"]["alignment"])
    transfer = np.asarray(record["mean"]["transfer"])
    # Families sharing a planted direction align; the others are near orthogonal.
    high_alignment = alignment > 0.15
    np.testing.assert_array_equal(high_alignment[off], same[off])
    assert transfer[same & off].min() > 0.7
    assert transfer[~same].max() < 0.65
    pearson_summary = record["correlation"]["pearson"]
    assert pearson_summary["n_seeds_defined"] == 2 and pearson_summary["mean"] > 0.8
    assert record["correlation"]["spearman"]["mean"] > 0.3
    for seed in ("0", "1"):
        per = record["per_seed"][seed]
        x, y = off_diagonal(np.asarray(per["alignment"])), off_diagonal(np.asarray(per["transfer"]))
        assert per["pearson"] == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
        assert per["spearman"] == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)


def test_alignment_is_symmetric_with_unit_diagonal(record: dict) -> None:
    for per in record["per_seed"].values():
        a = np.asarray(per["alignment"])
        np.testing.assert_array_equal(a, a.T)
        np.testing.assert_array_equal(np.diag(a), 1.0)
        assert np.all(np.abs(a) <= 1.0 + 1e-12)


def test_transfer_diagonal_equals_the_probe_result_of_the_same_seed(planted: ExperimentData, record: dict) -> None:
    probe = run_probes(
        planted,
        ProbeSettings(
            epochs=TRAIN["epochs"],
            lr=TRAIN["lr"],
            batch_size=TRAIN["batch_size"],
            seeds=TRAIN["seeds"],
            ranks=(TRAIN["rank"],),
            full_heads=(),
            audit=False,
        ),
    )
    for seed in ("0", "1"):
        diagonal = np.diag(np.asarray(record["per_seed"][seed]["transfer"]))
        expected = [probe["families"][n]["probes"]["low_rank_r4"]["runs"][seed]["test_cycle_acc"] for n in record["families"]]
        assert diagonal.tolist() == expected


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_mean_cycle_difference_matrix_equals_mean_of_outer_products(seed: int) -> None:
    data = planted_experiment_data(
        {"f": 0}, dim=5, n_train=3, n_validation=4, n_test=3, seeds=(0,), pool_size=200, seed=seed % 1000
    )
    family = data.families["f"]
    cycles = family.split(0, "validation")
    phi, psi = family.image_features.astype(np.float64), family.caption_features.astype(np.float64)
    dense = np.mean([np.outer(phi[u1] - phi[u2], psi[v1] - psi[v2]) for u1, u2, v1, v2 in cycles], axis=0)
    np.testing.assert_allclose(cycle_difference_matrix(family, cycles), dense, rtol=1e-12, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 6))
def test_alignment_matrix_is_a_cosine_gram_matrix(seed: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    matrices = [rng.standard_normal((3, 4)) * rng.uniform(0.1, 10) for _ in range(k)]
    a = alignment_matrix(matrices, [f"f{i}" for i in range(k)])
    np.testing.assert_array_equal(a, a.T)
    np.testing.assert_array_equal(np.diag(a), 1.0)
    i, j = 0, k - 1
    expected = np.sum(matrices[i] * matrices[j]) / (np.linalg.norm(matrices[i]) * np.linalg.norm(matrices[j]))
    assert a[i, j] == pytest.approx(expected, abs=1e-12)
    assert np.linalg.eigvalsh(a).min() > -1e-9  # positive semidefinite


def test_zero_difference_matrix_and_undefined_correlations_are_named() -> None:
    with pytest.raises(ValueError, match="family 'flat' has an all-zero mean cycle-difference matrix"):
        alignment_matrix([np.ones((2, 2)), np.zeros((2, 2))], ["ok", "flat"])
    assert pearson([1.0, 2.0, 3.0], [0.5, 0.5, 0.5]) is None
    assert spearman([1.0, 1.0], [2.0, 3.0]) is None


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5), st.integers(-5, 5)), min_size=3, max_size=20))
def test_correlations_match_scipy(points: list[tuple[int, int]]) -> None:
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        assert pearson(x, y) is None
        return
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-9)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-9)
