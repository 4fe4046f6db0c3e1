"""On-disk experiment result cache: a result JSON keyed by the content of what made it.

Layout under the cache root::

    results/<experiment>/<key>.json   {"key": description, "checksum": sha256 of the result's text, "result": ...}

The description (:data:`RESULT_KEY_FIELDS`) is the experiment's name, a content key of its
inputs (every array's bytes, dtype and shape; every other value's text, in order), a content
key of its options and :func:`code_version`. A changed input, option or experiment code is
another key, so a miss; an entry whose key or checksum does not match, or that cannot be read
(not a regular file, too large, not JSON), is refused with a warning, deleted and recomputed,
never trusted. Results are JSON (no pickle), stored and returned after one round trip through
JSON, so a cold run and a warm one hand back the same values in the same order.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import logging
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
from pydantic import BaseModel

from clip_cycles.fingerprints import canonical_json, digest
from clip_cycles.outputs import atomic_write_bytes, output_error
from clip_cycles.regular_files import load_json_text, read_regular_file
from clip_cycles.results import clean

logger = logging.getLogger(__name__)

#: The fields an experiment result is keyed by: changing any one gives another key, so a miss.
#: ``tests/evaluation/test_result_cache.py`` changes each in turn.
RESULT_KEY_FIELDS: tuple[str, ...] = ("experiment", "inputs", "options", "code")

#: A cached result larger than this is not read (a transfer grid's record is well under a megabyte).
MAX_RESULT_BYTES = 256 << 20

#: The package folders whose source makes an experiment's numbers: an edit there is another code version.
CODE_FOLDERS: tuple[str, ...] = ("algebra", "attributes", "experiments", "heads")
#: Single files that make cached numbers too: the attribute runner's ``attribute_metrics`` and the demo's
#: attribute-split scoring are the computations their cache entries hold (an edit there must miss).
CODE_FILES: tuple[str, ...] = ("__init__.py", "results.py", "evaluation/attribute_runner.py", "evaluation/demo.py")

_PACKAGE = Path(__file__).resolve().parent.parent


def code_paths() -> list[Path]:
    """The source files :func:`code_version` digests: every module under :data:`CODE_FOLDERS`, then :data:`CODE_FILES`."""
    paths = [p for folder in CODE_FOLDERS for p in sorted((_PACKAGE / folder).rglob("*.py"))]
    return paths + [_PACKAGE / name for name in CODE_FILES]


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """The package version and a digest of the experiment code's sources (:data:`CODE_FOLDERS`)."""
    try:
        version = metadata.version("clip_cycles")
    except metadata.PackageNotFoundError:  # a source checkout that was never installed
        version = "0"
    h = hashlib.sha256()
    for path in code_paths():
        h.update(str(path.relative_to(_PACKAGE)).encode("utf-8") + b"\x00")
        h.update(path.read_bytes() + b"\x00")
    return f"{version}+{h.hexdigest()[:16]}"


def _feed(h: Any, value: Any) -> None:
    """Feed ``value`` into the hash ``h`` with type tags, so different structures never share a key."""
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        h.update(f"nd{array.dtype.str}{array.shape}".encode())
        h.update(array.tobytes() if array.dtype != object else canonical_json(array.tolist()).encode())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        h.update(f"dc{type(value).__qualname__}(".encode())
        for f in dataclasses.fields(value):
            h.update(f"{f.name}=".encode())
            _feed(h, getattr(value, f.name))
        h.update(b")")
    elif isinstance(value, BaseModel):  # an Options model keys like the dataclass it replaced: its fields in order
        h.update(f"dc{type(value).__qualname__}(".encode())
        for name in type(value).model_fields:
            h.update(f"{name}=".encode())
            _feed(h, getattr(value, name))
        h.update(b")")
    elif isinstance(value, Mapping):
        h.update(f"map{len(value)}{{".encode())
        for key, item in value.items():  # insertion order: results follow it
            _feed(h, key)
            _feed(h, item)
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(f"{type(value).__name__}{len(value)}[".encode())
        for item in value:
            _feed(h, item)
        h.update(b"]")
    elif isinstance(value, enum.Enum):
        h.update(f"enum{type(value).__qualname__}.{value.name}".encode())
    elif value is None or isinstance(value, (bool, int, float, str, Path, np.generic)):
        h.update(f"{type(value).__name__}:{value!r};".encode())
    else:
        raise TypeError(f"result cache: cannot key a {type(value).__name__}; give arrays, dataclasses, mappings or scalars")


def content_key(value: Any) -> str:
    """sha256 (hex) of ``value``'s content: arrays by bytes, dtype and shape; everything else by type and text."""
    h = hashlib.sha256()
    _feed(h, value)
    return h.hexdigest()


def result_description(experiment: str, inputs: Any, options: Any) -> dict[str, str]:
    """The key of one experiment result (:data:`RESULT_KEY_FIELDS`)."""
    return {
        "experiment": experiment,
        "inputs": content_key(inputs),
        "options": content_key(options),
        "code": code_version(),
    }


@dataclass
class ResultCacheStats:
    """What one cache handle did: results reused and computed, entries refused (with the reason)."""

    reused: list[str] = field(default_factory=list)
    computed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def _round_trip(result: Any) -> tuple[str, Any]:
    """``result`` as stored JSON text (insertion order kept) and the value read back from it."""
    text = json.dumps(clean(result), ensure_ascii=False, allow_nan=False)
    return text, json.loads(text)


class ResultCache:
    """Experiment results under ``<root>/results``; ``root`` None computes every time and stores nothing."""

    label = "result cache"

    def __init__(self, root: str | Path | None) -> None:
        self.root = None if root is None else Path(root) / "results"
        self.stats = ResultCacheStats()

    def path(self, description: Mapping[str, str]) -> Path:
        """Where the result of ``description`` lives."""
        assert self.root is not None
        return self.root / description["experiment"] / f"{digest(dict(description), 32)}.json"

    def _read(self, path: Path, description: Mapping[str, str]) -> Any | None:
        if not path.exists() and not path.is_symlink():
            return None
        try:
            entry = load_json_text(read_regular_file(path, MAX_RESULT_BYTES, "cached experiment result"), f"cached result {path}")
            if not isinstance(entry, dict) or entry.get("key") != dict(description):
                raise ValueError("its key does not match")
            text = json.dumps(entry.get("result"), ensure_ascii=False, allow_nan=False)
            if hashlib.sha256(text.encode("utf-8")).hexdigest() != entry.get("checksum"):
                raise ValueError("checksum mismatch (the result changed after it was written)")
            return entry["result"]
        except (OSError, ValueError) as error:  # ValueError covers bad JSON, UTF-8, size and kind
            note = f"{self.label}: entry {path} refused ({error}); {description['experiment']} is recomputed"
            warnings.warn(note, stacklevel=3)
            logger.warning("%s", note)
            self.stats.refused.append(str(path))
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass
            return None

    def get_or_compute(self, experiment: str, inputs: Any, options: Any, compute: Callable[[], Any]) -> tuple[Any, bool]:
        """The result of ``experiment`` on ``inputs`` with ``options``: cached, else ``compute()`` stored.

        Returns ``(result, reused)``; the result is the JSON round trip of ``compute()``'s value
        either way, so a warm run hands back exactly what the cold run did.
        """
        if self.root is None:
            return _round_trip(compute())[1], False
        description = result_description(experiment, inputs, options)
        path = self.path(description)
        cached = self._read(path, description)
        if cached is not None:
            self.stats.reused.append(experiment)
            logger.info("%s: reused %s result %s", self.label, experiment, path.name)
            return cached, True
        text, result = _round_trip(compute())
        entry = (
            '{"checksum": '
            + json.dumps(hashlib.sha256(text.encode("utf-8")).hexdigest())
            + ', "key": '
            + canonical_json(dict(description))
            + ', "result": '
            + text
            + "}\n"
        )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, entry.encode("utf-8"), durable=False)
        except OSError as error:
            raise output_error(
                error, path, "point CLIP_CYCLES_CACHE or --cache-dir at a writable folder, or pass --no-cache"
            ) from error
        self.stats.computed.append(experiment)
        logger.info("%s: computed %s result %s", self.label, experiment, path.name)
        return result, False
