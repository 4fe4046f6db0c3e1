"""Parsers derived from the options models: each flag written once, on its field.

A command's flags are the fields of its :class:`~clip_cycles.schemas.options.Options` model
(``HfArgumentParser``'s idea). A field is a flag when its ``json_schema_extra`` names one:

- ``flag``: ``"--num-proc"`` (an optional flag) or ``"FOLDER"`` (a positional, that metavar);
- ``help``, ``metavar``, ``nargs``, ``action`` (``"append"``), ``aliases`` (older spellings),
  ``type`` (a converter of :data:`ARGUMENT_TYPES` by name, whose sentence argparse prints),
  ``choices`` (names of a registry or table where the field is not a ``Literal``),
  ``group`` (the ``--help`` section the flag is listed in).

The rest is read from the field: its default; ``required`` when it has none; a ``Literal``'s
values as ``choices``; a bool as a switch (``store_true``; ``store_false`` for a ``--no-...`` flag
on a field that defaults to True); ``tuple[X, ...]`` as ``nargs="+"``; ``int`` and ``float`` as
converters. Ranges stay on the field: argparse only converts, and :meth:`Options.make` refuses an
out-of-range value with the one sentence every option gives.

A field holding another options model (``model: ModelOptions``) contributes that model's flags;
its ``json_schema_extra["nested"]`` says how (:class:`Nested`): a ``prefix``, ``only``/``skip``
fields, older spellings on or off (``aliases``), fields made ``required``, and per-field
``help``/``default``/``flag``/``type`` changes. :func:`options_from_namespace` builds the model
back from the parsed namespace, nested models first, with no field listed by hand.
"""

from __future__ import annotations

import argparse
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence, TypeVar

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from clip_cycles.commands.flags import finite_float, pool_size, seed_argument
from clip_cycles.schemas.options import Options

OptionsT = TypeVar("OptionsT", bound=Options)

#: Converters a field may name in ``json_schema_extra["type"]``; each gives its own sentence on a bad value.
ARGUMENT_TYPES: dict[str, Callable[[str], Any]] = {
    "seed": seed_argument,
    "finite": finite_float,
    "pool_size": pool_size,
    "path": Path,
}

#: The field ``json_schema_extra`` keys that describe its flag (anything else there is not the parser's).
FLAG_KEYS = ("flag", "help", "metavar", "nargs", "action", "aliases", "type", "group", "choices", "nested")


class RefusedFlag(argparse.Action):
    """A spelling that is refused with a sentence (no field: it sets nothing); ``help`` is suppressed."""

    def __init__(self, option_strings: Sequence[str], dest: str, sentence: str = "", **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs="*", help=argparse.SUPPRESS, default=argparse.SUPPRESS)
        self.sentence = sentence

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: str | None = None) -> None:
        parser.error(self.sentence)


@dataclass(frozen=True)
class Nested:
    """How a field holding an options model adds that model's flags (its ``json_schema_extra["nested"]``)."""

    prefix: str = ""
    only: tuple[str, ...] | None = None
    skip: tuple[str, ...] = ()
    aliases: bool = False
    required: tuple[str, ...] = ()
    help: Mapping[str, str] = field(default_factory=dict)
    default: Mapping[str, Any] = field(default_factory=dict)
    flag: Mapping[str, str] = field(default_factory=dict)
    type: Mapping[str, str] = field(default_factory=dict)
    group: str | None = None
    #: A sibling field holding the same model: fields without a flag here take its values (``--split-model``).
    base: str | None = None
    #: For an ``X | None`` field: None unless this field of it is set (truthy).
    present_if: str | None = None

    @classmethod
    def of(cls, info: FieldInfo) -> Nested:
        values = _extra(info).get("nested") or {}
        unknown = sorted(set(values) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown nested flag settings {unknown}")
        return cls(**{k: tuple(v) if k in ("only", "skip", "required") else v for k, v in values.items()})


@dataclass(frozen=True)
class FlagSpec:
    """One argparse argument derived from one field: where the value goes and how argparse reads it."""

    #: Field names from the command's model down to the field (``("model", "model_seed")``).
    path: tuple[str, ...]
    dest: str
    #: Option strings (``("--model-seed", "--seed")``); empty for a positional.
    names: tuple[str, ...]
    kwargs: Mapping[str, Any]
    group: str | None = None


def _extra(info: FieldInfo) -> dict[str, Any]:
    """A field's flag declaration; a key outside :data:`FLAG_KEYS` (a typo such as ``hepl``) is refused, never ignored."""
    extra = dict(info.json_schema_extra) if isinstance(info.json_schema_extra, dict) else {}
    unknown = sorted(set(extra) - set(FLAG_KEYS))
    if unknown:
        raise ValueError(f"a flag declaration holds unknown keys {unknown} (field {info.title or info.description!r}); "
                         f"the keys are {', '.join(FLAG_KEYS)}")  # fmt: skip
    return extra


def _strip_none(annotation: Any) -> Any:
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def nested_model(info: FieldInfo) -> type[Options] | None:
    """The options model a field holds (``ModelOptions``, ``ModelOptions | None``), else None."""
    inner = _strip_none(info.annotation)
    return inner if isinstance(inner, type) and issubclass(inner, Options) else None


def _choices(annotation: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(annotation) is Literal:
        return typing.get_args(annotation)
    return None


def _element(annotation: Any) -> tuple[Any, bool]:
    """``(element type, is a sequence)`` of ``tuple[X, ...]``; else the annotation itself."""
    if typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        return _strip_none(typing.get_args(args[0])[0] if typing.get_origin(args[0]) is typing.Annotated else args[0]), True
    return annotation, False


def _default(info: FieldInfo) -> Any:
    if info.default is not PydanticUndefined:
        return info.default
    if info.default_factory is not None:
        return info.default_factory()  # type: ignore[call-arg]
    return PydanticUndefined


def _argument(info: FieldInfo, flag: str, extra: Mapping[str, Any], default: Any, required: bool) -> dict[str, Any]:
    """The argparse keywords of a field's flag (see the module docstring for what is read where)."""
    annotation = _strip_none(info.annotation)
    element, sequence = _element(annotation)
    kwargs: dict[str, Any] = {}
    positional = not flag.startswith("-")
    if annotation is bool:
        kwargs["action"] = "store_false" if default is True and flag.startswith("--no-") else "store_true"
    else:
        choices = _choices(element) or (tuple(extra["choices"]) if extra.get("choices") else None)
        converter = extra.get("type")
        if converter is not None:
            kwargs["type"] = ARGUMENT_TYPES[converter]
        elif element in (int, float):
            kwargs["type"] = element
        elif element is Path:
            kwargs["type"] = Path
        if choices is not None:
            kwargs["choices"] = choices
        if extra.get("action"):
            kwargs["action"] = extra["action"]
        elif extra.get("nargs"):
            kwargs["nargs"] = extra["nargs"]
        elif sequence:
            kwargs["nargs"] = "+"
        if extra.get("metavar"):
            kwargs["metavar"] = extra["metavar"]
        elif positional and choices is None:
            kwargs["metavar"] = flag
    if default is not PydanticUndefined:
        # argparse appends to its default: a list, never a shared tuple
        kwargs["default"] = list(default) if kwargs.get("action") == "append" else default
    elif not positional:
        kwargs["required"] = True
    if required and not positional:
        kwargs["required"] = True
    kwargs["help"] = extra.get("help")
    return kwargs


def flag_specs(model: type[Options], path: tuple[str, ...] = (), nested: Nested = Nested()) -> Iterator[FlagSpec]:
    """The arguments of ``model``'s flagged fields, nested models' flags in their field's place."""
    known = set(model.model_fields)
    listed = set(nested.only or ()) | set(nested.skip) | set(nested.required)
    listed |= set(nested.help) | set(nested.default) | set(nested.flag) | set(nested.type)
    if listed - known:
        raise ValueError(f"{model.__name__} has no fields {sorted(listed - known)}; known: {sorted(known)}")
    for name, info in model.model_fields.items():
        if (nested.only is not None and name not in nested.only) or name in nested.skip:
            continue
        extra = _extra(info)
        inner = nested_model(info)
        if inner is not None and "flag" not in extra:
            yield from flag_specs(inner, (*path, name), Nested.of(info))
            continue
        if "flag" not in extra:
            continue
        extra = {**extra, **({"type": nested.type[name]} if name in nested.type else {})}
        flag = nested.flag.get(name, str(extra["flag"]))
        if name in nested.help:
            extra["help"] = nested.help[name]
        renamed = name in nested.flag
        prefix = nested.prefix
        if flag.startswith("-"):
            names = ("--" + prefix + flag.removeprefix("--"),)
            if nested.aliases or not path:
                names += tuple("--" + prefix + alias.removeprefix("--") for alias in extra.get("aliases", ()))
            dest = (prefix + (flag.removeprefix("--") if renamed else name)).replace("-", "_")
        else:
            names, dest = (), name
        default = nested.default[name] if name in nested.default else _default(info)
        kwargs = _argument(info, flag, extra, default, name in nested.required)
        yield FlagSpec((*path, name), dest, names, kwargs, extra.get("group") or nested.group)


def add_option_arguments(parser: Any, model: type[Options]) -> list[FlagSpec]:
    """Add ``model``'s flags to ``parser`` (each in its ``--help`` group); returns what was added."""
    specs = list(flag_specs(model))
    dests = [spec.dest for spec in specs]
    repeated = sorted({dest for dest in dests if dests.count(dest) > 1})
    if repeated:
        raise ValueError(f"{model.__name__}: two flags write {repeated}; give one a prefix or another flag")
    groups: dict[str, Any] = {}
    for spec in specs:
        target = parser
        if spec.group:
            if spec.group not in groups:
                groups[spec.group] = parser.add_argument_group(spec.group)
            target = groups[spec.group]
        if spec.names:
            target.add_argument(*spec.names, dest=spec.dest, **spec.kwargs)
        else:
            target.add_argument(spec.dest, **spec.kwargs)
    return specs


def configure(parser: argparse.ArgumentParser, model: type[Options], run: Callable[[Any], int | None]) -> None:
    """A command's parser from its options model: the flags, and ``func`` building the options then calling ``run``."""
    add_option_arguments(parser, model)
    parser.set_defaults(func=RunWithOptions(model, run), **{OPTIONS_MODEL: model})


@dataclass(frozen=True)
class RunWithOptions:
    """A parser's ``func``: the options built from the namespace, then the command's ``run`` (equal when both are)."""

    model: type[Options]
    run: Callable[[Any], int | None]

    def __call__(self, args: argparse.Namespace) -> int | None:
        return self.run(options_from_namespace(self.model, args))


#: The parser default that names the options model a parser was derived from (tests and tools read it).
OPTIONS_MODEL = "_options_model"


def options_from_namespace(model: type[OptionsT], namespace: argparse.Namespace) -> OptionsT:
    """``model`` from a namespace its flags were parsed into (nested models first; fields without a flag keep
    their defaults). An out-of-range value is the one :meth:`Options.make` sentence."""
    return _build(model, vars(namespace), (), Nested())  # type: ignore[return-value]


def _build(model: type[Options], values: Mapping[str, Any], path: tuple[str, ...], nested: Nested, base: Any = None) -> Any:
    by_path = {spec.path: spec for spec in flag_specs(model, path, nested)}
    given: dict[str, Any] = {}
    built: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if (nested.only is not None and name not in nested.only) or name in nested.skip:
            continue
        inner = nested_model(info)
        if inner is not None and "flag" not in _extra(info):
            inner_nested = Nested.of(info)
            inner_base = built.get(inner_nested.base) if inner_nested.base else None
            value = _build(inner, values, (*path, name), inner_nested, inner_base)
            if inner_nested.present_if and not getattr(value, inner_nested.present_if):
                value = None
            built[name] = given[name] = value
            continue
        spec = by_path.get((*path, name))
        if spec is not None and spec.dest in values:
            given[name] = values[spec.dest]
    if base is not None:
        return base.replace(**given)
    return model.make(**given)
