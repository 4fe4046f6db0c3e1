"""Runner of the ``attribute_splits`` output type: paper 2 on a THINGS-format root.

Concept embeddings from the model through the feature cache
(:func:`clip_cycles.attributes.concept_features.embed_concepts`), then per-attribute probes
for every seed of the task's split strategy. Registered in :mod:`clip_cycles.evaluation.runners`;
imported only when an attribute task runs (scikit-learn takes about a second to import).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from clip_cycles.attributes.attribute_probes import attribute_task_metrics, protocol_solver
from clip_cycles.attributes.concept_features import _in_root, embed_concepts
from clip_cycles.attributes.concepts import (
    CATEGORY_TSV_NAMES,
    ConceptAttributeData,
    SupercategoryTable,
    _find_file,
    load_embeddings_npz,
    load_supercategory_tsv,
    load_things,
)
from clip_cycles.attributes.paper2_protocol import (
    DEFAULT_PROTOCOL,
    PAPER2_SEED_LABEL,
    PAPER2_SOLVER,
    check_protocol,
    paper2_cs_inputs,
)
from clip_cycles.attributes.splitters import STRATEGIES, SplitContext, StrategyUnavailable, load_concept_groups
from clip_cycles.encoding.run_context import RunContext, RunOutcome
from clip_cycles.evaluation.result_cache import ResultCache
from clip_cycles.evaluation.zero_shot import checked_record
from clip_cycles.fingerprints import canonical_json, file_sha256
from clip_cycles.results import clean, mean_sd
from clip_cycles.settings import split_embeddings_override
from clip_cycles.tasks.registry import AnyTask, AttributeTaskSpec

logger = logging.getLogger(__name__)


def attribute_metrics(
    task: AttributeTaskSpec, data: ConceptAttributeData, X: np.ndarray, root: Path, seeds: Sequence[int]
) -> dict[str, Any]:
    """One attribute task on embedded concepts: every seed, then mean and sd of the headline metrics.

    A strategy that cannot run on this data (no groups file, no supercategories) gives
    ``{"available": False, "unavailable_reason": ...}``; every attribute is scored,
    degenerate folds score F1 = 0 (:class:`clip_cycles.attributes.splitters.CoverageReport`) and are
    counted per seed. ``split_embedding`` says which embedding made the split.
    """
    if task.strategy not in STRATEGIES:
        raise ValueError(f"{task.path}: field 'dataset_kwargs.strategy': {STRATEGIES.unknown_message(task.strategy)}")
    base: dict[str, Any] = {
        "strategy": task.strategy,
        "seeds": list(seeds),
        "n_concepts": len(data.concepts),
        "n_attributes": len(data.attributes),
        "data": data.summary(),
    }
    params = dict(task.split_params)
    if task.k is not None:
        if task.k > len(data.concepts):
            raise ValueError(
                f"{task.path}: field 'dataset_kwargs.k': k={task.k} clusters for {len(data.concepts)} "
                f"concepts; lower k to at most the number of concepts"
            )
        params["n_clusters"] = task.k
        base["k"] = task.k
    groups = None
    if task.groups is not None:
        groups_path = _in_root(root, task.groups)
        if not groups_path.is_file():
            reason = f"concept groups file {groups_path} does not exist (dataset_kwargs.groups of {task.path})"
            if task.strategy == "llm":
                return {**base, "available": False, "unavailable_reason": reason}
            raise FileNotFoundError(reason)
        groups = tuple(tuple(g) for g in load_concept_groups(groups_path))
    split_embeddings, split_name = _split_embeddings(task, data, root)
    if split_name is not None:
        base["split_embeddings"] = split_name
    context = SplitContext(data.concepts, data.supercategories, groups, split_embeddings, split_embedding_name=split_name)
    threshold = task.experiment_kwargs.get("leakage_threshold")
    protocol = check_protocol(
        task.experiment_kwargs.get("protocol", DEFAULT_PROTOCOL), f"{task.path}: field 'experiment_kwargs.protocol'"
    )
    solver = protocol_solver(protocol, task.experiment_kwargs.get("solver"))
    dominance = None
    if protocol == "paper2":
        if solver != PAPER2_SOLVER:
            raise ValueError(
                f"{task.path}: field 'experiment_kwargs.solver': protocol paper2 fits the exact probe ({PAPER2_SOLVER!r})"
            )
        paper2_cs = paper2_cs_inputs(
            data, _category_table(task, root), _in_root(root, task.concept_sets) if task.concept_sets else None
        )
        dominance = paper2_cs.dominance
        base["protocol"], base["paper2_cs"], base["seeds"] = protocol, paper2_cs.summary(), [PAPER2_SEED_LABEL]
        seeds = [0]  # paper 2 fixes its seeds per strategy; recorded as "paper2"
    per_seed: dict[str, dict[str, Any]] = {}
    try:
        for seed in seeds:
            run = attribute_task_metrics(
                X, data, task.strategy, seed, split_params=params, context=context, solver=solver,
                leakage_threshold=threshold, protocol=protocol, dominance=dominance,
            )  # fmt: skip
            per_seed[str(run["seed"])] = run
    except StrategyUnavailable as reason:
        return {**base, "available": False, "unavailable_reason": str(reason)}
    runs = [per_seed[s] for s in per_seed]
    metrics: dict[str, Any] = {**base, "available": True}
    for name, values in (
        ("f1_selectivity", [r["f1_selectivity"] for r in runs]),
        ("cs", [r["cs"] for r in runs]),
        ("mean_f1", [r["mean_f1"] for r in runs]),
        ("leakage", [r["leakage"]["mean_nearest_train_similarity"] for r in runs]),
        ("leakage_share_above_threshold", [r["leakage"]["share_above_threshold"] for r in runs]),
    ):
        summary = mean_sd(values, skip_missing=True)
        metrics[name], metrics[f"{name}_sd"] = summary["mean"], summary["sd"]
    # CS of each fold alone, pooled over seeds: the spread that the headline CS (of fold-averaged F1) averages away.
    per_fold = mean_sd([c for r in runs for c in r["cs_spread"]["cs_per_fold"]], skip_missing=True)
    metrics["cs_per_fold"], metrics["cs_per_fold_sd"] = per_fold["mean"], per_fold["sd"]
    metrics["n_attributes_scored"] = int(min(r["n_attributes_scored"] for r in runs))
    metrics["n_degenerate_folds"] = {s: r["coverage"]["n_degenerate_folds"] for s, r in per_seed.items()}
    metrics["split_embedding"] = runs[0]["split_embedding"]
    metrics["per_seed"] = per_seed
    return metrics


def _category_table(task: AttributeTaskSpec, root: Path) -> SupercategoryTable:
    """The task's category TSV (paper 2's CS reads its raw words)."""
    return load_supercategory_tsv(_find_file(root, task.categories, CATEGORY_TSV_NAMES, "supercategory TSV"))


def _split_embeddings(task: AttributeTaskSpec, data: ConceptAttributeData, root: Path) -> tuple[np.ndarray | None, str | None]:
    """One split embedding for every model: ``$CLIP_CYCLES_SPLIT_EMBEDDINGS`` or the task's key (root-relative).

    Returns the matrix in ``data`` order and the file that made it, or (None, None) for
    each model's own embeddings. Every concept needs a row; missing ones are an error.
    """
    name = split_embeddings_override() or task.split_embeddings
    if not name:
        return None, None
    path = _in_root(root, name)
    ids, matrix = load_embeddings_npz(path)
    row = {c: i for i, c in enumerate(ids)}
    missing = [c for c in data.concepts if c not in row]
    if missing:
        raise ValueError(
            f"split embeddings {path} lack {len(missing)} concepts (first: {missing[:5]}); "
            "embed every concept of the THINGS root with the split model"
        )
    return matrix[[row[c] for c in data.concepts]], str(path)


def task_files(task: AttributeTaskSpec, root: Path) -> dict[str, str | None]:
    """sha256 of every file :func:`attribute_metrics` reads beside the embeddings (None: absent).

    Part of the result cache's key, so an edited groups, split-embedding, category or
    concept-set file recomputes the task's result.
    """
    names: dict[str, Path | None] = {
        "groups": _in_root(root, task.groups) if task.groups else None,
        "split_embeddings": _in_root(root, n) if (n := split_embeddings_override() or task.split_embeddings) else None,
        "concept_sets": _in_root(root, task.concept_sets) if task.concept_sets else None,
    }
    try:
        names["categories"] = _find_file(root, task.categories, CATEGORY_TSV_NAMES, "supercategory TSV")
    except FileNotFoundError:
        names["categories"] = None
    return {k: (str(p) + ":" + file_sha256(p)) if p is not None and p.is_file() else None for k, p in names.items()}


#: The split an attribute-split record scores: the strategy's own folds over the concepts.
ATTRIBUTE_SPLIT = "folds"


def attribute_identity(
    data: ConceptAttributeData, kind: str, files: dict[str, str | None] | None = None, world: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The item set an attribute-split result scored: ``split``, ``items_sha256``, ``source``, ``source_line``.

    ``items_sha256`` digests the concepts, the attributes and each concept's labels (in order) and the
    content of every file read beside them (``files``: role -> ``path:sha256``; the path stays out).
    """
    hashes = {role: str(v).rsplit(":", 1)[-1] for role, v in sorted((files or {}).items()) if v}
    payload = {
        "concepts": list(data.concepts),
        "attributes": list(data.attributes),
        "labels": np.asarray(data.labels, dtype=np.int8).tolist(),
        "files": hashes,
    }
    source = {"kind": kind, "builder": "attributes", "world": world, "annotations": hashes}
    return {
        "split": ATTRIBUTE_SPLIT,
        "items_sha256": hashlib.sha256(canonical_json({"source": source, **payload}).encode("utf-8")).hexdigest(),
        "source": source,
        "source_line": f"{kind}: {len(data.concepts)} concepts, {len(data.attributes)} attributes",
    }


@dataclass
class _Embedded:
    data: ConceptAttributeData
    X: np.ndarray
    info: dict[str, Any]


def run_attributes(tasks: Sequence[AnyTask], context: RunContext) -> RunOutcome:
    """Attribute tasks on the THINGS root ``context.dataset_root``; tasks with the same inputs share one embedding."""
    if context.dataset_root is None:
        raise ValueError(
            f"task {tasks[0].name} needs a THINGS root (--dataset_root / --dataset-root): a folder with "
            "unique_id.txt, concept_attribute_pairs.json (or .csv), category53_wideFormat.tsv and "
            "object_images/<concept>/*.jpg"
        )
    root = Path(context.dataset_root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"THINGS root {root} does not exist")
    embedded: dict[tuple[Any, ...], _Embedded] = {}
    records = []
    cache = ResultCache(context.cache_dir)
    for task in tasks:
        assert isinstance(task, AttributeTaskSpec)
        key = (task.pairs, task.concept_list, task.categories, task.min_concepts, task.embedding, task.attributes)
        if key not in embedded:
            if task.experiment_kwargs.get("protocol") == "paper2" and not task.attributes:
                raise ValueError(
                    f"{task.path}: field 'dataset_kwargs.attributes': protocol paper2 scores only the attributes of "
                    "paper 2's intersect_features.json (211); name that file (relative to the THINGS root)"
                )
            data = load_things(
                root, task.pairs, task.concept_list, task.categories, task.min_concepts, attributes=task.attributes
            )
            data, X, info = embed_concepts(
                root,
                data,
                context.spec,
                context.cache_dir,
                task.embedding,
                task.categories,
                task.min_concepts,
                context.batch_size,
                context.num_workers,
                context.skip_bad_images,
            )
            embedded[key] = _Embedded(data, X, info)
        prepared = embedded[key]
        if context.seeds and task.experiment_kwargs.get("protocol") == "paper2":
            raise ValueError(
                f"{task.name}: protocol paper2 fixes its seeds (random 70, shuffle splits 42, k-means 0); drop --seed(s)"
            )
        seeds = list(context.seeds) if context.seeds else list(task.seeds)
        logger.info(
            "%s: %d concepts, %d attributes, strategy %s, seeds %s",
            task.name,
            len(prepared.data.concepts),
            len(prepared.data.attributes),
            task.strategy,
            seeds,
        )
        # Keyed by the embeddings' and labels' content, the task, its files, the seeds and the code.
        inputs = (task, prepared.data, prepared.X, task_files(task, root))
        metrics, _ = cache.get_or_compute(
            "attribute_splits", inputs, list(seeds), partial(attribute_metrics, task, prepared.data, prepared.X, root, seeds)
        )
        metrics["concept_embedding"] = prepared.info
        record = checked_record(task, context.spec, clean(metrics))
        record.update(attribute_identity(prepared.data, "THINGS", task_files(task, root)))  # what was scored
        records.append(record)
    return RunOutcome(records)
