"""The board's calls made together: chance markers adjusted over every cell, joint overall intervals, tied sets.

Read by the results page (:mod:`clip_cycles.evaluation.page`); the statistics are in
:mod:`clip_cycles.algebra` (``crossed``, ``multiplicity``, ``paired``).

- Chance markers: each cell's test of "CycleAcc = 0.5" (a normal test on its recorded interval:
  ``se = (high - low) / (2 z)``) is adjusted by Benjamini-Hochberg over every cell of the board
  (:data:`clip_cycles.algebra.multiplicity.BOARD_ADJUSTMENT`).
- Overall column: with per-cycle samples of every family, the mean over families of CycleAcc
  with one joint two-way image-cluster variance over all their cycles (families of one world
  share images); without them, the quadrature sum is kept and named as such.
- Tied for first: in a family, the best model against each other model with samples on the same
  cycles (paired, two-way interval), Holm over those comparisons; the models not separated from
  the best are tied with it. Overall: the same with the joint difference over every family.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any, Mapping, Sequence

import numpy as np

from clip_cycles.algebra.crossed import crossed_df, crossed_record, crossed_variance, incidence_codes, t_two_sided_p
from clip_cycles.algebra.multiplicity import BOARD_ADJUSTMENT, adjust, holm
from clip_cycles.algebra.paired import MIN_CYCLES, paired_difference
from clip_cycles.evaluation.compare import item_mismatch, joint_difference
from clip_cycles.evaluation.page_data import CHANCE

#: Samples of one model: task -> (seed, cycle_id) -> sample (as :func:`clip_cycles.evaluation.compare.read_samples`).
Tasks = Mapping[str, Mapping[Any, dict[str, Any]]]


def chance_p_value(acc: float, ci: Mapping[str, Any]) -> float | None:
    """Two-sided p-value of "CycleAcc = 0.5" from a recorded interval (normal, its half-width at its level)."""
    level = float(ci.get("level", 0.95))
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    se = (float(ci["high"]) - float(ci["low"])) / (2.0 * z)
    if not se > 0.0:
        return None if acc == CHANCE else 0.0
    return 2.0 * (1.0 - NormalDist().cdf(abs(acc - CHANCE) / se))


def adjusted_chance_calls(cells: Mapping[Any, Any], level: float = 0.95) -> dict[Any, str]:
    """``{key: "above" | "below" | "chance"}`` for every cell with an interval and enough cycles, BH-adjusted together."""
    keys, p_values = [], []
    for key, cell in cells.items():
        if cell is None or cell.cycle_acc is None or cell.ci is None:
            continue
        if cell.n_cycles is not None and cell.n_cycles < MIN_CYCLES:
            continue
        p = chance_p_value(cell.cycle_acc, cell.ci)
        if p is not None:
            keys.append(key)
            p_values.append(p)
    adjusted = adjust(p_values, BOARD_ADJUSTMENT) if p_values else np.zeros(0)
    out = {}
    for key, p in zip(keys, adjusted.tolist()):
        acc = cells[key].cycle_acc
        out[key] = ("above" if acc > CHANCE else "below") if p <= 1.0 - level else "chance"
    return out


def joint_mean(tasks: Tasks, level: float = 0.95) -> dict[str, Any]:
    """The mean over ``tasks`` of CycleAcc, each weighing the same, with one two-way variance over all their cycles.

    A task's CycleAcc is the mean over its seeds of each seed's mean (as the records report it),
    so each (task, seed) is a group weighing ``1 / (F S_f n_fs)`` per cycle.
    """
    values, images, groups, weights = [], [], [], []
    names = sorted(tasks)
    for task in names:
        seeds = sorted({key[0] for key in tasks[task]})
        for seed in seeds:
            keys = sorted(k for k in tasks[task] if k[0] == seed)
            values += [float(tasks[task][k]["credit"]) for k in keys]
            images += [[str(tasks[task][k]["image_0"]), str(tasks[task][k]["image_1"])] for k in keys]
            groups += [f"{task}\x00{seed}"] * len(keys)
            weights += [1.0 / (len(names) * len(seeds) * len(keys))] * len(keys)
    codes = incidence_codes(np.array(images, dtype=str), len(values))
    w = np.asarray(weights)
    estimate = float((w * np.asarray(values)).sum())
    se = float(np.sqrt(crossed_variance(np.asarray(values), codes, w, groups)[0]))
    record = crossed_record(estimate, se, int(codes.max()) + 1, crossed_df(codes, w, groups), level)
    return {**record, "method": f"{record['method']}, joint over {len(names)} families"}


def _paired(a: Mapping[Any, dict[str, Any]], b: Mapping[Any, dict[str, Any]]) -> Any:
    keys = sorted(a)
    credit_a = np.array([a[k]["credit"] for k in keys], dtype=np.float64)
    credit_b = np.array([b[k]["credit"] for k in keys], dtype=np.float64)
    images = np.array([[a[k]["image_0"], a[k]["image_1"]] for k in keys], dtype=object).astype(str)
    return paired_difference(credit_a, credit_b, images)


def tied_with_best(
    scores: Mapping[str, float], tasks_of: Mapping[str, Tasks], task_names: Sequence[str], level: float = 0.95
) -> set[str]:
    """The models tied for first on ``task_names`` (one family, or all of them for the overall column).

    ``scores``: each model's point estimate; the best is the highest. Every other model with
    samples on the same cycles of every task is compared with it (one family: the paired
    difference; several: the joint difference), Holm over those comparisons; the best and the
    models it is not separated from are returned. A model without comparable samples is not
    called tied (nothing says it is). Empty when the best has no samples.
    """
    if not scores:
        return set()
    best = max(sorted(scores), key=lambda m: scores[m])
    mine = tasks_of.get(best)
    if mine is None or any(t not in mine for t in task_names):
        return set()
    others, p_values = [], []
    for model in sorted(scores):
        theirs = tasks_of.get(model)
        if model == best or theirs is None or any(t not in theirs for t in task_names):
            continue
        if any(item_mismatch(t, mine[t], theirs[t]) is not None for t in task_names):
            continue
        if len(task_names) == 1:
            p = _paired(mine[task_names[0]], theirs[task_names[0]]).p_value
        else:
            joint = joint_difference({t: mine[t] for t in task_names}, {t: theirs[t] for t in task_names}, level)
            p = t_two_sided_p(joint["diff"] / joint["se"], joint["df"]) if joint["se"] > 0 else float(joint["diff"] == 0.0)
        others.append(model)
        p_values.append(p)
    adjusted = holm(p_values) if p_values else np.zeros(0)
    return {best} | {m for m, p in zip(others, adjusted.tolist()) if p > 1.0 - level}
