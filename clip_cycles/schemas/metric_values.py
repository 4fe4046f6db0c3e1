"""What a metric may hold, by its name: accuracies in [0, 1], counts non-negative integers, nothing non-finite.

Free of pydantic (``results.read_result`` checks every record it reads with it); the result
record's declaration (:mod:`clip_cycles.schemas.result`) uses the same rules and exports
them as the JSON Schema's ``patternProperties``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

#: A metric named like an accuracy (``cycle_acc``, ``seed0_text_acc``, ``best_blind_acc``, ``cycle_acc_ci_low``,
#: ``cycle_acc_sd``) is a number in [0, 1] or null, wherever it sits in ``metrics``.
ACCURACY_NAME = re.compile(r"(^|_)acc(_sd|_min|_max|_a|_b|_ci|_ci_low|_ci_high|_low|_high)?$")
#: A metric named like a count (``n_cycles``, ``seed0_n_images``, ``ci_n_resamples``; not ``n_cycles_sd``)
#: is a non-negative integer or null, wherever it sits in ``metrics``.
COUNT_NAME = re.compile(r"(^|_)n_[a-z0-9_]*[a-z0-9](?<!_sd)(?<!_mean)$")
_ACCURACY = "a number in [0, 1] or null (an accuracy)"
_COUNT = "a non-negative integer or null (a count)"


#: Keys of a summary under an accuracy (``cycle_acc: {mean, sd}``, an interval's ``low``/``high``): accuracies too.
_ACCURACY_SUMMARY_KEYS = frozenset({"mean", "sd", "low", "high", "min", "max", "median"})
#: Mappings of metric name to a sentence (``averaged_over``: the set each metric averages over): their
#: leaves are descriptions keyed by metric names (``*_acc``), not values, so the name rules do not apply.
DESCRIPTION_KEYS = frozenset({"averaged_over"})


def _kind(name: str, parent: str | None) -> str | None:
    if ACCURACY_NAME.search(name) or (parent == "accuracy" and name in _ACCURACY_SUMMARY_KEYS):
        return "accuracy"
    return "count" if COUNT_NAME.search(name) else None


def metric_problem(name: str, value: Any, parent: str | None = None) -> str | None:
    """Why ``value`` cannot be metric ``name`` (by its name's kind: accuracy, count, any number), else None.

    ``parent`` is the kind of the mapping holding it ("accuracy" for ``cycle_acc: {mean, sd}``).
    """
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"is {value!r}; must be a finite number or null"
    kind = _kind(name, parent)
    if kind == "accuracy":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            return f"is {value!r}; must be {_ACCURACY}"
    elif kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"is {value!r}; must be {_COUNT}"
    return None


def _first_bad_metric(value: Any, where: str, parent: str | None = None) -> tuple[str, str] | None:
    """The first (field path, problem) among the leaves of ``value`` (a metrics mapping), else None."""
    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            child, path = value[key], f"{where}.{key}"
            if key in DESCRIPTION_KEYS and isinstance(child, Mapping):
                bad = next((k for k in sorted(child, key=str) if not isinstance(child[k], str)), None)
                found = (f"{path}.{bad}", f"is {child[bad]!r}; must be a sentence") if bad is not None else None
            elif isinstance(child, (Mapping, list)):
                found = _first_bad_metric(child, path, _kind(str(key), parent))
            else:
                problem = metric_problem(str(key), child, parent)
                found = (path, problem) if problem else None
            if found:
                return found
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found = _first_bad_metric(child, f"{where}[{i}]", parent)
            if found:
                return found
    elif isinstance(value, float) and not math.isfinite(value):
        return where, f"is {value!r}; must be a finite number or null"
    return None


def check_metric_values(metrics: Any, where: str) -> None:
    """Raise ValueError naming ``where`` and the field when a metric holds a value it could not have.

    Accuracies (:data:`ACCURACY_NAME`) in [0, 1], counts (:data:`COUNT_NAME`) non-negative
    integers, no NaN or infinity anywhere; booleans and strings are neither. Nested
    records (``per_seed``, intervals) are checked leaf by leaf.
    """
    found = _first_bad_metric(metrics, "metrics")
    if found is not None:
        raise ValueError(f"{where}: field {found[0]!r} {found[1]}")
