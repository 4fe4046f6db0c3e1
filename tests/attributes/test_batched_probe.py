"""The project's default probe (L2-penalised, all columns solved together) against scikit-learn, and
paper 2's probe in processes: same fits as in one process; ``splits`` refuses a bad configuration first."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from things_fixture import write_sparse_things_root

from clip_cycles.attributes import attribute_probes
from clip_cycles.attributes.attribute_probes import (
    PROBE_L2,
    fit_logistic_batched,
    fit_logistic_sklearn,
    probe_attributes,
)
from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.cli import main


def _sparse_problem(seed: int, n: int = 300, d: int = 40, k: int = 12):
    """Sparse labels (4-12 positives of 300), near-separable in 40 dimensions, 80/20 train masks."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d) * 2.0
    y = np.zeros((n, k), dtype=bool)
    for j in range(k):
        y[rng.choice(n, size=4 + j % 9, replace=False), j] = True
    mask = rng.random((n, k)) < 0.8
    mask[np.flatnonzero(y[:, 0])[:2], 0] = True  # every column keeps positives on its train rows
    for j in range(k):
        mask[np.flatnonzero(y[:, j])[:2], j] = True
    return X, y, mask


@pytest.mark.parametrize("seed", [0, 1])
def test_batched_probe_equals_one_sklearn_fit_per_column_with_the_same_penalty(seed):
    X, y, mask = _sparse_problem(seed)
    ours = fit_logistic_batched(X, y, mask, progress=False)
    assert ours.converged.all()
    for k in range(y.shape[1]):
        train, test = np.flatnonzero(mask[:, k]), np.flatnonzero(~mask[:, k])
        # Written out here: C = 1 / (lambda n_train), newton-cholesky to rounding.
        ref = LogisticRegression(C=1.0 / (PROBE_L2 * len(train)), class_weight="balanced", solver="newton-cholesky",
                                 tol=1e-12, max_iter=200).fit(X[train], y[train, k].astype(int))  # fmt: skip
        assert np.allclose(ours.coef[k], ref.coef_[0], rtol=0, atol=1e-6)
        assert abs(ours.intercept[k] - ref.intercept_[0]) < 1e-6
        ours_pred = (X[test] @ ours.coef[k] + ours.intercept[k]) > 0
        assert np.array_equal(ours_pred, ref.predict(X[test]).astype(bool))
        f1_ours = f1_score(y[test, k], ours_pred, zero_division=0.0)
        assert f1_ours == f1_score(y[test, k], ref.predict(X[test]), zero_division=0.0)


def test_the_penalty_changes_the_fit_so_the_reference_is_not_paper2s():
    """The unpenalised fit of the same columns lands elsewhere: the test above compares like with like."""
    X, y, mask = _sparse_problem(0)
    ours = fit_logistic_batched(X, y, mask, progress=False)
    unpenalised = fit_logistic_sklearn(X, y, mask, progress=False, num_proc=1)
    assert np.abs(ours.coef - unpenalised.coef).max() > 0.1


def test_a_column_that_does_not_converge_is_reported_with_its_attribute_and_fold(caplog, monkeypatch):
    n = 60
    rng = np.random.default_rng(3)
    X = rng.standard_normal((n, 5))
    labels = np.zeros((n, 2), dtype=bool)
    labels[::5, 0] = True  # positives on both sides of both folds: four fitted columns
    labels[1::4, 1] = True
    data = ConceptAttributeData(tuple(f"c{i}" for i in range(n)), ("a0", "a1"), labels, (None,) * n)
    folds = [[(np.arange(0, 40), np.arange(40, n)), (np.arange(10, n), np.arange(0, 10))]] * 2
    done = probe_attributes(X, data, folds, progress=False)
    assert done.not_converged == () and done.summary()["n_probes_not_converged"] == 0
    # Two iterations cannot reach max |gradient| <= 1e-10: every column is named, in a warning and in the summary.
    real = attribute_probes.fit_logistic_batched
    monkeypatch.setattr(attribute_probes, "fit_logistic_batched", lambda *a, **kw: real(*a, max_iter=2, **kw))
    with caplog.at_level(logging.WARNING, logger="clip_cycles.attributes.attribute_probes"):
        result = probe_attributes(X, data, folds, progress=False)
    assert result.not_converged == ("a0/fold 0", "a0/fold 1", "a1/fold 0", "a1/fold 1")
    summary = result.summary()
    assert summary["n_probes_not_converged"] == 4 and summary["probes_not_converged"][0] == "a0/fold 0"
    assert "4 of 4 probes did not converge (solver batched): a0/fold 0" in caplog.text


def test_paper2_fits_in_processes_equal_the_fits_in_one_process():
    X, y, mask = _sparse_problem(2, k=9)
    serial = fit_logistic_sklearn(X, y, mask, progress=False, num_proc=1)
    parallel = fit_logistic_sklearn(X, y, mask, progress=False, num_proc=2)
    assert np.array_equal(serial.coef, parallel.coef) and np.array_equal(serial.intercept, parallel.intercept)
    assert np.array_equal(serial.n_iter, parallel.n_iter)
    # ... and they are paper 2's fit: one unpenalised LogisticRegression per column.
    train = np.flatnonzero(mask[:, 4])
    ref = LogisticRegression(C=np.inf, class_weight="balanced", max_iter=1000).fit(X[train], y[train, 4].astype(int))
    assert np.allclose(parallel.coef[4], ref.coef_[0], rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"^num_proc must be >= 1, got 0$"):
        fit_logistic_sklearn(X, y, mask, progress=False, num_proc=0)


def test_splits_paper2_without_a_split_embedding_fails_before_any_data_or_fit(tmp_path, capsys, monkeypatch):
    root = tmp_path / "things"
    write_sparse_things_root(root)

    def no_work(*args, **kwargs):
        raise AssertionError("data was read before the configuration was checked")

    monkeypatch.setattr("clip_cycles.commands.splits.load_inputs", no_work)
    base = ["splits", "--protocol", "paper2", "--things-root", str(root), "--embeddings", f"m={root / 'model.npz'}",
            "--attributes", "intersect_features.json", "--out", str(tmp_path / "o")]  # fmt: skip
    # The default strategies include clustering and similarity, and the default k ablation clusters.
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "--protocol paper2 makes similarity, clustering, the k ablation (--k-values) on ONE embedding" in err
    assert main([*base, "--strategies", "random", "supercategory"]) == 2
    assert "makes the k ablation (--k-values) on ONE embedding" in capsys.readouterr().err
    assert main([*base, "--strategies", "random", "nonsense", "--k-values"]) == 2
    assert "nonsense" in capsys.readouterr().err
    assert main([*base, "--strategies", "random", "--k-values", "--num-proc", "0"]) == 2
    assert "--num-proc" in capsys.readouterr().err
