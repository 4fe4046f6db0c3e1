"""``clip-cycles splits``: attribute generalization splits (:mod:`clip_cycles.attributes.attribute_experiments`).

:func:`split_inputs` turns the parsed flags into one
:class:`~clip_cycles.attributes.attribute_experiments.SplitInputs` (the command line's edge);
:func:`run` calls the library's grid, k ablation and report functions with it.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from pydantic import Field

from clip_cycles.attributes.attribute_experiments import (
    DEFAULT_K_VALUES,
    PAPER_STRATEGY_ORDER,
    SplitInputs,
    check_paper2_flags,
    check_split_config,
    load_inputs,
    markdown_report,
    protocol_cs,
    run_grid,
    run_k_ablation,
    strategy_names,
    write_figures,
)
from clip_cycles.attributes.attribute_probes import DEFAULT_SOLVER, PROBE_SOLVERS
from clip_cycles.attributes.paper2_protocol import check_protocol
from clip_cycles.attributes.splitters import FOLD_ASSIGNMENTS
from clip_cycles.commands.derived import configure
from clip_cycles.outputs import OutputError, plan_outputs, write_file_set
from clip_cycles.results import check_output_folder, clean, json_bytes
from clip_cycles.schemas.options import Options


class SplitsOptions(Options):
    """Options of ``clip-cycles splits``: what is read (:class:`SplitInputs`) and how the grid runs."""

    inputs: SplitInputs = Field(SplitInputs())
    strategies: tuple[str, ...] = Field(
        PAPER_STRATEGY_ORDER, json_schema_extra={"flag": "--strategies", "help": "split strategies"}
    )
    seeds: tuple[int, ...] = Field((0,), json_schema_extra={"flag": "--seeds", "type": "seed", "help": "split seeds"})
    k: int | None = Field(
        None,
        ge=2,
        json_schema_extra={
            "flag": "--k",
            "help": "k of the clustering split (default 100; scaled to 100/1854 on --synthetic small)",
        },
    )
    k_values: tuple[int, ...] = Field(
        DEFAULT_K_VALUES,
        json_schema_extra={
            "flag": "--k-values",
            "nargs": "*",
            "help": "k ablation values (empty to skip); the paper scans [10, 400]",
        },
    )
    solver: str | None = Field(
        None,
        json_schema_extra={
            "flag": "--solver",
            "choices": sorted(PROBE_SOLVERS),
            "help": f"probe solver (default: the protocol's): {DEFAULT_SOLVER} (project: the L2-penalised probe, every "
            "attribute and fold solved together), sklearn_l2 (the same probe, one scikit-learn fit each), sklearn "
            "(paper2: the unpenalised probe, one scikit-learn fit each) or lockstep (unpenalised, batched; see README)",
        },
    )
    num_proc: int | None = Field(
        None,
        ge=1,
        json_schema_extra={
            "flag": "--num-proc",
            "help": "processes for the sklearn solver (--protocol paper2), one BLAS thread each (default: the usable cores)",
        },
    )
    fold_assignment: str = Field(
        "per_attribute",
        json_schema_extra={
            "flag": "--fold-assignment",
            "choices": FOLD_ASSIGNMENTS,
            "help": "group splitters: deal groups per attribute so positives reach both sides (default), "
            "or one shared partition for every attribute (the old behaviour)",
        },
    )
    out: str = Field(json_schema_extra={"flag": "--out", "help": "results folder"})


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles splits``."""
    configure(parser, SplitsOptions, run_splits)


def run_splits(options: SplitsOptions) -> int:
    """Run the grid (and the k ablation unless ``--no-k-ablation``) and write the results folder."""
    inputs = options.inputs
    protocol = check_protocol(inputs.protocol)
    # The whole configuration is checked before any data is read or probe fitted.
    check_split_config(
        protocol=protocol,
        strategies=options.strategies,
        k_values=options.k_values,
        split_embeddings=inputs.split_embeddings,
        split_model=inputs.split_model is not None,
        published_names=[spec.partition("=")[0] for spec in inputs.published_split],
        num_proc=options.num_proc,
    )
    if protocol == "paper2":
        check_paper2_flags(
            synthetic=inputs.synthetic,
            attributes=inputs.attributes,
            seeds=list(options.seeds),
            fold_assignment=options.fold_assignment,
            solver=options.solver,
        )
    elif inputs.concept_sets:
        raise ValueError("--concept-sets is paper 2's CS input; it is read only with --protocol paper2")
    plan_outputs(splits_writes(options.out), splits_reads(inputs))  # before any input is read
    data, models, context = load_inputs(inputs)
    paper2_cs = protocol_cs(inputs, data) if protocol == "paper2" else None
    dominance = paper2_cs.dominance if paper2_cs is not None else None
    seeds = [0] if protocol == "paper2" else list(options.seeds)  # paper 2 fixes its seeds per strategy
    strategies = strategy_names(list(options.strategies), context)
    out = check_output_folder(options.out)  # created only when the results are written, whole
    results: dict[str, object] = {
        "data": data.summary(),
        "protocol": protocol,
        "split_embedding": inputs.split_embeddings or "each model's own embeddings",
        "fold_assignment": options.fold_assignment if protocol == "project" else "paper 2's (see protocol)",
        "published_splits": {n: {"path": p.path, **p.summary} for n, p in sorted(context.published.items())},
    }
    if paper2_cs is not None:
        results["paper2_cs"] = paper2_cs.summary()
    cluster_k = options.k
    if cluster_k is None and inputs.synthetic == "small":
        # The paper's k=100 is for 1,854 concepts; keep the same cluster size on the small world.
        cluster_k = max(2, round(100 * len(data.concepts) / 1854))
    results["grid"] = run_grid(
        models, data, context, strategies, seeds, options.solver, cluster_k, options.fold_assignment, protocol, dominance,
        options.num_proc,
    )  # fmt: skip
    if options.k_values:
        results["k_ablation"] = run_k_ablation(
            models, data, context, list(options.k_values), seeds, options.solver, options.fold_assignment, protocol, dominance,
            options.num_proc,
        )  # fmt: skip
    results = clean(results)  # type: ignore[assignment]
    written = _write_results(results, out)
    print(markdown_report(results))
    print(f"wrote {out / 'results.json'}, {out / 'results.md'} and {len(written)} figures")
    return 0


def splits_writes(out: str) -> dict[str, Path | str]:
    """What ``splits`` writes, for :func:`~clip_cycles.outputs.plan_outputs`: the folder and its two files."""
    return {"--out": out, "--out's results.json": Path(out) / "results.json", "--out's results.md": Path(out) / "results.md"}


def splits_reads(inputs: SplitInputs) -> dict[str, Any]:
    """Every input file or folder ``splits`` reads (``NAME=FILE`` flags by their file)."""
    reads: dict[str, Any] = {
        "--things-root": inputs.things_root,
        "--pairs": inputs.pairs,
        "--concept-list": inputs.concept_list,
        "--categories": inputs.categories,
        "--groups": inputs.groups,
        "--split-embeddings": inputs.split_embeddings,
        "--attributes": inputs.attributes,
    }
    for flag, specs in (("--embeddings", inputs.embeddings), ("--published-split", inputs.published_split)):
        for spec in specs:
            reads[f"{flag} {spec}"] = spec.partition("=")[2] or spec
    return reads


def _write_results(results: dict[str, Any], out: Path) -> list[Path]:
    """``results.json``, ``results.md`` and ``figures/`` under ``out`` as one transaction; returns the figures.

    The figures are drawn in a scratch folder first, so a full disk leaves ``out`` as it was (or absent).
    """
    files = {"results.json": json_bytes(results, out / "results.json"), "results.md": markdown_report(results).encode("utf-8")}
    try:
        with tempfile.TemporaryDirectory(prefix="clip-cycles-figures-") as scratch:
            drawn = write_figures(results, Path(scratch))
            for path in drawn:
                files[f"figures/{path.name}"] = path.read_bytes()
    except OutputError:
        raise
    except OSError as error:
        raise OutputError(
            f"could not draw the figures in a scratch folder ({error.strerror or error}); free space in "
            f"{tempfile.gettempdir()} or set TMPDIR to a folder with space; {out} was left as it was"
        ) from None
    write_file_set(out, files, what="splits --out")
    return [out / "figures" / path.name for path in drawn]
