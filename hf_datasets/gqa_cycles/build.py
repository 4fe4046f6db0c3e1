#!/usr/bin/env python
"""Build the GQA cycle families into this folder (Parquet files, card and build_info.json).

Usage (from the repository root, with clip_cycles installed)::

    python hf_datasets/gqa_cycles/build.py --gqa-root /data/gqa
    python hf_datasets/gqa_cycles/build.py --gqa-root /data/gqa --self-contained   # images once in data/images/

``--gqa-root`` holds ``train_sceneGraphs.json``, ``val_sceneGraphs.json`` and ``images/``
(the GQA release layout). Afterwards::

    datasets.load_dataset("hf_datasets/gqa_cycles", "attribute_color", split="test")

loads seed 0; ``attribute_color_seed1`` and ``attribute_color_seed2`` are the other seeds.
This script is a thin wrapper of ``clip-cycles build gqa --out hf_datasets/gqa_cycles --overwrite``
(``--overwrite`` because this script and the card template live in the folder).
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Run ``clip-cycles build gqa`` with ``--out`` defaulting to this folder (then with ``--overwrite``)."""
    from clip_cycles.cli import main as cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    if "--out" not in args:
        args += ["--out", str(Path(__file__).resolve().parent)]
        if "--overwrite" not in args:
            args.append("--overwrite")
    return cli_main(["build", "gqa", *args])


if __name__ == "__main__":
    sys.exit(main())
