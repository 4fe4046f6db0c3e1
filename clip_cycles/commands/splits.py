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
from clip_cycles.attributes.concepts import DEFAULT_MIN_CONCEPTS, MULTI_CATEGORY_RULES
from clip_cycles.attributes.paper2_protocol import DEFAULT_PROTOCOL, PROTOCOLS, check_protocol
from clip_cycles.attributes.split_model import SPLIT_MODEL_FIELDS, SPLIT_PREFIX
from clip_cycles.attributes.splitters import FOLD_ASSIGNMENTS
from clip_cycles.commands.flags import seed_argument
from clip_cycles.commands.model_flags import add_model_arguments, model_options
from clip_cycles.outputs import OutputError, write_file_set
from clip_cycles.results import check_output_folder, clean, json_bytes
from clip_cycles.schemas.options import Options


def add_split_model_arguments(group: Any) -> None:
    """``--split-model-type``, ``--split-model``, ``--split-pretrained`` on a parser or argument group."""
    add_model_arguments(
        group,
        prefix=SPLIT_PREFIX,
        only=SPLIT_MODEL_FIELDS,
        defaults={"model_type": "hf_vision"},
        helps={
            "model_type": "backend of --split-model (timm, hf_vision or any embedding backend)",
            "model": "model whose concept image embeddings make the clustering/similarity splits (instead of --split-embeddings)",
            "pretrained": "pretrained tag, revision or checkpoint of --split-model",
        },
    )


def split_inputs(args: argparse.Namespace) -> SplitInputs:
    """The :class:`SplitInputs` of parsed ``clip-cycles splits`` flags (the command line's edge)."""
    model = model_options(args)
    split_model = model_options(args, SPLIT_PREFIX, base=model)
    return SplitInputs(
        things_root=args.things_root,
        pairs=args.pairs,
        concept_list=args.concept_list,
        categories=args.categories,
        embeddings=tuple(args.embeddings),
        groups=args.groups,
        split_embeddings=args.split_embeddings,
        attributes=args.attributes,
        multi_category=args.multi_category,
        published_split=tuple(args.published_split),
        synthetic=args.synthetic,
        world_seed=args.world_seed,
        min_concepts=args.min_concepts,
        model=model,
        model_name=args.model_name,
        concept_text=args.concept_text,
        split_model=split_model if split_model.model else None,
        protocol=getattr(args, "protocol", DEFAULT_PROTOCOL),
        concept_sets=getattr(args, "concept_sets", None),
    )


class SplitsOptions(Options):
    """Options of ``clip-cycles splits``: what is read (:class:`SplitInputs`) and how the grid runs."""

    inputs: SplitInputs
    strategies: tuple[str, ...] = Field(PAPER_STRATEGY_ORDER, json_schema_extra={"flag": "--strategies"})
    seeds: tuple[int, ...] = Field((0,), json_schema_extra={"flag": "--seeds"})
    k: int | None = Field(None, ge=2, json_schema_extra={"flag": "--k"})
    k_values: tuple[int, ...] = Field(DEFAULT_K_VALUES, json_schema_extra={"flag": "--k-values"})
    solver: str | None = Field(None, json_schema_extra={"flag": "--solver"})
    num_proc: int | None = Field(None, ge=1, json_schema_extra={"flag": "--num-proc"})
    fold_assignment: str = Field("per_attribute", json_schema_extra={"flag": "--fold-assignment"})
    out: str = Field(json_schema_extra={"flag": "--out"})


def splits_options(args: argparse.Namespace) -> SplitsOptions:
    """The :class:`SplitsOptions` of parsed ``clip-cycles splits`` flags (the command line's edge)."""
    return SplitsOptions.make(
        inputs=split_inputs(args),
        strategies=tuple(args.strategies),
        seeds=tuple(args.seeds),
        k=args.k,
        k_values=tuple(args.k_values),
        solver=args.solver,
        num_proc=getattr(args, "num_proc", None),
        fold_assignment=args.fold_assignment,
        out=args.out,
    )


def run(args: argparse.Namespace) -> int:
    """``clip-cycles splits``: the namespace as :class:`SplitsOptions`, then :func:`run_splits`."""
    return run_splits(splits_options(args))


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


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``clip-cycles splits``."""
    source = parser.add_argument_group("input (THINGS format or synthetic)")
    source.add_argument("--things-root", type=Path, help="folder with unique_id.txt, pairs, category TSV")
    source.add_argument("--pairs", help="concept-attribute pairs file (JSON or CSV); default: found in the root")
    source.add_argument("--concept-list", help="THINGS concept list; default: unique_id.txt in the root")
    source.add_argument("--categories", help="supercategory TSV; default: category53_wideFormat.tsv in the root")
    source.add_argument(
        "--embeddings",
        action="append",
        default=[],
        metavar="NAME=FILE.npz",
        help="concept embeddings of one model (arrays 'concepts', 'embeddings'); repeat per model",
    )
    source.add_argument("--groups", help="near-duplicate concept groups for the llm split (JSON list of lists)")
    source.add_argument(
        "--split-embeddings",
        metavar="NAME_OR_FILE",
        help="one embedding to cluster / measure similarity on for every model (paper 2: one model for all): "
        "a model name from --embeddings/--model, or an npz; default: each model's own",
    )
    source.add_argument(
        "--attributes", metavar="FILE", help="restrict to these attributes (JSON list, e.g. paper 2's 211, or one name a line)"
    )
    source.add_argument(
        "--multi-category",
        choices=MULTI_CATEGORY_RULES,
        default="largest",
        help="category of a concept in several: the largest (paper 2's scripts) or its first 1",
    )
    source.add_argument(
        "--published-split",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="paper 2's published split as strategy NAME: a JSON of per-attribute folds "
        "(attribute -> {train_idxs, test_idxs}, or {features, splits}) or a text file of concept indices "
        "moved from test to train (similarity/LLM); indices into the concept list; repeatable",
    )
    add_split_model_arguments(source)  # --split-model-type/--split-model/--split-pretrained
    source.add_argument("--synthetic", choices=("small", "things"), help="use the synthetic concept world")
    source.add_argument("--world-seed", type=int, default=0, help="seed of the synthetic world")
    model = parser.add_argument_group("model (embed the THINGS root's concepts with any backend, through the cache)")
    # The model flags of every command, without the task data flags and without the --seed alias
    # (which would shadow the abbreviation of --seeds here).
    add_model_arguments(model, data=False, helps={"model": "model name (backend-specific); omit to use --embeddings only"})
    model.add_argument("--model-name", default=None, help="row name in the tables (default: MODEL/PRETRAINED)")
    model.add_argument(
        "--concept-text",
        choices=("name", "definition"),
        default=None,
        help="text embeddings of concept names or definitions instead of mean image embeddings",
    )
    parser.add_argument("--min-concepts", type=int, default=DEFAULT_MIN_CONCEPTS, help="attribute filter (10)")
    parser.add_argument("--strategies", nargs="+", default=list(PAPER_STRATEGY_ORDER), help="split strategies")
    parser.add_argument("--seeds", nargs="+", type=seed_argument, default=[0], help="split seeds")
    parser.add_argument(
        "--k", type=int, default=None, help="k of the clustering split (default 100; scaled to 100/1854 on --synthetic small)"
    )
    parser.add_argument(
        "--k-values",
        nargs="*",
        type=int,
        default=list(DEFAULT_K_VALUES),
        help="k ablation values (empty to skip); the paper scans [10, 400]",
    )
    parser.add_argument(
        "--solver",
        default=None,
        choices=sorted(PROBE_SOLVERS),
        help=f"probe solver (default: the protocol's): {DEFAULT_SOLVER} (project: the L2-penalised probe, every "
        "attribute and fold solved together), sklearn_l2 (the same probe, one scikit-learn fit each), sklearn "
        "(paper2: the unpenalised probe, one scikit-learn fit each) or lockstep (unpenalised, batched; see README)",
    )
    parser.add_argument(
        "--num-proc",
        type=int,
        default=None,
        help="processes for the sklearn solver (--protocol paper2), one BLAS thread each (default: the usable cores)",
    )
    parser.add_argument(
        "--fold-assignment",
        choices=FOLD_ASSIGNMENTS,
        default="per_attribute",
        help="group splitters: deal groups per attribute so positives reach both sides (default), "
        "or one shared partition for every attribute (the old behaviour)",
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default=DEFAULT_PROTOCOL,
        help="project (default: 5 x 2 folds per attribute for every strategy, the run's seeds) or paper2 "
        "(paper 2's released code point by point; see README 'Attribute generalization splits')",
    )
    parser.add_argument(
        "--concept-sets",
        metavar="FILE",
        default=None,
        help="with --protocol paper2: each attribute's concepts for CS, mcrae++ format (JSON list of {norm, concepts})",
    )
    parser.add_argument("--out", required=True, help="results folder")
    parser.set_defaults(func=run)
