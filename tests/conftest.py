"""Session-wide fixtures shared by the test modules.

- ``shapes_world``: path to a freshly generated synthetic shapes world (300 images of
  64 px, seed 0; COCO layout + GQA scene graphs), generated once per test session (~1 s).
- ``shapes_cycles``: path to the COCO-family dataset folder built from it (all 14
  families, seeds 0, 1, 2, ``min_cycles=5``, reference mode), built once per session (~5 s).

Both are read-only for the tests: copy before modifying.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import pytest
from fixture_data import CACHE_ENV_FOLDERS, SHAPES_CYCLES_MIN_CYCLES, SHAPES_WORLD_PARAMS, write_coco_root
from tiny_models import TINY_OPEN_CLIP

#: Variables a library reads once, when first imported: set too late, they would not take effect.
_READ_AT_IMPORT = {"HF_HOME": "datasets", "HF_DATASETS_CACHE": "datasets", "MPLCONFIGDIR": "matplotlib"}
_SESSION_CACHES: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Every cache of the session in one private folder, removed at the end.

    A private Hugging Face datasets cache also matters for correctness: ``load_dataset`` of a local
    folder caches by path, so two sessions (or a user's own cache) sharing one could read each other's entries.
    """
    global _SESSION_CACHES
    late = sorted(name for name, module in _READ_AT_IMPORT.items() if module in sys.modules)
    if late:  # a plugin imported the library first: this process may still use the user's folder
        warnings.warn(f"{', '.join(late)} set after the library that reads it was imported", stacklevel=1)
    _SESSION_CACHES = tempfile.mkdtemp(prefix="clip_cycles_test_caches_")
    for name, folder in CACHE_ENV_FOLDERS.items():
        os.environ[name] = os.path.join(_SESSION_CACHES, folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_CACHES is not None:
        shutil.rmtree(_SESSION_CACHES, ignore_errors=True)


@pytest.fixture(scope="session")
def shapes_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shapes world of 300 images at 64 px (seed 0), shared by the whole session."""
    from clip_cycles.data.sources.shapes_world import write_shapes_world

    return write_shapes_world(tmp_path_factory.mktemp("shapes_world"), progress=False, **SHAPES_WORLD_PARAMS)


@pytest.fixture(scope="session")
def shapes_cycles(shapes_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """All COCO families built from ``shapes_world`` (seeds 0, 1, 2; min 5 cycles per split)."""
    from clip_cycles.data.folder.build import build_coco_folder

    out = tmp_path_factory.mktemp("shapes_cycles") / "shapes_cycles"
    folder, _ = build_coco_folder(shapes_world, out, min_cycles=SHAPES_CYCLES_MIN_CYCLES)
    return folder


@pytest.fixture
def write_coco():
    """The function ``write_coco(root, categories, train_images, val_images)`` writing a tiny COCO fixture."""
    return write_coco_root


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random-init OpenCLIP model from a local config (``local-dir:``), one per test module."""
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "open_clip_config.json").write_text(json.dumps(TINY_OPEN_CLIP))
    return f"local-dir:{folder}"
