"""Task YAMLs sharing keys through ``include:``: override order, nesting, cycles, missing files, templates, shipping."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from clip_cycles.tasks import task_files
from clip_cycles.tasks.registry import TaskRegistry, TaskSpec, is_template, read_task_yaml, shipped_tasks_dir

TEMPLATE = """test_split: test
output_type: cycle_selection
metric_list:
  - {metric: cycle_acc, aggregation: mean, higher_is_better: true}
tie_tolerance: 1.0e-9
doc_to_text: "{caption}"
dataset_path: shapes
"""


def _write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _task(name: str, include: str = "_default_template_yaml", extra: str = "") -> str:
    return f"include: {include}\ntask: cycles/{name}\ndataset_kwargs: {{config: strict_size, seeds: [0]}}\n{extra}"


def test_own_keys_override_included_ones_in_order(tmp_path: Path) -> None:
    _write(tmp_path, "_base_yaml", "a: base\nb: base\nc: base\nd: base\n")
    _write(tmp_path, "_middle_yaml", "include: _base_yaml\nb: middle\nc: middle\n")
    _write(tmp_path, "_other_yaml", "c: other\nd: other\n")
    task = _write(tmp_path, "task.yaml", "include: [_middle_yaml, _other_yaml]\nd: task\ne: task\n")
    # base < middle (includes base) < other (the later include) < the file itself.
    assert read_task_yaml(task) == {"a": "base", "b": "middle", "c": "other", "d": "task", "e": "task"}
    # A mapping is replaced whole, not merged (lmms-eval's rule).
    _write(tmp_path, "_kw_yaml", "dataset_kwargs: {config: x, seeds: [0, 1]}\n")
    assert read_task_yaml(_write(tmp_path, "kw.yaml", "include: _kw_yaml\ndataset_kwargs: {config: y}\n")) == {
        "dataset_kwargs": {"config": "y"}
    }


def test_nested_includes_are_relative_to_each_including_file(tmp_path: Path) -> None:
    _write(tmp_path, "shared/_root_yaml", "origin: root\nlevel: 0\n")
    _write(tmp_path, "shared/deeper/_leaf_yaml", "include: ../_root_yaml\nlevel: 1\n")
    task = _write(tmp_path, "cycles/task.yaml", "include: ../shared/deeper/_leaf_yaml\nmine: true\n")
    assert read_task_yaml(task) == {"origin": "root", "level": 1, "mine": True}


def test_a_task_built_from_a_template_equals_the_spelled_out_one(tmp_path: Path) -> None:
    _write(tmp_path, "cycles/_default_template_yaml", TEMPLATE)
    _write(tmp_path, "cycles/short.yaml", _task("short"))
    _write(tmp_path, "cycles/long.yaml", TEMPLATE + "task: cycles/long\ndataset_kwargs: {config: strict_size, seeds: [0]}\n")
    registry = TaskRegistry([tmp_path])
    short, long = registry.get("cycles/short"), registry.get("cycles/long")
    assert isinstance(short, TaskSpec) and short.path == tmp_path / "cycles" / "short.yaml"
    assert short == TaskSpec(**{**long.__dict__, "name": "cycles/short", "path": short.path})


def test_an_include_cycle_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    _write(tmp_path, "cycles/_a_yaml", "x: 1\ninclude: _b_yaml\n")
    _write(tmp_path, "cycles/_b_yaml", "include: _a_yaml\n")
    _write(tmp_path, "cycles/loop.yaml", _task("loop", "_a_yaml"))
    _write(tmp_path, "cycles/itself.yaml", _task("itself", "itself.yaml"))
    _write(tmp_path, "cycles/fine.yaml", TEMPLATE + "task: cycles/fine\ndataset_kwargs: {config: strict_size}\n")
    registry = TaskRegistry([tmp_path])
    assert registry.task_names(derived=False) == ["cycles/fine"]  # only the looping tasks are unavailable
    with pytest.raises(ValueError) as info:
        registry.get("cycles/loop")
    message = str(info.value)
    assert f"{tmp_path / 'cycles' / '_b_yaml'} line 1: field 'include'" in message
    assert "closes an include cycle (loop.yaml -> _a_yaml -> _b_yaml -> _a_yaml)" in message
    with pytest.raises(ValueError, match=r"itself\.yaml line 1: field 'include': including 'itself\.yaml' closes"):
        registry.get("cycles/itself")


def test_a_missing_included_file_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "cycles/lost.yaml", "# a comment\n" + _task("lost", "_nowhere_yaml"))
    with pytest.raises(ValueError) as info:
        TaskRegistry([tmp_path]).get("cycles/lost")
    message = str(info.value)
    assert f"{path} line 2: field 'include'" in message and str(tmp_path / "cycles" / "_nowhere_yaml") in message
    assert "does not exist" in message
    _write(tmp_path, "cycles/odd.yaml", "include: [_a_yaml, 3]\ntask: cycles/odd\n")
    with pytest.raises(ValueError, match=r"odd\.yaml line 1: field 'include': must be a file name, or a list of them"):
        TaskRegistry([tmp_path]).get("cycles/odd")


def test_templates_are_not_tasks(tmp_path: Path) -> None:
    _write(tmp_path, "cycles/_default_template_yaml", TEMPLATE)
    # A template is never a task, even one that would validate as a task (`_*.yaml`).
    _write(tmp_path, "cycles/_complete.yaml", TEMPLATE + "task: cycles/_complete\ndataset_kwargs: {config: strict_size}\n")
    _write(tmp_path, "cycles/real.yaml", _task("real"))
    registry = TaskRegistry([tmp_path])
    assert registry.task_names(derived=False) == ["cycles/real"] and registry.unavailable == {}
    assert is_template(Path("x/_coco_yaml")) and is_template(Path("_default_template_yaml"))
    assert not is_template(Path("cycles/coco_strict_size.yaml"))


def test_an_error_in_an_included_key_names_the_template_and_its_line(tmp_path: Path) -> None:
    template = _write(tmp_path, "cycles/_default_template_yaml", TEMPLATE.replace("1.0e-9", "-1"))
    path = _write(tmp_path, "cycles/t.yaml", _task("t"))
    with pytest.raises(ValueError) as info:
        TaskRegistry([tmp_path]).get("cycles/t")
    assert f"{path}: field 'tie_tolerance' (set in included {template} line 5): must be a finite" in str(info.value)
    # The same key set in the task file itself is reported at its own line.
    _write(tmp_path, "cycles/own.yaml", _task("own", extra="tie_tolerance: -2\n"))
    with pytest.raises(ValueError, match=r"own\.yaml line 4: field 'tie_tolerance': must be a finite"):
        TaskRegistry([tmp_path]).get("cycles/own")


def test_line_numbers_hold_with_either_yaml_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if getattr(yaml, "CSafeLoader", None) is not None:
        assert task_files._SafeLoader is yaml.CSafeLoader  # libyaml is used when PyYAML has it
    _write(tmp_path, "cycles/_default_template_yaml", TEMPLATE)
    _write(tmp_path, "cycles/typo.yaml", _task("typo", extra="test_split: dev\n"))
    _write(tmp_path, "cycles/broken.yaml", "task: cycles/broken\n  bad: [\n")
    for loader in (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        monkeypatch.setattr(task_files, "_SafeLoader", loader)
        registry = TaskRegistry([tmp_path])
        with pytest.raises(ValueError, match=r"typo\.yaml line 4: field 'test_split': 'dev' is not one of"):
            registry.get("cycles/typo")
        with pytest.raises(ValueError, match=r"broken\.yaml line \d+ column \d+: not valid YAML"):
            registry.get("cycles/broken")


def test_a_prompt_from_a_template_reaches_the_pair_scorer(tmp_path: Path) -> None:
    from clip_cycles.encoding.vlm_scores import PromptConfig, prompt_config_for_task

    _write(
        tmp_path,
        "cycles/_default_template_yaml",
        TEMPLATE + 'lmms_eval_specific_kwargs: {default: {prompt: "USER: {image} says", score: mean}}\n',
    )
    _write(tmp_path, "cycles/p.yaml", _task("p"))
    task = TaskRegistry([tmp_path]).get("cycles/p")
    assert prompt_config_for_task(task) == PromptConfig("USER: {image} says", "mean")


# --- the shipped task files ----------------------------------------------------------------------------------


def _shipped_task_files() -> list[Path]:
    return [p for p in sorted(shipped_tasks_dir().rglob("*.yaml")) if not is_template(p)]


def test_each_shipped_task_file_holds_only_what_differs() -> None:
    checked = 0
    for path in _shipped_task_files():
        own = yaml.safe_load(path.read_text(encoding="utf-8"))
        if "group" in own:
            continue
        assert "include" in own, f"{path} repeats its template's keys instead of including it"
        inherited = read_task_yaml(path.parent / own["include"])
        repeated = sorted(k for k, v in own.items() if k != "include" and inherited.get(k) == v)
        assert repeated == [], f"{path} sets {repeated} to the value its template already gives"
        checked += 1
    assert checked == 46  # every shipped single task file (the 5 collections list tasks; shapes twins have no file)


# That every task file and template ships in the sdist and the wheel: tests/project/test_packaging.py.
