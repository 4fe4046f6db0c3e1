"""``clip-cycles splits``: paper 2's Table 1/2 grid (models x strategies) and the k ablation.

Input is either a THINGS-format root (concept list, pairs, supercategory TSV) with one
embeddings npz per model (``concepts`` + ``embeddings`` arrays, read without pickle)
and/or a model of any backend (``--model-type``/``--model``/``--pretrained``) that
embeds the root's concepts through the feature cache (mean image embedding over
``object_images/<concept>/*.jpg``, or with ``--concept-text`` the text embedding of the
concept's name or definition), or the synthetic concept world. Output folder::

    results.json     data summary, per model/strategy/seed metrics, table means, k ablation,
                     degenerate folds per strategy, split embedding, published split files read
    results.md       Table 1 (F1 selectivity), Table 2 (CS), leakage, degenerate folds, k ablation, skips

Every strategy scores the same attributes (degenerate folds score F1 = 0); paper 2's
published split files join the grid as strategies (``--published-split NAME=FILE``).
    figures/strategies.{png,svg}, figures/k_ablation.{png,svg}

Same inputs and seeds give byte-identical files.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Literal, Sequence

import numpy as np
from pydantic import Field

from clip_cycles.attributes.attribute_probes import attribute_task_metrics
from clip_cycles.attributes.concept_features import embed_concepts
from clip_cycles.attributes.concept_world import ConceptWorldConfig, make_concept_world
from clip_cycles.attributes.concepts import (
    CATEGORY_TSV_NAMES,
    CONCEPT_LIST_NAMES,
    DEFAULT_MIN_CONCEPTS,
    MULTI_CATEGORY_RULES,
    ConceptAttributeData,
    _find_file,
    align_embeddings,
    load_attribute_list,
    load_concept_list,
    load_embeddings_npz,
    load_supercategory_tsv,
    load_things,
)
from clip_cycles.attributes.paper2_protocol import (
    DEFAULT_PROTOCOL,
    PAPER2_SOLVER,
    PROTOCOLS,
    Paper2CS,
    paper2_cs_inputs,
)
from clip_cycles.attributes.split_model import SPLIT_MODEL_FIELDS, SPLIT_PREFIX, split_embeddings_from_model
from clip_cycles.attributes.splitters import (
    STRATEGIES,
    SplitContext,
    StrategyUnavailable,
    load_concept_groups,
    load_published_split,
)
from clip_cycles.encoding.run_context import DATA_FIELDS, ModelOptions, RunContext
from clip_cycles.results import mean_sd
from clip_cycles.schemas.options import CheckedOptions

logger = logging.getLogger(__name__)

PAPER_STRATEGY_ORDER: tuple[str, ...] = ("random", "llm", "similarity", "clustering", "supercategory")
DEFAULT_K_VALUES: tuple[int, ...] = (10, 25, 50, 100, 200, 400)


def run_grid(
    models: dict[str, np.ndarray],
    data: ConceptAttributeData,
    context: SplitContext,
    strategies: Sequence[str],
    seeds: Sequence[int],
    solver: str | None = None,
    cluster_k: int | None = None,
    fold_assignment: str = "per_attribute",
    protocol: str = DEFAULT_PROTOCOL,
    dominance: np.ndarray | None = None,
    num_proc: int | None = None,
) -> dict[str, object]:
    """Metrics for every model x strategy x seed, the table means, and unavailable strategies.

    Every strategy is scored over the same attributes (degenerate folds score F1 = 0);
    the table gives, per strategy, the degenerate fold count of each seed. ``protocol`` and
    ``dominance``: see :func:`clip_cycles.attributes.attribute_probes.attribute_task_metrics`.
    """
    grid: dict[str, dict[str, dict[str, object]]] = {}
    unavailable: dict[str, str] = {}
    for model, X in models.items():
        grid[model] = {}
        for strategy in strategies:
            if strategy in unavailable:
                continue
            params: dict[str, object] = {}
            if strategy not in context.published:
                params["fold_assignment"] = fold_assignment
            if strategy == "clustering" and cluster_k:
                params["n_clusters"] = cluster_k
            per_seed: dict[str, object] = {}
            try:
                for seed in seeds:
                    metrics = attribute_task_metrics(
                        X, data, strategy, seed, split_params=params, context=context, solver=solver,
                        protocol=protocol, dominance=dominance, num_proc=num_proc,
                    )  # fmt: skip
                    per_seed[str(metrics["seed"])] = metrics
            except StrategyUnavailable as reason:
                unavailable[strategy] = str(reason)
                continue
            grid[model][strategy] = per_seed
    table = {
        model: {
            strategy: {
                metric: mean_sd([per_seed[s][metric] for s in per_seed], skip_missing=True, count=True)  # type: ignore[index]
                for metric in ("f1_selectivity", "cs")
            }
            | {
                "leakage": mean_sd(
                    [per_seed[s]["leakage"]["mean_nearest_train_similarity"] for s in per_seed],  # type: ignore[index]
                    skip_missing=True,
                    count=True,
                )
            }
            | {
                # CS of one fold alone, pooled over every fold of every seed: its spread is the fold noise.
                "cs_per_fold": mean_sd(
                    [c for s in per_seed for c in per_seed[s]["cs_spread"]["cs_per_fold"]],  # type: ignore[index]
                    skip_missing=True,
                    count=True,
                ),
                "f1_fold_sd": mean_sd([per_seed[s]["cs_spread"]["f1_fold_sd"] for s in per_seed], skip_missing=True, count=True),  # type: ignore[index]
            }
            | {
                "n_attributes_scored": [per_seed[s]["n_attributes_scored"] for s in per_seed],  # type: ignore[index]
                "n_degenerate_folds": [per_seed[s]["coverage"]["n_degenerate_folds"] for s in per_seed],  # type: ignore[index]
                "n_attribute_folds": [per_seed[s]["coverage"]["n_attribute_folds"] for s in per_seed],  # type: ignore[index]
                "split_embedding": next(iter(per_seed.values()))["split_embedding"],  # type: ignore[index]
            }
            for strategy, per_seed in by_strategy.items()
        }
        for model, by_strategy in grid.items()
    }
    return {"grid": grid, "table": table, "unavailable": unavailable}


def run_k_ablation(
    models: dict[str, np.ndarray],
    data: ConceptAttributeData,
    context: SplitContext,
    k_values: Sequence[int],
    seeds: Sequence[int],
    solver: str | None = None,
    fold_assignment: str = "per_attribute",
    protocol: str = DEFAULT_PROTOCOL,
    dominance: np.ndarray | None = None,
    num_proc: int | None = None,
) -> dict[str, object]:
    """Clustering split over k: F1 selectivity and CS per model and k; k > n_concepts is skipped and named."""
    results: dict[str, dict[str, object]] = {}
    skipped: dict[str, str] = {}
    n = len(data.concepts)
    for model, X in models.items():
        results[model] = {}
        for k in k_values:
            if k > n or k < 2:
                skipped[str(k)] = f"k={k} is outside [2, {n}] (number of concepts)"
                continue
            runs = [
                attribute_task_metrics(
                    X,
                    data,
                    "clustering",
                    seed,
                    split_params={"n_clusters": k, "fold_assignment": fold_assignment},
                    context=context,
                    solver=solver,
                    protocol=protocol,
                    dominance=dominance,
                    num_proc=num_proc,
                )
                for seed in seeds
            ]
            results[model][str(k)] = {
                "f1_selectivity": mean_sd([r["f1_selectivity"] for r in runs], skip_missing=True, count=True),  # type: ignore[misc]
                "cs": mean_sd([r["cs"] for r in runs], skip_missing=True, count=True),  # type: ignore[misc]
                "n_attributes_scored": [r["n_attributes_scored"] for r in runs],
                "n_degenerate_folds": [r["coverage"]["n_degenerate_folds"] for r in runs],  # type: ignore[index]
            }
    return {"results": results, "skipped": skipped}


def _fmt(cell: dict[str, object] | None, digits: int) -> str:
    if not cell or cell.get("mean") is None:
        return "n/a"
    mean, sd = float(cell["mean"]), float(cell["sd"] or 0.0)  # type: ignore[arg-type]
    return f"{mean:.{digits}f} ± {sd:.{digits}f}" if cell.get("n", 0) > 1 else f"{mean:.{digits}f}"  # type: ignore[operator]


def markdown_report(results: dict[str, object]) -> str:
    """Tables 1 and 2 (paper layout), leakage, the k ablation and the skips, as markdown."""
    grid = results["grid"]  # type: ignore[index]
    table = grid["table"]  # type: ignore[index]
    strategies = [s for s in PAPER_STRATEGY_ORDER if any(s in t for t in table.values())]  # type: ignore[union-attr]
    strategies += sorted({s for t in table.values() for s in t} - set(strategies))  # type: ignore[union-attr]
    lines = ["# Attribute generalization splits", ""]
    lines += ["Data: " + json.dumps(results["data"], sort_keys=True), ""]  # type: ignore[index]
    for title, metric, digits in (
        ("Table 1: F1 selectivity (higher is better)", "f1_selectivity", 1),
        ("Table 2: CS, correlation with supercategory (lower is less leakage); CS of the fold-averaged F1", "cs", 2),
        ("CS of one fold alone (mean ± sd over folds and seeds; fold noise pulls it towards 0)", "cs_per_fold", 2),
        ("F1 spread over folds: mean over attributes of the sd of F1 (points) across folds", "f1_fold_sd", 1),
        ("Leakage: mean cosine similarity of test concepts to their nearest train concept", "leakage", 3),
    ):
        lines += [f"## {title}", "", "| model | " + " | ".join(strategies) + " |", "|---" * (len(strategies) + 1) + "|"]
        for model, by_strategy in table.items():  # type: ignore[union-attr]
            cells = [_fmt(by_strategy.get(s, {}).get(metric), digits) for s in strategies]
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Degenerate folds (scored F1 = 0) / all attribute folds, per seed; split embedding", ""]
    lines += ["| model | strategy | degenerate folds | attributes scored | split embedding |", "|---|---|---|---|---|"]
    for model, by_strategy in table.items():  # type: ignore[union-attr]
        for s in strategies:
            cell = by_strategy.get(s)
            if cell:
                folds = ", ".join(f"{d}/{n}" for d, n in zip(cell["n_degenerate_folds"], cell["n_attribute_folds"]))
                scored = ", ".join(str(n) for n in cell["n_attributes_scored"])
                lines.append(f"| {model} | {s} | {folds} | {scored} | {cell['split_embedding']} |")
    lines.append("")
    unavailable = grid["unavailable"]  # type: ignore[index]
    if unavailable:
        lines += ["Unavailable strategies:", ""] + [f"- {k}: {v}" for k, v in sorted(unavailable.items())] + [""]
    ablation = results.get("k_ablation")
    if ablation:
        ks = sorted({int(k) for r in ablation["results"].values() for k in r}, key=int)  # type: ignore[union-attr]
        lines += ["## K ablation (clustering split)", "", "| model | metric | " + " | ".join(f"k={k}" for k in ks) + " |"]
        lines.append("|---" * (len(ks) + 2) + "|")
        for model, by_k in ablation["results"].items():  # type: ignore[union-attr]
            for metric, digits in (("f1_selectivity", 1), ("cs", 2)):
                cells = [_fmt(by_k.get(str(k), {}).get(metric), digits) for k in ks]
                lines.append(f"| {model} | {metric} | " + " | ".join(cells) + " |")
        if ablation["skipped"]:
            lines += [""] + [f"- skipped k={k}: {v}" for k, v in sorted(ablation["skipped"].items())]
        lines.append("")
    return "\n".join(lines)


def write_figures(results: dict[str, object], folder: Path) -> list[Path]:
    """Bar charts of F1 selectivity and CS per strategy, and the k-ablation curves (PNG + SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "clip_cycles"  # stable SVG ids across runs
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    table = results["grid"]["table"]  # type: ignore[index]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    models = list(table)  # type: ignore[arg-type]
    strategies = [s for s in PAPER_STRATEGY_ORDER if any(s in table[m] for m in models)]  # type: ignore[index]
    width = 0.8 / max(len(models), 1)
    for ax, metric, label in ((axes[0], "f1_selectivity", "F1 selectivity"), (axes[1], "cs", "CS")):
        for i, model in enumerate(models):
            values = [table[model].get(s, {}).get(metric, {}).get("mean") for s in strategies]  # type: ignore[index]
            ax.bar(np.arange(len(strategies)) + i * width, [np.nan if v is None else v for v in values], width, label=model)
        ax.set_xticks(np.arange(len(strategies)) + width * (len(models) - 1) / 2, strategies, rotation=20)
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    written += _save(fig, folder / "strategies")
    plt.close(fig)
    ablation = results.get("k_ablation")
    if ablation and any(ablation["results"].values()):  # type: ignore[union-attr]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for model, by_k in ablation["results"].items():  # type: ignore[union-attr]
            ks = sorted(by_k, key=int)
            for ax, metric in ((axes[0], "f1_selectivity"), (axes[1], "cs")):
                ax.plot([int(k) for k in ks], [by_k[k][metric]["mean"] for k in ks], marker="o", label=model)
                ax.set_xscale("log")
                ax.set_xlabel("k (clusters)")
                ax.set_ylabel(metric)
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        written += _save(fig, folder / "k_ablation")
        plt.close(fig)
    return written


def _save(fig: object, stem: Path) -> list[Path]:
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    fig.savefig(paths[0], dpi=120, metadata={"Software": None})  # type: ignore[attr-defined]
    fig.savefig(paths[1], metadata={"Date": None, "Creator": None})  # type: ignore[attr-defined]
    return paths


def _parse_model(spec: str) -> tuple[str, Path]:
    name, sep, path = spec.partition("=")
    return (name, Path(path)) if sep else (Path(spec).stem, Path(spec))


INPUT_GROUP = "input (THINGS format or synthetic)"
MODEL_GROUP = "model (embed the THINGS root's concepts with any backend, through the cache)"


def _flag(flag: str, help: str, group: str | None = INPUT_GROUP, **more: object) -> dict[str, object]:
    return {"flag": flag, "help": help, **({"group": group} if group else {}), **more}


class SplitInputs(CheckedOptions):
    """What ``clip-cycles splits`` reads: a THINGS-format root or the synthetic world, and where embeddings come from.

    Field names are the flags' (``--things-root`` is ``things_root``); ``model`` is the
    model that embeds the root's concepts (its ``model`` None: ``--embeddings`` only),
    ``split_model`` the one that makes the splits for every model (None: none given; its flags are
    ``--split-model-type``, ``--split-model``, ``--split-pretrained``, the rest is ``model``'s).
    """

    things_root: Path | None = Field(
        None, json_schema_extra=_flag("--things-root", "folder with unique_id.txt, pairs, category TSV")
    )
    pairs: str | None = Field(
        None, json_schema_extra=_flag("--pairs", "concept-attribute pairs file (JSON or CSV); default: found in the root")
    )
    concept_list: str | None = Field(
        None, json_schema_extra=_flag("--concept-list", "THINGS concept list; default: unique_id.txt in the root")
    )
    categories: str | None = Field(
        None,
        json_schema_extra=_flag("--categories", "supercategory TSV; default: category53_wideFormat.tsv in the root"),
    )
    embeddings: tuple[str, ...] = Field(
        (),
        json_schema_extra=_flag(
            "--embeddings",
            "concept embeddings of one model (arrays 'concepts', 'embeddings'); repeat per model",
            action="append",
            metavar="NAME=FILE.npz",
        ),
    )
    groups: str | None = Field(
        None, json_schema_extra=_flag("--groups", "near-duplicate concept groups for the llm split (JSON list of lists)")
    )
    split_embeddings: str | None = Field(
        None,
        json_schema_extra=_flag(
            "--split-embeddings",
            "one embedding to cluster / measure similarity on for every model (paper 2: one model for all): "
            "a model name from --embeddings/--model, or an npz; default: each model's own",
            metavar="NAME_OR_FILE",
        ),
    )
    attributes: str | None = Field(
        None,
        json_schema_extra=_flag(
            "--attributes",
            "restrict to these attributes (JSON list, e.g. paper 2's 211, or one name a line)",
            metavar="FILE",
        ),
    )
    multi_category: str = Field(
        "largest",
        json_schema_extra=_flag(
            "--multi-category",
            "category of a concept in several: the largest (paper 2's scripts) or its first 1",
            choices=MULTI_CATEGORY_RULES,
        ),
    )
    published_split: tuple[str, ...] = Field(
        (),
        json_schema_extra=_flag(
            "--published-split",
            "paper 2's published split as strategy NAME: a JSON of per-attribute folds "
            "(attribute -> {train_idxs, test_idxs}, or {features, splits}) or a text file of concept indices "
            "moved from test to train (similarity/LLM); indices into the concept list; repeatable",
            action="append",
            metavar="NAME=FILE",
        ),
    )
    synthetic: Literal["small", "things"] | None = Field(
        None, json_schema_extra=_flag("--synthetic", "use the synthetic concept world")
    )
    world_seed: int = Field(0, ge=0, json_schema_extra=_flag("--world-seed", "seed of the synthetic world"))
    min_concepts: int = Field(
        DEFAULT_MIN_CONCEPTS, ge=1, json_schema_extra=_flag("--min-concepts", "attribute filter (10)", group=None)
    )
    # The model flags of every command, without the task data flags and without the --seed alias
    # (which would shadow the abbreviation of --seeds here).
    model: ModelOptions = Field(
        ModelOptions(),
        json_schema_extra={
            "nested": {
                "skip": DATA_FIELDS,
                "group": MODEL_GROUP,
                "help": {"model": "model name (backend-specific); omit to use --embeddings only"},
            }
        },
    )
    model_name: str | None = Field(
        None,
        json_schema_extra=_flag("--model-name", "row name in the tables (default: MODEL/PRETRAINED)", group=MODEL_GROUP),
    )
    concept_text: Literal["name", "definition"] | None = Field(
        None,
        json_schema_extra=_flag(
            "--concept-text",
            "text embeddings of concept names or definitions instead of mean image embeddings",
            group=MODEL_GROUP,
        ),
    )
    split_model: ModelOptions | None = Field(
        None,
        json_schema_extra={
            "nested": {
                "prefix": SPLIT_PREFIX,
                "only": SPLIT_MODEL_FIELDS,
                "default": {"model_type": "hf_vision"},
                "help": {
                    "model_type": "backend of --split-model (timm, hf_vision or any embedding backend)",
                    "model": "model whose concept image embeddings make the clustering/similarity splits "
                    "(instead of --split-embeddings)",
                    "pretrained": "pretrained tag, revision or checkpoint of --split-model",
                },
                "group": INPUT_GROUP,
                "base": "model",
                "present_if": "model",
            }
        },
    )
    protocol: str = Field(
        DEFAULT_PROTOCOL,
        json_schema_extra=_flag(
            "--protocol",
            "project (default: 5 x 2 folds per attribute for every strategy, the run's seeds) or paper2 "
            "(paper 2's released code point by point; see README 'Attribute generalization splits')",
            group=None,
            choices=PROTOCOLS,
        ),
    )
    concept_sets: str | None = Field(
        None,
        json_schema_extra=_flag(
            "--concept-sets",
            "with --protocol paper2: each attribute's concepts for CS, mcrae++ format (JSON list of {norm, concepts})",
            group=None,
            metavar="FILE",
        ),
    )


def _published_splits(
    specs: Sequence[str], data: ConceptAttributeData, index_concepts: Sequence[str], root: Path | None
) -> dict[str, object]:
    """``--published-split NAME=FILE`` files read against the data's concepts and attributes."""
    published = {}
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep or not name or not file:
            raise ValueError(f"--published-split {spec!r}: expected NAME=FILE (e.g. supercategory_paper=splits.json)")
        if name in STRATEGIES or name in published:
            raise ValueError(f"--published-split name {name!r} is already a strategy; choose another name")
        path = Path(file)
        if root is not None and not path.is_absolute() and not path.exists():
            path = root / path
        published[name] = load_published_split(name, path, index_concepts, data.concepts, data.attributes)
    return published


def load_inputs(inputs: SplitInputs) -> tuple[ConceptAttributeData, dict[str, np.ndarray], SplitContext]:
    """Data, per-model embeddings (aligned on the concepts every model has) and the split context."""
    attribute_list = inputs.attributes
    if inputs.synthetic:
        # The synthetic world makes its own concepts, groups and embeddings: a flag naming others would be ignored.
        ignored = [
            flag
            for flag, value in (
                ("--things-root", inputs.things_root),
                ("--pairs", inputs.pairs),
                ("--concept-list", inputs.concept_list),
                ("--categories", inputs.categories),
                ("--embeddings", inputs.embeddings),
                ("--groups", inputs.groups),
                ("--split-embeddings", inputs.split_embeddings),
                ("--model", inputs.model.model),
                ("--split-model", inputs.split_model is not None),
            )
            if value
        ]
        if ignored:
            raise ValueError(
                f"--synthetic {inputs.synthetic} uses the synthetic world's own concepts and embeddings, so "
                f"{', '.join(ignored)} would be ignored; drop {'it' if len(ignored) == 1 else 'them'}, or leave out "
                "--synthetic and give --things-root"
            )
        config = ConceptWorldConfig.things_sized() if inputs.synthetic == "things" else ConceptWorldConfig()
        world = make_concept_world(config, seed=inputs.world_seed)
        data = world.data
        if attribute_list:
            data = data.select_attributes(load_attribute_list(attribute_list), str(attribute_list))
        published = _published_splits(inputs.published_split, data, world.data.concepts, None)
        context = SplitContext(data.concepts, data.supercategories, world.llm_groups, published=published)  # type: ignore[arg-type]
        return data, {"synthetic": world.embeddings}, context
    if not inputs.things_root or not (inputs.embeddings or inputs.model.model):
        raise ValueError("give --things-root with --model MODEL and/or --embeddings NAME=FILE.npz, or --synthetic")
    root = Path(inputs.things_root)
    data = load_things(
        root,
        inputs.pairs,
        inputs.concept_list,
        inputs.categories,
        inputs.min_concepts,
        multi_category=inputs.multi_category,
        attributes=attribute_list,
    )
    # Published split files index the full concept list, before any concept is dropped.
    index_concepts = load_concept_list(_find_file(root, inputs.concept_list, CONCEPT_LIST_NAMES, "concept list"))
    raw = {name: load_embeddings_npz(path) for name, path in map(_parse_model, inputs.embeddings)}
    if inputs.model.model:
        name, (data, matrix) = _embed_with_model(inputs, data)
        if name in raw:
            raise ValueError(f"model name {name!r} is used by --embeddings too; pass --model-name")
        raw[name] = (data.concepts, matrix)
    # Keep the concepts that every model has, so all rows of a table see the same attributes.
    common = set(data.concepts)
    for ids, _ in raw.values():
        common &= set(ids)
    split_source = inputs.split_embeddings
    split_raw = None
    if split_source:
        # A model name given with --embeddings/--model, or an npz file of its own.
        split_raw = raw[split_source] if split_source in raw else load_embeddings_npz(split_source)
        common &= set(split_raw[0])
    split_model = inputs.split_model
    if split_model is not None:  # paper 2: one image model (Swin-V2) makes the splits for all
        if split_source:
            raise ValueError("give either --split-embeddings or --split-model, not both")
        split_raw = split_embeddings_from_model(split_model, root, data, inputs.categories, inputs.min_concepts)
        split_source = f"{split_model.model_type}:{split_model.model}"
        common &= set(split_raw[0])
    data = data.restrict(np.array([c in common for c in data.concepts]), inputs.min_concepts, reason="concept_without_embedding")
    models = {}
    for name, (ids, matrix) in raw.items():
        data_m, models[name] = align_embeddings(data, ids, matrix, inputs.min_concepts)
        if data_m.attributes != data.attributes:
            raise ValueError(f"model {name}: embeddings with NaN changed the attribute set; fix the file")
    groups = tuple(tuple(g) for g in load_concept_groups(inputs.groups)) if inputs.groups else None
    split_embeddings = None
    if split_raw is not None:
        _, split_embeddings = align_embeddings(data, split_raw[0], split_raw[1], inputs.min_concepts)
    published = _published_splits(inputs.published_split, data, index_concepts, root)
    context = SplitContext(
        data.concepts, data.supercategories, groups, split_embeddings, published=published, split_embedding_name=split_source
    )  # type: ignore[arg-type]
    return data, models, context


def strategy_names(strategies: Sequence[str], context: SplitContext) -> list[str]:
    """The strategies to run: ``strategies`` (``--strategies``) plus every ``--published-split`` name not listed."""
    names = list(strategies)
    names += [n for n in context.published if n not in names]
    unknown = [s for s in names if s not in STRATEGIES and s not in context.published]
    if unknown:
        others = f" (also unknown: {', '.join(map(repr, unknown[1:]))})" if len(unknown) > 1 else ""
        raise ValueError(
            f"{STRATEGIES.unknown_message(unknown[0])}{others}; or name a published split with --published-split NAME=FILE"
        )
    return names


def _embed_with_model(inputs: SplitInputs, data: ConceptAttributeData) -> tuple[str, tuple[ConceptAttributeData, np.ndarray]]:
    """Embed the THINGS root's concepts with the ``--model`` backend through the feature cache."""
    context = RunContext.from_options(inputs.model)
    source = inputs.concept_text or "image"
    embedded, matrix, info = embed_concepts(
        inputs.things_root,
        data,
        context.spec,
        context.cache_dir,
        source,
        inputs.categories,  # type: ignore[arg-type]
        inputs.min_concepts,
        context.batch_size,
        context.num_workers,
        context.skip_bad_images,
    )
    name = inputs.model_name or "/".join(p for p in (inputs.model.model, inputs.model.pretrained) if p)
    logger.info("embedded %d concepts with %s (%s)", len(embedded.concepts), name, json.dumps(info, sort_keys=True))
    return name, (embedded, matrix)


def check_paper2_flags(
    *, synthetic: str | None, attributes: str | None, seeds: Sequence[int], fold_assignment: str, solver: str | None
) -> None:
    """Refuse, with a sentence, the flags ``--protocol paper2`` cannot honour (its choices are fixed)."""
    if synthetic:
        raise ValueError("--protocol paper2 reads a THINGS-format root (its CS script needs the category TSV); drop --synthetic")
    if not attributes:
        raise ValueError(
            "--protocol paper2 scores only the attributes of paper 2's intersect_features.json (211); pass it with --attributes"
        )
    if list(seeds) != [0]:
        raise ValueError(
            f"--protocol paper2 fixes its seeds (random split 70, shuffle splits 42, k-means 0); drop --seeds {list(seeds)}"
        )
    if fold_assignment != "per_attribute":
        raise ValueError("--protocol paper2 fixes its folds per strategy; --fold-assignment applies to --protocol project only")
    if solver is not None and solver != PAPER2_SOLVER:
        raise ValueError(f"--protocol paper2 fits paper 2's exact probe (--solver {PAPER2_SOLVER}); drop --solver {solver}")


#: Strategies that paper 2 makes on ONE embedding shared by every model (--split-embeddings or --split-model).
PAPER2_SHARED_EMBEDDING_STRATEGIES: tuple[str, ...] = ("similarity", "clustering")


def check_split_config(
    *,
    protocol: str,
    strategies: Sequence[str],
    k_values: Sequence[int],
    split_embeddings: str | None,
    split_model: bool,
    published_names: Sequence[str] = (),
    num_proc: int | None = None,
) -> None:
    """Refuse, before any data is read or probe fitted, a ``splits`` configuration that would fail later.

    Under ``--protocol paper2`` the similarity and clustering splits (and the k ablation, a
    clustering split) need one shared split embedding; an unknown strategy is refused here too.
    """
    if num_proc is not None and num_proc < 1:
        raise ValueError(f"--num-proc must be >= 1, got {num_proc}")
    unknown = [s for s in strategies if s not in STRATEGIES and s not in published_names]
    if unknown:
        raise ValueError(f"{STRATEGIES.unknown_message(unknown[0])}; or name a published split with --published-split NAME=FILE")
    if protocol != "paper2" or split_embeddings or split_model:
        return
    needs = [s for s in strategies if s in PAPER2_SHARED_EMBEDDING_STRATEGIES and s not in published_names]
    if k_values:
        needs.append("the k ablation (--k-values)")
    if needs:
        raise ValueError(
            f"--protocol paper2 makes {', '.join(needs)} on ONE embedding shared by every model; give "
            "--split-embeddings NAME_OR_FILE or --split-model, or drop them (--strategies, --k-values with no value)"
        )


def protocol_cs(inputs: SplitInputs, data: ConceptAttributeData) -> Paper2CS:
    """Paper 2's CS inputs: the category TSV's raw words and first-category rule, and the ``--concept-sets`` file."""
    root = Path(inputs.things_root)  # type: ignore[arg-type]
    table = load_supercategory_tsv(_find_file(root, inputs.categories, CATEGORY_TSV_NAMES, "supercategory TSV"))
    concept_sets = inputs.concept_sets
    if concept_sets is not None and not Path(concept_sets).is_absolute() and not Path(concept_sets).exists():
        concept_sets = str(root / concept_sets)
    return paper2_cs_inputs(data, table, concept_sets)


__all__ = [
    "SplitInputs",
    "load_inputs",
    "markdown_report",
    "run_grid",
    "run_k_ablation",
    "strategy_names",
    "write_figures",
]
