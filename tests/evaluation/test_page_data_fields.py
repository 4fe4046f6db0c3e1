"""page_data's readers of one record field at a time: names, verdicts, intervals, ceilings, cells.

Every expected value is written out by hand from the record given; no file is read.
"""

from __future__ import annotations

import pytest

from clip_cycles.evaluation import page_data as pd
from clip_cycles.evaluation.page_data import (
    NO_MODEL,
    BenchmarkRow,
    Cell,
    PageData,
    add_benchmark_audit,
    add_cycle_metrics,
    model_name,
)
from clip_cycles.experiments.item_sets import ItemSet

DIGEST = "0123456789abcdef" * 4


def test_model_name_per_kind_of_weights() -> None:
    assert model_name("ViT-B-32", "openai") == "ViT-B-32 (openai)"
    assert model_name("ViT-B-32", "/home/me/ckpt/w.pt", weights=DIGEST) == "ViT-B-32 (w.pt, weights 0123456789ab)"
    assert model_name("ViT-B-32", None, weights=DIGEST) == "ViT-B-32 (weights 0123456789ab)"
    assert model_name("ViT-B-32", "", weights="") == "ViT-B-32 (random init)"
    assert model_name("ViT-B-32", None, backend="features") == "ViT-B-32 (precomputed features)"
    assert model_name("ViT-B-32", None, backend="hf") == "ViT-B-32 (hf weights)"
    assert model_name("ViT-B-32", None, backend="open_clip") == "ViT-B-32 (random init)"
    assert model_name("ViT-B-32", None, backend="") == "ViT-B-32 (random init)"
    assert model_name("/abs/models/m.bin", "tag") == "m.bin (tag)"
    # A record carries weights_sha256 or (older) weights_digest.
    assert pd._record_name({"model": "m", "weights_digest": DIGEST}) == "m (weights 0123456789ab)"
    assert pd._record_name({"model": "m", "weights_sha256": DIGEST, "backend": "hf"}) == "m (weights 0123456789ab)"
    assert pd._record_name({"model": "m", "backend": "timm"}) == "m (timm weights)"


def test_number_and_text_refuse_bools_and_other_types() -> None:
    assert pd._number(3) == 3.0 and isinstance(pd._number(3), float)
    assert pd._number(0.25) == 0.25
    for value in (True, False, "0.5", None, [1]):
        assert pd._number(value) is None
    assert pd._text("x") == "x"
    for value in ("", None, 3):
        assert pd._text(value) is None


def test_audit_verdicts_and_notes() -> None:
    assert pd._audit_verdict(None) == ("not run", "the record has no additive_audit")
    assert pd._audit_verdict({"passed": True}) == ("passed", "shortcut probes held at exactly 0.5")
    assert pd._audit_verdict(True) == ("passed", "shortcut probes held at exactly 0.5")
    assert pd._audit_verdict({"passed": False}) == ("failed", "a shortcut probe moved CycleAcc off 0.5")
    assert pd._audit_verdict(False) == ("failed", "a shortcut probe moved CycleAcc off 0.5")
    assert pd._audit_verdict({"passed": None, "unavailable_reason": "too few"}) == ("unavailable", "too few")
    assert pd._audit_verdict({"passed": 1}) == ("unavailable", "no verdict")
    assert pd._audit_verdict("odd") == ("unavailable", "no verdict")


def test_cycle_acc_interval_from_the_detail_or_the_flat_record() -> None:
    nested = {"low": 0.4, "high": 0.6, "level": 0.95}
    assert pd._ci({"cycle_acc_ci": nested}) == (nested, "")
    flat = {"cycle_acc_ci_low": 0.1, "cycle_acc_ci_high": 0.3, "ci_level": 0.9, "ci_n_resamples": 1000, "ci_seed": 0}
    assert pd._ci(flat) == (
        {
            "low": 0.1,
            "high": 0.3,
            "computed_by": "from the flat record (cycle_acc_ci_low / _high)",
            "level": 0.9,
            "n_resamples": 1000,
            "seed": 0,
        },
        "",
    )
    # A nested record missing a bound falls back to the flat one; a flat one missing a bound is no interval.
    assert pd._ci({"cycle_acc_ci": {"low": 0.4}, "cycle_acc_ci_low": 0.2, "cycle_acc_ci_high": 0.5})[0]["low"] == 0.2
    assert pd._ci({"cycle_acc_ci": {"high": 0.4, "low": "x"}})[0] is None
    assert pd._ci({"cycle_acc_ci_low": 0.1, "ci_level": None}) == (None, "the record has no cycle_acc_ci")
    assert pd._ci({"cycle_acc_ci_high": 0.1}) == (None, "the record has no cycle_acc_ci")
    only_low_level = pd._ci({"cycle_acc_ci_low": 0.1, "cycle_acc_ci_high": 0.2, "ci_seed": 5})[0]
    assert set(only_low_level) == {"low", "high", "computed_by", "seed"} and only_low_level["seed"] == 5


def test_interval_ceiling_and_paired_verdict_readers() -> None:
    assert pd._interval({"low": 0.2, "high": 0.7}) == (0.2, 0.7)
    for bad in (None, [0.2, 0.7], {"low": 0.2}, {"high": 0.7}, {"low": True, "high": 0.7}):
        assert pd._interval(bad) is None
    assert pd._ceiling({"ceilings": {"length_ceiling": 0.75, "bag_of_words_ceiling": 0.9}}, "length_ceiling") == 0.75
    assert pd._ceiling({"ceilings": [0.75]}, "length_ceiling") is None
    assert pd._ceiling({}, "length_ceiling") is None
    both = {"best_blind_vs_model": {"verdict": "model ahead", "adjusted_verdict": "no difference"}}
    assert pd._paired_verdict(both) == "no difference"
    assert pd._paired_verdict({"best_blind_vs_model": {"verdict": "blind beats model"}}) == "blind beats model"
    assert pd._paired_verdict({"best_blind_vs_model": {"verdict": 3}}) is None
    assert pd._paired_verdict({"best_blind_vs_model": "blind beats model"}) is None
    assert pd._paired_verdict({}) is None


def test_dataset_names_split_into_namespace_and_name() -> None:
    assert pd._split_dataset("cycles/coco_strict") == ("cycles", "coco_strict")
    assert pd._split_dataset("audit/a/b") == ("audit", "a/b")
    assert pd._split_dataset("cycles_shapes_size") == ("cycles", "shapes_size")
    assert pd._split_dataset("audit_winoground") == ("audit", "winoground")
    assert pd._split_dataset("attributes_color") == ("attributes", "color")
    assert pd._split_dataset("cyclesx") == ("", "cyclesx")
    assert pd._split_dataset("other") == ("", "other")


def test_attribute_protocol_sentence() -> None:
    record = {
        "world": {"concepts": 6, "images_per_concept": 20},
        "split_embedding": "pca",
        "fold_assignment": "by image",
        "seeds": [0, 1],
    }
    assert pd._attribute_protocol(record) == (
        "rendered shape-concept world (6 concepts, 20 images each); split embedding: pca; fold assignment: by image; seeds [0, 1]"
    )
    assert pd._attribute_protocol({"seeds": [3]}) == "seeds [3]"
    assert pd._attribute_protocol({}) == "not recorded"


def test_blind_beats_model_reads_the_verdict_first() -> None:
    def row(model_acc, blind_acc, verdict=None):
        return BenchmarkRow("b", "s", "m", model_acc, "len", blind_acc, None, None, None, "f", verdict)

    assert row(0.6, 0.6).blind_beats_model is True  # a tie counts as the blind rule reaching the model
    assert row(0.6, 0.59).blind_beats_model is False
    assert row(None, 0.9).blind_beats_model is False
    assert row(0.6, None).blind_beats_model is False
    assert row(0.9, 0.1, "blind beats model").blind_beats_model is True
    assert row(0.1, 0.9, "no difference").blind_beats_model is False


def test_a_cycle_cell_takes_each_field_from_its_record() -> None:
    data = PageData()
    item = ItemSet("test", "ab" * 32)
    metrics = {
        "cycle_acc": 0.75,
        "cycle_acc_sd": 0.05,
        "n_cycles": 40,
        "seeds": [0, 1, "2", True, 3],
        "additive_audit": {"passed": True},
        "cycle_acc_ci": {"low": 0.6, "high": 0.85},
    }
    add_cycle_metrics(data, "coco_strict", "M", metrics, "f.json", item, None, ("/s.jsonl", "ff"), "cafe")
    ((key, cell),) = data.cells.items()
    assert key == (f"coco_strict\x1f{item.ident}", "M")
    assert (cell.cycle_acc, cell.sd, cell.n_cycles, cell.audit) == (0.75, 0.05, 40, "passed")
    assert cell.seeds == [0, 1, True, 3]  # bool is an int: kept as recorded
    assert (cell.ci, cell.ci_note, cell.family, cell.item_set) == ({"low": 0.6, "high": 0.85}, "", "coco_strict", item)
    assert (cell.samples, cell.weights_sha256, cell.source_file) == (("/s.jsonl", "ff"), "cafe", "f.json")
    assert data.families["coco_strict"].recorded is False
    # The same family, model and item set again: skipped, naming the file read first.
    add_cycle_metrics(data, "coco_strict", "M", metrics, "g.json", item)
    assert data.skipped == {"g.json": "coco_strict of M on this item set is already read from f.json"}
    # A name that could become a path is refused.
    add_cycle_metrics(data, "../x", "M", metrics, "h.json")
    assert data.skipped["h.json"] == "family name '../x' is not a plain name (letters, digits, '_', '-', '.')"
    # Unavailable: no number, the reason kept; a float n_cycles is not a count.
    add_cycle_metrics(data, "gqa", "M", {"available": False, "unavailable_reason": "no images"}, "u.json")
    add_cycle_metrics(data, "gqa2", "M", {"cycle_acc": "0.5"}, "v.json")
    add_cycle_metrics(data, "gqa3", "M", {"cycle_acc": 0.5, "n_cycles": 4.0}, "w.json")
    cells = {c.family: c for c in data.cells.values()}
    assert (cells["gqa"].cycle_acc, cells["gqa"].unavailable_reason) == (None, "no images")
    assert cells["gqa2"].unavailable_reason == "no cycle_acc in the record"
    assert cells["gqa3"].n_cycles is None and cells["gqa3"].audit == "not run"
    assert cells["gqa3"].sd is None and cells["gqa3"].seeds == []


def _audit_metrics(**overrides):
    metrics = {
        "subsets": {
            "b_sub": {"model_acc": 0.7, "best_blind": "length", "best_blind_acc": 0.8, "n_comparisons": 10},
            "a_sub": {
                "model_acc": 0.9,
                "best_blind": "bag",
                "best_blind_acc": 0.5,
                "n_comparisons": 20,
                "cycles": {"cycle_acc": 0.625, "n_cycles": 8},
                "ceilings": {"bag_of_words_ceiling": 0.95, "length_ceiling": 0.85},
                "best_blind_acc_ci": {"low": 0.4, "high": 0.6},
                "best_blind_vs_model": {"verdict": "model ahead"},
            },
            "c_sub": "not a dict",
        },
        "model_acc": 0.8,
        "best_blind": "length",
        "best_blind_acc": 0.65,
        "cycle_acc": 0.7,
        "n_cycles": 12,
        "n_comparisons": 30,
    }
    metrics.update(overrides)
    return metrics


def test_benchmark_rows_subsets_sorted_then_all_with_their_own_fields() -> None:
    data = PageData()
    add_benchmark_audit(data, "bench", "M", _audit_metrics(), "a.json")
    rows = {r.subset: r for r in data.benchmarks}
    assert [r.subset for r in data.benchmarks] == ["a_sub", "b_sub", "c_sub", "all"]
    a = rows["a_sub"]
    assert (a.benchmark, a.model, a.model_acc, a.best_blind, a.best_blind_acc) == ("bench", "M", 0.9, "bag", 0.5)
    assert (a.cycle_acc, a.n_cycles, a.n_comparisons, a.source_file) == (0.625, 8, 20, "a.json")
    assert (a.blind_verdict, a.bag_of_words_ceiling, a.length_ceiling, a.best_blind_ci) == (
        "model ahead",
        0.95,
        0.85,
        (0.4, 0.6),
    )
    b = rows["b_sub"]
    assert (b.cycle_acc, b.n_cycles, b.blind_verdict, b.length_ceiling, b.best_blind_ci) == (None, None, None, None, None)
    assert rows["c_sub"].model_acc is None
    whole = rows["all"]
    assert (whole.model_acc, whole.best_blind_acc, whole.cycle_acc, whole.n_cycles, whole.n_comparisons) == (
        0.8,
        0.65,
        0.7,
        12,
        30,
    )
    ((key, cell),) = data.cells.items()
    assert key == ("audit/bench\x1f" + ItemSet().ident, "M")
    assert (cell.cycle_acc, cell.n_cycles, cell.family, cell.unavailable_reason) == (0.7, 12, "audit/bench", None)
    assert cell.audit == "model ahead"
    assert cell.audit_note == "model accuracy 0.8, best blind length 0.65"


@pytest.mark.parametrize(
    ("overrides", "audit"),
    [
        ({}, "model ahead"),
        ({"best_blind_acc": 0.8}, "blind beats model"),  # equal: the blind rule reaches the model
        ({"best_blind_acc": 0.81}, "blind beats model"),
        ({"best_blind_vs_model": {"verdict": "no difference"}, "best_blind_acc": 0.9}, "no difference"),
        ({"best_blind_acc": None}, "model ahead"),
        ({"model_acc": None, "best_blind_acc": 0.9}, "not run"),
    ],
)
def test_the_benchmark_cells_verdict(overrides, audit) -> None:
    data = PageData()
    add_benchmark_audit(data, "bench", "M", _audit_metrics(**overrides), "a.json")
    (cell,) = data.cells.values()
    assert cell.audit == audit


def test_benchmark_without_model_cycles_or_subsets() -> None:
    data = PageData()
    add_benchmark_audit(data, "bench", "", _audit_metrics(), "a.json")
    assert not data.cells and {r.model for r in data.benchmarks} == {NO_MODEL}
    add_benchmark_audit(data, "bench", "M", _audit_metrics(cycle_acc=None, n_cycles=3.0), "b.json")
    (cell,) = data.cells.values()
    assert (cell.cycle_acc, cell.n_cycles) == (None, None)
    assert cell.unavailable_reason == "no exact cycles found in the benchmark"
    add_benchmark_audit(data, "bench", "M", _audit_metrics(), "c.json")
    assert data.skipped["c.json"] == "audit/bench of M on this item set is already read from b.json"
    add_benchmark_audit(data, "../b", "M", _audit_metrics(), "d.json")
    assert data.skipped["d.json"] == "benchmark name '../b' is not a plain name (letters, digits, '_', '-', '.')"
    before = len(data.benchmarks)
    add_benchmark_audit(data, "bench", "M", {"model_acc": 0.5}, "e.json")
    assert data.skipped["e.json"] == "an audit record without 'subsets'" and len(data.benchmarks) == before


def test_safe_names_allow_200_characters_and_no_leading_dot() -> None:
    for name, ok in (("a" * 200, True), ("a" * 201, False), (".hidden", False), ("_x.y-z", True), ("a/b", False)):
        data = PageData()
        add_cycle_metrics(data, name, "M", {"cycle_acc": 0.5}, "f.json")
        assert bool(data.cells) is ok, name
    assert isinstance(Cell("m", "r", None).item_set, ItemSet)
