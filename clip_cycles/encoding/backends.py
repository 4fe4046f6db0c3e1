"""Model backends: a registry of loaders in clip_benchmark's convention.

A loader is ``loader(model_name, pretrained, cache_dir, device) -> (model, transform,
tokenizer)`` where ``model`` has ``encode_image(pixels)`` and ``encode_text(tokens)``,
``transform`` maps a PIL image to a tensor and ``tokenizer`` maps a list of strings to
a token tensor. Built in:

- ``open_clip``: any OpenCLIP config (or ``local-dir:``/``hf-hub:`` name) with a
  pretrained tag, a checkpoint path (loaded weights-only) or none (random init);
- every model type clip_benchmark registers (``clip_benchmark.models.TYPE2FUNC``);
- ``hf``: Hugging Face transformers CLIP/SigLIP models via their auto classes;
- ``features``: precomputed embeddings (safetensors or npz) keyed by image file and
  caption text (the ``precomputed_features`` capability).

Each is one :class:`Backend` record: name, loader, capabilities (image and text embeddings,
pair scores, precomputed features), identity and how its weights are looked for before a
load. :func:`resolve_backend` resolves a name to its record once; the
:class:`~clip_cycles.encoding.encoder.ModelSpec` carries it, and every "can this backend do X"
asks it (``spec.backend.can("pair_scores")``), never the name.

A third-party package adds one through the entry-point group ``clip_cycles.backends``
(``name = package.module:BACKEND``, a record; a bare loader function still works, as a
two-tower backend). Backends are resolved lazily: resolving a name imports that backend alone
(clip_benchmark's model table only when a name nobody else has loads); listing names imports
clip_benchmark's table, and only when asked for. An entry-point or registered backend enters
the feature-cache key with its distribution name and version, a sha256 of its loader's module
file and, where it declares one, its ``cache_fingerprint`` (:meth:`Backend.identity`).

Nothing loaded here runs code that came with the model: every transformers
``from_pretrained`` gets ``trust_remote_code=False`` (so transformers never prompts on
stdin), a local folder whose configs ask for remote code (``auto_map``) is refused before
transformers sees it (:func:`refuse_remote_code`), and a pickled checkpoint that needs more
than tensors is refused by name (:func:`pickle_refusal`).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import io
import json
import logging
import os
import pickle
import sys
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from clip_cycles.encoding.tiny_model import register_tiny_model
from clip_cycles.encoding.weights_files import WEIGHTS_SUFFIXES, check_weights_file, check_weights_folder, require_file
from clip_cycles.registry import Registry, close_matches, resolve_target
from clip_cycles.regular_files import load_json_text, read_regular_file

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "clip_cycles.backends"

#: Values of ``pretrained`` that mean "no weights: random init from the seed".
NO_WEIGHTS = frozenset({"", "none", "random", "scratch"})

Loader = Callable[..., tuple[Any, Any, Any]]

#: What a backend can give: image and caption embeddings, one score per (image, caption) pair
#: (generative VLMs), or embeddings read from a table computed elsewhere (nothing is encoded).
IMAGE, TEXT, PAIR_SCORES, PRECOMPUTED_FEATURES = "image", "text", "pair_scores", "precomputed_features"
CAPABILITIES: frozenset[str] = frozenset({IMAGE, TEXT, PAIR_SCORES, PRECOMPUTED_FEATURES})
#: A two-tower model's capabilities: the default of a backend that declares none.
EMBEDDINGS: frozenset[str] = frozenset({IMAGE, TEXT})
#: How the weights a backend would download are looked for (:mod:`clip_cycles.encoding.hub_access`):
#: an OpenCLIP tag or ``hf-hub:`` repo, or a transformers hub id in ``--model``; None: not known here.
WEIGHTS_KINDS: tuple[str, ...] = ("open_clip", "hub_id")
#: ``origin`` of a name no registry entry has: one of clip_benchmark's model types, looked up when loaded.
CLIP_BENCHMARK_ORIGIN = "clip_benchmark"


@dataclass(frozen=True)
class Backend:
    """One model backend, resolved once (:func:`resolve_backend`) and carried in the ModelSpec.

    Every "can this backend do X" is :meth:`can`; the result records still name the backend by
    ``name``. A third-party package declares its backend as one of these and points its entry
    point at it (``name`` is then the entry point's)::

        BACKEND = Backend(loader=load, capabilities=("image", "text"), cache_fingerprint=cache_fingerprint)

    Parameters
    ----------
    name:
        The name it is registered under (``--model-type``); written into result records.
    loader:
        ``loader(model_name, pretrained, cache_dir, device) -> (model, transform, tokenizer)``, a
        ``"module:attribute"`` resolved when the model loads, or None: clip_benchmark's model type
        of that name, looked up when loaded.
    capabilities:
        A subset of :data:`CAPABILITIES` (default :data:`EMBEDDINGS`): any collection of names, or
        one name, kept as a frozenset.
    weights:
        One of :data:`WEIGHTS_KINDS` when the weights it downloads can be looked for before the
        load (offline runs fail with one sentence); None otherwise.
    cache_fingerprint:
        A JSON-able value, or ``cache_fingerprint(model_name, pretrained)`` returning one, that
        changes whenever the features would (see :meth:`identity`).
    origin, target, distribution, version:
        Where the record came from (filled by :func:`resolve_backend`): ``builtin``,
        ``registered``, ``entry point`` or ``clip_benchmark``; the ``module:attribute`` it was
        registered as; an entry point's distribution and version.
    """

    name: str = ""
    loader: Loader | str | None = None
    capabilities: frozenset[str] = EMBEDDINGS
    weights: str | None = None
    cache_fingerprint: Any = field(default=None, hash=False)
    origin: str = "registered"
    target: str = ""
    distribution: str = ""
    version: str = ""

    def __post_init__(self) -> None:
        declared = self.capabilities
        capabilities = frozenset([declared] if isinstance(declared, str) else declared)
        if not capabilities or capabilities - CAPABILITIES:
            raise ValueError(
                f"model backend {self.name or self.target or self.loader!r}: capabilities must be a non-empty subset of "
                f"{', '.join(sorted(CAPABILITIES))}, got {declared!r}"
            )
        object.__setattr__(self, "capabilities", capabilities)
        if self.weights is not None and self.weights not in WEIGHTS_KINDS:
            raise ValueError(
                f"model backend {self.name!r}: weights must be one of {', '.join(WEIGHTS_KINDS)} or None, got {self.weights!r}"
            )

    def __str__(self) -> str:
        return self.name

    def can(self, capability: str) -> bool:
        """Whether this backend gives ``capability`` (one of :data:`CAPABILITIES`; another name is an error)."""
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown backend capability {capability!r}; known: {', '.join(sorted(CAPABILITIES))}")
        return capability in self.capabilities

    def loader_function(self) -> Loader:
        """The loader callable: imported on first use, or clip_benchmark's model type (an unknown name is an error)."""
        if callable(self.loader):
            return self.loader
        if isinstance(self.loader, str):
            return resolve_target(self.loader)
        found = clip_benchmark_model_types().get(self.name)
        if found is None:
            raise ValueError(BACKENDS.unknown_message(self.name, names=available_backends()))
        return found

    def load(
        self, model_name: str, pretrained: str | None, cache_dir: str | None = None, device: str = "cpu"
    ) -> tuple[Any, Any, Any]:
        """Load ``(model, transform, tokenizer)`` (no prompts); the model is put in eval mode."""
        loader = self.loader_function()
        with no_prompts():
            model, transform, tokenizer = loader(model_name=model_name, pretrained=pretrained, cache_dir=cache_dir, device=device)
        if hasattr(model, "eval"):
            model.eval()
        return model, transform, tokenizer

    def identity(self, model_name: str, pretrained: str | None) -> dict[str, Any] | None:
        """What identifies a third-party backend's code in the feature-cache key; None for clip_cycles' own.

        An entry-point (``clip_cycles.backends``) or registered backend gives its distribution name
        and version (entry points), its ``module:attribute`` target, the sha256 of its loader's
        module file and, if it declares one, ``cache_fingerprint``: a JSON-able value, or a
        callable ``cache_fingerprint(model_name, pretrained)`` returning one, that changes whenever
        the features would (weights it fetches itself, code in other modules). Without one a
        warning says, once per process, that caching goes by name, version and that one file only.
        Local weights named by ``--model``/``--pretrained`` enter the key anyway
        (:meth:`clip_cycles.encoding.encoder.ModelSpec.description`).
        """
        if self.origin in ("builtin", CLIP_BENCHMARK_ORIGIN):
            return None  # clip_benchmark's model types: its version is in the key already
        loader = self.loader_function()
        qualified = f"{getattr(loader, '__module__', '')}:{getattr(loader, '__qualname__', '')}"
        identity: dict[str, Any] = {
            "source": "entry_point" if self.origin == "entry point" else "registered",
            "target": self.target or qualified,
            "distribution": self.distribution,
            "version": self.version,
            "code_sha256": _module_file_sha256(loader),
        }
        declared = self.cache_fingerprint
        if callable(declared):
            declared = declared(model_name, pretrained)
        if declared is not None:
            try:
                json.dumps(declared, sort_keys=True)
            except (TypeError, ValueError) as error:
                message = f"backend {self.name!r}: cache_fingerprint must be JSON-serializable, not {declared!r}: {error}"
                raise ValueError(message) from None
            identity["fingerprint"] = declared
        elif self.name not in _WARNED_NAME_ONLY:
            _WARNED_NAME_ONLY.add(self.name)
            logger.warning(
                "backend %r declares no cache_fingerprint: its cached features are keyed by name only (with its "
                "distribution version %r and the sha256 of module %s); weights or code it fetches by itself are not "
                "tracked. Give its loader a cache_fingerprint, or pass --no-cache",
                self.name,
                identity["version"],
                identity["target"].partition(":")[0] or "its module",
            )
        return identity


#: The backends clip_cycles ships, as data: what each can do is readable without importing its loader.
BUILTIN_BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend("open_clip", "clip_cycles.encoding.backends:load_open_clip", weights="open_clip"),
        Backend("hf", "clip_cycles.encoding.backends:load_hf", weights="hub_id"),
        Backend("features", "clip_cycles.encoding.backends:load_features", EMBEDDINGS | {PRECOMPUTED_FEATURES}),
        # image-only (clip_cycles.encoding.backends_vision); timm tags are not looked for before the load
        Backend("timm", "clip_cycles.encoding.backends_vision:load_timm", frozenset({IMAGE})),
        Backend("hf_vision", "clip_cycles.encoding.backends_vision:load_hf_vision", frozenset({IMAGE}), weights="hub_id"),
        # pair scores (clip_cycles.encoding.vlm_scores)
        Backend("hf_vlm", "clip_cycles.encoding.vlm_scores:load_hf_vlm", frozenset({PAIR_SCORES}), weights="hub_id"),
    )
}

#: name -> Backend record, loader or "module:attribute" (resolved on first use): the built-in backends
#: (origin "builtin"), those registered in code and the entry points of ``clip_cycles.backends``.
#: clip_benchmark's own model types are not in it: they are read only for a name it lacks.
BACKENDS: Registry[Backend | Loader] = Registry("model backend", entry_point_group=ENTRY_POINT_GROUP)
for _name, _backend in BUILTIN_BACKENDS.items():
    BACKENDS.register(_name, _backend, origin="builtin")


def register_backend(name: str, loader: Backend | Loader | str, replace: bool = False) -> None:
    """Register ``loader`` (a :class:`Backend`, a loader callable or ``"module:attribute"``) under ``name``."""
    BACKENDS.register(name, loader, replace=replace)


def is_random_init(pretrained: str | None) -> bool:
    """Whether ``pretrained`` asks for no weights (random init, seeded by the caller)."""
    return pretrained is None or pretrained.strip().lower() in NO_WEIGHTS


def _backends(name: str | None = None) -> Registry[Backend | Loader]:
    """The registry, its entry points read again unless ``name`` is built in or registered in code.

    A distribution installed or upgraded since the last lookup (and the module behind it) is
    seen as it is now, as the feature-cache key needs; a name registered in code takes
    precedence over every entry point, so looking it up reads none.
    """
    if not (isinstance(name, str) and name in BACKENDS.registered()):
        BACKENDS.refresh_entry_points()
    return BACKENDS


def clip_benchmark_model_types() -> dict[str, Loader]:
    """clip_benchmark's own loaders (``TYPE2FUNC``), without the ones clip_cycles added to it."""
    try:
        from clip_benchmark.models import TYPE2FUNC
    except ImportError:
        return {}
    return {k: v for k, v in TYPE2FUNC.items() if not getattr(v, "_clip_cycles_backend", False)}


def available_backends(include_clip_benchmark: bool = True) -> list[str]:
    """Names of every backend: built in, clip_benchmark's model types, entry points, registered."""
    names = set(_backends().names())
    if include_clip_benchmark:
        names |= set(clip_benchmark_model_types())
    return sorted(names)


def _deprecated_capabilities(name: str, loader: Loader, where: str) -> Any:
    """A loader's old ``capabilities`` attribute, read for one more release with a FutureWarning naming the new way."""
    declared = getattr(loader, "capabilities", None)
    if declared is not None:
        warnings.warn(
            f"model backend {name!r} declares its capabilities as an attribute of its loader function "
            f"({where}.capabilities), which is deprecated and stops working in the next release; declare them in "
            "the backend's record instead, Backend(loader=..., capabilities=...) from clip_cycles.encoding.backends, "
            "and point the entry point (or register_backend) at that record (docs/backends.md)",
            FutureWarning,
            stacklevel=3,
        )
    return declared


def resolve_backend(backend: Backend | str) -> Backend:
    """The :class:`Backend` record of ``backend`` (a record is returned as it is); resolved once per ModelSpec.

    Built-in and registered names (which take precedence over entry points) need no scan at all;
    an entry point's target is imported (a :class:`Backend`, or a bare loader function: two
    embeddings, or the capabilities of its deprecated ``capabilities`` attribute). A name nobody
    registers is clip_benchmark's model type of that name: embeddings, its loader looked up (and
    an unknown name refused, listing the available ones) only when the model loads, so
    clip_benchmark's model table is not imported before then.
    """
    if isinstance(backend, Backend):
        return backend
    name = backend
    registry = _backends(name)
    if not isinstance(name, str):
        raise ValueError(BACKENDS.unknown_message(name, names=available_backends()))
    if name not in registry:
        return Backend(name, None, origin=CLIP_BENCHMARK_ORIGIN)
    entry = registry.entry(name)
    declared = registry.get(name)
    found = {
        "name": name,
        "origin": entry.origin,
        "target": entry.target if isinstance(entry.target, str) else "",
        "distribution": entry.distribution or "",
        "version": entry.version or "",
    }
    if isinstance(declared, Backend):
        if declared.name and declared.name != name:
            raise ValueError(
                f"model backend {name!r} ({found['target'] or 'registered in code'}) is a record named "
                f"{declared.name!r}; leave Backend(name=...) empty or give it the name it is registered under"
            )
        return replace(declared, **found)
    if not callable(declared):
        raise ValueError(
            f"model backend {name!r} ({found['target']}) is {type(declared).__name__}, neither a Backend record nor a "
            "loader function"
        )
    where = found["target"] or f"{getattr(declared, '__module__', '')}:{getattr(declared, '__qualname__', '')}"
    capabilities = _deprecated_capabilities(name, declared, where)
    return Backend(
        loader=declared,
        capabilities=EMBEDDINGS if capabilities is None else capabilities,
        cache_fingerprint=getattr(declared, "cache_fingerprint", None),
        **found,
    )


def get_backend(name: str) -> Loader:
    """The loader of backend ``name``; an unknown name is an error listing the available ones.

    clip_benchmark's model table (which imports clip_benchmark.models, open_clip and more) is read
    only for a name nobody else has.
    """
    return resolve_backend(name).loader_function()


def backend_identity(name: str, model_name: str, pretrained: str | None) -> dict[str, Any] | None:
    """:meth:`Backend.identity` of backend ``name``."""
    return resolve_backend(name).identity(model_name, pretrained)


#: Backends already warned about for caching by name only (once per process).
_WARNED_NAME_ONLY: set[str] = set()


def _module_file_sha256(loader: Any) -> str:
    """sha256 of the source file of the loader's module ('' when it has no regular file, e.g. built in C)."""
    module = sys.modules.get(getattr(loader, "__module__", "") or "")
    try:
        source = inspect.getsourcefile(module) if module is not None else None
    except TypeError:
        source = None
    if not source or not os.path.isfile(source):
        return ""
    with open(source, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def precomputed_backend_name(name: object) -> bool:
    """Whether ``name``, a backend name as a result record wrote it, is a shipped backend of precomputed features.

    For readers of written records: only the shipped records are asked (no entry point, nothing
    imported), so what an old record means does not depend on what is installed today.
    """
    shipped = BUILTIN_BACKENDS.get(name) if isinstance(name, str) else None
    return shipped is not None and shipped.can(PRECOMPUTED_FEATURES)


@contextlib.contextmanager
def no_prompts() -> Iterator[None]:
    """While a model loads, stdin reads as empty: a library that would ask a question (transformers'
    "run the custom code? [y/N]", reached through a library that does not pass
    ``trust_remote_code``) gets end-of-file and refuses, whatever is piped in."""
    saved = sys.stdin
    sys.stdin = io.StringIO("")
    try:
        yield
    finally:
        sys.stdin = saved


def load_model(
    backend: Backend | str, model_name: str, pretrained: str | None, cache_dir: str | None = None, device: str = "cpu"
) -> tuple[Any, Any, Any]:
    """:meth:`Backend.load` of ``backend`` (a record or a name): no prompts, the model in eval mode."""
    return resolve_backend(backend).load(model_name, pretrained, cache_dir, device)


# --------------------------------------------------------------------------- open_clip


#: A Hugging Face config file larger than this is refused rather than read (configs are kilobytes).
MAX_CONFIG_BYTES = 16 << 20
#: Suffixes of torch pickle checkpoints (named when one of them is refused).
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def _auto_map_modules(value: Any) -> list[str]:
    """The code files an ``auto_map`` entry names: ``"modeling_x.Class"`` -> ``modeling_x.py`` (hub refs kept)."""
    names: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str) and "." in item:
            names.append(item.rpartition(".")[0] + ".py")
    return sorted(set(names))


def refuse_remote_code(model_name: str) -> None:
    """Refuse a local Hugging Face folder whose configs ask transformers to run the folder's own code.

    Every ``*config.json`` at the top of the folder (``config.json``, ``tokenizer_config.json``,
    ``processor_config.json``, ``preprocessor_config.json``, ...) is read, bounded and
    regular files only, before any transformers call; an ``auto_map`` key in one of them is a
    ValueError naming the file and the code files it names. A hub id is not a folder: there
    ``trust_remote_code=False`` makes transformers refuse remote code itself, without a prompt.
    """
    folder = Path(model_name).expanduser()
    if not folder.is_dir():
        return
    for path in sorted(folder.iterdir()):
        if not path.name.endswith("config.json"):
            continue
        raw = read_regular_file(path, MAX_CONFIG_BYTES, "model config file")
        try:
            config = load_json_text(raw, str(path), allow_non_finite=True)  # third-party configs: only bounded
        except ValueError as error:
            raise ValueError(f"model config file {path} is not valid JSON ({error}); restore it from its source") from None
        if isinstance(config, dict) and "auto_map" in config:
            code = _auto_map_modules(config["auto_map"])
            present = [name for name in code if (folder / name).is_file()]
            raise ValueError(
                f"model folder {folder} asks to run its own code: {path} has an auto_map naming "
                f"{', '.join(code) or 'custom classes'}" + (f" (present: {', '.join(present)})" if present else "") + ". "
                "clip_cycles never runs code that comes with a model (trust_remote_code=False); use a model whose "
                "architecture transformers ships, or remove auto_map after checking that a built-in class loads it"
            )


def hf_pretrained_kwargs(model_name: str, pretrained: str | None, cache_dir: str | None) -> dict[str, Any]:
    """Keyword arguments of every transformers ``from_pretrained`` call here, after :func:`refuse_remote_code`.

    ``trust_remote_code=False`` is explicit: transformers then refuses remote code with an error
    instead of asking on stdin (where ``echo y |`` would have answered yes).
    """
    refuse_remote_code(model_name)
    revision = None if is_random_init(pretrained) else pretrained
    return {"cache_dir": cache_dir, "revision": revision, "trust_remote_code": False}


def _is_weights_only_refusal(error: BaseException) -> bool:
    # torch raises UnpicklingError; timm re-raises it as a RuntimeError with its own sentence.
    return isinstance(error, pickle.UnpicklingError) or (
        isinstance(error, RuntimeError) and "weights_only" in str(error) and "pickle" in str(error)
    )


def pickle_refusal(error: BaseException, where: str | Path) -> ValueError | None:
    """A named ValueError when ``error`` (or its cause) is torch refusing a pickle payload, else None.

    torch >= 2.6 loads checkpoints weights-only, so a pickle that needs more than tensors
    raises ``UnpicklingError`` deep inside a library; this turns it into a sentence naming the
    file (for a folder, its pickle checkpoint files) and what to do.
    """
    seen: BaseException | None = error
    while seen is not None and not _is_weights_only_refusal(seen):
        seen = seen.__cause__ or seen.__context__
    if seen is None:
        return None
    location = Path(str(where)[len("local-dir:") :] if str(where).startswith("local-dir:") else str(where)).expanduser()
    if location.is_dir():
        files = sorted(str(p) for p in location.iterdir() if p.suffix in PICKLE_SUFFIXES)
        location_text = ", ".join(files) or str(location)
    else:
        location_text = str(where)
    reason = str(seen).strip().splitlines()[-1][:200] if str(seen).strip() else type(seen).__name__
    return ValueError(
        f"checkpoint {location_text} is refused: it is a pickle that holds more than tensors ({reason}), and "
        "clip_cycles loads torch files weights-only, never running code they carry. Convert the weights to "
        "safetensors (safetensors.torch.save_file(state_dict, 'model.safetensors')) or save a plain state dict"
    )


def load_weights_only(path: str | Path) -> dict[str, Any]:
    """A state dict from a safetensors file or a torch checkpoint read with ``weights_only=True``."""
    import torch

    path = Path(path)
    check_weights_file(path, "checkpoint")  # a regular file, and a safetensors header that fits it, before any read
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        state = load_file(str(path), device="cpu")
    else:
        try:
            state = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as error:  # torch raises UnpicklingError subclasses and RuntimeError
            raise ValueError(
                f"checkpoint {path} cannot be read weights-only ({type(error).__name__}: {error}); "
                "convert it to a plain state dict or safetensors"
            ) from error
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not state:
        raise ValueError(f"checkpoint {path} holds no state dict")
    if all(k.startswith("module.") for k in state):
        state = {k[len("module.") :]: v for k, v in state.items()}
    return state


def _clean_tag(tag: str) -> str:
    # OpenCLIP matches tags case-insensitively with '-' and '_' alike.
    return tag.lower().replace("-", "_")


#: How many close names an unknown model name is answered with.
MODEL_SUGGESTIONS = 5
#: How a user lists every OpenCLIP name (the list itself is kilobytes: never printed in a sentence).
LIST_OPEN_CLIP = 'python -c "import open_clip; print(open_clip.list_models())"'


def unknown_open_clip_model(name: str, known: Sequence[str]) -> str:
    """An unknown OpenCLIP name: "did you mean" the closest known names (case aside), how to list all, the other forms."""
    by_lower = {k.lower(): k for k in known}
    near = [by_lower[m] for m in close_matches(name.lower(), list(by_lower), n=MODEL_SUGGESTIONS)]
    hint = f"did you mean {', '.join(near)}?" if near else "no OpenCLIP model has a name close to it."
    return (
        f"unknown OpenCLIP model {name!r}; {hint} OpenCLIP knows {len(known)} models (list them with {LIST_OPEN_CLIP}); "
        "or pass local-dir:<folder> or hf-hub:<repo>"
    )


def check_open_clip_request(model_name: str, pretrained: str | None) -> None:
    """Refuse an unknown OpenCLIP model or pretrained tag with a message listing what exists.

    A ``pretrained`` that is an existing file is a checkpoint and is not checked here;
    ``local-dir:``/``hf-hub:`` models bring their own weights.
    """
    import open_clip

    if not (model_name.startswith(("local-dir:", "hf-hub:")) or model_name in open_clip.list_models()):
        raise ValueError(unknown_open_clip_model(model_name, open_clip.list_models()))
    if is_random_init(pretrained) or os.path.isfile(pretrained or "") or model_name.startswith(("local-dir:", "hf-hub:")):
        return
    assert pretrained is not None
    tags = open_clip.list_pretrained_tags_by_model(model_name)
    if _clean_tag(pretrained) not in {_clean_tag(t) for t in tags}:
        raise ValueError(
            f"unknown pretrained tag {pretrained!r} for OpenCLIP model {model_name!r} (and no such checkpoint file); "
            f"available tags: {', '.join(tags) if tags else 'none (pass a checkpoint path or none)'}"
        )


def _refuse_open_clip_remote_code(model_name: str) -> None:
    """An OpenCLIP config whose text tower or tokenizer is a local Hugging Face folder: that folder's remote-code check.

    OpenCLIP calls transformers without ``trust_remote_code``; :func:`no_prompts` keeps it from
    asking, and a local folder asking for its own code is refused here by name.
    """
    import open_clip

    if model_name.startswith("local-dir:"):
        path = Path(model_name[len("local-dir:") :]) / "open_clip_config.json"
        try:
            config = load_json_text(read_regular_file(path, MAX_CONFIG_BYTES, "OpenCLIP config file"), str(path))
        except FileNotFoundError:
            return  # open_clip names the missing file itself
        except ValueError as error:
            raise ValueError(f"OpenCLIP config file {path} is not valid JSON ({error}); restore it") from None
        config = config.get("model_cfg", config) if isinstance(config, dict) else {}
    elif model_name.startswith("hf-hub:"):
        return  # a hub config is fetched by open_clip itself; no_prompts() keeps transformers from asking
    else:
        config = open_clip.get_model_config(model_name) or {}
    text = config.get("text_cfg", {}) if isinstance(config, dict) else {}
    for key in ("hf_model_name", "hf_tokenizer_name"):
        name = text.get(key) if isinstance(text, dict) else None
        if isinstance(name, str) and name:
            refuse_remote_code(name)


class _DropRandomInitNote(logging.Filter):
    """Drops OpenCLIP's "Model initialized randomly" note while a checkpoint is about to be loaded."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "initialized randomly" not in record.getMessage()


def load_open_clip(
    model_name: str, pretrained: str | None = None, cache_dir: str | None = None, device: str = "cpu"
) -> tuple[Any, Any, Any]:
    """OpenCLIP config + (tag | checkpoint path | none); checkpoints load weights-only."""
    import open_clip

    register_tiny_model()  # the embedded default, cycles-tiny / shapes: offline like any tag
    checkpoint = None
    tag: str | None = None
    if not is_random_init(pretrained):
        assert pretrained is not None
        if os.path.isfile(pretrained) or (pretrained.endswith(WEIGHTS_SUFFIXES) and os.path.lexists(pretrained)):
            checkpoint = pretrained  # a weights path that is not a regular file is refused by name below
            check_weights_file(checkpoint, "checkpoint")
        else:
            tag = pretrained
    if model_name.startswith("local-dir:") and Path(model_name[len("local-dir:") :]).expanduser().is_dir():
        check_weights_folder(Path(model_name[len("local-dir:") :]).expanduser())
    check_open_clip_request(model_name, pretrained)
    _refuse_open_clip_remote_code(model_name)
    # OpenCLIP builds the model before we load a checkpoint into it, and says "No pretrained weights
    # loaded ... Model initialized randomly" on the way: untrue once the checkpoint is loaded below.
    quiet = _DropRandomInitNote() if checkpoint is not None else None
    root = logging.getLogger()
    if quiet is not None:
        root.addFilter(quiet)
    try:
        model, _, transform = open_clip.create_model_and_transforms(model_name, pretrained=tag, cache_dir=cache_dir)
    except pickle.UnpicklingError as error:  # a local-dir: or hub checkpoint that is not weights only
        refusal = pickle_refusal(error, model_name if model_name.startswith("local-dir:") else f"{model_name} ({tag})")
        raise (refusal or error) from None
    finally:
        if quiet is not None:
            root.removeFilter(quiet)
    if checkpoint is not None:
        missing, unexpected = model.load_state_dict(load_weights_only(checkpoint), strict=False)
        if missing or unexpected:
            raise ValueError(
                f"checkpoint {checkpoint} does not fit {model_name}: missing keys {sorted(missing)[:5]}, "
                f"unexpected keys {sorted(unexpected)[:5]}"
            )
    model = model.to(device)
    tokenizer = open_clip.get_tokenizer(model_name)
    return model, transform, tokenizer


# --------------------------------------------------------------------------- hf


class _HFModel:
    """``encode_image``/``encode_text`` over a transformers model with ``get_*_features``."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def eval(self) -> _HFModel:
        self.model.eval()
        return self

    def to(self, device: Any) -> _HFModel:
        self.model.to(device)
        return self

    @staticmethod
    def _tensor(out: Any) -> Any:
        # transformers >= 5 may return a model output object instead of a tensor.
        return out if not hasattr(out, "pooler_output") else out.pooler_output

    def encode_image(self, pixels: Any) -> Any:
        return self._tensor(self.model.get_image_features(pixel_values=pixels))

    def encode_text(self, tokens: Any) -> Any:
        return self._tensor(self.model.get_text_features(input_ids=tokens))


class _HFTransform:
    def __init__(self, processor: Any) -> None:
        self.processor = processor

    def __call__(self, image: Any) -> Any:
        return self.processor(images=image, return_tensors="pt")["pixel_values"][0]

    def __repr__(self) -> str:
        return f"HFImageProcessor({json.dumps(self.processor.to_dict(), sort_keys=True, default=str)})"


class _HFTokenizer:
    def __init__(self, tokenizer: Any, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length

    def __call__(self, texts: Sequence[str]) -> Any:
        # Fixed-length padding: a caption's tokens never depend on the rest of its batch
        # (SigLIP is trained this way; CLIP pools at EOS, so padding after it is inert).
        return self.tokenizer(
            list(texts), padding="max_length", truncation=True, max_length=self.max_length, return_tensors="pt"
        )["input_ids"]


#: What to do about a local HF folder without ``preprocessor_config.json`` (AutoImageProcessor needs it).
HF_PREPROCESSOR_FIX = (
    "copy preprocessor_config.json from the model's hub repository into the folder, or save it with "
    "`transformers.AutoProcessor.from_pretrained(<hub id>).save_pretrained(<folder>)`"
)


def load_hf(
    model_name: str, pretrained: str | None = None, cache_dir: str | None = None, device: str = "cpu"
) -> tuple[Any, Any, Any]:
    """A transformers CLIP/SigLIP model by hub id or local folder (``pretrained`` may name a revision)."""
    from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

    kwargs = hf_pretrained_kwargs(model_name, pretrained, cache_dir)
    folder = Path(model_name).expanduser()
    if folder.is_dir():  # a local folder: its weights and image processor checked before transformers reads them
        check_weights_folder(folder)
        require_file(folder, "preprocessor_config.json", HF_PREPROCESSOR_FIX, "Hugging Face model folder")
    try:
        model = AutoModel.from_pretrained(model_name, **kwargs)
    except pickle.UnpicklingError as error:
        raise (pickle_refusal(error, model_name) or error) from None
    if not (hasattr(model, "get_image_features") and hasattr(model, "get_text_features")):
        raise ValueError(f"hf model {model_name!r} ({type(model).__name__}) has no get_image_features/get_text_features")
    processor = AutoImageProcessor.from_pretrained(model_name, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(model_name, **kwargs)
    max_length = int(getattr(model.config.text_config, "max_position_embeddings", 77))
    wrapped = _HFModel(model).to(device).eval()
    return wrapped, _HFTransform(processor), _HFTokenizer(tokenizer, max_length)


# --------------------------------------------------------------------------- features


@dataclass
class PrecomputedFeatures:
    """Embeddings computed elsewhere: rows looked up by image file key and caption text.

    The encoder recognises this model (``lookup_images``/``lookup_captions``) and skips
    decoding and the feature cache.
    """

    path: Path
    image_keys: dict[str, int]
    caption_keys: dict[str, int]
    image_features: np.ndarray
    caption_features: np.ndarray

    def eval(self) -> PrecomputedFeatures:
        return self

    def _lookup(self, keys: Iterable[str], index: dict[str, int], table: np.ndarray, what: str) -> np.ndarray:
        rows = []
        for key in keys:
            if key not in index:
                raise ValueError(f"features file {self.path} has no {what} {key!r} (it has {len(index)} {what}s)")
            rows.append(index[key])
        return table[np.asarray(rows, dtype=np.int64)]

    def lookup_images(self, keys: Iterable[str]) -> np.ndarray:
        """Feature rows of images by key (file name relative to the source root)."""
        return self._lookup(keys, self.image_keys, self.image_features, "image")

    def lookup_captions(self, texts: Iterable[str]) -> np.ndarray:
        """Feature rows of captions by text."""
        return self._lookup(texts, self.caption_keys, self.caption_features, "caption")

    def encode_image(self, pixels: Any) -> Any:
        raise ValueError("the features backend has no image encoder: it serves cycles/ tasks from its table only")

    encode_text = encode_image


def _key_index(keys: Sequence[str], path: Path, name: str) -> dict[str, int]:
    index: dict[str, int] = {}
    for i, key in enumerate(keys):
        if not isinstance(key, str):
            raise ValueError(f"features file {path}: {name}[{i}] is not a string")
        if key in index:
            raise ValueError(f"features file {path}: {name} repeats {key!r} (rows {index[key]} and {i})")
        index[key] = i
    return index


def _check_table(table: np.ndarray, keys: dict[str, int], path: Path, name: str) -> np.ndarray:
    table = np.asarray(table)
    if table.ndim != 2:
        raise ValueError(f"features file {path}: {name} must be 2-D (rows x dims), got shape {table.shape}")
    if not np.issubdtype(table.dtype, np.floating):
        raise ValueError(f"features file {path}: {name} must be floating point, got {table.dtype}")
    if table.shape[0] != len(keys):
        raise ValueError(f"features file {path}: {name} has {table.shape[0]} rows but {len(keys)} keys")
    bad = ~np.isfinite(table).all(axis=1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        key = next(k for k, i in keys.items() if i == row)
        raise ValueError(f"features file {path}: {name} row {row} ({key!r}) has a NaN or infinite value")
    return table.astype(np.float32)


def read_features_file(path: str | Path) -> PrecomputedFeatures:
    """Read a features file.

    safetensors: tensors ``image_features`` and ``caption_features``; metadata
    ``image_keys`` and ``caption_keys`` as JSON lists of strings. npz: arrays
    ``image_features``, ``caption_features``, ``image_keys``, ``caption_keys`` (string
    arrays), read with ``allow_pickle=False``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"features file {path} does not exist")
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="numpy") as handle:
                meta = handle.metadata() or {}
                names = set(handle.keys())
                missing = {"image_features", "caption_features"} - names
                if missing:
                    raise ValueError(f"features file {path} lacks tensors {sorted(missing)}")
                images = handle.get_tensor("image_features")
                captions = handle.get_tensor("caption_features")
        except (OSError, RuntimeError) as error:
            raise ValueError(f"features file {path} is not a readable safetensors file: {error}") from error
        try:
            image_keys = json.loads(meta["image_keys"])
            caption_keys = json.loads(meta["caption_keys"])
        except (KeyError, json.JSONDecodeError) as error:
            raise ValueError(f"features file {path}: metadata needs JSON lists image_keys and caption_keys") from error
    elif path.suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as data:
                missing = {"image_features", "caption_features", "image_keys", "caption_keys"} - set(data.files)
                if missing:
                    raise ValueError(f"features file {path} lacks arrays {sorted(missing)}")
                images, captions = data["image_features"], data["caption_features"]
                image_keys = [str(k) for k in data["image_keys"].tolist()]
                caption_keys = [str(k) for k in data["caption_keys"].tolist()]
        except (OSError, EOFError) as error:
            raise ValueError(f"features file {path} is not a readable npz file: {error}") from error
        except ValueError as error:
            if str(error).startswith(f"features file {path}"):
                raise
            # numpy refuses object arrays under allow_pickle=False ("Object arrays cannot be loaded ...").
            raise ValueError(
                f"features file {path}: an array holds Python objects ({error}); save keys as string arrays "
                "(np.array(keys, dtype=str)) and features as floats"
            ) from error
    else:
        raise ValueError(f"features file {path}: expected a .safetensors or .npz file")
    image_index = _key_index(image_keys, path, "image_keys")
    caption_index = _key_index(caption_keys, path, "caption_keys")
    image_table = _check_table(images, image_index, path, "image_features")
    caption_table = _check_table(captions, caption_index, path, "caption_features")
    if image_table.shape[1] != caption_table.shape[1]:
        raise ValueError(
            f"features file {path}: image_features have {image_table.shape[1]} dims but caption_features {caption_table.shape[1]}"
        )
    return PrecomputedFeatures(path, image_index, caption_index, image_table, caption_table)


def load_features(
    model_name: str, pretrained: str | None = None, cache_dir: str | None = None, device: str = "cpu"
) -> tuple[Any, Any, Any]:
    """The ``features`` backend: ``model_name`` is the path of the features file."""
    return read_features_file(model_name), None, None


for _loader in (load_open_clip, load_hf, load_features):
    _loader._clip_cycles_backend = True  # type: ignore[attr-defined]
