"""Zero-shot scoring (clip_cycles.evaluation.zero_shot) on hand-made features and rows: no model, no folder.

Every metric below is recomputed in the test from the feature rows (dot products, the CycleAcc
credit rule, Winoground's text/image/group rule on distinct scores, the sample sd over seeds), so a
wrong column, a dropped count or a seed scored twice fails here in well under a second
(``benchmarks/mutation_score.py zero_shot`` runs these first).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clip_cycles.algebra.bootstrap import bootstrap_ci
from clip_cycles.algebra.crossed import crossed_group_intervals
from clip_cycles.data.folder.reader import CycleRows
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.encoding.encoder import EncodedFeatures, EncodeStats
from clip_cycles.evaluation import zero_shot
from clip_cycles.evaluation.zero_shot import _compact, per_cycle_scores, score_blocks, score_task

IMAGES = ("a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg")
CAPTIONS = ("v", "w", "x", "y", "z")
# Integer features: every dot product is exact in float32 and float64.
PHI = np.array([[3, 0, 1], [0, 2, 1], [1, 1, 4], [2, 3, 0], [4, 1, 2]], dtype=np.float32)
PSI = np.array([[1, 2, 0], [3, 0, 1], [0, 1, 2], [2, 2, 3], [1, 4, 1]], dtype=np.float32)


def rows(cycles: list[tuple[str, str, str, str]]) -> CycleRows:
    """Rows of (image_0, image_1, caption_0, caption_1) cycles, ids c0, c1, ..."""
    items = {k: ImageItem(key=k) for c in cycles for k in c[:2]}
    return CycleRows.from_pairs([f"c{i}" for i in range(len(cycles))], [(items[a], items[b]) for a, b, _, _ in cycles],
                                [(x, y) for _, _, x, y in cycles])  # fmt: skip


def encoded(bad: dict[str, str] | None = None) -> EncodedFeatures:
    stats = EncodeStats(bad_images=dict(bad or {}))
    return EncodedFeatures(PHI, PSI, {k: i for i, k in enumerate(IMAGES)}, {t: i for i, t in enumerate(CAPTIONS)}, stats)


def by_hand(cycles: list[tuple[str, str, str, str]], tolerance: float) -> np.ndarray:
    """(N, 4) credit, text, image, group of each cycle from the feature rows, written out here."""
    out = []
    for a, b, x, y in cycles:
        u1, u2 = PHI[IMAGES.index(a)].astype(float), PHI[IMAGES.index(b)].astype(float)
        v1, v2 = PSI[CAPTIONS.index(x)].astype(float), PSI[CAPTIONS.index(y)].astype(float)
        s11, s12, s21, s22 = u1 @ v1, u1 @ v2, u2 @ v1, u2 @ v2
        assert len({s11, s12}) == len({s22, s21}) == len({s11, s21}) == len({s22, s12}) == 2  # no Winoground tie
        delta = s11 + s22 - s12 - s21
        credit = 1.0 if delta > tolerance else 0.0 if delta < -tolerance else 0.5
        text, image = s11 > s12 and s22 > s21, s11 > s21 and s22 > s12
        out.append([credit, float(text), float(image), float(text and image)])
    return np.array(out)


# Seed 0 scores five cycles of its test split; seed 1 three, one more dropped (an image the encoder skipped).
# The train splits hold other cycles: none of them may reach the scores.
# Seed 0's cycles: image right only, text right only, an exact tie (delta 0), all right, all wrong.
SEED0 = [("a.jpg", "b.jpg", "y", "v"), ("a.jpg", "d.jpg", "y", "z"), ("a.jpg", "c.jpg", "x", "y"), ("a.jpg", "b.jpg", "w", "x"),
         ("a.jpg", "b.jpg", "v", "w")]  # fmt: skip
SEED1 = [("d.jpg", "c.jpg", "y", "z"), ("a.jpg", "c.jpg", "w", "x"), ("e.jpg", "b.jpg", "v", "z")]
GONE = ("gone.jpg", "a.jpg", "v", "w")
TRAIN = [("a.jpg", "e.jpg", "v", "z"), ("b.jpg", "d.jpg", "x", "w")]


def task(**fields: Any) -> types.SimpleNamespace:
    base = {"name": "cycles/t", "split": "test", "train_split": "train", "tie_tolerance": 1e-9, "audit_fit": "train",
            "metric_names": ("cycle_acc", "text_acc", "image_acc", "group_acc"), "output_type": "cycle_selection"}  # fmt: skip
    return types.SimpleNamespace(**{**base, **fields})


def data(spec: types.SimpleNamespace, **fields: Any) -> types.SimpleNamespace:
    splits = {1: {"test": rows(SEED1 + [GONE]), "train": rows(TRAIN)}, 0: {"test": rows(SEED0), "train": rows(TRAIN)}}
    return types.SimpleNamespace(**{"task": spec, "unavailable": None, "audit_unavailable": None, "splits": splits, **fields})


def test_per_cycle_scores_and_score_blocks_by_hand() -> None:
    index = np.array([[IMAGES.index(a), IMAGES.index(b), CAPTIONS.index(x), CAPTIONS.index(y)] for a, b, x, y in SEED0])
    phi, psi = PHI.astype(float), PSI.astype(float)
    blocks = np.einsum("nad,nbd->nab", phi[index[:, :2]], psi[index[:, 2:]])
    expected = by_hand(SEED0, 1e-9)
    values = per_cycle_scores(blocks, 1e-9)
    assert values.dtype == np.float64 and values.shape == (5, 4) and values.tolist() == expected.tolist()
    scores = score_blocks(blocks, 1e-9, n_resamples=50, bootstrap_seed=3)
    for k, name in enumerate(("cycle_acc", "text_acc", "image_acc", "group_acc")):
        assert scores[name] == expected[:, k].mean(), name
        assert scores[f"{name}_ci"] == bootstrap_ci([expected], 50, seed=3)[k]
    assert scores["n_cycles"] == 5 and scores["n_ties"] == 1  # the delta-0 cycle
    assert expected[:, 0].tolist() == [1.0, 1.0, 0.5, 1.0, 0.0] and expected[:, 1:].sum(axis=0).tolist() == [2.0, 2.0, 1.0]
    # A tolerance as wide as the largest |delta| ties every cycle: all credits 0.5.
    deltas = blocks[:, 0, 0] + blocks[:, 1, 1] - blocks[:, 0, 1] - blocks[:, 1, 0]
    wide = float(np.abs(deltas).max())
    assert score_blocks(blocks, wide, n_resamples=10)["n_ties"] == 5
    assert per_cycle_scores(blocks, wide)[:, 0].tolist() == [0.5] * 5
    # The tie count counts |delta| <= tolerance: exactly the cycles at or inside it.
    middle = float(np.sort(np.abs(deltas))[1])
    assert score_blocks(blocks, middle, n_resamples=10)["n_ties"] == int((np.abs(deltas) <= middle).sum()) == 2


def test_score_task_metrics_by_hand() -> None:
    spec = task()
    samples: list[dict[str, Any]] = []
    metrics = score_task(data(spec), encoded({"z.jpg": "broken", "gone.jpg": "cannot be decoded"}), samples=samples)
    per_seed = {0: by_hand(SEED0, 1e-9), 1: by_hand(SEED1, 1e-9)}
    for k, name in enumerate(("cycle_acc", "text_acc", "image_acc", "group_acc")):
        means = [per_seed[s][:, k].mean() for s in (0, 1)]
        assert metrics["per_seed"]["0"][name] == means[0] and metrics["per_seed"]["1"][name] == means[1], name
        assert metrics[name] == pytest.approx((means[0] + means[1]) / 2, abs=1e-15), name
        sd = math.sqrt(sum((m - sum(means) / 2) ** 2 for m in means) / (2 - 1))
        assert metrics[f"{name}_sd"] == pytest.approx(sd, abs=1e-15), name
        # Two-way image-cluster intervals over both seeds' cycles (seed 1 without the dropped one), images by name.
        pairs = [np.array([c[:2] for c in SEED0]), np.array([c[:2] for c in SEED1])]
        seeds_ci, pooled = crossed_group_intervals([per_seed[0], per_seed[1]], pairs, 0.95)
        clip = {"low": min(max(pooled[k]["low"], 0.0), 1.0), "high": min(max(pooled[k]["high"], 0.0), 1.0)}
        assert metrics[f"{name}_ci"] == {**pooled[k], **clip}, name
        assert metrics[f"{name}_ci"]["method"].startswith("two-way image-cluster robust"), name
        assert metrics["per_seed"]["1"][f"{name}_ci"]["se"] == seeds_ci[1][k]["se"], name
    assert metrics["acc"] == metrics["cycle_acc"]
    assert metrics["cycle_acc_sd"] > 0  # the seeds differ, so a dropped seed or a repeated one shows
    assert metrics["n_cycles"] == 8 and metrics["per_seed"]["0"]["n_cycles"] == 5 and metrics["per_seed"]["1"]["n_cycles"] == 3
    assert metrics["dropped_cycles"] == 1
    assert (metrics["per_seed"]["0"]["dropped_cycles"], metrics["per_seed"]["1"]["dropped_cycles"]) == (0, 1)
    assert metrics["split"] == "test" and metrics["per_seed"]["0"]["split"] == metrics["per_seed"]["1"]["split"] == "test"
    assert metrics["seeds"] == [0, 1] and list(metrics["per_seed"]) == ["0", "1"]
    assert metrics["tie_tolerance"] == 1e-9
    assert metrics["skipped_bad_images"] == 2
    assert list(metrics["bad_images"].items()) == [("gone.jpg", "cannot be decoded"), ("z.jpg", "broken")]
    assert "additive_audit" not in metrics
    # One sample per scored cycle, seeds in order, each carrying its seed.
    assert [(s["seed"], s["cycle_id"]) for s in samples] == [(0, "c0"), (0, "c1"), (0, "c2"), (0, "c3"), (0, "c4"),
                                                             (1, "c0"), (1, "c1"), (1, "c2")]  # fmt: skip
    assert [s["credit"] for s in samples] == per_seed[0][:, 0].tolist() + per_seed[1][:, 0].tolist()


def test_score_task_scores_the_split_it_names() -> None:
    spec = task(split="train")
    metrics = score_task(data(spec), encoded())
    expected = by_hand(TRAIN, 1e-9)
    assert metrics["per_seed"]["0"]["cycle_acc"] == metrics["per_seed"]["1"]["cycle_acc"] == expected[:, 0].mean()
    assert metrics["n_cycles"] == 4 and metrics["dropped_cycles"] == 0 and metrics["split"] == "train"
    assert metrics["cycle_acc_sd"] == 0.0 and "bad_images" not in metrics and metrics["skipped_bad_images"] == 0


def test_score_task_reports_only_the_named_metrics() -> None:
    metrics = score_task(data(task(metric_names=("text_acc", "group_acc"))), encoded())
    assert {k for k in metrics if k.endswith(("_acc", "_sd", "_ci")) or k == "acc"} == {
        "text_acc", "text_acc_sd", "text_acc_ci", "group_acc", "group_acc_sd", "group_acc_ci"}  # fmt: skip
    # Per seed, every mean is still there.
    assert set(metrics["per_seed"]["0"]) >= {"cycle_acc", "text_acc", "image_acc", "group_acc", "n_ties"}


def test_a_tolerance_changes_credits_and_tie_counts() -> None:
    index = [[IMAGES.index(a), IMAGES.index(b), CAPTIONS.index(x), CAPTIONS.index(y)] for a, b, x, y in SEED0]
    phi, psi = PHI.astype(float), PSI.astype(float)
    deltas = [phi[u1] @ psi[v1] + phi[u2] @ psi[v2] - phi[u1] @ psi[v2] - phi[u2] @ psi[v1] for u1, u2, v1, v2 in index]
    tolerance = float(sorted(abs(d) for d in deltas)[1])  # ties the two smallest |delta| of seed 0
    metrics = score_task(data(task(tie_tolerance=tolerance)), encoded())
    assert metrics["per_seed"]["0"]["n_ties"] == sum(abs(d) <= tolerance for d in deltas) == 2
    assert metrics["per_seed"]["0"]["cycle_acc"] == by_hand(SEED0, tolerance)[:, 0].mean()
    assert metrics["tie_tolerance"] == tolerance


def test_unavailable_tasks_and_empty_seeds() -> None:
    spec = task()
    out = score_task(data(spec, unavailable="family x has 2 cycles"), encoded())
    assert out == {"available": False, "unavailable_reason": "family x has 2 cycles", "n_cycles": 0, "tie_tolerance": 1e-9}
    empty = data(spec)
    empty.splits[1]["test"] = rows([GONE])
    with pytest.raises(ValueError, match=r"^task cycles/t seed 1: every cycle touches a skipped image; nothing to score$"):
        score_task(empty, encoded())


def test_pair_scorers_score_their_own_blocks() -> None:
    """A pair scorer's blocks (issue 18) are scored instead of embedding dot products; its audit is unavailable."""
    seen: list[list[list[int]]] = []
    rng = np.random.default_rng(4)
    fixed = {5: rng.normal(size=(5, 2, 2)), 3: rng.normal(size=(3, 2, 2))}

    def block_scores(spec: Any, index: np.ndarray) -> np.ndarray:
        seen.append(index.tolist())
        return fixed[index.shape[0]]

    features = encoded()
    features.block_scores = block_scores  # type: ignore[attr-defined]
    features.audit_unavailable = lambda: {"passed": None, "available": False, "unavailable_reason": "pair scorer"}  # type: ignore[attr-defined]
    spec = task(metric_names=("cycle_acc", "additive_audit"))
    metrics = score_task(data(spec), features)
    for seed, blocks in ((0, fixed[5]), (1, fixed[3])):
        deltas = blocks[:, 0, 0] + blocks[:, 1, 1] - blocks[:, 0, 1] - blocks[:, 1, 0]
        credits = np.where(deltas > 1e-9, 1.0, np.where(deltas < -1e-9, 0.0, 0.5))
        assert metrics["per_seed"][str(seed)]["cycle_acc"] == credits.mean()
    assert seen == [_index(SEED0), _index(SEED1)]  # each seed's rows into the tables, the dropped cycle left out
    assert metrics["additive_audit"] == {"passed": None, "available": False, "unavailable_reason": "pair scorer"}


def test_the_audit_branch_of_score_task(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(zero_shot, "_audit", lambda spec, seed, *rest: calls.append(seed) or {"passed": True, "seed": seed})
    spec = task(metric_names=("cycle_acc", "additive_audit"))
    metrics = score_task(data(spec), encoded())
    per_seed = {"0": {"passed": True, "seed": 0}, "1": {"passed": True, "seed": 1}}
    assert calls == [0, 1] and metrics["additive_audit"] == {"passed": True, "per_seed": per_seed}
    calls.clear()
    unread = score_task(data(spec, audit_unavailable="no train split"), encoded())
    assert calls == []
    assert unread["additive_audit"] == {"passed": None, "available": False, "unavailable_reason": "no train split"}
    assert "additive_audit" not in score_task(data(task()), encoded()) and calls == []


# --- the audit's inputs ------------------------------------------------------------------------------------------


def test_compact_keeps_the_used_rows_in_order_of_first_use() -> None:
    phi = np.arange(12.0).reshape(6, 2)
    psi = np.arange(21.0).reshape(7, 3)
    train = np.array([[3, 1, 4, 0], [1, 3, 0, 6]])
    test = np.array([[1, 2, 5, 4]])
    phi_c, psi_c, (train_c, test_c) = _compact(phi, psi, [train, test])
    # Images in order of first use: 3, 1, 2; captions: 4, 0, 6, 5.
    assert phi_c.tolist() == phi[[3, 1, 2]].tolist() and psi_c.tolist() == psi[[4, 0, 6, 5]].tolist()
    assert train_c.tolist() == [[0, 1, 0, 1], [1, 0, 1, 2]] and test_c.tolist() == [[1, 2, 3, 0]]
    assert phi_c.flags["C_CONTIGUOUS"] and psi_c.flags["C_CONTIGUOUS"]
    three = _compact(phi, psi, [train, test, np.array([[5, 5, 2, 2]])])
    assert three[0].tolist() == phi[[3, 1, 2, 5]].tolist() and three[2][2].tolist() == [[3, 3, 4, 4]]


def _audit_inputs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace the audit by a recorder of what it is given (compacted tables and cycles, settings)."""
    seen: list[dict[str, Any]] = []

    def fake(phi: np.ndarray, psi: np.ndarray, train: np.ndarray, test: np.ndarray, **kw: Any) -> Any:
        seen.append({"phi": phi.tolist(), "psi": psi.tolist(), "train": train.tolist(), "test": test.tolist(), **kw})
        return types.SimpleNamespace(to_dict=lambda: {"passed": True, "calls": len(seen)})

    monkeypatch.setattr(zero_shot, "additive_audit", fake)
    return seen


def _index(cycles: list[tuple[str, str, str, str]]) -> list[list[int]]:
    return [[IMAGES.index(a), IMAGES.index(b), CAPTIONS.index(x), CAPTIONS.index(y)] for a, b, x, y in cycles]


def _compacted(parts: list[list[list[int]]]) -> tuple[list[int], list[int], list[list[list[int]]]]:
    """Order of first use of images (columns 0-1) and captions (2-3) over the parts, and the parts re-indexed."""
    images = list(dict.fromkeys(i for p in parts for row in p for i in row[:2]))
    captions = list(dict.fromkeys(c for p in parts for row in p for c in row[2:]))
    return images, captions, [[[images.index(r[0]), images.index(r[1]), captions.index(r[2]), captions.index(r[3])]
                               for r in p] for p in parts]  # fmt: skip


def test_the_audit_fits_on_the_train_split_or_on_the_scored_cycles(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _audit_inputs(monkeypatch)
    phi, psi = PHI.astype(np.float64), PSI.astype(np.float64)
    spec = task(metric_names=("additive_audit",), tie_tolerance=0.25)
    with_val = data(spec)
    with_val.splits[0]["validation"] = rows([("c.jpg", "e.jpg", "v", "x")])
    report = zero_shot._audit(spec, 0, with_val, encoded(), phi, psi)
    assert report == {"passed": True, "calls": 1, "fit_split": "train"}
    images, captions, (train, test, val) = _compacted([_index(TRAIN), _index(SEED0), _index([("c.jpg", "e.jpg", "v", "x")])])
    assert seen[0]["phi"] == PHI[images].tolist() and seen[0]["psi"] == PSI[captions].tolist()
    assert (seen[0]["train"], seen[0]["test"], seen[0]["val_cycles"].tolist()) == (train, test, val)
    assert (seen[0]["seed"], seen[0]["tie_tolerance"]) == (0, 0.25)
    # Without a validation split none is passed; seed 1 is audited on its own rows with its own seed.
    report = zero_shot._audit(spec, 1, data(spec), encoded(), phi, psi)
    images, captions, (train, test) = _compacted([_index(TRAIN), _index(SEED1)])
    assert seen[1]["val_cycles"] is None and (seen[1]["train"], seen[1]["test"]) == (train, test) and seen[1]["seed"] == 1
    assert seen[1]["phi"] == PHI[images].tolist()
    # "scored": the probes fit on the scored cycles themselves, and the report names that split.
    scored = task(metric_names=("additive_audit",), audit_fit="scored", split="validation")
    own = data(scored)
    own.splits[0]["validation"] = rows(SEED1)
    report = zero_shot._audit(scored, 0, own, encoded(), phi, psi)
    images, captions, (test,) = _compacted([_index(SEED1)])
    assert seen[2]["train"] == seen[2]["test"] == test and seen[2]["val_cycles"] is None
    assert report["fit_split"] == "validation"


def test_a_cached_audit_is_served_only_while_its_settings_and_checksum_hold(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = _audit_inputs(monkeypatch)
    monkeypatch.setattr(zero_shot, "validate", lambda model, report: (report, None))  # the fake report's shape
    phi, psi = PHI.astype(np.float64), PSI.astype(np.float64)
    spec = task(metric_names=("additive_audit",))
    first = zero_shot._audit(spec, 0, data(spec), encoded(), phi, psi, tmp_path)
    files = list((tmp_path / "audits").glob("*.json"))
    assert len(files) == 1 and len(files[0].stem) == 32
    stored = json.loads(files[0].read_text())
    assert stored["report"] == first == {"passed": True, "calls": 1, "fit_split": "train"}
    assert stored["settings"]["seed"] == 0 and stored["settings"]["fit_split"] == "train"
    assert stored["settings"]["tie_tolerance"] == repr(1e-9) and stored["settings"]["has_validation"] is False
    assert zero_shot._audit(spec, 0, data(spec), encoded(), phi, psi, tmp_path) == first and len(seen) == 1  # a hit
    # Another seed, another tolerance, another fit: other keys, computed again.
    zero_shot._audit(spec, 1, data(spec), encoded(), phi, psi, tmp_path)
    zero_shot._audit(task(metric_names=("additive_audit",), tie_tolerance=0.5), 0, data(spec), encoded(), phi, psi, tmp_path)
    assert len(seen) == 3 and len(list((tmp_path / "audits").glob("*.json"))) == 3
    # An edited report fails its checksum: a warning, then recomputed and rewritten.
    stored["report"]["passed"] = False
    files[0].write_text(json.dumps(stored))
    with pytest.warns(UserWarning, match="fails its checksum; the audit is recomputed"):
        again = zero_shot._audit(spec, 0, data(spec), encoded(), phi, psi, tmp_path)
    assert len(seen) == 4 and again == {"passed": True, "calls": 4, "fit_split": "train"}
    assert json.loads(files[0].read_text())["report"] == again
    # Unreadable or foreign content is recomputed without a warning.
    for text in ("{broken", json.dumps({"settings": {}, "report": {"passed": False}}), json.dumps([1])):
        files[0].write_text(text)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert zero_shot._audit(spec, 0, data(spec), encoded(), phi, psi, tmp_path)["passed"] is True
    assert len(seen) == 7


def test_score_task_audits_each_seed_on_its_own_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real ``_audit`` under ``score_task``: each seed's train and scored rows reach the audit, through the encoder."""
    seen = _audit_inputs(monkeypatch)
    metrics = score_task(data(task(metric_names=("cycle_acc", "additive_audit"))), encoded())
    for k, scored in enumerate((SEED0, SEED1)):
        images, _, (train, test) = _compacted([_index(TRAIN), _index(scored)])
        assert (seen[k]["train"], seen[k]["test"], seen[k]["seed"]) == (train, test, k)
        assert seen[k]["phi"] == PHI[images].tolist()
    assert metrics["additive_audit"]["passed"] is True and list(metrics["additive_audit"]["per_seed"]) == ["0", "1"]


def test_each_seeds_scored_index_is_computed_once_and_handed_to_its_audit(monkeypatch: pytest.MonkeyPatch) -> None:
    """score_task indexes each seed's scored rows once; the audit gets that index (and its train rows indexed once)."""
    calls: list[int] = []
    real = zero_shot.cycle_index

    def counted(rows: CycleRows, enc: EncodedFeatures) -> tuple[np.ndarray, int]:
        calls.append(len(rows))
        return real(rows, enc)

    monkeypatch.setattr(zero_shot, "cycle_index", counted)
    spec = task(metric_names=("cycle_acc", "additive_audit"))
    metrics = score_task(data(spec), encoded())
    assert metrics["additive_audit"]["passed"] is True
    # Per seed: the scored rows once (score_task) and the train rows once (the audit fits on the train split here).
    assert calls == [len(SEED0), len(SEED1) + 1, len(TRAIN), len(TRAIN)], calls  # seed 1 holds GONE's cycle too


def _digest(*arrays: np.ndarray) -> str:
    """The audit key's ``arrays`` field written out: each array's dtype and shape, then its bytes."""
    h = hashlib.sha256()
    for array in arrays:
        h.update(repr((array.dtype.str, array.shape)).encode("utf-8") + np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


def test_the_audit_key_holds_its_declared_fields_with_their_values(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The stored settings are exactly ``AUDIT_KEY_FIELDS``, each with the value it stands for (computed here)."""
    _audit_inputs(monkeypatch)
    monkeypatch.setattr(zero_shot, "validate", lambda model, report: (report, None))
    phi, psi = PHI.astype(np.float64), PSI.astype(np.float64)
    spec = task(metric_names=("additive_audit",))
    zero_shot._audit(spec, 0, data(spec), encoded(), phi, psi, tmp_path / "train")
    (stored,) = [json.loads(p.read_text())["settings"] for p in (tmp_path / "train" / "audits").glob("*.json")]
    images, captions, (train, test) = _compacted([_index(TRAIN), _index(SEED0)])
    arrays = (phi[images], psi[captions], np.array(train, dtype=np.int64), np.array(test, dtype=np.int64))
    assert set(stored) == set(zero_shot.AUDIT_KEY_FIELDS)
    expected = {"version": zero_shot.AUDIT_CACHE_VERSION, "code": zero_shot._code_digest(), "arrays": _digest(*arrays)}
    expected |= {"fit": "train", "fit_split": "train", "has_validation": False, "seed": 0, "tie_tolerance": repr(1e-9)}
    assert stored == expected
    # The same bytes in another shape are other arrays: the digest covers each array's shape and dtype.
    assert _digest(arrays[0].reshape(-1, 1), *arrays[1:]) != stored["arrays"]
    # Fitted on the scored split: the key and the report name that split, not the train split.
    scored = task(metric_names=("additive_audit",), audit_fit="scored", split="validation")
    own = data(scored)
    own.splits[0]["validation"] = rows(SEED1)
    report = zero_shot._audit(scored, 0, own, encoded(), phi, psi, tmp_path / "scored")
    (stored,) = [json.loads(p.read_text())["settings"] for p in (tmp_path / "scored" / "audits").glob("*.json")]
    assert (stored["fit"], stored["fit_split"], report["fit_split"]) == ("scored", "validation", "validation")


def test_a_real_cached_report_is_served_and_one_that_breaks_its_form_is_recomputed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With the real audit and the real schema: a valid cached report is a hit; a checksummed one of another form is not."""
    phi, psi = PHI.astype(np.float64), PSI.astype(np.float64)
    spec = task(metric_names=("additive_audit",))
    first = zero_shot._audit(spec, 0, data(spec), encoded(), phi, psi, tmp_path)
    assert set(first) >= {"passed", "probes", "fit_split"}

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a cached, valid report was recomputed")

    monkeypatch.setattr(zero_shot, "additive_audit", refuse)
    assert zero_shot._audit(spec, 0, data(spec), encoded(), phi, psi, tmp_path) == first
    # A report whose checksum holds but which is not an additive-audit report is recomputed, with a warning.
    (path,) = (tmp_path / "audits").glob("*.json")
    stored = json.loads(path.read_text())
    odd = {"passed": True}
    path.write_text(json.dumps({**stored, "report": odd, "checksum": zero_shot._audit_checksum(stored["settings"], odd)}))
    seen = _audit_inputs(monkeypatch)
    with pytest.warns(UserWarning, match="fails its checksum; the audit is recomputed"):
        zero_shot._audit(spec, 0, data(spec), encoded(), phi, psi, tmp_path)
    assert len(seen) == 1


def test_the_dropped_count_adds_every_seeds_drops() -> None:
    """Seed 0 drops two cycles, seed 1 one: the task's total is three (not the last seed's count)."""
    both = data(task())
    both.splits[0]["test"] = rows(SEED0 + [GONE, ("b.jpg", "gone.jpg", "x", "y")])
    metrics = score_task(both, encoded({"gone.jpg": "cannot be decoded"}))
    assert (metrics["per_seed"]["0"]["dropped_cycles"], metrics["per_seed"]["1"]["dropped_cycles"]) == (2, 1)
    assert metrics["dropped_cycles"] == 3
    assert metrics["per_seed"]["0"]["n_cycles"] == len(SEED0) and metrics["n_cycles"] == len(SEED0) + len(SEED1)


def test_an_unreadable_audit_is_reported_only_for_tasks_that_ask_for_the_audit() -> None:
    out = score_task(data(task(), audit_unavailable="no train split"), encoded())
    assert "additive_audit" not in out and out["cycle_acc"] == score_task(data(task()), encoded())["cycle_acc"]


def test_a_pair_scorer_is_handed_the_task_it_scores() -> None:
    spec = task()
    handed: list[Any] = []
    features = encoded()
    features.block_scores = lambda s, index: handed.append(s) or np.ones((index.shape[0], 2, 2))  # type: ignore[attr-defined]
    score_task(data(spec), features)
    assert handed == [spec, spec]


def test_a_warm_score_reads_its_audits_and_intervals_and_draws_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``score_task`` with a cache keeps each seed's audit; a second call refits none (the intervals draw nothing)."""
    spec = task(metric_names=("cycle_acc", "text_acc", "image_acc", "group_acc", "additive_audit"))
    cold = score_task(data(spec), encoded(), tmp_path)
    assert len(list((tmp_path / "audits").glob("*.json"))) == 2 and not (tmp_path / "intervals").exists()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("recomputed on a warm score")

    for name in ("additive_audit", "bootstrap_ci"):
        monkeypatch.setattr(zero_shot, name, refuse)
    assert score_task(data(spec), encoded(), tmp_path) == cold


# --- the checksummed cache records (audits and intervals) ---------------------------------------------------------


def test_a_cache_record_is_written_without_fsync_and_a_full_disk_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import errno

    from clip_cycles import outputs

    synced: list[int] = []
    real_fsync = outputs.os.fsync
    monkeypatch.setattr(outputs.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    path = tmp_path / "audits" / "k.json"
    zero_shot._write_cached_record(path, '{"é": 1}')
    assert path.read_bytes() == '{"é": 1}'.encode() and synced == []  # checksummed: no fsync
    monkeypatch.setattr(zero_shot, "atomic_write_bytes", lambda *a, **k: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    hint = "free space there, or point the cache elsewhere with --cache-dir DIR or CLIP_CYCLES_CACHE"
    with pytest.raises(outputs.OutputError) as raised:
        zero_shot._write_cached_record(path, "{}")
    assert str(raised.value).endswith(f" while writing {path}; {hint}") and raised.value.errno == errno.ENOSPC
    assert isinstance(raised.value.__cause__, OSError) and raised.value.__cause__.errno == errno.ENOSPC


def test_a_cache_record_is_named_by_its_sorted_settings_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"b": 2, "a": [1, "x"]}
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8")).hexdigest()[:32]
    path, cached = zero_shot._cached_record(tmp_path, settings)
    assert path == tmp_path / f"{key}.json" and cached is None  # absent
    assert zero_shot._cached_record(tmp_path, {"a": [1, "x"], "b": 2})[0] == path  # the order of the fields does not matter
    path.write_text(json.dumps({"é": [1, 2]}), encoding="utf-8")
    assert zero_shot._cached_record(tmp_path, settings) == (path, {"é": [1, 2]})
    for text in ("{torn", "\udcff"):
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        assert zero_shot._cached_record(tmp_path, settings) == (path, None)  # unparsable or undecodable: recomputed
    path.unlink()
    path.mkdir()  # not a readable file
    assert zero_shot._cached_record(tmp_path, settings) == (path, None)
    path.rmdir()
    os.mkfifo(path)  # a FIFO with no writer: read as absent at once, not waited on
    assert zero_shot._cached_record(tmp_path, settings) == (path, None)
    path.unlink()
    path.write_text(json.dumps({"pad": "x" * 64}), encoding="utf-8")
    monkeypatch.setattr(zero_shot, "MAX_CACHE_RECORD_BYTES", 32)  # larger than the bound: not a record
    assert zero_shot._cached_record(tmp_path, settings) == (path, None)
    monkeypatch.setattr(zero_shot, "MAX_CACHE_RECORD_BYTES", 4096)
    assert zero_shot._cached_record(tmp_path, settings) == (path, {"pad": "x" * 64})


# --- this round's survivors (issue 56): the samples' binding, the upper clip, a non-finite cached report, its bytes


def test_every_sample_carries_the_binding_of_its_result() -> None:
    samples: list[dict[str, Any]] = []
    bind = {"items_sha256": "a" * 64, "weights_sha256": "b" * 64}
    score_task(data(task()), encoded(), samples=samples, bind=bind)
    assert len(samples) == len(SEED0) + len(SEED1)
    assert {(s["items_sha256"], s["weights_sha256"]) for s in samples} == {("a" * 64, "b" * 64)}


def test_task_intervals_clip_each_end_into_zero_one_and_keep_an_inner_end() -> None:
    # 40 cycles on 80 distinct images, mostly wrong: every upper end lies inside [0, 1].
    rng = np.random.default_rng(7)
    values = (rng.random((40, 4)) < np.array([0.1, 0.3, 0.5, 0.0])).astype(np.float64)
    pairs = np.arange(80).reshape(40, 2)
    (seed,), pooled = zero_shot.task_intervals([values], [pairs])
    raw_seed, raw_pooled = crossed_group_intervals([values], [pairs], 0.95)
    for got, raw in zip([*seed, *pooled], [*raw_seed[0], *raw_pooled]):
        assert got == {**raw, "low": min(max(raw["low"], 0.0), 1.0), "high": min(max(raw["high"], 0.0), 1.0)}
    highs = [ci["high"] for ci in pooled]
    assert all(0.0 <= h < 1.0 for h in highs)  # an inner upper end is kept, not pushed to 1
    assert pooled[3]["low"] == pooled[3]["high"] == 0.0  # group_acc all 0: nothing to clip, a zero-width interval at 0


def test_a_cached_report_with_a_non_finite_value_is_served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``json.dumps`` writes NaN into the record; reading it back must accept it, or every warm run refits."""
    seen: list[int] = []

    def fake(*args: Any, **kw: Any) -> Any:
        seen.append(1)
        return types.SimpleNamespace(to_dict=lambda: {"passed": True, "auroc": float("nan")})

    monkeypatch.setattr(zero_shot, "additive_audit", fake)
    monkeypatch.setattr(zero_shot, "validate", lambda model, report: (report, None))
    phi, psi = PHI.astype(np.float64), PSI.astype(np.float64)
    spec = task(metric_names=("additive_audit",))
    first = zero_shot._audit(spec, 0, data(spec), encoded(), phi, psi, tmp_path)
    (path,) = (tmp_path / "audits").glob("*.json")
    assert "NaN" in path.read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = zero_shot._audit(spec, 0, data(spec), encoded(), phi, psi, tmp_path)
    assert len(seen) == 1 and math.isnan(again["auroc"]) and again["passed"] is first["passed"] is True


def test_a_cached_audit_record_is_written_with_sorted_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The record's bytes do not depend on the order the report's fields were produced in."""
    monkeypatch.setattr(
        zero_shot, "additive_audit", lambda *a, **k: types.SimpleNamespace(to_dict=lambda: {"z": 1, "passed": True, "a": 2})
    )
    monkeypatch.setattr(zero_shot, "validate", lambda model, report: (report, None))
    phi, psi = PHI.astype(np.float64), PSI.astype(np.float64)
    spec = task(metric_names=("additive_audit",))
    zero_shot._audit(spec, 0, data(spec), encoded(), phi, psi, tmp_path)
    (path,) = (tmp_path / "audits").glob("*.json")
    stored = json.loads(path.read_text())
    assert list(stored) == ["checksum", "report", "settings"] and list(stored["report"]) == ["a", "fit_split", "passed", "z"]
    assert path.read_text() == json.dumps(stored, sort_keys=True)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_or_link_at_an_audit_records_place_is_neither_written_into_nor_replaced(tmp_path: Path) -> None:
    spec = task(metric_names=("cycle_acc", "additive_audit"))
    cold = score_task(data(spec), encoded(), tmp_path)  # writes its records
    records = sorted((tmp_path / "audits").glob("*.json"))
    assert len(records) == 2
    fifo, link = records
    fifo.unlink()
    os.mkfifo(fifo)  # no reader: a write into it would hang the run
    users = tmp_path / "users_file.txt"
    users.write_text("mine")
    link.unlink()
    link.symlink_to(users)
    with pytest.warns(UserWarning, match="is not a regular file; left as it is"):
        again = score_task(data(spec), encoded(), tmp_path)
    assert again == cold  # recomputed, the same
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink() and users.read_text() == "mine"
