"""clip_cycles: does a CLIP-like score see how the parts of an image and a caption are paired?

The cycle algebra and audits are importable from the package top level; everything
that needs torch or a model lives in submodules and is imported on first use.
"""

from __future__ import annotations

import logging

from clip_cycles.algebra.audits import (
    BalanceReport,
    CycleAuditReport,
    MarginalReport,
    ValidityReport,
    audit_cycles,
    cycle_balance,
    cycle_edges,
    hard_negative_edges,
    marginal_tv,
    pair_measure_tv,
    predicate_validity,
    signed_degrees,
    winoground_comparisons,
)
from clip_cycles.algebra.contrast import (
    DEFAULT_TIE_TOLERANCE,
    bilinear_deltas,
    block_scores_from_embeddings,
    block_scores_from_score_fn,
    cycle_acc,
    cycle_contrast,
    cycle_credits,
    deltas_from_blocks,
    deltas_from_embeddings,
    deltas_from_score_fn,
    validate_cycles,
)
from clip_cycles.algebra.winoground import WinogroundScores, winoground_scores
from clip_cycles.results import mean_sd

__version__ = "0.1.0"

# A library adds no handler of its own: notes reach the application's handlers, or nobody
# (clip_cycles.verbosity; the clip-cycles command configures stderr).
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "DEFAULT_TIE_TOLERANCE",
    "BalanceReport",
    "CycleAuditReport",
    "MarginalReport",
    "ValidityReport",
    "WinogroundScores",
    "audit_cycles",
    "bilinear_deltas",
    "block_scores_from_embeddings",
    "block_scores_from_score_fn",
    "cycle_acc",
    "cycle_balance",
    "cycle_contrast",
    "cycle_credits",
    "cycle_edges",
    "deltas_from_blocks",
    "deltas_from_embeddings",
    "deltas_from_score_fn",
    "hard_negative_edges",
    "marginal_tv",
    "mean_sd",
    "pair_measure_tv",
    "predicate_validity",
    "signed_degrees",
    "validate_cycles",
    "winoground_comparisons",
    "winoground_scores",
]
