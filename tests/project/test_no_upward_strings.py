"""No string points up a layer: below ``commands/`` nothing imports by name, nor names ``clip_cycles.commands``.

An ``importlib.import_module("clip_cycles.commands...")`` call, an ``__import__`` or a lazy
``"clip_cycles.commands.x:y"`` target is an import that import-linter cannot see: it hid two
import cycles (the clip_benchmark plugin and the lmms-eval bridge lived half in ``integrations/``
and half in ``commands/``). The checks read the AST of every module: docstrings may name any
module, calls and other string constants may not. The import graph (``test_layers``' graph, plus
every ``import_module("clip_cycles....")`` anywhere in the package) has no cycle.

The source registry (``data/sources/registry.py``) holds data facts only: the build subcommands are
derived in ``commands/build.py`` from ``SOURCES`` plus that module's own table, so no string names them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_layers import REPO, _cycles, _import_graph, _module_name

COMMANDS = "clip_cycles.commands"


def _docstrings(tree: ast.AST) -> set[int]:
    """``id`` of each docstring node (module, class and function) of ``tree``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def _strings(tree: ast.AST) -> list[ast.Constant]:
    """Every string constant of ``tree`` but its docstrings (f-string parts included)."""
    skip = _docstrings(tree)
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]


def _imports_by_name(tree: ast.AST) -> list[ast.Call]:
    """Calls of ``importlib.import_module``, ``import_module`` or ``__import__`` (any spelling of the callee)."""
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__"):
                calls.append(node)
    return calls


def upward_strings(root: Path) -> list[str]:
    """``path:line what`` for each import by name and each string naming ``clip_cycles.commands`` outside commands/."""
    found = []
    for path in sorted((root / "clip_cycles").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith("clip_cycles/commands/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{relative}:{call.lineno} import by name" for call in _imports_by_name(tree)]
        found += [f"{relative}:{node.lineno} {node.value!r}" for node in _strings(tree) if COMMANDS in node.value]
    return found


def named_import_graph(root: Path) -> dict[str, set[str]]:
    """:func:`test_layers._import_graph` plus an edge for every import by name of a constant package module name
    (``importlib.import_module("clip_cycles.commands.x")``: the imports import-linter cannot see)."""
    graph = _import_graph(root)
    for path in sorted((root / "clip_cycles").rglob("*.py")):
        name = _module_name(path, root)
        for call in _imports_by_name(ast.parse(path.read_text(encoding="utf-8"))):
            first = call.args[0] if call.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value in graph:
                if first.value != name:
                    graph[name].add(first.value)
    return graph


def test_nothing_below_commands_imports_by_name_or_names_commands() -> None:
    assert upward_strings(REPO) == []


def test_no_import_cycle_even_counting_imports_by_name() -> None:
    assert _cycles(named_import_graph(REPO)) == []


def _scratch(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"clip_cycles/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_the_checks_see_planted_offenders_and_leave_docstrings_and_commands_alone(tmp_path: Path) -> None:
    root = _scratch(
        tmp_path,
        {
            "clip_cycles/integrations/plugin.py": (
                '"""Docstrings may say python -m clip_cycles.commands.plugin."""\n'
                "import importlib\n"
                "from importlib import import_module\n\n\n"
                "def hook():\n"
                '    """Also this one: clip_cycles.commands.plugin."""\n'
                '    importlib.import_module("clip_cycles." + "commands.plugin")\n'
                '    import_module("x")\n'
                '    __import__("y")\n'
                '    return f"{1}clip_cycles.commands.plugin:main"\n'
            ),
            "clip_cycles/data/sources/registry.py": 'HOOK = "clip_cycles.commands.build:run"\nOTHER = "clip_cycles.data.x"\n',
            "clip_cycles/commands/plugin.py": 'import importlib\nimportlib.import_module("clip_cycles.commands.build")\n',
        },
    )
    assert upward_strings(root) == [
        "clip_cycles/data/sources/registry.py:1 'clip_cycles.commands.build:run'",
        "clip_cycles/integrations/plugin.py:8 import by name",
        "clip_cycles/integrations/plugin.py:9 import by name",
        "clip_cycles/integrations/plugin.py:10 import by name",
        "clip_cycles/integrations/plugin.py:11 'clip_cycles.commands.plugin:main'",
    ]


def test_an_import_by_name_closes_a_planted_loop(tmp_path: Path) -> None:
    root = _scratch(
        tmp_path,
        {
            "clip_cycles/commands/__init__.py": "",
            "clip_cycles/commands/build.py": "from clip_cycles.data.sources import registry  # noqa\n",
            "clip_cycles/data/__init__.py": "",
            "clip_cycles/data/sources/__init__.py": "",
            "clip_cycles/data/sources/registry.py": (
                '"""clip_cycles.commands.build in a docstring is no edge."""\nimport importlib\n'
            ),
        },
    )
    assert _cycles(named_import_graph(root)) == []
    sources = root / "clip_cycles" / "data" / "sources" / "registry.py"
    sources.write_text(sources.read_text() + 'HOOK = importlib.import_module("clip_cycles.commands.build")\n')
    assert _cycles(named_import_graph(root)) == [["clip_cycles.commands.build", "clip_cycles.data.sources.registry"]]
