"""The task registry: one YAML file per task under ``tasks/``, validated on load.

A task says which built dataset folder config to score, on which split and seeds,
with which metrics, tie tolerance and caption formatting. Key names follow
lmms-eval where they mean the same thing (``task``, ``dataset_path``,
``dataset_kwargs``, ``test_split``, ``metric_list``, ``doc_to_text``)::

    task: cycles/coco_strict_size
    dataset_path: coco                 # source kind the built folder must hold
    dataset_kwargs: {config: strict_size, seeds: [0, 1, 2]}
    test_split: test
    output_type: cycle_selection
    metric_list:
      - {metric: cycle_acc, aggregation: mean, higher_is_better: true}
    tie_tolerance: 1.0e-9
    doc_to_text: "{caption}"           # caption formatting template

A collection (``group``) names other tasks::

    group: cycles/coco_all
    task: [cycles/coco_strict_size, ...]

``cycles/<name>`` resolves to ``tasks/cycles/<name>.yaml``. Adding a task is adding a
YAML file: to the shipped ``tasks/`` directory, or to any directory listed in the
environment variable ``CLIP_CYCLES_TASKS_PATH`` (``os.pathsep``-separated).

Task files share keys through lmms-eval's ``include:`` (:func:`read_task_yaml`), so a
task file holds only what differs from its template::

    include: _coco_yaml                # tag, dataset_path; it includes _default_template_yaml
    task: cycles/coco_strict_size
    description: "COCO family `strict_size`: exact cycles, zero-shot cosine scores."
    dataset_kwargs: {config: strict_size, seeds: [0, 1, 2]}

Include paths are relative to the including file; the including file's keys win. A
file whose name starts with ``_`` (``_default_template_yaml``, ``_coco_yaml``) is a
template, never a task. ``dataset_path`` of a cycle task names a source registered in
:mod:`clip_cycles.data.sources`.

``output_type`` picks what is computed (:data:`OUTPUT_TYPES`; the runner of each is
registered in :mod:`clip_cycles.evaluation.runners`): ``cycle_selection`` (zero-shot
scores), ``cycle_probe``, ``cycle_transfer``, ``cycle_oe`` (the paper-1 experiments,
settings in ``experiment_kwargs``, e.g. ``{epochs: 2, min_cycles: 5}``) and
``attribute_splits`` (paper 2 on a THINGS root)::

    task: attributes/things_clustering
    dataset_path: things
    dataset_kwargs: {strategy: clustering, k: 100, seeds: [0, 1, 2], min_concepts: 10}
    output_type: attribute_splits
    metric_list: [f1_selectivity, cs]

A transfer task scores several families together: ``dataset_kwargs: {tasks: [cycles/a,
cycles/b], seeds: [0]}`` instead of ``config``.

Derived namespaces (:data:`DERIVED_NAMESPACES`) need no YAML: ``cycles_probe/<x>`` and
``cycles_oe/<x>`` are the task or collection ``cycles/<x>`` with the experiment's
output type and default settings, ``cycles_transfer/<collection>`` is one transfer task
over the collection's families. A YAML file of the same name takes precedence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Union

import yaml

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE
from clip_cycles.data.sources import source_names
from clip_cycles.settings import TASKS_PATH_ENV, extra_task_dirs

SPLITS: tuple[str, ...] = ("train", "validation", "test")

#: Metrics a cycle_selection task may request, all computed from the same score blocks.
METRICS: tuple[str, ...] = (
    "cycle_acc",
    "text_acc",
    "image_acc",
    "group_acc",
    "n_cycles",
    "additive_audit",
)
AGGREGATIONS: tuple[str, ...] = ("mean",)


@dataclass(frozen=True)
class OutputType:
    """What a task of this ``output_type`` reads and which headline metrics it may name.

    ``sources``: the ``dataset_path`` values it accepts; None means the raw sources
    registered in :mod:`clip_cycles.data.sources` (read when a task is parsed, so a source
    registered later is accepted too). ``metrics[0]`` onwards is also the default
    ``metric_list`` of derived tasks; ``multi_family`` tasks name several cycle tasks
    (``dataset_kwargs.tasks``).
    """

    name: str
    sources: tuple[str, ...] | None
    metrics: tuple[str, ...]
    multi_family: bool = False

    def allowed_sources(self) -> tuple[str, ...]:
        """The ``dataset_path`` values a task of this type may give."""
        return source_names() if self.sources is None else self.sources


#: Output types a task may declare; their runners live in :mod:`clip_cycles.evaluation.runners`.
OUTPUT_TYPES: dict[str, OutputType] = {
    t.name: t
    for t in (
        OutputType("cycle_selection", None, METRICS),
        OutputType("cycle_probe", None, ("cycle_acc", "zero_shot_cycle_acc", "n_cycles")),
        OutputType(
            "cycle_transfer",
            None,
            ("pearson", "spearman", "in_family_cycle_acc", "cross_family_cycle_acc", "n_cycles"),
            multi_family=True,
        ),
        OutputType(
            "cycle_oe",
            None,
            (
                "cycle_acc",
                "shortcut_oe_cycle_acc",
                "four_entry_bce_cycle_acc",
                "text_only_oe_val_acc",
                "text_only_cycle_acc",
                "n_cycles",
            ),
        ),
        OutputType("attribute_splits", ("things",), ("f1_selectivity", "cs", "mean_f1", "leakage", "n_attributes_scored")),
        OutputType("benchmark_cycles", ("winoground",), ("cycle_acc", "text_acc", "image_acc", "group_acc", "n_cycles")),
        OutputType(
            "benchmark_audit",
            ("benchmark",),
            ("model_acc", "caption_probe_acc", "best_blind_acc", "witness_acc", "cycle_acc", "n_comparisons", "n_cycles"),
        ),
    )
}

#: How a concept embedding is made for an attribute task (``dataset_kwargs.embedding``).
CONCEPT_EMBEDDINGS: tuple[str, ...] = ("image", "name", "definition")


@dataclass(frozen=True)
class DerivedNamespace:
    """``<prefix>/<x>`` derived from the ``cycles/<x>`` entry, with another output type.

    ``per_task``: each cycles task gives a task and each collection a collection of the
    derived tasks; otherwise each collection gives one multi-family task.
    """

    prefix: str
    output_type: str
    per_task: bool
    description: str


DERIVED_NAMESPACES: tuple[DerivedNamespace, ...] = (
    DerivedNamespace("cycles_probe", "cycle_probe", True, "probe rank sweep (clip-cycles probe)"),
    DerivedNamespace("cycles_oe", "cycle_oe", True, "Cycle OE vs Shortcut OE (clip-cycles oe)"),
    DerivedNamespace("cycles_transfer", "cycle_transfer", False, "transfer grid and alignment (clip-cycles transfer)"),
)
#: The namespace derived tasks come from.
BASE_NAMESPACE = "cycles"
#: Every namespace this registry owns (``is_task_name``).
NAMESPACES: tuple[str, ...] = (BASE_NAMESPACE, *(n.prefix for n in DERIVED_NAMESPACES), "attributes", "audit")

_TASK_KEYS = {
    "task",
    "dataset_path",
    "dataset_kwargs",
    "test_split",
    "output_type",
    "metric_list",
    "tie_tolerance",
    "audit_fit",
    "doc_to_text",
    "description",
    "tag",
    "experiment_kwargs",
    "lmms_eval_specific_kwargs",  # prompt of pair-scoring backends, read by clip_cycles.encoding.vlm_scores
}
_GROUP_KEYS = {"group", "task", "description"}

#: ``audit_fit`` values: fit the additive audit's probes on the scored split's cycles
#: (default: zero-shot scoring then reads and encodes nothing else) or on ``train_split``.
AUDIT_FITS: tuple[str, ...] = ("scored", "train")


@dataclass(frozen=True)
class MetricSpec:
    """One entry of ``metric_list``."""

    metric: str
    aggregation: str = "mean"
    higher_is_better: bool = True


@dataclass(frozen=True)
class TaskSpec:
    """A validated task YAML."""

    name: str
    source: str
    config: str
    seeds: tuple[int, ...]
    split: str
    metrics: tuple[MetricSpec, ...]
    tie_tolerance: float
    caption_template: str
    path: Path
    description: str = ""
    train_split: str = "train"
    #: Where the additive audit fits its shortcut probes: ``"scored"`` (the scored split's
    #: cycles, features already encoded) or ``"train"`` (``train_split``, early stop on validation).
    audit_fit: str = "scored"
    tags: tuple[str, ...] = field(default_factory=tuple)
    output_type: str = "cycle_selection"
    #: Settings of the experiment (``ProbeSettings``, ``TransferSettings``, ``OESettings`` fields).
    experiment_kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    #: Cycle tasks of a multi-family (transfer) task, in order; empty otherwise.
    members: tuple[str, ...] = ()

    def format_caption(self, caption: str) -> str:
        """Apply the task's caption template (``doc_to_text``) to one caption."""
        return self.caption_template.format(caption=caption)

    def config_name(self, seed: int) -> str:
        """Config name in the built folder for ``seed`` (DEVELOPING.md: ``<family>``, ``<family>_seed<k>``)."""
        return self.config if seed == 0 else f"{self.config}_seed{seed}"

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(m.metric for m in self.metrics)


@dataclass(frozen=True)
class AttributeTaskSpec:
    """A validated ``attribute_splits`` task: one split strategy on a THINGS-format root.

    File names (``pairs``, ``concept_list``, ``categories``, ``groups``) are relative to
    the dataset root unless absolute; None means the conventional name in the root
    (``clip_cycles.attributes.concepts.load_things``) or, for ``groups``, no groups file.
    """

    name: str
    strategy: str
    seeds: tuple[int, ...]
    metrics: tuple[MetricSpec, ...]
    path: Path
    k: int | None = None
    min_concepts: int = 10
    embedding: str = "image"
    groups: str | None = None
    pairs: str | None = None
    concept_list: str | None = None
    categories: str | None = None
    #: npz (``concepts``, ``embeddings``) that makes clustering/similarity splits for every model.
    split_embeddings: str | None = None
    #: Attribute list (paper 2's ``intersect_features.json``) and mcrae++-format concept sets (paper 2's CS).
    attributes: str | None = None
    concept_sets: str | None = None
    split_params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    experiment_kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    description: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)
    output_type: str = "attribute_splits"
    source: str = "things"

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(m.metric for m in self.metrics)


@dataclass(frozen=True)
class GroupSpec:
    """A validated collection YAML: a named list of tasks."""

    name: str
    tasks: tuple[str, ...]
    path: Path
    description: str = ""


def shipped_tasks_dir() -> Path:
    """The directory of the task YAMLs that ship with clip_cycles: the ``clip_cycles.tasks`` package itself."""
    return Path(__file__).resolve().parent


#: PyYAML's libyaml loader where PyYAML was built with it (several times faster), else the Python one.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: The key that pulls other YAML files' keys into a task file (lmms-eval's ``include``).
INCLUDE_KEY = "include"


def is_template(path: Path) -> bool:
    """Whether ``path`` is an include template, never a task itself: its name starts with ``_``
    (``_default_template_yaml``, ``_coco_yaml``)."""
    return path.name.startswith("_")


def _compose(path: Path) -> yaml.Node | None:
    try:
        return yaml.compose(path.read_text(encoding="utf-8"), Loader=_SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def _entry(node: yaml.Node, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next(((k, v) for k, v in node.value if getattr(k, "value", None) == key), None)


def _include_names(node: yaml.Node) -> list[str]:
    found = _entry(node, INCLUDE_KEY)
    if found is None:
        return []
    value = found[1]
    items = value.value if isinstance(value, yaml.SequenceNode) else [value]
    return [item.value for item in items if isinstance(item, yaml.ScalarNode) and isinstance(item.value, str)]


def _locate(path: Path, field_name: str, trail: tuple[Path, ...] = ()) -> tuple[Path, int | None] | None:
    """The file that sets a (dotted) field, following includes as :func:`read_task_yaml` does, and the
    1-based line of the field (or of its nearest present parent) there; None when no file sets it."""
    node = _compose(path)
    if not isinstance(node, yaml.MappingNode):
        return None
    parts = field_name.split(".")
    if _entry(node, parts[0].split("[", 1)[0]) is None:
        here = (*trail, path.resolve())
        for name in reversed(_include_names(node)):  # the last include wins, so look there first
            target = path.parent / name
            if target.is_file() and target.resolve() not in here:
                found = _locate(target, field_name, here)
                if found is not None:
                    return found
        return None
    line = None
    for part in parts:
        entry = _entry(node, part.split("[", 1)[0])
        if entry is None:
            break
        line = entry[0].start_mark.line + 1
        node = entry[1]
    return path, line


def _bad(path: Path, field_name: str, message: str) -> ValueError:
    located = _locate(path, field_name) if path.is_file() else None
    origin, line = located if located is not None else (path, None)
    at = f" line {line}" if line else ""
    if origin == path:
        return ValueError(f"{path}{at}: field {field_name!r}: {message}")
    return ValueError(f"{path}: field {field_name!r} (set in included {origin}{at}): {message}")


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_SafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{path}{where}: not valid YAML: {error}") from error
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text at byte {error.start}: {error.reason}") from error
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a task file (or template) must hold a mapping, got {type(data).__name__}")
    return data


def read_task_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping a task file stands for, its ``include:`` resolved.

    ``include`` names one file or a list of files, relative to the including file's
    folder; each may include others. The included files' keys come first (later
    includes override earlier ones) and the file's own keys override them all; the
    merge is by top-level key, as in lmms-eval (a mapping or list is replaced whole).
    A missing included file and an include cycle are errors naming the file and line.
    """
    return _resolve_includes(Path(path), ())


def _resolve_includes(path: Path, trail: tuple[Path, ...]) -> dict[str, Any]:
    data = _read_mapping(path)
    if INCLUDE_KEY not in data:
        return data
    names = data.pop(INCLUDE_KEY)
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise _bad(path, INCLUDE_KEY, f"must be a file name, or a list of them, relative to {path.parent}; got {names!r}")
    here = (*trail, path.resolve())
    merged: dict[str, Any] = {}
    for name in names:
        target = path.parent / name
        if target.resolve() in here:
            chain = " -> ".join(p.name for p in (*here, target.resolve()))
            raise _bad(path, INCLUDE_KEY, f"including {name!r} closes an include cycle ({chain}); remove one include")
        if not target.is_file():
            raise _bad(
                path,
                INCLUDE_KEY,
                f"included file {target} does not exist (include paths are relative to the including file's folder)",
            )
        merged.update(_resolve_includes(target, here))
    merged.update(data)
    return merged


def _expect_name(path: Path, root: Path, data: Mapping[str, Any], key: str) -> str:
    expected = path.relative_to(root).with_suffix("").as_posix()
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise _bad(path, key, f"must be the task name {expected!r}")
    if value != expected:
        raise _bad(path, key, f"is {value!r} but the file location makes it {expected!r}; rename one of them")
    return value


def _parse_metrics(path: Path, raw: Any, allowed: tuple[str, ...] = METRICS) -> tuple[MetricSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise _bad(path, "metric_list", "must be a non-empty list of {metric, aggregation, higher_is_better}")
    out = []
    for i, entry in enumerate(raw):
        where = f"metric_list[{i}]"
        if isinstance(entry, str):
            entry = {"metric": entry}
        if not isinstance(entry, dict):
            raise _bad(path, where, f"must be a mapping, got {entry!r}")
        unknown = set(entry) - {"metric", "aggregation", "higher_is_better"}
        if unknown:
            raise _bad(path, where, f"unknown keys {sorted(unknown)}")
        metric = entry.get("metric")
        if metric not in allowed:
            raise _bad(path, f"{where}.metric", f"{metric!r} is not one of {list(allowed)}")
        aggregation = entry.get("aggregation", "mean")
        if aggregation not in AGGREGATIONS:
            raise _bad(path, f"{where}.aggregation", f"{aggregation!r} is not one of {list(AGGREGATIONS)}")
        higher = entry.get("higher_is_better", True)
        if not isinstance(higher, bool):
            raise _bad(path, f"{where}.higher_is_better", f"must be true or false, got {higher!r}")
        out.append(MetricSpec(metric, aggregation, higher))
    return tuple(out)


def _parse_seeds(path: Path, kwargs: Mapping[str, Any], default: list[int]) -> tuple[int, ...]:
    seeds = kwargs.get("seeds", default)
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
    ):
        raise _bad(path, "dataset_kwargs.seeds", f"must be a non-empty list of non-negative integers, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise _bad(path, "dataset_kwargs.seeds", f"repeats a seed: {seeds!r}")
    return tuple(seeds)


def _parse_tags(path: Path, data: Mapping[str, Any]) -> tuple[str, ...]:
    tags = data.get("tag", [])
    tags = [tags] if isinstance(tags, str) else tags
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise _bad(path, "tag", "must be a string or a list of strings")
    return tuple(tags)


def _parse_experiment_kwargs(path: Path, data: Mapping[str, Any], output_type: str) -> dict[str, Any]:
    raw = data.get("experiment_kwargs", {})
    if raw is None:
        raw = {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise _bad(path, "experiment_kwargs", f"must be a mapping of setting names to values, got {raw!r}")
    if raw and output_type == "cycle_selection":
        raise _bad(path, "experiment_kwargs", "cycle_selection tasks take no experiment settings")
    if "seeds" in raw:
        raise _bad(path, "experiment_kwargs.seeds", "seeds belong in dataset_kwargs.seeds")
    # Field names are checked by the runner, which knows the settings class.
    return dict(raw)


def _optional_str(path: Path, kwargs: Mapping[str, Any], key: str) -> str | None:
    value = kwargs.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise _bad(path, f"dataset_kwargs.{key}", f"must be a file name (relative to the dataset root) or null, got {value!r}")
    return value


def _positive_int(path: Path, kwargs: Mapping[str, Any], key: str, minimum: int) -> int | None:
    value = kwargs.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
        raise _bad(path, f"dataset_kwargs.{key}", f"must be an integer >= {minimum}, got {value!r}")
    return value


def _parse_cycle_task(path: Path, data: Mapping[str, Any], name: str, output: OutputType) -> TaskSpec:
    source = data.get("dataset_path")
    if source not in output.allowed_sources():
        raise _bad(path, "dataset_path", f"{source!r} is not one of {list(output.allowed_sources())}")
    kwargs = data.get("dataset_kwargs")
    needed = "`tasks` (the cycle tasks to combine)" if output.multi_family else "`config` (the family name)"
    if not isinstance(kwargs, dict):
        raise _bad(path, "dataset_kwargs", f"must be a mapping with at least {needed}")
    allowed = {"seeds", "train_split", "tasks"} if output.multi_family else {"config", "seeds", "train_split"}
    unknown = set(kwargs) - allowed
    if unknown:
        raise _bad(path, f"dataset_kwargs.{sorted(unknown)[0]}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
    members: tuple[str, ...] = ()
    config = ""
    if output.multi_family:
        raw = kwargs.get("tasks")
        if not isinstance(raw, list) or not raw or not all(isinstance(t, str) and t for t in raw):
            raise _bad(path, "dataset_kwargs.tasks", f"must be a non-empty list of cycle task names, got {raw!r}")
        if len(set(raw)) != len(raw):
            raise _bad(path, "dataset_kwargs.tasks", f"repeats a task: {raw!r}")
        members = tuple(raw)
    else:
        config = kwargs.get("config")
        if not isinstance(config, str) or not config:
            raise _bad(path, "dataset_kwargs.config", "must be the family (config) name in the built folder")
    seeds = _parse_seeds(path, kwargs, [0, 1, 2])
    split = data.get("test_split", "test")
    if split not in SPLITS:
        raise _bad(path, "test_split", f"{split!r} is not one of {list(SPLITS)}")
    train_split = kwargs.get("train_split", "train")
    if train_split not in SPLITS:
        raise _bad(path, "dataset_kwargs.train_split", f"{train_split!r} is not one of {list(SPLITS)}")
    audit_fit = data.get("audit_fit", "scored")
    if audit_fit not in AUDIT_FITS:
        raise _bad(path, "audit_fit", f"{audit_fit!r} is not one of {list(AUDIT_FITS)}")
    tol = data.get("tie_tolerance", DEFAULT_TIE_TOLERANCE)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not math.isfinite(tol) or tol < 0:
        raise _bad(path, "tie_tolerance", f"must be a finite non-negative number, got {tol!r}")
    template = data.get("doc_to_text", "{caption}")
    if not isinstance(template, str):
        raise _bad(path, "doc_to_text", f"must be a string template with {{caption}}, got {template!r}")
    try:
        formatted = template.format(caption="\x00")
    except (KeyError, IndexError, ValueError) as error:
        raise _bad(path, "doc_to_text", f"template {template!r} is invalid: only {{caption}} is available ({error})") from error
    if "\x00" not in formatted:
        raise _bad(path, "doc_to_text", f"template {template!r} must contain {{caption}}")
    return TaskSpec(
        name=name,
        source=source,
        config=config,
        seeds=seeds,
        split=split,
        metrics=_parse_metrics(path, data.get("metric_list"), output.metrics),
        tie_tolerance=float(tol),
        caption_template=template,
        path=path,
        description=str(data.get("description", "")),
        train_split=train_split,
        audit_fit=audit_fit,
        tags=_parse_tags(path, data),
        output_type=output.name,
        experiment_kwargs=_parse_experiment_kwargs(path, data, output.name),
        members=members,
    )


_ATTRIBUTE_TASK_KEYS = {
    "task",
    "dataset_path",
    "dataset_kwargs",
    "output_type",
    "metric_list",
    "description",
    "tag",
    "experiment_kwargs",
}
_ATTRIBUTE_KWARGS = {
    "strategy",
    "seeds",
    "k",
    "min_concepts",
    "embedding",
    "groups",
    "pairs",
    "concept_list",
    "categories",
    "split_params",
    "split_embeddings",
    "attributes",
    "concept_sets",
}
#: Settings an attribute task may give in ``experiment_kwargs`` (``protocol``: project or paper2).
ATTRIBUTE_EXPERIMENT_KWARGS: tuple[str, ...] = ("solver", "leakage_threshold", "protocol")


def _parse_attribute_task(path: Path, data: Mapping[str, Any], name: str, output: OutputType) -> AttributeTaskSpec:
    unknown = set(data) - _ATTRIBUTE_TASK_KEYS
    if unknown:
        raise _bad(path, sorted(unknown)[0], f"unknown key for an {output.name} task (allowed: {sorted(_ATTRIBUTE_TASK_KEYS)})")
    source = data.get("dataset_path")
    if source not in output.allowed_sources():
        raise _bad(path, "dataset_path", f"{source!r} is not one of {list(output.allowed_sources())}")
    kwargs = data.get("dataset_kwargs")
    if not isinstance(kwargs, dict):
        raise _bad(path, "dataset_kwargs", "must be a mapping with at least `strategy` (a split strategy name)")
    unknown = set(kwargs) - _ATTRIBUTE_KWARGS
    if unknown:
        raise _bad(path, f"dataset_kwargs.{sorted(unknown)[0]}", f"unknown key (allowed: {', '.join(sorted(_ATTRIBUTE_KWARGS))})")
    strategy = kwargs.get("strategy")
    if not isinstance(strategy, str) or not strategy:
        raise _bad(path, "dataset_kwargs.strategy", "must be a split strategy name (clip_cycles.attributes.splitters.STRATEGIES)")
    k = _positive_int(path, kwargs, "k", 2)
    if k is not None and strategy != "clustering":
        raise _bad(path, "dataset_kwargs.k", f"is the number of k-means clusters; strategy {strategy!r} has none")
    min_concepts = _positive_int(path, kwargs, "min_concepts", 1)
    embedding = kwargs.get("embedding", "image")
    if embedding not in CONCEPT_EMBEDDINGS:
        raise _bad(path, "dataset_kwargs.embedding", f"{embedding!r} is not one of {list(CONCEPT_EMBEDDINGS)}")
    split_params = kwargs.get("split_params", {}) or {}
    if not isinstance(split_params, dict) or not all(isinstance(key, str) for key in split_params):
        raise _bad(path, "dataset_kwargs.split_params", f"must be a mapping of splitter arguments, got {split_params!r}")
    experiment = _parse_experiment_kwargs(path, data, output.name)
    unknown = set(experiment) - set(ATTRIBUTE_EXPERIMENT_KWARGS)
    if unknown:
        raise _bad(
            path,
            f"experiment_kwargs.{sorted(unknown)[0]}",
            f"unknown setting (allowed: {', '.join(ATTRIBUTE_EXPERIMENT_KWARGS)})",
        )
    if experiment.get("protocol") == "paper2" and "seeds" in kwargs:
        fixed = "protocol paper2 fixes its seeds (random 70, shuffle splits 42, k-means 0); remove seeds"
        raise _bad(path, "dataset_kwargs.seeds", fixed)
    return AttributeTaskSpec(
        name=name,
        strategy=strategy,
        seeds=_parse_seeds(path, kwargs, [0, 1, 2]),
        metrics=_parse_metrics(path, data.get("metric_list"), output.metrics),
        path=path,
        k=k,
        min_concepts=10 if min_concepts is None else min_concepts,
        embedding=embedding,
        groups=_optional_str(path, kwargs, "groups"),
        pairs=_optional_str(path, kwargs, "pairs"),
        concept_list=_optional_str(path, kwargs, "concept_list"),
        categories=_optional_str(path, kwargs, "categories"),
        split_embeddings=_optional_str(path, kwargs, "split_embeddings"),
        attributes=_optional_str(path, kwargs, "attributes"),
        concept_sets=_optional_str(path, kwargs, "concept_sets"),
        split_params=dict(split_params),
        experiment_kwargs=experiment,
        description=str(data.get("description", "")),
        tags=_parse_tags(path, data),
    )


#: Task parser per output type: the attribute schema differs from the cycle schema.
_TASK_PARSERS: dict[str, Callable[[Path, Mapping[str, Any], str, OutputType], TaskSpec | AttributeTaskSpec]] = {
    **{name: _parse_cycle_task for name in OUTPUT_TYPES if name != "attribute_splits"},
    "attribute_splits": _parse_attribute_task,
}

#: Anything a task name may resolve to.
AnyTask = Union[TaskSpec, AttributeTaskSpec]


def parse_task(path: Path, root: Path) -> TaskSpec | AttributeTaskSpec | GroupSpec:
    """Validate one YAML file found under ``root`` (its includes resolved) and return its spec."""
    data = read_task_yaml(path)
    if "group" in data:
        unknown = set(data) - _GROUP_KEYS
        if unknown:
            raise _bad(path, sorted(unknown)[0], f"unknown key in a group file (allowed: {sorted(_GROUP_KEYS)})")
        name = _expect_name(path, root, data, "group")
        members = data.get("task")
        if not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members):
            raise _bad(path, "task", "a group needs a non-empty list of task names")
        return GroupSpec(name=name, tasks=tuple(members), path=path, description=str(data.get("description", "")))
    output_type = data.get("output_type", "cycle_selection")
    if output_type not in OUTPUT_TYPES:
        raise _bad(path, "output_type", f"{output_type!r} is not one of {list(OUTPUT_TYPES)}")
    if output_type in _TASK_PARSERS and _TASK_PARSERS[output_type] is _parse_cycle_task:
        unknown = set(data) - _TASK_KEYS
        if unknown:
            raise _bad(path, sorted(unknown)[0], f"unknown key (allowed: {sorted(_TASK_KEYS)})")
    name = _expect_name(path, root, data, "task")
    return _TASK_PARSERS[output_type](path, data, name, OUTPUT_TYPES[output_type])


def _derive(entries: dict[str, AnyTask | GroupSpec], namespace: DerivedNamespace) -> dict[str, AnyTask | GroupSpec]:
    """The entries of ``namespace`` derived from the ``cycles/`` ones (explicit YAMLs are not overwritten)."""
    output = OUTPUT_TYPES[namespace.output_type]
    base_prefix = f"{BASE_NAMESPACE}/"
    derived: dict[str, AnyTask | GroupSpec] = {}
    for name, spec in entries.items():
        if not name.startswith(base_prefix):
            continue
        new = f"{namespace.prefix}/{name[len(base_prefix) :]}"
        if new in entries:
            continue
        what = f"{namespace.description} on {name}"
        if isinstance(spec, TaskSpec) and namespace.per_task and spec.output_type == "cycle_selection":
            derived[new] = replace(
                spec, name=new, output_type=output.name, description=what, metrics=tuple(MetricSpec(m) for m in output.metrics)
            )
        elif isinstance(spec, GroupSpec) and namespace.per_task:
            if all(m.startswith(base_prefix) for m in spec.tasks):
                members = tuple(f"{namespace.prefix}/{m[len(base_prefix) :]}" for m in spec.tasks)
                derived[new] = GroupSpec(new, members, spec.path, what)
        elif isinstance(spec, GroupSpec):
            tasks = _expand(entries, [name])
            cycle_tasks = [t for t in tasks if isinstance(t, TaskSpec) and t.output_type == "cycle_selection"]
            if not cycle_tasks or len(cycle_tasks) != len(tasks):
                continue
            first = cycle_tasks[0]
            seeds = tuple(s for s in first.seeds if all(s in t.seeds for t in cycle_tasks))
            if not seeds:
                continue
            derived[new] = replace(
                first,
                name=new,
                config="",
                seeds=seeds,
                output_type=output.name,
                description=what,
                metrics=tuple(MetricSpec(m) for m in output.metrics),
                path=spec.path,
                members=tuple(t.name for t in cycle_tasks),
                tags=(),
            )
    return derived


def _expand(entries: Mapping[str, AnyTask | GroupSpec], names: Iterable[str]) -> list[AnyTask]:
    out: dict[str, AnyTask] = {}

    def visit(name: str, trail: tuple[str, ...]) -> None:
        if name in trail:
            raise ValueError(f"task group cycle: {' -> '.join((*trail, name))}")
        spec = entries[name]
        if isinstance(spec, GroupSpec):
            for member in spec.tasks:
                visit(member, (*trail, name))
        else:
            out.setdefault(spec.name, spec)

    for name in names:
        visit(name, ())
    return list(out.values())


class TaskRegistry:
    """All tasks and groups under a list of root directories (earlier roots win), plus the derived namespaces.

    A YAML file that does not validate makes only its own task unavailable:
    :attr:`unavailable` maps the name its location gives it to the error (file, line,
    field); asking for that task raises that error, every other task keeps working.
    """

    def __init__(self, roots: Iterable[str | Path]) -> None:
        self.roots = [Path(r) for r in roots]
        self._entries: dict[str, AnyTask | GroupSpec] | None = None
        self._derived: set[str] = set()
        self.unavailable: dict[str, str] = {}

    @classmethod
    def default(cls) -> TaskRegistry:
        """Directories of ``CLIP_CYCLES_TASKS_PATH`` first, then the shipped tasks."""
        return cls([*extra_task_dirs(), shipped_tasks_dir()])

    @property
    def entries(self) -> dict[str, AnyTask | GroupSpec]:
        if self._entries is None:
            entries: dict[str, AnyTask | GroupSpec] = {}
            for root in self.roots:
                if not root.is_dir():
                    raise FileNotFoundError(f"task directory {root} does not exist (check {TASKS_PATH_ENV})")
                for path in sorted(root.rglob("*.yaml")):
                    if is_template(path):
                        continue  # included by tasks, not one itself
                    name = path.relative_to(root).with_suffix("").as_posix()
                    if name in entries or name in self.unavailable:
                        continue  # an earlier root's file of the same name wins
                    try:
                        spec = parse_task(path, root)
                    except ValueError as error:
                        self.unavailable[name] = str(error)
                        continue
                    entries.setdefault(spec.name, spec)
            self._check_members(entries)
            derived: dict[str, AnyTask | GroupSpec] = {}
            for namespace in DERIVED_NAMESPACES:
                derived.update(_derive(entries, namespace))
            self._derived = set(derived)
            entries.update(derived)
            self._check_members(entries)
            self._entries = entries
        return self._entries

    def _check_members(self, entries: dict[str, AnyTask | GroupSpec]) -> None:
        """Groups and transfer tasks naming unknown tasks become unavailable (file and line named)."""
        changed = True
        while changed:
            changed = False
            for name, spec in list(entries.items()):
                error = None
                if isinstance(spec, GroupSpec):
                    missing = [t for t in spec.tasks if t not in entries]
                    broken = [t for t in missing if t in self.unavailable]
                    if broken:
                        error = _bad(
                            spec.path, "task", f"names task {broken[0]!r}, which is unavailable ({self.unavailable[broken[0]]})"
                        )
                    elif missing:
                        error = _bad(spec.path, "task", f"names unknown tasks {missing}")
                elif isinstance(spec, TaskSpec) and spec.members:
                    bad = [t for t in spec.members if not (isinstance(entries.get(t), TaskSpec) and entries[t].config)]  # type: ignore[union-attr]
                    if bad:
                        error = _bad(spec.path, "dataset_kwargs.tasks", f"names unknown or non-cycle tasks {bad}")
                if error is not None:
                    self.unavailable[name] = str(error)
                    del entries[name]
                    changed = True

    def names(self) -> list[str]:
        """Every task and group name (derived ones included), sorted."""
        return sorted(self.entries)

    def task_names(self, derived: bool = True) -> list[str]:
        """Names of single tasks (not groups), sorted; ``derived=False`` leaves out the derived namespaces."""
        return sorted(n for n, s in self.entries.items() if not isinstance(s, GroupSpec) and (derived or n not in self._derived))

    def group_names(self, derived: bool = True) -> list[str]:
        """Names of groups, sorted; ``derived=False`` leaves out the derived namespaces."""
        return sorted(n for n, s in self.entries.items() if isinstance(s, GroupSpec) and (derived or n not in self._derived))

    def get(self, name: str) -> AnyTask | GroupSpec:
        """The spec of ``name``; a ValueError lists the available names when it is unknown."""
        if name not in self.entries and name in self.unavailable:
            raise ValueError(f"task {name!r} is unavailable: {self.unavailable[name]}")
        if name not in self.entries:
            patterns = ", ".join(
                f"{n.prefix}/<{'task or collection' if n.per_task else 'collection'} of {BASE_NAMESPACE}/> ({n.description})"
                for n in DERIVED_NAMESPACES
            )
            raise ValueError(
                f"unknown task {name!r}; available tasks: {', '.join(self.task_names(derived=False))}; "
                f"collections: {', '.join(self.group_names(derived=False))}; derived: {patterns}"
            )
        return self.entries[name]

    def expand(self, names: Iterable[str]) -> list[AnyTask]:
        """Resolve task and group names to tasks, groups expanded, duplicates removed, order kept."""
        names = list(names)
        for name in names:
            self.get(name)
        return _expand(self.entries, names)


def is_task_name(name: str) -> bool:
    """Whether ``name`` is in a namespace this registry owns (``cycles/``, the derived ones, ``attributes/``)."""
    return name.split("/", 1)[0] in NAMESPACES and "/" in name


def get_task(name: str) -> AnyTask | GroupSpec:
    """Look ``name`` up in the default registry."""
    return TaskRegistry.default().get(name)


def expand_tasks(names: Iterable[str]) -> list[AnyTask]:
    """Expand task/group names with the default registry."""
    return TaskRegistry.default().expand(names)
