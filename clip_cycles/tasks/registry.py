"""The task registry: one YAML file per task under ``tasks/``, validated on load.

A task says which built dataset folder config to score, on which split and seeds,
with which metrics, tie tolerance and caption formatting; key names follow lmms-eval
(``task``, ``dataset_path``, ``dataset_kwargs``, ``test_split``, ``metric_list``,
``doc_to_text``)::

    include: _coco_yaml                # tag, dataset_path, metrics, ... from the template
    task: cycles/coco_strict_size
    dataset_kwargs: {config: strict_size, seeds: [0, 1, 2]}

A collection (``group``) names other tasks (``group: cycles/coco_all``, ``task: [...]``).
``cycles/<name>`` resolves to ``tasks/cycles/<name>.yaml``; adding a task is adding a
YAML file, to the shipped ``tasks/`` directory or to a directory on
``CLIP_CYCLES_TASKS_PATH`` (``os.pathsep``-separated). How files are read (regular files,
bounded, no aliases, ``include:``) is :mod:`clip_cycles.tasks.task_files`; what each
``output_type`` accepts is declared in :mod:`clip_cycles.tasks.task_schema` (``clip-cycles
schema task`` prints it as a JSON Schema). This module turns validated files into specs
(:class:`TaskSpec`, :class:`AttributeTaskSpec`, :class:`GroupSpec`) and owns the names.

Derived namespaces (:data:`DERIVED_NAMESPACES`) need no YAML: ``cycles_probe/<x>`` and
``cycles_oe/<x>`` are the task or collection ``cycles/<x>`` with the experiment's
output type and default settings, ``cycles_transfer/<collection>`` is one transfer task
over the collection's families. Mirrored sources (:data:`MIRRORED_SOURCES`) need no YAML either:
``cycles/shapes_<x>`` is ``cycles/coco_<x>`` scored on the shapes world's build (and
``cycles/shapes_gqa_<x>`` is ``cycles/gqa_<x>``). A YAML file of the same name takes precedence.

The prefix after ``cycles/`` names the RAW SOURCE a task's cycles come from (``coco_``: COCO
annotations, ``gqa_``: GQA scene graphs, ``shapes_``/``shapes_gqa_``: the synthetic shapes world),
the task's ``source``; the family builder is the one whose families hold its ``config``
(:func:`source_twins` names the same family's task for each raw source).

A file on ``CLIP_CYCLES_TASKS_PATH`` named like a task of a later root (a shipped task, or the
shapes twin of one) is used, with one warning per process naming both files (:func:`warn_shadowing`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Union

from clip_cycles.schemas.declared import validate
from clip_cycles.settings import TASKS_PATH_ENV, extra_task_dirs
from clip_cycles.tasks.task_files import INCLUDE_KEY, bad_field, is_template, read_task_yaml
from clip_cycles.tasks.task_schema import (
    AGGREGATIONS,
    ATTRIBUTE_EXPERIMENT_KWARGS,
    AUDIT_FITS,
    CONCEPT_EMBEDDINGS,
    METRICS,
    OUTPUT_TYPES,
    SPLITS,
    GroupFile,
    OutputType,
    task_model,
)

#: Names other modules import from here; the format itself is declared in :mod:`clip_cycles.tasks.task_schema`.
__all__ = [
    "AGGREGATIONS",
    "ATTRIBUTE_EXPERIMENT_KWARGS",
    "AUDIT_FITS",
    "BASE_NAMESPACE",
    "CONCEPT_EMBEDDINGS",
    "DERIVED_NAMESPACES",
    "METRICS",
    "NAMESPACES",
    "OUTPUT_TYPES",
    "SPLITS",
    "AnyTask",
    "AttributeTaskSpec",
    "DerivedNamespace",
    "INCLUDE_KEY",
    "GroupSpec",
    "MIRRORED_SOURCES",
    "MirroredSource",
    "MetricSpec",
    "OutputType",
    "source_twins",
    "TaskRegistry",
    "TaskSpec",
    "expand_tasks",
    "get_task",
    "is_task_name",
    "is_template",
    "parse_task",
    "read_task_yaml",
    "shipped_tasks_dir",
]


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


@dataclass(frozen=True)
class MirroredSource:
    """``cycles/<prefix><x>``: the cycle task ``cycles/<base_prefix><x>`` on another raw source's build.

    The same family, seeds, splits, metrics and settings; only the source, the source's tag and
    the description's opening label change (``"COCO family ..."`` -> ``"Builder COCO, source shapes world: family ..."``).
    The spec keeps the base task's file as its ``path``: that file holds every value it has.
    """

    prefix: str
    base_prefix: str
    source: str
    base_source: str
    label: str
    base_label: str

    def base_name(self, name: str) -> str | None:
        """The base task's name of the mirrored task ``name``; None when ``name`` is not in this mirror."""
        head = f"{BASE_NAMESPACE}/{self.prefix}"
        return f"{BASE_NAMESPACE}/{self.base_prefix}{name[len(head) :]}" if name.startswith(head) else None

    def mirrors(self, spec: AnyTask | GroupSpec) -> bool:
        """Whether ``spec`` is a single cycle task of the base source under the base prefix."""
        return (
            isinstance(spec, TaskSpec)
            and spec.name.startswith(f"{BASE_NAMESPACE}/{self.base_prefix}")
            and spec.output_type == "cycle_selection"
            and spec.source == self.base_source
            and not spec.members
        )

    def mirror(self, spec: TaskSpec) -> TaskSpec:
        """The mirrored task of ``spec`` (which :meth:`mirrors` accepts)."""
        rest = spec.name[len(f"{BASE_NAMESPACE}/{self.base_prefix}") :]
        description = spec.description
        if description.startswith(f"{self.base_label} "):
            description = f"{self.label}{description[len(self.base_label) :]}"
        elif description:
            description = f"{self.label}: {description}"
        return replace(
            spec,
            name=f"{BASE_NAMESPACE}/{self.prefix}{rest}",
            source=self.source,
            description=description,
            tags=tuple(self.source if tag == self.base_source else tag for tag in spec.tags),
        )


#: Sources whose cycle tasks mirror another source's: the shapes world is built by the COCO and the
#: GQA builders, so each COCO and GQA task has a shapes twin (``cycles/shapes_all`` collects them).
#: Earlier entries win a name two would give.
MIRRORED_SOURCES: tuple[MirroredSource, ...] = (
    MirroredSource("shapes_", "coco_", "shapes", "coco", "Builder COCO, source shapes world:", "COCO"),
    MirroredSource("shapes_gqa_", "gqa_", "shapes", "gqa", "Builder GQA, source shapes world:", "GQA"),
)


def source_twins(name: str) -> dict[str, str]:
    """Raw source -> the ``cycles/`` task reading the same family from that source (``name`` itself included).

    ``cycles/coco_x`` and ``cycles/shapes_x`` are twins (``{"coco": ..., "shapes": ...}``), as are
    ``cycles/gqa_x`` and ``cycles/shapes_gqa_x``; a name outside the mirrored prefixes has none (``{}``).
    By name only: a twin may not exist (the message that names it says "would accept").
    """
    for source in sorted(MIRRORED_SOURCES, key=lambda s: -len(s.prefix)):
        base = source.base_name(name)
        if base is not None:
            break
    else:
        base = name
    for source in MIRRORED_SOURCES:
        head = f"{BASE_NAMESPACE}/{source.base_prefix}"
        if base.startswith(head):
            rest = base[len(head) :]
            twins = {source.base_source: base}
            for mirror in MIRRORED_SOURCES:
                if mirror.base_prefix == source.base_prefix:
                    twins.setdefault(mirror.source, f"{BASE_NAMESPACE}/{mirror.prefix}{rest}")
            return twins
    return {}


logger = logging.getLogger(__name__)
#: (task name, used file, shadowed file) pairs already warned about: one warning per process each.
_WARNED_SHADOWS: set[tuple[str, str, str]] = set()


def warn_shadowing(name: str, used: Path, shadowed: Path, twin_of: str | None = None) -> None:
    """Say once per process that ``used`` is taken for task ``name`` instead of the later root's ``shadowed``."""
    key = (name, str(used), str(shadowed))
    if key in _WARNED_SHADOWS:
        return
    _WARNED_SHADOWS.add(key)
    what = f"the shapes twin of {twin_of} ({shadowed})" if twin_of else str(shadowed)
    logger.warning(
        "task %s: %s (an earlier task folder, e.g. on %s) is used instead of %s, which has the same name; "
        "rename the file to keep both",
        name,
        used,
        TASKS_PATH_ENV,
        what,
    )


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
    #: ``experiment_kwargs.protocol``: ``"project"`` (this project's split protocol) or ``"paper2"``.
    protocol: str = "project"
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


#: Where a built (wheel or sdist) install keeps the top-level ``tasks/`` folder, inside the package
#: (``setup.py`` copies it there; the name keeps clear of the ``clip_cycles.tasks`` Python package).
INSTALLED_TASKS_DIR = Path("package_data") / "tasks"


def shipped_tasks_dir() -> Path:
    """The directory of the task YAMLs that ship with clip_cycles.

    An installed wheel holds the top-level ``tasks/`` folder as ``clip_cycles/package_data/tasks``;
    a source checkout or editable install reads the repository's ``tasks/`` itself (one copy).
    """
    package = Path(__file__).resolve().parents[1]
    installed = package / INSTALLED_TASKS_DIR
    if installed.is_dir():
        return installed
    checkout = package.parent / "tasks"
    if checkout.is_dir() and (package.parent / "setup.cfg").is_file():
        return checkout
    raise FileNotFoundError(
        f"the shipped task YAMLs are missing: neither {installed} (an installed clip_cycles) nor {checkout} "
        "(a source checkout) exists; reinstall clip_cycles"
    )


def _metrics(model: Any) -> tuple[MetricSpec, ...]:
    return tuple(MetricSpec(m.metric, m.aggregation, m.higher_is_better) for m in model.metric_list)


def _cycle_spec(task: Any, path: Path) -> TaskSpec:
    kwargs = task.dataset_kwargs
    return TaskSpec(
        name=task.task,
        source=task.dataset_path,
        config=getattr(kwargs, "config", ""),
        seeds=tuple(kwargs.seeds),
        split=task.test_split,
        metrics=_metrics(task),
        tie_tolerance=float(task.tie_tolerance),
        caption_template=task.doc_to_text,
        path=path,
        description=task.description,
        train_split=kwargs.train_split,
        audit_fit=task.audit_fit,
        tags=tuple(task.tag),
        output_type=task.output_type,
        experiment_kwargs=dict(task.experiment_kwargs),
        members=tuple(getattr(kwargs, "tasks", ())),
    )


def _attribute_spec(task: Any, path: Path) -> AttributeTaskSpec:
    kwargs, settings = task.dataset_kwargs, task.experiment_kwargs
    if settings.protocol == "paper2" and "seeds" in kwargs.model_fields_set:
        fixed = "protocol paper2 fixes its seeds (random 70, shuffle splits 42, k-means 0); remove seeds"
        raise bad_field(path, "dataset_kwargs.seeds", fixed)
    return AttributeTaskSpec(
        name=task.task,
        strategy=kwargs.strategy,
        seeds=tuple(kwargs.seeds),
        metrics=_metrics(task),
        path=path,
        k=kwargs.k,
        min_concepts=kwargs.min_concepts,
        embedding=kwargs.embedding,
        groups=kwargs.groups,
        pairs=kwargs.pairs,
        concept_list=kwargs.concept_list,
        categories=kwargs.categories,
        split_embeddings=kwargs.split_embeddings,
        attributes=kwargs.attributes,
        concept_sets=kwargs.concept_sets,
        split_params=dict(kwargs.split_params),
        experiment_kwargs=settings.model_dump(exclude_unset=True),  # what the file says, as before
        protocol=settings.protocol,
        description=task.description,
        tags=tuple(task.tag),
    )


#: Anything a task name may resolve to.
AnyTask = Union[TaskSpec, AttributeTaskSpec]


def parse_task(path: Path, root: Path) -> TaskSpec | AttributeTaskSpec | GroupSpec:
    """Validate one YAML file found under ``root`` (its includes resolved) against its declared format
    (:mod:`clip_cycles.tasks.task_schema`) and return its spec; errors name the file, line and field."""
    data = read_task_yaml(path)
    output_type = data.get("output_type", "cycle_selection")
    if "group" not in data and (not isinstance(output_type, str) or output_type not in OUTPUT_TYPES):
        raise bad_field(path, "output_type", f"{output_type!r} is not one of {list(OUTPUT_TYPES)}")
    model = task_model(data)
    parsed, problem = validate(model, data, context={"name": path.relative_to(root).with_suffix("").as_posix()})
    if problem is not None:
        raise bad_field(path, *problem)
    if isinstance(parsed, GroupFile):
        return GroupSpec(name=parsed.group, tasks=tuple(parsed.task), path=path, description=parsed.description)
    if output_type == "attribute_splits":
        return _attribute_spec(parsed, path)
    return _cycle_spec(parsed, path)


def _mirror(entries: Mapping[str, AnyTask | GroupSpec], unavailable: dict[str, str]) -> dict[str, AnyTask]:
    """The tasks of :data:`MIRRORED_SOURCES` (explicit YAMLs are not overwritten); a mirror of an
    unavailable base task is unavailable with the base's reason."""
    mirrored: dict[str, AnyTask] = {}
    for source in MIRRORED_SOURCES:
        for spec in entries.values():
            if source.mirrors(spec):
                twin = source.mirror(spec)  # type: ignore[arg-type]
                if twin.name not in entries and twin.name not in mirrored and twin.name not in unavailable:
                    mirrored[twin.name] = twin
        for name in list(unavailable):
            base = f"{BASE_NAMESPACE}/{source.base_prefix}"
            if name.startswith(base):
                twin_name = f"{BASE_NAMESPACE}/{source.prefix}{name[len(base) :]}"
                if twin_name not in entries and twin_name not in mirrored:
                    unavailable.setdefault(twin_name, unavailable[name])
    return mirrored


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


#: A name that can only be a file's location below a root: no pattern, no ``..``, no hidden or template part.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(?:/[A-Za-z0-9][A-Za-z0-9_.-]*)+")


class TaskRegistry:
    """All tasks and groups under a list of root directories (earlier roots win), plus the derived namespaces.

    A YAML file that does not validate makes only its own task unavailable:
    :attr:`unavailable` maps the name its location gives it to the error (file, line,
    field); asking for that task raises that error, every other task keeps working.

    Looking up plain tasks (:meth:`get`, :meth:`expand`, :meth:`has`) reads their own files
    only (:meth:`_from_own_file`); listing, patterns, collections and derived names read every file.
    """

    def __init__(self, roots: Iterable[str | Path]) -> None:
        self.roots = [Path(r) for r in roots]
        self._entries: dict[str, AnyTask | GroupSpec] | None = None
        self._derived: set[str] = set()
        self._own: dict[str, AnyTask] = {}
        self.unavailable: dict[str, str] = {}

    def _from_own_file(self, name: str) -> AnyTask | None:
        """The task ``name`` from its own file alone, when that is the spec reading every file would give.

        The full registry keys each file by its location (a file must name itself so) and lets
        the first root win; a single task (not a collection, not a multi-family task) is
        therefore the spec of the first root's ``<name>.yaml``, whatever the other files hold.
        Anything else returns None, and the caller reads every file: a name that is no plain
        location, a missing, template or unreadable file, a folder or a symlinked folder on the
        way (``rglob`` does not enter those), a collection, a derived name, a file that does not validate.
        """
        if self._entries is not None or not _PLAIN_NAME.fullmatch(name):
            return None
        if name in self._own:
            return self._own[name]
        for index, root in enumerate(self.roots):
            if not root.is_dir():
                return None
            path = root / f"{name}.yaml"
            if not path.exists() and not path.is_symlink():
                continue
            folders = [root / part for part in Path(name).parents if part != Path(".")]
            if not path.is_file() or is_template(path) or any(folder.is_symlink() for folder in folders):
                return None
            try:
                spec = parse_task(path, root)
            except ValueError:
                return None  # the full registry records (and raises) the file's own error
            if isinstance(spec, GroupSpec) or getattr(spec, "members", ()) or spec.name != name:
                return None
            self._check_shadowing(name, index, path)
            self._own[name] = spec
            return spec
        return self._mirror_from_own_file(name)

    def _mirror_from_own_file(self, name: str) -> TaskSpec | None:
        """The mirrored task ``name`` from its base task's own file (no root holds a file of its own name)."""
        for source in MIRRORED_SOURCES:
            base_name = source.base_name(name)
            base = self._from_own_file(base_name) if base_name else None
            if base is not None and source.mirrors(base):
                self._own[name] = source.mirror(base)  # type: ignore[arg-type]
                return self._own[name]  # type: ignore[return-value]
        return None

    def _check_shadowing(self, name: str, index: int, path: Path) -> None:
        """Warn (once) when a root after ``self.roots[index]`` also defines ``name``: its own file, or the base
        file a mirrored (shapes) task of that name would come from."""
        for root in self.roots[index + 1 :]:
            if (root / f"{name}.yaml").is_file():
                warn_shadowing(name, path, root / f"{name}.yaml")
                return
        for root in self.roots[index + 1 :]:
            for source in MIRRORED_SOURCES:
                base = source.base_name(name)
                if base and (root / f"{base}.yaml").is_file():
                    warn_shadowing(name, path, root / f"{base}.yaml", twin_of=base)
                    return

    def has(self, name: str) -> bool:
        """Whether ``name`` is an available task or collection (derived ones included)."""
        return self._from_own_file(name) is not None or name in self.entries

    @classmethod
    def default(cls) -> TaskRegistry:
        """Directories of ``CLIP_CYCLES_TASKS_PATH`` first, then the shipped tasks."""
        return cls([*extra_task_dirs(), shipped_tasks_dir()])

    @property
    def entries(self) -> dict[str, AnyTask | GroupSpec]:
        if self._entries is None:
            entries: dict[str, AnyTask | GroupSpec] = {}
            for index, root in enumerate(self.roots):
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
                    if index + 1 < len(self.roots):
                        self._check_shadowing(name, index, path)
            entries.update(_mirror(entries, self.unavailable))
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
                        error = bad_field(
                            spec.path, "task", f"names task {broken[0]!r}, which is unavailable ({self.unavailable[broken[0]]})"
                        )
                    elif missing:
                        error = bad_field(spec.path, "task", f"names unknown tasks {missing}")
                elif isinstance(spec, TaskSpec) and spec.members:
                    bad = [t for t in spec.members if not (isinstance(entries.get(t), TaskSpec) and entries[t].config)]  # type: ignore[union-attr]
                    if bad:
                        error = bad_field(spec.path, "dataset_kwargs.tasks", f"names unknown or non-cycle tasks {bad}")
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
        own = self._from_own_file(name)
        if own is not None:
            return own
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
        own = [self._from_own_file(name) for name in names]
        if all(spec is not None for spec in own):  # single tasks only: no other file is read
            out: dict[str, AnyTask] = {}
            for spec in own:
                out.setdefault(spec.name, spec)  # type: ignore[union-attr]
            return list(out.values())
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
