"""Sharded encoding under torchrun (gloo on CPU): same features and metrics as one process, fault recovery.

- `torchrun --nproc_per_node 2 -m clip_cycles eval`: both ranks encode, features equal a
  single-process run to 1e-6, the result JSON is identical;
- one rank killed mid-run by the fault switch leaves only whole cache shards, and a rerun
  with a different world size (one process) encodes exactly the missing items;
- the clip_benchmark plugin under torchrun writes the single-process metrics;
- sharding is a partition of the sorted unique keys; torchrun's variables are validated.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tiny_models import TINY_OPEN_CLIP

from clip_cycles.encoding import distributed
from clip_cycles.encoding.distributed import DistContext, backend_for, device_for_rank, shard, world_from_env
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.results import read_result
from clip_cycles.settings import FAULT_ENV, FAULT_RANK_ENV

TASK = "cycles/shapes_strict_left_right"
TINY = TINY_OPEN_CLIP
RANK_LINE = re.compile(r"rank (\d)/2: encoded (\d+) images and (\d+) captions of its shard")


# --------------------------------------------------------------------------- pure functions


@given(st.lists(st.text(max_size=4), max_size=40), st.integers(1, 6))
def test_shards_partition_the_sorted_unique_keys(keys: list[str], world: int) -> None:
    shards = [shard(keys, r, world) for r in range(world)]
    assert sorted(k for s in shards for k in s) == sorted(set(keys))
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    # Any order and duplication of the input gives the same shards (every rank agrees).
    assert [shard(list(reversed(keys)) + keys, r, world) for r in range(world)] == shards


def test_shard_rejects_a_rank_outside_the_world() -> None:
    with pytest.raises(ValueError, match="rank 2 is outside a world of size 2"):
        shard(["a"], 2, 2)


def test_torchrun_variables_are_read_and_validated() -> None:
    assert world_from_env({}) is None
    assert world_from_env({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"}) == (3, 4, 1)
    with pytest.raises(ValueError, match="WORLD_SIZE='two'"):
        world_from_env({"WORLD_SIZE": "two", "RANK": "0"})
    with pytest.raises(ValueError, match="RANK is not"):
        world_from_env({"WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match="RANK=2 WORLD_SIZE=2"):
        world_from_env({"WORLD_SIZE": "2", "RANK": "2"})
    # One process (plain launch or WORLD_SIZE=1): no process group, device untouched.
    assert distributed.init("cuda", {"WORLD_SIZE": "1", "RANK": "0"}) == DistContext(device="cuda")
    assert backend_for("cuda:1") == "nccl" and backend_for("cpu") == "gloo"
    with pytest.raises(ValueError, match="'mps'"):
        backend_for("mps")
    assert (device_for_rank("cuda", 3), device_for_rank("cuda:0", 3), device_for_rank("cpu", 3)) == ("cuda:3", "cuda:0", "cpu")


def test_sharded_encoding_refuses_to_run_without_a_shared_cache() -> None:
    ctx = DistContext(rank=0, world_size=2, backend="gloo")
    with pytest.raises(ValueError, match="drop --no-cache"):
        distributed.encode_sharded([], ["a caption"], ModelSpec("open_clip", "x", None), None, 8, ctx=ctx)


def test_rank_zero_completes_gathers_every_report_and_only_rank_0_completes(monkeypatch, caplog) -> None:
    """The one sharded pattern, with the collectives replaced by a two-rank stand-in."""
    caplog.set_level(logging.INFO, logger="clip_cycles")
    steps: list[object] = []
    other = {"rank": 1, "bad_images": {"b.png": "unreadable"}, "n": 2}
    monkeypatch.setattr(distributed, "barrier", lambda ctx=None: steps.append("barrier"))
    monkeypatch.setattr(distributed, "gather_to_main", lambda obj, ctx=None: [obj, other] if ctx.is_main else None)

    def run(rank: int, cache: str | None, redone: str | None) -> Any:
        return distributed.rank_zero_completes(
            DistContext(rank=rank, world_size=2, backend="gloo"),
            cache,
            "encoding",
            "features",
            lambda: steps.append("shard") or {"rank": rank, "bad_images": {"a.png": "missing"}, "n": 1},
            lambda bad: steps.append(("complete", sorted(bad))) or "all features",
            lambda result: redone,
        )

    done = run(0, "/shared", "encode 2 images")
    assert steps == ["shard", "barrier", ("complete", ["a.png", "b.png"])]
    assert (done.result, [r["n"] for r in done.reports]) == ("all features", [1, 2])
    assert done.bad_images == {"a.png": "missing", "b.png": "unreadable"}
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "rank 0 had to encode 2 images the other ranks reported as done; is the cache /shared" in (
        warned[0].getMessage()
    )
    caplog.clear()
    steps.clear()
    assert run(1, "/shared", None) is None and steps == ["shard", "barrier"]  # rank 1 fills the cache, no more
    steps.clear()
    run(0, "/shared", None)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # nothing redone, nothing to warn about
    steps.clear()
    with pytest.raises(ValueError, match="encoding under torchrun needs the shared cache.*drop --no-cache"):
        run(0, None, None)
    assert steps == []  # refused before any work


# --------------------------------------------------------------------------- torchrun


def _spec(tiny: str) -> ModelSpec:
    return ModelSpec("open_clip", tiny, None, device="cpu", seed=0)  # what the CLI makes of the flags below


@pytest.fixture(scope="module")
def reference(shapes_cycles: Path, tiny: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Any]:
    """The single-process result record and features (no cache: nothing shared with the runs under test)."""
    from clip_cycles.evaluation.zero_shot import evaluate

    records, encoded = evaluate(
        [TASK],
        _spec(tiny),
        shapes_cycles,
        use_cache=False,
        data_cache_dir=tmp_path_factory.mktemp("ref_data"),
        batch_size=32,
        num_workers=0,
    )
    return json.loads(json.dumps(records[0])), encoded


def _torchrun(args: list[str], tmp: Path, expect_ok: bool = True, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CLIP_CYCLES_", "PYTHONPATH")) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")
    }
    clean.update({"OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1", "CLIP_CYCLES_CACHE": str(tmp / "cache"), **env})
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]
    done = subprocess.run(command, env=clean, cwd=tmp, capture_output=True, text=True, timeout=240)
    if expect_ok:
        assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-4000:]}"
    return done


def _cli(tiny: str, root: Path, cache: Path) -> list[str]:
    return [
        "--task",
        TASK,
        "--model",
        tiny,
        "--dataset-root",
        str(root),
        "--cache-dir",
        str(cache),
        "--device",
        "cpu",
        "--num-workers",
        "0",
        "--batch-size",
        "32",
    ]


def _rank_counts(output: str) -> dict[int, tuple[int, int]]:
    return {int(r): (int(i), int(c)) for r, i, c in RANK_LINE.findall(output)}


def _from_cache(tiny: str, root: Path, cache: Path) -> Any:
    from clip_cycles.encoding.task_encoding import encode_tasks
    from clip_cycles.tasks.registry import expand_tasks

    _, encoded = encode_tasks(
        expand_tasks([TASK]), _spec(tiny), root, cache, data_cache_dir=cache / "datasets", batch_size=32, num_workers=0
    )
    return encoded


#: Statistics of the audit's trained probes. Features from different world sizes agree to ~1e-7
#: (batch composition changes float32 rounding), and probes that learn nothing on balanced
#: cycles turn that into different noise in these; the verdicts and exact accuracies must agree.
_PROBE_STATS = ("train_loss", "pair_auroc", "train_pair_auroc", "max_abs_delta")


def _same_record(got: dict, expected: dict) -> None:
    """Equal records, except the audit probes' training statistics, which agree within tolerance."""
    got, expected = json.loads(json.dumps(got)), json.loads(json.dumps(expected))
    audits = [(r["metrics"].get("additive_audit") or {}).get("per_seed", {}) for r in (got, expected)]
    assert sorted(audits[0]) == sorted(audits[1])
    for seed in audits[1]:
        for name, probe in audits[1][seed]["probes"].items():
            mine = audits[0][seed]["probes"][name]
            assert mine["cycle_acc"] == probe["cycle_acc"] == 0.5 and mine["passed"] and probe["passed"]
            for key in _PROBE_STATS:
                tolerance = 1e-12 if key == "max_abs_delta" else 1e-6 if key == "train_loss" else 5e-3
                assert abs(mine.pop(key) - probe.pop(key)) <= tolerance, (seed, name, key)
    assert got == expected


def _same_features(encoded: Any, reference: Any) -> None:
    assert encoded.image_rows == reference.image_rows and encoded.caption_rows == reference.caption_rows
    np.testing.assert_allclose(encoded.image_features, reference.image_features, atol=1e-6, rtol=0)
    np.testing.assert_allclose(encoded.caption_features, reference.caption_features, atol=1e-6, rtol=0)


@pytest.fixture(scope="module")
def faulted(shapes_cycles: Path, tiny: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`torchrun -m clip_cycles encode` whose rank 1 dies after its first stored batch (torchrun then stops rank 0).

    Returns the partial cache, a copy of it and how many image / caption features it holds.
    """
    import shutil

    from clip_cycles.encoding.feature_cache import FeatureNamespace

    tmp = tmp_path_factory.mktemp("faulted")
    cache = tmp / "cache"
    done = _torchrun(
        ["-m", "clip_cycles", "encode", *_cli(tiny, shapes_cycles, cache)],
        tmp,
        expect_ok=False,
        **{FAULT_ENV: "1", FAULT_RANK_ENV: "1"},
    )
    stored: dict[str, int] = {"image": 0, "text": 0}
    corrupt: list[str] = []
    for marker in sorted((cache / "features").glob("*/namespace.json")):
        namespace = FeatureNamespace(cache, json.loads(marker.read_text()))
        stored[namespace.description["kind"]] = len(namespace.load())
        corrupt += namespace.stats.corrupt_shards
    shutil.copytree(cache, tmp / "copy")
    return {"done": done, "cache": cache, "copy": tmp / "copy", "stored": stored, "corrupt": corrupt}


COMBINED = """
import sys
from clip_cycles.cli import main as clip_cycles_main
from clip_cycles.commands.clip_benchmark import main as plugin_main
argv = sys.argv[1:]
split = argv.index("--")
plugin_main(argv[:split])
sys.exit(clip_cycles_main(argv[split + 1:]))
"""


@pytest.fixture(scope="module")
def combined(shapes_cycles: Path, tiny: str, faulted: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One torchrun launch (one torch import per rank) running two entry points in turn:

    the clip_benchmark plugin over the fault's partial cache (a rerun with the same world
    size), then `clip-cycles eval` on a fresh cache.
    """
    tmp = tmp_path_factory.mktemp("combined")
    (tmp / "combined.py").write_text(COMBINED)
    plugin = [
        "eval",
        "--dataset",
        TASK,
        "--model",
        tiny,
        "--pretrained",
        "none",
        "--dataset_root",
        str(shapes_cycles),
        "--no_amp",
        "--num_workers",
        "0",
        "--batch_size",
        "32",
        "--output",
        str(tmp / "plugin_{dataset}.json"),
    ]
    evaluation = ["eval", *_cli(tiny, shapes_cycles, tmp / "fresh"), "--output", str(tmp / "eval_{dataset}.json")]
    done = _torchrun([str(tmp / "combined.py"), *plugin, "--", *evaluation], tmp, CLIP_CYCLES_CACHE=str(faulted["cache"]))
    lines = RANK_LINE.findall(done.stderr)
    assert len(lines) == 4, done.stderr[-3000:]
    # Every rank prints its line before the barrier that ends a run: the plugin's two come first.
    counts = [{int(r): (int(i), int(c)) for r, i, c in part} for part in (lines[:2], lines[2:])]
    return {"tmp": tmp, "plugin_counts": counts[0], "eval_counts": counts[1]}


def test_two_ranks_give_the_single_process_features_and_metrics(
    shapes_cycles: Path, tiny: str, reference: Any, combined: dict[str, Any]
) -> None:
    record, features = reference
    tmp, counts = combined["tmp"], combined["eval_counts"]
    n_images, n_captions = len(features.image_rows), len(features.caption_rows)
    # Each rank encoded its own half; together every unique item exactly once.
    assert sorted(counts) == [0, 1] and all(i > 0 and c > 0 for i, c in counts.values())
    assert sum(i for i, _ in counts.values()) == n_images and sum(c for _, c in counts.values()) == n_captions
    assert sorted(p.name for p in tmp.glob("eval_*.json")) == ["eval_cycles_shapes_strict_left_right.json"]
    _same_record(read_result(tmp / "eval_cycles_shapes_strict_left_right.json"), record)

    again = _from_cache(tiny, shapes_cycles, tmp / "fresh")
    assert not again.stats.model_loaded and again.stats.cached_images == n_images
    _same_features(again, features)


def test_a_killed_rank_leaves_whole_shards_and_a_one_process_rerun_encodes_only_what_is_missing(
    shapes_cycles: Path, tiny: str, reference: Any, faulted: dict[str, Any]
) -> None:
    _, features = reference
    done, stored = faulted["done"], faulted["stored"]
    assert done.returncode != 0 and "InjectedFault" in done.stdout + done.stderr
    assert faulted["corrupt"] == []
    n_images, n_captions = len(features.image_rows), len(features.caption_rows)
    assert 0 < stored["image"] < n_images

    resumed = _from_cache(tiny, shapes_cycles, faulted["copy"])  # one process: a different world size
    stats = resumed.stats
    assert (stats.cached_images, stats.encoded_images) == (stored["image"], n_images - stored["image"])
    assert (stats.cached_captions, stats.encoded_captions) == (stored["text"], n_captions - stored["text"])
    _same_features(resumed, features)


def test_plugin_under_torchrun_reruns_the_killed_run_with_the_same_world_size(
    shapes_cycles: Path, tiny: str, reference: Any, faulted: dict[str, Any], combined: dict[str, Any]
) -> None:
    record, features = reference
    stored, counts = faulted["stored"], combined["plugin_counts"]
    assert sorted(counts) == [0, 1]
    assert sum(i for i, _ in counts.values()) == len(features.image_rows) - stored["image"]
    assert sum(c for _, c in counts.values()) == len(features.caption_rows) - stored["text"]
    ours = read_result(combined["tmp"] / "plugin_cycles_shapes_strict_left_right.json")
    _same_record({"metrics": ours["metrics"]}, {"metrics": record["metrics"]})
    _same_features(_from_cache(tiny, shapes_cycles, faulted["cache"]), features)
