"""``clip-cycles build``: the shapes world, and COCO or GQA cycle families into a dataset folder.

The sub-commands are derived from the source registry (:mod:`clip_cycles.data.sources.registry`: which
sources there are, in which order, and each one's raw-root flag) and from this module's own
table :data:`BUILD_COMMANDS` (source name -> the options model whose fields are its flags, and
the function run on those options). A source without an entry has no build sub-command. The
builders themselves are :mod:`clip_cycles.data.folder.build` and :mod:`clip_cycles.data.sources.shapes_world`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import Field

from clip_cycles.commands.derived import configure
from clip_cycles.data.families.build_config import (
    DEFAULT_MIN_CYCLES,
    DEFAULT_POOL_TRAIN,
    DEFAULT_POOL_VAL,
    DEFAULT_VALIDATION_FRACTION,
    GQA_POOL_TEST,
    GQA_POOL_TRAIN,
    GQA_VALIDATION_FRACTION,
    BuildConfig,
)
from clip_cycles.data.folder.build import build_coco_folder, build_gqa_folder
from clip_cycles.data.sources.registry import get_source, source_names
from clip_cycles.data.sources.shapes_world import DEFAULT_WORLD, ShapesWorldOptions, write_shapes_world
from clip_cycles.outputs import check_path_length, plan_outputs
from clip_cycles.registry import Registry
from clip_cycles.schemas.options import Options


def root_field(source: str) -> Any:
    """The required raw-root field of a source's build: its flag and help are the source's own (``--coco-root``)."""
    facts = get_source(source)
    return Field(json_schema_extra={"flag": facts.root_flag, "help": f"raw {facts.title} root ({facts.layout})"})


def _out_field(help: str) -> Any:
    return Field(json_schema_extra={"flag": "--out", "help": help})


_WORLD = DEFAULT_WORLD  # the defaults are the one default world's (the demo's and a root-less task's)


class ShapesBuildOptions(Options):
    """Options of ``clip-cycles build shapes``: where, and which world."""

    out: str = _out_field("output folder (COCO layout + GQA scene graphs)")
    world: ShapesWorldOptions = Field(
        DEFAULT_WORLD,
        json_schema_extra={
            "nested": {
                "help": {
                    "n_images": f"number of images (default {_WORLD.n_images})",
                    "seed": f"generation seed (default {_WORLD.seed})",
                    "image_size": f"image side in pixels, 64-128 (default {_WORLD.image_size})",
                    "val_fraction": f"fraction of the images in val2017, in (0, 1) (default {_WORLD.val_fraction:g})",
                }
            }
        },
    )


def run_shapes(options: ShapesBuildOptions) -> int:
    """``clip-cycles build shapes``: write the world and print where."""
    world = options.world
    check_path_length(options.out, "--out")  # a name the file system refuses: a sentence before any work
    out = write_shapes_world(options.out, **world.model_dump())
    default = " (the default world)" if world == DEFAULT_WORLD else ""
    print(f"{world.describe()}{default} written to {out}")
    return 0


#: Help texts of the build flags the COCO and GQA builds share (the ranges are :class:`BuildConfig`'s).
COMMON_HELP = {
    "families": "family names (default: all of the source)",
    "seeds": "split seeds, non-negative integers (default 0 1 2)",
    "overwrite": "let --out hold other files; only the card, build_info.json and data/ Parquet are replaced",
    "allow_empty": "write the folder even when no family has an available split (otherwise an error)",
    "min_cycles": f"minimum cycles per split and seed (default {DEFAULT_MIN_CYCLES}); a short split is not "
    "available (zero-shot scoring needs its scored split, probe experiments all three)",
    "self_contained": "embed images (datasets.Image) in Parquet",
    "num_proc": "worker processes: the families are built one per worker, each with its per-image steps "
    "(same output for any count; default 1, this process)",
}
#: Converters of the build flags: the argparse sentence of a malformed value (a range is BuildConfig's sentence).
COMMON_TYPES = {"seeds": "seed", "pool_train": "pool_size", "pool_val": "pool_size", "validation_fraction": "finite"}


class CocoBuildOptions(Options):
    """Options of ``clip-cycles build coco``: the raw root, the folder, and the build's :class:`BuildConfig`."""

    root: str = root_field("coco")
    out: str = _out_field("output dataset folder")
    config: BuildConfig = Field(
        BuildConfig(),
        json_schema_extra={
            "nested": {
                "help": {
                    **COMMON_HELP,
                    "pool_train": f"train2017 pool size, 0 = all (default {DEFAULT_POOL_TRAIN})",
                    "pool_val": f"val2017 pool size, 0 = all (default {DEFAULT_POOL_VAL})",
                    "validation_fraction": "share of the train pool per seed that goes to validation "
                    f"(default {DEFAULT_VALIDATION_FRACTION})",
                    "margin": "spatial margin of relation/position captions, fraction of width/height (default 0.1)",
                    "size_ratio": "area ratio of 'larger than'/'smaller than' captions (default 1.5)",
                },
                "type": {**COMMON_TYPES, "margin": "finite", "size_ratio": "finite"},
            }
        },
    )


def run_coco(options: CocoBuildOptions) -> int:
    """``clip-cycles build coco``: build, audit and write; print one line per family."""
    check_path_length(options.out, "--out")  # a name the file system refuses: a sentence before any work
    _plan(options.out, "coco", options.root)
    out, builds = build_coco_folder(options.root, options.out, config=options.config)
    _summary(out, builds)
    return 0


class GqaBuildOptions(Options):
    """Options of ``clip-cycles build gqa``: as COCO's, GQA's pools and defaults (``--pool-test`` is ``pool_val``)."""

    root: str = root_field("gqa")
    out: str = _out_field("output dataset folder")
    config: BuildConfig = Field(
        BuildConfig.for_source("gqa"),
        json_schema_extra={
            "nested": {
                "skip": ("margin", "size_ratio"),
                "flag": {"pool_val": "--pool-test"},
                "default": {
                    "pool_train": GQA_POOL_TRAIN,
                    "pool_val": GQA_POOL_TEST,
                    "validation_fraction": GQA_VALIDATION_FRACTION,
                },
                "help": {
                    **COMMON_HELP,
                    "pool_train": f"train-file pool size, 0 = all (default {GQA_POOL_TRAIN})",
                    "pool_val": f"val-file pool size for test, 0 = all (default {GQA_POOL_TEST})",
                    "validation_fraction": "share of the train pool per seed that goes to validation (default 1/7: 4,800/800)",
                },
                "type": COMMON_TYPES,
            }
        },
    )


def run_gqa(options: GqaBuildOptions) -> int:
    """``clip-cycles build gqa``: build, audit and write; print one line per family."""
    check_path_length(options.out, "--out")  # a name the file system refuses: a sentence before any work
    _plan(options.out, "gqa", options.root)
    out, builds = build_gqa_folder(options.root, options.out, config=options.config)
    _summary(out, builds)
    return 0


def _plan(out: str, source: str, root: str) -> None:
    """The build's output plan: ``--out`` is never the raw root it reads."""
    plan_outputs({"--out": out}, {get_source(source).root_flag or f"--{source}-root": root})


def _summary(out: Path, builds: Sequence[Any]) -> None:
    for build in builds:
        if build.available:
            counts = ", ".join(f"seed {s}: " + "/".join(str(c[k]) for k in ("train", "validation", "test"))
                               for s, c in sorted(build.counts.items()))  # fmt: skip
            print(f"{build.name:<24} {counts}")
        else:
            print(f"{build.name:<24} unavailable: {build.reason}")
    print(f"written to {out}")


@dataclass(frozen=True)
class BuildCommand:
    """One ``clip-cycles build <source>`` sub-command: its help, options model and run function."""

    help: str
    options: type[Options]
    run: Callable[[Any], int]


#: Source name -> its build sub-command (the source itself, its order and root flag: :data:`SOURCES`).
BUILD_COMMANDS: Registry[BuildCommand] = Registry("build command", ordered=True)


def register_build_command(name: str, command: BuildCommand) -> None:
    """Give registered source ``name`` a ``clip-cycles build`` sub-command (a source registered by a plugin or test)."""
    BUILD_COMMANDS.register(name, command)


register_build_command("coco", BuildCommand("build the COCO families from the standard COCO layout", CocoBuildOptions, run_coco))
register_build_command("gqa", BuildCommand("build the GQA families from train/val scene graphs", GqaBuildOptions, run_gqa))
register_build_command(
    "shapes",
    BuildCommand("generate the synthetic shapes world (COCO layout + GQA scene graphs)", ShapesBuildOptions, run_shapes),
)


def build_command_names() -> tuple[str, ...]:
    """The sources with a build sub-command, in the source registry's order."""
    return tuple(name for name in source_names() if name in BUILD_COMMANDS)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles build``: one sub-command per registered source with a :data:`BUILD_COMMANDS` entry."""
    names = build_command_names()
    sub = parser.add_subparsers(dest="source", required=True, metavar="{" + ",".join(names) + "}")
    for name in names:
        command = BUILD_COMMANDS.get(name)
        configure(sub.add_parser(name, help=command.help, description=command.help), command.options, command.run)
