"""``clip-cycles page RESULTS... --out site/``: a static results page (HTML, CSS, a little vanilla JS).

The site opens from ``file://`` with no server and no network: every file it uses is in
the output folder (``index.html``, ``families/<family>.html``, ``models/<model>.html``,
``compare/<a>--<b>.html``, ``assets/page.css``, ``assets/page.js``, ``thumbs/*.jpg``,
``page_manifest.json``). The HTML is rendered from the Jinja2 templates in
``page_templates/`` with autoescaping on; this module only prepares the data they show:

- the leaderboard, models (rows) x families (columns, coarse -> strict, the paper's marked):
  a compact CycleAcc, its interval and chance marker per cell (Benjamini-Hochberg over the
  board), shaded by value, "=1" on the models tied for first, and an overall column
  (:func:`overall`, one joint interval from the samples) to sort by; a column's "view" link
  opens the family page (the board's calls: :mod:`clip_cycles.evaluation.board_calls`);
- the same numbers by family (families x models, the additive audit for family rows and the
  benchmark audit for ``audit/`` rows, each with its own symbols, explained once in a legend);
  an "item set" column names the world and split each row's numbers scored;
- a comparison page per pair of models: per family the paired difference of CycleAcc with
  its two-way image-cluster interval (:func:`clip_cycles.evaluation.compare.compare_family`),
  the verdicts adjusted with Holm over the families, and the joint overall difference, when
  both models' results name their per-cycle samples (``eval --samples``: path and sha256)
  and the samples are theirs (:func:`clip_cycles.evaluation.samples.pairing_problem`);
- the benchmark audit table, a page per family (predicate, provenance and order as the
  results recorded them, build facts, rank sweep and transfer charts with their numbers,
  example cycles read from the samples files), a page per model, and attribute-split results
  in the strategies' order.

The page reads, never recomputes: no model, no feature cache, no world; it imports neither
torch nor OpenCLIP nor the encoders and writes nothing outside ``--out``. Paths on the pages
are relative to the results given (:meth:`PageData.shown_path`); models are named by backend,
model and weights digest (:func:`clip_cycles.evaluation.page_data.model_name`), never a path.
Everything is assembled in memory and checked against the byte budget (``--max-bytes``)
before anything is written; the same inputs give byte-identical files.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import jinja2

from clip_cycles.algebra.multiplicity import COMPARISON_ADJUSTMENT, adjusted_verdicts
from clip_cycles.algebra.paired import MIN_CYCLES, MIN_IMAGES
from clip_cycles.attributes.splitters import STRATEGIES
from clip_cycles.data.sources.registry import provenance_label
from clip_cycles.evaluation.board_calls import adjusted_chance_calls, joint_mean, tied_with_best
from clip_cycles.evaluation.compare import compare_family, item_mismatch, joint_difference
from clip_cycles.evaluation.page_data import CHANCE, Cell, PageData, collect
from clip_cycles.evaluation.page_examples import ExampleCycle, FamilyExamples, examples_from_samples, thumbnail
from clip_cycles.evaluation.samples import MAX_SAMPLES_BYTES, pairing_problem, read_samples
from clip_cycles.experiments.item_sets import FIELD_NOT_RECORDED
from clip_cycles.outputs import check_path_length, write_file_set
from clip_cycles.regular_files import read_regular_file

#: The page's default byte budget (every file it writes, together).
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
#: Example cycles of each kind (hardest, easiest, random) per family and model.
DEFAULT_EXAMPLES = 3
#: Resamples of each paired comparison on the comparison pages.
COMPARE_RESAMPLES = 1000
MANIFEST = "page_manifest.json"
ASSETS = ("page.css", "page.js")
#: How the overall column is computed (shown on the page).
OVERALL_HOW = (
    "the mean of the model's family CycleAccs (each family weighs the same); its interval is one two-way "
    "image-cluster robust interval over every family's cycles at once (families of one world share images), "
    "from the per-cycle samples; a model without samples of every family keeps the families' half-widths added "
    "in quadrature (as if independent), marked \u2020."
)
#: The overall interval's title when no per-cycle samples allow the joint one.
QUADRATURE_HOW = "\u2020 families' interval half-widths in quadrature (as independent normal errors): no per-cycle samples"
#: Words of an adjusted chance marker (index page: Benjamini-Hochberg over every cell of the board).
ADJUSTED_POSITION = {
    "above": ("above", "\u25b2", "above chance (Benjamini-Hochberg over the board)"),
    "below": ("below", "\u25bc", "below chance (Benjamini-Hochberg over the board)"),
    "chance": ("chance", "\u25cf", "not separable from chance (Benjamini-Hochberg over the board)"),
}
#: Additive-audit verdicts (family rows) and benchmark-audit verdicts (``audit/`` rows): each its own symbols.
ADDITIVE_SYMBOL = {"passed": "\u2713", "failed": "\u2717", "unavailable": "\u2013", "not run": "\u00b7"}
BENCHMARK_SYMBOL = {
    "blind beats model": "\u2691",
    "model ahead": "\u25c6",
    "model above blind": "\u25c6",
    "within noise": "\u2248",
    "could not tell": "?",
    "too few comparisons": "\u2218",
    "not run": "\u00b7",
}
PAIRED_SYMBOL = {
    "A above B": "\u25b2",
    "B above A": "\u25bc",
    "within noise": "\u2248",
    "could not tell": "?",
    "too few comparisons": "\u2218",
}
NO_SAMPLES = "no per-cycle samples: run eval --samples"
SWEEP_TITLE = "Test CycleAcc of the low-rank probe against its rank"
_MARKUP = re.compile(r"``(.+?)``|`(.+?)`")


@dataclass
class Site:
    """The files of the page, path (relative, POSIX) -> bytes, before anything is written."""

    files: dict[str, bytes] = field(default_factory=dict)

    def add(self, path: str, content: str | bytes) -> None:
        self.files[path] = content.encode("utf-8") if isinstance(content, str) else content

    @property
    def size(self) -> int:
        return sum(len(v) for v in self.files.values())


# --------------------------------------------------------------------------- templates and formatting


def docstring_markup(text: Any) -> list[tuple[str, bool]]:
    """``text`` as (part, is literal) pieces: its reST literals (````x````) become ``<code>`` in the templates.

    The template escapes every part; no markup from a docstring or a file reaches the page as markup.
    """
    parts: list[tuple[str, bool]] = []
    text, last = str(text), 0
    for match in _MARKUP.finditer(text):
        parts += [(text[last : match.start()], False), (match.group(1) or match.group(2), True)]
        last = match.end()
    parts.append((text[last:], False))
    return [(part, literal) for part, literal in parts if part]


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("clip_cycles.evaluation", "page_templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def render(template: str, **context: Any) -> str:
    """One page from ``page_templates/<template>`` (autoescaped)."""
    return _ENV.get_template(template).render(min_cycles=MIN_CYCLES, overall_how=OVERALL_HOW, **context)


def _f(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _value(value: float | None) -> str:
    """The full-precision number in a ``data-value`` attribute (what tests and sorting read)."""
    return "" if value is None else repr(float(value))


def model_slug(model: str) -> str:
    """A file name for ``model``'s pages: its plain characters and a digest (two names never share one)."""
    plain = re.sub(r"[^A-Za-z0-9_.-]+", "-", model).strip("-.")[:48] or "model"
    return f"{plain}-{hashlib.sha256(model.encode('utf-8')).hexdigest()[:8]}"


def _ci_title(ci: Mapping[str, Any]) -> str:
    """Where an interval comes from: the record's ``cycle_acc_ci`` or the page builder's bootstrap."""
    what = f"{ci.get('level', '?')} {ci.get('method', '?')} interval"
    if "n_resamples" in ci or "df" not in ci:
        what += f", {ci.get('n_resamples', '?')} resamples of {ci.get('unit', '?')}s"
    else:  # a two-way image-cluster interval: no resampling
        what += f" over {ci.get('n_images', '?')} {ci.get('unit', 'images')}, {float(ci['df']):.1f} df"
    return f"{what}; {ci.get('computed_by', 'from the record (cycle_acc_ci)')}"


def _interval(low: float, high: float, title: str) -> dict[str, str]:
    return {"low": _f(low), "high": _f(high), "low_value": _value(low), "high_value": _value(high), "title": title}


def _position(cell: Cell) -> tuple[str, str, str]:
    """(css class, symbol, words) of a CycleAcc against chance: the interval above, including or below 0.5.

    Without an interval only the point is compared, and hollow symbols say so; below the
    declared minimum of cycles there is no chance marker at all ("too few cycles").
    """
    assert cell.cycle_acc is not None
    if cell.n_cycles is not None and cell.n_cycles < MIN_CYCLES:
        return "few", "\u2026", f"too few cycles ({cell.n_cycles} < {MIN_CYCLES}) for a chance marker"
    if cell.ci is None:
        if cell.cycle_acc == CHANCE:
            return "chance", "\u25cb", "at chance (point only, no interval)"
        if cell.cycle_acc > CHANCE:
            return "above", "\u25b3", "above chance (point only, no interval)"
        return "below", "\u25bd", "below chance (point only, no interval)"
    if cell.ci["low"] > CHANCE:
        return "above", "\u25b2", "above chance"
    if cell.ci["high"] < CHANCE:
        return "below", "\u25bc", "below chance"
    return "chance", "\u25cf", "indistinguishable from chance"


def acc_view(cell: Cell | None, call: str | None = None, tied: bool = False) -> dict[str, Any]:
    """What a CycleAcc cell shows (``missing``: not evaluated; ``unavailable``: a record without a number).

    ``call``: the chance marker adjusted over the board (:data:`ADJUSTED_POSITION`), else the
    cell's own interval decides; ``tied``: the model is tied for first in the family.
    """
    if cell is None:
        return {"missing": True}
    if cell.cycle_acc is None:
        return {"missing": False, "unavailable": True, "reason": cell.unavailable_reason or ""}
    css, symbol, words = ADJUSTED_POSITION[call] if call in ADJUSTED_POSITION else _position(cell)
    ci = _interval(cell.ci["low"], cell.ci["high"], _ci_title(cell.ci)) if cell.ci else None
    return {
        "missing": False,
        "unavailable": False,
        "css": css,
        "symbol": symbol,
        "label": words,
        "few": css == "few",
        "value": _value(cell.cycle_acc),
        "sd": _value(cell.sd),
        "acc": _f(cell.cycle_acc),
        "ci": ci,
        "ci_note": cell.ci_note,
        "bar": f"{max(0.0, min(1.0, cell.cycle_acc)) * 112:.1f}",
        "shade": max(0, min(10, round(cell.cycle_acc * 10))),
        "audit": cell.audit,
        "audit_mark": ADDITIVE_SYMBOL.get(cell.audit, "") if cell.audit in ("failed",) else "",
        "tied": tied,
    }


def verdict_view(cell: Cell | None) -> dict[str, str]:
    """The audit cell: the additive audit for a family row, the benchmark audit for an ``audit/`` row."""
    if cell is None or cell.cycle_acc is None and cell.audit == "not run":
        return {"css": "", "value": "", "note": "", "symbol": "\u00b7", "text": ""}
    benchmark = cell.family.startswith("audit/")
    symbols = BENCHMARK_SYMBOL if benchmark else ADDITIVE_SYMBOL
    kind = "benchmark audit" if benchmark else "additive audit"
    css = "verdict-failed" if cell.audit in ("failed", "blind beats model") else ""
    return {
        "css": f"{css} {'benchmark-verdict' if benchmark else 'additive-verdict'}".strip(),
        "value": cell.audit,
        "note": f"{kind}: {cell.audit_note}",
        "symbol": symbols.get(cell.audit, "?"),
        "text": cell.audit,
    }


def overall(data: PageData, model: str, rows: Sequence[str], samples: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The mean over ``rows`` (family rows) of ``model``'s CycleAcc, with :data:`OVERALL_HOW`'s interval."""
    cells = [data.cells.get((row, model)) for row in rows]
    scored = [c for c in cells if c is not None and c.cycle_acc is not None]
    if not scored:
        return None
    k = len(scored)
    mean = sum(c.cycle_acc for c in scored) / k  # type: ignore[misc]
    ci = None
    tasks = (samples or {}).get(model, {}).get("tasks", {})
    # The samples are keyed by the board's rows (find_samples), as every reader of them here.
    names = [row for row, c in zip(rows, cells) if c is not None and c.cycle_acc is not None]
    if names and all(name in tasks for name in names):
        joint = joint_mean({name: tasks[name] for name in names})
        # Centred on the samples' mean over families of the mean over seeds: the records' statistic.
        ci = _interval(joint["low"], joint["high"], f"{joint['level']:g} {joint['method']}")
        return {"value": _value(mean), "acc": _f(mean), "ci": ci, "k": k, "mean": mean, "joint": True, "names": names}
    if all(c.ci is not None for c in scored):
        low = mean - math.sqrt(sum((c.cycle_acc - c.ci["low"]) ** 2 for c in scored)) / k  # type: ignore[index,operator]
        high = mean + math.sqrt(sum((c.ci["high"] - c.cycle_acc) ** 2 for c in scored)) / k  # type: ignore[index,operator]
        ci = _interval(low, high, QUADRATURE_HOW)
    return {"value": _value(mean), "acc": _f(mean), "ci": ci, "k": k, "mean": mean, "joint": False}


#: The overall cells of one site, by (model, rows): the board and each model's page show the same one
#: (its joint interval is the page's costliest number), so a build computes each once.
Overalls = dict[tuple[str, tuple[str, ...]], "dict[str, Any] | None"]


def _overall_of(
    data: PageData, model: str, rows: Sequence[str], samples: Mapping[str, Any] | None, memo: Overalls | None
) -> dict[str, Any] | None:
    """:func:`overall`, read from ``memo`` when this build computed it already (None: computed)."""
    if memo is None:
        return overall(data, model, rows, samples)
    key = (model, tuple(rows))
    if key not in memo:
        memo[key] = overall(data, model, rows, samples)
    return memo[key]


def _item_view(data: PageData, row: str) -> dict[str, str]:
    item, key = data.item_set(row), data.family_of(row)
    return {"label": item.label(key), "describe": item.describe()}


# --------------------------------------------------------------------------- index page


def _family_group(key: str, info: Any) -> str:
    """The group a family's column or row sits in: its builder and source, or an audited benchmark."""
    if key.startswith("audit/"):
        return "benchmark (exact cycles found)"
    if info is None or not info.recorded:
        return f"family facts {FIELD_NOT_RECORDED}"
    return provenance_label(info.builder, info.source)


def _columns(data: PageData) -> list[dict[str, Any]]:
    columns = []
    for row in data.family_rows():
        key = data.family_of(row)
        info = data.families.get(key)
        paper = bool(info and info.paper)
        columns.append({"row": row, "key": key, "label": row, "paper": paper, "group": _family_group(key, info)})
    return columns


def _column_groups(columns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of neighbouring board columns of one group, ``{"label", "span"}``, for the header row above them."""
    groups: list[dict[str, Any]] = []
    for column in columns:
        if groups and groups[-1]["label"] == column["group"]:
            groups[-1]["span"] += 1
        else:
            groups.append({"label": column["group"], "span": 1})
    return groups


def board_calls(data: PageData, samples: Mapping[str, Any]) -> tuple[dict[Any, str], set[tuple[str, str]]]:
    """The board's adjusted chance calls per (row, model), and the (row, model) cells tied for first in their family."""
    rows = data.family_rows()
    calls = adjusted_chance_calls({(row, model): data.cells.get((row, model)) for row in rows for model in data.models})
    tasks_of = {model: entry.get("tasks", {}) for model, entry in samples.items()}
    tied: set[tuple[str, str]] = set()
    for row in rows:
        scores = {m: c.cycle_acc for m in data.models if (c := data.cells.get((row, m))) is not None and c.cycle_acc is not None}
        found = tied_with_best(scores, tasks_of, [row])
        if len(found) > 1:  # one model alone is first, not tied
            tied |= {(row, m) for m in found}
    return calls, tied


def _board(
    data: PageData,
    samples: Mapping[str, Any],
    calls: Mapping[Any, str],
    tied: set[tuple[str, str]],
    memo: Overalls | None = None,
) -> list[dict[str, Any]]:
    rows = data.family_rows()
    overalls = {model: _overall_of(data, model, rows, samples, memo) for model in data.models}
    full = {m: o for m, o in overalls.items() if o is not None and o.get("joint") and o["k"] == len(rows)}
    tasks_of = {model: entry.get("tasks", {}) for model, entry in samples.items()}
    names = next(iter(full.values()))["names"] if full else []
    tied_overall = tied_with_best({m: o["mean"] for m, o in full.items()}, tasks_of, names) if full else set()
    return [
        {
            "model": model,
            "slug": model_slug(model),
            "overall": overalls[model],
            "tied": model in tied_overall and len(tied_overall) > 1,
            "cells": [acc_view(data.cells.get((row, model)), calls.get((row, model)), (row, model) in tied) for row in rows],
        }
        for model in data.models
    ]


def _family_table_rows(data: PageData, calls: Mapping[Any, str] | None = None) -> list[dict[str, Any]]:
    calls = calls or {}
    out = []
    for row in data.family_rows() + data.benchmark_rows():
        key = data.family_of(row)
        info = data.families.get(key)
        group = _family_group(key, info)
        if key.startswith("audit/"):
            provenance = "audited benchmark"
        else:
            provenance = info.provenance if info else FIELD_NOT_RECORDED
        cells = [data.cells.get((row, model)) for model in data.models]
        out.append(
            {
                "row": row,
                "key": key,
                "link": not key.startswith("audit/"),
                "item": _item_view(data, row),
                "group": group,
                "provenance": docstring_markup(provenance),
                "paper": bool(info and info.paper),
                "cells": [
                    {"acc": acc_view(c, calls.get((row, model))), "verdict": verdict_view(c)}
                    for c, model in zip(cells, data.models)
                ],
            }
        )
    return out


def _benchmarks(data: PageData) -> list[dict[str, Any]]:
    return [
        {
            "benchmark": b.benchmark,
            "subset": b.subset,
            "model": b.model,
            "model_acc": _f(b.model_acc),
            "model_acc_value": _value(b.model_acc),
            "best_blind": str(b.best_blind or "n/a"),
            "blind_acc": _f(b.best_blind_acc),
            "blind_acc_value": _value(b.best_blind_acc),
            "blind_ci": f"{_f(b.best_blind_ci[0])}–{_f(b.best_blind_ci[1])}" if b.best_blind_ci else "n/a",
            "blind_ci_value": _value(b.best_blind_ci[0]) if b.best_blind_ci else "",
            "n": b.n_comparisons if isinstance(b.n_comparisons, int) else "n/a",
            "n_value": b.n_comparisons if isinstance(b.n_comparisons, int) else "",
            "bow": _f(b.bag_of_words_ceiling),
            "bow_value": _value(b.bag_of_words_ceiling),
            "length": _f(b.length_ceiling),
            "length_value": _value(b.length_ceiling),
            "n_cycles": b.n_cycles,
            "n_cycles_value": b.n_cycles if isinstance(b.n_cycles, int) else "",
            "cycle_acc": _f(b.cycle_acc),
            "cycle_acc_value": _value(b.cycle_acc),
            "wins": b.blind_beats_model,
            "verdict": b.blind_verdict,
        }
        for b in data.benchmarks
    ]


def strategy_order(names: Iterable[str]) -> list[str]:
    """Strategy names in the strategies' own order (the registry's), unknown names after them by name."""
    known = list(STRATEGIES)
    return sorted(names, key=lambda n: (known.index(n) if n in known else len(known), n))


def _attributes(data: PageData) -> list[dict[str, Any]]:
    tables = []
    for result in data.attributes:
        rows = []
        for name in strategy_order(result["strategies"]):
            strategy = result["strategies"][name] or {}
            f1, cs = strategy.get("f1_selectivity"), strategy.get("cs")
            f1_mean = f1.get("mean") if isinstance(f1, dict) else f1
            cs_mean = cs.get("mean") if isinstance(cs, dict) else cs
            rows.append(
                {"name": name, "f1": _f(f1_mean, 2), "f1_value": _value(f1_mean), "cs": _f(cs_mean), "cs_value": _value(cs_mean)}
            )
        tables.append(
            {"model": result["model"], "protocol": result["protocol"], "file": data.shown_path(result["file"]), "rows": rows}
        )
    return tables


def _pair_file(a: str, b: str) -> str:
    return f"{model_slug(a)}--{model_slug(b)}.html"


def index_page(data: PageData, samples: Mapping[str, Any], overalls: Overalls | None = None) -> str:
    """The index: the models x families leaderboard, the family table, comparisons, benchmarks, attributes, skipped.

    ``overalls``: the build's memo of overall cells (shared with :func:`model_page`)."""
    pairs = [
        {
            "a": a,
            "b": b,
            "file": _pair_file(a, b),
            "samples": bool(samples.get(a, {}).get("tasks")) and bool(samples.get(b, {}).get("tasks")),
        }
        for a, b in itertools.combinations(data.models, 2)
    ]
    columns = _columns(data)
    calls, tied = board_calls(data, samples)
    return render(
        "index.html",
        title="clip_cycles results",
        up="",
        inputs=[data.shown_path(i) for i in data.inputs],
        n_models=len(data.models),
        n_families=len(data.family_keys()),
        n_benchmarks=len(data.benchmark_rows()),
        columns=columns,
        column_groups=_column_groups(columns),
        board=_board(data, samples, calls, tied, overalls),
        models=data.models,
        rows=_family_table_rows(data, calls),
        notes=data.notes,
        pairs=pairs,
        benchmarks=_benchmarks(data),
        attributes=_attributes(data),
        skipped=[{"path": data.shown_path(p), "reason": r} for p, r in sorted(data.skipped.items())],
    )


# --------------------------------------------------------------------------- charts


def _nice_ticks(n: int = 10) -> list[float]:
    return [i / n for i in range(n + 1)]


def line_chart(xs: Sequence[float], ys: Sequence[float | None], label: str, xlabel: str, ylabel: str) -> dict[str, Any]:
    """Geometry of a log2-x line chart in [0, 1]: axes, ticks at every x and every 0.1, the chance line."""
    width, height, left, right, top, bottom = 640, 340, 64, 560, 30, 280
    lx = [math.log2(x) for x in xs]
    lo = min(lx)
    hi = max(lx) if max(lx) > lo else lo + 1

    def px(x: float) -> float:
        return left + (math.log2(x) - lo) / (hi - lo) * (right - left)

    def py(y: float) -> float:
        return bottom - y * (bottom - top)

    dots = [{"x": f"{px(x):.1f}", "y": f"{py(y):.1f}"} for x, y in zip(xs, ys) if y is not None]
    return {
        "label": label,
        "xlabel": xlabel,
        "ylabel": ylabel,
        "width": width,
        "height": height,
        "left": left,
        "right": right,
        "top": top,
        "bottom": bottom,
        "chance": round(py(CHANCE), 1),
        "points": " ".join(f"{d['x']},{d['y']}" for d in dots),
        "dots": dots,
        "xticks": [{"x": f"{px(x):.1f}", "text": f"{x:g}"} for x in xs],
        "yticks": [{"y": round(py(t), 1), "text": f"{t:.1f}"} for t in _nice_ticks()],
    }


def heatmap(names: Sequence[str], matrix: Sequence[Sequence[float | None]], label: str) -> dict[str, Any]:
    """Geometry of a transfer heatmap (rows trained on, columns tested on) with a value scale of 11 shades."""
    cell = 44
    left = 12 + 7 * max((len(n) for n in names), default=4)
    top = 40 + int(5 * max((len(n) for n in names), default=4))
    width = left + cell * len(names) + 40
    height = top + cell * len(names) + 96
    rows = []
    for i, name in enumerate(names):
        cells = []
        for j, other in enumerate(names):
            value = matrix[i][j]
            shade = max(0, min(10, round(value * 10))) if value is not None else 0
            cells.append({"x": left + j * cell, "name": other, "text": _f(value, 2), "shade": shade})
        rows.append({"name": name, "y": top + i * cell, "cells": cells})
    step = 26
    return {
        "label": label,
        "width": max(width, left + 11 * step + 40, 8 * len(label)),
        "height": height,
        "left": left,
        "top": top,
        "cell": cell,
        "rows": rows,
        "columns": [{"x": left + j * cell + cell // 2, "name": n} for j, n in enumerate(names)],
        "step": step,
        "scale": [{"x": left + k * step, "shade": k, "text": f"{k / 10:.1f}"} for k in range(11)],
    }


def _sweeps(data: PageData, key: str) -> list[dict[str, Any]]:
    parts = []
    for model in sorted(data.experiments):
        probe = data.experiments[model].get("probe")
        fam = (probe or {}).get("families", {}).get(key)
        if not fam:
            continue
        if not fam.get("available"):
            parts.append({"model": model, "unavailable": str(fam.get("unavailable_reason", ""))})
            continue
        sweep = fam["rank_sweep"]
        parts.append(
            {
                "model": model,
                "unavailable": "",
                "seeds": str(probe.get("seeds")),
                "chart": line_chart(sweep["ranks"], sweep["mean"], SWEEP_TITLE, "probe rank (log scale)", "test CycleAcc"),
                "rows": [
                    {"rank": r, "mean": _f(m), "value": _value(m), "sd": _f(s)}
                    for r, m, s in zip(sweep["ranks"], sweep["mean"], sweep["sd"])
                ],
            }
        )
    return parts


def _transfers(data: PageData, key: str) -> list[dict[str, Any]]:
    parts = []
    for model in sorted(data.experiments):
        transfer = data.experiments[model].get("transfer")
        if not transfer or key not in transfer.get("families", []):
            continue
        names = transfer["families"]
        i = names.index(key)
        matrix = transfer["mean"]["transfer"]
        parts.append(
            {
                "model": model,
                "heatmap": heatmap(names, matrix, "Mean transfer CycleAcc of a probe trained on one family, tested on another"),
                "rows": [
                    {
                        "name": other,
                        "out": _f(matrix[i][j]),
                        "out_value": _value(matrix[i][j]),
                        "in_": _f(matrix[j][i]),
                        "in_value": _value(matrix[j][i]),
                    }
                    for j, other in enumerate(names)
                ],
            }
        )
    return parts


# --------------------------------------------------------------------------- family, model and comparison pages


def _builds(data: PageData, key: str) -> list[dict[str, Any]]:
    """Counts and exclusions by reason from the build_info.json files given with the results."""
    info = data.families.get(key)
    if info is None or not info.recorded:
        return []
    found = [(folder, b) for folder, b in data.builds if b.get("source") == info.builder]
    seen, parts = set(), []
    for folder, build in found:
        fam = build.get("families", {}).get(info.family)
        if folder in seen or not isinstance(fam, dict):
            continue
        seen.add(folder)
        counts = fam.get("counts", {})
        splits = sorted({s for per in counts.values() for s in per})
        thresholds = dict(build.get("thresholds", {}))
        if "min_cycles" in build:
            thresholds["min_cycles"] = build["min_cycles"]
        parts.append(
            {
                "folder": data.shown_path(folder),
                "source": str(build.get("source")),
                "thresholds": json.dumps(thresholds, sort_keys=True),
                "splits": ", ".join(fam.get("available_splits", [])) or "none",
                "split_names": splits,
                "counts": [{"seed": seed, "counts": [counts[seed].get(s, 0) for s in splits]} for seed in sorted(counts)],
                "excluded": [
                    {"reason": docstring_markup(reason), "n": n} for reason, n in sorted(fam.get("excluded", {}).items())
                ],
            }
        )
    return parts


def _example_view(example: ExampleCycle, thumbs: Sequence[str | None]) -> dict[str, Any]:
    (s11, s12), (s21, s22) = example.scores

    def score(value: float, name: str) -> dict[str, str]:
        return {"name": name, "value": _value(value), "text": f"{value:.4f}"}

    return {
        "kind": example.kind,
        "cycle_id": example.cycle_id,
        "seed": example.seed,
        "split": example.split,
        "figures": [
            {"thumb": t, "caption": c, "key": image.key} for t, c, image in zip(thumbs, example.captions, example.images)
        ],
        "score_rows": [[score(s11, "s11"), score(s12, "s12")], [score(s21, "s21"), score(s22, "s22")]],
        "delta": f"{example.delta:.4f}",
        "delta_value": _value(example.delta),
        "credit": f"{example.credit:g}",
        "credit_value": _value(example.credit),
    }


def family_page(data: PageData, key: str, examples: Sequence[FamilyExamples], thumbs: Mapping[str, str | None]) -> str:
    """One family: what it tests, where its cycles come from, each model's CycleAcc, figures and example cycles."""
    info = data.families.get(key)
    family_rows = [row for row in data.family_rows() if data.family_of(row) == key]
    scores = []
    for row in family_rows:
        for model in data.models:
            cell = data.cells.get((row, model))
            if cell is not None:
                scores.append(
                    {
                        "row": row,
                        "model": model,
                        "slug": model_slug(model),
                        "item": _item_view(data, row),
                        "acc": acc_view(cell),
                        "verdict": verdict_view(cell),
                        "n_cycles": cell.n_cycles if cell.n_cycles is not None else "n/a",
                    }
                )
    shown_info = None
    if info is not None and info.recorded:
        shown_info = {
            "predicate": docstring_markup(info.predicate),
            "provenance": docstring_markup(info.provenance),
            "paper": info.paper,
            "family": info.family,
            "builder": info.builder.upper(),
            "source": info.source,
        }
    example_views = []
    for entry in examples:
        if entry.unavailable_reason:
            example_views.append({"model": entry.model, "unavailable": entry.unavailable_reason})
            continue
        example_views.append(
            {
                "model": entry.model,
                "unavailable": "",
                "label": data.item_set(entry.row or key).label(key),
                "n_hardest": sum(e.kind == "hardest" for e in entry.examples),
                "samples": data.shown_path(entry.samples_file),
                "missing_images": sum(thumbs.get(i.key) is None for e in entry.examples for i in e.images),
                "cycles": [_example_view(e, [thumbs.get(i.key) for i in e.images]) for e in entry.examples],
            }
        )
    return render(
        "family.html",
        title=f"clip_cycles: {key}",
        up="../",
        key=key,
        info=shown_info,
        not_recorded=FIELD_NOT_RECORDED,
        worlds=[_item_view(data, row) for row in family_rows],
        builds=_builds(data, key),
        scores=scores,
        notes=[n for n in data.notes if n.startswith(f"{key}:")],
        sweeps=_sweeps(data, key),
        transfers=_transfers(data, key),
        examples=example_views,
    )


def model_page(data: PageData, model: str, samples: Mapping[str, Any] | None = None, overalls: Overalls | None = None) -> str:
    """One model: its CycleAcc on every family and benchmark, the audit, and the file each number was read from.

    ``overalls``: the build's memo of overall cells (shared with :func:`index_page`)."""
    rows = []
    for row in data.family_rows() + data.benchmark_rows():
        cell = data.cells.get((row, model))
        key = data.family_of(row)
        rows.append(
            {
                "row": row,
                "key": key,
                "link": not key.startswith("audit/"),
                "item": _item_view(data, row),
                "acc": acc_view(cell),
                "verdict": verdict_view(cell),
                "n_cycles": cell.n_cycles if cell is not None and cell.n_cycles is not None else "n/a",
                "source": data.shown_path(cell.source_file) if cell is not None else "",
            }
        )
    return render(
        "model.html",
        title=f"clip_cycles: {model}",
        up="../",
        model=model,
        overall=_overall_of(data, model, data.family_rows(), samples, overalls),
        rows=rows,
    )


def _read_named(path: str, sha256: str, data: PageData, files: dict[str, Any]) -> Any:
    """The parsed samples file at ``path`` (read once), or a string saying why it cannot be shown."""
    if path in files:
        return files[path]
    try:
        content = read_regular_file(path, MAX_SAMPLES_BYTES, "samples file")
    except FileNotFoundError:
        files[path] = f"the samples file the result names, {data.shown_path(path)}, is not there"
        return files[path]
    except (OSError, ValueError) as error:  # named as the page shows it, never by its machine path
        shown = str(error).replace(str(path), data.shown_path(path))
        files[path] = f"the samples file the result names is not readable ({shown})"
        return files[path]
    if hashlib.sha256(content).hexdigest() != sha256:
        files[path] = (
            f"samples file {data.shown_path(path)} is not the file the result names "
            f"(sha256 {hashlib.sha256(content).hexdigest()[:12]}, the result recorded {sha256[:12]})"
        )
    else:
        try:
            files[path] = read_samples(data.shown_path(path), content)
        except ValueError as error:
            files[path] = str(error)
    return files[path]


def find_samples(data: PageData) -> dict[str, dict[str, Any]]:
    """Model -> its per-cycle samples (``tasks``: task -> cycles; ``files``; ``rows``: row -> why none), as the records name them.

    Only the samples file a result names (``samples``: path relative to the record, and its sha256)
    is read, never a file found beside it. A file whose sha256 differs, that does not parse, or whose
    lines carry another item set or other weights than the result is not used, and the reason is
    named (in ``data.skipped`` and on the rows it would have served).
    """
    files: dict[str, Any] = {}
    found: dict[str, dict[str, Any]] = {}
    for (row, model), cell in sorted(data.cells.items()):
        if cell.family.startswith("audit/") or cell.cycle_acc is None:
            continue
        entry = found.setdefault(model, {"tasks": {}, "files": [], "rows": {}, "paths": {}})
        if cell.samples is None:
            entry["rows"][row] = f"the result names no samples file ({NO_SAMPLES})"
            continue
        path, sha256 = cell.samples
        parsed = _read_named(path, sha256, data, files)
        if isinstance(parsed, str):
            data.skipped[path] = parsed
            entry["rows"][row] = parsed
            continue
        task = f"cycles/{cell.family}"
        cycles = parsed.get(task)
        problem = (
            f"the samples file holds no cycle of {task}"
            if cycles is None
            else pairing_problem(cycles, cell.item_set.items_sha256, cell.weights_sha256)
        )
        if problem is not None:
            reason = f"{data.shown_path(path)} is not of this result: {problem}; shown apart, not used"
            data.skipped.setdefault(path, reason)
            entry["rows"][row] = reason
            continue
        entry["tasks"][row] = cycles
        entry["paths"][row] = path
        if data.shown_path(path) not in entry["files"]:
            entry["files"].append(data.shown_path(path))
    return {model: entry for model, entry in found.items() if entry["tasks"] or entry["rows"]}


def comparison(data: PageData, a: str, b: str, samples: Mapping[str, Any], seed: int = 0) -> dict[str, Any]:
    """The comparison page's data: per family row, the paired difference A - B or why there is none."""
    rows, cycles, compared = [], [], []
    for row in data.family_rows():
        key = data.family_of(row)
        cell_a, cell_b = data.cells.get((row, a)), data.cells.get((row, b))
        acc_a = cell_a.cycle_acc if cell_a is not None else None
        acc_b = cell_b.cycle_acc if cell_b is not None else None
        view: dict[str, Any] = {
            "key": row,
            "link": key in data.families or True,
            "acc_a": _f(acc_a),
            "acc_a_value": _value(acc_a),
            "acc_b": _f(acc_b),
            "acc_b_value": _value(acc_b),
            "diff": None,
            "css": "",
        }
        task = f"cycles/{key}"
        got_a = samples.get(a, {}).get("tasks", {}).get(row)
        got_b = samples.get(b, {}).get("tasks", {}).get(row)
        if acc_a is None or acc_b is None:
            view["reason"] = "not evaluated for both models"
        elif got_a is None or got_b is None:
            why = [
                f"{m}: {samples.get(m, {}).get('rows', {}).get(row, NO_SAMPLES)}"
                for m, got in ((a, got_a), (b, got_b))
                if got is None
            ]
            view["reason"] = "; ".join(why)
        elif (problem := item_mismatch(task, got_a, got_b)) is not None:
            view["reason"] = f"not the same cycles: {problem}"
        else:
            result = compare_family(got_a, got_b, n_resamples=COMPARE_RESAMPLES, seed=seed)
            compared.append((view, result, task, got_a, got_b))
            disagree = []
            for ident in result["disagree_most"]:
                seed_text, _, cycle_id = ident.partition("/")
                sample_a, sample_b = got_a[int(seed_text), cycle_id], got_b[int(seed_text), cycle_id]
                anchor = "c-" + hashlib.sha256(f"{row}\x00{ident}".encode()).hexdigest()[:12]
                disagree.append({"id": ident, "anchor": anchor})
                cycles.append(
                    {
                        "anchor": anchor,
                        "key": row,
                        "id": ident,
                        "caption_0": sample_a["caption_0"],
                        "caption_1": sample_a["caption_1"],
                        "credit_a": f"{sample_a['credit']:g}",
                        "credit_b": f"{sample_b['credit']:g}",
                        "delta_a": f"{float(sample_a.get('delta', math.nan)):.4f}",
                        "delta_b": f"{float(sample_b.get('delta', math.nan)):.4f}",
                    }
                )
            view.update(
                {
                    "diff": _f(result["diff"]),
                    "diff_value": _value(result["diff"]),
                    "low": _f(result["ci_low"]),
                    "high": _f(result["ci_high"]),
                    "low_value": _value(result["ci_low"]),
                    "high_value": _value(result["ci_high"]),
                    "n_cycles": result["n_cycles"],
                    "n_images": result["n_images"],
                    "disagree": disagree,
                }
            )
        rows.append(view)
    # Holm over the families compared: the raw interval stays, the call is the adjusted one.
    adjusted = adjusted_verdicts([r for _, r, *_ in compared], COMPARISON_ADJUSTMENT, compared[0][1]["level"]) if compared else []
    for (view, _, *_), result in zip(compared, adjusted):
        verdict = result["adjusted_verdict"]
        view.update(
            {
                "verdict": verdict,
                "verdict_text": "too few cycles" if verdict == "too few comparisons" else verdict,
                "raw_verdict": result["verdict"],
                "symbol": PAIRED_SYMBOL.get(verdict, "?"),
                "css": "excludes-zero" if verdict in ("A above B", "B above A") else "",
                "callable": _f(result["callable_difference"]),
                "callable_value": _value(result["callable_difference"]),
                "n_adjusted": result["n_adjusted"],
            }
        )
    joint = None
    if compared:
        both = joint_difference({t: x for _, _, t, x, _ in compared}, {t: y for _, _, t, _, y in compared})
        joint = {
            "diff": _f(both["diff"]),
            "low": _f(both["ci_low"]),
            "high": _f(both["ci_high"]),
            "n_families": both["n_families"],
            "method": both["interval_method"],
        }
    return {
        "overall": joint,
        "adjustment": COMPARISON_ADJUSTMENT,
        "a": a,
        "b": b,
        "slug_a": model_slug(a),
        "slug_b": model_slug(b),
        "samples_a": ", ".join(samples.get(a, {}).get("files", [])),
        "samples_b": ", ".join(samples.get(b, {}).get("files", [])),
        "rows": rows,
        "cycles": cycles,
    }


def compare_page(data: PageData, a: str, b: str, samples: Mapping[str, Any], seed: int = 0) -> str:
    """The comparison page of models ``a`` and ``b``."""
    return render(
        "compare.html",
        title=f"clip_cycles: {a} vs {b}",
        up="../",
        level="95%",
        min_images=MIN_IMAGES,
        **comparison(data, a, b, samples, seed),
    )


# --------------------------------------------------------------------------- building and writing


def family_examples(
    data: PageData, samples: Mapping[str, Any], n_examples: int, seed: int = 0
) -> dict[str, list[FamilyExamples]]:
    """Family -> each model's example cycles, from the samples files the results name (nothing recomputed)."""
    out: dict[str, list[FamilyExamples]] = {}
    if n_examples <= 0:
        return out
    for model in data.models:
        entry = samples.get(model, {})
        for row in data.family_rows():
            cell = data.cells.get((row, model))
            if cell is None or cell.cycle_acc is None:
                continue
            key = data.family_of(row)
            if row in entry.get("tasks", {}):
                examples = examples_from_samples(
                    key, model, entry["paths"][row], entry["tasks"][row], n_examples, seed, interval=cell.ci is None
                )
            else:
                examples = FamilyExamples(key, model, "", unavailable_reason=entry.get("rows", {}).get(row, NO_SAMPLES))
            examples.row = row
            out.setdefault(key, []).append(examples)
    return out


def apply_bootstrap(data: PageData, examples: Mapping[str, list[FamilyExamples]]) -> None:
    """Cells without a recorded ``cycle_acc_ci`` get the page builder's bootstrap over their samples, named as such."""
    for entries in examples.values():
        for entry in entries:
            cell = data.cells.get((entry.row, entry.model))
            if cell is not None and cell.ci is None and entry.bootstrap is not None:
                cell.ci = entry.bootstrap
                cell.ci_note = entry.bootstrap["computed_by"]


def build_site(data: PageData, n_examples: int = DEFAULT_EXAMPLES, seed: int = 0) -> Site:
    """Every file of the page in memory (``seed``: of the example sample and the comparison pages' bootstrap)."""
    samples = find_samples(data)
    examples = family_examples(data, samples, n_examples, seed)
    apply_bootstrap(data, examples)
    site = Site()
    for name in ASSETS:
        site.add(f"assets/{name}", resources.files("clip_cycles.evaluation").joinpath("page_assets", name).read_bytes())
    thumbs: dict[str, str | None] = {}
    for entries in examples.values():
        for entry in entries:
            for example in entry.examples:
                for item in example.images:
                    if item.key not in thumbs:
                        made = thumbnail(item)
                        thumbs[item.key] = made[0] if made is not None else None
                        if made is not None:
                            site.add(f"thumbs/{made[0]}", made[1])
    overalls: Overalls = {}
    for model in data.models:
        site.add(f"models/{model_slug(model)}.html", model_page(data, model, samples, overalls))
    for a, b in itertools.combinations(data.models, 2):
        site.add(f"compare/{_pair_file(a, b)}", compare_page(data, a, b, samples, seed))
    site.add("index.html", index_page(data, samples, overalls))  # last: find_samples may name skipped files
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
        elif any(entry.name != "lost+found" for entry in out.iterdir()):  # a fresh file system's mount point holds one
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
    n_examples: int = DEFAULT_EXAMPLES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    seed: int = 0,
) -> Path:
    """Read ``inputs`` and the samples files their results name, and write the page; returns index.html.

    Nothing is recomputed and nothing is written outside ``out``: no model, no feature cache, no world.
    """
    if n_examples < 0:
        raise ValueError(f"--examples must be 0 or more, not {n_examples}")
    data = collect(inputs)
    if not data.cells and not data.benchmarks and not data.attributes:
        raise ValueError(f"no results found in {', '.join(map(str, inputs))} (skipped: {len(data.skipped)} files)")
    return write_site(build_site(data, n_examples, seed), out, max_bytes)
