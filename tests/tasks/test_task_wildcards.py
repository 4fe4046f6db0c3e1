"""Wildcards over what a built folder holds (issue 36), in `clip-cycles eval --task` and clip_benchmark's `--dataset`.

A folder built by `build coco` from the shapes world with three families: `cycles/shapes_*` scores those
three, names every other matching task in one log line, and a pattern the folder serves none of is refused.
With a raw root a pattern is expanded as before (the matching families are built). The expected family sets
are written out here, not derived from the code under test.
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

import pytest
from fixture_data import SHAPES_CYCLES_MIN_CYCLES

from clip_cycles.results import read_result
from clip_cycles.settings import MIN_CYCLES_ENV
from clip_cycles.tasks.names import folder_scope, resolve_task_names
from clip_cycles.tasks.registry import TaskRegistry

HELD = ("coarse_object", "object_position", "strict_size")


@pytest.fixture(scope="module")
def three_families(shapes_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from clip_cycles.data.folder.build import build_coco_folder

    out = tmp_path_factory.mktemp("three") / "three"
    folder, _ = build_coco_folder(shapes_world, out, families=list(HELD), min_cycles=SHAPES_CYCLES_MIN_CYCLES)
    return folder


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.delenv(MIN_CYCLES_ENV, raising=False)
    monkeypatch.delenv("CLIP_CYCLES_TASKS_PATH", raising=False)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    return tmp_path


def _matching(pattern: str) -> set[str]:
    """Every single task a pattern matches by name (collections left out: they only add their members)."""
    registry = TaskRegistry.default()
    return {name for name in registry.task_names() if fnmatch.fnmatchcase(name, pattern)}


def test_scope_keeps_the_held_families_and_logs_the_rest(three_families: Path, caplog: pytest.LogCaptureFixture) -> None:
    scope = folder_scope(three_families)
    assert scope is not None and scope.families == frozenset(HELD) and scope.raw_source == "shapes"
    registry = TaskRegistry.default()
    with caplog.at_level("INFO", logger="clip_cycles.tasks.names"):
        names = resolve_task_names(["cycles/shapes_*"], registry, scope)
    assert names == sorted(f"cycles/shapes_{f}" for f in HELD)
    lines = [r.getMessage() for r in caplog.records if r.name == "clip_cycles.tasks.names"]
    assert len(lines) == 1  # one line names every match the folder lacks
    lacking = _matching("cycles/shapes_*") - set(names)
    assert "cycles/shapes_gqa_binding" in lacking and "cycles/shapes_text_neighbor" in lacking
    named = set(lines[0].split("not in it: ", 1)[1].split(", "))
    assert named == lacking
    # Without a scope (a raw root, or none) every match is kept, as before.
    assert set(resolve_task_names(["cycles/shapes_*"], registry)) == _matching("cycles/shapes_*")
    # An exact name is never scoped (the loader reports a family the folder lacks by name).
    assert resolve_task_names(["cycles/shapes_box_size"], registry, scope) == ["cycles/shapes_box_size"]


def test_a_raw_root_or_no_root_scopes_nothing(shapes_world: Path, tmp_path: Path) -> None:
    assert folder_scope(None) is None and folder_scope(shapes_world) is None and folder_scope(tmp_path / "nowhere") is None


def test_clip_cycles_eval_wildcard_scores_what_the_folder_holds(
    three_families: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clip_cycles.cli import main as cli_main

    out = env / "out"
    code = cli_main([
        "eval", "--task", "cycles/shapes_*o*", "--model", "cycles-tiny", "--pretrained", "shapes",
        "--dataset-root", str(three_families), "--output", str(out / "{dataset}.json"),
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    # `*o*` after `shapes_`: coarse_object and object_position; strict_size is held but not matched.
    expected = ["cycles_shapes_coarse_object.json", "cycles_shapes_object_position.json"]
    assert sorted(p.name for p in out.glob("*.json")) == expected
    for path in out.glob("*.json"):
        assert read_result(path)["metrics"]["n_cycles"] > 0
    lines = [line for line in err.splitlines() if "not in it: " in line]
    assert len(lines) == 1 and "cycles/shapes_box_size" in lines[0] and "cycles/shapes_gqa_relation_object" in lines[0]
    assert "cycles/shapes_strict_size" not in lines[0] and "cycles/shapes_coarse_object" not in lines[0]


def test_clip_benchmark_wildcard_scores_what_the_folder_holds(
    three_families: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clip_cycles.commands.clip_benchmark import main

    out = env / "out"
    main([
        "eval", "--dataset", "cycles/shapes_*", "--dataset_root", str(three_families), "--model", "cycles-tiny",
        "--pretrained", "shapes", "--num_workers", "0", "--no_amp", "--output", str(out / "{dataset}.json"),
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert sorted(p.name for p in out.glob("*.json")) == sorted(f"cycles_shapes_{f}.json" for f in HELD)
    assert sum("not in it: " in line for line in err.splitlines()) == 1


def test_nothing_the_folder_serves_is_an_error_in_both_entry_points(
    three_families: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from clip_cycles.cli import main as cli_main
    from clip_cycles.commands.clip_benchmark import main

    # cycles/coco_*: the folder's cycles come from the shapes world, so no COCO task reads it.
    code = cli_main(["eval", "--task", "cycles/coco_*", "--model", "cycles-tiny", "--dataset-root", str(three_families)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "the pattern 'cycles/coco_*' matches" in err and "serves none of them" in err and "families coarse_object" in err
    with pytest.raises(SystemExit) as stop:
        main(["eval", "--dataset", "cycles/shapes_gqa_*", "--dataset_root", str(three_families), "--model", "cycles-tiny"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "the pattern 'cycles/shapes_gqa_*' matches" in err and "serves none of them" in err
