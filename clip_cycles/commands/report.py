"""``clip-cycles report RESULTS_DIR``: rebuild the report (:func:`clip_cycles.experiments.report.build_report`)."""

from __future__ import annotations

import argparse

from pydantic import Field

from clip_cycles.commands.derived import configure
from clip_cycles.experiments.report import build_report
from clip_cycles.schemas.options import Options


class ReportOptions(Options):
    """Options of ``clip-cycles report``."""

    results_dir: str = Field(
        json_schema_extra={
            "flag": "RESULTS_DIR",
            "metavar": "results_dir",
            "help": "directory holding probe.json / transfer.json / oe.json",
        }
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles report RESULTS_DIR``."""
    configure(parser, ReportOptions, run)


def run(options: ReportOptions) -> int:
    """Rebuild the report and print what was written."""
    paths = build_report(options.results_dir)
    print(f"wrote {paths.markdown} and {len(paths.figures)} figure files")
    return 0
