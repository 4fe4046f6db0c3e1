"""cycles-tiny: an OpenCLIP-architecture model trained on the shapes world, shipped as package data.

The architecture is a JSON config (``clip_cycles/model_configs/cycles-tiny.json``)
registered with OpenCLIP like any other model; the weights are the pretrained tag
``shapes``, a float16 safetensors file in ``clip_cycles/weights/``. After
``register_tiny_model()``, ``open_clip.create_model_and_transforms("cycles-tiny",
pretrained="shapes")`` works offline, and so does clip_benchmark's own open_clip loader.

``clip-cycles train-tiny`` rebuilds the checkpoint: the standard CLIP contrastive loss
on shapes-world images and their captions, deterministic for a seed, resumable from
its work directory, with a progress bar.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from clip_cycles.data.sources.shapes_world import write_shapes_world
from clip_cycles.outputs import write_output
from clip_cycles.results import write_json
from clip_cycles.verbosity import progress_disable

MODEL_NAME = "cycles-tiny"
PRETRAINED_TAG = "shapes"
PACKAGE_DIR = Path(__file__).resolve().parent
CONFIG_PATH = PACKAGE_DIR / "model_configs" / f"{MODEL_NAME}.json"
WEIGHTS_PATH = PACKAGE_DIR / "weights" / f"{MODEL_NAME}-{PRETRAINED_TAG}.safetensors"
CARD_PATH = PACKAGE_DIR / "weights" / f"{MODEL_NAME}-{PRETRAINED_TAG}.json"
REBUILD_COMMAND = "clip-cycles train-tiny --out clip_cycles/encoding/weights"

#: Shapes world the shipped checkpoint is trained on. Its seed differs from the demo's
#: world (seed 0) so evaluation never sees training images.
TRAIN_WORLD = {"n_images": 6000, "seed": 1000, "image_size": 64}


class CheckpointError(ValueError):
    """The shipped checkpoint is missing or corrupt."""


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def register_tiny_model(weights: str | Path | None = None) -> None:
    """Register the cycles-tiny config and its ``shapes`` tag with OpenCLIP (idempotent).

    Parameters
    ----------
    weights:
        Checkpoint to use for the ``shapes`` tag; defaults to the shipped file.
    """
    import open_clip
    from open_clip import pretrained as open_clip_pretrained

    if MODEL_NAME not in open_clip.list_models():
        open_clip.add_model_config(CONFIG_PATH)
    path = Path(weights) if weights is not None else WEIGHTS_PATH
    # OpenCLIP resolves a tag whose config has a "file" entry to that local path:
    # no hub, no URL, no network access.
    open_clip_pretrained._PRETRAINED.setdefault(MODEL_NAME, {})[PRETRAINED_TAG] = {
        "file": str(path),
        "mean": (0.5, 0.5, 0.5),
        "std": (0.5, 0.5, 0.5),
        "interpolation": "bicubic",
        "resize_mode": "shortest",
    }


def check_shipped_checkpoint(path: str | Path | None = None) -> Path:
    """Return the checkpoint path after checking it exists and matches its card's checksum."""
    path = Path(path) if path is not None else WEIGHTS_PATH
    if not path.is_file():
        raise CheckpointError(f"cycles-tiny checkpoint not found at {path}; rebuild it with `{REBUILD_COMMAND}`")
    card = path.with_suffix(".json")
    if card.is_file():
        expected = json.loads(card.read_text())["sha256"]
        if sha256_of(path) != expected:
            raise CheckpointError(
                f"cycles-tiny checkpoint {path} is corrupt (SHA-256 differs from {card.name}); "
                f"reinstall the package or rebuild it with `{REBUILD_COMMAND}`"
            )
    return path


def load_tiny_model(weights: str | Path | None = None, device: str = "cpu") -> tuple[Any, Any, Any]:
    """(model, preprocess, tokenizer) of cycles-tiny with the shipped (or given) weights, in eval mode."""
    import open_clip

    path = check_shipped_checkpoint(weights)
    register_tiny_model(path)
    try:
        model, _, preprocess = open_clip.create_model_and_transforms(MODEL_NAME, pretrained=PRETRAINED_TAG, device=device)
    except Exception as error:  # safetensors raises its own types on truncated files
        raise CheckpointError(
            f"cannot load cycles-tiny weights from {path} ({error}); rebuild with `{REBUILD_COMMAND}`"
        ) from error
    model.eval()
    return model, preprocess, open_clip.get_tokenizer(MODEL_NAME)


# --------------------------------------------------------------------------- training


def _training_pairs(world_root: Path, split: str = "train2017") -> tuple[list[Path], list[str], list[int]]:
    """Image paths, captions and caption->image index from a COCO-layout captions file."""
    data = json.loads((world_root / "annotations" / f"captions_{split}.json").read_text())
    files = {image["id"]: image["file_name"] for image in data["images"]}
    ids = sorted(files)
    position = {image_id: k for k, image_id in enumerate(ids)}
    annotations = sorted(data["annotations"], key=lambda a: a["id"])
    return (
        [world_root / split / files[i] for i in ids],
        [a["caption"] for a in annotations],
        [position[a["image_id"]] for a in annotations],
    )


def _save_state(work: Path, model: Any, optimizer: Any, step: int, seed: int) -> None:
    """Atomically save model and optimizer state (safetensors + JSON, no pickle)."""
    import torch
    from safetensors.torch import save

    tensors = {f"model.{k}": v.detach().contiguous() for k, v in model.state_dict().items()}
    opt_state = optimizer.state_dict()
    for index, state in opt_state["state"].items():
        for key, value in state.items():
            if torch.is_tensor(value):
                tensors[f"optim.{index}.{key}"] = value.detach().contiguous().reshape(value.shape)
    meta = {"step": step, "seed": seed, "param_groups": opt_state["param_groups"]}
    # Both files are written under the output policy (whole or not at all); the JSON last, as before.
    write_output(work / "state.safetensors", save(tensors), what="training state")
    write_output(work / "state.json", json.dumps(meta).encode("utf-8"), what="training state")


def _load_state(work: Path, model: Any, optimizer: Any) -> int:
    from safetensors.torch import load_file

    if not (work / "state.json").is_file() or not (work / "state.safetensors").is_file():
        return 0
    tensors = load_file(str(work / "state.safetensors"))
    meta = json.loads((work / "state.json").read_text())
    model.load_state_dict({k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")})
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    return int(meta["step"])


def train_tiny(
    out: str | Path,
    work: str | Path,
    steps: int = 2500,
    batch_size: int = 128,
    lr: float = 1e-3,
    seed: int = 0,
    world: dict[str, int] | None = None,
    checkpoint_every: int = 250,
    progress: bool | None = None,
    threads: int = 1,
    stop_after: int | None = None,
) -> dict[str, Any]:
    """Train cycles-tiny with the CLIP contrastive loss; resumes from ``work`` if a state is there.

    ``stop_after`` ends this run after that many steps (state saved), as an interruption
    would; a later call with the same arguments resumes. Returns the model card (also
    written next to the checkpoint in ``out``), or ``{"interrupted_at": step}``.
    """
    import open_clip
    import torch
    from PIL import Image
    from safetensors.torch import save
    from tqdm.auto import tqdm

    out, work = Path(out), Path(work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    world = dict(TRAIN_WORLD if world is None else world)
    world_root = work / "world"
    if not (world_root / "shapes_world.json").is_file():
        write_shapes_world(world_root, world["n_images"], world["seed"], world["image_size"], progress=progress)

    register_tiny_model()
    torch.manual_seed(seed)
    # One thread: deterministic for a seed, and robust to a busy machine (OpenMP spin-waits).
    torch.set_num_threads(threads)
    model, _, preprocess = open_clip.create_model_and_transforms(MODEL_NAME, pretrained=None)
    tokenizer = open_clip.get_tokenizer(MODEL_NAME)
    paths, texts, owner = _training_pairs(world_root)
    # The world is small: decode and preprocess every image and tokenize every caption once.
    # Evaluation preprocessing (no random crops): the shapes sit anywhere in the frame.
    images = torch.stack([preprocess(Image.open(p).convert("RGB")) for p in tqdm(paths, desc="images", disable=not progress)])
    tokens = tokenizer(texts)
    owner_t = torch.tensor(owner)
    loss_fn = open_clip.ClipLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    start_step = _load_state(work, model, optimizer)
    scheduler_lr = lambda step: lr * min(1.0, (step + 1) / 200) * 0.5 * (1 + np.cos(np.pi * step / steps))  # noqa: E731
    started = time.perf_counter()
    model.train()
    disable = progress_disable(progress)
    bar = tqdm(range(start_step, steps), desc="train-tiny", initial=start_step, total=steps, disable=disable)
    for step in bar:
        # One generator per step, seeded by (seed, step): a resumed run draws the same batches.
        generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
        batch_images = torch.randperm(len(paths), generator=generator)[:batch_size]
        # For each sampled image, one of its captions (distinct images keep the InfoNCE targets valid).
        choice = torch.randint(0, 1 << 30, (batch_size,), generator=generator)
        caption_index = torch.stack(
            [torch.nonzero(owner_t == i).flatten()[c % 5] for i, c in zip(batch_images.tolist(), choice.tolist())]
        )
        for group in optimizer.param_groups:
            group["lr"] = float(scheduler_lr(step))
        image_features, text_features, logit_scale = model(images[batch_images], tokens[caption_index])
        loss = loss_fn(image_features, text_features, logit_scale)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if (step + 1) % checkpoint_every == 0 or step + 1 == steps:
            _save_state(work, model, optimizer, step + 1, seed)
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if stop_after is not None and step + 1 - start_step >= stop_after and step + 1 < steps:
            _save_state(work, model, optimizer, step + 1, seed)
            return {"interrupted_at": step + 1}
    elapsed = time.perf_counter() - started
    model.eval()
    weights = out / WEIGHTS_PATH.name
    half = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    # One metadata key only: safetensors writes a multi-key metadata map in hash order,
    # which would make the file bytes differ between identical runs. Serialised in memory, then written
    # under the output policy: a failed write leaves the previous checkpoint whole.
    write_output(weights, save(half, metadata={"format": "pt"}), what="weights")
    card = {
        "model": MODEL_NAME,
        "pretrained": PRETRAINED_TAG,
        "architecture": json.loads(CONFIG_PATH.read_text()),
        "data": {"kind": "shapes world", **world, "split": "train2017", "pairs": len(texts)},
        "training": {"steps": steps, "batch_size": batch_size, "lr": lr, "weight_decay": 0.1, "seed": seed,
                     "loss": "CLIP contrastive (open_clip.ClipLoss)", "seconds_this_run": round(elapsed, 1),
                     "threads": torch.get_num_threads()},
        "sha256": sha256_of(weights),
        "bytes": weights.stat().st_size,
    }  # fmt: skip
    write_json(card, out / CARD_PATH.name)
    return card
