"""Exact ceilings of blind text rules on a benchmark subset, beside the measured floors.

A score that sees the image but reads the caption only through a view (its bag of words, its
length) gives every caption with the same view the same score on an image, so a comparison whose
edges cancel once each (image, caption) is replaced by (image, view of the caption) is a tie
(T = 0, half credit) for every such score. Any other comparison can at best be won, so the ceiling
over all scores of that kind is ``1 - share_forced / 2``: counted, not estimated, and no score of
that kind can exceed it (one that wins every other comparison reaches it; where comparisons share
an (image, view) pair with opposite signs no single score can win them all, so it is an upper bound).

Views, with the words' normalisation declared in :data:`NORMALISATION`:

- ``bag_of_words``: the multiset of lowercase words (an order-blind text scorer);
- ``length``: the caption's length in characters, as the shortest/longest-caption rules read it;
- ``caption_only``: the caption itself (any score b(v) ignoring the image): forced where
  every caption's signed degree in the comparison is zero.

The length floor is the better of the two length rules actually measured
(``shortest_caption_acc``, ``longest_caption_acc``): a rule that reaches it exists.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable, Hashable

import numpy as np

from clip_cycles.algebra.audits import DEGREE_TOL
from clip_cycles.benchmark_audit.design import ComparisonSet

#: How captions become words for the bag-of-words view (declared in every audit's metrics).
NORMALISATION: dict[str, str] = {
    "bag_of_words": "lowercase, then words = maximal runs of letters, digits or underscores (regex \\w+); "
    "punctuation and whitespace dropped; the multiset of words (order ignored)",
    "length": "number of characters of the caption as published",
    "caption_only": "the caption vertex (captions equal up to whitespace and case are one vertex)",
}

WORD = re.compile(r"\w+")


def bag_of_words(text: str) -> tuple[tuple[str, int], ...]:
    """The caption's multiset of lowercase words, as a sorted tuple of (word, count)."""
    return tuple(sorted(Counter(WORD.findall(text.lower())).items()))


def forced_ties_by_edge(cs: ComparisonSet, edge_view: np.ndarray) -> np.ndarray:
    """Per comparison: True when its edges cancel once each edge's caption is replaced by ``edge_view[e]`` (an id)."""
    n_views = int(edge_view.max()) + 1 if edge_view.size else 0
    keys = (cs.edge_comparison * (len(cs.images) + 1) + cs.edge_image) * (n_views + 1) + edge_view
    unique, inverse = np.unique(keys, return_inverse=True)
    totals = np.bincount(inverse, weights=cs.edge_weight, minlength=len(unique))
    comparison_of_key = unique // ((len(cs.images) + 1) * (n_views + 1))
    open_ = np.zeros(cs.n_comparisons, dtype=bool)
    open_[comparison_of_key[np.abs(totals) > DEGREE_TOL]] = True
    return ~open_


def forced_ties(cs: ComparisonSet, view: Callable[[str], Hashable]) -> np.ndarray:
    """Per comparison: True when its edges cancel once each caption vertex is replaced by ``view(caption)``."""
    views: dict[Hashable, int] = {}
    caption_view = np.array([views.setdefault(view(text), len(views)) for text in cs.captions], dtype=np.int64)
    return forced_ties_by_edge(cs, caption_view[cs.edge_caption])


def length_forced_ties(cs: ComparisonSet) -> np.ndarray:
    """Forced ties of the length view, each edge reading its caption's length as published."""
    _, edge_view = np.unique(cs.caption_lengths(), return_inverse=True)
    return forced_ties_by_edge(cs, edge_view.astype(np.int64).ravel())


#: The views of a caption whose forced ties give a ceiling, each as ``comparison set -> forced-tie mask``.
VIEWS: dict[str, Callable[[ComparisonSet], np.ndarray]] = {
    # Bag of words is a function of the caption vertex (whitespace and case are not words).
    "bag_of_words": lambda cs: forced_ties(cs, bag_of_words),
    "length": length_forced_ties,
}


def subset_ceilings(cs: ComparisonSet, metrics: dict[str, Any]) -> dict[str, Any]:
    """Ceilings (and the share of comparisons each view forces to a tie) of one subset; floors from ``metrics``."""
    _, d_cap = cs.degree_matrices()
    per_caption = np.asarray((d_cap != 0).sum(axis=1)).ravel()
    forced = {name: view(cs) for name, view in VIEWS.items()}
    forced["caption_only"] = per_caption == 0
    n = cs.n_comparisons
    out: dict[str, Any] = {"normalisation": dict(NORMALISATION)}
    for name, mask in forced.items():
        count = int(mask.sum())
        out[f"{name}_forced_ties"] = count
        out[f"{name}_forced_share"] = count / n
        out[f"{name}_ceiling"] = 1.0 - 0.5 * count / n
    out["length_floor"] = max(metrics["shortest_caption_acc"], metrics["longest_caption_acc"])
    out["length_floor_rule"] = (
        "shortest_caption" if metrics["shortest_caption_acc"] >= metrics["longest_caption_acc"] else "longest_caption"
    )
    return out
