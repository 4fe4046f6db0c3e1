"""The fast paths of a warm evaluation (issue 29), each against an independent slow computation.

- bootstrap means through counts per row pattern equal, bit for bit, the per-cycle counts and
  a plain loop of resamples;
- the row readers' codes (first appearance in row order, no pandas) equal a Python walk over the rows.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from task_files import write_task_file

from clip_cycles.algebra import bootstrap
from clip_cycles.data.folder import reader as folder_reader


def _half_integer_groups(rng: np.random.Generator, sizes: tuple[int, ...]) -> list[np.ndarray]:
    """Per-cycle columns as score_task makes them: credit 1 / 0.5 / 0, text, image and group correctness."""
    groups = []
    for n in sizes:
        text, image = rng.integers(0, 2, n), rng.integers(0, 2, n)
        credit = rng.choice([0.0, 0.5, 1.0], n)
        groups.append(np.stack([credit, text, image, text & image], axis=1).astype(np.float64))
    return groups


def test_pattern_counts_equal_per_cycle_counts_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    groups = _half_integer_groups(rng, (61, 47, 53))
    assert all(bootstrap._exact_patterns(g) is not None for g in groups)  # the fast path is the one taken
    fast = bootstrap.bootstrap_means(groups, n_resamples=250, seed=3)
    single = bootstrap.bootstrap_means(groups[:1], n_resamples=250, seed=3)
    monkeypatch.setattr(bootstrap, "_MAX_PATTERNS", 0)  # every group takes the per-cycle counts
    assert all(bootstrap._exact_patterns(g) is None for g in groups)
    assert fast.tobytes() == bootstrap.bootstrap_means(groups, n_resamples=250, seed=3).tobytes()
    assert single.tobytes() == bootstrap.bootstrap_means(groups[:1], n_resamples=250, seed=3).tobytes()
    monkeypatch.setattr(bootstrap, "_BLOCK_VALUES", 61 * 7)  # blocks that do not divide the resamples
    monkeypatch.setattr(bootstrap, "_MAX_PATTERNS", 256)
    assert fast.tobytes() == bootstrap.bootstrap_means(groups, n_resamples=250, seed=3).tobytes()


def test_pattern_counts_replay_a_plain_resample_loop_exactly() -> None:
    rng = np.random.default_rng(8)
    groups = _half_integer_groups(rng, (23, 31))
    n_resamples, seed = 40, 9
    generator = np.random.default_rng(seed)
    expected = np.zeros((n_resamples, 4))
    for values in groups:  # the recorded draw order: each group's resamples in turn
        for r in range(n_resamples):
            draw = generator.integers(0, values.shape[0], size=values.shape[0])
            expected[r] += np.array([sum(values[int(i), k] for i in draw) for k in range(4)]) / values.shape[0]
    expected /= len(groups)
    assert bootstrap.bootstrap_means(groups, n_resamples=n_resamples, seed=seed).tobytes() == expected.tobytes()


@pytest.mark.parametrize(
    "values",
    [
        np.array([[0.1, 1.0], [0.5, 0.0]]),  # not multiples of 0.5: sums would round in another order
        np.array([[-0.0, 1.0], [0.5, 0.0]]),  # a negative zero
        np.arange(600, dtype=np.float64)[:, None] / 2.0,  # more distinct rows than the pattern table holds
    ],
)
def test_values_without_exact_sums_take_the_per_cycle_path(values: np.ndarray) -> None:
    assert bootstrap._exact_patterns(values) is None
    means = bootstrap.bootstrap_means([values], n_resamples=30, seed=1)
    generator = np.random.default_rng(1)
    n = values.shape[0]
    for r in range(30):
        counts = np.bincount(generator.integers(0, n, size=n), minlength=n).astype(np.float64)
        assert np.array_equal(means[r], (counts @ values) / n)


def test_the_first_group_of_the_pooled_draws_is_that_group_alone() -> None:
    """What lets a task's first seed reuse the pooled draws: same generator seed, same first draws."""
    groups = _half_integer_groups(np.random.default_rng(5), (30, 41, 26))
    pooled = bootstrap.bootstrap_group_means(groups, n_resamples=90, seed=4)
    assert pooled[0].tobytes() == bootstrap.bootstrap_group_means(groups[:1], n_resamples=90, seed=4)[0].tobytes()
    assert pooled[1].tobytes() != bootstrap.bootstrap_group_means(groups[1:2], n_resamples=90, seed=4)[0].tobytes()
    assert bootstrap.pooled_means(pooled).tobytes() == bootstrap.bootstrap_means(groups, n_resamples=90, seed=4).tobytes()
    manual = (np.zeros((90, 4)) + pooled[0] + pooled[1] + pooled[2]) / 3
    assert bootstrap.pooled_means(pooled).tobytes() == manual.tobytes()


def _walk_codes(a: list[str], b: list[str]) -> tuple[list[str], list[list[int]]]:
    """Unique values in first appearance over a[0], b[0], a[1], b[1], ..., and each row's pair of codes."""
    position: dict[str, int] = {}
    rows = []
    for x, y in zip(a, b):
        rows.append([position.setdefault(x, len(position)), position.setdefault(y, len(position))])
    return list(position), rows


@pytest.mark.parametrize("large", [False, True])
def test_codes_follow_the_row_order_like_a_python_walk(large: bool) -> None:
    rng = np.random.default_rng(2)
    words = [f"w{k}" for k in range(40)]
    a = [words[int(i)] for i in rng.integers(0, 40, 300)]
    b = [words[int(i)] for i in rng.integers(0, 40, 300)]
    kind = pa.large_string() if large else pa.string()
    # Sliced arrays: the codes are read from buffers, so a non-zero offset must be honoured.
    arr_a, arr_b = pa.array(["pad", *a], type=kind)[1:], pa.array(["pad", *b], type=kind)[1:]
    unique, codes = folder_reader._codes(arr_a, arr_b)
    expected_unique, expected_rows = _walk_codes(a, b)
    assert unique == expected_unique
    assert codes.dtype == np.int64 and codes.tolist() == expected_rows


def test_integers_reads_sliced_buffers_and_refuses_nulls() -> None:
    values = pa.array(np.arange(-5, 20, dtype=np.int16))[3:17]
    assert folder_reader._integers(values).tolist() == list(range(-2, 12))
    with pytest.raises(ValueError, match="without nulls"):
        folder_reader._integers(pa.array([1, None, 3], type=pa.int32()))


def test_reading_rows_does_not_import_pandas(tmp_path) -> None:
    """A warm evaluation reads rows without pandas (pyarrow's to_numpy would import it, a third of a second)."""
    import pyarrow.parquet as pq

    path = tmp_path / "test.parquet"
    pq.write_table(
        pa.table(
            {
                "image_0": ["a.png", "b.png"],
                "image_1": ["b.png", "c.png"],
                "caption_0": ["x", "y"],
                "caption_1": ["y", "z"],
                "cycle_id": ["c0", "c1"],
            }
        ),
        path,
    )
    script = f"""
import sys
from pathlib import Path
from clip_cycles.data.folder import reader as folder_reader
from clip_cycles.data.folder.reader import BuiltFolder
folder = BuiltFolder({str(tmp_path)!r}, {{"source_root": {str(tmp_path)!r}}})
decoded = folder_reader._decode(Path({str(path)!r}), folder_reader.ROW_FIELDS, None)
class Task:
    name, config = "t", "f"
    def format_caption(self, c):
        return c
captions, caption_index = folder_reader._formatted_captions(decoded.captions, decoded.caption_codes, Task())
items, image_index = folder_reader._resolved_images({str(path)!r}, decoded.ids, decoded.images, decoded.image_codes, folder)
assert captions == ["x", "y", "z"] and caption_index.tolist() == [[0, 1], [1, 2]], (captions, caption_index)
assert [i.key for i in items] == ["a.png", "b.png", "c.png"] and image_index.tolist() == [[0, 1], [1, 2]]
print("pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


# --------------------------------------------------------------------------- the registry reads only the files it is asked for

TASK = """task: cycles/{name}
dataset_path: shapes
dataset_kwargs: {{config: strict_left_right, seeds: [0, 2]}}
test_split: test
metric_list: [cycle_acc, text_acc]
tie_tolerance: {tolerance}
"""


def test_single_tasks_from_their_own_files_equal_the_full_registry() -> None:
    from clip_cycles.tasks.registry import GroupSpec, TaskRegistry, shipped_tasks_dir

    full = TaskRegistry([shipped_tasks_dir()])
    names = full.names()
    single = [n for n in names if not isinstance(full.get(n), GroupSpec) and not getattr(full.get(n), "members", ())]
    explicit = [n for n in single if (shipped_tasks_dir() / f"{n}.yaml").is_file()]
    assert len(explicit) >= 30  # every shipped task file, compared one by one
    # The shapes_* tasks are derived from their coco_*/gqa_* twins' files: one file read each, too.
    mirrored = [n for n in single if n.startswith("cycles/shapes_") and n not in explicit]
    assert len(mirrored) >= 21
    for name in explicit + mirrored:
        lazy = TaskRegistry([shipped_tasks_dir()])
        assert lazy.get(name) == full.get(name)
        assert lazy._entries is None  # no other file was read
    lazy = TaskRegistry([shipped_tasks_dir()])
    assert lazy.expand([*explicit[:5], explicit[0]]) == full.expand([*explicit[:5], explicit[0]])
    assert lazy._entries is None
    # A collection and a derived name are the full registry's.
    for name in ("cycles/shapes_all", "cycles_probe/shapes_strict_size"):
        lazy = TaskRegistry([shipped_tasks_dir()])
        assert lazy.expand([name]) == full.expand([name]) and lazy._entries is not None


def test_a_broken_neighbour_is_not_read_and_a_broken_task_keeps_its_error(tmp_path) -> None:
    from clip_cycles.tasks.names import resolve_task_names
    from clip_cycles.tasks.registry import TaskRegistry

    write_task_file(tmp_path, "good", TASK.format(name="good", tolerance="1.0e-6"))
    write_task_file(tmp_path, "broken", TASK.format(name="broken", tolerance="-1"))
    registry = TaskRegistry([tmp_path])
    assert resolve_task_names(["cycles/good"], registry) == ["cycles/good"]
    assert registry.expand(["cycles/good"])[0].tie_tolerance == 1e-6
    assert registry._entries is None and registry.unavailable == {}
    full_error = None
    try:
        TaskRegistry([tmp_path]).entries  # noqa: B018
        TaskRegistry([tmp_path]).get("cycles/broken")
    except ValueError as error:
        full_error = str(error)
    with pytest.raises(ValueError) as info:
        registry.get("cycles/broken")
    assert str(info.value) == full_error and "tie_tolerance" in full_error


def test_the_first_root_wins_and_unusual_locations_read_every_file(tmp_path) -> None:
    from clip_cycles.tasks.registry import TaskRegistry

    first, second = tmp_path / "first", tmp_path / "second"
    write_task_file(first, "twice", TASK.format(name="twice", tolerance="1.0e-3"))
    write_task_file(second, "twice", TASK.format(name="twice", tolerance="1.0e-5"))
    write_task_file(second, "only_second", TASK.format(name="only_second", tolerance="1.0e-4"))
    registry = TaskRegistry([first, second])
    assert registry.get("cycles/twice").tie_tolerance == 1e-3
    assert registry.get("cycles/only_second").tie_tolerance == 1e-4
    assert registry._entries is None
    assert TaskRegistry([first, second]).entries["cycles/twice"].tie_tolerance == 1e-3  # what the full registry says too
    # A symlinked folder is not entered by rglob: the full registry decides (here: no such task).
    linked = tmp_path / "linked"
    write_task_file(tmp_path / "real", "inside", TASK.format(name="inside", tolerance="1.0e-6"))
    linked.mkdir()
    (linked / "cycles").symlink_to(tmp_path / "real" / "cycles")
    registry = TaskRegistry([linked])
    assert registry._from_own_file("cycles/inside") is None
    assert not registry.has("cycles/inside")
    # Names that are not plain locations go to the full registry.
    for name in ("cycles/../cycles/good", "cycles/*", "cycles", "cycles/_template"):
        assert TaskRegistry([first])._from_own_file(name) is None


# --------------------------------------------------------------------------- writes without fsync


def test_checksummed_cache_files_skip_fsync_and_results_keep_it(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clip_cycles import outputs
    from clip_cycles.encoding.feature_cache import FeatureNamespace
    from clip_cycles.results import write_json

    synced: list[int] = []
    real_fsync = outputs.os.fsync
    monkeypatch.setattr(outputs.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    write_json({"a": 1}, tmp_path / "result.json")
    assert len(synced) == 1
    namespace = FeatureNamespace(tmp_path / "cache", {"kind": "image"})
    namespace.put(["h1", "h2"], np.ones((2, 3), dtype=np.float32))
    assert len(synced) == 2  # the namespace marker; the shard itself is checksummed and not synced
    fresh = FeatureNamespace(tmp_path / "cache", {"kind": "image"})
    assert sorted(fresh.load()) == ["h1", "h2"] and fresh.stats.shards_read == 1


def test_captions_in_batches_of_1024_give_the_features_of_batches_of_256(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The larger caption batch (faster text tower) changes no feature bit of cycles-tiny on CPU."""
    from clip_cycles.encoding import encoder

    assert encoder.MIN_CAPTION_BATCH == 1024
    colours, shapes = ["red", "blue", "green", "yellow", "purple"], ["circle", "square", "triangle", "star"]
    captions = [
        f"a {c} {s} {where} a {d} {t}"
        for c in colours
        for s in shapes
        for d in colours
        for t in shapes
        for where in ("left of", "above", "next to")
    ][:1100]  # more than one batch of 1024
    spec = encoder.ModelSpec("open_clip", "cycles-tiny", "shapes")
    large = encoder.encode([], captions, spec, None, batch_size=64)
    monkeypatch.setattr(encoder, "MIN_CAPTION_BATCH", 256)
    small = encoder.encode([], captions, spec, None, batch_size=64)
    assert large.caption_rows == small.caption_rows
    assert large.caption_features.tobytes() == small.caption_features.tobytes()
