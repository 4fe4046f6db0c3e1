"""The results page's intervals and calls: the legend names them, tied models show tied, the overall interval is joint."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from clip_cycles.evaluation.page import build_page
from clip_cycles.results import benchmark_record, write_json

TASKS = ("cycles/shapes_strict_size", "cycles/shapes_coarse_object")


def _write_model(root: Path, model: str, credits: dict[str, np.ndarray]) -> None:
    """One model's result folder: a record per task, each naming the one samples file (path and sha256)."""
    folder = root / model
    folder.mkdir(parents=True)
    lines = []
    for task, values in credits.items():
        lines += [
            {
                "task": task,
                "seed": 0,
                "split": "test",
                "cycle_id": f"c{c}",
                "image_0": f"i{c % 60}.png",
                "image_1": f"i{(c + 11) % 60}.png",
                "caption_0": "a",
                "caption_1": "b",
                **{"s11": 0.3, "s12": 0.1, "s21": 0.1, "s22": 0.0},
                "delta": 0.1,
                "credit": float(v),
            }
            for c, v in enumerate(values)
        ]
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    (folder / "samples.jsonl").write_bytes(content)
    for task, values in credits.items():
        metrics = {"cycle_acc": float(values.mean()), "n_cycles": len(values), "seeds": [0], "per_seed": {}}
        record = benchmark_record(task, model, "", metrics)
        record["samples"] = {"path": "samples.jsonl", "sha256": hashlib.sha256(content).hexdigest()}
        write_json(record, folder / f"{task.split('/')[1]}.json")


def test_legend_names_the_method_and_adjustments_and_tied_models_show_tied(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    best = {task: (rng.random(150) < 0.8).astype(float) for task in TASKS}
    close = {task: values.copy() for task, values in best.items()}
    for values in close.values():
        values[:2] = 0.0  # two cycles worse: not separable from the best
    far = {task: np.zeros(150) for task in TASKS}
    root = tmp_path / "in"
    for model, credits in (("best", best), ("close", close), ("far", far)):
        _write_model(root, model, credits)
    site = tmp_path / "site"
    build_page([root], site)
    index = (site / "index.html").read_text()
    assert "two-way image-cluster robust" in index and "Benjamini-Hochberg over every cell" in index
    assert "Holm" in index and "=1 tied for first" in index
    rows = {row.split('data-model="')[1].split(" ")[0]: row for row in index.split("<tr ")[1:] if 'data-model="' in row}
    # Both families and the overall: best and close tied (three marks each), far never.
    assert rows["best"].count('class="tied"') == 3 and rows["close"].count('class="tied"') == 3
    assert 'class="tied"' not in rows["far"]
    assert "joint over 2 families" in rows["best"]  # the overall interval's title: one joint interval
    compare = next((site / "compare").glob("*.html")).read_text()
    assert "holm" in compare and "Overall (mean over 2 families)" in compare and "smallest called" in compare


def test_each_models_joint_overall_is_computed_once_for_the_board_and_its_page(tmp_path: Path, monkeypatch) -> None:
    from clip_cycles.evaluation import page

    rng = np.random.default_rng(7)
    root = tmp_path / "in"
    for model in ("best", "close"):
        _write_model(root, model, {task: (rng.random(150) < 0.7).astype(float) for task in TASKS})
    calls: list[tuple[str, ...]] = []
    joint = page.joint_mean

    def counted(tasks, *args, **kwargs):
        calls.append(tuple(sorted(tasks)))
        return joint(tasks, *args, **kwargs)

    monkeypatch.setattr(page, "joint_mean", counted)
    site = tmp_path / "site"
    build_page([root], site)
    assert len(calls) == 2  # one per model, not once for the board and again for the model's page
