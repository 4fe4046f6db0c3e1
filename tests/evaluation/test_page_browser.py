"""The results page in a real browser: headless Chromium, opened from disk with the network cut.

The demo (small settings) writes its page; the browser must show the leaderboard with the
numbers of ``zero_shot.json``, reorder rows when a column header is clicked, show example
cycles whose four scores and Delta equal a recomputation from the cached features done
here (own dot products on the Parquet rows), request nothing outside ``file://`` and log
no console error. A second page, from a clip_benchmark output folder of two models and an
``audit-benchmark`` folder, shows both models and the benchmark in one leaderboard.
Screenshots are saved as test artefacts (their folder is printed). In CI (``CI=true``) a
missing browser fails the test instead of skipping it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from benchmark_formats import write_sugarcrepe
from page_cdp import Browser, find_browser
from test_demo import SMALL

from clip_cycles.cli import main
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.encoding.encoder import encode
from clip_cycles.evaluation.demo import SAMPLES_FILE, demo_context, prepare_world, run_demo
from clip_cycles.evaluation.page import build_page
from clip_cycles.evaluation.samples import read_samples
from clip_cycles.tasks.registry import expand_tasks

TASKS = ("cycles/shapes_coarse_object", "cycles/shapes_strict_size")


@pytest.fixture(scope="module")
def browser_binary() -> str:
    binary = find_browser()
    if binary is None:
        message = "headless Chromium is not installed (apt-get install -y chromium; .ci/run does it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return binary


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("page-demo")
    run_demo(root / "results", root / "cache", SMALL)
    return {"results": root / "results", "cache": root / "cache"}


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("page-screenshots")
    print(f"page screenshots: {folder}")
    return folder


@pytest.fixture()
def browser(browser_binary: str, tmp_path: Path):
    chromium = Browser(browser_binary, tmp_path / "profile")
    yield chromium
    chromium.close()


def _assert_offline_and_clean(chromium: Browser) -> None:
    urls = chromium.requested_urls()
    assert urls, "the browser recorded no request at all"
    assert all(url.startswith("file://") for url in urls), [u for u in urls if not u.startswith("file://")]
    assert chromium.console_errors() == []


LEADERBOARD_JS = """
(() => {
  const table = document.getElementById('leaderboard');
  const heads = [...table.tHead.rows[0].cells].map(c => c.textContent.trim());
  const rows = [...table.tBodies[0].rows].map(r => ({
    key: r.getAttribute('data-row'),
    cells: [...r.cells].map(c => ({text: c.textContent.trim(), value: c.getAttribute('data-value'),
      acc: c.querySelector('.acc') ? c.querySelector('.acc').textContent : null})),
  }));
  return {heads, rows};
})()
"""


def _leaderboard(chromium: Browser) -> dict[str, Any]:
    return chromium.evaluate(LEADERBOARD_JS)


def _column(board: dict[str, Any], title: str) -> int:
    return next(i for i, head in enumerate(board["heads"]) if head.startswith(title))


def test_demo_page_in_headless_chromium(demo: dict[str, Path], browser: Browser, shots: Path) -> None:
    results = demo["results"]
    index = results / "page" / "index.html"
    assert index.is_file(), "the demo did not write its page"
    zero = json.loads((results / "zero_shot.json").read_text())
    browser.open(index.as_uri())
    assert browser.evaluate("document.documentElement.getAttribute('data-page-ready')") == "true"

    board = _leaderboard(browser)
    column = _column(board, "CycleAcc: cycles-tiny (shapes)")
    shown = {row["key"]: row["cells"][column] for row in board["rows"]}
    assert set(shown) == set(zero["families"]) | set(zero["unavailable"]) | {"audit/shapes_sugarcrepe"}
    for name, metrics in zero["families"].items():
        assert float(shown[name]["value"]) == metrics["cycle_acc"], name
        assert shown[name]["acc"] == f"{metrics['cycle_acc']:.3f}", name
    for name in zero["unavailable"]:
        assert shown[name]["text"] == "unavailable", name
    # No record carries cycle_acc_ci, so the page's own bootstrap gives each interval, around the mean.
    intervals = browser.evaluate(
        """[...document.querySelectorAll('#leaderboard td[data-value] .ci[data-ci-low]')].map(s =>
          [+s.dataset.ciLow, +s.closest('td').dataset.value, +s.dataset.ciHigh])"""
    )
    assert len(intervals) == len(zero["families"])
    assert all(low <= value <= high for low, value, high in intervals)
    browser.screenshot(shots / "leaderboard.png")

    # The board's group row: runs of neighbouring family columns of one group, as the family table names them.
    group_of = {row["cells"][1]["value"]: row["cells"][_column(board, "group")]["text"] for row in board["rows"]}
    families = browser.evaluate("[...document.querySelectorAll('#models-board thead th.fam')].map(t => t.dataset.family)")
    runs: list[list[Any]] = []
    for family in families:
        if runs and runs[-1][0] == group_of[family]:
            runs[-1][1] += 1
        else:
            runs.append([group_of[family], 1])
    shown_groups = browser.evaluate(
        "[...document.querySelectorAll('#models-board thead tr.groups th')].map(t => [t.textContent.trim(), t.colSpan])"
    )
    assert shown_groups == runs and len(runs) >= 2, shown_groups  # the demo has COCO-built and GQA-built families

    # Sorting by the model's column reorders the rows by its numbers; a second click reverses them.
    before = [row["key"] for row in board["rows"]]
    browser.evaluate(f"document.getElementById('leaderboard').tHead.rows[0].cells[{column}].querySelector('button').click()")
    ascending = [row["key"] for row in _leaderboard(browser)["rows"]]
    scored = {n: m["cycle_acc"] for n, m in zero["families"].items()}
    assert ascending != before
    values = [scored[k] for k in ascending if k in scored]
    assert values == sorted(values)
    browser.evaluate(f"document.getElementById('leaderboard').tHead.rows[0].cells[{column}].querySelector('button').click()")
    descending = [scored[k] for k in (row["key"] for row in _leaderboard(browser)["rows"]) if k in scored]
    assert descending == sorted(values, reverse=True)

    # The benchmark-audit table shows the demo's own audit (the SugarCrepe-format shapes benchmark) number for number.
    audit_record = json.loads((results / "audit_shapes_sugarcrepe.json").read_text())
    assert float(shown["audit/shapes_sugarcrepe"]["value"]) == audit_record["metrics"]["cycle_acc"]
    _check_benchmark_table(browser, audit_record, "shapes_sugarcrepe")
    browser.evaluate("document.getElementById('benchmarks').scrollIntoView()")
    browser.screenshot(shots / "benchmark_audit.png")
    _assert_offline_and_clean(browser)

    # A family page: every example cycle's scores and Delta against our own recomputation.
    family = next(iter(sorted(zero["families"])))
    browser.open((results / "page" / "families" / f"{family}.html").as_uri())
    cycles = browser.evaluate(
        """[...document.querySelectorAll('article.cycle')].map(a => ({
          id: a.dataset.cycleId, seed: +a.dataset.seed, split: a.dataset.split, kind: a.dataset.kind,
          samples: a.closest('.examples').dataset.samples,
          scores: Object.fromEntries([...a.querySelectorAll('td.score')].map(t => [t.dataset.score, +t.dataset.value])),
          delta: +a.querySelector('.delta').dataset.value, credit: +a.querySelector('.credit').dataset.value,
          alts: [...a.querySelectorAll('img')].map(i => i.alt),
          loaded: [...a.querySelectorAll('img')].every(i => i.naturalWidth > 0),
        }))"""
    )
    assert {c["kind"] for c in cycles} == {"hardest", "easiest", "random"}
    _check_against_features(cycles, family, demo["cache"], results)
    browser.screenshot(shots / f"family_{family}.png")
    _assert_offline_and_clean(browser)


BENCHMARK_TABLE_JS = """[...document.querySelectorAll('#benchmarks-table tbody tr')].map(r => ({
  benchmark: r.dataset.benchmark, subset: r.dataset.subset, wins: r.classList.contains('blind-wins'),
  values: [...r.cells].map(c => c.getAttribute('data-value')), texts: [...r.cells].map(c => c.textContent.trim())}))"""


def _check_benchmark_table(chromium: Browser, record: dict[str, Any], benchmark: str) -> None:
    """Every row of the benchmark's audit table (each subset and ``all``) against the audit record's numbers."""
    table = [row for row in chromium.evaluate(BENCHMARK_TABLE_JS) if row["benchmark"] == benchmark]
    metrics = record["metrics"]
    expected = dict(metrics["subsets"]) | {"all": metrics}
    assert sorted(row["subset"] for row in table) == sorted(expected)
    for row in table:
        sub = expected[row["subset"]]
        cycles = sub if row["subset"] == "all" else sub["cycles"]
        values, texts = row["values"], row["texts"]
        assert int(values[2]) == sub["n_comparisons"], row["subset"]
        assert float(values[4]) == sub["model_acc"] and texts[4] == f"{sub['model_acc']:.3f}", row["subset"]
        assert texts[5] == sub["best_blind"], row["subset"]
        assert float(values[6]) == sub["best_blind_acc"] and texts[6] == f"{sub['best_blind_acc']:.3f}", row["subset"]
        # The floor's interval as the record holds it, and it holds the floor.
        ci = sub["best_blind_acc_ci"]
        assert float(values[7]) == ci["low"] and texts[7] == f"{ci['low']:.3f}–{ci['high']:.3f}", row["subset"]
        assert ci["low"] <= sub["best_blind_acc"] <= ci["high"], row["subset"]
        # The exact ceilings beside the floors, as the record holds them.
        assert float(values[8]) == sub["ceilings"]["bag_of_words_ceiling"], row["subset"]
        assert float(values[9]) == sub["ceilings"]["length_ceiling"], row["subset"]
        assert int(values[10]) == cycles["n_cycles"], row["subset"]
        if cycles.get("cycle_acc") is None:
            assert values[11] == "", row["subset"]
        else:
            assert float(values[11]) == cycles["cycle_acc"] and texts[11] == f"{cycles['cycle_acc']:.3f}", row["subset"]
        # "blind wins" only where the paired interval (blind minus model) excludes 0 above it.
        paired = sub["best_blind_vs_model"]
        assert row["wins"] == (paired["verdict"] == "blind beats model"), row["subset"]
        assert not row["wins"] or paired["ci_low"] > 0, row["subset"]


def _check_against_features(cycles: list[dict[str, Any]], family: str, cache: Path, results: Path) -> None:
    """Each shown cycle is the run's own samples line (read what eval wrote), and its block is recomputed here
    from the images that line names, encoded through the cache."""
    task = expand_tasks([f"cycles/{family}"])[0]
    context = demo_context(prepare_world(cache, SMALL.world_images), cache, SMALL.seeds)
    samples = read_samples(results / SAMPLES_FILE)[f"cycles/{family}"]
    for cycle in cycles:
        # The page names the samples file it read without the machine's path: the one the demo's record names.
        shown = Path(cycle["samples"])
        assert shown.name == SAMPLES_FILE and not shown.is_absolute() and str(results) not in cycle["samples"]
        row = samples[(cycle["seed"], cycle["id"])]
        assert row["split"] == cycle["split"], cycle["id"]
        for name in ("s11", "s12", "s21", "s22"):
            assert cycle["scores"][name] == row[name], (cycle["id"], name)
        assert cycle["delta"] == row["delta"] and cycle["credit"] == row["credit"], cycle["id"]
        images = [ImageItem(row[f"image_{k}"], Path(row["image_root"]) / row[f"image_{k}"]) for k in (0, 1)]
        captions = [row["caption_0"], row["caption_1"]]  # as scored (the task's prompt applied)
        assert cycle["alts"] == captions and cycle["loaded"], cycle["id"]
        encoded = encode(images, captions, context.spec, cache)
        phi = np.array([encoded.image_features[encoded.image_rows[i.key]] for i in images], dtype=np.float64)
        psi = np.array([encoded.caption_features[encoded.caption_rows[c]] for c in captions], dtype=np.float64)
        expected = {f"s{i + 1}{j + 1}": float(phi[i] @ psi[j]) for i in range(2) for j in range(2)}
        for name, value in expected.items():
            assert cycle["scores"][name] == pytest.approx(value, abs=1e-12), (cycle["id"], name)
        delta = expected["s11"] + expected["s22"] - expected["s12"] - expected["s21"]
        assert cycle["delta"] == pytest.approx(delta, abs=1e-12), cycle["id"]
        assert cycle["credit"] == (1.0 if delta > task.tie_tolerance else 0.0 if delta < -task.tie_tolerance else 0.5)
        assert cycle["delta"] == pytest.approx(
            cycle["scores"]["s11"] + cycle["scores"]["s22"] - cycle["scores"]["s12"] - cycle["scores"]["s21"], abs=1e-12
        )
    hardest = [c["delta"] for c in cycles if c["kind"] == "hardest"]
    easiest = [c["delta"] for c in cycles if c["kind"] == "easiest"]
    assert max(hardest) <= min(easiest)


def test_page_of_clip_benchmark_models_and_benchmark_audit(
    demo: dict[str, Path], browser: Browser, shots: Path, tmp_path: Path
) -> None:
    cache = demo["cache"]
    world = prepare_world(cache, SMALL.world_images)
    records = tmp_path / "clip_benchmark_out"
    common = ["--dataset-root", str(world), "--cache-dir", str(cache), "--device", "cpu", "--num-workers", "0", "--task", *TASKS]
    template = str(records / "{dataset}_{pretrained}_{model}_{language}_{task}.json")
    assert main(["eval", "--model", "cycles-tiny", "--pretrained", "shapes", "--output", template, *common]) == 0
    assert main(["eval", "--model", "cycles-tiny", "--output", template, *common]) == 0  # random init: a second model
    write_sugarcrepe(tmp_path / "sc")
    audit = tmp_path / "audits"
    args = ["audit-benchmark", "sugarcrepe", "--root", str(tmp_path / "sc"), "--out", str(audit)]
    assert main([*args, "--model", "cycles-tiny", "--pretrained", "shapes", "--cache-dir", str(cache), "--device", "cpu"]) == 0
    site = tmp_path / "site"
    assert main(["page", str(records), str(audit), "--out", str(site)]) == 0

    browser.open((site / "index.html").as_uri())
    board = _leaderboard(browser)
    by_row = {row["key"]: row["cells"] for row in board["rows"]}
    models = {"cycles-tiny (shapes)", "cycles-tiny (random init)"}
    for path in sorted(records.glob("*.json")):
        record = json.loads(path.read_text())
        model = f"{record['model']} ({record['pretrained'] or 'random init'})"
        assert model in models
        cell = by_row[record["dataset"].removeprefix("cycles/")][_column(board, f"CycleAcc: {model}")]
        assert float(cell["value"]) == record["metrics"]["cycle_acc"]  # CycleAcc by name, never metrics["acc"]
    audit_record = json.loads((audit / "audit_sugarcrepe.json").read_text())
    cell = by_row["audit/sugarcrepe"][_column(board, "CycleAcc: cycles-tiny (shapes)")]
    assert float(cell["value"]) == audit_record["metrics"]["cycle_acc"]

    _check_benchmark_table(browser, audit_record, "sugarcrepe")
    browser.screenshot(shots / "leaderboard_two_models_and_audit.png")
    _assert_offline_and_clean(browser)


def test_examples_flag_and_budget_on_the_demo_results(demo: dict[str, Path], tmp_path: Path) -> None:
    index = build_page([demo["results"]], tmp_path / "one", n_examples=1)  # from the records and their samples alone
    zero = json.loads((demo["results"] / "zero_shot.json").read_text())
    for family in sorted(zero["families"]):
        kinds = re.findall(
            r'<article class="cycle" data-kind="(\w+)"', (index.parent / "families" / f"{family}.html").read_text()
        )
        assert kinds == ["hardest", "easiest", "random"], family
    # The command line honours the same flags: --examples and --sample-seed (no model flags: nothing is recomputed).
    flags = ["--examples", "2", "--sample-seed", "7"]
    assert main(["page", str(demo["results"]), "--out", str(tmp_path / "two"), *flags]) == 0
    family = sorted(zero["families"])[0]
    two = (tmp_path / "two" / "families" / f"{family}.html").read_text()
    kinds = re.findall(r'<article class="cycle" data-kind="(\w+)"', two)
    assert kinds == ["hardest"] * 2 + ["easiest"] * 2 + ["random"] * 2
    # Seed 0 with two of each kind: the same extremes, another random sample (deterministic for these seeds).
    build_page([demo["results"]], tmp_path / "seed0", n_examples=2, seed=0)
    seed0 = (tmp_path / "seed0" / "families" / f"{family}.html").read_text()

    def ids(html: str, kind: str) -> list[str]:
        return re.findall(rf'data-kind="{kind}" data-cycle-id="([^"]+)"', html)

    assert ids(two, "hardest") == ids(seed0, "hardest") and ids(two, "easiest") == ids(seed0, "easiest")
    assert ids(two, "random") != ids(seed0, "random")
    shown = sum(p.stat().st_size for p in (tmp_path / "one").rglob("*") if p.is_file())
    with pytest.raises(ValueError, match="--max-bytes"):
        build_page([demo["results"]], tmp_path / "over", n_examples=1, max_bytes=shown - 1)
    assert not (tmp_path / "over").exists()


def test_samples_that_are_not_the_records_are_shown_apart_with_the_reason(demo: dict[str, Path], tmp_path: Path) -> None:
    """The demo's record names its samples file and its sha256: an edited file is never shown as that run's cycles."""
    zero = json.loads((demo["results"] / "zero_shot.json").read_text())
    assert zero["samples"]["path"] == "zero_shot.samples.jsonl"
    family = sorted(zero["families"])[0]
    (tmp_path / "edited").mkdir()
    (tmp_path / "edited" / "zero_shot.json").write_text(json.dumps(zero))
    lines = (demo["results"] / "zero_shot.samples.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["caption_0"] = "a caption this run never scored"
    (tmp_path / "edited" / "zero_shot.samples.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    build_page([tmp_path / "edited"], tmp_path / "site")
    page = (tmp_path / "site" / "families" / f"{family}.html").read_text()
    assert "is not the file the result names" in page and '<article class="cycle"' not in page
    assert "a caption this run never scored" not in page
    # The same results unedited show their examples.
    build_page([demo["results"]], tmp_path / "ok", n_examples=1)
    assert '<article class="cycle"' in (tmp_path / "ok" / "families" / f"{family}.html").read_text()


def test_the_browser_checks_catch_a_page_that_reaches_out(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "leaky.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="http://example.invalid/pixel.png" alt="x">'
        "<script>console.error('broken'); undefinedFunction();</script></body></html>"
    )
    browser.open(page.as_uri())
    assert "http://example.invalid/pixel.png" in browser.requested_urls()
    errors = browser.console_errors()
    assert any("broken" in e for e in errors) and any("undefinedFunction" in e for e in errors)
    with pytest.raises(AssertionError):
        _assert_offline_and_clean(browser)


# --------------------------------------------------------------------------- a leaderboard at scale: 12 models x 21 families

N_MODELS, N_FAMILIES, N_CYCLES, N_IMAGES = 12, 21, 40, 30
FEW = "fam_20"  # a family with fewer cycles than MIN_CYCLES: its comparison says "too few cycles"
WITH_SAMPLES = (0, 1, 2)  # models whose results have eval --samples files beside them


def _scale_cycles(model: int, family: int) -> list[dict[str, Any]]:
    """Per-cycle samples of one model on one family: images shared by several cycles, credits from a seeded draw."""
    rng = np.random.default_rng(1000 * model + family)
    n = 12 if f"fam_{family:02d}" == FEW else N_CYCLES
    skill = 0.35 + 0.04 * model + 0.005 * family  # models differ, so the overall column has an order
    out = []
    for c in range(n):
        u = rng.random()
        credit = 1.0 if u < skill else (0.5 if u < skill + 0.05 else 0.0)
        out.append(
            {
                "task": f"cycles/fam_{family:02d}",
                "seed": c % 2,
                "split": "test",
                "cycle_id": f"c{c:03d}",
                "image_0": f"img{c % N_IMAGES:02d}.png",
                "image_1": f"img{(c + 7) % N_IMAGES:02d}.png",
                "caption_0": f"a <b>{c}</b> caption",
                "caption_1": f"another caption {c}",
                **{"s11": 0.3, "s12": 0.2, "s21": 0.2, "s22": 0.1},
                "delta": float(rng.normal()),
                "credit": credit,
            }
        )
    return out


@pytest.fixture(scope="module")
def scale(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """12 models' clip_benchmark results on 21 families, per-cycle samples for three of them, and the page built."""
    from clip_cycles.results import benchmark_record, write_json

    root = tmp_path_factory.mktemp("page-scale")
    means: dict[str, float] = {}
    samples: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for m in range(N_MODELS):
        model = f"ViT-S-{m:02d} (tag{m})"
        accs = []
        lines = []
        records = []
        for f in range(N_FAMILIES):
            cycles = _scale_cycles(m, f)
            acc = float(np.mean([c["credit"] for c in cycles]))
            accs.append(acc)
            half = 0.5 / np.sqrt(len(cycles))
            metrics = {
                "cycle_acc": acc,
                "cycle_acc_ci": {
                    # Clipped to [0, 1] as a bootstrap interval of an accuracy is.
                    "low": max(0.0, acc - half),
                    "high": min(1.0, acc + half),
                    "level": 0.95,
                    "n_resamples": 1000,
                    "seed": 0,
                    "method": "percentile",
                    "unit": "image",
                },
                "n_cycles": len(cycles),
                "seeds": [0, 1],
                "additive_audit": {"passed": True},
            }
            records.append(benchmark_record(f"cycles/fam_{f:02d}", f"ViT-S-{m:02d}", f"tag{m}", metrics))
            lines += cycles
            samples.setdefault(model, {})[f"fam_{f:02d}"] = cycles
        content = "".join(json.dumps(line) + "\n" for line in lines).encode()
        if m in WITH_SAMPLES:  # each result names the samples file eval --samples wrote, with its sha256
            (root / f"m{m:02d}").mkdir(parents=True, exist_ok=True)
            (root / f"m{m:02d}" / "samples.jsonl").write_bytes(content)
        for f, record in enumerate(records):
            if m in WITH_SAMPLES:
                record["samples"] = {"path": "samples.jsonl", "sha256": hashlib.sha256(content).hexdigest()}
            write_json(record, root / f"m{m:02d}" / f"fam_{f:02d}.json")
        means[model] = float(np.mean(accs))
    site = root / "site"
    build_page([root], site)
    return {"root": root, "site": site, "means": means, "samples": samples}


def _no_overflow(chromium: Browser) -> None:
    width = chromium.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[1] == 1280 and width[0] <= width[1], width


def _at_1280(chromium: Browser) -> None:
    chromium.call("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})


BOARD_JS = """[...document.querySelectorAll('#models-board tbody tr')].map(r => ({
  model: r.dataset.model, overall: +r.cells[1].dataset.value,
  cells: [...r.cells].slice(2).map(c => c.dataset.value)}))"""


def test_twelve_models_by_twenty_one_families_fit_1280_px_and_sort_by_overall(
    scale: dict[str, Any], browser: Browser, shots: Path
) -> None:
    _at_1280(browser)
    browser.open((scale["site"] / "index.html").as_uri())
    assert browser.evaluate("document.documentElement.getAttribute('data-page-ready')") == "true"
    _no_overflow(browser)
    board = browser.evaluate(BOARD_JS)
    assert len(board) == N_MODELS and all(len(row["cells"]) == N_FAMILIES for row in board)
    heads = browser.evaluate("[...document.querySelectorAll('#models-board thead th.fam')].map(t => t.dataset.family)")
    assert heads == [f"fam_{f:02d}" for f in range(N_FAMILIES)]
    for row in board:  # the overall column is the mean over families, computed here from the written records
        assert row["overall"] == pytest.approx(scale["means"][row["model"]], abs=1e-12)
    # The first column stays in view while the table scrolls sideways inside its container.
    sticky = browser.evaluate(
        """(() => { const box = document.getElementById('board-scroll'); box.scrollLeft = box.scrollWidth;
          const cell = document.querySelector('#models-board tbody th'); return [cell.getBoundingClientRect().left,
          box.getBoundingClientRect().left, box.scrollWidth > box.clientWidth]; })()"""
    )
    assert sticky[2] and abs(sticky[0] - sticky[1]) < 2, sticky
    browser.evaluate("document.getElementById('board-scroll').scrollLeft = 0")
    browser.screenshot(shots / "leaderboard_12x21.png")

    overall = "document.querySelector('#models-board thead th:nth-child(2) button').click()"
    browser.evaluate(overall)
    ascending = [row["model"] for row in browser.evaluate(BOARD_JS)]
    assert ascending == sorted(scale["means"], key=scale["means"].get)
    browser.evaluate(overall)
    descending = [row["model"] for row in browser.evaluate(BOARD_JS)]
    assert descending == ascending[::-1]
    browser.screenshot(shots / "leaderboard_12x21_by_overall.png")
    # Under the group row a family column still sorts by its own numbers.
    groups = browser.evaluate(
        "[...document.querySelectorAll('#models-board thead tr.groups th')].map(t => [t.textContent.trim(), t.colSpan])"
    )
    assert sum(span for _, span in groups) == N_FAMILIES and all(label for label, _ in groups), groups
    browser.evaluate("document.querySelector('#models-board thead th.fam[data-family=\"fam_03\"] button').click()")
    by_family = [float(row["cells"][3]) for row in browser.evaluate(BOARD_JS)]
    assert by_family == sorted(by_family)
    _no_overflow(browser)

    # A family column leads to the per-family view; each model row to its page; neither overflows.
    link = browser.evaluate("document.querySelector('#models-board thead th.fam a').getAttribute('href')")
    assert link == "families/fam_00.html"
    browser.open((scale["site"] / link).as_uri())
    _no_overflow(browser)
    assert len(browser.evaluate("[...document.querySelectorAll('#family-scores tbody tr')].map(r => r.dataset.row)")) == N_MODELS
    browser.open((scale["site"] / "index.html").as_uri())
    model_link = browser.evaluate("document.querySelector('#models-board tbody th a').getAttribute('href')")
    browser.open((scale["site"] / model_link).as_uri())
    _no_overflow(browser)
    assert browser.evaluate("document.querySelectorAll('#model-scores tbody tr').length") == N_FAMILIES
    _assert_offline_and_clean(browser)


def _own_two_way(a: np.ndarray, b: np.ndarray, images: list[tuple[str, str]]) -> tuple[float, float]:
    """A 95% two-way image-cluster interval of mean(a) - mean(b), written out densely: K[c, c'] = 1 when cycles share an image."""
    from clip_cycles.algebra.crossed import t_quantile

    d = a - b
    n = d.size
    share = np.array([[float(bool(set(x) & set(y))) for y in images] for x in images])
    centre = np.eye(n) - np.ones((n, n)) / n
    e = centre @ d / n
    expected = (np.trace(share) - share.sum() / n) / n**2  # E[e' K e] / sigma^2 for independent cycles
    raw = float(e @ share @ e)
    same_pair = np.array([[float(set(x) == set(y)) for y in images] for x in images])
    one_way = float(e @ same_pair @ e)  # what a cancelled two-way sum falls back to
    variance = (1 / n) / expected * (raw if raw > 1e-9 * one_way else one_way)
    q = centre @ share @ centre
    df = min(len({i for pair in images for i in pair}) - 1, np.trace(q) ** 2 / (q * q).sum())
    half = t_quantile(0.975, df) * np.sqrt(variance)
    return float(d.mean() - half), float(d.mean() + half)


COMPARE_JS = """[...document.querySelectorAll('#comparison tbody tr')].map(r => ({family: r.dataset.family,
  diff: r.querySelector('.diff').dataset.value, text: r.textContent,
  low: r.querySelector('.interval') ? +r.querySelector('.interval').dataset.ciLow : null,
  high: r.querySelector('.interval') ? +r.querySelector('.interval').dataset.ciHigh : null,
  links: [...r.querySelectorAll('a[href^="#"]')].map(a => a.getAttribute('href'))}))"""


def test_the_comparison_view_shows_paired_differences_equal_to_our_own(
    scale: dict[str, Any], browser: Browser, shots: Path
) -> None:
    from clip_cycles.algebra.paired import paired_difference

    _at_1280(browser)
    browser.open((scale["site"] / "index.html").as_uri())
    a, b = "ViT-S-00 (tag0)", "ViT-S-01 (tag1)"
    pairs = browser.evaluate(
        "Object.fromEntries([...document.querySelectorAll('ul.pairs a')].map(x => [x.textContent, x.getAttribute('href')]))"
    )
    assert len(pairs) == N_MODELS * (N_MODELS - 1) // 2
    # The picker goes to the same page as the pair's link.
    since = len(browser.events)
    browser.evaluate(
        """document.getElementById('compare-a').selectedIndex = 0; document.getElementById('compare-b').selectedIndex = 1;
        document.getElementById('compare-form').requestSubmit()"""
    )
    browser.wait_for("Page.loadEventFired", since)
    assert browser.evaluate("location.href") == (scale["site"] / pairs[f"{a} vs {b}"]).as_uri()
    _no_overflow(browser)
    rows = {row["family"]: row for row in browser.evaluate(COMPARE_JS)}
    assert set(rows) == {f"fam_{f:02d}" for f in range(N_FAMILIES)}
    anchors = set(browser.evaluate("[...document.querySelectorAll('#disagreements-table tr[id]')].map(r => '#' + r.id)"))
    for family, row in rows.items():
        mine, theirs = scale["samples"][a][family], scale["samples"][b][family]
        by_id = {(s["seed"], s["cycle_id"]): s for s in theirs}
        credit_a = np.array([s["credit"] for s in mine])
        credit_b = np.array([by_id[s["seed"], s["cycle_id"]]["credit"] for s in mine])  # paired by cycle, here
        assert float(row["diff"]) == pytest.approx(credit_a.mean() - credit_b.mean(), abs=1e-12), family
        images = [(s["image_0"], s["image_1"]) for s in mine]
        expected = paired_difference(credit_a, credit_b, np.array(images))
        assert (row["low"], row["high"]) == pytest.approx((expected.ci_low, expected.ci_high), abs=1e-12), family
        # ... and equal to our own dense two-way computation.
        low, high = _own_two_way(credit_a, credit_b, images)
        assert (row["low"], row["high"]) == pytest.approx((low, high), abs=1e-9), family
        if family == FEW:
            assert "too few cycles" in row["text"]
        assert set(row["links"]) <= anchors and (row["links"] or (credit_a == credit_b).all()), family
    browser.screenshot(shots / "comparison.png")
    # Without samples beside both results the page says how to get them instead of a number.
    browser.open((scale["site"] / pairs["ViT-S-00 (tag0) vs ViT-S-05 (tag5)"]).as_uri())
    texts = [row["text"] for row in browser.evaluate(COMPARE_JS)]
    assert all("no per-cycle samples: run eval --samples" in text for text in texts)
    _assert_offline_and_clean(browser)
