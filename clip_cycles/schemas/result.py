"""The result record, declared: clip_benchmark's result JSON, which every runner writes.

``{dataset, model, pretrained, task, metrics, language}`` (clip_benchmark's keys; the
``dataset`` is the task name), plus the item-set identity (``split``, ``items_sha256``,
``source``: an object of kind, builder, world parameters and annotation digests, and
``source_line``), the family's facts as they were when it ran (``family``) and the samples file
it wrote (``samples``: path relative to the record, sha256); top-level, the scalars also in the
flat file (so ``clip_benchmark build`` makes each a column), the objects in the detail.
``metrics`` holds the task's metrics and the keys every record shares
(``tie_tolerance``; ``available`` and ``unavailable_reason`` when a task could not run);
other keys are kept, since each runner reports its own.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints, model_validator

from clip_cycles.schemas.build_info import SHA256
from clip_cycles.schemas.declared import Declared, Open, validate
from clip_cycles.schemas.metric_values import _ACCURACY, _COUNT, ACCURACY_NAME, COUNT_NAME, _first_bad_metric


class Metrics(Open):
    """A record's ``metrics``: the task's metrics plus the shared keys below.

    Other keys are kept, but one named like an accuracy or a count is bounded like those
    declared here (:func:`check_metric_values`).
    """

    available: bool = Field(True, description="true or false: false when the task could not run")
    unavailable_reason: str | None = Field(None, min_length=1, description="why the task could not run (with available: false)")
    tie_tolerance: float | None = Field(None, ge=0, allow_inf_nan=False, description="a finite non-negative number")

    @model_validator(mode="after")
    def _named_metrics(self) -> Metrics:
        found = _first_bad_metric(self.model_extra or {}, "metrics")  # the declared keys are typed above
        if found is not None:
            raise ValueError(f"field {found[0]!r} {found[1]}")
        return self


class SourceIdentity(Declared):
    """The structured identity of the world or raw root a result's items came from (what entered ``items_sha256``)."""

    kind: str = Field(min_length=1, description="a non-empty string: the raw source's kind (shapes, coco, gqa)")
    builder: str = Field(min_length=1, description="a non-empty string: the family builder that built the folder")
    world: dict[str, Any] | None = Field(
        None, description="an object of the shapes world's generation parameters (shapes_world.json), or null"
    )
    annotations: dict[str, Annotated[str, StringConstraints(pattern=SHA256)] | None] = Field(
        default_factory=dict, description="an object of annotation file name -> its sha256"
    )


class FamilyFacts(Declared):
    """A family as it was registered when the result was written: what it tests and where it comes from."""

    builder: str = Field(min_length=1, description="a non-empty string: the family builder (coco, gqa)")
    family: str = Field(min_length=1, description="a non-empty string: the registered family name")
    source: str = Field(min_length=1, description="a non-empty string: the raw source of its task")
    predicate: str = Field(description="a string: the family's predicate, in words")
    provenance: str = Field(description="a string: where the family comes from (paper 1, or this project)")
    order: int = Field(ge=0, description="an integer >= 0: coarse -> strict, the builders' order then registration order")


class SamplesReference(Declared):
    """The per-cycle samples file a result wrote (``eval --samples``)."""

    path: str = Field(min_length=1, description="a non-empty string: the samples file, relative to the result file")
    sha256: Annotated[str, StringConstraints(pattern=SHA256)] = Field(description="a sha256 hex digest of the file's bytes")


class ResultRecord(Open):
    """One result JSON (``clip-cycles eval --output``, the clip_benchmark plugin, lmms-eval's bridge)."""

    dataset: str = Field(min_length=1, description="a non-empty string: the task (or clip_benchmark dataset) name")
    model: str = Field(min_length=1, description="a non-empty string: the model name")
    pretrained: str = Field(description="a string: the pretrained tag or weights path (empty for none)")
    task: str = Field(min_length=1, description="a non-empty string: clip_benchmark's task kind")
    metrics: Metrics = Field(description="an object of metric name -> value")
    language: str = Field(min_length=1, description="a non-empty string: the caption language")
    split: str | None = Field(None, min_length=1, description="a non-empty string: the split scored (train, validation, test)")
    items_sha256: Annotated[str, StringConstraints(pattern=SHA256)] | None = Field(
        None, description="a sha256 hex digest (64 lowercase hex digits) of the items scored, or null when nothing was"
    )
    source: SourceIdentity | None = Field(None, description="an object: the world or raw root the items came from")
    source_line: str | None = Field(None, min_length=1, description="a non-empty string: the source, in words")
    family: FamilyFacts | None = Field(None, description="an object: the family's facts when the result was written")
    samples: SamplesReference | None = Field(None, description="an object: the samples file this result wrote")
    backend: str | None = Field(None, min_length=1, description="a non-empty string: the backend that loaded the model")
    weights_sha256: Annotated[str, StringConstraints(pattern=SHA256)] | None = Field(
        None,
        description="a sha256 hex digest of the local weights' file contents and a third-party backend's identity; "
        "absent when a pretrained tag (or nothing: random init) names the weights",
    )


def check_result_record(record: Any, where: str) -> None:
    """Raise ValueError naming ``where`` and the field when ``record`` is not a valid result record."""
    _, problem = validate(ResultRecord, record)
    if problem is not None:
        raise ValueError(f"{where}: result record field {problem[0]!r}: {problem[1]}")


def result_json_schema() -> dict[str, Any]:
    """The JSON Schema of a result record."""
    schema = ResultRecord.model_json_schema()
    # The named kinds of metrics the validator bounds (metric_problem), for other readers of the schema.
    schema["$defs"]["Metrics"]["patternProperties"] = {
        ACCURACY_NAME.pattern: {
            "anyOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "null"}, {"type": "object"}],
            "description": f"{_ACCURACY}, or an object of its summaries (mean, sd, low, high: each {_ACCURACY})",
        },
        COUNT_NAME.pattern: {
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}, {"type": "object"}],
            "description": f"{_COUNT}, or an object of its summaries over seeds",
        },
    }
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "clip_cycles result record", **schema}
