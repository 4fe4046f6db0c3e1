"""COCO or GQA cycle families into a dataset folder (the library of ``clip-cycles build``).

The command line is :mod:`clip_cycles.commands.build`: one sub-command per registered source
(:mod:`clip_cycles.data.sources`), with its raw-root flag, its flags (``build_flags``) and its
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

import math
import shlex
from pathlib import Path
from typing import Any, Sequence

from clip_cycles.data import gqa_families
from clip_cycles.data.coco_families import DEFAULT_MARGIN, DEFAULT_SIZE_RATIO, coco_pools, geometry, load_coco_index
from clip_cycles.data.dataset_folder import build_folder, folder_options
from clip_cycles.data.families import (
    DEFAULT_MIN_CYCLES,
    DEFAULT_VALIDATION_FRACTION,
    check_seeds,
    cycle_collector_paused,
    list_families,
    num_processes,
)

DEFAULT_POOL_TRAIN: int = 10000
DEFAULT_POOL_VAL: int = 2744


@cycle_collector_paused()  # the load and the build hold millions of objects: see its docstring
def build_coco_folder(
    coco_root: str | Path,
    out: str | Path,
    families: Sequence[str] | None = None,
    seeds: Sequence[int] = (0, 1, 2),
    min_cycles: int = DEFAULT_MIN_CYCLES,
    pool_train: int | None = DEFAULT_POOL_TRAIN,
    pool_val: int | None = DEFAULT_POOL_VAL,
    self_contained: bool = False,
    validation_fraction: float = DEFAULT_VALIDATION_FRACTION,
    num_proc: int = 1,
    margin: float | None = None,
    size_ratio: float | None = None,
    overwrite: bool = False,
    allow_empty: bool = False,
) -> tuple[Path, list[Any]]:
    """Load COCO under ``coco_root`` (standard layout), build, audit and write the families to ``out``.

    ``num_proc`` processes share the heavy steps (same output for any count). ``margin`` and
    ``size_ratio`` are the geometric thresholds (None: the defaults 0.1 and 1.5).
    ``overwrite`` lets ``out`` hold files no build wrote (only the project's own are
    replaced); ``allow_empty`` writes a folder in which no family has an available split.
    Returns the folder and the :class:`~clip_cycles.data.families.FamilyBuild` list.
    """
    margin = DEFAULT_MARGIN if margin is None else margin
    size_ratio = DEFAULT_SIZE_RATIO if size_ratio is None else size_ratio
    _check_finite(margin=margin, size_ratio=size_ratio, validation_fraction=validation_fraction)

    check_seeds(seeds)
    names = list(families) if families else list_families("coco")
    index = load_coco_index(coco_root)
    train_pool, val_pool = coco_pools(index, pool_train, pool_val)
    if not train_pool or not val_pool:
        raise ValueError(f"COCO root {index.root}: train2017 or val2017 has no valid annotated image "
                         f"(skipped: {dict(index.skipped)})")  # fmt: skip
    command = ["clip-cycles", "build", "coco", "--coco-root", str(index.root), "--out", str(out), "--families", *names,
               "--seeds", *map(str, seeds), "--min-cycles", str(min_cycles), "--pool-train", str(pool_train or 0),
               "--pool-val", str(pool_val or 0), "--validation-fraction", repr(validation_fraction), "--margin", repr(margin),
               "--size-ratio", repr(size_ratio)] + (["--self-contained"] if self_contained else [])  # fmt: skip
    with num_processes(num_proc), geometry(margin, size_ratio):
        return build_folder(
            index, names, train_pool, val_pool, out, seeds=seeds, min_cycles=min_cycles,
            validation_fraction=validation_fraction, mode="self_contained" if self_contained else "reference",
            rebuild_command=shlex.join(command), skipped=dict(index.skipped),
            extra_info={"pool_requested": {"train": pool_train, "val": pool_val},
                        "thresholds": {"margin": margin, "size_ratio": size_ratio}},
            overwrite=overwrite, allow_empty=allow_empty,
        )  # fmt: skip


@cycle_collector_paused()
def build_gqa_folder(
    gqa_root: str | Path,
    out: str | Path,
    families: Sequence[str] | None = None,
    seeds: Sequence[int] = (0, 1, 2),
    min_cycles: int = DEFAULT_MIN_CYCLES,
    pool_train: int | None = gqa_families.DEFAULT_POOL_TRAIN,
    pool_test: int | None = gqa_families.DEFAULT_POOL_TEST,
    self_contained: bool = False,
    num_proc: int = 1,
    validation_fraction: float = gqa_families.GQA_VALIDATION_FRACTION,
    overwrite: bool = False,
    allow_empty: bool = False,
) -> tuple[Path, list[Any]]:
    """Build the GQA families from ``gqa_root`` (scene graphs, images) into the dataset folder ``out``.

    Pools default to paper 1's (5,600 train-file, 2,400 val-file images); ``None`` takes
    every valid image; ``validation_fraction`` of the train pool goes to validation per seed.
    The output is the same for any ``num_proc``. ``self_contained``, ``overwrite`` and
    ``allow_empty`` as for :func:`build_coco_folder`.
    """
    seeds = tuple(check_seeds(seeds))
    _check_finite(validation_fraction=validation_fraction)
    with num_processes(num_proc), folder_options(overwrite=overwrite, allow_empty=allow_empty):
        names = list(families) if families else list_families("gqa")
        index, train_pool, val_pool = gqa_families.gqa_build_inputs(gqa_root, pool_train, pool_test)
        command = ["clip-cycles", "build", "gqa", "--gqa-root", str(index.root), "--out", str(out), "--families", *names,
                   "--seeds", *map(str, seeds), "--min-cycles", str(min_cycles), "--pool-train", str(pool_train or 0),
                   "--pool-test", str(pool_test or 0), "--validation-fraction", repr(validation_fraction)] + (
                       ["--self-contained"] if self_contained else [])  # fmt: skip
        return build_folder(
            index, names, train_pool, val_pool, out,
            seeds=seeds, min_cycles=min_cycles, validation_fraction=validation_fraction,
            mode="self_contained" if self_contained else "reference",
            rebuild_command=shlex.join(command),
            skipped=dict(sorted(index.skipped.items())),
            extra_info={"gqa": gqa_families.pool_facts(index, pool_train, pool_test, train_pool, val_pool, validation_fraction)},
        )  # fmt: skip


def _check_finite(**values: float) -> None:
    """Thresholds go into build_info.json and the card: a NaN or an infinity is refused before the build."""
    for name, value in values.items():
        if not math.isfinite(value):
            raise ValueError(f"{name} is {value!r}; give a finite number (--{name.replace('_', '-')})")
