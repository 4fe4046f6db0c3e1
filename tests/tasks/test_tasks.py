"""The task registry: shipped YAMLs, resolution, collections, schema errors, adding a task."""

from __future__ import annotations

from pathlib import Path

import pytest
from task_files import write_task_file

from clip_cycles.benchmark_audit.adapters import ADAPTERS
from clip_cycles.data.families.registry import list_families
from clip_cycles.settings import TASKS_PATH_ENV
from clip_cycles.tasks.registry import GroupSpec, TaskRegistry, TaskSpec, expand_tasks, get_task, shipped_tasks_dir

GOOD = """task: cycles/{name}
dataset_path: shapes
dataset_kwargs: {{config: strict_left_right, seeds: [0, 2]}}
test_split: test
metric_list:
  - {{metric: cycle_acc, aggregation: mean, higher_is_better: true}}
  - text_acc
tie_tolerance: 1.0e-6
doc_to_text: "a photo: {{caption}}"
"""


def test_shipped_tasks_cover_every_registered_family() -> None:
    import clip_cycles.data.families.coco  # noqa: F401  (registers the COCO families)
    import clip_cycles.data.families.gqa  # noqa: F401

    registry = TaskRegistry([shipped_tasks_dir()])
    coco = {f"cycles/coco_{f}" for f in list_families("coco")}
    gqa = {f"cycles/gqa_{f}" for f in list_families("gqa")}
    shapes = {f"cycles/shapes_{f}" for f in list_families("coco")}
    shapes_gqa = {f"cycles/shapes_gqa_{f}" for f in list_families("gqa")}
    attributes = {f"attributes/things_{s}" for s in ("random", "llm", "similarity", "clustering", "supercategory")}
    # Every shipped benchmark format has its audit task.
    formats = sorted(ADAPTERS.names(entry_points=False))
    expected_some = {"winoground", "sugarcrepe", "aro", "comparison_table", "valse", "valse_all", "colorswap"}
    assert len(formats) == 16 and expected_some | {"bivlc", "naturalbench", "vismin"} <= set(formats)
    cycles = {"cycles/winoground", "cycles/bivlc", "cycles/naturalbench", "cycles/vismin"}
    benchmarks = {*cycles, *(f"audit/{f}" for f in formats)}
    assert set(registry.task_names(derived=False)) == coco | gqa | shapes | shapes_gqa | attributes | benchmarks
    assert registry.group_names(derived=False) == [
        "attributes/things_all",
        "cycles/coco_all",
        "cycles/gqa_all",
        "cycles/shapes_all",
        "cycles/shapes_gqa_all",
    ]
    assert {t.name for t in registry.expand(["cycles/coco_all"])} == coco
    assert {t.name for t in registry.expand(["cycles/gqa_all"])} == gqa
    spec = registry.get("cycles/coco_strict_size")
    assert isinstance(spec, TaskSpec)
    assert (spec.source, spec.config, spec.split, spec.seeds) == ("coco", "strict_size", "test", (0, 1, 2))
    assert spec.path == shipped_tasks_dir() / "cycles" / "coco_strict_size.yaml"
    assert spec.tie_tolerance == 1e-9


def test_unknown_task_lists_available_ones() -> None:
    with pytest.raises(ValueError) as info:
        get_task("cycles/no_such_family")
    message = str(info.value)
    assert "cycles/no_such_family" in message
    assert "cycles/coco_strict_size" in message and "cycles/shapes_all" in message


def test_adding_a_task_is_adding_a_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_task_file(tmp_path, "my_family", GOOD.format(name="my_family"))
    write_task_file(tmp_path, "my_group", "group: cycles/my_group\ntask: [cycles/my_family, cycles/shapes_strict_size]\n")
    monkeypatch.setenv(TASKS_PATH_ENV, str(tmp_path))
    spec = get_task("cycles/my_family")
    assert isinstance(spec, TaskSpec)
    assert spec.seeds == (0, 2) and spec.metric_names == ("cycle_acc", "text_acc")
    assert spec.format_caption("a red circle") == "a photo: a red circle"
    assert spec.config_name(2) == "strict_left_right_seed2"
    assert spec.audit_fit == "scored"  # the default: the audit fits on the scored split
    write_task_file(tmp_path, "trained", GOOD.format(name="trained") + "audit_fit: train\n")
    assert get_task("cycles/trained").audit_fit == "train"
    assert [t.name for t in expand_tasks(["cycles/my_group", "cycles/my_family"])] == [
        "cycles/my_family",
        "cycles/shapes_strict_size",
    ]
    assert isinstance(get_task("cycles/my_group"), GroupSpec)


@pytest.mark.parametrize(
    ("replace", "field"),
    [
        (("tie_tolerance: 1.0e-6", "tie_tolerance: -1"), "tie_tolerance"),
        (("tie_tolerance: 1.0e-6", "tie_tolerance: .nan"), "tie_tolerance"),
        (("  - text_acc", "  - recall_at_5"), "metric_list[1].metric"),
        (("dataset_path: shapes", "dataset_path: imagenet"), "dataset_path"),
        (("test_split: test", "test_split: dev"), "test_split"),
        (("seeds: [0, 2]", "seeds: [0, 0]"), "dataset_kwargs.seeds"),
        (('doc_to_text: "a photo: {caption}"', 'doc_to_text: "a photo"'), "doc_to_text"),
        (("test_split: test", "test_split: test\nprompt: x"), "prompt"),
        (("test_split: test", "test_split: test\naudit_fit: validation"), "audit_fit"),
    ],
)
def test_schema_errors_name_file_and_field(tmp_path: Path, replace: tuple[str, str], field: str) -> None:
    path = write_task_file(tmp_path, "bad", GOOD.format(name="bad").replace(*replace))
    with pytest.raises(ValueError) as info:
        TaskRegistry([tmp_path]).get("cycles/bad")
    assert str(path) in str(info.value) and repr(field) in str(info.value)


def test_task_name_must_match_file_location(tmp_path: Path) -> None:
    path = write_task_file(tmp_path, "here", GOOD.format(name="elsewhere"))
    registry = TaskRegistry([tmp_path])
    assert "cycles/here" not in registry.names()  # only this task is unavailable
    with pytest.raises(ValueError, match="cycles/elsewhere") as info:
        registry.get("cycles/here")
    assert str(path) in str(info.value) and "line 1" in str(info.value)
    assert path.exists()


def test_group_naming_unknown_task_is_an_error(tmp_path: Path) -> None:
    write_task_file(tmp_path, "g", "group: cycles/g\ntask: [cycles/missing]\n")
    registry = TaskRegistry([tmp_path])
    assert "cycles/g" not in registry.names()
    with pytest.raises(ValueError, match="cycles/missing"):
        registry.get("cycles/g")


#: The shapes tasks' descriptions written out (builder, then raw source; independent of the mirror code).
HAND_KEPT_DESCRIPTIONS = {
    "cycles/shapes_box_size": "Builder COCO, source shapes world: family `box_size`: exact cycles, zero-shot cosine scores.",
    "cycles/shapes_gqa_binding": "Builder GQA, source shapes world: family `binding`: exact cycles, zero-shot cosine scores.",
}


@pytest.mark.parametrize("name", sorted(HAND_KEPT_DESCRIPTIONS))
def test_shapes_tasks_are_their_coco_and_gqa_twins(name: str) -> None:
    """Each shapes task is its twin's file on the shapes source: only name, source, tag and description differ."""
    registry = TaskRegistry([shipped_tasks_dir()])
    base_name = name.replace("cycles/shapes_gqa_", "cycles/gqa_").replace("cycles/shapes_", "cycles/coco_")
    base, twin = registry.get(base_name), registry.get(name)
    assert isinstance(base, TaskSpec) and isinstance(twin, TaskSpec)
    assert (twin.source, twin.tags, twin.description) == ("shapes", ("cycles", "shapes"), HAND_KEPT_DESCRIPTIONS[name])
    same = ("config", "seeds", "split", "metrics", "tie_tolerance", "caption_template", "path", "output_type")
    assert all(getattr(twin, field) == getattr(base, field) for field in same)
    # the one-file lookup (no other file read) gives the same spec as reading every file
    assert TaskRegistry([shipped_tasks_dir()]).get(name) == twin


def test_a_shapes_yaml_overrides_its_twin_and_a_broken_twin_is_unavailable(tmp_path: Path) -> None:
    own = tmp_path / "own"
    write_task_file(own, "shapes_box_size", GOOD.format(name="shapes_box_size"))
    registry = TaskRegistry([own, shipped_tasks_dir()])
    for lookup in (registry, TaskRegistry([own, shipped_tasks_dir()])):
        spec = lookup.get("cycles/shapes_box_size")
        assert isinstance(spec, TaskSpec) and spec.config == "strict_left_right" and spec.path.parent.parent == own
    broken = tmp_path / "broken"
    write_task_file(broken, "coco_box_size", GOOD.format(name="coco_box_size").replace("seeds: [0, 2]", "seeds: [-1]"))
    registry = TaskRegistry([broken, shipped_tasks_dir()])
    assert "cycles/shapes_box_size" not in registry.names()
    assert registry.unavailable["cycles/shapes_box_size"] == registry.unavailable["cycles/coco_box_size"]
    with pytest.raises(ValueError, match=r"task 'cycles/shapes_box_size' is unavailable: .*coco_box_size\.yaml"):
        TaskRegistry([broken, shipped_tasks_dir()]).get("cycles/shapes_box_size")
