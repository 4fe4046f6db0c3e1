"""Probe rank sweeps per family (``clip-cycles probe``): is a relation present but spread over directions?

For every usable family and seed, heads on the frozen features are trained with the
cycle loss on the train cycles, the best epoch is chosen by exact validation CycleAcc,
and the chosen head is scored by exact CycleAcc on the test cycles:

- ``diagonal`` (M = diag(m)) and full ``bilinear`` (M dense);
- ``low_rank`` (M = A B^T) at ranks 1, 2, 4, 8, 16, 32, 64 (the rank sweep);
- the additive audit alongside (image-only, text-only, additive: exactly 0.5);
- zero-shot cosine CycleAcc on the same test cycles, for comparison.

Seeds 0, 1, 2 give mean and sample sd. Interaction heads are scored with
``contrast.bilinear_deltas`` (float64, factorized); heads with additive parts from
their float64 logits. :func:`train_probe` and :func:`score_head` are shared with the
transfer experiment so its diagonal reproduces these numbers exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from pydantic import Field

from clip_cycles.algebra.contrast import (
    DEFAULT_TIE_TOLERANCE,
    cycle_acc,
    deltas_from_blocks,
    deltas_from_embeddings,
)
from clip_cycles.experiments.experiment_data import (
    DEFAULT_MIN_CYCLES,
    ExperimentData,
    FamilyFeatures,
    usable_families,
)
from clip_cycles.heads.additive_audit import additive_audit
from clip_cycles.heads.training import TrainConfig, Validation, cycle_batch_loss, fit_head, loss_of_kind
from clip_cycles.processes import run_jobs
from clip_cycles.results import mean_sd
from clip_cycles.schemas.options import CheckedOptions
from clip_cycles.verbosity import progress_disable

if TYPE_CHECKING:  # pragma: no cover
    from clip_cycles.heads.score_heads import ScoreHead

PROBE_RANKS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
FULL_HEADS: tuple[str, ...] = ("diagonal", "bilinear")
DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2)
#: The splits every cycle experiment uses, recorded in its family records: heads are fitted on ``fit``,
#: epochs selected on ``select``, and every reported test accuracy (zero-shot too) is on ``scored``.
EXPERIMENT_SPLITS: dict[str, str] = {"fit": "train", "select": "validation", "scored": "test"}
#: Rank of the probe in the strict-relation comparison and the transfer study.
REFERENCE_RANK: int = 64
#: Heads whose score is a pure bilinear form: scored by the float64 factorization.
FACTORIZED_HEADS: frozenset[str] = frozenset({"diagonal", "bilinear", "low_rank"})
RESULT_FILE = "probe.json"


class ProbeSettings(CheckedOptions):
    """Training and sweep settings (paper: broader COCO/GQA probes, 30 epochs, lr 1e-3, wd 1e-4, batch 512)."""

    epochs: int = Field(30, ge=1)
    lr: float = Field(1e-3, gt=0, allow_inf_nan=False)
    weight_decay: float = Field(1e-4, ge=0, allow_inf_nan=False)
    batch_size: int = Field(512, ge=1)
    ranks: tuple[Annotated[int, Field(ge=1)], ...] = PROBE_RANKS
    full_heads: tuple[str, ...] = FULL_HEADS
    seeds: tuple[Annotated[int, Field(ge=0)], ...] = Field(DEFAULT_SEEDS, min_length=1)
    min_cycles: int = Field(DEFAULT_MIN_CYCLES, ge=1)
    audit: bool = True
    audit_epochs: int = Field(5, ge=1)
    threads: int | None = Field(1, ge=1)


def probe_key(head: str, rank: int | None = None) -> str:
    """Result key of a probe: ``diagonal``, ``bilinear``, ``low_rank_r64``."""
    return f"{head}_r{rank}" if rank is not None else head


@dataclass
class ProbeRun:
    """A trained probe: the head at its best validation epoch and the selection record."""

    head: ScoreHead
    best_epoch: int
    best_val: float
    val_history: list[float]


class CycleSubset:
    """Cycles re-indexed over the rows they touch, as float64 sub-tables.

    Per-epoch validation then costs the rows used, not the table size, and the
    float64 copy is small. ``deltas(head)`` is the exact float64 Delta: factorized
    (``contrast.bilinear_deltas``) for pure bilinear heads, from float64 logits of the
    four pairs of each block for heads with additive parts.
    """

    def __init__(self, family: FamilyFeatures, cycles: np.ndarray) -> None:
        images, image_pos = np.unique(cycles[:, :2], return_inverse=True)
        captions, caption_pos = np.unique(cycles[:, 2:], return_inverse=True)
        self.phi = np.asarray(family.image_features[images], dtype=np.float64)
        self.psi = np.asarray(family.caption_features[captions], dtype=np.float64)
        self.index = np.concatenate([image_pos.reshape(-1, 2), caption_pos.reshape(-1, 2)], axis=1).astype(np.int64)

    def deltas(self, head: ScoreHead) -> np.ndarray:
        if head.name in FACTORIZED_HEADS:
            return factorized_deltas(self.phi, self.psi, self.index, head.bilinear_export())
        blocks = np.empty((self.index.shape[0], 2, 2))
        for a in range(2):
            for b in range(2):
                blocks[:, a, b] = float64_logits(head, self.phi[self.index[:, a]], self.psi[self.index[:, 2 + b]])
        return deltas_from_blocks(blocks)


def factorized_deltas(phi: np.ndarray, psi: np.ndarray, index: np.ndarray, export: dict[str, Any]) -> np.ndarray:
    """Delta = (phi1 - phi2)^T M (psi1 - psi2) in float64, as ``contrast.bilinear_deltas`` computes it.

    Single-threaded numpy: for the few thousand cycles of a validation or test split
    this beats the parallel kernel, whose thread start-up dominates on a shared CPU.
    ``export`` is ``head.bilinear_export()``: ``{"matrix": M}`` or ``{"factors": (A, B)}``.
    """
    if "factors" in export:
        a, b = export["factors"]
        left, right = phi @ np.asarray(a, dtype=np.float64), psi @ np.asarray(b, dtype=np.float64)
    else:
        left, right = phi, psi @ np.asarray(export["matrix"], dtype=np.float64).T
    d_left = left[index[:, 0]] - left[index[:, 1]]
    d_right = right[index[:, 2]] - right[index[:, 3]]
    return np.einsum("ij,ij->i", d_left, d_right)


def subset_tables(
    family: FamilyFeatures, cycle_sets: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Float64 sub-tables of the rows the given cycle sets touch, and the cycle sets re-indexed into them."""
    names = list(cycle_sets)
    stacked = np.concatenate([cycle_sets[n] for n in names])
    images, image_pos = np.unique(stacked[:, :2], return_inverse=True)
    captions, caption_pos = np.unique(stacked[:, 2:], return_inverse=True)
    index = np.concatenate([image_pos.reshape(-1, 2), caption_pos.reshape(-1, 2)], axis=1).astype(np.int64)
    bounds = np.cumsum([0] + [cycle_sets[n].shape[0] for n in names])
    remapped = {n: index[bounds[k] : bounds[k + 1]] for k, n in enumerate(names)}
    phi = np.asarray(family.image_features[images], dtype=np.float64)
    psi = np.asarray(family.caption_features[captions], dtype=np.float64)
    return phi, psi, remapped


def float64_logits(head: ScoreHead, phi: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """Pre-sigmoid logits of row pairs (phi[i], psi[i]) from a float64 copy of ``head``."""
    import torch

    from clip_cycles.heads.score_heads import float64_copy  # imports torch

    scorer = float64_copy(head)
    with torch.no_grad():
        return (
            scorer(torch.from_numpy(np.asarray(phi, dtype=np.float64)), torch.from_numpy(np.asarray(psi, dtype=np.float64)))
            .numpy()
            .astype(np.float64)
        )


def train_probe(
    family: FamilyFeatures,
    seed: int,
    head_name: str,
    rank: int | None,
    epochs: int = 30,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    batch_size: int = 512,
    loss: str = "cycle",
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE,
    threads: int | None = 1,
) -> ProbeRun:
    """Train one head on ``family``'s train cycles of ``seed``; keep the epoch with the best validation CycleAcc.

    The shared loop (``clip_cycles.heads.training.fit_head``): AdamW on float32 features
    with the registered loss (``clip_cycles.heads.losses``), batches from a generator
    seeded with ``seed``, head initialised from ``seed``: the same call always returns
    the same head. Validation CycleAcc is exact (float64, ``tie_tolerance``): factorized
    for bilinear heads (``contrast.bilinear_deltas`` on the rows the validation cycles
    touch), from float64 logits for the others. The earliest of equally good epochs
    wins. ``threads`` torch intra-op threads are used (default 1: these heads are
    small, and on a shared CPU extra threads mostly spin).
    """
    import torch

    from clip_cycles.heads.score_heads import make_head  # imports torch

    config = TrainConfig(
        lr=lr,
        weight_decay=weight_decay,
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        loss=loss,
        tie_tolerance=tie_tolerance,
        threads=threads,
    )
    spec = loss_of_kind(config.loss, "cycle", "train_probe")
    head = make_head(head_name, family.image_dim, family.caption_dim, rank=rank, seed=seed)
    train = family.split(seed, "train")
    val_deltas = CycleSubset(family, family.split(seed, "validation")).deltas
    # The tables as they are (no float64 detour): shared tables of a collection can be large.
    phi_t = torch.from_numpy(np.asarray(family.image_features, dtype=np.float32))
    psi_t = torch.from_numpy(np.asarray(family.caption_features, dtype=np.float32))
    batch_loss = cycle_batch_loss(spec, head, phi_t, psi_t, torch.from_numpy(train))
    validation = Validation("val_cycle_acc", lambda h: cycle_acc(val_deltas(h), tie_tolerance))
    run = fit_head(head, train.shape[0], batch_loss, config, validation, f"{family.name} {probe_key(head_name, rank)}")
    return ProbeRun(head=head, best_epoch=run.best_epoch, best_val=run.best_val, val_history=[r.val for r in run.history])


def head_cycle_deltas(head: ScoreHead, family: FamilyFeatures, cycles: np.ndarray) -> np.ndarray:
    """Exact float64 Delta of ``head`` on cycles of ``family`` (see :class:`CycleSubset`)."""
    return CycleSubset(family, cycles).deltas(head)


def score_head(
    head: ScoreHead, family: FamilyFeatures, seed: int, split: str = "test", tie_tolerance: float = DEFAULT_TIE_TOLERANCE
) -> float:
    """Exact CycleAcc of ``head`` on ``family``'s ``split`` cycles of ``seed``."""
    return cycle_acc(head_cycle_deltas(head, family, family.split(seed, split)), tie_tolerance)


def zero_shot_cycle_acc(
    family: FamilyFeatures, seed: int, split: str = "test", tie_tolerance: float = DEFAULT_TIE_TOLERANCE
) -> float:
    """Exact CycleAcc of the frozen dot-product score (cosine on normalized features)."""
    return cycle_acc(
        deltas_from_embeddings(family.image_features, family.caption_features, family.split(seed, split)), tie_tolerance
    )


def summarize(per_seed: dict[str, float]) -> dict[str, Any]:
    """``{"per_seed": ..., "mean": ..., "sd": ...}`` over seeds (sample sd)."""
    stats = mean_sd([per_seed[k] for k in per_seed])
    return {"per_seed": per_seed, **stats}


@dataclass
class _ProbeSpec:
    head: str
    rank: int | None

    @property
    def key(self) -> str:
        return probe_key(self.head, self.rank)


def _probe_specs(settings: ProbeSettings, diagonal_ok: bool) -> list[_ProbeSpec]:
    specs = [_ProbeSpec(h, None) for h in settings.full_heads if h != "diagonal" or diagonal_ok]
    return specs + [_ProbeSpec("low_rank", r) for r in settings.ranks]


def train_with(settings: Any, family: FamilyFeatures, seed: int, head: str, rank: int | None, tie_tolerance: float) -> ProbeRun:
    """:func:`train_probe` with an experiment's optimiser settings (``epochs``, ``lr``, ``weight_decay``,
    ``batch_size``, ``threads``: the probe's and the transfer grid's settings both carry them)."""
    return train_probe(
        family,
        seed,
        head,
        rank,
        settings.epochs,
        settings.lr,
        settings.weight_decay,
        settings.batch_size,
        tie_tolerance=tie_tolerance,
        threads=settings.threads,
    )


def _train_and_score(
    family: FamilyFeatures, seed: int, spec: _ProbeSpec, settings: ProbeSettings, tie_tolerance: float
) -> dict[str, Any]:
    """One probe of the sweep on one seed: trained, then its exact test CycleAcc (plain values only)."""
    result = train_with(settings, family, seed, spec.head, spec.rank, tie_tolerance)
    return {
        "test_cycle_acc": score_head(result.head, family, seed, tie_tolerance=tie_tolerance),
        "best_val_cycle_acc": result.best_val,
        "val_history": result.val_history,
        "best_epoch": result.best_epoch,
    }


def _probe_job(shared: tuple[dict[str, FamilyFeatures], ProbeSettings, float], job: tuple[str, int, int]) -> dict[str, Any]:
    families, settings, tie_tolerance = shared
    name, seed, index = job
    family = families[name]
    spec = _probe_specs(settings, family.image_dim == family.caption_dim)[index]
    return _train_and_score(family, seed, spec, settings, tie_tolerance)


def probe_family(
    family: FamilyFeatures,
    settings: ProbeSettings,
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE,
    trained: dict[tuple[int, str], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Every probe of the sweep on one family, per seed, plus zero-shot and the additive audit.

    ``trained``: the probes already trained (``(seed, probe key) -> run``, as :func:`run_probes`
    trains them in processes); the others are trained here.
    """
    from tqdm.auto import tqdm

    diagonal_ok = family.image_dim == family.caption_dim
    specs = _probe_specs(settings, diagonal_ok)
    probes: dict[str, dict[str, Any]] = {}
    per_seed: dict[str, dict[str, dict[str, Any]]] = {s.key: {} for s in specs}
    zero_shot: dict[str, float] = {}
    audits: dict[str, Any] = {}
    trained = trained or {}
    for seed in settings.seeds:
        zero_shot[str(seed)] = zero_shot_cycle_acc(family, seed, tie_tolerance=tie_tolerance)
        for spec in tqdm(specs, desc=f"{family.name} seed {seed}", disable=progress_disable(), leave=False):
            run = trained.get((seed, spec.key))
            if run is None:
                run = _train_and_score(family, seed, spec, settings, tie_tolerance)
            per_seed[spec.key][str(seed)] = run
        if settings.audit:
            phi, psi, sets = subset_tables(family, {k: family.split(seed, k) for k in ("train", "validation", "test")})
            report = additive_audit(
                phi,
                psi,
                sets["train"],
                sets["test"],
                sets["validation"],
                epochs=settings.audit_epochs,
                seed=seed,
                lr=settings.lr,
                weight_decay=settings.weight_decay,
                batch_size=settings.batch_size,
                tie_tolerance=tie_tolerance,
            )
            audits[str(seed)] = report.to_dict()
    for spec in specs:
        accs = {s: v["test_cycle_acc"] for s, v in per_seed[spec.key].items()}
        probes[spec.key] = {"head": spec.head, "rank": spec.rank, **summarize(accs), "runs": per_seed[spec.key]}
    out: dict[str, Any] = {
        "available": True,
        "n_cycles": family.counts(),
        "dropped_cycles": family.dropped_cycles,
        "splits": dict(EXPERIMENT_SPLITS),
        "zero_shot": summarize(zero_shot),
        "probes": probes,
        "rank_sweep": {
            "ranks": list(settings.ranks),
            "mean": [probes[probe_key("low_rank", r)]["mean"] for r in settings.ranks],
            "sd": [probes[probe_key("low_rank", r)]["sd"] for r in settings.ranks],
        },
    }
    if not diagonal_ok and "diagonal" in settings.full_heads:
        out["skipped_probes"] = {"diagonal": f"image width {family.image_dim} != caption width {family.caption_dim}"}
    if settings.audit:
        out["additive_audit"] = {"passed": all(a["passed"] for a in audits.values()), "per_seed": audits}
    return out


def run_probes(data: ExperimentData, settings: ProbeSettings | None = None, num_proc: int | None = None) -> dict[str, Any]:
    """The whole probe experiment as one JSON-ready record (model identity, settings, per-family results).

    Every (family, seed, probe) is trained in up to ``num_proc`` processes (None: the usable cores;
    :func:`clip_cycles.processes.run_jobs`), each single-threaded and seeded as alone: the record is
    the same for any ``num_proc``, which is why it is not part of the record.
    """
    from tqdm.auto import tqdm

    settings = settings or ProbeSettings()
    usable, unavailable = usable_families(data, settings.seeds, settings.min_cycles)
    tie_tolerance = data.tie_tolerance
    jobs = [
        (name, seed, index)
        for name in usable
        for seed in settings.seeds
        for index in range(len(_probe_specs(settings, usable[name].image_dim == usable[name].caption_dim)))
    ]
    runs = run_jobs(_probe_job, (usable, settings, tie_tolerance), jobs, num_proc, desc="probes")
    trained: dict[str, dict[tuple[int, str], dict[str, Any]]] = {name: {} for name in usable}
    for (name, seed, index), run in zip(jobs, runs):
        spec = _probe_specs(settings, usable[name].image_dim == usable[name].caption_dim)[index]
        trained[name][(seed, spec.key)] = run
    families: dict[str, Any] = {}
    for name in tqdm(list(usable), desc="probe families", disable=progress_disable()):
        families[name] = probe_family(usable[name], settings, data.tie_tolerance, trained[name])
    for name, reason in unavailable.items():
        families[name] = {"available": False, "unavailable_reason": reason}
    return {
        "experiment": "probe",
        **data.identity(),
        "seeds": list(settings.seeds),
        "settings": settings.model_dump(),
        "family_order": data.family_names(),
        "families": families,
        "unavailable": dict(sorted(unavailable.items())),
        "n_cycles": {n: usable[n].counts() for n in usable},
    }


def probe_metrics(data: ExperimentData, settings: ProbeSettings | None = None) -> dict[str, Any]:
    """clip_benchmark ``metrics`` for ``--dataset cycles_probe/<task>``: one family's probe sweep.

    Headline ``cycle_acc`` (and ``cycle_acc_sd``) is the rank-64 probe's test CycleAcc
    (the largest swept rank when 64 is not swept); every probe, the zero-shot score,
    the additive audit and the full record are included. A family that is unavailable
    gives ``{"available": False, "unavailable_reason": ...}``.
    """
    settings = settings or ProbeSettings()
    record = run_probes(data, settings)
    names = [n for n in record["family_order"] if n in record["families"]]
    if len(names) != 1:
        raise ValueError(f"probe_metrics scores one family per dataset, got {len(names)}: {names}")
    family = record["families"][names[0]]
    base = {
        "tie_tolerance": data.tie_tolerance,
        "seeds": list(settings.seeds),
        "model": data.model,
        "pretrained": data.pretrained,
    }
    if not family["available"]:
        return {**base, "available": False, "unavailable_reason": family["unavailable_reason"], "n_cycles": 0}
    rank = REFERENCE_RANK if REFERENCE_RANK in settings.ranks else max(settings.ranks)
    headline = family["probes"][probe_key("low_rank", rank)]
    metrics = {
        **base,
        "available": True,
        "cycle_acc": headline["mean"],
        "cycle_acc_sd": headline["sd"],
        "probe_rank": rank,
        "zero_shot_cycle_acc": family["zero_shot"]["mean"],
        "zero_shot_cycle_acc_sd": family["zero_shot"]["sd"],
        "n_cycles": int(sum(sum(v.values()) for v in family["n_cycles"].values())),
        "probe": record,
    }
    for key, probe in family["probes"].items():
        metrics[f"{key}_cycle_acc"] = probe["mean"]
        metrics[f"{key}_cycle_acc_sd"] = probe["sd"]
    if "additive_audit" in family:
        metrics["additive_audit_passed"] = family["additive_audit"]["passed"]
    return metrics


__all__ = [
    "ProbeSettings",
    "probe_family",
    "probe_key",
    "probe_metrics",
    "run_probes",
    "score_head",
    "train_probe",
    "zero_shot_cycle_acc",
]
