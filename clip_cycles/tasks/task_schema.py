"""The task file format, declared: one pydantic model per ``output_type``, plus the group file.

The registry (:mod:`clip_cycles.tasks.registry`) resolves a file's ``include:`` and then
validates the mapping with :func:`task_model`'s model; the error message (field path,
what was found, what is allowed) comes from the declaration
(:func:`clip_cycles.schemas.declared.first_problem`), and so does the JSON Schema that
``clip-cycles schema task`` prints (:func:`task_json_schema`). What a task type accepts
is read from :data:`OUTPUT_TYPES`: its sources, its metrics, whether it names several
families.

No ``from __future__ import annotations`` here: the per-type models are made in a
function, and pydantic reads their annotations as objects.
"""

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BeforeValidator, Field, TypeAdapter, ValidationInfo, create_model

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE
from clip_cycles.data.sources.registry import source_names
from clip_cycles.schemas.declared import Declared

SPLITS: tuple[str, ...] = ("train", "validation", "test")

#: Metrics a cycle_selection task may request, all computed from the same score blocks.
METRICS: tuple[str, ...] = (
    "cycle_acc",
    "text_acc",
    "image_acc",
    "group_acc",
    "n_cycles",
    "additive_audit",
)
AGGREGATIONS: tuple[str, ...] = ("mean",)

#: ``audit_fit`` values: fit the additive audit's probes on the scored split's cycles
#: (default: zero-shot scoring then reads and encodes nothing else) or on ``train_split``.
AUDIT_FITS: tuple[str, ...] = ("scored", "train")

#: How a concept embedding is made for an attribute task (``dataset_kwargs.embedding``).
CONCEPT_EMBEDDINGS: tuple[str, ...] = ("image", "name", "definition")

#: Settings an attribute task may give in ``experiment_kwargs``.
ATTRIBUTE_EXPERIMENT_KWARGS: tuple[str, ...] = ("solver", "leakage_threshold", "protocol")
#: ``experiment_kwargs.protocol`` of an attribute task: this project's protocol or paper 2's.
ATTRIBUTE_PROTOCOLS: tuple[str, ...] = ("project", "paper2")


@dataclass(frozen=True)
class OutputType:
    """What a task of this ``output_type`` reads and which headline metrics it may name.

    ``sources``: the ``dataset_path`` values it accepts; None means the raw sources
    registered in :mod:`clip_cycles.data.sources.registry` (read when a task is validated, so a
    source registered later is accepted too). ``metrics[0]`` onwards is also the default
    ``metric_list`` of derived tasks; ``multi_family`` tasks name several cycle tasks
    (``dataset_kwargs.tasks``).
    """

    name: str
    sources: tuple[str, ...] | None
    metrics: tuple[str, ...]
    multi_family: bool = False

    def allowed_sources(self) -> tuple[str, ...]:
        """The ``dataset_path`` values a task of this type may give."""
        return source_names() if self.sources is None else self.sources


#: Output types a task may declare; their runners live in :mod:`clip_cycles.evaluation.runners`.
OUTPUT_TYPES: dict[str, OutputType] = {
    t.name: t
    for t in (
        OutputType("cycle_selection", None, METRICS),
        OutputType("cycle_probe", None, ("cycle_acc", "zero_shot_cycle_acc", "n_cycles")),
        OutputType(
            "cycle_transfer",
            None,
            ("pearson", "spearman", "in_family_cycle_acc", "cross_family_cycle_acc", "n_cycles"),
            multi_family=True,
        ),
        OutputType(
            "cycle_oe",
            None,
            (
                "cycle_acc",
                "shortcut_oe_cycle_acc",
                "four_entry_bce_cycle_acc",
                "text_only_oe_val_acc",
                "text_only_cycle_acc",
                "n_cycles",
            ),
        ),
        OutputType("attribute_splits", ("things",), ("f1_selectivity", "cs", "mean_f1", "leakage", "n_attributes_scored")),
        OutputType(
            "benchmark_cycles",
            ("winoground", "bivlc", "naturalbench", "vismin"),
            ("cycle_acc", "text_acc", "image_acc", "group_acc", "n_cycles"),
        ),
        OutputType(
            "benchmark_audit",
            ("benchmark",),
            ("model_acc", "caption_probe_acc", "best_blind_acc", "witness_acc", "cycle_acc", "n_comparisons", "n_cycles"),
        ),
    )
}
DEFAULT_OUTPUT_TYPE = "cycle_selection"

Split = Literal[SPLITS]  # type: ignore[valid-type]
SEEDS_TEXT = "a non-empty list of distinct non-negative integers (the built folder's seeds)"


def _distinct(values: list[Any], what: str) -> list[Any]:
    if len(set(values)) != len(values):
        raise ValueError(f"repeats {what}: {values!r}")
    return values


def _seeds(seeds: list[int]) -> list[int]:
    return _distinct(seeds, "a seed")


def _expected_name(value: str, info: ValidationInfo) -> str:
    """The ``task``/``group`` name must be the one the file's location gives (``context["name"]``)."""
    expected = (info.context or {}).get("name")
    if expected is not None and value != expected:
        raise ValueError(f"is {value!r} but the file location makes it {expected!r}; rename one of them")
    return value


def _one_or_more(value: Any) -> Any:
    """``tag: x`` is short for ``tag: [x]``."""
    return [value] if isinstance(value, str) else value


def _none_is_empty(value: Any) -> Any:
    """``key: null`` (or ``key:`` with nothing after it) means the empty mapping."""
    return {} if value is None else value


def _metric_shorthand(value: Any) -> Any:
    """``metric_list: [cycle_acc]`` is short for ``[{metric: cycle_acc}]``."""
    if isinstance(value, list):
        return [{"metric": entry} if isinstance(entry, str) else entry for entry in value]
    return value


def _check_template(template: str) -> str:
    try:
        formatted = template.format(caption="\x00")
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(f"template {template!r} is invalid: only {{caption}} is available ({error})") from error
    if "\x00" not in formatted:
        raise ValueError(f"template {template!r} must contain {{caption}}")
    return template


def _string_or_list_schema(schema: dict[str, Any]) -> None:
    """JSON Schema of ``tag``: the shorthand string as well as the list."""
    items = schema.pop("items", {"type": "string"})
    schema.pop("type", None)
    schema["anyOf"] = [{"type": "string"}, {"type": "array", "items": items}]


def _mapping_or_null_schema(schema: dict[str, Any]) -> None:
    schema["anyOf"] = [{"type": schema.pop("type", "object")}, {"type": "null"}]


Seeds = Annotated[list[Annotated[int, Field(ge=0)]], AfterValidator(_seeds)]
Tags = Annotated[list[str], BeforeValidator(_one_or_more)]
Settings = Annotated[dict[str, Any], BeforeValidator(_none_is_empty)]
TaskName = Annotated[str, AfterValidator(_expected_name)]


def _seeds_field() -> Any:
    return Field([0, 1, 2], min_length=1, description=SEEDS_TEXT, json_schema_extra={"uniqueItems": True})


def _tags_field() -> Any:
    return Field(default_factory=list, description="a string or a list of strings", json_schema_extra=_string_or_list_schema)


class CycleKwargs(Declared):
    """``dataset_kwargs`` of a single-family cycle task."""

    config: str = Field(min_length=1, description="the family (config) name in the built folder")
    seeds: Seeds = _seeds_field()
    train_split: Split = Field("train", description="the split experiments train on")


def _task_list(tasks: list[str]) -> list[str]:
    if not all(tasks):
        raise ValueError(f"must be a non-empty list of cycle task names, got {tasks!r}")
    return _distinct(tasks, "a task")


class MultiFamilyKwargs(Declared):
    """``dataset_kwargs`` of a task that combines cycle tasks (``cycle_transfer``)."""

    tasks: Annotated[list[str], AfterValidator(_task_list)] = Field(
        min_length=1, description="a non-empty list of distinct cycle task names to combine"
    )
    seeds: Seeds = _seeds_field()
    train_split: Split = Field("train", description="the split experiments train on")


class AttributeSettings(Declared):
    """``experiment_kwargs`` of an attribute task."""

    # None: the protocol's solver (attribute_probes.protocol_solver; this layer is below it).
    solver: str | None = Field(
        None,
        description="the probe solver (clip_cycles.attributes.attribute_probes.PROBE_SOLVERS); "
        "null: the protocol's (project: batched, the L2-penalised probe; paper2: sklearn, paper 2's unpenalised probe)",
    )
    leakage_threshold: float | None = Field(None, description="the leakage threshold; null: the default for the features")
    protocol: Literal[ATTRIBUTE_PROTOCOLS] = Field(  # type: ignore[valid-type]
        "project", description="this project's split protocol or paper 2's"
    )


def _clustering_only(k: int | None, info: ValidationInfo) -> int | None:
    strategy = info.data.get("strategy")
    if k is not None and strategy != "clustering":
        raise ValueError(f"is the number of k-means clusters; strategy {strategy!r} has none")
    return k


FILE_TEXT = "a file name (relative to the dataset root, unless absolute) or null"


class AttributeKwargs(Declared):
    """``dataset_kwargs`` of an attribute task: one split strategy on a THINGS-format root."""

    strategy: str = Field(min_length=1, description="a split strategy name (clip_cycles.attributes.splitters.STRATEGIES)")
    seeds: Seeds = _seeds_field()
    k: Annotated[int | None, AfterValidator(_clustering_only)] = Field(
        None, ge=2, description="an integer >= 2, the number of k-means clusters (strategy clustering only)"
    )
    min_concepts: int = Field(10, ge=1, description="an integer >= 1, the fewest concepts an attribute needs")
    embedding: Literal[CONCEPT_EMBEDDINGS] = Field("image", description="how a concept embedding is made")  # type: ignore[valid-type]
    groups: str | None = Field(None, min_length=1, description=FILE_TEXT)
    pairs: str | None = Field(None, min_length=1, description=FILE_TEXT)
    concept_list: str | None = Field(None, min_length=1, description=FILE_TEXT)
    categories: str | None = Field(None, min_length=1, description=FILE_TEXT)
    split_embeddings: str | None = Field(
        None, min_length=1, description="an npz (concepts, embeddings) the similarity and clustering splits use, or null"
    )
    attributes: str | None = Field(
        None, min_length=1, description="a JSON list of the attribute names to score (paper 2's intersect_features.json), or null"
    )
    concept_sets: str | None = Field(
        None, min_length=1, description="a mcrae++-format file of each attribute's concepts (protocol paper2's CS), or null"
    )
    split_params: Settings = Field(
        default_factory=dict, description="a mapping of splitter arguments", json_schema_extra=_mapping_or_null_schema
    )


class GroupFile(Declared):
    """A collection: a named list of tasks."""

    group: TaskName = Field(min_length=1, description="the collection's name: its file's path under the task folder, no .yaml")
    task: list[str] = Field(min_length=1, description="a non-empty list of task names")
    description: str = Field("", description="one line for listings")


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _metric_entry_model(output: OutputType) -> type[Declared]:
    return create_model(
        f"{_camel(output.name)}Metric",
        __base__=Declared,
        __doc__=f"One entry of a {output.name} task's metric_list.",
        metric=(Literal[output.metrics], Field(description=f"a metric {output.name} reports")),  # type: ignore[valid-type]
        aggregation=(Literal[AGGREGATIONS], Field("mean", description="how seeds are combined")),  # type: ignore[valid-type]
        higher_is_better=(bool, Field(True, description="true or false")),
    )


def _check_source(output: OutputType) -> AfterValidator:
    def check(value: str) -> str:
        allowed = list(output.allowed_sources())
        if value not in allowed:
            raise ValueError(f"{value!r} is not one of {allowed}")
        return value

    return AfterValidator(check)


def _common_fields(output: OutputType) -> dict[str, Any]:
    """``name -> (annotation, field)`` every task type shares."""
    metric = _metric_entry_model(output)
    if output.sources is None:
        source: Any = Annotated[str, _check_source(output)]
        source_text = "a raw source registered in clip_cycles.data.sources (built in: coco, gqa, shapes)"
    else:
        source, source_text = Literal[output.sources], f"the source kind {output.name} reads"  # type: ignore[valid-type]

    def metric_schema(schema: dict[str, Any]) -> None:
        schema["items"] = {"anyOf": [{"type": "string", "enum": list(output.metrics)}, schema["items"]]}

    output_default: Any = output.name if output.name == DEFAULT_OUTPUT_TYPE else ...
    return {
        "task": (TaskName, Field(min_length=1, description="the task's name: its file's path under the task folder, no .yaml")),
        "dataset_path": (source, Field(description=source_text)),
        "output_type": (
            Literal[output.name],  # type: ignore[valid-type]
            Field(output_default, description="what is computed (clip_cycles.tasks.task_schema.OUTPUT_TYPES)"),
        ),
        "metric_list": (
            Annotated[list[metric], BeforeValidator(_metric_shorthand)],  # type: ignore[valid-type]
            Field(
                min_length=1,
                description="a non-empty list of metrics, each a name or {metric, aggregation, higher_is_better}",
                json_schema_extra=metric_schema,
            ),
        ),
        "description": (str, Field("", description="one line for listings")),
        "tag": (Tags, _tags_field()),
    }


def _cycle_task_model(output: OutputType) -> type[Declared]:
    common = _common_fields(output)
    kwargs_type = MultiFamilyKwargs if output.multi_family else CycleKwargs
    needed = "`tasks` (the cycle tasks to combine)" if output.multi_family else "`config` (the family name)"

    def experiment_settings(value: dict[str, Any]) -> dict[str, Any]:
        if value and output.name == DEFAULT_OUTPUT_TYPE:
            raise ValueError(f"{DEFAULT_OUTPUT_TYPE} tasks take no experiment settings")
        if "seeds" in value:
            raise ValueError("`seeds` belong in dataset_kwargs.seeds")
        return value  # setting names are checked by the runner, which knows the settings class

    # Fields in the order their errors are reported (the first one is).
    return create_model(
        f"{_camel(output.name)}Task",
        __base__=Declared,
        __doc__=f"A task file of output_type {output.name}.",
        task=common["task"],
        dataset_path=common["dataset_path"],
        dataset_kwargs=(kwargs_type, Field(description=f"a mapping with at least {needed}")),
        test_split=(Split, Field("test", description="the split that is scored")),
        audit_fit=(Literal[AUDIT_FITS], Field("scored", description="where the additive audit fits its probes")),  # type: ignore[valid-type]
        tie_tolerance=(
            float,
            Field(
                DEFAULT_TIE_TOLERANCE,
                ge=0,
                allow_inf_nan=False,
                description="a finite non-negative number (scores closer than this are a tie)",
            ),
        ),
        doc_to_text=(
            Annotated[str, AfterValidator(_check_template)],
            Field("{caption}", description="a caption template containing {caption}"),
        ),
        output_type=common["output_type"],
        metric_list=common["metric_list"],
        description=common["description"],
        tag=common["tag"],
        experiment_kwargs=(
            Annotated[Settings, AfterValidator(experiment_settings)],
            Field(
                default_factory=dict,
                description="a mapping of the experiment's setting names to values",
                json_schema_extra=_mapping_or_null_schema,
            ),
        ),
        lmms_eval_specific_kwargs=(
            Settings,
            Field(
                default_factory=dict,
                description="the prompt of pair-scoring backends (clip_cycles.encoding.vlm_scores)",
                json_schema_extra=_mapping_or_null_schema,
            ),
        ),
    )


def _attribute_task_model(output: OutputType) -> type[Declared]:
    common = _common_fields(output)
    return create_model(
        f"{_camel(output.name)}Task",
        __base__=Declared,
        __doc__=f"A task file of output_type {output.name}.",
        task=common["task"],
        dataset_path=common["dataset_path"],
        dataset_kwargs=(AttributeKwargs, Field(description="a mapping with at least `strategy` (a split strategy name)")),
        output_type=common["output_type"],
        metric_list=common["metric_list"],
        description=common["description"],
        tag=common["tag"],
        experiment_kwargs=(
            Annotated[AttributeSettings, BeforeValidator(_none_is_empty)],
            Field(default_factory=AttributeSettings, description="the attribute experiment's settings"),
        ),
    )


#: The model of each output type's task file.
TASK_MODELS: dict[str, type[Declared]] = {
    name: (_attribute_task_model if name == "attribute_splits" else _cycle_task_model)(output)
    for name, output in OUTPUT_TYPES.items()
}


def task_model(data: Any) -> type[Declared]:
    """The model a resolved task mapping is validated with: a group's, or its ``output_type``'s."""
    if isinstance(data, dict) and "group" in data:
        return GroupFile
    output_type = data.get("output_type", DEFAULT_OUTPUT_TYPE) if isinstance(data, dict) else DEFAULT_OUTPUT_TYPE
    return TASK_MODELS.get(output_type, TASK_MODELS[DEFAULT_OUTPUT_TYPE]) if isinstance(output_type, str) else GroupFile


def task_json_schema() -> dict[str, Any]:
    """The JSON Schema of a task file (any output type, or a group), ``include:`` allowed.

    A file with ``include:`` gets its required keys from the included files, so the schema
    requires keys only of a file without ``include``; ``clip-cycles`` checks the resolved file.
    """
    models = (GroupFile, *TASK_MODELS.values())
    schema = TypeAdapter(Union[models]).json_schema()  # type: ignore[valid-type]
    include = {
        "description": "a file name, or a list of them, relative to this file's folder, whose keys this file extends",
        "anyOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        ],
    }
    for model in models:
        definition = schema["$defs"][model.__name__]
        definition["properties"]["include"] = include
        required = definition.pop("required", [])
        if model is GroupFile:
            definition["required"] = required
        elif required:
            definition["if"] = {"not": {"required": ["include"]}}
            definition["then"] = {"required": required}
            # Without include, output_type tells the types apart; with one, the key may come from a template.
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "clip_cycles task file",
        "description": "A task YAML (clip_cycles/tasks/task_schema.py): one of the output types below, or a group.",
        **schema,
    }
