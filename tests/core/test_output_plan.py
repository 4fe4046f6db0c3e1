"""One output plan per command (issue 55): two outputs that name one file, or an output that names an input,
are refused with a sentence before any work (:func:`clip_cycles.outputs.plan_outputs`), and distinct paths pass.

Each collision kind is planted once: the same spelling, another spelling of the same path, a symbolic link
to a file, a symbolic link to a folder, a hard link, and an output over an input; then the commands that
use the plan (eval, compare, page, audit-benchmark, the experiments, build) refuse theirs before they work.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clip_cycles.cli import main
from clip_cycles.outputs import OutputCollision, plan_outputs

EVAL = ["--model", "cycles-tiny", "--task", "cycles/shapes_strict_size", "--device", "cpu", "--num-workers", "0"]


def test_distinct_outputs_and_inputs_pass_and_come_back_as_paths(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("{}\n")
    planned = plan_outputs(
        {"--output": tmp_path / "r.json", "--samples": str(tmp_path / "s.jsonl"), "--out": None},
        {"A": tmp_path / "in.jsonl", "B": None},
    )
    assert planned == {"--output": tmp_path / "r.json", "--samples": tmp_path / "s.jsonl"}


@pytest.mark.parametrize("spelling", ["same", "dot", "parent"])
def test_two_outputs_naming_one_new_file_are_refused(tmp_path: Path, spelling: str, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    other = {"same": "X.json", "dot": "./X.json", "parent": "sub/../X.json"}[spelling]
    with pytest.raises(OutputCollision) as refused:
        plan_outputs({"--output": "X.json", "--samples": other})
    assert str(refused.value) == (
        f"--output X.json and --samples {other} name the same file: one would overwrite the other; give each its own path"
    )
    assert not (tmp_path / "X.json").exists()


def test_a_symbolic_link_to_an_existing_output_is_the_same_file(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "r.json")
    with pytest.raises(OutputCollision, match=r"name the same file"):
        plan_outputs({"--output": tmp_path / "r.json", "--samples": tmp_path / "link.json"})


def test_a_new_file_through_a_linked_folder_is_the_same_file(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    with pytest.raises(OutputCollision, match=r"name the same file"):
        plan_outputs({"--output": tmp_path / "real" / "r.json", "--samples": tmp_path / "alias" / "r.json"})


def test_a_hard_link_to_an_input_is_the_input(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("{}\n")
    os.link(tmp_path / "a.jsonl", tmp_path / "hard.jsonl")
    with pytest.raises(OutputCollision) as refused:
        plan_outputs({"--out": tmp_path / "hard.jsonl"}, {"A": tmp_path / "a.jsonl"})
    assert str(refused.value) == (
        f"--out {tmp_path / 'hard.jsonl'} is the input A ({tmp_path / 'a.jsonl'}): an output never replaces what its "
        "command reads; give --out another path"
    )


def test_a_stream_may_take_several_outputs(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert plan_outputs({"--output": fifo, "--samples": fifo}, {"A": fifo}) == {"--output": fifo, "--samples": fifo}


# --- the commands: refused before any work -------------------------------------------------------------------


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scoring a task fails the test: a refusal must come before it."""

    def run_tasks(*args, **kwargs):  # noqa: ANN002, ANN003
        raise AssertionError("eval started its work")

    monkeypatch.setattr("clip_cycles.commands.eval.run_tasks", run_tasks)


@pytest.mark.parametrize("samples", ["X.json", "X.detail.jsonl"])
def test_eval_output_and_samples_on_one_file_are_refused_before_any_work(
    tmp_path: Path, shapes_world: Path, no_work: None, capsys, samples: str
) -> None:
    output, clash = tmp_path / "X.json", tmp_path / samples
    code = main(["eval", *EVAL, "--dataset-root", str(shapes_world), "--output", str(output), "--samples", str(clash)])
    err = capsys.readouterr().err
    assert code == 2, err
    label = "--output" if samples == "X.json" else "the detail file of --output"
    assert f"clip-cycles eval: error: {label} {clash} and --samples {clash} name the same file" in err
    assert list(tmp_path.iterdir()) == []


def test_eval_with_distinct_files_goes_on_to_its_work(tmp_path: Path, shapes_world: Path, no_work: None) -> None:
    args = ["eval", *EVAL, "--dataset-root", str(shapes_world), "--output", str(tmp_path / "X.json")]
    with pytest.raises(AssertionError, match="eval started its work"):
        main([*args, "--samples", str(tmp_path / "X.samples.jsonl")])


def test_compare_out_naming_an_input_is_refused_and_the_input_kept(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "A.jsonl", tmp_path / "B.jsonl"
    a.write_text("{}\n")
    b.write_text("{}\n")
    (tmp_path / "link.jsonl").symlink_to(b)
    for out, name, path in ((a, "A", a), (tmp_path / "link.jsonl", "B", b)):
        assert main(["compare", str(a), str(b), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"compare: error: --out {out} is the input {name} ({path}): an output never replaces" in err
    assert a.read_text() == b.read_text() == "{}\n"


def test_page_out_naming_a_results_folder_is_refused(tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    results.mkdir()
    assert main(["page", str(results), "--out", str(results)]) == 2
    assert f"--out {results} is the input RESULTS {results} ({results})" in capsys.readouterr().err


def test_audit_benchmark_out_naming_its_table_file_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "audit"
    out.mkdir()
    table = out / "audit_sugarcrepe.json"  # the input table sits where the audit's JSON would go
    table.write_text("[]")
    assert main(["audit-benchmark", "sugarcrepe", "--root", str(table), "--out", str(out)]) == 2
    assert f"--out's audit_sugarcrepe.json {table} is the input --root" in capsys.readouterr().err
    assert table.read_text() == "[]"


def test_an_experiment_out_naming_its_features_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    features = out / "probe.json"
    features.write_bytes(b"not read")
    assert main(["probe", "--features", str(features), "--out", str(out)]) == 2
    assert f"--out's probe.json {features} is the input --features" in capsys.readouterr().err
    assert features.read_bytes() == b"not read"


def test_build_out_naming_the_raw_root_is_refused(tmp_path: Path, capsys) -> None:
    root = tmp_path / "coco"
    root.mkdir()
    assert main(["build", "coco", "--coco-root", str(root), "--out", str(root)]) == 2
    assert f"--out {root} is the input --coco-root ({root})" in capsys.readouterr().err
    assert list(root.iterdir()) == []


def test_the_plugin_s_samples_on_its_result_file_are_refused_before_any_work(
    shapes_cycles: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    from clip_cycles.commands.clip_benchmark import main as plugin_main

    def run_tasks(*args, **kwargs):  # noqa: ANN002, ANN003
        raise AssertionError("the plugin started its work")

    monkeypatch.setattr("clip_cycles.integrations.clip_benchmark.run_tasks", run_tasks)
    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "cache"))
    output = tmp_path / "r.json"
    monkeypatch.setenv("CLIP_CYCLES_SAMPLES", str(output))
    args = ["eval", "--dataset", "cycles/shapes_strict_size", "--model", "cycles-tiny", "--pretrained", "shapes"]
    args += ["--dataset_root", str(shapes_cycles), "--num_workers", "0", "--output", str(output)]
    with pytest.raises(SystemExit) as exit_info:
        plugin_main(args)
    assert exit_info.value.code == 2
    assert f"--output {output} and CLIP_CYCLES_SAMPLES {output} name the same file" in capsys.readouterr().err
    assert not output.exists()


def test_splits_out_naming_an_input_is_refused_and_distinct_paths_go_on(tmp_path: Path, capsys) -> None:
    things = tmp_path / "things"
    things.mkdir()
    assert main(["splits", "--things-root", str(things), "--out", str(things)]) == 2
    assert f"--out {things} is the input --things-root ({things})" in capsys.readouterr().err
    npz = tmp_path / "out" / "results.json"  # an embeddings file where the results JSON would go
    npz.parent.mkdir()
    npz.write_bytes(b"kept")
    assert main(["splits", "--embeddings", f"m={npz}", "--out", str(npz.parent)]) == 2
    assert f"--out's results.json {npz} is the input --embeddings m={npz}" in capsys.readouterr().err
    assert npz.read_bytes() == b"kept"
    # Distinct paths pass the plan: the next sentence is about the flags, not the outputs.
    assert main(["splits", "--things-root", str(things), "--out", str(tmp_path / "elsewhere")]) == 2
    assert "give --things-root with --model MODEL" in capsys.readouterr().err
