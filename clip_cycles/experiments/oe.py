"""Cycle OE vs Shortcut OE vs four-entry BCE (``clip-cycles oe``): does a marginal shortcut overstate transfer?

All three train the paper's OE score class (``heads.OEHead``: rank-64 bilinear +
image-only alpha + caption-only beta + bias) with its hyper-parameters (8 epochs,
batch 512, lr 1e-3, weight decay 1e-4, seeds 0, 1, 2) and are scored by exact
CycleAcc on the unmarked test cycles:

- **Cycle OE**: cycle loss on the train cycles, selected on exact validation cycles;
- **Shortcut OE**: pairwise BCE on positives (u_i, v_i) of the train cycles and
  negatives (u_i, marker(v_i)), the true caption prefixed with the OE marker; selected
  on the same construction built from the validation cycles (the "OE validation");
- **four-entry BCE** on the train cycles, selected on exact validation cycles.

Two shortcut probes (paper 1: 50 epochs, lr 1e-2) are trained on the OE construction with
pairwise BCE. The text-only probe shows the shortcut: it solves the OE validation task
from the caption alone, yet its exact CycleAcc is 0.5. The image-only probe is reported
beside it: every OE negative shares its image with its positive, so no image-only score
can separate them (its OE validation accuracy is exactly one half, all ties), and its
exact CycleAcc is 0.5 as well. OE validation accuracy is paired: the share of validation positives
(u, v) whose logit beats that of (u, marker(v)), ties (|difference| <= tie tolerance)
counting one half. Marked captions come from the loader (``FamilyFeatures.marker_rows``),
encoded through the same backend and cache as every other caption.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Callable

import numpy as np
from pydantic import Field

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE, cycle_acc, cycle_credits
from clip_cycles.experiments.experiment_data import (
    DEFAULT_MIN_CYCLES,
    OE_MARKER,
    ExperimentData,
    FamilyFeatures,
    marker_caption,
    usable_families,
)
from clip_cycles.experiments.probes import DEFAULT_SEEDS, EXPERIMENT_SPLITS, CycleSubset, float64_logits, summarize, train_probe
from clip_cycles.heads.training import TrainConfig, train_on_pairs
from clip_cycles.schemas.options import CheckedOptions

if TYPE_CHECKING:  # pragma: no cover
    from clip_cycles.heads.score_heads import ScoreHead

RESULT_FILE = "oe.json"
METHODS: tuple[str, ...] = ("cycle_oe", "shortcut_oe", "four_entry_bce")
#: The shortcut probes of the OE study (heads of clip_cycles.heads.score_heads), each reported as ``<name>_probe``.
SHORTCUT_PROBES: tuple[str, ...] = ("text_only", "image_only")


class OESettings(CheckedOptions):
    """The paper's OE protocol; the text-only and image-only shortcut probes share their own epochs and lr."""

    rank: int = Field(64, ge=1)
    epochs: int = Field(8, ge=1)
    batch_size: int = Field(512, ge=1)
    lr: float = Field(1e-3, gt=0, allow_inf_nan=False)
    weight_decay: float = Field(1e-4, ge=0, allow_inf_nan=False)
    seeds: tuple[Annotated[int, Field(ge=0)], ...] = Field(DEFAULT_SEEDS, min_length=1)
    text_only_epochs: int = Field(50, ge=1)
    text_only_lr: float = Field(1e-2, gt=0, allow_inf_nan=False)
    min_cycles: int = Field(DEFAULT_MIN_CYCLES, ge=1)
    threads: int | None = Field(1, ge=1)


def matched_pairs(cycles: np.ndarray) -> np.ndarray:
    """The unique valid pairs (u1, v1), (u2, v2) of a cycle set, sorted: an (M, 2) int array."""
    pairs = np.concatenate([cycles[:, [0, 2]], cycles[:, [1, 3]]])
    return np.unique(pairs, axis=0)


def marked_negatives(family: FamilyFeatures, pairs: np.ndarray, split: str) -> np.ndarray:
    """(u, marker(v)) for every positive (u, v); ValueError naming the caption row lacking a marked twin."""
    if family.marker_rows is None:
        raise ValueError(
            f"family {family.name!r} has no marked captions: the OE experiment needs features of "
            f"'{marker_caption('<caption>')}' (load with with_markers=True, or `clip-cycles oe`)"
        )
    twins = np.asarray(family.marker_rows)[pairs[:, 1]]
    missing = np.flatnonzero(twins < 0)
    if missing.size:
        row = int(pairs[missing[0], 1])
        raise ValueError(f"family {family.name!r} {split}: caption row {row} has no marked twin in marker_rows")
    return np.stack([pairs[:, 0], twins], axis=1)


def oe_pairs(family: FamilyFeatures, seed: int, split: str) -> np.ndarray:
    """The OE construction of a split: (image, caption, label) rows, positives (1) then marked negatives (0)."""
    positives = matched_pairs(family.split(seed, split))
    negatives = marked_negatives(family, positives, split)
    return np.concatenate(
        [
            np.column_stack([positives, np.ones(len(positives), dtype=np.int64)]),
            np.column_stack([negatives, np.zeros(len(negatives), dtype=np.int64)]),
        ]
    ).astype(np.int64)


def oe_validation_accuracy(
    family: FamilyFeatures, seed: int, split: str = "validation", tie_tolerance: float = DEFAULT_TIE_TOLERANCE
) -> Callable[[ScoreHead], float]:
    """``validate(head)``: paired accuracy of positives over their marked negatives (ties one half)."""
    positives = matched_pairs(family.split(seed, split))
    negatives = marked_negatives(family, positives, split)
    phi = np.asarray(family.image_features[positives[:, 0]], dtype=np.float64)
    psi_pos = np.asarray(family.caption_features[positives[:, 1]], dtype=np.float64)
    psi_neg = np.asarray(family.caption_features[negatives[:, 1]], dtype=np.float64)

    def validate(head: ScoreHead) -> float:
        margin = float64_logits(head, phi, psi_pos) - float64_logits(head, phi, psi_neg)
        return float(cycle_credits(margin, tie_tolerance).mean())

    return validate


def _train_on_oe_pairs(
    family: FamilyFeatures,
    seed: int,
    head_name: str,
    rank: int | None,
    epochs: int,
    lr: float,
    settings: OESettings,
    tie_tolerance: float,
) -> tuple[ScoreHead, int, float]:
    """Pairwise BCE on the OE construction, selected on OE validation accuracy (the shared loop, as ``train_probe``)."""
    from clip_cycles.heads.score_heads import make_head  # imports torch

    head = make_head(head_name, family.image_dim, family.caption_dim, rank=rank, seed=seed)
    config = TrainConfig(
        lr=lr,
        weight_decay=settings.weight_decay,
        epochs=epochs,
        batch_size=settings.batch_size,
        seed=seed,
        loss="pairwise_bce",
        tie_tolerance=tie_tolerance,
        threads=settings.threads,
    )
    result = train_on_pairs(
        head,
        family.image_features,
        family.caption_features,
        oe_pairs(family, seed, "train"),
        config,
        validate=oe_validation_accuracy(family, seed, tie_tolerance=tie_tolerance),
        val_metric="oe_validation_acc",
    )
    return result.head, result.best_epoch, float(result.best_val)


def oe_family(family: FamilyFeatures, settings: OESettings, tie_tolerance: float) -> dict[str, Any]:
    """Every OE method and the text-only probe on one family, per seed, with mean/sd and per-seed differences."""
    per_method: dict[str, dict[str, Any]] = {m: {} for m in METHODS}
    shortcut: dict[str, dict[str, Any]] = {p: {} for p in SHORTCUT_PROBES}
    for seed in settings.seeds:
        val_cycles = CycleSubset(family, family.split(seed, "validation"))
        test_cycles = CycleSubset(family, family.split(seed, "test"))
        oe_val = oe_validation_accuracy(family, seed, tie_tolerance=tie_tolerance)

        def record(
            head: ScoreHead, best_epoch: int, val_cycles=val_cycles, test_cycles=test_cycles, oe_val=oe_val
        ) -> dict[str, Any]:
            return {
                "test_cycle_acc": cycle_acc(test_cycles.deltas(head), tie_tolerance),
                "val_cycle_acc": cycle_acc(val_cycles.deltas(head), tie_tolerance),
                "oe_val_acc": oe_val(head),
                "best_epoch": best_epoch,
            }

        for method, loss in (("cycle_oe", "cycle"), ("four_entry_bce", "four_entry_bce")):
            run = train_probe(
                family,
                seed,
                "oe",
                settings.rank,
                settings.epochs,
                settings.lr,
                settings.weight_decay,
                settings.batch_size,
                loss=loss,
                tie_tolerance=tie_tolerance,
                threads=settings.threads,
            )
            per_method[method][str(seed)] = {**record(run.head, run.best_epoch), "selected_on": "val_cycle_acc"}
        head, best_epoch, _ = _train_on_oe_pairs(
            family, seed, "oe", settings.rank, settings.epochs, settings.lr, settings, tie_tolerance
        )
        per_method["shortcut_oe"][str(seed)] = {**record(head, best_epoch), "selected_on": "oe_val_acc"}
        for probe in SHORTCUT_PROBES:
            head, best_epoch, _ = _train_on_oe_pairs(
                family, seed, probe, None, settings.text_only_epochs, settings.text_only_lr, settings, tie_tolerance
            )
            shortcut[probe][str(seed)] = {**record(head, best_epoch), "selected_on": "oe_val_acc"}
    methods = {}
    for method, runs in per_method.items():
        methods[method] = {
            "runs": runs,
            "test_cycle_acc": summarize({s: r["test_cycle_acc"] for s, r in runs.items()}),
            "oe_val_acc": summarize({s: r["oe_val_acc"] for s, r in runs.items()}),
        }
    differences = {}
    for other in ("shortcut_oe", "four_entry_bce"):
        diff = {
            s: per_method["cycle_oe"][s]["test_cycle_acc"] - per_method[other][s]["test_cycle_acc"]
            for s in per_method["cycle_oe"]
        }
        differences[f"cycle_oe_minus_{other}"] = summarize(diff)
    table = [
        {
            "seed": int(s),
            **{m: per_method[m][s]["test_cycle_acc"] for m in METHODS},
            **{f"{p}_{k}": shortcut[p][s][k] for p in SHORTCUT_PROBES for k in ("test_cycle_acc", "oe_val_acc")},
        }
        for s in (str(x) for x in settings.seeds)
    ]
    return {
        "available": True,
        "n_cycles": family.counts(),
        "dropped_cycles": family.dropped_cycles,
        "splits": dict(EXPERIMENT_SPLITS),
        "methods": methods,
        **{
            f"{p}_probe": {
                "runs": runs,
                "oe_val_acc": summarize({s: r["oe_val_acc"] for s, r in runs.items()}),
                "test_cycle_acc": summarize({s: r["test_cycle_acc"] for s, r in runs.items()}),
            }
            for p, runs in shortcut.items()
        },
        "differences": differences,
        "per_seed_table": table,
    }


def run_oe(data: ExperimentData, settings: OESettings | None = None) -> dict[str, Any]:
    """The OE experiment on every usable family, as one JSON-ready record."""
    settings = settings or OESettings()
    usable, unavailable = usable_families(data, settings.seeds, settings.min_cycles)
    families: dict[str, Any] = {name: oe_family(family, settings, data.tie_tolerance) for name, family in usable.items()}
    for name, reason in unavailable.items():
        families[name] = {"available": False, "unavailable_reason": reason}
    return {
        "experiment": "oe",
        **data.identity(),
        "seeds": list(settings.seeds),
        "settings": settings.model_dump(),
        "marker": OE_MARKER,
        "marker_caption_example": marker_caption("<caption>"),
        "family_order": data.family_names(),
        "families": families,
        "unavailable": dict(sorted(unavailable.items())),
        "n_cycles": {n: usable[n].counts() for n in usable},
    }


def oe_metrics(data: ExperimentData, settings: OESettings | None = None) -> dict[str, Any]:
    """clip_benchmark ``metrics`` for ``--dataset cycles_oe/<task>``: one family's OE comparison.

    ``cycle_acc`` is Cycle OE's test CycleAcc; ``shortcut_oe_cycle_acc``,
    ``four_entry_bce_cycle_acc`` (each with ``_sd``), the mean per-seed differences, the
    text-only probe's OE validation accuracy and CycleAcc, and the full record follow.
    """
    settings = settings or OESettings()
    record = run_oe(data, settings)
    names = [n for n in record["family_order"] if n in record["families"]]
    if len(names) != 1:
        raise ValueError(f"oe_metrics scores one family per dataset, got {len(names)}: {names}")
    family = record["families"][names[0]]
    base = {
        "model": data.model,
        "pretrained": data.pretrained,
        "tie_tolerance": data.tie_tolerance,
        "seeds": list(settings.seeds),
    }
    if not family["available"]:
        return {**base, "available": False, "unavailable_reason": family["unavailable_reason"], "n_cycles": 0}
    metrics: dict[str, Any] = {**base, "available": True}
    for method in METHODS:
        summary = family["methods"][method]["test_cycle_acc"]
        key = "cycle_acc" if method == "cycle_oe" else f"{method}_cycle_acc"
        metrics[key], metrics[f"{key}_sd"] = summary["mean"], summary["sd"]
    for name, diff in family["differences"].items():
        metrics[name], metrics[f"{name}_sd"] = diff["mean"], diff["sd"]
    for probe in SHORTCUT_PROBES:
        metrics[f"{probe}_oe_val_acc"] = family[f"{probe}_probe"]["oe_val_acc"]["mean"]
        metrics[f"{probe}_cycle_acc"] = family[f"{probe}_probe"]["test_cycle_acc"]["mean"]
    metrics["n_cycles"] = int(sum(sum(v.values()) for v in family["n_cycles"].values()))
    metrics["oe"] = record
    return metrics
