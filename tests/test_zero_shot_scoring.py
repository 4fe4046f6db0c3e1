"""Zero-shot scoring of evaluate.py on hand-made blocks and indices (fast; no model, no folder)."""

from __future__ import annotations

import numpy as np
import pytest

from clip_cycles.data.folder_reader import CycleRows
from clip_cycles.data.images import ImageItem
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
