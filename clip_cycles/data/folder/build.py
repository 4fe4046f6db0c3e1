"""COCO or GQA cycle families into a dataset folder (the library of ``clip-cycles build``).

The command line is :mod:`clip_cycles.commands.build`: one sub-command per registered source
(:mod:`clip_cycles.data.sources.registry`) that its table names, with the source's raw-root flag and the
flags of its options model, which holds one :class:`~clip_cycles.data.families.build_config.BuildConfig`.
The shipped ones::

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

import shlex
from pathlib import Path
from typing import Any, Sequence

from clip_cycles.data.families import gqa as gqa_families
from clip_cycles.data.families.build_config import (
    DEFAULT_POOL_TRAIN,
    DEFAULT_POOL_VAL,
    BuildConfig,
)
from clip_cycles.data.families.coco import coco_pools, load_coco_index
from clip_cycles.data.families.registry import cycle_collector_paused, list_families
from clip_cycles.data.folder.writer import build_folder

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

    The build's settings are ``config`` (a :class:`~clip_cycles.data.families.build_config.BuildConfig`),
    with ``families`` and any ``settings`` (its field names: ``seeds``, ``min_cycles``,
    ``pool_train``, ``pool_val``, ``self_contained``, ``validation_fraction``, ``num_proc``,
    ``margin``, ``size_ratio``, ``overwrite``, ``allow_empty``) laid over it; without
    ``config``, over COCO's defaults. An invalid value is refused before anything is read
    or written. ``num_proc`` processes share the heavy steps (same output for any count).
    Returns the folder and the :class:`~clip_cycles.data.families.registry.FamilyBuild` list.
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
