"""Two models' per-cycle samples compared on the same cycles: per family, the paired difference of CycleAcc.

The inputs are the per-cycle samples that ``clip-cycles eval --samples`` writes (JSON Lines,
:mod:`clip_cycles.evaluation.samples`, each line a :class:`clip_cycles.schemas.samples.SampleLine`).
Each family reports each side's CycleAcc as its result file records it (the mean over seeds)
beside the paired difference. Cycles are paired by ``(task, seed,
cycle_id)``; a family is compared only when both files hold the same cycles on the same images
and captions (and the same ``items_sha256`` where both carry one). The statistic and its
interval are :func:`clip_cycles.algebra.paired.paired_difference` (two-way image-cluster robust).
The families' calls are adjusted together (Holm, :mod:`clip_cycles.algebra.multiplicity`): each
family keeps its raw interval and verdict and gains ``adjusted_verdict``; ``overall`` is the mean
over families of the difference, with one joint variance over the images all families share.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from clip_cycles.algebra.bootstrap import DEFAULT_BOOTSTRAP_SEED, DEFAULT_LEVEL, DEFAULT_N_RESAMPLES
from clip_cycles.algebra.crossed import crossed_df, crossed_record, crossed_variance, incidence_codes
from clip_cycles.algebra.multiplicity import COMPARISON_ADJUSTMENT, adjusted_verdicts
from clip_cycles.algebra.paired import MIN_CYCLES, MIN_IMAGES, paired_difference
from clip_cycles.evaluation.samples import Key, read_samples, recorded_cycle_acc

#: Fields of a cycle that must be equal in both files for it to be the same item.
ITEM_FIELDS: tuple[str, ...] = ("image_0", "image_1", "caption_0", "caption_1")
#: Most disagreeing cycles listed per family.
N_DISAGREEMENTS = 10


def item_mismatch(task: str, a: Mapping[Key, dict[str, Any]], b: Mapping[Key, dict[str, Any]]) -> str | None:
    """Why ``a`` and ``b`` are not the same cycles of ``task`` (one sentence), or None.

    Different splits are named first: test against validation shares cycle ids and would otherwise pass.
    """
    splits_a, splits_b = (sorted({str(s.get("split")) for s in side.values()}) for side in (a, b))
    if splits_a != splits_b:
        return (
            f"{task}: the splits differ (A scored {' and '.join(splits_a)}, B scored {' and '.join(splits_b)}); "
            "evaluate both models on the same split (clip-cycles eval --split)"
        )
    digests_a = {s["items_sha256"] for s in a.values() if s.get("items_sha256")}
    digests_b = {s["items_sha256"] for s in b.values() if s.get("items_sha256")}
    if digests_a and digests_b and digests_a != digests_b:
        return f"{task}: the item sets differ (items_sha256 {sorted(digests_a)} vs {sorted(digests_b)})"
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        example = (only_a or only_b)[0]
        return (
            f"{task}: the cycle sets differ ({len(only_a)} only in A, {len(only_b)} only in B; e.g. seed {example[0]} "
            f"cycle {example[1]}); evaluate both models on the same tasks, seeds and split"
        )
    for key in sorted(a):
        for name in ITEM_FIELDS:
            if a[key][name] != b[key][name]:
                return f"{task}: seed {key[0]} cycle {key[1]} has {name} {a[key][name]!r} in A and {b[key][name]!r} in B"
    return None


def compare_family(
    a: Mapping[Key, dict[str, Any]],
    b: Mapping[Key, dict[str, Any]],
    n_resamples: int = DEFAULT_N_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """The paired difference of one family's CycleAcc (A - B) over its cycles of every seed, pooled.

    Returns ``cycle_acc_a`` and ``cycle_acc_b`` (each side's CycleAcc as its result file records it:
    the mean over seeds of each seed's mean credit), ``n_cycles``, ``n_images``, ``acc_a``, ``acc_b``
    (the pooled means the paired difference is of), ``diff``, ``ci_low``, ``ci_high``,
    ``level``, ``verdict`` and ``disagree_most``: the cycle ids (``seed/cycle_id``) where the
    credits differ, most first (by |credit difference|, then |delta difference|, then id).
    """
    keys = sorted(a)
    credit_a = np.array([a[k]["credit"] for k in keys], dtype=np.float64)
    credit_b = np.array([b[k]["credit"] for k in keys], dtype=np.float64)
    images = np.array([[a[k]["image_0"], a[k]["image_1"]] for k in keys], dtype=object).astype(str)
    result = paired_difference(credit_a, credit_b, images, n_resamples=n_resamples, level=level, seed=seed)
    gaps = []
    for k, x, y in zip(keys, credit_a.tolist(), credit_b.tolist()):
        if x != y:
            delta = abs(float(a[k].get("delta", 0.0)) - float(b[k].get("delta", 0.0)))
            gaps.append((-abs(x - y), -delta, k))
    return {
        "cycle_acc_a": recorded_cycle_acc(a),
        "cycle_acc_b": recorded_cycle_acc(b),
        "n_cycles": result.n_cycles,
        "n_images": result.n_images,
        "acc_a": result.mean_a,
        "acc_b": result.mean_b,
        "diff": result.diff,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "level": result.level,
        "n_resamples": result.n_resamples,
        "seed": result.seed,
        "se": result.se,
        "df": result.df,
        "p_value": result.p_value,
        "method": result.interval_method,
        "interval_method": result.interval_method,
        "unit": result.unit,
        "verdict": result.verdict,
        "n_disagree": len(gaps),
        "disagree_most": [f"{k[0]}/{k[1]}" for _, _, k in sorted(gaps)[:N_DISAGREEMENTS]],
    }


def compare_samples(
    path_a: str | Path,
    path_b: str | Path,
    n_resamples: int = DEFAULT_N_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """The comparison record of two samples files: refused (ValueError) unless both hold the same families' cycles."""
    a, b = read_samples(path_a), read_samples(path_b)
    if set(a) != set(b):
        raise ValueError(
            f"{path_a} and {path_b} hold different tasks (only in A: {sorted(set(a) - set(b))}, "
            f"only in B: {sorted(set(b) - set(a))}); evaluate both models on the same tasks"
        )
    for task in sorted(a):
        problem = item_mismatch(task, a[task], b[task])
        if problem is not None:
            raise ValueError(f"{path_a} and {path_b} are not the same cycles: {problem}")
    tasks = sorted(a)
    raw = [compare_family(a[task], b[task], n_resamples, level, seed) for task in tasks]
    return {
        "a": str(path_a),
        "b": str(path_b),
        "statistic": "CycleAcc(A) - CycleAcc(B), every seed's cycles pooled",
        "min_cycles": MIN_CYCLES,
        "min_images": MIN_IMAGES,
        "adjustment": COMPARISON_ADJUSTMENT,
        "families": dict(zip(tasks, adjusted_verdicts(raw, COMPARISON_ADJUSTMENT, level))),
        "overall": joint_difference({task: a[task] for task in tasks}, {task: b[task] for task in tasks}, level),
    }


def joint_difference(
    a: Mapping[str, Mapping[Key, dict[str, Any]]], b: Mapping[str, Mapping[Key, dict[str, Any]]], level: float = DEFAULT_LEVEL
) -> dict[str, Any]:
    """The mean over families of CycleAcc(A) - CycleAcc(B), each family weighing the same, with a joint interval.

    One variance over all families' cycles at once (:func:`clip_cycles.algebra.crossed.crossed_variance`
    with each family a group weighing ``1 / (F n_f)``): cycles of different families that share an
    image are dependent, so the families' errors are not added as if independent.
    """
    diffs, images, groups, weights = [], [], [], []
    tasks = sorted(a)
    for index, task in enumerate(tasks):
        keys = sorted(a[task])
        diffs += [float(a[task][k]["credit"]) - float(b[task][k]["credit"]) for k in keys]
        images += [[str(a[task][k]["image_0"]), str(a[task][k]["image_1"])] for k in keys]
        groups += [index] * len(keys)
        weights += [1.0 / (len(tasks) * len(keys))] * len(keys)
    codes = incidence_codes(np.array(images, dtype=str), len(diffs))
    values, w = np.asarray(diffs), np.asarray(weights)
    estimate = float((w * values).sum())
    se = float(np.sqrt(crossed_variance(values, codes, w, groups)[0]))
    record = crossed_record(estimate, se, int(codes.max()) + 1, crossed_df(codes, w, groups), level)
    return {
        "n_families": len(tasks),
        "n_cycles": len(diffs),
        "diff": estimate,
        "ci_low": record["low"],
        "ci_high": record["high"],
        "level": record["level"],
        "se": se,
        "df": record["df"],
        "n_images": record["n_images"],
        "interval_method": f"{record['method']}, joint over families",
        "unit": record["unit"],
    }
