"""Where a run reads and caches, and what it gives back: ``ModelOptions``, ``RunContext`` and ``RunOutcome``.

Every command that loads a model gets one :class:`ModelOptions` from its parsed flags
(its fields declare the flags; :mod:`clip_cycles.commands.derived` builds it at the command line's edge; the
clip_benchmark plugin and the demo build one directly). The :class:`~clip_cycles.encoding.encoder.ModelSpec`
is made from it in one place (:meth:`ModelOptions.model_spec`), and so is the
:class:`RunContext` with its resolved caches (:meth:`RunContext.from_options`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import Field

from clip_cycles.encoding.encoder import DEFAULT_BATCH_SIZE, EncodedFeatures, ModelSpec
from clip_cycles.schemas.options import CheckedOptions
from clip_cycles.settings import resolve_cache_dir, resolve_data_cache_dir

#: The model flags that say where tasks read their data: only commands that take ``--task`` have them.
DATA_FIELDS: tuple[str, ...] = ("dataset_root", "data_cache_dir")


def _flag(flag: str, help: str, **more: Any) -> dict[str, Any]:
    return {"flag": flag, "help": help, **more}


class ModelOptions(CheckedOptions):
    """The model flags of every command, typed: which model, where it runs, how it encodes, which caches.

    Field names are the flags' (``--model-type`` is ``model_type``, ``--no-amp`` clears
    ``amp``, ``--no-cache`` clears ``use_cache``). ``device`` None means CUDA when
    available; ``cache_dir`` None means ``$CLIP_CYCLES_CACHE`` or ``~/.cache/clip_cycles``;
    ``data_cache_dir`` None means ``<cache root>/datasets``. Each field declares its flag (the
    parsers of :mod:`clip_cycles.commands` are derived from them); ``aliases`` are the spellings
    ``eval``, ``encode`` and ``audit-benchmark`` accepted before the flags were unified.
    """

    model_type: str = Field(
        "open_clip", json_schema_extra=_flag("--model-type", "backend name (see clip_cycles.encoding.backends)")
    )
    model: str | None = Field(None, json_schema_extra=_flag("--model", "model name (backend-specific; a file for 'features')"))
    pretrained: str | None = Field(
        None, json_schema_extra=_flag("--pretrained", "pretrained tag or checkpoint path; none = random init")
    )
    dataset_root: str | Path | None = Field(
        None,
        json_schema_extra=_flag(
            "--dataset-root", "built dataset folder or raw COCO/GQA root (shapes tasks build their own if omitted)"
        ),
    )
    data_cache_dir: str | Path | None = Field(
        None,
        json_schema_extra=_flag(
            "--data-cache-dir", "where families built from a raw root are kept (default: <cache-dir>/datasets)"
        ),
    )
    cache_dir: str | Path | None = Field(
        None, json_schema_extra=_flag("--cache-dir", "feature cache root (default: $CLIP_CYCLES_CACHE or ~/.cache/clip_cycles)")
    )
    use_cache: bool = Field(True, json_schema_extra=_flag("--no-cache", "encode everything and store nothing"))
    model_cache_dir: str | None = Field(
        None, json_schema_extra=_flag("--model-cache-dir", "where the backend keeps downloaded weights")
    )
    device: str | None = Field(None, json_schema_extra=_flag("--device", "cpu or cuda (default: cuda when available)"))
    amp: bool = Field(True, json_schema_extra=_flag("--no-amp", "fp32 on CUDA too"))
    model_seed: int = Field(
        0,
        ge=0,
        le=2**32 - 1,
        description="a seed from 0 to 2**32 - 1",
        json_schema_extra=_flag(
            "--model-seed", "torch seed before loading (random-init models), not --seeds", type="seed", aliases=("--seed",)
        ),
    )
    encode_batch_size: int = Field(
        DEFAULT_BATCH_SIZE,
        ge=1,
        description="a positive batch size",
        json_schema_extra=_flag(
            "--encode-batch-size", "images or captions per encoder batch (not a training batch)", aliases=("--batch-size",)
        ),
    )
    num_workers: int | None = Field(
        None,
        ge=0,
        description="a non-negative number of workers",
        json_schema_extra=_flag(
            "--num-workers", "image decoding workers (default: min(4, CPUs - 1); none for jobs of at most two batches)"
        ),
    )
    skip_bad_images: bool = Field(
        False,
        json_schema_extra=_flag(
            "--skip-bad-images",
            "count and report missing or undecodable images (and drop what uses them) instead of failing",
        ),
    )

    def model_spec(self, loader: Callable[[], Any] | None = None) -> ModelSpec:
        """The ModelSpec these options describe (the one place one is made from flags).

        ``loader`` replaces the backend registry (the clip_benchmark plugin's ``load_clip``).
        """
        if not self.model:
            raise ValueError(f"no model given (model type {self.model_type!r}): pass --model NAME")
        device = self.device
        if device is None:
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        return ModelSpec(
            backend=self.model_type,
            model=self.model,
            pretrained=self.pretrained,
            device=device,
            seed=self.model_seed,
            amp=self.amp,
            model_cache_dir=self.model_cache_dir,
            loader=loader,
        )


@dataclass
class RunContext:
    """Where a run reads and caches: model, dataset root, caches, encoder settings, seed override.

    ``cache_dir`` is the feature cache root (None: encode without storing);
    ``data_cache_dir`` keeps dataset folders built from raw roots; ``samples_path``, when
    set, receives one JSON line per scored cycle of the zero-shot cycle tasks (``--samples``);
    ``staged_outputs``, when set (``eval``), collects that file's bytes instead of writing them, so the
    caller writes it with its results as one set (``clip_cycles.outputs.write_outputs``).
    """

    spec: ModelSpec
    dataset_root: str | Path | None = None
    cache_dir: Path | None = None
    data_cache_dir: Path | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    num_workers: int | None = None
    skip_bad_images: bool = False
    seeds: Sequence[int] | None = None
    language: str = "en"
    samples_path: Path | None = None
    staged_outputs: dict[Path, bytes] | None = None

    @classmethod
    def from_options(
        cls,
        options: ModelOptions,
        seeds: Sequence[int] | None = None,
        language: str = "en",
        loader: Callable[[], Any] | None = None,
    ) -> RunContext:
        """The context of a run with ``options``: its ModelSpec and its caches resolved.

        The feature cache is ``options.cache_dir`` (else ``$CLIP_CYCLES_CACHE``, else
        ``~/.cache/clip_cycles``), None with ``use_cache=False``; the data cache is
        ``options.data_cache_dir`` or ``datasets/`` under that root (also without the feature cache).
        """
        return cls(
            spec=options.model_spec(loader),
            dataset_root=options.dataset_root,
            cache_dir=resolve_cache_dir(options.cache_dir) if options.use_cache else None,
            data_cache_dir=resolve_data_cache_dir(options.data_cache_dir, options.cache_dir),
            batch_size=options.encode_batch_size,
            num_workers=options.num_workers,
            skip_bad_images=options.skip_bad_images,
            seeds=seeds,
            language=language,
        )


@dataclass
class RunOutcome:
    """Result records in task order; ``encoded`` is the cycle_selection encoder pass (its stats).

    ``main`` is False on torchrun ranks other than 0, which report nothing.
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    encoded: EncodedFeatures | None = None
    main: bool = True
