"""The lmms-eval bridge's aggregations under an odd ``--limit`` (lmms-eval itself is not needed).

lmms-eval's ``--limit`` counts documents, two per cycle; it swallows an error raised by an
aggregation and exits 0, so the bridge must score the complete cycles and count the cut one.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from pathlib import Path

import pytest
import yaml

from clip_cycles.integrations.lmms_bridge import METRICS, TaskFunctions, write_lmms_tasks

# Three cycles, log-likelihoods [caption_0, caption_1] for image rows 0 and 1.
SCORES = {
    "c0": ([-1.0, -3.0], [-4.0, -2.0]),  # Delta = -1 - 2 + 3 + 4 = 4 > 0; text and image correct
    "c1": ([-2.0, -1.0], [-3.0, -5.0]),  # Delta = -2 - 5 + 1 + 3 = -3 < 0; wrong both ways
    "c2": ([-1.0, -2.0], [-2.0, -1.0]),
}


def _documents() -> list[tuple[dict, list[float]]]:
    """(doc, results) in lmms-eval's order: one document per (cycle, image row)."""
    docs = []
    for cycle_id, rows in SCORES.items():
        for row in (0, 1):
            docs.append(({"cycle_id": cycle_id, "row": row}, [(s, False) for s in rows[row]]))
    return docs


def _items(functions: TaskFunctions, limit: int) -> dict[str, list]:
    out: dict[str, list] = {m: [] for m in METRICS}
    for doc, results in _documents()[:limit]:
        for name, item in functions.process_results(doc, results).items():
            out[name].append(item)
    return out


def test_an_odd_limit_scores_the_complete_cycles_and_counts_the_cut_one() -> None:
    functions = TaskFunctions(None, 1e-9)
    items = _items(functions, limit=5)  # c0 and c1 whole, c2 with its first image only
    with pytest.warns(UserWarning, match=r"1 cycle\(s\) have one of their two documents only \(c2\).*--limit must be even"):
        values = {name: functions.metric(name, items[name]) for name in METRICS}
    # By hand: c0 gets credit 1, c1 credit 0; c0 alone is text-, image- and group-correct.
    assert values == {
        "cycle_acc": 0.5,
        "text_acc": 0.5,
        "image_acc": 0.5,
        "group_acc": 0.5,
        "n_cycles": 2.0,
        "n_incomplete_cycles": 1.0,
    }
    # An even limit: nothing cut, nothing said.
    whole = _items(functions, limit=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert functions.metric("n_incomplete_cycles", whole["n_incomplete_cycles"]) == 0.0
        assert functions.metric("cycle_acc", whole["cycle_acc"]) == 0.5
    # --limit 1: no complete cycle; the scores are NaN, the count says why.
    one = _items(functions, limit=1)
    with pytest.warns(UserWarning, match="scored the 0 complete cycles"):
        assert math.isnan(functions.metric("cycle_acc", one["cycle_acc"]))
    assert functions.metric("n_cycles", one["n_cycles"]) == 0.0
    assert functions.metric("n_incomplete_cycles", one["n_incomplete_cycles"]) == 1.0


def test_written_task_folder_reports_the_incomplete_count(shapes_cycles: Path, tmp_path: Path) -> None:
    write_lmms_tasks(shapes_cycles, tmp_path / "tasks", ["cycles/shapes_strict_left_right"], seeds=[0])
    template = (tmp_path / "tasks" / "_default_template_yaml").read_text()
    listed = [line.split("metric: ")[1].split(",")[0] for line in template.splitlines() if "metric: " in line]
    assert listed == list(METRICS)
    group = yaml.safe_load((tmp_path / "tasks" / "clip_cycles_strict_left_right.yaml").read_text())
    assert [m["metric"] for m in group["aggregate_metric_list"]] == list(METRICS)
    # The generated utils.py (our own template) exposes one aggregation per metric.
    spec = importlib.util.spec_from_file_location("written_utils", tmp_path / "tasks" / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    items = _items(utils._functions, limit=3)
    assert utils.n_incomplete_cycles(items["n_incomplete_cycles"]) == 1.0
    with pytest.warns(UserWarning, match=r"\(c1\)"):
        assert utils.cycle_acc(items["cycle_acc"]) == 1.0  # c0 alone
