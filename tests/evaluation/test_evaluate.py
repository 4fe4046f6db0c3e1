"""`clip-cycles eval`: metrics equal clip_benchmark's own on the same blocks; features backend; bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from record_vocabulary import assert_one_vocabulary
from tiny_models import TINY_OPEN_CLIP

from clip_cycles.algebra.crossed import crossed_group_intervals
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.evaluation.zero_shot import evaluate
from clip_cycles.results import IDENTITY_FIELDS, MODEL_SOURCE_FIELDS, read_result
from clip_cycles.tasks.registry import get_task

TASK = "cycles/shapes_strict_left_right"
TINY = TINY_OPEN_CLIP


@pytest.fixture(scope="module")
def result(shapes_cycles: Path, tiny: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path]:
    cache = tmp_path_factory.mktemp("eval_cache")
    records, encoded = evaluate(
        [TASK], ModelSpec("open_clip", tiny, None, seed=0), shapes_cycles, cache, num_workers=0, seeds=[0, 1]
    )
    return records[0], encoded, cache


def test_scores_equal_clip_benchmark_image_caption_selection(result: Any, shapes_cycles: Path, tiny: str) -> None:
    import torch
    from clip_benchmark.datasets.builder import image_captions_collate_fn
    from clip_benchmark.metrics import image_caption_selection

    from clip_cycles.encoding.backends import load_open_clip
    from clip_cycles.integrations.clip_benchmark import cycle_blocks_dataset

    record, encoded, _ = result
    assert record["dataset"] == TASK and record["task"] == "cycles" and record["language"] == "en"
    metrics = record["metrics"]
    torch.manual_seed(0)
    model, transform, tokenizer = load_open_clip(tiny, None)
    model.eval()
    for seed in (0, 1):
        dataset = cycle_blocks_dataset(TASK, str(shapes_cycles), transform, seeds=[seed])
        loader = torch.utils.data.DataLoader(dataset, batch_size=16, collate_fn=image_captions_collate_fn)
        reference = image_caption_selection.evaluate(model, loader, tokenizer, "cpu", amp=False)
        ours = metrics["per_seed"][str(seed)]
        n = ours["n_cycles"]
        assert n == len(dataset)
        # clip_benchmark averages in float32: compare the numbers of correct blocks exactly.
        for name, theirs in (("text_acc", "text_acc"), ("image_acc", "image_acc"), ("group_acc", "acc")):
            assert round(ours[name] * n) == round(reference[theirs] * n), name
            assert ours[name] == pytest.approx(reference[theirs], abs=1e-6)
    for name in ("cycle_acc", "text_acc", "image_acc", "group_acc"):
        values = [metrics["per_seed"][s][name] for s in ("0", "1")]
        assert metrics[name] == pytest.approx(np.mean(values))
        assert metrics[f"{name}_sd"] == pytest.approx(np.std(values, ddof=1))
    assert metrics["n_cycles"] == sum(metrics["per_seed"][s]["n_cycles"] for s in ("0", "1"))
    assert metrics["additive_audit"]["passed"] is True
    assert metrics["tie_tolerance"] == 1e-9


def test_record_spells_each_key_one_way(result: Any) -> None:
    record = result[0]
    assert_one_vocabulary(record)
    assert record["metrics"]["tie_tolerance"] == 1e-9 and record["metrics"]["additive_audit"]["per_seed"]


def test_features_backend_reproduces_the_model_results(result: Any, shapes_cycles: Path, tmp_path: Path) -> None:
    record, encoded, _ = result
    keys = sorted(encoded.image_rows, key=encoded.image_rows.get)
    captions = sorted(encoded.caption_rows, key=encoded.caption_rows.get)
    path = tmp_path / "features.npz"
    np.savez(
        path,
        image_features=encoded.image_features * 3.0,
        caption_features=encoded.caption_features,
        image_keys=np.array(keys),
        caption_keys=np.array(captions),
    )
    records, _ = evaluate([TASK], ModelSpec("features", str(path), None), shapes_cycles, use_cache=False, seeds=[0, 1])
    ours, theirs = records[0]["metrics"], record["metrics"]
    for name in ("cycle_acc", "text_acc", "image_acc", "group_acc", "n_cycles"):
        assert ours[name] == pytest.approx(theirs[name], abs=1e-12)

    np.savez(
        path,
        image_features=encoded.image_features[1:],
        caption_features=encoded.caption_features,
        image_keys=np.array(keys[1:]),
        caption_keys=np.array(captions),
    )
    with pytest.raises(ValueError, match=f"has no image '{keys[0]}'"):
        evaluate([TASK], ModelSpec("features", str(path), None), shapes_cycles, use_cache=False, seeds=[0])


def test_cli_eval_writes_clip_benchmark_json_from_the_cache(
    result: Any, shapes_cycles: Path, tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from clip_cycles.cli import main

    record, _, cache = result
    template = str(tmp_path / "{dataset}_{pretrained}_{task}.json")
    code = main(
        [
            "eval",
            "--task",
            TASK,
            "--model-type",
            "open_clip",
            "--model",
            tiny,
            "--pretrained",
            "none",
            "--dataset-root",
            str(shapes_cycles),
            "--cache-dir",
            str(cache),
            "--seeds",
            "0",
            "1",
            "--device",
            "cpu",
            "--num-workers",
            "0",
            "--output",
            template,
            "--samples",
            str(tmp_path / "samples.jsonl"),
        ]
    )
    assert code == 0
    path = tmp_path / "cycles_shapes_strict_left_right_none_cycles.json"
    written = json.loads(path.read_text())
    # clip_benchmark's keys, and the item set it scored (split, items_sha256, source) beside them,
    # the family's facts as they were, and the samples file it wrote (relative to the result, with its sha256).
    keys = {"dataset", "model", "pretrained", "task", "metrics", "language", "family", "samples"}
    assert set(read_result(path)) == keys | set(IDENTITY_FIELDS) | set(MODEL_SOURCE_FIELDS)
    assert read_result(path)["samples"]["path"] == "samples.jsonl"
    # The flat file (clip_benchmark's, one CSV row) holds scalars only; the objects are in the detail.
    assert set(written) == (keys | set(IDENTITY_FIELDS) | set(MODEL_SOURCE_FIELDS)) - {"family", "samples", "source"}
    # The file holds flat named numbers; CycleAcc is clip_benchmark's headline `acc`.
    flat = written["metrics"]
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in flat.values()), flat
    assert flat["acc"] == flat["cycle_acc"] == record["metrics"]["cycle_acc"]
    assert flat["seed1_group_acc"] == record["metrics"]["per_seed"]["1"]["group_acc"]
    assert flat["cycle_acc_ci_low"] == record["metrics"]["cycle_acc_ci"]["low"]
    assert flat["additive_audit_passed"] == 1 and flat["additive_audit_seed0_passed"] == 1
    # pretrained "none" and None are the same random init: same numbers, served from the cache.
    nested = read_result(path)
    assert nested["metrics"]["per_seed"] == json.loads(json.dumps(record["metrics"]["per_seed"]))
    assert nested["metrics"]["additive_audit"]["passed"] is True
    assert "encoded 0 images and 0 captions" in capsys.readouterr().err
    _check_samples(tmp_path / "samples.jsonl", nested["metrics"], shapes_cycles)


def _check_samples(path: Path, metrics: dict[str, Any], folder: Path) -> None:
    """The per-cycle lines recompute the record: credits from the four scores, CycleAcc, the pooled interval."""
    import pyarrow.parquet as pq

    lines = [json.loads(line) for line in path.read_text().splitlines()]
    by_seed: dict[int, list[float]] = {}
    for line in lines:
        assert line["task"] == TASK and line["split"] == "test"
        delta = line["s11"] + line["s22"] - line["s12"] - line["s21"]
        assert delta == pytest.approx(line["delta"], abs=1e-12)
        tol = metrics["tie_tolerance"]
        assert line["credit"] == (1.0 if delta > tol else 0.0 if delta < -tol else 0.5)
        by_seed.setdefault(line["seed"], []).append(line["credit"])
    assert sorted(by_seed) == [0, 1]
    for seed, credits in by_seed.items():
        table = pq.read_table(folder / "data" / get_task(TASK).config / f"seed{seed}" / "test.parquet")
        assert [x["cycle_id"] for x in lines if x["seed"] == seed] == table.column("cycle_id").to_pylist()
        assert [x["caption_0"] for x in lines if x["seed"] == seed] == table.column("caption_0").to_pylist()
        assert sum(credits) / len(credits) == pytest.approx(metrics["per_seed"][str(seed)]["cycle_acc"], abs=1e-12)
    # The pooled interval replayed from the lines: two-way image-cluster robust over both seeds' cycles, images by name.
    ci = metrics["cycle_acc_ci"]
    assert ci["method"].startswith("two-way image-cluster robust") and (ci["unit"], ci["level"]) == ("images", 0.95)
    pairs = [np.array([[x["image_0"], x["image_1"]] for x in lines if x["seed"] == seed]) for seed in (0, 1)]
    _, pooled = crossed_group_intervals([np.asarray(by_seed[0]), np.asarray(by_seed[1])], pairs, 0.95)
    assert (ci["low"], ci["high"]) == pytest.approx((max(pooled[0]["low"], 0.0), min(pooled[0]["high"], 1.0)), abs=1e-12)
    assert ci["low"] <= metrics["cycle_acc"] <= ci["high"]


def test_unknown_task_and_bad_roots_are_clear_errors(shapes_cycles: Path, tmp_path: Path) -> None:
    spec = ModelSpec("open_clip", "ViT-B-32", None)
    with pytest.raises(ValueError, match="unknown task 'cycles/nope'.*cycles/coco_strict_size"):
        evaluate(["cycles/nope"], spec, shapes_cycles, tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError) as info:
        evaluate(["cycles/coco_strict_size"], spec, tmp_path / "empty", tmp_path)
    message = str(info.value)
    assert "neither a built dataset folder" in message and "clip-cycles build coco" in message
    assert "annotations/instances_val2017.json" in message
    # The folder holds builder COCO, source shapes world cycles: a GQA task (prefix gqa_: raw source GQA) is refused.
    with pytest.raises(ValueError, match="reads cycles from GQA .* holds builder COCO, source shapes world cycles"):
        evaluate(["cycles/gqa_binding"], spec, shapes_cycles, tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        evaluate([TASK], spec, tmp_path / "nowhere", tmp_path)


def test_missing_images_are_named_or_skipped_and_counted(
    shapes_cycles: Path, shapes_world: Path, tiny: str, tmp_path: Path
) -> None:
    import shutil

    folder = tmp_path / "built"
    shutil.copytree(shapes_cycles, folder)
    world = tmp_path / "world"
    shutil.copytree(shapes_world, world)
    info = json.loads((folder / "build_info.json").read_text())
    info["source_root"] = str(world)
    import pyarrow.parquet as pq

    from clip_cycles.data.folder.writer import build_source_fingerprint

    first = pq.read_table(folder / "data" / "strict_left_right" / "seed0" / "test.parquet").column("image_0")[0].as_py()
    (world / first).unlink()
    # Missing when the folder was built (a root changed after the build is refused as a whole: tests/core/test_faults_binding.py).
    info["source_fingerprint"] = build_source_fingerprint("coco", world)
    (folder / "build_info.json").write_text(json.dumps(info))
    spec = ModelSpec("open_clip", tiny, None, seed=0)
    with pytest.raises(FileNotFoundError, match=first):
        evaluate([TASK], spec, folder, tmp_path / "cache", num_workers=0, seeds=[0])
    records, encoded = evaluate([TASK], spec, folder, tmp_path / "cache", num_workers=0, seeds=[0], skip_bad_images=True)
    metrics = records[0]["metrics"]
    assert metrics["skipped_bad_images"] == 1 and first in metrics["bad_images"]
    rows = pq.read_table(folder / "data" / "strict_left_right" / "seed0" / "test.parquet").to_pylist()
    touching = sum(1 for row in rows if first in (row["image_0"], row["image_1"]))  # counted here, not by the library
    assert metrics["dropped_cycles"] == metrics["per_seed"]["0"]["dropped_cycles"] == touching >= 1
    assert metrics["n_cycles"] == len(rows) - touching


def direct_scores(
    folder: Path, seed: int, image_rows: dict, caption_rows: dict, phi: np.ndarray, psi: np.ndarray, tol: float
) -> dict[str, float]:
    """Zero-shot metrics of one seed's test cycles, from the embeddings, one block at a time (no library code)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(folder / "data" / "strict_left_right" / f"seed{seed}" / "test.parquet").to_pylist()
    credits, text, image, ties = [], [], [], 0
    for row in rows:
        u = (image_rows[row["image_0"]], image_rows[row["image_1"]])
        v = (caption_rows[row["caption_0"]], caption_rows[row["caption_1"]])
        s = [[float(np.dot(phi[u[a]].astype(np.float64), psi[v[b]].astype(np.float64))) for b in (0, 1)] for a in (0, 1)]
        delta = s[0][0] + s[1][1] - s[0][1] - s[1][0]
        credits.append(1.0 if delta > tol else 0.0 if delta < -tol else 0.5)
        ties += abs(delta) <= tol
        # Winoground with first-index argmax: a tie in row/column 0 goes to the matched pair, in 1 to the swap.
        text.append(s[0][0] >= s[0][1] and s[1][1] > s[1][0])
        image.append(s[0][0] >= s[1][0] and s[1][1] > s[0][1])
    group = [t and i for t, i in zip(text, image)]
    return {"cycle_acc": float(np.mean(credits)), "text_acc": float(np.mean(text)), "image_acc": float(np.mean(image)),
            "group_acc": float(np.mean(group)), "n_ties": ties, "n_cycles": len(rows)}  # fmt: skip


def test_zero_shot_metrics_equal_a_direct_computation_from_the_embeddings(result: Any, shapes_cycles: Path) -> None:
    record, encoded, _ = result
    metrics = record["metrics"]
    accs = []
    for seed in (0, 1):
        expected = direct_scores(shapes_cycles, seed, encoded.image_rows, encoded.caption_rows,
                                 encoded.image_features, encoded.caption_features, 1e-9)  # fmt: skip
        ours = metrics["per_seed"][str(seed)]
        accs.append(expected["cycle_acc"])
        for name, value in expected.items():
            assert ours[name] == pytest.approx(value, abs=1e-12), (seed, name)
    assert accs != [0.5, 0.5]  # some value that a sign flip (1 - CycleAcc) would change


def test_ties_and_the_tolerance_actually_used(result: Any, shapes_cycles: Path, tmp_path: Path) -> None:
    """Features with repeated image vectors give exact ties; the task's tie_tolerance decides the rest."""
    from dataclasses import replace

    from clip_cycles.evaluation.zero_shot import evaluate_tasks
    from clip_cycles.tasks.registry import get_task

    _, encoded, _ = result
    keys = sorted(encoded.image_rows, key=encoded.image_rows.get)
    captions = sorted(encoded.caption_rows, key=encoded.caption_rows.get)
    rng = np.random.default_rng(0)
    # Four distinct image vectors for all images: blocks whose two images share one have Delta exactly 0.
    palette = rng.normal(size=(4, 8))
    image_features = palette[rng.integers(0, 4, size=len(keys))]
    caption_features = rng.normal(size=(len(captions), 8))
    path = tmp_path / "ties.npz"
    np.savez(path, image_features=image_features, caption_features=caption_features, image_keys=np.array(keys),
             caption_keys=np.array(captions))  # fmt: skip
    spec = ModelSpec("features", str(path), None)
    task = get_task(TASK)
    _, used = evaluate_tasks([task], spec, shapes_cycles, None, tmp_path / "data", seeds=[0])
    phi, psi = used.image_features, used.caption_features
    deltas = []
    for tol in (task.tie_tolerance, None):
        if tol is None:  # a tolerance between the observed |Delta| values: some real contrasts become ties
            tol = float(np.median(deltas))
        records, _ = evaluate_tasks([replace(task, tie_tolerance=tol)], spec, shapes_cycles, None, tmp_path / "data",
                                    seeds=[0])  # fmt: skip
        ours = records[0]["metrics"]
        expected = direct_scores(shapes_cycles, 0, used.image_rows, used.caption_rows, phi, psi, tol)
        assert ours["tie_tolerance"] == tol
        assert expected["n_ties"] > 0 and expected["cycle_acc"] != 0.5
        for name, value in expected.items():
            assert ours["per_seed"]["0"][name] == pytest.approx(value, abs=1e-12), (tol, name)
        if not deltas:
            import pyarrow.parquet as pq

            rows = pq.read_table(shapes_cycles / "data" / "strict_left_right" / "seed0" / "test.parquet").to_pylist()
            for row in rows:
                u0, u1 = used.image_rows[row["image_0"]], used.image_rows[row["image_1"]]
                c0, c1 = used.caption_rows[row["caption_0"]], used.caption_rows[row["caption_1"]]
                d = (phi[u0].astype(float) - phi[u1]) @ (psi[c0].astype(float) - psi[c1])
                if abs(d) > 1e-9:
                    deltas.append(abs(float(d)))
            assert deltas
