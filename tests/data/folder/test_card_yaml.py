"""The dataset card's YAML header: written by a serializer, read back as the mapping it was built from."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from clip_cycles.data.folder import writer as dataset_folder
from clip_cycles.data.folder.build import build_coco_folder
from clip_cycles.data.folder.card_yaml import Quoted, card_header, read_card_header
from clip_cycles.data.sources.registry import SourceCard

#: Values a line-by-line ``f"key: {value}"`` writer turns into other YAML (or into no YAML at all).
AWKWARD = {
    "colon": "Shapes: a world",
    "star": "*alias-looking",
    "newline": "first line\nsecond line",
    "hash": "a # not a comment",
    "bool_word": "yes",
    "null_word": "null",
    "number": "1.5",
    "dash": "- not a list",
    "empty": "",
    "quote": '"quoted" and \\ backslash',
}


def _naive_header(fields: dict[str, str]) -> str:
    """The line-by-line writer the card used to have for plain values (here to show the test can fail)."""
    return "\n".join(["---", *(f"{key}: {value}" for key, value in fields.items()), "---"])


def _naive_reads_back(fields: dict[str, str]) -> bool:
    try:
        return read_card_header(_naive_header(fields) + "\n") == fields
    except (ValueError, yaml.YAMLError):
        return False


@pytest.mark.parametrize("key", sorted(AWKWARD))
def test_awkward_value_round_trips_plain_and_quoted(key: str) -> None:
    value = AWKWARD[key]
    fields = {"license": "cc0-1.0", "pretty_name": value, "dataset_info": [{"description": Quoted(value)}]}
    assert read_card_header(card_header(fields) + "\n\nbody\n") == {
        "license": "cc0-1.0",
        "pretty_name": value,
        "dataset_info": [{"description": value}],
    }
    # the writer this replaces breaks on this value, so the check above has something to catch
    assert not _naive_reads_back({"pretty_name": value})


def test_quoted_prose_stays_on_one_double_quoted_line() -> None:
    text = "x " * 200 + "\n\nend"
    header = card_header({"citation": Quoted(text)})
    assert header.split("\n") == ["---", 'citation: "' + "x " * 200 + '\\n\\nend"', "---"]


def test_header_layout_is_the_cards() -> None:
    """Block style, lists at their key's indentation, keys in the mapping's order (not sorted)."""
    files = [{"split": "test", "path": "data/a.parquet"}]
    fields = {"license": "cc0-1.0", "configs": [{"config_name": "a", "data_files": files}]}
    assert card_header(fields) == (
        "---\nlicense: cc0-1.0\nconfigs:\n- config_name: a\n  data_files:\n  - split: test\n    path: data/a.parquet\n---"
    )


def test_read_card_header_refuses_a_card_without_one() -> None:
    with pytest.raises(ValueError, match="must open with a YAML header"):
        read_card_header("# title\n")
    with pytest.raises(ValueError, match="must hold a mapping"):
        read_card_header("---\n- a list\n---\n")


@pytest.mark.parametrize("self_contained", [False, True])
def test_built_card_header_is_the_mapping_it_was_built_from(
    shapes_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, self_contained: bool
) -> None:
    """A real build's card, with a title and citation that need quoting, reads back as ``card_fields`` made it."""
    awkward = SourceCard(title="Shapes: *a world", license="cc0-1.0", license_text="CC0", citation="@misc{x,\n title: y}")
    monkeypatch.setattr(dataset_folder, "card_for", lambda builder, root: awkward)
    made: list[dict] = []
    card_fields = dataset_folder.card_fields
    monkeypatch.setattr(dataset_folder, "card_fields", lambda *args: made.append(card_fields(*args)) or made[-1])
    folder, _ = build_coco_folder(
        shapes_world, tmp_path / "out", families=["coarse_object", "box_size"], seeds=(0, 1), min_cycles=40,
        self_contained=self_contained,
    )  # fmt: skip
    header = read_card_header((folder / "README.md").read_text(encoding="utf-8"))
    assert len(made) == 1 and header == made[0]
    assert header["pretty_name"] == awkward.title
    assert header["dataset_info"][0]["citation"].startswith(awkward.citation + "\n\n")
    # every available split's file named in the header exists; the short ones are listed as unavailable
    for config in header["configs"]:
        for entry in config["data_files"]:
            paths = [entry["path"]] if isinstance(entry["path"], str) else entry["path"][:1]
            assert all((folder / p).is_file() for p in paths)
    for entry in header.get("unavailable_splits", []):
        assert (folder / entry["path"]).is_file() and entry["cycles"] < 40
