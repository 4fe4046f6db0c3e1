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
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from clip_cycles.contrast import DEFAULT_TIE_TOL

#: Environment variable with extra task directories, searched before the shipped ones.
TASKS_PATH_ENV = "CLIP_CYCLES_TASKS_PATH"

#: Sources a task may point at (``build_info.json`` ``source``).
SOURCES: tuple[str, ...] = ("coco", "gqa", "shapes")
SPLITS: tuple[str, ...] = ("train", "validation", "test")
OUTPUT_TYPES: tuple[str, ...] = ("cycle_selection",)

#: Metrics a task may request, all computed from the same score blocks.
METRICS: tuple[str, ...] = (
    "cycle_acc",
    "text_acc",
    "image_acc",
    "group_acc",
    "n_cycles",
    "additive_audit",
)
AGGREGATIONS: tuple[str, ...] = ("mean",)

_TASK_KEYS = {
    "task",
    "dataset_path",
    "dataset_kwargs",
    "test_split",
    "output_type",
    "metric_list",
    "tie_tolerance",
    "doc_to_text",
    "description",
    "tag",
}
_GROUP_KEYS = {"group", "task", "description"}


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
    tags: tuple[str, ...] = field(default_factory=tuple)

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
class GroupSpec:
    """A validated collection YAML: a named list of tasks."""

    name: str
    tasks: tuple[str, ...]
    path: Path
    description: str = ""


def shipped_tasks_dir() -> Path:
    """The directory of the task YAMLs that ship with clip_cycles.

    A regular install has them inside the package (``clip_cycles/tasks_yaml``, copied
    there by ``setup.py``'s build step); a source checkout or an editable install reads
    the canonical top-level ``tasks/`` directory of the repository.
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / "tasks_yaml", here.parent / "tasks"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"no task directory found: looked for {here / 'tasks_yaml'} (installed package) and "
        f"{here.parent / 'tasks'} (source checkout); reinstall clip_cycles with `pip install .`"
    )


def _bad(path: Path, field_name: str, message: str) -> ValueError:
    return ValueError(f"{path}: field {field_name!r}: {message}")


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a task file must hold a mapping, got {type(data).__name__}")
    return data


def _expect_name(path: Path, root: Path, data: Mapping[str, Any], key: str) -> str:
    expected = path.relative_to(root).with_suffix("").as_posix()
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise _bad(path, key, f"must be the task name {expected!r}")
    if value != expected:
        raise _bad(path, key, f"is {value!r} but the file location makes it {expected!r}; rename one of them")
    return value


def _parse_metrics(path: Path, raw: Any) -> tuple[MetricSpec, ...]:
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
        if metric not in METRICS:
            raise _bad(path, f"{where}.metric", f"{metric!r} is not one of {list(METRICS)}")
        aggregation = entry.get("aggregation", "mean")
        if aggregation not in AGGREGATIONS:
            raise _bad(path, f"{where}.aggregation", f"{aggregation!r} is not one of {list(AGGREGATIONS)}")
        higher = entry.get("higher_is_better", True)
        if not isinstance(higher, bool):
            raise _bad(path, f"{where}.higher_is_better", f"must be true or false, got {higher!r}")
        out.append(MetricSpec(metric, aggregation, higher))
    return tuple(out)


def parse_task(path: Path, root: Path) -> TaskSpec | GroupSpec:
    """Validate one YAML file found under ``root`` and return its spec."""
    data = _read_yaml(path)
    if "group" in data:
        unknown = set(data) - _GROUP_KEYS
        if unknown:
            raise _bad(path, sorted(unknown)[0], f"unknown key in a group file (allowed: {sorted(_GROUP_KEYS)})")
        name = _expect_name(path, root, data, "group")
        members = data.get("task")
        if not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members):
            raise _bad(path, "task", "a group needs a non-empty list of task names")
        return GroupSpec(name=name, tasks=tuple(members), path=path, description=str(data.get("description", "")))
    unknown = set(data) - _TASK_KEYS
    if unknown:
        raise _bad(path, sorted(unknown)[0], f"unknown key (allowed: {sorted(_TASK_KEYS)})")
    name = _expect_name(path, root, data, "task")
    source = data.get("dataset_path")
    if source not in SOURCES:
        raise _bad(path, "dataset_path", f"{source!r} is not one of {list(SOURCES)}")
    kwargs = data.get("dataset_kwargs")
    if not isinstance(kwargs, dict):
        raise _bad(path, "dataset_kwargs", "must be a mapping with at least `config` (the family name)")
    unknown = set(kwargs) - {"config", "seeds", "train_split"}
    if unknown:
        raise _bad(path, f"dataset_kwargs.{sorted(unknown)[0]}", "unknown key (allowed: config, seeds, train_split)")
    config = kwargs.get("config")
    if not isinstance(config, str) or not config:
        raise _bad(path, "dataset_kwargs.config", "must be the family (config) name in the built folder")
    seeds = kwargs.get("seeds", [0, 1, 2])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise _bad(path, "dataset_kwargs.seeds", f"must be a non-empty list of non-negative integers, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise _bad(path, "dataset_kwargs.seeds", f"repeats a seed: {seeds!r}")
    split = data.get("test_split", "test")
    if split not in SPLITS:
        raise _bad(path, "test_split", f"{split!r} is not one of {list(SPLITS)}")
    train_split = kwargs.get("train_split", "train")
    if train_split not in SPLITS:
        raise _bad(path, "dataset_kwargs.train_split", f"{train_split!r} is not one of {list(SPLITS)}")
    output_type = data.get("output_type", "cycle_selection")
    if output_type not in OUTPUT_TYPES:
        raise _bad(path, "output_type", f"{output_type!r} is not one of {list(OUTPUT_TYPES)}")
    tol = data.get("tie_tolerance", DEFAULT_TIE_TOL)
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
    tags = data.get("tag", [])
    tags = [tags] if isinstance(tags, str) else tags
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise _bad(path, "tag", "must be a string or a list of strings")
    return TaskSpec(
        name=name,
        source=source,
        config=config,
        seeds=tuple(seeds),
        split=split,
        metrics=_parse_metrics(path, data.get("metric_list")),
        tie_tolerance=float(tol),
        caption_template=template,
        path=path,
        description=str(data.get("description", "")),
        train_split=train_split,
        tags=tuple(tags),
    )


class TaskRegistry:
    """All tasks and groups under a list of root directories (earlier roots win)."""

    def __init__(self, roots: Iterable[str | Path]) -> None:
        self.roots = [Path(r) for r in roots]
        self._entries: dict[str, TaskSpec | GroupSpec] | None = None

    @classmethod
    def default(cls) -> TaskRegistry:
        """Directories of ``CLIP_CYCLES_TASKS_PATH`` first, then the shipped tasks."""
        extra = [p for p in os.environ.get(TASKS_PATH_ENV, "").split(os.pathsep) if p]
        return cls([*extra, shipped_tasks_dir()])

    @property
    def entries(self) -> dict[str, TaskSpec | GroupSpec]:
        if self._entries is None:
            entries: dict[str, TaskSpec | GroupSpec] = {}
            for root in self.roots:
                if not root.is_dir():
                    raise FileNotFoundError(f"task directory {root} does not exist (check {TASKS_PATH_ENV})")
                for path in sorted(root.rglob("*.yaml")):
                    spec = parse_task(path, root)
                    entries.setdefault(spec.name, spec)
            for spec in entries.values():
                if isinstance(spec, GroupSpec):
                    missing = [t for t in spec.tasks if t not in entries]
                    if missing:
                        raise _bad(spec.path, "task", f"names unknown tasks {missing}")
            self._entries = entries
        return self._entries

    def names(self) -> list[str]:
        """Every task and group name, sorted."""
        return sorted(self.entries)

    def task_names(self) -> list[str]:
        """Names of single tasks (not groups), sorted."""
        return sorted(n for n, s in self.entries.items() if isinstance(s, TaskSpec))

    def group_names(self) -> list[str]:
        """Names of groups, sorted."""
        return sorted(n for n, s in self.entries.items() if isinstance(s, GroupSpec))

    def get(self, name: str) -> TaskSpec | GroupSpec:
        """The spec of ``name``; a ValueError lists the available names when it is unknown."""
        if name not in self.entries:
            raise ValueError(
                f"unknown task {name!r}; available tasks: {', '.join(self.task_names())}; "
                f"collections: {', '.join(self.group_names())}"
            )
        return self.entries[name]

    def expand(self, names: Iterable[str]) -> list[TaskSpec]:
        """Resolve task and group names to tasks, groups expanded, duplicates removed, order kept."""
        out: dict[str, TaskSpec] = {}

        def visit(name: str, trail: tuple[str, ...]) -> None:
            if name in trail:
                raise ValueError(f"task group cycle: {' -> '.join((*trail, name))}")
            spec = self.get(name)
            if isinstance(spec, GroupSpec):
                for member in spec.tasks:
                    visit(member, (*trail, name))
            else:
                out.setdefault(spec.name, spec)

        for name in names:
            visit(name, ())
        return list(out.values())


def is_task_name(name: str) -> bool:
    """Whether ``name`` is in the ``cycles/`` namespace that this registry owns."""
    return name.startswith("cycles/")


def get_task(name: str) -> TaskSpec | GroupSpec:
    """Look ``name`` up in the default registry."""
    return TaskRegistry.default().get(name)


def expand_tasks(names: Iterable[str]) -> list[TaskSpec]:
    """Expand task/group names with the default registry."""
    return TaskRegistry.default().expand(names)
