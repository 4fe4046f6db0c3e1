"""The record vocabulary: writing, cleaning and summarizing result records, and the one spelling of each key.

Expected values are computed here with the standard library (``statistics``, hand-written
JSON text), never with clip_cycles.results itself.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path

import numpy as np
import pytest
from record_vocabulary import assert_one_vocabulary, old_spellings

from clip_cycles.heads.additive_audit import additive_audit
from clip_cycles.results import (
    DEFAULT_OUTPUT,
    RESULT_TASK,
    benchmark_record,
    clean,
    mean_sd,
    output_path,
    write_json,
)

# --------------------------------------------------------------------------- write_json


def test_write_json_sorts_indents_ends_with_a_newline_and_creates_the_folder(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "r.json"
    returned = write_json({"b": 1, "a": [1.5, None], "c": {"z": "é", "y": True}}, path)
    assert returned == path
    expected = '{\n  "a": [\n    1.5,\n    null\n  ],\n  "b": 1,\n  "c": {\n    "y": true,\n    "z": "\\u00e9"\n  }\n}\n'
    assert path.read_bytes() == expected.encode("ascii")
    assert write_json({"a": 1}, str(tmp_path / "s.json")) == tmp_path / "s.json"  # a str path is a path


def test_write_json_is_atomic_an_interrupted_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.json"
    write_json({"run": 1}, path)
    old = path.read_bytes()

    def interrupted(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("clip_cycles.outputs.os.replace", interrupted)
    with pytest.raises(OSError, match="disk full"):
        write_json({"run": 2}, path)
    assert path.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temporary file left behind
    monkeypatch.setattr("clip_cycles.outputs.os.replace", os.replace)
    with pytest.raises(TypeError):  # not serializable: nothing is written at all
        write_json({"run": object()}, path)
    assert path.read_bytes() == old


# --------------------------------------------------------------------------- clean


def test_clean_turns_numpy_and_non_finite_values_into_plain_json() -> None:
    value = {
        1: np.float32(0.25),
        "i": np.int64(7),
        "b": np.bool_(True),
        "nan": float("nan"),
        "inf": np.float64(np.inf),
        "t": (np.int32(1), [np.float64(-np.inf), 2.5]),
        "a": np.array([[1, 2], [3, 4]], dtype=np.int16),
        "s": "text",
        "none": None,
        "py": [True, 3],
    }
    out = clean(value)
    assert out == {
        "1": 0.25,
        "i": 7,
        "b": True,
        "nan": None,
        "inf": None,
        "t": [1, [None, 2.5]],
        "a": [[1, 2], [3, 4]],
        "s": "text",
        "none": None,
        "py": [True, 3],
    }
    types = {k: type(v) for k, v in out.items()}
    assert types["1"] is float and types["i"] is int and types["b"] is bool and types["t"] is list
    assert type(out["t"][0]) is int and type(out["a"][0][0]) is int
    assert type(out["py"][0]) is bool  # a Python bool stays a bool (not 1)
    # float32 values keep their exact binary value, as float() gives it.
    assert clean(np.float32(0.1)) == float(np.float32(0.1)) != 0.1


def _clean_by_isinstance(value):
    """The general rule alone (as clean was before its exact-type fast path): the reference it must equal."""
    from collections.abc import Mapping

    if isinstance(value, Mapping):
        return {str(k): _clean_by_isinstance(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean_by_isinstance(v) for v in value]
    if isinstance(value, np.ndarray):
        return _clean_by_isinstance(value.tolist())
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def test_clean_by_exact_type_equals_the_general_rule_on_nested_values_and_subclasses() -> None:
    from collections import OrderedDict

    class Ratio(float):
        pass

    class Name(str):
        pass

    rng = np.random.default_rng(0)
    leaves = [0.5, float("nan"), -float("inf"), Ratio(2.5), Ratio("nan"), 3, True, False, None, "x", Name("y"),
              np.float32(0.1), np.int8(-3), np.bool_(False), np.array([1.5, np.nan]), (1, 2.0)]  # fmt: skip

    def build(depth: int):
        if depth == 0 or rng.random() < 0.3:
            return leaves[int(rng.integers(len(leaves)))]
        kind = int(rng.integers(4))
        children = [build(depth - 1) for _ in range(int(rng.integers(0, 4)))]
        if kind == 0:
            return {k if rng.random() < 0.5 else int(k): c for k, c in zip(("1", "2", "3"), children)}
        if kind == 1:
            return OrderedDict((f"k{i}", c) for i, c in enumerate(children))
        return children if kind == 2 else tuple(children)

    for _ in range(300):
        value = build(4)
        got, want = clean(value), _clean_by_isinstance(value)
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
        assert repr(got) == repr(want)  # the same types too (a Ratio stays a float subclass's float, a bool a bool)


# --------------------------------------------------------------------------- mean_sd


@pytest.mark.parametrize(
    "values", [[0.5, 0.7, 0.9], [1.0, 3.0], [0.25, 0.25, 0.75, 1.0, 0.0], list(np.random.default_rng(3).uniform(size=7))]
)
def test_mean_sd_is_the_mean_and_the_sample_sd(values: list[float]) -> None:
    got = mean_sd(values)
    assert set(got) == {"mean", "sd"}
    assert got["mean"] == pytest.approx(statistics.fmean(values), rel=1e-13, abs=1e-15)
    assert got["sd"] == pytest.approx(statistics.stdev(values), rel=1e-12)
    # The planted bug this tells apart: a population sd (ddof=0) is smaller by sqrt((n-1)/n).
    assert got["sd"] != pytest.approx(statistics.pstdev(values), rel=1e-6)


def test_mean_sd_of_one_value_and_numpy_inputs() -> None:
    assert mean_sd([0.5]) == {"mean": 0.5, "sd": 0.0}
    assert mean_sd(np.array([1.0, 3.0], dtype=np.float32)) == {"mean": 2.0, "sd": math.sqrt(2.0)}
    assert mean_sd([np.int64(1), 2, np.float64(6.0)]) == {"mean": 3.0, "sd": math.sqrt(7.0)}
    assert type(mean_sd([1, 2])["mean"]) is float
    assert mean_sd((x for x in [2.0, 4.0]), count=True) == {"mean": 3.0, "sd": math.sqrt(2.0), "n": 2}


def test_mean_sd_strict_by_default_names_the_bad_value() -> None:
    with pytest.raises(ValueError, match=r"^mean_sd: value 1 is nan, not a finite number"):
        mean_sd([0.5, float("nan")])
    with pytest.raises(ValueError, match=r"^mean_sd: value 0 is None, not a finite number"):
        mean_sd([None, 0.5])
    with pytest.raises(ValueError, match=r"^mean_sd: value 2 is inf"):
        mean_sd([0.5, 0.5, np.inf])
    with pytest.raises(ValueError, match=r"^mean_sd: value 0 is True"):
        mean_sd([True])
    with pytest.raises(ValueError, match="^mean_sd needs at least one value$"):
        mean_sd([])


def test_mean_sd_skip_missing_leaves_out_what_is_not_a_finite_number() -> None:
    values = [0.5, None, float("nan"), 0.9, np.inf, "x", False, 0.7]
    kept = [0.5, 0.9, 0.7]
    got = mean_sd(values, skip_missing=True, count=True)
    assert got["n"] == 3
    assert got["mean"] == pytest.approx(statistics.fmean(kept), rel=1e-15)
    assert got["sd"] == pytest.approx(statistics.stdev(kept), rel=1e-12)
    assert mean_sd([None, float("nan")], skip_missing=True) == {"mean": None, "sd": None}
    assert mean_sd([], skip_missing=True, count=True) == {"mean": None, "sd": None, "n": 0}
    assert mean_sd([None, 0.25], skip_missing=True) == {"mean": 0.25, "sd": 0.0}


# --------------------------------------------------------------------------- clip_benchmark records


def test_benchmark_record_and_output_path_follow_clip_benchmark(tmp_path: Path) -> None:
    record = benchmark_record("cycles/shapes_x", "ViT-B-32", None, {"cycle_acc": 0.5})
    assert record == {
        "dataset": "cycles/shapes_x",
        "model": "ViT-B-32",
        "pretrained": "",
        "task": "cycles",
        "metrics": {"cycle_acc": 0.5},
        "language": "en",
    }
    assert RESULT_TASK == "cycles"
    assert (
        output_path(DEFAULT_OUTPUT, "cycles/shapes_x", "ViT-B-32", "openai") == "cycles_shapes_x_openai_ViT-B-32_en_cycles.json"
    )
    weights = tmp_path / "ckpt" / "model.pt"
    weights.parent.mkdir()
    weights.write_bytes(b"w")
    template = "{pretrained}|{pretrained_full_path}|{task}|{language}"
    assert output_path(template, "d", "m", str(weights), "fr", "audit") == (f"model.pt|{str(weights).replace('/', '_')}|audit|fr")
    assert output_path(template, "d", "m", "laion/x") == "laion/x|laion/x|cycles|en"  # not a file: as given


# --------------------------------------------------------------------------- one spelling per key


def test_the_vocabulary_check_finds_old_spellings_at_any_depth() -> None:
    record = {
        "tie_tolerance": 1e-9,
        "families": {"a": {"available": False, "reason": "too few"}},
        "per_seed": [{"tie_tol": 1e-9}],
        "unavailable_reason": "x",
        "unavailable": {"reason": "a name"},
    }
    assert old_spellings(record) == ["families.a.reason", "per_seed.0.tie_tol", "unavailable.reason"]
    with pytest.raises(AssertionError, match=r"families\.a\.reason \(use 'unavailable_reason'\)"):
        assert_one_vocabulary(record)
    assert_one_vocabulary({"tie_tolerance": 1e-9, "families": {"a": {"unavailable_reason": "too few"}}})


def test_the_additive_audit_report_spells_the_tie_tolerance_one_way() -> None:
    rng = np.random.default_rng(0)
    phi, psi = rng.normal(size=(12, 4)), rng.normal(size=(12, 4))
    cycles = np.array([[i, (i + 1) % 12, (i + 2) % 12, (i + 5) % 12] for i in range(12)])
    report = additive_audit(phi, psi, cycles, cycles, epochs=1, seed=0).to_dict()
    assert report["tie_tolerance"] == 1e-9
    assert_one_vocabulary({"metrics": {"additive_audit": {"per_seed": {"0": report}}}})


# --------------------------------------------------------------------------- flat result files and their detail


def _nested_metrics() -> dict:
    ci = {"low": 0.4, "high": 0.6, "level": 0.95, "n_resamples": 1000, "seed": 0, "method": "percentile", "unit": "cycle"}
    return {
        "cycle_acc": 0.5,
        "cycle_acc_ci": ci,
        "acc": 0.5,
        "seeds": [0, 10],
        "per_seed": {"10": {"cycle_acc": 0.25, "cycle_acc_ci": {**ci, "low": 0.1}}, "0": {"cycle_acc": 0.75}},
        "additive_audit": {"passed": True, "per_seed": {"0": {"passed": False, "failures": ["text"], "witness": None}}},
        "cs": None,
    }


def test_flat_metrics_names_every_number_and_leaves_text_to_the_detail() -> None:
    from clip_cycles.results import flat_metrics

    flat = flat_metrics(_nested_metrics())
    assert flat == {
        "acc": 0.5,
        "additive_audit_passed": 1,
        "additive_audit_seed0_passed": 0,
        "ci_level": 0.95,
        "ci_n_resamples": 1000,
        "ci_seed": 0,
        "cs": None,
        "cycle_acc": 0.5,
        "cycle_acc_ci_high": 0.6,
        "cycle_acc_ci_low": 0.4,
        "seed0_cycle_acc": 0.75,
        "seed10_cycle_acc": 0.25,
        "seed10_cycle_acc_ci_high": 0.6,
        "seed10_cycle_acc_ci_low": 0.1,
        "seeds_0": 0,
        "seeds_1": 10,
    }
    assert flat_metrics({"available": False, "unavailable_reason": "too few cycles", "n_cycles": 0}) == {
        "available": 0,
        "unavailable_reason": "too few cycles",
        "n_cycles": 0,
    }


def test_write_result_keeps_the_nested_record_beside_the_flat_file(tmp_path: Path) -> None:
    from clip_cycles.results import benchmark_record, detail_path, read_result, write_result

    record = benchmark_record("cycles/x", "m", "p", _nested_metrics())
    path = write_result(record, tmp_path / "x.json")
    flat = json.loads(path.read_text())
    assert flat["metrics"]["seed10_cycle_acc"] == 0.25 and "per_seed" not in flat["metrics"]
    assert detail_path(path) == tmp_path / "x.detail.jsonl" and not detail_path(path).name.endswith(".json")
    assert read_result(path) == json.loads(json.dumps(record))
    first = path.read_bytes() + detail_path(path).read_bytes()
    write_result(record, path)
    assert path.read_bytes() + detail_path(path).read_bytes() == first  # same record, same bytes
    # A detail that no longer matches its file (the file rewritten by another tool) is not used.
    edited = {**flat, "metrics": {**flat["metrics"], "cycle_acc": 0.9}}
    path.write_text(json.dumps(edited))
    assert read_result(path) == edited
    other = {**flat, "model": "other"}
    path.write_text(json.dumps(other))
    assert read_result(path) == other
    detail_path(path).write_text("{not json")
    with pytest.raises(ValueError, match=r"x\.detail\.jsonl is not valid JSON"):
        read_result(path)


def test_read_result_refuses_what_is_not_a_record(tmp_path: Path) -> None:
    from clip_cycles.results import read_result

    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_result(tmp_path / "missing.json")
    (tmp_path / "a.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="field 'metrics' is missing"):
        read_result(tmp_path / "a.json")
    (tmp_path / "b.json").write_text("{")
    with pytest.raises(ValueError, match="b.json is not valid JSON"):
        read_result(tmp_path / "b.json")
