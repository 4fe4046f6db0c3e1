"""Session-wide fixtures shared by the test modules.

- ``shapes_world``: path to a freshly generated synthetic shapes world (300 images of
  64 px, seed 0; COCO layout + GQA scene graphs), generated once per test session (~1 s).
- ``shapes_cycles``: path to the COCO-family dataset folder built from it (all 14
  families, seeds 0, 1, 2, ``min_cycles=5``, reference mode), built once per session (~5 s).

Both are read-only for the tests: copy before modifying.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

_HF_CACHE: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    """A private Hugging Face datasets cache per session: ``load_dataset`` of a local folder caches by
    path, so two sessions (or a user's own cache) sharing one cache could read each other's entries."""
    global _HF_CACHE
    if "datasets" not in sys.modules:  # datasets reads the variable when first imported
        _HF_CACHE = tempfile.mkdtemp(prefix="clip_cycles_test_hf_")
        os.environ["HF_DATASETS_CACHE"] = _HF_CACHE


def pytest_unconfigure(config: pytest.Config) -> None:
    if _HF_CACHE is not None:
        shutil.rmtree(_HF_CACHE, ignore_errors=True)


SHAPES_WORLD_PARAMS = {"n_images": 300, "seed": 0, "image_size": 64}
SHAPES_CYCLES_MIN_CYCLES = 5


@pytest.fixture(scope="session")
def shapes_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shapes world of 300 images at 64 px (seed 0), shared by the whole session."""
    from clip_cycles.data.shapes_world import write_shapes_world

    return write_shapes_world(tmp_path_factory.mktemp("shapes_world"), progress=False, **SHAPES_WORLD_PARAMS)


@pytest.fixture(scope="session")
def shapes_cycles(shapes_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """All COCO families built from ``shapes_world`` (seeds 0, 1, 2; min 5 cycles per split)."""
    from clip_cycles.data.build import build_coco_folder

    out = tmp_path_factory.mktemp("shapes_cycles") / "shapes_cycles"
    folder, _ = build_coco_folder(shapes_world, out, min_cycles=SHAPES_CYCLES_MIN_CYCLES)
    return folder


def _write_coco(
    root: Path,
    categories: list[tuple[int, str, str]],
    train: list[dict],
    val: list[dict],
    width: int = 100,
    height: int = 100,
) -> Path:
    """Write a tiny COCO-layout fixture. Each image dict: ``id``, ``objects`` [(category_id, [x, y, w, h])
    or (category_id, box, iscrowd)], ``captions`` [str], optional ``file_name``; image files are not written."""
    import json

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


@pytest.fixture
def write_coco():
    """The function ``write_coco(root, categories, train_images, val_images)`` writing a tiny COCO fixture."""
    return _write_coco
