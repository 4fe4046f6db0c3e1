"""Held-out checks of issue 53 through the CLI: calibration across worlds, false calls, and power. Prints one JSON object.

Near-random checkpoints are cycles-tiny with random weights (``--pretrained none``), one per
``--model-seed``; the shipped model is ``--pretrained shapes``. Every step is a ``clip-cycles``
command (``build shapes``, ``eval --samples``, ``compare``).

1. Calibration: on ``--worlds`` independent shapes worlds (300 images each), two near-random
   checkpoints are compared; per family, the sd across worlds of the paired difference over the
   mean se its interval implies (1.0: the interval says what it means). The median over families
   is printed (issue 53: in [0.8, 1.25]).
2. False calls: on one world, ``--pairs`` pairs of near-random checkpoints: the number of pairs
   with any difference called after Holm over the families (issue 53: at most 2 of 10).
3. Power: the shipped model against a near-random one on that world: the adjusted verdicts of
   coarse_object and text_neighbor (issue 53: both "A above B").

    python benchmarks/interval_heldout.py --work /tmp/heldout --worlds 8 --pairs 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SEEDS = ["0", "1", "2"]


def _cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "clip_cycles", *args, "-q"], check=True, stdout=subprocess.DEVNULL)


def _samples(work: Path, world: Path, pretrained: str, model_seed: int) -> Path:
    path = work / f"{world.name}_{pretrained}_{model_seed}.jsonl"
    if not path.exists():
        _cli(
            "eval", "--task", "cycles/shapes_all", "--model", "cycles-tiny", "--pretrained", pretrained,
            "--model-seed", str(model_seed), "--dataset-root", str(world), "--cache-dir", str(work / "cache"),
            "--device", "cpu", "--samples", str(path), "--output", str(work / "out" / f"{path.stem}_{{dataset}}.json"),
            "--seeds", *SEEDS,
        )  # fmt: skip
    return path


def _compare(work: Path, a: Path, b: Path) -> dict[str, Any]:
    out = work / f"cmp_{a.stem}_vs_{b.stem}.json"
    if not out.exists():
        _cli("compare", str(a), str(b), "--out", str(out))
    return json.loads(out.read_text())


def _world(work: Path, index: int) -> Path:
    world = work / f"world{index}"
    if not world.exists():
        _cli("build", "shapes", "--out", str(world), "--n-images", "300", "--seed", str(100 + index))
    return world


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--worlds", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=10)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    per_family: dict[str, list[tuple[float, float]]] = {}
    for index in range(args.worlds):
        world = _world(args.work, index)
        record = _compare(args.work, _samples(args.work, world, "none", 1), _samples(args.work, world, "none", 2))
        for task, row in record["families"].items():
            if row["verdict"] != "too few comparisons":
                per_family.setdefault(task, []).append((row["diff"], row["se"]))
    ratios = {
        task: statistics.stdev(d for d, _ in rows) / statistics.fmean(se for _, se in rows)
        for task, rows in sorted(per_family.items())
        if len(rows) == args.worlds
    }

    world = _world(args.work, 0)
    called, raw_called, n_calls = [], 0, 0
    for pair in range(args.pairs):
        a = _samples(args.work, world, "none", 11 + 2 * pair)
        b = _samples(args.work, world, "none", 12 + 2 * pair)
        families = _compare(args.work, a, b)["families"].values()
        hits = [row["adjusted_verdict"] in ("A above B", "B above A") for row in families]
        called.append(any(hits))
        raw_called += sum(row["verdict"] in ("A above B", "B above A") for row in families)
        n_calls += sum(row["verdict"] != "too few comparisons" for row in families)
    shipped = _compare(args.work, _samples(args.work, world, "shapes", 0), _samples(args.work, world, "none", 11))["families"]
    power = {
        task: {k: shipped[task][k] for k in ("diff", "ci_low", "ci_high", "verdict", "adjusted_verdict")}
        for task in ("cycles/shapes_coarse_object", "cycles/shapes_text_neighbor")
    }
    print(
        json.dumps(
            {
                "calibration": {
                    "worlds": args.worlds,
                    "families": len(ratios),
                    "median_sd_over_se": round(statistics.median(ratios.values()), 3) if ratios else None,
                    "range": [round(min(ratios.values()), 3), round(max(ratios.values()), 3)] if ratios else None,
                    "per_family": {k: round(v, 3) for k, v in ratios.items()},
                },
                "false_calls": {
                    "pairs": args.pairs,
                    "pairs_with_an_adjusted_call": sum(called),
                    "unadjusted_calls": raw_called,
                    "comparisons": n_calls,
                },
                "shipped_vs_near_random": power,
                "seconds": round(time.perf_counter() - started, 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
