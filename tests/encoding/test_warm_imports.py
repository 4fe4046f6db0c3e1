"""Load only what a run uses (issue 52): what each entry point imports, asked of ``sys.modules``.

- a warm run (every feature cached) of ``clip-cycles eval``, the clip_benchmark plugin and ``clip-cycles
  probe`` imports neither OpenCLIP nor torchvision nor transformers: the weights check, the backend
  import and the model load wait for the first cache miss;
- a cold run offline still gets issue 36's one sentence, before any data is read, fast (no OpenCLIP import);
- start-up commands (``--help``, ``tasks``, ``schema``) import none of the heavy libraries (the budget table).

Each run is a fresh process that prints the watched modules it ended with; the cold run beside each warm
one shows that the report does see a backend library when one is loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from clip_cycles.encoding import hub_access
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.encoding.feature_cache import write_manifest

REPO = Path(__file__).resolve().parents[2]
#: The backend libraries a warm run must not import.
BACKEND_LIBRARIES = {"open_clip", "torchvision", "transformers"}
#: The libraries watched: seconds to import each (torch and what pulls it in), or large.
HEAVY = (
    "torch",
    "open_clip",
    "torchvision",
    "transformers",
    "timm",
    "clip_benchmark",
    "datasets",
    "matplotlib",
    "scipy",
    "sklearn",
    "pandas",
    "pyarrow",  # a warm evaluation reads its row files' kept decodes, not their Parquet
    "pyarrow.compute",
)
#: The import budget: what each start-up command may import of :data:`HEAVY` (nothing).
START_UP_BUDGET: dict[tuple[str, ...], frozenset[str]] = {
    ("--help",): frozenset(),
    ("tasks",): frozenset(),
    ("schema", "task"): frozenset(),
    ("schema", "result"): frozenset(),
    ("eval", "--help"): frozenset(),
}
#: What a warm run may import of :data:`HEAVY`: torch only to pick the default device (none with --device cpu);
#: the probe trains its heads with torch and fits on the features (scipy); its report draws with matplotlib.
WARM_BUDGET: dict[str, frozenset[str]] = {
    "eval --device cpu": frozenset(),
    "eval": frozenset({"torch"}),
    "probe --device cpu": frozenset({"torch", "scipy", "matplotlib"}),
    "clip_benchmark plugin": frozenset({"clip_benchmark", "torch"}),  # its CLI (a stand-in here)
}
TASK = "cycles/shapes_strict_left_right"
MODEL = ["--model", "cycles-tiny", "--pretrained", "shapes"]

#: Runs the clip-cycles entry point on argv, then prints the watched modules it imported (also on failure).
REPORTING_MAIN = f"""
import json, sys
code = 1
try:
    from clip_cycles.commands.main import main
    code = main(sys.argv[1:])
finally:
    print("MODULES " + json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLIP_CYCLES_", "PYTHONPATH"))}
    env.update({"CLIP_CYCLES_CACHE": str(tmp / "cache"), "TQDM_DISABLE": "1", "PYTHONPATH": str(REPO), **extra})
    return env


def _run(script: str, args: list[str], env: dict[str, str], cwd: Path, code: int = 0) -> tuple[set[str], str, str]:
    """(modules of :data:`HEAVY` imported, stderr, stdout) of ``python -c script args`` in a fresh process."""
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == code, f"{args}: {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    lines = [line for line in done.stderr.splitlines() if line.startswith("MODULES ")]
    assert len(lines) == 1, done.stderr[-3000:]
    return set(json.loads(lines[0][len("MODULES ") :])), done.stderr, done.stdout


@pytest.mark.parametrize("command", sorted(START_UP_BUDGET))
def test_start_up_commands_import_no_heavy_library(command: tuple[str, ...], tmp_path: Path) -> None:
    imported, _, _ = _run(REPORTING_MAIN, list(command), _env(tmp_path), tmp_path)
    assert imported <= START_UP_BUDGET[command], f"clip-cycles {' '.join(command)} imported {sorted(imported)}"


@pytest.mark.parametrize("device", [["--device", "cpu"], []], ids=["cpu", "default-device"])
def test_warm_eval_imports_no_backend_library(device: list[str], shapes_cycles: Path, tmp_path: Path) -> None:
    """The weights check (issue 36) waits for a cache miss: a warm eval never imports OpenCLIP to ask."""
    env = _env(tmp_path)
    args = ["eval", "--task", TASK, *MODEL, "--dataset-root", str(shapes_cycles), *device]
    args += ["--output", str(tmp_path / "out" / "{dataset}.json")]
    cold, _, _ = _run(REPORTING_MAIN, args, env, tmp_path)
    assert "open_clip" in cold  # the report sees the backend library of a run that loads the model
    first = (tmp_path / "out" / "cycles_shapes_strict_left_right.json").read_bytes()
    warm, err, _ = _run(REPORTING_MAIN, args, env, tmp_path)
    assert "encoded 0 images and 0 captions" in err  # every feature came from the cache
    assert not warm & BACKEND_LIBRARIES, f"a warm eval imported {sorted(warm & BACKEND_LIBRARIES)}"
    assert warm <= WARM_BUDGET["eval --device cpu" if device else "eval"], sorted(warm)
    assert (tmp_path / "out" / "cycles_shapes_strict_left_right.json").read_bytes() == first


def test_warm_probe_imports_no_backend_library(shapes_cycles: Path, tmp_path: Path) -> None:
    """A probe whose features are cached (its result not: other --epochs) encodes nothing and loads no backend."""
    env = _env(tmp_path)
    args = ["probe", "--task", TASK, *MODEL, "--dataset-root", str(shapes_cycles), "--device", "cpu"]
    args += ["--out", str(tmp_path / "probe"), "--no-report", "--num-proc", "1", "--ranks", "1", "--full-heads"]
    cold, _, _ = _run(REPORTING_MAIN, [*args, "--epochs", "1"], env, tmp_path)
    assert "open_clip" in cold
    warm, _, out = _run(REPORTING_MAIN, [*args, "--epochs", "2"], env, tmp_path)
    assert "computed the run_probes result" in out  # fitted anew (not the cached result), on cached features
    assert not warm & BACKEND_LIBRARIES, f"a warm probe imported {sorted(warm & BACKEND_LIBRARIES)}"
    assert warm <= WARM_BUDGET["probe --device cpu"], sorted(warm)


#: A stand-in ``clip_benchmark`` with the real one's loader convention, whose open_clip loader imports OpenCLIP
#: when it loads (the real ``clip_benchmark.models`` imports it at the top, before the plugin is applied): what a
#: warm run imports is then what the plugin itself imports.
STAND_IN_MODELS = """
def load_open_clip(model_name, pretrained, cache_dir=None, device="cpu"):
    import open_clip

    model, _, transform = open_clip.create_model_and_transforms(model_name, pretrained=pretrained, cache_dir=cache_dir)
    return model.to(device), transform, open_clip.get_tokenizer(model_name)


TYPE2FUNC = {"open_clip": load_open_clip}
MODEL_TYPES = list(TYPE2FUNC)


def load_clip(model_type, model_name, pretrained, cache_dir, device="cuda"):
    return TYPE2FUNC[model_type](model_name=model_name, pretrained=pretrained, cache_dir=cache_dir, device=device)
"""
STAND_IN_CLI = """
from copy import copy

from clip_benchmark.models import MODEL_TYPES, TYPE2FUNC

dataset_collection = {}


def run(args):
    return "original"


def build_dataset(dataset_name, root="root", transform=None, split="test", **kw):
    return "original"


def get_dataset_collate_fn(name):
    return "original"


def main_eval(base):
    for name in base.dataset:  # clip_benchmark's loop over datasets, each through run() (the plugin's)
        args = copy(base)
        args.dataset = name
        run(args)
"""
#: The plugin applied to the stand-in CLI, then its ``eval`` of the flags given as JSON.
PLUGIN_MAIN = f"""
import argparse, json, sys
code = 1
try:
    import clip_benchmark.cli as cli
    from clip_cycles.commands.clip_benchmark import patch_cli

    patch_cli(cli)
    flags = json.loads(sys.argv[1])
    flags["_clip_cycles_given"] = set(flags["_clip_cycles_given"])
    cli.main_eval(argparse.Namespace(**flags))
    code = 0
finally:
    print("MODULES " + json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def test_warm_clip_benchmark_plugin_imports_no_backend_library(shapes_cycles: Path, tmp_path: Path) -> None:
    """The plugin's start-up weights check and its runs import no backend library when every feature is cached."""
    stand_in = tmp_path / "stand_in" / "clip_benchmark"
    (stand_in / "models").mkdir(parents=True)
    (stand_in / "__init__.py").write_text("")
    (stand_in / "models" / "__init__.py").write_text(STAND_IN_MODELS)
    (stand_in / "cli.py").write_text(STAND_IN_CLI)
    env = _env(tmp_path, PYTHONPATH=os.pathsep.join([str(tmp_path / "stand_in"), str(REPO)]))
    output = str(tmp_path / "out" / "{dataset}.json")
    flags = {
        "dataset": [TASK],
        "dataset_root": str(shapes_cycles),
        "model_type": "open_clip",
        "model": "cycles-tiny",
        "pretrained": "shapes",
        "pretrained_model": "",
        "model_cache_dir": None,
        "amp": True,
        "seed": 0,
        "batch_size": 64,
        "num_workers": 0,
        "output": output,
        "language": "en",
        "skip_existing": False,
        "verbose": True,
        "task": "auto",
        "split": "test",
        "distributed": False,
        "_clip_cycles_given": ["dataset", "dataset_root", "model", "pretrained", "output", "task", "num_workers"],
    }
    cold, _, _ = _run(PLUGIN_MAIN, [json.dumps(flags)], env, tmp_path)
    assert "open_clip" in cold
    (result,) = [path for path in (tmp_path / "out").iterdir() if not path.name.endswith(".detail.jsonl")]
    first = result.read_bytes()
    warm, _, _ = _run(PLUGIN_MAIN, [json.dumps(flags)], env, tmp_path)
    assert not warm & BACKEND_LIBRARIES, f"a warm plugin run imported {sorted(warm & BACKEND_LIBRARIES)}"
    assert warm <= WARM_BUDGET["clip_benchmark plugin"], sorted(warm)
    assert result.read_bytes() == first


def test_cold_offline_eval_says_the_sentence_within_5_s(shapes_cycles: Path, tmp_path: Path) -> None:
    """Issue 36 kept: a cold run offline stops with one sentence before any data is read, without OpenCLIP's import."""
    env = _env(tmp_path, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    args = ["eval", "--task", TASK, "--model", "ViT-B-32", "--pretrained", "laion400m_e32", "--device", "cpu"]
    args += ["--dataset-root", str(shapes_cycles), "--output", str(tmp_path / "out.json")]
    start = time.perf_counter()
    imported, err, _ = _run(REPORTING_MAIN, args, env, tmp_path, code=2)
    elapsed = time.perf_counter() - start
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("MODULES ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("clip-cycles eval: error: model 'ViT-B-32' with pretrained 'laion400m_e32'"), err
    assert "HF_HUB_OFFLINE=1" in lines[0] and "--pretrained ''" in lines[0]
    assert not imported, sorted(imported)  # OpenCLIP's table was read without importing OpenCLIP (or torch)
    assert not (tmp_path / "cache").exists() and not (tmp_path / "out.json").exists()  # nothing read, built or written
    assert elapsed < 5.0, f"the sentence took {elapsed:.1f} s"


def _spy_on_weights_check(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr("clip_cycles.encoding.encoder.require_weights", lambda backend, model, *a: calls.append(model) or False)
    return calls


def test_weights_checked_early_only_where_the_run_is_sure_to_load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = _spy_on_weights_check(monkeypatch)
    spec = ModelSpec("open_clip", "cycles-tiny", "shapes")
    spec.require_weights_if_cold(None)  # no feature cache: everything is encoded
    assert calls == ["cycles-tiny"]
    spec = ModelSpec("open_clip", "cycles-tiny", "shapes")
    spec.require_weights_if_cold(tmp_path)  # an empty cache: cold
    assert calls == ["cycles-tiny"] * 2
    # A manifest of this very model: the run may be warm, so the check waits for a miss (the load).
    write_manifest(tmp_path, spec.description(tmp_path / "fingerprints"), {"image": "i", "text": "t", "precision": "fp32"})
    fresh = ModelSpec("open_clip", "cycles-tiny", "shapes")
    fresh.require_weights_if_cold(tmp_path)
    assert calls == ["cycles-tiny"] * 2
    # Another seed is another identity (another manifest): cold again.
    ModelSpec("open_clip", "cycles-tiny", "shapes", seed=1).require_weights_if_cold(tmp_path)
    assert calls == ["cycles-tiny"] * 3


def test_plugin_start_up_check_follows_the_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from clip_cycles.integrations.clip_benchmark import check_weights, run_device

    calls = _spy_on_weights_check(monkeypatch)
    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path))
    args = argparse.Namespace(
        model_type="open_clip", model=["cycles-tiny"], pretrained=["shapes"], pretrained_model="", seed=0, amp=True
    )
    args.model_cache_dir = None
    check_weights(args)
    assert calls == ["cycles-tiny"]  # nothing cached: the run will load it, so ask now
    spec = ModelSpec("open_clip", "cycles-tiny", "shapes", device=run_device(args))
    write_manifest(tmp_path, spec.description(tmp_path / "fingerprints"), {"image": "i", "text": "t", "precision": "fp32"})
    check_weights(args)
    assert calls == ["cycles-tiny"]  # known to the cache: its runs ask at their first miss


def test_open_clip_table_without_open_clip(tmp_path: Path) -> None:
    """The private copy of OpenCLIP's pretrained table answers as OpenCLIP does, importing neither it nor torch."""
    script = textwrap.dedent(
        """
        import json, sys
        from clip_cycles.encoding.hub_access import open_clip_pretrained_cfg
        pairs = [("ViT-B-32", "laion400m_e32"), ("ViT-B-32", "openai"), ("RN50", "yfcc15m"), ("nope", "x"), ("ViT-B-32", "nope")]
        answers = [open_clip_pretrained_cfg(m, t) for m, t in pairs]
        imported = sorted(m for m in ("torch", "open_clip", "torchvision", "transformers") if m in sys.modules)
        import open_clip
        assert sys.modules.get("safetensors.torch", "absent") is not None  # the block was lifted
        real = [open_clip.get_pretrained_cfg(m, t) for m, t in pairs]
        print(json.dumps([imported, answers == real, bool(answers[0].get("hf_hub")), answers[3]]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    imported, same, hub, unknown = json.loads(done.stdout)
    assert imported == [] and same and hub and unknown == {}


def test_open_clip_table_prefers_the_live_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """With OpenCLIP imported, tags added at run time count (the copy would not know them)."""
    import open_clip
    from open_clip import pretrained

    monkeypatch.setitem(pretrained._PRETRAINED, "cycles-tiny", {"hubtest": {"hf_hub": "org/repo/"}})
    assert hub_access.open_clip_pretrained_cfg("cycles-tiny", "hubtest") == {"hf_hub": "org/repo/"}
    assert open_clip.get_pretrained_cfg("cycles-tiny", "shapes") == {}  # the shipped tag still answers, below
    assert hub_access.open_clip_pretrained_cfg("cycles-tiny", "shapes")["file"].endswith("cycles-tiny-shapes.safetensors")
