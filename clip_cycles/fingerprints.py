"""Content fingerprints: what every cache key rests on.

Canonical JSON and short digests of descriptions, sha256 of files (remembered per file while
size, mtime, inode and ctime hold), listings of image folders, fingerprints of local model
weights. How files reach the disk is :mod:`clip_cycles.outputs` (the one output policy).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

from clip_cycles.outputs import atomic_write_bytes
from clip_cycles.regular_files import read_regular_file

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def canonical_json(obj: Any) -> str:
    """Sorted-key compact JSON: equal descriptions hash equally."""
    # allow_nan=False: a non-finite number is an error here, never the non-standard ``Infinity``/``NaN``.
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(obj: Any, length: int = 24) -> str:
    """Short sha256 hex of the canonical JSON of ``obj``."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:length]


def content_hash(data: bytes) -> str:
    """Item key of raw bytes (an image file's content)."""
    return hashlib.sha256(data).hexdigest()


def text_hash(text: str) -> str:
    """Item key of a caption."""
    return hashlib.sha256(b"text\x00" + text.encode("utf-8")).hexdigest()


def stable_repr(obj: Any) -> str:
    """``repr`` without memory addresses, so a preprocessing pipeline identifies itself across runs."""
    return _ADDRESS.sub("", repr(obj))


_HASH_CHUNK = 1 << 22


#: A hash-cache record larger than this is not read (one is about 200 bytes).
MAX_HASH_RECORD_BYTES = 1 << 16

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
            # A record is ~200 bytes; anything else (a FIFO, a huge file) in the cache is ignored, not waited on.
            record = json.loads(read_regular_file(record_path, MAX_HASH_RECORD_BYTES))  # any error: a rehash
            if [record.get(k) for k in ("path", "size", "mtime_ns", "inode", "ctime_ns")] == list(key):
                _MEMO[key] = str(record["sha256"])
                return _MEMO[key]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # no or unreadable record (AttributeError: JSON that is not an object): hash again
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_HASH_CHUNK), b""):
            hasher.update(chunk)
    value = hasher.hexdigest()
    _MEMO[key] = value
    if record_path is not None:
        record = {"path": key[0], "size": key[1], "mtime_ns": key[2], "inode": key[3], "ctime_ns": key[4], "sha256": value}
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


def weights_content(path: str | Path, hash_cache: str | Path | None = None) -> dict[str, str]:
    """Relative name -> sha256 of a checkpoint file, or of every file of a model folder (no sizes or mtimes)."""
    path = Path(path)
    if path.is_file():
        return {path.name: file_sha256(path, hash_cache)}
    return {p.relative_to(path).as_posix(): file_sha256(p, hash_cache) for p in _files_under(path)}


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
    text = name[len("local-dir:") :] if name.startswith("local-dir:") else name
    candidate = Path(text).expanduser()
    try:
        return candidate if candidate.exists() else None
    except OSError:  # a hub id longer than the OS allows for a path
        return None


def listing_fingerprint(folder: Path, suffixes: Iterable[str] | None = None) -> dict[str, Any]:
    """Digest of a folder's file listing (relative path, size, mtime) without reading the files: cheap for images."""
    entries: list[tuple[str, int, int]] = []
    if folder.is_dir():
        # Plain strings, not Path objects: this runs before every evaluation of a reference-mode folder.
        root = os.fspath(folder)
        prefix = root if root.endswith(os.sep) else root + os.sep
        wanted = None if suffixes is None else tuple(suffixes)
        stack = [root]
        while stack:
            current = stack.pop()
            with os.scandir(current) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=True):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=True):
                        if wanted is not None and not entry.name.lower().endswith(wanted):
                            continue
                        stat = entry.stat()
                        relative = entry.path[len(prefix) :].replace(os.sep, "/")
                        entries.append((relative, stat.st_size, stat.st_mtime_ns))
    entries.sort()
    return {"files": len(entries), "digest": digest(entries, 64)}
