"""The identity of what a result scored: one digest of its items, its split, its source and its build.

Two results are comparable only when they scored the same items. :func:`item_set_digest`
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
:func:`item_identity` is what every zero-shot record carries (``split``, ``items_sha256``,
``source``; :data:`clip_cycles.results.IDENTITY_FIELDS`).
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Mapping, Sequence

from clip_cycles.data.folder.reader import BuiltFolder, CycleRows
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.data.sources.registry import get_source, source_names
from clip_cycles.data.sources.shapes_world import ShapesWorldOptions
from clip_cycles.encoding.encoder import EncodedFeatures
from clip_cycles.fingerprints import canonical_json, content_hash, digest
from clip_cycles.regular_files import load_json_text, read_regular_file
from clip_cycles.tasks.loading import TaskData

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
    ids = rows.cycle_ids.to_pylist()
    out: list[CycleItem] = []
    for i in range(len(rows)):
        a, b = (hashes[int(k)] for k in rows.image_index[i])
        if a is None or b is None:
            continue
        c, d = rows.caption_index[i]
        out.append((str(ids[i]), a, b, rows.captions[int(c)], rows.captions[int(d)]))
    return out


def item_identity(data: TaskData, encoded: EncodedFeatures) -> dict[str, Any]:
    """``{"split", "items_sha256", "source"}`` of one scored task (:data:`clip_cycles.results.IDENTITY_FIELDS`).

    An unavailable task (nothing scored) has ``items_sha256`` None.
    """
    task, folder = data.task, data.folder
    items_sha256 = None
    if data.unavailable is None:
        cycles = [(seed, scored_cycles(data.splits[seed][task.split], encoded)) for seed in sorted(data.splits)]
        items_sha256 = item_set_digest(task.split, source_identity(folder), folder.info, cycles)
    return {"split": task.split, "items_sha256": items_sha256, "source": source_line(folder)}
