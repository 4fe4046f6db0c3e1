"""The runners of task output types: a registry from ``output_type`` to the function that runs it.

A task YAML (:mod:`clip_cycles.tasks.registry`) says *what* to compute through its
``output_type``; a runner says *how*. ``clip-cycles eval`` and the clip_benchmark plugin
both call :func:`run_tasks`, which expands the names, groups the tasks by output type
(keeping their order) and hands each group to its runner:

- ``cycle_selection``: zero-shot CycleAcc and Winoground scores (here, on
  :mod:`clip_cycles.evaluation.zero_shot`), all tasks encoded in one pass, sharded under torchrun;
- ``cycle_probe``, ``cycle_transfer``, ``cycle_oe``: the paper-1 experiments
  (:mod:`clip_cycles.evaluation.experiment_runners`);
- ``attribute_splits``: paper 2 on a THINGS-format root (:mod:`clip_cycles.evaluation.attribute_runner`);
- ``benchmark_cycles``, ``benchmark_audit``: benchmarks in their own formats
  (:mod:`clip_cycles.evaluation.benchmark_runners`).

The registry is data, like ``clip_cycles.cli.COMMANDS``: each built-in runner is named as
``"module:function"`` and imported when a task of its output type first runs, so
evaluating cycle tasks never imports scikit-learn or the experiment code. A function
registered with :func:`register_runner` (another package's output type) is used as is.
Every record is clip_benchmark's ``{dataset, model, pretrained, task, metrics, language}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence, Union

from clip_cycles.encoding.distributed import current
from clip_cycles.encoding.run_context import RunContext, RunOutcome
from clip_cycles.evaluation.zero_shot import evaluate_tasks
from clip_cycles.registry import Registry, resolve_target
from clip_cycles.tasks.registry import AnyTask, expand_tasks

RunnerFunc = Callable[[Sequence[AnyTask], RunContext], RunOutcome]


@dataclass(frozen=True)
class Runner:
    """A registered runner: the output type it serves and clip_benchmark's ``task`` field of its results.

    ``target`` is the function or where it lives (``"package.module:function"``, imported on
    first use). ``sharded`` runners handle torchrun themselves; the others run on rank 0 only.
    """

    output_type: str
    result_task: str
    target: Union[str, RunnerFunc]
    sharded: bool = False

    @property
    def func(self) -> RunnerFunc:
        """The runner function (importing its module the first time)."""
        if callable(self.target):
            return self.target
        try:
            return resolve_target(self.target)
        except (ImportError, AttributeError, ValueError) as error:
            raise ValueError(f"runner of output type {self.output_type!r}: cannot load {self.target!r} ({error})") from error


#: The runners by the output type they serve.
RUNNERS: Registry[Runner] = Registry("output type")
#: The output type whose runner writes per-cycle samples (``RunContext.samples_path``).
SAMPLES_OUTPUT_TYPE = "cycle_selection"


def _add(runner: Runner) -> None:
    RUNNERS.register(runner.output_type, runner)


def register_runner(output_type: str, result_task: str, sharded: bool = False) -> Callable[[RunnerFunc], RunnerFunc]:
    """Decorator: register ``func(tasks, context) -> RunOutcome`` for ``output_type``."""

    def decorate(func: RunnerFunc) -> RunnerFunc:
        _add(Runner(output_type, result_task, func, sharded))
        return func

    return decorate


def runner_for(output_type: str) -> Runner:
    """The runner of ``output_type``; ValueError listing the registered ones."""
    return RUNNERS.get(output_type)


def run_tasks(tasks: Iterable[str | AnyTask], context: RunContext) -> RunOutcome:
    """Run tasks (names are expanded, collections included) through their runners; records keep the task order."""
    items = list(tasks)
    names = [t for t in items if isinstance(t, str)]
    if names and len(names) != len(items):
        raise ValueError("run_tasks takes task names or task specs, not a mix")
    specs: list[AnyTask] = expand_tasks(names) if names else items  # type: ignore[assignment]
    by_type: dict[str, list[AnyTask]] = {}
    for spec in specs:
        runner_for(spec.output_type)
        by_type.setdefault(spec.output_type, []).append(spec)
    if context.samples_path is not None:
        # Per-cycle lines exist for zero-shot cycle scores only: refuse before any work rather than write part of them.
        other = [s.name for s in specs if s.output_type != SAMPLES_OUTPUT_TYPE]
        if other:
            raise ValueError(
                f"per-sample outputs (--samples / $CLIP_CYCLES_SAMPLES) are written for zero-shot cycle tasks "
                f"(output_type {SAMPLES_OUTPUT_TYPE}) only; {other} are not: run them without it"
            )

    is_main = current().is_main
    outcome = RunOutcome(main=is_main)
    records: dict[str, dict[str, Any]] = {}
    for output_type, members in by_type.items():
        runner = RUNNERS[output_type]
        if not runner.sharded and not is_main:
            continue  # rank 0 runs the unsharded experiments and writes their results
        result = runner.func(members, context)
        if not result.main:
            outcome.main = False
            continue
        if result.encoded is not None:
            outcome.encoded = result.encoded
        for record in result.records:
            record["task"] = runner.result_task
            record["language"] = context.language
            records[record["dataset"]] = record
    outcome.records = [records[s.name] for s in specs if s.name in records]
    return outcome


# --------------------------------------------------------------------------- cycle_selection


@register_runner("cycle_selection", "cycles", sharded=True)
def run_selection(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """Zero-shot scores of every task from one encoder pass (``clip_cycles.evaluation.zero_shot``)."""
    records, encoded = evaluate_tasks(
        tasks,
        context.spec,
        context.dataset_root,
        context.cache_dir,
        context.data_cache_dir,  # type: ignore[arg-type]
        batch_size=context.batch_size,
        num_workers=context.num_workers,
        skip_bad_images=context.skip_bad_images,
        seeds=context.seeds,
        samples_path=context.samples_path,
        staged=context.staged_outputs,
    )
    return RunOutcome(records, encoded, main=encoded is not None)


# --------------------------------------------------------------------------- the shipped runners (modules imported on first use)


__all__ = ["RUNNERS", "Runner", "RunnerFunc", "register_runner", "run_selection", "run_tasks", "runner_for"]


for _runner in (
    Runner("cycle_probe", "cycle_probe", "clip_cycles.evaluation.experiment_runners:run_probe"),
    Runner("cycle_transfer", "cycle_transfer", "clip_cycles.evaluation.experiment_runners:run_transfer"),
    Runner("cycle_oe", "cycle_oe", "clip_cycles.evaluation.experiment_runners:run_oe"),
    Runner("attribute_splits", "attribute_splits", "clip_cycles.evaluation.attribute_runner:run_attributes"),
    Runner("benchmark_cycles", "cycles", "clip_cycles.evaluation.benchmark_runners:run_benchmark_cycles"),
    Runner("benchmark_audit", "benchmark_audit", "clip_cycles.evaluation.benchmark_runners:run_benchmark_audit"),
):
    _add(_runner)
