#!/usr/bin/env python
"""Build the cycle families of the synthetic shapes world into this folder (Parquet files, card and build_info.json).

Usage (from the repository root, with clip_cycles installed)::

    python hf_datasets/shapes_cycles/build.py
    python hf_datasets/shapes_cycles/build.py --n-images 1000 --image-size 96 --seed 0 --self-contained

The shapes world (COCO layout + GQA scene graphs, the project's embedded default) is generated
in ``--world`` (default ``hf_datasets/shapes_cycles/world``; reused when it already holds a world
with the same ``--n-images``, ``--image-size`` and ``--seed``), and every COCO family is built
from all of its images. Everything is deterministic: the same flags give byte-identical files.
Afterwards::

    datasets.load_dataset("hf_datasets/shapes_cycles", "box_size", split="test")

loads seed 0; ``box_size_seed1`` and ``box_size_seed2`` are the other seeds.
This script is a thin wrapper: the world as ``clip-cycles build shapes --out WORLD`` writes it, then
``clip-cycles build coco --coco-root WORLD --pool-train 0 --pool-val 0 --out hf_datasets/shapes_cycles
--overwrite`` (``--overwrite`` because this script and the card template live in the folder);
the other flags (``--seeds``, ``--min-cycles``, ``--self-contained``, ...) go to the build.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    """Generate (or reuse) the world, then run ``clip-cycles build coco`` on it with ``--out`` defaulting to this folder."""
    from clip_cycles.cli import main as cli_main
    from clip_cycles.data.sources.shapes_world import write_shapes_world

    world_flags = argparse.ArgumentParser(add_help=False)
    world_flags.add_argument("--world", type=Path, default=HERE / "world")
    world_flags.add_argument("--n-images", type=int, default=1000)
    world_flags.add_argument("--image-size", type=int, default=96)
    world_flags.add_argument("--seed", type=int, default=0)
    world, args = world_flags.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    wanted = {"kind": "shapes", "n_images": world.n_images, "seed": world.seed, "image_size": world.image_size}
    marker = world.world / "shapes_world.json"
    have = json.loads(marker.read_text()) if marker.is_file() else {}
    if {key: have.get(key) for key in wanted} != wanted and not {"-h", "--help"} & set(args):
        write_shapes_world(world.world, world.n_images, world.seed, world.image_size)
    args = ["--coco-root", str(world.world), "--pool-train", "0", "--pool-val", "0", *args]
    if "--out" not in args:
        args += ["--out", str(HERE)]
        if "--overwrite" not in args:
            args.append("--overwrite")
    return cli_main(["build", "coco", *args])


if __name__ == "__main__":
    sys.exit(main())
