"""Benchmark audit on fixtures in each published format (written here, see benchmark_formats.py).

Expected values are computed in the tests from the fixture data with plain Python/numpy:
signed degrees by counting, length rules by comparing lengths, model scores by dot
products of the same normalized features the ``features`` backend serves.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from benchmark_formats import (
    aro_order_cases,
    aro_vg_rows,
    cycle_table_rows,
    sugarcrepe_items,
    winoground_rows,
    write_aro,
    write_features,
    write_image,
    write_sugarcrepe,
    write_table,
    write_winoground,
)
from record_vocabulary import assert_one_vocabulary

from clip_cycles.algebra.audits import hard_negative_edges, signed_degrees
from clip_cycles.benchmark_audit.adapters import ADAPTERS, hard_negative_subset, load_benchmark, register_adapter
from clip_cycles.benchmark_audit.audit import AuditSettings
from clip_cycles.benchmark_audit.design import CroppedImageItem
from clip_cycles.benchmark_audit.run import audit_benchmark
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.encoding.encoder import ModelSpec

TOL = 1e-9


def _credit(value: float) -> float:
    return 1.0 if value > TOL else (0.0 if value < -TOL else 0.5)


def _features_spec(path: Path) -> ModelSpec:
    return ModelSpec(backend="features", model=str(path), pretrained=None)


# --------------------------------------------------------------------------- SugarCrepe


def test_sugarcrepe_design_counts_degrees_and_length_artefact(tmp_path: Path) -> None:
    items = write_sugarcrepe(tmp_path / "sc", images=False)
    audit = audit_benchmark("sugarcrepe", tmp_path / "sc")
    subsets = {a.name: a.metrics for a in audit.audits}
    assert list(subsets) == ["add_obj", "swap_att"]
    for name, data in items.items():
        m = subsets[name]
        rows = list(data.values())
        degree: Counter = Counter()
        for row in rows:
            degree[row["caption"]] += 1
            degree[row["negative_caption"]] -= 1
        assert m["n_comparisons"] == m["n_items"] == len(rows)
        assert m["design"]["n_images"] == len({r["filename"] for r in rows})
        assert m["design"]["n_captions"] == len(degree)
        assert m["design"]["share_images_unbalanced"] == 0.0  # one image, +1 and -1: always balanced
        assert m["design"]["share_captions_unbalanced"] == np.mean([d != 0 for d in degree.values()])
        assert m["design"]["share_comparisons_caption_decidable"] == 1.0
        # Theorem 1's witness of the subset, as clip_cycles.algebra.audits.signed_degrees picks it on the same edges.
        reference = signed_degrees(*hard_negative_edges([(r["filename"], r["caption"], r["negative_caption"]) for r in rows]))
        assert m["design"]["theorem1_witness"] == reference.to_dict()["witness"]
        assert (m["design"]["balanced"], m["design"]["max_abs_degree"]) == (reference.balanced, reference.max_abs_degree)
        assert m["witness_acc"] == np.mean([_credit(degree[r["caption"]] - degree[r["negative_caption"]]) for r in rows])
        assert m["shortest_caption_acc"] == np.mean([_credit(len(r["negative_caption"]) - len(r["caption"])) for r in rows])
        assert m["longest_caption_acc"] == np.mean([_credit(len(r["caption"]) - len(r["negative_caption"])) for r in rows])
    # add_obj: every negative is longer, so the caption-only length rule wins outright.
    assert subsets["add_obj"]["shortest_caption_acc"] == 1.0
    assert subsets["add_obj"]["best_blind"] == "shortest_caption"
    assert subsets["add_obj"]["witness_acc"] == 1.0  # unique captions: Theorem 1's witness decides every item
    # swap_att: items 100 and 101 cross on different images -> one exact cycle; 103 crosses 100 on
    # the same image, so it cannot join.
    cycles = subsets["swap_att"]["cycles"]
    assert (cycles["n_cycles"], cycles["n_paired_items"], cycles["declared_by_format"]) == (1, 2, False)
    assert subsets["add_obj"]["cycles"]["n_cycles"] == 0 and "unavailable_reason" in subsets["add_obj"]["cycles"]


def test_sugarcrepe_model_probe_and_cycles_with_features(tmp_path: Path) -> None:
    items = write_sugarcrepe(tmp_path / "sc", images=False)
    keys = sorted({r["filename"] for data in items.values() for r in data.values()})
    captions = sorted({r[k] for data in items.values() for r in data.values() for k in ("caption", "negative_caption")})
    # add_obj's true captions share a direction that its negatives lack: a caption-only probe can learn it.
    truth = np.zeros(8)
    truth[0] = 3.0
    shift = {}
    for row in items["add_obj"].values():
        shift[row["caption"]], shift[row["negative_caption"]] = truth, -truth
    phi, psi = write_features(tmp_path / "f.npz", keys, captions, caption_shift=shift)
    img = {k: phi[i].astype(np.float64) for i, k in enumerate(keys)}
    cap = {c: psi[i].astype(np.float64) for i, c in enumerate(captions)}
    audit = audit_benchmark("sugarcrepe", tmp_path / "sc", _features_spec(tmp_path / "f.npz"))
    subsets = {a.name: a.metrics for a in audit.audits}
    for name, data in items.items():
        rows = list(data.values())
        expected = [
            _credit(img[r["filename"]] @ cap[r["caption"]] - img[r["filename"]] @ cap[r["negative_caption"]]) for r in rows
        ]
        assert subsets[name]["model_acc"] == pytest.approx(np.mean(expected), abs=0)
        assert subsets[name]["model_item_acc"] == subsets[name]["model_acc"]  # one comparison per item
        # One image per comparison with +1 and -1: an image-only score cannot decide anything.
        assert subsets[name]["image_probe_acc"] == 0.5
    assert subsets["add_obj"]["caption_probe_acc"] == 1.0
    # The swap cycle (items 100, 101): Delta = s(uA, p) + s(uB, n) - s(uA, n) - s(uB, p).
    a, b = items["swap_att"]["100"], items["swap_att"]["101"]
    delta = (
        img[a["filename"]] @ cap[a["caption"]]
        + img[b["filename"]] @ cap[a["negative_caption"]]
        - img[a["filename"]] @ cap[a["negative_caption"]]
        - img[b["filename"]] @ cap[a["caption"]]
    )
    assert subsets["swap_att"]["cycles"]["cycle_acc"] == _credit(delta)
    record = audit.record()
    assert_one_vocabulary(record)
    # clip_benchmark's keys, the item set audited (issue 51: every record kind) and what ran (backend, weights digest).
    identity = {"split", "items_sha256", "source", "source_line"}
    assert (
        set(record) == {"dataset", "model", "pretrained", "task", "metrics", "language", "backend", "weights_sha256"} | identity
    )
    assert record["items_sha256"] == record["metrics"]["items_sha256"]  # one digest of what was read
    assert record["dataset"] == "audit/sugarcrepe" and record["task"] == "benchmark_audit"
    all_model = [subsets[n]["model_acc"] * subsets[n]["n_comparisons"] for n in subsets]
    assert record["metrics"]["model_acc"] == pytest.approx(sum(all_model) / 12)
    json.dumps(record)  # plain JSON types only


# --------------------------------------------------------------------------- designs made of cycles


def test_cycle_design_holds_every_blind_score_to_exactly_half(tmp_path: Path) -> None:
    rows = cycle_table_rows(6)
    table = write_table(tmp_path / "t" / "comparisons.csv", rows)
    keys = sorted({str(r["image"]) for r in rows})
    captions = sorted({str(r["caption"]) for r in rows})
    # Strong additive signal everywhere: the + captions carry a shared direction, so do the u1 images.
    plus = {
        str(r["caption"]): np.eye(8)[0] * 4
        for r in rows
        if r["weight"] == 1 and str(r["image"]).endswith(("0.png", "2.png", "4.png", "6.png", "8.png"))
    }
    phi, psi = write_features(tmp_path / "f.npz", keys, captions, caption_shift=plus)
    audit = audit_benchmark("comparison_table", table, _features_spec(tmp_path / "f.npz"))
    (sub,) = audit.audits
    m = sub.metrics
    for name in ("witness", "shortest_caption", "longest_caption", "caption_probe", "image_probe"):
        assert m[f"{name}_acc"] == 0.5, name
    assert m["design"]["balanced"] and m["design"]["share_comparisons_unbalanced"] == 0.0
    assert (m["cycles"]["n_cycles"], m["cycles"]["n_paired_items"]) == (6, 6)
    # Each comparison is a cycle, so the model's comparison accuracy is its CycleAcc.
    img = {k: phi[i].astype(np.float64) for i, k in enumerate(keys)}
    cap = {c: psi[i].astype(np.float64) for i, c in enumerate(captions)}
    deltas = Counter()
    for r in rows:
        deltas[r["comparison_id"]] += r["weight"] * (img[str(r["image"])] @ cap[str(r["caption"])])
    expected = np.mean([_credit(d) for d in deltas.values()])
    assert m["model_acc"] == expected and m["cycles"]["cycle_acc"] == expected
    assert m["per_tag"]["even"]["n_comparisons"] == 3 and m["per_tag"]["odd"]["witness_acc"] == 0.5

    # Crafted violation: drop one swap edge of comparison c0; the design is no longer balanced and the
    # witness wins that comparison.
    broken = [r for r in rows if not (r["comparison_id"] == "c0" and r["weight"] == -1 and r["image"] == "img_0.png")]
    table = write_table(tmp_path / "b" / "comparisons.csv", broken)
    (bad,) = audit_benchmark("comparison_table", table).audits
    assert not bad.metrics["design"]["balanced"]
    assert bad.metrics["design"]["share_comparisons_unbalanced"] == pytest.approx(1 / 6)
    assert bad.metrics["witness_acc"] == pytest.approx((1 + 5 * 0.5) / 6)
    assert bad.metrics["cycles"]["n_cycles"] == 5


def test_winoground_format_blocks_are_cycles_and_blind_scores_are_half(tmp_path: Path) -> None:
    rows = write_winoground(tmp_path / "wg", hub_layout=True)
    keys = [f"{r[f'image_{k}']}.png" for r in rows for k in (0, 1)]
    captions = [str(r[f"caption_{k}"]) for r in rows for k in (0, 1)]
    phi, psi = write_features(tmp_path / "f.npz", keys, captions, seed=3)
    audit = audit_benchmark("winoground", tmp_path / "wg", _features_spec(tmp_path / "f.npz"))
    (sub,) = audit.audits
    m = sub.metrics
    assert (m["n_comparisons"], m["n_items"], m["cycles"]["n_cycles"]) == (16, 4, 4)
    assert m["cycles"]["declared_by_format"]
    for name in ("witness", "shortest_caption", "longest_caption", "caption_probe", "image_probe"):
        assert m[f"{name}_acc"] == 0.5, name
    # Each directional comparison alone is unbalanced (Winoground's text and image scores).
    assert m["design"]["share_comparisons_unbalanced"] == 1.0
    blocks = np.array(
        [
            [
                [phi[2 * i] @ psi[2 * i], phi[2 * i] @ psi[2 * i + 1]],
                [phi[2 * i + 1] @ psi[2 * i], phi[2 * i + 1] @ psi[2 * i + 1]],
            ]
            for i in range(4)
        ],
        dtype=np.float64,
    )
    delta = blocks[:, 0, 0] + blocks[:, 1, 1] - blocks[:, 0, 1] - blocks[:, 1, 0]
    text = (blocks[:, 0, 0] > blocks[:, 0, 1]) & (blocks[:, 1, 1] > blocks[:, 1, 0])
    image = (blocks[:, 0, 0] > blocks[:, 1, 0]) & (blocks[:, 1, 1] > blocks[:, 0, 1])
    assert m["cycles"]["cycle_acc"] == np.mean([_credit(d) for d in delta])
    assert (m["cycles"]["text_acc"], m["cycles"]["image_acc"]) == (text.mean(), image.mean())
    assert m["cycles"]["group_acc"] == (text & image).mean()
    assert m["per_tag"]["collapsed_tag=Relation"]["n_cycles"] == 2
    assert m["per_tag"]["collapsed_tag=Relation"]["cycle_acc"] == np.mean([_credit(d) for d in delta[:2]])
    assert m["per_tag"]["secondary_tag=Symbolic"]["n_cycles"] == 2  # "Symbolic" and "Symbolic, Series"
    assert m["per_tag"]["secondary_tag=Series"]["n_cycles"] == 1


def test_winoground_parquet_with_embedded_image_bytes(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = winoground_rows()
    records = []
    for i, row in enumerate(rows):
        record = dict(row)
        for k in (0, 1):
            path = write_image(tmp_path / "src" / f"{row[f'image_{k}']}.png", 10 * i + k)
            record[f"image_{k}"] = {"bytes": path.read_bytes(), "path": path.name}
        records.append(record)
    (tmp_path / "wg" / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "wg" / "data" / "test-00000-of-00001.parquet")
    (sub,) = load_benchmark("winoground", tmp_path / "wg")
    assert sub.n_comparisons == 16 and len(sub.cycles) == 4
    assert all(item.data is not None and item.read_bytes()[:4] == b"\x89PNG" for item in sub.images)
    assert sorted(sub.captions) == sorted(str(r[f"caption_{k}"]) for r in rows for k in (0, 1))


# --------------------------------------------------------------------------- ARO


def test_aro_crops_order_cases_and_reversed_relations(tmp_path: Path) -> None:
    from PIL import Image

    write_aro(tmp_path / "aro")
    subsets = {s.name: s for s in load_benchmark("aro", tmp_path / "aro")}
    assert list(subsets) == ["vg_relation", "coco_order"]
    vg = subsets["vg_relation"]
    assert vg.n_comparisons == len(aro_vg_rows())
    first = vg.images[0]
    assert isinstance(first, CroppedImageItem)
    import io

    with Image.open(io.BytesIO(first.read_bytes())) as crop:
        assert crop.size == (20, 10)  # ARO crops the image to the relation's box
    order = subsets["coco_order"]
    cases = aro_order_cases()
    expected = sum(sum(1 for o in c["caption_options"][1:] if o != c["caption_options"][0]) for c in cases)
    assert order.n_comparisons == expected and order.n_items == len(cases)
    assert order.skipped == {"perturbation_equal_to_caption": 1}

    audit = audit_benchmark("aro", tmp_path / "aro")
    m = {a.name: a.metrics for a in audit.audits}
    # The two "on" items reverse each other on different images: one exact cycle.
    assert (m["vg_relation"]["cycles"]["n_cycles"], m["vg_relation"]["cycles"]["n_paired_items"]) == (1, 2)
    assert m["vg_relation"]["per_tag"]["relation=on"]["n_comparisons"] == 2
    degree: Counter = Counter()
    for row in aro_vg_rows():
        degree[row["true_caption"]] += 1
        degree[row["false_caption"]] -= 1
    assert m["vg_relation"]["design"]["n_captions"] == len(degree)
    assert m["vg_relation"]["design"]["share_captions_unbalanced"] == np.mean([d != 0 for d in degree.values()])
    assert m["vg_relation"]["witness_acc"] == np.mean(
        [_credit(degree[r["true_caption"]] - degree[r["false_caption"]]) for r in aro_vg_rows()]
    )
    # The true caption of a COCO-Order case is +1 in every one of its comparisons: degree = #perturbations.
    assert m["coco_order"]["design"]["max_abs_degree"] == 3.0
    assert m["coco_order"]["witness_acc"] == 1.0


# --------------------------------------------------------------------------- errors and registration


def test_bad_inputs_name_the_file_field_and_id(tmp_path: Path) -> None:
    items = sugarcrepe_items()
    del items["add_obj"]["3"]["negative_caption"]
    (tmp_path / "sc").mkdir()
    (tmp_path / "sc" / "add_obj.json").write_text(json.dumps(items["add_obj"]))
    with pytest.raises(ValueError, match=r"add_obj\.json: item 3: field 'negative_caption'"):
        load_benchmark("sugarcrepe", tmp_path / "sc")
    with pytest.raises(FileNotFoundError, match="add_att.json"):
        load_benchmark("sugarcrepe", tmp_path)
    rows = cycle_table_rows(2)
    rows[3]["weight"] = "minus one"
    with pytest.raises(ValueError, match=r"line 5: field 'weight' must be a number"):
        load_benchmark("comparison_table", write_table(tmp_path / "t.csv", rows))
    rows = cycle_table_rows(2)
    rows[1]["subset"] = "other"
    with pytest.raises(ValueError, match=r"u.jsonl: line 2: comparison 'c0' is in subset"):
        load_benchmark("comparison_table", write_table(tmp_path / "u.jsonl", rows))
    with pytest.raises(ValueError, match="unknown benchmark format 'svo_probes'; registered: aro, bivlc, cola, colorswap"):
        load_benchmark("svo_probes", tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_benchmark("aro", tmp_path / "nowhere")
    write_sugarcrepe(tmp_path / "ok", images=False)
    with pytest.raises(ValueError, match=r"no subset \['swap_rel'\]"):
        load_benchmark("sugarcrepe", tmp_path / "ok", ["swap_rel"])
    with pytest.raises(ValueError, match="tie_tolerance"):
        AuditSettings(tie_tolerance=-1.0)


def test_a_new_format_is_a_registration(tmp_path: Path) -> None:
    (tmp_path / "mine.json").write_text(json.dumps([["a.jpg", "a dog", "a cat"], ["b.jpg", "a cat", "a dog"]]))

    @register_adapter("test_pairs", "image, caption, negative triples", "mine.json")
    def read_pairs(root: Path) -> list:
        data = json.loads((root / "mine.json").read_text())
        return [
            hard_negative_subset(
                "pairs",
                root / "mine.json",
                [(str(i), ImageItem(key=u, path=root / u), p, n, ()) for i, (u, p, n) in enumerate(data)],
            )
        ]

    try:
        with pytest.raises(ValueError, match="already registered"):
            register_adapter("test_pairs", "again", "x")(read_pairs)
        (sub,) = audit_benchmark("test_pairs", tmp_path).audits
        assert sub.metrics["cycles"]["n_cycles"] == 1 and sub.metrics["witness_acc"] == 0.5
    finally:
        ADAPTERS.unregister("test_pairs")


def test_restrict_keeps_declared_cycles_only_while_their_images_remain(tmp_path: Path) -> None:
    write_winoground(tmp_path / "wg")
    (sub,) = load_benchmark("winoground", tmp_path / "wg")
    keep = np.array([item != "1" for item in sub.item_ids])
    left = sub.restrict(keep, "comparison_of_item_with_bad_image")
    assert left.n_comparisons == 12 and left.skipped == {"comparison_of_item_with_bad_image": 4}
    assert len(left.cycles) == 3 and len(left.cycle_tags) == 3
    kept_blocks = {(left.images[u1].key, left.images[u2].key) for u1, u2, _, _ in left.cycles.tolist()}
    assert ("ex_1_img_0.png", "ex_1_img_1.png") not in kept_blocks and len(kept_blocks) == 3
    (audit,) = audit_benchmark("winoground", tmp_path / "wg").audits
    assert audit.metrics["cycles"]["n_cycles"] == 4


def test_a_trailing_space_or_case_does_not_hide_a_crossing_pair(tmp_path: Path) -> None:
    """SugarCrepe's replace_obj files carry captions with trailing spaces: the two items below cross
    (each one's caption is the other's negative) on different images, so they make one exact cycle;
    matching by exact text missed it. The vertex keeps the first spelling; merged ones are counted."""
    root = tmp_path / "sc"
    root.mkdir()
    rows = {
        "0": {"filename": "000000000001.jpg", "caption": "A dog on a sofa. ", "negative_caption": "a cat on a sofa."},
        "1": {"filename": "000000000002.jpg", "caption": "a cat on a sofa.", "negative_caption": "a dog  on a sofa."},
    }
    (root / "replace_obj.json").write_text(json.dumps(rows))
    metrics = {a.name: a.metrics for a in audit_benchmark("sugarcrepe", root).audits}["replace_obj"]
    assert metrics["cycles"]["n_cycles"] == 1 and metrics["cycles"]["n_paired_items"] == 2
    assert metrics["design"]["n_captions"] == 2
    assert metrics["caption_variants_merged"] == 1  # "a dog  on a sofa." joined "A dog on a sofa. "
