"""Build this folder's COCO cycle families from a local COCO 2017 copy (no download, no model).

    python hf_datasets/coco_cycles/build.py --coco-root /data/coco [--self-contained] [--seeds 0 1 2]

The COCO root must hold the standard layout: ``annotations/instances_{train,val}2017.json``,
``annotations/captions_{train,val}2017.json`` and, for ``--self-contained``, ``train2017/`` and
``val2017/`` images (each stored once under ``data/images/``). Writes ``data/``,
``build_info.json`` and replaces this README.md with the generated card (predicates, counts,
audits); this script and the card template are the only other files here, so the build runs
with ``overwrite``. Then ``datasets.load_dataset("hf_datasets/coco_cycles", "strict_size",
split="test")`` works, and ``clip-cycles audit hf_datasets/coco_cycles`` re-checks it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clip_cycles.data.build import DEFAULT_POOL_TRAIN, DEFAULT_POOL_VAL, build_coco_folder
from clip_cycles.data.families import DEFAULT_MIN_CYCLES

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coco-root", required=True, help="COCO 2017 root (standard layout)")
    parser.add_argument("--families", nargs="+", default=None, help="default: all 14 COCO families")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--min-cycles", type=int, default=DEFAULT_MIN_CYCLES)
    parser.add_argument("--pool-train", type=int, default=DEFAULT_POOL_TRAIN)
    parser.add_argument("--pool-val", type=int, default=DEFAULT_POOL_VAL)
    parser.add_argument("--self-contained", action="store_true", help="store each image once in data/images/ (for push_to_hub)")
    args = parser.parse_args()
    out, builds = build_coco_folder(args.coco_root, HERE, args.families, seeds=args.seeds, min_cycles=args.min_cycles,
                                    pool_train=args.pool_train, pool_val=args.pool_val,
                                    self_contained=args.self_contained, overwrite=True)  # fmt: skip
    print(f"{sum(b.available for b in builds)} of {len(builds)} families written to {out}")


if __name__ == "__main__":
    main()
