"""``BuildConfig``: every setting of one build of cycle families, with its range declared on the field.

A build (``clip-cycles build coco|gqa``, :func:`clip_cycles.data.folder.build.build_coco_folder`,
:func:`~clip_cycles.data.folder.build.build_gqa_folder`) is one frozen :class:`BuildConfig` carried
from the entry point through :func:`~clip_cycles.data.folder.writer.build_folder`, the family
builders (one copy of it travels with each family to a ``--num-proc`` worker) and the writer;
no build setting lives in a module-level switch. The field defaults are the COCO builder's;
:meth:`BuildConfig.for_source` lays a source's own defaults (:data:`SOURCE_DEFAULTS`) under the
values given. An invalid value is refused once, here, in one sentence naming flag and field::

    BuildConfig option --min-cycles (min_cycles): must be a count >= 1 of cycles per split and seed, got 0 (...)
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from clip_cycles.schemas.options import Options

#: Default minimum number of cycles in every split of every seed (paper 1: a family
#: with 18-19 validation cycles was reported unavailable).
DEFAULT_MIN_CYCLES: int = 20
#: Default share of the train pool that goes to validation, per seed.
DEFAULT_VALIDATION_FRACTION: float = 0.2
#: Default spatial margin (fraction of the image side) and size ratio of relation captions:
#: this project's choices (paper 1 does not state its values); ``--margin`` / ``--size-ratio``.
DEFAULT_MARGIN: float = 0.1
DEFAULT_SIZE_RATIO: float = 1.5
#: COCO pools: train2017 and val2017 images (paper 1's sizes).
DEFAULT_POOL_TRAIN: int = 10000
DEFAULT_POOL_VAL: int = 2744
#: GQA pools (train-file and val-file images) and its validation share (4,800/800 of 5,600).
GQA_POOL_TRAIN: int = 5600
GQA_POOL_TEST: int = 2400
GQA_VALIDATION_FRACTION: float = 1.0 / 7.0

#: Defaults that differ by source, laid under the given values by :meth:`BuildConfig.for_source`.
SOURCE_DEFAULTS: dict[str, dict[str, Any]] = {
    "coco": {},
    "gqa": {"pool_train": GQA_POOL_TRAIN, "pool_val": GQA_POOL_TEST, "validation_fraction": GQA_VALIDATION_FRACTION},
}

Mode = Literal["reference", "self_contained"]


def _flag(flag: str) -> dict[str, Any]:
    return {"flag": flag}


class BuildConfig(Options):
    """The settings of one build; frozen, validated once by :meth:`Options.make`."""

    families: tuple[str, ...] | None = Field(
        None, json_schema_extra=_flag("--families"), description="registered family names (None or empty: all of the source)"
    )
    seeds: tuple[Annotated[int, Field(ge=0, strict=True)], ...] = Field(
        (0, 1, 2), min_length=1, json_schema_extra=_flag("--seeds"), description="distinct non-negative integers, at least one"
    )
    min_cycles: int = Field(
        DEFAULT_MIN_CYCLES, ge=1, json_schema_extra=_flag("--min-cycles"), description="a count >= 1 of cycles per split and seed"
    )
    pool_train: int | None = Field(
        DEFAULT_POOL_TRAIN,
        ge=1,
        json_schema_extra=_flag("--pool-train"),
        description="a positive image count (None: every valid image)",
    )
    pool_val: int | None = Field(
        DEFAULT_POOL_VAL,
        ge=1,
        json_schema_extra=_flag("--pool-val"),
        description="a positive image count (None: every valid image); COCO val2017, GQA's val file (--pool-test)",
    )
    validation_fraction: float = Field(
        DEFAULT_VALIDATION_FRACTION,
        gt=0.0,
        lt=1.0,
        json_schema_extra=_flag("--validation-fraction"),
        description="a fraction in (0, 1) of the train pool per seed",
    )
    margin: float = Field(
        DEFAULT_MARGIN,
        ge=0.0,
        lt=0.5,
        json_schema_extra=_flag("--margin"),
        description="a fraction of the image side in [0, 0.5)",
    )
    size_ratio: float = Field(
        DEFAULT_SIZE_RATIO,
        ge=1.0,
        allow_inf_nan=False,
        json_schema_extra=_flag("--size-ratio"),
        description="a finite area ratio >= 1",
    )
    self_contained: bool = Field(
        False, json_schema_extra=_flag("--self-contained"), description="true or false (embed the images)"
    )
    num_proc: int = Field(1, ge=1, json_schema_extra=_flag("--num-proc"), description="a positive number of worker processes")
    overwrite: bool = Field(False, json_schema_extra=_flag("--overwrite"), description="true or false")
    allow_empty: bool = Field(False, json_schema_extra=_flag("--allow-empty"), description="true or false")

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"repeats a seed: {list(seeds)}")
        return seeds

    @property
    def mode(self) -> Mode:
        """The folder layout: images embedded (``self_contained``) or referenced."""
        return "self_contained" if self.self_contained else "reference"

    @classmethod
    def for_source(cls, source: str, **values: Any) -> typing.Self:
        """A config with ``source``'s defaults (:data:`SOURCE_DEFAULTS`) under ``values``."""
        return cls.make(**{**SOURCE_DEFAULTS.get(source, {}), **values})


#: The default settings (COCO's), frozen: what a family reads outside any build.
DEFAULT_BUILD: BuildConfig = BuildConfig()
