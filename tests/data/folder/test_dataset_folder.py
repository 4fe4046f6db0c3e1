"""Dataset folders: byte-identical Parquet, the card, self-contained mode, unavailable families.

``clip-cycles audit`` is tested in test_folder_audit.py.
"""

from __future__ import annotations

import json

import pytest

from clip_cycles.cli import main
from clip_cycles.data.folder.build import build_coco_folder

FAMILIES = ["strict_size", "category_count", "text_neighbor"]


def parquet_bytes(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.parquet"))}


def test_same_inputs_and_seed_give_byte_identical_parquet(shapes_world, tmp_path):
    a, _ = build_coco_folder(shapes_world, tmp_path / "a" / "cycles", FAMILIES, seeds=[0, 1], min_cycles=5)
    b, _ = build_coco_folder(shapes_world, tmp_path / "b" / "cycles", FAMILIES, seeds=[0, 1], min_cycles=5)
    first = parquet_bytes(a)
    assert len(first) == len(FAMILIES) * 2 * 3
    assert first == parquet_bytes(b)
    assert (a / "README.md").read_text().replace(str(a), "") == (b / "README.md").read_text().replace(str(b), "")
    # A different seed set changes the seed-1 files and keeps seed 0's.
    c, _ = build_coco_folder(shapes_world, tmp_path / "c" / "cycles", FAMILIES, seeds=[0, 2], min_cycles=5)
    third = parquet_bytes(c)
    assert all(third[k] == first[k] for k in first if "/seed0/" in k)
    assert not any(k.endswith(".parquet") and "/seed1/" in k for k in third)


def test_card_states_predicates_counts_audits_licence_and_rebuild(shapes_cycles):
    card = (shapes_cycles / "README.md").read_text()
    info = json.loads((shapes_cycles / "build_info.json").read_text())
    header = card.split("---")[1]
    assert "license: cc0-1.0" in header
    for name, entry in info["families"].items():
        for seed in (0, 1, 2):
            config = name if seed == 0 else f"{name}_seed{seed}"
            assert f"- config_name: {config}\n" in header
            assert f"path: data/{name}/seed{seed}/test.parquet" in header
        assert entry["predicate"] in card
        n = entry["counts"]["1"]["validation"]
        # Gates (matched / swap violations) and identities (TV, balance) in separate columns.
        assert f"| 1 | validation | {n} | 0 / 0 | 0 / 0 / balanced |" in card
        assert f"Provenance: {entry['provenance']}." in card
        assert entry["available_splits"] == ["train", "validation", "test"]
    assert "Identities of the block design (recorded, not gates)" in card
    assert "| spatial margin | 0.1 | `clip-cycles build coco --margin` (default 0.1) |" in card
    assert "| minimum cycles | 5 |" in card and "| tie tolerance | - | `tie_tolerance` in the task YAML" in card
    assert info["families"]["strict_left_right"]["provenance"] == "paper 1: strict left/right"
    assert info["families"]["category_count"]["provenance"] == "added by this project"
    assert "clip-cycles build coco --coco-root" in card and "## Citation" in card and "Can the Parts Fool the Test?" in card
    assert set(info) >= {"source", "source_root", "mode", "families", "unavailable", "skipped"}
    assert info["source"] == "coco" and info["mode"] == "reference"


def test_unavailable_family_is_recorded_not_built(shapes_world, tmp_path):
    out, builds = build_coco_folder(shapes_world, tmp_path / "u", ["strict_size", "coarse_object"], seeds=[0],
                                    min_cycles=40)  # fmt: skip
    info = json.loads((out / "build_info.json").read_text())
    assert set(info["unavailable"]) == {"strict_size"}  # strict_size is short in some split; coarse_object is not
    assert "fewer than 40 cycles" in info["unavailable"]["strict_size"]
    counts = info["families"]["strict_size"]["counts"]["0"]
    # The minimum-cycle rule per split: the splits with >= 40 cycles stay usable for zero-shot scoring.
    long_enough = [s for s in ("train", "validation", "test") if counts[s] >= 40]
    assert info["families"]["strict_size"]["available_splits"] == long_enough != ["train", "validation", "test"]
    assert (out / "data" / "strict_size").exists() == bool(long_enough)
    card = (out / "README.md").read_text()
    assert "**Unavailable for probe experiments**: fewer than 40 cycles" in card
    assert main(["audit", str(out)]) == 0


def test_self_contained_mode_embeds_images(shapes_world, tmp_path):
    import datasets

    out, _ = build_coco_folder(shapes_world, tmp_path / "sc", ["object_position"], seeds=[0], min_cycles=5,
                               self_contained=True)  # fmt: skip
    test = datasets.load_dataset(str(out), "object_position", split="test", cache_dir=str(tmp_path / "cache"))
    row = test[0]
    assert row["image_0"].size == (64, 64)
    assert (shapes_world / "val2017" / f"{row['image_id_0']:012d}.jpg").is_file()
    again, _ = build_coco_folder(shapes_world, tmp_path / "sc2", ["object_position"], seeds=[0], min_cycles=5,
                                 self_contained=True)  # fmt: skip
    assert parquet_bytes(out) == parquet_bytes(again)
    assert main(["audit", str(out)]) == 0


@pytest.mark.parametrize("bad", [["--min-cycles", "0"]])
def test_build_rejects_bad_options(shapes_world, tmp_path, bad, capsys):
    assert main(["build", "coco", "--coco-root", str(shapes_world), "--out", str(tmp_path / "x"), *bad]) == 2
    assert "BuildConfig option --min-cycles (min_cycles): must be a count >= 1" in capsys.readouterr().err
