"""Which items a result scored: written here (:func:`item_identity`) and read here (:func:`item_set_of`).

**Writing.** Two results are comparable only when they scored the same items. :func:`item_set_digest`
is the sha256 of the canonical JSON (:func:`clip_cycles.fingerprints.canonical_json`) of::

    {"split": <split scored>,
     "source": <source identity: kind, world parameters or the annotation files' sha256>,
     "build": {<each of ITEM_SET_BUILD_FIELDS>: build_info's value or null},
     "seeds": [[<seed>, [[cycle_id, sha256(image_0 bytes), sha256(image_1 bytes), caption_0, caption_1], ...]], ...]}

seeds in ascending order, cycles in row order (only the cycles scored: those whose two images
were encoded). The order inside a cycle is its label: image_0 matches caption_0. So one changed
caption, one changed image byte, another split or another build threshold gives another digest;
the same items read again give the same one. An image whose file cannot be read (a backend of
precomputed features, scored without the files) enters as ``key:<its key>`` instead of its hash.

**Recording.** A result record names what it scored with top-level fields (beside ``dataset``
and ``model``): ``split``, ``items_sha256``, ``source`` (the structured identity that entered the
digest: ``{"kind", "builder", "world", "annotations"}``) and ``source_line`` (one line for people,
e.g. ``"shapes world: 1000 images, 64 px, seed 0, val 0.25"``); and ``family``
(:func:`family_facts`: the predicate, provenance and order as they were when it ran).

**Reading.** Two numbers are put in one column (the page) or one table row (the report) only
when their ``items_sha256`` match; otherwise they stay apart and :func:`item_set_notes` says why
("two worlds: ... differ in n_images (1000 vs 400)", "split validation vs test"), from the
structured ``source``, never from the line. Older results lack the fields: their item set (or
their source's structure) is "not recorded", which is said wherever they are shown.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from clip_cycles.data.families.registry import family_builder_source, family_provenance, get_family, list_families
from clip_cycles.data.sources.registry import builder_names, get_source, source_names
from clip_cycles.data.sources.shapes_world import ShapesWorldOptions
from clip_cycles.fingerprints import canonical_json, content_hash, digest
from clip_cycles.regular_files import load_json_text, read_regular_file

if TYPE_CHECKING:  # the readers (page, report) never load the encoders or a built folder's reader
    from clip_cycles.data.folder.reader import BuiltFolder, CycleRows
    from clip_cycles.data.sources.images import ImageItem
    from clip_cycles.encoding.encoder import EncodedFeatures
    from clip_cycles.tasks.loading import TaskData
    from clip_cycles.tasks.registry import TaskSpec

#: The build_info.json fields that enter :func:`item_set_digest` (the thresholds a build applied).
ITEM_SET_BUILD_FIELDS: tuple[str, ...] = ("min_cycles", "validation_fraction", "pools", "pool_requested", "thresholds")
#: The shapes world's generation parameters named by :func:`source_line` (``shapes_world.json``).
WORLD_PARAMETERS: tuple[str, ...] = ("n_images", "seed", "image_size")
#: The largest ``shapes_world.json`` read (it is a few dozen bytes).
_MAX_WORLD_FILE_BYTES = 1 << 16

#: An image scored from precomputed features whose file cannot be read enters the digest by its key, so marked.
UNREAD_IMAGE_PREFIX = "key:"
#: One scored cycle as it enters the digest: cycle id, the two images' sha256, the two captions.
CycleItem = tuple[str, str, str, str, str]


def item_set_digest(
    split: str,
    source: Mapping[str, Any],
    build: Mapping[str, Any],
    cycles: Iterable[tuple[int, Sequence[CycleItem]]],
) -> str:
    """sha256 (64 hex digits) of exactly what was scored (see the module docstring for the layout)."""
    payload = {
        "split": split,
        "source": dict(source),
        "build": {key: build.get(key) for key in ITEM_SET_BUILD_FIELDS},
        "seeds": [[int(seed), [list(cycle) for cycle in items]] for seed, items in sorted(cycles, key=lambda c: c[0])],
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def world_parameters(folder: BuiltFolder) -> dict[str, Any] | None:
    """The shapes world's ``shapes_world.json`` a folder was built from, or None (another source, or gone)."""
    try:
        raw = read_regular_file(folder.source_root / "shapes_world.json", _MAX_WORLD_FILE_BYTES, "world file")
        marker = load_json_text(raw, "world file")
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and marker.get("kind") == "shapes" else None


def source_identity(folder: BuiltFolder) -> dict[str, Any]:
    """The source part of the digest: the raw root's kind, its world parameters (shapes) and its annotation hashes.

    Annotation files enter by content (sha256), never by path or mtime, so a copied root is the
    same source; images enter the digest one by one, by content.
    """
    fingerprint = folder.info.get("source_fingerprint") or {}
    annotations = fingerprint.get("annotations") if isinstance(fingerprint, Mapping) else None
    hashes = {str(name): entry.get("sha256") for name, entry in sorted((annotations or {}).items()) if isinstance(entry, Mapping)}
    kind = fingerprint.get("kind") if isinstance(fingerprint, Mapping) else None
    return {
        "kind": kind or folder.source,
        "builder": folder.source,
        "world": world_parameters(folder),
        "annotations": hashes,
    }


def source_line(folder: BuiltFolder) -> str:
    """One human line naming the source: the shapes world's own description or ``COCO root <fp12>``.

    A shapes world is named by :meth:`ShapesWorldOptions.describe` (``shapes world: 1000 images,
    64 px, seed 0, val 0.25``): the one wording the demo, ``build shapes`` and the page use.
    """
    identity = source_identity(folder)
    world = identity["world"]
    if world is not None:
        try:
            return ShapesWorldOptions.make(**{k: world[k] for k in ShapesWorldOptions.model_fields if k in world}).describe()
        except ValueError:  # a hand-edited marker: name what it says rather than fail the run
            return "shapes world " + " ".join(f"{key}={world.get(key)}" for key in WORLD_PARAMETERS)
    kind = str(identity["kind"])
    title = get_source(kind).title if kind in source_names() else kind
    return f"{title} root {digest(identity['annotations'], 12)}"


def _image_hashes(rows: CycleRows, encoded: EncodedFeatures) -> list[str | None]:
    """The sha256 of each of ``rows.image_items`` (None: not encoded, so its cycles were not scored)."""
    known = getattr(encoded, "image_hashes", None) or {}
    out: list[str | None] = []
    for item in rows.image_items:
        if encoded.image_rows.get(item.key, -1) < 0:
            out.append(None)
        elif item.key in known:
            out.append(known[item.key])
        else:  # a backend that did not hash the files (precomputed features, pair scorers): hash them here
            out.append(_hash_or_key(item))
    return out


def _hash_or_key(item: ImageItem) -> str:
    """sha256 of the image's bytes; ``key:<key>`` when they cannot be read (features precomputed elsewhere)."""
    try:
        return content_hash(item.read_bytes())
    except (OSError, ValueError):
        return f"{UNREAD_IMAGE_PREFIX}{item.key}"


def scored_cycles(rows: CycleRows, encoded: EncodedFeatures) -> list[CycleItem]:
    """The cycles of ``rows`` that were scored (both images encoded), in row order, as digest items."""
    hashes = _image_hashes(rows, encoded)
    ids = rows.cycle_ids
    encoded_image = np.array([h is not None for h in hashes], dtype=bool)
    # Whole columns at once, then one tuple per kept row (a row-by-row numpy walk was most of this digest's time).
    kept = np.flatnonzero(encoded_image[rows.image_index].all(axis=1))
    images, captions = rows.image_index[kept].tolist(), rows.caption_index[kept].tolist()
    texts = rows.captions
    return [
        (str(ids[i]), str(hashes[a]), str(hashes[b]), texts[c], texts[d])
        for i, (a, b), (c, d) in zip(kept.tolist(), images, captions)
    ]


def item_identity(data: TaskData, encoded: EncodedFeatures) -> dict[str, Any]:
    """``{"split", "items_sha256", "source", "source_line"}`` of one scored task (:data:`clip_cycles.results.IDENTITY_FIELDS`).

    ``source`` is the structured identity that entered the digest (:func:`source_identity`),
    ``source_line`` its line for people. An unavailable task (nothing scored) has ``items_sha256`` None.
    """
    task, folder = data.task, data.folder
    items_sha256 = None
    source = source_identity(folder)
    if data.unavailable is None:
        cycles = [(seed, scored_cycles(data.splits[seed][task.split], encoded)) for seed in sorted(data.splits)]
        items_sha256 = item_set_digest(task.split, source, folder.info, cycles)
    return {"split": task.split, "items_sha256": items_sha256, "source": source, "source_line": source_line(folder)}


def combined_identity(item_sets: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The identity of a result over several families' item sets (a transfer grid): one digest of theirs.

    ``items_sha256`` is the sha256 of the canonical JSON of ``[[family, its items_sha256], ...]``
    (families sorted); one family gives its own identity unchanged; None without any.
    """
    if not item_sets:
        return None
    if len(item_sets) == 1:
        return dict(next(iter(item_sets.values())))
    names = sorted(item_sets)
    splits = {item_sets[n].get("split") for n in names}
    sources = [item_sets[n].get("source") for n in names]
    pairs = [[n, item_sets[n].get("items_sha256")] for n in names]
    digest_ = None if any(p[1] is None for p in pairs) else hashlib.sha256(canonical_json(pairs).encode("utf-8")).hexdigest()
    lines = sorted({str(item_sets[n].get("source_line")) for n in names})
    return {
        "split": splits.pop() if len(splits) == 1 else ", ".join(sorted(map(str, splits))),
        "items_sha256": digest_,
        "source": sources[0] if all(s == sources[0] for s in sources) else None,
        "source_line": f"{len(names)} families of " + "; ".join(lines),
    }


def family_facts(task: TaskSpec) -> dict[str, Any] | None:
    """What a result records of its family, so no reader looks it up in a later registry.

    ``{"builder", "family", "source", "predicate", "provenance", "order"}`` (``order``: coarse ->
    strict, the builders' order then registration order), or None for a task of no registered family.
    """
    try:
        builder = family_builder_source(task.config)
        family = get_family(builder, task.config)
    except ValueError:
        return None
    return {
        "builder": builder,
        "family": task.config,
        "source": task.source,
        "predicate": family.predicate,
        "provenance": family_provenance(builder, task.config),
        "order": list(builder_names()).index(builder) * 1000 + list_families(builder).index(task.config),
    }


# --------------------------------------------------------------------------- reading


#: The top-level fields of a result record naming its item set.
ITEM_SET_FIELDS: tuple[str, ...] = ("split", "items_sha256", "source", "source_line")
#: The words shown for a result without ``items_sha256``.
NOT_RECORDED = "item set not recorded"
#: The words shown for a recorded field that an older result lacks.
FIELD_NOT_RECORDED = "not recorded"
#: Hex digits of ``items_sha256`` in a label.
LABEL_HEX = 12
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ItemSet:
    """What a result scored: its split, the digest of its cycles, its source (structured) and the source's line.

    Each may be missing (an older result). ``source`` is the record's structured identity
    (``{"kind", "builder", "world", "annotations"}``); an older record's ``source`` was a line,
    read as ``source_line`` with the structure "not recorded".
    """

    split: str | None = None
    items_sha256: str | None = None
    source: Mapping[str, Any] | None = None
    source_line: str | None = None

    def __hash__(self) -> int:
        return hash((self.split, self.items_sha256, canonical_json(dict(self.source or {})), self.source_line))

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

    @property
    def line(self) -> str | None:
        """The source's line for people (the recorded one; else the kind the structure names)."""
        if self.source_line:
            return self.source_line
        return str(self.source.get("kind")) if self.source and self.source.get("kind") else None

    def label(self, family: str) -> str:
        """A short name of this item set of ``family``: ``<family>.<12 hex>``."""
        return f"{family}.{self.short}"

    def describe(self) -> str:
        """One line for a table cell: the source, the split and the digest's prefix (or "item set not recorded")."""
        if not self.recorded:
            known = "; ".join(p for p in (self.line, f"split {self.split}" if self.split else None) if p)
            return f"{NOT_RECORDED}" + (f" ({known})" if known else "")
        return f"{self.line or 'source not recorded'}; split {self.split or 'not recorded'}; items {self.short}"

    def world(self) -> dict[str, Any] | None:
        """The shapes-world parameters the structured ``source`` records, or None (another source, or not recorded)."""
        world = self.source.get("world") if self.source else None
        return dict(world) if isinstance(world, Mapping) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def item_set_of(record: Mapping[str, Any], fallback: Mapping[str, Any] | None = None) -> ItemSet:
    """The item set a result ``record`` names; each field missing from it is looked up in ``fallback``.

    ``fallback`` is where an older or nested writer kept the field (a record's ``metrics``,
    or an experiment record around a family's metrics). An ``items_sha256`` that is not 64
    lower-case hex digits, or a ``source`` that is neither an object nor a line, is refused
    with a ValueError naming the value.
    """

    def field(name: str) -> Any:
        value = record.get(name)
        if value is None and fallback is not None:
            value = fallback.get(name)
        return value

    sha = _text(field("items_sha256"))
    if sha is not None and not _SHA256.fullmatch(sha):
        raise ValueError(f"field 'items_sha256' is {sha!r}; expected 64 lower-case hex digits (sha256)")
    source, line = field("source"), _text(field("source_line"))
    if isinstance(source, str):  # written before the source was recorded as an object: a line only
        return ItemSet(_text(field("split")), sha, None, line or _text(source))
    if source is not None and not isinstance(source, Mapping):
        raise ValueError(f"field 'source' is {source!r}; expected an object (kind, builder, world, annotations)")
    return ItemSet(_text(field("split")), sha, dict(source) if source is not None else None, line)


def _differences(first: ItemSet, other: ItemSet) -> str:
    """Why ``other`` is not ``first``'s item set, in words (from the structured sources, never their lines)."""
    parts = []
    worlds = first.world(), other.world()
    if worlds[0] is not None and worlds[1] is not None and worlds[0] != worlds[1]:
        a, b = worlds
        differ = [f"{n} ({a.get(n, '?')} vs {b.get(n, '?')})" for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]
        parts.append(f"two worlds: '{first.line}' and '{other.line}' differ in {', '.join(differ)}")
    elif first.source is None or other.source is None:
        if first.line != other.line or first.source != other.source:
            parts.append(
                f"two sources: '{first.line or FIELD_NOT_RECORDED}' and '{other.line or FIELD_NOT_RECORDED}'"
                " (the structure of a source is not recorded in results written before it was)"
            )
    elif dict(first.source) != dict(other.source):
        parts.append(f"two sources: '{first.line or FIELD_NOT_RECORDED}' and '{other.line or FIELD_NOT_RECORDED}'")
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
