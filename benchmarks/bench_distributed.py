"""Benchmark: sharded encoding under torchrun, 1 process vs 2 (gloo, CPU), same task and model.

A shapes world (default 400 images of 64 px), every shapes family built once, a small
random-init OpenCLIP config (ViT 4 layers x 128 wide on 64 px images, text 4 x 128).
For each process count N, ``torchrun --standalone --nproc_per_node N -m clip_cycles
encode --task <six shapes tasks>`` runs twice: cold (fresh feature cache: everything is
encoded) and warm (same cache: nothing is, so the run measures start-up, data loading
and hashing). ``encode_s = cold - warm`` is the encoding work; items/s are unique images
plus captions over the cold wall time and over ``encode_s``. Each rank gets
``OMP_NUM_THREADS = cpu_count // N`` so both runs use the same cores. Prints one JSON
object with both runs, the speedups (1-process time / 2-process time) and the load
average before and after: on a 2-core machine shared with other work the cores, not the
sharding, bound the speedup.

    python benchmarks/bench_distributed.py [--n-images 400] [--procs 1 2] [--task cycles/shapes_strict_size ...]
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
from typing import Any

#: Shapes-world tasks of the COCO builder (a fixed list: the shapes_all collection may grow).
TASKS = (
    "cycles/shapes_strict_left_right",
    "cycles/shapes_strict_above_below",
    "cycles/shapes_strict_size",
    "cycles/shapes_box_left_right",
    "cycles/shapes_box_above_below",
    "cycles/shapes_matched_object",
)
SMALL = {
    "model_cfg": {
        "embed_dim": 64,
        "vision_cfg": {"image_size": 64, "layers": 4, "width": 128, "patch_size": 8, "head_width": 32},
        "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 128, "heads": 4, "layers": 4},
    },
    "preprocess_cfg": {},
}


def _launch(nproc: int, tasks: list[str], model: str, root: Path, cache: Path, batch_size: int) -> tuple[float, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIP_CYCLES_")}
    env.update({"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // nproc)), "TQDM_DISABLE": "1"})
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(nproc),
        "-m",
        "clip_cycles",
        "encode",
        "--task",
        *tasks,
        "--model",
        model,
        "--dataset-root",
        str(root),
        "--cache-dir",
        str(cache),
        "--device",
        "cpu",
        "--num-workers",
        "0",
        "--batch-size",
        str(batch_size),
    ]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    stats = json.loads(done.stdout[done.stdout.index("{") :])  # rank 0 prints the counts
    return wall, stats


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-images", type=int, default=400)
    parser.add_argument("--task", nargs="+", default=list(TASKS))
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args(argv)

    from clip_cycles.data.folder.build import build_coco_folder
    from clip_cycles.data.sources.shapes_world import write_shapes_world

    load_before = os.getloadavg()
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        world = write_shapes_world(tmp / "world", n_images=args.n_images, seed=0, image_size=64, progress=False)
        root, _ = build_coco_folder(world, tmp / "cycles", min_cycles=5)
        (tmp / "small").mkdir()
        (tmp / "small" / "open_clip_config.json").write_text(json.dumps(SMALL))
        model = f"local-dir:{tmp / 'small'}"
        for nproc in args.procs:
            cache = tmp / f"cache{nproc}"
            cold, stats = _launch(nproc, args.task, model, root, cache, args.batch_size)
            warm, again = _launch(nproc, args.task, model, root, cache, args.batch_size)
            items = stats["unique_image_contents"] + stats["unique_captions"]
            encoded = stats["encoded_images"] + stats["encoded_captions"]
            if encoded != items or again["encoded_images"] + again["encoded_captions"] != 0:
                raise RuntimeError(
                    f"{nproc} processes: encoded {encoded} of {items} items cold, "
                    f"{again['encoded_images'] + again['encoded_captions']} warm"
                )
            work = max(cold - warm, 1e-9)
            runs[str(nproc)] = {
                "wall_s": round(cold, 3),
                "items_per_s": round(items / cold, 2),
                "warm_wall_s": round(warm, 3),
                "encode_s": round(work, 3),
                "encode_items_per_s": round(items / work, 2),
                "omp_threads_per_rank": max(1, (os.cpu_count() or 1) // nproc),
                "per_rank_encoded": [r["encoded_images"] + r["encoded_captions"] for r in stats.get("ranks", [])],
            }
    out: dict[str, Any] = {
        "tasks": args.task,
        "n_images_world": args.n_images,
        "items": items,
        "model": "open_clip local-dir ViT 4x128 @64px, text 4x128, random init",
        "device": "cpu (gloo)",
        "cpu_count": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "runs": runs,
    }
    if "1" in runs and "2" in runs:
        out["speedup_wall_2_vs_1"] = round(runs["1"]["wall_s"] / runs["2"]["wall_s"], 3)
        out["speedup_encode_2_vs_1"] = round(runs["1"]["encode_s"] / runs["2"]["encode_s"], 3)
    print(json.dumps(out, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
