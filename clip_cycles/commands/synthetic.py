"""``clip-cycles synthetic``: the synthetic controls (:func:`clip_cycles.experiments.synthetic.run_synthetic`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pydantic import Field

from clip_cycles.commands.derived import configure
from clip_cycles.evaluation.result_cache import ResultCache
from clip_cycles.experiments.synthetic import QUICK, SyntheticConfig, format_table, run_synthetic
from clip_cycles.results import write_json
from clip_cycles.schemas.options import Options
from clip_cycles.settings import resolve_cache_dir


class SyntheticOptions(Options):
    """Options of ``clip-cycles synthetic``."""

    out: str = Field(
        "results/synthetic.json", json_schema_extra={"flag": "--out", "help": "JSON output path (default: %(default)s)"}
    )
    seeds: tuple[int, ...] = Field(
        (0, 1, 2), json_schema_extra={"flag": "--seeds", "type": "seed", "help": "seeds (default: 0 1 2)"}
    )
    quick: bool = Field(False, json_schema_extra={"flag": "--quick", "help": "reduced sizes and epochs (tests, smoke runs)"})
    epochs: int | None = Field(
        None, ge=1, json_schema_extra={"flag": "--epochs", "help": "override the number of training epochs"}
    )
    use_cache: bool = Field(
        True, json_schema_extra={"flag": "--no-cache", "help": "recompute, and store nothing in the result cache"}
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles synthetic``."""
    configure(parser, SyntheticOptions, synthetic)


def synthetic(options: SyntheticOptions) -> int:
    """Run the controls, print the table, write JSON; 1 if the pattern fails."""
    config = QUICK if options.quick else SyntheticConfig()
    if options.epochs is not None:
        config = config.replace(epochs=options.epochs)
    seeds = tuple(options.seeds)
    out = Path(options.out)
    if out.is_dir():  # refused before minutes of fitting, not when the JSON is written
        raise ValueError(f"--out {out} is a folder; give a JSON file path")
    cache = ResultCache(resolve_cache_dir(None) if options.use_cache else None)
    start = time.perf_counter()
    # Keyed by the configuration, the seeds and the code: a warm rerun reuses the controls.
    result, reused = cache.get_or_compute(
        "run_synthetic", (), (config, seeds, options.quick), lambda: run_synthetic(config, seeds, quick=options.quick)
    )
    elapsed = time.perf_counter() - start
    if reused:
        print(f"reused the cached synthetic controls (result cache: {cache.root})")
    print(format_table(result), flush=True)
    write_json(result, options.out)
    print(f"wrote {options.out} in {elapsed:.1f} s")
    return 0 if result["passed"] else 1
