"""Runners of task output types: one function per ``output_type``, registered by decorator.

A task YAML (:mod:`clip_cycles.tasks.registry`) says *what* to compute through its
``output_type``; this module says *how*. ``clip-cycles eval`` and the clip_benchmark
plugin both call :func:`run_tasks`, which expands the names, groups the tasks by
output type (keeping their order) and hands each group to the registered runner:

- ``cycle_selection``: zero-shot CycleAcc and Winoground scores (:mod:`clip_cycles.evaluation.zero_shot`),
  all tasks encoded in one pass, sharded under torchrun;
- ``cycle_probe``, ``cycle_transfer``, ``cycle_oe``: the paper-1 experiments on features
  from :func:`clip_cycles.experiments.experiment_data.load_from_tasks` (the same dataset roots and
  feature cache), settings from the task's ``experiment_kwargs``;
- ``attribute_splits``: paper 2 on a THINGS-format root: concept embeddings from the
  model through the feature cache (:func:`embed_concepts`), then per-attribute probes
  for every seed of the task's split strategy.

Every record is clip_benchmark's ``{dataset, model, pretrained, task, metrics, language}``.
Adding an output type is adding an entry to ``tasks.OUTPUT_TYPES`` and a function here
decorated with :func:`register_runner`.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np

from clip_cycles.attributes.attribute_probes import attribute_task_metrics
from clip_cycles.attributes.concept_features import _in_root, embed_concepts
from clip_cycles.attributes.concepts import load_embeddings_npz, load_things
from clip_cycles.attributes.splitters import STRATEGIES, SplitContext, StrategyUnavailable, load_concept_groups
from clip_cycles.encoding.distributed import current
from clip_cycles.encoding.run_context import RunContext, RunOutcome
from clip_cycles.evaluation import benchmark_runners
from clip_cycles.evaluation.zero_shot import checked_record, evaluate_tasks
from clip_cycles.experiments.experiment_data import load_from_tasks
from clip_cycles.experiments.oe import OESettings, oe_metrics
from clip_cycles.experiments.probes import ProbeSettings, probe_metrics
from clip_cycles.experiments.transfer import TransferSettings, transfer_metrics
from clip_cycles.results import clean, mean_sd
from clip_cycles.settings import split_embeddings_override
from clip_cycles.tasks.registry import AnyTask, AttributeTaskSpec, TaskSpec, expand_tasks

if TYPE_CHECKING:  # pragma: no cover
    from clip_cycles.attributes.concepts import ConceptAttributeData






RunnerFunc = Callable[[Sequence[AnyTask], RunContext], RunOutcome]


@dataclass(frozen=True)
class Runner:
    """A registered runner: the output type it serves and clip_benchmark's ``task`` field of its results.

    ``sharded`` runners handle torchrun themselves; the others run on rank 0 only.
    """

    output_type: str
    result_task: str
    func: RunnerFunc
    sharded: bool = False


RUNNERS: dict[str, Runner] = {}


def register_runner(output_type: str, result_task: str, sharded: bool = False) -> Callable[[RunnerFunc], RunnerFunc]:
    """Decorator: register ``func(tasks, context) -> RunOutcome`` for ``output_type``."""

    def decorate(func: RunnerFunc) -> RunnerFunc:
        if output_type in RUNNERS:
            raise ValueError(f"a runner for output type {output_type!r} is already registered")
        RUNNERS[output_type] = Runner(output_type, result_task, func, sharded)
        return func

    return decorate


def runner_for(output_type: str) -> Runner:
    """The runner of ``output_type``; ValueError listing the registered ones."""
    if output_type not in RUNNERS:
        raise ValueError(f"no runner for output type {output_type!r}; registered: {sorted(RUNNERS)}")
    return RUNNERS[output_type]


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
        tasks, context.spec, context.dataset_root, context.cache_dir, context.data_cache_dir,  # type: ignore[arg-type]
        batch_size=context.batch_size, num_workers=context.num_workers, skip_bad_images=context.skip_bad_images,
        seeds=context.seeds,
    )
    return RunOutcome(records, encoded, main=encoded is not None)


# --------------------------------------------------------------------------- paper-1 experiments


def experiment_settings(settings_class: type, task: TaskSpec, seeds: Sequence[int]) -> Any:
    """``settings_class`` from the task's ``experiment_kwargs`` and ``seeds``; errors name the file and field."""
    names = [f.name for f in dataclasses.fields(settings_class) if f.name != "seeds"]
    kwargs: dict[str, Any] = {}
    for key, value in task.experiment_kwargs.items():
        if key not in names:
            raise ValueError(f"{task.path}: field 'experiment_kwargs.{key}': unknown setting for {task.output_type} "
                             f"(allowed: {', '.join(names)})")
        kwargs[key] = tuple(value) if isinstance(value, list) else value
    try:
        return settings_class(**kwargs, seeds=tuple(seeds))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{task.path}: field 'experiment_kwargs': {error}") from error


def _experiment_data(task: TaskSpec, context: RunContext, seeds: Sequence[int], with_markers: bool = False) -> Any:
    return load_from_tasks(list(task.members) or [task.name], context.spec, context.dataset_root, context.cache_dir,
                           context.data_cache_dir, seeds, with_markers, context.batch_size, context.num_workers,
                           context.skip_bad_images)


def _run_experiment(tasks: Sequence[AnyTask], context: RunContext, settings_class: type,
                    metrics: Callable[[Any, Any], dict[str, Any]], with_markers: bool = False) -> RunOutcome:
    records = []
    for task in tasks:
        assert isinstance(task, TaskSpec)
        seeds = list(context.seeds) if context.seeds else list(task.seeds)
        settings = experiment_settings(settings_class, task, seeds)
        data = _experiment_data(task, context, seeds, with_markers)
        records.append(checked_record(task, context.spec, metrics(data, settings)))
    return RunOutcome(records)


@register_runner("cycle_probe", "cycle_probe")
def run_probe(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """Probe rank sweep of each task's family (``probes.probe_metrics``)."""
    return _run_experiment(tasks, context, ProbeSettings, probe_metrics)


@register_runner("cycle_transfer", "cycle_transfer")
def run_transfer(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """Transfer grid and alignment over each task's families (``transfer.transfer_metrics``)."""
    return _run_experiment(tasks, context, TransferSettings, transfer_metrics)


@register_runner("cycle_oe", "cycle_oe")
def run_oe(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """Cycle OE vs Shortcut OE on each task's family, marker captions through the same encoder (``oe.oe_metrics``)."""
    return _run_experiment(tasks, context, OESettings, oe_metrics, with_markers=True)


# --------------------------------------------------------------------------- benchmark formats


@register_runner("benchmark_cycles", "cycles")
def run_benchmark_cycles(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """Blocks of a benchmark's own format (``cycles/winoground``) as cycles (``benchmark_audit.runners``)."""
    return benchmark_runners.run_benchmark_cycles(tasks, context)


@register_runner("benchmark_audit", "benchmark_audit")
def run_benchmark_audit(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """Blind baselines vs the model on a benchmark's own format (``audit/<format>``, ``benchmark_audit.runners``)."""
    return benchmark_runners.run_benchmark_audit(tasks, context)


# --------------------------------------------------------------------------- attribute splits






def attribute_metrics(task: AttributeTaskSpec, data: ConceptAttributeData, X: np.ndarray, root: Path,
                      seeds: Sequence[int]) -> dict[str, Any]:
    """One attribute task on embedded concepts: every seed, then mean and sd of the headline metrics.

    A strategy that cannot run on this data (no groups file, no supercategories) gives
    ``{"available": False, "unavailable_reason": ...}``; every attribute is scored,
    degenerate folds score F1 = 0 (:class:`clip_cycles.attributes.splitters.CoverageReport`) and are
    counted per seed. ``split_embedding`` says which embedding made the split.
    """
    if task.strategy not in STRATEGIES:
        raise ValueError(f"{task.path}: field 'dataset_kwargs.strategy': {task.strategy!r} is not a split strategy "
                         f"(available: {sorted(STRATEGIES)})")
    base: dict[str, Any] = {"strategy": task.strategy, "seeds": list(seeds), "n_concepts": len(data.concepts),
                            "n_attributes": len(data.attributes), "data": data.summary()}
    params = dict(task.split_params)
    if task.k is not None:
        if task.k > len(data.concepts):
            raise ValueError(f"{task.path}: field 'dataset_kwargs.k': k={task.k} clusters for {len(data.concepts)} "
                             f"concepts; lower k to at most the number of concepts")
        params["n_clusters"] = task.k
        base["k"] = task.k
    groups = None
    if task.groups is not None:
        groups_path = _in_root(root, task.groups)
        if not groups_path.is_file():
            reason = f"concept groups file {groups_path} does not exist (dataset_kwargs.groups of {task.path})"
            if task.strategy == "llm":
                return {**base, "available": False, "unavailable_reason": reason}
            raise FileNotFoundError(reason)
        groups = tuple(tuple(g) for g in load_concept_groups(groups_path))
    split_embeddings, split_name = _split_embeddings(task, data, root)
    if split_name is not None:
        base["split_embeddings"] = split_name
    context = SplitContext(data.concepts, data.supercategories, groups, split_embeddings,
                           split_embedding_name=split_name)
    solver = task.experiment_kwargs.get("solver", "lockstep")
    threshold = task.experiment_kwargs.get("leakage_threshold")
    per_seed: dict[str, dict[str, Any]] = {}
    try:
        for seed in seeds:
            per_seed[str(seed)] = attribute_task_metrics(X, data, task.strategy, seed, split_params=params,
                                                         context=context, solver=solver, leakage_threshold=threshold)
    except StrategyUnavailable as reason:
        return {**base, "available": False, "unavailable_reason": str(reason)}
    runs = [per_seed[s] for s in per_seed]
    metrics: dict[str, Any] = {**base, "available": True}
    for name, values in (
        ("f1_selectivity", [r["f1_selectivity"] for r in runs]),
        ("cs", [r["cs"] for r in runs]),
        ("mean_f1", [r["mean_f1"] for r in runs]),
        ("leakage", [r["leakage"]["mean_nearest_train_similarity"] for r in runs]),
        ("leakage_share_above_threshold", [r["leakage"]["share_above_threshold"] for r in runs]),
    ):
        summary = mean_sd(values, skip_missing=True)
        metrics[name], metrics[f"{name}_sd"] = summary["mean"], summary["sd"]
    metrics["n_attributes_scored"] = int(min(r["n_attributes_scored"] for r in runs))
    metrics["n_degenerate_folds"] = {s: r["coverage"]["n_degenerate_folds"] for s, r in per_seed.items()}
    metrics["split_embedding"] = runs[0]["split_embedding"]
    metrics["per_seed"] = per_seed
    return metrics


def _split_embeddings(task: AttributeTaskSpec, data: ConceptAttributeData,
                      root: Path) -> tuple[np.ndarray | None, str | None]:
    """One split embedding for every model: ``$CLIP_CYCLES_SPLIT_EMBEDDINGS`` or the task's key (root-relative).

    Returns the matrix in ``data`` order and the file that made it, or (None, None) for
    each model's own embeddings. Every concept needs a row; missing ones are an error.
    """
    name = split_embeddings_override() or task.split_embeddings
    if not name:
        return None, None
    path = _in_root(root, name)
    ids, matrix = load_embeddings_npz(path)
    row = {c: i for i, c in enumerate(ids)}
    missing = [c for c in data.concepts if c not in row]
    if missing:
        raise ValueError(f"split embeddings {path} lack {len(missing)} concepts (first: {missing[:5]}); "
                         "embed every concept of the THINGS root with the split model")
    return matrix[[row[c] for c in data.concepts]], str(path)


@dataclass
class _Embedded:
    data: ConceptAttributeData
    X: np.ndarray
    info: dict[str, Any]


@register_runner("attribute_splits", "attribute_splits")
def run_attributes(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """Attribute tasks on the THINGS root ``context.dataset_root``; tasks with the same inputs share one embedding."""
    if context.dataset_root is None:
        raise ValueError(f"task {tasks[0].name} needs a THINGS root (--dataset_root / --dataset-root): a folder with "
                         "unique_id.txt, concept_attribute_pairs.json (or .csv), category53_wideFormat.tsv and "
                         "object_images/<concept>/*.jpg")
    root = Path(context.dataset_root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"THINGS root {root} does not exist")
    embedded: dict[tuple[Any, ...], _Embedded] = {}
    records = []
    for task in tasks:
        assert isinstance(task, AttributeTaskSpec)
        key = (task.pairs, task.concept_list, task.categories, task.min_concepts, task.embedding)
        if key not in embedded:
            data = load_things(root, task.pairs, task.concept_list, task.categories, task.min_concepts)
            data, X, info = embed_concepts(root, data, context.spec, context.cache_dir, task.embedding, task.categories,
                                           task.min_concepts, context.batch_size, context.num_workers,
                                           context.skip_bad_images)
            embedded[key] = _Embedded(data, X, info)
        prepared = embedded[key]
        seeds = list(context.seeds) if context.seeds else list(task.seeds)
        print(f"{task.name}: {len(prepared.data.concepts)} concepts, {len(prepared.data.attributes)} attributes, "
              f"strategy {task.strategy}, seeds {seeds}", file=sys.stderr)
        metrics = attribute_metrics(task, prepared.data, prepared.X, root, seeds)
        metrics["concept_embedding"] = prepared.info
        records.append(checked_record(task, context.spec, clean(metrics)))
    return RunOutcome(records)


__all__ = [
    "RUNNERS",
    "RunContext",
    "RunOutcome",
    "Runner",
    "attribute_metrics",
    "embed_concepts",
    "experiment_settings",
    "register_runner",
    "run_attributes",
    "run_oe",
    "run_probe",
    "run_selection",
    "run_tasks",
    "run_transfer",
    "runner_for",
]
