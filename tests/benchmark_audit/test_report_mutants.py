"""One benchmark's audit table, its figure's numbers and its files (benchmark_audit.report), read cell by cell on
hand-built audits (issue 56: mutation-directed). Every expected cell is written out here by hand; the figure's
drawing (matplotlib) is replaced by a stand-in that hands back what it was asked to draw."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from clip_cycles.algebra.multiplicity import RESOLUTION
from clip_cycles.algebra.paired import MIN_CYCLES, MIN_IMAGES
from clip_cycles.benchmark_audit import report
from clip_cycles.benchmark_audit.report import (
    best_blind_cell,
    blind_vs_model_cell,
    markdown_table,
    output_files,
    unusable_rows,
    weights_label,
    write_outputs,
)


def _sub(**over: Any) -> dict[str, Any]:
    out = {
        "n_comparisons": 12,
        "n_items": 6,
        "design": {"share_images_unbalanced": 0.25, "share_captions_unbalanced": 0.5},
        "witness_acc": 0.5,
        "shortest_caption_acc": 0.25,
        "longest_caption_acc": 0.75,
        "word_frequency_acc": None,
        "caption_probe_acc": 0.6,
        "image_probe_acc": 0.55,
        "model_acc": 0.9,
        "best_blind": "longest_caption",
        "best_blind_acc": 0.75,
        "best_blind_acc_ci": {"low": 0.6, "high": 0.875},
        "best_blind_vs_model": {
            "verdict": "within noise",
            "adjusted_p": 0.4,
            "adjusted_verdict": "could not tell",
            "adjustment": "holm",
            "n_adjusted": 3,
            "blind": "longest_caption",
            "diff": -0.15,
            "ci_low": -0.3,
            "ci_high": 0.05,
        },
        "cycles": {"n_cycles": 2, "n_paired_items": 4, "cycle_acc": 0.5},
        "ceilings": {"bag_of_words_ceiling": 1.0, "length_ceiling": 0.875},
    }
    return {**out, **over}


def _audit(model: dict[str, Any] | None = None, unusable: dict[str, Any] | None = None, tolerance: float = 0.001) -> Any:
    second = _sub(
        n_comparisons=8,
        n_items=8,
        witness_acc=None,
        best_blind="shortest_caption",
        best_blind_acc=0.625,
        best_blind_acc_ci=None,
        best_blind_vs_model=None,
        cycles={"n_cycles": 0, "n_paired_items": 0},
        shortest_caption_acc=0.625,
        longest_caption_acc=0.125,
        word_frequency_acc=0.375,
    )
    summary = {
        **_sub(n_comparisons=20, n_cycles=2, cycle_acc=0.5, best_blind_acc=0.7, word_frequency_acc=0.4),
        "best_blind_vs_model": {
            "verdict": "blind beats model",
            "adjusted_p": None,
            "blind": "longest_caption",
            "diff": 0.1,
            "ci_low": 0.02,
            "ci_high": 0.18,
        },
    }
    return SimpleNamespace(
        benchmark="cola",
        audits=[SimpleNamespace(name="s1", metrics=_sub()), SimpleNamespace(name="s2", metrics=second)],
        summary=summary,
        settings=SimpleNamespace(tie_tolerance=tolerance),
        model=model if model is not None else {"model": "ViT-B-32", "pretrained": "openai"},
        unusable=unusable or {},
        record=lambda: {"dataset": "audit/cola", "metrics": {"n": 20}},
    )


HEADER = (
    "| subset | comparisons | items | unbalanced img / cap | witness | shortest | longest | word freq | caption probe | "
    "image probe | model | best blind [95 % CI] | best blind - model | cycles (items paired) | CycleAcc | BoW ceiling | "
    "length ceiling |"
)
RULE = "|" + "---|" * 17
ROW_1 = (
    "| s1 | 12 | 6 | 0.25 / 0.50 | 0.500 | 0.250 | 0.750 | - | 0.600 | 0.550 | 0.900 | longest_caption 0.750 [0.600, 0.875] "
    "| could not tell (holm over 3; unadjusted within noise): longest_caption -0.150 [-0.300, +0.050] | 2 (4) | 0.500 "
    "| 1.000 | 0.875 |"
)
ROW_2 = (
    "| s2 | 8 | 8 | 0.25 / 0.50 | - | 0.625 | 0.125 | 0.375 | 0.600 | 0.550 | 0.900 | shortest_caption 0.625 | - | 0 (0) "
    "| - | 1.000 | 0.875 |"
)
ALL = (
    "| **all** | 20 |  |  | 0.500 | 0.250 | 0.750 | 0.400 | 0.600 | 0.550 | 0.900 | longest_caption 0.700 [0.600, 0.875] "
    "| blind beats model: longest_caption +0.100 [+0.020, +0.180] | 2 | 0.500 | 1.000 | 0.875 |"
)


def _legend(who: str, tolerance: str) -> str:
    return (
        f"Benchmark `cola`, model {who}; tie tolerance {tolerance}. "
        "Accuracies: mean credit (1 win, 0.5 tie, 0 loss) over the subset's comparisons; CycleAcc over its "
        "exact cycles. A blind column near the model's means the benchmark can be passed without "
        'looking at the pairing; "word freq": the caption made of the subset\'s commoner words wins (order-blind, '
        'no grammar); "best blind": the best of the blind rules with a 95 % bootstrap interval over items. '
        "Ceilings: no rule reading only the caption's bag of lowercase words (or its length) can exceed them "
        "(1 - half the share of comparisons that view forces to a tie). "
        "\"best blind - model\": the best blind score's accuracy minus the model's on the same "
        'comparisons, with a 95 % paired bootstrap interval over items; "blind beats model" only when it lies above 0 '
        f'("within noise" when it holds 0; "too few comparisons" below {MIN_CYCLES} comparisons or {MIN_IMAGES} items). '
        "Each subset's call is then adjusted with Holm over the subsets' calls (the unadjusted verdict and interval "
        f'are kept); a subset whose adjusted test could not call a difference of {RESOLUTION:.2f} says "could not tell".'
    )


def test_the_table_cell_by_cell_with_the_model_line_and_legend() -> None:
    expected = "\n".join([HEADER, RULE, ROW_1, ROW_2, ALL, "", _legend("ViT-B-32 (openai)", "0.001")]) + "\n"
    assert markdown_table(_audit()) == expected


def test_the_model_line_names_a_weights_file_features_or_no_model() -> None:
    path_model = {"model": "/home/me/m/ViT.pt", "pretrained": "/home/me/w.pt", "weights_sha256": "abcdef0123456789" * 4}
    assert "model ViT.pt (w.pt, weights abcdef012345); tie tolerance 1e-06." in markdown_table(_audit(path_model, tolerance=1e-6))
    features = {"model": "f.npz", "backend": "features"}
    assert "model f.npz (precomputed features); tie tolerance 0." in markdown_table(_audit(features, tolerance=0.0))
    assert "model no model (design only); tie tolerance 0.25." in markdown_table(_audit({}, tolerance=0.25))
    assert weights_label({"pretrained": "openai", "backend": "features"}) == "openai"
    assert weights_label({"backend": "features"}) == "precomputed features"
    assert weights_label({"backend": "open_clip"}) == "random init" and weights_label({}) == "random init"


def test_unusable_subsets_are_rows_with_their_reason_escaped_and_a_closing_line() -> None:
    unusable = {"odd": {"reason": "a|b\nc"}, "empty": {"reason": "empty: the subset holds no item"}}
    rows = unusable_rows(_audit(unusable=unusable))
    dashes = " | ".join(["-"] * 13)
    assert rows == [
        f"| odd | 0 | 0 | not audited: a\\|b c | {dashes} |",
        f"| empty | 0 | 0 | not audited: empty: the subset holds no item | {dashes} |",
    ]
    table = markdown_table(_audit(unusable=unusable))
    lines = table.splitlines()
    assert lines[4:6] == rows and lines[6].startswith("| **all** |")  # after the subsets, before the all row
    assert table.endswith(
        "\n\nNot audited: 2 subset(s) with no comparison (count 0 and the reason in their row); every other subset is "
        "audited and pooled without them.\n"
    )
    assert unusable_rows(_audit()) == [] and "Not audited" not in markdown_table(_audit())


def test_cells_of_the_best_blind_and_of_the_paired_verdict() -> None:
    assert best_blind_cell({"best_blind": "witness", "best_blind_acc": 0.5}) == "witness 0.500"
    assert best_blind_cell({"best_blind": "w", "best_blind_acc": 0.5, "best_blind_acc_ci": "x"}) == "w 0.500"
    paired = {"verdict": "model above blind", "blind": "b", "diff": -0.25, "ci_low": -0.5, "ci_high": -0.125}
    assert blind_vs_model_cell(paired) == "model above blind: b -0.250 [-0.500, -0.125]"
    assert (
        blind_vs_model_cell({**paired, "adjusted_p": None, "adjusted_verdict": "x"})
        == "model above blind: b -0.250 [-0.500, -0.125]"
    )
    adjusted = {**paired, "adjusted_p": 0.0, "adjusted_verdict": "model above blind", "adjustment": "holm", "n_adjusted": 2}
    assert (
        blind_vs_model_cell(adjusted)
        == "model above blind (holm over 2; unadjusted model above blind): b -0.250 [-0.500, -0.125]"
    )
    assert blind_vs_model_cell(None) == "-" and blind_vs_model_cell({}) == "-"


def test_the_figure_draws_each_subset_s_numbers_and_drops_empty_series(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def drawn_files(kind: str, inputs: Any, draw: Any) -> dict[str, bytes]:
        seen.update(kind=kind, inputs=inputs)
        return dict(draw())

    monkeypatch.setattr(report, "drawn_files", drawn_files)
    monkeypatch.setattr(report, "_draw_figure", lambda names, series, title: json.dumps([names, series, title]).encode())
    audit = _audit()
    audit.audits[1].metrics["caption_probe_acc"] = None
    names, series, title = json.loads(report.figure_bytes(audit))
    assert names == ["s1", "s2"] and title == "cola: model vs blind baselines"
    assert series == {
        "model": [0.9, 0.9],
        "caption-only probe": [0.6, None],
        "best length rule": [0.75, 0.625],  # the better of shortest and longest, per subset
        "word-frequency rule": [None, 0.375],
        "CycleAcc (paired cycles)": [0.5, None],
    }
    assert list(series) == ["model", "caption-only probe", "best length rule", "word-frequency rule", "CycleAcc (paired cycles)"]
    assert seen["inputs"] == {"names": names, "series": list(series.items()), "title": title}
    assert seen["inputs"]["series"][0] == ("model", [0.9, 0.9])
    assert seen["kind"] == f"benchmark audit figure {report.drawing_code(report.__file__)}"
    for sub in audit.audits:  # a series with no value anywhere is not drawn
        sub.metrics.update(word_frequency_acc=None, model_acc=None)
        sub.metrics["cycles"] = {"n_cycles": 0}
    _, series, _ = json.loads(report.figure_bytes(audit))
    assert list(series) == ["caption-only probe", "best length rule"]


def test_the_three_files_and_where_they_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "figure_bytes", lambda audit: b"PNG of " + audit.benchmark.encode())
    audit = _audit()
    files, table = output_files(audit, tmp_path)
    assert sorted(files) == ["audit_cola.json", "audit_cola.md", "audit_cola.png"]
    assert json.loads(files["audit_cola.json"]) == {"dataset": "audit/cola", "metrics": {"n": 20}}
    assert files["audit_cola.md"] == table.encode("utf-8") and table == markdown_table(audit)
    assert files["audit_cola.png"] == b"PNG of cola"
    path, written = write_outputs(audit, tmp_path / "out")
    assert path == tmp_path / "out" / "audit_cola.json" and written == table
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["audit_cola.json", "audit_cola.md", "audit_cola.png"]
    assert (tmp_path / "out" / "audit_cola.png").read_bytes() == b"PNG of cola"
    assert json.loads(path.read_text()) == {"dataset": "audit/cola", "metrics": {"n": 20}}


def test_write_outputs_names_its_flag_to_the_file_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Path, list[str], str]] = []
    monkeypatch.setattr(report, "figure_bytes", lambda audit: b"PNG")
    monkeypatch.setattr(report, "write_file_set", lambda folder, files, what: calls.append((folder, sorted(files), what)))
    write_outputs(_audit(), str(tmp_path / "o"))
    assert calls == [(tmp_path / "o", ["audit_cola.json", "audit_cola.md", "audit_cola.png"], "audit-benchmark --out")]
