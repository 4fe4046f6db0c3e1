"""Labels that say what ran (issue 51): no ignored tag recorded, no untrue "initialized randomly", no audit as a model."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.evaluation.page import build_page
from clip_cycles.evaluation.page_data import NO_MODEL, collect, model_name
from clip_cycles.evaluation.zero_shot import recorded_pretrained
from clip_cycles.results import benchmark_record, write_json


@pytest.mark.parametrize(
    ("model", "pretrained", "recorded"),
    [
        ("local-dir:/somewhere/tiny", "laion400m_e32", None),  # OpenCLIP ignores the (default) tag: not what ran
        ("hf-hub:org/repo", "openai", None),
        ("local-dir:/somewhere/tiny", "none", "none"),  # random init said as such stays
        ("ViT-B-32", "openai", "openai"),
        ("cycles-tiny", "/abs/x.safetensors", "/abs/x.safetensors"),  # the page labels it by name and digest
    ],
)
def test_a_record_names_the_weights_actually_loaded(model: str, pretrained: str, recorded: str | None) -> None:
    assert recorded_pretrained(ModelSpec("open_clip", model, pretrained)) == recorded


def test_no_random_init_note_when_a_checkpoint_is_loaded(caplog: pytest.LogCaptureFixture) -> None:
    from clip_cycles.encoding.backends import load_open_clip
    from clip_cycles.encoding.tiny_model import WEIGHTS_PATH

    with caplog.at_level(logging.WARNING):
        load_open_clip("cycles-tiny", str(WEIGHTS_PATH))
    assert "initialized randomly" not in caplog.text
    assert logging.getLogger().filters == []  # the filter is gone after the load
    with caplog.at_level(logging.WARNING):
        load_open_clip("cycles-tiny", None)  # a real random init still says so
    assert "initialized randomly" in caplog.text


def _audit_metrics() -> dict:
    sub = {"best_blind": "shortest_caption", "best_blind_acc": 0.7, "n_comparisons": 8, "cycles": {"n_cycles": 0}}
    return {"best_blind": "shortest_caption", "best_blind_acc": 0.66, "n_comparisons": 8, "subsets": {"add_obj": sub}}


def test_an_audit_without_a_model_is_a_benchmark_row_never_a_model_row(tmp_path: Path) -> None:
    write_json(benchmark_record("audit/sugarcrepe", "", "", _audit_metrics()), tmp_path / "in" / "audit_sugarcrepe.json")
    data = collect([tmp_path / "in"])
    assert data.models == [] and not data.cells
    assert {row.model for row in data.benchmarks} == {NO_MODEL}
    index = build_page([tmp_path / "in"], tmp_path / "site").read_text()
    assert "random init" not in index and NO_MODEL in index
    assert not list((tmp_path / "site" / "models").glob("*.html"))


@pytest.mark.parametrize(
    ("model", "pretrained", "weights", "label"),
    [
        ("cycles-tiny", "/home/me/ckpts/long/m07.safetensors", "ab" * 32, "cycles-tiny (m07.safetensors, weights abababababab)"),
        ("local-dir:/home/me/models/tiny", "", "cd" * 32, "local-dir:tiny (weights cdcdcdcdcdcd)"),
        ("openai/clip-vit-base-patch32", "", "ef" * 32, "openai/clip-vit-base-patch32 (weights efefefefefef)"),
        ("ViT-B-32", "openai", None, "ViT-B-32 (openai)"),
    ],
)
def test_models_are_named_by_backend_model_and_weights_never_a_path(
    model: str, pretrained: str, weights: str | None, label: str
) -> None:
    assert model_name(model, pretrained, "open_clip", weights) == label


def test_two_weights_under_one_path_are_two_models(tmp_path: Path) -> None:
    metrics = {"cycle_acc": 0.9, "n_cycles": 40, "seeds": [0], "tie_tolerance": 1e-9}
    for name, digest, acc in (("a", "1" * 64, 0.9), ("b", "2" * 64, 0.4)):
        record = benchmark_record("cycles/shapes_strict_size", "cycles-tiny", "/w/m.safetensors", {**metrics, "cycle_acc": acc})
        record["weights_sha256"] = digest
        write_json(record, tmp_path / "in" / f"{name}.json")
    data = collect([tmp_path / "in"])
    assert len(data.models) == 2 and sorted(c.cycle_acc for c in data.cells.values()) == [0.4, 0.9]


def test_the_report_names_weights_by_file_and_digest_never_the_path(tmp_path: Path) -> None:
    from clip_cycles.experiments.report import build_report

    deep = "/srv/machine-only/very-long-checkpoint-store-7f3a/run-2026-11-30"
    metrics = {"cycle_acc": 0.9, "cycle_acc_sd": 0.0, "n_cycles": 40, "seeds": [0], "tie_tolerance": 1e-9}
    metrics.update(text_acc=0.5, image_acc=0.5, group_acc=0.25)
    record = benchmark_record("cycles/shapes_strict_size", "cycles-tiny", f"{deep}/m07.safetensors", metrics)
    record.update(weights_sha256="ab" * 32, backend="open_clip")
    write_json(record, tmp_path / "in" / "r.json")
    paths = build_report(tmp_path / "in")
    text = paths.markdown.read_text()
    assert "m07.safetensors, weights abababababab" in text
    for path in (tmp_path / "in").rglob("*"):
        if path.is_file() and path.name != "r.json":  # the record itself holds what was given
            assert "machine-only" not in path.read_bytes().decode("utf-8", errors="replace"), path
