"""The samples line, declared: one scored cycle as ``clip-cycles eval --samples`` writes it (JSON Lines).

A line names its cycle (``task``, ``seed``, ``split``, ``cycle_id``), its two images (keys
relative to ``image_root``) and captions as scored, the 2 x 2 block of scores (row = image,
column = caption), ``delta`` and the CycleAcc ``credit`` (1, 0.5 or 0), and binds itself to the
result it belongs to: the result's ``items_sha256`` and the model's ``weights_sha256`` (null
when a pretrained tag, or nothing, names the weights). Writers build every line through
:class:`SampleLine`; readers (``compare``, ``page``) parse every line with it, so a credit
of 5, an infinite score or a list as a seed is one sentence naming the file, line and field.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator

from clip_cycles.schemas.build_info import SHA256
from clip_cycles.schemas.declared import Declared, validate

#: The values a cycle's credit takes: both orders right, a tie within the tolerance, wrong.
CREDITS: tuple[float, ...] = (0.0, 0.5, 1.0)

_Sha = Annotated[str, StringConstraints(pattern=SHA256)]
_Score = Annotated[float, Field(allow_inf_nan=False, description="a finite number (a cosine score)")]


class SampleLine(Declared):
    """One line of a samples file: a scored cycle, its scores and the result it belongs to."""

    task: str = Field(min_length=1, description="a non-empty string: the task name (cycles/<family>)")
    seed: int = Field(description="an integer: the build seed the cycle comes from")
    split: str = Field(min_length=1, description="a non-empty string: the split scored")
    cycle_id: str = Field(min_length=1, description="a non-empty string: the cycle's id in its built folder")
    image_0: str = Field(min_length=1, description="a non-empty string: the first image's key (path under image_root)")
    image_1: str = Field(min_length=1, description="a non-empty string: the second image's key (path under image_root)")
    caption_0: str = Field(description="a string: the caption that matches image_0, as scored")
    caption_1: str = Field(description="a string: the caption that matches image_1, as scored")
    s11: _Score
    s12: _Score
    s21: _Score
    s22: _Score
    delta: float = Field(allow_inf_nan=False, description="a finite number: (s11 + s22) - (s12 + s21)")
    credit: float = Field(description="0, 0.5 or 1: the cycle's CycleAcc credit")
    items_sha256: _Sha | None = Field(
        None, description="a sha256 hex digest (64 lowercase hex digits): the items_sha256 of the result this line belongs to"
    )
    weights_sha256: _Sha | None = Field(
        None, description="a sha256 hex digest of the weights scored, or null when a pretrained tag (or nothing) names them"
    )
    image_root: str | None = Field(
        None, min_length=1, description="a non-empty string: the folder the image keys are relative to, or null"
    )

    @field_validator("credit")
    @classmethod
    def _credit(cls, value: float) -> float:
        if value not in CREDITS:
            raise ValueError(f"field 'credit' is {value!r}; a cycle's credit is 0, 0.5 or 1")
        return value


def sample_line(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` checked against :class:`SampleLine` and returned as a plain dict (ValueError naming the field)."""
    line, problem = validate(SampleLine, values)
    if problem is not None:
        raise ValueError(f"samples line field {problem[0]!r}: {problem[1]}")
    assert line is not None
    return line.model_dump()


def samples_json_schema() -> dict[str, Any]:
    """The JSON Schema of one samples line."""
    schema = SampleLine.model_json_schema()
    schema["properties"]["credit"]["enum"] = list(CREDITS)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "clip_cycles samples line", **schema}
