"""The concept embedding's normalisation step (paper 2: the mean image embedding of a concept), by hand.

Each image feature is L2-normalised by the encoder (one row, unit length); a concept's embedding is
the plain mean of its usable images' unit rows, not normalised again (its length says how much the
images agree). ``normalize_items`` normalises raw rows before the mean; skipped images drop out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clip_cycles.attributes import concept_features
from clip_cycles.attributes.concept_features import concept_image_embeddings
from clip_cycles.attributes.concepts import mean_embeddings_by_concept
from clip_cycles.encoding.encoder import EncodedFeatures, EncodeStats, _check_output

RAW = {"a": [[3.0, 4.0], [0.0, 2.0]], "b": [[1.0, 0.0]], "c": [], "d": [[0.0, -5.0], [6.0, 8.0], [1.0, 1.0]]}


def _encoder(batches: list[int]):
    table = {f"{c}{i}": np.array(v) for c, rows in RAW.items() for i, v in enumerate(rows)}

    def encode(batch: list[str]) -> np.ndarray:
        batches.append(len(batch))
        return np.stack([table[key] for key in batch])

    return encode


@pytest.mark.parametrize("batch_size", [1, 2, 256])
def test_mean_of_raw_rows_and_of_unit_rows_by_hand(batch_size: int) -> None:
    items = {c: [f"{c}{i}" for i in range(len(rows))] for c, rows in RAW.items()}
    batches: list[int] = []
    ids, means = mean_embeddings_by_concept(items, _encoder(batches), batch_size=batch_size)
    assert ids == ("a", "b", "d")  # a concept without items is left out (the caller counts it)
    np.testing.assert_allclose(means, [[1.5, 3.0], [1.0, 0.0], [7.0 / 3, 4.0 / 3]], rtol=0, atol=1e-15)
    assert max(batches) <= batch_size and sum(batches) == 6
    _, unit = mean_embeddings_by_concept(items, _encoder([]), batch_size=batch_size, normalize_items=True)
    s = 1 / np.sqrt(2.0)
    expected = [[(0.6 + 0.0) / 2, (0.8 + 1.0) / 2], [1.0, 0.0], [(0.0 + 0.6 + s) / 3, (-1.0 + 0.8 + s) / 3]]
    np.testing.assert_allclose(unit, expected, rtol=0, atol=1e-15)


def test_the_encoder_normalises_each_row_to_unit_length() -> None:
    torch = pytest.importorskip("torch")
    rows = _check_output(torch.tensor([[3.0, 4.0], [0.0, -2.0], [1e-3, 1e-3]]), 3, "image", ["x", "y", "z"])
    s = 1 / np.sqrt(2.0)
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.0, -1.0], [s, s]], rtol=0, atol=1e-7)
    assert rows.dtype == np.float32


def test_a_concept_embedding_is_the_plain_mean_of_its_usable_unit_rows(monkeypatch, tmp_path: Path) -> None:
    unit = {"x/1.jpg": [0.6, 0.8], "x/2.jpg": [0.0, 1.0], "y/1.jpg": [1.0, 0.0], "y/2.jpg": [0.0, 1.0]}
    keys = list(unit)  # y/3.jpg was skipped by the encoder (a bad image): it has no row

    root = tmp_path
    paths = {"x": [root / "x/1.jpg", root / "x/2.jpg"], "y": [root / "y/1.jpg", root / "y/2.jpg", root / "y/3.jpg"],
             "z": [root / "z/1.jpg"]}  # fmt: skip
    asked: list[str] = []

    def fake_encode(images, captions, spec, **kwargs) -> EncodedFeatures:
        asked.extend(item.key for item in images)
        table = np.array([unit[k] for k in keys], dtype=np.float32)
        return EncodedFeatures(table, np.zeros((0, 2), np.float32), {k: i for i, k in enumerate(keys)}, {}, EncodeStats())

    monkeypatch.setattr(concept_features, "encode", fake_encode)
    ids, matrix = concept_image_embeddings(paths, spec=None, root=root)
    assert sorted(asked) == ["x/1.jpg", "x/2.jpg", "y/1.jpg", "y/2.jpg", "y/3.jpg", "z/1.jpg"]  # keyed relative to root
    assert ids == ("x", "y")  # z's only image was skipped: the concept falls out
    expected = np.array([[0.3, 0.9], [0.5, 0.5]])  # means of float32 unit rows; y ignores its skipped image
    np.testing.assert_allclose(matrix, expected, rtol=0, atol=1e-7)
    # Not normalised again: the mean of two different unit rows is shorter than 1.
    assert np.linalg.norm(matrix[1]) == pytest.approx(np.sqrt(0.5), abs=1e-7)
    assert matrix.dtype == np.float64
