"""The additive audit: image-only, text-only and additive probes must score exactly 0.5 CycleAcc.

Theorem 1 says no additive score can solve a set of complete blocks. The audit
trains the three additive probes with the cycle loss (REFERENCE.md: 5 epochs) and
scores them on the test cycles from their float64 logits, so it checks the whole
path (features, indices, evaluation) rather than the algebra alone. It passes
iff every probe's CycleAcc is exactly 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clip_cycles.contrast import DEFAULT_TIE_TOL, cycle_acc, validate_cycles, validate_features

#: The probes of the audit, in report order (names in clip_cycles.heads.HEADS).
ADDITIVE_PROBES = ("image_only", "text_only", "additive")


@dataclass
class ProbeAudit:
    """One additive probe: its test CycleAcc and how far its contrasts are from zero."""

    head: str
    cycle_acc: float
    max_abs_delta: float
    best_epoch: int
    steps_taken: int
    steps_skipped: int

    @property
    def passed(self) -> bool:
        """True iff CycleAcc is exactly 0.5."""
        return self.cycle_acc == 0.5


@dataclass
class AdditiveAuditReport:
    """CycleAcc of every additive probe on the test cycles; ``passed`` iff all are exactly 0.5."""

    probes: dict[str, ProbeAudit]
    n_train: int
    n_val: int
    n_test: int
    epochs: int
    seed: int
    tie_tol: float
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True iff every probe scored exactly 0.5."""
        return all(p.passed for p in self.probes.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report."""
        return {
            "passed": self.passed,
            "probes": {
                name: {
                    "cycle_acc": p.cycle_acc,
                    "max_abs_delta": p.max_abs_delta,
                    "passed": p.passed,
                    "best_epoch": p.best_epoch,
                    "steps_taken": p.steps_taken,
                    "steps_skipped": p.steps_skipped,
                }
                for name, p in self.probes.items()
            },
            "n_train": self.n_train,
            "n_val": self.n_val,
            "n_test": self.n_test,
            "epochs": self.epochs,
            "seed": self.seed,
            "tie_tol": self.tie_tol,
            "failures": list(self.failures),
        }


def additive_audit(
    image_features: object,
    caption_features: object,
    train_cycles: object,
    test_cycles: object,
    val_cycles: object | None = None,
    epochs: int = 5,
    seed: int = 0,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    batch_size: int = 512,
    tie_tol: float = DEFAULT_TIE_TOL,
) -> AdditiveAuditReport:
    """Train image-only, text-only and additive probes with the cycle loss; report test CycleAcc.

    Parameters
    ----------
    image_features, caption_features:
        Frozen feature tables; cycles index their rows.
    train_cycles, test_cycles, val_cycles:
        (N, 4) int arrays with columns (u1, u2, v1, v2).
    epochs, seed, lr, weight_decay, batch_size:
        Training settings (paper: 5 epochs).

    Returns
    -------
    AdditiveAuditReport; ``passed`` iff every probe's CycleAcc is exactly 0.5.
    """
    from clip_cycles.heads import head_deltas, make_head
    from clip_cycles.training import TrainConfig, train_on_cycles

    phi = validate_features(image_features, "image_features")
    psi = validate_features(caption_features, "caption_features")
    train = validate_cycles(train_cycles, phi.shape[0], psi.shape[0])
    test = validate_cycles(test_cycles, phi.shape[0], psi.shape[0])
    val = None if val_cycles is None else validate_cycles(val_cycles, phi.shape[0], psi.shape[0])
    config = TrainConfig(
        lr=lr, weight_decay=weight_decay, epochs=epochs, batch_size=batch_size, seed=seed, loss="cycle", tie_tol=tie_tol
    )
    probes: dict[str, ProbeAudit] = {}
    failures: list[str] = []
    for name in ADDITIVE_PROBES:
        head = make_head(name, phi.shape[1], psi.shape[1], seed=seed)
        result = train_on_cycles(head, phi, psi, train, val, None, config)
        deltas = head_deltas(result.head, phi, psi, test)
        audit = ProbeAudit(
            head=name,
            cycle_acc=cycle_acc(deltas, tie_tol),
            max_abs_delta=float(np.max(np.abs(deltas))),
            best_epoch=result.best_epoch,
            steps_taken=int(sum(r.steps for r in result.history)),
            steps_skipped=result.steps_skipped,
        )
        probes[name] = audit
        if not audit.passed:
            failures.append(f"{name}: CycleAcc {audit.cycle_acc!r} != 0.5 (max |Delta| {audit.max_abs_delta:.3g})")
    return AdditiveAuditReport(
        probes=probes,
        n_train=int(train.shape[0]),
        n_val=0 if val is None else int(val.shape[0]),
        n_test=int(test.shape[0]),
        epochs=epochs,
        seed=seed,
        tie_tol=tie_tol,
        failures=failures,
    )
