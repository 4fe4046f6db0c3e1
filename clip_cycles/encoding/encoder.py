"""The deduplicating, cached encoder: every unique image and caption encoded exactly once.

Callers hand over the images and captions of all cycles of all requested tasks; the
encoder deduplicates them (images by file content, captions by text), serves what the
feature cache (:mod:`clip_cycles.encoding.feature_cache`) already holds, loads the model only
when something is missing, and encodes the rest in batches: images decoded in
DataLoader workers (:func:`default_num_workers`) while the main process encodes caption
batches before each image batch (the first while the workers start), fp32 on CPU, autocast
on CUDA. Each encoded batch is stored before the next starts, so an interrupted run resumes where it stopped. Features come back
L2-normalized (float32), one row per unique key, for cosine scoring.

Fault injection for tests: ``CLIP_CYCLES_FAULT_AFTER_BATCHES=<n>`` raises
:class:`InjectedFault` after ``n`` encoded batches have been stored (under torchrun, only
in the rank named by ``CLIP_CYCLES_FAULT_RANK`` when that is set).

Under ``torchrun`` the CLI shards the work across ranks (:mod:`clip_cycles.encoding.distributed`).
"""

from __future__ import annotations

import hashlib
import math
import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from clip_cycles.data.sources.images import IMAGE_DECODING, ImageItem, decode_errors, decode_rgb
from clip_cycles.encoding.backends import PRECOMPUTED_FEATURES, Backend, is_random_init, no_prompts, resolve_backend
from clip_cycles.encoding.backends_vision import require_embeddings
from clip_cycles.encoding.encode_options import DEFAULT_BATCH_SIZE, EncodeOptions
from clip_cycles.encoding.feature_cache import CacheStats, FeatureNamespace, namespaces_for, read_manifest, write_manifest
from clip_cycles.encoding.hub_access import offline_hub, require_weights
from clip_cycles.fingerprints import (
    content_hash,
    local_weights_path,
    stable_repr,
    text_hash,
    weights_content,
    weights_fingerprint,
)
from clip_cycles.processes import WorkerDiedError
from clip_cycles.settings import FAULT_ENV, injected_fault_limit
from clip_cycles.verbosity import progress_disable

#: Captions go in batches of at least this many: token tensors are small, and larger
#: batches keep the text tower busy (and write fewer cache shards). 1,024 as the plain
#: script of ``benchmarks/bench_overhead.py``: the text tower of cycles-tiny ran 1.6x faster on
#: CPU than at 256, with bit-identical features (tests/evaluation/test_warm_fast_paths.py).
MIN_CAPTION_BATCH = 1024
#: Never more decoding workers than this (decoding is cheap next to encoding).
MAX_WORKERS = 4


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_num_workers(n_images: int, batch_size: int = DEFAULT_BATCH_SIZE, cpus: int | None = None) -> int:
    """Image-decoding DataLoader workers: ``min(4, CPUs - 1)``, none for a job of at most two batches.

    One CPU stays with the main process, which runs the model; a tiny job does not pay
    for starting worker processes.
    """
    cpus = available_cpus() if cpus is None else cpus
    if n_images <= 2 * batch_size:
        return 0
    return max(0, min(MAX_WORKERS, cpus - 1))


class InjectedFault(RuntimeError):
    """Raised by the fault-injection switch to simulate a run killed halfway."""


@dataclass
class ModelSpec:
    """What to load: a backend, model and weights, and where to run it.

    ``backend`` is the backend's :class:`~clip_cycles.encoding.backends.Backend` record: a name
    given here is resolved once (:func:`~clip_cycles.encoding.backends.resolve_backend`), and
    every question about the backend asks the record (``spec.backend.can("pair_scores")``);
    cache keys and result records write its ``name``. ``loader`` overrides the record's loader
    (the clip_benchmark plugin passes clip_benchmark's own ``load_clip``); it takes no arguments
    and returns ``(model, transform, tokenizer)``.
    """

    backend: Backend
    model: str
    pretrained: str | None
    device: str = "cpu"
    seed: int = 0
    amp: bool = True
    model_cache_dir: str | None = None
    loader: Callable[[], tuple[Any, Any, Any]] | None = None

    def __post_init__(self) -> None:
        self.backend = resolve_backend(self.backend)
        # The answer of the weights check (require_weights): asked once per spec, not a field (no key, no equality).
        self._weights_offline: bool | None = None
        # A model loaded ahead of its first use (preload), handed over once by load.
        self._preloaded: tuple[Any, Any, Any] | None = None

    @property
    def precision(self) -> str:
        return "amp" if self.amp and self.device.startswith("cuda") else "fp32"

    def description(self, hash_cache: str | Path | None = None) -> dict[str, Any]:
        """The model identity used in cache keys: names plus the content of any local weights.

        A checkpoint file, a ``local-dir:`` folder or a Hugging Face folder enters by size,
        mtime and sha256 of each file (hashes remembered per file in ``hash_cache``), so
        replaced weights never reuse old features.
        """
        random_init = is_random_init(self.pretrained)
        # The seed is part of the key even with weights: a local-dir config without a
        # checkpoint is random-init whatever its pretrained tag says.
        desc: dict[str, Any] = {
            "backend": self.backend.name,
            "model": self.model,
            "pretrained": "" if random_init else self.pretrained,
            "precision": self.precision,
            "seed": self.seed,
        }
        weights: dict[str, Any] = {}
        model_path = local_weights_path(self.model)
        if model_path is not None and (self.model.startswith("local-dir:") or self.backend.name != "open_clip"):
            weights["model"] = weights_fingerprint(model_path, hash_cache)
        pretrained_path = None if random_init else local_weights_path(self.pretrained)
        if pretrained_path is not None:
            weights["pretrained"] = weights_fingerprint(pretrained_path, hash_cache)
        if weights:
            desc["weights"] = weights
        identity = self.backend.identity(self.model, self.pretrained)
        if identity is not None:  # an entry-point or registered backend: its distribution, version and code
            desc["backend_identity"] = identity
        desc["image_decoding"] = IMAGE_DECODING
        desc["versions"] = {name: _version(name) for name in ("open_clip_torch", "transformers", "clip_benchmark")}
        return desc

    def source(self, hash_cache: str | Path | None = None) -> dict[str, Any]:
        """Where this model's weights come from, for a result record: ``backend`` and ``weights_sha256``.

        ``weights_sha256`` digests the content (sha256 of every file) of the local weights named by
        ``--model``/``--pretrained`` and a third-party backend's identity (distribution, version,
        code); absent when neither exists (an OpenCLIP tag names its weights itself, or none:
        random init). Sizes and mtimes stay out, so a copied checkpoint keeps its digest; each file's
        hash is remembered (``file_sha256``), so records of one run hash the weights once.
        """
        content: dict[str, Any] = {}
        for role, name in (("model", self.model), ("pretrained", None if is_random_init(self.pretrained) else self.pretrained)):
            path = local_weights_path(name)
            if path is None or (role == "model" and self.backend.name == "open_clip" and not self.model.startswith("local-dir:")):
                continue
            content[role] = weights_content(path, hash_cache)
        identity = self.backend.identity(self.model, self.pretrained)
        if identity is not None:
            content["backend_identity"] = identity
        source: dict[str, Any] = {"backend": self.backend.name}
        if content:
            source["weights_sha256"] = hashlib.sha256(stable_repr(content).encode("utf-8")).hexdigest()
        return source

    def require_weights(self) -> bool:
        """The weights check of this spec, run at most once: True when the load must stay offline.

        Weights the backend would download are looked for (:func:`require_weights`, by the record's
        ``weights``): missing with the hub unreachable is a :class:`WeightsUnavailableError`; later
        calls (the load after ``clip-cycles eval``'s check before any data is read) reuse the answer.
        """
        if self._weights_offline is None:
            self._weights_offline = require_weights(self.backend, self.model, self.pretrained, self.model_cache_dir)
        return self._weights_offline

    def require_weights_if_cold(self, cache_dir: str | Path | None) -> None:
        """The weights check before any data is read, where this run is sure to load the model.

        A run without a feature cache, or whose cache holds no manifest of this model (it was never
        loaded with this identity), encodes everything: its missing weights are one sentence now
        (issue 36). Otherwise the check waits for the first cache miss (:meth:`load`), so a warm run
        never imports the backend's library (OpenCLIP, torchvision, transformers) to ask.
        """
        if self.sure_to_load(cache_dir):
            self.require_weights()

    def sure_to_load(self, cache_dir: str | Path | None) -> bool:
        """Whether a run with this feature cache will load the model: no cache, or no manifest of this model in it."""
        if cache_dir is None:
            return True
        root = Path(cache_dir)
        return read_manifest(root, self.description(root / "fingerprints")) is None

    def preload(self) -> None:
        """Load the model now, for the next :meth:`load` to hand over (a run :meth:`sure_to_load` starts it early)."""
        if self._preloaded is None:
            self._preloaded = self.load()

    def load(self) -> tuple[Any, Any, Any]:
        """Seed torch (random-init models are then reproducible) and load the model (or hand over the preloaded one).

        The weights check (:meth:`require_weights`) comes first: missing weights with the hub
        unreachable are a :class:`WeightsUnavailableError` at once; cached ones load with the
        hub's offline mode on, without retries.
        """
        if self._preloaded is not None:  # loaded once: the preload was this load, started early
            loaded, self._preloaded = self._preloaded, None
            return loaded
        import torch

        offline = self.require_weights()
        torch.manual_seed(self.seed)
        with offline_hub(offline):
            if self.loader is not None:
                with no_prompts():
                    model, transform, tokenizer = self.loader()
            else:
                model, transform, tokenizer = self.backend.load(self.model, self.pretrained, self.model_cache_dir, self.device)
        if hasattr(model, "eval"):
            model.eval()
        return model, transform, tokenizer


#: What :meth:`ModelSpec.description` (the model part of every cache key) covers: ModelSpec fields and the
#: derived ``precision`` (amp on a CUDA device), the content of local weights, an entry-point backend's identity,
#: the image decoding rules and the library versions.
MODEL_KEY_FIELDS: tuple[str, ...] = (
    "backend",
    "model",
    "pretrained",
    "seed",
    "precision",
    "weights",
    "backend_identity",
    "image_decoding",
    "versions",
)
#: ModelSpec fields the key must ignore: where weights are downloaded to, and the loader callable (the
#: clip_benchmark plugin's ``load_clip`` loads what backend/model/pretrained name).
MODEL_KEY_IGNORES: tuple[str, ...] = ("model_cache_dir", "loader")


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return ""


def preprocessing_ids(transform: Any, tokenizer: Any, precision: str) -> dict[str, str]:
    """Identify the image preprocessing and tokenizer of a loaded model, without memory addresses."""
    tok = f"{type(tokenizer).__module__}.{type(tokenizer).__qualname__}"
    for attribute in ("context_length", "max_length"):
        if hasattr(tokenizer, attribute):
            tok += f":{attribute}={getattr(tokenizer, attribute)}"
    return {"image": stable_repr(transform), "text": tok, "precision": precision}


@dataclass
class EncodeStats:
    """Counts of one encoding run; bad images are named with their error."""

    unique_images: int = 0
    unique_image_contents: int = 0
    unique_captions: int = 0
    encoded_images: int = 0
    encoded_captions: int = 0
    cached_images: int = 0
    cached_captions: int = 0
    model_loaded: bool = False
    bad_images: dict[str, str] = field(default_factory=dict)
    cache: dict[str, Any] = field(default_factory=dict)
    ranks: list[dict[str, Any]] = field(default_factory=list)  # per-rank counts under torchrun

    def to_dict(self) -> dict[str, Any]:
        extra = {"world_size": len(self.ranks), "ranks": list(self.ranks)} if self.ranks else {}
        return {
            **extra,
            "unique_images": self.unique_images,
            "unique_image_contents": self.unique_image_contents,
            "unique_captions": self.unique_captions,
            "encoded_images": self.encoded_images,
            "encoded_captions": self.encoded_captions,
            "cached_images": self.cached_images,
            "cached_captions": self.cached_captions,
            "model_loaded": self.model_loaded,
            "skipped_bad_images": len(self.bad_images),
            "bad_images": dict(sorted(self.bad_images.items())),
            "cache": self.cache,
        }


@dataclass
class EncodedFeatures:
    """L2-normalized float32 features, one row per unique image key / caption text."""

    image_features: np.ndarray
    caption_features: np.ndarray
    image_rows: dict[str, int]
    caption_rows: dict[str, int]
    stats: EncodeStats
    #: image key -> sha256 of the image file's bytes (:func:`clip_cycles.fingerprints.content_hash`), for the
    #: images this pass hashed; empty where a backend does not read the files (precomputed features).
    image_hashes: dict[str, str] = field(default_factory=dict)


class _ImageDataset:
    """Decodes and transforms images in DataLoader workers; failures come back as messages."""

    def __init__(self, items: Sequence[ImageItem], transform: Any) -> None:
        self.items = list(items)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[int, Any, str | None]:
        import io

        from PIL import Image

        item = self.items[index]
        where = f" ({item.path})" if item.path is not None else ""
        try:
            with Image.open(io.BytesIO(item.read_bytes())) as image:
                image.load()
                pixels = self.transform(decode_rgb(image, f"image {item.key!r}{where}"))
        except Image.DecompressionBombError as error:
            # PIL refuses images over 2x Image.MAX_IMAGE_PIXELS: a possible decompression bomb.
            return (
                index,
                None,
                (f"image {item.key!r}{where} is refused as a possible decompression bomb (more pixels than PIL allows): {error}"),
            )
        except decode_errors() as error:  # every PIL decode error: counted with --skip-bad-images, else one sentence
            return index, None, f"image {item.key!r}{where} cannot be decoded: {type(error).__name__}: {error}"
        return index, pixels, None


def _collate(batch: list[tuple[int, Any, str | None]]) -> tuple[list[int], Any, list[tuple[int, str]]]:
    import torch

    good = [(i, p) for i, p, e in batch if e is None]
    bad = [(i, e) for i, _, e in batch if e is not None]
    pixels = torch.stack([p for _, p in good]) if good else None
    return [i for i, _ in good], pixels, bad


def _check_output(output: Any, n: int, what: str, keys: Sequence[str]) -> np.ndarray:
    import torch

    if isinstance(output, (tuple, list)):
        output = output[0]
    if not isinstance(output, torch.Tensor) or output.ndim != 2 or output.shape[0] != n:
        shape = tuple(output.shape) if hasattr(output, "shape") else type(output).__name__
        raise ValueError(f"the model's {what} encoder returned {shape} for a batch of {n}; expected ({n}, dims)")
    output = output.float()
    finite = torch.isfinite(output).all(dim=1)
    if not bool(finite.all()):
        bad = int(torch.nonzero(~finite)[0, 0])
        raise ValueError(f"the model produced NaN or infinite features for {what} {keys[bad]!r}")
    norms = output.norm(dim=1)
    if bool((norms == 0).any()):
        bad = int(torch.nonzero(norms == 0)[0, 0])
        raise ValueError(f"the model produced an all-zero feature for {what} {keys[bad]!r}; it cannot be normalized")
    return torch.nn.functional.normalize(output, dim=-1).cpu().numpy().astype(np.float32)


class _FaultCounter:
    def __init__(self) -> None:
        self.limit = injected_fault_limit()
        self.count = 0

    def tick(self) -> None:
        self.count += 1
        if self.limit is not None and self.count >= self.limit:
            raise InjectedFault(f"{FAULT_ENV}={self.limit}: stopping after {self.count} stored batches")


def _progress(iterable: Any, total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="batch", disable=progress_disable())


class _Session:
    """The model, loaded at most once and only when something must be encoded."""

    def __init__(self, spec: ModelSpec, cache_root: Path | None, stats: EncodeStats) -> None:
        self.spec = spec
        self.cache_root = cache_root
        self.stats = stats
        self.loaded: tuple[Any, Any, Any] | None = None
        self.namespaces: dict[str, FeatureNamespace] | None = None
        self._description: dict[str, Any] | None = None

    def get(self) -> tuple[Any, Any, Any]:
        if self.loaded is None:
            self.loaded = self.spec.load()
            self.stats.model_loaded = True
        return self.loaded

    def cache_namespaces(self) -> dict[str, FeatureNamespace] | None:
        if self.cache_root is None:
            return None
        if self.namespaces is None:
            desc = self.description()
            manifest = read_manifest(self.cache_root, desc)
            if manifest is None:
                _, transform, tokenizer = self.get()
                prep = preprocessing_ids(transform, tokenizer, self.spec.precision)
                write_manifest(self.cache_root, desc, prep)
            else:
                prep = manifest["preprocessing"]
            self.namespaces = namespaces_for(self.cache_root, desc, prep)
        return self.namespaces

    def description(self) -> dict[str, Any]:
        """The spec's cache identity, computed (and its weights hashed) once per session."""
        if self._description is None:
            assert self.cache_root is not None
            self._description = self.spec.description(self.cache_root / "fingerprints")
        return self._description

    def check_preprocessing(self) -> None:
        """After a load, make sure the manifest used for lookups still describes this model."""
        if self.cache_root is None or self.loaded is None or self.namespaces is None:
            return
        _, transform, tokenizer = self.loaded
        prep = preprocessing_ids(transform, tokenizer, self.spec.precision)
        desc = self.description()
        if (
            namespaces_for(self.cache_root, desc, prep)["image"].name != self.namespaces["image"].name
            or namespaces_for(self.cache_root, desc, prep)["text"].name != self.namespaces["text"].name
        ):
            # The library changed the preprocessing since the manifest was written: re-key.
            write_manifest(self.cache_root, desc, prep)
            self.namespaces = namespaces_for(self.cache_root, desc, prep)


def _image_contents(items: Sequence[ImageItem], skip_bad: bool, stats: EncodeStats) -> dict[str, str]:
    """key -> content hash for every readable image; unreadable ones raise or are counted."""
    hashes: dict[str, str] = {}
    for item in _progress(items, len(items), "hashing images") if len(items) > 2000 else items:
        try:
            hashes[item.key] = content_hash(item.read_bytes())
        except (FileNotFoundError, ValueError) as error:
            if not skip_bad:
                raise
            stats.bad_images[item.key] = str(error)
    return hashes


def _encode_images(
    session: _Session,
    items: list[ImageItem],
    hashes: list[str],
    batch_size: int,
    num_workers: int,
    skip_bad: bool,
    store: Callable[[list[str], np.ndarray], None],
    stats: EncodeStats,
    between: Callable[[], None] | None = None,
    kept: str = "nothing was cached",
) -> None:
    """Encode ``items`` in batches decoded by ``num_workers`` workers; ``between`` runs before each batch.

    While the main process runs ``between`` (the caption batches), the workers keep
    decoding the next image batches, so the model is not left waiting on decoding; the
    first ``between`` runs while the workers start and decode the first batch. A decoding worker
    that dies is :class:`WorkerDiedError` (``kept``: what the feature cache holds), not torch's traceback.
    """
    import torch

    model, transform, _ = session.get()
    loader = torch.utils.data.DataLoader(
        _ImageDataset(items, transform),
        batch_size=batch_size,
        shuffle=False,
        num_workers=num_workers,
        collate_fn=_collate,
        prefetch_factor=4 if num_workers > 0 else None,
    )
    spec = session.spec
    autocast = torch.autocast("cuda") if spec.precision == "amp" else nullcontext()
    n_batches = (len(items) + batch_size - 1) // batch_size
    batches = iter(loader)  # the workers start decoding here, before the first caption batch
    for done in _progress(range(n_batches), n_batches, "encoding images"):
        if between is not None:
            between()
        try:
            indices, pixels, bad = next(batches)
        except RuntimeError as error:
            # torch's words for a worker killed (SIGKILL, the OOM killer) or gone: "DataLoader worker (pid ...".
            if not str(error).startswith("DataLoader worker"):
                raise
            raise WorkerDiedError("image-decoding batches", done, n_batches, kept, "--num-workers") from error
        for index, message in bad:
            if not skip_bad:
                raise ValueError(message + " (pass --skip-bad-images to count and skip it)")
            stats.bad_images[items[index].key] = message
        if pixels is not None:
            with torch.no_grad(), autocast:
                output = model.encode_image(pixels.to(spec.device))
            keys = [items[i].key for i in indices]
            features = _check_output(output, len(indices), "image", keys)
            stats.encoded_images += len(indices)
            store([hashes[i] for i in indices], features)


def _encode_captions(
    session: _Session, captions: list[str], batch_size: int, store: Callable[[list[str], np.ndarray], None], stats: EncodeStats
) -> Iterator[None]:
    """Encode ``captions`` batch by batch, yielding after each stored batch (so image batches can interleave)."""
    import torch

    model, _, tokenizer = session.get()
    spec = session.spec
    autocast = torch.autocast("cuda") if spec.precision == "amp" else nullcontext()
    starts = range(0, len(captions), batch_size)
    for start in _progress(starts, len(starts), "encoding captions"):
        batch = captions[start : start + batch_size]
        tokens = tokenizer(batch)
        with torch.no_grad(), autocast:
            output = model.encode_text(tokens.to(spec.device))
        features = _check_output(output, len(batch), "caption", batch)
        stats.encoded_captions += len(batch)
        store([text_hash(c) for c in batch], features)
        yield


def encode(
    images: Sequence[ImageItem],
    captions: Sequence[str],
    spec: ModelSpec,
    feature_cache_dir: str | Path | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    num_workers: int | None = None,
    skip_bad_images: bool = False,
) -> EncodedFeatures:
    """Encode the unique ``images`` and ``captions`` once each, through the feature cache.

    Parameters
    ----------
    images, captions:
        Items of all cycles (duplicates welcome: they are removed here).
    spec:
        The model to use; loaded only if the cache lacks something.
    feature_cache_dir:
        Root of the feature cache; None encodes everything and stores nothing.
    skip_bad_images:
        Count and name missing or undecodable images in ``stats.bad_images`` instead of
        raising; their rows are absent from ``image_rows``.

    Returns
    -------
    EncodedFeatures with L2-normalized float32 tables.
    """
    EncodeOptions.make(batch_size=batch_size)
    stats = EncodeStats()
    unique_images = list({item.key: item for item in images}.values())
    unique_captions = list(dict.fromkeys(captions))
    for i, caption in enumerate(unique_captions):
        if not isinstance(caption, str) or not caption.strip():
            raise ValueError(f"caption {i} is empty or not a string: {caption!r}")
    if spec.loader is None:  # image-only (timm, hf_vision) and pair-scoring (hf_vlm) backends: a clear error
        require_embeddings(spec.backend, spec.model, need_text=bool(unique_captions))
    stats.unique_images = len(unique_images)
    stats.unique_captions = len(unique_captions)
    cache_root = Path(feature_cache_dir) if feature_cache_dir is not None else None
    session = _Session(spec, cache_root, stats)

    if spec.backend.can(PRECOMPUTED_FEATURES):
        return _from_precomputed(session, unique_images, unique_captions, stats)

    key_hash = _image_contents(unique_images, skip_bad_images, stats)
    by_hash: dict[str, ImageItem] = {}
    for item in unique_images:
        if item.key in key_hash:
            by_hash.setdefault(key_hash[item.key], item)
    stats.unique_image_contents = len(by_hash)
    caption_hashes = {c: text_hash(c) for c in unique_captions}

    namespaces = session.cache_namespaces()
    image_table: dict[str, np.ndarray] = {}
    text_table: dict[str, np.ndarray] = {}
    if namespaces is not None:
        image_table, missing_images = namespaces["image"].lookup(list(by_hash))
        text_table, missing_texts = namespaces["text"].lookup(list(caption_hashes.values()))
        if missing_images or missing_texts:
            session.get()
            session.check_preprocessing()
            namespaces = session.namespaces
            assert namespaces is not None
            for ns in namespaces.values():  # count each item once: this lookup replaces the first
                ns.stats.hits = ns.stats.misses = 0
            image_table, missing_images = namespaces["image"].lookup(list(by_hash))
            text_table, missing_texts = namespaces["text"].lookup(list(caption_hashes.values()))
    else:
        missing_images, missing_texts = list(by_hash), list(caption_hashes.values())
    stats.cached_images = len(by_hash) - len(missing_images)
    stats.cached_captions = len(caption_hashes) - len(missing_texts)

    fault = _FaultCounter()

    def storer(kind: str, table: dict[str, np.ndarray]) -> Callable[[list[str], np.ndarray], None]:
        def store(item_hashes: list[str], features: np.ndarray) -> None:
            for h, row in zip(item_hashes, features):
                table[h] = row
            if namespaces is not None:
                namespaces[kind].put(item_hashes, features)
            fault.tick()

        return store

    text_of = {h: c for c, h in caption_hashes.items()}
    caption_batch = max(batch_size, MIN_CAPTION_BATCH)
    caption_steps = (
        _encode_captions(session, [text_of[h] for h in missing_texts], caption_batch, storer("text", text_table), stats)
        if missing_texts
        else iter(())
    )
    if missing_images:
        todo = [by_hash[h] for h in missing_images]
        workers = default_num_workers(len(todo), batch_size) if num_workers is None else num_workers
        between: Callable[[], None] | None = None
        if workers > 0 and missing_texts:  # spread the caption batches over the image batches
            n_caption_batches = math.ceil(len(missing_texts) / caption_batch)
            per_image_batch = math.ceil(n_caption_batches / math.ceil(len(todo) / batch_size))

            def advance() -> None:
                for _ in range(per_image_batch):
                    next(caption_steps, None)

            between = advance

        kept = "the features encoded so far stay in the feature cache" if namespaces is not None else "nothing was cached"
        _encode_images(
            session,
            todo,
            missing_images,
            batch_size,
            workers,
            skip_bad_images,
            storer("image", image_table),
            stats,
            between,
            kept,
        )
    for _ in caption_steps:  # what is left (all of them without decoding workers)
        pass

    if namespaces is not None:
        merged = CacheStats()
        for ns in namespaces.values():
            for k, v in ns.stats.to_dict().items():
                setattr(merged, k, getattr(merged, k) + v)
        stats.cache = merged.to_dict()

    image_keys = [item.key for item in unique_images if item.key in key_hash and key_hash[item.key] in image_table]
    for item in unique_images:
        if item.key in key_hash and key_hash[item.key] not in image_table and item.key not in stats.bad_images:
            # Same content as an image that failed to decode.
            stats.bad_images[item.key] = "same file content as an image that cannot be decoded"
    return _assemble(
        image_keys,
        [image_table[key_hash[k]] for k in image_keys],
        unique_captions,
        [text_table[caption_hashes[c]] for c in unique_captions],
        stats,
        {k: key_hash[k] for k in image_keys},
    )


def _assemble(
    image_keys: list[str],
    image_rows: list[np.ndarray],
    captions: list[str],
    caption_rows: list[np.ndarray],
    stats: EncodeStats,
    image_hashes: dict[str, str] | None = None,
) -> EncodedFeatures:
    def table(rows: list[np.ndarray]) -> np.ndarray:
        return np.stack(rows).astype(np.float32) if rows else np.zeros((0, 0), dtype=np.float32)

    images, texts = table(image_rows), table(caption_rows)
    if images.size and texts.size and images.shape[1] != texts.shape[1]:
        raise ValueError(f"image features have {images.shape[1]} dims but caption features {texts.shape[1]}")
    return EncodedFeatures(
        images, texts, {k: i for i, k in enumerate(image_keys)}, {c: i for i, c in enumerate(captions)}, stats, image_hashes or {}
    )


def _from_precomputed(session: _Session, images: list[ImageItem], captions: list[str], stats: EncodeStats) -> EncodedFeatures:
    model, _, _ = session.get()
    if not hasattr(model, "lookup_images"):
        name = session.spec.backend.name
        raise ValueError(f"backend {name!r} returned {type(model).__name__}, not a precomputed feature table")
    image_features = model.lookup_images([item.key for item in images])
    caption_features = model.lookup_captions(captions)
    norm = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    for name, table, keys in (("image", image_features, [i.key for i in images]), ("caption", caption_features, captions)):
        zero = np.linalg.norm(table, axis=1) == 0
        if zero.any():
            raise ValueError(f"features file has an all-zero {name} feature for {keys[int(np.flatnonzero(zero)[0])]!r}")
    stats.unique_image_contents = len(images)
    return _assemble([i.key for i in images], list(norm(image_features)), captions, list(norm(caption_features)), stats)
