"""Image-only backends: timm models and Hugging Face vision models (DINOv2/v3, Swin-V2, ViT).

They give image embeddings and nothing else, so they serve wherever only images are
embedded: concept image embeddings and attribute splits (``clip-cycles splits
--model-type timm --model ...``), and the split embedding of the clustering split
(``--split-model-type``, :mod:`clip_cycles.attributes.split_model`). A task that needs caption
embeddings (every cycle task) fails with a message saying so
(:func:`require_embeddings` asks the backend's record, :meth:`~clip_cycles.encoding.backends.Backend.can`).

- ``timm``: any timm model name (``vit_small_patch14_dinov2.lvd142m``), with
  ``--pretrained`` a checkpoint file (safetensors or a weights-only torch file), a
  pretrained tag (``augreg_in21k``), ``true``/``default`` for timm's default weights, or
  none for random init; ``local-dir:<folder>`` or a bare folder path loads a folder with
  timm's ``config.json`` and weights; ``hf-hub:<id>`` a hub model. The embedding is the
  pooled pre-logits feature (``forward_head(..., pre_logits=True)``); the transform is
  timm's eval transform from the model's data config.
- ``hf_vision``: ``AutoModel`` by hub id or local folder (``--pretrained`` a revision)
  with its ``AutoImageProcessor``. The embedding is the CLS token of the last hidden
  state for ViT-type models, else the model's pooled output (DINOv2/v3: the normed CLS
  token; Swin-V2: the mean over patches); a two-tower model contributes its image tower
  (``get_image_features``).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from clip_cycles.encoding.backends import (
    PAIR_SCORES,
    TEXT,
    Backend,
    _HFTransform,
    hf_pretrained_kwargs,
    is_random_init,
    load_weights_only,
    pickle_refusal,
    resolve_backend,
)

#: Values of ``--pretrained`` that ask timm for the model's default pretrained weights.
TIMM_DEFAULT_WEIGHTS = frozenset({"true", "default", "timm"})
#: HF model types whose embedding is the first (CLS) token of the last hidden state.
CLS_TOKEN_MODEL_TYPES = frozenset({"vit", "deit", "beit", "data2vec-vision", "vit_mae", "vit_msn"})


class ImageOnlyModel:
    """``encode_image`` over an image encoder; ``encode_text`` explains that there is none."""

    image_only = True

    def __init__(self, backend: str, name: str, model: Any, embed: Any) -> None:
        self.backend = backend
        self.name = name
        self.model = model
        self._embed = embed

    def eval(self) -> ImageOnlyModel:
        self.model.eval()
        return self

    def to(self, device: Any) -> ImageOnlyModel:
        self.model.to(device)
        return self

    def encode_image(self, pixels: Any) -> Any:
        return self._embed(self.model, pixels)

    def encode_text(self, tokens: Any) -> Any:
        raise ValueError(text_missing_message(self.backend, self.name))


def text_missing_message(backend: str, model: str) -> str:
    """The error of an image-only backend asked for caption or concept-name embeddings."""
    return (
        f"model backend {backend!r} ({model}) gives image embeddings only; this task also needs caption "
        "embeddings (cycle tasks, --concept-text). Use it where only images are embedded (clip-cycles splits "
        "with image concept embeddings, --split-model-type for the clustering split), or pick a two-tower "
        "backend (open_clip, hf) or hf_vlm for cycle tasks"
    )


def require_embeddings(backend: Backend | str, model: str, need_text: bool) -> None:
    """Raise a clear ValueError when ``backend`` (its record, or a name resolved here) lacks the embeddings
    a run needs (images, and captions if asked)."""
    record = resolve_backend(backend)
    if record.can(PAIR_SCORES):
        raise ValueError(
            f"model backend {record.name!r} ({model}) scores (image, caption) pairs and has no embeddings: "
            "use it for zero-shot cycles/ tasks (clip-cycles eval); probes, OE, transfer and concept "
            "embeddings need an embedding backend (open_clip, hf, timm, hf_vision)"
        )
    if need_text and not record.can(TEXT):
        raise ValueError(text_missing_message(record.name, model))


# --------------------------------------------------------------------------- timm


def _timm_embed(model: Any, pixels: Any) -> Any:
    return model.forward_head(model.forward_features(pixels), pre_logits=True)


def load_timm(
    model_name: str, pretrained: str | None = None, cache_dir: str | None = None, device: str = "cpu"
) -> tuple[Any, Any, Any]:
    """A timm model as an image encoder: ``(ImageOnlyModel, eval transform, None)``."""
    import timm
    from timm.data import create_transform, resolve_model_data_config

    name = model_name
    if os.path.isdir(os.path.expanduser(name)):
        name = "local-dir:" + os.path.abspath(os.path.expanduser(name))
    checkpoint = None
    use_weights = False
    if name.startswith(("local-dir:", "hf-hub:")):
        use_weights = True  # a folder or hub entry names its own weights
        if name.startswith("local-dir:") and not (Path(name[len("local-dir:") :]) / "config.json").is_file():
            raise FileNotFoundError(
                f"timm model folder {name[len('local-dir:') :]} has no config.json "
                "(timm's format: architecture, model_args, pretrained_cfg, plus model.safetensors)"
            )
    elif not is_random_init(pretrained):
        assert pretrained is not None
        if os.path.isfile(pretrained):
            checkpoint = pretrained
        elif pretrained.strip().lower() in TIMM_DEFAULT_WEIGHTS:
            use_weights = True
        else:
            name, use_weights = f"{name}.{pretrained}", True
    if not name.startswith(("local-dir:", "hf-hub:")) and not timm.is_model(name):
        raise ValueError(f"unknown timm model {name!r}; see timm.list_models(), or pass local-dir:<folder>")
    try:
        model = timm.create_model(name, pretrained=use_weights, cache_dir=cache_dir)
    except (pickle.UnpicklingError, RuntimeError, OSError) as error:
        refusal = pickle_refusal(error, name)  # a folder's pytorch_model.bin that is not weights only
        if refusal is not None:
            raise refusal from None
        raise ValueError(f"timm cannot create {name!r} with pretrained={use_weights}: {error}") from error
    if checkpoint is not None:
        state = load_weights_only(checkpoint)
        try:
            missing, unexpected = model.load_state_dict(state, strict=False)
        except RuntimeError as error:  # shape mismatches
            raise ValueError(f"checkpoint {checkpoint} does not fit timm model {name}: {error}") from error
        head = ("head.", "fc.", "classifier.", "head_dist.")
        missing = [k for k in missing if not k.startswith(head)]  # a classifier head is not used for embeddings
        unexpected = [k for k in unexpected if not k.startswith(head)]
        if missing or unexpected:
            raise ValueError(
                f"checkpoint {checkpoint} does not fit timm model {name}: missing keys {sorted(missing)[:5]}, "
                f"unexpected keys {sorted(unexpected)[:5]}"
            )
    transform = create_transform(**resolve_model_data_config(model), is_training=False)
    wrapped = ImageOnlyModel("timm", name, model, _timm_embed).to(device).eval()
    return wrapped, transform, None


# --------------------------------------------------------------------------- hf vision


def _hf_embedder(model: Any) -> Any:
    if hasattr(model, "get_image_features"):

        def embed_tower(m: Any, pixels: Any) -> Any:
            out = m.get_image_features(pixel_values=pixels)
            return out if not hasattr(out, "pooler_output") else out.pooler_output

        return embed_tower
    use_cls = getattr(model.config, "model_type", "") in CLS_TOKEN_MODEL_TYPES

    def embed(m: Any, pixels: Any) -> Any:
        out = m(pixel_values=pixels)
        pooled = getattr(out, "pooler_output", None)
        if use_cls or pooled is None:
            return out.last_hidden_state[:, 0]
        return pooled.flatten(1)

    return embed


def load_hf_vision(
    model_name: str, pretrained: str | None = None, cache_dir: str | None = None, device: str = "cpu"
) -> tuple[Any, Any, Any]:
    """A transformers vision model (``AutoModel`` + ``AutoImageProcessor``) as an image encoder."""
    from transformers import AutoImageProcessor, AutoModel

    kwargs = hf_pretrained_kwargs(model_name, pretrained, cache_dir)
    try:
        model = AutoModel.from_pretrained(model_name, **kwargs)
        processor = AutoImageProcessor.from_pretrained(model_name, **kwargs)
    except pickle.UnpicklingError as error:
        raise (pickle_refusal(error, model_name) or error) from None
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(
            f"hf_vision: cannot load {model_name!r} as a vision model with an image processor ({type(error).__name__}: {error})"
        ) from error
    wrapped = ImageOnlyModel("hf_vision", model_name, model, _hf_embedder(model)).to(device).eval()
    return wrapped, _HFTransform(processor), None


for _loader in (load_timm, load_hf_vision):  # their capabilities (images only) are in BUILTIN_BACKENDS
    _loader._clip_cycles_backend = True  # type: ignore[attr-defined]

__all__ = ["ImageOnlyModel", "load_hf_vision", "load_timm", "require_embeddings", "text_missing_message"]
