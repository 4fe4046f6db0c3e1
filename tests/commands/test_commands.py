"""The command package: a lazy registry of commands, one typed options object per command.

Each check runs on the real package and on a crafted violation, so it can fail.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import clip_cycles.commands
from clip_cycles.commands.derived import nested_model
from clip_cycles.commands.eval import EvalOptions
from clip_cycles.commands.main import COMMANDS, command_help, main, register_command, unregister_command
from clip_cycles.encoding.run_context import ModelOptions
from clip_cycles.schemas.options import Options, invalid_values

REPO = Path(__file__).resolve().parents[2]


def _options_classes() -> list[type[Options]]:
    found: dict[str, type[Options]] = {}
    for info in pkgutil.iter_modules(clip_cycles.commands.__path__, "clip_cycles.commands."):
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Options) and obj is not Options and obj.__module__ == module.__name__:
                found[obj.__qualname__] = obj
    return [found[name] for name in sorted(found)]


def test_every_command_is_a_lazy_target_with_a_help_line() -> None:
    entries = COMMANDS.registered()
    assert all(entry.description for entry in entries.values()) and len(entries) == 17
    assert all(entry.lazy and entry.target.startswith("clip_cycles.commands.") for entry in entries.values())
    for name in entries:
        assert callable(COMMANDS.get(name))  # every target resolves to its configure function


def test_listing_the_commands_imports_none_of_them() -> None:
    code = (
        "import sys, clip_cycles.cli as cli, contextlib, io; "
        "contextlib.redirect_stdout(io.StringIO()).__enter__(); cli.main(['--help']); "
        "sys.__stdout__.write(' '.join(sorted(m for m in sys.modules if m.startswith('clip_cycles.commands.'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["clip_cycles.commands.flags", "clip_cycles.commands.main"]


def test_unknown_and_duplicate_commands_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["evl"])
    assert "unknown clip-cycles command 'evl'; registered: audit, audit-benchmark, build" in (err := capsys.readouterr().err)
    assert "(did you mean 'eval'" in err
    with pytest.raises(ValueError, match="clip-cycles command 'eval' is already registered"):
        register_command("eval", "x:y", "again")
    assert command_help("eval").startswith("Zero-shot")  # the refused registration changed nothing


def test_a_registered_command_runs_and_its_errors_are_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--n", type=int, default=1)
        parser.set_defaults(func=lambda args: int(args.n > 1) or print("ran"))

    register_command("stand-in", configure, "a test command")
    try:
        assert main(["stand-in"]) == 0 and capsys.readouterr().out == "ran\n"
        assert main(["stand-in", "--n", "2"]) == 1
    finally:
        unregister_command("stand-in")
    assert "stand-in" not in COMMANDS


def test_every_options_field_names_its_flag() -> None:
    classes = _options_classes()
    assert len(classes) >= 10  # the walk saw the command modules
    # A field holding an options model (ModelOptions, SplitInputs, BuildConfig) is set by that model's own flags.
    missing = [
        f"{c.__name__}.{name}"
        for c in classes
        for name, info in c.model_fields.items()
        if nested_model(info) is None and not c.flag_of(name)
    ]
    assert missing == []


def test_flag_check_sees_a_field_without_its_flag() -> None:
    class Planted(Options):
        count: int = 1

    assert Planted.flag_of("count") is None


@pytest.mark.parametrize("options", _options_classes(), ids=lambda c: c.__name__)
def test_declared_constraints_refuse_their_invalid_values(options: type[Options]) -> None:
    # A valid value of every field that has no default, so each bad value is the only problem: an options
    # model (ModelOptions, SplitInputs) at its defaults, a one-item tuple, else a string.
    required: dict[str, object] = {}
    for name, info in options.model_fields.items():
        if info.is_required():
            annotation = info.annotation
            if nested_model(info) is not None:
                required[name] = nested_model(info)()  # type: ignore[misc]
            else:
                required[name] = ("x",) if "tuple" in str(annotation) else "x"
    assert options.make(**required)
    for name, values in invalid_values(options).items():
        flag = options.flag_of(name)
        for value in values:
            with pytest.raises(ValueError, match=f"{options.__name__} option {flag} \\({name}"):
                options.make(**{**required, name: value})


def test_eval_options_refuse_an_empty_task_list() -> None:
    assert EvalOptions.make(task=("t",), model=ModelOptions()).output.endswith("_{task}.json")
    with pytest.raises(ValueError, match=r"EvalOptions option --task \(task\)"):
        EvalOptions.make(task=(), model=ModelOptions())


def test_the_start_up_hook_finds_the_parser_patch_in_the_commands_layer() -> None:
    # The hook setup.py copies imports patch_cli from commands/; the integration module below it has none
    # (a hook copied by an install older than commands/ stays out of the way until the next install).
    import ast
    from pathlib import Path

    from clip_cycles.commands import _activation
    from clip_cycles.commands import clip_benchmark as command
    from clip_cycles.integrations import clip_benchmark as plugin

    tree = ast.parse(Path(_activation.__file__).read_text(encoding="utf-8"))
    imported = [(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names]
    assert ("clip_cycles.commands.clip_benchmark", "patch_cli") in imported and callable(command.patch_cli)
    assert not hasattr(plugin, "patch_cli")
