"""``clip-cycles audit``: re-check a built dataset folder (:func:`clip_cycles.data.folder.audit.audit_folder`)."""

from __future__ import annotations

import argparse
import json

from pydantic import Field

from clip_cycles.commands.derived import configure
from clip_cycles.data.folder.audit import audit_folder
from clip_cycles.schemas.options import Options


class AuditOptions(Options):
    """Options of ``clip-cycles audit``."""

    folder: str = Field(json_schema_extra={"flag": "FOLDER", "help": "a folder written by `clip-cycles build coco|gqa`"})
    source_root: str | None = Field(
        None, json_schema_extra={"flag": "--source-root", "help": "raw annotations root (default: build_info.json's)"}
    )
    json_output: bool = Field(False, json_schema_extra={"flag": "--json", "help": "print the full result as JSON"})


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles audit``."""
    configure(parser, AuditOptions, run_audit)


def run_audit(options: AuditOptions) -> int:
    """``clip-cycles audit``: print the table and every violation; exit 1 on any, or when nothing was checked."""
    result = audit_folder(options.folder, options.source_root)
    if options.json_output:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(f"{'family':<24} {'seed':>4} {'split':<10} {'cycles':>7} {'matched true':>13} {'swaps false':>12}")
        for row in result["table"]:
            print(f"{row['family']:<24} {row['seed']:>4} {row['split']:<10} {row['cycles']:>7} "
                  f"{row['matched_true']:>13} {row['swapped_false']:>12}")  # fmt: skip
        for problem in result["problems"]:
            print(f"VIOLATION: {problem}")
        print(f"audit passed ({result['checked_rows']} rows)" if result["ok"]
              else f"audit FAILED: {len(result['problems'])} problem(s)")  # fmt: skip
    return 0 if result["ok"] else 1
