"""Build this folder's cycle families from the synthetic shapes world (the project's embedded default).

    python hf_datasets/shapes_cycles/build.py [--world DIR] [--n-images 1000] [--image-size 96] [--seed 0]
        [--self-contained]

Generates the shapes world (COCO layout + GQA scene graphs) in ``--world`` (default
``hf_datasets/shapes_cycles/world``; reused when it already holds a world with the same
parameters), builds all 14 COCO families from it, and writes ``data/``, ``build_info.json``
and the generated card over this README.md (this script and the card template are the only
other files here, so the build runs with ``overwrite``). ``--self-contained`` stores each image
once under ``data/images/`` for ``push_to_hub``. Everything is deterministic: the same
parameters give byte-identical files.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from clip_cycles.data.build import build_coco_folder
from clip_cycles.data.families import DEFAULT_MIN_CYCLES
from clip_cycles.data.shapes_world import write_shapes_world

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=Path, default=HERE / "world", help="where the shapes world lives")
    parser.add_argument("--n-images", type=int, default=1000)
    parser.add_argument("--image-size", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0, help="world generation seed")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="split seeds")
    parser.add_argument("--min-cycles", type=int, default=DEFAULT_MIN_CYCLES)
    parser.add_argument("--self-contained", action="store_true", help="store each image once in data/images/ (for push_to_hub)")
    args = parser.parse_args()
    wanted = {"kind": "shapes", "n_images": args.n_images, "seed": args.seed, "image_size": args.image_size}
    marker = args.world / "shapes_world.json"
    have = json.loads(marker.read_text()) if marker.is_file() else {}
    if {k: have.get(k) for k in wanted} != wanted:
        write_shapes_world(args.world, args.n_images, args.seed, args.image_size)
    out, builds = build_coco_folder(args.world, HERE, seeds=args.seeds, min_cycles=args.min_cycles, pool_train=None,
                                    pool_val=None, self_contained=args.self_contained, overwrite=True)  # fmt: skip
    print(f"{sum(b.available for b in builds)} of {len(builds)} families written to {out}")


if __name__ == "__main__":
    main()
