"""Sharded encoding on torch.distributed: many processes, GPUs or nodes, one shared feature cache.

Launched under ``torchrun``, ``clip-cycles encode``, ``clip-cycles eval`` and the
clip_benchmark plugin join the process group torchrun describes (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``): NCCL when the model
runs on CUDA (each rank on ``cuda:<LOCAL_RANK>``), gloo on CPU. Then

1. rank 0 resolves the dataset roots first (it builds a raw root's families or the
   shapes world once); the others wait on a barrier and reuse its folders;
2. the sorted unique image keys and caption texts are split round-robin across ranks
   (:func:`shard`: rank ``r`` of ``w`` takes items ``r, r + w, r + 2w, ...``), and each
   rank encodes its shard into the feature cache (:func:`clip_cycles.encoding.encoder.encode`:
   only what the cache lacks, one atomic shard file per batch);
3. every rank reaches a barrier; rank 0 gathers the ranks' counts, reads all features
   back from the cache and computes the metrics / writes the outputs. The other ranks
   return without output.

Faults: a rank that dies leaves only whole cache shards (atomic writes), and torchrun
stops the others. Rerunning with any world size (or in one process) encodes only the
items the cache lacks. ``CLIP_CYCLES_FAULT_AFTER_BATCHES=<n>`` with
``CLIP_CYCLES_FAULT_RANK=<r>`` makes only rank ``r`` fail after ``n`` stored batches.

The feature cache (``--cache-dir`` or ``$CLIP_CYCLES_CACHE``) and the data cache must be
on a filesystem every rank sees (on several nodes: a shared filesystem); ``--no-cache``
is refused under torchrun because the ranks could not hand features to rank 0. Rank 0
warns when it has to encode items other ranks reported as stored (an unshared cache).

Usage, one node with 4 GPUs (or 4 CPU processes: add ``--device cpu``)::

    torchrun --standalone --nproc_per_node 4 -m clip_cycles eval \\
        --task cycles/coco_all --model-type open_clip --model ViT-B-32 --pretrained openai \\
        --dataset-root /data/coco_cycles --cache-dir /shared/clip_cycles_cache

    torchrun --standalone --nproc_per_node 4 -m clip_cycles encode --task cycles/coco_all ...
    torchrun --standalone --nproc_per_node 4 -m clip_cycles.commands.clip_benchmark eval \\
        --dataset cycles/coco_all --model ViT-B-32 --pretrained openai --dataset_root /data/coco_cycles

(the plugin reads the cache root from ``$CLIP_CYCLES_CACHE``; do not pass clip_benchmark's
own ``--distributed``, which splits whole runs across ranks instead: with it each
cycles run is encoded by the one rank that gets it.)

Two nodes with 8 GPUs each (run the same command on both; ``--node_rank`` 0 and 1)::

    torchrun --nnodes 2 --nproc_per_node 8 --node_rank 0 \\
        --rdzv_backend c10d --rdzv_endpoint node0.example:29500 --rdzv_id cycles-eval \\
        -m clip_cycles eval --task cycles/coco_all --model ViT-L-14 --pretrained openai \\
        --dataset-root /shared/coco_cycles --cache-dir /shared/clip_cycles_cache

Without torchrun (no ``WORLD_SIZE``, or ``WORLD_SIZE=1``) nothing here changes anything:
the commands run in one process as before.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generic, Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar

from clip_cycles.encoding.backends import PRECOMPUTED_FEATURES
from clip_cycles.encoding.encoder import encode
from clip_cycles.settings import dist_timeout_s

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from clip_cycles.data.sources.images import ImageItem
    from clip_cycles.encoding.encoder import EncodedFeatures, ModelSpec

#: torchrun's variables: (name, default when absent).
RANK_ENV, WORLD_SIZE_ENV, LOCAL_RANK_ENV = "RANK", "WORLD_SIZE", "LOCAL_RANK"

#: Process-group backend per device type: collective libraries, not a scheduler of our own.
BACKENDS: dict[str, str] = {"cuda": "nccl", "cpu": "gloo"}

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


@dataclass(frozen=True)
class DistContext:
    """Where this process stands: its rank among ``world_size`` and the device it encodes on.

    ``backend`` is None for a single process (no process group).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None
    device: str = "cpu"

    @property
    def is_main(self) -> bool:
        """Rank 0 computes the metrics and writes the outputs."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        """Whether there are other ranks to share the work with."""
        return self.world_size > 1 and self.backend is not None


_SINGLE = DistContext()
_current: DistContext = _SINGLE
_owned = False  # whether this module initialized the process group (and so tears it down)
_exit_hook = False


def _int_env(name: str, environ: Mapping[str, str], default: int | None = None) -> int | None:
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer (set by torchrun)") from None


def world_from_env(environ: Mapping[str, str] | None = None) -> tuple[int, int, int] | None:
    """``(rank, world_size, local_rank)`` from torchrun's variables, or None outside torchrun."""
    env = os.environ if environ is None else environ
    world = _int_env(WORLD_SIZE_ENV, env)
    if world is None:
        return None
    rank = _int_env(RANK_ENV, env)
    if rank is None:
        raise ValueError(f"{WORLD_SIZE_ENV}={world} is set but {RANK_ENV} is not; launch with torchrun")
    local = _int_env(LOCAL_RANK_ENV, env, rank)
    assert local is not None
    if world < 1 or not 0 <= rank < world or local < 0:
        raise ValueError(
            f"inconsistent torchrun variables: {RANK_ENV}={rank} {WORLD_SIZE_ENV}={world} "
            f"{LOCAL_RANK_ENV}={local}; expected 0 <= RANK < WORLD_SIZE"
        )
    return rank, world, local


def device_for_rank(device: str, local_rank: int) -> str:
    """A bare ``cuda`` becomes this rank's GPU ``cuda:<local_rank>``; explicit devices are kept."""
    return f"cuda:{local_rank}" if device == "cuda" else device


def backend_for(device: str) -> str:
    """The process-group backend for a device (``nccl`` for CUDA, ``gloo`` for CPU)."""
    kind = device.split(":", 1)[0]
    if kind not in BACKENDS:
        raise ValueError(f"no torch.distributed backend is registered for device {device!r}; known: {sorted(BACKENDS)}")
    return BACKENDS[kind]


def current() -> DistContext:
    """The context set by :func:`init` (a single-process context before, or outside torchrun)."""
    return _current


def init(device: str, environ: Mapping[str, str] | None = None) -> DistContext:
    """Join torchrun's process group (once per process) and return this rank's context.

    Outside torchrun, or with ``WORLD_SIZE=1``, nothing is initialized and the context is
    single-process with ``device`` unchanged.
    """
    global _current, _owned
    world = world_from_env(environ)
    if world is None or world[1] == 1:
        return DistContext(device=device)
    rank, world_size, local_rank = world
    device = device_for_rank(device, local_rank)
    backend = backend_for(device)
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        if backend == "nccl":
            torch.cuda.set_device(torch.device(device))
        timeout = dist_timeout_s()
        dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout))
        _owned = True
    elif dist.get_world_size() != world_size or dist.get_rank() != rank:
        raise ValueError(
            f"a process group of rank {dist.get_rank()}/{dist.get_world_size()} is already initialized "
            f"but torchrun says {rank}/{world_size}"
        )
    else:
        backend = str(dist.get_backend())
    _current = DistContext(rank, world_size, local_rank, backend, device)
    return _current


def teardown() -> None:
    """Destroy the process group if :func:`init` created it; back to single-process."""
    global _current, _owned
    if _owned:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    _owned = False
    _current = _SINGLE


@contextmanager
def process_group(spec: ModelSpec, keep: bool = False, enabled: bool = True) -> Iterator[DistContext]:
    """Run a command body as one rank: joins torchrun's group, puts ``spec`` on this rank's device.

    ``keep`` leaves the group up afterwards (the clip_benchmark plugin runs one body per
    dataset in the same processes); it is destroyed at interpreter exit then.
    ``enabled=False`` runs the body as a single process whatever the environment says.
    """
    global _exit_hook
    ctx = init(spec.device) if enabled else DistContext(device=spec.device)
    spec.device = ctx.device
    try:
        yield ctx
    finally:
        if ctx.active and not keep:
            teardown()
        elif ctx.active and not _exit_hook:
            import atexit

            atexit.register(teardown)
            _exit_hook = True


def barrier(ctx: DistContext | None = None) -> None:
    """Wait for every rank (no-op for a single process)."""
    ctx = ctx or current()
    if not ctx.active:
        return
    import torch.distributed as dist

    if ctx.backend == "nccl":
        dist.barrier(device_ids=[ctx.local_rank])
    else:
        dist.barrier()


@contextmanager
def main_process_first(ctx: DistContext | None = None) -> Iterator[None]:
    """Rank 0 runs the body first (builds data into shared folders); the others then run it and reuse."""
    ctx = ctx or current()
    if ctx.active and not ctx.is_main:
        barrier(ctx)
    yield
    if ctx.active and ctx.is_main:
        barrier(ctx)


def shard(keys: Iterable[K], rank: int, world_size: int) -> list[K]:
    """Rank ``rank``'s share of the sorted unique ``keys``: every ``world_size``-th, from index ``rank``.

    Independent of input order and duplicates; shards are disjoint, cover every key and
    differ in size by at most one.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside a world of size {world_size}")
    return sorted(set(keys))[rank::world_size]  # type: ignore[type-var]


def gather_to_main(obj: Any, ctx: DistContext | None = None) -> list[Any] | None:
    """Every rank's ``obj`` (in rank order) on rank 0; None on the others."""
    ctx = ctx or current()
    if not ctx.active:
        return [obj]
    import torch.distributed as dist

    out: list[Any] | None = [None] * ctx.world_size if ctx.is_main else None
    dist.gather_object(obj, out, dst=0)
    return out


def require_shared_cache(cache_dir: str | Path | None, work: str, results: str) -> None:
    """Refuse sharded ``work`` without a cache: rank 0 reads the other ranks' ``results`` from it."""
    if cache_dir is None:
        raise ValueError(
            f"{work} under torchrun needs the shared cache (--cache-dir or $CLIP_CYCLES_CACHE): "
            f"drop --no-cache; rank 0 reads the other ranks' {results} from it"
        )


@dataclass
class Completed(Generic[R]):
    """Rank 0's result of :func:`rank_zero_completes`: its full pass, every rank's report, the images any rank found bad."""

    result: R
    reports: list[dict[str, Any]]
    bad_images: dict[str, str]


def rank_zero_completes(
    ctx: DistContext,
    cache_dir: str | Path | None,
    work: str,
    results: str,
    run_shard: Callable[[], dict[str, Any]],
    complete: Callable[[dict[str, str]], R],
    redone: Callable[[R], str | None],
) -> Completed[R] | None:
    """The sharded pattern "every rank fills the cache with its shard, rank 0 completes" (active process group).

    Each rank calls ``run_shard()``, which computes its shard into the shared cache and
    returns a JSON-able report with a ``bad_images`` mapping; all ranks meet at a barrier and
    the reports are gathered on rank 0, where ``complete(bad_images)`` runs the whole job
    again, reading everything back from the cache. ``redone(result)`` describes what that
    pass had to compute itself ("encode 3 images", None when nothing): a warning then says
    the cache is probably not shared. Returns None on the other ranks.
    """
    require_shared_cache(cache_dir, work, results)
    report = run_shard()
    barrier(ctx)
    reports = gather_to_main(report, ctx)
    if not ctx.is_main:
        return None
    assert reports is not None
    bad = {k: v for r in reports for k, v in r["bad_images"].items()}
    result = complete(bad)
    message = redone(result)
    if message:
        logger.warning(
            "rank 0 had to %s the other ranks reported as done; is the cache %s on a filesystem every rank (and node) sees?",
            message,
            cache_dir,
        )
    return Completed(result, reports, bad)


def encode_sharded(
    images: Sequence[ImageItem],
    captions: Sequence[str],
    spec: ModelSpec,
    feature_cache_dir: str | Path | None,
    batch_size: int,
    num_workers: int | None = None,
    skip_bad_images: bool = False,
    ctx: DistContext | None = None,
) -> EncodedFeatures | None:
    """:func:`clip_cycles.encoding.encoder.encode` spread over the ranks; the full result on rank 0, None elsewhere.

    With a single process this is exactly ``encode``. Under an active process group each
    rank encodes its :func:`shard` of the unique image keys and caption texts into the
    cache, all meet at a barrier, and rank 0 reads every feature back (its stats sum the
    ranks' counts and list them under ``ranks``).
    """
    ctx = ctx or current()
    if not ctx.active:
        return encode(images, captions, spec, feature_cache_dir, batch_size, num_workers, skip_bad_images)
    require_shared_cache(feature_cache_dir, "encoding", "features")
    if spec.backend.can(PRECOMPUTED_FEATURES):  # precomputed tables: nothing to encode, rank 0 reads them
        gather_to_main(None, ctx)
        return encode(images, captions, spec, None, batch_size, num_workers, skip_bad_images) if ctx.is_main else None

    def encode_shard() -> dict[str, Any]:
        by_key = {item.key: item for item in images}
        mine_images = [by_key[k] for k in shard(by_key, ctx.rank, ctx.world_size)]
        mine_captions = shard(captions, ctx.rank, ctx.world_size)
        part = encode(mine_images, mine_captions, spec, feature_cache_dir, batch_size, num_workers, skip_bad_images)
        logger.info(
            "rank %d/%d: encoded %d images and %d captions of its shard (%d images, %d captions; %d + %d cached)",
            ctx.rank,
            ctx.world_size,
            part.stats.encoded_images,
            part.stats.encoded_captions,
            len(mine_images),
            len(mine_captions),
            part.stats.cached_images,
            part.stats.cached_captions,
        )
        return {"rank": ctx.rank, "images": len(mine_images), "captions": len(mine_captions), **part.stats.to_dict()}

    def encode_all(bad: dict[str, str]) -> EncodedFeatures:
        return encode(
            [item for item in images if item.key not in bad],
            captions,
            spec,
            feature_cache_dir,
            batch_size,
            num_workers,
            skip_bad_images,
        )

    def redone(final: EncodedFeatures) -> str | None:
        stats = final.stats
        if stats.encoded_images or stats.encoded_captions:
            return f"encode {stats.encoded_images} images and {stats.encoded_captions} captions"
        return None

    done = rank_zero_completes(ctx, feature_cache_dir, "encoding", "features", encode_shard, encode_all, redone)
    if done is None:
        return None
    final, reports = done.result, done.reports
    stats = final.stats
    stats.bad_images.update(done.bad_images)
    stats.encoded_images += sum(r["encoded_images"] for r in reports)
    stats.encoded_captions += sum(r["encoded_captions"] for r in reports)
    stats.cached_images = sum(r["cached_images"] for r in reports)
    stats.cached_captions = sum(r["cached_captions"] for r in reports)
    stats.model_loaded = stats.model_loaded or any(r["model_loaded"] for r in reports)
    stats.ranks = [
        {
            k: r[k]
            for k in (
                "rank",
                "images",
                "captions",
                "encoded_images",
                "encoded_captions",
                "cached_images",
                "cached_captions",
                "skipped_bad_images",
            )
        }
        for r in reports
    ]
    return final
