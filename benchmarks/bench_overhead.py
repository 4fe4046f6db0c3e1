"""Benchmark: `clip-cycles eval` against the floor of a plain script, cold and warm, in fresh processes.

Builds a shapes world (default 3,000 images) and every COCO-builder family from it (seeds
0, 1, 2), then times three fresh processes on the same tasks with cycles-tiny on CPU:

- floor: a plain script (imports, model load, reading the test Parquet files, decoding,
  preprocessing and encoding each unique test image and caption once, Delta and CycleAcc
  with numpy) — what the evaluation cannot beat;
- cold: ``clip-cycles eval`` with a fresh feature cache (additive audit included; its
  probes fit on the scored test cycles, ``audit_fit: scored``, so it encodes what the
  floor encodes);
- warm: the same command again, everything cached.

Prints one JSON object: the three times, the ratios to the floor (targets: cold <= 1.5,
warm <= 0.75), the peak RSS of every run (``wait4``'s ru_maxrss of the process and the
workers it waited for), the load average, and whether the floor's CycleAcc equals ours.
``--no-audit-run`` adds a fourth timing, cold without the audit (same tasks, audit metric
removed), which encodes only what the floor encodes.

    python benchmarks/bench_overhead.py [--n-images 3000] [--work DIR] [--no-audit-run]
    python benchmarks/bench_overhead.py --memory-images 10000   # adds the warm run's peak RSS at 10,000 images

``--memory-images N`` also builds an N-image world and runs ours cold (to fill the caches)
and warm there, reporting the warm run's peak RSS next to the cycles per split,
so the growth of memory with the cycles can be read off two sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: The floor: what a user would write to score the test cycles once, without any of our machinery.
FLOOR_SCRIPT = r"""
import json, sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch
from PIL import Image

from clip_cycles.encoding.tiny_model import load_tiny_model

folder, families, image_batch, caption_batch = Path(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4])
root = Path(json.loads((folder / "build_info.json").read_text())["source_root"])
model, preprocess, tokenizer = load_tiny_model()
tables = {}
for family in families:
    for seed in (0, 1, 2):
        tables[family, seed] = pq.read_table(folder / "data" / family / f"seed{seed}" / "test.parquet",
                                             columns=["image_0", "image_1", "caption_0", "caption_1"]).to_pydict()
images = list(dict.fromkeys(p for t in tables.values() for p in t["image_0"] + t["image_1"]))
captions = list(dict.fromkeys(c for t in tables.values() for c in t["caption_0"] + t["caption_1"]))
with torch.no_grad():
    phi = []
    for start in range(0, len(images), image_batch):
        pixels = torch.stack([preprocess(Image.open(root / p).convert("RGB")) for p in images[start:start + image_batch]])
        phi.append(torch.nn.functional.normalize(model.encode_image(pixels).float(), dim=-1).numpy())
    psi = []
    for start in range(0, len(captions), caption_batch):
        tokens = tokenizer(captions[start:start + caption_batch])
        psi.append(torch.nn.functional.normalize(model.encode_text(tokens).float(), dim=-1).numpy())
phi, psi = np.concatenate(phi).astype(np.float64), np.concatenate(psi).astype(np.float64)
row = {p: i for i, p in enumerate(images)}
text = {c: i for i, c in enumerate(captions)}
out = {}
for (family, seed), t in tables.items():
    u1, u2 = [np.array([row[p] for p in t[k]]) for k in ("image_0", "image_1")]
    v1, v2 = [np.array([text[c] for c in t[k]]) for k in ("caption_0", "caption_1")]
    s = lambda u, v: np.einsum("ij,ij->i", phi[u], psi[v])
    delta = s(u1, v1) + s(u2, v2) - s(u1, v2) - s(u2, v1)
    out[f"{family}/{seed}"] = float(np.mean(np.where(np.abs(delta) <= 1e-9, 0.5, delta > 0)))
print(json.dumps({"cycle_acc": out, "unique_images": len(images), "unique_captions": len(captions),
                  "n_cycles": sum(len(t["image_0"]) for t in tables.values())}))
"""

NO_AUDIT_YAML = """task: cycles/bench_{family}
dataset_path: shapes
dataset_kwargs: {{config: {family}, seeds: [0, 1, 2]}}
test_split: test
metric_list: [cycle_acc, text_acc, image_acc, group_acc, n_cycles]
tie_tolerance: 1.0e-9
"""


def run_measured(command: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Run ``command`` as a fresh process; (wall seconds, peak RSS in MiB, stdout). Fails loudly."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}):\n{err.read()[-4000:]}")
        return wall, round(usage.ru_maxrss / 1024), out.read()


def build(work: Path, n_images: int) -> tuple[Path, list[str]]:
    """The shapes world and all its COCO-builder families (reused when ``work`` already holds them)."""
    from clip_cycles.data.build import build_coco_folder
    from clip_cycles.data.families import list_families
    from clip_cycles.data.shapes_world import write_shapes_world

    world, folder = work / f"world{n_images}", work / f"built{n_images}"
    if not (world / "shapes_world.json").is_file():
        write_shapes_world(world, n_images=n_images, seed=0, progress=False)
    if not (folder / "build_info.json").is_file():
        build_coco_folder(world, folder)
    families = json.loads((folder / "build_info.json").read_text())["families"]
    return folder, [f for f in list_families("coco") if families.get(f, {}).get("available", True)]


def count_cycles(folder: Path, families: list[str]) -> dict[str, int]:
    """Rows of every split (all seeds) of ``families``, from the Parquet footers (the warm run
    reads the test split; train and validation only for tasks with ``audit_fit: train``)."""
    import pyarrow.parquet as pq

    counts = {"test": 0, "train": 0, "validation": 0}
    for family in families:
        for split in counts:
            for path in (folder / "data" / family).glob(f"seed*/{split}.parquet"):
                counts[split] += pq.ParquetFile(path).metadata.num_rows
    return counts


def eval_command(folder: Path, families: list[str], cache: Path, out: Path, batch_size: int) -> list[str]:
    """``clip-cycles eval`` of the shapes tasks of ``families`` (cycles-tiny on CPU)."""
    return [
        sys.executable,
        "-m",
        "clip_cycles",
        "eval",
        "--task",
        *[f"cycles/shapes_{f}" for f in families],
        "--model",
        "cycles-tiny",
        "--pretrained",
        "shapes",
        "--dataset-root",
        str(folder),
        "--cache-dir",
        str(cache),
        "--device",
        "cpu",
        "--batch-size",
        str(batch_size),
        "--output",
        str(out / "{dataset}.json"),
    ]


def memory_at(work: Path, n_images: int, batch_size: int, env: dict[str, str]) -> dict[str, Any]:
    """Cold then warm evaluation of an ``n_images`` world; the warm run's peak RSS and the cycles per split."""
    folder, families = build(work, n_images)
    cache = work / f"feature_cache{n_images}"
    if cache.exists():
        shutil.rmtree(cache)
    command = eval_command(folder, families, cache, work / f"results{n_images}", batch_size)
    t_cold, rss_cold, _ = run_measured(command, env)
    t_warm, rss_warm, _ = run_measured(command, env)
    cycles = count_cycles(folder, families)
    return {
        "n_images": n_images,
        "cycles_per_split": cycles,
        "ours_cold_s": round(t_cold, 2),
        "ours_warm_s": round(t_warm, 2),
        "peak_rss_mib": {"cold": rss_cold, "warm": rss_warm},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-images", type=int, default=3000, help="shapes world size (a quarter is the test pool)")
    parser.add_argument("--work", default=None, help="work directory (kept; a built world there is reused)")
    parser.add_argument("--no-audit-run", action="store_true", help="also time a cold run without the audit")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--memory-images",
        type=int,
        default=None,
        help="also state the warm run's peak RSS on a world of this many images (e.g. 10000)",
    )
    args = parser.parse_args()

    from clip_cycles.encoding.encoder import MIN_CAPTION_BATCH

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench_overhead_"))
    work.mkdir(parents=True, exist_ok=True)
    folder, families = build(work, args.n_images)
    python = sys.executable
    floor_path = work / "floor.py"
    floor_path.write_text(FLOOR_SCRIPT)
    cache = work / "feature_cache"
    if cache.exists():
        shutil.rmtree(cache)
    out = work / "results"
    command = eval_command(folder, families, cache, out, args.batch_size)
    env = {**os.environ, "TQDM_DISABLE": "1"}
    load_before = os.getloadavg()
    t_floor, rss_floor, floor_out = run_measured(
        [
            python,
            str(floor_path),
            str(folder),
            ",".join(families),
            str(args.batch_size),
            str(max(args.batch_size, MIN_CAPTION_BATCH)),
        ],
        env,
    )
    t_cold, rss_cold, _ = run_measured(command, env)
    t_warm, rss_warm, _ = run_measured(command, env)
    result: dict[str, Any] = {}
    if args.no_audit_run:
        tasks_dir = work / "tasks_no_audit"
        (tasks_dir / "cycles").mkdir(parents=True, exist_ok=True)
        for family in families:
            (tasks_dir / "cycles" / f"bench_{family}.yaml").write_text(NO_AUDIT_YAML.format(family=family))
        fresh = work / "feature_cache_no_audit"
        if fresh.exists():
            shutil.rmtree(fresh)
        plain = eval_command(folder, families, fresh, work / "results_no_audit", args.batch_size)
        plain[plain.index("--task") + 1 : plain.index("--model")] = [f"cycles/bench_{f}" for f in families]
        t_plain, _, _ = run_measured(plain, {**env, "CLIP_CYCLES_TASKS_PATH": str(tasks_dir)})
        result["ours_cold_no_audit_s"] = round(t_plain, 2)
        result["ratio_cold_no_audit"] = round(t_plain / t_floor, 3)
    load_after = os.getloadavg()
    if args.memory_images:
        result["memory"] = [
            {"n_images": args.n_images, "cycles_per_split": count_cycles(folder, families), "peak_rss_mib": {"warm": rss_warm}},
            memory_at(work, args.memory_images, args.batch_size, env),
        ]

    floor = json.loads(floor_out)
    ours = {}
    for family in families:
        record = json.loads((out / f"cycles_shapes_{family}.json").read_text())
        for seed, values in record["metrics"]["per_seed"].items():
            ours[f"{family}/{seed}"] = values["cycle_acc"]
    differences = [abs(ours[k] - floor["cycle_acc"][k]) for k in floor["cycle_acc"]]
    print(
        json.dumps(
            {
                "n_images": args.n_images,
                "families": len(families),
                "seeds": [0, 1, 2],
                "n_test_cycles": floor["n_cycles"],
                "unique_test_images": floor["unique_images"],
                "unique_test_captions": floor["unique_captions"],
                "floor_s": round(t_floor, 2),
                "ours_cold_s": round(t_cold, 2),
                "ours_warm_s": round(t_warm, 2),
                "ratio_cold": round(t_cold / t_floor, 3),
                "ratio_warm": round(t_warm / t_floor, 3),
                **result,
                "targets_met": {"cold_1.5x": t_cold / t_floor <= 1.5, "warm_0.75x": t_warm / t_floor <= 0.75},
                "peak_rss_mib": {"floor": rss_floor, "cold": rss_cold, "warm": rss_warm},
                "cycle_acc_max_abs_difference_to_floor": max(differences),
                "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
                "cpus": os.cpu_count(),
                "work": str(work),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
