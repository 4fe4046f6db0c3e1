"""The family page's figures and experiment sections, checked on hand-built inputs without a browser.

The rank-sweep chart and the transfer heatmap are geometry: every coordinate here is worked out in the test
from the chart's declared frame (its margins, cell size and scale step) by arithmetic, and every label and
shade from the input values. The sweep, transfer and build sections are read back against the records the
test writes: which models and build folders enter, and which number lands in which row and column. The keys
checked are the ones ``page_templates/`` reads (under ``StrictUndefined`` a renamed key fails the page).
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from clip_cycles.evaluation.page import _ENV, _builds, _nice_ticks, _sweeps, _transfers, heatmap, line_chart
from clip_cycles.evaluation.page_data import FamilyInfo, PageData

# The line chart's declared frame: the SVG's size and the plot area inside it.
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 340, 64, 560, 30, 280
# The heatmap's declared cell side and scale step.
CELL, STEP = 44, 26
SWEEP_LABEL = "Test CycleAcc of the low-rank probe against its rank"
TRANSFER_LABEL = "Mean transfer CycleAcc of a probe trained on one family, tested on another"


def _macros() -> Any:
    return _ENV.get_template("_macros.html").module


# --------------------------------------------------------------------------- ticks


def test_nice_ticks_are_the_tenths_from_zero_to_one() -> None:
    assert _nice_ticks() == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]


def test_nice_ticks_of_another_count_split_the_unit_evenly() -> None:
    assert _nice_ticks(4) == [0.0, 0.25, 0.5, 0.75, 1.0]


# --------------------------------------------------------------------------- line chart


def test_line_chart_places_every_point_on_a_log2_axis() -> None:
    # ranks 1, 2, 4, 16: log2 0..4, so each doubling is a quarter of the 496 px plot width.
    chart = line_chart([1, 2, 4, 16], [0.5, None, 0.75, 1.0], "title", "rank", "acc")
    plot_w, plot_h = RIGHT - LEFT, BOTTOM - TOP
    assert (plot_w, plot_h) == (496, 250)
    xs = {1: LEFT + 0 * plot_w / 4, 2: LEFT + 1 * plot_w / 4, 4: LEFT + 2 * plot_w / 4, 16: LEFT + 4 * plot_w / 4}
    assert xs == {1: 64.0, 2: 188.0, 4: 312.0, 16: 560.0}
    ys = {0.5: BOTTOM - 0.5 * plot_h, 0.75: BOTTOM - 0.75 * plot_h, 1.0: BOTTOM - plot_h}
    assert ys == {0.5: 155.0, 0.75: 92.5, 1.0: 30.0}
    # The rank without a value has a tick but no dot.
    assert chart["dots"] == [{"x": "64.0", "y": "155.0"}, {"x": "312.0", "y": "92.5"}, {"x": "560.0", "y": "30.0"}]
    assert chart["points"] == "64.0,155.0 312.0,92.5 560.0,30.0"
    assert chart["xticks"] == [
        {"x": "64.0", "text": "1"},
        {"x": "188.0", "text": "2"},
        {"x": "312.0", "text": "4"},
        {"x": "560.0", "text": "16"},
    ]


def test_line_chart_frame_labels_and_chance_line() -> None:
    chart = line_chart([8, 32], [0.25, 0.5], "the title", "the x label", "the y label")
    assert {k: chart[k] for k in ("label", "xlabel", "ylabel")} == {
        "label": "the title",
        "xlabel": "the x label",
        "ylabel": "the y label",
    }
    frame = {k: chart[k] for k in ("width", "height", "left", "right", "top", "bottom")}
    assert frame == {"width": WIDTH, "height": HEIGHT, "left": LEFT, "right": RIGHT, "top": TOP, "bottom": BOTTOM}
    # Chance (0.5) is halfway up the plot area; the page prints it with one decimal.
    assert str(chart["chance"]) == "155.0"
    # Not starting at rank 1: log2 8 = 3 is the left edge, log2 32 = 5 the right one.
    assert chart["points"] == "64.0,217.5 560.0,155.0"
    keys = "label xlabel ylabel width height left right top bottom chance points dots xticks yticks"
    assert set(chart) == set(keys.split())


def test_line_chart_y_ticks_every_tenth() -> None:
    chart = line_chart([1, 2], [0.1, 0.9], "t", "x", "y")
    expected = [{"y": f"{BOTTOM - k * (BOTTOM - TOP) / 10:.1f}", "text": f"0.{k}" if k < 10 else "1.0"} for k in range(11)]
    assert expected[0] == {"y": "280.0", "text": "0.0"} and expected[-1] == {"y": "30.0", "text": "1.0"}
    # Compared as the template prints them (a float with one decimal, never an int).
    assert [{"y": str(t["y"]), "text": t["text"]} for t in chart["yticks"]] == expected
    assert all(isinstance(t["y"], float) for t in chart["yticks"])


def test_line_chart_of_one_rank_puts_it_at_the_left_edge() -> None:
    chart = line_chart([8], [0.6], "t", "x", "y")
    assert chart["dots"] == [{"x": "64.0", "y": f"{BOTTOM - 0.6 * (BOTTOM - TOP):.1f}"}]
    assert chart["dots"][0]["y"] == "130.0"
    assert chart["xticks"] == [{"x": "64.0", "text": "8"}]


def test_line_chart_of_no_value_draws_no_dot() -> None:
    chart = line_chart([1, 4], [None, None], "t", "x", "y")
    assert chart["dots"] == [] and chart["points"] == ""
    assert [t["text"] for t in chart["xticks"]] == ["1", "4"]


def test_line_chart_renders_its_dots_where_computed() -> None:
    svg = str(_macros().line_chart(line_chart([2, 4, 8], [0.2, 0.4, 0.8], "lab", "xl", "yl")))
    circles = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg)
    assert circles == [("64.0", "230.0"), ("312.0", "180.0"), ("560.0", "80.0")]
    assert 'aria-label="lab"' in svg and ">xl</text>" in svg and ">yl</text>" in svg


# --------------------------------------------------------------------------- heatmap


def _shade_by_hand(value: float | None) -> int:
    """0..10 by tenths, clipped, 0 for a missing value (no input here lies on a half tenth)."""
    if value is None:
        return 0
    return min(10, max(0, math.floor(value * 10 + 0.5)))


def test_heatmap_cells_positions_texts_and_shades() -> None:
    names = ["ab", "cdefgh"]
    matrix = [[-0.2, 0.26], [None, 1.3]]
    h = heatmap(names, matrix, "L")
    longest = 6
    left, top = 12 + 7 * longest, 40 + 5 * longest
    assert (left, top) == (54, 70)
    assert (h["left"], h["top"], h["cell"], h["step"], h["label"]) == (left, top, CELL, STEP, "L")
    assert h["height"] == top + 2 * CELL + 96 == 254
    assert h["rows"] == [
        {
            "name": "ab",
            "y": 70,
            "cells": [
                {"x": 54, "name": "ab", "text": "-0.20", "shade": 0},
                {"x": 98, "name": "cdefgh", "text": "0.26", "shade": 3},
            ],
        },
        {
            "name": "cdefgh",
            "y": 114,
            "cells": [
                {"x": 54, "name": "ab", "text": "n/a", "shade": 0},
                {"x": 98, "name": "cdefgh", "text": "1.30", "shade": 10},
            ],
        },
    ]
    assert [[c["shade"] for c in r["cells"]] for r in h["rows"]] == [[_shade_by_hand(v) for v in row] for row in matrix]
    # Column labels sit over the middle of their column, in whole pixels as the SVG prints them.
    assert h["columns"] == [{"x": 54 + 22, "name": "ab"}, {"x": 54 + 44 + 22, "name": "cdefgh"}]
    assert [str(c["x"]) for c in h["columns"]] == ["76", "120"]


@pytest.mark.parametrize("value", [0.04, 0.06, 0.5, 0.74, 0.76, 0.96, 0.94, 1.0, 0.0])
def test_heatmap_shade_is_the_nearest_tenth(value: float) -> None:
    h = heatmap(["a"], [[value]], "L")
    assert h["rows"][0]["cells"][0]["shade"] == _shade_by_hand(value)
    assert h["rows"][0]["cells"][0]["text"] == f"{value:.2f}"


def test_heatmap_value_scale_has_eleven_steps() -> None:
    h = heatmap(["abc"], [[0.5]], "L")
    left = 12 + 7 * 3
    assert h["scale"] == [{"x": left + k * STEP, "shade": k, "text": f"0.{k}" if k < 10 else "1.0"} for k in range(11)]
    assert h["scale"][-1] == {"x": 33 + 260, "shade": 10, "text": "1.0"}


def test_heatmap_width_fits_the_widest_of_grid_scale_and_label() -> None:
    # Few short names, a short label: the value scale is widest (left + 11 steps + 40).
    h = heatmap(["a"], [[0.5]], "L")
    assert h["width"] == (12 + 7) + 11 * STEP + 40 == 345
    # Eight names: the grid is widest (left + 8 cells + 40).
    names = [f"f{i}" for i in range(8)]
    h = heatmap(names, [[0.5] * 8 for _ in names], "L")
    assert h["width"] == (12 + 14) + 8 * CELL + 40 == 418
    assert h["height"] == (40 + 10) + 8 * CELL + 96
    # A long label: eight pixels a character.
    h = heatmap(["a"], [[0.5]], "x" * 60)
    assert h["width"] == 8 * 60


def test_heatmap_top_margin_grows_with_the_longest_name() -> None:
    h = heatmap(["abcdefghij", "k"], [[0.1, 0.2], [0.3, 0.4]], "L")
    assert (h["left"], h["top"]) == (12 + 70, 40 + 50)
    assert [r["y"] for r in h["rows"]] == [90, 134]
    assert [c["x"] for c in h["rows"][1]["cells"]] == [82, 126]


def test_heatmap_of_no_family_keeps_a_default_margin() -> None:
    h = heatmap([], [], "L")
    assert (h["left"], h["top"]) == (12 + 28, 40 + 20)
    assert h["rows"] == [] and h["columns"] == []
    assert h["width"] == 40 + 11 * STEP + 40 and h["height"] == 60 + 96


def test_heatmap_renders_each_cell_with_its_shade_class() -> None:
    h = heatmap(["ab", "cd"], [[0.26, 0.9], [None, 0.5]], "Transfers")
    svg = str(_macros().heatmap(h))
    rects = re.findall(r'<rect class="q(\d+)" x="(\d+)" y="(\d+)" width="44" height="44"><title>(.*?)</title>', svg)
    left, top = 12 + 14, 40 + 10
    assert rects == [
        ("3", str(left), str(top), "ab -> ab: 0.26"),
        ("9", str(left + CELL), str(top), "ab -> cd: 0.90"),
        ("0", str(left), str(top + CELL), "cd -> ab: n/a"),
        ("5", str(left + CELL), str(top + CELL), "cd -> cd: 0.50"),
    ]
    assert 'aria-label="Transfers"' in svg


# --------------------------------------------------------------------------- sweeps


def _probe(fams: dict[str, Any], seeds: Any = (0, 1)) -> dict[str, Any]:
    return {"probe": {"seeds": list(seeds), "families": fams}}


def _sweep_fam(ranks: list[int], mean: list[float | None], sd: list[float | None]) -> dict[str, Any]:
    return {"available": True, "rank_sweep": {"ranks": ranks, "mean": mean, "sd": sd}}


def test_sweeps_per_model_in_name_order_skipping_those_without_the_family() -> None:
    data = PageData()
    data.experiments = {
        "m4": _probe({"fam": _sweep_fam([1, 4], [0.61234, 0.9], [0.01, None])}, seeds=(3,)),
        "m0": {"transfer": {}},  # no probe at all
        "m1": _probe({"other": _sweep_fam([1], [0.5], [0.0])}),  # a probe without this family
        "m2": _probe({"fam": {"available": False, "unavailable_reason": "too few cycles"}}),
        "m3": _probe({"fam": {"available": False}}),
        "m5": _probe({"fam": {}}),  # an empty record: nothing to show
    }
    parts = _sweeps(data, "fam")
    assert [p["model"] for p in parts] == ["m2", "m3", "m4"]
    assert parts[0] == {"model": "m2", "unavailable": "too few cycles"}
    assert parts[1] == {"model": "m3", "unavailable": ""}
    shown = parts[2]
    assert set(shown) == {"model", "unavailable", "seeds", "chart", "rows"}
    assert (shown["unavailable"], shown["seeds"]) == ("", "[3]")
    assert shown["rows"] == [
        {"rank": 1, "mean": "0.612", "value": "0.61234", "sd": "0.010"},
        {"rank": 4, "mean": "0.900", "value": "0.9", "sd": "n/a"},
    ]
    chart = shown["chart"]
    assert (chart["label"], chart["xlabel"], chart["ylabel"]) == (SWEEP_LABEL, "probe rank (log scale)", "test CycleAcc")
    # Ranks 1 and 4 span the plot; the means are the heights.
    assert chart["points"] == f"64.0,{BOTTOM - 0.61234 * 250:.1f} 560.0,{BOTTOM - 0.9 * 250:.1f}"
    assert [t["text"] for t in chart["xticks"]] == ["1", "4"]


def test_sweeps_missing_mean_is_shown_as_not_available() -> None:
    data = PageData()
    data.experiments = {"m": _probe({"fam": _sweep_fam([2, 8], [None, 0.7], [None, 0.02])})}
    (part,) = _sweeps(data, "fam")
    assert part["rows"] == [
        {"rank": 2, "mean": "n/a", "value": "", "sd": "n/a"},
        {"rank": 8, "mean": "0.700", "value": "0.7", "sd": "0.020"},
    ]
    assert part["chart"]["points"] == f"560.0,{BOTTOM - 0.7 * 250:.1f}"


def test_sweeps_of_a_family_nobody_probed_is_empty() -> None:
    data = PageData()
    data.experiments = {"m": _probe({"fam": _sweep_fam([1], [0.5], [0.0])})}
    assert _sweeps(data, "other") == []
    assert _sweeps(PageData(), "fam") == []


def test_family_page_section_shows_the_sweep_numbers() -> None:
    data = PageData()
    data.experiments = {"m": _probe({"fam": _sweep_fam([1, 2], [0.55, 0.65], [0.1, 0.2])})}
    (part,) = _sweeps(data, "fam")
    svg = str(_macros().line_chart(part["chart"]))
    assert f">{SWEEP_LABEL}</text>" in svg and ">probe rank (log scale)</text>" in svg and ">test CycleAcc</text>" in svg


# --------------------------------------------------------------------------- transfers


def _transfer(names: list[str], matrix: list[list[float | None]]) -> dict[str, Any]:
    return {"transfer": {"families": names, "mean": {"transfer": matrix}}}


def test_transfers_rows_read_the_family_row_out_and_its_column_in() -> None:
    names = ["a", "fam", "c"]
    # matrix[i][j]: trained on names[i], tested on names[j]; every entry distinct.
    matrix = [[0.11, 0.12, 0.13], [0.21, 0.22, 0.23], [0.31, None, 0.33]]
    data = PageData()
    data.experiments = {
        "m3": _transfer(names, matrix),
        "m0": _probe({}),  # no transfer record
        "m1": _transfer(["a", "c"], [[0.5, 0.5], [0.5, 0.5]]),  # this family not in it
        "m2": {"transfer": {}},
        "m4": {"transfer": {"seeds": [0]}},  # a record naming no families: nothing to show
    }
    parts = _transfers(data, "fam")
    assert [p["model"] for p in parts] == ["m3"]
    (part,) = parts
    assert set(part) == {"model", "heatmap", "rows"}
    i = 1
    expected = []
    for j, other in enumerate(names):
        out, in_ = matrix[i][j], matrix[j][i]
        expected.append(
            {
                "name": other,
                "out": "n/a" if out is None else f"{out:.3f}",
                "out_value": "" if out is None else repr(out),
                "in_": "n/a" if in_ is None else f"{in_:.3f}",
                "in_value": "" if in_ is None else repr(in_),
            }
        )
    assert part["rows"] == expected
    assert part["rows"][2] == {"name": "c", "out": "0.230", "out_value": "0.23", "in_": "n/a", "in_value": ""}
    h = part["heatmap"]
    assert h["label"] == TRANSFER_LABEL
    assert [r["name"] for r in h["rows"]] == names
    assert [[c["text"] for c in r["cells"]] for r in h["rows"]] == [
        ["0.11", "0.12", "0.13"],
        ["0.21", "0.22", "0.23"],
        ["0.31", "n/a", "0.33"],
    ]


def test_transfers_for_every_model_holding_the_family() -> None:
    data = PageData()
    data.experiments = {
        "b": _transfer(["fam", "x"], [[0.9, 0.8], [0.7, 0.6]]),
        "a": _transfer(["x", "fam"], [[0.1, 0.2], [0.3, 0.4]]),
    }
    parts = _transfers(data, "fam")
    assert [p["model"] for p in parts] == ["a", "b"]
    assert [(r["name"], r["out"], r["in_"]) for r in parts[0]["rows"]] == [("x", "0.300", "0.200"), ("fam", "0.400", "0.400")]
    assert [(r["name"], r["out"], r["in_"]) for r in parts[1]["rows"]] == [("fam", "0.900", "0.900"), ("x", "0.800", "0.700")]
    assert _transfers(data, "nope") == []


# --------------------------------------------------------------------------- builds


def _info(order: int = 0) -> FamilyInfo:
    return FamilyInfo("coco_fam", "coco", "coco", "fam", "pred", "ours", order)


def _build(source: str, fam: Any = None, **extra: Any) -> dict[str, Any]:
    build: dict[str, Any] = {"source": source, **extra}
    if fam is not None:
        build["families"] = {"fam": fam}
    return build


def _full_fam() -> dict[str, Any]:
    return {
        "counts": {"1": {"train": 8}, "0": {"train": 10, "test": 5}},
        "available_splits": ["train", "test"],
        "excluded": {"too small": 3, "``iscrowd`` regions": 2},
    }


def test_builds_one_part_per_folder_of_the_family_builder() -> None:
    data = PageData()
    data.families = {"coco_fam": _info()}
    data.builds = [
        ("worlds/nofam", _build("coco")),  # this builder, but no such family: skipped
        ("worlds/gqa", _build("gqa", _full_fam())),  # another builder
        ("worlds/a", _build("coco", _full_fam(), thresholds={"z_thr": 1, "a_thr": 2}, min_cycles=20)),
        ("worlds/a", _build("coco", {"counts": {}})),  # the same folder again
        ("worlds/b", _build("coco", {"available_splits": []})),
        ("worlds/c", _build("coco", "not a dict")),
    ]
    parts = _builds(data, "coco_fam")
    assert [p["folder"] for p in parts] == ["worlds/a", "worlds/b"]
    assert parts[0] == {
        "folder": "worlds/a",
        "source": "coco",
        # Sorted keys, the build's minimum of cycles among them.
        "thresholds": '{"a_thr": 2, "min_cycles": 20, "z_thr": 1}',
        "splits": "train, test",
        "split_names": ["test", "train"],
        # Seeds in order, a split a seed lacks is 0.
        "counts": [{"seed": "0", "counts": [5, 10]}, {"seed": "1", "counts": [0, 8]}],
        # Reasons sorted; their literals become code.
        "excluded": [
            {"reason": [("iscrowd", True), (" regions", False)], "n": 2},
            {"reason": [("too small", False)], "n": 3},
        ],
    }
    assert parts[1] == {
        "folder": "worlds/b",
        "source": "coco",
        "thresholds": "{}",
        "splits": "none",
        "split_names": [],
        "counts": [],
        "excluded": [],
    }


def test_builds_folder_is_shown_relative_to_its_input() -> None:
    data = PageData(inputs=["/data/results"])
    data.families = {"coco_fam": _info()}
    data.builds = [("/data/results/worlds/a", _build("coco", {}))]
    (part,) = _builds(data, "coco_fam")
    assert part["folder"] == "results/worlds/a"


def test_builds_of_a_family_without_recorded_facts_are_empty() -> None:
    data = PageData()
    data.builds = [("worlds/a", _build("coco", _full_fam()))]
    assert _builds(data, "coco_fam") == []  # unknown family
    data.families = {"coco_fam": _info(order=-1)}  # an older result: facts not recorded
    assert _builds(data, "coco_fam") == []
    data.families = {"coco_fam": _info(order=0)}
    assert [p["folder"] for p in _builds(data, "coco_fam")] == ["worlds/a"]


def test_builds_minimum_of_cycles_joins_absent_thresholds() -> None:
    data = PageData()
    data.families = {"coco_fam": _info()}
    data.builds = [("worlds/a", _build("coco", _full_fam(), min_cycles=30))]
    (part,) = _builds(data, "coco_fam")
    assert part["thresholds"] == '{"min_cycles": 30}'
    assert part["counts"][1] == {"seed": "1", "counts": [0, 8]}
