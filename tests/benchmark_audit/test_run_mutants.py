"""One benchmark's audit around the numbers (benchmark_audit.run): the record's metrics and identity, the item-set
digest, the missing-images refusal, the subsets an unreadable image empties, and the unusable rows (issue 56:
mutation-directed). Designs are built by hand and the encoder is a stand-in, so every expected value is
written out here or recomputed from the documented recipe."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from benchmark_formats import cycle_table_rows, write_table

from clip_cycles.benchmark_audit import run
from clip_cycles.benchmark_audit.audit import AuditSettings
from clip_cycles.benchmark_audit.design import ComparisonSetBuilder, empty_subset
from clip_cycles.benchmark_audit.run import (
    BenchmarkAudit,
    audit_benchmark,
    audit_identity,
    check_images_present,
    embed_subsets,
    items_digest,
    split_unusable,
    unusable_row,
)
from clip_cycles.data.sources.images import ImageItem


def _pair(builder: ComparisonSetBuilder, cid: str, item: str, image: ImageItem, pos: str, neg: str) -> None:
    builder.add(cid, item, [image, image], [pos, neg], [1.0, -1.0])


def _subset(name: str, images: dict[str, ImageItem] | None = None) -> Any:
    img = images or {k: ImageItem(k, data=b"x") for k in ("a", "b", "c")}
    builder = ComparisonSetBuilder(name, kind="hard_negatives")
    _pair(builder, "c1", "i1", img["a"], "a dog", "a cat")
    _pair(builder, "c2", "i1", img["b"], "a cat", "a dog")
    _pair(builder, "c3", "i2", img["c"], "réd", "blue")
    builder.skip("earlier_reason", 2)
    return builder.build()


def test_metrics_and_record_carry_the_settings_the_digest_and_the_model_source() -> None:
    sub = SimpleNamespace(name="s", metrics={"model_acc": 0.5})
    settings = AuditSettings(tie_tolerance=0.01, probe_folds=3, probe_c=2.0)
    audit = BenchmarkAudit("cola", [sub], {"n_comparisons": 4}, settings)
    metrics = audit.metrics()
    assert metrics == {
        "n_comparisons": 4,
        "tie_tolerance": 0.01,
        "probe": {"folds": 3, "C": 2.0, "folds_by": "item"},
        "averaged_over": {
            "*_acc": "the subset's comparisons (credit 1 / 0.5 tie / 0)",
            "model_item_acc": "items (an item counts its weakest comparison)",
            "cycle_acc": "exact cycles (declared or paired)",
        },
        "subsets": {"s": {"model_acc": 0.5}},
    }
    assert list(metrics)[:2] == ["n_comparisons", "tie_tolerance"]  # headline numbers first
    record = audit.record()
    assert record == {"dataset": "audit/cola", "model": "", "pretrained": "", "task": "benchmark_audit",
                      "metrics": metrics, "language": "en"}  # fmt: skip
    full = BenchmarkAudit(
        "cola",
        [sub],
        {"n_comparisons": 4},
        settings,
        encode_stats={"images": 2},
        model={"model": "m", "pretrained": "p", "backend": "features", "weights_sha256": "abc", "other": 1},
        unusable={"odd": {"n_comparisons": 0, "reason": "empty"}},
        items_sha256="d" * 64,
        identity={"split": "all", "items_sha256": "d" * 64},
    )
    metrics = full.metrics()
    assert list(metrics)[-3:] == ["unusable_subsets", "items_sha256", "encoding"]
    assert metrics["unusable_subsets"] == {"odd": {"n_comparisons": 0, "reason": "empty"}}
    assert metrics["items_sha256"] == "d" * 64 and metrics["encoding"] == {"images": 2}
    record = full.record(language="fr")
    assert (record["dataset"], record["model"], record["pretrained"], record["language"]) == ("audit/cola", "m", "p", "fr")
    assert (record["split"], record["items_sha256"]) == ("all", "d" * 64)
    assert (record["backend"], record["weights_sha256"]) == ("features", "abc") and "other" not in record
    only_backend = BenchmarkAudit("x", [], {}, settings, model={"model": "m", "backend": "open_clip"}).record()
    assert only_backend["backend"] == "open_clip" and "weights_sha256" not in only_backend


def _digest_by_hand(subsets: list[tuple[str, str, list[tuple[str, str, list[list[Any]]]]]], unusable: dict[str, Any]) -> str:
    """The documented recipe, written again: per subset by name, its header line, then one line per comparison."""
    h = hashlib.sha256()
    for name, kind, comparisons in sorted(subsets):
        h.update(json.dumps(["subset", name, kind]).encode() + b"\n")
        for cid, item, edges in comparisons:
            h.update(json.dumps([cid, item, edges], ensure_ascii=False).encode("utf-8") + b"\n")
    h.update(json.dumps(["not audited", sorted(unusable.items())], sort_keys=True).encode())
    return h.hexdigest()


def test_items_digest_follows_the_recipe_and_tells_a_weight_a_caption_or_an_item_apart() -> None:
    first, second = _subset("zeta"), _subset("alpha")
    expected_edges = [
        ("c1", "i1", [["a", "a dog", 1.0], ["a", "a cat", -1.0]]),
        ("c2", "i1", [["b", "a cat", 1.0], ["b", "a dog", -1.0]]),
        ("c3", "i2", [["c", "réd", 1.0], ["c", "blue", -1.0]]),
    ]
    unusable = {"odd": {"reason": "empty é", "n_comparisons": 0}}
    want = _digest_by_hand([("zeta", "hard_negatives", expected_edges), ("alpha", "hard_negatives", expected_edges)], unusable)
    assert items_digest([first, second], unusable) == want
    assert items_digest([second, first], unusable) == want  # subsets by name, not by order read
    assert items_digest([first], {}) == _digest_by_hand([("zeta", "hard_negatives", expected_edges)], {})
    changed = _subset("zeta")
    changed.edge_weight = changed.edge_weight * 2
    assert items_digest([changed], {}) != items_digest([first], {})
    renamed = _subset("zeta")
    renamed.item_ids = ["i1", "i1", "i9"]
    assert items_digest([renamed], {}) != items_digest([first], {})
    identity = audit_identity("cola", [first, second], unusable)
    assert identity == {
        "split": "all",
        "items_sha256": want,
        "source": {"kind": "benchmark", "builder": "cola", "world": None, "annotations": {}},
        "source_line": "benchmark cola: 2 subsets as published",
    }
    assert audit_identity("cola", [first])["items_sha256"] == items_digest([first], {})


def test_missing_images_are_counted_over_subsets_and_the_first_is_named(tmp_path: Path) -> None:
    (tmp_path / "here.png").write_bytes(b"png")
    images = {
        "a": ImageItem("a", path=tmp_path / "gone_a.png"),
        "b": ImageItem("b", path=tmp_path / "here.png"),
        "c": ImageItem("c", path=tmp_path / "gone_c.png"),
    }
    subsets = [_subset("s1", images), _subset("s2", images)]
    with pytest.raises(FileNotFoundError) as caught:
        check_images_present("cola", tmp_path, subsets)
    expected_layout = run.ADAPTERS.get("cola").expects
    assert str(caught.value) == (
        f"cola root {tmp_path}: 2 of 3 images are not there (the first, 'a', was looked for at {tmp_path / 'gone_a.png'}); "
        f"an audit with a model reads {expected_layout}: put the images there, pass --skip-bad-images to count and skip "
        "the missing ones, or drop --model to audit the design and length rules only"
    )
    embedded = {k: ImageItem(k, path=tmp_path / "gone.png", data=b"bytes") for k in ("a", "b", "c")}
    check_images_present("cola", tmp_path, [_subset("s", embedded)])  # bytes in the file: nothing to look for
    no_path = {k: ImageItem(k) for k in ("a", "b", "c")}
    check_images_present("cola", tmp_path, [_subset("s", no_path)])


class _Stats:
    def to_dict(self) -> dict[str, int]:
        return {"encoded": 1}


def test_an_unreadable_image_drops_its_whole_item_and_a_subset_it_empties_becomes_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    features = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [0.6, 0.8]}  # "bad" could not be read

    def encode(images, captions, spec, cache_dir, **kwargs):  # noqa: ANN001, ANN003, ANN202
        calls.append({"keys": [i.key for i in images], "captions": list(captions), "spec": spec, "cache": cache_dir, **kwargs})
        keys = [k for k in features if any(i.key == k for i in images)]
        texts = sorted(set(captions))
        return SimpleNamespace(
            image_rows={k: r for r, k in enumerate(keys)},
            image_features=np.array([features[k] for k in keys], dtype=np.float32),
            caption_rows={t: r for r, t in enumerate(texts)},
            caption_features=np.array([[float(len(t)), float(r)] for r, t in enumerate(texts)], dtype=np.float32),
            stats=_Stats(),
        )

    monkeypatch.setattr(run, "encode", encode)
    img = {k: ImageItem(k, data=b"x") for k in ("a", "b", "c", "bad")}
    mixed = ComparisonSetBuilder("mixed")
    _pair(mixed, "c1", "i1", img["a"], "a dog", "a cat")
    _pair(mixed, "c2", "i2", img["b"], "red", "blue")
    _pair(mixed, "c3", "i2", img["bad"], "blue", "red")  # i2 goes whole: c2 with it
    _pair(mixed, "c4", "i3", img["c"], "one", "two")
    lost = ComparisonSetBuilder("lost", kind="blocks")
    _pair(lost, "d1", "j1", img["bad"], "x", "y")
    lost.skip("before", 3)
    whole = ComparisonSetBuilder("whole")
    _pair(whole, "e1", "k1", img["c"], "one", "two")
    sets, embeddings, stats = embed_subsets(
        [mixed.build(), lost.build(), whole.build()],
        "spec",
        "cache",
        batch_size=7,
        num_workers=2,
        skip_bad_images=True,
        caption_format=str.upper,
    )
    assert calls[0]["keys"] == ["a", "b", "bad", "c", "bad", "c"]
    assert calls[0]["captions"][:2] == ["A DOG", "A CAT"]
    assert (calls[0]["spec"], calls[0]["cache"]) == ("spec", "cache")
    assert (calls[0]["batch_size"], calls[0]["num_workers"], calls[0]["skip_bad_images"]) == (7, 2, True)
    assert stats.to_dict() == {"encoded": 1}
    kept, emptied, untouched = sets
    assert kept.comparison_ids == ["c1", "c4"] and kept.skipped == {"comparison_of_item_with_bad_image": 2}
    assert emptied.n_comparisons == 0 and emptied.kind == "blocks" and emptied.name == "lost"
    assert emptied.unusable == "every item touches an unreadable image (first: 'bad')"
    assert emptied.skipped == {"before": 3, "comparison_of_item_with_bad_image": 1}
    assert embeddings[1].images.shape == (0, 2) and embeddings[1].captions.shape == (0, 2)
    assert untouched.comparison_ids == ["e1"] and untouched.skipped == {}
    # Rows follow the subset's own image and caption tables; the image of a dropped item stays a zero row.
    phi = embeddings[0].images
    assert phi.dtype == np.float64 and phi.shape == (4, 2)
    np.testing.assert_allclose(phi, [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.6, 0.8]], rtol=1e-6)
    texts = sorted({t.upper() for t in ("a dog", "a cat", "red", "blue", "one", "two", "x", "y")})
    psi = embeddings[0].captions
    assert psi.dtype == np.float64
    assert psi.tolist() == [[float(len(t.upper())), float(texts.index(t.upper()))] for t in kept.captions]
    np.testing.assert_allclose(embeddings[2].images, [[0.6, 0.8]], rtol=1e-6)


def test_unusable_rows_and_the_split_keep_parallel_sequences_aligned() -> None:
    empty = empty_subset("e", "empty: the subset holds no item", skipped={"z": 1, "a": 2})
    assert unusable_row(empty) == {"n_comparisons": 0, "reason": "empty: the subset holds no item", "skipped": {"a": 2, "z": 1}}
    assert list(unusable_row(empty)["skipped"]) == ["a", "z"]
    no_reason = empty_subset("n", "")
    no_reason.unusable = None
    assert unusable_row(no_reason)["reason"] == "no comparison"
    full = _subset("f")
    (sets, extra), rows = split_unusable([empty, full, no_reason], ["E", "F", "N"])
    assert [s.name for s in sets] == ["f"] and extra == ["F"]
    assert set(rows) == {"e", "n"} and rows["e"]["reason"] == "empty: the subset holds no item"
    (only,), none = split_unusable([full])
    assert [s.name for s in only] == ["f"] and none == {}


def test_audit_benchmark_without_a_model_reads_audits_and_names_what_it_read(tmp_path: Path) -> None:
    path = write_table(tmp_path / "t.jsonl", cycle_table_rows(4))
    audit = audit_benchmark("comparison_table", path)
    assert audit.benchmark == "comparison_table" and audit.model == {} and audit.encode_stats is None
    assert [a.name for a in audit.audits] and audit.summary["n_comparisons"] == 4
    assert audit.identity is not None and audit.identity["items_sha256"] == audit.items_sha256
    assert audit.identity["source_line"] == f"benchmark comparison_table: {len(audit.audits)} subsets as published"
    assert audit.settings == AuditSettings()
    tight = audit_benchmark("comparison_table", path, settings=AuditSettings(tie_tolerance=0.5))
    assert tight.settings.tie_tolerance == 0.5 and tight.metrics()["tie_tolerance"] == 0.5
    empty = tmp_path / "vl"
    for size in ("small", "large"):
        piece = empty / "Object" / "Size" / "swig_size" / "swig_place" / f"swig_place_{size}.json"
        piece.parent.mkdir(parents=True, exist_ok=True)
        piece.write_text("[]")
    with pytest.raises(ValueError) as caught:
        audit_benchmark("vl_checklist", empty)
    piece = "Object/Size/swig_size/swig_place/swig_place_{}"
    assert str(caught.value) == (
        f"vl_checklist root {empty}: no subset has a comparison to audit ({piece.format('large')}: empty: the subset "
        f"holds no item; {piece.format('small')}: empty: the subset holds no item)"
    )


def _fake_encode(calls: list[dict[str, Any]], missing: set[str] = frozenset()):  # noqa: ANN202
    def encode(images, captions, spec, cache_dir, **kwargs):  # noqa: ANN001, ANN003, ANN202
        calls.append({"captions": list(captions), "cache": cache_dir, **kwargs})
        keys = sorted({i.key for i in images} - set(missing))
        texts = sorted(set(captions))
        return SimpleNamespace(
            image_rows={k: r for r, k in enumerate(keys)},
            image_features=np.eye(len(keys), 3),
            caption_rows={t: r for r, t in enumerate(texts)},
            caption_features=np.eye(len(texts), 3),
            stats=_Stats(),
        )

    return encode


def test_embed_subsets_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(run, "encode", _fake_encode(calls))
    sets, _, _ = embed_subsets([_subset("s")], "spec")
    assert calls == [{"captions": ["a dog", "a cat", "réd", "blue"], "cache": None, "batch_size": 64, "num_workers": None,
                      "skip_bad_images": False}]  # fmt: skip
    assert sets[0].comparison_ids == ["c1", "c2", "c3"]


def _spec(can_read_features: bool, sources: list[Any]) -> Any:
    def source(hash_cache: Any) -> dict[str, str]:
        sources.append(hash_cache)
        return {"backend": "features" if can_read_features else "open_clip", "weights_sha256": "abc"}

    backend = SimpleNamespace(can=lambda capability: can_read_features and capability == "precomputed_features")
    return SimpleNamespace(model="m", pretrained="p", backend=backend, source=source)


def test_audit_benchmark_with_a_model_checks_images_embeds_and_names_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_table(tmp_path / "t.jsonl", cycle_table_rows(2))
    calls: list[dict[str, Any]] = []
    sources: list[Any] = []
    monkeypatch.setattr(run, "encode", _fake_encode(calls))
    with pytest.raises(FileNotFoundError, match=r"4 of 4 images are not there"):  # no image file, a backend that reads them
        audit_benchmark("comparison_table", path, _spec(False, sources))
    assert calls == []  # refused before any encoding
    audit = audit_benchmark("comparison_table", path, _spec(False, sources), skip_bad_images=True)
    assert calls[-1]["skip_bad_images"] is True and calls[-1]["batch_size"] == 64 and calls[-1]["num_workers"] is None
    audit = audit_benchmark("comparison_table", path, _spec(True, sources), tmp_path / "cache", batch_size=5, num_workers=1,
                            caption_format=str.upper)  # fmt: skip
    assert (calls[-1]["batch_size"], calls[-1]["num_workers"], calls[-1]["skip_bad_images"]) == (5, 1, False)
    assert calls[-1]["cache"] == tmp_path / "cache" and all(c == c.upper() for c in calls[-1]["captions"])
    assert sources == [None, tmp_path / "cache" / "fingerprints"]
    assert audit.model == {"model": "m", "pretrained": "p", "backend": "features", "weights_sha256": "abc"}
    assert audit.encode_stats == {"encoded": 1} and audit.summary["n_comparisons"] == 2
    assert audit.summary.get("model_acc") is not None and audit.record()["weights_sha256"] == "abc"
    # The settings reach every subset's audit: a tolerance above every score difference makes each comparison a tie.
    loose = audit_benchmark("comparison_table", path, _spec(True, sources), settings=AuditSettings(tie_tolerance=10.0))
    assert [a.metrics["model_acc"] for a in loose.audits] == [0.5] * len(loose.audits)
    assert [a.metrics["model_acc"] for a in audit.audits] != [0.5] * len(audit.audits)


def test_a_subset_whose_every_image_is_unreadable_is_a_row_and_none_left_is_a_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_table(tmp_path / "t.jsonl", cycle_table_rows(2))
    calls: list[dict[str, Any]] = []
    keys = {f"img_{k}.png" for k in range(4)}
    monkeypatch.setattr(run, "encode", _fake_encode(calls, missing=keys))
    with pytest.raises(ValueError) as caught:
        audit_benchmark("comparison_table", path, _spec(True, []), skip_bad_images=True)
    message = str(caught.value)
    assert message.startswith(f"comparison_table root {path}: no subset has a comparison to audit (")
    assert "every item touches an unreadable image (first: 'img_0.png')" in message


def test_audit_benchmark_reads_only_the_subsets_asked_for(tmp_path: Path) -> None:
    root = tmp_path / "vl"
    for size in ("small", "large"):
        piece = root / "Object" / "Size" / "swig_size" / "swig_place" / f"swig_place_{size}.json"
        piece.parent.mkdir(parents=True, exist_ok=True)
        piece.write_text("[]")
    with pytest.raises(ValueError) as caught:
        audit_benchmark("vl_checklist", root, subsets=["Object/Size/swig_size/swig_place/swig_place_small"])
    assert "swig_place_small: empty" in str(caught.value) and "swig_place_large" not in str(caught.value)
