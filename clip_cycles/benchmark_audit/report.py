"""The audit as a markdown table and a figure (model accuracy vs blind baselines per subset)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clip_cycles.algebra.multiplicity import RESOLUTION
from clip_cycles.algebra.paired import MIN_CYCLES, MIN_IMAGES
from clip_cycles.benchmark_audit.run import BenchmarkAudit
from clip_cycles.encoding.backends import precomputed_backend_name
from clip_cycles.outputs import drawing_code, drawn_files, write_file_set, write_output
from clip_cycles.results import json_bytes, shown_name, shown_weights


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def best_blind_cell(metrics: dict[str, Any]) -> str:
    """The best blind floor: its rule, its accuracy and the 95 % item-bootstrap interval of that accuracy."""
    ci = metrics.get("best_blind_acc_ci")
    interval = f" [{ci['low']:.3f}, {ci['high']:.3f}]" if isinstance(ci, dict) else ""
    return f"{metrics['best_blind']} {metrics['best_blind_acc']:.3f}{interval}"


def blind_vs_model_cell(paired: dict[str, Any] | None) -> str:
    """The verdict of the best blind score against the model, with the paired difference and its interval."""
    if not paired:
        return "-"
    verdict = paired["verdict"]
    if paired.get("adjusted_p") is not None:  # adjusted over the subsets (not: too few, or written before)
        verdict = (
            f"{paired['adjusted_verdict']} ({paired['adjustment']} over {paired['n_adjusted']}; unadjusted {paired['verdict']})"
        )
    return f"{verdict}: {paired['blind']} {paired['diff']:+.3f} [{paired['ci_low']:+.3f}, {paired['ci_high']:+.3f}]"


#: Columns of the table: header and how to read each subset's metrics.
COLUMNS: tuple[tuple[str, Any], ...] = (
    ("subset", lambda name, m: name),
    ("comparisons", lambda name, m: m["n_comparisons"]),
    ("items", lambda name, m: m["n_items"]),
    (
        "unbalanced img / cap",
        lambda name, m: f"{m['design']['share_images_unbalanced']:.2f} / {m['design']['share_captions_unbalanced']:.2f}",
    ),
    ("witness", lambda name, m: m.get("witness_acc")),
    ("shortest", lambda name, m: m.get("shortest_caption_acc")),
    ("longest", lambda name, m: m.get("longest_caption_acc")),
    ("word freq", lambda name, m: m.get("word_frequency_acc")),
    ("caption probe", lambda name, m: m.get("caption_probe_acc")),
    ("image probe", lambda name, m: m.get("image_probe_acc")),
    ("model", lambda name, m: m.get("model_acc")),
    ("best blind [95 % CI]", lambda name, m: best_blind_cell(m)),
    ("best blind - model", lambda name, m: blind_vs_model_cell(m.get("best_blind_vs_model"))),
    ("cycles (items paired)", lambda name, m: f"{m['cycles']['n_cycles']} ({m['cycles']['n_paired_items']})"),
    ("CycleAcc", lambda name, m: m["cycles"].get("cycle_acc")),
    ("BoW ceiling", lambda name, m: m["ceilings"]["bag_of_words_ceiling"]),
    ("length ceiling", lambda name, m: m["ceilings"]["length_ceiling"]),
)


def markdown_table(audit: BenchmarkAudit) -> str:
    """One row per subset plus an ``all`` row; every accuracy is a mean over the subset's comparisons."""
    header = [name for name, _ in COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for sub in audit.audits:
        lines.append("| " + " | ".join(_fmt(get(sub.name, sub.metrics)) for _, get in COLUMNS) + " |")
    lines += unusable_rows(audit)
    s = audit.summary
    total = [
        "**all**",
        s["n_comparisons"],
        "",
        "",
        s.get("witness_acc"),
        s.get("shortest_caption_acc"),
        s.get("longest_caption_acc"),
        s.get("word_frequency_acc"),
        s.get("caption_probe_acc"),
        s.get("image_probe_acc"),
        s.get("model_acc"),
        best_blind_cell(s),
        blind_vs_model_cell(s.get("best_blind_vs_model")),
        s["n_cycles"],
        s.get("cycle_acc"),
        s["ceilings"]["bag_of_words_ceiling"],
        s["ceilings"]["length_ceiling"],
    ]
    lines.append("| " + " | ".join(_fmt(v) for v in total) + " |")
    model = audit.model.get("model")
    who = f"{shown_name(model)} ({weights_label(audit.model)})" if model else "no model (design only)"
    lines += [
        "",
        f"Benchmark `{audit.benchmark}`, model {who}; tie tolerance {audit.settings.tie_tolerance:g}. "
        "Accuracies: mean credit (1 win, 0.5 tie, 0 loss) over the subset's comparisons; CycleAcc over its "
        "exact cycles. A blind column near the model's means the benchmark can be passed without "
        'looking at the pairing; "word freq": the caption made of the subset\'s commoner words wins (order-blind, '
        'no grammar); "best blind": the best of the blind rules with a 95 % bootstrap interval over items. '
        "Ceilings: no rule reading only the caption's bag of lowercase words (or its length) can exceed them "
        "(1 - half the share of comparisons that view forces to a tie). "
        "\"best blind - model\": the best blind score's accuracy minus the model's on the same "
        'comparisons, with a 95 % paired bootstrap interval over items; "blind beats model" only when it lies above 0 '
        f'("within noise" when it holds 0; "too few comparisons" below {MIN_CYCLES} comparisons or {MIN_IMAGES} items). '
        "Each subset's call is then adjusted with Holm over the subsets' calls (the unadjusted verdict and interval "
        f'are kept); a subset whose adjusted test could not call a difference of {RESOLUTION:.2f} says "could not tell".',
    ]
    if audit.unusable:
        lines += [
            "",
            f"Not audited: {len(audit.unusable)} subset(s) with no comparison (count 0 and the reason in their row); "
            "every other subset is audited and pooled without them.",
        ]
    return "\n".join(lines) + "\n"


def unusable_rows(audit: BenchmarkAudit) -> list[str]:
    """One table row per subset read but not audited: its name, 0 comparisons and items, and the reason."""
    rows = []
    for name, row in audit.unusable.items():
        reason = str(row["reason"]).replace("|", "\\|").replace("\n", " ")
        cells = [name, "0", "0", f"not audited: {reason}"] + ["-"] * (len(COLUMNS) - 4)
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def weights_label(model: dict[str, Any]) -> str:
    """What the audited model's numbers come from: its tag, precomputed features, or a random init."""
    if model.get("pretrained"):  # a weights file by its name and digest, never its path
        return shown_weights(model["pretrained"], model.get("weights_sha256"))
    # A features file has no weights at all: calling it "random init" would misread the audit.
    return "precomputed features" if precomputed_backend_name(model.get("backend")) else "random init"


def write_figure(audit: BenchmarkAudit, path: str | Path) -> Path:
    """Grouped bars per subset: model, caption-only probe, best length rule (and CycleAcc where there are cycles)."""
    return write_output(path, figure_bytes(audit), what="figure")


def figure_bytes(audit: BenchmarkAudit) -> bytes:
    """The PNG bytes of :func:`write_figure`'s figure (reused from the drawn-files cache when it holds them:
    :func:`clip_cycles.outputs.drawn_files`, keyed by the numbers drawn and this module's code)."""
    names = [a.name for a in audit.audits]
    series = {
        "model": [a.metrics.get("model_acc") for a in audit.audits],
        "caption-only probe": [a.metrics.get("caption_probe_acc") for a in audit.audits],
        "best length rule": [max(a.metrics["shortest_caption_acc"], a.metrics["longest_caption_acc"]) for a in audit.audits],
        "word-frequency rule": [a.metrics.get("word_frequency_acc") for a in audit.audits],
        "CycleAcc (paired cycles)": [a.metrics["cycles"].get("cycle_acc") for a in audit.audits],
    }
    series = {k: v for k, v in series.items() if any(x is not None for x in v)}
    title = f"{audit.benchmark}: model vs blind baselines"
    inputs = {"names": names, "series": list(series.items()), "title": title}
    kind = f"benchmark audit figure {drawing_code(__file__)}"
    return drawn_files(kind, inputs, lambda: {"figure.png": _draw_figure(names, series, title)})["figure.png"]


def _draw_figure(names: list[str], series: dict[str, list[Any]], title: str) -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    x = np.arange(len(names))
    width = 0.8 / max(len(series), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(names) + 3.5), 3.6))
    for k, (label, values) in enumerate(series.items()):
        heights = [np.nan if v is None else v for v in values]
        ax.bar(x + (k - (len(series) - 1) / 2) * width, heights, width, label=label)
    ax.axhline(0.5, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def write_outputs(audit: BenchmarkAudit, out: str | Path) -> tuple[Path, str]:
    """``audit_<benchmark>.json`` (the result record), ``.md`` (the table) and ``.png`` under ``out``.

    Returns the JSON's path and the table; ``audit-benchmark`` and the demo both write through here.
    The three files are one transaction (:func:`clip_cycles.outputs.write_file_set`): a kill or a
    full disk leaves the previous set (or none), never a new ``.json`` beside an old ``.png``.
    """
    folder = Path(out)
    files, table = output_files(audit, folder)
    write_file_set(folder, files, what="audit-benchmark --out")
    return folder / f"audit_{audit.benchmark}.json", table


def output_files(audit: BenchmarkAudit, folder: Path) -> tuple[dict[str, bytes], str]:
    """The files :func:`write_outputs` writes under ``folder`` (name -> bytes) and the Markdown table."""
    stem = f"audit_{audit.benchmark}"
    table = markdown_table(audit)
    files = {
        f"{stem}.json": json_bytes(audit.record(), folder / f"{stem}.json"),
        f"{stem}.md": table.encode("utf-8"),
        f"{stem}.png": figure_bytes(audit),
    }
    return files, table
