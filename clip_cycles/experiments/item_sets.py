"""Which items a result scored: its item set, and why two item sets are not one comparison.

A result record names what it scored with three top-level fields (beside ``dataset`` and
``model``): ``split``, ``items_sha256`` (a digest of exactly the cycles scored) and
``source`` (one line naming the world or raw root, e.g. ``"shapes world: 1000 images,
64 px, seed 0, val 0.25"``). Two numbers are put in one column (the page) or one table row
(the report) only when their ``items_sha256`` match; otherwise they stay apart and
:func:`item_set_notes` says why ("two worlds: ... differ in n_images (1000 vs 400)",
"split validation vs test"). Older results lack the fields: their item set is "not
recorded", which is said wherever they are shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

#: The top-level fields of a result record naming its item set.
ITEM_SET_FIELDS: tuple[str, ...] = ("split", "items_sha256", "source")
#: The words shown for a result without ``items_sha256``.
NOT_RECORDED = "item set not recorded"
#: Hex digits of ``items_sha256`` in a label.
LABEL_HEX = 12
#: How a shapes-world source line names each world parameter (both spellings that writers use).
SHAPES_PARAMETERS: tuple[tuple[str, tuple[str, ...], type], ...] = (
    ("n_images", (r"(\d+)\s+images\b", r"n_images\s*[=:]\s*(\d+)"), int),
    ("image_size", (r"(\d+)\s*px\b", r"image_size\s*[=:]\s*(\d+)"), int),
    ("seed", (r"\bseed\s*[=:]?\s*(-?\d+)",), int),
    ("val_fraction", (r"\bval(?:_fraction)?\s*[=:]?\s*(\d*\.?\d+)",), float),
)
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ItemSet:
    """What a result scored: its split, the digest of its cycles and the line naming its source (each may be missing)."""

    split: str | None = None
    items_sha256: str | None = None
    source: str | None = None

    @property
    def recorded(self) -> bool:
        """Whether the result names its items (``items_sha256``); only then can it be matched with another."""
        return self.items_sha256 is not None

    @property
    def ident(self) -> str:
        """The key two results must share to be compared: ``items_sha256``, or ``not-recorded``."""
        return self.items_sha256 if self.items_sha256 is not None else "not-recorded"

    @property
    def short(self) -> str:
        """The first :data:`LABEL_HEX` hex digits of ``items_sha256`` (``not-recorded`` without one)."""
        return self.items_sha256[:LABEL_HEX] if self.items_sha256 is not None else "not-recorded"

    def label(self, family: str) -> str:
        """A short name of this item set of ``family``: ``<family>.<12 hex>``."""
        return f"{family}.{self.short}"

    def describe(self) -> str:
        """One line for a table cell: the source, the split and the digest's prefix (or "item set not recorded")."""
        if not self.recorded:
            known = "; ".join(p for p in (self.source, f"split {self.split}" if self.split else None) if p)
            return f"{NOT_RECORDED}" + (f" ({known})" if known else "")
        return f"{self.source or 'source not recorded'}; split {self.split or 'not recorded'}; items {self.short}"

    def world(self) -> dict[str, Any] | None:
        """The shapes-world parameters named by ``source`` (:func:`shapes_parameters`), or None."""
        return shapes_parameters(self.source)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def item_set_of(record: Mapping[str, Any], fallback: Mapping[str, Any] | None = None) -> ItemSet:
    """The item set a result ``record`` names; each field missing from it is looked up in ``fallback``.

    ``fallback`` is where an older or nested writer kept the field (a record's ``metrics``,
    or an experiment record around a family's metrics). An ``items_sha256`` that is not 64
    lower-case hex digits is refused with a ValueError naming the value.
    """
    values: dict[str, str | None] = {}
    for name in ITEM_SET_FIELDS:
        value = _text(record.get(name))
        if value is None and fallback is not None:
            value = _text(fallback.get(name))
        values[name] = value
    sha = values["items_sha256"]
    if sha is not None and not _SHA256.fullmatch(sha):
        raise ValueError(f"field 'items_sha256' is {sha!r}; expected 64 lower-case hex digits (sha256)")
    return ItemSet(values["split"], sha, values["source"])


def shapes_parameters(source: str | None) -> dict[str, Any] | None:
    """The shapes-world parameters a source line names (``n_images``, ``image_size``, ``seed``, ``val_fraction``).

    None when ``source`` is not a shapes-world line; a parameter the line does not name is absent.
    """
    if not source or "shapes world" not in source.lower():
        return None
    found: dict[str, Any] = {}
    for name, patterns, kind in SHAPES_PARAMETERS:
        for pattern in patterns:
            match = re.search(pattern, source)
            if match:
                found[name] = kind(match.group(1))
                break
    return found


def _differences(first: ItemSet, other: ItemSet) -> str:
    """Why ``other`` is not ``first``'s item set, in words."""
    parts = []
    worlds = first.world(), other.world()
    if worlds[0] is not None and worlds[1] is not None and worlds[0] != worlds[1]:
        a, b = worlds
        differ = [f"{n} ({a.get(n, '?')} vs {b.get(n, '?')})" for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]
        parts.append(f"two worlds: '{first.source}' and '{other.source}' differ in {', '.join(differ)}")
    elif first.source != other.source:
        parts.append(f"two sources: '{first.source or 'not recorded'}' and '{other.source or 'not recorded'}'")
    if first.split != other.split:
        parts.append(f"split {first.split or 'not recorded'} vs {other.split or 'not recorded'}")
    if not parts:
        parts.append("same source and split, different items (the build's thresholds or builder differ)")
    return "; ".join(parts)


def item_set_notes(family: str, item_sets: Sequence[ItemSet]) -> list[str]:
    """Visible notes on ``family``'s item sets: why results on different ones are kept apart, and which record none.

    One item set (recorded) gives no note. Each further recorded item set is compared with
    the first (in the order given); unrecorded ones get one note of their own.
    """
    distinct: list[ItemSet] = []
    for item in item_sets:
        if item.ident not in {d.ident for d in distinct}:
            distinct.append(item)
    recorded = [d for d in distinct if d.recorded]
    notes = []
    for other in recorded[1:]:
        notes.append(
            f"{family}: {recorded[0].label(family)} and {other.label(family)} are different item sets, "
            f"shown apart ({_differences(recorded[0], other)})"
        )
    if len(recorded) < len(distinct):
        notes.append(
            f"{family}: {NOT_RECORDED} for some results (no items_sha256: written before item sets were recorded); "
            "they share a row only with each other, and are not known to be comparable"
            + ("; results that record their item set are shown apart" if recorded else "")
        )
    return notes
