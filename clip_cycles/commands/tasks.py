"""``clip-cycles tasks [PATTERN]``: every task and collection, one line each, as a harness lists them."""

from __future__ import annotations

import argparse
import fnmatch
import sys
from typing import Sequence

from pydantic import Field

from clip_cycles.commands.derived import configure
from clip_cycles.schemas.options import Options
from clip_cycles.tasks.names import format_task_lines, task_lines
from clip_cycles.tasks.registry import TaskRegistry


class TasksOptions(Options):
    """Options of ``clip-cycles tasks``."""

    patterns: tuple[str, ...] = Field(
        (),
        json_schema_extra={
            "flag": "PATTERN",
            "nargs": "*",
            "help": "fnmatch patterns ('cycles/coco_*') or names or namespace prefixes ('cycles', 'attributes'); default: all",
        },
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles tasks [PATTERN]``."""
    configure(parser, TasksOptions, list_tasks)


def _selected(name: str, patterns: Sequence[str]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(name, p) or name.startswith(p.rstrip("/") + "/") for p in patterns)


def list_tasks(options: TasksOptions) -> int:
    """Print the matching tasks (name, output type or collection, what it reads, description) to stdout.

    Task files that do not validate are listed after them with their reason, never left out.
    """
    registry = TaskRegistry.default()
    registry.names()  # reads every file, filling registry.unavailable
    broken = {name: reason for name, reason in registry.unavailable.items() if _selected(name, options.patterns)}
    found = {}
    for pattern in options.patterns or [None]:
        try:
            found.update({line.name: line for line in task_lines(pattern, registry)})
        except ValueError:
            if not any(_selected(name, [pattern]) for name in broken):  # type: ignore[list-item]
                raise  # matches nothing at all: the sentence with the nearest names
    lines = [found[name] for name in sorted(found)]
    sys.stdout.write(format_task_lines(lines, broken))
    return 0
