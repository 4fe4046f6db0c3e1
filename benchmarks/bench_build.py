"""Benchmark: building all COCO families vs loading the annotations with pycocotools.

Generates COCO-scale annotations with numpy (train2017: ~118k images, ~860k instances,
~590k captions; val2017: 5k images; 80 categories in 12 supercategories; 640x480-ish
images, Poisson-like instance counts with a long tail, log-normal box sizes, 24-point
polygons so the instances file is about COCO's size (~450 MB for train2017), five
template captions per image naming present objects), then measures, each in a fresh subprocess:

- ``load_s``: ``pycocotools.coco.COCO`` on the four JSON files (instances and captions of
  train2017 and val2017): the reference.
- ``build_s``: ``clip_cycles.data.folder.build.build_coco_folder`` with all 14 families, seeds 0 1 2,
  the default pools (10000 / 2744), reference mode: everything from reading the JSON
  (validated, via pycocotools) to the written folder; ``--num-proc N`` passes the build's own
  ``--num-proc`` (worker processes: the families are built one per worker; the output is the
  same for any count), and its CPU seconds then include the workers'. The default is every core
  this process may use (``encoder.available_cpus``), as a user with a COCO build to wait for would
  pass; ``--num-proc 1`` measures the single-process build (``clip-cycles build``'s default).

Prints one JSON object: times, ``ratio = build_s / load_s`` (target <= 2), the peak RSS
of each subprocess in GB (target for the build < 6), the load average before and after
(the ratio is measured in the same run, so it is the figure that counts on a busy machine), the
CPU seconds (user + system) of each timed part and their ratio (less distorted than wall time when
other processes share the cores)
and ``output_sha256``: one digest over the sha256 of every Parquet file and of
build_info.json (by relative path), so that two builds (before and after a change, on the
same ``--workdir``) can be compared byte for byte.

    python benchmarks/bench_build.py [--scale 1.0] [--workdir DIR [--reuse]] [--num-proc N (default: all cores)]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from clip_cycles.encoding.encoder import available_cpus

SUPERCATEGORIES = {
    "person": ["person"],
    "vehicle": ["bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat"],
    "outdoor": ["traffic light", "fire hydrant", "stop sign", "parking meter", "bench"],
    "animal": ["bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe"],
    "accessory": ["backpack", "umbrella", "handbag", "tie", "suitcase"],
    "sports": ["frisbee", "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove",
               "skateboard", "surfboard", "tennis racket"],
    "kitchen": ["bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl"],
    "food": ["banana", "apple", "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake"],
    "furniture": ["chair", "couch", "potted plant", "bed", "dining table", "toilet"],
    "electronic": ["tv", "laptop", "mouse", "remote", "keyboard", "cell phone"],
    "appliance": ["microwave", "oven", "toaster", "sink", "refrigerator"],
    "indoor": ["book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush"],
}  # fmt: skip
SCENES = ["in a kitchen", "on a street", "in a park", "at the beach", "in a living room", "on a table", "outside"]


def generate(root: Path, n_train: int, n_val: int, seed: int = 0) -> dict[str, int]:
    """Write COCO-like annotation files under ``root``; returns the counts."""
    rng = np.random.default_rng(seed)
    names = [n for group in SUPERCATEGORIES.values() for n in group]
    categories = [{"id": i + 1, "name": n, "supercategory": s}
                  for i, (n, s) in enumerate((n, s) for s, g in SUPERCATEGORIES.items() for n in g)]  # fmt: skip
    # COCO's category frequencies are very skewed (person ~ 30% of instances).
    weights = np.exp(-np.arange(len(names)) / 18.0)
    weights[0] = weights.sum() * 0.45
    weights /= weights.sum()
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    counts = {}
    next_id = 1
    for split, n, offset in (("train2017", n_train, 0), ("val2017", n_val, 10_000_000)):
        ids = offset + 1 + np.arange(n)
        widths = rng.choice([640, 640, 640, 480, 500, 427], size=n)
        heights = np.where(widths == 640, rng.choice([480, 427, 426, 360], size=n), 640)
        per_image = np.clip(rng.negative_binomial(2, 2 / (2 + 6.3), size=n) + 1, 1, 60)
        total = int(per_image.sum())
        image_of = np.repeat(np.arange(n), per_image)
        cats = rng.choice(len(names), size=total, p=weights)
        w_img, h_img = widths[image_of].astype(float), heights[image_of].astype(float)
        bw = np.clip(np.exp(rng.normal(np.log(0.15), 0.9, size=total)), 0.01, 0.95) * w_img
        bh = np.clip(bw * np.exp(rng.normal(0, 0.4, size=total)), 2, None)
        bh = np.minimum(bh, 0.95 * h_img)
        bx = rng.uniform(0, 1, size=total) * (w_img - bw)
        by = rng.uniform(0, 1, size=total) * (h_img - bh)
        crowd = (rng.random(total) < 0.008).astype(int)
        boxes = np.round(np.stack([bx, by, bw, bh], axis=1), 2).tolist()
        angles = np.linspace(0, 2 * np.pi, 24, endpoint=False)
        images = [{"id": int(i), "file_name": f"{int(i):012d}.jpg", "width": int(w), "height": int(h)}
                  for i, w, h in zip(ids, widths, heights)]  # fmt: skip
        annotations = []
        for k, (x, y, w, h) in enumerate(boxes):
            cx, cy = x + w / 2, y + h / 2
            poly = np.round(np.stack([cx + w / 2 * np.cos(angles), cy + h / 2 * np.sin(angles)], 1).ravel(), 2)
            annotations.append({"id": next_id, "image_id": int(ids[image_of[k]]), "category_id": int(cats[k]) + 1,
                                "bbox": [x, y, w, h], "area": round(w * h * 0.7, 2), "iscrowd": int(crowd[k]),
                                "segmentation": [poly.tolist()]})  # fmt: skip
            next_id += 1
        head = {"info": {"description": "synthetic COCO-scale benchmark"}, "licenses": [], "images": images}
        with open(root / "annotations" / f"instances_{split}.json", "w") as f:
            json.dump({**head, "annotations": annotations, "categories": categories}, f)
        # Five captions per image naming one or two present categories (plural when repeated).
        present: list[list[str]] = [[] for _ in range(n)]
        for k in range(total):
            present[image_of[k]].append(names[cats[k]])
        captions = []
        scenes = rng.integers(len(SCENES), size=(n, 5))
        picks = rng.random((n, 5, 2))
        for i in range(n):
            distinct = sorted(set(present[i]))
            for j in range(5):
                a = distinct[int(picks[i, j, 0] * len(distinct))]
                b = distinct[int(picks[i, j, 1] * len(distinct))]
                words = f"a {a}" if a == b else f"a {a} and a {b}"
                captions.append({"id": next_id, "image_id": int(ids[i]), "caption": f"{words} {SCENES[scenes[i, j]]}."})
                next_id += 1
        with open(root / "annotations" / f"captions_{split}.json", "w") as f:
            json.dump({**head, "annotations": captions}, f)
        counts[split] = {"images": n, "instances": total, "captions": len(captions)}
    return counts


LOAD = """
import contextlib, io, json, resource, sys, time
from pycocotools.coco import COCO
root = sys.argv[1]
t, cpu = time.perf_counter(), time.process_time()
with contextlib.redirect_stdout(io.StringIO()):
    objs = [COCO(f"{root}/annotations/{kind}_{split}.json") for split in ("train2017", "val2017")
            for kind in ("instances", "captions")]
seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
print(json.dumps({"seconds": seconds, "cpu_s": cpu, "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""

BUILD = """
import hashlib, json, resource, sys, time
from pathlib import Path
from clip_cycles.data.folder.build import build_coco_folder
root, out, num_proc = sys.argv[1], sys.argv[2], int(sys.argv[3])
def children_cpu():  # the --num-proc workers' CPU seconds (waited for when their pool closes)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
t, cpu, cpu_workers = time.perf_counter(), time.process_time(), children_cpu()
folder, builds = build_coco_folder(root, out, overwrite=True, num_proc=num_proc)
seconds, cpu = time.perf_counter() - t, time.process_time() - cpu + children_cpu() - cpu_workers
counts = {b.name: (b.counts[0] if b.available else b.reason) for b in builds}
files = sorted([*Path(folder).rglob("*.parquet"), Path(folder) / "build_info.json"])
digest = hashlib.sha256("".join(f"{p.relative_to(folder)} {hashlib.sha256(p.read_bytes()).hexdigest()}\\n"
                                for p in files).encode()).hexdigest()
print(json.dumps({"seconds": seconds, "cpu_s": cpu, "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "peak_rss_worker_gb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20,
                  "seed0_counts": counts, "output_sha256": digest, "output_files": len(files)}))
"""


def _child(code: str, *args: str) -> dict:
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of COCO size (1.0 = 118k train images)")
    parser.add_argument("--workdir", default=None, help="where to write the annotations (default: a temp dir)")
    parser.add_argument("--reuse", action="store_true", help="reuse annotations generated at this scale in --workdir")
    parser.add_argument("--num-proc", type=int, default=available_cpus(),
                        help="the build's --num-proc (worker processes; same output); default: all usable cores")  # fmt: skip
    args = parser.parse_args()
    if args.num_proc < 1:
        parser.error(f"--num-proc must be at least 1, got {args.num_proc}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.workdir or tmp) / "coco"
        marker = root / "generated.json"  # the scale and counts of annotations generate() wrote there
        if args.reuse and marker.is_file() and json.loads(marker.read_text())["scale"] == args.scale:
            counts, generate_s = json.loads(marker.read_text())["counts"], 0.0
        else:
            t = time.perf_counter()
            counts = generate(root, int(round(118_287 * args.scale)), int(round(5_000 * args.scale)))
            generate_s = time.perf_counter() - t
            marker.write_text(json.dumps({"scale": args.scale, "counts": counts}))
        load_before = os.getloadavg()
        load = _child(LOAD, str(root))
        build = _child(BUILD, str(root), str(Path(args.workdir or tmp) / "cycles"), str(args.num_proc))
        load_after = os.getloadavg()
    print(json.dumps({
        "benchmark": "build_coco_families",
        "annotations": counts,
        "generate_s": round(generate_s, 2),
        "pycocotools_load_s": round(load["seconds"], 2),
        "build_all_families_s": round(build["seconds"], 2),
        "ratio_build_over_load": round(build["seconds"] / load["seconds"], 3),
        # CPU seconds (user + system) of each timed part: the ratio that a busy machine distorts least.
        "pycocotools_load_cpu_s": round(load["cpu_s"], 2), "build_all_families_cpu_s": round(build["cpu_s"], 2),
        "ratio_cpu_build_over_load": round(build["cpu_s"] / load["cpu_s"], 3),
        "target_ratio": 2.0,
        "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)], "cpus": os.cpu_count(),
        "output_sha256": build["output_sha256"], "output_files": build["output_files"],
        "peak_rss_load_gb": round(load["peak_rss_gb"], 3),
        "peak_rss_build_gb": round(build["peak_rss_gb"], 3),
        # The largest worker's own peak (each worker's pages are counted in full, shared ones included).
        "peak_rss_build_worker_gb": round(build["peak_rss_worker_gb"], 3),
        "num_proc": args.num_proc,
        "target_peak_rss_gb": 6.0,
        "families": 14, "seeds": [0, 1, 2], "pools": {"train": 10000, "val": 2744},
        "seed0_counts": build["seed0_counts"],
    }, sort_keys=True))  # fmt: skip


if __name__ == "__main__":
    main()
