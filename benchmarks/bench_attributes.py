"""Benchmark: paper 2's grid on the real sparsity, for the project's default probe and for ``--protocol paper2``.

Concept world with McRae x THINGS's label sparsity (``ConceptWorldConfig.things_sparsity``: 1,854
concepts x 384-d, 211 attributes with 10-20 positive concepts each, near-separable columns), all
five split strategies (5 x 2 folds each, dealt per attribute): the full grid is 211 x 5 x 10 probes.

- default: the L2-penalised probe (``PROBE_L2``) solved batched over every column, on the full grid,
  with the default threading; its reference is one scikit-learn ``LogisticRegression(C=1/(PROBE_L2
  n_train), class_weight='balanced', solver='newton-cholesky')`` per attribute and fold, written out
  here, on ``--subset-attributes`` attributes per strategy (extrapolated by columns);
- paper2: paper 2's unpenalised probe (``solver="sklearn"``) in ``--num-proc`` processes with one
  BLAS thread each, against the plain loop of one ``LogisticRegression(C=inf, class_weight='balanced',
  max_iter=1000)`` per attribute and fold with the default threading (both cores), both on the same
  subset and extrapolated to the full grid (the full paper-2 grid takes hours on 2 cores).

Prints one JSON object: wall times, max |dF1| (F1 points, per attribute and fold, from each side's own
predictions) against the reference, and the goals of issue 39.

    python benchmarks/bench_attributes.py [--subset-attributes 4] [--num-proc N] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from clip_cycles.attributes.attribute_probes import (
    MAX_ITER,
    PROBE_L2,
    f1_scores,
    penalised_reference_probe,
    probe_attributes,
    reference_probe,
    usable_cores,
)
from clip_cycles.attributes.concept_world import ConceptWorldConfig, make_concept_world
from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.attributes.splitters import SplitContext, attribute_folds, make_splitter

STRATEGY_ORDER = ("random", "llm", "similarity", "clustering", "supercategory")


def plain_f1(X: np.ndarray, labels: np.ndarray, folds: list, make: object) -> np.ndarray:
    """(n_attributes, n_folds) test F1 of one scikit-learn fit per attribute and fold; degenerate folds 0."""
    out = np.zeros((labels.shape[1], max(len(f) for f in folds)))
    for a, attribute_folds_ in enumerate(folds):
        y = labels[:, a]
        for f, (train, test) in enumerate(attribute_folds_):
            if y[train].all() or not y[train].any() or not y[test].any():
                continue
            model = make(len(train))  # type: ignore[operator]
            model.fit(X[train], y[train].astype(np.int64))
            predicted = model.decision_function(X[test]) > 0
            out[a, f] = f1_scores(y[test][:, None], predicted[:, None])[0]
    return out


def main() -> None:
    """Run the benchmark and print its JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset-attributes", type=int, default=4, help="attributes per strategy for the references")
    parser.add_argument("--num-proc", type=int, default=None, help="paper2's processes (default: the usable cores)")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGY_ORDER), choices=STRATEGY_ORDER)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    world = make_concept_world(ConceptWorldConfig.things_sparsity(), seed=args.seed)
    data, X = world.data, world.embeddings
    context = SplitContext(data.concepts, data.supercategories, world.llm_groups)
    rng = np.random.default_rng(args.seed)
    totals = dict.fromkeys(("split_s", "default_s", "default_reference_s", "paper2_s", "paper2_reference_s"), 0.0)
    dF1_default: list[float] = []
    dF1_paper2: list[float] = []
    not_converged = 0
    per_strategy: dict[str, object] = {}
    for name in args.strategies:
        start = time.perf_counter()
        folds = attribute_folds(make_splitter(name, context, args.seed), X, data.labels, attributes=data.attributes)
        totals["split_s"] += time.perf_counter() - start

        start = time.perf_counter()
        ours = probe_attributes(X, data, folds, progress=False)
        default_s = time.perf_counter() - start
        not_converged += len(ours.not_converged)
        n_columns = int(ours.coverage.fitted.sum())

        subset = np.sort(rng.choice(len(data.attributes), size=min(args.subset_attributes, len(data.attributes)), replace=False))
        sub_data = ConceptAttributeData(data.concepts, tuple(data.attributes[a] for a in subset), data.labels[:, subset],
                                        data.supercategories)  # fmt: skip
        sub_folds = [folds[a] for a in subset]
        n_sub = int(ours.coverage.fitted[subset].sum())
        scale = n_columns / max(n_sub, 1)

        start = time.perf_counter()
        ref = plain_f1(X, sub_data.labels, sub_folds, penalised_reference_probe)
        default_ref_s = (time.perf_counter() - start) * scale
        dF1_default += (100 * np.abs(ours.f1[subset] - ref)).ravel().tolist()

        start = time.perf_counter()
        paper2 = probe_attributes(X, sub_data, sub_folds, solver="sklearn", num_proc=args.num_proc, progress=False)
        paper2_s = (time.perf_counter() - start) * scale
        start = time.perf_counter()
        paper2_ref = plain_f1(X, sub_data.labels, sub_folds, lambda n: reference_probe(MAX_ITER))
        paper2_ref_s = (time.perf_counter() - start) * scale
        dF1_paper2 += (100 * np.abs(paper2.f1 - paper2_ref)).ravel().tolist()

        totals["default_s"] += default_s
        totals["default_reference_s"] += default_ref_s
        totals["paper2_s"] += paper2_s
        totals["paper2_reference_s"] += paper2_ref_s
        per_strategy[name] = {
            "n_columns": n_columns,
            "reference_columns": n_sub,
            "default_s": round(default_s, 2),
            "default_reference_extrapolated_s": round(default_ref_s, 2),
            "paper2_extrapolated_s": round(paper2_s, 2),
            "paper2_reference_extrapolated_s": round(paper2_ref_s, 2),
            "default_max_iter": int(ours.n_iter.max()),
        }
    report = {
        "world": "things_sparsity",
        "n_concepts": len(data.concepts),
        "dim": int(X.shape[1]),
        "n_attributes": len(data.attributes),
        "strategies": per_strategy,
        "probe_l2": PROBE_L2,
        "split_wall_s": round(totals["split_s"], 2),
        "default": {
            "grid_wall_s": round(totals["default_s"], 2),
            "grid_wall_with_splits_s": round(totals["default_s"] + totals["split_s"], 2),
            "reference_extrapolated_s": round(totals["default_reference_s"], 2),
            "max_abs_dF1": max(dF1_default),
            "n_probes_compared": len(dF1_default),
            "n_probes_not_converged": not_converged,
        },
        "paper2": {
            "num_proc": args.num_proc or usable_cores(),
            "grid_extrapolated_s": round(totals["paper2_s"], 2),
            "reference_extrapolated_s": round(totals["paper2_reference_s"], 2),
            "speedup_vs_reference": round(totals["paper2_reference_s"] / max(totals["paper2_s"], 1e-9), 2),
            "max_abs_dF1": max(dF1_paper2),
            "n_probes_compared": len(dF1_paper2),
        },
        "goals": {"default_grid_s_at_most": 300, "default_max_abs_dF1": 0.0, "paper2_speedup_at_least": 1.0},
    }
    report["default"]["meets_goal"] = report["default"]["grid_wall_s"] <= 300 and report["default"]["max_abs_dF1"] == 0.0  # type: ignore[index]
    print(json.dumps(report, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
