"""Where clip_cycles reads its environment: every ``CLIP_CYCLES_*`` variable is read here.

One constant (the variable's name) and one function (its parsed value, read at call
time so a changed environment is seen) per variable:

=================================  =========================================================
``CLIP_CYCLES_CACHE``              feature cache root (:func:`resolve_cache_dir`); the data
                                   cache defaults to its ``datasets/`` (:func:`resolve_data_cache_dir`)
``CLIP_CYCLES_SKIP_BAD_IMAGES``    the clip_benchmark plugin's ``--skip-bad-images`` (:func:`skip_bad_images`)
``CLIP_CYCLES_TASKS_PATH``         extra task folders, ``os.pathsep``-separated (:func:`extra_task_dirs`)
``CLIP_CYCLES_SPLIT_EMBEDDINGS``   one split embedding for every model of the attribute
                                   tasks (:func:`split_embeddings_override`)
``CLIP_CYCLES_SAMPLES``            the clip_benchmark plugin's per-cycle samples file, a template
                                   with ``--output``'s fields (:func:`samples_template`)
``CLIP_CYCLES_MIN_CYCLES``         the minimum-cycle rule where no flag sets it (clip_benchmark,
                                   raw-root builds of ``eval``, experiments) (:func:`min_cycles_override`)
``CLIP_CYCLES_NO_NUMBA``           numpy instead of the compiled cycle kernel (:func:`numba_disabled`)
``CLIP_CYCLES_FAULT_AFTER_BATCHES``  tests: fail after that many stored batches (:func:`injected_fault_limit`)
``CLIP_CYCLES_FAULT_RANK``         tests: only that torchrun rank fails (:func:`injected_fault_limit`)
``CLIP_CYCLES_DIST_TIMEOUT_S``     how long a torchrun barrier waits (:func:`dist_timeout_s`)
``CLIP_CYCLES_LOG_LEVEL``          the level of the entry points' notes where no ``-q``/``-v`` sets it
                                   (:func:`log_level`; :mod:`clip_cycles.verbosity`)
=================================  =========================================================

A switch is on when the variable is set to anything but ``""`` or ``"0"``.

Exceptions, read where they are used:

- ``CLIP_CYCLES_NO_PLUGIN`` is read by :mod:`clip_cycles.commands._activation`, the
  start-up hook that runs in every interpreter and so may import nothing of this package;
- torchrun's own variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
  ``MASTER_PORT``) are read by :mod:`clip_cycles.encoding.distributed` (and by torch);
  :func:`injected_fault_limit` compares ``RANK`` with ``CLIP_CYCLES_FAULT_RANK`` only to aim
  a test fault at one rank.

Hugging Face's own ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` and ``HF_ENDPOINT`` are read here
too (:func:`hub_offline`, :func:`hub_endpoint`), at call time, for the weights check of
:mod:`clip_cycles.encoding.hub_access`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from clip_cycles.outputs import check_path_length

CACHE_ENV = "CLIP_CYCLES_CACHE"
SKIP_BAD_IMAGES_ENV = "CLIP_CYCLES_SKIP_BAD_IMAGES"
TASKS_PATH_ENV = "CLIP_CYCLES_TASKS_PATH"
SPLIT_EMBEDDINGS_ENV = "CLIP_CYCLES_SPLIT_EMBEDDINGS"
NO_NUMBA_ENV = "CLIP_CYCLES_NO_NUMBA"
SAMPLES_ENV = "CLIP_CYCLES_SAMPLES"
FAULT_ENV = "CLIP_CYCLES_FAULT_AFTER_BATCHES"
FAULT_RANK_ENV = "CLIP_CYCLES_FAULT_RANK"
DIST_TIMEOUT_ENV = "CLIP_CYCLES_DIST_TIMEOUT_S"
MIN_CYCLES_ENV = "CLIP_CYCLES_MIN_CYCLES"
LOG_LEVEL_ENV = "CLIP_CYCLES_LOG_LEVEL"
#: Hugging Face's offline switches (either one on means: never contact the hub) and its endpoint.
HUB_OFFLINE_ENVS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
HUB_ENDPOINT_ENV = "HF_ENDPOINT"
DEFAULT_HUB_ENDPOINT = "https://huggingface.co"

#: How long a torchrun barrier waits by default: a whole shard of a large pool may be encoded meanwhile.
DEFAULT_DIST_TIMEOUT_S = 6 * 3600.0


def _raw(name: str) -> str:
    return os.environ.get(name, "").strip()


def _switch(name: str) -> bool:
    return _raw(name) not in ("", "0")


def resolve_cache_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """Feature cache root: ``path``, else ``$CLIP_CYCLES_CACHE``, else ``~/.cache/clip_cycles``.

    The root is checked (:func:`check_cache_dir`): a regular file, a folder under a file, or
    an empty read-only folder is a ValueError that says what to do.
    """
    if path:
        return check_cache_dir(Path(path), f"--cache-dir {path}")
    if os.environ.get(CACHE_ENV):
        return check_cache_dir(Path(os.environ[CACHE_ENV]), f"{CACHE_ENV}={os.environ[CACHE_ENV]}")
    return check_cache_dir(Path.home() / ".cache" / "clip_cycles", "the default cache ~/.cache/clip_cycles")


_CACHE_ADVICE = f"point {CACHE_ENV} or --cache-dir at a writable folder (it is created if missing), or pass --no-cache"


def check_cache_dir(path: Path, origin: str) -> Path:
    """``path`` when it can serve as a cache root, else a ValueError naming ``origin`` and what to do.

    Refused: a regular file (or anything but a folder), a path under a file, a folder that
    cannot be created, and an empty folder that cannot be written (it could neither hold nor
    give features). A read-only folder that holds a cache is accepted: it can be read.
    Nothing is created here.
    """
    check_path_length(path, f"cache directory ({origin})")
    existing = path
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    if existing.is_symlink() and not existing.exists():
        raise ValueError(f"cache directory ({origin}) {path}: {existing} is a broken symbolic link; {_CACHE_ADVICE}")
    if existing.exists() and not existing.is_dir():
        what = "is a regular file" if existing.is_file() else "is not a folder"
        where = f"{path}" if existing == path else f"{path}: {existing}"
        raise ValueError(f"cache directory ({origin}) {where} {what}, not a folder; {_CACHE_ADVICE}")
    writable = os.access(existing, os.W_OK | os.X_OK)
    if existing != path and not writable:
        raise ValueError(f"cache directory ({origin}) {path} cannot be created: {existing} is read-only; {_CACHE_ADVICE}")
    if existing == path and not writable and _is_empty(path):
        raise ValueError(
            f"cache directory ({origin}) {path} is empty and read-only, so nothing can be cached in it or read "
            f"from it; make it writable, or {_CACHE_ADVICE}"
        )
    return path


def _is_empty(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return next(entries, None) is None


def resolve_data_cache_dir(
    data_cache_dir: str | os.PathLike[str] | None = None, cache_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Where families built from a raw root are kept: ``data_cache_dir``, else ``datasets/`` of the cache root."""
    return Path(data_cache_dir) if data_cache_dir else resolve_cache_dir(cache_dir) / "datasets"


def skip_bad_images() -> bool:
    """``$CLIP_CYCLES_SKIP_BAD_IMAGES``: count and drop unreadable images (the plugin has no such flag)."""
    return _switch(SKIP_BAD_IMAGES_ENV)


def extra_task_dirs() -> list[Path]:
    """``$CLIP_CYCLES_TASKS_PATH``: task folders searched before the shipped ones, in order."""
    return [Path(p) for p in os.environ.get(TASKS_PATH_ENV, "").split(os.pathsep) if p]


def split_embeddings_override() -> str | None:
    """``$CLIP_CYCLES_SPLIT_EMBEDDINGS``: an npz that replaces every attribute task's ``split_embeddings``."""
    return os.environ.get(SPLIT_EMBEDDINGS_ENV) or None


def samples_template() -> str | None:
    """``$CLIP_CYCLES_SAMPLES``: where the plugin writes per-cycle samples (clip_benchmark has no such flag).

    A template with the fields of clip_benchmark's ``--output`` (``{dataset}``, ``{model}``, ...).
    """
    return _raw(SAMPLES_ENV) or None


def numba_disabled() -> bool:
    """``$CLIP_CYCLES_NO_NUMBA``: score cycles with numpy only, never the compiled kernel."""
    return _switch(NO_NUMBA_ENV)


def _int(name: str) -> int | None:
    raw = _raw(name)
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer; unset it or give a whole number") from None


def min_cycles_override() -> int | None:
    """``$CLIP_CYCLES_MIN_CYCLES``: the minimum cycles per split and seed (None: unset).

    clip_benchmark has no ``--min-cycles`` flag: families built from a raw root use this
    minimum, and the experiments screen families with it unless their task or flag sets one.
    """
    value = _int(MIN_CYCLES_ENV)
    if value is not None and value < 1:
        raise ValueError(f"environment variable {MIN_CYCLES_ENV}={value} must be at least 1 (cycles per split and seed)")
    return value


def injected_fault_limit() -> int | None:
    """``$CLIP_CYCLES_FAULT_AFTER_BATCHES`` for this process (tests): fail after that many stored batches.

    None when unset, or when ``$CLIP_CYCLES_FAULT_RANK`` names a torchrun rank other than
    this process's ``RANK`` (0 outside torchrun).
    """
    limit = _int(FAULT_ENV)
    only_rank = _raw(FAULT_RANK_ENV)
    if only_rank and only_rank != os.environ.get("RANK", "0"):
        return None
    return limit


def dist_timeout_s() -> float:
    """``$CLIP_CYCLES_DIST_TIMEOUT_S``: seconds a torchrun barrier waits (default six hours)."""
    raw = _raw(DIST_TIMEOUT_ENV)
    if not raw:
        return DEFAULT_DIST_TIMEOUT_S
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"environment variable {DIST_TIMEOUT_ENV}={raw!r} is not a number of seconds") from None


#: The names ``$CLIP_CYCLES_LOG_LEVEL`` accepts (any case), lowest first.
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def log_level() -> int | None:
    """``$CLIP_CYCLES_LOG_LEVEL``: the ``logging`` level of the entry points' notes (None: unset).

    A name (``debug``, ``info``, ``warning``, ``error``, any case); the ``-q``/``-v`` flags win over it.
    """
    raw = _raw(LOG_LEVEL_ENV)
    if not raw:
        return None
    if raw.lower() not in LOG_LEVELS:
        raise ValueError(
            f"environment variable {LOG_LEVEL_ENV}={raw!r} is not a log level; give one of {', '.join(LOG_LEVELS)}, or unset it"
        )
    return LOG_LEVELS[raw.lower()]


def hub_offline() -> str | None:
    """The offline switch that is on (``"HF_HUB_OFFLINE=1"``), read as huggingface_hub does; None when off."""
    for name in HUB_OFFLINE_ENVS:
        if _raw(name).upper() in ("1", "ON", "YES", "TRUE"):
            return f"{name}={_raw(name)}"
    return None


def hub_endpoint() -> str:
    """The Hugging Face hub's address: ``$HF_ENDPOINT``, else https://huggingface.co."""
    return _raw(HUB_ENDPOINT_ENV).rstrip("/") or DEFAULT_HUB_ENDPOINT


__all__ = [
    "CACHE_ENV",
    "DEFAULT_HUB_ENDPOINT",
    "HUB_ENDPOINT_ENV",
    "HUB_OFFLINE_ENVS",
    "DEFAULT_DIST_TIMEOUT_S",
    "DIST_TIMEOUT_ENV",
    "FAULT_ENV",
    "FAULT_RANK_ENV",
    "LOG_LEVELS",
    "LOG_LEVEL_ENV",
    "MIN_CYCLES_ENV",
    "NO_NUMBA_ENV",
    "SAMPLES_ENV",
    "SKIP_BAD_IMAGES_ENV",
    "SPLIT_EMBEDDINGS_ENV",
    "TASKS_PATH_ENV",
    "check_cache_dir",
    "dist_timeout_s",
    "extra_task_dirs",
    "hub_endpoint",
    "hub_offline",
    "injected_fault_limit",
    "log_level",
    "min_cycles_override",
    "numba_disabled",
    "resolve_cache_dir",
    "resolve_data_cache_dir",
    "samples_template",
    "skip_bad_images",
    "split_embeddings_override",
]
