"""``clip-cycles page RESULTS... --out site/``: a static results page (HTML, CSS, a little vanilla JS).

The site opens from ``file://`` with no server and no network: every file it uses is in
the output folder (``index.html``, ``families/<family>.html``, ``assets/page.css``,
``assets/page.js``, ``thumbs/*.jpg``, ``page_manifest.json``). It shows

- a leaderboard, families (coarse -> strict) x models: CycleAcc with its bootstrap
  interval and the additive audit's verdict, the paper's families marked, chance (0.5)
  drawn on every cell, sortable by any column; benchmark rows give the CycleAcc of the
  exact cycles ``audit-benchmark`` found; an "item set" column names the world and split each
  row's numbers scored: results share a row only when their ``items_sha256`` match, and a
  note under the table says why a family has several rows;
- the benchmark audit table: model accuracy, best blind baseline and CycleAcc per subset,
  rows where a blind score reaches the model's highlighted;
- a page per family: predicate, provenance, thresholds, counts and exclusions
  (``build_info.json``), rank sweep and transfer where results have them, example cycles;
- attribute-split results (F1 selectivity, CS per strategy, the protocol) when present.

Everything is assembled in memory and checked against the byte budget (``--max-bytes``)
before anything is written; the same inputs give byte-identical files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Sequence

from clip_cycles.data.sources import provenance_label
from clip_cycles.encoding.run_context import RunContext
from clip_cycles.evaluation.page_data import CHANCE, Cell, PageData, collect, model_name
from clip_cycles.evaluation.page_examples import (
    ExampleCycle,
    FamilyExamples,
    family_examples,
    page_world_cache,
    thumbnail,
    world_root,
)
from clip_cycles.experiments.item_sets import ItemSet
from clip_cycles.outputs import check_path_length, write_file_set

#: The page's default byte budget (every file it writes, together).
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
#: Example cycles of each kind (hardest, easiest, random) per family and model.
DEFAULT_EXAMPLES = 3
MANIFEST = "page_manifest.json"
STAR = "\u2605 "
WARN_YES = "\u26a0 yes"
ASSETS = ("page.css", "page.js")
VERDICT_SYMBOL = {
    "passed": "\u2713",
    "failed": "\u2717",
    "unavailable": "\u2013",
    "not run": "\u00b7",
    "blind beats model": "\u26a0",
    "model ahead": "\u2713",
    "model above blind": "\u2713",
    "within noise": "\u2248",
    "too few comparisons": "\u00b7",
}


@dataclass
class Site:
    """The files of the page, path (relative, POSIX) -> bytes, before anything is written."""

    files: dict[str, bytes] = field(default_factory=dict)

    def add(self, path: str, content: str | bytes) -> None:
        self.files[path] = content.encode("utf-8") if isinstance(content, str) else content

    @property
    def size(self) -> int:
        return sum(len(v) for v in self.files.values())


# --------------------------------------------------------------------------- formatting


def _f(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _value(value: float | None) -> str:
    """The full-precision number in a ``data-value`` attribute (what tests and sorting read)."""
    return "" if value is None else repr(float(value))


def _document(title: str, body: str, depth: int = 0) -> str:
    up = "../" * depth
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        # No request may leave the folder: the policy forbids every origin but the page's own files.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'self'; img-src 'self'; "
        "style-src 'self'; script-src 'self'\">\n"
        f"<title>{escape(title)}</title>\n"
        f'<link rel="stylesheet" href="{up}assets/page.css">\n</head>\n<body>\n'
        f'<nav aria-label="site"><a href="{up}index.html">leaderboard</a>'
        f'<a href="{up}index.html#benchmarks">benchmark audits</a>'
        f'<a href="{up}index.html#attributes">attribute splits</a></nav>\n'
        f"<main>\n{body}\n</main>\n"
        f'<script src="{up}assets/page.js"></script>\n</body>\n</html>\n'
    )


def _sort_header(label: str, numeric: bool = False) -> str:
    kind = ' data-type="number"' if numeric else ""
    return f'<th scope="col"{kind}><button type="button" class="sort">{escape(label)}</button></th>'


def _position(cell: Cell) -> tuple[str, str]:
    """(css class, symbol) of a CycleAcc against chance: the interval above, including or below 0.5.

    Without an interval only the point is compared, and hollow symbols say so: a point off
    0.5 is not evidence that the model is off chance.
    """
    if cell.cycle_acc is None:
        return "na", "\u00b7"
    if cell.ci is None:
        if cell.cycle_acc == CHANCE:
            return "chance", "\u25cb"
        return ("above", "\u25b3") if cell.cycle_acc > CHANCE else ("below", "\u25bd")
    if cell.ci["low"] > CHANCE:
        return "above", "\u25b2"
    if cell.ci["high"] < CHANCE:
        return "below", "\u25bc"
    return "chance", "\u25cf"


def _ci_title(ci: dict[str, Any]) -> str:
    """Where an interval comes from: the record's ``cycle_acc_ci`` or the page builder's bootstrap."""
    what = f"{ci.get('level', '?')} {ci.get('method', '?')} interval"
    what += f", {ci.get('n_resamples', '?')} resamples of {ci.get('unit', '?')}s"
    return f"{what}; {ci.get('computed_by', 'from the record (cycle_acc_ci)')}"


def _acc_cell(cell: Cell | None) -> str:
    if cell is None:
        return '<td class="num na" data-value="">not evaluated</td>'
    if cell.cycle_acc is None:
        return f'<td class="na" data-value="" title="{escape(cell.unavailable_reason or "")}">unavailable</td>'
    css, symbol = _position(cell)
    ci = (
        f' <span class="ci" data-ci-low="{_value(cell.ci["low"])}" data-ci-high="{_value(cell.ci["high"])}" '
        f'title="{escape(_ci_title(cell.ci))}">'
        f"[{_f(cell.ci['low'])}, {_f(cell.ci['high'])}]</span>"
        if cell.ci
        else f' <span class="ci" title="{escape(cell.ci_note)}">no interval</span>'
    )
    return (
        f'<td class="num {css}" data-value="{_value(cell.cycle_acc)}" data-sd="{_value(cell.sd)}">'
        f'<span class="sym" aria-label="{css} chance">{symbol}</span><span class="acc">{_f(cell.cycle_acc)}</span>{ci}'
        f"{_bar(cell.cycle_acc)}</td>"
    )


def _bar(value: float) -> str:
    """A small bar of ``value`` in [0, 1] with the chance tick at 0.5 (SVG: no inline style for the page's CSP)."""
    width = max(0.0, min(1.0, value)) * 112
    return (
        '<svg class="bar" aria-hidden="true" width="112" height="10" viewBox="0 0 112 10">'
        '<rect x="0" y="2" width="112" height="6" fill="#e4e4e4"/>'
        f'<rect class="fill" x="0" y="2" width="{width:.1f}" height="6"/>'
        '<line x1="56" x2="56" y1="0" y2="10" stroke="#000" stroke-width="2"/></svg>'
    )


def _verdict_cell(cell: Cell | None) -> str:
    if cell is None or cell.cycle_acc is None and cell.audit == "not run":
        return '<td data-value="">\u00b7</td>'
    symbol = VERDICT_SYMBOL.get(cell.audit, "?")
    css = "verdict-failed" if cell.audit in ("failed", "blind beats model") else ""
    label = escape(cell.audit)
    return f'<td class="{css}" data-value="{label}" title="{escape(cell.audit_note)}">{symbol} {label}</td>'


# --------------------------------------------------------------------------- index page


def _item_set_cell(item: ItemSet, key: str) -> str:
    """The "item set" cell of a row: the world (source) and split its numbers scored, and its label."""
    label = item.label(key)
    return f'<td class="item-set" data-value="{escape(label)}" title="{escape(label)}">{escape(item.describe())}</td>'


def item_set_notes_html(notes: list[str]) -> str:
    """The visible notes saying why a family's results are in separate rows (empty when there are none)."""
    if not notes:
        return ""
    items = "".join(f"<li>{escape(note)}</li>" for note in notes)
    return (
        '<div class="note item-set-notes" role="note"><p>Numbers share a row only when they scored the same items '
        f"(equal <code>items_sha256</code>):</p><ul>{items}</ul></div>"
    )


def leaderboard(data: PageData) -> str:
    """The leaderboard table: one row per family and item set (then per audited benchmark), two columns per model."""
    models = data.models
    head = [
        _sort_header("order", numeric=True),
        _sort_header("family"),
        _sort_header("item set"),
        _sort_header("group"),
        _sort_header("provenance"),
    ]
    for model in models:
        head += [_sort_header(f"CycleAcc: {model}", numeric=True), _sort_header(f"audit: {model}")]
    rows = []
    for position, row in enumerate(data.family_rows() + data.benchmark_rows()):
        key = data.family_of(row)
        info = data.families.get(key)
        if key.startswith("audit/"):
            name, group, provenance = escape(key), "benchmark (exact cycles found)", "audited benchmark"
        else:
            name = f'<a href="families/{escape(key)}.html">{escape(key)}</a>'
            group = provenance_label(info.builder, info.source) if info else "unregistered family"
            provenance = info.provenance if info else "unknown"
        paper = info is not None and info.paper
        cells = [
            f'<td class="num" data-value="{position}">{position + 1}</td>',
            f'<th scope="row" data-value="{escape(key)}">{name}</th>',
            _item_set_cell(data.item_set(row), key),
            f"<td>{escape(group)}</td>",
            f'<td class="{"paper" if paper else ""}">{STAR if paper else ""}{escape(provenance)}</td>',
        ]
        for model in models:
            cell = data.cells.get((row, model))
            cells += [_acc_cell(cell), _verdict_cell(cell)]
        rows.append(f'<tr data-row="{escape(row)}">' + "".join(cells) + "</tr>")
    return (
        '<table id="leaderboard" class="sortable">\n'
        "<caption>CycleAcc per family and model (mean over seeds; 95% bootstrap interval in brackets). "
        "\u25b2 above chance, \u25cf indistinguishable from chance (0.5, the black tick on each bar), "
        "\u25bc below chance; without an interval, hollow \u25b3 \u25bd \u25cb compare the point alone; "
        "\u2605 a family paper 1 names. Audit: \u2713 the additive audit's shortcut probes held "
        "at exactly 0.5, \u2717 failed, \u2013 unavailable. Item set: the world (source) and split the row's "
        "numbers scored; numbers share a row only when they scored the same items. Click a column header to sort.</caption>\n"
        "<thead><tr>"
        + "".join(head)
        + "</tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + "\n</tbody>\n</table>\n"
        + item_set_notes_html(data.notes)
    )


def benchmark_table(data: PageData) -> str:
    """Per benchmark and subset: the model's accuracy, the best blind baseline, CycleAcc of the exact cycles."""
    if not data.benchmarks:
        return '<p class="note">No audit-benchmark results among the inputs.</p>'
    head = [
        _sort_header("benchmark"),
        _sort_header("subset"),
        _sort_header("model"),
        _sort_header("model accuracy", numeric=True),
        _sort_header("best blind baseline"),
        _sort_header("best blind accuracy", numeric=True),
        _sort_header("exact cycles", numeric=True),
        _sort_header("CycleAcc of exact cycles", numeric=True),
        _sort_header("blind beats model"),
    ]
    rows = []
    for row in data.benchmarks:
        wins = row.blind_beats_model
        rows.append(
            f'<tr class="{"blind-wins" if wins else ""}" data-benchmark="{escape(row.benchmark)}" '
            f'data-subset="{escape(row.subset)}">'
            f'<th scope="row">{escape(row.benchmark)}</th><td>{escape(row.subset)}</td><td>{escape(row.model)}</td>'
            f'<td class="num" data-value="{_value(row.model_acc)}">{_f(row.model_acc)}</td>'
            f"<td>{escape(str(row.best_blind or 'n/a'))}</td>"
            f'<td class="num" data-value="{_value(row.best_blind_acc)}">{_f(row.best_blind_acc)}</td>'
            f'<td class="num" data-value="{row.n_cycles if isinstance(row.n_cycles, int) else ""}">{row.n_cycles}</td>'
            f'<td class="num" data-value="{_value(row.cycle_acc)}">{_f(row.cycle_acc)}</td>'
            f'<td data-value="{"yes" if wins else "no"}">{WARN_YES if wins else "no"}</td></tr>'
        )
    return (
        '<table id="benchmarks-table" class="sortable">\n'
        "<caption>A blind baseline scores without looking at the image-caption pairing (caption length, a "
        "caption-only or image-only probe). \u26a0 with a hatched row: a blind score beats the model, its paired "
        "interval over items above 0 (records without one: reaches or beats it), so the benchmark can be passed "
        "without the pairing.</caption>\n"
        "<thead><tr>" + "".join(head) + "</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"
    )


def attribute_tables(data: PageData) -> str:
    """F1 selectivity and CS per strategy, one table per result, with the protocol named."""
    if not data.attributes:
        return '<p class="note">No attribute-split results among the inputs.</p>'
    parts = []
    for n, result in enumerate(data.attributes):
        rows = []
        for name in sorted(result["strategies"]):
            strategy = result["strategies"][name] or {}
            f1, cs = strategy.get("f1_selectivity"), strategy.get("cs")
            f1_mean = f1.get("mean") if isinstance(f1, dict) else f1
            cs_mean = cs.get("mean") if isinstance(cs, dict) else cs
            rows.append(
                f'<tr><th scope="row">{escape(name)}</th>'
                f'<td class="num" data-value="{_value(f1_mean)}">{_f(f1_mean, 2)}</td>'
                f'<td class="num" data-value="{_value(cs_mean)}">{_f(cs_mean, 3)}</td></tr>'
            )
        parts.append(
            f'<table id="attributes-{n}" class="sortable">\n<caption>{escape(result["model"])}: protocol: '
            f"{escape(result['protocol'])} ({escape(result['file'])})</caption>\n<thead><tr>"
            + _sort_header("strategy")
            + _sort_header("F1 selectivity", numeric=True)
            + _sort_header("CS", numeric=True)
            + "</tr></thead>\n<tbody>\n"
            + "\n".join(rows)
            + "\n</tbody>\n</table>"
        )
    return "\n".join(parts)


def index_page(data: PageData) -> str:
    skipped = "".join(f"<li><code>{escape(p)}</code>: {escape(r)}</li>" for p, r in sorted(data.skipped.items()))
    inputs = ", ".join(f"<code>{escape(i)}</code>" for i in data.inputs)
    body = (
        "<h1>clip_cycles results</h1>\n"
        f'<p class="note">Read from {inputs}. Models: {len(data.models)}; families: {len(data.family_keys())}; '
        f"benchmarks: {len(data.benchmark_rows())}.</p>\n"
        '<section aria-labelledby="lb"><h2 id="lb">Leaderboard</h2>\n' + leaderboard(data) + "\n</section>\n"
        '<section aria-labelledby="benchmarks"><h2 id="benchmarks">Benchmark audits</h2>\n'
        + benchmark_table(data)
        + "\n</section>\n"
        '<section aria-labelledby="attributes"><h2 id="attributes">Attribute splits</h2>\n'
        + attribute_tables(data)
        + "\n</section>\n"
        f'<section aria-labelledby="skipped"><h2 id="skipped">Inputs not shown ({len(data.skipped)})</h2>\n'
        + (f"<ul>{skipped}</ul>" if skipped else '<p class="note">Every input file was read.</p>')
        + "\n</section>"
    )
    return _document("clip_cycles results", body)


# --------------------------------------------------------------------------- family pages


def _line_svg(xs: Sequence[float], ys: Sequence[float], label: str) -> str:
    """A small log2-x line chart in [0, 1] with the chance line, as inline SVG."""
    width, height, pad = 320, 160, 28
    lx = [math.log2(x) for x in xs]
    lo, hi = min(lx), max(lx) if max(lx) > min(lx) else min(lx) + 1

    def px(x: float) -> float:
        return pad + (math.log2(x) - lo) / (hi - lo) * (width - 2 * pad)

    def py(y: float) -> float:
        return height - pad - y * (height - 2 * pad)

    points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys) if y is not None)
    ticks = "".join(f'<text x="{px(x):.1f}" y="{height - 8}" text-anchor="middle">{x:g}</text>' for x in xs)
    return (
        f'<svg role="img" aria-label="{escape(label)}" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
        f'<line x1="{pad}" x2="{width - pad}" y1="{py(0.5):.1f}" y2="{py(0.5):.1f}" stroke="#000" stroke-dasharray="3 3"/>'
        f'<text x="{width - pad + 2}" y="{py(0.5) + 3:.1f}">0.5</text>'
        f'<text x="2" y="{py(0.0) + 3:.1f}">0</text><text x="2" y="{py(1.0) + 3:.1f}">1</text>'
        f'<line x1="{pad}" x2="{pad}" y1="{py(0.0):.1f}" y2="{py(1.0):.1f}" stroke="#888"/>'
        f'<polyline fill="none" stroke="#1f5fa8" stroke-width="2" points="{points}"/>'
        + "".join(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="#1f5fa8"/>' for x, y in zip(xs, ys) if y is not None)
        + ticks
        + f'<text x="{pad}" y="12">{escape(label)}</text></svg>'
    )


def _bars_svg(labels: Sequence[str], values: Sequence[float | None], label: str) -> str:
    """Horizontal bars in [0, 1], one per label, with the chance line; a missing value is drawn as "n/a"."""
    left, width, row = 210, 600, 14
    height = 24 + row * len(labels)
    bars = []
    for i, (name, value) in enumerate(zip(labels, values)):
        y = 18 + i * row
        bars.append(f'<text x="{left - 4}" y="{y + 9}" text-anchor="end">{escape(name)}</text>')
        if value is None:
            bars.append(f'<text x="{left + 2}" y="{y + 9}">n/a</text>')
        else:
            length = max(0.0, min(1.0, value)) * (width - left - 30)
            bars.append(f'<rect x="{left}" y="{y}" width="{length:.1f}" height="10" fill="#1f5fa8"/>')
    chance = left + 0.5 * (width - left - 30)
    return (
        f'<svg role="img" aria-label="{escape(label)}" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
        f'<text x="0" y="10">{escape(label)}</text>'
        + "".join(bars)
        + f'<line x1="{chance:.1f}" x2="{chance:.1f}" y1="14" y2="{height}" stroke="#000" stroke-dasharray="3 3"/>'
        f'<text x="{chance + 2:.1f}" y="{height - 2}">0.5</text></svg>'
    )


def _rank_sweep(data: PageData, key: str) -> str:
    parts = []
    for model in sorted(data.experiments):
        probe = data.experiments[model].get("probe")
        fam = (probe or {}).get("families", {}).get(key)
        if not fam:
            continue
        if not fam.get("available"):
            parts.append(f"<p>{escape(model)}: rank sweep unavailable: {escape(str(fam.get('unavailable_reason', '')))}</p>")
            continue
        sweep = fam["rank_sweep"]
        rows = "".join(
            f'<tr><th scope="row">{r}</th><td class="num" data-value="{_value(m)}">{_f(m)}</td><td class="num">{_f(s)}</td></tr>'
            for r, m, s in zip(sweep["ranks"], sweep["mean"], sweep["sd"])
        )
        parts.append(
            f"<h3>Rank sweep: {escape(model)}</h3>"
            + _line_svg(sweep["ranks"], sweep["mean"], "test CycleAcc of the low-rank probe against rank")
            + f'<table class="rank-sweep"><caption>Low-rank probe, exact test CycleAcc (mean, sd over seeds '
            f'{escape(str(probe.get("seeds")))})</caption><thead><tr><th scope="col">rank</th>'
            '<th scope="col">mean</th><th scope="col">sd</th></tr></thead><tbody>' + rows + "</tbody></table>"
        )
    return "\n".join(parts)


def _transfer(data: PageData, key: str) -> str:
    parts = []
    for model in sorted(data.experiments):
        transfer = data.experiments[model].get("transfer")
        if not transfer or key not in transfer.get("families", []):
            continue
        names = transfer["families"]
        i = names.index(key)
        matrix = transfer["mean"]["transfer"]
        rows = "".join(
            f'<tr><th scope="row">{escape(other)}</th><td class="num" data-value="{_value(matrix[i][j])}">{_f(matrix[i][j])}</td>'
            f'<td class="num" data-value="{_value(matrix[j][i])}">{_f(matrix[j][i])}</td></tr>'
            for j, other in enumerate(names)
        )
        figure = _bars_svg(names, [matrix[i][j] for j in range(len(names))], f"a probe trained on {key}, tested on each family")
        parts.append(
            f"<h3>Transfer: {escape(model)}</h3>{figure}"
            '<table class="transfer sortable"><caption>Mean transfer CycleAcc: a probe '
            f"trained on {escape(key)} tested on each family, and trained on each family tested on {escape(key)}.</caption>"
            "<thead><tr>"
            + _sort_header("family")
            + _sort_header(f"trained on {key}", numeric=True)
            + _sort_header(f"tested on {key}", numeric=True)
            + "</tr></thead><tbody>"
            + rows
            + "</tbody></table>"
        )
    return "\n".join(parts)


def _build_facts(data: PageData, key: str, examples: Iterable[FamilyExamples]) -> str:
    """Counts and exclusions by reason from the build_info.json of the folder the family was read from."""
    info = data.families.get(key)
    if info is None:
        return '<p class="note">Not a registered family: no predicate or build facts.</p>'
    found: list[tuple[str, dict[str, Any]]] = [(e.folder, e.build_info) for e in examples]
    found += [(folder, b) for folder, b in data.builds if b.get("source") == info.builder]
    seen, parts = set(), []
    for folder, build in found:
        fam = build.get("families", {}).get(info.family)
        if folder in seen or not isinstance(fam, dict):
            continue
        seen.add(folder)
        counts = fam.get("counts", {})
        splits = sorted({s for per in counts.values() for s in per})
        count_rows = "".join(
            f'<tr><th scope="row">seed {escape(seed)}</th>'
            + "".join(f'<td class="num">{counts[seed].get(s, 0)}</td>' for s in splits)
            + "</tr>"
            for seed in sorted(counts)
        )
        excluded = fam.get("excluded", {})
        excluded_rows = "".join(
            f'<tr><th scope="row">{escape(reason)}</th><td class="num">{n}</td></tr>' for reason, n in sorted(excluded.items())
        )
        thresholds = dict(build.get("thresholds", {}))
        if "min_cycles" in build:
            thresholds["min_cycles"] = build["min_cycles"]
        parts.append(
            f"<p>Built folder <code>{escape(folder)}</code> (source {escape(str(build.get('source')))}); "
            f"thresholds: {escape(json.dumps(thresholds, sort_keys=True))}; available splits: "
            f"{escape(', '.join(fam.get('available_splits', [])) or 'none')}.</p>"
            '<table class="counts"><caption>Cycles per seed and split</caption><thead><tr><th scope="col">seed</th>'
            + "".join(f'<th scope="col">{escape(s)}</th>' for s in splits)
            + "</tr></thead><tbody>"
            + count_rows
            + "</tbody></table>"
            + '<table class="excluded"><caption>Candidates excluded, by reason</caption><thead><tr>'
            '<th scope="col">reason</th><th scope="col">count</th></tr></thead><tbody>'
            + (excluded_rows or '<tr><td colspan="2">none</td></tr>')
            + "</tbody></table>"
        )
    return "\n".join(parts) or '<p class="note">No build_info.json of this family among the inputs.</p>'


def _example_html(example: ExampleCycle, thumbs: Sequence[str], key: str) -> str:
    (s11, s12), (s21, s22) = example.scores
    figures = "".join(
        f'<figure><img src="../thumbs/{escape(thumb)}" alt="{escape(caption)}" width="96" height="96">'
        f"<figcaption>image {n + 1}, matched caption {n + 1}: {escape(caption)}</figcaption></figure>"
        for n, (thumb, caption) in enumerate(zip(thumbs, example.captions))
    )

    def score(value: float, name: str) -> str:
        return f'<td class="num score" data-score="{name}" data-value="{_value(value)}">{value:.4f}</td>'

    return (
        f'<article class="cycle" data-kind="{example.kind}" data-cycle-id="{escape(example.cycle_id)}" '
        f'data-family="{escape(key)}" data-seed="{example.seed}" data-split="{escape(example.split)}">'
        f'<p class="kind">{escape(example.kind)} \u00b7 {escape(example.cycle_id)}</p><div class="pair">{figures}</div>'
        '<table class="block"><caption>Cosine scores (row: image, column: caption)</caption><thead><tr><td></td>'
        '<th scope="col">caption 1</th><th scope="col">caption 2</th></tr></thead><tbody>'
        f'<tr><th scope="row">image 1</th>{score(s11, "s11")}{score(s12, "s12")}</tr>'
        f'<tr><th scope="row">image 2</th>{score(s21, "s21")}{score(s22, "s22")}</tr></tbody></table>'
        "<p>Delta = s11 + s22 - s12 - s21 = "
        f'<span class="delta" data-value="{_value(example.delta)}">{example.delta:.4f}</span>; '
        f'credit <span class="credit" data-value="{_value(example.credit)}">{example.credit:g}</span></p></article>'
    )


def family_page(data: PageData, key: str, examples: Sequence[FamilyExamples], thumbs: dict[str, str]) -> str:
    """One family: what it tests, where its cycles come from, each model's CycleAcc, figures and example cycles."""
    info = data.families.get(key)
    about = (
        f"<p><strong>Predicate.</strong> {escape(info.predicate)}</p>"
        f'<p><strong>Provenance.</strong> <span class="{"paper" if info.paper else ""}">{STAR if info.paper else ""}'
        f"{escape(info.provenance)}</span>; family <code>{escape(info.family)}</code> of the {escape(info.builder.upper())} "
        f"builder on the {escape(info.source)} source.</p>"
        if info
        else '<p class="note">Not a registered family.</p>'
    )
    family_rows = [row for row in data.family_rows() if data.family_of(row) == key]
    rows = []
    for row in family_rows:
        for model in data.models:
            cell = data.cells.get((row, model))
            if cell is None:
                continue
            rows.append(
                f'<tr data-row="{escape(row)}"><th scope="row">{escape(model)}</th>'
                f"{_item_set_cell(data.item_set(row), key)}{_acc_cell(cell)}{_verdict_cell(cell)}"
                f'<td class="num">{cell.n_cycles if cell.n_cycles is not None else "n/a"}</td></tr>'
            )
    scores = (
        '<table id="family-scores"><caption>Zero-shot CycleAcc (mean over seeds, 95% interval) and the additive audit; '
        'rows of different item sets are not one comparison</caption><thead><tr><th scope="col">model</th>'
        '<th scope="col">item set</th><th scope="col">CycleAcc</th><th scope="col">audit</th>'
        '<th scope="col">cycles</th></tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table>"
        + item_set_notes_html([n for n in data.notes if n.startswith(f"{key}:")])
    )
    worlds = "; ".join(
        f"<code>{escape(data.item_set(row).label(key))}</code>: {escape(data.item_set(row).describe())}" for row in family_rows
    )
    about += f'<p class="item-set-line"><strong>Item set.</strong> {worlds or "no result of this family"}.</p>'
    example_parts = []
    for entry in examples:
        if entry.unavailable_reason:
            example_parts.append(f"<p>{escape(entry.model)}: no example cycles: {escape(entry.unavailable_reason)}</p>")
            continue
        items = "".join(_example_html(e, [thumbs[i.key] for i in e.images], key) for e in entry.examples)
        label = data.item_set(entry.row or key).label(key)
        example_parts.append(
            f'<h3>{escape(entry.model)} \u00b7 {escape(label)}</h3><p class="note">'
            f"The {sum(e.kind == 'hardest' for e in entry.examples)} "
            "lowest-Delta (hardest) and highest-Delta (easiest) cycles of the first seed's scored split and a seeded "
            f"random sample; scores recomputed from the cached features; tie tolerance {entry.tie_tolerance:g}.</p>"
            f'<div class="examples" data-folder="{escape(entry.folder)}">{items}</div>'
        )
    if not examples:
        example_parts.append(
            '<p class="note">No example cycles: give the model flags to <code>clip-cycles page</code> '
            "(or run <code>clip-cycles demo</code>) to recompute blocks from the feature cache.</p>"
        )
    body = (
        f'<h1>Family {escape(key)}</h1>\n<section aria-labelledby="about"><h2 id="about">What it tests</h2>{about}'
        + _build_facts(data, key, examples)
        + "</section>\n"
        + f'<section aria-labelledby="scores"><h2 id="scores">Scores</h2>{scores}</section>\n'
        + '<section aria-labelledby="figures"><h2 id="figures">Rank sweep and transfer</h2>'
        + (_rank_sweep(data, key) + _transfer(data, key) or '<p class="note">No probe or transfer results for this family.</p>')
        + "</section>\n"
        + '<section aria-labelledby="cycles"><h2 id="cycles">Example cycles</h2>'
        + "".join(example_parts)
        + "</section>"
    )
    return _document(f"clip_cycles: {key}", body, depth=1)


# --------------------------------------------------------------------------- building and writing


def check_recomputed(data: PageData, examples: dict[str, FamilyExamples], tolerance: float = 1e-9) -> None:
    """Refuse examples whose recomputed CycleAcc differs from the record's: they would be of other features or data.

    ``examples`` is keyed by leaderboard row (a family key, or ``<family>@<12 hex>``).
    """
    for key, entry in sorted(examples.items()):
        cell = data.cells.get((key, entry.model))
        if cell is None or cell.cycle_acc is None or entry.cycle_acc is None:
            continue
        if abs(entry.cycle_acc - cell.cycle_acc) > tolerance:
            raise ValueError(
                f"{cell.source_file}: family {key} of {entry.model} records cycle_acc {cell.cycle_acc!r}, but its cycles "
                f"in {entry.folder} (seeds {list(entry.seeds)}, item set: {cell.item_set.describe()}) recompute to "
                f"{entry.cycle_acc!r} with the cached features; "
                "the results come from other data or weights: re-run the evaluation, or build the page without model flags"
            )


def apply_bootstrap(data: PageData, examples: dict[str, FamilyExamples]) -> None:
    """Cells without a recorded ``cycle_acc_ci`` get the page builder's bootstrap interval, named as such."""
    for key, entry in examples.items():
        cell = data.cells.get((key, entry.model))
        if cell is not None and cell.ci is None and entry.bootstrap is not None:
            cell.ci = entry.bootstrap
            cell.ci_note = entry.bootstrap["computed_by"]


def build_site(data: PageData, examples: dict[str, list[FamilyExamples]] | None = None) -> Site:
    """Every file of the page in memory."""
    examples = examples or {}
    site = Site()
    for name in ASSETS:
        site.add(f"assets/{name}", resources.files("clip_cycles.evaluation").joinpath("page_assets", name).read_bytes())
    thumbs: dict[str, str] = {}
    for entries in examples.values():
        for entry in entries:
            for example in entry.examples:
                for item in example.images:
                    if item.key not in thumbs:
                        name, content = thumbnail(item)
                        thumbs[item.key] = name
                        site.add(f"thumbs/{name}", content)
    site.add("index.html", index_page(data))
    for key in data.family_keys():
        site.add(f"families/{key}.html", family_page(data, key, examples.get(key, []), thumbs))
    manifest = {
        path: {"bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()} for path, content in site.files.items()
    }
    site.add(MANIFEST, json.dumps({"files": dict(sorted(manifest.items()))}, indent=2, sort_keys=True) + "\n")
    return site


def write_site(site: Site, out: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Path:
    """Write ``site`` into ``out`` after checking the budget and that ``out`` holds nothing but an older page."""
    if site.size > max_bytes:
        raise ValueError(
            f"the page would take {site.size} bytes, over the budget of {max_bytes} (--max-bytes); "
            "show fewer example cycles (--examples) or raise --max-bytes"
        )
    out = check_path_length(out, "page --out")
    if out.exists():
        if not out.is_dir():
            raise ValueError(f"--out {out} is a file; give a folder for the page")
        manifest = out / MANIFEST
        if manifest.is_file():
            try:
                json.loads(manifest.read_text(encoding="utf-8")).get("files", {})  # only an older page is replaced
            except (ValueError, AttributeError) as error:
                raise ValueError(f"{manifest} is not a page manifest ({error}); remove it or choose another --out") from error
        elif any(out.iterdir()):
            raise ValueError(f"--out {out} holds files that no page wrote; choose an empty or new folder")
    root = out.resolve()
    outside = [path for path in site.files if root not in (root / path).resolve().parents]
    if outside:
        raise ValueError(f"page files {outside} would land outside --out {out}; refusing to write any")
    # One transaction: the new site is staged beside --out and swapped in whole, so a kill or a full
    # disk leaves the older page as it was; the older page's files (thumbnails, families) go with it.
    write_file_set(out, site.files, keep_others=False, what="page --out")
    return out / "index.html"


def build_page(
    inputs: Sequence[str | Path],
    out: str | Path,
    context: RunContext | None = None,
    n_examples: int = DEFAULT_EXAMPLES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    seed: int = 0,
) -> Path:
    """Read ``inputs``, recompute example cycles with ``context``'s model (if given), write the page; returns index.html."""
    if n_examples < 0:
        raise ValueError(f"--examples must be 0 or more, not {n_examples}")
    data = collect(inputs)
    if not data.cells and not data.benchmarks and not data.attributes:
        raise ValueError(f"no results found in {', '.join(map(str, inputs))} (skipped: {len(data.skipped)} files)")
    examples: dict[str, list[FamilyExamples]] = {}
    if context is not None and n_examples > 0:
        model = model_name(context.spec.model, context.spec.pretrained)
        if model not in data.models:
            raise ValueError(f"the model flags name {model}, which no input result holds; results hold {data.models}")
        # Each row is recomputed on the seeds, split and world its record scored, so examples and intervals match its
        # number: without --dataset-root the world its source names is reproduced, never a default one assumed.
        groups: dict[tuple[tuple[int, ...], str, str], list[str]] = {}
        roots: dict[str, Path | None] = {}
        for row in data.family_rows():
            key, cell = data.family_of(row), data.cells.get((row, model))
            if key not in data.families or cell is None or cell.cycle_acc is None:
                continue
            item, source = cell.item_set, cell.item_set.source or ""
            if context.dataset_root is None and source not in roots:
                roots[source] = world_root(item, page_world_cache(context))
            root = context.dataset_root if context.dataset_root is not None else roots[source]
            groups.setdefault((tuple(cell.seeds), item.split or "", str(root or "")), []).append(row)
        found: dict[str, FamilyExamples] = {}
        for (seeds, split, root), rows in sorted(groups.items()):
            run = dataclasses.replace(context, seeds=seeds or None, dataset_root=root or context.dataset_root)
            # A family twice in a group (item sets that differ only in what a build kept): one recomputation each.
            batches: list[dict[str, str]] = []
            for row in rows:
                batch = next((b for b in batches if data.family_of(row) not in b), None)
                if batch is None:
                    batches.append(batch := {})
                batch[data.family_of(row)] = row
            for by_key in batches:
                for key, entry in family_examples(run, list(by_key), model, n_examples, seed, split or None).items():
                    entry.row = by_key[key]
                    found[entry.row] = entry
        check_recomputed(data, found)
        apply_bootstrap(data, found)
        for row, entry in sorted(found.items()):
            examples.setdefault(data.family_of(row), []).append(entry)
    return write_site(build_site(data, examples), out, max_bytes)
