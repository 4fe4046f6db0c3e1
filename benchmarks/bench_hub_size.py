"""Bytes a self-contained build adds over the same build by reference; prints one JSON object.

Generates a shapes world, builds every COCO family from it twice (reference mode and
``--self-contained``), and reports the added bytes as a multiple of the bytes of the unique
images the rows use (the goal: at most 1.5; every family x seed x split embedding its images
again gave about 36x on the 300-image world). Folder sizes are sums of file sizes.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from clip_cycles.data.folder.build import build_coco_folder
from clip_cycles.data.sources.shapes_world import write_shapes_world


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-images", type=int, default=300)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--min-cycles", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        world = write_shapes_world(root / "world", args.n_images, 0, args.image_size, progress=False)
        start = time.perf_counter()
        reference, _ = build_coco_folder(world, root / "reference", min_cycles=args.min_cycles)
        middle = time.perf_counter()
        embedded, _ = build_coco_folder(world, root / "self_contained", min_cycles=args.min_cycles, self_contained=True)
        end = time.perf_counter()
        names: set[str] = set()
        for path in (reference / "data").rglob("*.parquet"):
            table = pq.read_table(path, columns=["image_0", "image_1"])
            names.update(table.column("image_0").to_pylist(), table.column("image_1").to_pylist())
        unique = sum((world / name).stat().st_size for name in names)
        ref_bytes, sc_bytes = folder_bytes(reference), folder_bytes(embedded)
        result = {
            "images": args.n_images,
            "unique_images_used": len(names),
            "unique_image_bytes": unique,
            "reference_bytes": ref_bytes,
            "self_contained_bytes": sc_bytes,
            "added_over_unique_images": round((sc_bytes - ref_bytes) / unique, 4),
            "goal": 1.5,
            "build_seconds": {"reference": round(middle - start, 2), "self_contained": round(end - middle, 2)},
        }
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
