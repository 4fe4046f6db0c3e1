"""Issue 52: a run sure to load the model decodes its row files in a forked helper while the model loads.

The helper writes only kept row decodes (checked on reading, as any is); with it or without it the results
are the same, byte for byte, and a run that may not need the model (its manifest is in the cache) starts
nothing early.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from clip_cycles import processes
from clip_cycles.data.folder import reader
from clip_cycles.encoding import task_encoding
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.evaluation.zero_shot import evaluate
from clip_cycles.tasks.loading import keep_row_decodes, load_task_data, resolve_dataset_roots
from clip_cycles.tasks.registry import expand_tasks

TASKS = ["cycles/shapes_strict_left_right", "cycles/shapes_coarse_object", "cycles/shapes_box_size"]

pytestmark = pytest.mark.skipif(
    not processes.sys.platform.startswith("linux") or processes.usable_cores() < 2, reason="a helper needs Linux and 2 cores"
)


def _setup(shapes_cycles: Path, cache: Path) -> tuple[list, dict]:
    tasks = expand_tasks(TASKS)
    folders = resolve_dataset_roots(tasks, shapes_cycles, cache / "data")
    keep_row_decodes(folders, cache)
    return tasks, folders


def _loader(folders: dict):
    return lambda task: load_task_data(task, folders[task.name], None, False)


def test_preload_hands_its_model_to_the_next_load_once(tiny: str) -> None:
    spec = ModelSpec("open_clip", tiny, None, seed=0)
    spec.preload()
    first = spec.load()
    again = spec.load()
    assert first[0] is not again[0]  # handed over once; the next load loads anew
    assert [p.tolist() for p in first[0].parameters()][:2] == [p.tolist() for p in again[0].parameters()][:2]  # same seed


def test_the_helper_decodes_every_row_file_and_the_parent_decodes_none(
    shapes_cycles: Path, tiny: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks, folders = _setup(shapes_cycles, tmp_path / "cache")
    spec = ModelSpec("open_clip", tiny, None, seed=0)
    rows = tmp_path / "cache" / "rows"

    def slow_import() -> None:  # a load long enough for the helper to decode all 9 test files (3 tasks x 3 seeds)
        deadline = time.monotonic() + 120
        while len(list(rows.glob("*.rows"))) < 9:
            assert time.monotonic() < deadline, "the helper did not keep the 9 decodes"
            time.sleep(0.02)

    monkeypatch.setattr(spec, "preload", slow_import)
    helper = task_encoding._decode_beside_the_load(tasks, folders, spec, tmp_path / "cache", _loader(folders))
    assert helper is not None
    decoded = []
    real = reader._decode
    monkeypatch.setattr(reader, "_decode", lambda *a: decoded.append(a[0]) or real(*a))
    loaded = [_loader(folders)(task) for task in tasks]
    assert helper.finish() is True
    assert decoded == []  # every row file came from the helper's kept decodes
    fresh_tasks, fresh_folders = _setup(shapes_cycles, tmp_path / "fresh")
    fresh = [_loader(fresh_folders)(task) for task in fresh_tasks]
    assert len(decoded) == 9  # without a helper, the parent decodes every file itself
    for a, b in zip(loaded, fresh):
        for seed in a.splits:
            assert a.splits[seed]["test"].cycle_ids == b.splits[seed]["test"].cycle_ids
            assert a.splits[seed]["test"].captions == b.splits[seed]["test"].captions
            assert (a.splits[seed]["test"].image_index == b.splits[seed]["test"].image_index).all()


def test_nothing_starts_early_where_the_model_may_not_be_needed(
    shapes_cycles: Path, tiny: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = ModelSpec("open_clip", tiny, None, seed=0)
    evaluate(TASKS[:1], spec, shapes_cycles, tmp_path / "cache", num_workers=0, seeds=[0])  # writes the manifest
    tasks, folders = _setup(shapes_cycles, tmp_path / "cache")
    preloads = []
    monkeypatch.setattr(spec, "preload", lambda: preloads.append(1))
    assert spec.sure_to_load(tmp_path / "cache") is False
    assert task_encoding._decode_beside_the_load(tasks, folders, spec, tmp_path / "cache", _loader(folders)) is None
    assert task_encoding._decode_beside_the_load(tasks, folders, spec, None, _loader(folders)) is None  # no row cache
    for folder in folders.values():
        folder.rows_cache_writable = False
    assert task_encoding._decode_beside_the_load(tasks, folders, spec, tmp_path / "new", _loader(folders)) is None
    assert preloads == []


def test_a_failed_load_stops_the_helper_and_raises(
    shapes_cycles: Path, tiny: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks, folders = _setup(shapes_cycles, tmp_path / "cache")
    spec = ModelSpec("open_clip", tiny, None, seed=0)
    finished = []

    class Recorded:
        def finish(self) -> bool:
            finished.append(1)
            return True

    def no_weights() -> None:
        raise RuntimeError("weights unavailable")

    monkeypatch.setattr(task_encoding, "start_helper", lambda work: Recorded())
    monkeypatch.setattr(spec, "preload", no_weights)
    with pytest.raises(RuntimeError, match="weights unavailable"):
        task_encoding._decode_beside_the_load(tasks, folders, spec, tmp_path / "cache", _loader(folders))
    assert finished == [1]


def test_with_or_without_the_helper_the_results_are_the_same(
    shapes_cycles: Path, tiny: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = ModelSpec("open_clip", tiny, None, seed=0)
    started = []
    real_start = task_encoding.start_helper
    monkeypatch.setattr(task_encoding, "start_helper", lambda work: started.append(1) or real_start(work))
    helped, _ = evaluate(TASKS, spec, shapes_cycles, tmp_path / "helped", num_workers=0)
    assert started == [1]
    monkeypatch.setattr(task_encoding, "start_helper", lambda work: None)
    alone, _ = evaluate(TASKS, ModelSpec("open_clip", tiny, None, seed=0), shapes_cycles, tmp_path / "alone", num_workers=0)
    assert json.dumps(helped, sort_keys=True) == json.dumps(alone, sort_keys=True)
    kept = sorted(p.name for p in (tmp_path / "alone" / "rows").glob("*.rows"))
    assert kept and kept == sorted(p.name for p in (tmp_path / "helped" / "rows").glob("*.rows"))
