"""The vocabulary of result records: how they are cleaned, summarized, named and written.

Every result JSON of clip_cycles (experiment records, clip_benchmark records, audits,
build summaries) goes through :func:`write_json`: sorted keys, two-space indent, a
trailing newline, written atomically, so equal results give equal bytes and an
interrupted run never leaves half a file. :func:`clean` makes a record JSON-safe,
:func:`mean_sd` is the one mean and sample standard deviation over seeds, and
:func:`output_path` fills clip_benchmark's ``--output`` template.

Key names shared by every record: ``tie_tolerance`` (the absolute tie tolerance of
CycleAcc) and ``unavailable_reason`` (why a result is missing).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from clip_cycles.fingerprints import atomic_write_bytes

#: clip_benchmark's task name for cycle results (the ``task`` field and ``{task}`` in --output).
RESULT_TASK = "cycles"
#: clip_benchmark's default ``--output`` template.
DEFAULT_OUTPUT = "{dataset}_{pretrained}_{model}_{language}_{task}.json"


def write_json(record: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``record`` as JSON (sorted keys, indent 2, trailing newline) atomically; returns the path.

    The parent folder is created. The file appears complete or not at all (a temporary
    sibling is renamed into place), so a reader never sees a partial record.
    """
    path = Path(path)
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))
    return path


def clean(value: Any) -> Any:
    """A JSON-safe copy of ``value``: NaN and infinities -> None, numpy scalars and arrays -> Python.

    Mappings become dicts with string keys; tuples, lists and arrays become lists;
    anything else (str, None, Python int and bool) is returned as is.
    """
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return clean(value.tolist())
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def mean_sd(values: Iterable[Any], *, skip_missing: bool = False, count: bool = False) -> dict[str, Any]:
    """Mean and sample standard deviation (ddof=1; 0.0 for a single value) of per-seed results, in float64.

    Parameters
    ----------
    values:
        Numbers, one per seed.
    skip_missing:
        False (default): every value must be a finite number and there must be at least one;
        otherwise ValueError naming the first bad index. True: None, NaN, infinities and
        non-numbers are left out, and no value left gives ``{"mean": None, "sd": None}``.
    count:
        Also return ``"n"``, the number of values used.

    Returns
    -------
    ``{"mean": float | None, "sd": float | None}`` (plus ``"n"`` with ``count``).
    """
    items = list(values)
    if skip_missing:
        kept = [float(v) for v in items if _is_number(v) and math.isfinite(v)]
    else:
        for i, v in enumerate(items):
            if not _is_number(v) or not math.isfinite(v):
                raise ValueError(
                    f"mean_sd: value {i} is {v!r}, not a finite number (pass skip_missing=True to leave missing values out)"
                )
        if not items:
            raise ValueError("mean_sd needs at least one value")
        kept = [float(v) for v in items]
    out: dict[str, Any]
    if not kept:
        out = {"mean": None, "sd": None}
    else:
        array = np.asarray(kept, dtype=np.float64)
        out = {"mean": float(array.mean()), "sd": float(array.std(ddof=1)) if array.shape[0] > 1 else 0.0}
    if count:
        out["n"] = len(kept)
    return out


def benchmark_record(
    dataset: str, model: str, pretrained: str | None, metrics: dict[str, Any], task: str = RESULT_TASK, language: str = "en"
) -> dict[str, Any]:
    """clip_benchmark's result JSON: ``{dataset, model, pretrained, task, metrics, language}``.

    Declared in :class:`clip_cycles.schemas.result.ResultRecord` (``clip-cycles schema result``).
    """
    return {
        "dataset": dataset,
        "model": model,
        "pretrained": pretrained or "",
        "task": task,
        "metrics": metrics,
        "language": language,
    }


def output_path(
    template: str, dataset: str, model: str, pretrained: str | None, language: str = "en", task: str = RESULT_TASK
) -> str:
    """Fill clip_benchmark's ``--output`` template fields the way its ``run`` does."""
    pretrained = pretrained or ""
    is_file = os.path.isfile(pretrained)
    return template.format(
        model=model,
        pretrained=os.path.basename(pretrained) if is_file else pretrained,
        pretrained_full_path=pretrained.replace("/", "_") if is_file else pretrained,
        task=task,
        dataset=dataset.replace("/", "_"),
        language=language,
    )
