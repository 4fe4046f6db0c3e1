"""The figures README.md, the model card and docs/demo_output.md quote come from a fresh run of the shipped model.

The test reruns the demo's zero-shot stage (the 1,000-image demo world, seeds 0, 1, 2, the
shipped cycles-tiny weights on the CPU) and its attribute splits, then compares every quoted
figure with what :func:`clip_cycles.evaluation.demo.docs_figures` gives: the README's table,
the model card's ``metrics``, and the zero-shot column and attribute-split line of
docs/demo_output.md. The comparison itself is tested on edited copies, so it can fail.
The probe, transfer and OE cells of docs/demo_output.md need the whole demo (minutes) and are
not rerun here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from clip_cycles.evaluation.demo import (
    DemoSettings,
    attribute_splits,
    demo_context,
    docs_figures,
    docs_figures_table,
    prepare_world,
    zero_shot,
)

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
CARD = REPO / "clip_cycles" / "encoding" / "weights" / "cycles-tiny-shapes.json"
DEMO_OUTPUT = REPO / "docs" / "demo_output.md"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cache = tmp_path_factory.mktemp("docs_figures_cache")
    settings = DemoSettings()
    context = demo_context(prepare_world(cache, settings.world_images), cache, settings.seeds)
    results = {"zero_shot": zero_shot(context), "attributes": attribute_splits(context, settings)}
    return {"results": results, "figures": docs_figures(results)}


def _pm(mean: float, sd: float) -> str:
    return f"{mean:.3f}±{sd:.3f}"


def disagreements(results: dict[str, Any], figures: dict[str, Any], readme: str, card: dict, demo_output: str) -> list[str]:
    """Every quoted figure that differs from the fresh run, one line each (empty: the documents agree)."""
    problems = []
    table = docs_figures_table(figures)
    if table not in readme:
        problems.append(f"README.md: the quoted table is not the fresh one:\n{table}")
    card_families = card["metrics"]["families"]
    for name, f in figures["zero_shot"].items():
        quoted = card_families.get(f"cycles/{name}")
        if quoted is None:
            problems.append(f"model card: no figure for cycles/{name}")
            continue
        for key in ("cycle_acc", "cycle_acc_sd"):
            if f"{quoted[key]:.3f}" != f"{f[key]:.3f}":
                problems.append(f"model card: cycles/{name} {key} {quoted[key]} (fresh {f[key]})")
        if quoted["n_cycles"] != f["n_cycles"] or quoted["additive_audit_passed"] is not f["additive_audit_passed"]:
            problems.append(f"model card: cycles/{name} cycles/audit {quoted} (fresh {f})")
    if sorted(card_families) != sorted(f"cycles/{n}" for n in figures["zero_shot"]):
        problems.append(f"model card: families {sorted(card_families)} are not the quoted ones")
    zero = results["zero_shot"]
    rows = {line.split()[0]: line.split() for line in demo_output.splitlines() if line.startswith("shapes_")}
    for name, m in zero["families"].items():
        row = rows.get(name)
        if row is None or row[1] != _pm(m["cycle_acc"], m["cycle_acc_sd"]):
            problems.append(
                f"docs/demo_output.md: {name} zero-shot {row and row[1]} (fresh {_pm(m['cycle_acc'], m['cycle_acc_sd'])})"
            )
    extra = sorted(set(rows) - set(zero["families"]) - set(zero["unavailable"]))
    if extra:
        problems.append(f"docs/demo_output.md: families {extra} are not in the run")
    line = next((x for x in demo_output.splitlines() if x.startswith("attribute splits")), "")
    for name, s in results["attributes"]["strategies"].items():
        cs = _pm(s["cs"]["mean"], s["cs"]["sd"]) if s["cs"] else "n/a"
        expected = f"{name} {_pm(s['f1_selectivity']['mean'], s['f1_selectivity']['sd'])} / {cs}"
        if expected not in line:
            problems.append(f"docs/demo_output.md: attribute split {expected!r} not in {line!r}")
    return problems


def _documents() -> tuple[str, dict, str]:
    return (
        README.read_text(encoding="utf-8"),
        json.loads(CARD.read_text(encoding="utf-8")),
        DEMO_OUTPUT.read_text(encoding="utf-8"),
    )


def test_the_documents_quote_the_fresh_run(fresh: dict[str, Any]) -> None:
    figures = fresh["figures"]
    assert all("cycle_acc" in f for f in figures["zero_shot"].values()), figures  # every quoted family scored
    readme, card, demo_output = _documents()
    problems = disagreements(fresh["results"], figures, readme, card, demo_output)
    assert not problems, "\n".join(problems)


def test_an_edited_figure_is_caught(fresh: dict[str, Any]) -> None:
    readme, card, demo_output = _documents()
    results, figures = fresh["results"], fresh["figures"]
    strict = figures["zero_shot"]["shapes_strict_left_right"]
    table = docs_figures_table(figures)
    row = next(x for x in table.splitlines() if x.startswith("| strict_left_right |"))
    quoted = f"{strict['cycle_acc']:.3f} ± {strict['cycle_acc_sd']:.3f}"
    for edit in (
        row.replace(quoted, f"{strict['cycle_acc'] + 0.01:.3f} ± {strict['cycle_acc_sd']:.3f}"),
        row.replace(f"| {strict['n_cycles']} |", f"| {strict['n_cycles'] + 1} |"),
    ):
        assert edit != row
        edited = readme.replace(row, edit)
        assert edited != readme and disagreements(results, figures, edited, card, demo_output)
    bad_card = json.loads(json.dumps(card))
    bad_card["metrics"]["families"]["cycles/shapes_strict_size"]["cycle_acc"] += 0.002
    assert disagreements(results, figures, readme, bad_card, demo_output)
    line = next(x for x in demo_output.splitlines() if x.startswith("shapes_strict_size"))
    number = line.split()[1]
    bumped = re.sub(r"^(\d\.\d\d)(\d)", lambda m: m.group(1) + str((int(m.group(2)) + 1) % 10), number)
    assert bumped != number
    assert disagreements(results, figures, readme, card, demo_output.replace(line, line.replace(number, bumped)))
    supercategory = results["attributes"]["strategies"]["supercategory"]["f1_selectivity"]["mean"]
    old = f"supercategory {supercategory:.3f}"
    assert old in demo_output
    assert disagreements(results, figures, readme, card, demo_output.replace(old, f"supercategory {supercategory + 10:.3f}"))
