"""The board's calls together: chance markers adjusted over every cell, joint overall intervals, tied sets."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from clip_cycles.algebra.crossed import crossed_mean_intervals
from clip_cycles.evaluation.board_calls import adjusted_chance_calls, chance_p_value, joint_mean, tied_with_best


def _cell(acc: float, half: float, n_cycles: int = 200) -> SimpleNamespace:
    return SimpleNamespace(cycle_acc=acc, ci={"low": acc - half, "high": acc + half, "level": 0.95}, n_cycles=n_cycles)


def test_chance_markers_are_adjusted_with_benjamini_hochberg_over_every_cell() -> None:
    # z = 0.05 / (0.049 / 1.96) = 2.0 alone is called (p 0.0455); among 20 cells at chance, BH keeps it uncalled.
    alone = adjusted_chance_calls({"a": _cell(0.55, 0.049)})
    assert alone == {"a": "above"}
    board = {"a": _cell(0.55, 0.049), **{f"n{k}": _cell(0.5, 0.05) for k in range(19)}}
    calls = adjusted_chance_calls(board)
    assert calls["a"] == "chance" and set(calls.values()) == {"chance"}
    strong = adjusted_chance_calls({**board, "b": _cell(0.3, 0.05)})
    assert strong["b"] == "below"
    assert "few" not in adjusted_chance_calls({"few": _cell(0.9, 0.01, n_cycles=10)})  # no marker under MIN_CYCLES
    assert chance_p_value(0.55, {"low": 0.5, "high": 0.6, "level": 0.95}) == pytest.approx(0.05, abs=1e-9)


def _tasks(credits: dict[str, list[float]], n_images: int = 40) -> dict[str, dict]:
    out = {}
    for task, values in credits.items():
        out[task] = {
            (0, f"{task}-{i}"): {
                "credit": v,
                "image_0": f"img{i % n_images}",
                "image_1": f"img{(i + 7) % n_images}",
                "caption_0": f"a{i}",
                "caption_1": f"b{i}",
            }
            for i, v in enumerate(values)
        }
    return out


def test_joint_mean_is_the_mean_of_family_means_with_a_two_way_interval() -> None:
    rng = np.random.default_rng(1)
    credits = {"t1": rng.integers(0, 2, 80).astype(float).tolist(), "t2": rng.integers(0, 2, 50).astype(float).tolist()}
    joint = joint_mean(_tasks(credits))
    assert joint["low"] < joint["high"]
    assert (joint["low"] + joint["high"]) / 2 == pytest.approx((np.mean(credits["t1"]) + np.mean(credits["t2"])) / 2)
    assert joint["method"].startswith("two-way image-cluster robust") and "joint over 2 families" in joint["method"]
    # One family: the joint interval is that family's own.
    (alone,) = crossed_mean_intervals(
        np.array(credits["t1"]), np.array([[f"img{i % 40}", f"img{(i + 7) % 40}"] for i in range(80)]), 0.95
    )
    one = joint_mean(_tasks({"t1": credits["t1"]}))
    assert (one["low"], one["high"]) == pytest.approx((alone["low"], alone["high"]), rel=1e-12)


def test_models_not_separated_from_the_best_are_tied_for_first() -> None:
    rng = np.random.default_rng(2)
    best = rng.integers(0, 2, 200).astype(float)
    close = best.copy()
    close[:3] = 0.0  # three cycles worse: not separable
    far = np.zeros(200)  # far behind
    tasks_of = {"best": _tasks({"t": best.tolist()}), "close": _tasks({"t": close.tolist()}), "far": _tasks({"t": far.tolist()})}
    scores = {m: float(np.mean(np.array([s["credit"] for s in t["t"].values()]))) for m, t in tasks_of.items()}
    assert tied_with_best(scores, tasks_of, ["t"]) == {"best", "close"}
    assert tied_with_best(scores, {k: v for k, v in tasks_of.items() if k != "best"}, ["t"]) == set()  # best has no samples
    # Overall over two families (the joint difference): still tied, still not the far one.
    two = {m: _tasks({"t": v, "u": v}) for m, v in (("best", best.tolist()), ("close", close.tolist()), ("far", far.tolist()))}
    assert tied_with_best(scores, two, ["t", "u"]) == {"best", "close"}


def test_joint_mean_weighs_each_seed_of_a_family_the_same_as_the_records_do() -> None:
    # Seed 0 holds 60 cycles at 1.0, seed 1 holds 20 at 0.0: the record's CycleAcc is (1 + 0) / 2, not 60 / 80.
    tasks = _tasks({"t": [1.0] * 60})
    tasks["t"].update({(1, f"s1-{i}"): {**s, "credit": 0.0} for i, s in enumerate(list(tasks["t"].values())[:20])})
    joint = joint_mean(tasks)
    assert (joint["low"] + joint["high"]) / 2 == pytest.approx(0.5)
