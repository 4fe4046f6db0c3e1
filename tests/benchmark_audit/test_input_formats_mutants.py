"""checked_row's sentence for every kind of problem a declared model reports (issue 56: mutation-directed).

The benchmark models only ever report problems that start with "must" or "is"; checked_row also takes any
other declared model, so its joining rule is pinned here on small models whose problems start otherwise:
a value outside a literal (joined with ": ") and a dict key that is not allowed (joined with a space).
"""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import Field

from clip_cycles.benchmark_audit.input_formats import checked_row
from clip_cycles.schemas.declared import Open


class _Kind(Open):
    kind: Literal["pair", "block"] = Field(description="pair or block")


class _Counts(Open):
    counts: dict[Literal["a", "b"], int] = Field(description="counts by letter")


def test_a_problem_that_is_not_a_verb_phrase_is_joined_with_a_colon() -> None:
    with pytest.raises(ValueError) as caught:
        checked_row(_Kind, {"kind": "cycle"}, "f.json", "row 4")
    assert str(caught.value) == "f.json: row 4: field 'kind': 'cycle' is not one of ['pair', 'block']"


def test_a_key_problem_reads_field_has_key() -> None:
    with pytest.raises(ValueError) as caught:
        checked_row(_Counts, {"counts": {"c": 1}}, "f.json", "row 0")
    message = str(caught.value)
    assert message.startswith("f.json: row 0: field 'counts' has key 'c', which is not allowed: "), message


def test_a_missing_field_reads_field_is_missing() -> None:
    with pytest.raises(ValueError) as caught:
        checked_row(_Kind, {}, "t.csv", "line 2")
    assert str(caught.value) == "t.csv: line 2: field 'kind' is missing; must be pair or block"
