"""The README's claims about families, thresholds and audits match the code."""

from __future__ import annotations

import re
from pathlib import Path

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE
from clip_cycles.data.families.build_config import DEFAULT_MARGIN, DEFAULT_SIZE_RATIO
from clip_cycles.data.families.gqa import GQA_VALIDATION_FRACTION
from clip_cycles.data.families.registry import DEFAULT_MIN_CYCLES, DEFAULT_VALIDATION_FRACTION, PAPER_FAMILIES, list_families

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _row(name: str) -> list[str]:
    line = next(row for row in README.splitlines() if row.startswith(f"| {name}"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_threshold_table_states_the_code_defaults_and_real_flags():
    assert _row("spatial margin")[1] == f"{DEFAULT_MARGIN:g}" and "--margin" in _row("spatial margin")[2]
    assert _row("size ratio")[1] == f"{DEFAULT_SIZE_RATIO:g}" and "--size-ratio" in _row("size ratio")[2]
    assert _row("minimum cycles")[1] == str(DEFAULT_MIN_CYCLES)
    assert float(_row("tie tolerance")[1]) == DEFAULT_TIE_TOLERANCE
    assert _row("validation fraction")[1] == f"COCO {DEFAULT_VALIDATION_FRACTION:g}, GQA 1/7"
    assert abs(GQA_VALIDATION_FRACTION - 1 / 7) < 1e-15
    import argparse

    from clip_cycles.commands.build import configure_parser

    parser = argparse.ArgumentParser()
    configure_parser(parser)
    coco = parser.parse_args(["coco", "--coco-root", "r", "--out", "o", "--margin", "0.2", "--size-ratio", "2",
                              "--validation-fraction", "0.3"])  # fmt: skip
    assert (coco.margin, coco.size_ratio, coco.validation_fraction) == (0.2, 2.0, 0.3)
    gqa = parser.parse_args(["gqa", "--gqa-root", "r", "--out", "o", "--validation-fraction", "0.3"])
    assert gqa.validation_fraction == 0.3


def test_family_provenance_in_the_readme_matches_the_registry():
    paper = PAPER_FAMILIES["coco"]
    added = [n for n in list_families("coco") if n not in paper]
    assert added == ["box_size", "object_position", "category_count", "supercategory_object"]
    text = README[README.index("**Which families are the paper's.**") : README.index("**Thresholds**")]
    sentence = text[text.index("This project adds") : text.index("(14 COCO families in all)")]
    assert re.findall(r"`(\w+)`", sentence) == added
    for name in paper:
        assert f"`{name}`" in text[: text.index("This project adds")]
    assert "binding" in PAPER_FAMILIES["gqa"] and "not one of" in PAPER_FAMILIES["gqa"]["binding"]


def test_identities_are_not_called_gates():
    assert "0/0/0/0/balanced or the build fails" not in README
    assert "identities of the block design" in README.lower()
