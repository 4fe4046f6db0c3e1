"""``clip-cycles compare A B --out X.json``: paired differences of two models on the same cycles, per family."""

from __future__ import annotations

import argparse
import json

from pydantic import Field

from clip_cycles.algebra.bootstrap import DEFAULT_BOOTSTRAP_SEED, DEFAULT_LEVEL, DEFAULT_N_RESAMPLES
from clip_cycles.commands.derived import configure
from clip_cycles.evaluation.compare import compare_samples
from clip_cycles.outputs import plan_outputs
from clip_cycles.results import check_output_file, write_json
from clip_cycles.schemas.options import Options


class CompareOptions(Options):
    """Options of ``clip-cycles compare``."""

    a: str = Field(json_schema_extra={"flag": "A", "help": "per-cycle samples of model A (clip-cycles eval --samples A.jsonl)"})
    b: str = Field(json_schema_extra={"flag": "B", "help": "per-cycle samples of model B, on the same tasks, seeds and split"})
    out: str | None = Field(
        None, json_schema_extra={"flag": "--out", "help": "write the comparison JSON here (default: print it)"}
    )
    n_resamples: int = Field(
        DEFAULT_N_RESAMPLES,
        ge=1,
        le=100_000,
        json_schema_extra={
            "flag": "--n-resamples",
            "help": "bootstrap resamples (one-image designs only; cycles on two images use the two-way interval)",
        },
    )
    level: float = Field(
        DEFAULT_LEVEL, gt=0.0, lt=1.0, json_schema_extra={"flag": "--level", "type": "finite", "help": "interval coverage"}
    )
    seed: int = Field(
        DEFAULT_BOOTSTRAP_SEED,
        ge=0,
        json_schema_extra={"flag": "--seed", "type": "seed", "help": "bootstrap generator seed"},
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles compare A B``: A and B are per-cycle samples files of ``clip-cycles eval --samples``."""
    configure(parser, CompareOptions, compare)


def compare(options: CompareOptions) -> int:
    """Compare, print one line per family and write (or print) the JSON."""
    if options.out is not None:
        check_output_file(options.out, "--out")
    plan_outputs({"--out": options.out}, {"A": options.a, "B": options.b})  # --out never overwrites a samples file
    record = compare_samples(options.a, options.b, options.n_resamples, options.level, options.seed)
    for task, row in record["families"].items():
        print(
            f"{task}: CycleAcc A {row['cycle_acc_a']:.3f}, B {row['cycle_acc_b']:.3f}; "
            f"A - B = {row['diff']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}] "
            f"({row['n_cycles']} cycles, {row['n_images']} images): {row['adjusted_verdict']} "
            f"(unadjusted: {row['verdict']}; {record['adjustment']} over {row['n_adjusted']})"
        )
    overall = record["overall"]
    print(
        f"overall (mean over {overall['n_families']} families): A - B = {overall['diff']:+.3f} "
        f"[{overall['ci_low']:+.3f}, {overall['ci_high']:+.3f}] ({overall['interval_method']})"
    )
    if options.out is None:
        print(json.dumps(record, sort_keys=True, indent=2))
    else:
        print(f"-> {write_json(record, options.out)}")
    return 0
