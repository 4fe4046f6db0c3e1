"""Shared group folds are balanced by concepts, not by groups: the greedy rule (each group to the fold
with the fewest concepts so far) leaves the largest and smallest test fold at most one group apart."""

from __future__ import annotations

import numpy as np

from clip_cycles.attributes.splitters import SupercategorySplit


def test_shared_group_folds_balance_concept_counts() -> None:
    sizes = [5, 5] + [1] * 10  # two big groups, ten single concepts
    names = [f"g{k}" for k, size in enumerate(sizes) for _ in range(size)]
    splitter = SupercategorySplit(names, n_splits=2, n_repeats=20, random_state=0, fold_assignment="shared")
    folds = list(splitter.split(np.zeros((len(names), 1))))
    assert len(folds) == 40
    for repeat in range(20):
        tests = [folds[2 * repeat + k][1] for k in range(2)]
        assert sorted(np.concatenate(tests).tolist()) == list(range(len(names)))  # each concept tested once
        counts = [len(t) for t in tests]
        # List scheduling: the heaviest fold's last group went to the then lightest fold, so the gap is
        # at most one group. Balancing by number of groups instead puts both big groups together in
        # some repeat (a 14 / 6 split).
        assert max(counts) - min(counts) <= max(sizes), (repeat, counts)
        # Groups stay whole.
        for test in tests:
            members = {names[i] for i in test}
            assert all(names.count(g) == sum(names[i] == g for i in test) for g in members)
