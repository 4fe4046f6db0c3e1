"""The example backend of docs/backends.md, installed like a user would, through both harnesses.

`examples/clip_cycles_example_backend` is pip-installed (offline, no build isolation) into a
scratch `--target` folder put on PYTHONPATH; subprocesses then find it by its entry point alone:

- `clip-cycles eval --model-type example_bow` and `clip_benchmark eval --model_type example_bow`,
  each with its own feature cache (two independent encodings), report the same CycleAcc and
  Winoground scores on the same shapes task;
- the backend's `cache_fingerprint` (the sha256 of its towers.json) is in the feature-cache key:
  it is recorded in the cache namespace, a rerun is served from the cache, and editing the
  installed towers.json (which clip_cycles' hash of the loader's module file cannot see)
  makes the next run encode everything again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "clip_cycles_example_backend"
TASK = "cycles/shapes_strict_left_right"
MODEL = ["tiny", "none"]  # --model, --pretrained
ENCODED = re.compile(r"encoded (\d+) images and (\d+) captions \((\d+) \+ (\d+) from the cache")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example installed with pip into a fresh ``--target`` folder (from a copy: pip writes build files)."""
    root = tmp_path_factory.mktemp("example_backend")
    source = root / "source"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    done = subprocess.run([*pip, "--target", str(root / "site"), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "site"


def _env(site: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIP_CYCLES_")}
    # The example first; then whatever made this interpreter import this checkout's clip_cycles.
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update({"CLIP_CYCLES_CACHE": str(cache), "TQDM_DISABLE": "1"})
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def _script(name: str) -> str:
    """The console script ``name`` installed beside this interpreter (the project's environment)."""
    path = Path(sys.executable).parent / name
    assert path.is_file(), f"{name} is not installed beside {sys.executable}: pip install -e '.[test]'"
    return str(path)


def _clip_cycles_eval(site: Path, cache: Path, data: Path, out: Path) -> tuple[dict, tuple[int, ...]]:
    args = [_script("clip-cycles"), "eval", "--task", TASK, "--model-type", "example_bow", "--model", MODEL[0]]
    args += ["--pretrained", MODEL[1], "--dataset-root", str(data), "--num-workers", "0", "--output", str(out)]
    printed = _run(args, _env(site, cache), out.parent)
    found = ENCODED.search(printed)
    assert found, printed
    return json.loads(out.read_text()), tuple(int(x) for x in found.groups())


def _fingerprints(cache: Path) -> set[str]:
    """The example's cache_fingerprint values recorded in the cache's feature namespaces."""
    found = set()
    for path in (cache / "features").glob("*/namespace.json"):
        identity = json.loads(path.read_text()).get("model", {}).get("backend_identity") or {}
        if "fingerprint" in identity:
            found.add(identity["fingerprint"]["towers_json_sha256"])
    return found


def test_example_backend_through_both_harnesses(installed: Path, shapes_cycles: Path, tmp_path: Path) -> None:
    ours, (images, captions, cached_images, cached_captions) = _clip_cycles_eval(
        installed, tmp_path / "cache_a", shapes_cycles, tmp_path / "clip_cycles.json"
    )
    assert images > 0 and captions > 0 and cached_images == cached_captions == 0

    theirs_path = tmp_path / "clip_benchmark.json"
    args = [_script("clip_benchmark"), "eval", "--dataset", TASK, "--model_type", "example_bow", "--model", MODEL[0]]
    args += ["--pretrained", MODEL[1], "--dataset_root", str(shapes_cycles), "--num_workers", "0", "--output", str(theirs_path)]
    printed = _run(args, _env(installed, tmp_path / "cache_b"), tmp_path)
    assert f"Encoded {images} images, {captions} captions (0 + 0 cached)" in printed  # its own encoding, not a cache hit
    theirs = json.loads(theirs_path.read_text())

    for record in (ours, theirs):
        assert (record["dataset"], record["model"], record["pretrained"], record["task"]) == (TASK, *MODEL, "cycles")
    assert ours["metrics"]["n_cycles"] == theirs["metrics"]["n_cycles"] > 0
    for name in ("cycle_acc", "acc", "text_acc", "image_acc", "group_acc"):
        assert ours["metrics"][name] == theirs["metrics"][name], name


def test_cache_fingerprint_reaches_the_feature_cache_key(installed: Path, shapes_cycles: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(installed, site)  # this test edits the installed towers.json
    towers = site / "clip_cycles_example_backend" / "towers.json"
    cache, out = tmp_path / "cache", tmp_path / "result.json"
    first, counts = _clip_cycles_eval(site, cache, shapes_cycles, out)
    assert counts[0] > 0 and counts[2] == 0
    assert _fingerprints(cache) == {hashlib.sha256(towers.read_bytes()).hexdigest()}

    warm, warm_counts = _clip_cycles_eval(site, cache, shapes_cycles, out)
    assert warm_counts == (0, 0, counts[0], counts[1]) and warm["metrics"]["cycle_acc"] == first["metrics"]["cycle_acc"]

    # New "weights" (another seed) outside the loader's module file: only the fingerprint can tell.
    settings = json.loads(towers.read_text())
    settings["tiny"]["seed"] += 1
    towers.write_text(json.dumps(settings))
    _, edited_counts = _clip_cycles_eval(site, cache, shapes_cycles, out)
    assert edited_counts == (counts[0], counts[1], 0, 0)  # everything encoded again, nothing reused
    assert len(_fingerprints(cache)) == 2
