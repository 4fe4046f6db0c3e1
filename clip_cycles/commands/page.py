"""``clip-cycles page``: a static results page from result records alone (:func:`clip_cycles.evaluation.page.build_page`)."""

from __future__ import annotations

import argparse

from pydantic import Field

from clip_cycles.commands.derived import configure
from clip_cycles.evaluation.page import DEFAULT_EXAMPLES, DEFAULT_MAX_BYTES, build_page
from clip_cycles.outputs import plan_outputs
from clip_cycles.results import check_output_folder
from clip_cycles.schemas.options import Options


class PageOptions(Options):
    """Options of ``clip-cycles page``."""

    results: tuple[str, ...] = Field(
        min_length=1,
        json_schema_extra={
            "flag": "RESULTS",
            "metavar": "results",
            "help": "result folders or JSON files (demo, eval --output, clip_benchmark, audit-benchmark, splits)",
        },
    )
    out: str = Field(json_schema_extra={"flag": "--out", "help": "folder for the site (empty, new, or an older page)"})
    examples: int = Field(
        DEFAULT_EXAMPLES, ge=0, json_schema_extra={"flag": "--examples", "help": "example cycles of each kind per family"}
    )
    max_bytes: int = Field(
        DEFAULT_MAX_BYTES, ge=1, json_schema_extra={"flag": "--max-bytes", "help": "byte budget of the whole page"}
    )
    sample_seed: int = Field(
        0,
        ge=0,
        json_schema_extra={"flag": "--sample-seed", "help": "seed of the random example sample and the bootstrap"},
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles page``."""
    configure(parser, PageOptions, page)


def page(command: PageOptions) -> int:
    """Build the page from the records and the samples files they name, and print where its index is."""
    check_output_folder(command.out)  # before any work: a file in the way, a path too long
    # The site never replaces a results folder or file it reads.
    plan_outputs({"--out": command.out}, {f"RESULTS {path}": path for path in command.results})
    index = build_page(list(command.results), command.out, command.examples, command.max_bytes, command.sample_seed)
    print(f"page: {index}")
    return 0
