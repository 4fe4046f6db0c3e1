"""Each flag written once: every command's parser is derived from its options model.

For every registered ``clip-cycles`` command (and each ``build`` sub-command) the parser that
``clip-cycles`` builds is compared with the declaration of the command's options model, read
here straight from the fields (not through :mod:`clip_cycles.commands.derived`): every argparse
action but ``-h``/``-q``/``-v`` (and the refused ``--seed`` of the experiments, which sets nothing)
is a field with the same flag, default, choices, help and nargs, and every flagged field has its
action. A field planted in a command's model appears in its parser and reaches its ``run`` with
no other edit; a declared range is refused at the command line in the options' one sentence.
"""

from __future__ import annotations

import argparse
import types
import typing
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest
from pydantic import Field
from pydantic_core import PydanticUndefined

from clip_cycles.commands import eval as eval_command
from clip_cycles.commands.derived import OPTIONS_MODEL, RefusedFlag
from clip_cycles.commands.flags import add_verbosity_arguments
from clip_cycles.commands.main import COMMANDS, main
from clip_cycles.schemas.options import Options


def _parser(name: str) -> argparse.ArgumentParser:
    """The parser ``clip-cycles NAME`` builds."""
    parser = argparse.ArgumentParser(prog=f"clip-cycles {name}")
    COMMANDS.get(name)(parser)
    add_verbosity_arguments(parser)
    return parser


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, the ``build`` sub-commands' in place of ``build``'s."""
    out = {}
    for name in COMMANDS.names():
        parser = _parser(name)
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            out.update({f"{name} {sub}": sub_parser for sub, sub_parser in subs[0].choices.items()})
        else:
            out[name] = parser
    return out


PARSERS = _parsers()


def _extra(info: Any) -> dict[str, Any]:
    return dict(info.json_schema_extra) if isinstance(info.json_schema_extra, dict) else {}


def _inner(info: Any) -> type[Options] | None:
    union = typing.get_origin(info.annotation) in (typing.Union, types.UnionType)
    for arg in (info.annotation, *(typing.get_args(info.annotation) if union else ())):
        if isinstance(arg, type) and issubclass(arg, Options):
            return arg
    return None


def declared(model: type[Options], nested: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """What each flagged field of ``model`` declares, keyed by its flag (a positional: its field name)."""
    nested = nested or {}
    out: dict[str, dict[str, Any]] = {}
    for name, info in model.model_fields.items():
        if name in nested.get("skip", ()) or ("only" in nested and name not in nested["only"]):
            continue
        extra = _extra(info)
        inner = _inner(info)
        if inner is not None and "flag" not in extra:
            out.update(declared(inner, extra.get("nested", {})))
            continue
        if "flag" not in extra:
            continue
        flag = nested.get("flag", {}).get(name, extra["flag"])
        prefix = nested.get("prefix", "")
        positional = not flag.startswith("-")
        names = [] if positional else ["--" + prefix + flag[2:]]
        if not positional and (nested.get("aliases") or not nested):
            names += ["--" + prefix + alias[2:] for alias in extra.get("aliases", ())]
        default = nested.get("default", {}).get(name, info.default)
        annotation = info.annotation
        union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
        args = [a for a in typing.get_args(annotation) if a is not type(None)] if union else [annotation]
        literal = next((a for a in (annotation, *args) if typing.get_origin(a) is Literal), None)
        sequence = any(typing.get_origin(a) is tuple for a in args)
        if annotation is bool or extra.get("action"):
            nargs = 0 if annotation is bool else None
        else:
            nargs = extra.get("nargs") or ("+" if sequence else None)
        out[names[0] if names else name] = {
            "names": names,
            "default": None if default is PydanticUndefined else default,
            "required": default is PydanticUndefined or name in nested.get("required", ()),
            "choices": typing.get_args(literal) if literal is not None else extra.get("choices"),
            "help": nested.get("help", {}).get(name, extra.get("help")),
            "nargs": nargs,
        }
    return out


def parsed(parser: argparse.ArgumentParser) -> dict[str, dict[str, Any]]:
    """What each argparse action of ``parser`` says, keyed like :func:`declared`."""
    out = {}
    for action in parser._actions:
        if action.dest in ("help", "quiet", "verbose") or isinstance(action, RefusedFlag):
            continue
        key = action.option_strings[0] if action.option_strings else action.dest
        default = action.default
        out[key] = {
            "names": list(action.option_strings),
            "default": tuple(default) if isinstance(default, list) else default,
            "required": action.required if action.option_strings else action.default is None and action.nargs != "?",
            "choices": tuple(action.choices) if action.choices is not None else None,
            "help": action.help,
            "nargs": action.nargs,
        }
    return out


def _normal(values: dict[str, Any]) -> dict[str, Any]:
    out = dict(values)
    out["choices"] = tuple(out["choices"]) if out["choices"] is not None else None
    out["default"] = tuple(out["default"]) if isinstance(out["default"], (list, tuple)) else out["default"]
    return out


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_action_is_a_declared_field_and_every_flagged_field_an_action(name: str) -> None:
    parser = PARSERS[name]
    model = parser.get_default(OPTIONS_MODEL)
    assert isinstance(model, type) and issubclass(model, Options), f"{name}: no options model behind its parser"
    actions, fields = parsed(parser), declared(model)
    assert sorted(actions) == sorted(fields)
    for key, field in fields.items():
        action = _normal(actions[key])
        expected = _normal(field)
        if not field["names"]:  # a positional: required is how many it takes, compared through nargs and default
            action.pop("required"), expected.pop("required")
        assert action == expected, key


def test_the_comparison_sees_a_hand_written_flag_and_a_changed_help() -> None:
    parser = _parser("compare")
    parser.add_argument("--extra", default=1)
    assert "--extra" in parsed(parser) and "--extra" not in declared(parser.get_default(OPTIONS_MODEL))
    parser = _parser("compare")
    (level,) = [a for a in parser._actions if "--level" in a.option_strings]
    level.help = "another help"
    assert parsed(parser)["--level"] != declared(parser.get_default(OPTIONS_MODEL))["--level"]


def test_every_command_and_build_source_is_covered() -> None:
    assert {"eval", "splits", "probe", "build coco", "build gqa", "build shapes"} <= set(PARSERS)
    assert len(PARSERS) == len(COMMANDS.names()) - 1 + 3


def test_a_planted_field_reaches_the_parser_and_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    planted = pydantic.create_model(
        "PlantedEvalOptions",
        __base__=eval_command.EvalOptions,
        planted=(int, Field(3, ge=1, json_schema_extra={"flag": "--planted", "help": "a planted flag"})),
    )
    seen: list[Any] = []
    monkeypatch.setattr(eval_command, "EvalOptions", planted)
    monkeypatch.setattr(eval_command, "evaluate", lambda options: seen.append(options) or 0)
    parser = _parser("eval")
    assert "--planted" in parsed(parser) and parsed(parser)["--planted"]["help"] == "a planted flag"
    assert main(["eval", "--task", "t", "--model", "m", "--planted", "5", "--seeds", "1", "2"]) == 0
    (options,) = seen
    assert type(options) is planted and options.planted == 5 and options.seeds == (1, 2) and options.model.model == "m"


def test_a_declared_range_is_refused_at_the_command_line_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["build", "coco", "--coco-root", str(tmp_path), "--out", str(out), "--num-proc", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("clip-cycles build: error: BuildConfig option --num-proc (num_proc): must be ") and "got 0" in err
    assert not out.exists()
    assert main(["compare", "a.jsonl", "b.jsonl", "--n-resamples", "0"]) == 2
    assert "error: CompareOptions option --n-resamples (n_resamples): " in (err := capsys.readouterr().err) and "got 0" in err
    assert main(["eval", "--task", "t", "--model", "m", "--encode-batch-size", "0"]) == 2
    assert "error: ModelOptions option --encode-batch-size (encode_batch_size): " in capsys.readouterr().err
    # A malformed value is still the converter's own argparse sentence.
    with pytest.raises(SystemExit):
        main(["compare", "a", "b", "--seed", "-1"])
    assert "-1 is negative; seeds are 0, 1, 2, ..." in capsys.readouterr().err


def test_a_misspelled_flag_declaration_is_refused_not_ignored() -> None:
    from clip_cycles.commands.derived import add_option_arguments

    class Typo(Options):
        """A field whose help key is misspelled: its help would silently be lost."""

        depth: int = Field(1, ge=1, json_schema_extra={"flag": "--depth", "hepl": "how deep"})

    with pytest.raises(ValueError, match=r"unknown keys \['hepl'\]"):
        add_option_arguments(argparse.ArgumentParser(), Typo)

    class Right(Options):
        depth: int = Field(1, ge=1, json_schema_extra={"flag": "--depth", "help": "how deep"})

    parser = argparse.ArgumentParser()
    add_option_arguments(parser, Right)
    assert parser.parse_args(["--depth", "3"]).depth == 3
