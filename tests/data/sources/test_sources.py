"""The source registry: registration and its checks, detection and fingerprints on crafted roots, what is derived from it."""

from __future__ import annotations

import argparse
import ast
import json
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import pydantic
import pytest
from pydantic import Field

from clip_cycles.cli import main
from clip_cycles.commands import build as build_command
from clip_cycles.commands.derived import OPTIONS_MODEL
from clip_cycles.data.families.registry import family_builder_source
from clip_cycles.data.folder import build
from clip_cycles.data.sources import registry as sources
from clip_cycles.data.sources.registry import (
    Source,
    SourceCard,
    card_for,
    detect_source,
    fingerprint_changes,
    get_source,
    raw_root_fingerprint,
    register_source,
    resolve_hook,
    source_names,
    unregister_source,
)
from clip_cycles.schemas.options import Options
from clip_cycles.tasks.loading import _expected_roots_message, _raw_root
from clip_cycles.tasks.registry import TaskRegistry, TaskSpec

REPO = Path(__file__).resolve().parents[3]
CALLS: list[dict] = []


class ToyOptionsBase(Options):
    """The toy source's build options but its root (whose flag is the registered source's)."""

    out: str = Field(json_schema_extra={"flag": "--out"})
    size: int = Field(3, ge=1, json_schema_extra={"flag": "--size"})


def _toy_run(options: Any) -> int:
    CALLS.append({"root": options.root, "out": options.out, "size": options.size})
    return 0


def _toy_default_root(cache_dir: Path) -> Path:
    root = cache_dir / "toy_world"
    root.mkdir(parents=True, exist_ok=True)
    (root / "toy.json").write_text("{}")
    CALLS.append({"default_root": str(cache_dir)})
    return root


TOY = Source(
    name="toy",
    title="toy world",
    layout="toy.json",
    markers=("toy.json",),
    annotations=("toy.json",),
    image_dirs=("pictures",),
    builders=("coco",),
    card=SourceCard(title="Toy cycle families", license="cc0-1.0", license_text="toy licence", citation="toy"),
    root_flag="--toy-root",
    default_root=_toy_default_root,
)


@pytest.fixture
def toy() -> Iterator[Source]:
    """The toy source registered for one test (and removed after it)."""
    CALLS.clear()
    register_source(TOY)
    # The options model reads the source's root flag, so it is made once the source is registered.
    options = pydantic.create_model("ToyBuildOptions", __base__=ToyOptionsBase, root=(str, build_command.root_field("toy")))
    build_command.register_build_command("toy", build_command.BuildCommand("make the toy world", options, _toy_run))
    try:
        yield TOY
    finally:
        unregister_source("toy")
        build_command.BUILD_COMMANDS.unregister("toy")


def _touch(root: Path, *names: str) -> Path:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"file": name}))
    return root


def _coco_root(root: Path) -> Path:
    return _touch(root, "annotations/instances_val2017.json", "annotations/captions_val2017.json", "val2017/1.jpg")


def _task(source: str) -> TaskSpec:
    return TaskSpec(
        name=f"cycles/{source}_strict_size",
        source=source,
        config="strict_size",
        seeds=(0,),
        split="test",
        metrics=(),
        tie_tolerance=1e-9,
        caption_template="{caption}",
        path=Path("t.yaml"),
    )


# --- registration ---------------------------------------------------------------------------------------


def test_shipped_sources_and_their_builders() -> None:
    assert source_names()[:3] == ("coco", "gqa", "shapes")
    assert sources.builder_names() == ("coco", "gqa")
    assert get_source("shapes").builders == ("coco", "gqa") and not get_source("shapes").is_builder
    assert family_builder_source("strict_size") == "coco" and family_builder_source("binding") == "gqa"
    with pytest.raises(ValueError, match=r"no family builder \(coco, gqa\) registers a family named 'nope'"):
        family_builder_source("nope")


def test_unknown_names_list_the_registered_ones(toy: Source) -> None:
    with pytest.raises(ValueError, match=r"unknown source 'imagenet'; registered: coco, gqa, shapes, toy"):
        get_source("imagenet")
    with pytest.raises(ValueError, match=r"unknown family builder 'shapes'; registered: coco, gqa"):
        sources.get_builder("shapes")
    with pytest.raises(ValueError, match="unknown source"):
        unregister_source("imagenet")


def test_registering_adds_and_unregistering_removes(toy: Source) -> None:
    assert source_names()[-1] == "toy" and get_source("toy") is toy
    with pytest.raises(ValueError, match="source 'toy' is already registered"):
        register_source(replace(TOY, title="another"))
    assert get_source("toy").title == "toy world"  # the first registration stands


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": ""}, "must be a non-empty word"),
        ({"name": "a/b"}, "must be a non-empty word"),
        ({"markers": ()}, "markers and builders must not be empty"),
        ({"builders": ()}, "markers and builders must not be empty"),
        ({"families_module": "clip_cycles.data.families.coco"}, "families_module and build_families go together"),
        ({"build_families": build.build_coco_folder}, "families_module and build_families go together"),
        ({"families_module": "m", "build_families": build.build_coco_folder}, "must feed itself"),
    ],
)
def test_registration_checks_refuse_a_bad_source(change: dict, message: str) -> None:
    bad = replace(TOY, name=change.pop("name", "toy_bad"), **change)
    with pytest.raises(ValueError, match=message):
        register_source(bad)
    assert "toy_bad" not in source_names()
    with pytest.raises(TypeError, match="takes a clip_cycles.data.sources.registry.Source"):
        register_source({"name": "toy_bad"})  # type: ignore[arg-type]


def test_hooks_resolve_callables_and_module_paths() -> None:
    assert resolve_hook(_toy_run) is _toy_run
    assert resolve_hook("clip_cycles.commands.build:run_coco") is build_command.run_coco
    with pytest.raises(ValueError, match=r"source 'x' build 'clip_cycles.data.folder.build' must be a callable or"):
        resolve_hook("clip_cycles.data.folder.build", "source 'x' build")
    with pytest.raises(ValueError, match=r"clip_cycles.data.folder.build has no function 'nope'"):
        resolve_hook("clip_cycles.data.folder.build:nope")


# --- detection, fingerprints, cards --------------------------------------------------------------------


def test_detection_on_crafted_roots(tmp_path: Path, toy: Source) -> None:
    assert detect_source(_coco_root(tmp_path / "coco")) == "coco"
    assert detect_source(_touch(tmp_path / "gqa_val", "val_sceneGraphs.json")) == "gqa"
    assert detect_source(_touch(tmp_path / "gqa_train", "train_sceneGraphs.json")) == "gqa"
    # The shapes world carries both layouts; its own marker wins by priority.
    world = _touch(_coco_root(tmp_path / "world"), "val_sceneGraphs.json", "shapes_world.json")
    assert detect_source(world) == "shapes"
    assert detect_source(_touch(tmp_path / "toy", "toy.json")) == "toy"
    assert detect_source(_touch(tmp_path / "other", "instances_val2017.json", "val2017/1.jpg")) is None
    assert detect_source(tmp_path / "missing") is None


def test_a_higher_priority_source_wins_a_shared_marker(tmp_path: Path) -> None:
    root = _coco_root(tmp_path / "root")
    register_source(replace(TOY, name="toy_coco", markers=("annotations/instances_val2017.json",), priority=5))
    try:
        assert detect_source(root) == "toy_coco"
    finally:
        unregister_source("toy_coco")
    assert detect_source(root) == "coco"


def test_fingerprints_take_each_sources_files(tmp_path: Path) -> None:
    coco = _touch(_coco_root(tmp_path / "coco"), "val_sceneGraphs.json", "notes.txt")
    printed = raw_root_fingerprint("coco", coco)
    assert sorted(printed["annotations"]) == ["annotations/captions_val2017.json", "annotations/instances_val2017.json"]
    assert sorted(printed["images"]) == ["val2017"] and printed["kind"] == "coco"
    gqa = _touch(tmp_path / "gqa", "train_sceneGraphs.json", "val_sceneGraphs.json", "images/1.jpg", "annotations/x.json")
    assert sorted(raw_root_fingerprint("gqa", gqa)["annotations"]) == ["train_sceneGraphs.json", "val_sceneGraphs.json"]
    assert sorted(raw_root_fingerprint("gqa", gqa)["images"]) == ["images"]
    world = _touch(_coco_root(tmp_path / "world"), "val_sceneGraphs.json", "shapes_world.json", "train2017/2.jpg")
    assert sorted(raw_root_fingerprint("shapes", world)["annotations"]) == [
        "annotations/captions_val2017.json",
        "annotations/instances_val2017.json",
        "shapes_world.json",
        "val_sceneGraphs.json",
    ]
    assert sorted(raw_root_fingerprint("shapes", world)["images"]) == ["train2017", "val2017"]
    with pytest.raises(ValueError, match="unknown source 'imagenet'"):
        raw_root_fingerprint("imagenet", world)


def test_a_changed_annotation_changes_the_fingerprint(tmp_path: Path) -> None:
    root = _coco_root(tmp_path / "coco")
    before = raw_root_fingerprint("coco", root)
    (root / "annotations" / "captions_val2017.json").write_text('{"edited": true, "longer": 1}')
    after = raw_root_fingerprint("coco", root)
    assert after != before
    assert fingerprint_changes(before, after) == "annotations/captions_val2017.json changed"
    (root / "val2017" / "2.jpg").write_bytes(b"x")
    assert "val2017/ listing changed" in fingerprint_changes(after, raw_root_fingerprint("coco", root))


def test_the_card_is_the_raw_roots_source(tmp_path: Path, toy: Source) -> None:
    world = _touch(_coco_root(tmp_path / "world"), "shapes_world.json")
    assert card_for("coco", world).license == "cc0-1.0" and card_for("gqa", world) is get_source("shapes").card
    assert card_for("coco", _coco_root(tmp_path / "coco")) is get_source("coco").card
    assert card_for("coco", tmp_path / "moved_away") is get_source("coco").card
    # A root of a source that does not feed the builder keeps the builder's card.
    assert card_for("gqa", _touch(tmp_path / "toy", "toy.json")) is get_source("gqa").card
    assert card_for("coco", tmp_path / "toy") is toy.card


# --- what is derived: the build CLI, task sources, roots of tasks ---------------------------------------


def _build_subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = argparse.ArgumentParser()
    build_command.configure_parser(parser)
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_registered_source_has_a_build_subcommand(toy: Source) -> None:
    commands = _build_subcommands()
    assert list(commands) == list(source_names())
    assert commands["coco"].get_default(OPTIONS_MODEL) is build_command.CocoBuildOptions
    assert commands["gqa"].get_default(OPTIONS_MODEL) is build_command.GqaBuildOptions
    coco = commands["coco"].parse_args(["--coco-root", "r", "--out", "o"])
    assert coco.pool_train == build.DEFAULT_POOL_TRAIN
    gqa = commands["gqa"].parse_args(["--gqa-root", "r", "--out", "o", "--pool-test", "0"])
    assert (gqa.pool_train, gqa.pool_test) == (5600, None)  # 0 = every image
    with pytest.raises(SystemExit):
        commands["gqa"].parse_args(["--gqa-root", "r", "--out", "o", "--pool-train", "-1"])
    with pytest.raises(SystemExit):
        commands["coco"].parse_args(["--out", "o"])  # the root flag comes from the registry, required


@pytest.mark.parametrize("source", ["coco", "gqa"])
def test_the_recorded_rebuild_command_parses_back_to_every_image(source: str, shapes_world: Path, tmp_path: Path) -> None:
    """A build with pools of None (every image) records ``--pool-* 0``, which the build flags read as None."""
    pools = {"coco": {"pool_train": None, "pool_val": None}, "gqa": {"pool_train": None, "pool_test": None}}[source]
    builder = {"coco": build.build_coco_folder, "gqa": build.build_gqa_folder}[source]
    folder, _ = builder(
        shapes_world,
        tmp_path / "out",
        families=["box_left_right" if source == "coco" else "binding"],
        seeds=(0,),
        min_cycles=5,
        allow_empty=True,
        **pools,
    )
    recorded = shlex.split(json.loads((Path(folder) / "build_info.json").read_text())["rebuild_command"])
    assert recorded[:3] == ["clip-cycles", "build", source]
    for flag in pools:
        assert recorded[recorded.index("--" + flag.replace("_", "-")) + 1] == "0"
    parsed = _build_subcommands()[source].parse_args(recorded[3:])
    assert {flag: getattr(parsed, flag) for flag in pools} == pools


def test_a_source_registered_in_a_test_gets_a_build_subcommand(toy: Source, tmp_path: Path) -> None:
    assert "toy" in _build_subcommands()
    assert main(["build", "toy", "--toy-root", str(tmp_path), "--out", "o", "--size", "7"]) == 0
    assert CALLS == [{"root": str(tmp_path), "out": "o", "size": 7}]
    unregister_source("toy")
    try:
        assert "toy" not in _build_subcommands()
    finally:
        register_source(TOY)


def test_task_dataset_path_is_a_registered_source(tmp_path: Path, toy: Source) -> None:
    body = "task: cycles/{name}\ndataset_path: {source}\ndataset_kwargs: {{config: strict_size}}\nmetric_list: [cycle_acc]\n"
    (tmp_path / "cycles").mkdir()
    (tmp_path / "cycles" / "mine.yaml").write_text(body.format(name="mine", source="toy"))
    (tmp_path / "cycles" / "bad.yaml").write_text(body.format(name="bad", source="imagenet"))
    registry = TaskRegistry([tmp_path])
    assert registry.get("cycles/mine").source == "toy"
    with pytest.raises(
        ValueError,
        match=r"bad\.yaml line 2: field 'dataset_path': 'imagenet' is not one of "
        r"\['coco', 'gqa', 'shapes', 'toy'\]",
    ):
        registry.get("cycles/bad")


def test_a_task_without_a_root_gets_its_sources_default_root(tmp_path: Path, toy: Source) -> None:
    kind, root = _raw_root(_task("toy"), None, tmp_path / "cache")
    assert (kind, root) == ("toy", tmp_path / "cache" / "toy_world") and (root / "toy.json").is_file()
    assert CALLS == [{"default_root": str(tmp_path / "cache")}]
    with pytest.raises(ValueError, match="task cycles/coco_strict_size needs its data and no --dataset-root was given") as info:
        _raw_root(_task("coco"), None, tmp_path / "cache")  # coco has no default root
    message = str(info.value)
    # What to pass, with an example: a built folder or a raw root (never "no --dataset_root is neither ...").
    assert "pass a built dataset folder (a folder with build_info.json" in message and " or a raw source root (" in message
    assert message.endswith("e.g. --dataset-root coco_cycles for a built folder or --dataset-root /data/coco for the raw root")
    assert "is neither" not in message
    assert "clip-cycles build coco --coco-root <raw root>" in message
    for name in source_names():  # every registered source's root layout is listed
        assert f"{get_source(name).title}: {get_source(name).layout}" in message


def test_a_root_serves_only_the_tasks_of_its_own_source(tmp_path: Path) -> None:
    # A task's prefix names its raw source: the shapes world (a COCO layout with GQA scene graphs) serves
    # shapes tasks only; a COCO or GQA task given it is refused, naming the shapes task that reads it.
    world = _touch(_coco_root(tmp_path / "world"), "val_sceneGraphs.json", "shapes_world.json")
    gqa = _touch(tmp_path / "gqa", "val_sceneGraphs.json")
    assert _raw_root(_task("shapes"), world, tmp_path) == ("shapes", world)
    assert _raw_root(_task("gqa"), gqa, tmp_path) == ("gqa", gqa)
    for source in ("coco", "gqa"):
        with pytest.raises(ValueError, match=rf"reads cycles from {source.upper()} .* is a raw shapes world root") as info:
            _raw_root(_task(source), world, tmp_path)
        twin = "cycles/shapes_strict_size" if source == "coco" else "cycles/shapes_gqa_strict_size"
        assert str(info.value).endswith(f"the task that reads this family from shapes world is {twin}")
    with pytest.raises(ValueError, match=r"reads cycles from COCO .* is a raw GQA root; no task reads this family from GQA"):
        _raw_root(_task("coco"), gqa, tmp_path)
    with pytest.raises(ValueError, match=r"reads cycles from shapes world .* is a raw GQA root"):
        _raw_root(_task("shapes"), gqa, tmp_path)
    assert "clip-cycles build gqa --gqa-root" in _expected_roots_message(_task("gqa"), gqa)


# --- the COCO matcher reads the shapes vocabulary, not the shapes world ---------------------------------


def test_coco_matcher_does_not_import_the_shapes_world() -> None:
    tree = ast.parse((REPO / "clip_cycles" / "data" / "families" / "coco.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "clip_cycles.data.sources.shape_vocabulary" in imported and "clip_cycles.data.sources.shapes_world" not in imported
    code = "import sys, clip_cycles.data.families.coco; print('clip_cycles.data.sources.shapes_world' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_shapes_synonyms_still_name_their_category() -> None:
    from clip_cycles.data.families.coco import MentionMatcher
    from clip_cycles.data.sources.shape_vocabulary import SHAPE_WORDS

    matcher = MentionMatcher(["circle", "cross", "dog"])
    assert matcher("two discs beside a plus sign and a puppy") == ("circle", "cross", "dog")
    assert SHAPE_WORDS["circle"] == ("circle", "disc")
