"""``clip-cycles page`` without a browser: what it reads, what it refuses, its budget and its determinism."""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clip_cycles.cli import main
from clip_cycles.evaluation.page import build_page, build_site, write_site
from clip_cycles.evaluation.page_data import collect
from clip_cycles.evaluation.page_examples import ExampleImage, bootstrap_interval, pick_examples, thumbnail
from clip_cycles.experiments.item_sets import family_facts
from clip_cycles.results import benchmark_record, write_json
from clip_cycles.tasks.registry import expand_tasks


def benchmark_record_of(dataset: str, model: str, pretrained: str, metrics: dict) -> dict:
    """A result record as eval writes it: a cycles/ task's record carries its family's facts (``family``)."""
    record = benchmark_record(dataset, model, pretrained, metrics)
    if dataset.startswith("cycles/") and "/.." not in dataset:
        facts = family_facts(expand_tasks([dataset])[0])
        if facts is not None:
            record["family"] = facts
    return record


def _cycle_metrics(cycle_acc: float, acc: float, passed: bool | None = True, **extra: object) -> dict:
    """Metrics in the shape zero_shot.score_task writes (plus ``acc`` differing from CycleAcc, as in a flat record)."""
    audit = (
        {"passed": passed, "per_seed": {}}
        if passed is not None
        else {"passed": None, "available": False, "unavailable_reason": "x"}
    )
    return {
        "cycle_acc": cycle_acc,
        "cycle_acc_sd": 0.01,
        "acc": acc,
        "group_acc": acc,
        "n_cycles": 40,
        "seeds": [0, 1],
        "tie_tolerance": 1e-9,
        "per_seed": {},
        "additive_audit": audit,
        **extra,
    }


def _audit_metrics() -> dict:
    sub = {
        "model_acc": 0.6,
        "best_blind": "shortest_caption",
        "best_blind_acc": 0.7,
        "n_comparisons": 8,
        "cycles": {"n_cycles": 0},
    }
    sub2 = {
        "model_acc": 0.9,
        "best_blind": "caption_probe",
        "best_blind_acc": 0.5,
        "n_comparisons": 4,
        "cycles": {"n_cycles": 2, "cycle_acc": 0.75},
    }
    return {
        "model_acc": 0.7,
        "best_blind": "shortest_caption",
        "best_blind_acc": 0.66,
        "cycle_acc": 0.75,
        "n_cycles": 2,
        "n_comparisons": 12,
        "subsets": {"add_obj": sub, "swap_att": sub2},
    }


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    """A clip_benchmark output folder of two models, an audit-benchmark folder and some files that are not results."""
    out = tmp_path / "in"
    ci = {"low": 0.7, "high": 0.9, "level": 0.95, "n_resamples": 1000, "seed": 0, "method": "percentile", "unit": "cycle"}
    write_json(
        benchmark_record_of("cycles/shapes_strict_size", "m", "a", _cycle_metrics(0.8, 0.3, cycle_acc_ci=ci)), out / "r1.json"
    )
    write_json(
        benchmark_record_of("cycles/shapes_strict_size", "m", "b", _cycle_metrics(0.45, 0.2, passed=False)), out / "r2.json"
    )
    write_json(
        benchmark_record_of("cycles/shapes_coarse_object", "m", "", _cycle_metrics(0.6, 0.1, passed=None)), out / "r3.json"
    )
    write_json(benchmark_record("audit/sugarcrepe", "m", "a", _audit_metrics()), out / "audits" / "audit_sugarcrepe.json")
    write_json(benchmark_record("cifar10", "m", "a", {"acc1": 0.9}), out / "other_task.json")
    write_json({"hello": 1}, out / "notes.json")
    (out / "broken.json").write_text("{not json")
    return out


def test_collect_reads_every_kind_and_names_what_it_skips(results: Path) -> None:
    data = collect([results])
    assert data.models == ["m (a)", "m (b)", "m (random init)"]
    cell = data.cells["shapes_strict_size", "m (a)"]
    assert cell.cycle_acc == 0.8  # CycleAcc by name, not metrics["acc"] (0.3)
    assert cell.ci is not None and (cell.ci["low"], cell.ci["high"]) == (0.7, 0.9)
    assert cell.audit == "passed"
    assert data.cells["shapes_strict_size", "m (b)"].audit == "failed"
    assert data.cells["shapes_coarse_object", "m (random init)"].audit == "unavailable"
    assert data.cells["shapes_coarse_object", "m (random init)"].ci is None
    assert data.family_rows() == ["shapes_coarse_object", "shapes_strict_size"]  # coarse -> strict, not by name
    assert data.families["shapes_strict_size"].paper and data.families["shapes_strict_size"].family == "strict_size"
    rows = {(r.benchmark, r.subset): r for r in data.benchmarks}
    assert set(rows) == {("sugarcrepe", "add_obj"), ("sugarcrepe", "swap_att"), ("sugarcrepe", "all")}
    assert rows["sugarcrepe", "add_obj"].blind_beats_model and not rows["sugarcrepe", "swap_att"].blind_beats_model
    assert data.cells["audit/sugarcrepe", "m (a)"].cycle_acc == 0.75
    skipped = {Path(p).name: why for p, why in data.skipped.items()}
    assert set(skipped) == {"other_task.json", "notes.json", "broken.json"}
    assert "cifar10" in skipped["other_task.json"] and "not valid JSON" in skipped["broken.json"]


def test_a_second_record_of_the_same_cell_is_skipped_and_named(results: Path) -> None:
    again = json.loads((results / "r1.json").read_text())
    again["metrics"]["cycle_acc"] = 0.1
    write_json(again, results / "z_again.json")
    data = collect([results])
    assert data.cells["shapes_strict_size", "m (a)"].cycle_acc == 0.8
    assert "already read from" in data.skipped[str(results / "z_again.json")]


def test_symbolic_links_are_not_followed(results: Path, tmp_path: Path) -> None:
    (results / "link.json").symlink_to(results / "r1.json")
    data = collect([results])
    assert "not a regular file" in data.skipped[str(results / "link.json")]


def test_page_shows_the_recorded_interval_and_says_when_there_is_none(results: Path, tmp_path: Path) -> None:
    index = build_page([results], tmp_path / "site")
    html = index.read_text()
    strict = re.search(r'<tr data-row="shapes_strict_size">.*?</tr>', html, re.S).group(0)
    assert 'data-ci-low="0.7" data-ci-high="0.9"' in strict and "[0.700, 0.900]" in strict
    coarse = re.search(r'<tr data-row="shapes_coarse_object">.*?</tr>', html, re.S).group(0)
    assert "no interval" in coarse
    assert "\u25b2" in strict and "\u25b3" in coarse  # interval above chance; a point above chance without one
    assert "from the record (cycle_acc_ci)" in strict
    assert 'class="blind-wins"' in html  # the subset where the blind baseline beats the model
    assert "\u2605" in strict  # strict_size is one of paper 1's families
    for name in ("notes.json", "broken.json", "other_task.json"):
        assert name in html  # skipped inputs are listed on the page
    family = (tmp_path / "site" / "families" / "shapes_strict_size.html").read_text()
    assert "larger than" in family  # the predicate in words
    assert "no example cycles: the result names no samples file" in family  # said, not guessed from a *.jsonl nearby


def test_same_inputs_give_the_same_bytes(results: Path, tmp_path: Path) -> None:
    build_page([results], tmp_path / "a")
    build_page([results], tmp_path / "b")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    for path in files:
        assert (tmp_path / "a" / path).read_bytes() == (tmp_path / "b" / path).read_bytes(), path


def test_the_byte_budget_is_enforced_before_anything_is_written(results: Path, tmp_path: Path) -> None:
    site = build_site(collect([results]))
    with pytest.raises(ValueError, match=r"over the budget of \d+ \(--max-bytes\); show fewer example cycles \(--examples\)"):
        write_site(site, tmp_path / "small", max_bytes=site.size - 1)
    assert not (tmp_path / "small").exists()
    assert write_site(site, tmp_path / "fits", max_bytes=site.size).is_file()


def test_out_holding_other_files_is_refused_and_an_older_page_is_replaced(results: Path, tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("keep me")
    with pytest.raises(ValueError, match="holds files that no page wrote"):
        build_page([results], foreign)
    assert (foreign / "thesis.tex").read_text() == "keep me"
    site = tmp_path / "site"
    build_page([results], site)
    assert (site / "families" / "shapes_coarse_object.html").is_file()
    (results / "r3.json").unlink()
    build_page([results], site)
    assert not (site / "families" / "shapes_coarse_object.html").exists()  # stale page of the older build removed


def test_page_command_errors_name_the_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["page", str(tmp_path / "missing"), "--out", str(tmp_path / "site")]) == 2
    assert "missing does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["page", str(tmp_path / "empty"), "--out", str(tmp_path / "site")]) == 2
    assert "no results found" in capsys.readouterr().err


def test_bootstrap_interval_against_the_normal_approximation() -> None:
    rng = np.random.default_rng(5)
    credits = [(rng.random(400) < 0.7).astype(np.float64), (rng.random(300) < 0.6).astype(np.float64)]
    ci = bootstrap_interval(credits, resamples=4000, seed=1)
    mean = np.mean([c.mean() for c in credits])
    # Independent: the sd of a mean of two independent proportions, halved for the average.
    se = 0.5 * np.sqrt(sum(c.mean() * (1 - c.mean()) / c.shape[0] for c in credits))
    assert ci["low"] < mean < ci["high"]
    assert (ci["high"] - ci["low"]) == pytest.approx(2 * 1.96 * se, rel=0.1)
    assert ci == bootstrap_interval(credits, resamples=4000, seed=1)
    constant = bootstrap_interval([np.full(50, 0.5)], seed=0)
    assert (constant["low"], constant["high"]) == (0.5, 0.5)


def test_pick_examples_takes_the_extremes_and_a_seeded_sample() -> None:
    deltas = np.array([0.3, -1.0, 2.0, 0.0, -0.5, 1.5, 0.7, 0.1, -0.2, 0.9])
    picked = pick_examples(deltas, 2, seed=3)
    kinds = {k: [i for kk, i in picked if kk == k] for k in ("hardest", "easiest", "random")}
    assert kinds["hardest"] == [1, 4] and kinds["easiest"] == [2, 5]
    assert len(kinds["random"]) == 2 and not set(kinds["random"]) & {1, 4, 2, 5}
    assert picked == pick_examples(deltas, 2, seed=3)


def test_thumbnails_are_small_jpegs_and_bad_images_are_named(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (300, 150), (200, 10, 10)).save(buffer, format="PNG")
    for name in ("red.png", "other-name.png"):
        (tmp_path / name).write_bytes(buffer.getvalue())
    (tmp_path / "broken.png").write_bytes(b"not an image")
    name, content = thumbnail(ExampleImage("red.png", tmp_path / "red.png"))
    with Image.open(io.BytesIO(content)) as small:
        assert small.format == "JPEG" and max(small.size) == 96
    assert name == thumbnail(ExampleImage("other-name.png", tmp_path / "other-name.png"))[0]  # by content: made once
    with pytest.raises(ValueError, match="'broken.png' cannot be decoded"):
        thumbnail(ExampleImage("broken.png", tmp_path / "broken.png"))
    # A file the samples name that is not reachable here gives no thumbnail (the page says so), never an error.
    assert thumbnail(ExampleImage("gone.png", tmp_path / "gone.png")) is None
    assert thumbnail(ExampleImage("no-root.png", None)) is None


def test_names_that_are_paths_never_become_files_outside_the_site(results: Path, tmp_path: Path) -> None:
    write_json(benchmark_record("cycles/../../escape", "m", "a", _cycle_metrics(0.9, 0.1)), results / "evil.json")
    write_json(benchmark_record("audit/../up", "m", "a", _audit_metrics()), results / "evil_audit.json")
    data = collect([results])
    assert "not a plain name" in data.skipped[str(results / "evil.json")]
    assert "not a plain name" in data.skipped[str(results / "evil_audit.json")]
    assert all("escape" not in row and "up" != row for row, _ in data.cells)
    build_page([results], tmp_path / "deep" / "site")
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["site"]
    site = build_site(collect([results]))
    site.add("../outside.html", "<p>x</p>")
    with pytest.raises(ValueError, match="would land outside --out"):
        write_site(site, tmp_path / "other")
    assert not (tmp_path / "outside.html").exists() and not (tmp_path / "other").exists()


EVIL = "<script>alert(1)</script>"


def test_every_field_from_a_file_is_escaped_and_no_page_shows_a_machine_path(tmp_path: Path) -> None:
    """Captions, model, tag, family-adjacent texts, benchmark, subset, strategy names and folder names all carry markup."""
    results = tmp_path / 'in<img src=x onerror="alert(3)">'
    for n, model in enumerate((f"m{EVIL}", "<b>other</b>")):
        folder = results / f"model{n}"
        metrics = _cycle_metrics(0.8 - 0.1 * n, 0.3, cycle_acc_ci={"low": 0.6, "high": 0.9})
        write_json(benchmark_record_of("cycles/shapes_strict_size", model, f"<i>tag{n}</i>", metrics), folder / "r.json")
        unavailable = {"available": False, "unavailable_reason": f"reason {EVIL}"}
        write_json(benchmark_record_of("cycles/shapes_coarse_object", model, f"<i>tag{n}</i>", unavailable), folder / "u.json")
        lines = [
            {
                "task": "cycles/shapes_strict_size",
                "seed": 0,
                "split": "test",
                "cycle_id": f"c{c}<u>",
                "image_0": f"i{c}.png",
                "image_1": f"i{c + 1}.png",
                "caption_0": f"caption <img src=y onerror=alert({c})>",
                "caption_1": "b",
                **{"s11": 0.3, "s12": 0.1, "s21": 0.1, "s22": 0.0},
                "delta": 0.1,
                "credit": float((c + n) % 2),
            }
            for c in range(8)
        ]
        content = "".join(json.dumps(line) + "\n" for line in lines).encode()
        (folder / "samples.jsonl").write_bytes(content)
        record = json.loads((folder / "r.json").read_text())
        record["samples"] = {"path": "samples.jsonl", "sha256": hashlib.sha256(content).hexdigest()}
        write_json(record, folder / "r.json")
    audit = _audit_metrics()
    audit["subsets"] = {"sub<svg onload=alert(4)>": audit["subsets"]["add_obj"]}
    audit["best_blind"] = f"blind{EVIL}"
    write_json(benchmark_record("audit/<em>bench</em>", "m", "a", audit), results / "audit.json")
    write_json(
        {
            "experiment": "attributes",
            "model": f"a{EVIL}",
            "pretrained": "",
            "seeds": [0],
            "strategies": {"s<svg onload=alert(5)>": {"f1_selectivity": 0.5, "cs": 0.1}, "random": {"f1_selectivity": 0.2}},
        },
        results / "attr.json",
    )
    (results / f"bad{EVIL.replace('/', '')}.json").write_text("{not json")
    site = tmp_path / "site"
    build_page([results], site)
    pages = {p.relative_to(site).as_posix(): p.read_text() for p in site.rglob("*.html")}
    assert len(pages) >= 5  # index, two families, two models, one comparison
    for name, html in pages.items():
        for raw in ("<script>alert", "<img src=x", "<img src=y", "<svg onload", "<em>bench", "<i>tag", "<b>other", "<u>"):
            assert raw not in html, (name, raw)
        assert str(tmp_path) not in html, name  # paths are relative to the results given
        assert "``" not in html, name  # docstring markup is rendered, never shown raw
    index = pages["index.html"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in index and "&lt;em&gt;bench&lt;/em&gt;" in index
    assert "sub&lt;svg onload=alert(4)&gt;" in index and "s&lt;svg onload=alert(5)&gt;" in index
    compare = next(html for name, html in pages.items() if name.startswith("compare/"))
    assert "caption &lt;img src=y onerror=alert(0)&gt;" in compare  # the captions of the disagreeing cycles, escaped
    assert "too few cycles" in compare  # 8 cycles: below the declared minimum, no verdict


def test_the_page_code_has_no_hand_escaping_and_its_templates_autoescape() -> None:
    import clip_cycles.evaluation.page as page

    for module in (page, __import__("clip_cycles.evaluation.page_data", fromlist=["x"])):
        assert "escape(" not in Path(module.__file__).read_text()
    assert page._ENV.autoescape is True
    assert page.render("base.html", title="<x>", up="").count("&lt;x&gt;") == 1


def test_attributes_follow_the_strategies_order_and_labels_come_from_the_record(tmp_path: Path) -> None:
    from clip_cycles.attributes.splitters import STRATEGIES
    from clip_cycles.evaluation.page_data import model_name

    names = list(STRATEGIES)
    record = {
        "experiment": "attributes",
        "model": "m",
        "pretrained": "x",
        "strategies": {n: {"f1_selectivity": 0.1} for n in sorted(names)},
    }
    write_json(record, tmp_path / "in" / "attr.json")
    html = build_page([tmp_path / "in"], tmp_path / "site").read_text()
    shown = re.findall(r'<tr><th scope="row">(\w+)</th><td class="num" data-value="0.1"', html)
    assert shown == names and shown != sorted(names)
    assert model_name("ViT", "", backend="hf", weights=None) == "ViT (hf weights)"
    assert model_name("ViT", None, backend="open_clip", weights="ab" * 32) == "ViT (weights abababababab)"
    assert model_name("ViT", "", backend="open_clip") == "ViT (random init)"


def test_intervals_are_read_from_the_flat_record_when_the_detail_is_absent(tmp_path: Path) -> None:
    flat = benchmark_record(
        "cycles/shapes_strict_size",
        "m",
        "a",
        {"cycle_acc": 0.8, "n_cycles": 40, "cycle_acc_ci_low": 0.71, "cycle_acc_ci_high": 0.88, "ci_level": 0.95},
    )
    write_json(flat, tmp_path / "in" / "r.json")
    cell = collect([tmp_path / "in"]).cells["shapes_strict_size", "m (a)"]
    assert (cell.ci["low"], cell.ci["high"], cell.ci["level"]) == (0.71, 0.88, 0.95)
