"""Task names as a harness takes them: ``fnmatch`` patterns, suggestions for unknown names, a listing.

Built on the registry's public API only (:class:`~clip_cycles.tasks.registry.TaskRegistry`'s
``names``, ``get``, ``expand``, ``unavailable``). ``clip-cycles eval --task``, the experiment
commands and clip_benchmark's ``--dataset`` all go through :func:`resolve_task_names`:

- a name with ``*``, ``?`` or ``[`` is a pattern (``cycles/coco_*``), matched against every
  task and collection name, derived ones included; the matches are expanded to single tasks
  (a collection among them adds its members), sorted by name;
- any other name must be a task or collection; an unknown one (a typo, a bare ``cycles``)
  is a ValueError that suggests the nearest names (``difflib``) and how to list them.

With a built folder as the dataset root (:func:`folder_scope`), a pattern keeps the matching
tasks the folder can serve (its families, from its raw source), names the matches it lacks in
one log line, and fails only when it can serve none; a raw root scopes nothing (its families are built).
"""

from __future__ import annotations

import difflib
import fnmatch
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from clip_cycles.data.folder.reader import BuiltFolder
from clip_cycles.data.folder.writer import read_build_info
from clip_cycles.data.sources.registry import provenance_label
from clip_cycles.tasks.registry import DERIVED_NAMESPACES, NAMESPACES, AnyTask, GroupSpec, TaskRegistry, TaskSpec

logger = logging.getLogger(__name__)

#: Characters that make a name an ``fnmatch`` pattern.
PATTERN_CHARACTERS = frozenset("*?[")
#: How many near names an unknown name's message suggests.
SUGGESTIONS = 5


def is_pattern(name: str) -> bool:
    """Whether ``name`` is an ``fnmatch`` pattern rather than one task name."""
    return any(c in PATTERN_CHARACTERS for c in name)


def suggest(name: str, registry: TaskRegistry, limit: int = SUGGESTIONS) -> list[str]:
    """The names nearest to ``name``: collections and tasks of a bare namespace, else ``difflib`` matches
    of the part after the namespace (same namespace first)."""
    names = registry.names()
    bare = name.strip("/")
    if bare in NAMESPACES:  # `cycles`: its collections first, then its first tasks
        inside = [n for n in names if n.startswith(f"{bare}/")]
        groups = [n for n in inside if isinstance(registry.get(n), GroupSpec)]
        return (groups + [n for n in inside if n not in groups])[:limit]
    if "/" not in name:
        return difflib.get_close_matches(name, names, n=limit, cutoff=0.6)
    # Compare the part after the namespace: a shared prefix (`cycles_probe/`) would make any two names look alike.
    namespace, tail = name.split("/", 1)
    tails: dict[str, list[str]] = {}
    for candidate in names:
        if "/" in candidate:
            tails.setdefault(candidate.split("/", 1)[1], []).append(candidate)
    close: list[str] = []
    for found in difflib.get_close_matches(tail, list(tails), n=limit, cutoff=0.6):
        # The same namespace first, then the same family in the others (a wrong namespace).
        close += sorted(tails[found], key=lambda c: (c.split("/", 1)[0] != namespace, c))
    return list(dict.fromkeys(close))[:limit]


def unknown_name_message(name: str, registry: TaskRegistry) -> str:
    """The sentence for a name that is no task, collection or matching pattern."""
    near = suggest(name, registry)
    what = f"no task or collection matches the pattern {name!r}" if is_pattern(name) else f"unknown task {name!r}"
    hint = f"; did you mean {', '.join(near)}?" if near else "."
    derived = ", ".join(f"{n.prefix}/<x>" for n in DERIVED_NAMESPACES)
    return (
        f"{what}{hint} List the tasks with `clip-cycles tasks [PATTERN]` (e.g. 'cycles/coco_*'); "
        f"{derived} derive from the cycles/ tasks and collections"
    )


def match(pattern: str, registry: TaskRegistry) -> list[str]:
    """Task and collection names matching ``pattern`` (``fnmatch``, case-sensitive), sorted."""
    return [n for n in registry.names() if fnmatch.fnmatchcase(n, pattern)]


@dataclass(frozen=True)
class FolderScope:
    """What a built dataset folder can serve: its families and the raw source they come from."""

    root: Path
    families: frozenset[str]
    raw_source: str
    builder: str

    def serves(self, task: AnyTask, registry: TaskRegistry) -> bool:
        """Whether ``task`` reads only families this folder holds, from this folder's raw source."""
        if not isinstance(task, TaskSpec) or task.source != self.raw_source:
            return False
        if task.members:  # a multi-family task: every member's family
            return all(self.serves(member, registry) for member in registry.expand(task.members))
        return bool(task.config) and task.config in self.families

    @property
    def label(self) -> str:
        return f"{self.root} ({provenance_label(self.builder, self.raw_source)}; families {', '.join(sorted(self.families))})"


def folder_scope(root: str | Path | None) -> FolderScope | None:
    """The :class:`FolderScope` of ``root`` when it is a built folder (``build_info.json``), else None.

    Reads ``build_info.json`` only (its files are verified when the tasks are loaded). None for no
    root, a raw root or a missing path (the loader then says what is wrong with it).
    """
    if root is None or str(root) == "":
        return None
    path = Path(root).expanduser()
    if not (path / "build_info.json").is_file():
        return None
    folder = BuiltFolder(path, read_build_info(path))
    return FolderScope(path, frozenset(folder.info.get("families", {})), folder.raw_source, folder.builder)


def _scoped(pattern: str, tasks: list[AnyTask], scope: FolderScope, registry: TaskRegistry) -> list[AnyTask]:
    """The matches ``scope`` serves; the others named in one log line; none served is a ValueError."""
    kept = [task for task in tasks if scope.serves(task, registry)]
    lacking = [task.name for task in tasks if task not in kept]
    if not kept:
        raise ValueError(
            f"the pattern {pattern!r} matches {len(tasks)} tasks, but the built folder {scope.label} serves none of "
            f"them (a task reads the families the folder holds, from its raw source: cycles/{scope.raw_source}_...); "
            f"pass a pattern over those, or the raw root to build the matching families"
        )
    if lacking:
        logger.info(
            "%s: scoring the %d matching tasks %s holds; not in it: %s",
            pattern,
            len(kept),
            scope.root,
            ", ".join(lacking),
        )
    return kept


def resolve_task_names(names: Iterable[str], registry: TaskRegistry | None = None, scope: FolderScope | None = None) -> list[str]:
    """Names of single tasks for ``names`` (patterns matched, collections kept as given), order kept, no duplicates.

    A collection named exactly stays a collection (the caller expands it); a pattern gives the
    single tasks of everything it matches, and with ``scope`` (a built folder, :func:`folder_scope`)
    only those the folder serves. Unknown names and empty patterns raise a ValueError with
    suggestions; an unavailable task raises the registry's error (file and line).
    """
    registry = registry or TaskRegistry.default()
    out: dict[str, None] = {}
    for name in names:
        if is_pattern(name):
            found = match(name, registry)
            if not found:
                raise ValueError(unknown_name_message(name, registry))
            tasks = sorted({task.name: task for task in registry.expand(found)}.values(), key=lambda t: t.name)
            if scope is not None:
                tasks = _scoped(name, tasks, scope, registry)
            out.update(dict.fromkeys(task.name for task in tasks))
        elif registry.has(name):
            out[name] = None
        elif name in registry.unavailable:
            registry.get(name)  # raises the file's own error
        else:
            raise ValueError(unknown_name_message(name, registry))
    return list(out)


@dataclass(frozen=True)
class TaskLine:
    """One line of ``clip-cycles tasks``: name, kind, what it reads, one-line description."""

    name: str
    kind: str
    reads: str
    description: str

    def format(self, widths: tuple[int, int, int]) -> str:
        name, kind, reads = widths
        return f"{self.name:<{name}}  {self.kind:<{kind}}  {self.reads:<{reads}}  {self.description}".rstrip()


def _reads(spec: AnyTask | GroupSpec) -> str:
    if isinstance(spec, GroupSpec):
        return f"{len(spec.tasks)} tasks"
    members = getattr(spec, "members", ())
    if members:
        return f"{len(members)} families"
    config = getattr(spec, "config", "") or getattr(spec, "strategy", "")
    return f"{spec.source}/{config}" if config else spec.source


def task_lines(pattern: str | None, registry: TaskRegistry | None = None) -> list[TaskLine]:
    """One :class:`TaskLine` per task and collection matching ``pattern`` (all when None), sorted by name.

    A pattern without wildcards lists that name and everything under it as a prefix
    (``cycles`` lists the ``cycles/`` namespace); no match is a ValueError with suggestions.
    """
    registry = registry or TaskRegistry.default()
    if pattern is None:
        names = registry.names()
    elif is_pattern(pattern):
        names = match(pattern, registry)
    else:
        names = [n for n in registry.names() if n == pattern or n.startswith(pattern.rstrip("/") + "/")]
    if not names:
        raise ValueError(unknown_name_message(pattern or "", registry))
    lines = []
    for name in names:
        spec = registry.get(name)
        kind = "collection" if isinstance(spec, GroupSpec) else spec.output_type
        description = " ".join(spec.description.split())  # one line, whatever the YAML's line breaks
        lines.append(TaskLine(name, kind, _reads(spec), description))
    return lines


def format_task_lines(lines: Sequence[TaskLine], unavailable: dict[str, str] | None = None) -> str:
    """The listing: a header, one line per task, then the unavailable task files (name: reason)."""
    header = TaskLine("name", "type", "reads", "description")
    widths = tuple(max(len(getattr(line, key)) for line in (header, *lines)) for key in ("name", "kind", "reads"))
    body = [line.format(widths) for line in (header, *lines)]  # type: ignore[arg-type]
    for name, reason in sorted((unavailable or {}).items()):
        body.append(f"unavailable: {name}: {reason}")
    return "\n".join(body) + "\n"


__all__ = [
    "PATTERN_CHARACTERS",
    "FolderScope",
    "folder_scope",
    "TaskLine",
    "format_task_lines",
    "is_pattern",
    "match",
    "resolve_task_names",
    "suggest",
    "task_lines",
    "unknown_name_message",
]
