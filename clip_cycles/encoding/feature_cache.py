"""On-disk feature cache: encoded features keyed by model, preprocessing and item content.

Layout under the cache root::

    models/<model_key>.json                 what a (backend, model, pretrained, seed) loads to:
                                            its preprocessing and tokenizer ids, feature namespaces
    features/<namespace>/namespace.json     the description hashed into <namespace>
    features/<namespace>/<shard>.safetensors  one encoded batch: tensor "features" (n, d) float32,
                                            metadata "items" (JSON list of content hashes) and
                                            "checksum" (sha256 of the header and the feature bytes)
    fingerprints/<digest>.json              per-file content hash, reused while size, mtime and inode hold

A namespace is the hash of (backend, model, pretrained, preprocessing or tokenizer,
precision, kind); an item is the sha256 of the image file bytes or the caption text.
Local weights (checkpoint files, ``local-dir:`` and Hugging Face folders) enter the model
key through :func:`weights_fingerprint`: size, mtime and sha256 of every file, the hash
cached per file (:func:`file_sha256`) so large weights are hashed once per change.
Each batch is written as its own shard through a temporary file and ``os.replace``, so
a killed run leaves only whole shards and a rerun encodes only what is missing. A shard
that does not parse, fails its checksum or holds non-finite values is deleted, counted
and its items recomputed. No pickle: safetensors and JSON only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from clip_cycles.fingerprints import canonical_json, digest
from clip_cycles.outputs import atomic_write_bytes, output_error
from clip_cycles.regular_files import read_regular_file

logger = logging.getLogger(__name__)

#: What to do when the environment refuses a cache write.
_CACHE_HINT = (
    "free space there, or point the cache at another disk with --cache-dir DIR or CLIP_CYCLES_CACHE "
    "(or run without the cache: --no-cache); the shards already written are kept"
)

#: Temporary files older than this (seconds) are leftovers of killed runs and are removed.
STALE_TMP_SECONDS = 600.0


def shard_checksum(items: Sequence[str], features: np.ndarray, namespace: str | None = None) -> str:
    """sha256 over the shard header (items, shape, dtype, namespace) and the feature bytes.

    The header is inside the checksum: two swapped item hashes give a different digest, and
    so does a namespace field edited to pass a shard off as another model's.
    """
    header_fields: dict[str, Any] = {"items": list(items), "shape": list(features.shape), "dtype": str(features.dtype)}
    if namespace is not None:
        header_fields["namespace"] = namespace
    header = canonical_json(header_fields)
    hasher = hashlib.sha256(header.encode("utf-8") + b"\x00")
    hasher.update(np.ascontiguousarray(features).tobytes())
    return hasher.hexdigest()


class _ForeignShard(Exception):
    """A shard whose header names another namespace (or none)."""

    def __init__(self, namespace: Any) -> None:
        super().__init__(f"namespace {namespace!r}")
        self.namespace = namespace if isinstance(namespace, str) else None


@dataclass
class CacheStats:
    """What a cache did in one run; corrupt shards are named."""

    shards_read: int = 0
    hits: int = 0
    misses: int = 0
    shards_written: int = 0
    corrupt_shards: list[str] = field(default_factory=list)
    stale_tmp_removed: int = 0
    #: Shards that belong to another namespace (copied from another model's cache) or name none: refused.
    foreign_shards: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "shards_read": self.shards_read,
            "hits": self.hits,
            "misses": self.misses,
            "shards_written": self.shards_written,
            "corrupt_shards": list(self.corrupt_shards),
            "stale_tmp_removed": self.stale_tmp_removed,
            "foreign_shards": list(self.foreign_shards),
        }


class FeatureNamespace:
    """Features of one (model, preprocessing, precision, kind): content hash -> float32 vector.

    Subclasses store other per-item rows in the same shard format by changing the class
    settings (folder, tensor name, dtype, row width, what a corrupt shard costs).
    """

    folder: str = "features"
    tensor: str = "features"
    dtype: type = np.float32
    width: int | None = None  # None: any width, the same within a shard
    label: str = "feature cache"
    redo: str = "its items will be re-encoded"

    def __init__(self, root: str | Path, description: Mapping[str, Any]) -> None:
        self.description = dict(description)
        self.name = digest(self.description)
        self.directory = Path(root) / self.folder / self.name
        self.stats = CacheStats()
        self._table: dict[str, np.ndarray] | None = None

    def _ensure_directory(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        marker = self.directory / "namespace.json"
        if not marker.exists():
            atomic_write_bytes(marker, (canonical_json(self.description) + "\n").encode("utf-8"))

    def _read_shard(self, path: Path) -> tuple[list[str], np.ndarray]:
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as handle:
            meta = handle.metadata() or {}
            features = handle.get_tensor(self.tensor)
        items = json.loads(meta["items"])
        if meta.get("namespace") != self.name:
            raise _ForeignShard(meta.get("namespace"))
        if (
            features.ndim != 2
            or features.dtype != self.dtype
            or features.shape[0] != len(items)
            or self.width not in (None, features.shape[1])
        ):
            raise ValueError(f"shape {features.shape} / dtype {features.dtype} does not fit {len(items)} items")
        if shard_checksum(items, features, self.name) != meta["checksum"]:
            raise ValueError("checksum mismatch (header or features changed)")
        if not np.isfinite(features).all():
            raise ValueError("non-finite values")
        return items, features

    def load(self) -> dict[str, np.ndarray]:
        """Read every shard (once); corrupt shards are deleted and counted."""
        if self._table is not None:
            return self._table
        table: dict[str, np.ndarray] = {}
        if self.directory.is_dir():
            now = time.time()
            for path in sorted(self.directory.iterdir()):
                if ".tmp-" in path.name:
                    if now - path.stat().st_mtime > STALE_TMP_SECONDS:
                        path.unlink(missing_ok=True)
                        self.stats.stale_tmp_removed += 1
                    continue
                if path.suffix != ".safetensors":
                    continue
                try:
                    items, features = self._read_shard(path)
                except _ForeignShard as error:
                    # Features of another model (or of a cache from before shards named their namespace)
                    # would be served as this model's: a miss, re-encoded and rewritten under this namespace.
                    where = f"namespace {error.namespace}" if error.namespace else "no namespace"
                    warnings.warn(
                        f"{self.label}: shard {path} belongs to {where}, not {self.name}; refused, {self.redo}",
                        stacklevel=2,
                    )
                    self.stats.foreign_shards.append(str(path))
                    path.unlink(missing_ok=True)
                    continue
                except Exception as error:  # any parse failure means the shard is unusable
                    warnings.warn(f"{self.label}: corrupt shard {path} ({error}); {self.redo}", stacklevel=2)
                    self.stats.corrupt_shards.append(str(path))
                    path.unlink(missing_ok=True)
                    continue
                self.stats.shards_read += 1
                for item, row in zip(items, features):
                    table.setdefault(item, row)
        self._table = table
        return table

    def lookup(self, items: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        """Split ``items`` into found features and the (ordered, unique) missing ones."""
        table = self.load()
        found: dict[str, np.ndarray] = {}
        missing: list[str] = []
        for item in dict.fromkeys(items):
            if item in table:
                found[item] = table[item]
            else:
                missing.append(item)
        self.stats.hits += len(found)
        self.stats.misses += len(missing)
        logger.debug("%s %s: %d of %d items from the cache", self.label, self.directory, len(found), len(found) + len(missing))
        return found, missing

    def put(self, items: Sequence[str], features: np.ndarray) -> Path:
        """Store one encoded batch as a shard, atomically; returns the shard path."""
        from safetensors.numpy import save

        features = np.ascontiguousarray(features, dtype=self.dtype)
        if features.ndim != 2 or features.shape[0] != len(items) or self.width not in (None, features.shape[1]):
            raise ValueError(f"{self.label}: batch of shape {features.shape} does not fit {len(items)} items")
        if not np.isfinite(features).all():
            raise ValueError(f"{self.label}: refusing to cache non-finite values")
        try:
            self._ensure_directory()
        except OSError as error:
            raise output_error(error, self.directory, _CACHE_HINT) from error
        meta = {
            "items": json.dumps(list(items)),
            "namespace": self.name,
            "checksum": shard_checksum(items, features, self.name),
        }
        path = self.directory / f"{digest(list(items), 32)}.safetensors"
        try:
            # No fsync: every read checks the shard's checksum, and a torn shard is deleted and re-encoded.
            atomic_write_bytes(path, save({self.tensor: features}, metadata=meta), durable=False)
        except OSError as error:
            raise output_error(error, path, _CACHE_HINT) from error
        self.stats.shards_written += 1
        if self._table is not None:
            for item, row in zip(items, features):
                self._table.setdefault(item, row)
        return path


def model_key(description: Mapping[str, Any]) -> str:
    """File stem of a model manifest."""
    return digest(description)


#: A model manifest larger than this is not read (one is a few kilobytes).
MAX_MANIFEST_BYTES = 1 << 20


def read_manifest(root: str | Path, description: Mapping[str, Any]) -> dict[str, Any] | None:
    """The manifest of a model (its preprocessing ids), or None if never loaded or unreadable.

    Only a regular file of at most :data:`MAX_MANIFEST_BYTES` is read: a FIFO or device put
    in its place is a miss (the model is loaded and the manifest rewritten), never a hang.
    """
    path = Path(root) / "models" / f"{model_key(description)}.json"
    try:
        # ValueError: not a regular file, too large, not UTF-8 or not JSON.
        data = json.loads(read_regular_file(path, MAX_MANIFEST_BYTES))  # any error: a miss
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("model") != dict(description):
        return None
    return data


def write_manifest(root: str | Path, description: Mapping[str, Any], preprocessing: Mapping[str, Any]) -> None:
    """Record what a model description loads to (preprocessing and tokenizer ids), atomically."""
    path = Path(root) / "models" / f"{model_key(description)}.json"
    data = {"model": dict(description), "preprocessing": dict(preprocessing)}
    try:
        atomic_write_bytes(path, (canonical_json(data) + "\n").encode("utf-8"))
    except OSError as error:
        raise output_error(error, path, _CACHE_HINT) from error


#: The fields a feature namespace (:func:`namespaces_for`) is keyed by: changing any one gives another
#: namespace, so features of the old one are a miss. ``tests/tasks/test_key_fields.py`` changes each in turn.
NAMESPACE_KEY_FIELDS: tuple[str, ...] = ("kind", "model", "preprocessing", "precision")


def namespaces_for(
    root: str | Path, model: Mapping[str, Any], preprocessing: Mapping[str, Any], kinds: Iterable[str] = ("image", "text")
) -> dict[str, FeatureNamespace]:
    """One namespace per feature kind: keyed by the model, its preprocessing/tokenizer and precision."""
    out = {}
    for kind in kinds:
        desc = {
            "kind": kind,
            "model": dict(model),
            "preprocessing": preprocessing.get(kind),
            "precision": preprocessing.get("precision"),
        }
        out[kind] = FeatureNamespace(root, desc)
    return out
