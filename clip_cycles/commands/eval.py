"""``clip-cycles eval``: the same results as the clip_benchmark plugin, without its CLI."""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import Field

from clip_cycles.commands.derived import configure
from clip_cycles.commands.model_flags import model_field, task_field
from clip_cycles.encoding.distributed import process_group
from clip_cycles.encoding.run_context import ModelOptions, RunContext
from clip_cycles.evaluation.capabilities import check_backend_for_tasks
from clip_cycles.evaluation.runners import run_tasks, runner_for
from clip_cycles.outputs import is_stream, plan_outputs, write_outputs
from clip_cycles.results import DEFAULT_OUTPUT, check_output_plan, detail_path, output_path, result_files
from clip_cycles.schemas.options import Options
from clip_cycles.tasks.names import folder_scope, resolve_task_names
from clip_cycles.tasks.registry import AnyTask, TaskRegistry

logger = logging.getLogger(__name__)


class EvalOptions(Options):
    """Options of ``clip-cycles eval``: the tasks, the model and where the results go."""

    task: tuple[str, ...] = task_field()
    model: ModelOptions = model_field(model_required=True, aliases=True)
    output: str = Field(
        DEFAULT_OUTPUT,
        json_schema_extra={
            "flag": "--output",
            "help": "result file template (clip_benchmark's fields: {dataset} {model} {pretrained} "
            "{task} {language} {pretrained_full_path}); '-' prints to stdout",
        },
    )
    samples: str | None = Field(
        None,
        json_schema_extra={
            "flag": "--samples",
            "metavar": "PATH",
            "help": "also write one JSON line per scored cycle (task, seed, split, cycle_id, images, captions, "
            "s11 s12 s21 s22, delta, credit) of every zero-shot cycle task to PATH",
        },
    )
    seeds: tuple[int, ...] | None = Field(
        None,
        json_schema_extra={"flag": "--seeds", "type": "seed", "help": "restrict to these seeds (non-negative integers)"},
    )
    split: Literal["train", "validation", "test"] | None = Field(
        None,
        json_schema_extra={
            "flag": "--split",
            "help": "the split zero-shot cycle tasks score (default: each task's test_split); a split other than test "
            "enters the result file's name ({dataset} becomes <dataset>@<split>), so it never replaces a test result",
        },
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles eval``: the same results as the clip_benchmark plugin, without its CLI."""
    configure(parser, EvalOptions, evaluate)


def evaluate(command: EvalOptions) -> int:
    """Evaluate and write one JSON per task (rank 0 under torchrun); each output type goes to its runner.

    ``--task`` takes names, collections and ``fnmatch`` patterns (``cycles/coco_*``; over a built
    ``--dataset-root``, the matching families it holds); the backend is
    checked against every task before any data is read or a model loaded.
    """
    # One registry for the whole command: each task file is read and validated once, not once per lookup.
    registry = TaskRegistry.default()
    options = command.model
    # With a built folder as --dataset-root, a pattern keeps the tasks that folder can serve.
    names = resolve_task_names(list(command.task), registry, folder_scope(options.dataset_root))
    tasks = with_split(registry.expand(names), command.split)
    check_backend_for_tasks(tasks, options.model_type, options.model)
    context = RunContext.from_options(options, seeds=None if command.seeds is None else list(command.seeds))
    context.samples_path = Path(command.samples) if command.samples else None
    if command.output != "-":
        context.staged_outputs = {}  # the samples file is written with the results: one set (below)
    spec = context.spec
    # Each task's --output file, expanded once: the plan checked here is the one the results are written to.
    planned = {} if command.output == "-" else output_plan(command.output, tasks, context)
    if planned:  # every result file checked before anything is encoded, so no result is lost
        check_output_plan(planned, command.output)
    plan_outputs(eval_writes(planned, context.samples_path))  # no two outputs name one file (the detail files too)
    # A run sure to load the model (no cache, or nothing of this model in it): its weights here or the hub
    # reachable, else one sentence before any data is read. A run that may be warm asks at its first cache miss.
    context.spec.require_weights_if_cold(context.cache_dir)  # asked once: the model's load reuses this answer
    with process_group(spec):
        outcome = run_tasks(tasks, context)
    if not outcome.main:  # a rank other than 0: its shard is in the cache, rank 0 reports
        return 0
    if outcome.encoded is not None:
        stats = outcome.encoded.stats
        logger.info(
            "encoded %d images and %d captions (%d + %d from the cache; %d bad images skipped)",
            stats.encoded_images,
            stats.encoded_captions,
            stats.cached_images,
            stats.cached_captions,
            len(stats.bad_images),
        )
    if command.output == "-":
        for record in outcome.records:
            print(json.dumps(record, sort_keys=True, indent=2))
    else:
        # The samples file and every result's files are written all or none: a full disk leaves each previous
        # file as it was. Renamed in this order (samples, then each detail and its JSON), so a kill during the
        # renames leaves no new result beside an old samples file; an old result beside new samples names
        # another sha256, which every reader of the pair checks.
        files: dict[Path, bytes] = dict(context.staged_outputs or {})
        for record in outcome.records:
            files.update(result_files(record, planned[record["dataset"]]))
        write_outputs(files, what="--output")
        for record in outcome.records:
            path = planned[record["dataset"]]
            print(f"{record['dataset']}: {_headline(record['metrics'])} -> {path}")  # the result: one line a task
    if context.samples_path is not None:
        print(f"per-cycle samples -> {context.samples_path}")
    return 0


def with_split(tasks: Sequence[AnyTask], split: str | None) -> list[AnyTask]:
    """``tasks`` with zero-shot cycle tasks scoring ``split`` (None: each task's own).

    A task of another output type reads the splits its design fixes: asking it for another is a ValueError.
    """
    if split is None:
        return list(tasks)
    fixed = [t.name for t in tasks if t.output_type != "cycle_selection" and getattr(t, "split", None) != split]
    if fixed:
        raise ValueError(
            f"--split {split}: {', '.join(fixed)} read the splits their design fixes (experiments: train, validation "
            "and test; attribute splits: their folds); only zero-shot cycles/ tasks score another split: drop --split"
        )
    return [replace(t, split=split) if t.output_type == "cycle_selection" else t for t in tasks]  # type: ignore[type-var]


def eval_writes(planned: dict[str, str], samples: Path | None) -> dict[str, str | Path | None]:
    """Every file eval writes, named for :func:`~clip_cycles.outputs.plan_outputs`: each result, its detail file, the samples."""
    writes: dict[str, str | Path | None] = {}
    for task, path in planned.items():
        label = "--output" if len(planned) == 1 else f"--output of {task}"
        writes[label] = path
        if not is_stream(path):  # a stream gets the flat result only (results.result_files)
            writes[f"the detail file of {label}"] = detail_path(path)
    writes["--samples"] = samples
    return writes


def output_plan(template: str, tasks: Sequence[AnyTask], context: RunContext) -> dict[str, str]:
    """Task name -> its result file: ``template`` filled once per task (the record's dataset, task, language and split)."""
    spec = context.spec
    return {
        task.name: output_path(
            template,
            task.name,
            spec.model,
            spec.pretrained,
            language=context.language,
            task=runner_for(task.output_type).result_task,
            split=getattr(task, "split", None),
        )
        for task in tasks
    }


def _headline(metrics: dict[str, Any]) -> str:
    """The first headline number of a result, for the one-line summary."""
    for name in ("cycle_acc", "pearson", "f1_selectivity"):
        if name in metrics:
            return f"{name} {metrics[name]}"
    return f"available {metrics.get('available')}"
