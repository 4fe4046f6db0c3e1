"""``clip-cycles demo``: the whole pipeline offline (:func:`clip_cycles.evaluation.demo.run_demo`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pydantic import Field

from clip_cycles.commands.derived import configure
from clip_cycles.evaluation.demo import NAME, PAGE_FOLDER, QUICK, run_demo, summary_table
from clip_cycles.experiments.report import REPORT_FILE
from clip_cycles.schemas.options import Options


class DemoOptions(Options):
    """Options of ``clip-cycles demo``."""

    out: str = Field("results", json_schema_extra={"flag": "--out", "help": "results folder (JSON, report.md, figures)"})
    cache_dir: str | None = Field(
        None,
        json_schema_extra={
            "flag": "--cache-dir",
            "help": "cache for data and features (default $CLIP_CYCLES_CACHE or ~/.cache/clip_cycles)",
        },
    )
    quick: bool = Field(False, json_schema_extra={"flag": "--quick", "help": "one seed and fewer epochs (a smoke run)"})


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles demo``."""
    configure(parser, DemoOptions, demo)


def demo(options: DemoOptions) -> int:
    """Run the demo and print the summary table and where the report and page are."""
    results = run_demo(options.out, options.cache_dir, QUICK if options.quick else None)
    out = Path(options.out)
    audit_path = out / f"audit_{NAME}.json"  # the benchmark audit run_demo wrote (removed when it could not run)
    benchmark = json.loads(audit_path.read_text(encoding="utf-8")) if audit_path.is_file() else None
    print(summary_table(results, benchmark))
    print(f"report: {out / REPORT_FILE}")
    print(f"page: {out / PAGE_FOLDER / 'index.html'} (open it in a browser; it needs no server and no network)")
    return 0
