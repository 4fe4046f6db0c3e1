"""Benchmark: lockstep probes vs the straightforward reference (one scikit-learn fit per attribute per fold).

THINGS-sized synthetic concept world: 1,854 concepts x 768-d embeddings, 211
attributes, all five split strategies (5 x 2 folds each, dealt per attribute so
positives reach both sides where the groups allow). Our protocol fits every
non-degenerate (attribute, fold) column with the lockstep solver (degenerate folds
score F1 = 0 without a fit, identically in both protocols). The reference protocol, one
``LogisticRegression(penalty=None, class_weight='balanced', max_iter=1000)`` fit per
column in one process, is timed on a random subset of attributes per strategy and
extrapolated by its number of columns. Both use the same folds, so F1 differences
come from the solvers alone.

Prints one JSON object: our wall time, the reference's (subset and extrapolated), the
ratio, and the mean and max |dF1| (F1 points, per attribute mean over folds) on the subset.

    python benchmarks/bench_attributes.py [--subset-attributes 6] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

from clip_cycles.attributes.attribute_probes import probe_attributes
from clip_cycles.attributes.concept_world import ConceptWorldConfig, make_concept_world
from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.attributes.splitters import STRATEGIES, SplitContext, attribute_folds, make_splitter

STRATEGY_ORDER = ("random", "llm", "similarity", "clustering", "supercategory")


def main() -> None:
    """Run the benchmark and print its JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset-attributes", type=int, default=6, help="attributes per strategy for the reference")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    world = make_concept_world(ConceptWorldConfig.things_sized(), seed=args.seed)
    data, X = world.data, world.embeddings
    context = SplitContext(data.concepts, data.supercategories, world.llm_groups)
    rng = np.random.default_rng(args.seed)

    report: dict[str, object] = {
        "n_concepts": len(data.concepts),
        "dim": int(X.shape[1]),
        "n_attributes": len(data.attributes),
        "strategies": {},
    }
    ours_total = split_total = reference_subset_total = reference_extrapolated_total = 0.0
    all_diffs: list[float] = []
    for name in STRATEGY_ORDER:
        assert name in STRATEGIES
        start = time.perf_counter()
        splitter = make_splitter(name, context, args.seed)
        folds = attribute_folds(splitter, X, data.labels, attributes=data.attributes)
        split_s = time.perf_counter() - start

        start = time.perf_counter()
        ours = probe_attributes(X, data, folds, solver="lockstep", progress=False)
        ours_s = time.perf_counter() - start

        subset = np.sort(rng.choice(len(data.attributes), size=args.subset_attributes, replace=False))
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
            "target": {"speedup_at_least": 5.0, "mean_abs_dF1_at_most": 1.0},
        }
    )
    report["meets_target"] = bool(report["speedup"] >= 5.0 and (report["mean_abs_dF1"] or 0.0) <= 1.0)  # type: ignore[operator]
    print(json.dumps(report, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
