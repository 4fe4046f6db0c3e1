"""`clip-cycles build --num-proc N`: the heavy steps run on N processes and the folder is byte-identical.

- COCO (text-neighbour search and the other families) and GQA (candidate indexing)
  builds of the shapes world with 1 and 2 processes write the same bytes, and the
  2-process build really ran work in other processes;
- the block-wise neighbour search equals a brute-force ranking for any block size;
- ``parallel_map`` and ``parallel_imap`` keep input order and validate the process count;
- the cycle collector is off inside a build and as it was after it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.data.families import coco as coco_families
from clip_cycles.data.families import gqa as gqa_families
from clip_cycles.data.families import registry as families
from clip_cycles.data.families.coco import _top_neighbours
from clip_cycles.data.families.registry import cycle_collector_paused, parallel_imap, parallel_map
from clip_cycles.data.folder.build import build_coco_folder, build_gqa_folder


def _files(folder: Path) -> dict[str, bytes]:
    """Every file of a built folder; its own path (in the rebuild command) made neutral."""
    return {
        str(p.relative_to(folder)): p.read_bytes().replace(str(folder).encode(), b"<out>")
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def worker_pids(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """The process ids that ran ``parallel_map`` work during the test."""
    pids: set[int] = set()
    original = families.parallel_map

    def spy(fn: Any, items: Any, chunk_size: int = 64, processes: int = 1) -> list[Any]:
        tagged = original(lambda item: (os.getpid(), fn(item)), items, chunk_size, processes)
        pids.update(pid for pid, _ in tagged)
        return [result for _, result in tagged]

    original_imap = families.parallel_imap

    def spy_imap(fn: Any, items: Any, processes: int = 1) -> Any:  # the families of a build, one per task
        for pid, result in original_imap(lambda item: (os.getpid(), fn(item)), items, processes):
            pids.add(pid)
            yield result

    monkeypatch.setattr(families, "parallel_map", spy)
    monkeypatch.setattr(families, "parallel_imap", spy_imap)
    monkeypatch.setattr(gqa_families, "parallel_map", spy)
    monkeypatch.setattr(coco_families, "parallel_map", spy)
    return pids


def test_coco_build_is_byte_identical_for_one_and_two_processes(
    shapes_world: Path, tmp_path: Path, worker_pids: set[int]
) -> None:
    names = ["text_neighbor", "coarse_object", "strict_left_right"]
    one, _ = build_coco_folder(shapes_world, tmp_path / "one" / "cycles", families=names, min_cycles=5, num_proc=1)
    assert worker_pids == {os.getpid()}
    two, builds = build_coco_folder(shapes_world, tmp_path / "two" / "cycles", families=names, min_cycles=5, num_proc=2)
    assert len(worker_pids - {os.getpid()}) >= 1  # the families were built in worker processes
    assert next(b for b in builds if b.name == "text_neighbor").available
    first, second = _files(one), _files(two)
    assert any(name.endswith(".parquet") and "text_neighbor" in name for name in first)
    assert sorted(first) == sorted(second)
    for name in first:
        assert first[name] == second[name], name


def test_gqa_build_is_byte_identical_for_one_and_two_processes(shapes_world: Path, tmp_path: Path, worker_pids: set[int]) -> None:
    names = ["attribute_color", "relation_spatial", "binding"]
    one, _ = build_gqa_folder(shapes_world, tmp_path / "one" / "cycles", families=names, seeds=(0, 1), min_cycles=5, num_proc=1)
    two, _ = build_gqa_folder(shapes_world, tmp_path / "two" / "cycles", families=names, seeds=(0, 1), min_cycles=5, num_proc=2)
    assert len(worker_pids - {os.getpid()}) >= 1  # families and candidate indexing ran in worker processes
    first, second = _files(one), _files(two)
    assert sum(name.endswith(".parquet") for name in first) >= 6
    assert sorted(first) == sorted(second)
    for name in first:
        assert first[name] == second[name], name


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 12), st.integers(1, 6), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_blockwise_neighbour_search_equals_a_full_ranking(n: int, dims: int, block: int, seed: int) -> None:
    from scipy import sparse

    rng = np.random.default_rng(seed)
    dense = rng.integers(0, 2, size=(n, dims)).astype(float)  # few distinct rows: many exact ties
    dense[dense.sum(axis=1) == 0, 0] = 1.0
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    vectors = sparse.csr_matrix(dense)
    k = int(rng.integers(1, n))
    columns = vectors.T.tocsr()
    rows = [r for start in range(0, n, block) for r in _top_neighbours(vectors[start : start + block], columns, start, k)]
    sims = dense @ dense.T
    for i, row in enumerate(rows):
        expected = sorted((j for j in range(n) if j != i), key=lambda j: (-round(sims[i, j], 12), j))[:k]
        assert row == expected


def test_parallel_map_keeps_order_and_uses_the_requested_processes() -> None:
    items = list(range(50))
    results = parallel_map(lambda x: (x * x, os.getpid()), items, chunk_size=5, processes=2)
    assert [r for r, _ in results] == [x * x for x in items]
    assert len({pid for _, pid in results} - {os.getpid()}) >= 1
    assert parallel_map(lambda x: x + 1, items, chunk_size=5) == [x + 1 for x in items]  # default: one process


def test_parallel_imap_keeps_order_runs_on_workers_and_runs_here_with_one_process() -> None:
    import time

    items = list(range(7))

    def slow(x: int) -> tuple[int, int]:
        time.sleep(0.2)  # long enough that one worker cannot take every item before the others start
        return x * 10, os.getpid()

    results = list(parallel_imap(slow, items, processes=3))
    assert [r for r, _ in results] == [x * 10 for x in items]
    assert len({pid for _, pid in results} - {os.getpid()}) >= 2  # the next free worker takes the next item
    assert {pid for _, pid in parallel_imap(lambda x: (x, os.getpid()), items)} == {os.getpid()}  # default: here
    # A worker's own map runs in that worker (no pool inside a pool), whatever count it is given.
    nested = list(parallel_imap(lambda x: {pid for _, pid in parallel_imap(lambda y: (y, os.getpid()), [1, 2], 2)}, [0, 1], 2))
    assert all(len(pids) == 1 for pids in nested) and all(os.getpid() not in pids for pids in nested)


def test_a_failing_family_in_a_worker_is_the_error_here() -> None:
    def boom(x: int) -> int:
        if x == 2:
            raise families.AuditError("family 2 failed its audit (injected)")
        return x

    with pytest.raises(families.AuditError, match="family 2 failed its audit"):
        list(parallel_imap(boom, [0, 1, 2, 3], processes=2))


def test_the_cycle_collector_is_off_inside_and_as_it_was_after(
    shapes_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    assert gc.isenabled()
    with cycle_collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cycle_collector_paused():
        raise RuntimeError("a failed build")
    assert gc.isenabled()
    gc.disable()
    try:
        with cycle_collector_paused():
            pass
        assert not gc.isenabled()  # a caller's own choice is left alone
    finally:
        gc.enable()
    seen: list[bool] = []
    real = families.build_families

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr("clip_cycles.data.folder.writer.build_families", spy)
    build_coco_folder(shapes_world, tmp_path / "c", families=["coarse_object"], seeds=[0], min_cycles=5)
    build_gqa_folder(shapes_world, tmp_path / "g", families=["attribute_color"], seeds=[0], min_cycles=5)
    assert seen == [False, False]  # both builders build with it off
    assert gc.isenabled()
