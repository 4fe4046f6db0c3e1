"""Benchmark: clip_benchmark's image_caption_selection vs clip_cycles eval (cold and cached).

A shapes world, a few hundred test cycles (two families, seeds 0, 1, 2) over at most
300 unique images, open_clip ViT-B-32 with random init (pretrained=None) on CPU. The
model is loaded once and handed to both sides, so the timings compare the evaluation
work: clip_benchmark encodes the two images and two captions of every block; clip_cycles
encodes each unique image and caption once (cold) or reads the feature cache (cached).
Prints one JSON object with wall times, ratios, encoder call counts and whether the
text/image/group accuracies agree. Targets: cold >= 3x, cached >= 50x faster.

    python benchmarks/bench_eval.py [--n-images 400] [--families strict_left_right]

The plain-script floor (a DataLoader script that encodes once and scores, 3,000-image world, 14
families; cold and warm ``clip-cycles eval`` in fresh processes) is ``benchmarks/bench_overhead.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

TASK_YAML = """task: cycles/{name}
dataset_path: shapes
dataset_kwargs: {{config: {family}, seeds: [0, 1, 2]}}
test_split: test
metric_list: [cycle_acc, text_acc, image_acc, group_acc, n_cycles]
tie_tolerance: 1.0e-9
"""


class Counting:
    """Counts the rows a model encodes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.images = self.texts = 0

    def eval(self) -> Counting:
        return self

    def encode_image(self, pixels: Any) -> Any:
        self.images += len(pixels)
        return self.inner.encode_image(pixels)

    def encode_text(self, tokens: Any) -> Any:
        self.texts += len(tokens)
        return self.inner.encode_text(tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-images", type=int, default=400, help="shapes world size (a quarter is the test pool)")
    parser.add_argument("--families", nargs="+", default=["strict_left_right"])
    parser.add_argument("--model", default="ViT-B-32")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--num-workers", type=int, default=2)
    args = parser.parse_args()

    import torch
    from clip_benchmark.datasets.builder import image_captions_collate_fn
    from clip_benchmark.metrics import image_caption_selection

    from clip_cycles.data.folder.build import build_coco_folder
    from clip_cycles.data.sources.shapes_world import write_shapes_world
    from clip_cycles.encoding.backends import load_open_clip
    from clip_cycles.encoding.encoder import ModelSpec
    from clip_cycles.evaluation.zero_shot import evaluate
    from clip_cycles.integrations.clip_benchmark import cycle_blocks_dataset
    from clip_cycles.settings import TASKS_PATH_ENV

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    work = Path(tempfile.mkdtemp(prefix="bench_eval_"))
    world = write_shapes_world(work / "world", n_images=args.n_images, seed=0, image_size=96, progress=False)
    folder, _ = build_coco_folder(world, work / "built", families=args.families, min_cycles=5)
    tasks_dir = work / "tasks"
    (tasks_dir / "cycles").mkdir(parents=True)
    names = []
    for family in args.families:
        name = f"bench_{family}"
        (tasks_dir / "cycles" / f"{name}.yaml").write_text(TASK_YAML.format(name=name, family=family))
        names.append(f"cycles/{name}")
    os.environ[TASKS_PATH_ENV] = str(tasks_dir)

    torch.manual_seed(0)
    model, transform, tokenizer = load_open_clip(args.model, None)
    model.eval()

    # clip_benchmark: its own metric over every block of every task and seed.
    reference = Counting(model)
    blocks = 0
    correct_ref = {"text_acc": 0, "image_acc": 0, "acc": 0}
    start = time.perf_counter()
    for name in names:
        dataset = cycle_blocks_dataset(name, str(folder), transform)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=args.batch_size, num_workers=args.num_workers, collate_fn=image_captions_collate_fn
        )
        metrics = image_caption_selection.evaluate(reference, loader, tokenizer, "cpu", amp=False)
        blocks += len(dataset)
        for key in correct_ref:
            correct_ref[key] += round(metrics[key] * len(dataset))
    t_reference = time.perf_counter() - start

    ours = Counting(model)
    spec = ModelSpec("open_clip", args.model, None, seed=0, loader=lambda: (ours, transform, tokenizer))
    cache = work / "cache"
    start = time.perf_counter()
    records, encoded = evaluate(names, spec, folder, cache, batch_size=args.batch_size, num_workers=args.num_workers)
    t_cold = time.perf_counter() - start
    cold_calls = (ours.images, ours.texts)
    start = time.perf_counter()
    again, encoded_again = evaluate(names, spec, folder, cache, batch_size=args.batch_size, num_workers=args.num_workers)
    t_cached = time.perf_counter() - start

    correct_ours = {"text_acc": 0, "image_acc": 0, "acc": 0}
    for record in records:
        for seed in record["metrics"]["per_seed"].values():
            for key, name in (("text_acc", "text_acc"), ("image_acc", "image_acc"), ("acc", "group_acc")):
                correct_ours[key] += round(seed[name] * seed["n_cycles"])
    stats = encoded.stats
    print(
        json.dumps(
            {
                "model": f"{args.model} (random init, CPU, fp32)",
                "n_cycles": blocks,
                "tasks": names,
                "unique_images": stats.unique_image_contents,
                "unique_captions": stats.unique_captions,
                "clip_benchmark_s": round(t_reference, 3),
                "ours_cold_s": round(t_cold, 3),
                "ours_cached_s": round(t_cached, 3),
                "speedup_cold": round(t_reference / t_cold, 2),
                "speedup_cached": round(t_reference / t_cached, 2),
                "encoder_calls": {
                    "clip_benchmark": {"images": reference.images, "captions": reference.texts},
                    "ours_cold": {"images": cold_calls[0], "captions": cold_calls[1]},
                    "ours_cached": {"images": ours.images - cold_calls[0], "captions": ours.texts - cold_calls[1]},
                },
                "cached_run_loaded_model": encoded_again.stats.model_loaded,
                "same_correct_counts": correct_ours == correct_ref,
                "targets_met": {"cold_3x": t_reference / t_cold >= 3, "cached_50x": t_reference / t_cached >= 50},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
