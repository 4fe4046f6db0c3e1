"""The combined table of `audit-benchmark all` (benchmark_audit.combined), read cell by cell on hand-built audits
(issue 56: mutation-directed). No files are read and no model runs: each audit is a stand-in with the fields
combined_rows reads, so every expected cell is written out here by hand."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from clip_cycles.benchmark_audit.combined import (
    COMBINED_COLUMNS,
    combined_csv,
    combined_files,
    combined_markdown,
    combined_rows,
    find_benchmarks,
    parse_benchmark_pairs,
    unusable_benchmark_row,
)

CEILINGS = {
    "length_ceiling": 0.91,
    "bag_of_words_ceiling": 0.92,
    "caption_only_ceiling": 0.93,
    "bag_of_words_forced_share": 0.16,
    "length_forced_share": 0.18,
    "caption_only_forced_share": 0.14,
}


def _metrics(**over: Any) -> dict[str, Any]:
    out = {
        "n_comparisons": 10,
        "n_items": 5,
        "model_acc": 0.8,
        "best_blind": "longest",
        "best_blind_acc": 0.7,
        "best_blind_acc_ci": {"low": 0.55, "high": 0.85},
        "best_blind_vs_model": {"verdict": "within noise", "adjusted_verdict": "could not tell"},
        "shortest_caption_acc": 0.3,
        "longest_caption_acc": 0.7,
        "ceilings": dict(CEILINGS),
        "cycles": {"n_cycles": 2, "cycle_acc": 0.25},
        "skipped": {},
    }
    return {**out, **over}


def _audit(benchmark: str, subsets: list[tuple[str, dict[str, Any]]], summary: dict[str, Any], model: str | None) -> Any:
    return SimpleNamespace(
        benchmark=benchmark,
        audits=[SimpleNamespace(name=name, metrics=metrics) for name, metrics in subsets],
        summary=summary,
        model={} if model is None else {"model": model},
        record=lambda: {"dataset": f"audit/{benchmark}", "n": 1},
    )


def test_a_subset_row_reads_each_cell_from_its_own_field() -> None:
    skipped = {"b_reason": 1, "a_reason": 3}
    sub = _metrics(skipped=skipped)
    summary = _metrics(n_comparisons=10, shortest_caption_acc=0.45, longest_caption_acc=0.4, n_cycles=9, cycle_acc=0.5)
    del summary["cycles"]  # the summary carries the cycle counts at its top level
    summary["ceilings"] = {**CEILINGS, "length_floor": 0.01}  # replaced: the pooled better length rule
    summary["best_blind_vs_model"] = {"verdict": "blind beats model"}  # no adjusted verdict: the verdict itself
    del summary["best_blind_acc_ci"]
    rows = combined_rows([_audit("cola", [("s1", sub)], summary, "/home/me/weights/f.npz")])
    assert [list(r) for r in rows] == [list(COMBINED_COLUMNS)] * 2
    assert rows[0] == {
        "benchmark": "cola",
        "subset": "s1",
        "n_comparisons": 10,
        "n_items": 5,
        "model": "f.npz",  # never the machine path
        "model_acc": 0.8,
        "best_blind": "longest",
        "best_blind_acc": 0.7,
        "best_blind_ci_low": 0.55,
        "best_blind_ci_high": 0.85,
        "blind_vs_model": "could not tell",  # the adjusted verdict wins
        "length_floor": 0.7,  # max(shortest 0.3, longest 0.7)
        "length_ceiling": 0.91,
        "bag_of_words_ceiling": 0.92,
        "caption_only_ceiling": 0.93,
        "bag_of_words_forced_share": 0.16,
        "length_forced_share": 0.18,
        "caption_only_forced_share": 0.14,
        "n_cycles": 2,
        "cycle_acc": 0.25,
        "dropped": "a_reason=3; b_reason=1",  # sorted by reason
    }
    assert rows[1]["subset"] == "all" and rows[1]["n_items"] is None
    assert rows[1]["length_floor"] == 0.45  # max(0.45, 0.4), not the summary's own 0.01
    assert rows[1]["blind_vs_model"] == "blind beats model"
    assert rows[1]["best_blind_ci_low"] is None and rows[1]["best_blind_ci_high"] is None
    assert (rows[1]["n_cycles"], rows[1]["cycle_acc"]) == (9, 0.5)  # from the top level when there is no "cycles"
    assert rows[1]["dropped"] == "a_reason=3; b_reason=1"


def test_the_all_row_pools_drops_over_subsets_and_a_subset_keeps_its_own_length_floor() -> None:
    first = _metrics(skipped={"x": 2, "y": 1}, shortest_caption_acc=0.6, longest_caption_acc=0.2)
    second = _metrics(skipped={"x": 5}, best_blind_vs_model=None, ceilings={**CEILINGS, "length_floor": 0.66})
    summary = _metrics(shortest_caption_acc=0.1, longest_caption_acc=0.2, cycles={"n_cycles": 0, "cycle_acc": None})
    rows = combined_rows([_audit("valse", [("a", first), ("b", second)], summary, None)])
    assert [(r["benchmark"], r["subset"]) for r in rows] == [("valse", "a"), ("valse", "b"), ("valse", "all")]
    assert [r["dropped"] for r in rows] == ["x=2; y=1", "x=5", "x=7; y=1"]
    assert [r["length_floor"] for r in rows] == [0.6, 0.66, 0.2]
    assert rows[1]["blind_vs_model"] is None
    assert {r["model"] for r in rows} == {""}  # no model: an empty cell, never "None"
    assert rows[2]["n_cycles"] == 0 and rows[2]["cycle_acc"] is None


def test_unusable_benchmarks_follow_the_audited_ones_with_count_zero_and_the_reason() -> None:
    audit = _audit("cola", [("s", _metrics())], _metrics(), "ViT-B-32")
    rows = combined_rows([audit], {"bivlc": "no BiVLC file", "vl_checklist": "no subset"})
    assert [(r["benchmark"], r["subset"]) for r in rows] == [
        ("cola", "s"),
        ("cola", "all"),
        ("bivlc", "all"),
        ("vl_checklist", "all"),
    ]
    assert rows[0]["model"] == "ViT-B-32"
    expected = dict.fromkeys(COMBINED_COLUMNS)
    expected.update(benchmark="bivlc", subset="all", n_comparisons=0, dropped="not audited: no BiVLC file")
    assert rows[2] == expected and list(rows[2]) == list(COMBINED_COLUMNS)
    assert unusable_benchmark_row("x", "why") == {**dict.fromkeys(COMBINED_COLUMNS), "benchmark": "x", "subset": "all",
                                                  "n_comparisons": 0, "dropped": "not audited: why"}  # fmt: skip
    assert combined_rows([]) == [] and combined_rows([], {}) == []


LEGEND = (
    "Floors are accuracies a blind rule reaches (mean credit: 1 win, 0.5 tie, 0 loss); ceilings are exact upper "
    "bounds of every rule reading only one view of the captions: 1 - (share of comparisons that view forces to a "
    "tie) / 2. Views: bag_of_words (lowercase words, order ignored), length (characters), caption_only (the "
    "caption, not the image). best_blind_ci_low / _high: the 95 % bootstrap interval (items resampled) of the "
    "best blind floor. blind_vs_model: the paired verdict of the best blind rule against the model. "
    "n_cycles: exact cycles inside the benchmark (no additive score can pass them); cycle_acc: the model's "
    "CycleAcc on them. dropped: entries left out, per reason."
)


def _row(**cells: Any) -> dict[str, Any]:
    return {**dict.fromkeys(COMBINED_COLUMNS), **cells}


def test_markdown_cells_header_legend_and_the_not_audited_line() -> None:
    rows = [_row(benchmark="cola", subset="s", n_comparisons=12, model_acc=0.123456, length_ceiling=1.0, dropped="")]
    header = "| " + " | ".join(COMBINED_COLUMNS) + " |"
    rule = "|" + "---|" * 20 + "---|"
    cells = ["cola", "s", "12", "-", "-", "0.1235", *["-"] * 6, "1.0000", *["-"] * 7, ""]
    assert len(cells) == 21
    line = "| " + " | ".join(cells) + " |"
    assert combined_markdown(rows) == "\n".join([header, rule, line, "", LEGEND]) + "\n"
    skipped = [*rows, _row(benchmark="bivlc", subset="all", n_comparisons=0, dropped="not audited: no file"),
               _row(benchmark="aro", subset="all", n_comparisons=0, dropped="not audited: none")]  # fmt: skip
    text = combined_markdown(skipped)
    assert text.endswith(
        f"{LEGEND}\n\nNot audited: 2 benchmark(s) with no subset to audit (bivlc, aro); each is one row with count 0 "
        "and the reason in dropped.\n"
    )
    # A dropped cell that only mentions the phrase later is an audited benchmark.
    assert "Not audited" not in combined_markdown([_row(benchmark="c", subset="s", dropped="x=1; not audited: y")])


def test_csv_has_the_header_empty_cells_for_missing_values_and_newline_endings() -> None:
    rows = [_row(benchmark="cola", subset="all", n_comparisons=0, model_acc=0.5, dropped="a=1; b=2")]
    text = combined_csv(rows)
    assert "\r" not in text and text.endswith("\n")
    assert text.splitlines()[0] == ",".join(COMBINED_COLUMNS)
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert parsed == [{c: {"benchmark": "cola", "subset": "all", "n_comparisons": "0", "model_acc": "0.5",
                           "dropped": "a=1; b=2"}.get(c, "") for c in COMBINED_COLUMNS}]  # fmt: skip


def test_combined_files_hold_the_record_table_and_csv(tmp_path: Path) -> None:
    audit = _audit("cola", [("s", _metrics())], _metrics(), "m")
    files, table = combined_files([audit], tmp_path)
    assert sorted(files) == ["audit_all.csv", "audit_all.json", "audit_all.md"]
    record = json.loads(files["audit_all.json"])
    assert set(record) == {"columns", "rows", "benchmarks"}
    assert record["columns"] == list(COMBINED_COLUMNS)
    assert record["benchmarks"] == {"cola": {"dataset": "audit/cola", "n": 1}}
    assert [(r["benchmark"], r["subset"]) for r in record["rows"]] == [("cola", "s"), ("cola", "all")]
    assert files["audit_all.md"] == table.encode("utf-8") and table.startswith("| benchmark | subset |")
    assert files["audit_all.csv"].decode("utf-8").splitlines()[0] == ",".join(COMBINED_COLUMNS)
    files, _ = combined_files([audit], tmp_path, {"bivlc": "no BiVLC file"})
    record = json.loads(files["audit_all.json"])
    assert record["unusable_benchmarks"] == {"bivlc": {"n_comparisons": 0, "reason": "no BiVLC file"}}
    assert record["rows"][-1]["dropped"] == "not audited: no BiVLC file"
    files, _ = combined_files([audit], tmp_path, {})
    assert "unusable_benchmarks" not in json.loads(files["audit_all.json"])


def test_find_benchmarks_matches_folder_names_across_case_dashes_and_plus(tmp_path: Path) -> None:
    for name in ("VL-CheckList", "Cola", "SugarCrepe_++", "notes", "zz-winoground"):
        (tmp_path / name).mkdir()
    (tmp_path / "valse").write_text("a file, not a folder")
    assert find_benchmarks(tmp_path) == [
        ("cola", tmp_path / "Cola"),
        ("sugarcrepe_pp", tmp_path / "SugarCrepe_++"),
        ("vl_checklist", tmp_path / "VL-CheckList"),
    ]
    with pytest.raises(FileNotFoundError) as caught:
        find_benchmarks(tmp_path / "notes")
    assert str(caught.value) == (
        f"{tmp_path / 'notes'}: no subfolder named like a benchmark format; expected some of: aro, bivlc, cola, "
        "colorswap, comparison_table, crepe, eqben, mmvp_vlm, naturalbench, sugarcrepe, sugarcrepe_pp, valse, "
        "valse_all, vismin, vl_checklist, winoground"
    )
    with pytest.raises(FileNotFoundError) as caught:
        find_benchmarks(tmp_path / "valse")
    assert str(caught.value) == (
        f"--root {tmp_path / 'valse'} is not a folder; `audit-benchmark all` reads one subfolder per benchmark"
    )


def test_parse_benchmark_pairs_keeps_order_expands_home_and_refuses_with_whole_sentences() -> None:
    assert parse_benchmark_pairs(["valse=/d/v", "cola=~/c=1"]) == [("valse", Path("/d/v")), ("cola", Path("~/c=1").expanduser())]
    assert parse_benchmark_pairs([]) == []
    for item, message in (
        ("cola", "--benchmark 'cola': expected NAME=PATH, e.g. valse=/data/valse"),
        ("=/x", "--benchmark '=/x': expected NAME=PATH, e.g. valse=/data/valse"),
        ("cola=", "--benchmark 'cola=': expected NAME=PATH, e.g. valse=/data/valse"),
        ("Cola=/x", "--benchmark 'Cola=/x': unknown benchmark format 'Cola'; registered: aro, bivlc, cola, colorswap, "
         "comparison_table, crepe, eqben, mmvp_vlm, naturalbench, sugarcrepe, sugarcrepe_pp, valse, valse_all, vismin, "
         "vl_checklist, winoground (did you mean 'cola'?)"),
    ):  # fmt: skip
        with pytest.raises(ValueError) as caught:
            parse_benchmark_pairs([item])
        assert str(caught.value) == message
    with pytest.raises(ValueError) as caught:
        parse_benchmark_pairs(["cola=/a", "valse=/v", "cola=/b"])
    assert str(caught.value) == "--benchmark 'cola=/b': cola is listed twice; each benchmark's files go to <out>/cola/"


def test_write_all_writes_every_benchmark_s_files_and_the_table_as_one_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clip_cycles.benchmark_audit import combined

    calls: list[tuple[Path, dict[str, bytes], str]] = []
    monkeypatch.setattr(combined, "output_files", lambda audit, folder: ({"own.json": str(folder).encode()}, "t"))
    monkeypatch.setattr(combined, "write_file_set", lambda folder, files, what: calls.append((folder, files, what)))
    audits = [_audit("cola", [("s", _metrics())], _metrics(), "m"), _audit("valse", [("v", _metrics())], _metrics(), None)]
    path, table = combined.write_all(audits, str(tmp_path / "out"), {"bivlc": "no file"})
    assert path == tmp_path / "out" / "audit_all.json"
    ((folder, files, what),) = calls
    assert folder == tmp_path / "out" and what == "audit-benchmark all --out"
    assert sorted(files) == ["audit_all.csv", "audit_all.json", "audit_all.md", "cola/own.json", "valse/own.json"]
    assert files["cola/own.json"] == str(tmp_path / "out" / "cola").encode()  # each benchmark's own folder
    assert files["audit_all.md"] == table.encode() and "| bivlc | all | 0 |" in table
    assert json.loads(files["audit_all.json"])["unusable_benchmarks"] == {"bivlc": {"n_comparisons": 0, "reason": "no file"}}
