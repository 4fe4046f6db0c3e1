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
from typing import Iterator

import pytest

from clip_cycles.tasks.registry import INSTALLED_TASKS_DIR, TaskRegistry, shipped_tasks_dir

REPO = Path(__file__).resolve().parents[2]
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


#: What a copy of the checkout leaves out: build artefacts and tool folders only, never a source folder
#: (``clip_cycles/data`` is a package), and what the dataset builders leave in ``hf_datasets/<name>/``.
BUILD_ARTEFACTS = ("__pycache__", "*.egg-info", "build", "dist", ".venv", "venv", ".git", ".*_cache", ".hypothesis")
BUILDER_OUTPUTS = ("world", "data", "build_info.json")


def _source_files(folder: str) -> list[str]:
    """The files of ``folder`` a build may see: what git tracks or would track (not ignored), that exist;
    outside git, every file but :data:`BUILD_ARTEFACTS` and the builders' outputs."""
    try:
        listing = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", folder]
        done = subprocess.run(listing, cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
        files = sorted({line for line in done.stdout.splitlines() if line and (REPO / line).is_file()})
    except (OSError, subprocess.CalledProcessError):
        files = []
    if files:
        return [f for f in files if "__pycache__" not in f]
    found = []
    for path in sorted((REPO / folder).rglob("*")):
        parts = path.relative_to(REPO).parts
        artefact = any(Path(part).match(pattern) for part in parts for pattern in BUILD_ARTEFACTS)
        output = parts[0] == "hf_datasets" and len(parts) > 2 and parts[2] in BUILDER_OUTPUTS
        if path.is_file() and not artefact and not output:
            found.append(path.relative_to(REPO).as_posix())
    return found


def _project_copy(target: Path) -> Path:
    """A copy of the project as a build sees it: every source file of the package, tasks and builders."""
    for name in ("clip_cycles", "tasks", "hf_datasets"):
        for relative in _source_files(name):
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / relative, target / relative)
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
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The sdist of a copy of the checkout, and the wheel built from that sdist (as pip does from PyPI).

    About 70 MB (copies, archives, an install): removed after the module, whatever the outcome."""
    work = tmp_path_factory.mktemp("packaging")
    try:
        sdist = _build("sdist", _project_copy(work / "project"), work / "dist")
        with tarfile.open(sdist) as archive:
            archive.extractall(work / "unpacked", filter="data")
        (unpacked,) = (work / "unpacked").iterdir()
        wheel = _build("wheel", unpacked, work / "wheels")
        yield {"sdist": sdist, "wheel": wheel, "work": work}
    finally:
        shutil.rmtree(work, ignore_errors=True)


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


def _subpackage_modules() -> list[str]:
    """Every package of the source tree (found now, not listed) and its first public module."""
    modules = []
    for init in sorted((REPO / "clip_cycles").rglob("__init__.py")):
        package = ".".join(init.parent.relative_to(REPO).parts)
        public = sorted(p.stem for p in init.parent.glob("*.py") if not p.name.startswith("_"))
        modules += [package, *(f"{package}.{name}" for name in public[:1])]
    return modules


def _fresh_venv(root: Path) -> Path:
    """A virtual environment that sees the test run's dependencies (torch, datasets, ...) but no clip_cycles.

    The dependencies' folders go on its path through a ``.pth`` of plain lines: Python appends them
    without running the ``.pth`` files inside them, so an editable clip_cycles there stays out of reach.
    """
    import site
    import venv

    venv.EnvBuilder(with_pip=False, clear=True).create(root)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = Path(subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "zz_test_dependencies.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()), encoding="utf-8")
    return python


def test_non_editable_install_finds_every_task(built: dict[str, Path]) -> None:
    """The wheel in a fresh environment, run isolated (``-I``: no PYTHONPATH, no cwd, no user site) from a
    folder outside the checkout: every package imports from the install and every task is found."""
    env_root = built["work"] / "venv"
    python = _fresh_venv(env_root)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLIP_CYCLES_", "PYTHONPATH"))}
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site_packages = subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", site_packages]
    done = subprocess.run([*pip, str(built["wheel"])], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    with zipfile.ZipFile(built["wheel"]) as archive:
        in_wheel = set(archive.namelist())
    sources = [f for f in _source_files("clip_cycles") if f.endswith(".py")]
    assert "clip_cycles/data/__init__.py" in sources and sorted(set(sources) - in_wheel) == []  # every module ships
    modules = _subpackage_modules()
    assert {"clip_cycles.data", "clip_cycles.tasks", "clip_cycles.encoding"} <= set(modules)
    code = (
        "import importlib, json, sys, clip_cycles; from clip_cycles.tasks.registry import TaskRegistry, shipped_tasks_dir; "
        f"files = {{m: importlib.import_module(m).__file__ for m in {modules!r}}}; "
        "r = TaskRegistry.default(); print(json.dumps({'package': clip_cycles.__file__, 'dir': str(shipped_tasks_dir()), "
        "'names': r.names(), 'unavailable': sorted(r.unavailable), 'files': files, 'path': sys.path}))"
    )
    outside = built["work"] / "elsewhere"
    outside.mkdir(exist_ok=True)
    done = subprocess.run([str(python), "-I", "-c", code], env=env, cwd=outside, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert not any(Path(p).resolve() == REPO.resolve() for p in found["path"] if p)  # the checkout is not importable
    assert Path(found["package"]).is_relative_to(site_packages)  # the installed copy, not this checkout
    outside_install = {m: f for m, f in found["files"].items() if not Path(f).is_relative_to(site_packages)}
    assert outside_install == {}  # every package, and a module of each, from the wheel
    assert Path(found["dir"]) == Path(site_packages) / "clip_cycles" / INSTALLED_TASKS_DIR
    yaml_names = {Path(f).relative_to("tasks").with_suffix("").as_posix() for f in _tracked("tasks") if f.endswith(".yaml")}
    assert len(yaml_names) >= 30 and yaml_names <= set(found["names"])
    assert found["unavailable"] == []
    assert found["names"] == TaskRegistry([REPO / "tasks"]).names()  # derived namespaces and mirrored sources included


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
