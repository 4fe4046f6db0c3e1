"""Paper 2's released protocol (``--protocol paper2``), point by point, beside the project's default.

The project's protocol (``"project"``) deals 5 x 2 folds per attribute for every strategy,
averages them, seeds every split with the run's seeds and scores every attribute. Paper 2's
released code differs; ``"paper2"`` follows it:

- random split: ``RepeatedStratifiedKFold(5, 2, random_state=70)`` per attribute;
- similarity and LLM splits: ``StratifiedShuffleSplit(5, test_size=0.4, random_state=42)``
  per attribute, the listed concepts moved from test to train;
- clustering split: ``KMeans(k=100, random_state=0)`` with scikit-learn's default
  ``n_init``, on ONE embedding shared by every model (``--split-embeddings`` or
  ``--split-model``); supercategory split: whole THINGS categories; both give ONE train/test
  assignment per attribute, as its published files do (a published file, when given, is
  used as is);
- only the attributes of an ``intersect_features.json``-style list (211): ``--attributes``;
- the exact probe (``solver="sklearn"``);
- CS as its script computes it: each attribute's concepts from a ``mcrae++``-format file
  when given (a JSON list of ``{"norm": ..., "concepts": [...]}``; else the data's concepts),
  concepts keyed by the raw TSV ``Word`` (homonyms collapse), each keyed concept given the
  FIRST category marked 1, dominance = max over categories of |concepts in it| / |concepts|.

Paper 2 made its clustering/supercategory files with a greedy group split seeded by the
clock, which no code can redo; without the files this protocol takes, per attribute, the
first fold of a stratified group 5-fold (80/20, seed 0) with positives on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Iterator, Mapping, Sequence

import numpy as np

from clip_cycles.attributes.concepts import (
    ConceptAttributeData,
    SupercategoryTable,
    assign_supercategories,
    read_list_file,
)
from clip_cycles.attributes.splitters import (
    ClusterSplit,
    ConceptSplitter,
    Fold,
    MovedToTrainSplit,
    PublishedSplit,
    RandomSplit,
    SimilaritySplit,
    SplitContext,
    StrategyUnavailable,
    SupercategorySplit,
    _check_label_vector,
    _check_matrix,
    _stratified_group_folds,
    concept_groups_to_ids,
)

#: The protocols of ``clip-cycles splits --protocol`` and of ``experiment_kwargs.protocol``.
PROTOCOLS: tuple[str, ...] = ("project", "paper2")
DEFAULT_PROTOCOL: str = "project"

PAPER2_RANDOM_SEED: int = 70
PAPER2_SHUFFLE_SEED: int = 42
PAPER2_SHUFFLE_SPLITS: int = 5
PAPER2_SHUFFLE_TEST_SIZE: float = 0.4
PAPER2_KMEANS_K: int = 100
PAPER2_KMEANS_RANDOM_STATE: int = 0
PAPER2_GROUP_FOLD_SEED: int = 0
PAPER2_SOLVER: str = "sklearn"
#: What results record as the seed of a paper-2 run (its seeds are fixed per strategy).
PAPER2_SEED_LABEL: str = "paper2"


def check_protocol(protocol: str, where: str = "--protocol") -> str:
    """``protocol`` when it is one of :data:`PROTOCOLS`; a ValueError naming ``where`` otherwise."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"{where}: {protocol!r} is not a protocol; use one of {list(PROTOCOLS)}")
    return protocol


class OneFoldPerAttribute(ConceptSplitter):
    """Whole groups to one side, ONE train/test assignment per attribute (paper 2's published files).

    The groups come from ``groups_splitter`` (k-means clusters, supercategories), computed
    once; each attribute gets the first fold of a stratified group ``n_splits``-fold over
    them (test about 1/``n_splits`` of the concepts) whose train and test sides both hold a
    positive, or the first fold when none does.
    """

    label_free: ClassVar[bool] = False

    def __init__(self, groups_splitter: ConceptSplitter, n_splits: int = 5, random_state: int | None = 0) -> None:
        super().__init__(n_splits, 1, random_state, "per_attribute")
        self.groups_splitter = groups_splitter
        self._groups: tuple[np.ndarray, np.ndarray] | None = None

    def get_n_splits(self, X: object = None, y: object = None, groups: object = None) -> int:
        """One fold per attribute."""
        return 1

    def split(self, X: object, y: object = None, groups: object = None) -> Iterator[Fold]:
        """Yield the one (train, test) fold of the attribute whose labels are ``y``."""
        matrix = _check_matrix(X)
        if y is None:
            raise ValueError(f"{type(self).__name__} assigns one fold per attribute: pass that attribute's labels as y")
        if self._groups is None:  # the same groups (k-means, categories) for every attribute
            self._groups = self.groups_splitter._concept_groups(matrix, groups)
        group_of, forced = self._groups
        labels = _check_label_vector(y, matrix.shape[0])
        folds = list(_stratified_group_folds(group_of, forced, labels, self.n_splits, 1, self.random_state))
        # Paper 2's files hold positives on both sides for nearly every attribute: take the first
        # fold that does, else the first fold (then scored as degenerate, F1 = 0).
        yield next((f for f in folds if labels[f[0]].any() and labels[f[1]].any()), folds[0])


def _moved(rows: np.ndarray) -> MovedToTrainSplit:
    """Paper 2's shuffle splits with the concepts at ``rows`` moved from test to train."""
    return MovedToTrainSplit(rows, PAPER2_SHUFFLE_SPLITS, PAPER2_SHUFFLE_TEST_SIZE, random_state=PAPER2_SHUFFLE_SEED)


def _shared_embedding(context: SplitContext, strategy: str) -> np.ndarray:
    if context.split_embeddings is None:
        raise ValueError(
            f"protocol paper2: the {strategy} split is made on ONE embedding shared by every model; "
            "give --split-embeddings NAME_OR_FILE or --split-model (dataset_kwargs.split_embeddings in a task)"
        )
    return _check_matrix(context.split_embeddings, "split embeddings")


def paper2_splitter(strategy: str, context: SplitContext, n_clusters: int | None = None) -> ConceptSplitter:
    """The splitter paper 2's released code uses for ``strategy`` (module docstring); its seeds are fixed."""
    if strategy == "random":
        return RandomSplit(n_splits=5, n_repeats=2, random_state=PAPER2_RANDOM_SEED)
    if strategy == "llm":
        if not context.concept_groups:
            raise StrategyUnavailable("llm split needs a concept groups file (--groups); none was given")
        group_ids, _ = concept_groups_to_ids(context.concept_groups, context.concepts)
        if not (group_ids >= 0).any():
            raise StrategyUnavailable("no concept group has two known concepts")
        return _moved(np.flatnonzero(group_ids >= 0))
    if strategy == "similarity":
        embedding = _shared_embedding(context, strategy)
        _, forced = SimilaritySplit(embeddings=embedding)._concept_groups(embedding, None)
        return _moved(np.flatnonzero(forced))
    if strategy == "clustering":
        embedding = _shared_embedding(context, strategy)
        inner = ClusterSplit(n_clusters=n_clusters or PAPER2_KMEANS_K, embeddings=embedding, n_init=None,
                             random_state=PAPER2_KMEANS_RANDOM_STATE)  # fmt: skip
        return OneFoldPerAttribute(inner, random_state=PAPER2_GROUP_FOLD_SEED)
    if strategy == "supercategory":
        if context.supercategories is None or all(s is None for s in context.supercategories):
            raise StrategyUnavailable("supercategory split needs supercategories (a category TSV); none are known")
        return OneFoldPerAttribute(SupercategorySplit(context.supercategories), random_state=PAPER2_GROUP_FOLD_SEED)
    raise ValueError(f"protocol paper2 has no {strategy!r} split; use random, llm, similarity, clustering or supercategory")


def paper2_published_splitter(published: PublishedSplit) -> ConceptSplitter:
    """A published file under paper 2's protocol: per-attribute folds as they are; a moves file
    (concepts moved from test to train) with its shuffle splits (5 at 40 % test, seed 42)."""
    if published.kind == "moves":
        return _moved(published.moved_rows if published.moved_rows is not None else np.zeros(0, dtype=np.int64))
    return published.splitter()


# ---------------------------------------------------------------------------------- CS


def load_concept_sets(path: str | Path) -> dict[str, tuple[str, ...]]:
    """Attribute -> its concepts from a ``mcrae++``-format file: a JSON list of ``{"norm", "concepts"}``.

    A norm listed twice keeps its last entry, as a dict built from the list does.
    """
    path, _, payload = read_list_file(path, "concept sets file (mcrae++ format)")
    if payload is None:
        raise ValueError(f"{path}: a concept sets file is JSON (a list of {{'norm': ..., 'concepts': [...]}}); rename it .json")
    if not isinstance(payload, list):
        raise ValueError(f"{path}: expected a JSON list of {{'norm': ..., 'concepts': [...]}}, got {type(payload).__name__}")
    sets: dict[str, tuple[str, ...]] = {}
    for i, entry in enumerate(payload):
        if not isinstance(entry, dict) or not isinstance(entry.get("norm"), str):
            raise ValueError(f"{path}: item {i} must be an object with a string 'norm' and a list 'concepts'")
        concepts = entry.get("concepts")
        if not isinstance(concepts, list) or not all(isinstance(c, str) for c in concepts):
            raise ValueError(f"{path}: item {i} (norm {entry['norm']!r}): 'concepts' must be a list of strings")
        sets[entry["norm"]] = tuple(concepts)
    return sets


def first_category_words(table: SupercategoryTable) -> dict[str, set[str]]:
    """Category -> the raw ``Word`` cells of the rows whose FIRST 1 is in it (rows without a 1 are left out)."""
    words = table.raw_words or table.words
    found: dict[str, set[str]] = {}
    for row, word in enumerate(words):
        hits = np.flatnonzero(table.membership[row])
        if len(hits):
            found.setdefault(table.categories[int(hits[0])], set()).add(word)
    return found


def data_concept_sets(data: ConceptAttributeData, table: SupercategoryTable) -> dict[str, tuple[str, ...]]:
    """Attribute -> its concepts keyed by their raw TSV ``Word`` (the concept id when it has no row)."""
    rows = assign_supercategories(data.concepts, table).rows
    words = table.raw_words or table.words
    keys = [words[r] if r is not None else c for c, r in zip(data.concepts, rows)]
    return {a: tuple(keys[i] for i in np.flatnonzero(data.labels[:, j])) for j, a in enumerate(data.attributes)}


def paper2_dominance(
    attributes: Sequence[str], concept_sets: Mapping[str, Sequence[str]], categories: Mapping[str, set[str]]
) -> np.ndarray:
    """Per attribute: max over categories of |its concepts in the category| / |its concepts|; NaN when it has no set."""
    out = np.full(len(attributes), np.nan)
    for i, attribute in enumerate(attributes):
        members = set(concept_sets.get(attribute, ()))
        if members:
            out[i] = max((len(members & words) for words in categories.values()), default=0) / len(members)
    return out


@dataclass(frozen=True)
class Paper2CS:
    """Paper 2's supercategory dominance per data attribute, and where its concept sets came from."""

    dominance: np.ndarray
    source: str
    n_attributes_without_set: int

    def summary(self) -> dict[str, object]:
        """JSON-ready provenance for results."""
        return {
            "rule": "dominance = max over categories (first category marked 1, concepts keyed by the raw TSV Word) "
            "of |attribute's concepts in it| / |attribute's concepts|",
            "concept_sets": self.source,
            "n_attributes_without_set": self.n_attributes_without_set,
        }


def paper2_cs_inputs(data: ConceptAttributeData, table: SupercategoryTable, concept_sets: str | Path | None) -> Paper2CS:
    """The dominance paper 2's CS script computes for ``data``'s attributes."""
    sets = load_concept_sets(concept_sets) if concept_sets is not None else data_concept_sets(data, table)
    dominance = paper2_dominance(data.attributes, sets, first_category_words(table))
    source = str(concept_sets) if concept_sets is not None else "the data's concepts (no mcrae++ file given)"
    return Paper2CS(dominance, source, int(np.isnan(dominance).sum()))


__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "OneFoldPerAttribute",
    "Paper2CS",
    "check_protocol",
    "data_concept_sets",
    "first_category_words",
    "load_concept_sets",
    "paper2_cs_inputs",
    "paper2_dominance",
    "paper2_splitter",
]
