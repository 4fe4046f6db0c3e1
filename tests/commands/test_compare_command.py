"""`clip-cycles compare A B`: paired by cycle id, refused on different cycles, one record per family."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from clip_cycles.commands.main import main


def _samples(task: str, credits: list[float], n_images: int, seed: int = 0, **changes: object) -> list[dict]:
    lines = []
    for i, credit in enumerate(credits):
        line = {
            "task": task,
            "seed": seed,
            "split": "test",
            "cycle_id": f"{task}-{i:03d}",
            "image_0": f"img{i % n_images}.png",
            "image_1": f"img{(i + 1) % n_images}.png",
            "caption_0": f"a {i}",
            "caption_1": f"b {i}",
            "s11": float(credit),
            "s12": 0.25,
            "s21": 0.25,
            "s22": 0.0,
            "delta": float(credit) - 0.5,
            "credit": float(credit),
        }
        lines.append({**line, **changes})
    return lines


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in reversed(lines)))  # order must not matter
    return path


def test_compare_writes_the_paired_difference_per_family(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    strong_a = [1.0] * 40
    strong_b = [0.0] * 36 + [1.0] * 4
    noise_a = rng.integers(0, 2, 50).astype(float).tolist()
    noise_b = [1.0 - x if i < 3 else x for i, x in enumerate(noise_a)]  # three cycles flip
    few = [1.0] * 10
    a = _samples("cycles/x", strong_a, 40) + _samples("cycles/y", noise_a, 50) + _samples("cycles/z", few, 10)
    b = _samples("cycles/x", strong_b, 40) + _samples("cycles/y", noise_b, 50) + _samples("cycles/z", [0.0] * 10, 10)
    out = tmp_path / "cmp.json"
    assert main(["compare", str(_write(tmp_path / "a.jsonl", a)), str(_write(tmp_path / "b.jsonl", b)), "--out", str(out)]) == 0
    families = json.loads(out.read_text())["families"]
    x, y, z = families["cycles/x"], families["cycles/y"], families["cycles/z"]
    assert (x["n_cycles"], x["n_images"]) == (40, 40)
    assert x["diff"] == pytest.approx(36 / 40) and x["verdict"] == "A above B" and x["ci_low"] > 0
    assert x["disagree_most"] == [f"0/cycles/x-{i:03d}" for i in range(10)]
    assert x["n_disagree"] == 36
    expected_y = float(np.mean(noise_a) - np.mean(noise_b))
    assert y["diff"] == pytest.approx(expected_y) and y["ci_low"] <= y["diff"] <= y["ci_high"]
    assert y["verdict"] == "within noise" and sorted(y["disagree_most"]) == [f"0/cycles/y-{i:03d}" for i in range(3)]
    assert z["verdict"] == "too few comparisons" and z["diff"] == 1.0  # below MIN_CYCLES and MIN_IMAGES
    assert "cycles/x: CycleAcc A 1.000, B 0.100; A - B = +0.900" in capsys.readouterr().out
    assert (x["cycle_acc_a"], x["cycle_acc_b"]) == (1.0, 0.1)


def test_swapping_the_files_negates_every_difference(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    credits_a = rng.choice([0.0, 0.5, 1.0], 60).tolist()
    credits_b = rng.choice([0.0, 0.5, 1.0], 60).tolist()
    pa = _write(tmp_path / "a.jsonl", _samples("t", credits_a, 25))
    pb = _write(tmp_path / "b.jsonl", _samples("t", credits_b, 25))
    main(["compare", str(pa), str(pb), "--out", str(tmp_path / "ab.json")])
    main(["compare", str(pb), str(pa), "--out", str(tmp_path / "ba.json")])
    ab = json.loads((tmp_path / "ab.json").read_text())["families"]["t"]
    ba = json.loads((tmp_path / "ba.json").read_text())["families"]["t"]
    assert ba["diff"] == pytest.approx(-ab["diff"])
    assert (ba["ci_low"], ba["ci_high"]) == pytest.approx((-ab["ci_high"], -ab["ci_low"]))


@pytest.mark.parametrize(
    ("b_lines", "message"),
    [
        (lambda: _samples("t", [1.0] * 39, 20), r"cycle sets differ \(1 only in A, 0 only in B; e\.g\. seed 0 cycle t-039\)"),
        (lambda: _samples("u", [1.0] * 40, 20), r"different tasks \(only in A: \['t'\], only in B: \['u'\]\)"),
        (lambda: _samples("t", [1.0] * 40, 20, caption_1="other"), r"cycle t-000 has caption_1 'b 0' in A and 'other' in B"),
        (lambda: _samples("t", [1.0] * 40, 20, items_sha256="f" * 64), r"item sets differ \(items_sha256"),
    ],
)
def test_different_cycles_are_refused_with_a_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], b_lines: object, message: str
) -> None:
    pa = _write(tmp_path / "a.jsonl", _samples("t", [1.0] * 40, 20, items_sha256="e" * 64))
    pb = _write(tmp_path / "b.jsonl", b_lines())  # type: ignore[operator]
    out = tmp_path / "cmp.json"
    assert main(["compare", str(pa), str(pb), "--out", str(out)]) != 0
    assert "are not the same cycles" in (err := capsys.readouterr().err) or "different tasks" in err
    assert re.search(message, err), err
    assert not out.exists()


def test_a_malformed_samples_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(tmp_path / "a.jsonl", _samples("t", [1.0] * 3, 3))
    bad = tmp_path / "b.jsonl"
    bad.write_text(json.dumps({"task": "t", "seed": 0, "cycle_id": "c"}) + "\n")
    assert main(["compare", str(good), str(bad)]) != 0
    assert f"samples file {bad}, line 1: field 'split' is missing" in capsys.readouterr().err


def test_compare_adjusts_the_families_with_holm_and_adds_a_joint_overall(tmp_path: Path) -> None:
    # Family x: a clear difference; families y1..y4: equal credits but on 5 of 60 cycles, where A wins
    # (raw p about 0.02): each called alone, none after Holm over five families.
    a, b = _samples("cycles/x", [1.0] * 40, 40), _samples("cycles/x", [0.0] * 36 + [1.0] * 4, 40)
    base = np.random.default_rng(0).integers(0, 2, 60).astype(float)
    ahead = np.arange(0, 60, 12)
    for k in range(1, 5):
        a += _samples(f"cycles/y{k}", np.where(np.isin(np.arange(60), ahead), 1.0, base).tolist(), 60)
        b += _samples(f"cycles/y{k}", np.where(np.isin(np.arange(60), ahead), 0.0, base).tolist(), 60)
    out = tmp_path / "cmp.json"
    assert main(["compare", str(_write(tmp_path / "a.jsonl", a)), str(_write(tmp_path / "b.jsonl", b)), "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    families = record["families"]
    assert record["adjustment"] == "holm"
    assert families["cycles/x"]["adjusted_verdict"] == "A above B" and families["cycles/x"]["n_adjusted"] == 5
    for k in range(1, 5):
        row = families[f"cycles/y{k}"]
        assert row["verdict"] == "A above B" and 0.0125 < row["p_value"] < 0.05  # the raw call stays in the record
        assert row["adjusted_p"] == pytest.approx(min(1.0, 4 * row["p_value"]), rel=1e-9)  # second to fifth Holm steps
        assert row["adjusted_verdict"] in ("within noise", "could not tell")
        assert row["interval_method"] == "two-way image-cluster robust, t (Bell-McCaffrey df)" and row["unit"] == "images"
    overall = record["overall"]
    assert overall["n_families"] == 5 and overall["diff"] == pytest.approx((0.9 + 4 * 5 / 60) / 5)
    assert overall["ci_low"] < overall["diff"] < overall["ci_high"]
    # The y families share their images (img0..img59): the joint interval is wider than treating them as independent.
    independent = np.sqrt(sum(((f["ci_high"] - f["ci_low"]) / 2) ** 2 for f in families.values())) / 5
    assert (overall["ci_high"] - overall["ci_low"]) / 2 > independent


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"credit": 5.66}, "credit", "0, 0.5 or 1"),
        ({"credit": -1.0}, "credit", "0, 0.5 or 1"),
        ({"seed": None}, "seed", "an integer"),
        ({"seed": [0]}, "seed", "an integer"),
        ({"seed": 0.5}, "seed", "an integer"),
        ({"delta": None}, "delta", "a finite number"),
        ({"delta": [1.0]}, "delta", "a finite number"),
        ({"s12": "0.3"}, "s12", "a finite number"),
    ],
)
def test_a_bad_value_is_one_sentence_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict, field: str, words: str
) -> None:
    good = _write(tmp_path / "a.jsonl", _samples("t", [1.0] * 3, 3))
    lines = _samples("t", [1.0] * 3, 3)
    lines[1] = {**lines[1], **change}
    bad = tmp_path / "b.jsonl"
    bad.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "cmp.json"
    assert main(["compare", str(good), str(bad), "--out", str(out)]) == 2  # a sentence and exit 2, never a traceback
    err = capsys.readouterr().err
    assert f"samples file {bad}, line 2: field {field!r}" in err and words in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_a_result_file_given_for_samples_says_so_and_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    samples = _write(tmp_path / "b.jsonl", _samples("cycles/x", [1.0] * 10, 10))
    pretty = tmp_path / "r.json"  # eval --output writes the flat result indented, over several lines
    pretty.write_text(json.dumps({"dataset": "cycles/x", "metrics": {"cycle_acc": 0.5}}, indent=2))
    detail = tmp_path / "r.detail.jsonl"  # the nested record names its samples file, relative to itself
    detail.write_text(json.dumps({"dataset": "cycles/x", "metrics": {}, "samples": {"path": "s.jsonl", "sha256": "0"}}) + "\n")
    for result, named in ((pretty, ""), (detail, f" (this result's samples: {tmp_path / 's.jsonl'})")):
        assert main(["compare", str(result), str(samples)]) == 2
        assert capsys.readouterr().err == (
            f"clip-cycles compare: error: {result} is a result file (clip-cycles eval --output: a task's metrics), not a "
            f"per-cycle samples file; pass the samples file that eval wrote with --samples{named}\n"
        )
    # A samples file whose lines are broken is still read line by line, not taken for a result.
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    assert main(["compare", str(broken), str(samples)]) == 2
    assert "samples file" in capsys.readouterr().err


def test_test_against_validation_samples_names_the_splits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    credits = [1.0, 0.0] * 20
    a = _write(tmp_path / "a.jsonl", _samples("cycles/x", credits, 40))
    b = _write(tmp_path / "b.jsonl", _samples("cycles/x", credits, 40, split="validation"))
    assert main(["compare", str(a), str(b)]) == 2  # the same cycle ids: without the check it compared them, exit 0
    assert capsys.readouterr().err == (
        f"clip-cycles compare: error: {a} and {b} are not the same cycles: cycles/x: the splits differ (A scored test, "
        "B scored validation); evaluate both models on the same split (clip-cycles eval --split)\n"
    )
    same = _write(tmp_path / "c.jsonl", _samples("cycles/x", credits, 40, split="validation"))
    assert main(["compare", str(b), str(same)]) == 0  # the same split on both sides is compared
