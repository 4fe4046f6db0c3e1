"""``clip-cycles report RESULTS_DIR``: rebuild the report (:func:`clip_cycles.experiments.report.build_report`)."""

from __future__ import annotations

import argparse

from clip_cycles.experiments.report import build_report


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles report RESULTS_DIR``."""
    parser.add_argument("results_dir", help="directory holding probe.json / transfer.json / oe.json")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Rebuild the report and print what was written."""
    paths = build_report(args.results_dir)
    print(f"wrote {paths.markdown} and {len(paths.figures)} figure files")
    return 0
