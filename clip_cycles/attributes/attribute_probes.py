"""Per-attribute linear probes, F1 selectivity, supercategory dominance, CS and a label-free leakage score.

The project protocol's probe (default solver ``"batched"``) is L2-penalised
(:data:`PROBE_L2`), so each (attribute, fold) column has one optimum; all columns are solved
together and each column's convergence is checked and reported (:func:`fit_logistic_batched`;
``"sklearn_l2"`` is its one-fit-per-column scikit-learn reference). Paper 2's probe
(``--protocol paper2``, solver ``"sklearn"``) is one binary ``LogisticRegression(penalty=None,
class_weight='balanced', max_iter=1000)`` per attribute per fold (lbfgs), fitted exactly, in
processes with one BLAS thread each (:func:`fit_logistic_sklearn`). ``"lockstep"`` (opt-in)
runs scipy's own L-BFGS-B routine for every (attribute, fold) column *in lockstep*: each
column keeps its own optimiser state, as scikit-learn would drive it (same loss scaling,
start at zero, ``m=10``, ``maxls=50``, ``gtol=tol``, ``ftol=64 eps``), and all columns
that ask for a loss/gradient at the same step are evaluated together with one
matrix-matrix product on the shared design matrix (test rows weigh zero). Its iterates
equal scikit-learn's up to float rounding, but on near-separable columns (real label
sparsity: 10-20 positives among 1,854 concepts) the rounding grows over hundreds of
iterations and a few attributes end with a different F1; ``benchmarks/bench_attributes.py``
prints the maximum |dF1| on data with that sparsity.

Metrics (REFERENCE.md section 2):

- F1 selectivity of an attribute (percent) = 100 x F1 on the test concepts (mean over
  all its folds; a degenerate fold, where the attribute's positives could not reach
  both sides, scores F1 = 0, see :class:`clip_cycles.attributes.splitters.CoverageReport`)
  - 100 x n_positive_concepts / n_concepts;
- supercategory dominance = max over supercategories of the share of the attribute's
  concepts in it (denominator: every concept with the attribute, including those
  without a supercategory);
- CS = Pearson correlation, across all attributes (those with a finite dominance), of
  dominance and F1 selectivity;
- leakage (no labels needed): for each test concept, cosine similarity to its nearest
  train concept; mean, and share above a threshold.
"""

from __future__ import annotations

import functools
import logging
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.attributes.paper2_protocol import (
    DEFAULT_PROTOCOL,
    PAPER2_SEED_LABEL,
    PAPER2_SOLVER,
    check_protocol,
    paper2_published_splitter,
    paper2_splitter,
)
from clip_cycles.attributes.splitters import (
    ConceptSplitter,
    CoverageReport,
    Fold,
    SplitContext,
    _check_matrix,
    attribute_folds,
    coverage_report,
    leakage_folds,
    make_splitter,
    nearest_neighbours,
)
from clip_cycles.processes import iterate_jobs, usable_cores
from clip_cycles.registry import Registry
from clip_cycles.verbosity import progress_disable

logger = logging.getLogger(__name__)

#: scikit-learn's lbfgs settings for LogisticRegression (mirrored by the batched solver).
LBFGS_MEMORY: int = 10
LBFGS_MAXLS: int = 50
LBFGS_FTOL: float = 64 * np.finfo(float).eps
#: L-BFGS-B's task code of a converged column (scipy.optimize._lbfgsb_py.status_messages: 4, "CONVERGENCE").
LBFGS_CONVERGED: int = 4
MAX_ITER: int = 1000
TOL: float = 1e-4
#: Columns evaluated per matrix product; bounds temporaries to ~n_concepts x 1024 floats.
COLUMN_CHUNK: int = 1024


def reference_probe(max_iter: int = MAX_ITER, tol: float = TOL) -> object:
    """The paper's probe as a scikit-learn estimator.

    ``LogisticRegression(penalty=None, class_weight='balanced', max_iter=1000)``;
    spelled ``C=inf`` because scikit-learn >= 1.8 deprecates ``penalty=None`` (same model).
    """
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=np.inf, class_weight="balanced", max_iter=max_iter, tol=tol)


@dataclass(frozen=True)
class LogisticFits:
    """Fitted columns: weights (K, d), intercepts (K,), iterations (K,), and which columns converged (K,).

    ``converged`` None: the solver does not say (scikit-learn's lbfgs stops silently at ``max_iter``).
    """

    coef: np.ndarray
    intercept: np.ndarray
    n_iter: np.ndarray
    converged: np.ndarray | None = None


def _balanced_weights(y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """scikit-learn's class_weight='balanced' on the train rows of each column; 0 on other rows."""
    n_train = mask.sum(axis=0).astype(np.float64)
    n_pos = (y & mask).sum(axis=0).astype(np.float64)
    n_neg = n_train - n_pos
    if (n_pos == 0).any() or (n_neg == 0).any():
        bad = np.flatnonzero((n_pos == 0) | (n_neg == 0))
        raise ValueError(f"probe columns {bad[:10].tolist()} have a single class on their train rows; cannot fit")
    w_pos = n_train / (2.0 * n_pos)
    w_neg = n_train / (2.0 * n_neg)
    return np.where(mask, np.where(y, w_pos, w_neg), 0.0)


def _loss_gradient(X: np.ndarray, y: np.ndarray, weight: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Half-binomial loss and gradient of K columns at once, scaled like scikit-learn (/ sum of weights)."""
    d = X.shape[1]
    z = X @ W[:d] + W[d]
    # One exp for both softplus(z) = max(z, 0) + log1p(exp(-|z|)) and the sigmoid.
    e = np.exp(-np.abs(z))
    softplus = np.maximum(z, 0.0) + np.log1p(e)
    inv = 1.0 / (1.0 + e)
    sigmoid = np.where(z >= 0, inv, e * inv)
    sw_sum = weight.sum(axis=0)
    loss = (weight * (softplus - y * z)).sum(axis=0) / sw_sum
    residual = weight * (sigmoid - y) / sw_sum
    grad = np.empty_like(W)
    grad[:d] = X.T @ residual
    grad[d] = residual.sum(axis=0)
    return loss, grad


@functools.lru_cache(maxsize=1)
def _blas_controller() -> object:
    """One threadpoolctl controller per process: discovering the BLAS libraries is slow."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@functools.lru_cache(maxsize=1)
def _lbfgsb_available() -> bool:
    try:
        from scipy.optimize import _lbfgsb  # noqa: F401
    except ImportError:  # pragma: no cover - scipy layout changed
        return False
    import inspect

    from scipy.optimize import _lbfgsb_py

    # The reverse-communication call with (..., maxls, ln_task) exists since scipy 1.15.
    return "ln_task" in inspect.getsource(_lbfgsb_py._minimize_lbfgsb)


def fit_logistic_lockstep(
    X: np.ndarray,
    y: np.ndarray,
    train_mask: np.ndarray,
    max_iter: int = MAX_ITER,
    tol: float = TOL,
    progress: bool | None = None,
) -> LogisticFits:
    """Fit K unpenalised, class-balanced logistic regressions on shared rows, in lockstep.

    Parameters
    ----------
    X:
        (n, d) design matrix shared by all columns.
    y, train_mask:
        (n, K) bool: labels, and which rows are training rows of each column.
    max_iter, tol:
        scikit-learn's ``max_iter`` and ``tol`` (L-BFGS-B ``gtol``).

    Returns
    -------
    LogisticFits with the same iterates scikit-learn's lbfgs would reach (up to rounding).
    """
    from tqdm.auto import tqdm

    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=bool)
    train_mask = np.asarray(train_mask, dtype=bool)
    n, d = X.shape
    K = y.shape[1]
    weight = _balanced_weights(y, train_mask)
    target = y.astype(np.float64)
    size = d + 1
    W = np.zeros((size, K))
    f = np.zeros(K)
    G = np.zeros((size, K))
    states = [
        {
            "x": np.zeros(size),
            "wa": np.zeros(2 * LBFGS_MEMORY * size + 5 * size + 11 * LBFGS_MEMORY**2 + 8 * LBFGS_MEMORY),
            "iwa": np.zeros(3 * size, dtype=np.int32),
            "task": np.zeros(2, dtype=np.int32),
            "ln_task": np.zeros(2, dtype=np.int32),
            "lsave": np.zeros(4, dtype=np.int32),
            "isave": np.zeros(44, dtype=np.int32),
            "dsave": np.zeros(29),
        }
        for _ in range(K)
    ]
    bounds = np.zeros(size), np.zeros(size), np.zeros(size, dtype=np.int32)
    factr = LBFGS_FTOL / np.finfo(float).eps
    n_iter = np.zeros(K, dtype=np.int64)
    active = list(range(K))
    bar = tqdm(total=K, desc="probes (lockstep L-BFGS)", disable=progress_disable(progress))
    # One BLAS thread: setulb works on length-d vectors where a pool only adds wake-ups, and
    # a fixed thread count keeps the float summation order, hence the outputs, reproducible.
    single_thread = _blas_controller().limit(limits=1)  # type: ignore[attr-defined]
    try:
        _lockstep_loop(X, target, weight, states, bounds, factr, tol, max_iter, f, G, n_iter, active, bar)
    finally:
        single_thread.restore_original_limits()
        bar.close()
    for k in range(K):
        W[:, k] = states[k]["x"]
    # L-BFGS-B's own verdict (task 4, "CONVERGENCE"; scipy's success): a column stopped at max_iter (task 5)
    # or by a failed line search is not converged, and the caller names it.
    converged = np.array([int(state["task"][0]) == LBFGS_CONVERGED for state in states], dtype=bool)
    return LogisticFits(coef=W[:d].T.copy(), intercept=W[d].copy(), n_iter=n_iter, converged=converged)


def _lockstep_loop(
    X: np.ndarray,
    target: np.ndarray,
    weight: np.ndarray,
    states: list[dict[str, np.ndarray]],
    bounds: tuple[np.ndarray, np.ndarray, np.ndarray],
    factr: float,
    tol: float,
    max_iter: int,
    f: np.ndarray,
    G: np.ndarray,
    n_iter: np.ndarray,
    active: list[int],
    bar: object,
) -> None:
    from scipy.optimize import _lbfgsb

    while active:
        # Advance every column's optimiser until it asks for f and g (task 3) or stops;
        # this is scipy's _minimize_lbfgsb loop, run for all columns side by side.
        need: list[int] = []
        for k in active:
            s = states[k]
            while True:
                _lbfgsb.setulb(
                    LBFGS_MEMORY,
                    s["x"],
                    bounds[0],
                    bounds[1],
                    bounds[2],
                    float(f[k]),
                    np.ascontiguousarray(G[:, k]),
                    factr,
                    tol,
                    s["wa"],
                    s["iwa"],
                    s["task"],
                    s["lsave"],
                    s["isave"],
                    s["dsave"],
                    LBFGS_MAXLS,
                    s["ln_task"],
                )
                task = int(s["task"][0])
                if task == 3:
                    need.append(k)
                    break
                if task == 1:
                    n_iter[k] += 1
                    if n_iter[k] >= max_iter:
                        s["task"][0], s["task"][1] = 5, 504
                    continue
                bar.update(1)  # type: ignore[attr-defined]
                break
        active = need
        for start in range(0, len(need), COLUMN_CHUNK):
            cols = np.array(need[start : start + COLUMN_CHUNK])
            point = np.stack([states[k]["x"] for k in cols], axis=1)
            loss, grad = _loss_gradient(X, target[:, cols], weight[:, cols], point)
            f[cols] = loss
            G[:, cols] = grad


def _sklearn_columns(
    X: np.ndarray, y: np.ndarray, train_mask: np.ndarray, columns: np.ndarray, max_iter: int, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Paper 2's fit of each of ``columns``, one BLAS thread (so a process pool never oversubscribes)."""
    from sklearn.exceptions import ConvergenceWarning

    coef = np.zeros((len(columns), X.shape[1]))
    intercept = np.zeros(len(columns))
    n_iter = np.zeros(len(columns), dtype=np.int64)
    with _blas_controller().limit(limits=1):  # type: ignore[attr-defined]
        for i, k in enumerate(columns):
            rows = np.flatnonzero(train_mask[:, k])
            model = reference_probe(max_iter=max_iter, tol=tol)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.fit(X[rows], y[rows, k].astype(np.int64))  # type: ignore[attr-defined]
            coef[i] = model.coef_[0]  # type: ignore[attr-defined]
            intercept[i] = model.intercept_[0]  # type: ignore[attr-defined]
            n_iter[i] = int(model.n_iter_[0])  # type: ignore[attr-defined]
    return coef, intercept, n_iter


def _sklearn_batch(shared: tuple[np.ndarray, np.ndarray, np.ndarray, int, float], columns: np.ndarray) -> Any:
    """One batch of columns in a worker of the one fork pool (:func:`clip_cycles.processes.iterate_jobs`)."""
    X, y, train_mask, max_iter, tol = shared
    return _sklearn_columns(X, y, train_mask, columns, max_iter, tol)


def fit_logistic_sklearn(
    X: np.ndarray,
    y: np.ndarray,
    train_mask: np.ndarray,
    max_iter: int = MAX_ITER,
    tol: float = TOL,
    progress: bool | None = None,
    num_proc: int | None = None,
) -> LogisticFits:
    """Paper 2's probe exactly: one scikit-learn fit per column, in ``num_proc`` processes (None: the usable cores).

    Every fit runs with ONE BLAS thread, in a worker or not: small fits gain nothing from a
    thread pool but wake-ups, and one thread count keeps the float summation order, so any
    ``num_proc`` gives the same bytes. Columns are dealt to workers round-robin (fit times vary).
    """
    from tqdm.auto import tqdm

    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=bool)
    train_mask = np.asarray(train_mask, dtype=bool)
    K = y.shape[1]
    workers = min(usable_cores() if num_proc is None else num_proc, K)
    if num_proc is not None and num_proc < 1:
        raise ValueError(f"num_proc must be >= 1, got {num_proc}")
    coef = np.zeros((K, X.shape[1]))
    intercept = np.zeros(K)
    n_iter = np.zeros(K, dtype=np.int64)
    bar = tqdm(total=K, desc="probes (sklearn)", disable=progress_disable(progress))
    try:
        if workers <= 1:
            for start in range(0, K, 16):
                b = np.arange(start, min(start + 16, K))
                coef[b], intercept[b], n_iter[b] = _sklearn_columns(X, y, train_mask, b, max_iter, tol)
                bar.update(len(b))
        else:
            # Small batches, round-robin: a worker never waits behind one slow near-separable column.
            batches = [np.arange(start, K, workers * 8) for start in range(workers * 8)]
            batches = [b for b in batches if len(b)]
            shared = (X, y, train_mask, max_iter, tol)  # inherited by the forked workers, never pickled
            for b, (c, i, n) in zip(batches, iterate_jobs(_sklearn_batch, shared, batches, workers, "scikit-learn probe fits")):
                coef[b], intercept[b], n_iter[b] = c, i, n
                bar.update(len(b))
    finally:
        bar.close()
    return LogisticFits(coef, intercept, n_iter, n_iter < max_iter)


# ------------------------------------------------------------- the project's default probe

#: The project protocol's L2 penalty, in units of the class-balanced MEAN loss:
#: minimise (1/n_train) sum_i w_i loss_i + PROBE_L2 / 2 * ||coef||^2 (intercept unpenalised).
#: Equal to scikit-learn's ``C = 1 / (PROBE_L2 * n_train)``; see README "Attribute generalization
#: splits" for the choice against paper 2's unpenalised probe on the real sparsity.
PROBE_L2: float = 1e-3
#: Convergence of the batched solver: max |gradient| of the scaled objective, per column.
BATCHED_TOL: float = 1e-10
BATCHED_MAX_ITER: int = 2000
#: Halvings of the step before a column's line search gives up (reported as not converged).
LINE_SEARCH_HALVINGS: int = 30


def penalised_reference_probe(n_train: int, l2: float = PROBE_L2, tol: float = 1e-12) -> object:
    """The project's probe as ONE scikit-learn estimator: the reference of the batched solver.

    ``LogisticRegression(C=1/(l2*n_train), class_weight='balanced', solver='newton-cholesky')``:
    with balanced weights the sample weights sum to ``n_train``, so scikit-learn's objective is
    the batched solver's. Newton's method reaches the unique optimum to rounding.
    """
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1.0 / (l2 * n_train), class_weight="balanced", solver="newton-cholesky", tol=tol, max_iter=100)


def fit_logistic_sklearn_l2(
    X: np.ndarray,
    y: np.ndarray,
    train_mask: np.ndarray,
    max_iter: int = MAX_ITER,
    tol: float = TOL,
    progress: bool | None = None,
) -> LogisticFits:
    """Reference for the default probe: one scikit-learn fit of :func:`penalised_reference_probe` per column.

    ``max_iter`` and ``tol`` belong to paper 2's lbfgs and are ignored: this estimator's settings are declared.
    """
    from tqdm.auto import tqdm

    X = np.asarray(X, dtype=np.float64)
    K = y.shape[1]
    coef = np.zeros((K, X.shape[1]))
    intercept = np.zeros(K)
    n_iter = np.zeros(K, dtype=np.int64)
    converged = np.ones(K, dtype=bool)
    for k in tqdm(range(K), desc="probes (sklearn, L2)", disable=progress_disable(progress)):
        rows = np.flatnonzero(train_mask[:, k])
        model = penalised_reference_probe(len(rows))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(X[rows], y[rows, k].astype(np.int64))  # type: ignore[attr-defined]
        converged[k] = not any("converge" in str(w.message).lower() for w in caught)
        coef[k] = model.coef_[0]  # type: ignore[attr-defined]
        intercept[k] = model.intercept_[0]  # type: ignore[attr-defined]
        n_iter[k] = int(model.n_iter_[0])  # type: ignore[attr-defined]
    return LogisticFits(coef, intercept, n_iter, converged)


def _penalised_loss_gradient(
    X: np.ndarray, y: np.ndarray, weight: np.ndarray, W: np.ndarray, l2: float
) -> tuple[np.ndarray, np.ndarray]:
    loss, grad = _loss_gradient(X, y, weight, W)
    d = X.shape[1]
    loss = loss + 0.5 * l2 * (W[:d] * W[:d]).sum(axis=0)
    grad[:d] += l2 * W[:d]
    return loss, grad


def fit_logistic_batched(
    X: np.ndarray,
    y: np.ndarray,
    train_mask: np.ndarray,
    max_iter: int = BATCHED_MAX_ITER,
    tol: float = BATCHED_TOL,
    progress: bool | None = None,
    l2: float = PROBE_L2,
    start: np.ndarray | None = None,
) -> LogisticFits:
    """Fit K L2-penalised, class-balanced logistic regressions together (the project's default probe).

    Every column minimises the strictly convex objective of :data:`PROBE_L2` (one optimum), so
    any solver that converges reaches the same coefficients; this one runs L-BFGS (memory 10,
    Armijo backtracking from the unit step) on all columns at once: each step is two
    matrix-matrix products on the shared design matrix. A column has converged when
    max |gradient| <= ``tol``; ``LogisticFits.converged`` says which did (never dropped silently:
    callers report the others). ``max_iter`` and ``tol`` default to this solver's own
    (:data:`BATCHED_MAX_ITER`, :data:`BATCHED_TOL`) whatever the caller's lbfgs settings are.
    ``start`` (size, K): a warm start (same optimum, fewer steps).
    """
    from tqdm.auto import tqdm

    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=bool)
    train_mask = np.asarray(train_mask, dtype=bool)
    d = X.shape[1]
    K = y.shape[1]
    W = np.zeros((d + 1, K)) if start is None else np.array(start, dtype=np.float64)
    n_iter = np.zeros(K, dtype=np.int64)
    converged = np.zeros(K, dtype=bool)
    bar = tqdm(total=K, desc="probes (batched L2)", disable=progress_disable(progress))
    try:
        for first in range(0, K, COLUMN_CHUNK):
            cols = np.arange(first, min(first + COLUMN_CHUNK, K))
            weight = _balanced_weights(y[:, cols], train_mask[:, cols])
            W[:, cols], n_iter[cols], converged[cols] = _lbfgs_columns(
                X, y[:, cols].astype(np.float64), weight, W[:, cols], l2, max_iter, tol
            )
            bar.update(len(cols))
    finally:
        bar.close()
    return LogisticFits(coef=W[:d].T.copy(), intercept=W[d].copy(), n_iter=n_iter, converged=converged)


def _lbfgs_columns(
    X: np.ndarray, target: np.ndarray, weight: np.ndarray, W: np.ndarray, l2: float, max_iter: int, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised L-BFGS over columns; returns the points, iterations and per-column convergence."""
    W = W.copy()
    size, K = W.shape
    m = LBFGS_MEMORY
    S = np.zeros((m, size, K))
    Y = np.zeros((m, size, K))
    rho = np.zeros((m, K))
    gamma = np.ones(K)
    n_iter = np.zeros(K, dtype=np.int64)
    converged = np.zeros(K, dtype=bool)
    failed = np.zeros(K, dtype=bool)
    f, G = _penalised_loss_gradient(X, target, weight, W, l2)
    for it in range(max_iter):
        active = np.flatnonzero(~converged & ~failed)
        converged[active] = np.abs(G[:, active]).max(axis=0) <= tol
        active = active[~converged[active]]
        if not len(active):
            break
        g = G[:, active]
        # Two-loop recursion for every active column at once (slot it % m is the oldest).
        q = g.copy()
        order = [(it - 1 - j) % m for j in range(min(it, m))]
        alpha = np.zeros((m, len(active)))
        for slot in order:
            alpha[slot] = rho[slot, active] * (S[slot][:, active] * q).sum(axis=0)
            q -= alpha[slot] * Y[slot][:, active]
        r = gamma[active] * q
        for slot in reversed(order):
            beta = rho[slot, active] * (Y[slot][:, active] * r).sum(axis=0)
            r += S[slot][:, active] * (alpha[slot] - beta)
        p = -r
        slope = (g * p).sum(axis=0)
        uphill = slope >= 0  # a stale history: fall back to steepest descent for that column
        if uphill.any():
            p[:, uphill] = -g[:, uphill]
            slope[uphill] = -(g[:, uphill] ** 2).sum(axis=0)
        if it == 0:  # first step: a unit-length steepest-descent step at most
            p /= np.maximum(1.0, np.linalg.norm(p, axis=0))
            slope = (g * p).sum(axis=0)
        step = np.ones(len(active))
        f_new = np.empty(len(active))
        G_new = np.empty_like(g)
        todo = np.arange(len(active))
        for _ in range(LINE_SEARCH_HALVINGS):
            cols = active[todo]
            trial = W[:, cols] + step[todo] * p[:, todo]
            f_try, g_try = _penalised_loss_gradient(X, target[:, cols], weight[:, cols], trial, l2)
            armijo = f_try <= f[cols] + 1e-4 * step[todo] * slope[todo]
            # Near the optimum the decrease falls below the rounding of f: accept a step that does
            # not raise f beyond rounding and flattens the slope (approximate Wolfe, Hager-Zhang).
            flat = (f_try <= f[cols] + 32 * np.finfo(float).eps * np.abs(f[cols])) & (
                np.abs((g_try * p[:, todo]).sum(axis=0)) <= 0.9 * np.abs(slope[todo])
            )
            ok = armijo | flat
            f_new[todo[ok]] = f_try[ok]
            G_new[:, todo[ok]] = g_try[:, ok]
            todo = todo[~ok]
            if not len(todo):
                break
            step[todo] *= 0.5
        if len(todo):  # no decrease found: the column sits at rounding level; say so, never hide it
            failed[active[todo]] = True
            keep = np.setdiff1d(np.arange(len(active)), todo)
            active, p, g, step, f_new, G_new = active[keep], p[:, keep], g[:, keep], step[keep], f_new[keep], G_new[:, keep]
        s = step * p
        yv = G_new - g
        sy = (s * yv).sum(axis=0)
        good = sy > 1e-16 * np.maximum((yv * yv).sum(axis=0), 1e-300)
        slot = it % m
        S[slot][:, active] = s
        Y[slot][:, active] = yv
        rho[slot, active] = np.where(good, 1.0 / np.where(good, sy, 1.0), 0.0)
        gamma[active] = np.where(good, sy / np.maximum((yv * yv).sum(axis=0), 1e-300), gamma[active])
        W[:, active] += s
        f[active] = f_new
        G[:, active] = G_new
        n_iter[active] += 1
    converged |= np.abs(G).max(axis=0) <= tol
    return W, n_iter, converged


def _fit_batched(
    X: np.ndarray,
    y: np.ndarray,
    train_mask: np.ndarray,
    max_iter: int = MAX_ITER,
    tol: float = TOL,
    progress: bool | None = None,
    num_proc: int | None = None,
) -> LogisticFits:
    """The registry's ``batched``: the declared estimator and settings; paper 2's ``max_iter``/``tol`` do not apply."""
    return fit_logistic_batched(X, y, train_mask, progress=progress)


def _fit_sklearn_l2(
    X: np.ndarray,
    y: np.ndarray,
    train_mask: np.ndarray,
    max_iter: int = MAX_ITER,
    tol: float = TOL,
    progress: bool | None = None,
    num_proc: int | None = None,
) -> LogisticFits:
    return fit_logistic_sklearn_l2(X, y, train_mask, progress=progress)


def _fit_lockstep_or_fallback(
    X: np.ndarray,
    y: np.ndarray,
    train_mask: np.ndarray,
    max_iter: int = MAX_ITER,
    tol: float = TOL,
    progress: bool | None = None,
    num_proc: int | None = None,
) -> LogisticFits:
    if not _lbfgsb_available():  # pragma: no cover - older scipy
        warnings.warn("scipy lacks the L-BFGS-B interface used for lockstep fits; using one fit per column", stacklevel=2)
        return fit_logistic_sklearn(X, y, train_mask, max_iter, tol, progress)
    return fit_logistic_lockstep(X, y, train_mask, max_iter, tol, progress)


#: Probe solver name -> fit function (X, y, train_mask, max_iter, tol, progress) -> LogisticFits.
PROBE_SOLVERS: Registry[Callable[..., LogisticFits]] = Registry("probe solver")
PROBE_SOLVERS.register("batched", _fit_batched)
PROBE_SOLVERS.register("sklearn_l2", _fit_sklearn_l2)
PROBE_SOLVERS.register("lockstep", _fit_lockstep_or_fallback)
PROBE_SOLVERS.register("sklearn", fit_logistic_sklearn)
#: The project protocol's probe: L2-penalised (:data:`PROBE_L2`), one optimum, all columns solved
#: together; ``sklearn_l2`` fits the same estimator one scikit-learn fit per column (its reference).
#: ``sklearn`` is paper 2's unpenalised probe (``--protocol paper2``); ``lockstep`` its fast opt-in
#: variant, whose F1 can drift on near-separable columns (see benchmarks/bench_attributes.py).
DEFAULT_SOLVER: str = "batched"


def protocol_solver(protocol: str, solver: str | None = None) -> str:
    """The solver a run uses: ``solver`` when given, else the protocol's (project: batched, paper2: sklearn)."""
    if solver is not None:
        return solver
    return PAPER2_SOLVER if protocol == "paper2" else DEFAULT_SOLVER


# -------------------------------------------------------------------------- metrics


def f1_selectivity(f1: np.ndarray, n_positives: np.ndarray, n_concepts: int) -> np.ndarray:
    """100 x F1 minus the official "random" score 100 x n_positives / n_concepts (per attribute)."""
    return 100.0 * np.asarray(f1, dtype=np.float64) - 100.0 * np.asarray(n_positives, dtype=np.float64) / n_concepts


def supercategory_dominance(labels: np.ndarray, supercategories: Sequence[str | None]) -> np.ndarray:
    """Per attribute: max over supercategories of |positives in it| / |positives|.

    Concepts without a supercategory count in the denominator but form no category,
    so an attribute held only by uncategorised concepts has dominance 0. NaN for an
    attribute with no positive at all.
    """
    labels = np.asarray(labels, dtype=bool)
    names = sorted({s for s in supercategories if s is not None})
    if len(supercategories) != labels.shape[0]:
        raise ValueError(f"{len(supercategories)} supercategories for {labels.shape[0]} concepts")
    positives = labels.sum(axis=0).astype(np.float64)
    if not names:
        return np.full(labels.shape[1], np.nan)
    member = np.array([[s == name for name in names] for s in supercategories], dtype=np.float64)
    counts = member.T @ labels.astype(np.float64)  # (n_categories, n_attributes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(positives > 0, counts.max(axis=0) / positives, np.nan)


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation over the pairs where both are finite; NaN with < 3 pairs or zero variance."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3:
        return float("nan")
    xc = x[keep] - x[keep].mean()
    yc = y[keep] - y[keep].mean()
    denom = np.sqrt((xc * xc).sum() * (yc * yc).sum())
    return float((xc * yc).sum() / denom) if denom > 0 else float("nan")


def f1_scores(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    """Binary F1 per column of bool arrays (n, K); 0 where there is no positive, like scikit-learn."""
    tp = (y_true & y_pred).sum(axis=0).astype(np.float64)
    denom = y_true.sum(axis=0) + y_pred.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 2.0 * tp / denom, 0.0)


@dataclass(frozen=True)
class LeakageScore:
    """Label-free leakage of a split: how close test concepts sit to their nearest train concept."""

    mean_nearest_similarity: float
    share_above_threshold: float
    threshold: float

    def as_dict(self) -> dict[str, float]:
        """JSON-ready fields."""
        return {
            "mean_nearest_train_similarity": self.mean_nearest_similarity,
            "share_above_threshold": self.share_above_threshold,
            "threshold": self.threshold,
        }


def default_leakage_threshold(X: np.ndarray) -> float:
    """Median over concepts of the cosine similarity to their nearest other concept.

    Scale-free: a test concept counts as leaked when its nearest train concept is as
    close as a typical concept's nearest neighbour in the whole set.
    """
    _, similarity = nearest_neighbours(_check_matrix(X))
    return float(np.median(similarity))


def leakage_score(X: np.ndarray, folds: Sequence[Fold], threshold: float | None = None) -> LeakageScore:
    """Mean over folds of: mean nearest-train cosine similarity of test concepts, and share above ``threshold``.

    ``threshold`` None means :func:`default_leakage_threshold`. Needs no labels.
    """
    X = _check_matrix(X)
    if threshold is None:
        threshold = default_leakage_threshold(X)
    unit = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    means, shares = [], []
    for train, test in folds:
        if len(train) == 0 or len(test) == 0:
            raise ValueError("a fold has an empty train or test side; leakage is undefined")
        nearest = (unit[test] @ unit[train].T).max(axis=1)
        means.append(float(nearest.mean()))
        shares.append(float((nearest >= threshold).mean()))
    return LeakageScore(float(np.mean(means)), float(np.mean(shares)), float(threshold))


@dataclass(frozen=True)
class AttributeProbeResult:
    """Per-attribute probe results of one strategy and seed.

    ``f1`` is (n_attributes, n_folds): test F1 of every fold, 0 for degenerate folds
    (see :class:`clip_cycles.attributes.splitters.CoverageReport`); ``mean_f1`` and ``selectivity``
    are per attribute, over all its folds. Every attribute is scored.
    """

    attributes: tuple[str, ...]
    f1: np.ndarray
    mean_f1: np.ndarray
    selectivity: np.ndarray
    dominance: np.ndarray
    coverage: CoverageReport
    n_iter: np.ndarray
    #: "attribute/fold i" of every fitted column whose solver did not converge (reported, never dropped).
    not_converged: tuple[str, ...] = ()

    def summary(self) -> dict[str, object]:
        """Mean F1 selectivity and CS over all attributes, with the degenerate-fold counts."""
        has = len(self.attributes) > 0
        return {
            "f1_selectivity": float(np.mean(self.selectivity)) if has else float("nan"),
            "mean_f1": float(100.0 * np.mean(self.mean_f1)) if has else float("nan"),
            "cs": pearson(self.dominance, self.selectivity),
            "n_attributes": len(self.attributes),
            "n_attributes_scored": len(self.attributes),
            "n_attributes_cs": int(np.isfinite(self.dominance).sum()),
            "averaged_over": "all attributes; every fold scored (degenerate folds: test F1 = 0); "
            "CS over the attributes with a finite supercategory dominance",
            "coverage": self.coverage.summary(),
            "n_probes_not_converged": len(self.not_converged),
            "probes_not_converged": list(self.not_converged),
        }

    def fold_selectivity(self) -> np.ndarray:
        """(n_attributes, n_folds) F1 selectivity of each fold alone (same chance score as the mean)."""
        chance = 100.0 * self.mean_f1 - self.selectivity  # 100 x n_positives / n_concepts
        return 100.0 * self.f1 - chance[:, None]

    def cs_spread(self) -> dict[str, object]:
        """CS of the fold-averaged F1 (the headline) beside the CS of each fold alone, and the fold noise.

        Averaging F1 over folds before correlating removes fold-to-fold noise, which
        otherwise attenuates the correlation towards 0; a split with noisier folds (whole
        clusters moved) therefore shows a lower per-fold CS without less leakage.
        ``f1_fold_sd`` is the mean over attributes of the sd of F1 (points) across folds.
        """
        per_fold = [pearson(self.dominance, column) for column in self.fold_selectivity().T]
        finite = [c for c in per_fold if np.isfinite(c)]
        n_folds = self.f1.shape[1]
        return {
            "cs_of_mean_f1": pearson(self.dominance, self.selectivity),
            "cs_per_fold": per_fold,
            "cs_per_fold_mean": float(np.mean(finite)) if finite else float("nan"),
            "cs_per_fold_sd": float(np.std(finite, ddof=1)) if len(finite) > 1 else float("nan"),
            "f1_fold_sd": float(np.mean(100.0 * self.f1.std(axis=1, ddof=1))) if n_folds > 1 and len(self.f1) else float("nan"),
        }

    def per_attribute(self) -> dict[str, dict[str, object]]:
        """Attribute name -> test F1 and F1 selectivity (percent), mean over folds and per fold, and dominance."""
        fold_selectivity = self.fold_selectivity()
        degenerate = self.coverage.degenerate
        return {
            name: {
                "f1": float(100.0 * self.mean_f1[a]),
                "selectivity": float(self.selectivity[a]),
                "f1_per_fold": [float(100.0 * v) for v in self.f1[a]],
                "selectivity_per_fold": [float(v) for v in fold_selectivity[a]],
                "dominance": float(self.dominance[a]),
                "n_degenerate_folds": int(degenerate[a].sum()),
            }
            for a, name in enumerate(self.attributes)
        }


def probe_attributes(
    X: np.ndarray,
    data: ConceptAttributeData,
    folds: Sequence[Sequence[Fold]],
    solver: str = DEFAULT_SOLVER,
    max_iter: int = MAX_ITER,
    progress: bool | None = None,
    dominance: np.ndarray | None = None,
    num_proc: int | None = None,
) -> AttributeProbeResult:
    """Fit one probe per attribute per non-degenerate fold and compute F1, selectivity and dominance.

    Parameters
    ----------
    X:
        (n_concepts, d) embeddings in ``data.concepts`` order.
    folds:
        Per attribute, its (train, test) folds (:func:`clip_cycles.attributes.splitters.attribute_folds`).
    solver:
        A key of ``PROBE_SOLVERS``: ``"batched"`` (default: the L2-penalised probe, all columns together),
        ``"sklearn_l2"`` (its one-fit-per-column reference), ``"sklearn"`` (paper 2's unpenalised probe)
        or ``"lockstep"`` (see the module docstring).
    num_proc:
        Processes for the ``sklearn`` solver (None: the usable cores); the others ignore it.
    dominance:
        Per-attribute supercategory dominance to correlate with (paper 2's CS script,
        :func:`clip_cycles.attributes.paper2_protocol.paper2_cs_inputs`); None: computed from ``data``.
    """
    X = _check_matrix(X)
    if X.shape[0] != len(data.concepts):
        raise ValueError(f"embeddings have {X.shape[0]} rows for {len(data.concepts)} concepts")
    fit = PROBE_SOLVERS.get(solver)  # an unknown solver fails before any work
    labels = data.labels
    zero = [a for a, p in zip(data.attributes, data.n_positives) if p == 0]
    if zero:
        raise ValueError(f"attributes with zero positive concepts cannot be probed: {zero[:10]}")
    if dominance is not None and np.shape(dominance) != (len(data.attributes),):
        # Checked before the fits: a wrong shape is known now, not after minutes of probes.
        raise ValueError(f"dominance has shape {np.shape(dominance)} for {len(data.attributes)} attributes")
    coverage = coverage_report(labels, folds, data.attributes)
    n_attr, n_folds = coverage.fitted.shape
    columns = [(a, f) for a in range(n_attr) for f in range(n_folds) if coverage.fitted[a, f]]
    n = X.shape[0]
    # Degenerate folds keep F1 = 0: nothing to learn means negative everywhere.
    f1 = np.zeros((n_attr, n_folds))
    n_iter = np.zeros((n_attr, n_folds), dtype=np.int64)
    not_converged: tuple[str, ...] = ()
    if columns:
        mask = np.zeros((n, len(columns)), dtype=bool)
        test_mask = np.zeros((n, len(columns)), dtype=bool)
        for k, (a, f) in enumerate(columns):
            train, test = folds[a][f]
            mask[train, k] = True
            test_mask[test, k] = True
        y = labels[:, [a for a, _ in columns]]
        fits = fit(X, y, mask, max_iter=max_iter, tol=TOL, progress=progress, num_proc=num_proc)
        predicted = (X @ fits.coef.T + fits.intercept) > 0
        scores = f1_scores(y & test_mask, predicted & test_mask)
        for k, (a, f) in enumerate(columns):
            f1[a, f] = scores[k]
            n_iter[a, f] = fits.n_iter[k]
        if fits.converged is not None and not fits.converged.all():
            bad = np.flatnonzero(~fits.converged)
            not_converged = tuple(f"{data.attributes[columns[k][0]]}/fold {columns[k][1]}" for k in bad)
            logger.warning(
                "%d of %d probes did not converge (solver %s): %s%s", len(not_converged), len(columns), solver,
                ", ".join(not_converged[:10]), " ..." if len(not_converged) > 10 else "",
            )  # fmt: skip
    mean_f1 = f1.mean(axis=1) if n_folds else np.full(n_attr, np.nan)
    selectivity = f1_selectivity(mean_f1, data.n_positives, n)
    if dominance is None:
        dominance = supercategory_dominance(labels, data.supercategories)
    return AttributeProbeResult(data.attributes, f1, mean_f1, selectivity, dominance, coverage, n_iter, not_converged)


def attribute_task_metrics(
    embeddings: np.ndarray,
    data: ConceptAttributeData,
    strategy: str,
    seed: int = 0,
    *,
    split_params: dict[str, object] | None = None,
    context: SplitContext | None = None,
    solver: str | None = None,
    leakage_threshold: float | None = None,
    progress: bool | None = None,
    protocol: str = DEFAULT_PROTOCOL,
    dominance: np.ndarray | None = None,
    num_proc: int | None = None,
) -> dict[str, object]:
    """One strategy, one seed: F1 selectivity, CS, degenerate folds and leakage as a JSON-ready dict.

    ``protocol="paper2"`` builds paper 2's splitter for the strategy (its seeds are fixed, so
    ``seed`` is only recorded) and needs ``solver="sklearn"`` (``solver`` None: the protocol's,
    :func:`protocol_solver`; ``num_proc``: its processes); ``dominance`` replaces the
    data's supercategory dominance in CS (see :mod:`clip_cycles.attributes.paper2_protocol`).

    The entry point for harness plugins (clip_benchmark): embeddings in
    ``data.concepts`` order, a strategy name from ``clip_cycles.attributes.splitters.STRATEGIES``
    or from ``context.published``.
    """
    X = _check_matrix(embeddings, "embeddings")
    if context is None:
        context = SplitContext(concepts=data.concepts, supercategories=data.supercategories)
    check_protocol(protocol, "protocol")
    solver = protocol_solver(protocol, solver)
    if protocol == "paper2" and solver != PAPER2_SOLVER:
        raise ValueError(f"protocol paper2 fits paper 2's exact probe (solver {PAPER2_SOLVER!r}); got solver {solver!r}")
    if protocol == "paper2" and strategy in context.published:
        splitter = paper2_published_splitter(context.published[strategy])
    elif protocol == "paper2":
        splitter = paper2_splitter(strategy, context, (split_params or {}).get("n_clusters"))  # type: ignore[arg-type]
    else:
        splitter = make_splitter(strategy, context, seed, **(split_params or {}))
    folds = attribute_folds(splitter, X, data.labels, attributes=data.attributes)
    result = probe_attributes(X, data, folds, solver=solver, progress=progress, dominance=dominance, num_proc=num_proc)
    metrics = result.summary()
    metrics["cs_spread"] = result.cs_spread()
    metrics["per_attribute"] = result.per_attribute()
    metrics.update(
        {
            "strategy": strategy,
            "seed": PAPER2_SEED_LABEL if protocol == "paper2" else seed,
            "protocol": protocol,
            "solver": solver,
            "splitter": type(splitter).__name__,
            "fold_assignment": splitter.fold_assignment,
            "split_embedding": context.split_embedding_for(strategy),
            "n_folds": splitter.get_n_splits(),
            "leakage": leakage_score(X, leakage_folds(splitter, X, folds), leakage_threshold).as_dict(),
        }
    )
    if strategy in context.published:
        metrics["published_split"] = {"path": context.published[strategy].path, **context.published[strategy].summary}
    return metrics


def strategy_folds(splitter: ConceptSplitter, X: np.ndarray, data: ConceptAttributeData) -> list[list[Fold]]:
    """Folds per attribute for ``splitter`` on ``data`` (thin alias of :func:`attribute_folds`)."""
    return attribute_folds(splitter, X, data.labels, attributes=data.attributes)
