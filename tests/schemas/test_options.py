"""Option objects: constraints declared on fields, one sentence per problem, invalid values derived."""

from __future__ import annotations

import math
from typing import Literal

import pytest
from pydantic import Field, ValidationError

from clip_cycles.schemas.options import Options, invalid_values


class Demo(Options):
    num_proc: int = Field(1, ge=1, json_schema_extra={"flag": "--num-proc"})
    fraction: float = Field(0.2, gt=0.0, lt=1.0, description="a fraction in (0, 1)")
    mode: Literal["reference", "self-contained"] = "reference"
    seeds: tuple[int, ...] = Field((0,), min_length=1)
    free: str = "x"


def test_valid_values_make_a_frozen_object() -> None:
    options = Demo.make(num_proc=2, fraction=0.5, mode="self-contained", seeds=(1, 2))
    assert options.num_proc == 2 and options.seeds == (1, 2)
    with pytest.raises(ValidationError):
        options.num_proc = 3  # type: ignore[misc]
    assert options.replace(num_proc=4).num_proc == 4


def test_problem_names_flag_field_and_value() -> None:
    with pytest.raises(ValueError) as error:
        Demo.make(num_proc=0)
    assert str(error.value).startswith("Demo option --num-proc (num_proc): ")
    assert "0" in str(error.value)
    with pytest.raises(ValueError, match=r"Demo option mode: 'full' is not one of \['reference', 'self-contained'\]"):
        Demo.make(mode="full")
    with pytest.raises(ValueError, match="Demo option nope: unknown key"):
        Demo.make(nope=1)


def test_invalid_values_are_derived_from_the_declaration() -> None:
    bad = invalid_values(Demo)
    assert set(bad) == {"num_proc", "fraction", "mode", "seeds"}  # `free` declares nothing
    assert bad["num_proc"] == [0]
    assert bad["fraction"][0] == 0.0 and bad["fraction"][2] == 1.0
    assert any(isinstance(v, float) and math.isnan(v) for v in bad["fraction"])
    assert bad["seeds"] == [()]


def test_every_derived_invalid_value_is_refused_and_valid_defaults_pass() -> None:
    Demo.make()  # the defaults are valid: the check does not cry wolf
    for field, values in invalid_values(Demo).items():
        for value in values:
            with pytest.raises(ValueError, match=f"Demo option (--[a-z-]+ \\()?{field}"):
                Demo.make(**{field: value})
