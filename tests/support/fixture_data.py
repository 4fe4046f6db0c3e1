"""Data behind the root conftest's fixtures, importable by any test module (a module named ``conftest`` is not:
each room has its own): the session's cache folders, the shared shapes world's parameters, the COCO fixture writer."""

from __future__ import annotations

import json
from pathlib import Path

#: Where each library would write under ``~`` (``~/.cache/huggingface``, ``~/.cache/matplotlib`` and
#: ``~/.config/matplotlib``, ``~/.cache/torch``, ``~/.cache/clip_cycles``, ...), pointed into one
#: folder per session: a session neither reads a user's caches nor leaves anything in them, and
#: subprocesses inherit the variables. ``tests/project/test_test_hygiene.py`` checks it with a temporary HOME.
CACHE_ENV_FOLDERS: dict[str, str] = {
    "HF_HOME": "huggingface",
    "HF_DATASETS_CACHE": "huggingface/datasets",
    "MPLCONFIGDIR": "matplotlib",
    "XDG_CACHE_HOME": "xdg_cache",
    "XDG_CONFIG_HOME": "xdg_config",
    "TORCH_HOME": "torch",
    "TRITON_CACHE_DIR": "triton",
    "CLIP_CYCLES_CACHE": "clip_cycles",
}

SHAPES_WORLD_PARAMS = {"n_images": 300, "seed": 0, "image_size": 64}
SHAPES_CYCLES_MIN_CYCLES = 5


def write_coco_root(
    root: Path,
    categories: list[tuple[int, str, str]],
    train: list[dict],
    val: list[dict],
    width: int = 100,
    height: int = 100,
) -> Path:
    """Write a tiny COCO-layout fixture. Each image dict: ``id``, ``objects`` [(category_id, [x, y, w, h])
    or (category_id, box, iscrowd)], ``captions`` [str], optional ``file_name``; image files are not written."""
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    ann_id = 0
    for split, images in (("train2017", train), ("val2017", val)):
        entries, instances, captions = [], [], []
        for image in images:
            entries.append(
                {
                    "id": image["id"],
                    "file_name": image.get("file_name", f"{image['id']:012d}.jpg"),
                    "width": image.get("width", width),
                    "height": image.get("height", height),
                }
            )
            for obj in image.get("objects", []):
                ann_id += 1
                crowd = obj[2] if len(obj) > 2 else 0
                x, y, w, h = obj[1]
                instances.append(
                    {
                        "id": ann_id,
                        "image_id": image["id"],
                        "category_id": obj[0],
                        "bbox": list(obj[1]),
                        "area": w * h,
                        "iscrowd": crowd,
                        "segmentation": [],
                    }
                )
            for text in image.get("captions", []):
                ann_id += 1
                captions.append({"id": ann_id, "image_id": image["id"], "caption": text})
        cats = [{"id": i, "name": n, "supercategory": s} for i, n, s in categories]
        head = {"info": {}, "licenses": [], "images": entries}
        (root / "annotations" / f"instances_{split}.json").write_text(
            json.dumps({**head, "annotations": instances, "categories": cats})
        )
        (root / "annotations" / f"captions_{split}.json").write_text(json.dumps({**head, "annotations": captions}))
    return root
