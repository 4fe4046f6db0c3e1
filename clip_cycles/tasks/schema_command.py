"""``clip-cycles schema``: print the JSON Schema of a file format, or write the shipped copies.

The schemas are exported from the declared models (:mod:`clip_cycles.tasks.task_schema`,
:mod:`clip_cycles.schemas.build_info`, :mod:`clip_cycles.schemas.result`,
:mod:`clip_cycles.schemas.audit_report`); copies ship in
``clip_cycles/schemas/json/`` for editors (``# yaml-language-server: $schema=<file>``), and a
test keeps them equal to what the models export. ``clip-cycles schema --out-dir
clip_cycles/schemas/json`` rewrites them after a model changed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable

from clip_cycles.fingerprints import atomic_write_bytes
from clip_cycles.schemas.audit_report import additive_audit_json_schema
from clip_cycles.schemas.build_info import build_info_json_schema
from clip_cycles.schemas.result import result_json_schema
from clip_cycles.tasks.task_schema import task_json_schema

#: Format name -> the function that exports its JSON Schema.
SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "task": task_json_schema,
    "build-info": build_info_json_schema,
    "result": result_json_schema,
    "additive-audit": additive_audit_json_schema,
}


def shipped_schema_dir() -> Path:
    """The folder of the shipped JSON Schema files (package data)."""
    return Path(__file__).resolve().parents[1] / "schemas" / "json"


def schema_file_name(name: str) -> str:
    """``task`` -> ``task.schema.json``."""
    return f"{name}.schema.json"


def schema_text(name: str) -> str:
    """The JSON Schema of format ``name`` as the shipped file holds it (two-space indent, trailing newline)."""
    if name not in SCHEMAS:
        raise ValueError(f"unknown format {name!r}; formats with a schema: {', '.join(SCHEMAS)}")
    return json.dumps(SCHEMAS[name](), indent=2, ensure_ascii=False) + "\n"


def write_schemas(folder: str | Path) -> list[Path]:
    """Write every format's schema file into ``folder`` (created if needed); returns the paths written."""
    out = Path(folder)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out-dir {out} is a file, not a folder; choose another --out-dir")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SCHEMAS:
        path = out / schema_file_name(name)
        atomic_write_bytes(path, schema_text(name).encode("utf-8"))
        written.append(path)
    return written


def run(args: argparse.Namespace) -> int:
    """Print one schema (or its shipped file's path), or write them all with ``--out-dir``."""
    if args.out_dir is not None:
        if args.format is not None or args.path:
            raise ValueError("--out-dir writes every format's schema; give it without a format or --path")
        for path in write_schemas(args.out_dir):
            print(path)
        return 0
    if args.format is None:
        raise ValueError(f"name a format ({', '.join(SCHEMAS)}), or give --out-dir")
    if args.path:
        print(shipped_schema_dir() / schema_file_name(args.format))
        return 0
    print(schema_text(args.format), end="")
    return 0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles schema``."""
    parser.add_argument("format", nargs="?", choices=sorted(SCHEMAS), help="the file format whose JSON Schema is printed")
    parser.add_argument(
        "--path", action="store_true", help="print the path of the shipped schema file instead (for an editor's $schema line)"
    )
    parser.add_argument("--out-dir", default=None, help="write every format's <name>.schema.json into this folder")
    parser.set_defaults(func=run)
