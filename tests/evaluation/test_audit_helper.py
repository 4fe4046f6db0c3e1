"""Issue 52: a cold run's additive audits, computed by a forked helper from the last while the parent scores.

The helper writes only the audit records the parent would write itself (same bytes, checked as any cached
record is); with it or without it every result is the same, byte for byte.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from clip_cycles import processes
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.encoding.task_encoding import encode_tasks
from clip_cycles.evaluation import zero_shot
from clip_cycles.evaluation.zero_shot import evaluate
from clip_cycles.tasks.registry import expand_tasks

TASKS = ["cycles/shapes_strict_left_right", "cycles/shapes_coarse_object", "cycles/shapes_box_size"]

pytestmark = pytest.mark.skipif(
    not processes.sys.platform.startswith("linux") or processes.usable_cores() < 2, reason="a helper needs Linux and 2 cores"
)


def _records(records: list) -> str:
    return json.dumps(records, sort_keys=True)


def _audit_files(cache: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((cache / "audits").glob("*.json"))}


def test_with_or_without_the_helper_every_result_and_record_is_the_same(
    shapes_cycles: Path, tiny: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = ModelSpec("open_clip", tiny, None, seed=0)
    started = []
    real_start = zero_shot.start_helper
    monkeypatch.setattr(zero_shot, "start_helper", lambda work: started.append(1) or real_start(work))
    helped, _ = evaluate(TASKS, spec, shapes_cycles, tmp_path / "helped", num_workers=0)
    assert started == [1]  # a helper ran: 9 audits to compute, two cores
    monkeypatch.setattr(zero_shot, "start_helper", lambda work: None)
    alone, _ = evaluate(TASKS, spec, shapes_cycles, tmp_path / "alone", num_workers=0)
    assert _records(helped) == _records(alone)
    assert all(r["metrics"]["additive_audit"]["passed"] is True for r in alone)
    files = _audit_files(tmp_path / "alone")
    assert len(files) == 9 and _audit_files(tmp_path / "helped") == files


def test_the_helper_computes_every_audit_and_the_parent_only_reads_them(
    shapes_cycles: Path, tiny: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = ModelSpec("open_clip", tiny, None, seed=0)
    cache = tmp_path / "cache"
    loaded, encoded = encode_tasks(expand_tasks(TASKS), spec, shapes_cycles, cache, tmp_path / "data", num_workers=0)
    assert encoded is not None
    features = zero_shot._float64_features(encoded)
    scored = [zero_shot._score_seeds(data, encoded, features, None, None) for data in loaded]
    # What the parent computes alone (no cache): the reference the helper's records must give back.
    expected = [zero_shot._task_audits(data, encoded, features, s, None) for data, s in zip(loaded, scored)]
    helper = zero_shot.start_audit_helper(loaded, encoded, features, cache)
    assert helper is not None
    deadline = time.monotonic() + 120
    while len(_audit_files(cache)) < 9:  # left alone, it does them all (3 tasks x 3 seeds), last task first
        assert time.monotonic() < deadline, "the helper did not write the 9 audit records"
        time.sleep(0.02)
    assert helper.finish() is True

    def no_fit(*args: object, **kwargs: object) -> None:
        raise AssertionError("the parent computed an audit the helper had written")

    monkeypatch.setattr(zero_shot, "additive_audit", no_fit)
    served = [zero_shot._task_audits(data, encoded, features, s, cache) for data, s in zip(loaded, scored)]
    assert json.dumps(served, sort_keys=True) == json.dumps(expected, sort_keys=True)
    # Now warm: the helper's first audit (the last task's last seed) is kept, so no helper starts.
    assert zero_shot.start_audit_helper(loaded, encoded, features, cache) is None
    data, seed = zero_shot._audit_jobs(loaded, encoded)[-1]
    last = zero_shot._audit_inputs(data.task, seed, data, encoded, *features, cache).path
    assert last is not None and last.is_file()
    last.unlink()  # that one missing: a helper is worth starting again
    again = zero_shot.start_audit_helper(loaded, encoded, features, cache)
    assert again is not None
    again.finish()


def test_no_helper_without_an_audit_cache_or_with_one_audit(shapes_cycles: Path, tiny: str, tmp_path: Path) -> None:
    spec = ModelSpec("open_clip", tiny, None, seed=0)
    loaded, encoded = encode_tasks(
        expand_tasks(TASKS[:1]), spec, shapes_cycles, tmp_path / "c", tmp_path / "d", num_workers=0, seeds=[0]
    )
    assert encoded is not None
    features = zero_shot._float64_features(encoded)
    assert zero_shot.start_audit_helper(loaded, encoded, features, tmp_path / "c") is None  # one audit: nothing to share
    loaded, encoded = encode_tasks(expand_tasks(TASKS[:1]), spec, shapes_cycles, tmp_path / "c", tmp_path / "d", num_workers=0)
    assert encoded is not None and len(zero_shot._audit_jobs(loaded, encoded)) == 3
    assert zero_shot.start_audit_helper(loaded, encoded, zero_shot._float64_features(encoded), None) is None
