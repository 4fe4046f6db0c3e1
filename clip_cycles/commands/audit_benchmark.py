"""``clip-cycles audit-benchmark NAME --root DIR [model flags]``: audit a benchmark in its own format.

Writes ``<out>/audit_<name>.json`` (clip_benchmark's result shape), ``audit_<name>.md``
(the table, also printed) and ``audit_<name>.png`` (model vs blind baselines per subset).
The model flags are those of ``clip-cycles eval``; without ``--model`` only the design
and the caption-length rules are audited.

``clip-cycles audit-benchmark all --root DIR`` (one subfolder per benchmark, named like its
format) or ``all --benchmark NAME=PATH ...`` audits each benchmark found, writes its own files
under ``<out>/<name>/`` and one combined table ``audit_all.json`` / ``.md`` / ``.csv`` in ``<out>``,
all of them one transaction: a kill or a full disk leaves the previous set whole.

An odd piece never stops the rest: a subset with no comparison (a file holding ``[]``, an empty
file, one whose every item is dropped, one that cannot be read) is a row of the table with count 0
and the reason, is listed under ``metrics.unusable_subsets`` of the JSON and named on stderr; every
other subset is audited and the exit status is 0. Only when no subset at all is left is it an error.
With ``all`` the same holds one level up: a benchmark with no subset to audit (every subset empty or
dropped, its folder without a readable file, a file that cannot be read) is one row of the combined
table (count 0, ``dropped`` = ``not audited: <reason>``), listed under ``unusable_benchmarks`` of
``audit_all.json`` and named on stderr, with no folder of its own; every other benchmark is audited
and the exit status is 0. Only when no benchmark at all is left is it an error (exit status 2).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from pydantic import Field

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE
from clip_cycles.benchmark_audit.adapters import ADAPTERS, UNREADABLE
from clip_cycles.benchmark_audit.audit import AuditSettings
from clip_cycles.benchmark_audit.combined import find_benchmarks, parse_benchmark_pairs, write_all
from clip_cycles.benchmark_audit.report import write_outputs
from clip_cycles.benchmark_audit.run import BenchmarkAudit, audit_benchmark
from clip_cycles.commands.derived import configure
from clip_cycles.commands.model_flags import model_field
from clip_cycles.encoding.run_context import ModelOptions, RunContext
from clip_cycles.outputs import plan_outputs
from clip_cycles.results import check_output_folder
from clip_cycles.schemas.options import Options


class AuditBenchmarkOptions(Options):
    """Options of ``clip-cycles audit-benchmark``."""

    name: str = Field(
        json_schema_extra={"flag": "NAME", "metavar": "name", "help": f"benchmark format: {', '.join(sorted(ADAPTERS))}, or all"}
    )
    root: str | None = Field(
        None,
        json_schema_extra={
            "flag": "--root",
            "help": "folder (or table file) holding the benchmark's files; with all: one subfolder per format",
        },
    )
    benchmark: tuple[str, ...] | None = Field(
        None, json_schema_extra={"flag": "--benchmark", "metavar": "NAME=PATH", "help": "with all: the benchmarks to audit"}
    )
    subset: tuple[str, ...] | None = Field(None, json_schema_extra={"flag": "--subset", "help": "audit only these subsets"})
    out: str | None = Field(None, json_schema_extra={"flag": "--out", "help": "output folder (default: results/audit_<name>)"})
    tie_tolerance: float = Field(DEFAULT_TIE_TOLERANCE, ge=0.0, json_schema_extra={"flag": "--tie-tolerance", "type": "finite"})
    probe_folds: int = Field(
        5, json_schema_extra={"flag": "--probe-folds", "help": "cross-validation folds (by item) of the probes"}
    )
    # The model flags of `clip-cycles eval`, without its data flags: an audit reads --root, not tasks.
    model: ModelOptions = model_field(
        data=False,
        aliases=True,
        group="model (as clip-cycles eval)",
        helps={"model": "model name (backend-specific); omit to audit the design and length rules only"},
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    configure(parser, AuditBenchmarkOptions, audit)


def audit(command: AuditBenchmarkOptions) -> int:
    """Audit the benchmark, write the JSON, markdown and figure, print the table."""
    if command.name == ALL:
        return audit_all(command)
    if command.root is None:
        raise ValueError(f"audit-benchmark {command.name}: --root is required (the folder holding the benchmark's files)")
    if command.benchmark is not None:
        raise ValueError(f"audit-benchmark {command.name}: --benchmark NAME=PATH goes with `audit-benchmark all`")
    if command.name not in ADAPTERS:
        raise ValueError(f"unknown benchmark format {command.name!r}; registered: {', '.join(sorted(ADAPTERS))}")
    out = check_output_folder(command.out or os.path.join("results", f"audit_{command.name}"))  # before any work
    plan_outputs(audit_writes(out, [f"audit_{command.name}"]), {"--root": command.root})
    report = _audit_one(command, command.name, command.root)
    path, table = write_outputs(report, out)
    print(table)
    print(f"wrote {path}, {path.stem}.md, {path.stem}.png")
    _say_unusable(report)
    return 0


def audit_writes(out: Path, stems: Sequence[str], folders: Sequence[str] = ()) -> dict[str, Path]:
    """What an audit writes, for :func:`~clip_cycles.outputs.plan_outputs`: ``--out``, each stem's
    ``.json``/``.md`` (and the figure or the CSV) and, with ``all``, one folder per benchmark."""
    writes = {"--out": out}
    for stem in stems:
        for suffix in (".json", ".md", ".png", ".csv"):
            writes[f"--out's {stem}{suffix}"] = out / f"{stem}{suffix}"
    for name in folders:
        writes[f"--out's {name}/"] = out / name
    return writes


def _say_unusable(report: BenchmarkAudit) -> None:
    """Name on stderr the subsets read but not audited (exit status stays 0: every other subset was audited)."""
    if report.unusable:
        names = ", ".join(f"{name} ({row['reason']})" for name, row in report.unusable.items())
        print(f"audit-benchmark {report.benchmark}: {len(report.unusable)} subset(s) not audited: {names}", file=sys.stderr)


#: The name that audits every benchmark found (``--root DIR``) or listed (``--benchmark NAME=PATH``).
ALL = "all"


def _audit_one(command: AuditBenchmarkOptions, name: str, root: str | os.PathLike[str]) -> BenchmarkAudit:
    settings = AuditSettings(tie_tolerance=command.tie_tolerance, probe_folds=command.probe_folds)
    options = command.model
    # Without a model nothing is encoded, so no cache either: only the design and the length rules are audited.
    context = RunContext.from_options(options) if options.model else None
    return audit_benchmark(
        name,
        root,
        context.spec if context else None,
        context.cache_dir if context else None,
        None if command.subset is None else list(command.subset),
        settings,
        options.encode_batch_size,
        options.num_workers,
        options.skip_bad_images,
    )


def audit_all(command: AuditBenchmarkOptions) -> int:
    """Every benchmark under ``--root`` (or each ``--benchmark NAME=PATH``): its own files, then one combined table."""
    if (command.root is None) == (command.benchmark is None):
        raise ValueError("audit-benchmark all: give either --root DIR (one subfolder per benchmark) or --benchmark NAME=PATH ...")
    if command.subset is not None:
        raise ValueError("audit-benchmark all: --subset names one benchmark's subsets; audit that benchmark alone instead")
    found = find_benchmarks(command.root) if command.root is not None else parse_benchmark_pairs(command.benchmark or ())
    out = check_output_folder(command.out or os.path.join("results", "audit_all"))  # before any work
    plan_outputs(audit_writes(out, ["audit_all"], [name for name, _ in found]), {f"--root of {n}": r for n, r in found})
    reports, unusable = [], {}
    for name, root in found:
        try:
            report = _audit_one(command, name, root)
        except UNREADABLE as error:
            # One benchmark with nothing to audit is a row, never the end of the others; its reason names
            # files relative to its root (no machine path in the table).
            unusable[name] = str(error).replace(str(root), f"<{name} root>")
            print(f"audit-benchmark all: {name} not audited: {unusable[name]}", file=sys.stderr)
            continue
        _say_unusable(report)
        reports.append(report)
    if not reports:
        reasons = "; ".join(f"{name}: {reason}" for name, reason in unusable.items())
        raise ValueError(f"audit-benchmark all: no benchmark has a subset to audit ({reasons})")
    # Every benchmark's folder and the combined table: one transaction, written once all are audited.
    path, table = write_all(reports, out, unusable)
    print(table)
    print(f"wrote {path}, {path.stem}.md, {path.stem}.csv and one folder per benchmark")
    return 0
