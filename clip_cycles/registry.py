"""One registry for every kind of named thing: commands, backends, sources, families, heads, ...

A :class:`Registry` maps a name to an object or to a lazy ``"module:attribute"`` target
(resolved with :func:`pkgutil.resolve_name` on first use, then cached), optionally reads a
``importlib.metadata`` entry-point group, can be frozen, and words its two errors the same
way for every kind: ``unknown <kind> 'x'; registered: a, b (did you mean 'a'?)`` and
``<kind> 'x' is already registered (by ...); choose another name or pass replace=True``.
"""

from __future__ import annotations

import difflib
import pkgutil
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable, Generic, Iterator, Sequence, TypeVar

T = TypeVar("T")

#: Where an entry came from: shipped with the package, registered in code, or read from an entry-point group.
ORIGINS = ("builtin", "registered", "entry point")


@dataclass(frozen=True)
class Entry:
    """One registered name: its target (an object or ``"module:attribute"``) and where it came from."""

    name: str
    target: Any
    origin: str = "registered"
    distribution: str | None = None  # the distribution that declared an entry point
    version: str | None = None  # and its version (both enter cache keys of third-party code)
    description: str = ""  # one line for listings (e.g. `clip-cycles --help`), readable without resolving the target

    @property
    def lazy(self) -> bool:
        return isinstance(self.target, str)


def resolve_target(target: str) -> Any:
    """Import ``"module:attribute"`` (or ``"module.attribute"``) with :func:`pkgutil.resolve_name`."""
    return pkgutil.resolve_name(target)


def close_matches(name: str, names: list[str], n: int = 3) -> list[str]:
    """Registered names close to ``name`` (difflib), best first."""
    return difflib.get_close_matches(str(name), names, n=n, cutoff=0.6)


class Registry(Generic[T]):
    """Name -> object (or lazy ``"module:attribute"``), with entry points, freeze and suggestions.

    Parameters
    ----------
    kind:
        What the registry holds, in words ("model backend", "score head"); every message uses it.
    entry_point_group:
        An ``importlib.metadata`` entry-point group read on first lookup (names registered in
        code take precedence).
    ordered:
        List names in registration order (entry points after, sorted) instead of sorted, for
        registries whose order is part of the output (report sections, synthetic controls).
    """

    def __init__(self, kind: str, entry_point_group: str | None = None, ordered: bool = False) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self.ordered = ordered
        self._entries: dict[str, Entry] = {}
        self._resolved: dict[str, T] = {}
        self._entry_points: dict[str, Entry] | None = None
        self._frozen = False

    # -- registration ---------------------------------------------------------------------
    def register(
        self, name: str, target: T | str, replace: bool = False, origin: str = "registered", description: str = ""
    ) -> T | str:
        """Register ``target`` (an object or ``"module:attribute"``) under ``name``; returns ``target``.

        ``origin="builtin"`` marks what the package itself ships (a backend's cache key tells
        the package's own code from a third party's).
        """
        if origin not in ORIGINS[:2]:
            raise ValueError(f"origin of a {self.kind} registered in code must be one of {ORIGINS[:2]}, got {origin!r}")
        self.check_free(name, replace=replace)
        self._entries[name] = Entry(name=name, target=target, origin=origin, description=description)
        self._resolved.pop(name, None)
        return target

    def check_free(self, name: str, replace: bool = False) -> None:
        """Raise the registry's error when ``name`` cannot be registered now (frozen, not a name, taken).

        For a caller that prepares its object only once the name is known to be free.
        """
        if self._frozen:
            raise ValueError(f"the {self.kind} registry is frozen; {name!r} cannot be registered now")
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} name must be a non-empty string, got {name!r}")
        if name in self._entries and not replace:
            raise ValueError(
                f"{self.kind} {name!r} is already registered (by {self._describe(self._entries[name].target)}); "
                "choose another name or pass replace=True"
            )

    def decorator(self, name: str, replace: bool = False) -> Callable[[T], T]:
        """``@registry.decorator(name)``: register the decorated object under ``name``."""

        def wrap(obj: T) -> T:
            self.register(name, obj, replace=replace)
            return obj

        return wrap

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests and plugins that register temporarily)."""
        if self._frozen:
            raise ValueError(f"the {self.kind} registry is frozen; {name!r} cannot be removed now")
        self._entries.pop(name, None)
        self._resolved.pop(name, None)

    def freeze(self) -> None:
        """Refuse every later registration and removal."""
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    # -- lookup ---------------------------------------------------------------------------
    def entry(self, name: str) -> Entry:
        """The entry of ``name`` (registered first, then entry points); unknown names raise."""
        if not isinstance(name, str):  # a list or None is an unknown name, not a TypeError
            raise ValueError(self.unknown_message(name))
        if name in self._entries:
            return self._entries[name]
        points = self._load_entry_points()
        if name in points:
            return points[name]
        raise ValueError(self.unknown_message(name))

    def get(self, name: str) -> T:
        """The object registered under ``name``, resolving a lazy target once."""
        if isinstance(name, str) and name in self._resolved:
            return self._resolved[name]
        found = self.entry(name)
        value = resolve_target(found.target) if found.lazy else found.target
        self._resolved[name] = value
        return value

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        return name in self._entries or name in self._load_entry_points()

    def names(self, entry_points: bool = True) -> list[str]:
        """Every registered name, sorted or in registration order (entry points too unless ``entry_points=False``)."""
        points = [name for name in sorted(self._load_entry_points()) if name not in self._entries] if entry_points else []
        if self.ordered:
            return [*self._entries, *points]
        return sorted([*self._entries, *points])

    def registered(self) -> dict[str, Entry]:
        """The entries registered in code (not entry points), in registration order."""
        return dict(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def items(self) -> list[tuple[str, T]]:
        """``(name, object)`` for every name, resolving lazy targets."""
        return [(name, self.get(name)) for name in self.names()]

    def values(self) -> list[T]:
        return [self.get(name) for name in self.names()]

    # -- messages -------------------------------------------------------------------------
    def unknown_message(self, name: object, names: Sequence[str] | None = None, kind: str | None = None) -> str:
        """The one wording of an unknown name, with close matches.

        ``names`` and ``kind`` narrow the message to a part of the registry (the sources
        that are family builders: ``unknown family builder 'x'; registered: coco, gqa``).
        """
        known = self.names() if names is None else list(names)
        message = f"unknown {kind or self.kind} {name!r}; registered: {', '.join(known) or '(none)'}"
        near = close_matches(str(name), known)
        if near:
            message += f" (did you mean {', '.join(repr(n) for n in near)}?)"
        return message

    def _describe(self, target: Any) -> str:
        if isinstance(target, str):
            return target
        owner = getattr(target, "__module__", None)
        qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
        return f"{owner}:{qualname}" if owner else qualname

    def _load_entry_points(self) -> dict[str, Entry]:
        if self.entry_point_group is None:
            return {}
        if self._entry_points is None:
            found: dict[str, Entry] = {}
            for point in metadata.entry_points(group=self.entry_point_group):
                dist = getattr(point, "dist", None)
                entry = Entry(point.name, point.value, "entry point", getattr(dist, "name", None), getattr(dist, "version", None))
                found.setdefault(point.name, entry)
            self._entry_points = found
        return self._entry_points

    def refresh_entry_points(self) -> None:
        """Read the entry-point group again on next lookup (after an install in this process)."""
        self._entry_points = None
        self._resolved = {k: v for k, v in self._resolved.items() if k in self._entries}

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} registered)"
