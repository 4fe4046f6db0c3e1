"""The markdown report and figures of a results directory (``clip-cycles report RESULTS_DIR``).

Reads the experiment JSONs that ``clip-cycles probe``, ``transfer`` and ``oe`` write
(``probe.json``, ``transfer.json``, ``oe.json``; each section is optional) and the result
files of ``clip_benchmark eval`` / ``clip-cycles eval`` in the same folder
(``{dataset, model, pretrained, task, metrics, language}``, flat or nested, read through
:func:`clip_cycles.results.read_result`): zero-shot ``cycles`` results become the zero-shot
section (when no ``zero_shot.json`` is there) and every other one is listed with its
numbers. It writes ``report.md`` plus PNG and SVG figures (matplotlib, Agg backend):

- ``strict_relation_bars``: zero-shot cosine vs the rank-64 probe per family (strict
  families when present), error bars = sample sd over seeds;
- ``rank_sweep``: test CycleAcc of the low-rank probe against rank, per family;
- ``transfer_heatmap``: mean transfer CycleAcc, trained-on rows x tested-on columns;
- ``alignment_vs_transfer``: alignment against transfer over ordered off-diagonal pairs;
- ``oe_comparison``: Cycle OE, Shortcut OE and four-entry BCE per family.

A family without results (unavailable, too few cycles) is never silently left out: it
keeps its place in every figure, drawn hatched and labelled "n/a", and the markdown
lists it with its reason. Results of one family on different item sets (``items_sha256``,
:mod:`clip_cycles.experiments.item_sets`) are never merged: each gets its own row
(``<family>@<12 hex>``) in the zero-shot table, whose "item set" column names the world and
split, and a note says why. Every JSON in the directory that names a model must name the
same ``model`` and ``pretrained``; otherwise :class:`MixedModelsError` names the files.
Same JSONs give the same bytes (sorted keys, no timestamps, fixed SVG hash salt).
"""

from __future__ import annotations

import functools
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from clip_cycles.experiments.item_sets import NOT_RECORDED, ItemSet, item_set_notes, item_set_of
from clip_cycles.experiments.oe import METHODS
from clip_cycles.outputs import drawing_code, drawn_files, write_output, write_text_output
from clip_cycles.registry import Registry
from clip_cycles.regular_files import load_json_text
from clip_cycles.results import RESULT_TASK, read_result, shown_name, shown_weights

REPORT_FILE = "report.md"
FIGURE_FORMATS: tuple[str, ...] = ("png", "svg")
NA_COLOR = "#d9d9d9"


class MixedModelsError(ValueError):
    """A results directory holds results of more than one model."""


@dataclass
class ReportPaths:
    """What :func:`build_report` wrote."""

    markdown: Path
    figures: list[Path] = field(default_factory=list)


@dataclass
class Section:
    """A report section: the JSON it reads and how it renders (markdown lines, figure stems written).

    ``file_name`` None: the section is built from clip_benchmark result files (:func:`benchmark_sections`).
    """

    file_name: str | None
    title: str
    render: Callable[[dict[str, Any], Path], tuple[list[str], list[Path]]]


#: The sections by experiment name, in report order (the order of registration).
SECTIONS: Registry[Section] = Registry("report section", ordered=True)


def register_section(name: str, file_name: str | None, title: str):
    """Decorator registering a section renderer for the experiment ``name`` read from ``file_name``."""

    def decorate(fn: Callable[[dict[str, Any], Path], tuple[list[str], list[Path]]]):
        SECTIONS.register(name, Section(file_name, title, fn))
        return fn

    return decorate


# --------------------------------------------------------------------------- reading


def _read_json(path: Path) -> Any:
    try:
        return load_json_text(path.read_text(encoding="utf-8"), str(path))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error


def shown_model(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with ``model`` and ``pretrained`` as the report shows them: weights by file name and digest, no path."""
    pretrained = shown_weights(record.get("pretrained"), record.get("weights_sha256"))
    return {**record, "model": shown_name(record.get("model")), "pretrained": pretrained}


def load_results(results_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The experiment records of a results directory, keyed by section name; checks they share one model.

    Raises FileNotFoundError for a missing directory, ValueError when no experiment JSON
    is present or a record is malformed, MixedModelsError when JSONs name different
    models (``model`` + ``pretrained``), naming each file and its model.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"results directory {root} does not exist")
    identities: dict[str, tuple[str, str]] = {}
    for path in sorted(root.glob("*.json")):
        data = _read_json(path)
        if isinstance(data, dict) and "model" in data:
            identities[path.name] = (str(data["model"]), str(data.get("pretrained") or ""))
    if len(set(identities.values())) > 1:
        listing = "; ".join(f"{name}: model {m!r} pretrained {p!r}" for name, (m, p) in sorted(identities.items()))
        raise MixedModelsError(f"results directory {root} mixes models ({listing}); keep one model per directory")
    records: dict[str, dict[str, Any]] = {}
    for name, section in SECTIONS.items():
        if section.file_name is None or not (root / section.file_name).is_file():
            continue
        path = root / section.file_name
        record = _read_json(path)
        if not isinstance(record, dict) or record.get("experiment") != name:
            raise ValueError(f"{path}: field 'experiment' must be {name!r}")
        for key in ("model", "pretrained", "tie_tolerance", "seeds"):
            if key not in record:
                raise ValueError(f"{path}: field {key!r} is missing")
        records[name] = shown_model(record)
    records.update(benchmark_sections(root, skip_zero_shot="zero_shot" in records))
    records = {name: records[name] for name in SECTIONS if name in records}  # the report's section order
    if not records:
        expected = ", ".join(s.file_name for s in SECTIONS.values() if s.file_name)
        raise ValueError(
            f"results directory {root} holds no experiment results (expected any of {expected}) "
            "and no clip_benchmark result files"
        )
    return records


#: The keys of clip_benchmark's result JSON.
BENCHMARK_KEYS = frozenset({"dataset", "model", "pretrained", "task", "metrics"})


def _benchmark_files(root: Path) -> list[Path]:
    """The clip_benchmark result files of ``root`` (``*.json`` holding its five keys), sorted by name."""
    found = []
    for path in sorted(root.glob("*.json")):
        if not path.is_file():
            continue
        data = _read_json(path)
        if isinstance(data, dict) and BENCHMARK_KEYS <= set(data) and "experiment" not in data:
            found.append(path)
    return found


def _zero_shot_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """A cycles result's metrics in the zero-shot section's shape, from the nested record or the flat file."""
    out = dict(metrics)
    for name in ("cycle_acc", "text_acc", "image_acc", "group_acc"):
        if f"{name}_ci" not in out and f"{name}_ci_low" in out:
            out[f"{name}_ci"] = {"low": out[f"{name}_ci_low"], "high": out.get(f"{name}_ci_high")}
    if "additive_audit" not in out and "additive_audit_passed" in out:
        passed = out["additive_audit_passed"]
        out["additive_audit"] = {"passed": None if passed is None else bool(passed)}
    return out


def _seeds_of(metrics: dict[str, Any]) -> list[int]:
    if isinstance(metrics.get("seeds"), list):
        return [int(s) for s in metrics["seeds"]]
    flat = sorted((int(k.split("_")[1]), v) for k, v in metrics.items() if k.startswith("seeds_") and k[6:].isdigit())
    return [int(v) for _, v in flat]


def benchmark_sections(root: Path, skip_zero_shot: bool = False) -> dict[str, dict[str, Any]]:
    """Section records built from the clip_benchmark result files of ``root``.

    ``zero_shot``: the ``cycles`` results (task ``cycles``), one family per dataset (its
    ``cycles/`` prefix dropped), unless ``skip_zero_shot``; ``benchmark_results``: every other
    result file, listed with its numbers. Each record names its ``source_files``.
    """
    zero: dict[str, Any] = {"families": {}, "unavailable": {}, "files": []}
    found: dict[tuple[str, str], tuple[ItemSet, dict[str, Any], Path]] = {}  # (family, item set) -> result
    others: list[dict[str, Any]] = []
    tolerances: set[float] = set()
    seeds: set[int] = set()
    identity: tuple[str, str] | None = None
    for path in _benchmark_files(root):
        record = read_result(path)
        shown = shown_model(record)
        identity = (str(shown["model"]), str(shown.get("pretrained") or ""))
        metrics = record["metrics"]
        if record["task"] == RESULT_TASK and not skip_zero_shot:
            name = str(record["dataset"]).removeprefix("cycles/")
            try:
                item = item_set_of(record, metrics)
            except ValueError as error:
                raise ValueError(f"{path}: {error}") from None
            if (name, item.ident) in found:
                raise ValueError(
                    f"{path}: a second result of dataset {record['dataset']!r} on the same item set ({item.describe()}) "
                    f"as {found[name, item.ident][2].name}; keep one per directory"
                )
            found[name, item.ident] = (item, metrics, path)
            zero["files"].append(path.name)
            if metrics.get("available") in (False, 0):
                continue
            if metrics.get("tie_tolerance") is not None:
                tolerances.add(float(metrics["tie_tolerance"]))
            seeds.update(_seeds_of(metrics))
        else:
            others.append({"file": path.name, "dataset": record["dataset"], "task": record["task"], "metrics": metrics})
    if identity is None:
        return {}
    _zero_shot_rows(zero, found)
    common = {"model": identity[0], "pretrained": identity[1], "source": "clip_benchmark result files"}
    tolerance: Any = tolerances.pop() if len(tolerances) == 1 else sorted(tolerances)
    out: dict[str, dict[str, Any]] = {}
    if zero["families"] or zero["unavailable"]:
        out["zero_shot"] = {
            "experiment": "zero_shot",
            **common,
            "tie_tolerance": tolerance,
            "seeds": sorted(seeds),
            "families": zero["families"],
            "unavailable": dict(sorted(zero["unavailable"].items())),
            "item_sets": zero["item_sets"],
            "item_set_notes": zero["item_set_notes"],
            "source_files": zero["files"],
        }
    if others:
        out["benchmark_results"] = {
            "experiment": "benchmark_results",
            **common,
            "tie_tolerance": tolerance,
            "seeds": sorted(seeds),
            "results": others,
            "source_files": [o["file"] for o in others],
        }
    return out


def _zero_shot_rows(zero: dict[str, Any], found: dict[tuple[str, str], tuple[ItemSet, dict[str, Any], Path]]) -> None:
    """Fill ``zero``'s families, unavailable families, item sets and notes: one row per family and item set.

    A family scored on one item set keeps its name as the row; on several, each row is
    ``<family>@<12 hex>`` and a note says why they are apart (never merged into one row).
    """
    names = sorted({name for name, _ in found})
    zero["item_sets"], zero["item_set_notes"] = {}, []
    unrecorded = []
    for name in names:
        entries = sorted((v for (n, _), v in found.items() if n == name), key=lambda v: (not v[0].recorded, v[0].ident))
        for item, metrics, _ in entries:
            row = name if len(entries) == 1 else f"{name}@{item.short}"
            zero["item_sets"][row] = item.describe()
            if metrics.get("available") in (False, 0):
                zero["unavailable"][row] = str(metrics.get("unavailable_reason") or "unavailable")
            else:
                zero["families"][row] = _zero_shot_metrics(metrics)
        if len(entries) == 1 and not entries[0][0].recorded:
            unrecorded.append(name)
        else:
            zero["item_set_notes"] += item_set_notes(name, [e[0] for e in entries])
    if unrecorded:
        zero["item_set_notes"].append(
            f"{NOT_RECORDED} for {', '.join(unrecorded)} (no items_sha256: results written before item sets were recorded)"
        )


# --------------------------------------------------------------------------- figures


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "clip_cycles"
    return plt


def _save(fig: Any, out: Path, stem: str) -> list[Path]:
    paths = []
    for fmt in FIGURE_FORMATS:
        path = out / f"{stem}.{fmt}"
        # No dates or software versions inside the files: same results, same bytes.
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        buffer = io.BytesIO()
        fig.savefig(buffer, format=fmt, bbox_inches="tight", metadata=metadata)
        paths.append(write_output(path, buffer.getvalue(), what="figure"))
    fig.clf()
    _pyplot().close(fig)
    return paths


def _kept_figures(draw: Callable[[dict[str, Any], Path], list[Path]]) -> Callable[[dict[str, Any], Path], list[Path]]:
    """A figure function ``(record, out) -> paths`` whose files are reused from the drawn-files cache
    (:func:`clip_cycles.outputs.drawn_files`) when the same record was drawn by the same code before."""

    @functools.wraps(draw)
    def figures(record: dict[str, Any], out: Path) -> list[Path]:
        drawn: list[Path] = []

        def render() -> dict[str, bytes]:
            drawn.extend(draw(record, out))
            return {path.name: path.read_bytes() for path in drawn}

        files = drawn_files(f"report {draw.__name__} {drawing_code(__file__)}", record, render)
        if drawn:  # drawn just now, straight into ``out``
            return drawn
        return [write_output(out / name, data, what="figure") for name, data in files.items()]

    return figures


def _na_bar(ax: Any, x: float, width: float, label: str = "n/a") -> None:
    ax.bar([x], [1.0], width=width, color="none", edgecolor="#999999", hatch="//", linewidth=0.8)
    ax.text(x, 0.5, label, ha="center", va="center", rotation=90, fontsize=8, color="#555555")


def _unavailable_note(ax: Any, unavailable: dict[str, str]) -> None:
    if unavailable:
        ax.text(
            0.01,
            0.01,
            "unavailable (n/a): " + ", ".join(sorted(unavailable)),
            transform=ax.transAxes,
            fontsize=7,
            color="#aa0000",
            va="bottom",
        )


def _order(record: dict[str, Any], available: list[str]) -> list[str]:
    order = list(record.get("family_order") or [])
    for name in list(available) + sorted(record.get("unavailable", {})):
        if name not in order:
            order.append(name)
    return order


@_kept_figures
def strict_relation_figure(probe: dict[str, Any], out: Path) -> list[Path]:
    """Zero-shot vs rank-64 probe bars per family (strict families when present); n/a families hatched."""
    plt = _pyplot()
    rank = _headline_rank(probe)
    order = _order(probe, [n for n, f in probe["families"].items() if f.get("available")])
    strict = [n for n in order if "strict" in n]
    names = strict or order
    fig, ax = plt.subplots(figsize=(max(4.0, 1.0 + 0.9 * len(names)), 3.6))
    width = 0.38
    labelled = False
    for i, name in enumerate(names):
        fam = probe["families"].get(name, {"available": False})
        if not fam.get("available"):
            _na_bar(ax, i, 2 * width)
            continue
        probe_stats = fam["probes"][f"low_rank_r{rank}"]
        ax.bar(
            i - width / 2,
            fam["zero_shot"]["mean"],
            width,
            yerr=fam["zero_shot"]["sd"],
            color="#7f9fbf",
            capsize=3,
            label=None if labelled else "zero-shot cosine",
        )
        ax.bar(
            i + width / 2,
            probe_stats["mean"],
            width,
            yerr=probe_stats["sd"],
            color="#d9822b",
            capsize=3,
            label=None if labelled else f"rank-{rank} probe",
        )
        labelled = True
    ax.axhline(0.5, color="black", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(
        [n if probe["families"].get(n, {}).get("available") else f"{n}\n(n/a)" for n in names],
        rotation=30,
        ha="right",
        fontsize=8,
    )
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("exact test CycleAcc")
    ax.set_title(f"{probe['model']} ({probe['pretrained']}): zero-shot vs rank-{rank} probe, mean ± sd over seeds", fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper right")
    _unavailable_note(ax, {n: "" for n in names if not probe["families"].get(n, {}).get("available")})
    return _save(fig, out, "strict_relation_bars")


#: Family kinds of the rank-sweep panels: (kind, name prefixes after a leading ``shapes_``), first match wins.
FAMILY_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("strict relations (objects kept, relation swapped)", ("strict_",)),
    ("box relations", ("box_",)),
    ("GQA scene-graph families", ("gqa_",)),
    ("objects, counts and attributes", ("",)),
)


def family_kind(name: str) -> str:
    """The :data:`FAMILY_KINDS` panel of family ``name`` (``shapes_`` prefix ignored)."""
    bare = name.removeprefix("shapes_")
    return next(kind for kind, prefixes in FAMILY_KINDS if bare.startswith(prefixes))


@_kept_figures
def rank_sweep_figure(probe: dict[str, Any], out: Path) -> list[Path]:
    """Low-rank probe test CycleAcc against rank: one panel per family kind, one line per family, n/a families noted.

    Small multiples keep each panel to a few families with distinct colours, and the legend
    sits below its panel, never over the data.
    """
    plt = _pyplot()
    order = _order(probe, [n for n, f in probe["families"].items() if f.get("available")])
    groups: dict[str, list[str]] = {}
    for name in order:
        groups.setdefault(family_kind(name), []).append(name)
    kinds = [kind for kind, _ in FAMILY_KINDS if kind in groups]
    columns = 2 if len(kinds) > 1 else 1
    rows = (len(kinds) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 4.1 * rows), sharey=True, squeeze=False)
    colours = plt.get_cmap("tab10").colors
    for ax, kind in zip(axes.ravel(), kinds):
        missing = {}
        for k, name in enumerate(groups[kind]):
            fam = probe["families"].get(name, {"available": False, "unavailable_reason": "no result"})
            label = name.removeprefix("shapes_")
            if not fam.get("available"):
                missing[label] = fam.get("unavailable_reason", "")
                ax.plot([], [], color=NA_COLOR, linestyle="--", label=f"{label} (n/a)")
                continue
            sweep = fam["rank_sweep"]
            ax.errorbar(
                sweep["ranks"],
                sweep["mean"],
                yerr=sweep["sd"],
                marker="o",
                markersize=3,
                capsize=2,
                linewidth=1.2,
                color=colours[k % len(colours)],
                label=label,
            )
        ax.set_xscale("log", base=2)
        ax.axhline(0.5, color="black", linewidth=0.8, linestyle=":")
        ax.set_title(kind, fontsize=9)
        ax.set_xlabel("probe rank", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
        _unavailable_note(ax, missing)
    for ax in axes[:, 0]:
        ax.set_ylabel("exact test CycleAcc", fontsize=8)
    for ax in axes.ravel()[len(kinds) :]:
        ax.set_visible(False)
    fig.suptitle(f"{probe['model']} ({probe['pretrained']}): rank sweep, mean ± sd over seeds", fontsize=10)
    fig.tight_layout()
    return _save(fig, out, "rank_sweep")


def _full_matrix(transfer: dict[str, Any], key: str) -> tuple[list[str], np.ndarray]:
    names = transfer["families"]
    order = _order(transfer, names)
    matrix = np.full((len(order), len(order)), np.nan)
    position = {n: order.index(n) for n in names}
    values = np.asarray(transfer["mean"][key], dtype=np.float64)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            matrix[position[a], position[b]] = values[i, j]
    return order, matrix


@_kept_figures
def transfer_heatmap_figure(transfer: dict[str, Any], out: Path) -> list[Path]:
    """Mean transfer CycleAcc (rows: trained on, columns: tested on); unavailable rows/columns hatched n/a."""
    plt = _pyplot()
    order, matrix = _full_matrix(transfer, "transfer")
    k = len(order)
    fig, ax = plt.subplots(figsize=(1.6 + 0.55 * k, 1.2 + 0.5 * k))
    masked = np.ma.masked_invalid(matrix)
    cmap = plt.get_cmap("viridis").with_extremes(bad=NA_COLOR)
    image = ax.imshow(masked, cmap=cmap, vmin=0.0, vmax=1.0)
    for i in range(k):
        for j in range(k):
            if np.isnan(matrix[i, j]):
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="#999999", linewidth=0))
                ax.text(j, i, "n/a", ha="center", va="center", fontsize=6, color="#555555")
            elif k <= 16:
                ax.text(
                    j,
                    i,
                    f"{matrix[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if matrix[i, j] < 0.6 else "black",
                )
    labels = [n if n in transfer["families"] else f"{n} (n/a)" for n in order]
    ax.set_xticks(range(k))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(k))
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel("tested on")
    ax.set_ylabel(f"trained on (rank-{transfer['settings']['rank']} probe)")
    ax.set_title(f"{transfer['model']} ({transfer['pretrained']}): transfer CycleAcc, mean over seeds", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046)
    return _save(fig, out, "transfer_heatmap")


@_kept_figures
def alignment_scatter_figure(transfer: dict[str, Any], out: Path) -> list[Path]:
    """Alignment against transfer over ordered off-diagonal pairs, one colour per seed."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.0, 4.0))
    for seed, res in sorted(transfer["per_seed"].items(), key=lambda kv: int(kv[0])):
        a, t = np.asarray(res["alignment"]), np.asarray(res["transfer"])
        off = ~np.eye(a.shape[0], dtype=bool)
        ax.scatter(a[off], t[off], s=10, alpha=0.7, label=f"seed {seed}")
    corr = transfer["correlation"]

    def fmt(summary: dict[str, Any]) -> str:
        return "undefined" if summary["mean"] is None else f"{summary['mean']:.3f} ± {summary['sd']:.3f}"

    ax.axhline(0.5, color="black", linewidth=0.8, linestyle=":")
    ax.set_xlabel("alignment <G_i, G_j> / (|G_i| |G_j|)")
    ax.set_ylabel("transfer CycleAcc (train i, test j)")
    ax.set_title(f"{transfer['model']}: Pearson {fmt(corr['pearson'])}, Spearman {fmt(corr['spearman'])}", fontsize=9)
    if transfer["per_seed"]:
        ax.legend(fontsize=7)
    _unavailable_note(ax, transfer.get("unavailable", {}))
    return _save(fig, out, "alignment_vs_transfer")


@_kept_figures
def oe_figure(oe: dict[str, Any], out: Path) -> list[Path]:
    """Exact test CycleAcc of Cycle OE, Shortcut OE and four-entry BCE per family (sd over seeds)."""
    plt = _pyplot()
    order = _order(oe, [n for n, f in oe["families"].items() if f.get("available")])
    fig, ax = plt.subplots(figsize=(max(4.0, 1.5 + 1.6 * len(order)), 3.6))
    width = 0.8 / len(METHODS)
    colors = ("#d9822b", "#7f9fbf", "#8fb573")
    labelled = False
    for i, name in enumerate(order):
        fam = oe["families"].get(name, {"available": False})
        if not fam.get("available"):
            _na_bar(ax, i, 0.8)
            continue
        for m, method in enumerate(METHODS):
            stats = fam["methods"][method]["test_cycle_acc"]
            ax.bar(
                i + (m - 1) * width,
                stats["mean"],
                width,
                yerr=stats["sd"],
                capsize=3,
                color=colors[m],
                label=None if labelled else method,
            )
        labelled = True
    ax.axhline(0.5, color="black", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels([n if oe["families"].get(n, {}).get("available") else f"{n}\n(n/a)" for n in order], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("exact test CycleAcc")
    ax.set_title(f"{oe['model']} ({oe['pretrained']}): OE methods, mean ± sd over seeds", fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper right")
    return _save(fig, out, "oe_comparison")


# --------------------------------------------------------------------------- markdown


def _pm(summary: dict[str, Any] | None) -> str:
    if not summary or summary.get("mean") is None:
        return "n/a"
    return f"{summary['mean']:.4f} ± {summary['sd']:.4f}"


def _interval(ci: dict[str, Any] | None) -> str:
    if not isinstance(ci, dict) or ci.get("low") is None or ci.get("high") is None:
        return "n/a"
    return f"[{ci['low']:.4f}, {ci['high']:.4f}]"


def _headline_rank(probe: dict[str, Any]) -> int:
    ranks = probe["settings"]["ranks"]
    return 64 if 64 in ranks else max(ranks)


def _figure_links(paths: list[Path]) -> list[str]:
    return [f"![{p.stem}]({p.name})" for p in paths if p.suffix == ".png"]


@_kept_figures
def zero_shot_figure(zero: dict[str, Any], out: Path) -> list[Path]:
    """Per family CycleAcc (mean ± sd over seeds), unavailable families as n/a bars."""
    plt = _pyplot()
    names = sorted(zero["families"]) + sorted(zero.get("unavailable", {}))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(names)), 3.6))
    for i, name in enumerate(names):
        metrics = zero["families"].get(name)
        if metrics is None:
            _na_bar(ax, i, 0.7)
            continue
        ax.bar(i, metrics["cycle_acc"], 0.7, yerr=metrics.get("cycle_acc_sd", 0.0), color="#4c72b0", capsize=2)
    ax.axhline(0.5, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("exact CycleAcc")
    ax.set_title(f"Zero-shot CycleAcc ({zero['model']}, {zero['pretrained']})")
    return _save(fig, out, "zero_shot")


@register_section("zero_shot", "zero_shot.json", "Zero-shot CycleAcc")
def render_zero_shot(zero: dict[str, Any], out: Path) -> tuple[list[str], list[Path]]:
    """Zero-shot section: per family CycleAcc, Winoground scores, the additive audit; one bar figure."""
    figures = zero_shot_figure(zero, out)
    names = sorted(zero["families"]) + sorted(zero.get("unavailable", {}))
    header = ["family", "CycleAcc", "CycleAcc 95 % CI", "text", "image", "group", "cycles (test)", "additive audit", "item set"]
    lines = [
        f"Cells: mean ± sd over seeds {zero['seeds']}; tie tolerance {zero['tie_tolerance']}; "
        "CI: as recorded (two-way image-cluster robust over the seeds' cycles, for records written since issue 53; "
        "a percentile bootstrap over cycles before). "
        "Item set: the world (source) and split a row scored; results on different item sets are separate rows.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for name in names:
        m = zero["families"].get(name)
        item = _item_set_text(zero, name, m or {})
        if m is None:
            lines.append(f"| {name} | unavailable: {zero['unavailable'][name]} |" + " |" * (len(header) - 3) + f" {item} |")
            continue
        audit = m.get("additive_audit")
        passed = audit.get("passed") if isinstance(audit, dict) else audit
        cells = [_pm({"mean": m["cycle_acc"], "sd": m.get("cycle_acc_sd", 0.0)}), _interval(m.get("cycle_acc_ci"))]
        cells += [_pm({"mean": m[k], "sd": m.get(f"{k}_sd", 0.0)}) for k in ("text_acc", "image_acc", "group_acc")]
        cells += [str(m.get("n_cycles")), "passed (0.5)" if passed is True else f"{passed}", item]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    notes = zero.get("item_set_notes") or []
    if notes:
        lines += ["", "Numbers share a row only when they scored the same items (equal `items_sha256`):", ""]
        lines += [f"- {note}" for note in notes]
    return lines + [""] + _figure_links(figures), figures


def _item_set_text(zero: dict[str, Any], row: str, metrics: dict[str, Any]) -> str:
    """The "item set" cell of a zero-shot row: from the clip_benchmark files, or the family's own metrics."""
    if row in zero.get("item_sets", {}):
        return str(zero["item_sets"][row])
    shared = {k: zero.get(k) for k in ("split", "source") if k in zero and isinstance(zero.get(k), str)}
    try:
        return item_set_of(metrics, shared).describe()
    except ValueError:
        return NOT_RECORDED


@register_section("probe", "probe.json", "Probes and rank sweeps")
def render_probe(probe: dict[str, Any], out: Path) -> tuple[list[str], list[Path]]:
    """Probe section: per-family table (zero-shot, diagonal, bilinear, every rank, audit) and two figures."""
    rank = _headline_rank(probe)
    figures = strict_relation_figure(probe, out) + rank_sweep_figure(probe, out)
    ranks = probe["settings"]["ranks"]
    heads = list(probe["settings"]["full_heads"])
    header = ["family", "zero-shot", *heads, *[f"r{r}" for r in ranks], "additive audit"]
    lines = [
        f"Settings: {json.dumps(probe['settings'], sort_keys=True)}",
        "",
        f"Headline probe: rank {rank}. Cells: exact test CycleAcc, mean ± sd over seeds {probe['seeds']}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    order = _order(probe, [n for n, f in probe["families"].items() if f.get("available")])
    for name in order:
        fam = probe["families"].get(name, {"available": False, "unavailable_reason": "no result"})
        if not fam.get("available"):
            lines.append(f"| {name} | unavailable: {fam.get('unavailable_reason', '')} |" + " |" * (len(header) - 2))
            continue
        cells = [_pm(fam["zero_shot"])]
        cells += [_pm(fam["probes"].get(h)) for h in heads]
        cells += [_pm(fam["probes"].get(f"low_rank_r{r}")) for r in ranks]
        audit = fam.get("additive_audit")
        cells.append("not run" if audit is None else ("passed (0.5)" if audit["passed"] else "FAILED"))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""] + _figure_links(figures), figures


@register_section("transfer", "transfer.json", "Family-to-family transfer and alignment")
def render_transfer(transfer: dict[str, Any], out: Path) -> tuple[list[str], list[Path]]:
    """Transfer section: correlations per seed and summary, the mean matrix, two figures."""
    figures = transfer_heatmap_figure(transfer, out) + alignment_scatter_figure(transfer, out)
    corr = transfer["correlation"]
    lines = [
        f"Settings: {json.dumps(transfer['settings'], sort_keys=True)}",
        "",
        f"{len(transfer['families'])} families, {transfer['n_pairs']} ordered off-diagonal pairs.",
        "",
        "| correlation (alignment vs transfer) | " + " | ".join(f"seed {s}" for s in transfer["per_seed"]) + " | mean ± sd |",
        "|---|" + "---|" * (len(transfer["per_seed"]) + 1),
    ]
    for kind in ("pearson", "spearman"):
        values = [corr[kind]["per_seed"][s] for s in transfer["per_seed"]]
        lines.append(
            f"| {kind} | " + " | ".join("undefined" if v is None else f"{v:.4f}" for v in values) + f" | {_pm(corr[kind])} |"
        )
    order, matrix = _full_matrix(transfer, "transfer")
    lines += [
        "",
        "Mean transfer CycleAcc (rows: trained on; columns: tested on):",
        "",
        "| trained on \\ tested on | " + " | ".join(order) + " |",
        "|---|" + "---|" * len(order),
    ]
    for i, name in enumerate(order):
        lines.append(f"| {name} | " + " | ".join("n/a" if np.isnan(v) else f"{v:.3f}" for v in matrix[i]) + " |")
    return lines + [""] + _figure_links(figures), figures


@register_section("oe", "oe.json", "Cycle OE vs Shortcut OE")
def render_oe(oe: dict[str, Any], out: Path) -> tuple[list[str], list[Path]]:
    """OE section: per-seed table, mean ± sd, per-seed differences, the text-only probe; one figure."""
    figures = oe_figure(oe, out)
    lines = [
        f"Settings: {json.dumps(oe['settings'], sort_keys=True)}",
        "",
        f"Shortcut-OE negatives: `{oe['marker_caption_example']}` (train and validation only).",
        "",
    ]
    order = _order(oe, [n for n, f in oe["families"].items() if f.get("available")])
    for name in order:
        fam = oe["families"].get(name, {"available": False, "unavailable_reason": "no result"})
        lines.append(f"### {name}")
        if not fam.get("available"):
            lines += [f"unavailable: {fam.get('unavailable_reason', '')}", ""]
            continue
        header = ["seed", *METHODS, "text-only CycleAcc", "text-only OE-val acc"]
        lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for row in fam["per_seed_table"]:
            cells = [str(row["seed"])] + [f"{row[m]:.4f}" for m in METHODS]
            cells += [f"{row['text_only_test_cycle_acc']:.4f}", f"{row['text_only_oe_val_acc']:.4f}"]
            lines.append("| " + " | ".join(cells) + " |")
        summary = [_pm(fam["methods"][m]["test_cycle_acc"]) for m in METHODS]
        text = fam["text_only_probe"]
        lines.append("| mean ± sd | " + " | ".join(summary) + f" | {_pm(text['test_cycle_acc'])} | {_pm(text['oe_val_acc'])} |")
        lines += ["", "Per-seed differences (exact test CycleAcc):", ""]
        for diff_name, diff in fam["differences"].items():
            per = ", ".join(f"seed {s}: {v:+.4f}" for s, v in diff["per_seed"].items())
            lines.append(f"- {diff_name}: {per}; mean ± sd {_pm(diff)}")
        lines.append("")
    return lines + _figure_links(figures), figures


@_kept_figures
def attribute_splits_figure(attributes: dict[str, Any], out: Path) -> list[Path]:
    """F1 selectivity and CS per strategy (mean ± sd over seeds), side by side."""
    plt = _pyplot()
    names = list(attributes["strategies"])
    # Constrained layout leaves room for each panel's tick labels and y label (the CS panel's
    # negative ticks are wider than the default gap between panels).
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.8, 3.4), layout="constrained")
    for i, name in enumerate(names):
        entry = attributes["strategies"][name]
        f1, cs = entry["f1_selectivity"], entry["cs"]
        left.bar(i, f1["mean"], 0.7, yerr=f1["sd"], color="#55a868", capsize=2)
        if cs is None:
            _na_bar(right, i, 0.7)
        else:
            right.bar(i, cs["mean"], 0.7, yerr=cs["sd"], color="#c44e52", capsize=2)
    for ax, label in ((left, "F1 selectivity (points)"), (right, "CS (Pearson)")):
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(label)
        ax.axhline(0.0, color="black", linewidth=0.8)
    fig.suptitle("Attribute generalization splits")
    return _save(fig, out, "attribute_splits")


@register_section("attributes", "attributes.json", "Attribute splits: F1 selectivity and CS")
def render_attributes(attributes: dict[str, Any], out: Path) -> tuple[list[str], list[Path]]:
    """Attribute-split section: F1 selectivity and CS per strategy (mean ± sd over seeds); one figure."""
    names = list(attributes["strategies"])
    figures = attribute_splits_figure(attributes, out)
    world = attributes.get("world", {})
    lines = [
        f"World: {json.dumps(world, sort_keys=True)}",
        "",
        "| strategy | F1 selectivity | CS | attributes scored |",
        "|---|---|---|---|",
    ]
    for name in names:
        entry = attributes["strategies"][name]
        lines.append(f"| {name} | {_pm(entry['f1_selectivity'])} | {_pm(entry['cs'])} | {entry['n_attributes_scored']} |")
    return lines + [""] + _figure_links(figures), figures


#: How many numbers of a result the benchmark-results table shows (the headline first).
SHOWN_NUMBERS = 6


def _numbers(metrics: dict[str, Any]) -> str:
    """The first numbers of a result's metrics, headline (``acc``, ``cycle_acc``) first."""
    names = [k for k in ("acc", "cycle_acc") if k in metrics]
    names += sorted(k for k, v in metrics.items() if k not in names and isinstance(v, (int, float)) and not isinstance(v, bool))
    cells = [f"{k} {metrics[k]:.4g}" if isinstance(metrics[k], float) else f"{k} {metrics[k]}" for k in names[:SHOWN_NUMBERS]]
    more = len(names) - SHOWN_NUMBERS
    return ", ".join(cells) + (f" (+{more} more in the file)" if more > 0 else "")


@register_section("benchmark_results", None, "Other clip_benchmark results")
def render_benchmark_results(results: dict[str, Any], out: Path) -> tuple[list[str], list[Path]]:
    """Every clip_benchmark result file that is not a zero-shot cycles result: dataset, task and its numbers."""
    lines = ["| file | dataset | task | numbers |", "|---|---|---|---|"]
    for entry in results["results"]:
        lines.append(f"| `{entry['file']}` | {entry['dataset']} | {entry['task']} | {_numbers(entry['metrics'])} |")
    return lines, []


def build_report(results_dir: str | Path) -> ReportPaths:
    """Write ``report.md`` and the figures of every present experiment into ``results_dir``."""
    root = Path(results_dir)
    records = load_results(root)
    first = next(iter(records.values()))
    lines = [
        "# clip_cycles experiment report",
        "",
        f"- model: `{first['model']}`",
        f"- pretrained: `{first['pretrained']}`",
        f"- tie tolerance: {first['tie_tolerance']}",
        f"- source: {first.get('source', '')}",
        f"- experiments: {', '.join(records)}",
        "",
    ]
    paths = ReportPaths(root / REPORT_FILE)
    for name, record in records.items():
        section = SECTIONS[name]
        body, figures = section.render(record, root)
        paths.figures.extend(figures)
        sources = ", ".join(f"`{f}`" for f in record.get("source_files", [section.file_name]))
        lines += [f"## {section.title}", "", f"Seeds: {record['seeds']}. Source file: {sources}.", ""]
        unavailable = record.get("unavailable", {})
        if unavailable:
            lines += ["Unavailable families (kept in every table and figure, marked n/a):", ""]
            lines += [f"- {n}: {r}" for n, r in sorted(unavailable.items())] + [""]
        lines += [*body, ""]
    write_text_output(paths.markdown, "\n".join(lines).rstrip() + "\n", what="report")
    return paths
