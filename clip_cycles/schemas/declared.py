"""The base of every declared format and the one place pydantic errors become sentences.

A format is a :class:`Declared` model: unknown keys refused (or, for files other
parts of the project extend, kept: :class:`Open`), no type coercion (``"3"`` is not
3, ``true`` is not 1), and a ``description`` on each field saying what it allows.
:func:`first_problem` turns a :class:`pydantic.ValidationError` into ``(field path,
message)``: the path as the user writes it (``metric_list[1].metric``,
``families.a.counts.0``), what was found and what is allowed, taken from the
declaration (the field's description, a Literal's values, the model's keys).
"""

from __future__ import annotations

import typing
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo


class Declared(BaseModel):
    """A closed format: unknown keys are errors, values are taken as they are typed."""

    # defer_build: a model's validator is built when it first validates, not when a module imports it.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True, defer_build=True)


class Open(BaseModel):
    """A format whose writers may add keys (``build_info.json``, result records): unknown keys are kept."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True, populate_by_name=True, defer_build=True)


def field_path(loc: tuple[int | str, ...]) -> str:
    """``("metric_list", 1, "metric")`` -> ``"metric_list[1].metric"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model class inside an annotation (``X``, ``X | None``, ``Annotated[X, ...]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _container_in(annotation: Any) -> tuple[Any, Any] | None:
    """``(origin, item type)`` of the list or dict inside an annotation (dict: the value type), if any."""
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        args = typing.get_args(annotation)
        return origin, args[0] if args else Any
    if origin is dict:
        args = typing.get_args(annotation)
        return origin, args[1] if len(args) == 2 else Any
    for arg in typing.get_args(annotation):
        found = _container_in(arg)
        if found is not None:
            return found
    return None


def _walk(model: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[FieldInfo | None, Any]:
    """The declared field nearest to ``loc`` and the annotation at ``loc`` (None past an undeclared key)."""
    annotation: Any = model
    field: FieldInfo | None = None
    for part in loc:
        container = _container_in(annotation)
        current = _model_in(annotation) if container is None else None
        if isinstance(part, str) and current is not None:
            by_alias = {(info.alias or name): info for name, info in current.model_fields.items()}
            if part not in by_alias:
                return field, None
            field = by_alias[part]
            annotation = field.annotation
        elif container is not None:
            annotation = container[1]
        else:
            return field, None
    return field, annotation


def literal_values(annotation: Any) -> list[Any]:
    """The values of every ``Literal`` inside an annotation (``Literal['a'] | None`` -> ``['a']``)."""
    if typing.get_origin(annotation) is Literal:
        return list(typing.get_args(annotation))
    values: list[Any] = []
    for arg in typing.get_args(annotation):
        values.extend(literal_values(arg))
    return values


def allowed_keys(model: type[BaseModel]) -> list[str]:
    """The keys a model declares, as they are written in the file."""
    return sorted(info.alias or name for name, info in model.model_fields.items())


def describe(model: type[BaseModel], loc: tuple[int | str, ...], error: Mapping[str, Any]) -> str:
    """What went wrong at ``loc``: what was found and what the declaration allows."""
    kind = error["type"]
    found = error.get("input")
    field, _ = _walk(model, loc)
    what = field.description if field is not None and field.description else None
    if kind in ("value_error", "assertion_error"):
        return str(error.get("ctx", {}).get("error", error["msg"]))
    if kind == "extra_forbidden":
        parent = _model_in(_walk(model, loc[:-1])[1])
        return f"unknown key (allowed: {', '.join(allowed_keys(parent))})" if parent is not None else "unknown key"
    if kind == "missing":
        return f"is missing; must be {what}" if what else "is missing"
    if kind == "literal_error":
        values = literal_values(field.annotation) if field is not None else []
        if values:
            return f"{found!r} is not one of {values}"
        return f"{found!r} is not one of {error.get('ctx', {}).get('expected', '?')}"
    detail = error["msg"]
    detail = detail[0].lower() + detail[1:]
    if what:
        return f"must be {what}, got {found!r} ({detail})"
    return f"{detail}, got {found!r}"


def first_problem(error: ValidationError, model: type[BaseModel]) -> tuple[str, str]:
    """``(field path, message)`` of the first error: an unknown key, else the first field in declaration order.

    An error in a dict key (pydantic's ``[key]`` location) is reported at the dict, naming the key.
    """
    # An unknown key first: it is usually a typo of a key that is then reported missing.
    details = sorted(error.errors(include_url=False), key=lambda d: d["type"] != "extra_forbidden")
    first = details[0]
    loc = tuple(first["loc"])
    more = f" (and {len(details) - 1} more problem{'s' if len(details) > 2 else ''})" if len(details) > 1 else ""
    if loc and loc[-1] == "[key]":
        return field_path(loc[:-2]), f"has key {loc[-2]!r}, which is not allowed: {first['msg']}{more}"
    return field_path(loc), describe(model, loc, first) + more


def validate(
    model: type[BaseModel], data: Any, context: dict[str, Any] | None = None
) -> tuple[BaseModel | None, tuple[str, str] | None]:
    """``(instance, None)`` when ``data`` is valid, else ``(None, (field path, message))``."""
    try:
        return model.model_validate(data, context=context), None
    except ValidationError as error:
        return None, first_problem(error, model)
