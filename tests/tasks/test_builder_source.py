"""Builder and source named once (issue 36): a task's prefix names the RAW SOURCE its cycles come from.

`cycles/coco_<family>` reads COCO annotations, `cycles/shapes_<family>` the shapes world (both with the COCO
builder). So a raw shapes world and the folder `build coco` makes from it serve the shapes tasks and refuse
the COCO ones with a sentence naming the shapes task; labels say "builder X, source Y"; the README says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clip_cycles.data.folder.reader import BuiltFolder
from clip_cycles.data.sources.registry import provenance_label
from clip_cycles.tasks.loading import _check_source, resolve_dataset_roots
from clip_cycles.tasks.registry import TaskRegistry, TaskSpec, source_twins

REPO = Path(__file__).resolve().parents[2]


def _task(name: str) -> TaskSpec:
    spec = TaskRegistry.default().get(name)
    assert isinstance(spec, TaskSpec)
    return spec


def test_source_twins_pair_each_family_across_raw_sources() -> None:
    assert source_twins("cycles/coco_strict_size") == {"coco": "cycles/coco_strict_size", "shapes": "cycles/shapes_strict_size"}
    assert source_twins("cycles/shapes_strict_size") == source_twins("cycles/coco_strict_size")
    assert source_twins("cycles/shapes_gqa_binding") == {"gqa": "cycles/gqa_binding", "shapes": "cycles/shapes_gqa_binding"}
    assert source_twins("cycles/winoground") == {}


def test_a_raw_shapes_root_refuses_coco_tasks_naming_the_shapes_task(shapes_world: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as info:
        resolve_dataset_roots([_task("cycles/coco_strict_size")], shapes_world, tmp_path / "cache")
    message = str(info.value)
    assert message.startswith("task cycles/coco_strict_size reads cycles from COCO (a task's prefix names its raw source)")
    assert f"{shapes_world} is a raw shapes world root" in message
    assert message.endswith("the task that reads this family from shapes world is cycles/shapes_strict_size")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("build_info.json"))  # nothing built


def test_a_folder_built_by_coco_from_the_shapes_world_serves_the_shapes_tasks(shapes_cycles: Path, tmp_path: Path) -> None:
    shapes = _task("cycles/shapes_strict_size")
    folders = resolve_dataset_roots([shapes], shapes_cycles, tmp_path / "cache")
    assert folders[shapes.name].root == shapes_cycles
    assert (folders[shapes.name].builder, folders[shapes.name].raw_source) == ("coco", "shapes")
    with pytest.raises(ValueError) as info:
        resolve_dataset_roots([_task("cycles/coco_strict_size")], shapes_cycles, tmp_path / "cache")
    message = str(info.value)
    assert "reads cycles from COCO" in message
    assert f"{shapes_cycles / 'build_info.json'} holds builder COCO, source shapes world cycles" in message
    assert message.endswith("the task that reads this family from shapes world is cycles/shapes_strict_size")
    assert "source 'coco'" not in message  # the old self-contradicting wording


def test_the_raw_source_is_read_from_build_info_not_the_raw_root(tmp_path: Path) -> None:
    # A folder whose raw root moved away: its recorded fingerprint still says the cycles came from the shapes world.
    info = {"source": "coco", "source_root": str(tmp_path / "gone"), "source_fingerprint": {"kind": "shapes"}}
    folder = BuiltFolder(tmp_path, info)
    assert folder.raw_source == "shapes"
    _check_source(_task("cycles/shapes_strict_size"), folder)  # accepted
    with pytest.raises(ValueError, match="holds builder COCO, source shapes world cycles"):
        _check_source(_task("cycles/coco_strict_size"), folder)
    # A folder from before the fingerprint was recorded, its root gone: the builder's own source.
    old = BuiltFolder(tmp_path, {"source": "coco", "source_root": str(tmp_path / "gone")})
    assert old.raw_source == "coco"
    _check_source(_task("cycles/coco_strict_size"), old)


def test_labels_say_builder_then_source() -> None:
    assert provenance_label("coco", "shapes") == "builder COCO, source shapes world"
    assert provenance_label("gqa", "gqa") == "builder GQA, source GQA"
    page = (REPO / "clip_cycles" / "evaluation" / "page.py").read_text(encoding="utf-8")
    assert "builder.upper()} builder, {info.source}" not in page and "provenance_label(info.builder, info.source)" in page


def test_the_readme_states_the_rule() -> None:
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert re.search(r"the prefix after `cycles/` names the raw source", readme)
    assert "`clip-cycles build coco --coco-root <shapes world>` is read by `cycles/shapes_<family>`" in readme
