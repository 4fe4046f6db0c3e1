"""Zero-shot scoring of evaluate.py on hand-made blocks and indices (fast; no model, no folder)."""

from __future__ import annotations

import numpy as np
import pytest

from clip_cycles.data.folder.reader import CycleRows
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.encoding.encoder import EncodedFeatures, EncodeStats
from clip_cycles.encoding.task_encoding import cycle_index
from clip_cycles.evaluation.zero_shot import score_blocks


def test_score_blocks_against_a_direct_count() -> None:
    rng = np.random.default_rng(3)
    blocks = rng.integers(-2, 3, size=(300, 2, 2)).astype(float)  # integer scores: exact ties are common
    for tol in (1e-9, 1.0):
        delta = blocks[:, 0, 0] + blocks[:, 1, 1] - blocks[:, 0, 1] - blocks[:, 1, 0]
        text = (blocks[:, 0, 0] >= blocks[:, 0, 1]) & (blocks[:, 1, 1] > blocks[:, 1, 0])
        image = (blocks[:, 0, 0] >= blocks[:, 1, 0]) & (blocks[:, 1, 1] > blocks[:, 0, 1])
        expected = {
            "cycle_acc": float(np.mean(np.where(delta > tol, 1.0, np.where(delta < -tol, 0.0, 0.5)))),
            "text_acc": float(text.mean()),
            "image_acc": float(image.mean()),
            "group_acc": float((text & image).mean()),
            "n_cycles": 300,
            "n_ties": int((abs(delta) <= tol).sum()),
        }
        scores = score_blocks(blocks, tol, n_resamples=200, bootstrap_seed=5)
        intervals = {k: scores.pop(f"{k}_ci") for k in ("cycle_acc", "text_acc", "image_acc", "group_acc")}
        assert scores == pytest.approx(expected, abs=1e-12)
        assert expected["n_ties"] > 0 and expected["cycle_acc"] != 0.5
        # Each interval from one set of draws shared by the four columns, replayed here by hand.
        columns = {
            "cycle_acc": np.where(delta > tol, 1.0, np.where(delta < -tol, 0.0, 0.5)),
            "text_acc": text.astype(float),
            "image_acc": image.astype(float),
            "group_acc": (text & image).astype(float),
        }
        draws = np.random.default_rng(5)
        picks = [draws.integers(0, 300, size=300) for _ in range(200)]
        for name, values in columns.items():
            low, high = np.quantile([values[p].mean() for p in picks], [0.025, 0.975])
            ci = intervals[name]
            assert (ci["low"], ci["high"]) == pytest.approx((low, high), abs=1e-12), name
            assert ci["low"] <= expected[name] <= ci["high"] and ci["low"] < ci["high"]
            assert (ci["n_resamples"], ci["seed"], ci["unit"]) == (200, 5, "cycle")


def test_cycle_index_maps_rows_to_table_rows_and_counts_drops() -> None:
    items = {k: ImageItem(key=k) for k in ("a.jpg", "b.jpg", "c.jpg", "gone.jpg")}
    rows = CycleRows.from_pairs(
        ["c0", "c1", "c2", "c3"],
        [
            (items["a.jpg"], items["b.jpg"]),
            (items["gone.jpg"], items["c.jpg"]),
            (items["c.jpg"], items["a.jpg"]),
            (items["b.jpg"], items["gone.jpg"]),
        ],  # fmt: skip
        [("x", "y"), ("y", "z"), ("z", "x"), ("x", "z")],
    )
    encoded = EncodedFeatures(np.zeros((3, 2), np.float32), np.zeros((3, 2), np.float32),
                              {"b.jpg": 0, "a.jpg": 1, "c.jpg": 2}, {"z": 0, "x": 1, "y": 2}, EncodeStats())  # fmt: skip
    index, dropped = cycle_index(rows, encoded)
    assert dropped == 2  # the cycles with an image the encoder skipped
    assert index.dtype == np.int64 and index.tolist() == [[1, 0, 1, 2], [2, 1, 0, 1]]
    empty, dropped = cycle_index(CycleRows.from_pairs([], [], []), encoded)
    assert empty.shape == (0, 4) and empty.dtype == np.int64 and dropped == 0


def test_cycle_samples_follow_the_kept_rows_when_an_image_was_skipped() -> None:
    from types import SimpleNamespace

    from clip_cycles.algebra.contrast import block_scores_from_embeddings
    from clip_cycles.evaluation.samples import cycle_samples

    items = {k: ImageItem(key=k) for k in ("a.jpg", "b.jpg", "c.jpg", "gone.jpg")}
    rows = CycleRows.from_pairs(
        ["c0", "c1", "c2"],
        [(items["a.jpg"], items["gone.jpg"]), (items["b.jpg"], items["c.jpg"]), (items["c.jpg"], items["a.jpg"])],
        [("x", "y"), ("y", "z"), ("z", "x")],
    )
    rng = np.random.default_rng(0)
    images, texts = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    encoded = EncodedFeatures(images, texts, {"a.jpg": 0, "b.jpg": 1, "c.jpg": 2}, {"x": 0, "y": 1, "z": 2}, EncodeStats())
    index, dropped = cycle_index(rows, encoded)
    assert dropped == 1
    blocks = block_scores_from_embeddings(images.astype(np.float64), texts.astype(np.float64), index)
    task = SimpleNamespace(name="cycles/t", split="test", tie_tolerance=1e-9)
    lines = cycle_samples(task, 2, rows, encoded, blocks)  # type: ignore[arg-type]
    assert [(x["cycle_id"], x["image_0"], x["image_1"], x["caption_0"]) for x in lines] == [
        ("c1", "b.jpg", "c.jpg", "y"),
        ("c2", "c.jpg", "a.jpg", "z"),
    ]
    # s11 is image_0 with caption_0, by hand from the feature rows.
    b, c, a = images[1].astype(np.float64), images[2].astype(np.float64), images[0].astype(np.float64)
    y, z, x = texts[1].astype(np.float64), texts[2].astype(np.float64), texts[0].astype(np.float64)
    for line, (i0, i1, t0, t1) in zip(lines, ((b, c, y, z), (c, a, z, x))):
        cos = [[u @ v for v in (t0, t1)] for u in (i0, i1)]  # the encoder normalizes; the blocks are dot products
        assert [line["s11"], line["s12"], line["s21"], line["s22"]] == pytest.approx([cos[0][0], cos[0][1], cos[1][0], cos[1][1]])
        assert line["seed"] == 2 and line["split"] == "test" and line["task"] == "cycles/t"
