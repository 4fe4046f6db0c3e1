"""Task names as a harness takes them: `clip-cycles tasks [PATTERN]`, fnmatch patterns in `--task`, suggestions.

Expected names come from the files of the top-level `tasks/` folder (globbed and read here),
never from the matching code under test.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest
import yaml

from clip_cycles.cli import main as cli_main
from clip_cycles.settings import TASKS_PATH_ENV
from clip_cycles.tasks.names import is_pattern, resolve_task_names, suggest
from clip_cycles.tasks.registry import TaskRegistry

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def _single_tasks(glob: str) -> list[str]:
    """Names of the single (non-collection) cycle task files matching ``glob`` in tasks/cycles/."""
    names = []
    for path in sorted((TASKS / "cycles").glob(glob)):
        if not path.name.startswith("_") and "group" not in yaml.safe_load(path.read_text()):
            names.append(f"cycles/{path.stem}")
    return names


def _shapes_tasks(pattern: str) -> list[str]:
    """Names of the shapes tasks matching ``pattern``: each COCO task's and GQA task's shapes twin
    (``coco_<x>`` -> ``shapes_<x>``, ``gqa_<x>`` -> ``shapes_gqa_<x>``), sorted."""
    twins = [f"cycles/shapes_{n.removeprefix('cycles/coco_')}" for n in _single_tasks("coco_*.yaml")]
    twins += [f"cycles/shapes_{n.removeprefix('cycles/')}" for n in _single_tasks("gqa_*.yaml")]
    return sorted(n for n in twins if fnmatch.fnmatchcase(n, f"cycles/{pattern}"))


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> TaskRegistry:
    monkeypatch.delenv(TASKS_PATH_ENV, raising=False)
    return TaskRegistry.default()


def test_patterns_expand_to_single_tasks_sorted(registry: TaskRegistry) -> None:
    assert is_pattern("cycles/coco_*") and is_pattern("cycles/coco_[ab]*") and not is_pattern("cycles/coco_all")
    shapes = _shapes_tasks("shapes_*")
    assert len(shapes) == 21
    # shapes_all and shapes_gqa_all match too: their members add nothing beyond the tasks themselves.
    assert resolve_task_names(["cycles/shapes_*"], registry) == sorted(shapes)
    # Exact names (a collection too) stay as given, duplicates dropped, order kept.
    names = ["cycles/coco_all", "cycles/shapes_strict_size", "cycles/coco_all"]
    assert resolve_task_names(names, registry) == ["cycles/coco_all", "cycles/shapes_strict_size"]
    assert resolve_task_names(["cycles_probe/coco_strict_*"], registry) == [
        f"cycles_probe/{n.removeprefix('cycles/')}" for n in _single_tasks("coco_strict_*.yaml")
    ]


def test_unknown_names_and_empty_patterns_suggest_the_nearest(registry: TaskRegistry) -> None:
    with pytest.raises(ValueError, match=r"unknown task 'cycles/coco_strict_sise'; did you mean cycles/coco_strict_size"):
        resolve_task_names(["cycles/coco_strict_sise"], registry)
    with pytest.raises(ValueError, match=r"no task or collection matches the pattern 'cycles/cocoa_\*'"):
        resolve_task_names(["cycles/cocoa_*"], registry)
    # A bare namespace: its collections first (cycles/coco_all, ...), never a traceback.
    groups = sorted(f"cycles/{p.stem}" for p in (TASKS / "cycles").glob("*_all.yaml"))
    assert suggest("cycles", registry)[: len(groups)] == groups
    # A wrong namespace, right family: the family in the other namespaces.
    assert suggest("cycles_oee/coco_strict_size", registry)[:2] == ["cycles/coco_strict_size", "cycles_oe/coco_strict_size"]


def test_tasks_command_lists_one_line_per_task(registry: TaskRegistry, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["tasks", "cycles/coco_*"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "type", "reads", "description"]
    rows = {line.split()[0]: line for line in lines[1:]}
    expected = [f"cycles/{p.stem}" for p in sorted((TASKS / "cycles").glob("coco_*.yaml"))]
    assert list(rows) == expected  # every coco task and the collection, sorted, one line each
    size = yaml.safe_load((TASKS / "cycles" / "coco_strict_size.yaml").read_text())
    assert rows["cycles/coco_strict_size"].split(None, 3)[1:] == ["cycle_selection", "coco/strict_size", size["description"]]
    group = yaml.safe_load((TASKS / "cycles" / "coco_all.yaml").read_text())
    assert rows["cycles/coco_all"].split()[1:3] == ["collection", f"{len(group['task'])}"]
    # A namespace prefix lists the namespace; every listed name is a registry name.
    assert cli_main(["tasks", "attributes"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert names == sorted(f"attributes/{p.stem}" for p in (TASKS / "attributes").glob("*.yaml") if not p.name.startswith("_"))


def test_tasks_command_names_broken_files_and_refuses_unknown_patterns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cycles").mkdir()
    (tmp_path / "cycles" / "broken.yaml").write_text("task: cycles/broken\ndataset_path: nowhere\n")
    monkeypatch.setenv(TASKS_PATH_ENV, str(tmp_path))
    assert cli_main(["tasks", "cycles/br*"]) == 0
    out = capsys.readouterr().out
    assert "unavailable: cycles/broken: " in out and "dataset_path" in out  # named with its reason, not dropped
    assert cli_main(["tasks", "cycles/coco_box_*"]) == 0
    assert "broken" not in capsys.readouterr().out
    assert cli_main(["tasks", "cycles/zzz*"]) == 2
    assert "no task or collection matches the pattern 'cycles/zzz*'" in capsys.readouterr().err


def test_eval_takes_a_pattern(shapes_cycles: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TASKS_PATH_ENV, raising=False)
    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    out = tmp_path / "out"
    argv = ["eval", "--task", "cycles/shapes_strict_s*", "--model", "cycles-tiny", "--pretrained", "shapes",
            "--dataset-root", str(shapes_cycles), "--num-workers", "0", "--output", str(out / "{dataset}.json")]  # fmt: skip
    assert cli_main(argv) == 0
    written = sorted(json.loads(p.read_text())["dataset"] for p in out.glob("*.json"))
    assert written == _shapes_tasks("shapes_strict_s*") == ["cycles/shapes_strict_same_pair", "cycles/shapes_strict_size"]


def test_lmms_bridge_takes_patterns_and_suggests(
    shapes_cycles: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clip_cycles.commands.lmms_bridge import main as bridge_main

    monkeypatch.delenv(TASKS_PATH_ENV, raising=False)
    argv = ["--dataset-root", str(shapes_cycles), "--seeds", "0", "--out"]
    assert bridge_main([*argv, str(tmp_path / "a"), "--task", "cycles/shapes_box_left_r*"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"] == ["clip_cycles_box_left_right_seed0", "clip_cycles_box_left_right"]
    assert bridge_main([*argv, str(tmp_path / "b"), "--task", "cycles/shapes_box_left_rigth"]) == 2
    assert "did you mean cycles/shapes_box_left_right" in capsys.readouterr().err
