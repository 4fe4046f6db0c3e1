"""The experiment result cache: each declared key field misses when changed, a hit hands back the
cold run's exact value, a corrupt or foreign entry is refused with a note and recomputed; the
experiment commands and the demo reuse results and say so, and a changed option recomputes only
the experiment that reads it."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from clip_cycles.commands.main import main
from clip_cycles.evaluation import result_cache
from clip_cycles.evaluation.result_cache import RESULT_KEY_FIELDS, ResultCache, content_key
from clip_cycles.experiments.experiment_data import planted_experiment_data, save_experiment_data
from clip_cycles.experiments.probes import ProbeSettings

BASE = {"experiment": "probe", "inputs": {"x": np.arange(6, dtype=np.float32)}, "options": ProbeSettings(ranks=(1, 4))}


class Counter:
    """A compute function that counts its calls and returns a fixed, JSON-unfriendly record."""

    def __init__(self, value: float = 0.25) -> None:
        self.calls = 0
        self.value = value

    def __call__(self) -> dict[str, Any]:
        self.calls += 1
        return {"b": np.float32(self.value), "a": (1, 2), "nan": float("nan"), "arr": np.eye(2)}


def _get(cache: ResultCache, compute: Callable[[], Any], **changes: Any) -> tuple[Any, bool]:
    args = {**BASE, **changes}
    return cache.get_or_compute(args["experiment"], args["inputs"], args["options"], compute)


def _code_changed(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    version = result_cache.code_version()
    monkeypatch.setattr(result_cache, "code_version", lambda: version + "-edited")
    return {}


CHANGES: dict[str, Callable[[pytest.MonkeyPatch], dict[str, Any]]] = {
    "experiment": lambda mp: {"experiment": "transfer"},
    "inputs": lambda mp: {"inputs": {"x": np.arange(6, dtype=np.float32) * 2}},
    "options": lambda mp: {"options": ProbeSettings(ranks=(1, 8))},
    "code": _code_changed,
}


def test_declaration_matches_the_key() -> None:
    description = result_cache.result_description("probe", BASE["inputs"], BASE["options"])
    assert set(description) == set(RESULT_KEY_FIELDS) == set(CHANGES)


@pytest.mark.parametrize("field", RESULT_KEY_FIELDS)
def test_each_key_field_changes_the_key_and_misses(field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, compute = ResultCache(tmp_path), Counter()
    _get(cache, compute)
    changes = CHANGES[field](monkeypatch)
    _, reused = _get(cache, compute, **changes)
    assert not reused and compute.calls == 2
    _, reused = _get(cache, compute, **changes)  # the changed key is stored too
    assert reused and compute.calls == 2


def test_a_hit_hands_back_the_cold_value_exactly(tmp_path: Path) -> None:
    cache, compute = ResultCache(tmp_path), Counter()
    cold, reused_cold = _get(cache, compute)
    warm, reused_warm = _get(ResultCache(tmp_path), compute)
    assert (reused_cold, reused_warm, compute.calls) == (False, True, 1)
    assert warm == cold == {"b": float(np.float32(0.25)), "a": [1, 2], "nan": None, "arr": [[1.0, 0.0], [0.0, 1.0]]}
    assert list(warm) == list(cold) == ["b", "a", "nan", "arr"]  # insertion order kept, as the cold run gave it
    assert json.dumps(warm) == json.dumps(cold)


def test_no_root_computes_every_time_and_writes_nothing(tmp_path: Path) -> None:
    cache, compute = ResultCache(None), Counter()
    _get(cache, compute)
    _, reused = _get(cache, compute)
    assert not reused and compute.calls == 2


def _entry(tmp_path: Path) -> Path:
    (path,) = (tmp_path / "results" / "probe").glob("*.json")
    return path


CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:40]),
    "edited result": lambda p: p.write_text(p.read_text().replace("0.25", "0.75")),
    "another key": lambda p: p.write_text(p.read_text().replace('"experiment":"probe"', '"experiment":"oe"')),
    "not JSON": lambda p: p.write_bytes(b"\x80\x81 not json"),
    "a folder": lambda p: (p.unlink(), p.mkdir()),  # type: ignore[func-returns-value]
}


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_a_corrupt_entry_is_refused_with_a_note_and_recomputed(kind: str, tmp_path: Path) -> None:
    compute = Counter()
    _get(ResultCache(tmp_path), compute)
    path = _entry(tmp_path)
    CORRUPTIONS[kind](path)
    if path.is_dir():
        path.rmdir()  # a folder cannot be unlinked; the refusal is checked on a FIFO below
        os.mkfifo(path)
    cache = ResultCache(tmp_path)
    with pytest.warns(UserWarning, match=r"result cache: entry .* refused .* probe is recomputed"):
        value, reused = _get(cache, compute)
    assert not reused and compute.calls == 2 and cache.stats.refused == [str(path)]
    assert value["b"] == float(np.float32(0.25))
    _, reused = _get(ResultCache(tmp_path), compute)  # rewritten whole
    assert reused and compute.calls == 2


def test_content_key_tells_dtype_shape_order_and_refuses_unknown_types() -> None:
    a = np.zeros(4, dtype=np.float32)
    keys = {
        content_key(a),
        content_key(a.astype(np.float64)),
        content_key(a.reshape(2, 2)),
        content_key({"x": 1, "y": 2}),
        content_key({"y": 2, "x": 1}),
        content_key((1, 2)),
        content_key([1, 2]),
        content_key(1),
        content_key(1.0),
        content_key("1"),
    }
    assert len(keys) == 10
    assert content_key(a) == content_key(np.zeros(4, dtype=np.float32))
    with pytest.raises(TypeError, match="cannot key a object"):
        content_key(object())


def test_code_version_follows_the_experiment_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    package = tmp_path / "clip_cycles"
    for folder in result_cache.CODE_FOLDERS:
        shutil.copytree(result_cache._PACKAGE / folder, package / folder)
    for name in result_cache.CODE_FILES:
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(result_cache._PACKAGE / name, package / name)
    monkeypatch.setattr(result_cache, "_PACKAGE", package)
    result_cache.code_version.cache_clear()
    try:
        before = result_cache.code_version()
        assert before.split("+")[1] == RUNNING.split("+")[1]  # the same sources, the same version
        with (package / "heads" / "training.py").open("a") as handle:
            handle.write("# an edit\n")
        result_cache.code_version.cache_clear()
        assert result_cache.code_version() != before
    finally:
        result_cache.code_version.cache_clear()


RUNNING = result_cache.code_version()


# --------------------------------------------------------------------------- the commands


@pytest.fixture(scope="module")
def features(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = planted_experiment_data(
        {"strict_a": 0, "strict_b": 1}, dim=8, n_train=80, n_validation=30, n_test=40, seeds=(0,), pool_size=200, signal=0.3
    )
    return save_experiment_data(data, tmp_path_factory.mktemp("features") / "f.npz")


def _transfer(features: Path, out: Path, cache: Path, epochs: int = 2) -> list[str]:
    return ["transfer", "--features", str(features), "--out", str(out), "--cache-dir", str(cache),
            "--seeds", "0", "--epochs", str(epochs), "--rank", "2", "--no-report", "--min-cycles", "5"]  # fmt: skip


def test_a_warm_experiment_command_reuses_its_result_byte_for_byte(
    features: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert main(_transfer(features, out, cache)) == 0
    assert "computed the run_transfer result" in capsys.readouterr().out
    cold = (out / "transfer.json").read_bytes()
    assert main(_transfer(features, out, cache)) == 0
    assert "reused the cached run_transfer result" in capsys.readouterr().out
    assert (out / "transfer.json").read_bytes() == cold
    assert main(_transfer(features, out, cache, epochs=3)) == 0  # a changed option: recomputed
    assert "computed the run_transfer result" in capsys.readouterr().out


def test_conflicts_are_refused_before_the_input_is_read(
    features: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(_transfer(features, blocker / "out", tmp_path / "cache")) != 0
    assert "--out " + str(blocker / "out") + ": not a writable folder" in capsys.readouterr().err
    assert main(_transfer(tmp_path / "missing.npz", tmp_path / "out", tmp_path / "cache")) != 0
    assert "missing.npz: no such file" in capsys.readouterr().err
    both = _transfer(features, tmp_path / "out", tmp_path / "cache") + ["--task", "cycles/shapes_strict_size"]
    assert main(both) != 0
    assert "give either --features or --task/--model, not both" in capsys.readouterr().err
    assert not (tmp_path / "cache" / "results").exists()  # nothing was fitted


def test_synthetic_refuses_a_folder_out_before_fitting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synthetic", "--quick", "--out", str(tmp_path), "--no-cache"]) != 0
    assert "is a folder; give a JSON file path" in capsys.readouterr().err


# --------------------------------------------------------------------------- the demo


def test_a_warm_demo_reuses_every_experiment_and_writes_the_same_bytes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:

    from clip_cycles.evaluation.demo import DemoSettings, run_demo

    small = DemoSettings(seeds=(0,), probe_epochs=2, ranks=(1, 8), transfer_epochs=2, oe_epochs=2, images_per_concept=1,
                         attribute_seeds=(0,), world_images=300)  # fmt: skip
    caplog.set_level(logging.INFO, logger="clip_cycles")
    out, cache = tmp_path / "results", tmp_path / "cache"

    def files() -> dict[str, bytes]:
        return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}

    run_demo(out, cache, small)
    cold = files()
    assert "computed: run_probes, run_transfer, run_oe, demo_attribute_splits" in caplog.text
    caplog.clear()
    run_demo(out, cache, small)
    assert "reused from the result cache: run_probes, run_transfer, run_oe, demo_attribute_splits; computed: nothing" in (
        caplog.text
    )
    warm = files()
    assert sorted(warm) == sorted(cold)
    assert [name for name in cold if warm[name] != cold[name]] == []
    caplog.clear()
    run_demo(out, cache, small.replace(probe_epochs=3))  # only the probe sweep reads it
    assert "reused from the result cache: run_transfer, run_oe, demo_attribute_splits; computed: run_probes" in caplog.text
