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
import os
import re
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

#: Temporary files older than this (seconds) are leftovers of killed runs and are removed.
STALE_TMP_SECONDS = 600.0

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def canonical_json(obj: Any) -> str:
    """Sorted-key compact JSON: equal descriptions hash equally."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(obj: Any, length: int = 24) -> str:
    """Short sha256 hex of the canonical JSON of ``obj``."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:length]


def content_hash(data: bytes) -> str:
    """Item key of raw bytes (an image file's content)."""
    return hashlib.sha256(data).hexdigest()


def text_hash(text: str) -> str:
    """Item key of a caption."""
    return hashlib.sha256(b"text\x00" + text.encode("utf-8")).hexdigest()


def shard_checksum(items: Sequence[str], features: np.ndarray) -> str:
    """sha256 over the shard header (items, shape, dtype) and the feature bytes.

    The header is inside the checksum: two swapped item hashes give a different digest.
    """
    header = canonical_json({"items": list(items), "shape": list(features.shape), "dtype": str(features.dtype)})
    hasher = hashlib.sha256(header.encode("utf-8") + b"\x00")
    hasher.update(np.ascontiguousarray(features).tobytes())
    return hasher.hexdigest()


def stable_repr(obj: Any) -> str:
    """``repr`` without memory addresses, so a preprocessing pipeline identifies itself across runs."""
    return _ADDRESS.sub("", repr(obj))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{time.monotonic_ns()}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@dataclass
class CacheStats:
    """What a cache did in one run; corrupt shards are named."""

    shards_read: int = 0
    hits: int = 0
    misses: int = 0
    shards_written: int = 0
    corrupt_shards: list[str] = field(default_factory=list)
    stale_tmp_removed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "shards_read": self.shards_read,
            "hits": self.hits,
            "misses": self.misses,
            "shards_written": self.shards_written,
            "corrupt_shards": list(self.corrupt_shards),
            "stale_tmp_removed": self.stale_tmp_removed,
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
        if (features.ndim != 2 or features.dtype != self.dtype or features.shape[0] != len(items)
                or self.width not in (None, features.shape[1])):
            raise ValueError(f"shape {features.shape} / dtype {features.dtype} does not fit {len(items)} items")
        if shard_checksum(items, features) != meta["checksum"]:
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
        return found, missing

    def put(self, items: Sequence[str], features: np.ndarray) -> Path:
        """Store one encoded batch as a shard, atomically; returns the shard path."""
        from safetensors.numpy import save

        features = np.ascontiguousarray(features, dtype=self.dtype)
        if features.ndim != 2 or features.shape[0] != len(items) or self.width not in (None, features.shape[1]):
            raise ValueError(f"{self.label}: batch of shape {features.shape} does not fit {len(items)} items")
        if not np.isfinite(features).all():
            raise ValueError(f"{self.label}: refusing to cache non-finite values")
        self._ensure_directory()
        meta = {
            "items": json.dumps(list(items)),
            "checksum": shard_checksum(items, features),
        }
        path = self.directory / f"{digest(list(items), 32)}.safetensors"
        atomic_write_bytes(path, save({self.tensor: features}, metadata=meta))
        self.stats.shards_written += 1
        if self._table is not None:
            for item, row in zip(items, features):
                self._table.setdefault(item, row)
        return path


def model_key(description: Mapping[str, Any]) -> str:
    """File stem of a model manifest."""
    return digest(description)


def read_manifest(root: str | Path, description: Mapping[str, Any]) -> dict[str, Any] | None:
    """The manifest of a model (its preprocessing ids), or None if never loaded or unreadable."""
    path = Path(root) / "models" / f"{model_key(description)}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("model") != dict(description):
        return None
    return data


def write_manifest(root: str | Path, description: Mapping[str, Any], preprocessing: Mapping[str, Any]) -> None:
    """Record what a model description loads to (preprocessing and tokenizer ids), atomically."""
    path = Path(root) / "models" / f"{model_key(description)}.json"
    data = {"model": dict(description), "preprocessing": dict(preprocessing)}
    atomic_write_bytes(path, (canonical_json(data) + "\n").encode("utf-8"))


def namespaces_for(root: str | Path, model: Mapping[str, Any], preprocessing: Mapping[str, Any],
                   kinds: Iterable[str] = ("image", "text")) -> dict[str, FeatureNamespace]:
    """One namespace per feature kind: keyed by the model, its preprocessing/tokenizer and precision."""
    out = {}
    for kind in kinds:
        desc = {"kind": kind, "model": dict(model), "preprocessing": preprocessing.get(kind),
                "precision": preprocessing.get("precision")}
        out[kind] = FeatureNamespace(root, desc)
    return out


# --------------------------------------------------------------------------- content fingerprints

_HASH_CHUNK = 1 << 22
#: In-process memo of file hashes: (resolved path, size, mtime_ns, inode, ctime_ns) -> sha256.
_MEMO: dict[tuple[str, int, int, int, int], str] = {}


def file_sha256(path: str | Path, hash_cache: str | Path | None = None) -> str:
    """sha256 of a file's bytes, remembered per file while its size, mtime, inode and ctime are unchanged.

    ``hash_cache`` (a directory) keeps the hashes across runs, one small JSON per file,
    so multi-gigabyte weights are read once per change, not once per run.
    """
    path = Path(path).resolve()
    stat = path.stat()
    # ctime changes on every write and every utime, so a rewrite that restores size and mtime still rehashes.
    key = (str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns)
    if key in _MEMO:
        return _MEMO[key]
    record_path = Path(hash_cache) / f"{digest(str(path), 32)}.json" if hash_cache is not None else None
    if record_path is not None:
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
            if [record.get(k) for k in ("path", "size", "mtime_ns", "inode", "ctime_ns")] == list(key):
                _MEMO[key] = str(record["sha256"])
                return _MEMO[key]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # no or unreadable record: hash again
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_HASH_CHUNK), b""):
            hasher.update(chunk)
    value = hasher.hexdigest()
    _MEMO[key] = value
    if record_path is not None:
        record = {"path": key[0], "size": key[1], "mtime_ns": key[2], "inode": key[3], "ctime_ns": key[4],
                  "sha256": value}
        try:
            atomic_write_bytes(record_path, (canonical_json(record) + "\n").encode("utf-8"))
        except OSError:
            pass  # a read-only cache only costs a rehash next time
    return value


def file_fingerprint(path: str | Path, hash_cache: str | Path | None = None) -> dict[str, Any]:
    """``{"size", "mtime_ns", "sha256"}`` of one file."""
    stat = Path(path).stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": file_sha256(path, hash_cache)}


def _files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and ".tmp-" not in p.name)


def weights_fingerprint(path: str | Path, hash_cache: str | Path | None = None) -> dict[str, Any]:
    """Content fingerprint of local weights: a checkpoint file, or every file of a model folder.

    A folder (``local-dir:`` OpenCLIP, a Hugging Face save) gives one entry per file
    (relative path -> size, mtime, sha256) and their digest; replacing any file changes it.
    """
    path = Path(path)
    if path.is_file():
        return {"file": path.name, **file_fingerprint(path, hash_cache)}
    if not path.is_dir():
        raise FileNotFoundError(f"weights {path} do not exist")
    files = {p.relative_to(path).as_posix(): file_fingerprint(p, hash_cache) for p in _files_under(path)}
    return {"folder_files": len(files), "digest": digest(files, 64)}


def local_weights_path(name: str | None) -> Path | None:
    """The local file or folder a model name or pretrained value points at (``local-dir:`` stripped), else None."""
    if not name:
        return None
    text = name[len("local-dir:"):] if name.startswith("local-dir:") else name
    candidate = Path(text).expanduser()
    try:
        return candidate if candidate.exists() else None
    except OSError:  # a hub id longer than the OS allows for a path
        return None


def listing_fingerprint(folder: Path, suffixes: Iterable[str] | None = None) -> dict[str, Any]:
    """Digest of a folder's file listing (relative path, size, mtime) without reading the files: cheap for images."""
    entries: list[tuple[str, int, int]] = []
    if folder.is_dir():
        stack = [folder]
        while stack:
            current = stack.pop()
            with os.scandir(current) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=True):
                        stack.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=True):
                        if suffixes is not None and not entry.name.lower().endswith(tuple(suffixes)):
                            continue
                        stat = entry.stat()
                        entries.append((Path(entry.path).relative_to(folder).as_posix(), stat.st_size,
                                        stat.st_mtime_ns))
    entries.sort()
    return {"files": len(entries), "digest": digest(entries, 64)}
