"""Benchmark: hf_vlm pair scoring (dedup + batches) vs a straightforward loop, same tiny model and blocks.

A shapes world (cycles of one family, seeds 0, 1, 2), the tiny random-init LLaVA of
``tests/support/tiny_vision_models.py`` on CPU. The loop scores the four pairs of every block
with one forward pass each (no batching, no dedup); the VLM path
(:func:`clip_cycles.encoding.vlm_scores.score_tasks`, no cache) scores each unique pair once in
batches. Prints one JSON object: wall times, the speed ratio (target >= 3), forward
passes of each side and the largest score difference (target <= 1e-5).

    python benchmarks/bench_vlm_pairs.py [--n-images 300] [--family box_left_right] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-images", type=int, default=300)
    parser.add_argument("--family", default="box_left_right")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    import torch
    from tiny_vision_models import write_tiny_vlm

    from clip_cycles.data.folder.build import build_coco_folder
    from clip_cycles.data.folder.reader import open_built_folder
    from clip_cycles.data.sources.shapes_world import write_shapes_world
    from clip_cycles.encoding.encoder import ModelSpec
    from clip_cycles.encoding.task_encoding import cycle_index
    from clip_cycles.encoding.vlm_scores import PromptConfig, load_hf_vlm, score_tasks
    from clip_cycles.tasks.loading import load_task_data
    from clip_cycles.tasks.registry import get_task

    torch.set_num_threads(max(1, torch.get_num_threads()))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        world = write_shapes_world(root / "world", n_images=args.n_images, progress=False, image_size=64)
        folder, _ = build_coco_folder(world, root / "cycles", families=[args.family], min_cycles=5)
        vlm = str(write_tiny_vlm(root / "vlm"))
        task = get_task(f"cycles/shapes_{args.family}")
        data = [load_task_data(task, open_built_folder(folder))]
        scorer, _, _ = load_hf_vlm(vlm)
        spec = ModelSpec("hf_vlm", vlm, None)
        config = PromptConfig()

        start = time.perf_counter()
        loop_blocks = []
        from PIL import Image

        for seed in sorted(data[0].splits):
            rows = data[0].splits[seed][task.split]
            for images, captions in ((rows.image_pair(i), rows.caption_pair(i)) for i in range(len(rows))):
                block = [
                    [float(scorer.score_batch([Image.open(i.path).convert("RGB")], [c], config)[0, 0]) for c in captions]
                    for i in images
                ]
                loop_blocks.append(block)
        loop_s = time.perf_counter() - start
        loop_forwards = 4 * len(loop_blocks)

        start = time.perf_counter()
        scores = score_tasks(data, spec, None, batch_size=args.batch_size)
        assert scores is not None
        fast_blocks = [
            scores.block_scores(task, cycle_index(data[0].splits[seed][task.split], scores)[0]) for seed in sorted(data[0].splits)
        ]
        fast_s = time.perf_counter() - start
        fast = np.concatenate(fast_blocks)
        loop = np.asarray(loop_blocks)
        diff = float(np.abs(fast - loop).max())
        print(
            json.dumps(
                {
                    "n_blocks": int(loop.shape[0]),
                    "requested_pairs": scores.stats.requested_pairs,
                    "unique_pairs": scores.stats.unique_pairs,
                    "loop_forward_passes": loop_forwards,
                    "vlm_forward_passes": scores.stats.forward_passes,
                    "loop_s": round(loop_s, 3),
                    "vlm_s": round(fast_s, 3),
                    "speedup": round(loop_s / fast_s, 2),
                    "max_abs_score_diff": diff,
                    "target_speedup": 3.0,
                    "passed": bool(loop_s / fast_s >= 3.0 and diff <= 1e-5),
                },
                indent=2,
                sort_keys=True,
            )
        )


if __name__ == "__main__":
    main()
