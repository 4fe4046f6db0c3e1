"""Where clip_cycles reads its environment: every ``CLIP_CYCLES_*`` variable is read here."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "CLIP_CYCLES_CACHE"


def resolve_cache_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """Feature cache root: ``path``, else ``$CLIP_CYCLES_CACHE``, else ``~/.cache/clip_cycles``."""
    if path:
        return Path(path)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path.home() / ".cache" / "clip_cycles"
