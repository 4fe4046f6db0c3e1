"""Weights that must come from the Hugging Face hub: found locally, or one sentence at once.

Before a backend loads a model, :func:`require_weights` looks for what it would download (an
OpenCLIP tag's file, an ``hf-hub:`` repo, a transformers hub id) in the caches the libraries
use. Found: the load goes ahead, and where the hub cannot be reached it runs with
huggingface_hub's offline mode on (:func:`offline_hub`), so a cached file is used without
retries. Not found: the hub's reachability is probed once (one TCP connection, at most
:data:`PROBE_TIMEOUT_S`; none at all under ``HF_HUB_OFFLINE=1``; the answer kept for
:data:`PROBE_TTL_S`), and an unreachable hub is a :class:`WeightsUnavailableError` naming what
was tried and the offline choices, instead of huggingface_hub's minute of download retries.

Which lookup applies is the backend record's ``weights`` (``open_clip`` or ``hub_id``; see
:class:`~clip_cycles.encoding.backends.Backend`); backends whose downloads are not known here
(timm tags, clip_benchmark's other model types, entry points that declare none, precomputed
features) are passed through unchanged.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from clip_cycles.encoding.backends import Backend, is_random_init, resolve_backend
from clip_cycles.encoding.tiny_model import MODEL_NAME, PRETRAINED_TAG, WEIGHTS_PATH, register_tiny_model
from clip_cycles.settings import hub_endpoint, hub_offline

#: The longest the hub probe waits for one TCP connection (name lookup included).
PROBE_TIMEOUT_S = 3.0
#: How long a probe's answer is reused within one process.
PROBE_TTL_S = 60.0
#: OpenCLIP's default weight file of a hub repo, and the safetensors file it tries first.
OPEN_CLIP_WEIGHTS = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
OFFLINE_CHOICES = (
    "to run offline pass --pretrained '' (random weights), a local weights file (--pretrained /path/model.safetensors "
    "or .pt) or --model local-dir:<folder>, or fetch the weights once where the hub is reachable"
)

#: (monotonic time, endpoint, reason or None) of the last probe.
_probe_memo: tuple[float, str, str | None] | None = None


class WeightsUnavailableError(ValueError):
    """A model's weights are neither local nor cached and the hub cannot be reached (one sentence)."""


@dataclass(frozen=True)
class WeightsNeed:
    """What a load would fetch from the hub: a description, where it was looked for, and whether it is cached."""

    what: str
    looked_in: str
    cached: bool


def _hf_cache(cache_dir: str | None) -> str:
    from huggingface_hub import constants

    return str(Path(cache_dir).expanduser()) if cache_dir else str(constants.HF_HUB_CACHE)


def _cached(repo: str, filenames: tuple[str, ...], cache_dir: str | None, revision: str | None = None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    for name in filenames:
        found = try_to_load_from_cache(repo, name, cache_dir=cache_dir, revision=revision)
        if isinstance(found, str) and os.path.isfile(found):
            return True
    return False


def _open_clip_need(model: str, pretrained: str | None, cache_dir: str | None) -> WeightsNeed | None:
    if model.startswith("local-dir:"):
        return None
    if model.startswith("hf-hub:"):
        repo = model[len("hf-hub:") :]
        cached = _cached(repo, ("open_clip_config.json",), cache_dir) and _cached(repo, OPEN_CLIP_WEIGHTS, cache_dir)
        return WeightsNeed(f"hub repo {repo} (open_clip_config.json and weights)", _hf_cache(cache_dir), cached)
    if is_random_init(pretrained) or os.path.isfile(pretrained or ""):
        return None
    cfg = open_clip_pretrained_cfg(model, pretrained or "")
    if not cfg or "file" in cfg:
        return None  # an unknown tag is refused by check_open_clip_request; a file tag is local
    hub = cfg.get("hf_hub", "")
    if hub:  # open_clip prefers the hub entry whenever it has one
        repo, filename = os.path.split(hub)  # "org/name/" (default file) or "org/name/file.bin"
        if not filename or filename == OPEN_CLIP_WEIGHTS[1]:
            names = OPEN_CLIP_WEIGHTS
        elif filename.endswith((".bin", ".pth")):
            names = (f"{filename[:-4]}.safetensors", filename)
        else:
            names = (filename,)
        cached = _cached(repo, names, cache_dir)
        return WeightsNeed(f"{repo} ({', '.join(names)})", _hf_cache(cache_dir), cached)
    url = cfg.get("url", "")
    if not url:
        return None
    folder = Path(cache_dir).expanduser() if cache_dir else Path.home() / ".cache" / "clip"
    name = os.path.basename(url)
    return WeightsNeed(name, str(folder), (folder / name).is_file())


def open_clip_pretrained_cfg(model: str, tag: str) -> dict[str, Any]:
    """OpenCLIP's entry for ``model`` and ``tag`` (``hf_hub``, ``url`` or ``file``), {} for an unknown pair.

    Where OpenCLIP is imported already, its live table answers (the cycles-tiny tag registered, and
    any tag added at run time). Otherwise its table module is read alone (:func:`_pretrained_table`):
    importing ``open_clip`` imports torch, torchvision and transformers, seconds that a run whose
    weights turn out to be missing, or present, never needs.
    """
    if model == MODEL_NAME and tag == PRETRAINED_TAG:
        return {"file": str(WEIGHTS_PATH)}  # the shipped tiny model (register_tiny_model): a local file
    module = sys.modules.get("open_clip")
    table = None if module is None else sys.modules.get("open_clip.pretrained")
    if table is None:
        table = _pretrained_table()
    if table is None:  # its layout changed: import OpenCLIP after all
        import open_clip

        register_tiny_model()
        return dict(open_clip.get_pretrained_cfg(model, tag) or {})
    return dict(table.get_pretrained_cfg(model, tag) or {})


#: The name of the private copy of ``open_clip/pretrained.py`` (never ``open_clip.*``: a later import is untouched).
_TABLE_PACKAGE = "_clip_cycles_open_clip_table"


def _pretrained_table() -> ModuleType | None:
    """``open_clip/pretrained.py`` run as a private module beside ``open_clip`` (kept once loaded); None on failure.

    The copy's package is a namespace over OpenCLIP's folder, so its relative imports (``.constants``,
    ``.version``) resolve to OpenCLIP's own files without running ``open_clip/__init__.py``. Its one
    optional import of torch (``safetensors.torch``, for loading weights, which the copy never does)
    is made to fail while it loads: a lookup must not cost torch.
    """
    loaded = sys.modules.get(f"{_TABLE_PACKAGE}.pretrained")
    if loaded is not None:
        return loaded
    found = importlib.util.find_spec("open_clip")
    if found is None or not found.submodule_search_locations:
        return None
    folder = list(found.submodule_search_locations)
    package = ModuleType(_TABLE_PACKAGE)
    package.__path__ = folder
    sys.modules[_TABLE_PACKAGE] = package
    blocked = "safetensors.torch" not in sys.modules
    if blocked:
        sys.modules["safetensors.torch"] = None  # type: ignore[assignment]  # an ImportError for the copy only
    try:
        spec = importlib.util.spec_from_file_location(f"{_TABLE_PACKAGE}.pretrained", Path(folder[0]) / "pretrained.py")
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001  # any layout this copy cannot read: the caller imports OpenCLIP
        sys.modules.pop(f"{_TABLE_PACKAGE}.pretrained", None)
        return None
    finally:
        if blocked:
            del sys.modules["safetensors.torch"]
    return module if callable(getattr(module, "get_pretrained_cfg", None)) else None


def _hf_need(model: str, pretrained: str | None, cache_dir: str | None) -> WeightsNeed | None:
    if os.path.isdir(os.path.expanduser(model)) or model.startswith(("/", ".", "~")):
        return None  # a local folder (a missing one gets the library's own error)
    revision = None if is_random_init(pretrained) else pretrained
    cached = _cached(model, ("config.json",), cache_dir, revision)
    label = f"hub model {model}" + (f" at revision {revision}" if revision else "")
    return WeightsNeed(label, _hf_cache(cache_dir), cached)


#: A backend record's ``weights`` -> how its download is looked for: an OpenCLIP tag or ``hf-hub:`` repo,
#: or a transformers hub id (or local folder) in ``model``.
WEIGHTS_LOOKUPS: dict[str, Callable[[str, str | None, str | None], WeightsNeed | None]] = {
    "open_clip": _open_clip_need,
    "hub_id": _hf_need,
}


def weights_need(backend: Backend | str, model: str, pretrained: str | None, cache_dir: str | None = None) -> WeightsNeed | None:
    """What loading ``model`` through ``backend`` (a record or a name) would fetch from the hub; None: nothing, or unknown."""
    lookup = WEIGHTS_LOOKUPS.get(resolve_backend(backend).weights or "")
    return None if lookup is None else lookup(model, pretrained, cache_dir)


def _connect(host: str, port: int, timeout: float, result: list[str | None]) -> None:
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        result.append(None)
    except OSError as error:
        result.append(f"{type(error).__name__}: {error}")


def probe_hub(endpoint: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """One TCP connection to ``endpoint``'s host within ``timeout`` (name lookup included): None, or why it failed."""
    parts = urlsplit(endpoint)
    host = parts.hostname or endpoint
    port = parts.port or (80 if parts.scheme == "http" else 443)
    result: list[str | None] = []
    # A thread bounds the name lookup too, which socket timeouts do not cover.
    worker = threading.Thread(target=_connect, args=(host, port, timeout, result), daemon=True)
    worker.start()
    worker.join(timeout)
    return result[0] if result else f"no answer within {timeout:g} s"


def hub_unreachable() -> str | None:
    """Why the hub cannot be reached now (the offline switch, or a probe's failure), or None when it can.

    ``HF_HUB_OFFLINE=1`` answers without any network call; otherwise one probe's answer is kept
    for :data:`PROBE_TTL_S` seconds per endpoint.
    """
    global _probe_memo
    switch = hub_offline()
    if switch is not None:
        return switch
    endpoint = hub_endpoint()
    now = time.monotonic()
    if _probe_memo is not None and _probe_memo[1] == endpoint and now - _probe_memo[0] < PROBE_TTL_S:
        return _probe_memo[2]
    reason = probe_hub(endpoint)
    _probe_memo = (time.monotonic(), endpoint, None if reason is None else f"{endpoint} cannot be reached ({reason})")
    return _probe_memo[2]


def forget_probe() -> None:
    """Drop the kept probe answer (tests; a process that knows its network changed)."""
    global _probe_memo
    _probe_memo = None


def require_weights(backend: Backend | str, model: str, pretrained: str | None, cache_dir: str | None = None) -> bool:
    """Check that ``model``'s weights can be had before the backend tries; True when the load must stay offline.

    A run asks through its spec (:meth:`~clip_cycles.encoding.encoder.ModelSpec.require_weights`), once.

    Local or cached weights need no probe when the hub is reachable; cached weights with the hub
    unreachable return True (load with :func:`offline_hub`). Weights that are nowhere here with
    the hub unreachable raise :class:`WeightsUnavailableError`.
    """
    record = resolve_backend(backend)
    need = weights_need(record, model, pretrained, cache_dir)
    if need is None:
        return False
    reason = hub_unreachable()
    if reason is None:
        return False
    if need.cached:
        return True
    # A hub id's revision is part of `what`; an OpenCLIP tag is named here.
    tag = "" if is_random_init(pretrained) or record.weights == "hub_id" else f" with pretrained {pretrained!r}"
    raise WeightsUnavailableError(
        f"model {model!r}{tag} (backend {record.name}) has no weights on this machine: {need.what} is not in "
        f"{need.looked_in} and {reason}; {OFFLINE_CHOICES}"
    )


@contextlib.contextmanager
def offline_hub(enabled: bool = True) -> Iterator[None]:
    """huggingface_hub's offline mode (cached files only, no requests, no retries) while the block runs."""
    if not enabled:
        yield
        return
    from huggingface_hub import constants

    saved = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved


__all__ = [
    "PROBE_TIMEOUT_S",
    "PROBE_TTL_S",
    "WeightsNeed",
    "WEIGHTS_LOOKUPS",
    "WeightsUnavailableError",
    "forget_probe",
    "hub_unreachable",
    "offline_hub",
    "probe_hub",
    "require_weights",
    "weights_need",
]
