#!/usr/bin/env python
"""Build the COCO cycle families into this folder (Parquet files, card and build_info.json).

Usage (from the repository root, with clip_cycles installed)::

    python hf_datasets/coco_cycles/build.py --coco-root /data/coco
    python hf_datasets/coco_cycles/build.py --coco-root /data/coco --self-contained   # images once in data/images/

``--coco-root`` holds the standard COCO 2017 layout: ``annotations/instances_{train,val}2017.json``,
``annotations/captions_{train,val}2017.json`` and, for ``--self-contained``, ``train2017/`` and
``val2017/`` (no download, no model). Afterwards::

    datasets.load_dataset("hf_datasets/coco_cycles", "strict_size", split="test")

loads seed 0; ``strict_size_seed1`` and ``strict_size_seed2`` are the other seeds, and
``clip-cycles audit hf_datasets/coco_cycles`` re-checks the folder.
This script is a thin wrapper of ``clip-cycles build coco --out hf_datasets/coco_cycles --overwrite``
(``--overwrite`` because this script and the card template live in the folder); every flag of
that command (``--families``, ``--seeds``, ``--min-cycles``, ``--pool-train``, ...) works here.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Run ``clip-cycles build coco`` with ``--out`` defaulting to this folder (then with ``--overwrite``)."""
    from clip_cycles.cli import main as cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    if "--out" not in args:
        args += ["--out", str(Path(__file__).resolve().parent)]
        if "--overwrite" not in args:
            args.append("--overwrite")
    return cli_main(["build", "coco", *args])


if __name__ == "__main__":
    sys.exit(main())
