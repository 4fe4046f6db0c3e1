"""Generative vision-language models on cycles: s(image, caption) = log p(caption | image, prompt).

The ``hf_vlm`` backend loads any transformers image-text-to-text model (LLaVA-style,
Qwen-VL, PaliGemma, Idefics; ``AutoModelForImageTextToText`` with its ``AutoProcessor``)
and scores a pair by the summed log-likelihood of the caption tokens after the prompt
(``score: mean`` divides by the caption's token count). The prompt is a plain-text
template where ``{image}`` stands for the processor's image token; a task YAML sets it
under ``lmms_eval_specific_kwargs`` (lmms-eval's key for per-model prompt settings)::

    lmms_eval_specific_kwargs:
      default: {prompt: "{image} Caption:", score: sum}
      hf_vlm: {prompt: "USER: {image}\\nDescribe the image. ASSISTANT:"}   # overrides default

The caption is appended after one space. A term that depends on the caption only (the
caption prior log p(caption) that makes such models prefer fluent captions) or on the
image only cancels in every cycle contrast; Winoground's text score does not cancel it.

Pairs replace the encoder's items: every unique (image content, caption) pair of all
cycles of all tasks is scored once, in batches, through an on-disk cache keyed by the
model's content fingerprint (weights, config, tokenizer and processor files by sha256,
never by path), the prompt and the precision, and sharded across ranks under torchrun
like :func:`clip_cycles.encoding.distributed.encode_sharded`. Scores are float64 ``(sum,
n_tokens)`` rows in safetensors shards written atomically.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import pickle
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence

import numpy as np
from pydantic import field_validator

from clip_cycles.algebra.contrast import block_scores_from_score_fn
from clip_cycles.data.sources.images import IMAGE_DECODING, open_rgb
from clip_cycles.encoding.backends import PAIR_SCORES, hf_pretrained_kwargs, is_random_init, pickle_refusal
from clip_cycles.encoding.distributed import current, rank_zero_completes, shard
from clip_cycles.encoding.encode_options import EncodeOptions
from clip_cycles.encoding.encoder import _FaultCounter, _version
from clip_cycles.encoding.feature_cache import FeatureNamespace
from clip_cycles.fingerprints import content_hash, digest, text_hash
from clip_cycles.schemas.options import CheckedOptions
from clip_cycles.tasks.registry import read_task_yaml
from clip_cycles.verbosity import progress_disable

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from clip_cycles.data.sources.images import ImageItem
    from clip_cycles.encoding.encoder import ModelSpec
    from clip_cycles.tasks.loading import TaskData
    from clip_cycles.tasks.registry import TaskSpec

#: The default prompt: the image, then a cue; the caption follows after one space.
DEFAULT_PROMPT = "{image} Caption:"
SCORE_MODES: tuple[str, ...] = ("sum", "mean")
#: Backend name of the generative VLM scorer.
BACKEND = "hf_vlm"
#: Files of a local model folder that define what it computes (hashed into the cache key).
_FINGERPRINT_SUFFIXES = (".safetensors", ".bin", ".json", ".model", ".txt", ".jinja", ".tiktoken")
PROMPT_KWARGS_KEY = "lmms_eval_specific_kwargs"


# --------------------------------------------------------------------------- prompt settings


class PromptConfig(CheckedOptions):
    """How a pair is scored: the prompt template (``{image}`` = image token) and sum or mean."""

    prompt: str = DEFAULT_PROMPT
    score: Literal["sum", "mean"] = "sum"

    def __init__(self, prompt: Any = DEFAULT_PROMPT, score: Any = "sum") -> None:
        # Positional as well as by name: ``PromptConfig("{image} Caption:", "mean")``.
        super().__init__(prompt=prompt, score=score)

    @field_validator("prompt")
    @classmethod
    def _has_image_slot(cls, prompt: str) -> str:
        if "{image}" not in prompt:  # a fact of the text, not a range: no field constraint can say it
            raise ValueError(f"prompt template {prompt!r} must contain {{image}} (where the image goes)")
        return prompt


def prompt_config_from_yaml(data: Mapping[str, Any], where: str, backend: str = BACKEND) -> PromptConfig:
    """``lmms_eval_specific_kwargs`` of a task YAML: ``default`` overridden by the backend's own entry."""
    raw = data.get(PROMPT_KWARGS_KEY) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: field {PROMPT_KWARGS_KEY!r} must be a mapping like {{default: {{prompt: ...}}}}")
    merged: dict[str, Any] = {}
    for key in ("default", backend):
        entry = raw.get(key) or {}
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: field {PROMPT_KWARGS_KEY}.{key} must be a mapping")
        merged.update({k: v for k, v in entry.items() if k in ("prompt", "score")})
    try:
        return PromptConfig(**merged)
    except ValueError as error:
        raise ValueError(f"{where}: field {PROMPT_KWARGS_KEY}: {error}") from error


def prompt_config_for_task(task: TaskSpec) -> PromptConfig:
    """The prompt settings of a cycle task (read from its YAML file; the default when absent)."""
    path = Path(task.path)
    if not path.is_file():
        return PromptConfig()
    # Includes resolved: the prompt may come from a shared template.
    return prompt_config_from_yaml(read_task_yaml(path), str(path))


# --------------------------------------------------------------------------- model identity


def _folder_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in _FINGERPRINT_SUFFIXES and ".cache" not in p.parts)


@lru_cache(maxsize=16)
def _fingerprint_files(entries: tuple[tuple[str, int, int], ...]) -> str:
    total = hashlib.sha256()
    for name, _, _ in entries:
        h = hashlib.sha256()
        with open(name, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                h.update(block)
        total.update(Path(name).name.encode() + b"\0" + h.hexdigest().encode() + b"\n")
    return total.hexdigest()


def model_fingerprint(model: str, revision: str | None = None) -> dict[str, Any]:
    """Content identity of a model: sha256 over a local folder's files, else the hub id and revision.

    Files are hashed once per process for each (path, size, mtime); moving or copying
    the folder keeps the fingerprint, changing a weight changes it.
    """
    folder = Path(model).expanduser()
    if folder.is_dir():
        files = _folder_files(folder)
        if not files:
            raise ValueError(f"model folder {folder} holds no weights or config files")
        entries = tuple((str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
        rel = sorted(str(p.relative_to(folder)) for p in files)
        return {"content_sha256": _fingerprint_files(entries), "files": rel}
    return {"hub_id": model, "revision": revision or "main"}


# --------------------------------------------------------------------------- the model


class HFVLMScorer:
    """A transformers image-text-to-text model and its processor, scoring (image, caption) pairs."""

    pair_scorer = True

    def __init__(self, model: Any, processor: Any, name: str, fingerprint: dict[str, Any], device: str) -> None:
        self.model = model
        self.processor = processor
        self.name = name
        self.fingerprint = fingerprint
        self.device = device
        tokenizer = getattr(processor, "tokenizer", None)
        if tokenizer is None:
            raise ValueError(f"hf_vlm model {name!r}: its processor has no tokenizer")
        self.tokenizer = tokenizer
        self.image_token = getattr(processor, "image_token", None) or getattr(tokenizer, "image_token", None)
        if not self.image_token:
            raise ValueError(
                f"hf_vlm model {name!r}: the processor names no image token; write it into the prompt "
                "template in place of {image}"
            )

    def eval(self) -> HFVLMScorer:
        self.model.eval()
        return self

    def encode_image(self, pixels: Any) -> Any:
        raise ValueError(
            f"backend {BACKEND} ({self.name}) scores (image, caption) pairs and has no embeddings: use it "
            "for zero-shot cycles/ tasks (clip-cycles eval); probes, OE, transfer and concept embeddings "
            "need an embedding backend (open_clip, hf, timm, hf_vision)"
        )

    encode_text = encode_image

    def prompt_text(self, config: PromptConfig) -> str:
        return config.prompt.replace("{image}", self.image_token)

    def _caption_ids(self, caption: str) -> list[int]:
        return list(self.tokenizer(" " + caption, add_special_tokens=False)["input_ids"])

    def score_batch(self, images: Sequence[Any], captions: Sequence[str], config: PromptConfig) -> np.ndarray:
        """``(n, 2)`` float64 rows ``(summed caption log-likelihood, caption token count)``, one forward pass."""
        import torch

        prompt = self.prompt_text(config)
        texts = [f"{prompt} {c}" for c in captions]
        self.tokenizer.padding_side = "right"  # caption tokens then end where the attention mask ends
        try:
            inputs = self.processor(text=texts, images=list(images), return_tensors="pt", padding=True)
        except (ValueError, TypeError) as error:
            raise ValueError(f"hf_vlm model {self.name!r}: its processor rejected the prompt {prompt!r}: {error}") from error
        inputs = {k: (v.to(self.device) if hasattr(v, "to") else v) for k, v in inputs.items()}
        autocast = torch.autocast("cuda") if str(self.device).startswith("cuda") else contextlib.nullcontext()
        with torch.no_grad(), autocast:
            logits = self.model(**inputs).logits
        ids = inputs["input_ids"]
        lengths = inputs["attention_mask"].sum(dim=1).tolist() if "attention_mask" in inputs else [ids.shape[1]] * len(texts)
        out = np.zeros((len(texts), 2), dtype=np.float64)
        for row, caption in enumerate(captions):
            target = self._caption_ids(caption)
            end = int(lengths[row])
            start = end - len(target)
            if start < 1 or ids[row, start:end].tolist() != target:
                raise ValueError(
                    f"hf_vlm model {self.name!r}: the tokens of caption {caption!r} are not the last tokens of "
                    f"{texts[row]!r} (the tokenizer merges them with the prompt or appends tokens); end the prompt "
                    "template with a separate word or punctuation"
                )
            logp = torch.log_softmax(logits[row, start - 1 : end - 1].float(), dim=-1)
            picked = logp.gather(1, ids[row, start:end].unsqueeze(1)).squeeze(1)
            out[row, 0] = float(picked.double().sum())
            out[row, 1] = float(len(target))
        if not np.isfinite(out[:, 0]).all():
            bad = int(np.flatnonzero(~np.isfinite(out[:, 0]))[0])
            raise ValueError(f"hf_vlm model {self.name!r} gave a non-finite log-likelihood for caption {captions[bad]!r}")
        return out


def load_hf_vlm(
    model_name: str, pretrained: str | None = None, cache_dir: str | None = None, device: str = "cpu"
) -> tuple[Any, Any, Any]:
    """The ``hf_vlm`` backend: a hub id or local folder (``pretrained`` may name a hub revision)."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    revision = None if is_random_init(pretrained) else pretrained
    kwargs = hf_pretrained_kwargs(model_name, pretrained, cache_dir)
    try:
        processor = AutoProcessor.from_pretrained(model_name, **kwargs)
        model = AutoModelForImageTextToText.from_pretrained(model_name, **kwargs)
    except pickle.UnpicklingError as error:
        raise (pickle_refusal(error, model_name) or error) from None
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(
            f"hf_vlm: cannot load {model_name!r} as an image-text-to-text model with its processor "
            f"({type(error).__name__}: {error})"
        ) from error
    model.to(device).eval()
    scorer = HFVLMScorer(model, processor, model_name, model_fingerprint(model_name, revision), device)
    return scorer, None, None


# Its capability (pair scores, no embeddings) is in clip_cycles.encoding.backends.BUILTIN_BACKENDS.
load_hf_vlm._clip_cycles_backend = True  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- the score cache


def pair_key(image_hash: str, caption: str) -> str:
    """Cache item of a pair: the image content hash and the caption text."""
    return hashlib.sha256(f"{image_hash}\0{text_hash(caption)}".encode()).hexdigest()


class PairScoreCache(FeatureNamespace):
    """Float64 ``(sum, n_tokens)`` per pair key for one (model content, prompt, precision).

    The feature cache's shard store (checksummed header and values, atomic writes, corrupt
    shards dropped and named) with rows of two float64 under ``<cache>/pair_scores/``.
    """

    folder = "pair_scores"
    tensor = "scores"
    dtype = np.float64
    width = 2
    label = "pair score cache"
    redo = "its pairs will be rescored"

    @property
    def corrupt(self) -> list[str]:
        """Shards found corrupt (and deleted) by :meth:`load`."""
        return self.stats.corrupt_shards


#: What a pair score cache namespace (:func:`cache_description`) is keyed by, and the prompt setting it
#: ignores: the score mode (sum or mean) is applied to the cached ``(sum, n_tokens)`` afterwards.
PAIR_SCORE_KEY_FIELDS: tuple[str, ...] = ("backend", "model", "prompt", "precision", "seed", "image_decoding", "transformers")
PAIR_SCORE_KEY_IGNORES: tuple[str, ...] = ("score",)


def cache_description(spec: ModelSpec, config: PromptConfig) -> dict[str, Any]:
    """What a pair score depends on: model content, prompt, precision, library version (not the score mode)."""
    revision = None if is_random_init(spec.pretrained) else spec.pretrained
    return {
        "backend": spec.backend.name,
        "model": model_fingerprint(spec.model, revision),
        "prompt": config.prompt,
        "precision": spec.precision,
        "seed": spec.seed,
        "transformers": _version("transformers"),
        "image_decoding": IMAGE_DECODING,  # pairs scored under older decoding rules are never served
    }


# --------------------------------------------------------------------------- scoring pairs


@dataclass
class PairScoreStats:
    """Counts of one scoring run (the encoder's names where they mean the same)."""

    unique_images: int = 0
    unique_image_contents: int = 0
    unique_captions: int = 0
    unique_pairs: int = 0
    requested_pairs: int = 0
    scored_pairs: int = 0
    cached_pairs: int = 0
    forward_passes: int = 0
    model_loaded: bool = False
    bad_images: dict[str, str] = field(default_factory=dict)
    corrupt_shards: list[str] = field(default_factory=list)
    ranks: list[dict[str, Any]] = field(default_factory=list)

    # The CLI's one-line summary speaks of images and captions; for pair scoring these
    # are the items of the pairs that were scored (the rest came from the cache).
    encoded_images: int = 0
    encoded_captions: int = 0
    cached_images: int = 0
    cached_captions: int = 0
    scored_items: set[tuple[str, str]] = field(default_factory=set, repr=False)

    def to_dict(self) -> dict[str, Any]:
        extra = {"world_size": len(self.ranks), "ranks": list(self.ranks)} if self.ranks else {}
        return {
            **extra,
            "unique_images": self.unique_images,
            "unique_image_contents": self.unique_image_contents,
            "unique_captions": self.unique_captions,
            "requested_pairs": self.requested_pairs,
            "unique_pairs": self.unique_pairs,
            "scored_pairs": self.scored_pairs,
            "cached_pairs": self.cached_pairs,
            "forward_passes": self.forward_passes,
            "model_loaded": self.model_loaded,
            "skipped_bad_images": len(self.bad_images),
            "bad_images": dict(sorted(self.bad_images.items())),
            "corrupt_shards": list(self.corrupt_shards),
        }


@dataclass
class PairScores:
    """Scores of unique pairs; rows of images (by key) and captions (by text) like ``EncodedFeatures``.

    ``block_scores(task, index)`` fills (N, 2, 2) float64 blocks for cycle index arrays
    (DEVELOPING.md) with the task's prompt and score mode.
    """

    image_rows: dict[str, int]
    caption_rows: dict[str, int]
    image_hashes: list[str]
    captions: list[str]
    tables: dict[str, dict[str, np.ndarray]]  # cache namespace -> pair key -> (sum, n_tokens)
    task_configs: dict[str, tuple[str, PromptConfig]]  # task name -> (namespace, config)
    stats: PairScoreStats

    pair_scorer = True

    def score_fn(self, config_name: str, mode: str) -> Any:
        table = self.tables[config_name]

        def score(images: np.ndarray, captions: np.ndarray) -> np.ndarray:
            out = np.empty(len(images), dtype=np.float64)
            for i, (u, v) in enumerate(zip(images.tolist(), captions.tolist())):
                total, n = table[pair_key(self.image_hashes[u], self.captions[v])]
                out[i] = total / n if mode == "mean" else total
            return out

        return score

    def block_scores(self, task: Any, index: np.ndarray) -> np.ndarray:
        """(N, 2, 2) float64 blocks of ``task``'s cycles ``index`` (columns u1, u2, v1, v2)."""
        name, config = self.task_configs[task.name]
        return block_scores_from_score_fn(self.score_fn(name, config.score), index)

    def audit_unavailable(self) -> dict[str, Any]:
        """The additive audit trains probes on embeddings, which a pair scorer does not have."""
        return {
            "available": False,
            "passed": None,
            "unavailable_reason": f"backend {BACKEND} scores (image, caption) pairs and has no image or caption "
            "embeddings for the additive probes; the cycle contrast still removes every "
            "image-only and caption-only term of its scores",
        }


def _decode(item: ImageItem) -> Any:
    where = f" ({item.path})" if item.path is not None else ""
    return open_rgb(item.read_bytes(), f"image {item.key!r}{where}")


def _progress(iterable: Any, total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="batch", disable=progress_disable())


def score_pairs(
    pairs: Iterable[tuple[ImageItem, str]],
    spec: ModelSpec,
    configs: Sequence[PromptConfig],
    cache_dir: str | Path | None = None,
    batch_size: int = 16,
    skip_bad_images: bool = False,
    scorer: Any = None,
) -> tuple[dict[str, PromptConfig], PairScores]:
    """Score every unique (image content, caption) pair once per prompt, through the pair score cache.

    Parameters
    ----------
    pairs:
        ``(image item, caption)`` of all cycles (duplicates welcome: they are removed here).
    configs:
        The prompt settings to score under (one table each; the score mode is applied later).
    cache_dir:
        Cache root; None scores everything and stores nothing.
    scorer:
        An already loaded :class:`HFVLMScorer` (else ``spec`` is loaded when something is missing).

    Returns
    -------
    (namespace name -> config, PairScores with one table per namespace)
    """
    EncodeOptions.make(batch_size=batch_size)
    stats = PairScoreStats()
    pair_list = list(pairs)
    stats.requested_pairs = len(pair_list)
    items: dict[str, ImageItem] = {}
    caption_order: dict[str, None] = {}
    for item, caption in pair_list:
        if not isinstance(caption, str) or not caption.strip():
            raise ValueError(f"caption {caption!r} paired with image {item.key!r} is empty or not a string")
        items.setdefault(item.key, item)
        caption_order.setdefault(caption, None)
    key_hash: dict[str, str] = {}
    for key, item in items.items():
        try:
            key_hash[key] = content_hash(item.read_bytes())
        except (FileNotFoundError, ValueError) as error:
            if not skip_bad_images:
                raise
            stats.bad_images[key] = str(error)
    unique = {(key_hash[i.key], c): i for i, c in pair_list if i.key in key_hash}
    stats.unique_images = len(items)
    stats.unique_image_contents = len(set(key_hash.values()))
    stats.unique_captions = len(caption_order)
    stats.unique_pairs = len(unique)

    names: dict[str, PromptConfig] = {}
    tables: dict[str, dict[str, np.ndarray]] = {}
    for config in dict.fromkeys(configs):
        desc = cache_description(spec, config)
        name = digest(desc)
        names[name] = config
        cache = PairScoreCache(cache_dir, desc) if cache_dir is not None else None
        stored = cache.load() if cache is not None else {}
        table = {pair_key(h, c): stored[pair_key(h, c)] for h, c in unique if pair_key(h, c) in stored}
        missing = sorted(pc for pc in unique if pair_key(*pc) not in table)  # by image, then caption
        stats.cached_pairs += len(unique) - len(missing)
        if missing:
            if scorer is None:
                scorer = spec.load()[0]
                stats.model_loaded = True
            if not getattr(scorer, "pair_scorer", False):
                raise ValueError(f"backend {spec.backend.name!r} loaded {type(scorer).__name__}, not a pair scorer")
            _score_missing(scorer, missing, unique, config, batch_size, skip_bad_images, stats, table, cache)
        if cache is not None:
            stats.corrupt_shards.extend(cache.corrupt)
        tables[name] = table
    scored = [pc for pc in unique if pc in stats.scored_items]
    stats.encoded_images = len({h for h, _ in scored})
    stats.encoded_captions = len({c for _, c in scored})
    stats.cached_images = stats.unique_image_contents - stats.encoded_images
    stats.cached_captions = stats.unique_captions - stats.encoded_captions
    bad_hashes = {key_hash[k] for k in stats.bad_images if k in key_hash}
    for key in items:
        if key in key_hash and key_hash[key] in bad_hashes and key not in stats.bad_images:
            stats.bad_images[key] = "same file content as an image that cannot be decoded"
    good_images = [k for k in items if k in key_hash and k not in stats.bad_images]
    image_rows = {k: i for i, k in enumerate(good_images)}
    captions = list(caption_order)
    result = PairScores(
        image_rows, {c: i for i, c in enumerate(captions)}, [key_hash[k] for k in good_images], captions, tables, {}, stats
    )
    return names, result


def _score_missing(
    scorer: Any,
    missing: list[tuple[str, str]],
    unique: Mapping[tuple[str, str], ImageItem],
    config: PromptConfig,
    batch_size: int,
    skip_bad_images: bool,
    stats: PairScoreStats,
    table: dict[str, np.ndarray],
    cache: PairScoreCache | None,
) -> None:
    fault = _FaultCounter()
    decoded: dict[str, Any] = {}
    bad_hashes: set[str] = set()
    starts = range(0, len(missing), batch_size)
    for start in _progress(starts, len(starts), "scoring pairs"):
        batch = []
        for h, caption in missing[start : start + batch_size]:
            if h in bad_hashes:
                continue
            if h not in decoded:
                item = unique[(h, caption)]
                try:
                    decoded = {h: _decode(item)}  # pairs come sorted by image: keep only the current one
                except (OSError, ValueError) as error:
                    message = f"image {item.key!r} cannot be decoded: {type(error).__name__}: {error}"
                    if not skip_bad_images:
                        raise ValueError(message + " (pass --skip-bad-images to count and skip it)") from error
                    stats.bad_images[item.key] = message
                    bad_hashes.add(h)
                    continue
            batch.append((h, caption, decoded[h]))
        if not batch:
            continue
        scores = scorer.score_batch([b[2] for b in batch], [b[1] for b in batch], config)
        stats.forward_passes += 1
        keys = [pair_key(h, c) for h, c, _ in batch]
        for k, row in zip(keys, scores):
            table[k] = row
        if cache is not None:
            cache.put(keys, scores)
        stats.scored_pairs += len(batch)
        stats.scored_items.update((h, c) for h, c, _ in batch)
        fault.tick()


def cycle_pairs(data: Sequence[TaskData]) -> list[tuple[ImageItem, str]]:
    """The four pairs of every test cycle of every task and seed (duplicates kept)."""
    pairs = []
    for task_data in data:
        for by_split in task_data.splits.values():
            rows = by_split[task_data.task.split]
            items, texts = rows.image_items, rows.captions
            for (a, b), (c, d) in zip(rows.image_index.tolist(), rows.caption_index.tolist()):
                pairs.extend((items[u], texts[v]) for u in (a, b) for v in (c, d))
    return pairs


def score_tasks(
    data: Sequence[TaskData], spec: ModelSpec, cache_dir: str | Path | None, batch_size: int = 16, skip_bad_images: bool = False
) -> PairScores | None:
    """Pair scores for the cycles of loaded tasks, each with its prompt; sharded under torchrun.

    The hook of :func:`clip_cycles.evaluation.zero_shot.encode_tasks` for pair-scoring backends: the
    result stands in for ``EncodedFeatures`` (same ``image_rows``/``caption_rows``/``stats``)
    and fills score blocks through ``block_scores``. None on ranks other than 0.
    """
    configs = {d.task.name: prompt_config_for_task(d.task) for d in data}
    prompts = list(configs.values())
    pairs = cycle_pairs(data)
    ctx = current()
    if not ctx.active:
        names, scores = score_pairs(pairs, spec, prompts, cache_dir, batch_size, skip_bad_images)
    else:

        def score_shard() -> dict[str, Any]:
            by_key = {(i.key, c): (i, c) for i, c in pairs}
            mine = [by_key[k] for k in shard(by_key, ctx.rank, ctx.world_size)]
            _, part = score_pairs(mine, spec, prompts, cache_dir, batch_size, skip_bad_images)
            logger.info(
                "rank %d/%d: scored %d pairs of its shard (%d pairs; %d cached)",
                ctx.rank,
                ctx.world_size,
                part.stats.scored_pairs,
                len(mine),
                part.stats.cached_pairs,
            )
            return {"rank": ctx.rank, "pairs": len(mine), **part.stats.to_dict()}

        def score_all(bad: dict[str, str]) -> tuple[dict[str, PromptConfig], PairScores]:
            return score_pairs(
                [(i, c) for i, c in pairs if i.key not in bad], spec, prompts, cache_dir, batch_size, skip_bad_images
            )

        def redone(result: tuple[dict[str, PromptConfig], PairScores]) -> str | None:
            scored = result[1].stats.scored_pairs
            return f"score {scored} pairs" if scored else None

        done = rank_zero_completes(ctx, cache_dir, "scoring pairs", "scores", score_shard, score_all, redone)
        if done is None:
            return None
        names, scores = done.result
        scores.stats.bad_images.update(done.bad_images)
        scores.stats.scored_pairs += sum(r["scored_pairs"] for r in done.reports)
        scores.stats.ranks = [
            {k: r[k] for k in ("rank", "pairs", "scored_pairs", "cached_pairs", "skipped_bad_images")} for r in done.reports
        ]
    by_config = {config: name for name, config in names.items()}
    scores.task_configs = {task: (by_config[config], config) for task, config in configs.items()}
    return scores


def uses_pair_scores(spec: ModelSpec) -> bool:
    """Whether ``spec``'s backend scores pairs (its record can give ``pair_scores``); a loader override embeds."""
    return spec.loader is None and spec.backend.can(PAIR_SCORES)


__all__ = [
    "BACKEND",
    "DEFAULT_PROMPT",
    "HFVLMScorer",
    "PairScoreCache",
    "PairScores",
    "PromptConfig",
    "cycle_pairs",
    "load_hf_vlm",
    "model_fingerprint",
    "pair_key",
    "prompt_config_for_task",
    "prompt_config_from_yaml",
    "score_pairs",
    "score_tasks",
    "uses_pair_scores",
]
