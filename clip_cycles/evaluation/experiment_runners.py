"""Runners of the paper-1 experiment output types: ``cycle_probe``, ``cycle_transfer``, ``cycle_oe``.

Features come from :func:`clip_cycles.experiments.experiment_data.load_from_tasks` (the same
dataset roots and feature cache as zero-shot evaluation); settings from each task's
``experiment_kwargs``. Registered in :mod:`clip_cycles.evaluation.runners`.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Sequence

from clip_cycles.encoding.run_context import RunContext, RunOutcome
from clip_cycles.evaluation.result_cache import ResultCache
from clip_cycles.evaluation.zero_shot import checked_record
from clip_cycles.experiments.experiment_data import load_from_tasks, resolve_min_cycles
from clip_cycles.experiments.item_sets import combined_identity
from clip_cycles.experiments.oe import OESettings, oe_metrics
from clip_cycles.experiments.probes import ProbeSettings, probe_metrics
from clip_cycles.experiments.transfer import TransferSettings, transfer_metrics
from clip_cycles.tasks.registry import AnyTask, TaskSpec


def experiment_settings(settings_class: type, task: TaskSpec, seeds: Sequence[int]) -> Any:
    """``settings_class`` from the task's ``experiment_kwargs`` and ``seeds``; errors name the file and field."""
    names = [name for name in settings_class.model_fields if name != "seeds"]
    kwargs: dict[str, Any] = {}
    for key, value in task.experiment_kwargs.items():
        if key not in names:
            raise ValueError(
                f"{task.path}: field 'experiment_kwargs.{key}': unknown setting for {task.output_type} "
                f"(allowed: {', '.join(names)})"
            )
        kwargs[key] = tuple(value) if isinstance(value, list) else value
    try:
        return settings_class(**kwargs, seeds=tuple(seeds))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{task.path}: field 'experiment_kwargs': {error}") from error


def _experiment_data(task: TaskSpec, context: RunContext, seeds: Sequence[int], with_markers: bool = False) -> Any:
    return load_from_tasks(
        list(task.members) or [task.name],
        context.spec,
        context.dataset_root,
        context.cache_dir,
        context.data_cache_dir,
        seeds,
        with_markers,
        context.batch_size,
        context.num_workers,
        context.skip_bad_images,
    )


def _run_experiment(
    tasks: Sequence[AnyTask],
    context: RunContext,
    settings_class: type,
    metrics: Callable[[Any, Any], dict[str, Any]],
    with_markers: bool = False,
) -> RunOutcome:
    records = []
    # Every task's settings first: a bad experiment_kwargs fails before any encoding or fitting.
    for task in tasks:
        assert isinstance(task, TaskSpec)
        experiment_settings(settings_class, task, list(context.seeds) if context.seeds else list(task.seeds))
    cache = ResultCache(context.cache_dir)
    for task in tasks:
        assert isinstance(task, TaskSpec)
        seeds = list(context.seeds) if context.seeds else list(task.seeds)
        settings = experiment_settings(settings_class, task, seeds)
        data = _experiment_data(task, context, seeds, with_markers)
        # The folder's own minimum-cycle rule (or $CLIP_CYCLES_MIN_CYCLES) unless the task sets one.
        settings = settings.replace(min_cycles=resolve_min_cycles(task.experiment_kwargs.get("min_cycles"), data))
        # Keyed by the features' content, the settings and the code: a warm rerun reuses the record.
        result, _ = cache.get_or_compute(metrics.__name__, data, settings, partial(metrics, data, settings))
        record = checked_record(task, context.spec, result)
        # What was scored: each family's item set, and one identity of them all (never "not recorded").
        identity = combined_identity(data.item_sets)
        if identity is not None:
            record.update({k: v for k, v in identity.items() if v is not None}, item_sets=data.item_sets)
        records.append(record)
    return RunOutcome(records)


def run_probe(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """Probe rank sweep of each task's family (``probes.probe_metrics``)."""
    return _run_experiment(tasks, context, ProbeSettings, probe_metrics)


def run_transfer(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """Transfer grid and alignment over each task's families (``transfer.transfer_metrics``)."""
    return _run_experiment(tasks, context, TransferSettings, transfer_metrics)


def run_oe(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """Cycle OE vs Shortcut OE on each task's family, marker captions through the same encoder (``oe.oe_metrics``)."""
    return _run_experiment(tasks, context, OESettings, oe_metrics, with_markers=True)
