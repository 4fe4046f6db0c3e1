"""The full transfer grid from cached 512-d features: wall time and peak RSS; prints one JSON object.

14 synthetic families (planted interaction directions, float32 L2-normalized 512-d
features, as the encoder caches them) with 2,000 train / 500 validation / 1,000 test
cycles per seed, seeds 0, 1, 2; a rank-64 probe per family and seed trained for 30
epochs (batch 512, lr 1e-3, wd 1e-4), scored on the test cycles of all 14 families,
plus the alignment matrix and its correlations: ``clip_cycles.experiments.transfer.run_transfer``.

Reference, measured in the same run: one probe trained with the generic
``clip_cycles.heads.training.train_on_cycles`` (validation from float64 logits every epoch,
torch's default thread count) extrapolated to the 42 probes of the grid, and the mean
cycle-difference matrix formed from one dense d x d outer product per cycle,
extrapolated to the 42 G matrices. Target: the grid in under 5 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time

import numpy as np

from clip_cycles.experiments.experiment_data import planted_experiment_data
from clip_cycles.experiments.transfer import TransferSettings, cycle_difference_matrix, run_transfer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--families", type=int, default=14)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--validation", type=int, default=500)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--pool", type=int, default=8000, help="images and captions in the shared feature tables")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference measurements")
    args = parser.parse_args()

    load_before = os.getloadavg()
    start = time.perf_counter()
    # Seven direction groups of two families each: a structured grid, like related COCO families.
    groups = {f"family_{i:02d}": i // 2 for i in range(args.families)}
    data = planted_experiment_data(
        groups,
        dim=args.dim,
        n_train=args.train,
        n_validation=args.validation,
        n_test=args.test,
        seeds=tuple(args.seeds),
        pool_size=args.pool,
        signal=0.08,
    )
    synth_s = time.perf_counter() - start
    settings = TransferSettings(epochs=args.epochs, seeds=tuple(args.seeds))
    start = time.perf_counter()
    record = run_transfer(data, settings)
    grid_s = time.perf_counter() - start
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n_probes = len(record["families"]) * len(args.seeds)

    out = {
        "benchmark": "bench_experiments",
        "families": len(record["families"]),
        "seeds": args.seeds,
        "cycles_per_seed": {"train": args.train, "validation": args.validation, "test": args.test},
        "dim": args.dim,
        "epochs": args.epochs,
        "probes_trained": n_probes,
        "synthesis_s": round(synth_s, 2),
        "transfer_grid_s": round(grid_s, 2),
        "per_probe_s": round(grid_s / n_probes, 3),
        "target_s": 300,
        "within_target": grid_s < 300,
        "peak_rss_mb": round(peak_rss_mb, 1),
        "pearson": record["correlation"]["pearson"]["mean"],
        "spearman": record["correlation"]["spearman"]["mean"],
        "in_family_cycle_acc": float(np.mean([np.diag(np.asarray(p["transfer"])).mean() for p in record["per_seed"].values()])),
        "cpu_count": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }

    if not args.no_reference:
        import torch

        from clip_cycles.heads.score_heads import make_head
        from clip_cycles.heads.training import TrainConfig, train_on_cycles

        family = data.families["family_00"]
        phi = family.image_features.astype(np.float64)
        psi = family.caption_features.astype(np.float64)
        start = time.perf_counter()
        train_on_cycles(
            make_head("low_rank", args.dim, args.dim, rank=64, seed=0),
            phi,
            psi,
            family.split(0, "train"),
            family.split(0, "validation"),
            family.split(0, "test"),
            TrainConfig(epochs=args.epochs, seed=0),
        )
        reference_probe_s = time.perf_counter() - start
        val = family.split(0, "validation")
        start = time.perf_counter()
        dense = np.zeros((args.dim, args.dim))
        for u1, u2, v1, v2 in val:
            dense += np.outer(phi[u1] - phi[u2], psi[v1] - psi[v2])
        dense /= len(val)
        dense_g_s = time.perf_counter() - start
        start = time.perf_counter()
        factored = cycle_difference_matrix(family, val)
        factored_g_s = time.perf_counter() - start
        out["reference"] = {
            "generic_train_on_cycles_probe_s": round(reference_probe_s, 2),
            "generic_grid_extrapolated_s": round(reference_probe_s * n_probes, 1),
            "speedup_vs_generic": round(reference_probe_s * n_probes / grid_s, 2),
            "dense_G_s": round(dense_g_s, 4),
            "factorized_G_s": round(factored_g_s, 4),
            "G_speedup": round(dense_g_s / max(factored_g_s, 1e-9), 1),
            "G_max_abs_difference": float(np.abs(dense - factored).max()),
            "torch_threads_default": torch.get_num_threads(),
        }
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
