"""Task files are untrusted input (issue 23): nothing on CLIP_CYCLES_TASKS_PATH can hang or break evaluation.

An alias bomb, a FIFO, a symlink to /dev/zero, a folder named ``x.yaml``, an oversized
file: each disables only its own entry (``TaskRegistry.unavailable`` names the file and
why) while every other task, the shipped ones included, still resolves. The cases that
hung the old reader run in a child process with a time and memory limit, so a
regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from clip_cycles.settings import TASKS_PATH_ENV
from clip_cycles.tasks import task_files
from clip_cycles.tasks.registry import TaskRegistry, shipped_tasks_dir

REPO = Path(__file__).resolve().parents[2]
GOOD = (
    "task: cycles/{name}\ndataset_path: shapes\ndataset_kwargs: {{config: strict_size, seeds: [0]}}\nmetric_list: [cycle_acc]\n"
)

#: Nine levels of nine aliases: about 387 million strings once expanded, in 14 short lines; the
#: anchors sit under a key that takes any mapping, so only the expanded ``seeds`` is wrong (and the
#: old reader hung writing its repr into the error message).
ALIAS_BOMB = "\n".join(
    [
        "lmms_eval_specific_kwargs:",
        '  a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
        *(f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)),
        "task: cycles/bomb",
        "dataset_path: shapes",
        "dataset_kwargs: {config: strict_size, seeds: *a8}",
        "metric_list: [cycle_acc]",
    ]
)

CHILD = """
import json
from clip_cycles.tasks.registry import TaskRegistry
registry = TaskRegistry.default()
names = registry.names()
print(json.dumps({"names": names, "unavailable": registry.unavailable,
                  "shipped": registry.get("cycles/shapes_strict_size").source}))
"""


def _limits() -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # an expanding bomb or /dev/zero stops at 2 GiB


def _hostile_root(root: Path) -> None:
    cycles = root / "cycles"
    cycles.mkdir(parents=True)
    (cycles / "good.yaml").write_text(GOOD.format(name="good"), encoding="utf-8")
    (cycles / "bomb.yaml").write_text(ALIAS_BOMB, encoding="utf-8")
    os.mkfifo(cycles / "fifo.yaml")
    (cycles / "zero.yaml").symlink_to("/dev/zero")
    (cycles / "folder.yaml").mkdir()
    # A template (never a task itself) that is a FIFO, included by a task: only that task is disabled.
    os.mkfifo(cycles / "_pipe_yaml")
    (cycles / "via_pipe.yaml").write_text("include: _pipe_yaml\n" + GOOD.format(name="via_pipe"), encoding="utf-8")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_hostile_entries_on_the_tasks_path_neither_hang_nor_break_other_tasks(tmp_path: Path) -> None:
    _hostile_root(tmp_path / "tasks")
    env = {**os.environ, TASKS_PATH_ENV: str(tmp_path / "tasks"), "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120, preexec_fn=_limits
        )
    except subprocess.TimeoutExpired:
        pytest.fail("reading the tasks path hung (alias bomb, FIFO or /dev/zero read without a bound)")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["shipped"] == "shapes" and "cycles/good" in report["names"] and "cycles/coco_all" in report["names"]
    unavailable = report["unavailable"]
    assert sorted(unavailable) == ["cycles/bomb", "cycles/fifo", "cycles/folder", "cycles/via_pipe", "cycles/zero"]
    cycles = tmp_path / "tasks" / "cycles"
    assert unavailable["cycles/bomb"].startswith(f"{cycles / 'bomb.yaml'} line 3: YAML alias *a0: task files may not use")
    assert unavailable["cycles/fifo"].startswith(f"{cycles / 'fifo.yaml'}: is a FIFO, not a regular file")
    assert unavailable["cycles/zero"].startswith(f"{cycles / 'zero.yaml'}: is a character device, not a regular file")
    assert unavailable["cycles/folder"].startswith(f"{cycles / 'folder.yaml'}: is a folder, not a regular file")
    assert unavailable["cycles/via_pipe"].startswith(f"{cycles / '_pipe_yaml'}: is a FIFO")


def test_a_folder_named_like_a_task_file_disables_only_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cycles" / "x.yaml").mkdir(parents=True)
    (tmp_path / "cycles" / "fine.yaml").write_text(GOOD.format(name="fine"), encoding="utf-8")
    monkeypatch.setenv(TASKS_PATH_ENV, str(tmp_path))
    registry = TaskRegistry.default()
    assert "cycles/fine" in registry.names() and "cycles/shapes_strict_size" in registry.names()
    with pytest.raises(ValueError, match=r"x\.yaml: is a folder, not a regular file; a task file must be a regular YAML file"):
        registry.get("cycles/x")


def test_an_oversized_task_file_is_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_files, "MAX_TASK_FILE_BYTES", 200)
    (tmp_path / "cycles").mkdir()
    big = tmp_path / "cycles" / "big.yaml"
    big.write_text(GOOD.format(name="big") + "description: " + "x" * 300 + "\n", encoding="utf-8")
    (tmp_path / "cycles" / "small.yaml").write_text(GOOD.format(name="small"), encoding="utf-8")
    registry = TaskRegistry([tmp_path])
    assert registry.task_names(derived=False) == ["cycles/small"]
    assert registry.unavailable["cycles/big"] == f"{big}: larger than 200 bytes; a task file is a short YAML mapping"


def test_aliases_are_refused_even_small_ones_and_anchors_alone_are_fine(tmp_path: Path) -> None:
    (tmp_path / "cycles").mkdir()
    path = tmp_path / "cycles" / "alias.yaml"
    path.write_text(GOOD.format(name="alias").replace("seeds: [0]", "seeds: &s [0]") + "tag: *s\n", encoding="utf-8")
    (tmp_path / "cycles" / "anchor.yaml").write_text(
        GOOD.format(name="anchor").replace("seeds: [0]", "seeds: &s [0]"), encoding="utf-8"
    )
    registry = TaskRegistry([tmp_path])
    assert registry.task_names(derived=False) == ["cycles/anchor"]
    assert registry.unavailable["cycles/alias"].startswith(f"{path} line 5: YAML alias *s: task files may not use anchors")


def test_unreadable_and_undecodable_files_are_named(tmp_path: Path) -> None:
    (tmp_path / "cycles").mkdir()
    (tmp_path / "cycles" / "latin.yaml").write_bytes(GOOD.format(name="latin").encode("utf-8") + b"description: caf\xe9\n")
    (tmp_path / "cycles" / "dangling.yaml").symlink_to(tmp_path / "nowhere.yaml")
    registry = TaskRegistry([tmp_path, shipped_tasks_dir()])
    assert "cycles/shapes_all" in registry.names()
    assert "latin.yaml: not UTF-8 text at byte" in registry.unavailable["cycles/latin"]
    assert registry.unavailable["cycles/dangling"].startswith(f"{tmp_path / 'cycles' / 'dangling.yaml'}: cannot be read (")
