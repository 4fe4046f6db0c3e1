"""One spelling per idea in result records: the check every record-producing test runs on its records.

The tie tolerance is ``tie_tolerance`` (never ``tie_tol``) and why something is missing is
``unavailable_reason`` (never a bare ``reason``), at every depth of every record.
"""

from __future__ import annotations

from typing import Any

#: Old spelling -> the one spelling of clip_cycles.results.
RENAMED: dict[str, str] = {"tie_tol": "tie_tolerance", "reason": "unavailable_reason"}


def old_spellings(record: Any, path: str = "") -> list[str]:
    """Dotted paths of every key spelled the old way, e.g. ``metrics.additive_audit.per_seed.0.tie_tol``."""
    found: list[str] = []
    if isinstance(record, dict):
        for key, value in record.items():
            here = f"{path}.{key}" if path else str(key)
            if key in RENAMED:
                found.append(here)
            found += old_spellings(value, here)
    elif isinstance(record, (list, tuple)):
        for i, value in enumerate(record):
            found += old_spellings(value, f"{path}.{i}" if path else str(i))
    return found


def assert_one_vocabulary(record: Any) -> None:
    """Fail naming each old-spelled key of ``record`` and the name to use instead."""
    found = old_spellings(record)
    assert not found, "old key spellings in a result record: " + ", ".join(
        f"{p} (use {RENAMED[p.rsplit('.', 1)[-1]]!r})" for p in found
    )
