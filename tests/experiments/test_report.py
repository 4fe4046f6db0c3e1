"""Report: every section and figure written, unavailable families marked, byte-stable, mixed models refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clip_cycles.experiments.experiment_data import planted_experiment_data
from clip_cycles.experiments.oe import OESettings, run_oe
from clip_cycles.experiments.probes import ProbeSettings, run_probes
from clip_cycles.experiments.report import MixedModelsError, build_report, load_results
from clip_cycles.results import write_json

STEMS = ("strict_relation_bars", "rank_sweep", "transfer_heatmap", "alignment_vs_transfer", "oe_comparison")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from clip_cycles.experiments.transfer import TransferSettings, run_transfer

    data = planted_experiment_data(
        {"strict_left_right": 0, "strict_size": 1, "strict_same_pair": 2, "coarse": 0},
        dim=8,
        n_train=40,
        n_validation=20,
        n_test=30,
        seeds=(0, 1),
        pool_size=200,
        marker_strength=1.0,
        cycle_counts={"strict_same_pair": (40, 20, 4)},
    )
    out = tmp_path_factory.mktemp("results")
    common = {"epochs": 1, "seeds": (0, 1), "batch_size": 64}
    write_json(run_probes(data, ProbeSettings(ranks=(1, 2), audit_epochs=1, **common)), out / "probe.json")
    write_json(run_transfer(data, TransferSettings(rank=2, **common)), out / "transfer.json")
    write_json(run_oe(data, OESettings(rank=2, text_only_epochs=1, **common)), out / "oe.json")
    return out


def test_report_writes_every_section_and_figure_and_marks_missing_families(results: Path, tmp_path: Path) -> None:
    work = tmp_path / "r"
    shutil.copytree(results, work)
    paths = build_report(work)
    assert sorted(p.name for p in paths.figures) == sorted(f"{s}.{ext}" for s in STEMS for ext in ("png", "svg"))
    for path in paths.figures:
        assert path.stat().st_size > 0
    text = paths.markdown.read_text()
    for title in ("## Probes and rank sweeps", "## Family-to-family transfer and alignment", "## Cycle OE vs Shortcut OE"):
        assert title in text
    reason = "seed 0 split 'test' has 4 cycles (minimum 20)"
    assert f"- strict_same_pair: {reason}" in text
    assert f"| strict_same_pair | unavailable: {reason} |" in text  # probe table row kept
    assert "| strict_same_pair | n/a | n/a | n/a | n/a |" in text  # transfer matrix row kept
    # The unavailable strict family keeps its place in the strict-relation bars and the heatmap.
    for stem in ("strict_relation_bars", "transfer_heatmap"):
        assert "strict_same_pair" in (work / f"{stem}.svg").read_text()
    assert "n/a" in (work / "transfer_heatmap.svg").read_text()
    assert "- model: `planted`" in text and "- tie tolerance: 1e-09" in text


def test_report_is_byte_identical_when_rebuilt(results: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    shutil.copytree(results, first)
    shutil.copytree(results, second)
    build_report(first)
    build_report(second)
    for path in sorted(first.iterdir()):
        assert path.read_bytes() == (second / path.name).read_bytes(), path.name


def test_kept_figures_are_copied_not_drawn_and_give_the_same_bytes(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clip_cycles.experiments import report
    from clip_cycles.outputs import drawn_files_cache

    plain, first, second = tmp_path / "plain", tmp_path / "a", tmp_path / "b"
    for folder in (plain, first, second):
        shutil.copytree(results, folder)
    build_report(plain)  # no cache: drawn as always
    with drawn_files_cache(tmp_path / "kept"):
        build_report(first)  # drawn, and kept
        monkeypatch.setattr(report, "_pyplot", lambda: pytest.fail("a kept figure was drawn again"))
        paths = build_report(second)
    assert sorted(p.name for p in paths.figures) == sorted(f"{s}.{ext}" for s in STEMS for ext in ("png", "svg"))
    for folder in (first, second):
        assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in plain.iterdir())
        for path in sorted(plain.iterdir()):
            assert path.read_bytes() == (folder / path.name).read_bytes(), path.name
    # Another record is another key: a changed number is drawn, never served from the kept figure.
    probe = json.loads((second / "probe.json").read_text())
    probe["seeds"] = [*probe["seeds"], 99]
    (second / "probe.json").write_text(json.dumps(probe))
    with drawn_files_cache(tmp_path / "kept"), pytest.raises(pytest.fail.Exception, match="drawn again"):
        build_report(second)


def test_results_from_another_model_are_refused_by_name(results: Path, tmp_path: Path) -> None:
    from clip_cycles.cli import main

    work = tmp_path / "mixed"
    shutil.copytree(results, work)
    record = json.loads((work / "transfer.json").read_text())
    record["model"] = "ViT-B-32"
    (work / "transfer.json").write_text(json.dumps(record))
    with pytest.raises(MixedModelsError, match=r"mixes models .*transfer\.json: model 'ViT-B-32'"):
        load_results(work)
    assert main(["report", str(work)]) == 2
    assert not (work / "report.md").exists()


def test_empty_missing_or_malformed_results_directories(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        build_report(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="holds no experiment results"):
        build_report(tmp_path)
    (tmp_path / "probe.json").write_text(json.dumps({"experiment": "probe", "model": "m", "pretrained": "p"}))
    with pytest.raises(ValueError, match=r"probe\.json: field 'tie_tolerance' is missing"):
        build_report(tmp_path)


def test_report_reads_a_clip_benchmark_output_folder(shapes_cycles: Path, tmp_path: Path) -> None:
    from tiny_models import TINY_OPEN_CLIP

    from clip_cycles.encoding.encoder import ModelSpec
    from clip_cycles.evaluation.zero_shot import evaluate
    from clip_cycles.results import benchmark_record, detail_path, output_path, write_result

    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "open_clip_config.json").write_text(json.dumps(TINY_OPEN_CLIP))
    spec = ModelSpec("open_clip", f"local-dir:{tmp_path / 'tiny'}", "none")
    tasks = ["cycles/shapes_strict_left_right", "cycles/shapes_strict_size"]
    records, _ = evaluate(tasks, spec, shapes_cycles, tmp_path / "cache", num_workers=0, seeds=[0, 1])
    out = tmp_path / "bench"
    for record in records:
        write_result(
            record, out / output_path("{dataset}_{pretrained}_{language}_{task}.json", record["dataset"], spec.model, "none")
        )
    # A result from clip_benchmark itself (its flat metrics), and an unavailable family.
    own = benchmark_record(
        "cycles/shapes_strict_left_right", spec.model, "none", {"acc": 0.25, "text_acc": 0.5}, task="image_caption_selection"
    )
    write_result(own, out / "own_image_caption_selection.json")
    gone = benchmark_record(
        "cycles/shapes_box_size", spec.model, "none", {"available": False, "unavailable_reason": "too few cycles"}
    )
    write_result(gone, out / "gone.json")
    # One file left without its detail (as another tool would copy it): read flat.
    flat_one = out / "cycles_shapes_strict_size_none_en_cycles.json"
    detail_path(flat_one).unlink()

    text = build_report(out).markdown.read_text()
    assert "## Zero-shot CycleAcc" in text and "## Other clip_benchmark results" in text
    for record in records:
        m = record["metrics"]
        name = record["dataset"].removeprefix("cycles/")
        row = next(line for line in text.splitlines() if line.startswith(f"| {name} |"))
        ci = m["cycle_acc_ci"]
        assert f"| {m['cycle_acc']:.4f} ± {m['cycle_acc_sd']:.4f} | [{ci['low']:.4f}, {ci['high']:.4f}] |" in row
        assert f"| {m['n_cycles']} | passed (0.5) |" in row
    assert "| shapes_box_size | unavailable: too few cycles |" in text
    assert (
        "| `own_image_caption_selection.json` | cycles/shapes_strict_left_right | image_caption_selection "
        "| acc 0.25, text_acc 0.5 |" in text
    )
    assert (out / "zero_shot.png").is_file()
    # A second model in the same folder is refused by name.
    write_result({**own, "model": "other"}, out / "other.json")
    with pytest.raises(MixedModelsError, match="other.json: model 'other'"):
        build_report(out)
