"""The JSON Schemas of the file formats, for ``clip-cycles schema`` (:mod:`clip_cycles.commands.schema`).

The schemas are exported from the declared models (:mod:`clip_cycles.tasks.task_schema`,
:mod:`clip_cycles.schemas.build_info`, :mod:`clip_cycles.schemas.result`,
:mod:`clip_cycles.schemas.audit_report`, :mod:`clip_cycles.schemas.samples`); copies ship in
``clip_cycles/schemas/json/`` for editors (``# yaml-language-server: $schema=<file>``), and a
test keeps them equal to what the models export. ``clip-cycles schema --out-dir
clip_cycles/schemas/json`` rewrites them after a model changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from clip_cycles.outputs import atomic_write_bytes
from clip_cycles.schemas.audit_report import additive_audit_json_schema
from clip_cycles.schemas.build_info import build_info_json_schema
from clip_cycles.schemas.result import result_json_schema
from clip_cycles.schemas.samples import samples_json_schema
from clip_cycles.tasks.task_schema import task_json_schema

#: Format name -> the function that exports its JSON Schema.
SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "task": task_json_schema,
    "build-info": build_info_json_schema,
    "result": result_json_schema,
    "additive-audit": additive_audit_json_schema,
    "samples": samples_json_schema,
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
