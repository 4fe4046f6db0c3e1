"""Shadowing is visible (issue 36): a task file on CLIP_CYCLES_TASKS_PATH named like a shipped task is used,
with one warning per process naming both files; a shapes twin (which has no file of its own) counts too.

Both registry paths are covered: the fast one (a single task read from its own file) and the full scan
(listing, patterns). A file of a new name warns nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from clip_cycles.tasks.registry import TaskRegistry, shipped_tasks_dir

YAML = """task: cycles/{name}
dataset_path: {source}
dataset_kwargs: {{config: text_neighbor, seeds: [0]}}
test_split: test
metric_list: [cycle_acc]
tie_tolerance: 1.0e-9
"""


def _user_dir(tmp_path: Path, name: str, source: str) -> Path:
    folder = tmp_path / "user"
    (folder / "cycles").mkdir(parents=True, exist_ok=True)
    (folder / "cycles" / f"{name}.yaml").write_text(YAML.format(name=name, source=source), encoding="utf-8")
    return folder


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "clip_cycles.tasks.registry" and r.levelno == logging.WARNING]


def test_a_user_file_named_like_a_shipped_task_is_used_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    user = _user_dir(tmp_path, "coco_strict_size", "coco")
    mine, shipped = user / "cycles" / "coco_strict_size.yaml", shipped_tasks_dir() / "cycles" / "coco_strict_size.yaml"
    with caplog.at_level(logging.WARNING, logger="clip_cycles.tasks.registry"):
        spec = TaskRegistry([user, shipped_tasks_dir()]).get("cycles/coco_strict_size")  # the fast path
        assert spec.config == "text_neighbor" and spec.path == mine  # the user's file is the one used
        (warning,) = _warnings(caplog)
        assert str(mine) in warning and str(shipped) in warning and "cycles/coco_strict_size" in warning
        # Again, and through the full scan of another registry: still one warning in this process.
        again = TaskRegistry([user, shipped_tasks_dir()])
        assert "cycles/coco_strict_size" in again.names()
        assert again.get("cycles/coco_strict_size").path == mine
    assert len(_warnings(caplog)) == 1


def test_the_full_scan_warns_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    user = _user_dir(tmp_path, "gqa_binding", "gqa")
    with caplog.at_level(logging.WARNING, logger="clip_cycles.tasks.registry"):
        registry = TaskRegistry([user, shipped_tasks_dir()])
        registry.names()  # reads every file
    (warning,) = _warnings(caplog)
    assert str(user / "cycles" / "gqa_binding.yaml") in warning
    assert str(shipped_tasks_dir() / "cycles" / "gqa_binding.yaml") in warning


def test_a_user_file_named_like_a_shapes_twin_names_the_base_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The case: a file cycles/shapes_coarse_object.yaml (holding text_neighbor) replaced the shapes twin silently.
    user = _user_dir(tmp_path, "shapes_coarse_object", "shapes")
    with caplog.at_level(logging.WARNING, logger="clip_cycles.tasks.registry"):
        spec = TaskRegistry([user, shipped_tasks_dir()]).get("cycles/shapes_coarse_object")
    assert spec.config == "text_neighbor"
    (warning,) = _warnings(caplog)
    assert str(user / "cycles" / "shapes_coarse_object.yaml") in warning
    base = shipped_tasks_dir() / "cycles" / "coco_coarse_object.yaml"
    assert f"the shapes twin of cycles/coco_coarse_object ({base})" in warning


def test_a_new_name_warns_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    user = _user_dir(tmp_path, "my_family", "shapes")
    with caplog.at_level(logging.WARNING, logger="clip_cycles.tasks.registry"):
        registry = TaskRegistry([user, shipped_tasks_dir()])
        assert registry.get("cycles/my_family").path == user / "cycles" / "my_family.yaml"
        registry.names()
    assert _warnings(caplog) == []


def test_the_readme_documents_the_choice() -> None:
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8").split())
    assert "named like a shipped task (or like a shapes twin of one) is used instead of it, with a warning" in readme
