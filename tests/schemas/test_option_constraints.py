"""Every option object refuses every value its declaration forbids, in the one sentence shape.

- each :class:`~clip_cycles.schemas.options.Options` subclass in the package (found by
  importing the modules that mention one and walking ``__subclasses__``) is valid with its
  defaults and refuses each value :func:`invalid_values` derives from its fields with
  ``<Class> option [--flag (]field...``; a crafted class whose constraint is not enforced trips it;
- a build given an invalid :class:`BuildConfig` value fails before any file is read or written;
- an explicit ``BuildConfig`` reaches the forked workers (``num_proc=2``) with the family, and
  the folder is byte-identical to ``num_proc=1``;
- no module of ``clip_cycles/data`` keeps a build setting in a module-level switch.
"""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import re
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field, model_validator

import clip_cycles
from clip_cycles.data.families import registry as families
from clip_cycles.data.families.build_config import BuildConfig
from clip_cycles.data.folder import build as build_module
from clip_cycles.data.folder.build import build_coco_folder, build_gqa_folder
from clip_cycles.schemas.options import CheckedOptions, Options, invalid_values

PACKAGE = Path(clip_cycles.__file__).resolve().parent


def _option_classes() -> list[type[Options]]:
    """Every Options subclass, after importing each package module whose source names an option class."""
    for module in pkgutil.walk_packages(clip_cycles.__path__, "clip_cycles."):
        if module.name.endswith("__main__") or module.ispkg:
            continue
        path = PACKAGE.joinpath(*module.name.split(".")[1:]).with_suffix(".py")
        if path.is_file() and re.search(r"Options\b|\bBuildConfig\b", path.read_text(encoding="utf-8")):
            importlib.import_module(module.name)
    found, todo = [], list(Options.__subclasses__())
    while todo:
        cls = todo.pop()
        # The bases in schemas.options itself (CheckedOptions) declare no option.
        if cls.__module__.startswith("clip_cycles.") and cls.__module__ != "clip_cycles.schemas.options" and cls not in found:
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(found, key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


OPTION_CLASSES = _option_classes()


def _example(annotation: Any) -> Any:
    """A valid value for a required field, from its annotation alone (a command's positional or required flag)."""
    if annotation is str:
        return "x"
    if annotation is Any:
        return None
    if typing.get_origin(annotation) is tuple:
        return ("x",) if typing.get_args(annotation)[0] is str else (1,)
    if isinstance(annotation, type):
        return annotation()  # an options dataclass whose fields all have defaults (ModelOptions, SplitInputs)
    return None


def required_examples(cls: type[Options]) -> dict[str, Any]:
    """Example values for the fields ``cls`` requires, so its defaults can be tried with them."""
    return {name: _example(info.annotation) for name, info in cls.model_fields.items() if info.is_required()}


def numeric_fields(cls: type[Options]) -> list[str]:
    """Fields typed int or float (``bool`` excluded): each must declare its range."""
    out = []
    for name, info in cls.model_fields.items():
        args = typing.get_args(info.annotation) or (info.annotation,)
        if any(arg in (int, float) for arg in args):
            out.append(name)
    return out


def constraint_problems(cls: type[Options]) -> list[str]:
    """What is wrong with ``cls``'s declaration: defaults refused, or a forbidden value accepted or badly worded."""
    problems = []
    base = required_examples(cls)
    try:
        cls.make(**base)
    except ValueError as error:
        return [f"{cls.__name__}: the defaults are refused ({error})"]
    for field, values in invalid_values(cls).items():
        flag = cls.flag_of(field)
        shape = re.compile(rf"^{cls.__name__} option " + (rf"{re.escape(flag)} \({field}\b" if flag else rf"{field}\b"))
        for value in values:
            try:
                cls.make(**{**base, field: value})
            except ValueError as error:
                if not shape.match(str(error)):
                    problems.append(f"{cls.__name__}.{field}={value!r}: refused as {str(error)!r}")
            else:
                problems.append(f"{cls.__name__}.{field}={value!r} is accepted")
    return problems


@pytest.mark.parametrize("cls", [c for c in OPTION_CLASSES if issubclass(c, CheckedOptions)], ids=lambda cls: cls.__name__)
def test_a_checked_options_constructor_says_what_make_says(cls: type[Options]) -> None:
    for field, values in invalid_values(cls).items():
        for value in values:
            with pytest.raises(ValueError) as made:
                cls.make(**{field: value})
            with pytest.raises(ValueError) as built:
                cls(**{field: value})
            assert str(built.value) == str(made.value) and str(made.value).startswith(f"{cls.__name__} option ")


def test_the_package_option_classes_are_found() -> None:
    assert BuildConfig in OPTION_CLASSES
    assert {"min_cycles", "num_proc", "validation_fraction", "margin", "size_ratio", "seeds"} <= set(invalid_values(BuildConfig))


@pytest.mark.parametrize("cls", OPTION_CLASSES, ids=lambda cls: cls.__name__)
def test_every_declared_constraint_refuses_its_invalid_values_in_one_shape(cls: type[Options]) -> None:
    # A class of paths and switches has nothing to range-check; a number without a declared range is a defect.
    assert invalid_values(cls) or not numeric_fields(cls), f"{cls.__name__} declares no constraint on {numeric_fields(cls)}"
    assert constraint_problems(cls) == []


class _Clamped(Options):
    """A crafted fault: the field declares >= 1, but a before-validator clamps the value into range."""

    batch_size: int = Field(8, ge=1, json_schema_extra={"flag": "--batch-size"})

    @model_validator(mode="before")
    @classmethod
    def _clamp(cls, values: Any) -> Any:
        return {**values, "batch_size": max(1, values.get("batch_size", 8))}


class _BadDefault(Options):
    """A crafted fault: the default breaks the field's own constraint."""

    epochs: int = Field(0, ge=1)


def test_a_constraint_that_is_not_enforced_or_a_bad_default_is_caught() -> None:
    assert constraint_problems(_Clamped) == ["_Clamped.batch_size=0 is accepted"]
    assert constraint_problems(_BadDefault)[0].startswith("_BadDefault: the defaults are refused")


def test_build_config_sentences_name_flag_and_field() -> None:
    with pytest.raises(ValueError, match=r"^BuildConfig option --min-cycles \(min_cycles\): must be a count >= 1 .*got 0"):
        BuildConfig.make(min_cycles=0)
    with pytest.raises(ValueError, match=r"^BuildConfig option --seeds \(seeds\): repeats a seed: \[1, 1\]$"):
        BuildConfig.make(seeds=[1, 1])
    with pytest.raises(ValueError, match=r"^BuildConfig option --num-proc \(num_proc\): .*got 0"):
        BuildConfig().replace(num_proc=0)
    with pytest.raises(ValueError, match=r"^BuildConfig option --size-ratio \(size_ratio\): .*got inf"):
        BuildConfig.make(size_ratio=float("inf"))
    gqa = BuildConfig.for_source("gqa", min_cycles=3)
    assert (gqa.pool_train, gqa.pool_val, gqa.validation_fraction, gqa.min_cycles) == (5600, 2400, 1 / 7, 3)
    assert (BuildConfig().pool_train, BuildConfig().pool_val, BuildConfig().mode) == (10000, 2744, "reference")
    assert BuildConfig.make(self_contained=True).mode == "self_contained"


@pytest.mark.parametrize("builder", [build_coco_folder, build_gqa_folder], ids=["coco", "gqa"])
def test_an_invalid_build_value_fails_before_anything_is_read_or_written(
    builder: Any, shapes_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_read(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the raw root was read before the options were checked")

    monkeypatch.setattr(build_module, "load_coco_index", no_read)
    monkeypatch.setattr(build_module.gqa_families, "gqa_build_inputs", no_read)
    out = tmp_path / "out"
    tried = 0
    for field, values in invalid_values(BuildConfig).items():
        for value in values:
            with pytest.raises(ValueError, match=rf"^BuildConfig option \S+ \({field}\b"):
                builder(shapes_world, out, **{field: value})
            with pytest.raises(ValueError, match=rf"^BuildConfig option \S+ \({field}\b"):
                builder(shapes_world, out, config=BuildConfig.make(min_cycles=5), **{field: value})
            tried += 1
    assert tried >= 8 and not out.exists() and list(tmp_path.iterdir()) == []


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes().replace(str(folder).encode(), b"<out>")
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_an_explicit_config_reaches_the_forked_workers_and_gives_the_same_bytes(
    shapes_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = tmp_path / "seen.txt"
    original = families.build_family

    def recording(family: Any, *args: Any, **kwargs: Any) -> Any:  # runs where the family is built
        with seen.open("a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} {family.name} {family.config.margin} {family.config.size_ratio}\n")
        return original(family, *args, **kwargs)

    monkeypatch.setattr(families, "build_family", recording)
    names = ("strict_left_right", "strict_size", "object_position")
    config = BuildConfig.make(families=names, seeds=(0,), min_cycles=5, margin=0.05, size_ratio=1.25)
    one, _ = build_coco_folder(shapes_world, tmp_path / "one" / "cycles", config=config)
    lines_one = seen.read_text().splitlines()
    seen.unlink()
    two, _ = build_coco_folder(shapes_world, tmp_path / "two" / "cycles", config=config.replace(num_proc=2))
    lines_two = [line.split() for line in seen.read_text().splitlines()]
    assert {line.split()[0] for line in lines_one} == {str(os.getpid())}
    assert len(lines_two) == 3 and {pid for pid, *_ in lines_two} - {str(os.getpid())}  # built in workers
    assert {(margin, ratio) for _, _, margin, ratio in lines_two} == {("0.05", "1.25")}  # the explicit config, there
    assert _files(one) == _files(two)
    default, _ = build_coco_folder(shapes_world, tmp_path / "default" / "cycles", names, seeds=(0,), min_cycles=5)
    assert _files(default) != _files(one)  # the thresholds change the folder: they were really used


# --- no module-level build switch -------------------------------------------------------------------------

#: No ``global`` statement in clip_cycles/data: the forked workers' task function lives in the one fork
#: pool (clip_cycles.processes), set just before a pool forks and reset after it; not a build setting.
ALLOWED_GLOBALS: set[tuple[str, str, str]] = set()
#: Module-level tables that functions fill but that hold no setting: registrations (families,
#: index loaders, sources) and memos of pure functions of their key (coco_families' JSON and captions).
NOT_SETTINGS = {"FAMILIES", "INDEX_LOADERS", "_REGISTRY", "_JSON", "_CAPTIONS"}
MUTATORS = ("update", "append", "clear", "pop", "setdefault")


def module_switches(name: str, source: str) -> set[tuple[str, str, str]]:
    """``(file, function, name)`` of each ``global`` statement, and of each function that
    assigns into a module-level dict or list (``_GEOMETRY.update(...)``, ``_DEFAULTS[k] = v``)."""
    tree = ast.parse(source)
    module_containers = {
        target.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Dict, ast.List, ast.Set))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    found = set()
    for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for node in ast.walk(function):
            if isinstance(node, ast.Global):
                found.update((name, function.name, g) for g in node.names)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if isinstance(owner, ast.Name) and owner.id in module_containers and node.func.attr in MUTATORS:
                    found.add((name, function.name, owner.id))
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        if target.value.id in module_containers:
                            found.add((name, function.name, target.value.id))
    return found


def test_no_module_level_build_switch_remains_in_data() -> None:
    found = set()
    for path in sorted((PACKAGE / "data").rglob("*.py")):  # every room of data/
        found |= module_switches(path.relative_to(PACKAGE / "data").as_posix(), path.read_text(encoding="utf-8"))
    assert {entry for entry in found if entry[2] not in NOT_SETTINGS} == ALLOWED_GLOBALS


def test_the_switch_finder_trips_on_the_old_switches() -> None:
    old = """
_GEOMETRY = {"margin": 0.1}
_num_proc = 1
_DEFAULTS = {"overwrite": False}

def geometry(margin):
    _GEOMETRY.update(margin=margin)

def num_processes(n):
    global _num_proc
    _num_proc = n

def folder_options(overwrite):
    _DEFAULTS["overwrite"] = overwrite
"""
    assert module_switches("x.py", old) == {
        ("x.py", "geometry", "_GEOMETRY"),
        ("x.py", "num_processes", "_num_proc"),
        ("x.py", "folder_options", "_DEFAULTS"),
    }


class _Unranged(Options):
    """A crafted fault: a numeric option with no declared range."""

    steps: int = 1


def test_a_numeric_option_without_a_range_is_caught() -> None:
    assert invalid_values(_Unranged) == {} and numeric_fields(_Unranged) == ["steps"]
    with pytest.raises(AssertionError, match="declares no constraint on"):
        test_every_declared_constraint_refuses_its_invalid_values_in_one_shape(_Unranged)
