"""clip_benchmark's flags on cycles datasets: honoured, or refused with a sentence, before any work.

- `--dataset 'cycles/shapes_strict_*' --split validation` on a raw shapes world with
  CLIP_CYCLES_MIN_CYCLES: every matching family scored on its validation split, the families
  built with that minimum (counts read from the built folder's build_info.json);
- clip_benchmark's default `--pretrained` tag never reaches a clip_cycles backend nor its record;
- an image-only backend (timm) on a cycle task stops with the README's sentence before any data
  is read, in clip_benchmark and in `clip-cycles eval`;
- unknown names, a bare `cycles` and patterns that match nothing suggest the nearest names;
- flags of clip_benchmark's other tasks are refused, a `--split` the experiments cannot honour too.

clip_benchmark runs in this process (`python -m clip_cycles.commands.clip_benchmark`'s `main`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from tiny_models import TINY_OPEN_CLIP

from clip_cycles.results import read_result
from clip_cycles.settings import MIN_CYCLES_ENV

IMAGE_ONLY_SENTENCE = "gives image embeddings only; this task also needs caption embeddings"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.delenv(MIN_CYCLES_ENV, raising=False)
    monkeypatch.delenv("CLIP_CYCLES_TASKS_PATH", raising=False)
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # clip_benchmark's main reads (and we set) sys.argv
    return tmp_path


def clip_benchmark(*argv: str) -> None:
    from clip_cycles.commands.clip_benchmark import main

    main(["eval", *argv])


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run clip_benchmark expecting exit status 2; the error sentence it printed (no traceback)."""
    with pytest.raises(SystemExit) as stop:
        clip_benchmark(*argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "clip_benchmark: error: " in err
    return err


@pytest.fixture
def no_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if any dataset folder is resolved or anything encoded (the checks come first)."""

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("data was read or encoded before the capability check")

    import clip_cycles.encoding.encoder as encoder
    import clip_cycles.evaluation.zero_shot as zero_shot

    for module, name in ((zero_shot, "encode_tasks"), (encoder, "encode")):
        monkeypatch.setattr(module, name, forbidden)


def test_pattern_split_and_minimum_from_clip_benchmark(
    shapes_world: Path, env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(MIN_CYCLES_ENV, "3")
    out = env / "out"
    clip_benchmark(
        "--dataset", "cycles/shapes_strict_*", "--split", "validation", "--dataset_root", str(shapes_world),
        "--model", "cycles-tiny", "--pretrained", "shapes", "--num_workers", "0", "--no_amp",
        "--output", str(out / "{dataset}.json"),
    )  # fmt: skip
    # The four families are built together once, not once per dataset clip_benchmark runs.
    assert capsys.readouterr().err.count("building coco families") == 1
    (built,) = (env / "cache" / "datasets").glob("shapes-coco-*/build_info.json")
    info = json.loads(built.read_text())
    assert info["min_cycles"] == 3  # the rule set from clip_benchmark, through the environment
    expected = {"left_right", "above_below", "size", "same_pair"}  # the four strict families of the shapes world
    files = sorted(out.glob("*.json"))
    # A validation run's file names its split, so it never replaces the test run's.
    assert {f.name for f in files} == {f"cycles_shapes_strict_{x}@validation.json" for x in expected}
    for path in files:
        record = read_result(path)
        family = record["dataset"].removeprefix("cycles/shapes_")
        counts = info["families"][family]["counts"]
        metrics = record["metrics"]
        assert metrics["split"] == "validation"
        # Scored on validation: the validation counts of every seed, not the test ones.
        assert metrics["n_cycles"] == sum(counts[str(s)]["validation"] for s in metrics["seeds"])
        assert metrics["n_cycles"] != sum(counts[str(s)]["test"] for s in metrics["seeds"])
        assert (record["model"], record["pretrained"]) == ("cycles-tiny", "shapes")


def test_given_flags_tells_a_default_from_a_given_value() -> None:
    import clip_benchmark.cli as cli

    from clip_cycles.commands.clip_benchmark import given_flags, patch_cli

    patch_cli(cli)
    argv = ["eval", "--dataset", "cycles/x", "--test_sp", "validation", "--pretrained=abc", "--model", "m"]
    saved = sys.argv
    sys.argv = ["clip_benchmark", *argv]
    try:
        parser, args = cli.get_parser_args()
    finally:
        sys.argv = saved
    assert (args.split, args.pretrained) == ("validation", ["abc"])
    assert given_flags(parser, argv) == {"dataset", "split", "pretrained", "model"}
    assert args._clip_cycles_given == {"dataset", "split", "pretrained", "model"}


def test_default_tag_never_reaches_a_clip_cycles_backend(
    shapes_cycles: Path, env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import clip_benchmark.cli as cli
    from clip_benchmark import models

    from clip_cycles.commands.clip_benchmark import _lazy_loader, patch_cli
    from clip_cycles.encoding import backends

    patch_cli(cli)
    config = tmp_path / "tiny"
    config.mkdir()
    (config / "open_clip_config.json").write_text(json.dumps(TINY_OPEN_CLIP))
    received: list[Any] = []

    def recording(model_name: str, pretrained: str | None = None, cache_dir: str | None = None, device: str = "cpu") -> Any:
        received.append(pretrained)
        return backends.load_open_clip(f"local-dir:{config}", None, cache_dir, device)

    backends.register_backend("recording", recording)
    monkeypatch.setitem(models.TYPE2FUNC, "recording", _lazy_loader("recording"))  # as patch_cli adds a backend
    monkeypatch.setattr(models, "MODEL_TYPES", models.MODEL_TYPES)  # restored below: argparse's choices list
    models.MODEL_TYPES.append("recording")
    try:
        common = ["--dataset", "cycles/shapes_strict_size", "--model_type", "recording", "--model", "tiny",
                  "--dataset_root", str(shapes_cycles), "--num_workers", "0", "--no_amp"]  # fmt: skip
        clip_benchmark(*common, "--output", str(tmp_path / "default.json"))
        clip_benchmark(*common, "--pretrained", "v2", "--output", str(tmp_path / "given.json"))
    finally:
        models.MODEL_TYPES.remove("recording")
        backends.BACKENDS.unregister("recording")
    assert received == [None, "v2"]  # not clip_benchmark's default laion400m_e32
    assert json.loads((tmp_path / "default.json").read_text())["pretrained"] == ""
    assert json.loads((tmp_path / "given.json").read_text())["pretrained"] == "v2"


def test_image_only_backend_stops_before_any_work(
    shapes_cycles: Path, env: Path, no_data: None, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, "--dataset", "cycles/shapes_strict_size", "--model_type", "timm", "--model", "resnet18",
                  "--dataset_root", str(shapes_cycles))  # fmt: skip
    assert "cycles/shapes_strict_size" in err and "model backend 'timm' (resnet18) " + IMAGE_ONLY_SENTENCE in err
    # The same sentence from clip-cycles eval, and from the experiments (probe) through clip_benchmark.
    from clip_cycles.cli import main as cli_main

    code = cli_main(["eval", "--task", "cycles/shapes_strict_size", "--model-type", "timm", "--model", "resnet18",
                     "--dataset-root", str(shapes_cycles)])  # fmt: skip
    assert code == 2 and IMAGE_ONLY_SENTENCE in capsys.readouterr().err
    err = refused(capsys, "--dataset", "cycles_probe/shapes_strict_size", "--model_type", "hf_vision", "--model", "dino",
                  "--dataset_root", str(shapes_cycles))  # fmt: skip
    assert "model backend 'hf_vision' (dino) " + IMAGE_ONLY_SENTENCE in err


def test_unknown_names_suggest_the_nearest(env: Path, no_data: None, capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, "--dataset", "cycles", "--model", "cycles-tiny", "--pretrained", "shapes")
    assert "unknown task 'cycles'; did you mean cycles/coco_all, cycles/gqa_all" in err
    assert "clip-cycles tasks" in err and len(err) < 600  # a sentence, not a dump of every name
    err = refused(capsys, "--dataset", "cycles/shapes_strict_sise", "--model", "cycles-tiny", "--pretrained", "shapes")
    assert "did you mean cycles/shapes_strict_size" in err
    err = refused(capsys, "--dataset", "cycles/nothing_*", "--model", "cycles-tiny", "--pretrained", "shapes")
    assert "no task or collection matches the pattern 'cycles/nothing_*'" in err
    from clip_cycles.cli import main as cli_main

    assert cli_main(["eval", "--task", "cycles/coco_strict_sise", "--model", "cycles-tiny"]) == 2
    assert "did you mean cycles/coco_strict_size" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "sentence"),
    [
        (["--train_split", "train"], "--train_split (linear probes)"),
        (["--recall_k", "1", "5"], "--recall_k (retrieval)"),
        (["--custom_template_file", "t.json"], "--custom_template_file (zero-shot classification)"),
        (["--split", "dev"], "--split 'dev': cycles datasets have the splits train, validation, test"),
    ],
)
def test_flags_a_cycle_task_cannot_honour_are_refused(
    flags: list[str], sentence: str, env: Path, no_data: None, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, "--dataset", "cycles/shapes_strict_size", "--model", "cycles-tiny", "--pretrained", "shapes", *flags)
    assert sentence in err


def test_split_of_an_experiment_and_a_model_for_a_clip_cycles_backend(
    env: Path, no_data: None, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, "--dataset", "cycles_probe/shapes_strict_size", "--split", "validation", "--model", "cycles-tiny")
    assert "cycles_probe/shapes_strict_size read the splits their design fixes" in err
    err = refused(capsys, "--dataset", "cycles/shapes_strict_size", "--model_type", "hf")
    assert "--model_type hf needs --model" in err


def test_tasks_added_after_the_plugin_was_applied_are_found(
    shapes_cycles: Path, env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import clip_benchmark.cli as cli

    from clip_cycles.commands.clip_benchmark import patch_cli

    patch_cli(cli)  # as the start-up hook does, before the task folder below exists
    extra = env / "extra" / "cycles"
    extra.mkdir(parents=True)
    (extra / "mine_strict_size.yaml").write_text(
        "task: cycles/mine_strict_size\ndataset_path: shapes\ndataset_kwargs: {config: strict_size, seeds: [0]}\n"
        "metric_list: [cycle_acc]\n"
    )
    monkeypatch.setenv("CLIP_CYCLES_TASKS_PATH", str(env / "extra"))
    out = env / "out"
    clip_benchmark("--dataset", "cycles/mine_*", "--dataset_root", str(shapes_cycles), "--model", "cycles-tiny",
                   "--pretrained", "shapes", "--num_workers", "0", "--output", str(out / "{dataset}.json"))  # fmt: skip
    record = read_result(out / "cycles_mine_strict_size.json")
    assert record["dataset"] == "cycles/mine_strict_size" and record["metrics"]["seeds"] == [0]
