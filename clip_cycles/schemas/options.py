"""Option objects: a command's or a build's settings, with their constraints declared on the fields.

An :class:`Options` subclass is a frozen pydantic model; each field declares its range or
choices (``Field(ge=1)``, ``Literal[...]``) and, where a flag sets it, the flag's spelling
(``Field(json_schema_extra={"flag": "--num-proc"})``). :meth:`Options.make` validates once
and turns the first problem into one sentence of one shape for every option in the project:

    ``--num-proc`` (num_proc): must be >= 1, got 0

:func:`invalid_values` derives, from the declaration alone, a value that breaks each
constrained field (scikit-learn's ``generate_invalid_param_val`` idea), so a test can try
every declared constraint without listing them by hand.
"""

from __future__ import annotations

import math
import typing
from typing import Any

import annotated_types
from pydantic import BaseModel, ConfigDict, ValidationError

from clip_cycles.schemas.declared import first_problem, literal_values


class Options(BaseModel):
    """A frozen set of options; unknown fields refused; validated once, at the edge."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, arbitrary_types_allowed=True)

    @classmethod
    def make(cls, **values: Any) -> typing.Self:
        """Validate ``values`` and return the options; a problem is a ValueError naming the flag or field."""
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            raise ValueError(option_problem(cls, error)) from None

    def replace(self, **changes: Any) -> typing.Self:
        """A copy with ``changes``, validated like :meth:`make`."""
        return type(self).make(**{**self.model_dump(), **changes})

    @classmethod
    def flag_of(cls, name: str) -> str | None:
        """The command-line flag that sets field ``name``, if one is declared."""
        info = cls.model_fields.get(name)
        extra = info.json_schema_extra if info is not None and isinstance(info.json_schema_extra, dict) else {}
        flag = extra.get("flag")
        return str(flag) if flag else None


class CheckedOptions(Options):
    """An :class:`Options` whose constructor validates like :meth:`Options.make` (one sentence per problem),
    for option objects that callers build as ``Settings(field=value)``."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as error:
            raise ValueError(option_problem(type(self), error)) from None

    @classmethod
    def make(cls, **values: Any) -> typing.Self:
        """As the constructor (pydantic runs a custom ``__init__`` inside validation: one wrapping, not two)."""
        return cls(**values)


def option_problem(model: type[Options], error: ValidationError) -> str:
    """One sentence for the first problem: ``--flag (field): what is wrong, got what``."""
    path, message = first_problem(error, model)
    field = path.split(".")[0].split("[")[0]
    flag = model.flag_of(field) if field in model.model_fields else None
    where = f"{flag} ({path})" if flag else path
    return f"{model.__name__} option {where}: {message}"


def constraints(model: type[BaseModel], name: str) -> list[Any]:
    """The annotated-types constraints (Ge, Gt, Le, Lt, MinLen, MaxLen) declared on field ``name``."""
    return [item for item in model.model_fields[name].metadata if isinstance(item, annotated_types.BaseMetadata)]


def invalid_values(model: type[BaseModel]) -> dict[str, list[Any]]:
    """For each constrained field, values the declaration forbids (derived from it, not listed by hand).

    A numeric bound gives the value just past it (an int field: one past; a float field: the bound
    itself for a strict bound, else a step past, and NaN); a Literal gives a string that is none of
    its choices; a minimum length gives a shorter sequence.
    """
    out: dict[str, list[Any]] = {}
    for name, info in model.model_fields.items():
        bad: list[Any] = []
        annotation = info.annotation
        is_int = annotation is int or (int in typing.get_args(annotation) and float not in typing.get_args(annotation))
        for item in constraints(model, name):
            if isinstance(item, annotated_types.Ge):
                bad.append(item.ge - 1 if is_int else item.ge - 1e-3)
            elif isinstance(item, annotated_types.Gt):
                bad.append(item.gt)
            elif isinstance(item, annotated_types.Le):
                bad.append(item.le + 1 if is_int else item.le + 1e-3)
            elif isinstance(item, annotated_types.Lt):
                bad.append(item.lt)
            elif isinstance(item, annotated_types.MinLen) and item.min_length > 0:
                bad.append(())
            if not is_int and isinstance(item, (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt)):
                bad.append(math.nan)
        choices = literal_values(annotation)
        if choices and all(isinstance(choice, str) for choice in choices):
            bad.append("".join(choices) + "-not-a-choice")
        if bad:
            out[name] = bad
    return out
