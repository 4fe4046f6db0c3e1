"""One set of model flags for every command that loads a model, parsed into ModelOptions at the edge.

Each command's parser (built exactly as ``clip-cycles COMMAND`` builds it) must give the
same ModelOptions for the canonical spellings and for every old spelling it accepted;
expected values are written out here, not taken from the parser's defaults.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
from pydantic import Field

import clip_cycles
from clip_cycles.cli import COMMANDS
from clip_cycles.commands.derived import add_option_arguments, options_from_namespace
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.encoding.run_context import ModelOptions, RunContext
from clip_cycles.schemas.options import Options

#: Every command that loads a model, with the arguments it needs besides the model flags.
REQUIRED = {
    "eval": ["--task", "t"],
    "encode": ["--task", "t"],
    "audit-benchmark": ["winoground", "--root", "r"],
    "probe": ["--task", "t", "--out", "o"],
    "transfer": ["--task", "t", "--out", "o"],
    "oe": ["--task", "t", "--out", "o"],
    "splits": ["--things-root", "x", "--out", "o"],
}
#: Commands that read tasks, and so take --dataset-root and --data-cache-dir.
WITH_DATA = {"eval", "encode", "probe", "transfer", "oe"}
#: Commands that accepted --seed / --batch-size for the model before the flags were unified.
WITH_ALIASES = {"eval", "encode", "audit-benchmark"}

#: The model flags, canonical spelling, each set to a value other than its default.
CANONICAL = [
    "--model-type",
    "hf",
    "--model",
    "m",
    "--pretrained",
    "p",
    "--cache-dir",
    "c",
    "--no-cache",
    "--model-cache-dir",
    "mc",
    "--device",
    "cpu",
    "--no-amp",
    "--model-seed",
    "3",
    "--encode-batch-size",
    "8",
    "--num-workers",
    "2",
    "--skip-bad-images",
]
DATA = ["--dataset-root", "root", "--data-cache-dir", "data"]
EXPECTED = ModelOptions(
    model_type="hf",
    model="m",
    pretrained="p",
    cache_dir="c",
    use_cache=False,
    model_cache_dir="mc",
    device="cpu",
    amp=False,
    model_seed=3,
    encode_batch_size=8,
    num_workers=2,
    skip_bad_images=True,
)


def parse(command: str, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv`` with the parser ``clip-cycles COMMAND`` uses."""
    parser = argparse.ArgumentParser(prog=f"clip-cycles {command}")
    COMMANDS.get(command)(parser)
    return parser.parse_args([*REQUIRED[command], *argv])


def command_options(args: argparse.Namespace) -> Options:
    """The options object the command's ``run`` gets from ``args`` (the model its parser was derived from)."""
    return options_from_namespace(args._options_model, args)


def model_options(args: argparse.Namespace) -> ModelOptions:
    """The ModelOptions inside a command's options (``splits``: its inputs' model)."""
    options = command_options(args)
    return options.inputs.model if hasattr(options, "inputs") else options.model  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", sorted(REQUIRED))
def test_every_command_takes_the_one_model_flag_set(command: str) -> None:
    data = DATA if command in WITH_DATA else []
    options = model_options(parse(command, [*CANONICAL, *data]))
    expected = EXPECTED.replace(dataset_root="root", data_cache_dir="data") if data else EXPECTED
    assert options == expected
    # Nothing given: the documented defaults (open_clip, seed 0, batches of 64, the cache on).
    if command not in ("eval", "encode"):  # those two require --model
        assert model_options(parse(command, [])) == ModelOptions(
            model_type="open_clip", model=None, model_seed=0, encode_batch_size=64, use_cache=True, amp=True
        )
    if command not in WITH_DATA:  # an audit reads --root, splits --things-root: no task data flags
        with pytest.raises(SystemExit):
            parse(command, ["--dataset-root", "root"])


@pytest.mark.parametrize("command", sorted(WITH_ALIASES))
def test_old_spellings_of_eval_encode_and_audit_parse_to_the_same_options(command: str, capsys) -> None:
    old = parse(command, ["--model", "m", "--seed", "5", "--batch-size", "16"])
    new = parse(command, ["--model", "m", "--model-seed", "5", "--encode-batch-size", "16"])
    assert model_options(old) == model_options(new) == ModelOptions(model="m", model_seed=5, encode_batch_size=16)
    if command == "eval":  # --seed (the model) and --seeds (the cycle seeds) stay apart
        args = parse(command, ["--model", "m", "--seed", "2", "--seeds", "0", "1"])
        assert (model_options(args).model_seed, args.seeds) == (2, [0, 1])


@pytest.mark.parametrize("command", ["probe", "transfer", "oe"])
def test_batch_size_of_the_experiments_stays_the_training_batch_size(command: str, capsys) -> None:
    args = parse(command, ["--model", "m", "--train-batch-size", "128", "--encode-batch-size", "9", "--model-seed", "4"])
    assert args.train_batch_size == 128  # the heads' training batch
    assert model_options(args) == ModelOptions(model="m", encode_batch_size=9, model_seed=4)
    old = parse(command, ["--model", "m", "--batch-size", "128", "--encode-batch-size", "9", "--model-seed", "4"])
    assert vars(old) == vars(args)  # --batch-size: the documented alias of --train-batch-size
    # --seed could mean --seeds (cycle splits) or --model-seed (as in eval): refused with a sentence.
    with pytest.raises(SystemExit):
        parse(command, ["--model", "m", "--seed", "7"])
    assert "--seed is ambiguous here: give --seeds" in capsys.readouterr().err
    assert parse(command, ["--model", "m", "--seeds", "7"]).seeds == [7]


def test_splits_seed_abbreviates_seeds_and_the_split_model_shares_the_model_settings() -> None:
    args = parse(
        "splits",
        [
            "--model",
            "m",
            "--seed",
            "1",
            "--device",
            "cpu",
            "--model-seed",
            "6",
            "--cache-dir",
            "c",
            "--split-model",
            "swin",
            "--split-pretrained",
            "rev",
        ],
    )
    assert args.seeds == [1]
    inputs = command_options(args).inputs  # type: ignore[attr-defined]
    assert inputs.model == ModelOptions(model="m", device="cpu", model_seed=6, cache_dir="c")
    # The --split-model-* flags are the model flags with a prefix: only the model differs.
    assert inputs.split_model == ModelOptions(
        model_type="hf_vision", model="swin", pretrained="rev", device="cpu", model_seed=6, cache_dir="c"
    )
    assert command_options(parse("splits", ["--model", "m"])).inputs.split_model is None  # type: ignore[attr-defined]
    assert command_options(parse("splits", ["--model", "m", "--split-model-type", "timm"])).inputs.split_model is None


class _Second(Options):
    """A model with a second model's flags under a prefix, its other settings from the first."""

    model: ModelOptions = Field(ModelOptions())
    second: ModelOptions | None = Field(
        None,
        json_schema_extra={
            "nested": {"prefix": "second-", "only": ("model", "device"), "default": {"device": "cpu"}, "base": "model"}
        },
    )


def test_nested_model_flags_and_their_guard() -> None:
    parser = argparse.ArgumentParser()
    add_option_arguments(parser, _Second)
    args = parser.parse_args(["--second-model", "x", "--model-seed", "9"])
    assert (args.second_model, args.second_device) == ("x", "cpu")
    assert options_from_namespace(_Second, args).second == ModelOptions(model="x", device="cpu", model_seed=9)

    class Misspelt(Options):
        model: ModelOptions = Field(ModelOptions(), json_schema_extra={"nested": {"only": ("modle",)}})

    with pytest.raises(ValueError, match=r"ModelOptions has no fields \['modle'\]"):
        add_option_arguments(argparse.ArgumentParser(), Misspelt)

    class Twice(Options):
        model: ModelOptions = Field(ModelOptions())
        again: ModelOptions = Field(ModelOptions())

    with pytest.raises(ValueError, match=r"Twice: two flags write \['amp', "):
        add_option_arguments(argparse.ArgumentParser(), Twice)


# --------------------------------------------------------------------------- one ModelSpec, one RunContext


def test_model_spec_and_run_context_come_from_the_options(tmp_path: Path, monkeypatch) -> None:
    options = ModelOptions(
        model_type="hf",
        model="m",
        pretrained="p",
        model_cache_dir="mc",
        device="cpu",
        amp=False,
        model_seed=3,
        encode_batch_size=8,
        num_workers=2,
        skip_bad_images=True,
        cache_dir=tmp_path / "c",
        dataset_root="root",
    )
    assert options.model_spec() == ModelSpec("hf", "m", "p", device="cpu", seed=3, amp=False, model_cache_dir="mc")
    context = RunContext.from_options(options, seeds=[1], language="de")
    assert context == RunContext(
        spec=options.model_spec(),
        dataset_root="root",
        cache_dir=tmp_path / "c",
        data_cache_dir=tmp_path / "c" / "datasets",
        batch_size=8,
        num_workers=2,
        skip_bad_images=True,
        seeds=[1],
        language="de",
    )
    # --no-cache stores no features, but families built from a raw root still go under the cache root.
    off = RunContext.from_options(options.replace(use_cache=False, data_cache_dir=tmp_path / "d"))
    assert (off.cache_dir, off.data_cache_dir) == (None, tmp_path / "d")
    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "env"))
    planted = RunContext.from_options(ModelOptions(model="m", device="cpu"))
    assert (planted.cache_dir, planted.data_cache_dir) == (tmp_path / "env", tmp_path / "env" / "datasets")
    loader = object()
    assert RunContext.from_options(options, loader=loader).spec.loader is loader  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pass --model NAME"):
        ModelOptions(model_type="timm").model_spec()


# --------------------------------------------------------------------------- no Namespace below the edge

#: Functions that may take an argparse.Namespace besides a command's ``run(args) -> int``: the flag converters.
CONVERTERS = {"options_from_namespace", "command_options", "model_options"}
ARGPARSE_NAMESPACE = re.compile(r"(?<![\w.])(argparse\.)?Namespace\b")  # not DerivedNamespace, FeatureNamespace


def _modules() -> list[object]:
    names = [m.name for m in pkgutil.walk_packages(clip_cycles.__path__, "clip_cycles.")]
    return [importlib.import_module(n) for n in names if not n.endswith("__main__")]


def test_only_command_edges_take_a_namespace() -> None:
    takers = []
    for module in _modules():
        for name, func in inspect.getmembers(module, inspect.isfunction):
            if func.__module__ != module.__name__:
                continue
            signature = inspect.signature(func)
            annotations = [str(p.annotation) for p in signature.parameters.values()]
            command = list(signature.parameters) == ["args"] and str(signature.return_annotation) == "int"
            if any(ARGPARSE_NAMESPACE.search(a) for a in annotations) and not command and name not in CONVERTERS:
                takers.append(f"{module.__name__}.{name}")
    assert takers == []


def test_no_module_builds_a_namespace_to_call_a_library_function() -> None:
    root = Path(clip_cycles.__file__).parent
    built = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in ("Namespace", "SimpleNamespace"):
                    built.append(f"{path.relative_to(root)}:{node.lineno}")
    assert built == []
