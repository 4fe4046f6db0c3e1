"""Coverage of 95 % intervals for a mean over cycles on two images, on simulated worlds with a known truth.

For each regime (noise-dominated, mixed, image-dominated: :data:`clip_cycles.algebra.coverage.REGIMES`)
and design (cycles, images), ``--worlds`` worlds are drawn; the fraction whose interval holds the
truth (0.5) is printed for the two-way image-cluster interval (new) and the product-weight image
bootstrap (old), with the binomial sd of a coverage estimate on that many worlds. Prints one JSON object.

    python benchmarks/interval_coverage.py --worlds 400 --resamples 300
"""

from __future__ import annotations

import argparse
import json
import math
import time

from clip_cycles.algebra.coverage import REGIMES, coverage

DESIGNS = ((30, 20), (100, 50), (300, 100), (1000, 500), (1000, 50))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--worlds", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=300, help="bootstrap resamples of the old method")
    parser.add_argument("--level", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    rows = []
    for regime in REGIMES:
        for n_cycles, n_images in DESIGNS:
            found = coverage(regime, n_cycles, n_images, args.worlds, args.level, args.seed, args.resamples)
            rows.append(
                {
                    "regime": regime,
                    "cycles": n_cycles,
                    "images": n_images,
                    "new_two_way": round(found["two_way"], 4),
                    "old_bootstrap": round(float(found["bootstrap"]), 4),
                    "new_se_over_true_sd": round(found["two_way_se_over_sd"], 3),
                }
            )
    print(
        json.dumps(
            {
                "level": args.level,
                "worlds": args.worlds,
                "binomial_sd_of_coverage": round(math.sqrt(args.level * (1 - args.level) / args.worlds), 4),
                "old_resamples": args.resamples,
                "rows": rows,
                "seconds": round(time.perf_counter() - started, 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
