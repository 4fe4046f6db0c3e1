"""``audits`` by hand where the module's own tests left mutants alive (issue 56, mutation-directed):
numpy rows become Python values, and a missing weight is refused as a non-finite one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clip_cycles.algebra.audits import audit_cycles, cycle_balance, signed_degrees


def test_numpy_rows_become_python_values_so_degrees_and_predicates_see_plain_ids() -> None:
    cycles = np.array([[1, 2, 3, 4], [1, 5, 3, 6]], dtype=np.int64)
    report = cycle_balance(cycles)
    # Written out: image 1 is u1 twice (+1 -1 each), 2 and 5 are u2 once (-1 +1); captions likewise.
    assert report.image_degrees == {1: 0.0, 2: 0.0, 5: 0.0} and report.caption_degrees == {3: 0.0, 4: 0.0, 6: 0.0}
    assert all(type(k) is int for k in [*report.image_degrees, *report.caption_degrees])
    json.dumps({k: v for k, v in report.image_degrees.items()})  # numpy int64 keys are refused by json
    seen: list[tuple[object, object]] = []

    def predicate(u: object, v: object) -> bool:
        seen.append((u, v))
        return (u, v) in {(1, 3), (2, 4), (5, 6)}

    audit = audit_cycles(cycles, predicate)
    assert audit.passed and {type(x) for pair in seen for x in pair} == {int}


def test_a_missing_weight_is_refused_as_a_non_finite_one() -> None:
    with pytest.raises(ValueError, match=r"^edge 1 has a non-finite weight "):
        signed_degrees(["u", "u"], ["a", "b"], [1.0, None])  # type: ignore[list-item]
    # Integer weights give the same float degrees as their float values.
    ints = signed_degrees(["u", "u", "w"], ["a", "b", "a"], [2, -1, 1])
    assert ints.image_degrees == {"u": 1.0, "w": 1.0} and ints.caption_degrees == {"a": 3.0, "b": -1.0}
    assert ints.witness is not None and (ints.witness.side, ints.witness.vertex, ints.witness.value) == ("caption", "a", 3.0)
