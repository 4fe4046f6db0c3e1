"""Leakage-controlled train/test splits of concepts, as scikit-learn cross-validators (paper 2).

Every splitter follows scikit-learn's cross-validator API: ``split(X, y=None,
groups=None)`` yields ``(train_idx, test_idx)`` int arrays (sorted, disjoint, together
covering every concept) and ``get_n_splits()`` says how many; ``random_state`` makes
them deterministic, so they drop into ``cross_val_score(..., cv=splitter)``. ``X`` is
the concept embedding matrix (rows = concepts).

Five strategies, from leaky to strict (paper 2, Table 1):

- :class:`RandomSplit`: repeated stratified k-fold (5 x 2). It is the only splitter
  that looks at ``y``: with ``y`` = one attribute's label vector it stratifies on it,
  so each attribute gets its own folds, as in the paper.
- :class:`GroupingSplit`: concepts in a group of near-duplicates (an LLM's list) go to
  train together; the others are split at random.
- :class:`SimilaritySplit`: the concepts in the top similarity groups (a concept and
  its nearest neighbour, strongest first; 600 groups for 1,854 concepts in the paper)
  go to train; the others are split at random.
- :class:`ClusterSplit`: k-means (k=100) on the embeddings; whole clusters go to one side.
- :class:`SupercategorySplit`: whole supercategories go to one side.

Group splitters build folds the same way: per repeat, the groups are shuffled and each
is put into the fold that is currently smallest, so every fold holds close to
``1 / n_splits`` of the splittable concepts (the target test fraction); each fold is
the test side once. They ignore ``y``: one partition of concepts serves every
attribute, which is why an attribute can end up with no positive concept on one side.
:func:`coverage_report` flags those (attribute, fold) pairs; the rule for means is
stated there.

``STRATEGIES`` maps a strategy name to a factory; :func:`make_splitter` builds one from a
:class:`SplitContext` (concept ids, supercategories, near-duplicate groups).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar, Iterator, Sequence

import numpy as np

from clip_cycles.concepts import _show

#: The paper's similarity split uses 600 groups for 1,854 concepts; other sizes scale this.
PAPER_SIMILARITY_GROUP_FRACTION: float = 600 / 1854

Fold = tuple[np.ndarray, np.ndarray]


def _check_matrix(X: object, name: str = "X") -> np.ndarray:
    array = np.asarray(X, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D concept embedding matrix (n_concepts, dim), got shape {array.shape}")
    bad = ~np.isfinite(array).all(axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise ValueError(f"{name} has NaN or inf in {len(rows)} rows (first: {rows[:10].tolist()}); fix or drop them")
    return array


def _n_samples(X: object) -> int:
    if hasattr(X, "shape"):
        return int(X.shape[0])  # type: ignore[union-attr]
    return len(X)  # type: ignore[arg-type]


class ConceptSplitter:
    """Base of the concept splitters: repeated k-fold bookkeeping and the sklearn API."""

    #: True when the folds depend on ``y`` (then each attribute gets its own folds).
    uses_labels: ClassVar[bool] = False

    def __init__(self, n_splits: int = 5, n_repeats: int = 2, random_state: int | None = 0) -> None:
        if int(n_splits) < 2:
            raise ValueError(f"n_splits must be at least 2, got {n_splits}")
        if int(n_repeats) < 1:
            raise ValueError(f"n_repeats must be at least 1, got {n_repeats}")
        self.n_splits = int(n_splits)
        self.n_repeats = int(n_repeats)
        self.random_state = random_state

    def get_n_splits(self, X: object = None, y: object = None, groups: object = None) -> int:
        """Number of (train, test) splits: ``n_splits * n_repeats``."""
        return self.n_splits * self.n_repeats

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()) if not k.startswith("_"))
        return f"{type(self).__name__}({params})"

    # Group splitters override these two.
    def _concept_groups(self, X: np.ndarray, groups: object) -> tuple[np.ndarray, np.ndarray]:
        """Return (group id per concept, forced-to-train mask)."""
        raise NotImplementedError

    def split(self, X: object, y: object = None, groups: object = None) -> Iterator[Fold]:
        """Yield ``(train_idx, test_idx)``: whole groups go to one side, forced concepts to train."""
        matrix = _check_matrix(X)
        group_of, forced = self._concept_groups(matrix, groups)
        yield from _grouped_folds(group_of, forced, self.n_splits, self.n_repeats, self.random_state)


def _grouped_folds(
    group_of: np.ndarray, forced_train: np.ndarray, n_splits: int, n_repeats: int, random_state: int | None
) -> Iterator[Fold]:
    units = np.unique(group_of[~forced_train])
    if len(units) < n_splits:
        raise ValueError(
            f"only {len(units)} splittable groups of concepts for n_splits={n_splits}; "
            "use fewer folds, smaller groups or more concepts"
        )
    sizes = {int(u): int(s) for u, s in zip(*np.unique(group_of[~forced_train], return_counts=True))}
    rng = np.random.default_rng(random_state)
    all_idx = np.arange(len(group_of))
    for _ in range(n_repeats):
        fold_of_unit: dict[int, int] = {}
        load = np.zeros(n_splits, dtype=np.int64)
        for unit in rng.permutation(units).tolist():
            # Ties between equally small folds are broken at random so repeats differ.
            smallest = np.flatnonzero(load == load.min())
            fold = int(smallest[rng.integers(len(smallest))])
            fold_of_unit[unit] = fold
            load[fold] += sizes[unit]
        fold_of = np.full(len(group_of), -1, dtype=np.int64)
        free = ~forced_train
        fold_of[free] = [fold_of_unit[int(g)] for g in group_of[free]]
        for fold in range(n_splits):
            test = all_idx[fold_of == fold]
            train = all_idx[fold_of != fold]
            yield train, test


class RandomSplit(ConceptSplitter):
    """Repeated stratified k-fold over concepts (paper: 5 splits x 2 repeats, per attribute).

    With ``y`` (one attribute's 0/1 labels) the folds are stratified on it; without
    ``y`` they are plain repeated k-fold. ``y`` with a single class is an error that
    names the problem (an attribute with zero positives cannot be probed).
    """

    uses_labels: ClassVar[bool] = True

    def split(self, X: object, y: object = None, groups: object = None) -> Iterator[Fold]:
        """Yield ``(train_idx, test_idx)`` for each of ``n_repeats`` x ``n_splits`` folds."""
        from sklearn.model_selection import RepeatedKFold, RepeatedStratifiedKFold

        matrix = _check_matrix(X)
        n = matrix.shape[0]
        if n < self.n_splits:
            raise ValueError(f"{n} concepts cannot be split into n_splits={self.n_splits} folds")
        if y is None:
            cv = RepeatedKFold(n_splits=self.n_splits, n_repeats=self.n_repeats, random_state=self.random_state)
            yield from ((np.sort(a), np.sort(b)) for a, b in cv.split(matrix))
            return
        labels = np.asarray(y)
        if labels.ndim != 1 or len(labels) != n:
            raise ValueError(
                f"y must be one attribute's label vector of length {n}, got shape {labels.shape}; "
                "split each attribute separately"
            )
        classes, counts = np.unique(labels, return_counts=True)
        if len(classes) < 2:
            raise ValueError(
                f"y holds the single class {classes.tolist()}: an attribute with zero positive "
                "(or zero negative) concepts cannot be split or probed"
            )
        cv = RepeatedStratifiedKFold(n_splits=self.n_splits, n_repeats=self.n_repeats, random_state=self.random_state)
        with warnings.catch_warnings():
            # Fewer members than folds: some test folds lack positives; coverage_report flags them.
            warnings.simplefilter("ignore", UserWarning)
            if counts.min() < self.n_splits and counts.max() < self.n_splits:
                raise ValueError(f"every class has fewer members ({counts.tolist()}) than n_splits={self.n_splits}")
            folds = [(np.sort(a), np.sort(b)) for a, b in cv.split(matrix, labels)]
        yield from folds


def load_concept_groups(path: str | Path) -> list[list[str]]:
    """Read groups of concept ids: a JSON list of lists, or text with one comma-separated group a line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"concept groups file {path} does not exist")
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".json":
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from error
        if not isinstance(payload, list) or not all(
            isinstance(g, list) and all(isinstance(c, str) for c in g) for g in payload
        ):
            raise ValueError(f"{path}: expected a JSON list of lists of concept ids")
        return [[c.strip() for c in g if c.strip()] for g in payload]
    return [[c.strip() for c in line.split(",") if c.strip()] for line in text.splitlines() if line.strip()]


def concept_groups_to_ids(
    groups: Sequence[Sequence[str]], concepts: Sequence[str]
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per-concept group id (-1 = in no group) from lists of concept ids; also the unknown ids.

    Groups sharing a concept are merged. Ids not in ``concepts`` are returned (sorted)
    so the caller can count and name them.
    """
    index = {c: i for i, c in enumerate(concepts)}
    parent = list(range(len(concepts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    unknown: set[str] = set()
    grouped = np.zeros(len(concepts), dtype=bool)
    for group in groups:
        members = [index[c] for c in group if c in index]
        unknown.update(c for c in group if c not in index)
        if len(members) < 2:
            continue
        grouped[members] = True
        for other in members[1:]:
            parent[find(other)] = find(members[0])
    roots = np.array([find(i) for i in range(len(concepts))])
    group_of = np.full(len(concepts), -1, dtype=np.int64)
    _, dense = np.unique(roots[grouped], return_inverse=True)
    group_of[grouped] = dense
    return group_of, tuple(sorted(unknown))


class GroupingSplit(ConceptSplitter):
    """Concepts in a group of near-duplicates go to train together; the rest split at random.

    Parameters
    ----------
    concept_groups:
        Per-concept group id, -1 for concepts in no group (see
        :func:`concept_groups_to_ids`). ``split(..., groups=...)`` overrides it.
    """

    def __init__(
        self,
        concept_groups: Sequence[int] | np.ndarray | None = None,
        n_splits: int = 5,
        n_repeats: int = 2,
        random_state: int | None = 0,
    ) -> None:
        super().__init__(n_splits, n_repeats, random_state)
        self.concept_groups = concept_groups

    def _concept_groups(self, X: np.ndarray, groups: object) -> tuple[np.ndarray, np.ndarray]:
        source = groups if groups is not None else self.concept_groups
        if source is None:
            raise ValueError("GroupingSplit needs concept groups (constructor concept_groups= or split(groups=))")
        group_ids = np.asarray(source, dtype=np.int64)
        if group_ids.shape != (X.shape[0],):
            raise ValueError(f"concept groups have shape {group_ids.shape}, expected ({X.shape[0]},), one per concept")
        forced = group_ids >= 0
        # Ungrouped concepts are their own units.
        return np.where(forced, group_ids, -1 - np.arange(X.shape[0])), forced


def nearest_neighbours(embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each concept: index of and cosine similarity to its most similar other concept."""
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError(f"embedding rows {np.flatnonzero(norms[:, 0] == 0)[:10].tolist()} are all zero; cosine undefined")
    unit = embeddings / norms
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    nearest = np.argmax(sims, axis=1)
    return nearest, sims[np.arange(len(sims)), nearest]


class SimilaritySplit(ConceptSplitter):
    """The top similarity groups go to train; the other concepts are split at random.

    A similarity group is a concept with its nearest neighbour (cosine). Concepts are
    ranked by that maximum similarity, strongest first; the top ``n_groups`` groups
    (merged where they share a concept) are forced into train. ``n_groups`` defaults
    to ``group_fraction`` x n_concepts, the paper's 600 of 1,854.

    Parameters
    ----------
    embeddings:
        Matrix to measure similarity on; ``X`` when None (the paper used one model's
        embeddings for every model: pass those here).
    """

    def __init__(
        self,
        n_groups: int | None = None,
        group_fraction: float = PAPER_SIMILARITY_GROUP_FRACTION,
        embeddings: np.ndarray | None = None,
        n_splits: int = 5,
        n_repeats: int = 2,
        random_state: int | None = 0,
    ) -> None:
        super().__init__(n_splits, n_repeats, random_state)
        if n_groups is not None and n_groups < 0:
            raise ValueError(f"n_groups must be >= 0, got {n_groups}")
        if not 0.0 <= group_fraction <= 1.0:
            raise ValueError(f"group_fraction must be in [0, 1], got {group_fraction}")
        self.n_groups = n_groups
        self.group_fraction = group_fraction
        self.embeddings = embeddings

    def _concept_groups(self, X: np.ndarray, groups: object) -> tuple[np.ndarray, np.ndarray]:
        source = X if self.embeddings is None else _check_matrix(self.embeddings, "similarity embeddings")
        if source.shape[0] != X.shape[0]:
            raise ValueError(f"similarity embeddings have {source.shape[0]} rows for {X.shape[0]} concepts")
        n = X.shape[0]
        n_groups = self.n_groups if self.n_groups is not None else int(round(self.group_fraction * n))
        nearest, similarity = nearest_neighbours(source)
        ranked = np.lexsort((np.arange(n), -similarity))[: min(n_groups, n)]
        pairs = [[str(i), str(int(nearest[i]))] for i in ranked.tolist()]
        group_of, _ = concept_groups_to_ids(pairs, [str(i) for i in range(n)])
        forced = group_of >= 0
        return np.where(forced, group_of, -1 - np.arange(n)), forced


class ClusterSplit(ConceptSplitter):
    """K-means clusters of the concept embeddings; whole clusters go to one side (paper: k=100).

    The clustering is fitted once per ``split`` call with ``random_state``; repeats
    differ in how clusters are dealt to folds. ``embeddings`` (optional) is the matrix
    to cluster; ``X`` when None.
    """

    def __init__(
        self,
        n_clusters: int = 100,
        embeddings: np.ndarray | None = None,
        n_init: int = 3,
        n_splits: int = 5,
        n_repeats: int = 2,
        random_state: int | None = 0,
    ) -> None:
        super().__init__(n_splits, n_repeats, random_state)
        if int(n_clusters) < 2:
            raise ValueError(f"n_clusters must be at least 2, got {n_clusters}")
        self.n_clusters = int(n_clusters)
        self.embeddings = embeddings
        self.n_init = n_init

    def cluster_labels(self, X: object) -> np.ndarray:
        """K-means cluster of each concept (int64), validated before scikit-learn sees it."""
        from sklearn.cluster import KMeans

        source = _check_matrix(X if self.embeddings is None else self.embeddings, "cluster embeddings")
        n = source.shape[0]
        if self.n_clusters > n:
            raise ValueError(f"k={self.n_clusters} clusters is more than the {n} concepts; choose k <= {n}")
        distinct = len(np.unique(source, axis=0))
        if self.n_clusters > distinct:
            raise ValueError(f"k={self.n_clusters} clusters is more than the {distinct} distinct embeddings")
        model = KMeans(n_clusters=self.n_clusters, n_init=self.n_init, random_state=self.random_state)
        return model.fit_predict(source).astype(np.int64)

    def _concept_groups(self, X: np.ndarray, groups: object) -> tuple[np.ndarray, np.ndarray]:
        labels = self.cluster_labels(X)
        if len(labels) != X.shape[0]:
            raise ValueError(f"cluster embeddings have {len(labels)} rows for {X.shape[0]} concepts")
        return labels, np.zeros(X.shape[0], dtype=bool)


def _unassigned_singleton(missing: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    return -1 - np.arange(n), np.zeros(n, dtype=bool)


def _unassigned_train(missing: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full(n, -1), missing.copy()


def _unassigned_group(missing: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full(n, -1), np.zeros(n, dtype=bool)


#: Rules for concepts without a supercategory -> (their group ids, forced-train mask).
UNASSIGNED_RULES: dict[str, Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]] = {
    "singleton": _unassigned_singleton,
    "train": _unassigned_train,
    "group": _unassigned_group,
}


class SupercategorySplit(ConceptSplitter):
    """Whole supercategories go to one side (THINGSplus: 53 categories).

    Concepts without a supercategory (None or "") follow ``unassigned``:

    - ``"singleton"`` (default): each is its own group, so they spread over the folds
      like a random split. The paper's rule is not stated; this keeps the 22% of
      THINGS concepts without a category in both train and test instead of turning
      them into one giant pseudo-category.
    - ``"train"``: they always go to train.
    - ``"group"``: together they form one extra group.

    ``split(..., groups=...)`` accepts the per-concept supercategories and overrides
    the constructor's.
    """

    def __init__(
        self,
        supercategories: Sequence[str | None] | None = None,
        unassigned: str = "singleton",
        n_splits: int = 5,
        n_repeats: int = 2,
        random_state: int | None = 0,
    ) -> None:
        super().__init__(n_splits, n_repeats, random_state)
        if unassigned not in UNASSIGNED_RULES:
            raise ValueError(f"unassigned={unassigned!r} is not a rule; use one of {sorted(UNASSIGNED_RULES)}")
        self.supercategories = supercategories
        self.unassigned = unassigned

    def _concept_groups(self, X: np.ndarray, groups: object) -> tuple[np.ndarray, np.ndarray]:
        source = groups if groups is not None else self.supercategories
        if source is None:
            raise ValueError("SupercategorySplit needs supercategories (constructor or split(groups=))")
        names = ["" if s is None else str(s) for s in source]  # type: ignore[union-attr]
        if len(names) != X.shape[0]:
            raise ValueError(f"{len(names)} supercategories for {X.shape[0]} concepts; give one per concept")
        missing = np.array([not s for s in names], dtype=bool)
        if missing.all():
            raise ValueError("no concept has a supercategory; a supercategory split is impossible")
        group_of, forced = UNASSIGNED_RULES[self.unassigned](missing, len(names))
        _, dense = np.unique([s for s in names if s], return_inverse=True)
        group_of = group_of.astype(np.int64)
        group_of[~missing] = dense
        if self.unassigned == "group":
            group_of[missing] = dense.max() + 1
        return group_of, forced


# -------------------------------------------------------------- folds per attribute


def attribute_folds(
    splitter: ConceptSplitter, X: np.ndarray, labels: np.ndarray, groups: object = None
) -> list[list[Fold]]:
    """Folds for every attribute (column of ``labels``).

    Label-aware splitters (random) are called once per attribute with ``y`` = that
    column; the others once, the same folds serving every attribute.
    """
    labels = np.asarray(labels, dtype=bool)
    if labels.ndim != 2 or labels.shape[0] != _n_samples(X):
        raise ValueError(f"labels have shape {labels.shape}; expected ({_n_samples(X)}, n_attributes)")
    if splitter.uses_labels:
        return [list(splitter.split(X, labels[:, a].astype(np.int64), groups)) for a in range(labels.shape[1])]
    shared = list(splitter.split(X, None, groups))
    return [shared] * labels.shape[1]


@dataclass(frozen=True)
class CoverageReport:
    """Which (attribute, fold) pairs can be scored.

    Rule: a fold is *scored* for an attribute when train holds at least one positive
    and one negative concept and test holds at least one positive. Unscored folds are
    not fitted. An attribute's F1 is the mean over its scored folds; an attribute with
    no scored fold is *uncovered*: excluded from the mean F1 selectivity and from CS,
    and named here.
    """

    scored: np.ndarray  # bool (n_attributes, n_folds)
    no_positive_in_train: np.ndarray  # int per attribute: folds lacking train positives
    no_positive_in_test: np.ndarray  # int per attribute: folds lacking test positives
    uncovered_attributes: tuple[str, ...]
    attributes: tuple[str, ...] = field(default=())

    def summary(self) -> dict[str, object]:
        """Counts for reports: flagged folds, attributes flagged and uncovered (named)."""
        flagged = (self.no_positive_in_train + self.no_positive_in_test) > 0
        return {
            "n_attribute_folds": int(self.scored.size),
            "n_scored_attribute_folds": int(self.scored.sum()),
            "n_folds_no_positive_in_train": int(self.no_positive_in_train.sum()),
            "n_folds_no_positive_in_test": int(self.no_positive_in_test.sum()),
            "n_attributes_flagged": int(flagged.sum()),
            "flagged_attributes": [a for a, f in zip(self.attributes, flagged) if f][:50],
            "n_attributes_uncovered": len(self.uncovered_attributes),
            "uncovered_attributes": list(self.uncovered_attributes),
        }


def coverage_report(labels: np.ndarray, folds: Sequence[Sequence[Fold]], attributes: Sequence[str]) -> CoverageReport:
    """Flag (attribute, fold) pairs with no positive concept in train or in test; see :class:`CoverageReport`."""
    labels = np.asarray(labels, dtype=bool)
    n_attr = labels.shape[1]
    if len(folds) != n_attr or len(attributes) != n_attr:
        raise ValueError(f"{len(folds)} fold lists and {len(attributes)} names for {n_attr} attributes")
    n_folds = max((len(f) for f in folds), default=0)
    scored = np.zeros((n_attr, n_folds), dtype=bool)
    no_train = np.zeros(n_attr, dtype=np.int64)
    no_test = np.zeros(n_attr, dtype=np.int64)
    for a in range(n_attr):
        column = labels[:, a]
        for f, (train, test) in enumerate(folds[a]):
            train_pos = int(column[train].sum())
            has_train = 0 < train_pos < len(train)
            has_test = bool(column[test].any())
            no_train[a] += train_pos == 0
            no_test[a] += not has_test
            scored[a, f] = has_train and has_test
    uncovered = tuple(a for a, s in zip(attributes, scored.any(axis=1)) if not s)
    return CoverageReport(scored, no_train, no_test, uncovered, tuple(attributes))


# ------------------------------------------------------------------------- registry


class StrategyUnavailable(ValueError):
    """A strategy cannot run on this data (e.g. no near-duplicate groups, no supercategories)."""


@dataclass(frozen=True)
class SplitContext:
    """What the strategy factories may need beyond ``X``.

    Attributes
    ----------
    concepts:
        Concept ids, in row order.
    supercategories:
        Per concept, or None when the data has none.
    concept_groups:
        Near-duplicate groups (lists of concept ids) for the LLM grouping split.
    split_embeddings:
        Fixed matrix for clustering/similarity (the paper clustered with one model for
        all models); None means each model's own embeddings.
    """

    concepts: tuple[str, ...]
    supercategories: tuple[str | None, ...] | None = None
    concept_groups: tuple[tuple[str, ...], ...] | None = None
    split_embeddings: np.ndarray | None = None


@dataclass(frozen=True)
class Strategy:
    """A registered split strategy: factory(context, seed, **params) -> splitter."""

    name: str
    factory: Callable[..., ConceptSplitter]
    description: str


STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str, description: str) -> Callable[[Callable[..., ConceptSplitter]], Callable[..., ConceptSplitter]]:
    """Decorator: register a splitter factory under ``name``."""

    def decorate(factory: Callable[..., ConceptSplitter]) -> Callable[..., ConceptSplitter]:
        if name in STRATEGIES:
            raise ValueError(f"split strategy {name!r} is already registered")
        STRATEGIES[name] = Strategy(name, factory, description)
        return factory

    return decorate


@register_strategy("random", "Repeated stratified 5x2 k-fold per attribute (leaky baseline).")
def _random(context: SplitContext, seed: int, **params: object) -> ConceptSplitter:
    return RandomSplit(random_state=seed, **params)  # type: ignore[arg-type]


@register_strategy("llm", "Near-duplicate concept groups (e.g. from an LLM) go to train together.")
def _llm(context: SplitContext, seed: int, **params: object) -> ConceptSplitter:
    if not context.concept_groups:
        raise StrategyUnavailable("llm split needs a concept groups file (--groups); none was given")
    group_ids, unknown = concept_groups_to_ids(context.concept_groups, context.concepts)
    if unknown:
        warnings.warn(f"concept groups name {len(unknown)} unknown concepts, ignored: {_show(unknown)}", stacklevel=2)
    if not (group_ids >= 0).any():
        raise StrategyUnavailable("no concept group has two known concepts")
    return GroupingSplit(group_ids, random_state=seed, **params)  # type: ignore[arg-type]


@register_strategy("similarity", "Top nearest-neighbour similarity groups go to train (600 of 1,854 scaled).")
def _similarity(context: SplitContext, seed: int, **params: object) -> ConceptSplitter:
    return SimilaritySplit(embeddings=context.split_embeddings, random_state=seed, **params)  # type: ignore[arg-type]


@register_strategy("clustering", "K-means (k=100) clusters of the embeddings; whole clusters to one side.")
def _clustering(context: SplitContext, seed: int, **params: object) -> ConceptSplitter:
    return ClusterSplit(embeddings=context.split_embeddings, random_state=seed, **params)  # type: ignore[arg-type]


@register_strategy("supercategory", "Whole ground-truth supercategories to one side (upper-bound control).")
def _supercategory(context: SplitContext, seed: int, **params: object) -> ConceptSplitter:
    if context.supercategories is None or all(s is None for s in context.supercategories):
        raise StrategyUnavailable("supercategory split needs supercategories (a category TSV); none are known")
    return SupercategorySplit(context.supercategories, random_state=seed, **params)  # type: ignore[arg-type]


def make_splitter(name: str, context: SplitContext, seed: int = 0, **params: object) -> ConceptSplitter:
    """Build the splitter registered as ``name`` (see ``STRATEGIES``) for ``context`` and ``seed``."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown split strategy {name!r}; available: {sorted(STRATEGIES)}")
    return STRATEGIES[name].factory(context, seed, **params)
