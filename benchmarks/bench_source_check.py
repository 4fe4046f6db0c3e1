"""Benchmark: what the pre-scoring source check of a reference-mode folder costs (issue 23).

Builds a shapes world (default 3,000 images, 96 px) and one COCO family from it, then
times :func:`clip_cycles.data.folder.writer.source_problems` in fresh processes: first
with an empty hash memo (every annotation file is hashed), then with the memo that run
left under ``fingerprints/`` (what every later evaluation pays). The Parquet verification
that evaluation already ran before this check is timed beside it for scale.

    python benchmarks/bench_source_check.py [--n-images 3000] [--work DIR] [--repeats 3]

Prints one JSON object: ``cold_s``, ``warm_s`` (the median of the repeats), ``parquet_verify_s``,
the image and annotation counts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = r"""
import json, sys, time
from pathlib import Path
from clip_cycles.data.folder.writer import read_build_info, source_problems, verify_folder_files
folder, memo = Path(sys.argv[1]), Path(sys.argv[2])
info = read_build_info(folder)
start = time.perf_counter()
problems = source_problems(folder, info, memo)
check = time.perf_counter() - start
start = time.perf_counter()
verify_folder_files(folder, info)
print(json.dumps({"check_s": check, "verify_s": time.perf_counter() - start, "problems": problems}))
"""


def _probe(folder: Path, memo: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, str(folder), str(memo)], capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    if result["problems"]:
        raise SystemExit(f"the source check found problems on an unchanged root: {result['problems']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-images", type=int, default=3000)
    parser.add_argument("--work", type=Path, default=None, help="working folder (default: a temporary one)")
    parser.add_argument("--repeats", type=int, default=3, help="warm runs (fresh processes)")
    args = parser.parse_args()

    from clip_cycles.data.folder.build import build_coco_folder
    from clip_cycles.data.sources.shapes_world import write_shapes_world

    with tempfile.TemporaryDirectory() as scratch:
        work = args.work or Path(scratch)
        world = write_shapes_world(work / "world", n_images=args.n_images, seed=0, image_size=96, progress=False)
        folder, _ = build_coco_folder(world, work / "built", families=["strict_left_right"], min_cycles=5, overwrite=True)
        memo = work / "fingerprints"
        cold = _probe(folder, memo)
        warm = [_probe(folder, memo) for _ in range(args.repeats)]
        info = json.loads((folder / "build_info.json").read_text())["source_fingerprint"]
        print(
            json.dumps(
                {
                    "n_images": sum(entry["files"] for entry in info["images"].values()),
                    "annotation_files": len(info["annotations"]),
                    "cold_s": round(cold["check_s"], 4),
                    "warm_s": round(statistics.median(w["check_s"] for w in warm), 4),
                    "parquet_verify_s": round(statistics.median(w["verify_s"] for w in warm), 4),
                },
                sort_keys=True,
            )
        )


if __name__ == "__main__":
    main()
