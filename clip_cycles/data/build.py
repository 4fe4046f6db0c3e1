"""``clip-cycles build``: the shapes world, and COCO or GQA cycle families into a dataset folder.

The sub-commands are derived from the source registry (:mod:`clip_cycles.data.sources`):
one per registered source, with its raw-root flag, its flags (``build_flags``) and its
function (``build``). The shipped ones::

    clip-cycles build shapes --out DIR [--n-images N] [--seed S] [--image-size PX]
    clip-cycles build coco --coco-root DIR --out DIR [--families ...] [--seeds 0 1 2]
        [--min-cycles N] [--pool-train 10000 --pool-val 2744] [--validation-fraction 0.2]
        [--margin 0.1] [--size-ratio 1.5] [--self-contained] [--num-proc N]
    clip-cycles build gqa --gqa-root DIR --out DIR [--families ...] [--seeds 0 1 2]
        [--min-cycles N] [--pool-train 5600 --pool-test 2400] [--validation-fraction 0.142857...]
        [--self-contained] [--num-proc N]

``--num-proc`` builds the families on that many worker processes, one family per task; a
worker also runs its family's per-image steps (text-neighbour search, GQA candidate
indexing) and encodes its Parquet files. The written folder is byte-identical for any
count, so the count is recorded nowhere. GQA pool sizes of 0 mean every valid image (the GQA rebuild
command in ``build_info.json`` writes them so).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any, Sequence

from clip_cycles.data import gqa_families
from clip_cycles.data.build_config import (
    DEFAULT_MIN_CYCLES,
    DEFAULT_POOL_TRAIN,
    DEFAULT_POOL_VAL,
    DEFAULT_VALIDATION_FRACTION,
    BuildConfig,
)
from clip_cycles.data.coco_families import coco_pools, load_coco_index
from clip_cycles.data.dataset_folder import build_folder
from clip_cycles.data.families import cycle_collector_paused, list_families, seed_argument
from clip_cycles.data.sources import get_source, resolve_hook, source_names
from clip_cycles.results import finite_float

__all__ = ["DEFAULT_POOL_TRAIN", "DEFAULT_POOL_VAL", "BuildConfig", "build_coco_folder", "build_gqa_folder"]


def coco_config(config: BuildConfig | None = None, **settings: Any) -> BuildConfig:
    """``config`` with ``settings`` over it, or COCO's defaults with ``settings``; validated once."""
    settings = {name: value for name, value in settings.items() if name != "families" or value is not None}
    if config is None:
        return BuildConfig.for_source("coco", **settings)
    return config.replace(**settings) if settings else config


@cycle_collector_paused()  # the load and the build hold millions of objects: see its docstring
def build_coco_folder(
    coco_root: str | Path,
    out: str | Path,
    families: Sequence[str] | None = None,
    *,
    config: BuildConfig | None = None,
    **settings: Any,
) -> tuple[Path, list[Any]]:
    """Load COCO under ``coco_root`` (standard layout), build, audit and write the families to ``out``.

    The build's settings are ``config`` (a :class:`~clip_cycles.data.build_config.BuildConfig`),
    with ``families`` and any ``settings`` (its field names: ``seeds``, ``min_cycles``,
    ``pool_train``, ``pool_val``, ``self_contained``, ``validation_fraction``, ``num_proc``,
    ``margin``, ``size_ratio``, ``overwrite``, ``allow_empty``) laid over it; without
    ``config``, over COCO's defaults. An invalid value is refused before anything is read
    or written. ``num_proc`` processes share the heavy steps (same output for any count).
    Returns the folder and the :class:`~clip_cycles.data.families.FamilyBuild` list.
    """
    config = coco_config(config, families=families, **settings)
    names = list(config.families) if config.families else list_families("coco")
    index = load_coco_index(coco_root)
    train_pool, val_pool = coco_pools(index, config.pool_train, config.pool_val)
    if not train_pool or not val_pool:
        raise ValueError(f"COCO root {index.root}: train2017 or val2017 has no valid annotated image "
                         f"(skipped: {dict(index.skipped)})")  # fmt: skip
    command = ["clip-cycles", "build", "coco", "--coco-root", str(index.root), "--out", str(out), "--families", *names,
               "--seeds", *map(str, config.seeds), "--min-cycles", str(config.min_cycles),
               "--pool-train", str(config.pool_train or 0), "--pool-val", str(config.pool_val or 0),
               "--validation-fraction", repr(config.validation_fraction), "--margin", repr(config.margin),
               "--size-ratio", repr(config.size_ratio)] + (["--self-contained"] if config.self_contained else [])  # fmt: skip
    return build_folder(
        index, names, train_pool, val_pool, out, config, rebuild_command=shlex.join(command),
        skipped=dict(index.skipped),
        extra_info={"pool_requested": {"train": config.pool_train, "val": config.pool_val},
                    "thresholds": {"margin": config.margin, "size_ratio": config.size_ratio}},
    )  # fmt: skip


@cycle_collector_paused()
def build_gqa_folder(
    gqa_root: str | Path,
    out: str | Path,
    families: Sequence[str] | None = None,
    *,
    config: BuildConfig | None = None,
    **settings: Any,
) -> tuple[Path, list[Any]]:
    """Build the GQA families from ``gqa_root`` (scene graphs, images) into the dataset folder ``out``.

    Settings as for :func:`build_coco_folder`, over GQA's defaults: pools of paper 1 (5,600
    train-file, 2,400 val-file images; ``pool_test`` names the config's ``pool_val``; ``None``
    takes every valid image), ``validation_fraction`` 1/7 of the train pool per seed. The
    output is the same for any ``num_proc``.
    """
    config = gqa_families.gqa_config(config, families=families, **settings)
    names = list(config.families) if config.families else list_families("gqa")
    pool_train, pool_test, validation_fraction = config.pool_train, config.pool_val, config.validation_fraction
    index, train_pool, val_pool = gqa_families.gqa_build_inputs(gqa_root, pool_train, pool_test)
    command = ["clip-cycles", "build", "gqa", "--gqa-root", str(index.root), "--out", str(out), "--families", *names,
               "--seeds", *map(str, config.seeds), "--min-cycles", str(config.min_cycles), "--pool-train",
               str(pool_train or 0), "--pool-test", str(pool_test or 0), "--validation-fraction",
               repr(validation_fraction)] + (["--self-contained"] if config.self_contained else [])  # fmt: skip
    return build_folder(
        index, names, train_pool, val_pool, out, config, rebuild_command=shlex.join(command),
        skipped=dict(sorted(index.skipped.items())),
        extra_info={"gqa": gqa_families.pool_facts(index, pool_train, pool_test, train_pool, val_pool, validation_fraction)},
    )  # fmt: skip


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
    """Arguments of ``clip-cycles build``: one sub-command per registered source (:mod:`clip_cycles.data.sources`)."""
    names = source_names()
    sub = parser.add_subparsers(dest="source", required=True, metavar="{" + ",".join(names) + "}")
    for name in names:
        source = get_source(name)
        command = sub.add_parser(name, help=source.build_help, description=source.build_help)
        if source.root_flag:
            command.add_argument(source.root_flag, required=True, help=f"raw {source.title} root ({source.layout})")
        resolve_hook(source.build_flags, f"source {name!r} build_flags")(command)
        command.set_defaults(func=resolve_hook(source.build, f"source {name!r} build"))
