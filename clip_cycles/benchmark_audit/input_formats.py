"""The rows of the benchmark formats the adapters read, declared (``clip_cycles.benchmark_audit.adapters``).

One model per row kind: a SugarCrepe item, an ARO Visual Genome item and order test case,
a Winoground block, a comparison-table edge. Keys a model does not declare are kept
(published files carry extra columns). :func:`checked_row` validates one row and raises a
ValueError naming the file, the row and the field, with what was found and what is allowed.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, Field

from clip_cycles.schemas.declared import Open, validate

Row = TypeVar("Row", bound=BaseModel)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError(f"must be a non-empty string, got {value!r}")
    return value


Text = Annotated[str, AfterValidator(_not_blank)]
TEXT = "a non-empty string"


class SugarCrepeItem(Open):
    """One item of a SugarCrepe file (``{id: item}``): an image, its caption and a hard negative."""

    filename: Text = Field(description=f"{TEXT}: the COCO val2017 image file")
    caption: Text = Field(description=f"{TEXT}: the true caption")
    negative_caption: Text = Field(description=f"{TEXT}: the hard negative")


class AroVisualGenomeItem(Open):
    """One item of ARO's VG-Relation or VG-Attribution: an image box, a true and a false caption."""

    image_path: Text = Field(description=f"{TEXT}: the image file under images/")
    bbox_x: float = Field(allow_inf_nan=False, description="a number: the box's left edge")
    bbox_y: float = Field(allow_inf_nan=False, description="a number: the box's top edge")
    bbox_w: float = Field(gt=0, allow_inf_nan=False, description="a positive number: the box's width")
    bbox_h: float = Field(gt=0, allow_inf_nan=False, description="a positive number: the box's height")
    true_caption: Text = Field(description=f"{TEXT}: the true caption")
    false_caption: Text = Field(description=f"{TEXT}: the false caption")


class AroOrderCase(Open):
    """One test case of ARO's COCO-Order or Flickr-Order: an image and its caption options."""

    image: Text = Field(description=f"{TEXT}: the image file")
    caption_options: list[Text] = Field(
        min_length=2, description="a list of the true caption and at least one perturbation (non-empty strings)"
    )


class WinogroundBlock(Open):
    """One Winoground block; ``image_0`` and ``image_1`` are a file name or ``{bytes, path}`` (read by the adapter)."""

    image_0: Any = Field(description="an image file name, or {bytes, path}")
    image_1: Any = Field(description="an image file name, or {bytes, path}")
    caption_0: Text = Field(description=f"{TEXT}: the caption of image_0")
    caption_1: Text = Field(description=f"{TEXT}: the caption of image_1")


class ComparisonEdge(Open):
    """One row of a comparison table: a signed edge (image, caption, weight) of a comparison."""

    image: Text = Field(description=f"{TEXT}: the image file, relative to the table")
    caption: Text = Field(description=f"{TEXT}: the caption")
    # CSV cells are text: the weight is read as a number from "1" or "-0.5" (lax), never from "minus one".
    weight: float = Field(strict=False, allow_inf_nan=False, description="a number, finite: the edge's signed weight")
    comparison_id: Annotated[str | int, AfterValidator(str)] = Field(description="the comparison's id (string or integer)")


def checked_row(model: type[Row], row: Any, path: Any, where: str) -> Row:
    """``row`` validated by ``model``; a ValueError ``"<file>: <where>: field '<name>' <problem>"`` otherwise."""
    parsed, problem = validate(model, row)
    if problem is not None:
        name, message = problem
        if not isinstance(row, dict):
            raise ValueError(f"{path}: {where} must be an object with {', '.join(model.model_fields)}, got {row!r}")
        joined = f" {message}" if message.startswith(("must ", "is ", "has ")) else f": {message}"
        raise ValueError(f"{path}: {where}: field {name!r}{joined}")
    return parsed  # type: ignore[return-value]
