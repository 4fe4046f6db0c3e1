"""The additive audit's report, declared: what ``heads.additive_audit.AdditiveAuditReport.to_dict`` writes.

It is a result (``metrics.additive_audit.per_seed.<seed>``) and a cache entry
(``<cache>/audits/<key>.json``: ``{settings, report}``); a cached report that does not
match this declaration is recomputed, never served. Keys it does not declare are kept.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from clip_cycles.schemas.declared import Open

Count = Field(ge=0, description="a non-negative integer")


class ProbeReport(Open):
    """One shortcut probe of the audit."""

    cycle_acc: float | None = Field(description="the probe's CycleAcc on the test cycles (0.5 for an additive score)")
    max_abs_delta: float = Field(description="the largest |Delta| of the probe on the test cycles")
    passed: bool = Field(description="true or false")
    steps_taken: int = Field(ge=0, description="a non-negative integer: optimizer steps")
    train_loss: float | None = Field(description="the final training loss")
    pair_auroc: float | None = Field(description="what the probe learned: AUROC on held-out pairs")
    train_pair_auroc: float | None = Field(description="AUROC on its training pairs")


class AdditiveAuditReport(Open):
    """The additive audit of one seed."""

    passed: bool = Field(description="true or false: every probe at exactly 0.5 on balanced comparisons")
    design: str = Field(min_length=1, description="the comparison design")
    probes: dict[str, ProbeReport] = Field(description="an object of probe name -> report")
    pair_auroc_over: str = Field(description="which pairs the AUROC is over")
    n_train_pairs: int = Count
    n_eval_pairs: int = Count
    n_test: int = Count
    n_val: int = Count
    n_unbalanced_comparisons: int = Count
    witness: dict[str, Any] | None = Field(description="a Theorem 1 witness, or null")
    epochs: int = Count
    seed: int = Count
    tie_tolerance: float = Field(ge=0, allow_inf_nan=False, description="a finite non-negative number")
    failures: list[str] = Field(description="a list of failure descriptions")


def additive_audit_json_schema() -> dict[str, Any]:
    """The JSON Schema of an additive-audit report."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "clip_cycles additive-audit report",
        **AdditiveAuditReport.model_json_schema(),
    }
