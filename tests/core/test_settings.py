"""Every CLIP_CYCLES_* variable is read in clip_cycles.settings, and a planted value reaches its user."""

from __future__ import annotations

import ast
import logging
import os
import re
import types
from pathlib import Path

import pytest

import clip_cycles
from clip_cycles import settings
from clip_cycles.algebra import contrast
from clip_cycles.encoding import encoder
from clip_cycles.integrations.clip_benchmark import options_from_clip_benchmark
from clip_cycles.tasks.registry import TaskRegistry, shipped_tasks_dir

ENV_NAMES = [
    settings.CACHE_ENV,
    settings.SKIP_BAD_IMAGES_ENV,
    settings.TASKS_PATH_ENV,
    settings.SPLIT_EMBEDDINGS_ENV,
    settings.NO_NUMBA_ENV,
    settings.FAULT_ENV,
    settings.FAULT_RANK_ENV,
    settings.DIST_TIMEOUT_ENV,
    settings.SAMPLES_ENV,
    settings.MIN_CYCLES_ENV,
    settings.LOG_LEVEL_ENV,
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [*ENV_NAMES, "RANK"]:
        monkeypatch.delenv(name, raising=False)


def test_cache_roots(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(Path, "home", lambda: tmp_path / "home")
    assert settings.resolve_cache_dir() == tmp_path / "home" / ".cache" / "clip_cycles"
    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "env"))
    assert settings.resolve_cache_dir() == tmp_path / "env"
    assert settings.resolve_cache_dir(tmp_path / "given") == tmp_path / "given"  # a flag beats the variable
    assert settings.resolve_data_cache_dir() == tmp_path / "env" / "datasets"
    assert settings.resolve_data_cache_dir(None, tmp_path / "given") == tmp_path / "given" / "datasets"
    assert settings.resolve_data_cache_dir(tmp_path / "data", tmp_path / "given") == tmp_path / "data"


@pytest.mark.parametrize("value, on", [("1", True), ("yes", True), ("0", False), ("", False), (" 0 ", False)])
def test_switches_are_on_unless_empty_or_zero(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    monkeypatch.setenv("CLIP_CYCLES_SKIP_BAD_IMAGES", value)
    monkeypatch.setenv("CLIP_CYCLES_NO_NUMBA", value)
    assert settings.skip_bad_images() is on and settings.numba_disabled() is on


def test_skip_bad_images_reaches_the_plugins_options(monkeypatch: pytest.MonkeyPatch) -> None:
    args = types.SimpleNamespace(
        model_type="open_clip",
        model="m",
        pretrained="p",
        model_cache_dir=None,
        amp=True,
        seed=2,
        batch_size=16,
        num_workers=0,
        dataset_root="root",
        dataset="cycles/x",
    )
    assert not options_from_clip_benchmark(args, "cpu").skip_bad_images
    monkeypatch.setenv("CLIP_CYCLES_SKIP_BAD_IMAGES", "1")
    options = options_from_clip_benchmark(args, "cpu")
    assert (options.skip_bad_images, options.model_seed, options.encode_batch_size) == (True, 2, 16)


def test_numba_switch_reaches_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contrast, "_NUMBA_KERNEL", None)
    monkeypatch.setenv("CLIP_CYCLES_NO_NUMBA", "1")
    assert contrast._numba_kernel() is None


def test_task_path_reaches_the_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert settings.extra_task_dirs() == []
    monkeypatch.setenv("CLIP_CYCLES_TASKS_PATH", os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "b")]))
    assert settings.extra_task_dirs() == [tmp_path / "a", tmp_path / "b"]
    assert TaskRegistry.default().roots == [tmp_path / "a", tmp_path / "b", shipped_tasks_dir()]


def test_split_embeddings_override(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.split_embeddings_override() is None
    monkeypatch.setenv("CLIP_CYCLES_SPLIT_EMBEDDINGS", "swin.npz")
    assert settings.split_embeddings_override() == "swin.npz"


def test_injected_fault_is_aimed_at_one_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.injected_fault_limit() is None and encoder._FaultCounter().limit is None
    monkeypatch.setenv("CLIP_CYCLES_FAULT_AFTER_BATCHES", " 3 ")
    assert settings.injected_fault_limit() == 3 and encoder._FaultCounter().limit == 3
    monkeypatch.setenv("CLIP_CYCLES_FAULT_RANK", "1")
    assert settings.injected_fault_limit() is None  # outside torchrun this process is rank 0
    monkeypatch.setenv("RANK", "1")
    assert settings.injected_fault_limit() == 3
    monkeypatch.setenv("CLIP_CYCLES_FAULT_AFTER_BATCHES", "three")
    with pytest.raises(ValueError, match="CLIP_CYCLES_FAULT_AFTER_BATCHES='three' is not an integer"):
        settings.injected_fault_limit()


def test_min_cycles_override(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.min_cycles_override() is None
    monkeypatch.setenv("CLIP_CYCLES_MIN_CYCLES", " 5 ")
    assert settings.min_cycles_override() == 5
    for bad, why in (("five", "not an integer"), ("0", "at least 1"), ("-3", "at least 1")):
        monkeypatch.setenv("CLIP_CYCLES_MIN_CYCLES", bad)
        with pytest.raises(ValueError, match=f"CLIP_CYCLES_MIN_CYCLES.*{why}"):
            settings.min_cycles_override()


def test_barrier_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.dist_timeout_s() == 6 * 3600.0
    monkeypatch.setenv("CLIP_CYCLES_DIST_TIMEOUT_S", "12.5")
    assert settings.dist_timeout_s() == 12.5
    monkeypatch.setenv("CLIP_CYCLES_DIST_TIMEOUT_S", "soon")
    with pytest.raises(ValueError, match="CLIP_CYCLES_DIST_TIMEOUT_S='soon'"):
        settings.dist_timeout_s()


def test_module_docstring_lists_every_variable() -> None:
    listed = set(re.findall(r"^``(CLIP_CYCLES_[A-Z_]+)``", settings.__doc__ or "", flags=re.MULTILINE))
    assert listed == set(ENV_NAMES)


def test_log_level(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings.log_level() is None
    for value, level in ((" debug ", logging.DEBUG), ("INFO", logging.INFO), ("Warning", logging.WARNING), ("error", 40)):
        monkeypatch.setenv("CLIP_CYCLES_LOG_LEVEL", value)
        assert settings.log_level() == level
    for bad in ("loud", "10", "warn"):
        monkeypatch.setenv("CLIP_CYCLES_LOG_LEVEL", bad)
        with pytest.raises(ValueError, match=f"CLIP_CYCLES_LOG_LEVEL='{bad}' is not a log level; give one of debug, info"):
            settings.log_level()


# --------------------------------------------------------------------------- nobody else reads the environment

ROOT = Path(clip_cycles.__file__).parent
#: Where the environment may be read besides settings: the stdlib-only start-up hook, and torchrun's
#: own variables in distributed.world_from_env (see the settings module docstring).
ALLOWED = {
    ("commands/_activation.py", "activate"),
    ("commands/_activation.py", "install"),
    ("encoding/distributed.py", "world_from_env"),
}


def _environment_reads() -> list[tuple[str, str]]:
    """(file, innermost function or "<module>") of every ``os.environ`` / ``os.getenv`` in the package."""

    def visit(node: ast.AST, rel: str, where: str, out: list[tuple[str, str]]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            where = node.name
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("environ", "getenv", "putenv")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            out.append((rel, where))
        for child in ast.iter_child_nodes(node):
            visit(child, rel, where, out)

    reads: list[tuple[str, str]] = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel != "settings.py":
            visit(ast.parse(path.read_text(encoding="utf-8")), rel, "<module>", reads)
    return sorted(set(reads))


def test_only_settings_reads_clip_cycles_variables() -> None:
    assert set(_environment_reads()) - ALLOWED == set()
    # Every CLIP_CYCLES_* name in the package is one of settings' constants (or the hook's own switch).
    names = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("CLIP_CYCLES_")
                and node.value.isupper()
            ):
                names.add(node.value)
    assert names - set(ENV_NAMES) == {"CLIP_CYCLES_NO_PLUGIN"}
