"""The model flags, defined once for every command that loads a model, and the options they parse to.

:data:`MODEL_FLAGS`: ``eval``, ``encode``, ``audit-benchmark``, ``probe``,
``transfer``, ``oe``, ``splits`` and ``page`` add them with :func:`add_model_arguments`;
``splits`` adds three of them a second time with the prefix ``split-`` for its split model.
:func:`model_options` turns the parsed flags into a
:class:`~clip_cycles.encoding.run_context.ModelOptions`; that is the command line's edge,
nothing below :mod:`clip_cycles.commands` sees an ``argparse.Namespace``.

One spelling per flag; older spellings stay as aliases where they cannot be mistaken:
``--seed`` for ``--model-seed`` and ``--batch-size`` for ``--encode-batch-size`` are
accepted by ``eval``, ``encode`` and ``audit-benchmark`` (their spellings before), not by
``probe``/``transfer``/``oe`` (there ``--train-batch-size``, alias ``--batch-size``, is the
heads' training batch, and ``--seed`` is refused as ambiguous between ``--seeds`` and
``--model-seed``) nor ``splits`` (where ``--seed`` abbreviates its split ``--seeds``).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from clip_cycles.commands.flags import seed_argument
from clip_cycles.encoding.encoder import DEFAULT_BATCH_SIZE
from clip_cycles.encoding.run_context import ModelOptions


@dataclass(frozen=True)
class ModelFlag:
    """One model flag: the :class:`ModelOptions` field it sets, its spelling, old spellings and argparse keywords."""

    field: str
    flag: str
    kwargs: Mapping[str, Any]
    aliases: tuple[str, ...] = ()
    data: bool = False  # where tasks read their data: only commands that take --task have these


MODEL_FLAGS: tuple[ModelFlag, ...] = (
    ModelFlag("model_type", "--model-type", {"default": "open_clip", "help": "backend name (see clip_cycles.encoding.backends)"}),
    ModelFlag("model", "--model", {"default": None, "help": "model name (backend-specific; a file for 'features')"}),
    ModelFlag("pretrained", "--pretrained", {"default": None, "help": "pretrained tag or checkpoint path; none = random init"}),
    ModelFlag(
        "dataset_root",
        "--dataset-root",
        {"default": None, "help": "built dataset folder or raw COCO/GQA root (shapes tasks build their own if omitted)"},
        data=True,
    ),
    ModelFlag(
        "data_cache_dir",
        "--data-cache-dir",
        {"default": None, "help": "where families built from a raw root are kept (default: <cache-dir>/datasets)"},
        data=True,
    ),
    ModelFlag(
        "cache_dir",
        "--cache-dir",
        {"default": None, "help": "feature cache root (default: $CLIP_CYCLES_CACHE or ~/.cache/clip_cycles)"},
    ),
    ModelFlag("use_cache", "--no-cache", {"action": "store_false", "help": "encode everything and store nothing"}),
    ModelFlag("model_cache_dir", "--model-cache-dir", {"default": None, "help": "where the backend keeps downloaded weights"}),
    ModelFlag("device", "--device", {"default": None, "help": "cpu or cuda (default: cuda when available)"}),
    ModelFlag("amp", "--no-amp", {"action": "store_false", "help": "fp32 on CUDA too"}),
    ModelFlag(
        "model_seed",
        "--model-seed",
        {"type": seed_argument, "default": 0, "help": "torch seed before loading (random-init models), not --seeds"},
        ("--seed",),
    ),
    ModelFlag(
        "encode_batch_size",
        "--encode-batch-size",
        {"type": int, "default": DEFAULT_BATCH_SIZE, "help": "images or captions per encoder batch (not a training batch)"},
        ("--batch-size",),
    ),
    ModelFlag(
        "num_workers",
        "--num-workers",
        {
            "type": int,
            "default": None,
            "help": "image decoding workers (default: min(4, CPUs - 1); none for jobs of at most two batches)",
        },
    ),
    ModelFlag(
        "skip_bad_images",
        "--skip-bad-images",
        {
            "action": "store_true",
            "help": "count and report missing or undecodable images (and drop what uses them) instead of failing",
        },
    ),
)

_BY_FIELD = {f.field: f for f in MODEL_FLAGS}


def _prefixed(flag: str, prefix: str) -> str:
    return "--" + prefix + flag.removeprefix("--")


def add_model_arguments(
    parser: Any,
    *,
    model_required: bool = False,
    data: bool = True,
    aliases: bool = False,
    prefix: str = "",
    only: Sequence[str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    helps: Mapping[str, str] | None = None,
) -> None:
    """Add the model flags to a parser or argument group.

    Parameters
    ----------
    model_required:
        ``--model`` must be given (``eval``, ``encode``).
    data:
        Also ``--dataset-root`` and ``--data-cache-dir`` (commands that read tasks).
    aliases:
        Also the old spellings ``--seed`` and ``--batch-size`` (``eval``, ``encode``, ``audit-benchmark``).
    prefix:
        Put after ``--`` in every flag and its destination (``split-`` gives ``--split-model``).
    only, defaults, helps:
        Restrict to these :class:`ModelOptions` fields; change their defaults or help texts.
    """
    unknown = sorted((set(only or ()) | set(defaults or {}) | set(helps or {})) - set(_BY_FIELD))
    if unknown:
        raise ValueError(f"unknown model option fields {unknown}; known: {sorted(_BY_FIELD)}")
    for flag in MODEL_FLAGS:
        if (only is not None and flag.field not in only) or (flag.data and not data):
            continue
        kwargs = dict(flag.kwargs)
        if defaults and flag.field in defaults:
            kwargs["default"] = defaults[flag.field]
        if helps and flag.field in helps:
            kwargs["help"] = helps[flag.field]
        if flag.field == "model" and model_required:
            kwargs["required"] = True
        names = [flag.flag, *(flag.aliases if aliases else ())]
        parser.add_argument(*(_prefixed(name, prefix) for name in names), dest=(prefix + flag.field).replace("-", "_"), **kwargs)


def add_task_argument(parser: Any, required: bool = True) -> None:
    """``--task NAME ...``: the tasks or collections a command reads (``eval``, ``encode``, ``probe``, ...)."""
    parser.add_argument(
        "--task", nargs="+", required=required, default=None, help="task or collection names, e.g. cycles/coco_all"
    )


def model_options(args: argparse.Namespace, prefix: str = "", base: ModelOptions | None = None) -> ModelOptions:
    """The :class:`ModelOptions` of parsed :func:`add_model_arguments` flags (the command line's edge).

    Fields whose flags the parser did not add come from ``base`` (default: the defaults),
    so the ``split-`` flags of ``splits`` override only the model of its options.
    """
    values = {}
    for flag in MODEL_FLAGS:
        dest = (prefix + flag.field).replace("-", "_")
        if hasattr(args, dest):
            values[flag.field] = getattr(args, dest)
    return dataclasses.replace(base or ModelOptions(), **values)
