"""``clip-cycles schema``: print the JSON Schema of a file format, or write the shipped copies."""

from __future__ import annotations

import argparse
from typing import Literal

from pydantic import Field

from clip_cycles.commands.derived import configure
from clip_cycles.commands.schema_formats import SCHEMAS, schema_file_name, schema_text, shipped_schema_dir, write_schemas
from clip_cycles.schemas.options import Options


class SchemaOptions(Options):
    """Options of ``clip-cycles schema``."""

    format: Literal["task", "build-info", "result", "additive-audit", "samples"] | None = Field(
        None, json_schema_extra={"flag": "FORMAT", "nargs": "?", "help": "the file format whose JSON Schema is printed"}
    )
    path: bool = Field(
        False,
        json_schema_extra={
            "flag": "--path",
            "help": "print the path of the shipped schema file instead (for an editor's $schema line)",
        },
    )
    out_dir: str | None = Field(
        None, json_schema_extra={"flag": "--out-dir", "help": "write every format's <name>.schema.json into this folder"}
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles schema``."""
    configure(parser, SchemaOptions, print_schema)


def print_schema(options: SchemaOptions) -> int:
    """Print one schema (or its shipped file's path), or write them all with ``--out-dir``."""
    if options.out_dir is not None:
        if options.format is not None or options.path:
            raise ValueError("--out-dir writes every format's schema; give it without a format or --path")
        for path in write_schemas(options.out_dir):
            print(path)
        return 0
    if options.format is None:
        raise ValueError(f"name a format ({', '.join(SCHEMAS)}), or give --out-dir")
    if options.path:
        print(shipped_schema_dir() / schema_file_name(options.format))
        return 0
    print(schema_text(options.format), end="")
    return 0
