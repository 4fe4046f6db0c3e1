"""What the sdist and the wheel hold, and what a non-editable install finds.

The design card's top level (`setup.cfg, clip_cycles, tasks, hf_datasets, tests, README.md`)
is kept: the task YAMLs live in the top-level `tasks/` folder, the dataset builder scripts
in `hf_datasets/`. Both ship in the sdist as they are and in the wheel under
`clip_cycles/package_data/`. The expected file lists come from the checkout itself
(`git ls-files`), never from setup.py's own selection.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from clip_cycles.tasks.registry import INSTALLED_TASKS_DIR, TaskRegistry, shipped_tasks_dir

REPO = Path(__file__).resolve().parents[1]
PROJECT_FILES = ("setup.py", "setup.cfg", "pyproject.toml", "README.md", "MANIFEST.in")


def _tracked(folder: str) -> list[str]:
    """Files git tracks under ``folder`` (relative to the repository), or a plain listing outside git."""
    try:
        done = subprocess.run(["git", "ls-files", folder], cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
        files = sorted(line for line in done.stdout.splitlines() if line)
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:
        files = sorted(p.relative_to(REPO).as_posix() for p in (REPO / folder).rglob("*") if p.is_file())
    return [f for f in files if "__pycache__" not in f]


def _project_copy(target: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", ".*", "world", "data", "build_info.json")
    for name in ("clip_cycles", "tasks", "hf_datasets"):
        shutil.copytree(REPO / name, target / name, ignore=ignore)
    for name in PROJECT_FILES:
        shutil.copy2(REPO / name, target / name)
    return target


def _build(kind: str, project: Path, out: Path) -> Path:
    """``build_sdist`` or ``build_wheel`` of setuptools' PEP 517 backend (what pip and `python -m build` call)."""
    out.mkdir(parents=True, exist_ok=True)
    code = f"from setuptools import build_meta; print(build_meta.build_{kind}({str(out)!r}))"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLIP_CYCLES_", "PYTHONPATH"))}
    done = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"build_{kind} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return out / done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist of a copy of the checkout, and the wheel built from that sdist (as pip does from PyPI)."""
    work = tmp_path_factory.mktemp("packaging")
    sdist = _build("sdist", _project_copy(work / "project"), work / "dist")
    with tarfile.open(sdist) as archive:
        archive.extractall(work / "unpacked", filter="data")
    (unpacked,) = (work / "unpacked").iterdir()
    wheel = _build("wheel", unpacked, work / "wheels")
    return {"sdist": sdist, "wheel": wheel, "work": work}


def test_tasks_live_in_the_top_level_folder_only() -> None:
    tasks = _tracked("tasks")
    assert "tasks/cycles/_default_template_yaml" in tasks and "tasks/cycles/coco_strict_size.yaml" in tasks
    stray = [p for p in (REPO / "clip_cycles").rglob("*") if p.suffix == ".yaml" or p.name.endswith("_yaml")]
    # The lmms-eval bridge's own template is that bridge's, not a task of the registry.
    assert [p.relative_to(REPO).as_posix() for p in stray] == ["clip_cycles/integrations/lmms_tasks/_default_template_yaml"]
    assert shipped_tasks_dir() == REPO / "tasks"  # a checkout reads its own folder: one copy


def test_sdist_holds_tasks_and_hf_datasets(built: dict[str, Path]) -> None:
    with tarfile.open(built["sdist"]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    expected = _tracked("tasks") + _tracked("hf_datasets")
    assert any(name.endswith("/build.py") for name in expected)
    assert sorted(set(expected) - names) == []
    assert not [n for n in names if n.startswith("hf_datasets/") and n.count("/") > 2]  # no build outputs


def test_wheel_holds_every_task_and_builder_script(built: dict[str, Path]) -> None:
    with zipfile.ZipFile(built["wheel"]) as archive:
        names = set(archive.namelist())
    base = (Path("clip_cycles") / INSTALLED_TASKS_DIR).parent.as_posix()
    expected = [f"{base}/{name}" for name in _tracked("tasks") + _tracked("hf_datasets")]
    assert sorted(set(expected) - names) == []
    assert "clip_cycles/tasks/registry.py" in names  # the Python package keeps its own name beside the data folder
    assert not [n for n in names if n.startswith("clip_cycles/tasks/") and n.endswith(("yaml", "_yaml"))]


def test_non_editable_install_finds_every_task(built: dict[str, Path]) -> None:
    target = built["work"] / "target"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLIP_CYCLES_", "PYTHONPATH"))}
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target)]
    done = subprocess.run([*pip, str(built["wheel"])], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    code = (
        "import json, clip_cycles; from clip_cycles.tasks.registry import TaskRegistry, shipped_tasks_dir; "
        "r = TaskRegistry.default(); print(json.dumps({'package': clip_cycles.__file__, 'dir': str(shipped_tasks_dir()), "
        "'names': r.names(), 'unavailable': sorted(r.unavailable)}))"
    )
    env["PYTHONPATH"] = str(target)
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=built["work"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert Path(found["package"]).is_relative_to(target)  # the installed copy, not this checkout
    assert Path(found["dir"]) == target / "clip_cycles" / INSTALLED_TASKS_DIR
    yaml_names = {Path(f).relative_to("tasks").with_suffix("").as_posix() for f in _tracked("tasks") if f.endswith(".yaml")}
    assert len(yaml_names) >= 50 and yaml_names <= set(found["names"])
    assert found["unavailable"] == []
    assert found["names"] == TaskRegistry([REPO / "tasks"]).names()  # derived namespaces included


def test_a_package_without_its_task_folder_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    # The registry module as it would sit in an install that lost its package data (and is no checkout).
    lonely = tmp_path / "site" / "clip_cycles" / "tasks" / "registry.py"
    lonely.parent.mkdir(parents=True)
    shutil.copyfile(REPO / "clip_cycles" / "tasks" / "registry.py", lonely)
    spec = importlib.util.spec_from_file_location("lonely_registry", lonely)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "lonely_registry", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    with pytest.raises(FileNotFoundError, match=r"task YAMLs are missing: neither .*package_data/tasks .* reinstall clip_cycles"):
        module.shipped_tasks_dir()
    (lonely.parents[1] / "package_data" / "tasks").mkdir(parents=True)  # the installed copy is found
    assert module.shipped_tasks_dir() == lonely.parents[1] / "package_data" / "tasks"
