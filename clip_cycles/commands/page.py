"""``clip-cycles page``: a static results page (:func:`clip_cycles.evaluation.page.build_page`)."""

from __future__ import annotations

import argparse

from pydantic import Field

from clip_cycles.commands.model_flags import add_model_arguments, model_options
from clip_cycles.encoding.run_context import ModelOptions, RunContext
from clip_cycles.evaluation.page import DEFAULT_EXAMPLES, DEFAULT_MAX_BYTES, build_page
from clip_cycles.results import check_output_folder
from clip_cycles.schemas.options import Options


class PageOptions(Options):
    """Options of ``clip-cycles page``."""

    results: tuple[str, ...] = Field(min_length=1, json_schema_extra={"flag": "RESULTS"})
    out: str = Field(json_schema_extra={"flag": "--out"})
    examples: int = Field(DEFAULT_EXAMPLES, ge=0, json_schema_extra={"flag": "--examples"})
    max_bytes: int = Field(DEFAULT_MAX_BYTES, ge=1, json_schema_extra={"flag": "--max-bytes"})
    sample_seed: int = Field(0, json_schema_extra={"flag": "--sample-seed"})
    model: ModelOptions


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles page``."""
    parser.add_argument(
        "results", nargs="+", help="result folders or JSON files (demo, eval --output, clip_benchmark, audit-benchmark, splits)"
    )
    parser.add_argument("--out", required=True, help="folder for the site (empty, new, or an older page)")
    parser.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES, help="example cycles of each kind per family")
    parser.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="byte budget of the whole page")
    parser.add_argument("--sample-seed", type=int, default=0, help="seed of the random example sample and the bootstrap")
    add_model_arguments(
        parser.add_argument_group("model whose example cycles are shown (as clip-cycles eval; optional)"),
        aliases=True,
        helps={"model": "model name; omit to build the page from the result files alone (no example cycles)"},
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The namespace as :class:`PageOptions`, then :func:`page`."""
    command = PageOptions.make(
        results=tuple(args.results),
        out=args.out,
        examples=args.examples,
        max_bytes=args.max_bytes,
        sample_seed=args.sample_seed,
        model=model_options(args),
    )
    return page(command)


def page(command: PageOptions) -> int:
    """Build the page and print where its index is."""
    check_output_folder(command.out)  # before any work: a file in the way, a path too long
    context = RunContext.from_options(command.model) if command.model.model else None
    index = build_page(list(command.results), command.out, context, command.examples, command.max_bytes, command.sample_seed)
    print(f"page: {index}")
    return 0
