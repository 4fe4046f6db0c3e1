"""The package's layering (DEVELOPING.md "Layers"): downward imports only, no import cycle, imports at the top.

Each check runs on the real package and, to show it can fail, on a scratch copy with a
planted violation.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clip_cycles.evaluation.runners import Runner

REPO = Path(__file__).resolve().parents[2]
CONTRACT = REPO / ".importlinter"
#: Function-level imports of these package modules are allowed: they import torch at import time.
HEAVY_MODULES = {"clip_cycles.heads.score_heads"}
#: The start-up hook is stdlib only and imports the plugin when clip_benchmark is imported, by design.
LAZY_BY_DESIGN = {"clip_cycles/commands/_activation.py"}


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter's contract on the package under ``root``."""
    lint = Path(sys.executable).with_name("lint-imports")
    command = [str(lint)] if lint.exists() else [sys.executable, "-m", "importlinter.cli"]
    return subprocess.run(
        [*command, str(CONTRACT), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )


def _package_copy(tmp_path: Path) -> Path:
    shutil.copytree(
        REPO / "clip_cycles",
        tmp_path / "clip_cycles",
        ignore=shutil.ignore_patterns("__pycache__", "weights", "model_configs", "*.yaml"),
    )
    return tmp_path


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(root: Path) -> dict[str, set[str]]:
    """Every import between the package's modules (module top, functions, TYPE_CHECKING blocks)."""
    modules = {_module_name(p, root): p for p in (root / "clip_cycles").rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("clip_cycles"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    graph[name].add(sub if sub in modules else node.module)  # type: ignore[arg-type]
            elif isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in modules)
    # A package's __init__ importing its own submodules is not a loop between modules.
    return {
        name: {t for t in targets if t != name and t in modules and not t.startswith(name + ".")}
        for name, targets in graph.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _function_level_imports(root: Path) -> list[str]:
    """``file:line module`` for each import of a light package module inside a function body."""
    out = []
    for path in sorted((root / "clip_cycles").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in LAZY_BY_DESIGN:
            continue
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("clip_cycles")
                    and node.module not in HEAVY_MODULES
                ):
                    out.append(f"{rel}:{node.lineno} {node.module}")
    return out


def test_layers_contract_is_kept() -> None:
    result = _lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout  # the package's layers and data/'s three rooms


def test_layers_contract_fails_on_an_upward_import(tmp_path: Path) -> None:
    root = _package_copy(tmp_path)
    contrast = root / "clip_cycles" / "algebra" / "contrast.py"
    contrast.write_text(
        contrast.read_text(encoding="utf-8") + "\n\ndef _planted():\n"
        "    from clip_cycles.evaluation.zero_shot import score_blocks\n\n    return score_blocks\n"
    )
    result = _lint(root)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "clip_cycles.algebra.contrast -> clip_cycles.evaluation.zero_shot" in result.stdout


def test_layers_contract_fails_when_siblings_meet(tmp_path: Path) -> None:
    root = _package_copy(tmp_path)
    splitters = root / "clip_cycles" / "attributes" / "splitters.py"
    splitters.write_text(splitters.read_text(encoding="utf-8") + "\nfrom clip_cycles.experiments import report  # noqa\n")
    result = _lint(root)
    assert result.returncode != 0
    assert "clip_cycles.attributes.splitters -> clip_cycles.experiments.report" in result.stdout


def test_data_rooms_contract_fails_when_a_lower_room_reaches_up(tmp_path: Path) -> None:
    # The package-wide contract cannot see this (data/ is one layer there): only the rooms contract can.
    root = _package_copy(tmp_path)
    annotations = root / "clip_cycles" / "data" / "sources" / "annotations.py"
    annotations.write_text(annotations.read_text(encoding="utf-8") + "\nfrom clip_cycles.data.families import coco  # noqa\n")
    result = _lint(root)
    assert result.returncode != 0
    assert "clip_cycles.data.sources.annotations -> clip_cycles.data.families.coco" in result.stdout
    assert "clip_cycles layers import downward only KEPT" in result.stdout


def test_no_import_cycle() -> None:
    graph = _import_graph(REPO)
    assert len(graph) > 60  # the walk saw the whole package
    assert _cycles(graph) == []


def test_cycle_check_finds_a_planted_loop(tmp_path: Path) -> None:
    root = _package_copy(tmp_path)
    # data.folder.writer imports data.families.registry; the planted line closes the loop the other way.
    families = root / "clip_cycles" / "data" / "families" / "registry.py"
    families.write_text(families.read_text(encoding="utf-8") + "\nfrom clip_cycles.data.folder import writer  # noqa\n")
    cycles = _cycles(_import_graph(root))
    assert cycles == [["clip_cycles.data.families.registry", "clip_cycles.data.folder.writer"]]


def test_cycle_finder_on_a_hand_made_graph() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_package_imports_sit_at_module_top() -> None:
    assert _function_level_imports(REPO) == []


def test_function_level_import_check_sees_a_planted_one(tmp_path: Path) -> None:
    root = _package_copy(tmp_path)
    target = root / "clip_cycles" / "data" / "sources" / "registry.py"
    target.write_text(
        target.read_text(encoding="utf-8") + "\n\ndef _planted():\n"
        "    from clip_cycles.algebra.contrast import cycle_acc\n\n    return cycle_acc\n"
    )
    assert _function_level_imports(root) == [
        f"clip_cycles/data/sources/registry.py:{len(target.read_text().splitlines()) - 2} clip_cycles.algebra.contrast"
    ]


@pytest.mark.parametrize(
    "module",
    [
        "clip_cycles",
        "clip_cycles.cli",
        "clip_cycles.evaluation.runners",
        "clip_cycles.experiments.probes",
        "clip_cycles.integrations.clip_benchmark",
    ],
)
def test_light_modules_import_no_torch(module: str) -> None:
    code = (
        f"import sys, {module}; print(sorted(m for m in ('torch', 'open_clip', 'datasets', 'transformers') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_cycle_evaluation_imports_no_scikit_learn_until_an_attribute_task_runs() -> None:
    # The runner registry names its built-in runners as "module:function"; only the one a task needs loads.
    code = (
        "import sys; import clip_cycles.commands.eval, clip_cycles.commands.clip_benchmark; "
        "from clip_cycles.evaluation.runners import runner_for; before = 'sklearn' in sys.modules; "
        "runner_for('cycle_probe').func; probe = 'sklearn' in sys.modules; "
        "runner_for('attribute_splits').func; print(before, probe, 'sklearn' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False", "True"]


def test_a_runner_that_cannot_be_loaded_is_named() -> None:
    with pytest.raises(ValueError, match=r"output type 'x'.*clip_cycles\.nowhere:run"):
        _ = Runner("x", "x", "clip_cycles.nowhere:run").func


# --------------------------------------------------------------------------- argparse lives in commands/ only

#: The one package where command-line parsing may happen (issue 35: every command's flags in one room).
COMMANDS_PACKAGE = "clip_cycles/commands/"


def _argparse_importers(root: Path) -> list[str]:
    """Package files (outside clip_cycles/commands/) that import argparse anywhere (module top or function)."""
    out = []
    for path in sorted((root / "clip_cycles").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(COMMANDS_PACKAGE):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(name == "argparse" or name.startswith("argparse.") for name in names):
                out.append(f"{rel}:{node.lineno}")
    return out


def test_argparse_is_imported_only_under_commands() -> None:
    assert _argparse_importers(REPO) == []
    assert (REPO / COMMANDS_PACKAGE / "main.py").is_file()  # the check looks where the commands are


def test_argparse_check_sees_a_planted_import(tmp_path: Path) -> None:
    root = _package_copy(tmp_path)
    target = root / "clip_cycles" / "evaluation" / "runners.py"
    target.write_text(
        target.read_text(encoding="utf-8") + "\n\ndef _planted():\n    from argparse import Namespace\n\n    return Namespace\n"
    )
    lines = len(target.read_text(encoding="utf-8").splitlines())
    assert _argparse_importers(root) == [f"clip_cycles/evaluation/runners.py:{lines - 2}"]
    (root / "clip_cycles" / "results.py").write_text("import argparse\n")
    assert _argparse_importers(root)[-1] == "clip_cycles/results.py:1"
