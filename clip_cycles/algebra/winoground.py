"""Winoground-style text, image and group scores on the same 2x2 blocks as the cycles.

Semantics follow clip_benchmark's ``image_caption_selection`` exactly: the text score of
a block is correct when each image's best caption (argmax over its row) is its own,
the image score when each caption's best image (argmax over its column) is its own,
and the group score when both hold. Ties go to the first index, as ``argmax`` does in
numpy and torch, so (u1, v1) wins a tie against (u1, v2) while (u2, v2) loses one
against (u2, v1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clip_cycles.algebra.contrast import deltas_from_blocks


@dataclass
class WinogroundScores:
    """Per-block correctness and their means."""

    text_correct: np.ndarray
    image_correct: np.ndarray
    group_correct: np.ndarray

    @property
    def text_acc(self) -> float:
        return float(self.text_correct.mean())

    @property
    def image_acc(self) -> float:
        return float(self.image_correct.mean())

    @property
    def group_acc(self) -> float:
        return float(self.group_correct.mean())

    def to_dict(self) -> dict[str, Any]:
        return {"text_acc": self.text_acc, "image_acc": self.image_acc, "group_acc": self.group_acc}


def winoground_scores(blocks: object) -> WinogroundScores:
    """Text, image and group correctness of (N, 2, 2) blocks ``[[s11, s12], [s21, s22]]``.

    Rows are images, columns captions; block (i, i) is the matched pair.
    """
    deltas_from_blocks(blocks)  # validates shape, finiteness and non-emptiness
    array = np.asarray(blocks, dtype=np.float64)
    target = np.arange(2)
    text_correct = (array.argmax(axis=2) == target).all(axis=1)
    image_correct = (array.argmax(axis=1) == target).all(axis=1)
    return WinogroundScores(
        text_correct=text_correct,
        image_correct=image_correct,
        group_correct=text_correct & image_correct,
    )
