"""A result file passed where a samples file belongs is named as one, and nothing else is (issue 56).

The sentences are written out in full here; the cases are hand-made files of each kind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clip_cycles.evaluation.samples import _result_file_problem, read_samples


def _sentence(path: Path, named: str = "") -> str:
    return (
        f"{path} is a result file (clip-cycles eval --output: a task's metrics), not a per-cycle samples file; "
        f"pass the samples file that eval wrote with --samples{named}"
    )


def test_a_pretty_printed_result_is_named_as_a_result(tmp_path: Path) -> None:
    path = tmp_path / "cycles_shapes.json"
    path.write_text(json.dumps({"dataset": "cycles/shapes", "metrics": {"acc": 0.7}}, indent=2))
    with pytest.raises(ValueError) as caught:
        read_samples(path)
    assert str(caught.value) == _sentence(path)


def test_a_detail_line_names_its_own_samples_file(tmp_path: Path) -> None:
    path = tmp_path / "out" / "r.detail.jsonl"
    path.parent.mkdir()
    line = {"metrics": {"acc": 0.5}, "samples": {"path": "s.jsonl", "sha256": "0" * 64}}
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(ValueError) as caught:
        read_samples(path)
    assert str(caught.value) == _sentence(path, f" (this result's samples: {tmp_path / 'out' / 's.jsonl'})")
    # A samples entry without a string path names none.
    for samples in ({"path": 3}, ["s.jsonl"], None):
        text = json.dumps({"metrics": {}, "samples": samples})
        assert _result_file_problem(path, text.encode(), text) == _sentence(path)


def test_a_deep_first_line_is_parsed_whole_and_still_named(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    nested: object = 1
    for _ in range(20):  # more brackets on the line than the flat reader looks at
        nested = [nested]
    text = json.dumps({"metrics": {"acc": 0.5}, "deep": nested})
    assert text.count("[") + text.count("{") > 16
    assert _result_file_problem(path, text.encode(), text) == _sentence(path)
    # The same depth in something that is not a result: not named (the line reader names its problem).
    other = json.dumps({"deep": nested})
    assert _result_file_problem(path, other.encode(), other) is None


def test_samples_lines_objects_without_metrics_and_non_json_are_not_results(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = json.dumps({"cycle_id": "c1", "metrics": {"acc": 1.0}})  # a cycle line passes even with a metrics key
    assert _result_file_problem(path, first.encode(), first) is None
    for text in ('{"acc": 0.5}', "[1, 2]", '"metrics"', "not json at all", "{"):
        assert _result_file_problem(path, text.encode(), text) is None, text
    # A first line that is not JSON but a whole file that is a result: the file is parsed whole.
    whole = '{\n  "metrics": {"acc": 0.5}\n}'
    assert _result_file_problem(path, whole.encode(), "{") == _sentence(path)
    # A first line that parses to a list is not a result, whatever follows.
    assert _result_file_problem(path, b'[{"metrics": 1}]', '[{"metrics": 1}]') is None


def _cycle_line(seed: int, cycle: str) -> dict:
    return {"task": "cycles/f", "seed": seed, "split": "test", "cycle_id": cycle, "image_0": "u.jpg", "image_1": "v.jpg",
            "caption_0": "x", "caption_1": "y", "s11": 0.5, "s12": 0.25, "s21": 0.0, "s22": 0.5, "delta": 0.75,
            "credit": 1.0}  # fmt: skip


def test_flat_valid_lines_are_read_in_one_pass_without_the_line_reader(tmp_path: Path, monkeypatch) -> None:
    from clip_cycles.evaluation import samples

    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(_cycle_line(s, c)) + "\n" for s in (0, 1) for c in ("c0", "c1", "c2")))

    def line_reader(*args, **kwargs):
        raise AssertionError("the line-by-line reader ran on a valid flat file")

    monkeypatch.setattr(samples, "_line_value", line_reader)
    out = read_samples(path)
    assert sorted(out["cycles/f"]) == [(s, c) for s in (0, 1) for c in ("c0", "c1", "c2")]


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_a_line_nested_past_the_recursion_limit_is_a_sentence_not_a_recursion_error(tmp_path: Path, opener: str) -> None:
    # Deep lines never reach the one-pass parser (it would recurse); the bounded reader names the line.
    closer = "]" if opener == "[" else "}"
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(_cycle_line(0, "c0")) + "\n" + opener * 5000 + "1" + closer * 5000 + "\n")
    with pytest.raises(ValueError, match=rf"^samples file {path}, line 2"):
        read_samples(path)


def test_a_non_finite_value_is_refused_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    line = json.dumps(_cycle_line(0, "c0")).replace('"delta": 0.75', '"delta": NaN')
    path.write_text(json.dumps(_cycle_line(0, "c1")) + "\n" + line + "\n")
    with pytest.raises(ValueError) as caught:
        read_samples(path)
    assert str(caught.value) == (
        f"samples file {path}, line 2 holds NaN, which standard JSON does not allow; give a finite number or null"
    )


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_a_first_line_nested_past_the_recursion_limit_is_a_sentence_too(tmp_path: Path, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    path = tmp_path / "s.jsonl"
    path.write_text('{"metrics": {}, "deep": ' + opener * 5000 + "1" + closer * 5000 + "}\n")
    with pytest.raises(ValueError, match=rf"^samples file {path}, line 1"):
        read_samples(path)


def test_a_detail_file_of_several_result_lines_is_named_by_its_first_line(tmp_path: Path) -> None:
    path = tmp_path / "r.detail.jsonl"
    lines = [{"metrics": {"acc": 0.5}, "samples": {"path": "s.jsonl"}}, {"metrics": {"acc": 0.6}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(ValueError) as caught:
        read_samples(path)
    assert str(caught.value) == _sentence(path, f" (this result's samples: {tmp_path / 's.jsonl'})")
