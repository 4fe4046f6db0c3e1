"""Every benchmark found under a root, audited and gathered into one table (JSON, Markdown, CSV).

:func:`find_benchmarks` maps a root's subfolders to registered formats (a folder named like the
format, ``-`` and ``_`` alike, any case); :func:`parse_benchmark_pairs` reads ``NAME=PATH`` items.
:func:`combined_rows` gives one row per subset and one ``all`` row per benchmark: its size, the
model, the best blind floor (with its 95 % item-bootstrap interval and the paired verdict), the exact
ceilings, the exact cycles and their CycleAcc. :func:`write_all` writes ``audit_all.json`` / ``.md`` / ``.csv``
with every benchmark's own folder as one transaction (``audit-benchmark all``).
A benchmark with no subset to audit (every subset empty or dropped, no readable file) is one ``all`` row
with count 0 and ``not audited: <reason>`` (:func:`unusable_benchmark_row`), never an abort of the others.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Sequence

from clip_cycles.benchmark_audit.adapters import ADAPTERS
from clip_cycles.benchmark_audit.report import output_files
from clip_cycles.benchmark_audit.run import BenchmarkAudit
from clip_cycles.outputs import write_file_set
from clip_cycles.results import clean, json_bytes, shown_name

#: Columns of the combined table, in order (the CSV's header, the Markdown's, each JSON row's keys).
COMBINED_COLUMNS: tuple[str, ...] = (
    "benchmark",
    "subset",
    "n_comparisons",
    "n_items",
    "model",
    "model_acc",
    "best_blind",
    "best_blind_acc",
    "best_blind_ci_low",
    "best_blind_ci_high",
    "blind_vs_model",
    "length_floor",
    "length_ceiling",
    "bag_of_words_ceiling",
    "caption_only_ceiling",
    "bag_of_words_forced_share",
    "length_forced_share",
    "caption_only_forced_share",
    "n_cycles",
    "cycle_acc",
    "dropped",
)


def _key(name: str) -> str:
    return name.lower().replace("-", "_").replace("+", "p")


def find_benchmarks(root: str | Path) -> list[tuple[str, Path]]:
    """``(format, folder)`` for each subfolder of ``root`` named like a registered format; FileNotFoundError if none."""
    base = Path(root).expanduser()
    if not base.is_dir():
        raise FileNotFoundError(f"--root {base} is not a folder; `audit-benchmark all` reads one subfolder per benchmark")
    formats = {_key(name): name for name in ADAPTERS}
    found = [(formats[_key(p.name)], p) for p in sorted(base.iterdir()) if p.is_dir() and _key(p.name) in formats]
    if not found:
        names = ", ".join(sorted(ADAPTERS))
        raise FileNotFoundError(f"{base}: no subfolder named like a benchmark format; expected some of: {names}")
    return found


def parse_benchmark_pairs(items: Sequence[str]) -> list[tuple[str, Path]]:
    """``["valse=/data/valse", ...]`` as ``(format, path)``; ValueError naming a malformed item or unknown format."""
    out = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--benchmark {item!r}: expected NAME=PATH, e.g. valse=/data/valse")
        if name not in ADAPTERS:
            raise ValueError(f"--benchmark {item!r}: {ADAPTERS.unknown_message(name)}")
        if any(name == seen for seen, _ in out):
            raise ValueError(f"--benchmark {item!r}: {name} is listed twice; each benchmark's files go to <out>/{name}/")
        out.append((name, Path(path).expanduser()))
    return out


def _dropped(skipped: dict[str, int]) -> str:
    return "; ".join(f"{reason}={count}" for reason, count in sorted(skipped.items()))


def _row(benchmark: str, subset: str, metrics: dict[str, Any], model: str, n_items: Any, dropped: str) -> dict[str, Any]:
    ceilings = metrics["ceilings"]
    paired = metrics.get("best_blind_vs_model")
    cycles = metrics.get("cycles", {})
    interval = metrics.get("best_blind_acc_ci") or {}
    return {
        "benchmark": benchmark,
        "subset": subset,
        "n_comparisons": metrics["n_comparisons"],
        "n_items": n_items,
        "model": model,
        "model_acc": metrics.get("model_acc"),
        "best_blind": metrics["best_blind"],
        "best_blind_acc": metrics["best_blind_acc"],
        "best_blind_ci_low": interval.get("low"),
        "best_blind_ci_high": interval.get("high"),
        "blind_vs_model": paired.get("adjusted_verdict", paired["verdict"]) if paired else None,
        "length_floor": ceilings.get("length_floor", max(metrics["shortest_caption_acc"], metrics["longest_caption_acc"])),
        "length_ceiling": ceilings["length_ceiling"],
        "bag_of_words_ceiling": ceilings["bag_of_words_ceiling"],
        "caption_only_ceiling": ceilings["caption_only_ceiling"],
        "bag_of_words_forced_share": ceilings["bag_of_words_forced_share"],
        "length_forced_share": ceilings["length_forced_share"],
        "caption_only_forced_share": ceilings["caption_only_forced_share"],
        "n_cycles": cycles.get("n_cycles", metrics.get("n_cycles")),
        "cycle_acc": cycles.get("cycle_acc", metrics.get("cycle_acc")),
        "dropped": dropped,
    }


#: The ``dropped`` cell of a benchmark that was not audited starts so; the reason follows.
NOT_AUDITED = "not audited: "


def unusable_benchmark_row(benchmark: str, reason: str) -> dict[str, Any]:
    """The ``all`` row of a benchmark with nothing to audit: count 0, every measure unavailable, the reason."""
    row: dict[str, Any] = dict.fromkeys(COMBINED_COLUMNS)
    return {**row, "benchmark": benchmark, "subset": "all", "n_comparisons": 0, "dropped": NOT_AUDITED + reason}


def combined_rows(audits: Sequence[BenchmarkAudit], unusable: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per subset, then an ``all`` row per benchmark (comparison-weighted, exact counts pooled); then the
    ``all`` row of each benchmark in ``unusable`` (``{benchmark: reason}``: nothing of it could be audited)."""
    rows = []
    for audit in audits:
        model = shown_name(audit.model.get("model") or "")  # never a machine path in the table or the CSV
        for sub in audit.audits:
            dropped = _dropped(sub.metrics["skipped"])
            rows.append(_row(audit.benchmark, sub.name, sub.metrics, model, sub.metrics["n_items"], dropped))
        summary = dict(audit.summary)
        pooled: dict[str, int] = {}
        for sub in audit.audits:
            for reason, count in sub.metrics["skipped"].items():
                pooled[reason] = pooled.get(reason, 0) + count
        ceilings = summary["ceilings"]
        # The length floor over all subsets: the better length rule pooled over every comparison.
        ceilings = {**ceilings, "length_floor": max(summary["shortest_caption_acc"], summary["longest_caption_acc"])}
        rows.append(_row(audit.benchmark, "all", {**summary, "ceilings": ceilings}, model, None, _dropped(pooled)))
    rows += [unusable_benchmark_row(name, reason) for name, reason in (unusable or {}).items()]
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def combined_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The combined table in Markdown, with how each column is read (and which benchmarks were not audited)."""
    lines = ["| " + " | ".join(COMBINED_COLUMNS) + " |", "|" + "|".join("---" for _ in COMBINED_COLUMNS) + "|"]
    lines += ["| " + " | ".join(_cell(row[c]) for c in COMBINED_COLUMNS) + " |" for row in rows]
    lines += [
        "",
        "Floors are accuracies a blind rule reaches (mean credit: 1 win, 0.5 tie, 0 loss); ceilings are exact upper "
        "bounds of every rule reading only one view of the captions: 1 - (share of comparisons that view forces to a "
        "tie) / 2. Views: bag_of_words (lowercase words, order ignored), length (characters), caption_only (the "
        "caption, not the image). best_blind_ci_low / _high: the 95 % bootstrap interval (items resampled) of the "
        "best blind floor. blind_vs_model: the paired verdict of the best blind rule against the model. "
        "n_cycles: exact cycles inside the benchmark (no additive score can pass them); cycle_acc: the model's "
        "CycleAcc on them. dropped: entries left out, per reason.",
    ]
    skipped = [row["benchmark"] for row in rows if str(row["dropped"] or "").startswith(NOT_AUDITED)]
    if skipped:  # only then: a table of audited benchmarks keeps its bytes
        lines += [
            "",
            f"Not audited: {len(skipped)} benchmark(s) with no subset to audit ({', '.join(skipped)}); each is one "
            "row with count 0 and the reason in dropped.",
        ]
    return "\n".join(lines) + "\n"


def combined_csv(rows: Sequence[dict[str, Any]]) -> str:
    """The combined table as CSV (empty cells where a value is unavailable)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(COMBINED_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row[k] is None else row[k] for k in COMBINED_COLUMNS})
    return buffer.getvalue()


def combined_files(
    audits: Sequence[BenchmarkAudit], folder: Path, unusable: dict[str, str] | None = None
) -> tuple[dict[str, bytes], str]:
    """``audit_all.json`` (``{columns, rows, benchmarks}``, and ``unusable_benchmarks`` when ``unusable`` names any),
    ``audit_all.md`` and ``audit_all.csv`` for ``folder`` (name -> bytes), and the Markdown table.

    ``unusable``: ``{benchmark: reason}`` of the benchmarks with nothing to audit (one row each).
    """
    rows = combined_rows(audits, unusable)
    table = combined_markdown(rows)
    record: dict[str, Any] = {
        "columns": list(COMBINED_COLUMNS),
        "rows": rows,
        "benchmarks": {a.benchmark: a.record() for a in audits},
    }
    if unusable:
        record["unusable_benchmarks"] = {name: {"n_comparisons": 0, "reason": reason} for name, reason in unusable.items()}
    files = {
        "audit_all.json": json_bytes(clean(record), folder / "audit_all.json"),
        "audit_all.md": table.encode("utf-8"),
        "audit_all.csv": combined_csv(rows).encode("utf-8"),
    }
    return files, table


def write_all(audits: Sequence[BenchmarkAudit], out: str | Path, unusable: dict[str, str] | None = None) -> tuple[Path, str]:
    """Every benchmark's files under ``<out>/<name>/`` and the combined table in ``out``, as ONE transaction.

    The whole set is staged in one folder beside ``out`` and swapped in with one exchange
    (:func:`clip_cycles.outputs.write_file_set`; written inside ``out`` file by file where it cannot be
    swapped): a kill or a full disk leaves the previous set whole (benchmark folders and table alike),
    never new benchmark folders beside an old table. Other files in ``out`` are kept. ``unusable``: as in
    :func:`combined_files` (one row each, no folder). Returns the combined JSON's path and the combined
    Markdown table.
    """
    folder = Path(out)
    files: dict[str, bytes] = {}
    for audit in audits:
        own, _ = output_files(audit, folder / audit.benchmark)
        files.update({f"{audit.benchmark}/{name}": data for name, data in own.items()})
    combined, table = combined_files(audits, folder, unusable)
    files.update(combined)
    write_file_set(folder, files, what="audit-benchmark all --out")
    return folder / "audit_all.json", table
