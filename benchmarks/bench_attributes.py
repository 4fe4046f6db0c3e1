"""Benchmark: the opt-in lockstep probe vs the exact default (one scikit-learn fit per attribute per fold).

Concept world with McRae x THINGS's label sparsity by default (``--world things_sparsity``:
1,854 concepts x 384-d, 211 attributes with 10-20 positive concepts each, near-separable
columns; ``--world things`` is the denser THINGS-sized world), all five split strategies
(5 x 2 folds each, dealt per attribute). The lockstep solver fits every non-degenerate
(attribute, fold) column; the exact solver (``solver="sklearn"``, the default of every entry
point), one ``LogisticRegression(penalty=None, class_weight='balanced', max_iter=1000)`` fit
per column, runs on a random subset of attributes per strategy (``--subset-attributes``, 0 for
all) and is extrapolated by its number of columns. Same folds, so F1 differences come from the
solvers alone.

Prints one JSON object: wall times, the speed-up, and the agreement: the MAXIMUM |dF1| over
attributes (F1 points, per attribute mean over folds), the mean, and how many attributes differ.

    python benchmarks/bench_attributes.py [--world things_sparsity] [--subset-attributes 12] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from clip_cycles.attributes.attribute_probes import DEFAULT_SOLVER, probe_attributes
from clip_cycles.attributes.concept_world import ConceptWorldConfig, make_concept_world
from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.attributes.splitters import STRATEGIES, SplitContext, attribute_folds, make_splitter

STRATEGY_ORDER = ("random", "llm", "similarity", "clustering", "supercategory")


def main() -> None:
    """Run the benchmark and print its JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset-attributes", type=int, default=12, help="attributes per strategy for the exact solver (0: all)")
    parser.add_argument("--world", choices=("things_sparsity", "things"), default="things_sparsity", help="concept world")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGY_ORDER), choices=STRATEGY_ORDER)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    config = ConceptWorldConfig.things_sparsity() if args.world == "things_sparsity" else ConceptWorldConfig.things_sized()
    world = make_concept_world(config, seed=args.seed)
    data, X = world.data, world.embeddings
    context = SplitContext(data.concepts, data.supercategories, world.llm_groups)
    rng = np.random.default_rng(args.seed)

    report: dict[str, object] = {
        "n_concepts": len(data.concepts),
        "dim": int(X.shape[1]),
        "n_attributes": len(data.attributes),
        "world": args.world,
        "positives_per_attribute": {
            "min": int(data.n_positives.min()),
            "median": float(np.median(data.n_positives)),
            "max": int(data.n_positives.max()),
        },  # fmt: skip
        "strategies": {},
    }
    ours_total = split_total = reference_subset_total = reference_extrapolated_total = 0.0
    all_diffs: list[float] = []
    for name in args.strategies:
        assert name in STRATEGIES
        start = time.perf_counter()
        splitter = make_splitter(name, context, args.seed)
        folds = attribute_folds(splitter, X, data.labels, attributes=data.attributes)
        split_s = time.perf_counter() - start

        start = time.perf_counter()
        ours = probe_attributes(X, data, folds, solver="lockstep", progress=False)
        ours_s = time.perf_counter() - start

        size = len(data.attributes) if args.subset_attributes <= 0 else min(args.subset_attributes, len(data.attributes))
        subset = np.sort(rng.choice(len(data.attributes), size=size, replace=False))
        sub_data = ConceptAttributeData(
            data.concepts, tuple(data.attributes[a] for a in subset), data.labels[:, subset], data.supercategories
        )
        start = time.perf_counter()
        reference = probe_attributes(X, sub_data, [folds[a] for a in subset], solver="sklearn", progress=False)
        reference_s = time.perf_counter() - start

        n_columns = int(ours.coverage.fitted.sum())
        n_sub_columns = int(reference.coverage.fitted.sum())
        extrapolated = reference_s / max(n_sub_columns, 1) * n_columns
        diffs = 100.0 * np.abs(ours.mean_f1[subset] - reference.mean_f1)
        diffs = diffs[np.isfinite(diffs)]
        all_diffs += diffs.tolist()
        summary = ours.summary()
        report["strategies"][name] = {  # type: ignore[index]
            "split_s": round(split_s, 3),
            "ours_probe_s": round(ours_s, 3),
            "n_columns": n_columns,
            "n_degenerate_folds": int(ours.coverage.degenerate.sum()),
            "n_attributes_scored": summary["n_attributes_scored"],
            "reference_subset_columns": n_sub_columns,
            "reference_subset_s": round(reference_s, 3),
            "reference_extrapolated_s": round(extrapolated, 3),
            "mean_abs_dF1": float(diffs.mean()) if len(diffs) else None,
            "max_abs_dF1": float(diffs.max()) if len(diffs) else None,
            "n_attributes_compared": int(len(diffs)),
            "n_attributes_differing": int((diffs > 1e-9).sum()),
            "max_abs_dF1_per_fold": float(100 * np.nanmax(np.abs(ours.f1[subset] - reference.f1))) if n_sub_columns else None,
            "f1_selectivity": summary["f1_selectivity"],
            "cs": summary["cs"],
        }
        ours_total += ours_s
        split_total += split_s
        reference_subset_total += reference_s
        reference_extrapolated_total += extrapolated

    report.update(
        {
            "ours_wall_s": round(ours_total, 3),
            "split_wall_s": round(split_total, 3),
            "reference_subset_wall_s": round(reference_subset_total, 3),
            "reference_extrapolated_wall_s": round(reference_extrapolated_total, 3),
            "speedup": round(reference_extrapolated_total / ours_total, 2),
            "speedup_including_splits": round((reference_extrapolated_total + split_total) / (ours_total + split_total), 2),
            "mean_abs_dF1": float(np.mean(all_diffs)) if all_diffs else None,
            "max_abs_dF1": float(np.max(all_diffs)) if all_diffs else None,
            "n_attributes_compared": len(all_diffs),
            "n_attributes_differing": int(sum(d > 1e-9 for d in all_diffs)),
            "default_solver": DEFAULT_SOLVER,
            # Lockstep could be the default only with max |dF1| < 0.5 points on real sparsity.
            "target": {"max_abs_dF1_below": 0.5},
        }
    )
    report["lockstep_meets_target"] = bool((report["max_abs_dF1"] or 0.0) < 0.5)  # type: ignore[operator]
    print(json.dumps(report, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
