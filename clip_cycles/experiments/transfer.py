"""Family-to-family transfer and cycle-difference alignment (``clip-cycles transfer``).

Per seed: a rank-64 probe is trained on each usable family (cycle loss, validation
selection; :func:`clip_cycles.experiments.probes.train_probe`, so the diagonal is exactly the probe
experiment's rank-64 result) and scored by exact CycleAcc on the test cycles of every
family: the transfer matrix T[i, j] (row = trained on, column = tested on).

Alignment: G_f = mean over f's validation cycles of D_C = (phi1 - phi2)(psi1 - psi2)^T,
computed as Dphi^T Dpsi / N (no d x d matrix per cycle); A[i, j] =
<G_i, G_j>_F / (||G_i||_F ||G_j||_F), symmetric with unit diagonal. Pearson and
Spearman correlations between A[i, j] and T[i, j] over the ordered off-diagonal pairs
(i != j) are computed within each seed, then summarized by mean and sample sd.
"""

from __future__ import annotations

from typing import Annotated, Any, Sequence

import numpy as np
from pydantic import Field

from clip_cycles.algebra.contrast import CHUNK_CYCLES, DEFAULT_TIE_TOLERANCE
from clip_cycles.experiments.experiment_data import DEFAULT_MIN_CYCLES, ExperimentData, FamilyFeatures, usable_families
from clip_cycles.experiments.probes import DEFAULT_SEEDS, REFERENCE_RANK, score_head, train_with
from clip_cycles.processes import run_jobs
from clip_cycles.results import mean_sd
from clip_cycles.schemas.options import CheckedOptions

RESULT_FILE = "transfer.json"


class TransferSettings(CheckedOptions):
    """Settings of the transfer grid (paper: rank 64, the broader probes' 30 epochs)."""

    rank: int = Field(REFERENCE_RANK, ge=1)
    epochs: int = Field(30, ge=1)
    lr: float = Field(1e-3, gt=0, allow_inf_nan=False)
    weight_decay: float = Field(1e-4, ge=0, allow_inf_nan=False)
    batch_size: int = Field(512, ge=1)
    seeds: tuple[Annotated[int, Field(ge=0)], ...] = Field(DEFAULT_SEEDS, min_length=1)
    min_cycles: int = Field(DEFAULT_MIN_CYCLES, ge=1)
    threads: int | None = Field(1, ge=1)


def cycle_difference_matrix(family: FamilyFeatures, cycles: np.ndarray) -> np.ndarray:
    """G = mean over cycles of (phi1 - phi2)(psi1 - psi2)^T, as Dphi^T Dpsi / N in float64 (chunked)."""
    index = np.asarray(cycles, dtype=np.int64)
    if index.ndim != 2 or index.shape[0] == 0:
        raise ValueError(f"family {family.name!r}: no cycles to form the mean cycle-difference matrix")
    phi, psi = family.image_features, family.caption_features
    out = np.zeros((phi.shape[1], psi.shape[1]))
    for start in range(0, index.shape[0], CHUNK_CYCLES):
        chunk = index[start : start + CHUNK_CYCLES]
        d_image = phi[chunk[:, 0]].astype(np.float64) - phi[chunk[:, 1]]
        d_caption = psi[chunk[:, 2]].astype(np.float64) - psi[chunk[:, 3]]
        out += d_image.T @ d_caption
    return out / index.shape[0]


def alignment_matrix(matrices: Sequence[np.ndarray], names: Sequence[str]) -> np.ndarray:
    """Normalized Frobenius inner products <G_i, G_j> / (||G_i|| ||G_j||); symmetric, unit diagonal."""
    flat = np.stack([np.asarray(g, dtype=np.float64).ravel() for g in matrices])
    norms = np.linalg.norm(flat, axis=1)
    zero = np.flatnonzero(norms == 0)
    if zero.size:
        raise ValueError(f"family {names[int(zero[0])]!r} has an all-zero mean cycle-difference matrix: alignment undefined")
    unit = flat / norms[:, None]
    gram = unit @ unit.T
    gram = (gram + gram.T) / 2  # exact symmetry despite summation order
    np.fill_diagonal(gram, 1.0)
    return gram


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank (as Spearman's rho needs)."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    while start < len(values):
        stop = start
        while stop + 1 < len(values) and sorted_values[stop + 1] == sorted_values[start]:
            stop += 1
        ranks[order[start : stop + 1]] = (start + stop) / 2 + 1
        start = stop + 1
    return ranks


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson correlation; None when either side is constant (undefined) or fewer than 2 points."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"pearson needs two 1-D arrays of equal length, got {a.shape} and {b.shape}")
    if a.size < 2:
        return None
    a, b = a - a.mean(), b - b.mean()
    denom = np.sqrt((a @ a) * (b @ b))
    return None if denom == 0 else float(np.clip((a @ b) / denom, -1.0, 1.0))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rank correlation (average ranks for ties); None when undefined."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"spearman needs two 1-D arrays of equal length, got {a.shape} and {b.shape}")
    return pearson(_ranks(a), _ranks(b))


def off_diagonal(matrix: np.ndarray) -> np.ndarray:
    """Entries M[i, j] for i != j, row-major (the ordered off-diagonal pairs)."""
    m = np.asarray(matrix)
    return m[~np.eye(m.shape[0], dtype=bool)]


def _correlation_summary(per_seed: dict[str, float | None]) -> dict[str, Any]:
    summary = mean_sd(per_seed.values(), skip_missing=True, count=True)
    return {"per_seed": per_seed, "n_seeds_defined": summary.pop("n"), **summary}


def _transfer_row(
    shared: tuple[dict[str, FamilyFeatures], list[str], TransferSettings, float], job: tuple[int, str]
) -> tuple[float, list[float]]:
    """One probe of the grid (family ``job[1]``, seed ``job[0]``): its best validation CycleAcc and its test
    CycleAcc on every family, in ``names`` order."""
    usable, names, settings, tie_tolerance = shared
    seed, name = job
    run = train_with(settings, usable[name], seed, "low_rank", settings.rank, tie_tolerance)
    return run.best_val, [score_head(run.head, usable[target], seed, "test", tie_tolerance) for target in names]


def run_transfer(data: ExperimentData, settings: TransferSettings | None = None, num_proc: int | None = None) -> dict[str, Any]:
    """The full transfer grid and alignment for every seed, as one JSON-ready record.

    The grid's probes train in up to ``num_proc`` processes (None: the usable cores), each as it
    would alone: the record is the same for any ``num_proc``.
    """
    settings = settings or TransferSettings()
    usable, unavailable = usable_families(data, settings.seeds, settings.min_cycles)
    names = list(usable)
    k = len(names)
    tie_tolerance = data.tie_tolerance if data.tie_tolerance is not None else DEFAULT_TIE_TOLERANCE
    per_seed: dict[str, Any] = {}
    transfers, alignments = [], []
    pearsons: dict[str, float | None] = {}
    spearmans: dict[str, float | None] = {}
    jobs = [(seed, name) for seed in settings.seeds for name in names]
    rows = dict(zip(jobs, run_jobs(_transfer_row, (usable, names, settings, tie_tolerance), jobs, num_proc, "transfer probes")))
    for seed in settings.seeds:
        transfer = np.zeros((k, k))
        best_val = []
        for i, name in enumerate(names):
            row_best_val, row = rows[(seed, name)]
            best_val.append(row_best_val)
            transfer[i, :] = row
        matrices = [cycle_difference_matrix(usable[n], usable[n].split(seed, "validation")) for n in names]
        alignment = alignment_matrix(matrices, names)
        x, y = off_diagonal(alignment), off_diagonal(transfer)
        pearsons[str(seed)], spearmans[str(seed)] = pearson(x, y), spearman(x, y)
        transfers.append(transfer)
        alignments.append(alignment)
        per_seed[str(seed)] = {
            "transfer": transfer.tolist(),
            "alignment": alignment.tolist(),
            "probe_best_val_cycle_acc": best_val,
            "pearson": pearsons[str(seed)],
            "spearman": spearmans[str(seed)],
        }
    stack_t, stack_a = np.stack(transfers), np.stack(alignments)
    ddof = 1 if len(settings.seeds) > 1 else 0
    return {
        "experiment": "transfer",
        **data.identity(),
        "seeds": list(settings.seeds),
        "settings": settings.model_dump(),
        "families": names,
        "family_order": data.family_names(),
        "unavailable": dict(sorted(unavailable.items())),
        "n_cycles": {n: usable[n].counts() for n in names},
        "n_pairs": k * (k - 1),
        "per_seed": per_seed,
        "mean": {
            "transfer": stack_t.mean(axis=0).tolist(),
            "transfer_sd": stack_t.std(axis=0, ddof=ddof).tolist(),
            "alignment": stack_a.mean(axis=0).tolist(),
            "alignment_sd": stack_a.std(axis=0, ddof=ddof).tolist(),
        },
        "correlation": {"pearson": _correlation_summary(pearsons), "spearman": _correlation_summary(spearmans)},
    }


def transfer_metrics(data: ExperimentData, settings: TransferSettings | None = None) -> dict[str, Any]:
    """clip_benchmark ``metrics`` for ``--dataset cycles_transfer/<collection>`` (e.g. ``coco_all``).

    Headline numbers: mean Pearson and Spearman correlation between alignment and
    transfer (with sd over seeds), mean in-family (diagonal) and cross-family
    (off-diagonal) transfer CycleAcc; the full record is under ``transfer``.
    """
    settings = settings or TransferSettings()
    record = run_transfer(data, settings)
    mean_t = np.asarray(record["mean"]["transfer"])
    corr = record["correlation"]
    return {
        "model": data.model,
        "pretrained": data.pretrained,
        "tie_tolerance": data.tie_tolerance,
        "seeds": list(settings.seeds),
        "pearson": corr["pearson"]["mean"],
        "pearson_sd": corr["pearson"]["sd"],
        "spearman": corr["spearman"]["mean"],
        "spearman_sd": corr["spearman"]["sd"],
        "in_family_cycle_acc": float(np.diag(mean_t).mean()),
        "cross_family_cycle_acc": float(off_diagonal(mean_t).mean()) if mean_t.shape[0] > 1 else None,
        "n_families": len(record["families"]),
        "n_pairs": record["n_pairs"],
        "n_cycles": int(sum(sum(s.values()) for c in record["n_cycles"].values() for s in c.values())),
        "unavailable": record["unavailable"],
        "transfer": record,
    }
