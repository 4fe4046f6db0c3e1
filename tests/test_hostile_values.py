"""Hostile values, replayed on every run (issue 38): each case is a sentence naming the file and field, never a
traceback or a wrong number, and the real formats still read.

Values checked where they are read (result records), parsers bounded (one JSON helper), weights checked
before loading, one format gate over every reader of a built folder.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from clip_cycles.commands.main import main
from clip_cycles.regular_files import MAX_JSON_DEPTH, JSONLimitError, load_json_text, read_json_file
from clip_cycles.results import benchmark_record, read_result, write_result
from clip_cycles.schemas.result import check_result_record

DEEP = 200_000


def _record(**metrics: object) -> dict:
    base = {
        "cycle_acc": 0.75,
        "cycle_acc_sd": 0.05,
        "n_cycles": 12,
        "n_images": 48,
        "cycle_acc_ci": {"method": "percentile", "low": 0.6, "high": 0.9, "level": 0.95, "n_resamples": 1000, "seed": 0},
        "tie_tolerance": 1e-9,
    }
    return benchmark_record("cycles/shapes_strict_size", "ViT-B-32", None, {**base, **metrics})


def _flat_result(tmp_path: Path, raw_value: str, field: str = "cycle_acc") -> Path:
    """A result file as write_result writes it, with ``field`` replaced by the JSON text ``raw_value``."""
    path = write_result(_record(), tmp_path / "results" / "r.json")
    path.with_name("r.detail.jsonl").unlink()  # the flat record alone, as a foreign tool may leave it
    flat = json.loads(path.read_text())
    flat["metrics"][field] = "@@"
    path.write_text(json.dumps(flat).replace('"@@"', raw_value))
    return path


# --- values checked where they are read -----------------------------------------------------------------------


def test_a_real_result_reads_back_with_its_nested_detail(tmp_path: Path) -> None:
    path = write_result(_record(), tmp_path / "r.json")
    record = read_result(path)
    assert record["metrics"]["cycle_acc"] == 0.75 and record["metrics"]["cycle_acc_ci"]["low"] == 0.6
    check_result_record(record, "here")  # the nested record is a valid declared record too
    assert read_result(_flat_result(tmp_path / "flat", "0.5"))["metrics"]["cycle_acc"] == 0.5


@pytest.mark.parametrize(
    ("field", "raw", "message"),
    [
        ("cycle_acc", "1e308", r"field 'metrics\.cycle_acc' is 1e\+308; must be a number in \[0, 1\]"),
        ("cycle_acc", "-5", r"field 'metrics\.cycle_acc' is -5; must be a number in \[0, 1\]"),
        ("cycle_acc", '"0.5"', r"field 'metrics\.cycle_acc' is '0\.5'; must be a number in \[0, 1\]"),
        ("cycle_acc", "true", r"field 'metrics\.cycle_acc' is True; must be a number in \[0, 1\]"),
        ("cycle_acc", "NaN", r"holds NaN, which standard JSON does not allow"),
        ("cycle_acc", "1" + "0" * 400, r"holds an integer of 401 digits, more than the 40 allowed"),
        ("cycle_acc_ci_low", "1.5", r"field 'metrics\.cycle_acc_ci_low' is 1\.5; must be a number in \[0, 1\]"),
        ("n_cycles", "-3", r"field 'metrics\.n_cycles' is -3; must be a non-negative integer"),
        ("n_cycles", "2.5", r"field 'metrics\.n_cycles' is 2\.5; must be a non-negative integer"),
        ("n_images", "false", r"field 'metrics\.n_images' is False; must be a non-negative integer"),
    ],
)
def test_a_result_value_no_run_could_produce_is_a_sentence_naming_file_and_field(
    tmp_path: Path, field: str, raw: str, message: str
) -> None:
    path = _flat_result(tmp_path, raw, field)
    with pytest.raises(ValueError, match=message) as error:
        read_result(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("raw", ["1e308", "-5", "NaN", "1" + "0" * 400])
def test_the_page_refuses_such_a_value_with_exit_2_instead_of_rendering_it(
    tmp_path: Path, raw: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _flat_result(tmp_path, raw)
    assert main(["page", str(path.parent), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "Traceback" not in err
    assert not (tmp_path / "site" / "index.html").exists()


@pytest.mark.parametrize(
    ("metrics", "field"),
    [
        ({"cycle_acc": float("nan")}, "metrics.cycle_acc"),
        ({"cycle_acc": 1e308}, "metrics.cycle_acc"),
        ({"text_acc": -0.1}, "metrics.text_acc"),
        ({"cycle_acc": True}, "metrics.cycle_acc"),
        ({"cycle_acc": "high"}, "metrics.cycle_acc"),
        ({"cycle_acc": {"mean": 1.5, "sd": 0.0}}, "metrics.cycle_acc.mean"),
        ({"per_seed": {"0": {"cycle_acc": 2.0}}}, "metrics.per_seed.0.cycle_acc"),
        ({"cycle_acc_ci": {"method": "percentile", "low": -0.2, "high": 0.9}}, "metrics.cycle_acc_ci.low"),
        ({"n_cycles": -1}, "metrics.n_cycles"),
        ({"n_cycles": True}, "metrics.n_cycles"),
        ({"averaged_over": {"*_acc": 7}}, "metrics.averaged_over.*_acc"),
    ],
)
def test_the_result_schema_bounds_metric_fields(metrics: dict, field: str) -> None:
    with pytest.raises(ValueError, match=rf"here: result record field 'metrics': field '{field}' is "):
        check_result_record(_record(**metrics), "here")


def test_averaged_over_sentences_keyed_by_metric_names_are_descriptions_not_values() -> None:
    # The audit records name the set each accuracy averages over: a sentence under "*_acc" is valid.
    described = {"cycle_acc": 0.5, "averaged_over": {"*_acc": "the subset's comparisons", "n_cycles": "exact cycles"}}
    check_result_record(_record(**described), "here")  # no error
    with pytest.raises(ValueError, match=r"averaged_over.n_cycles' is 3; must be a sentence"):
        check_result_record(_record(averaged_over={"n_cycles": 3}), "here")


def test_the_shipped_json_schema_bounds_accuracies_and_counts_too() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from clip_cycles.tasks.schema_command import shipped_schema_dir

    schema = json.loads((shipped_schema_dir() / "result.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    assert list(validator.iter_errors(_record())) == []
    for bad in ({"cycle_acc": 1e308}, {"cycle_acc": -5}, {"cycle_acc": "0.5"}, {"cycle_acc": True}, {"n_cycles": -1}):
        assert list(validator.iter_errors(_record(**bad))) != [], bad


# --- parsers bounded ------------------------------------------------------------------------------------------


def test_a_200000_deep_result_file_is_a_sentence_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"metrics": ' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(JSONLimitError, match=rf"{DEEP + 1} levels deep, more than the {MAX_JSON_DEPTH} allowed"):
        read_result(path)


def test_the_json_helper_counts_brackets_outside_strings_only_and_reads_real_json() -> None:
    text = json.dumps({"caption": "[[[[{{{{" * 100, "rows": [[1, 2], {"a": [3]}], "id": 123456789012})
    assert load_json_text(text, "x") == json.loads(text)
    assert load_json_text(("[" * MAX_JSON_DEPTH) + ("]" * MAX_JSON_DEPTH), "x") is not None  # at the limit: read
    with pytest.raises(JSONLimitError, match="x holds the number '1e999', too large for a float"):
        load_json_text('{"a": 1e999}', "x")
    with pytest.raises(JSONLimitError, match="x holds Infinity"):
        load_json_text('{"a": Infinity}', "x")


def test_a_200000_deep_sugarcrepe_file_is_a_sentence(tmp_path: Path) -> None:
    from clip_cycles.benchmark_audit.adapters import _read_json

    path = tmp_path / "replace_att.json"
    path.write_text("[" * DEEP + "]" * DEEP)
    with pytest.raises(ValueError, match=rf"{path} nests arrays or objects {DEEP} levels deep"):
        _read_json(path)


def test_a_deep_or_huge_samples_line_is_a_sentence_naming_the_line(tmp_path: Path) -> None:
    from clip_cycles.evaluation.compare import read_samples

    path = tmp_path / "samples.jsonl"
    path.write_text("[" * DEEP + "]" * DEEP + "\n")
    with pytest.raises(ValueError, match=rf"samples file {path}, line 1 nests arrays or objects"):
        read_samples(path)
    path.write_text('{"seed": ' + "9" * 5000 + "}\n")
    with pytest.raises(ValueError, match=rf"samples file {path}, line 1 holds an integer of 5000 digits"):
        read_samples(path)


def test_read_json_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("[" * 100 + "]" * 100)
    with pytest.raises(ValueError, match=rf"split file {path} nests arrays or objects 100 levels deep"):
        read_json_file(path, 1 << 20, "split file")


@pytest.mark.parametrize("flag", [["--seeds", "99999999999999999999"], ["--seeds", "4294967296"], ["--model-seed", "9" * 30]])
def test_huge_seed_flags_are_a_sentence(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "--task", "cycles/shapes_strict_size", "--model", "cycles-tiny", *flag])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "seeds are 0 to 4294967295" in err and "Traceback" not in err


# --- weights checked before loading ---------------------------------------------------------------------------


def _lying_safetensors(path: Path) -> Path:
    """A safetensors file whose header declares a 2^40-byte tensor in a 40-byte file."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [2**38], "data_offsets": [0, 2**40]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 40)
    return path


def _open_clip_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    config = {
        "model_cfg": {
            "embed_dim": 32,
            "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 8, "head_width": 32},
            "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 1},
        },
        "preprocess_cfg": {},
    }
    (folder / "open_clip_config.json").write_text(json.dumps(config))
    return folder


def _hf_folder(folder: Path, preprocessor: bool = True) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "clip"}))
    if preprocessor:
        (folder / "preprocessor_config.json").write_text(json.dumps({"image_processor_type": "CLIPImageProcessor"}))
    return folder


def test_a_lying_safetensors_header_is_refused_before_allocation_in_each_place(tmp_path: Path) -> None:
    from clip_cycles.encoding import backends

    hf = _hf_folder(tmp_path / "hf")
    _lying_safetensors(hf / "model.safetensors")
    with pytest.raises(ValueError, match=r"model\.safetensors: tensor 'w' ends at byte 1099511627776 of the data"):
        backends.load_model("hf", str(hf), None)
    local = _open_clip_folder(tmp_path / "local")
    _lying_safetensors(local / "open_clip_model.safetensors")
    with pytest.raises(ValueError, match=r"open_clip_model\.safetensors: tensor 'w' ends at byte 1099511627776"):
        backends.load_model("open_clip", f"local-dir:{local}", None)
    checkpoint = _lying_safetensors(tmp_path / "x.safetensors")
    with pytest.raises(ValueError, match=rf"checkpoint {checkpoint}: tensor 'w' ends at byte 1099511627776"):
        backends.load_model("open_clip", f"local-dir:{_open_clip_folder(tmp_path / 'plain')}", str(checkpoint))


def test_a_header_whose_shape_and_range_disagree_is_refused(tmp_path: Path) -> None:
    from clip_cycles.encoding.weights_files import check_weights_file

    header = json.dumps({"w": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 8]}}).encode()
    path = tmp_path / "w.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    with pytest.raises(ValueError, match=r"tensor 'w' declares 4000 bytes \(F32 of shape \[1000\]\) in a range of 8"):
        check_weights_file(path)
    path.write_bytes(struct.pack("<Q", 2**60) + header)
    with pytest.raises(ValueError, match=r"declares a 1152921504606846976-byte header"):
        check_weights_file(path)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero to link to")
def test_weights_linked_to_a_device_are_refused_by_name(tmp_path: Path) -> None:
    from clip_cycles.encoding import backends

    hf = _hf_folder(tmp_path / "hf")
    (hf / "model.safetensors").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=rf"{hf / 'model.safetensors'} \(a link to /dev/zero\) is a character device"):
        backends.load_model("hf", str(hf), None)
    local = _open_clip_folder(tmp_path / "local")
    (local / "open_clip_pytorch_model.bin").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=r"open_clip_pytorch_model\.bin \(a link to /dev/zero\) is a character device"):
        backends.load_model("open_clip", f"local-dir:{local}", None)
    link = tmp_path / "x.safetensors"
    link.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=rf"checkpoint {link} \(a link to /dev/zero\) is a character device"):
        backends.load_model("open_clip", f"local-dir:{_open_clip_folder(tmp_path / 'plain')}", str(link))


def test_an_hf_folder_without_preprocessor_config_names_the_file_and_the_fix(tmp_path: Path) -> None:
    from clip_cycles.encoding import backends

    hf = _hf_folder(tmp_path / "hf", preprocessor=False)
    with pytest.raises(ValueError, match=r"has no preprocessor_config\.json .*save_pretrained\(<folder>\)"):
        backends.load_model("hf", str(hf), None)


def test_real_safetensors_weights_pass_the_checks_and_load(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    from clip_cycles.encoding import backends
    from clip_cycles.encoding.weights_files import check_weights_file

    path = tmp_path / "w.safetensors"
    save_file(
        {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.zeros(0), "c": torch.ones(4, dtype=torch.bfloat16)},
        str(path),
    )
    check_weights_file(path)
    state = backends.load_weights_only(path)
    assert state["a"].tolist() == [[0, 1, 2], [3, 4, 5]] and state["c"].dtype == torch.bfloat16


# --- one format gate ------------------------------------------------------------------------------------------

NEWER = "folder format version 99 was written by a newer clip_cycles; this clip_cycles reads format version 1 and older"


@pytest.fixture
def newer_folder(shapes_cycles: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "newer"
    shutil.copytree(shapes_cycles, copy)
    info = json.loads((copy / "build_info.json").read_text())
    info["format_version"] = 99
    (copy / "build_info.json").write_text(json.dumps(info))
    return copy


def test_audit_refuses_a_newer_format_with_the_same_sentence(newer_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", str(newer_folder)]) == 2
    assert NEWER in capsys.readouterr().err


def test_load_split_and_page_refuse_a_newer_format_with_the_same_sentence(
    newer_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clip_cycles.data.folder_reader import load_split

    with pytest.raises(ValueError, match=NEWER):
        load_split(newer_folder, "strict_size", "test")
    results = tmp_path / "results"
    results.mkdir()
    (results / "build_info.json").write_text((newer_folder / "build_info.json").read_text())
    assert main(["page", str(results), "--out", str(tmp_path / "site")]) == 2
    assert NEWER in capsys.readouterr().err


def test_eval_refuses_a_newer_format_with_the_same_sentence(
    newer_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "--task", "cycles/shapes_strict_size", "--model", "cycles-tiny", "--dataset-root", str(newer_folder)]
    assert main([*argv, "--cache-dir", str(tmp_path / "cache"), "--num-workers", "0", "--output", "-"]) == 2
    assert NEWER in capsys.readouterr().err


def test_eval_with_a_lying_hf_folder_exits_2_with_the_sentence(
    shapes_cycles: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hf = _hf_folder(tmp_path / "hf")
    _lying_safetensors(hf / "model.safetensors")
    argv = ["eval", "--task", "cycles/shapes_strict_size", "--model-type", "hf", "--model", str(hf)]
    argv += ["--dataset-root", str(shapes_cycles), "--cache-dir", str(tmp_path / "cache"), "--num-workers", "0"]
    assert main([*argv, "--output", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "tensor 'w' ends at byte 1099511627776" in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


def test_the_clip_benchmark_plugin_refuses_a_newer_format_with_the_same_sentence(
    newer_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("clip_benchmark")
    from clip_cycles.commands.clip_benchmark import main as plugin_main

    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "cache"))
    argv = ["eval", "--dataset", "cycles/shapes_strict_size", "--model", "cycles-tiny", "--dataset_root", str(newer_folder)]
    argv += ["--num_workers", "0", "--output", str(tmp_path / "{dataset}_{task}.json")]
    try:
        code = plugin_main(argv)
    except SystemExit as exit_:
        code = exit_.code
    assert code not in (0, None)
    assert NEWER in capsys.readouterr().err
    assert not list(tmp_path.glob("*.json"))
