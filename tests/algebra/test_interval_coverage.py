"""Intervals validated, not assumed: two-way image-cluster intervals cover other worlds' means at about their nominal rate.

Five independent shapes worlds (different generator seeds, 300 images each) are scored by one
fixed model (cycles-tiny with its shipped weights); on each world and family, every seed's
cycles pooled, the single interval (CycleAcc, :func:`crossed_mean_intervals`) and the paired one
(CycleAcc minus the Winoground text score on the same cycles, :func:`paired_difference`) must
cover the mean of the other four worlds' estimates.

The rate to expect is not 0.95: the target is itself an estimate. With the world's estimate
X ~ N(mu, s^2) and the others' mean M ~ N(mu, s^2 / (K - 1)), a 95 % interval X +- 1.96 s covers
M with probability 2 Phi(1.96 / sqrt(1 + 1 / (K - 1))) - 1 = 0.920 for K = 5. Tolerance: three
binomial standard deviations below that over the checks made (about 100): an interval that
under-covers by more fails. (The product-weight image bootstrap used before covered 0.99 here,
conservative; the cycle bootstrap 0.86. ``tests/algebra/test_interval_calibration.py`` bounds
the coverage from above too, on simulated worlds with a known truth.)
"""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import numpy as np
import pytest

from clip_cycles.algebra.crossed import crossed_mean_intervals
from clip_cycles.algebra.paired import paired_difference

N_WORLDS = 5
WORLD = {"n_images": 300, "image_size": 64}
SEEDS = [0, 1, 2]
N_RESAMPLES = 400
LEVEL = 0.95


def _expected_coverage(level: float, n_worlds: int) -> float:
    """P(|X - M| <= z s) with X - M ~ N(0, s^2 (1 + 1 / (K - 1))), z the two-sided normal quantile of ``level``."""
    normal = NormalDist()
    z = normal.inv_cdf(0.5 + level / 2.0)
    return 2.0 * normal.cdf(z / math.sqrt(1.0 + 1.0 / (n_worlds - 1))) - 1.0


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[int, list[dict]]]:
    from clip_cycles.data.sources.shapes_world import write_shapes_world
    from clip_cycles.evaluation.demo import demo_context
    from clip_cycles.evaluation.zero_shot import evaluate_tasks
    from clip_cycles.tasks.registry import expand_tasks

    root = tmp_path_factory.mktemp("coverage")
    per_task: dict[str, dict[int, list[dict]]] = {}
    for world_index in range(N_WORLDS):
        world = write_shapes_world(root / f"world{world_index}", progress=False, seed=100 + world_index, **WORLD)
        context = demo_context(world, root / "cache", SEEDS)
        path = root / f"samples{world_index}.jsonl"
        evaluate_tasks(
            expand_tasks(["cycles/shapes_all"]),
            context.spec,
            world,
            context.cache_dir,
            context.data_cache_dir,
            seeds=SEEDS,
            samples_path=path,
        )
        for line in path.read_text().splitlines():
            sample = json.loads(line)
            per_task.setdefault(sample["task"], {}).setdefault(world_index, []).append(sample)
    return {task: worlds for task, worlds in per_task.items() if len(worlds) == N_WORLDS}


def test_single_and_paired_intervals_cover_other_worlds_means(samples: dict[str, dict[int, list[dict]]]) -> None:
    covered: dict[str, list[bool]] = {"single": [], "paired": []}
    for worlds in samples.values():
        estimates, intervals = {}, {}
        for k, lines in worlds.items():
            credit = np.array([s["credit"] for s in lines])
            text = np.array([float(s["s11"] > s["s12"] and s["s22"] > s["s21"]) for s in lines])
            images = np.array([[s["image_0"], s["image_1"]] for s in lines])
            (single,) = crossed_mean_intervals(credit, images, LEVEL)
            paired = paired_difference(credit, text, images, N_RESAMPLES, LEVEL, seed=k)
            assert paired.diff == pytest.approx(credit.mean() - text.mean())
            estimates[k] = (float(credit.mean()), paired.diff)
            intervals[k] = ((single["low"], single["high"]), (paired.ci_low, paired.ci_high))
        for k in worlds:
            others = [estimates[j] for j in worlds if j != k]
            target_single = float(np.mean([o[0] for o in others]))
            target_paired = float(np.mean([o[1] for o in others]))
            (low, high), (paired_low, paired_high) = intervals[k]
            covered["single"].append(low <= target_single <= high)
            covered["paired"].append(paired_low <= target_paired <= paired_high)
    expected = _expected_coverage(LEVEL, N_WORLDS)
    assert expected == pytest.approx(0.920, abs=0.001)
    for kind, hits in covered.items():
        n = len(hits)
        assert n >= 15 * N_WORLDS, f"{kind}: only {n} checks (families available on every world)"
        floor = expected - 3.0 * math.sqrt(expected * (1.0 - expected) / n)
        rate = float(np.mean(hits))
        assert rate >= floor, f"{kind}: covered {rate:.3f} of {n} checks; expected about {expected:.3f}, floor {floor:.3f}"
