"""Where a run reads and caches, and what it gives back: ``RunContext`` and ``RunOutcome``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from clip_cycles.encoding.encoder import EncodedFeatures, ModelSpec
from clip_cycles.settings import resolve_cache_dir


@dataclass
class RunContext:
    """Where a run reads and caches: model, dataset root, caches, encoder settings, seed override.

    ``cache_dir`` is the feature cache root (None: encode without storing);
    ``data_cache_dir`` keeps dataset folders built from raw roots.
    """

    spec: ModelSpec
    dataset_root: str | Path | None = None
    cache_dir: Path | None = None
    data_cache_dir: Path | None = None
    batch_size: int = 64
    num_workers: int | None = None
    skip_bad_images: bool = False
    seeds: Sequence[int] | None = None
    language: str = "en"

    @classmethod
    def create(cls, spec: ModelSpec, dataset_root: str | Path | None = None, cache_dir: str | Path | None = None,
               use_cache: bool = True, data_cache_dir: str | Path | None = None, **kwargs: Any) -> RunContext:
        """Resolve the caches the way ``clip-cycles eval`` does (``$CLIP_CYCLES_CACHE`` by default)."""

        root = resolve_cache_dir(cache_dir)
        return cls(spec=spec, dataset_root=dataset_root, cache_dir=root if use_cache else None,
                   data_cache_dir=Path(data_cache_dir) if data_cache_dir else root / "datasets", **kwargs)


@dataclass
class RunOutcome:
    """Result records in task order; ``encoded`` is the cycle_selection encoder pass (its stats).

    ``main`` is False on torchrun ranks other than 0, which report nothing.
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    encoded: EncodedFeatures | None = None
    main: bool = True
