"""The split scored is the split named: several splits with different content are loaded, and the
numbers a runner reports come from the one its task names (recorded as ``split``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clip_cycles.encoding.encoder import ModelSpec

TASK = "cycles/shapes_strict_left_right"
FAMILY = "strict_left_right"
SEEDS = (0, 1)


def _direct_cycle_acc(folder: Path, seed: int, split: str, encoded: Any, tol: float) -> tuple[float, int]:
    """CycleAcc of one seed's ``split`` rows read straight from the Parquet file, one block at a time."""
    import pyarrow.parquet as pq

    rows = pq.read_table(folder / "data" / FAMILY / f"seed{seed}" / f"{split}.parquet").to_pylist()
    phi, psi = encoded.image_features.astype(np.float64), encoded.caption_features.astype(np.float64)
    credits = []
    for row in rows:
        u = [phi[encoded.image_rows[row[f"image_{k}"]]] for k in (0, 1)]
        v = [psi[encoded.caption_rows[row[f"caption_{k}"]]] for k in (0, 1)]
        delta = float(u[0] @ v[0] + u[1] @ v[1] - u[0] @ v[1] - u[1] @ v[0])
        credits.append(1.0 if delta > tol else 0.0 if delta < -tol else 0.5)
    return float(np.mean(credits)), len(rows)


@pytest.fixture(scope="module")
def scored(shapes_cycles: Path, tiny: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The task scored on validation, with train loaded too (the audit fits on train_split)."""
    from clip_cycles.evaluation.zero_shot import evaluate_tasks
    from clip_cycles.tasks.registry import get_task

    cache = tmp_path_factory.mktemp("split_cache")
    task = replace(get_task(TASK), split="validation", audit_fit="train")
    records, encoded = evaluate_tasks(
        [task], ModelSpec("open_clip", tiny, None), shapes_cycles, cache, cache / "datasets", num_workers=0, seeds=SEEDS
    )
    return {"metrics": records[0]["metrics"], "encoded": encoded, "task": task}


def test_the_splits_differ_in_content(shapes_cycles: Path) -> None:
    import pyarrow.parquet as pq

    for seed in SEEDS:
        pairs = {}
        for split in ("train", "validation", "test"):
            table = pq.read_table(shapes_cycles / "data" / FAMILY / f"seed{seed}" / f"{split}.parquet")
            pairs[split] = set(zip(table.column("image_0").to_pylist(), table.column("image_1").to_pylist()))
        assert all(pairs.values()) and pairs["validation"] != pairs["train"] and pairs["validation"] != pairs["test"]


def test_zero_shot_scores_the_named_split_and_records_it(scored: dict[str, Any], shapes_cycles: Path) -> None:
    metrics, encoded, task = scored["metrics"], scored["encoded"], scored["task"]
    assert metrics["split"] == "validation"
    others = []
    for seed in SEEDS:
        per = metrics["per_seed"][str(seed)]
        assert per["split"] == "validation"
        acc, n = _direct_cycle_acc(shapes_cycles, seed, "validation", encoded, task.tie_tolerance)
        assert per["n_cycles"] == n and per["cycle_acc"] == pytest.approx(acc, abs=1e-12)
        others.append(_direct_cycle_acc(shapes_cycles, seed, "train", encoded, task.tie_tolerance))
    # Train is loaded and encoded too (the audit fits on it): scoring it instead would change what is reported.
    expected = [(metrics["per_seed"][str(s)]["cycle_acc"], metrics["per_seed"][str(s)]["n_cycles"]) for s in SEEDS]
    assert all(other not in expected for other in others)


def test_the_audit_names_the_split_it_fitted_on(scored: dict[str, Any]) -> None:
    for seed in SEEDS:
        assert scored["metrics"]["additive_audit"]["per_seed"][str(seed)]["fit_split"] == "train"


def test_the_shipped_task_scores_test(shapes_cycles: Path, tiny: str, tmp_path: Path) -> None:
    from clip_cycles.evaluation.zero_shot import evaluate

    records, encoded = evaluate([TASK], ModelSpec("open_clip", tiny, None), shapes_cycles, tmp_path, num_workers=0, seeds=[0])
    metrics = records[0]["metrics"]
    acc, n = _direct_cycle_acc(shapes_cycles, 0, "test", encoded, 1e-9)
    assert metrics["split"] == "test" and metrics["per_seed"]["0"]["split"] == "test"
    assert metrics["per_seed"]["0"]["n_cycles"] == n and metrics["cycle_acc"] == pytest.approx(acc, abs=1e-12)


# --------------------------------------------------------------------------- the probe experiments


def _family_with_distinct_splits() -> Any:
    """Random features; train, validation and test cycles drawn from disjoint rows, so each split scores differently."""
    from clip_cycles.experiments.experiment_data import FamilyFeatures

    rng = np.random.default_rng(3)
    phi, psi = rng.normal(size=(90, 6)), rng.normal(size=(90, 6))
    rows = rng.permutation(90).reshape(3, 30)
    cycles = {
        split: np.stack([rows[k][0::2][:15], rows[k][1::2][:15], rows[k][0::2][:15], rows[k][1::2][:15]], axis=1)
        for k, split in enumerate(("train", "validation", "test"))
    }
    return FamilyFeatures("planted", phi, psi, {0: cycles})


def _cosine_cycle_acc(phi: np.ndarray, psi: np.ndarray, cycles: np.ndarray, tol: float) -> float:
    credits = []
    for u1, u2, v1, v2 in cycles:
        delta = float(phi[u1] @ psi[v1] + phi[u2] @ psi[v2] - phi[u1] @ psi[v2] - phi[u2] @ psi[v1])
        credits.append(1.0 if delta > tol else 0.0 if delta < -tol else 0.5)
    return float(np.mean(credits))


def test_probe_record_names_its_splits_and_scores_test() -> None:
    from clip_cycles.experiments.probes import ProbeSettings, probe_family

    family = _family_with_distinct_splits()
    settings = ProbeSettings(epochs=1, ranks=(1,), full_heads=(), seeds=(0,), audit=False, batch_size=8)
    record = probe_family(family, settings, tie_tolerance=1e-9)
    assert record["splits"] == {"fit": "train", "select": "validation", "scored": "test"}
    by_split = {
        s: _cosine_cycle_acc(family.image_features, family.caption_features, family.cycles[0][s], 1e-9) for s in family.cycles[0]
    }
    assert len(set(by_split.values())) == 3  # the fixture tells the splits apart
    assert record["zero_shot"]["per_seed"]["0"] == pytest.approx(by_split["test"], abs=1e-12)
