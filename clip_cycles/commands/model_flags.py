"""The model flags, declared once (on :class:`~clip_cycles.encoding.run_context.ModelOptions`), and how each command takes them.

A command's options model holds ``model: ModelOptions`` with :func:`model_field`; the parser derived
from it (:mod:`clip_cycles.commands.derived`) adds the model flags, and the command's ``run`` gets a
``ModelOptions`` back: nothing below :mod:`clip_cycles.commands` sees an ``argparse.Namespace``.
``eval``, ``encode``, ``audit-benchmark``, ``probe``, ``transfer``, ``oe``, ``splits`` and ``page``
take them; ``splits`` takes three of them a second time with the prefix ``split-`` for its split model.

One spelling per flag; older spellings stay as aliases where they cannot be mistaken:
``--seed`` for ``--model-seed`` and ``--batch-size`` for ``--encode-batch-size`` are
accepted by ``eval``, ``encode``, ``audit-benchmark`` and ``page`` (their spellings before), not by
``probe``/``transfer``/``oe`` (there ``--train-batch-size``, alias ``--batch-size``, is the
heads' training batch, and ``--seed`` is refused as ambiguous between ``--seeds`` and
``--model-seed``) nor ``splits`` (where ``--seed`` abbreviates its split ``--seeds``).
"""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import Field

from clip_cycles.encoding.run_context import DATA_FIELDS


def model_field(
    *,
    model_required: bool = False,
    data: bool = True,
    aliases: bool = False,
    group: str | None = None,
    helps: Mapping[str, str] | None = None,
) -> Any:
    """A ``model: ModelOptions`` field whose flags are the model flags.

    Parameters
    ----------
    model_required:
        ``--model`` must be given (``eval``, ``encode``).
    data:
        Also ``--dataset-root`` and ``--data-cache-dir`` (commands that read tasks).
    aliases:
        Also the old spellings ``--seed`` and ``--batch-size`` (``eval``, ``encode``, ``audit-benchmark``, ``page``).
    group, helps:
        The ``--help`` section they are listed in; other help texts for some of them.
    """
    nested: dict[str, Any] = {"aliases": aliases}
    if model_required:
        nested["required"] = ("model",)
    if not data:
        nested["skip"] = DATA_FIELDS
    if group:
        nested["group"] = group
    if helps:
        nested["help"] = dict(helps)
    return Field(json_schema_extra={"nested": nested})


def task_field(required: bool = True, group: str | None = None) -> Any:
    """``--task NAME ...``: the tasks or collections a command reads (``eval``, ``encode``, ``probe``, ...)."""
    extra: dict[str, Any] = {"flag": "--task", "help": "task or collection names, e.g. cycles/coco_all"}
    if group:
        extra["group"] = group
    if required:
        return Field(min_length=1, json_schema_extra=extra)
    return Field(None, min_length=1, json_schema_extra=extra)
