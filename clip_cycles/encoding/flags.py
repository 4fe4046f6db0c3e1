"""The model flags of every command, and the ModelSpec they describe."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from clip_cycles.encoding.encoder import DEFAULT_BATCH_SIZE, ModelSpec


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``clip-cycles encode`` and ``clip-cycles eval``."""
    parser.add_argument("--task", nargs="+", required=True, help="task or collection names, e.g. cycles/coco_all")
    parser.add_argument("--model-type", default="open_clip", help="backend name (see clip_cycles.encoding.backends)")
    parser.add_argument("--model", required=True, help="model name (backend-specific; a file for 'features')")
    parser.add_argument("--pretrained", default=None, help="pretrained tag or checkpoint path; none = random init")
    parser.add_argument("--dataset-root", default=None,
                        help="built dataset folder or raw COCO/GQA root (shapes tasks build their own if omitted)")
    parser.add_argument("--data-cache-dir", default=None,
                        help="where families built from a raw root are kept (default: <cache-dir>/datasets)")
    parser.add_argument("--cache-dir", default=None,
                        help="feature cache root (default: $CLIP_CYCLES_CACHE or ~/.cache/clip_cycles)")
    parser.add_argument("--no-cache", action="store_true", help="encode everything and store nothing")
    parser.add_argument("--model-cache-dir", default=None, help="where the backend keeps downloaded weights")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--no-amp", dest="amp", action="store_false", help="fp32 on CUDA too")
    parser.add_argument("--seed", type=int, default=0, help="torch seed before loading (random-init models)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--num-workers", type=int, default=None,
                        help="image decoding workers (default: min(4, CPUs - 1); none for jobs of at most two batches)")
    parser.add_argument("--skip-bad-images", action="store_true",
                        help="count and report missing or undecodable images (and drop their cycles) instead of failing")


def model_spec_from_args(args: argparse.Namespace, loader: Callable[[], Any] | None = None) -> ModelSpec:
    """A ModelSpec from the shared CLI arguments."""
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return ModelSpec(backend=args.model_type, model=args.model, pretrained=args.pretrained, device=device,
                     seed=args.seed, amp=args.amp, model_cache_dir=args.model_cache_dir, loader=loader)
