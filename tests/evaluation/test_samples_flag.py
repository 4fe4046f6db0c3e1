"""Per-sample outputs: refused before any work where they cannot be honoured, one file per clip_benchmark dataset."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.encoding.run_context import RunContext
from clip_cycles.evaluation.runners import run_tasks
from clip_cycles.evaluation.samples import check_samples_path
from clip_cycles.evaluation.zero_shot import evaluate_tasks
from clip_cycles.tasks.registry import expand_tasks


def _context(tmp_path: Path, samples: Path) -> RunContext:
    # A model that cannot load: any attempt to encode would fail with another message.
    return RunContext(spec=ModelSpec("open_clip", "no-such-model", None), cache_dir=tmp_path, samples_path=samples)


def test_samples_are_refused_for_tasks_without_per_cycle_scores(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"zero-shot cycle tasks \(output_type cycle_selection\) only.*cycles_probe/shapes_strict_size"
    ):
        run_tasks(["cycles/shapes_strict_size", "cycles_probe/shapes_strict_size"], _context(tmp_path, tmp_path / "s.jsonl"))
    assert not (tmp_path / "s.jsonl").exists()


def test_a_samples_path_that_is_a_folder_is_refused_before_encoding(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a folder; name a file"):
        evaluate_tasks(
            expand_tasks(["cycles/shapes_strict_size"]),
            ModelSpec("open_clip", "x", None),
            None,
            None,
            tmp_path,
            samples_path=tmp_path,
        )
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is not a folder"):
        check_samples_path(tmp_path / "file" / "s.jsonl")
    assert check_samples_path(tmp_path / "new" / "s.jsonl") == tmp_path / "new" / "s.jsonl"


def test_plugin_samples_template_gives_each_dataset_its_own_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from clip_cycles.integrations import clip_benchmark as plugin

    monkeypatch.setattr(plugin, "_SAMPLES_WRITTEN", {})
    args = SimpleNamespace(dataset="cycles/shapes_strict_size", model="m", pretrained="p", language="en")
    monkeypatch.delenv("CLIP_CYCLES_SAMPLES", raising=False)
    assert plugin.samples_path_for(args, "cycles") is None
    monkeypatch.setenv("CLIP_CYCLES_SAMPLES", str(tmp_path / "{dataset}_{model}_{task}.jsonl"))
    assert plugin.samples_path_for(args, "cycles") == tmp_path / "cycles_shapes_strict_size_m_cycles.jsonl"
    monkeypatch.setenv("CLIP_CYCLES_SAMPLES", str(tmp_path / "all.jsonl"))
    assert plugin.samples_path_for(args, "cycles") == tmp_path / "all.jsonl"
    assert plugin.samples_path_for(args, "cycles") == tmp_path / "all.jsonl"  # the same dataset again: fine
    other = SimpleNamespace(**{**vars(args), "dataset": "cycles/shapes_strict_left_right"})
    with pytest.raises(ValueError, match=r"names the same file .* put \{dataset\} in it"):
        plugin.samples_path_for(other, "cycles")
