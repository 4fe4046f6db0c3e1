#!/usr/bin/env python
"""Build the THINGS attribute splits into OUT (Parquet files, card and build_info.json).

Usage (from the repository root, with clip_cycles installed)::

    python hf_datasets/things_attribute_splits/build.py --things-root THINGS \\
        --embeddings swinv2=swinv2_concepts.npz --groups llm_groups.json --out OUT
    python hf_datasets/things_attribute_splits/build.py --synthetic small --out OUT

``--things-root`` holds the THINGS files (``unique_id.txt``, the concept-attribute pairs, the
category TSV); the embeddings given are the
ones the clustering and similarity splits are computed on (the paper used Swin-V2 for all
models); ``--synthetic`` builds from the synthetic world's own concept embeddings instead.
Writes ``OUT/data/<strategy>/seed<k>.parquet`` (one row per attribute and fold: the train/test
concept ids of every attribute), ``OUT/build_info.json`` and ``OUT/README.md`` (this folder's
card with a ``configs:`` header listing what was written). Afterwards::

    datasets.load_dataset("OUT", "clustering")

returns a DatasetDict with one split per seed (``seed0``, ``seed1``, ...).
This script takes the inputs of ``clip-cycles splits`` (its flags, the same parser) and writes
the splits that command scores, instead of scoring them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from clip_cycles.attributes.attribute_experiments import PAPER_STRATEGY_ORDER, load_inputs, strategy_names
from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.attributes.splitters import SplitContext, StrategyUnavailable, attribute_folds, coverage_report, make_splitter
from clip_cycles.commands.derived import options_from_namespace
from clip_cycles.commands.splits import SplitsOptions, configure_parser
from clip_cycles.data.folder.card_yaml import card_header
from clip_cycles.encoding.run_context import ModelOptions

CARD = Path(__file__).with_name("README.md")
COLUMNS = (
    "attribute",
    "strategy",
    "seed",
    "repeat",
    "fold",
    "train_concepts",
    "test_concepts",
    "n_train_positive",
    "n_test_positive",
    "degenerate",
)


def split_rows(
    data: ConceptAttributeData,
    X: np.ndarray,
    context: SplitContext,
    strategy: str,
    seed: int,
    fold_assignment: str = "per_attribute",
) -> dict[str, list[object]]:
    """Column lists of one strategy and seed: one row per (attribute, fold).

    ``degenerate`` marks folds where the attribute's positives are not on both sides
    (scored F1 = 0 by ``clip-cycles splits``); nothing is left out.
    """
    params = {} if strategy in context.published else {"fold_assignment": fold_assignment}
    splitter = make_splitter(strategy, context, seed, **params)
    folds = attribute_folds(splitter, X, data.labels, attributes=data.attributes)
    coverage = coverage_report(data.labels, folds, data.attributes)
    rows: dict[str, list[object]] = {name: [] for name in COLUMNS}
    concepts = np.array(data.concepts)
    for a, attribute in enumerate(data.attributes):
        column = data.labels[:, a]
        for f, (train, test) in enumerate(folds[a]):
            rows["attribute"].append(attribute)
            rows["strategy"].append(strategy)
            rows["seed"].append(seed)
            rows["repeat"].append(f // splitter.n_splits)
            rows["fold"].append(f % splitter.n_splits)
            rows["train_concepts"].append(concepts[train].tolist())
            rows["test_concepts"].append(concepts[test].tolist())
            rows["n_train_positive"].append(int(column[train].sum()))
            rows["n_test_positive"].append(int(column[test].sum()))
            rows["degenerate"].append(bool(coverage.degenerate[a, f]))
    return rows


def card_text(configs: dict[str, list[int]]) -> str:
    """The card with a YAML header listing each strategy config and its seed splits."""
    body = CARD.read_text(encoding="utf-8")
    if body.startswith("---"):
        body = body.split("---", 2)[2].lstrip("\n")
    header = card_header(
        {
            "license": "other",
            "task_categories": ["tabular-classification"],
            "pretty_name": "THINGS attribute splits",
            "configs": [
                {
                    "config_name": strategy,
                    "data_files": [{"split": f"seed{seed}", "path": f"data/{strategy}/seed{seed}.parquet"} for seed in seeds],
                }
                for strategy, seeds in configs.items()
            ],
        }
    )
    return header + "\n\n" + body


def build(
    data: ConceptAttributeData,
    X: np.ndarray,
    context: SplitContext,
    out: Path,
    strategies: Sequence[str] = PAPER_STRATEGY_ORDER,
    seeds: Sequence[int] = (0, 1, 2),
    fold_assignment: str = "per_attribute",
    split_embedding: str = "",
) -> dict[str, object]:
    """Write the Parquet files, build_info.json and the card; return build_info."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    configs: dict[str, list[int]] = {}
    unavailable: dict[str, str] = {}
    counts: dict[str, dict[str, int]] = {}
    for strategy in strategies:
        try:
            for seed in seeds:
                rows = split_rows(data, X, context, strategy, seed, fold_assignment)
                path = out / "data" / strategy / f"seed{seed}.parquet"
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(pa.table(rows), path)
                configs.setdefault(strategy, []).append(seed)
                counts.setdefault(strategy, {})[f"seed{seed}"] = len(rows["attribute"])
        except StrategyUnavailable as reason:
            unavailable[strategy] = str(reason)
    info = {
        "data": data.summary(),
        "strategies": sorted(configs),
        "seeds": list(seeds),
        "rows": counts,
        "unavailable": unavailable,
        "fold_assignment": fold_assignment,
        "split_embedding": split_embedding,
        "published_splits": {n: {"path": p.path, **p.summary} for n, p in sorted(context.published.items())},
    }
    (out / "build_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    (out / "README.md").write_text(card_text(configs), encoding="utf-8")
    return info


#: Inputs the synthetic world does not read: THINGS files, embeddings and every model flag (plain and ``split-``).
SYNTHETIC_IGNORES = frozenset(
    {"things_root", "pairs", "concept_list", "categories", "embeddings", "groups", "split_embeddings", "model_name"}
    | {"concept_text", "multi_category"}
    | {prefix + field for field in ModelOptions.model_fields for prefix in ("", "split_")}
)


def flags_ignored_by_synthetic(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The flags given (value other than the default) that ``--synthetic`` would not use, as spelled on the command line."""
    given = []
    for action in parser._actions:
        if action.dest in SYNTHETIC_IGNORES and action.option_strings:
            if getattr(args, action.dest, action.default) != action.default:
                given.append(action.option_strings[0])
    return sorted(given)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the inputs of ``clip-cycles splits``, then write the splits, the card and build_info.json to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    configure_parser(parser)
    parser.set_defaults(seeds=[0, 1, 2])
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.synthetic:
        ignored = flags_ignored_by_synthetic(parser, args)
        if ignored:
            parser.error(
                f"--synthetic builds from the synthetic world's own concept embeddings, so {', '.join(ignored)} "
                "would be ignored; drop them, or give --things-root instead of --synthetic"
            )
    data, models, context = load_inputs(options_from_namespace(SplitsOptions, args).inputs)
    name, X = next(iter(models.items()))
    split_embedding = args.split_embeddings or name
    if context.split_embeddings is None:
        context = SplitContext(
            context.concepts,
            context.supercategories,
            context.concept_groups,
            X,
            published=context.published,
            split_embedding_name=name,
        )
    out = Path(args.out)
    info = build(
        data, X, context, out, strategy_names(args.strategies, context), args.seeds, args.fold_assignment, split_embedding
    )
    print(json.dumps({"out": str(out), "embeddings": name, **info["rows"]}, sort_keys=True))  # type: ignore[dict-item]
    return 0


if __name__ == "__main__":
    sys.exit(main())
