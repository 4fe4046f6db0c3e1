"""The results page from records alone: 12 models x 21 families, against reading the records; prints one JSON object.

Writes, into a temporary folder, what ``clip-cycles eval --samples`` leaves for 12 checkpoints on
the 21 shapes families (one result record per family and model, each naming its samples file and
that file's sha256; ``--cycles`` cycles per seed, 3 seeds; images as small PNGs the samples name),
then times ``collect`` (reading every result record), the same plus parsing every samples file the
records name (:func:`read_samples`: what any reader of the per-cycle numbers pays), and
``build_page`` (reading the records and the samples they name, examples, thumbnails, every page,
the manifest, the durable write), and measures the page build's peak Python heap (tracemalloc, a
separate run). The goal is page <= 3x the read; this reports both ratios, it asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from PIL import Image

from clip_cycles.evaluation.page import build_page
from clip_cycles.evaluation.page_data import collect
from clip_cycles.evaluation.samples import read_samples, samples_bytes
from clip_cycles.experiments.item_sets import family_facts
from clip_cycles.results import benchmark_record, write_result
from clip_cycles.tasks.registry import expand_tasks


def write_inputs(root: Path, n_models: int, n_cycles: int, n_images: int, seeds: int) -> list[Path]:
    """One result folder per model: a record per family (naming its samples) and one samples file."""
    rng = np.random.default_rng(0)
    images = root / "images"
    images.mkdir(parents=True)
    for k in range(n_images):
        buffer = io.BytesIO()
        Image.new("RGB", (64, 64), tuple(int(x) for x in rng.integers(0, 255, 3))).save(buffer, format="PNG")
        (images / f"{k:05d}.png").write_bytes(buffer.getvalue())
    tasks = [t for t in expand_tasks(["cycles/shapes_all"]) if not getattr(t, "members", None)]
    folders = []
    for m in range(n_models):
        folder = root / f"model{m:02d}"
        weights = hashlib.sha256(f"weights {m}".encode()).hexdigest()
        lines, records = [], []
        for task in tasks:
            items = hashlib.sha256(task.name.encode()).hexdigest()
            per_seed = []
            for seed in range(seeds):
                s = rng.normal(0.2, 0.05, size=(n_cycles, 4))
                delta = s[:, 0] + s[:, 3] - s[:, 1] - s[:, 2]
                credit = np.where(np.abs(delta) <= 1e-9, 0.5, (delta > 0).astype(float))
                per_seed.append(float(credit.mean()))
                for i in range(n_cycles):
                    a, b = rng.integers(0, n_images, 2)
                    lines.append(
                        {
                            "task": task.name,
                            "seed": seed,
                            "split": "test",
                            "cycle_id": f"{task.name}-{seed}-{i:05d}",
                            "image_0": f"{a:05d}.png",
                            "image_1": f"{b:05d}.png",
                            "caption_0": f"caption {i} a",
                            "caption_1": f"caption {i} b",
                            "s11": float(s[i, 0]),
                            "s12": float(s[i, 1]),
                            "s21": float(s[i, 2]),
                            "s22": float(s[i, 3]),
                            "delta": float(delta[i]),
                            "credit": float(credit[i]),
                            "items_sha256": items,
                            "weights_sha256": weights,
                            "image_root": str(images),
                        }
                    )
            metrics = {"cycle_acc": float(np.mean(per_seed)), "n_cycles": n_cycles * seeds, "seeds": list(range(seeds))}
            metrics.update(tie_tolerance=1e-9, cycle_acc_sd=float(np.std(per_seed, ddof=1)))
            low, high = metrics["cycle_acc"] - 0.05, metrics["cycle_acc"] + 0.05  # eval records its interval
            ci = {"low": low, "high": high, "level": 0.95, "n_resamples": 1000, "seed": 0, "method": "percentile"}
            metrics["cycle_acc_ci"] = {**ci, "unit": "cycle"}
            record = benchmark_record(task.name, "cycles-tiny", f"/ckpt/m{m:02d}.safetensors", metrics)
            record.update(split="test", items_sha256=items, weights_sha256=weights, backend="open_clip")
            record["family"] = family_facts(task)
            records.append(record)
        content = samples_bytes(lines)
        folder.mkdir()
        (folder / "samples.jsonl").write_bytes(content)
        for record in records:
            record["samples"] = {"path": str(folder / "samples.jsonl"), "sha256": hashlib.sha256(content).hexdigest()}
            write_result(record, folder / f"{record['dataset'].replace('/', '_')}.json")
        folders.append(folder)
    return folders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--cycles", type=int, default=200, help="cycles per family and seed")
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs = write_inputs(root / "in", args.models, args.cycles, args.images, args.seeds)
        read, read_all, page = [], [], []
        for k in range(args.repeats):
            start = time.perf_counter()
            data = collect(inputs)
            read.append(time.perf_counter() - start)
            start = time.perf_counter()
            collect(inputs)
            for folder in inputs:
                read_samples(folder / "samples.jsonl")
            read_all.append(time.perf_counter() - start)
            start = time.perf_counter()
            build_page(inputs, root / f"site{k}")
            page.append(time.perf_counter() - start)
        tracemalloc.start()
        build_page(inputs, root / "site_mem")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        size = sum(p.stat().st_size for p in (root / "site0").rglob("*") if p.is_file())
        print(
            json.dumps(
                {
                    "models": len(data.models),
                    "families": len(data.family_rows()),
                    "cycles_per_family_and_seed": args.cycles,
                    "seeds": args.seeds,
                    "read_records_s": round(min(read), 4),
                    "page_s": round(min(page), 4),
                    "page_over_read": round(min(page) / min(read), 2),
                    "read_records_and_samples_s": round(min(read_all), 4),
                    "page_over_read_with_samples": round(min(page) / min(read_all), 2),
                    "goal_page_over_read": 3.0,
                    "page_peak_python_heap_mb": round(peak / 2**20, 1),
                    "page_bytes": size,
                },
                sort_keys=True,
            )
        )


if __name__ == "__main__":
    main()
