"""``clip-cycles compare A B --out X.json``: paired differences of two models on the same cycles, per family."""

from __future__ import annotations

import argparse
import json

from pydantic import Field

from clip_cycles.algebra.bootstrap import DEFAULT_BOOTSTRAP_SEED, DEFAULT_LEVEL, DEFAULT_N_RESAMPLES
from clip_cycles.commands.flags import finite_float, seed_argument
from clip_cycles.evaluation.compare import compare_samples
from clip_cycles.results import check_output_file, write_json
from clip_cycles.schemas.options import Options


class CompareOptions(Options):
    """Options of ``clip-cycles compare``."""

    a: str = Field(json_schema_extra={"flag": "A"})
    b: str = Field(json_schema_extra={"flag": "B"})
    out: str | None = Field(None, json_schema_extra={"flag": "--out"})
    n_resamples: int = Field(DEFAULT_N_RESAMPLES, ge=1, le=100_000, json_schema_extra={"flag": "--n-resamples"})
    level: float = Field(DEFAULT_LEVEL, gt=0.0, lt=1.0, json_schema_extra={"flag": "--level"})
    seed: int = Field(DEFAULT_BOOTSTRAP_SEED, ge=0, json_schema_extra={"flag": "--seed"})


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles compare A B``: A and B are per-cycle samples files of ``clip-cycles eval --samples``."""
    parser.add_argument("a", metavar="A", help="per-cycle samples of model A (clip-cycles eval --samples A.jsonl)")
    parser.add_argument("b", metavar="B", help="per-cycle samples of model B, on the same tasks, seeds and split")
    parser.add_argument("--out", default=None, help="write the comparison JSON here (default: print it)")
    parser.add_argument("--n-resamples", type=int, default=DEFAULT_N_RESAMPLES, help="bootstrap resamples (images)")
    parser.add_argument("--level", type=finite_float, default=DEFAULT_LEVEL, help="interval coverage")
    parser.add_argument("--seed", type=seed_argument, default=DEFAULT_BOOTSTRAP_SEED, help="bootstrap generator seed")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The namespace as :class:`CompareOptions`, then :func:`compare`."""
    options = CompareOptions.make(
        a=args.a, b=args.b, out=args.out, n_resamples=args.n_resamples, level=args.level, seed=args.seed
    )
    return compare(options)


def compare(options: CompareOptions) -> int:
    """Compare, print one line per family and write (or print) the JSON."""
    if options.out is not None:
        check_output_file(options.out, "--out")
    record = compare_samples(options.a, options.b, options.n_resamples, options.level, options.seed)
    for task, row in record["families"].items():
        print(
            f"{task}: A - B = {row['diff']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}] "
            f"({row['n_cycles']} cycles, {row['n_images']} images): {row['verdict']}"
        )
    if options.out is None:
        print(json.dumps(record, sort_keys=True, indent=2))
    else:
        print(f"-> {write_json(record, options.out)}")
    return 0
