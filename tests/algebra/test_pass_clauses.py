"""Every ``passed`` verdict, clause by clause: violating one clause alone flips the verdict and names it.

- the build gates (``families.build_family``): matched pairs valid, swaps false beyond doubt, one stratum;
- the additive audit (``heads.additive_audit``): every test comparison balanced, every probe exactly 0.5;
- zero-shot's audit summary (``evaluation.zero_shot.score_task``): every seed's audit passed.

The folder audit's checks (``ok``) each have their tripping test in ``tests/data/folder/test_folder_audit.py``; the
benchmark audit reports no verdict (its blind baselines are numbers, not a gate).
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

from clip_cycles.algebra.audits import audit_cycles
from clip_cycles.data.families.registry import AuditError, Cycle, Family, StratumError, build_family
from clip_cycles.heads import additive_audit as audit_module
from clip_cycles.heads.additive_audit import ADDITIVE_PROBES, additive_audit

# --------------------------------------------------------------------------- the validity gate on its own


def _truth(image: int, caption: str) -> bool:
    """Image 0 shows 'a', image 1 shows 'b' (and 'x' is shown by both, for a swap that is not false)."""
    return caption == "x" or caption == "ab"[image]


GATE_CASES = {
    # (cycles (u1, u2, v1, v2), the clause each case violates alone)
    "valid": ([(0, 1, "a", "b")], None),
    "matched": ([(0, 1, "c", "b")], "matched_violations"),  # image 0 does not show 'c'; swaps still false
    "swap": ([(0, 1, "a", "x")], "swap_violations"),  # both matched hold; image 0 also shows 'x'
}


@pytest.mark.parametrize("case", GATE_CASES)
def test_validity_gate_by_clause(case: str) -> None:
    cycles, clause = GATE_CASES[case]
    report = audit_cycles(cycles, _truth, cycle_ids=["c0"]).to_dict()
    assert report["passed"] is (clause is None)
    for name in ("matched_violations", "swap_violations"):
        assert (report[name] > 0) is (name == clause), (case, name)
        kind = name.split("_")[0]
        assert report["validity"][f"{kind}_violation_cycles"] == (["c0"] if name == clause else [])
    assert report["balanced"] is True and report["identities_hold"] is True  # identities are not the gate


# --------------------------------------------------------------------------- the build gates


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from fixture_data import write_coco_root as _write_coco

    from clip_cycles.data.families.coco import load_coco_index

    categories = [(1, "dog", "animal"), (2, "cat", "animal")]
    images = [{"id": i, "objects": [(1, [10, 10, 20, 20])], "captions": ["a dog"]} for i in (1, 2)]
    return load_coco_index(_write_coco(tmp_path_factory.mktemp("clause_coco"), categories, images, []))


class _Gated(Family):
    """Cycle (1, 2) with captions k=0 (true of image 1) and k=1 (true of image 2); swaps false; one stratum."""

    source, name, predicate = "coco", "gated_valid", "caption k holds of image k + 1"
    strata = ("s", "s")

    def build_cycles(self, index: Any, image_ids: Any, rng: Any) -> list[Cycle]:
        return [Cycle(1, 2, "x", "y", '{"k":0}', '{"k":1}', "{}", *self.strata)]

    def holds(self, index: Any, image_id: int, meaning: dict) -> bool:
        return meaning["k"] == image_id - 1

    def verdict(self, index: Any, image_id: int, meaning: dict) -> str:
        return "true" if self.holds(index, image_id, meaning) else "false"


class _MatchedFalse(_Gated):
    name = "gated_matched"

    def holds(self, index: Any, image_id: int, meaning: dict) -> bool:
        return False  # no caption holds, and every swap is still refuted

    def verdict(self, index: Any, image_id: int, meaning: dict) -> str:
        return "false"


class _SwapUndecided(_Gated):
    name = "gated_swap"

    def verdict(self, index: Any, image_id: int, meaning: dict) -> str:
        return "true" if self.holds(index, image_id, meaning) else "sub_margin"  # not false beyond doubt


class _TwoStrata(_Gated):
    name = "gated_stratum"
    strata = ("s", "t")


EVERYTHING = {0: {"train": [1], "validation": [1], "test": [1]}}


def test_build_gates_pass_a_valid_family(index: Any) -> None:
    build = build_family(_Gated(), index, EVERYTHING, min_cycles=1)
    report = build.audits[0]["train"]
    assert report["passed"] is True and report["matched_violations"] == 0 and report["swap_violations"] == 0


@pytest.mark.parametrize(
    ("family", "error", "named"),
    [
        (_MatchedFalse, AuditError, r"gated_matched seed 0 split train failed its audit .*= 2/0/"),
        (_SwapUndecided, AuditError, r"gated_swap seed 0 split train failed its audit .*= 0/2/"),
        (_TwoStrata, StratumError, r"gated_stratum: cycle gated_stratum-s0-train-000000 .*\('s' and 't'\)"),
    ],
)
def test_each_build_gate_trips_alone_and_is_named(family: type, error: type, named: str, index: Any) -> None:
    with pytest.raises(error, match=named):
        build_family(family(), index, EVERYTHING, min_cycles=1)


# --------------------------------------------------------------------------- the additive audit


def _features(n: int = 12, dim: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    return rng.normal(size=(n, dim)), rng.normal(size=(n, dim))


def _cycles(n: int = 12) -> np.ndarray:
    return np.array([[i, i + 1, i, i + 1] for i in range(0, n - 1, 2)])


def test_additive_audit_passes_exact_cycles() -> None:
    phi, psi = _features()
    report = additive_audit(phi, psi, _cycles(), _cycles(), epochs=1)
    assert report.passed and report.n_unbalanced == 0 and report.failures == []


def test_unbalanced_comparisons_alone_fail_the_audit() -> None:
    phi, psi = _features()
    triples = np.array([[i, i, i + 1] for i in range(0, 10, 2)])
    # A tolerance that makes every probe's value a tie: every probe scores 0.5, only the balance clause fails.
    report = additive_audit(phi, psi, triples, triples, design="hard_negatives", epochs=1, tie_tolerance=1e12)
    assert all(p.passed for p in report.probes.values())
    assert report.n_unbalanced == len(triples) and not report.passed
    assert report.to_dict()["passed"] is False and len(report.failures) == 1 and "unbalanced" in report.failures[0]


@pytest.mark.parametrize("probe", ADDITIVE_PROBES)
def test_one_probe_off_one_half_alone_fails_the_audit(probe: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = audit_module.cycle_credits
    calls = iter(ADDITIVE_PROBES)  # the audit scores the probes in this order

    def credits(values: np.ndarray, tolerance: float) -> np.ndarray:
        out = real(values, tolerance)
        return np.ones_like(out) if next(calls) == probe else out

    monkeypatch.setattr(audit_module, "cycle_credits", credits)
    phi, psi = _features()
    report = additive_audit(phi, psi, _cycles(), _cycles(), epochs=1)
    assert report.n_unbalanced == 0 and not report.passed
    as_dict = report.to_dict()
    assert as_dict["passed"] is False
    assert {name: p["passed"] for name, p in as_dict["probes"].items()} == {n: n != probe for n in ADDITIVE_PROBES}
    assert len(report.failures) == 1 and report.failures[0].startswith(f"{probe}: accuracy 1.0 != 0.5")


# --------------------------------------------------------------------------- zero-shot's summary over seeds


def _score_with_audits(monkeypatch: pytest.MonkeyPatch, verdicts: dict[int, bool]) -> dict[str, Any]:
    from clip_cycles.evaluation import zero_shot

    monkeypatch.setattr(zero_shot, "cycle_index", lambda rows, encoded: (rows, 0))
    monkeypatch.setattr(zero_shot, "_audit", lambda task, seed, *rest: {"passed": verdicts[seed], "seed": seed})
    task = types.SimpleNamespace(
        name="t", split="test", tie_tolerance=1e-9, metric_names=("cycle_acc", "additive_audit"), output_type="cycle_selection"
    )
    phi, psi = _features()
    data = types.SimpleNamespace(
        task=task, unavailable=None, audit_unavailable=None, splits={s: {"test": _cycles()} for s in verdicts}
    )
    encoded = types.SimpleNamespace(image_features=phi, caption_features=psi, stats=types.SimpleNamespace(bad_images={}))
    return zero_shot.score_task(data, encoded)  # type: ignore[arg-type]


@pytest.mark.parametrize("failing", [None, 0, 1, 2])
def test_zero_shot_audit_passes_only_when_every_seed_does(failing: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    verdicts = {s: s != failing for s in (0, 1, 2)}
    audit = _score_with_audits(monkeypatch, verdicts)["additive_audit"]
    assert audit["passed"] is (failing is None)
    assert {s: r["passed"] for s, r in audit["per_seed"].items()} == {str(s): v for s, v in verdicts.items()}
