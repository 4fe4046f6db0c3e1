"""The probe rank sweep and the transfer grid against the best plain script for the same fits; prints one JSON object.

Data: synthetic families (planted interaction directions, float32 L2-normalized features,
as the encoder caches them; default 14 families of 512-d, 2,000 train / 500 validation /
1,000 test cycles per seed, seeds 0, 1, 2).

- ours, rank sweep: :func:`clip_cycles.experiments.probes.run_probes` with the low-rank
  ranks only (``--ranks``, no full heads, no additive audit), ``--epochs`` each;
- ours, transfer grid: :func:`clip_cycles.experiments.transfer.run_transfer` (a rank-64
  probe per family and seed, scored on every family's test cycles, plus the alignment);
- floor: the fastest plain script a competent user would write for the same fits
  (:func:`floor_fits`): every (family, seed) head of one rank trained at once as one batched
  torch parameter (bmm), the same cycle loss softplus(-Delta), AdamW (same lr, weight decay,
  batch size, epochs), validation CycleAcc every epoch and the best epoch kept, then the test
  CycleAcc (and, for the transfer grid, every head on every family's test cycles); torch's
  default threads; no validation of inputs, no float64 scoring, no records.

Ratios ``ours / floor`` (goal <= 1.5) are measured in the same process and run, with the load
average before and after (on a shared machine the ratio is the figure that counts).

    python benchmarks/bench_experiments.py [--families 14] [--dim 512] [--epochs 30] [--ranks 1 8 64]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from typing import Any, Sequence

import numpy as np

from clip_cycles.experiments.experiment_data import ExperimentData, planted_experiment_data
from clip_cycles.experiments.probes import ProbeSettings, run_probes
from clip_cycles.experiments.transfer import TransferSettings, run_transfer


def floor_fits(
    data: ExperimentData,
    seeds: Sequence[int],
    rank: int,
    epochs: int,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    batch_size: int = 512,
    cross_test: bool = False,
) -> dict[str, Any]:
    """Every (family, seed) rank-``rank`` head at once, batched; returns test CycleAcc per head (and the grid)."""
    import torch
    import torch.nn.functional as F

    names = list(data.families)
    jobs = [(n, s) for n in names for s in seeds]
    fams = data.families

    # Each family's rows gathered into per-head float32 tables of cycle differences, once.
    def diffs(family: Any, cycles: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        phi = torch.from_numpy(np.asarray(family.image_features, dtype=np.float32))
        psi = torch.from_numpy(np.asarray(family.caption_features, dtype=np.float32))
        c = torch.from_numpy(np.asarray(cycles, dtype=np.int64))
        return phi[c[:, 0]] - phi[c[:, 1]], psi[c[:, 2]] - psi[c[:, 3]]

    train = [diffs(fams[n], fams[n].split(s, "train")) for n, s in jobs]
    val = [diffs(fams[n], fams[n].split(s, "validation")) for n, s in jobs]
    n_train = min(t[0].shape[0] for t in train)
    dphi = torch.stack([t[0][:n_train] for t in train])  # (G, N, d)
    dpsi = torch.stack([t[1][:n_train] for t in train])
    n_val = min(v[0].shape[0] for v in val)
    vphi = torch.stack([v[0][:n_val] for v in val])
    vpsi = torch.stack([v[1][:n_val] for v in val])
    g, d_img, d_cap = len(jobs), dphi.shape[2], dpsi.shape[2]
    gen = torch.Generator().manual_seed(0)
    a = torch.nn.Parameter(torch.randn(g, d_img, rank, generator=gen) / d_img**0.5)
    b = torch.nn.Parameter(torch.randn(g, d_cap, rank, generator=gen) / d_cap**0.5)
    optimizer = torch.optim.AdamW([a, b], lr=lr, weight_decay=weight_decay)
    best = torch.full((g,), -1.0)
    best_a, best_b = a.detach().clone(), b.detach().clone()
    for _ in range(epochs):
        order = torch.randperm(n_train, generator=gen)
        for start in range(0, n_train, batch_size):
            rows = order[start : start + batch_size]
            delta = (torch.bmm(dphi[:, rows], a) * torch.bmm(dpsi[:, rows], b)).sum(-1)  # (G, B)
            loss = F.softplus(-delta).mean(dim=1).sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            acc = ((torch.bmm(vphi, a) * torch.bmm(vpsi, b)).sum(-1) > 0).float().mean(dim=1)
            better = acc > best
            best = torch.where(better, acc, best)
            best_a[better], best_b[better] = a.detach()[better], b.detach()[better]
    out: dict[str, Any] = {}
    with torch.no_grad():
        targets = names if cross_test else None
        for k, (name, seed) in enumerate(jobs):
            for target in targets or [name]:
                tphi, tpsi = diffs(fams[target], fams[target].split(seed, "test"))
                acc = float((((tphi @ best_a[k]) * (tpsi @ best_b[k])).sum(-1) > 0).float().mean())
                out[f"{name}|{seed}|{target}"] = acc
    return out


def _timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", type=int, default=14)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--validation", type=int, default=500)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 8, 64], help="the rank sweep's ranks")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--pool", type=int, default=8000, help="images and captions in the shared feature tables")
    args = parser.parse_args()

    import torch

    load_before = os.getloadavg()
    # Seven direction groups of two families each: a structured grid, like related COCO families.
    groups = {f"family_{i:02d}": i // 2 for i in range(args.families)}
    data, synth_s = _timed(
        lambda: planted_experiment_data(
            groups,
            dim=args.dim,
            n_train=args.train,
            n_validation=args.validation,
            n_test=args.test,
            seeds=tuple(args.seeds),
            pool_size=args.pool,
            signal=0.08,
        )  # fmt: skip
    )
    seeds = tuple(args.seeds)
    # Warm-up (torch's first kernels, lazy imports) outside every timing, so neither side pays it.
    first = ExperimentData(data.model, data.pretrained, dict(list(data.families.items())[:1]))
    run_transfer(first, TransferSettings(epochs=1, seeds=seeds[:1]))
    floor_fits(first, seeds[:1], 1, 1)
    probe_settings = ProbeSettings(epochs=args.epochs, ranks=tuple(args.ranks), full_heads=(), seeds=seeds, audit=False)
    sweep, sweep_s = _timed(lambda: run_probes(data, probe_settings))
    sweep_floor, sweep_floor_s = _timed(lambda: [floor_fits(data, seeds, r, args.epochs) for r in args.ranks])
    grid, grid_s = _timed(lambda: run_transfer(data, TransferSettings(epochs=args.epochs, seeds=seeds)))
    grid_floor, grid_floor_s = _timed(lambda: floor_fits(data, seeds, 64, args.epochs, cross_test=True))

    def mean_acc(record: dict[str, Any], rank: int) -> float:
        key = f"lowrank_r{rank}" if rank else "lowrank"
        values = []
        for family in record["families"].values():
            probe = family.get("probes", {}).get(key) or {}
            if isinstance(probe.get("test_cycle_acc"), dict):
                values.append(probe["test_cycle_acc"]["mean"])
        return float(np.mean(values)) if values else float("nan")

    n_heads = len(data.families) * len(seeds)
    out = {
        "benchmark": "bench_experiments",
        "families": len(data.families),
        "seeds": list(seeds),
        "cycles_per_seed": {"train": args.train, "validation": args.validation, "test": args.test},
        "dim": args.dim,
        "epochs": args.epochs,
        "synthesis_s": round(synth_s, 2),
        "rank_sweep": {
            "ranks": args.ranks,
            "heads_trained": n_heads * len(args.ranks),
            "ours_s": round(sweep_s, 2),
            "floor_s": round(sweep_floor_s, 2),
            "ratio": round(sweep_s / sweep_floor_s, 2),
            "floor_mean_test_cycle_acc": {
                str(r): round(float(np.mean(list(f.values()))), 4) for r, f in zip(args.ranks, sweep_floor)
            },
            "ours_family_names": sorted(sweep["families"]),
        },
        "transfer_grid": {
            "heads_trained": n_heads,
            "ours_s": round(grid_s, 2),
            "floor_s": round(grid_floor_s, 2),
            "ratio": round(grid_s / grid_floor_s, 2),
            "pearson": grid["correlation"]["pearson"]["mean"],
            "ours_in_family_cycle_acc": float(
                np.mean([np.diag(np.asarray(p["transfer"])).mean() for p in grid["per_seed"].values()])
            ),
            "floor_in_family_cycle_acc": float(np.mean([v for k, v in grid_floor.items() if k.split("|")[0] == k.split("|")[2]])),
        },
        "goal_ratio": 1.5,
        "torch_threads_default": torch.get_num_threads(),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "cpu_count": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    out["within_goal"] = out["rank_sweep"]["ratio"] <= 1.5 and out["transfer_grid"]["ratio"] <= 1.5
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
