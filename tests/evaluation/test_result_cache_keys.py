"""The result cache's key, field by field: every input and option (mapping entries included) and the code that
computes a cached result enter it; changing any one of them is another key."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.evaluation import result_cache
from clip_cycles.evaluation.result_cache import content_key, result_description
from clip_cycles.experiments.probes import ProbeSettings
from clip_cycles.tasks.registry import AttributeTaskSpec, MetricSpec

leaves = st.one_of(st.integers(-5, 5), st.floats(-2, 2, allow_nan=False), st.text(max_size=3), st.booleans(), st.none())
options = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=10,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every leaf's path in a nested value (dict keys and list positions)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _paths(v, (*prefix, k))] or [prefix]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _paths(v, (*prefix, i))] or [prefix]
    return [prefix]


def _replaced(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (_replaced(v, rest, new) if k == head else v) for k, v in value.items()}
    return [(_replaced(v, rest, new) if i == head else v) for i, v in enumerate(value)]


def _other(value: Any) -> Any:
    """A value unequal to ``value`` (another type where the type alone would tell them apart)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return 0
    return [value]  # an empty container gains an item


@settings(max_examples=80, deadline=None)
@given(options, st.data())
def test_changing_any_leaf_of_nested_options_changes_the_key(value: Any, data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(_paths(value)))
    leaf = value
    for step in path:
        leaf = leaf[step]
    changed = _replaced(value, path, _other(leaf))
    assert content_key(changed) != content_key(value)
    assert result_description("e", 1, changed)["options"] != result_description("e", 1, value)["options"]
    assert result_description("e", changed, 1)["inputs"] != result_description("e", value, 1)["inputs"]


def test_a_mapping_key_its_value_and_an_added_entry_each_change_the_key() -> None:
    base = {"n_clusters": 5, "protocol": "project"}
    keys = {content_key(base), content_key({"n_clusters": 6, "protocol": "project"}),
            content_key({"n_clusters": 5, "protocol": "paper2"}), content_key({"n_cluster": 5, "protocol": "project"}),
            content_key({**base, "solver": "lbfgs"}), content_key({"n_clusters": 5})}  # fmt: skip
    assert len(keys) == 6
    assert content_key({"a": {"b": 1}}) != content_key({"a": {"b": 2}}) != content_key({"a": {"c": 1}})


def _changed_field(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, Path):
        return value / "x"
    if isinstance(value, tuple):
        return (*value, value[0]) if value else ("x",)
    if isinstance(value, dict):
        return {**value, "extra": 1}
    if value is None:
        return "x"
    raise AssertionError(f"no change for {value!r}")


def _attribute_task() -> AttributeTaskSpec:
    return AttributeTaskSpec(
        name="attributes/t",
        strategy="clustering",
        seeds=(0, 1),
        metrics=(MetricSpec("f1_selectivity"),),
        path=Path("tasks/t.yaml"),
        k=5,
        groups="groups.json",
        split_params={"n_clusters": 5, "scale": 0.5},
        experiment_kwargs={"protocol": "project", "leakage_threshold": 0.9},
        protocol="project",
        tags=("a",),
    )


def test_every_field_of_an_attribute_task_and_each_of_its_mapping_options_changes_the_key() -> None:
    task = _attribute_task()
    base = content_key((task, [0, 1]))
    for f in dataclasses.fields(task):
        changed = dataclasses.replace(task, **{f.name: _changed_field(getattr(task, f.name))})
        assert content_key((changed, [0, 1])) != base, f.name
    for name in ("split_params", "experiment_kwargs"):
        mapping = dict(getattr(task, name))
        for entry in mapping:
            changed = dataclasses.replace(task, **{name: {**mapping, entry: _changed_field(mapping[entry])}})
            assert content_key((changed, [0, 1])) != base, (name, entry)
    assert content_key((task, [0, 2])) != base  # the seeds (the attribute runner's options)


def test_every_field_of_the_probe_settings_changes_the_key() -> None:
    settings_ = ProbeSettings()
    base = content_key(settings_)
    for name in type(settings_).model_fields:
        value = getattr(settings_, name)
        new = _changed_field(value) if value is not None else 2
        assert content_key(settings_.model_copy(update={name: new})) != base, name


def test_the_code_that_computes_every_cached_result_is_in_the_code_version() -> None:
    from clip_cycles.attributes.attribute_probes import attribute_task_metrics
    from clip_cycles.evaluation import demo
    from clip_cycles.evaluation.attribute_runner import attribute_metrics
    from clip_cycles.experiments.oe import run_oe
    from clip_cycles.experiments.probes import run_probes
    from clip_cycles.experiments.synthetic import run_synthetic
    from clip_cycles.experiments.transfer import run_transfer

    sources = {p.resolve() for p in result_cache.code_paths()}
    for compute in (attribute_metrics, attribute_task_metrics, run_oe, run_probes, run_synthetic, run_transfer):
        assert Path(inspect.getsourcefile(compute)).resolve() in sources, compute.__name__  # type: ignore[arg-type]
    assert Path(demo.__file__).resolve() in sources  # its attribute-split scoring closure is a cached computation


@pytest.mark.parametrize("source", ["attributes/paper2_protocol.py", "attributes/splitters.py", "evaluation/attribute_runner.py",
                                    "algebra/paired.py", "experiments/probes.py", "heads/training.py", "results.py"])  # fmt: skip
def test_an_edit_to_any_computing_source_is_another_code_version(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "clip_cycles"
    for path in result_cache.code_paths():
        target = package / path.relative_to(result_cache._PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    monkeypatch.setattr(result_cache, "_PACKAGE", package)
    result_cache.code_version.cache_clear()
    try:
        before = result_cache.code_version()
        with (package / source).open("a") as handle:
            handle.write("# an edit\n")
        result_cache.code_version.cache_clear()
        assert result_cache.code_version() != before
    finally:
        result_cache.code_version.cache_clear()


@dataclasses.dataclass
class _A:
    x: int = 1


@dataclasses.dataclass
class _B:
    x: int = 1


class _Colour(enum.Enum):
    RED = 1


class _Shade(enum.Enum):
    RED = 1


def test_the_type_of_a_structured_value_is_in_its_key() -> None:
    assert content_key(_A()) != content_key(_B())  # same fields, another class
    assert content_key(_Colour.RED) != content_key(_Shade.RED)
    assert content_key(ProbeSettings()) != content_key(ProbeSettings(epochs=31))
    objects = np.array([{"a": 1}, None], dtype=object)
    assert content_key(objects) == content_key(np.array([{"a": 1}, None], dtype=object))
    assert content_key(objects) != content_key(np.array([{"a": 2}, None], dtype=object))


def test_hits_misses_and_refusals_are_counted_logged_and_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = result_cache.ResultCache(tmp_path)
    with caplog.at_level(logging.INFO, logger="clip_cycles.evaluation.result_cache"):
        cold, reused = cache.get_or_compute("probe", 1, 2, lambda: {"name": "caf\u00e9", "x": 0.5})
        warm, again = cache.get_or_compute("probe", 1, 2, lambda: pytest.fail("a hit computes nothing"))
    assert (cold, reused, again) == ({"name": "caf\u00e9", "x": 0.5}, False, True) and warm == cold  # non-ASCII text too
    assert cache.stats.computed == ["probe"] and cache.stats.reused == ["probe"] and cache.stats.refused == []
    path = cache.path(result_description("probe", 1, 2))
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [f"result cache: computed probe result {path.name}", f"result cache: reused probe result {path.name}"]
    assert "caf\u00e9" in path.read_text(encoding="utf-8")  # stored as text, not escaped
    # A foreign key, then an edited result: each refused with its reason, deleted, recomputed.
    entry = json.loads(path.read_text(encoding="utf-8"))
    edits = [
        (lambda e: e["key"].update(code="other"), "its key does not match"),
        (lambda e: e.update(result={"x": 1.0}), "checksum mismatch (the result changed after it was written)"),
    ]
    for edit, reason in edits:
        broken = json.loads(json.dumps(entry))
        edit(broken)
        path.write_text(json.dumps(broken), encoding="utf-8")
        caplog.clear()
        with pytest.warns(UserWarning, match=re.escape(f"result cache: entry {path} refused ({reason}); probe is recomputed")):
            with caplog.at_level(logging.WARNING, logger="clip_cycles.evaluation.result_cache"):
                value, reused = cache.get_or_compute("probe", 1, 2, lambda: {"x": 0.25})
        assert (value, reused) == ({"x": 0.25}, False)
        assert f"result cache: entry {path} refused ({reason}); probe is recomputed" in caplog.text
        assert cache.stats.refused[-1] == str(path)
        entry = json.loads(path.read_text(encoding="utf-8"))  # the recomputed entry replaced the refused one
    # A dangling symlink is an entry too: refused and removed, never followed.
    path.unlink()
    path.symlink_to(tmp_path / "nowhere.json")
    with pytest.warns(UserWarning, match="refused"):
        assert cache.get_or_compute("probe", 1, 2, lambda: {"x": 2.0}) == ({"x": 2.0}, False)
    assert not path.is_symlink()


def test_an_unwritable_cache_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "results").write_text("a file where the cache folder should be")
    with pytest.raises(OSError) as caught:
        result_cache.ResultCache(tmp_path).get_or_compute("probe", 1, 2, lambda: {"x": 1})
    assert str(tmp_path / "results") in str(caught.value)
    assert str(caught.value).endswith("; point CLIP_CYCLES_CACHE or --cache-dir at a writable folder, or pass --no-cache")


class _OptionsA(pydantic.BaseModel):
    x: int = 1


class _OptionsB(pydantic.BaseModel):
    x: int = 1


def test_options_models_of_two_classes_differ_and_entries_live_where_declared(tmp_path: Path, caplog) -> None:
    assert content_key(_OptionsA()) != content_key(_OptionsB())
    cache = result_cache.ResultCache(tmp_path)
    description = result_description("transfer", [1], {"a": 1})
    path = cache.path(description)
    assert path.parent == tmp_path / "results" / "transfer"
    assert re.fullmatch(r"[0-9a-f]{32}\.json", path.name)
    assert cache.path(result_description("transfer", [2], {"a": 1})) != path
    cache.get_or_compute("transfer", [1], {"a": 1}, lambda: {"x": 1})
    assert path.is_file()


def test_an_entry_over_the_size_bound_is_refused(tmp_path: Path, monkeypatch, caplog) -> None:
    cache = result_cache.ResultCache(tmp_path)
    cache.get_or_compute("probe", 1, 2, lambda: {"x": "y" * 200})
    monkeypatch.setattr(result_cache, "MAX_RESULT_BYTES", 100)
    with caplog.at_level(logging.WARNING, logger="clip_cycles.evaluation.result_cache"):
        with pytest.warns(UserWarning, match="cached experiment result"):
            assert cache.get_or_compute("probe", 1, 2, lambda: {"x": 1}) == ({"x": 1}, False)
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert record.getMessage().startswith("result cache: entry ") and record.getMessage().endswith("; probe is recomputed")
