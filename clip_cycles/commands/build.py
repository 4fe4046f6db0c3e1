"""``clip-cycles build``: the shapes world, and COCO or GQA cycle families into a dataset folder.

The sub-commands are derived from the source registry (:mod:`clip_cycles.data.sources.registry`):
one per registered source, with its raw-root flag, its flags (``build_flags``) and its
function (``build``); the shipped sources name the functions of this module. The builders
themselves are :mod:`clip_cycles.data.folder.build` and :mod:`clip_cycles.data.sources.shapes_world`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from clip_cycles.commands.flags import finite_float, seed_argument
from clip_cycles.data.families import gqa as gqa_families
from clip_cycles.data.families.build_config import (
    DEFAULT_MIN_CYCLES,
    DEFAULT_POOL_TRAIN,
    DEFAULT_POOL_VAL,
    DEFAULT_VALIDATION_FRACTION,
    BuildConfig,
)
from clip_cycles.data.folder.build import build_coco_folder, build_gqa_folder
from clip_cycles.data.sources.registry import get_source, resolve_hook, source_names
from clip_cycles.data.sources.shapes_world import DEFAULT_WORLD, ShapesWorldOptions, write_shapes_world


def add_shapes_flags(parser: argparse.ArgumentParser) -> None:
    """Flags of ``clip-cycles build shapes`` (the subcommand itself comes from the source registry)."""
    parser.add_argument("--out", required=True, help="output folder (COCO layout + GQA scene graphs)")
    world = DEFAULT_WORLD  # the defaults are the one default world's (the demo's and a root-less task's)
    parser.add_argument("--n-images", type=int, default=world.n_images, help=f"number of images (default {world.n_images})")
    parser.add_argument("--seed", type=int, default=world.seed, help=f"generation seed (default {world.seed})")
    parser.add_argument(
        "--image-size", type=int, default=world.image_size, help=f"image side in pixels, 64-128 (default {world.image_size})"
    )
    parser.add_argument(
        "--val-fraction",
        type=float,
        default=world.val_fraction,
        help=f"fraction of the images in val2017, in (0, 1) (default {world.val_fraction:g})",
    )


def run_shapes(args: argparse.Namespace) -> int:
    """``clip-cycles build shapes``: write the world and print where."""
    world = ShapesWorldOptions.make(
        n_images=args.n_images, seed=args.seed, image_size=args.image_size, val_fraction=args.val_fraction
    )
    out = write_shapes_world(args.out, **world.model_dump())
    default = " (the default world)" if world == DEFAULT_WORLD else ""
    print(f"{world.describe()}{default} written to {out}")
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output dataset folder")
    parser.add_argument("--families", nargs="+", default=None, help="family names (default: all of the source)")
    parser.add_argument(
        "--seeds", nargs="+", type=seed_argument, default=[0, 1, 2], help="split seeds, non-negative integers (default 0 1 2)"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="let --out hold other files; only the card, build_info.json and data/ Parquet are replaced",
    )
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="write the folder even when no family has an available split (otherwise an error)",
    )
    parser.add_argument(
        "--min-cycles",
        type=int,
        default=DEFAULT_MIN_CYCLES,
        help=f"minimum cycles per split and seed (default {DEFAULT_MIN_CYCLES}); a short split is not "
        "available (zero-shot scoring needs its scored split, probe experiments all three)",
    )
    parser.add_argument("--self-contained", action="store_true", help="embed images (datasets.Image) in Parquet")
    parser.add_argument(
        "--num-proc",
        type=int,
        default=1,
        help="worker processes: the families are built one per worker, each with its per-image steps "
        "(same output for any count; default 1, this process)",
    )


def add_coco_flags(parser: argparse.ArgumentParser) -> None:
    """Flags of ``clip-cycles build coco`` (``--coco-root`` comes from the source registry)."""
    _common(parser)
    parser.add_argument(
        "--pool-train",
        type=_pool_size,
        default=DEFAULT_POOL_TRAIN,
        help=f"train2017 pool size, 0 = all (default {DEFAULT_POOL_TRAIN})",
    )
    parser.add_argument(
        "--pool-val", type=_pool_size, default=DEFAULT_POOL_VAL, help=f"val2017 pool size, 0 = all (default {DEFAULT_POOL_VAL})"
    )
    parser.add_argument(
        "--validation-fraction",
        type=finite_float,
        default=DEFAULT_VALIDATION_FRACTION,
        help=f"share of the train pool per seed that goes to validation (default {DEFAULT_VALIDATION_FRACTION})",
    )
    parser.add_argument(
        "--margin",
        type=finite_float,
        default=0.1,
        help="spatial margin of relation/position captions, fraction of width/height (default 0.1)",
    )
    parser.add_argument(
        "--size-ratio", type=finite_float, default=1.5, help="area ratio of 'larger than'/'smaller than' captions (default 1.5)"
    )


def run_coco(args: argparse.Namespace) -> int:
    """``clip-cycles build coco``: build, audit and write; print one line per family."""
    config = BuildConfig.for_source(
        "coco", families=args.families, seeds=args.seeds, min_cycles=args.min_cycles, pool_train=args.pool_train,
        pool_val=args.pool_val, self_contained=args.self_contained, validation_fraction=args.validation_fraction,
        num_proc=args.num_proc, margin=args.margin, size_ratio=args.size_ratio, overwrite=args.overwrite,
        allow_empty=args.allow_empty,
    )  # fmt: skip
    out, builds = build_coco_folder(args.coco_root, args.out, config=config)
    _summary(out, builds)
    return 0


def _pool_size(text: str) -> int | None:
    """A pool-size flag: a positive count, or 0 for every valid image (``build_info.json`` records it so)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"pool size must be a positive count or 0 (all images), got {value}")
    return value or None


def add_gqa_flags(parser: argparse.ArgumentParser) -> None:
    """Flags of ``clip-cycles build gqa`` (``--gqa-root`` comes from the source registry)."""
    _common(parser)
    parser.add_argument(
        "--pool-train",
        type=_pool_size,
        default=gqa_families.DEFAULT_POOL_TRAIN,
        help=f"train-file pool size, 0 = all (default {gqa_families.DEFAULT_POOL_TRAIN})",
    )
    parser.add_argument(
        "--pool-test",
        type=_pool_size,
        default=gqa_families.DEFAULT_POOL_TEST,
        help=f"val-file pool size for test, 0 = all (default {gqa_families.DEFAULT_POOL_TEST})",
    )
    parser.add_argument(
        "--validation-fraction",
        type=finite_float,
        default=gqa_families.GQA_VALIDATION_FRACTION,
        help="share of the train pool per seed that goes to validation (default 1/7: 4,800/800)",
    )


def run_gqa(args: argparse.Namespace) -> int:
    """``clip-cycles build gqa``: build, audit and write; print one line per family."""
    config = BuildConfig.for_source(
        "gqa", families=args.families, seeds=args.seeds, min_cycles=args.min_cycles, pool_train=args.pool_train,
        pool_val=args.pool_test, self_contained=args.self_contained, validation_fraction=args.validation_fraction,
        num_proc=args.num_proc, overwrite=args.overwrite, allow_empty=args.allow_empty,
    )  # fmt: skip
    out, builds = build_gqa_folder(args.gqa_root, args.out, config=config)
    _summary(out, builds)
    return 0


def _summary(out: Path, builds: Sequence[Any]) -> None:
    for build in builds:
        if build.available:
            counts = ", ".join(f"seed {s}: " + "/".join(str(c[k]) for k in ("train", "validation", "test"))
                               for s, c in sorted(build.counts.items()))  # fmt: skip
            print(f"{build.name:<24} {counts}")
        else:
            print(f"{build.name:<24} unavailable: {build.reason}")
    print(f"written to {out}")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles build``: one sub-command per registered source (:mod:`clip_cycles.data.sources.registry`)."""
    names = source_names()
    sub = parser.add_subparsers(dest="source", required=True, metavar="{" + ",".join(names) + "}")
    for name in names:
        source = get_source(name)
        command = sub.add_parser(name, help=source.build_help, description=source.build_help)
        if source.root_flag:
            command.add_argument(source.root_flag, required=True, help=f"raw {source.title} root ({source.layout})")
        resolve_hook(source.build_flags, f"source {name!r} build_flags")(command)
        command.set_defaults(func=resolve_hook(source.build, f"source {name!r} build"))
