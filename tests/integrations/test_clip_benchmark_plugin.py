"""The clip_benchmark plugin: `clip_benchmark eval --dataset cycles/<task>` in both install modes.

- the explicit entry point (`python -m clip_cycles.commands.clip_benchmark`) writes clip_benchmark's
  JSON whose text/image/group accuracies equal clip_benchmark's own
  image_caption_selection on the same blocks, run through the same CLI;
- the start-up hook patches only `clip_benchmark.cli`, imports nothing at start-up, is a
  no-op without clip_benchmark and is disabled by CLIP_CYCLES_NO_PLUGIN;
- `pip install .` and `pip install -e .` into scratch virtual environments, each running
  the `clip_benchmark` console script with a third-party backend from an entry point.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from tiny_models import TINY_OPEN_CLIP

from clip_cycles.results import IDENTITY_FIELDS, MODEL_SOURCE_FIELDS, read_result

REPO = Path(__file__).resolve().parents[2]
TASK = "cycles/shapes_strict_left_right"
TINY = TINY_OPEN_CLIP


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLIP_CYCLES_", "PYTHONPATH"))}
    env.update({"CLIP_CYCLES_CACHE": str(tmp / "cache"), "TQDM_DISABLE": "1", **extra})
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_plugin_matches_clip_benchmark_image_caption_selection(shapes_cycles: Path, tmp_path: Path) -> None:
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "open_clip_config.json").write_text(json.dumps(TINY))
    common = [
        "--dataset",
        TASK,
        "--model",
        f"local-dir:{tmp_path / 'tiny'}",
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
        str(tmp_path / "{dataset}_{pretrained}_{language}_{task}.json"),
    ]
    script = "import sys; from clip_cycles.commands.clip_benchmark import main; sys.exit(main(sys.argv[1:]))"
    # Our metrics, then clip_benchmark's own image_caption_selection on the same blocks,
    # then a second run served from the cache: one process, one open_clip import.
    chained = script.replace(
        "sys.exit(main(sys.argv[1:]))",
        "a = sys.argv[1:]; main(a + ['--task', 'auto']); "
        "main(a + ['--task', 'image_caption_selection']); main(a + ['--task', 'auto'])",
    )
    samples = str(tmp_path / "samples" / "{dataset}_{pretrained}.jsonl")
    done = _run([sys.executable, "-c", chained, "eval", *common], _env(tmp_path, CLIP_CYCLES_SAMPLES=samples), tmp_path)
    ours_path = tmp_path / "cycles_shapes_strict_left_right_none_en_cycles.json"
    ours = read_result(ours_path)  # the nested record, from the detail beside the flat file
    theirs = json.loads((tmp_path / "cycles_shapes_strict_left_right_none_en_image_caption_selection.json").read_text())
    # clip_benchmark's keys, the item set it scored (split, items_sha256, source) and where the
    # weights came from (backend; weights_sha256 for the local tiny checkpoint) beside them, the family's
    # facts as they were, and the samples file this run wrote (relative to the result, with its sha256).
    keys = {"dataset", "model", "pretrained", "task", "metrics", "language", "family", "samples"}
    assert set(ours) == keys | set(IDENTITY_FIELDS) | set(MODEL_SOURCE_FIELDS)
    assert ours["samples"]["path"] == f"samples/{TASK.replace('/', '_')}_none.jsonl"
    assert (ours_path.parent / ours["samples"]["path"]).is_file()
    assert (ours["dataset"], ours["task"], ours["pretrained"]) == (TASK, "cycles", "none")
    per_seed = ours["metrics"]["per_seed"]
    n = sum(v["n_cycles"] for v in per_seed.values())
    assert n == ours["metrics"]["n_cycles"] and sorted(per_seed) == ["0", "1", "2"]
    for name, reference in (("text_acc", "text_acc"), ("image_acc", "image_acc"), ("group_acc", "acc")):
        correct = sum(round(v[name] * v["n_cycles"]) for v in per_seed.values())
        assert correct == round(theirs["metrics"][reference] * n), name
    assert "Encoded 0 images, 0 captions" in done.stdout  # the third run: everything cached
    # $CLIP_CYCLES_SAMPLES, filled like --output: one line per cycle whose credits give each seed's CycleAcc.
    lines = [
        json.loads(x) for x in (tmp_path / "samples" / "cycles_shapes_strict_left_right_none.jsonl").read_text().splitlines()
    ]
    assert len(lines) == n
    for seed, values in per_seed.items():
        credits = [x["credit"] for x in lines if x["seed"] == int(seed)]
        assert sum(credits) / len(credits) == pytest.approx(values["cycle_acc"], abs=1e-12)

    # clip_benchmark's own `build` (its code, run through its CLI) on the folder of results.
    _run(
        [sys.executable, "-c", script, "build", str(tmp_path), "--output", str(tmp_path / "bench.csv")], _env(tmp_path), tmp_path
    )
    with open(tmp_path / "bench.csv") as handle:
        rows = {row["task"]: row for row in csv.DictReader(handle)}
    assert sorted(rows) == ["cycles", "image_caption_selection"]  # the detail sibling is not read as a result
    row = rows["cycles"]
    assert row["dataset"] == TASK
    assert float(row["acc"]) == float(row["cycle_acc"]) == ours["metrics"]["cycle_acc"]
    assert float(row["seed2_cycle_acc"]) == per_seed["2"]["cycle_acc"]
    assert float(row["cycle_acc_ci_low"]) <= float(row["acc"]) <= float(row["cycle_acc_ci_high"])
    assert float(row["additive_audit_passed"]) == 1.0
    text = {"dataset", "model", "pretrained", "task", "language", "model_fullname", *IDENTITY_FIELDS, *MODEL_SOURCE_FIELDS}
    for column, cell in row.items():
        if column not in text and cell != "":  # cells of image_caption_selection's own columns are empty here
            assert math.isfinite(float(cell)), (column, cell)  # a number, never a Python-repr dict
    assert all(row[c] != "" for c in ours_flat_columns(ours_path))


def ours_flat_columns(path: Path) -> list[str]:
    """The metric names of a written cycles result (its flat JSON)."""
    return sorted(json.loads(path.read_text())["metrics"])


FAKE_CLI = """
from clip_benchmark.models import MODEL_TYPES, TYPE2FUNC
dataset_collection = {}
def run(args): return "original"
def build_dataset(dataset_name, root="root", transform=None, split="test", **kw): return "original"
def get_dataset_collate_fn(name): return "original"
"""


def test_hook_patches_only_clip_benchmark_cli_and_can_be_disabled(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "clip_benchmark"
    (fake / "models").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "models" / "__init__.py").write_text("TYPE2FUNC = {'open_clip': None}\nMODEL_TYPES = list(TYPE2FUNC)\n")
    (fake / "cli.py").write_text(FAKE_CLI)
    probe = (
        "import sys, clip_cycles.commands._activation as hook; hook.install(); import json; "
        "assert 'clip_benchmark' not in sys.modules and 'torch' not in sys.modules; "
        "import clip_benchmark.cli as cli; "
        "print(json.dumps([getattr(cli, '_clip_cycles_patched', False), cli.MODEL_TYPES, "
        "sorted(cli.dataset_collection), cli.run.__module__]))"
    )
    env = _env(tmp_path, PYTHONPATH=str(tmp_path / "fake"))
    patched, types, collections, module = json.loads(_run([sys.executable, "-c", probe], env, tmp_path).stdout)
    assert patched and {"open_clip", "hf", "features"} <= set(types)
    cycle_groups = ["coco_all", "gqa_all", "shapes_all", "shapes_gqa_all"]
    assert collections == [
        "attributes/things_all",
        *(f"{ns}/{g}" for ns in ("cycles", "cycles_oe", "cycles_probe") for g in cycle_groups),
    ]
    assert module == "clip_cycles.commands.clip_benchmark"
    off = json.loads(_run([sys.executable, "-c", probe], {**env, "CLIP_CYCLES_NO_PLUGIN": "1"}, tmp_path).stdout)
    assert off == [False, ["open_clip"], [], "clip_benchmark.cli"]
    # Without clip_benchmark the finder is inert.
    absent = "import clip_cycles.commands._activation as h; h.install(); import json, email.parser; print('fine')"
    assert _run([sys.executable, "-c", absent], _env(tmp_path), tmp_path).stdout.strip() == "fine"


DUMMY_BACKEND = '''
"""A third-party clip_cycles backend: deterministic features from pixel and character statistics."""
import torch


class Model:
    def eval(self):
        return self

    def encode_image(self, pixels):
        return torch.cat([pixels.mean(dim=(2, 3)), pixels.std(dim=(2, 3)), pixels.amax(dim=(2, 3))], dim=1)

    def encode_text(self, tokens):
        return tokens[:, :9].float() + 1.0


def transform(image):
    import numpy as np
    return torch.from_numpy(np.asarray(image.resize((16, 16)), dtype=np.float32).transpose(2, 0, 1) / 255.0)


def tokenize(texts):
    rows = [[float(sum(map(ord, text[i::9])) % 97) for i in range(9)] for text in texts]
    return torch.tensor(rows)


def load(model_name, pretrained=None, cache_dir=None, device="cpu"):
    return Model(), transform, tokenize
'''


def _dummy_dist(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "dummy_backend.py").write_text(DUMMY_BACKEND)
    (root / "pyproject.toml").write_text(
        textwrap.dedent("""
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "clip-cycles-dummy-backend"
        version = "0.0.1"
        [project.entry-points."clip_cycles.backends"]
        dummy = "dummy_backend:load"
        [tool.setuptools]
        py-modules = ["dummy_backend"]
    """)
    )
    return root


def _scratch_venv(path: Path) -> Path:
    """A venv whose python sees this environment's packages (torch, clip_benchmark, setuptools, pip)."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "zz_parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # clip_benchmark's console script, as pip writes it from its entry point, for this venv's python.
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="console_scripts") if e.name == "clip_benchmark"]
    launcher = path / "bin" / "clip_benchmark"
    launcher.write_text(f"#!{python}\nimport sys\nfrom {entry.module} import {entry.attr}\nsys.exit({entry.attr}())\n")
    launcher.chmod(0o755)
    return python


def _project_copy(target: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", ".*")
    for name in ("clip_cycles", "tasks", "hf_datasets"):
        shutil.copytree(REPO / name, target / name, ignore=ignore)
    for name in ("setup.py", "setup.cfg", "pyproject.toml", "README.md", "MANIFEST.in"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, target / name)
    if not (target / "README.md").exists():
        (target / "README.md").write_text("clip_cycles\n")
    return target


@pytest.mark.parametrize("editable", [False, True], ids=["regular", "editable"])
def test_console_script_in_fresh_install(editable: bool, shapes_cycles: Path, tmp_path: Path) -> None:
    python = _scratch_venv(tmp_path / "venv")
    project = _project_copy(tmp_path / "project")
    env = _env(tmp_path)
    pip = [str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    _run([*pip, *(["-e"] if editable else []), str(project)], env, tmp_path)
    _run([*pip, str(_dummy_dist(tmp_path / "dummy"))], env, tmp_path)
    site = Path(
        _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env, tmp_path).stdout.strip()
    )
    assert (site / "clip_cycles_plugin.pth").is_file() and (site / "_clip_cycles_hook.py").is_file()
    where = _run([str(python), "-c", "import clip_cycles.tasks.registry as t; print(t.shipped_tasks_dir())"], env, tmp_path)
    # Editable: the checkout's top-level tasks/ (one copy); regular: the copy the wheel installed as package data.
    expected = project / "tasks" if editable else site / "clip_cycles" / "package_data" / "tasks"
    assert Path(where.stdout.strip()) == expected
    assert (expected / "cycles" / "coco_strict_size.yaml").is_file()

    # Start-up stays light: the hook imports nothing.
    imported = _run([str(python), "-X", "importtime", "-c", "pass"], env, tmp_path).stderr
    modules = {line.split("|")[-1].strip().split(".")[0] for line in imported.splitlines() if "|" in line}
    assert "_clip_cycles_hook" in modules  # the hook is active...
    assert not modules & {"torch", "numpy", "clip_benchmark", "clip_cycles", "open_clip", "yaml"}  # ...and light

    out = tmp_path / "result.json"
    done = _run(
        [
            str(tmp_path / "venv" / "bin" / "clip_benchmark"),
            "eval",
            "--dataset",
            TASK,
            "--model_type",
            "dummy",
            "--model",
            "stats",
            "--pretrained",
            "v1",
            "--dataset_root",
            str(shapes_cycles),
            "--num_workers",
            "0",
            "--output",
            str(out),
        ],
        env,
        tmp_path,
    )
    record = json.loads(out.read_text())
    assert (record["dataset"], record["model"], record["pretrained"], record["task"]) == (TASK, "stats", "v1", "cycles")
    assert record["metrics"]["n_cycles"] > 0 and 0.0 <= record["metrics"]["cycle_acc"] <= 1.0
    assert "Encoded" in done.stdout
