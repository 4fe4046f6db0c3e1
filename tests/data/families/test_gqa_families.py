"""GQA families on hand-made scene graphs (answers known by hand) and on the shapes world."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from clip_cycles.commands.build import configure_parser
from clip_cycles.data.families.gqa import build_gqa_families, load_gqa_index
from clip_cycles.data.families.registry import audit_family_cycles, get_family, list_families
from clip_cycles.data.folder.build import build_gqa_folder


def obj(name, attributes=(), relations=(), box=(0, 0, 10, 10)):
    x, y, w, h = box
    return {
        "name": name,
        "x": x,
        "y": y,
        "w": w,
        "h": h,
        "attributes": list(attributes),
        "relations": [{"name": r, "object": t} for r, t in relations],
    }


def write_root(root: Path, train: dict, val: dict | None = None) -> Path:
    """A GQA root with the given image id -> {object id: object} maps."""
    root.mkdir(parents=True, exist_ok=True)
    for name, images in (("train", train), ("val", val or {})):
        data = {i: {"width": 100, "height": 100, "objects": objects} for i, objects in images.items()}
        (root / f"{name}_sceneGraphs.json").write_text(json.dumps(data), encoding="utf-8")
    return root


def cycles_of(index, family: str, ids, seed: int = 0):
    cycles = get_family("gqa", family).build_cycles(index, ids, np.random.default_rng(seed))
    return cycles


def as_sets(cycles):
    """Each cycle as a set of (image id, caption) matched pairs: orientation-free."""
    return sorted(sorted([(c.image_id_0, c.caption_0), (c.image_id_1, c.caption_1)]) for c in cycles)


def test_registry_lists_the_seven_families_with_predicates():
    names = list_families("gqa")
    assert names == [
        "attribute_color",
        "attribute_material",
        "attribute_size",
        "relation_object",
        "relation_subject",
        "relation_spatial",
        "binding",
    ]
    for name in names:
        assert "EXACTLY ONE" in get_family("gqa", name).predicate


def test_attribute_color_excludes_ambiguous_images(tmp_path):
    index = load_gqa_index(
        write_root(
            tmp_path,
            {
                "1": {"a": obj("car", ["red", "shiny"])},
                "2": {"a": obj("car", ["blue"])},
                "3": {"a": obj("car", ["red"]), "b": obj("car", ["blue"])},  # two cars: ambiguous
                "4": {"a": obj("car", ["red", "white"])},  # two colours on the car: ambiguous
                "5": {"a": obj("car", ["grey"])},  # synonym of gray
                "6": {"a": obj("car", ["red"])},
            },
        )
    )
    assert as_sets(cycles_of(index, "attribute_color", [1, 2, 3, 4])) == [[(1, "a red car"), (2, "a blue car")]]
    # Two red cars and a gray one: one cycle (each image once per group), gray canonicalised.
    got = as_sets(cycles_of(index, "attribute_color", [1, 5, 6]))
    assert len(got) == 1 and (5, "a gray car") in got[0]
    # Same value only: no cycle.
    assert cycles_of(index, "attribute_color", [1, 6]) == []
    family = get_family("gqa", "attribute_color")
    assert family.holds(index, 3, {"object": "car", "type": "color", "value": "blue"})
    assert not family.holds(index, 1, {"object": "car", "type": "color", "value": "blue"})


def test_relation_object_requires_the_swapped_object_to_be_absent(tmp_path):
    index = load_gqa_index(
        write_root(
            tmp_path,
            {
                "1": {"m": obj("man", relations=[("holding", "c")]), "c": obj("cup")},
                "2": {"m": obj("man", relations=[("holding", "p")]), "p": obj("phone")},
                # holds a phone, but a cup is also in the picture: the swap "holding a cup" is not provably false
                "3": {"m": obj("man", relations=[("holding", "p")]), "p": obj("phone"), "c": obj("cup")},
                # two men: the subject is ambiguous
                "4": {"m": obj("man", relations=[("holding", "p")]), "p": obj("phone"), "n": obj("man")},
                # holds a cup and a phone: two object names for one (subject, relation)
                "5": {"m": obj("man", relations=[("holding", "c"), ("holding", "p")]), "c": obj("cup"), "p": obj("phone")},
            },
        )
    )
    assert as_sets(cycles_of(index, "relation_object", [1, 2])) == [[(1, "a man holding a cup"), (2, "a man holding a phone")]]
    for other in (3, 4, 5):
        assert cycles_of(index, "relation_object", [1, other]) == []
    family = get_family("gqa", "relation_object")
    assert family.holds(index, 3, {"subject": "man", "relation": "holding", "object": "phone"})
    assert not family.holds(index, 3, {"subject": "man", "relation": "holding", "object": "cup"})


def test_relation_subject_swaps_the_subject(tmp_path):
    index = load_gqa_index(
        write_root(
            tmp_path,
            {
                "1": {"m": obj("man", relations=[("riding", "h")]), "h": obj("horse")},
                "2": {"w": obj("woman", relations=[("riding", "h")]), "h": obj("horse")},
                "3": {"w": obj("woman", relations=[("riding", "h")]), "h": obj("horse"), "m": obj("man")},
            },
        )
    )
    assert as_sets(cycles_of(index, "relation_subject", [1, 2])) == [[(1, "a man riding a horse"), (2, "a woman riding a horse")]]
    assert cycles_of(index, "relation_subject", [1, 3]) == []


def test_relation_spatial_uses_opposites_and_skips_contradictions(tmp_path):
    left, right = "to the left of", "to the right of"
    index = load_gqa_index(
        write_root(
            tmp_path,
            {
                "1": {"c": obj("cup", relations=[(left, "p")]), "p": obj("plate")},
                "2": {"c": obj("cup", relations=[(right, "p")]), "p": obj("plate")},
                "3": {"c": obj("cup", relations=[(left, "p"), (right, "p")]), "p": obj("plate")},  # contradictory
                "4": {"c": obj("cup", relations=[(right, "p")]), "p": obj("plate"), "q": obj("plate")},  # 2 plates
                "5": {"c": obj("cup", relations=[("near", "p")]), "p": obj("plate")},  # not spatial
            },
        )
    )
    assert as_sets(cycles_of(index, "relation_spatial", [1, 2])) == [
        [(1, "a cup to the left of a plate"), (2, "a cup to the right of a plate")]
    ]
    for other in (3, 4, 5):
        assert cycles_of(index, "relation_spatial", [1, other]) == []
        assert cycles_of(index, "relation_spatial", [2, other]) == []


def test_binding_pairs_exchanged_colours_only(tmp_path):
    index = load_gqa_index(
        write_root(
            tmp_path,
            {
                "1": {"a": obj("cube", ["red"]), "b": obj("ball", ["blue"])},
                "2": {"a": obj("cube", ["blue"]), "b": obj("ball", ["red"])},
                "3": {"a": obj("cube", ["red"]), "b": obj("ball", ["red"])},  # same colour: nothing to bind
                "4": {"a": obj("cube", ["red"]), "b": obj("ball", ["blue"])},  # same binding as 1
                "5": {"a": obj("cube", ["blue"]), "b": obj("ball", ["green"])},  # different value pair
            },
        )
    )
    got = as_sets(cycles_of(index, "binding", [1, 2, 3, 5]))
    assert got == [[(1, "a blue ball and a red cube"), (2, "a red ball and a blue cube")]]
    assert cycles_of(index, "binding", [1, 4, 3, 5]) == []
    # 1, 2, 4: one cycle only, since image 2 is used once per group.
    assert len(cycles_of(index, "binding", [1, 2, 4])) == 1


def test_validity_audit_catches_a_broken_cycle(tmp_path):
    index = load_gqa_index(write_root(tmp_path, {"1": {"a": obj("car", ["red"])}, "2": {"a": obj("car", ["blue"])}}))
    family = get_family("gqa", "attribute_color")
    (cycle,) = cycles_of(index, "attribute_color", [1, 2])
    assert audit_family_cycles(family, index, [cycle])["passed"]
    # Exchange the images: both matched pairs now fail, both swaps now hold.
    broken = type(cycle)(cycle.image_id_1, cycle.image_id_0, cycle.caption_0, cycle.caption_1, cycle.meaning_0, cycle.meaning_1)
    report = audit_family_cycles(family, index, [broken])
    assert not report["passed"]
    assert report["matched_violations"] == 2 and report["swap_violations"] == 2


def test_binding_below_min_cycles_is_unavailable_not_an_error(tmp_path):
    colours = ["red", "blue", "green", "yellow"]
    train = {str(i): {"a": obj("car", [colours[i % 4]])} for i in range(1, 71)}
    # One binding pair in the whole train file.
    train["71"] = {"a": obj("cube", ["red"]), "b": obj("ball", ["blue"])}
    train["72"] = {"a": obj("cube", ["blue"]), "b": obj("ball", ["red"])}
    val = {str(i): {"a": obj("car", [colours[i % 4]])} for i in range(101, 121)}
    root = write_root(tmp_path, train, val)
    _, builds, facts = build_gqa_families(
        root, families=["attribute_color", "binding"], seeds=(0, 1), min_cycles=2, progress=False
    )
    by_name = {b.name: b for b in builds}
    assert by_name["attribute_color"].available
    assert by_name["binding"].available is False
    assert "fewer than 2 cycles" in by_name["binding"].reason and "test seed 0: 0 cycles" in by_name["binding"].reason
    assert by_name["binding"].records == {}
    assert facts["pool_train"] == 72 and facts["pool_test"] == 20
    # Through the one GQA command line, `clip-cycles build gqa` (derived from the source registry).
    parser = argparse.ArgumentParser()
    configure_parser(parser)
    args = parser.parse_args(["gqa", "--gqa-root", str(root), "--out", str(tmp_path / "out"), "--families",
                              "attribute_color", "binding", "--seeds", "0", "--min-cycles", "2"])  # fmt: skip
    assert args.func(args) == 0
    out = tmp_path / "out"
    info = json.loads((out / "build_info.json").read_text())
    assert info["families"]["binding"]["available"] is False
    assert "fewer than 2 cycles" in info["unavailable"]["binding"]
    card = (out / "README.md").read_text()
    assert "**Unavailable for probe experiments**: fewer than 2 cycles" in card and "config_name: binding" not in card
    assert not (out / "data" / "binding").exists() and (out / "data" / "attribute_color" / "seed0" / "test.parquet").is_file()
    # 72 train-pool images: 10 go to validation per seed (fraction 1/7).
    color = by_name["attribute_color"]
    for seed in (0, 1):
        images = {
            split: {i for r in records for i in (r.image_id_0, r.image_id_1)} for split, records in color.records[seed].items()
        }
        assert not images["train"] & images["validation"]
        assert all(i > 100 for i in images["test"])
        assert color.audits[seed]["validation"]["passed"]


def test_shapes_world_builds_every_family_and_passes_audits(shapes_world):
    _, builds, _ = build_gqa_families(shapes_world, seeds=(0,), min_cycles=5, progress=False)
    assert [b.name for b in builds] == list_families("gqa")
    for build in builds:
        assert build.available, (build.name, build.reason)
        for split, report in build.audits[0].items():
            assert report["passed"] and report["matched_violations"] == 0 and report["swap_violations"] == 0
            assert report["image_tv"] == 0 and report["caption_tv"] == 0 and report["balanced"], (build.name, split)


@pytest.fixture(scope="module")
def shapes_world(tmp_path_factory):
    from clip_cycles.data.sources.shapes_world import write_shapes_world

    return write_shapes_world(tmp_path_factory.mktemp("shapes"), n_images=240, seed=3, image_size=64)


def test_shapes_world_folder_loads_audits_and_is_byte_identical(shapes_world, tmp_path):
    import datasets

    first, builds = build_gqa_folder(shapes_world, tmp_path / "a", seeds=(0, 1), min_cycles=5)
    # The second build goes through the builder script of hf_datasets/gqa_cycles (`clip-cycles build gqa`).
    script = Path(__file__).resolve().parents[3] / "hf_datasets" / "gqa_cycles" / "build.py"
    spec = importlib.util.spec_from_file_location("gqa_cycles_build", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    argv = ["--gqa-root", str(shapes_world), "--out", str(tmp_path / "b"), "--seeds", "0", "1", "--min-cycles", "5"]
    assert module.main(argv) == 0
    second = tmp_path / "b"
    files = sorted(p.relative_to(first) for p in first.rglob("*.parquet"))
    assert files and files == sorted(p.relative_to(second) for p in second.rglob("*.parquet"))
    for rel in files:
        assert (first / rel).read_bytes() == (second / rel).read_bytes(), rel
    assert (
        json.loads((first / "build_info.json").read_text())["families"]
        == json.loads((second / "build_info.json").read_text())["families"]
    )

    from clip_cycles.data.folder.audit import audit_folder

    result = audit_folder(first)
    assert result["ok"], result["problems"][:5]
    available = [b for b in builds if b.available]
    cache = str(tmp_path / "hf")  # private: datasets caches by folder name and config
    assert [b.name for b in available] == list_families("gqa")
    for build in available:
        test = datasets.load_dataset(str(first), build.name, split="test", cache_dir=cache)
        assert test.num_rows == build.counts[0]["test"]
        assert set(test["family"]) == {build.name} and set(test["seed"]) == {0}
    seed1 = datasets.load_dataset(str(first), "binding_seed1", split="validation", cache_dir=cache)
    assert seed1.num_rows == {b.name: b for b in builds}["binding"].counts[1]["validation"]
    assert set(seed1["seed"]) == {1}


def test_self_contained_mode_embeds_images_and_names_missing_ones(shapes_world, tmp_path):
    import datasets

    out, builds = build_gqa_folder(
        shapes_world, tmp_path / "sc", families=["binding"], seeds=(0,), min_cycles=5, self_contained=True
    )
    # A private cache: datasets keys its cache by folder name and config, so a shared cache can
    # serve rows of an earlier build of a folder with the same name.
    row = datasets.load_dataset(str(out), "binding", split="validation", cache_dir=str(tmp_path / "hf"))[0]
    assert row["image_0"].size == (64, 64) and row["image_0"] != row["image_1"]
    # An image file that disappears is an error that names it.
    victim = shapes_world / builds[0].records[0]["test"][0].image_0
    saved = victim.read_bytes()
    victim.unlink()
    try:
        with pytest.raises(FileNotFoundError, match=victim.name):
            build_gqa_folder(shapes_world, tmp_path / "sc2", families=["binding"], seeds=(0,), min_cycles=5,
                             self_contained=True)  # fmt: skip
    finally:
        victim.write_bytes(saved)


def test_malformed_scene_graphs_fail_the_build_with_the_file_named(tmp_path):
    root = write_root(tmp_path / "gqa", {"1": {"a": obj("car", ["red"])}}, {"2": {"a": obj("car", ["blue"])}})
    (root / "val_sceneGraphs.json").write_text('{"2": {"width": 100,', encoding="utf-8")
    with pytest.raises(ValueError, match=r"val_sceneGraphs\.json: malformed JSON at line 1, column 21"):
        build_gqa_folder(root, tmp_path / "out")


def test_template_card_states_every_registered_predicate():
    template = (Path(__file__).resolve().parents[3] / "hf_datasets" / "gqa_cycles" / "README.md").read_text()
    for name in list_families("gqa"):
        assert f"Predicate: {get_family('gqa', name).predicate}" in template, name
        assert f"config_name: {name}_seed2" in template


def test_cli_reports_bad_input_with_exit_code_2(tmp_path, capsys):
    from clip_cycles.cli import main

    root = write_root(tmp_path / "gqa", {"1": {"a": obj("car", ["red"], relations=[("near", "zz")])}})
    (root / "train_sceneGraphs.json").write_text('{"1": {"width": 100, "height": 100, "objects": {"a": {"name": "car"}}}}')
    assert main(["build", "gqa", "--gqa-root", str(root), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "train_sceneGraphs.json: image 1, object a: missing field(s) x, y, w, h, attributes, relations" in err


def test_prefixed_gqa_ids_keep_their_files_and_round_trip(tmp_path):
    index = load_gqa_index(write_root(tmp_path, {"n42": {"a": obj("car", ["red"])}, "42": {"a": obj("car", ["blue"])}}))
    (cycle,) = cycles_of(index, "attribute_color", index.ids_of("train"))
    assert {cycle.image_id_0, cycle.image_id_1} == {42, -43}
    assert index.file_name(-43) == "images/n42.jpg" and index.file_name(42) == "images/42.jpg"
    details = json.loads(cycle.details)
    assert {details["gqa_image_id_0"], details["gqa_image_id_1"]} == {"n42", "42"}
