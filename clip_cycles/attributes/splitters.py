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

Group splitters have two fold assignments (``fold_assignment``):

- ``"per_attribute"`` (default): with ``y`` = one attribute's labels, scikit-learn's
  :class:`~sklearn.model_selection.StratifiedGroupKFold` deals whole groups to folds
  so that the attribute's positives reach every fold (hence both sides) wherever the
  groups allow; each attribute gets its own folds, as in paper 2's published splits.
  Concepts forced to train (LLM and similarity groups) stay in train; when every
  splittable unit is a single concept this is :class:`StratifiedKFold` on them.
- ``"shared"``: the groups are dealt once, ignoring ``y`` (each goes to the fold that
  is currently smallest), and that one partition serves every attribute. Without
  ``y`` the per-attribute splitters fall back to this partition too.

Where an attribute's positives cannot reach both sides of a fold (too few groups hold
them), the fold is *degenerate*; it is still scored (see :class:`CoverageReport`).

Published splits (paper 2's files) are strategies too: :class:`PublishedFolds` (per
attribute train/test indices) and :class:`MovedToTrainSplit` (stratified shuffle
splits per attribute with listed concepts moved from test to train); see
:func:`load_published_split`.

``STRATEGIES`` maps a strategy name to a factory; :func:`make_splitter` builds one from a
:class:`SplitContext` (concept ids, supercategories, near-duplicate groups).
"""

from __future__ import annotations

import json
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar, Iterator, Literal, Sequence

import numpy as np
from pydantic import Field
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, StratifiedShuffleSplit

from clip_cycles.attributes.concepts import _show, read_list_file
from clip_cycles.registry import Registry
from clip_cycles.regular_files import load_json_text
from clip_cycles.schemas.options import Options
from clip_cycles.verbosity import progress_disable

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


#: How group splitters deal groups to folds: per attribute (stratified) or one shared partition.
FoldAssignment = Literal["per_attribute", "shared"]
FOLD_ASSIGNMENTS: tuple[str, ...] = typing.get_args(FoldAssignment)


class SplitterOptions(Options):
    """The settings the concept splitters take, each range declared once; a splitter validates the ones it takes."""

    n_splits: int = Field(5, ge=2, description="at least 2 folds")
    n_repeats: int = Field(2, ge=1, description="at least 1 repeat")
    fold_assignment: FoldAssignment = Field(
        "per_attribute", json_schema_extra={"flag": "--fold-assignment"}, description="one of per_attribute, shared"
    )
    n_groups: int | None = Field(None, ge=0, description="None or a count >= 0 of similarity groups")
    group_fraction: float = Field(
        PAPER_SIMILARITY_GROUP_FRACTION, ge=0.0, le=1.0, description="a fraction in [0, 1] of concepts per group"
    )
    n_clusters: int = Field(100, ge=2, description="at least 2 clusters")
    test_size: float = Field(0.2, gt=0.0, lt=1.0, description="a fraction in (0, 1) of concepts for test")


class ConceptSplitter:
    """Base of the concept splitters: repeated k-fold bookkeeping and the sklearn API."""

    #: True when the splitter has a label-free partition (``split(X)`` without ``y``).
    label_free: ClassVar[bool] = True

    def __init__(
        self,
        n_splits: int = 5,
        n_repeats: int = 2,
        random_state: int | None = 0,
        fold_assignment: str = "per_attribute",
    ) -> None:
        SplitterOptions.make(n_splits=int(n_splits), n_repeats=int(n_repeats), fold_assignment=fold_assignment)
        self.n_splits = int(n_splits)
        self.n_repeats = int(n_repeats)
        self.random_state = random_state
        self.fold_assignment = fold_assignment

    @property
    def uses_labels(self) -> bool:
        """True when the folds depend on ``y`` (then each attribute gets its own folds)."""
        return self.fold_assignment == "per_attribute"

    def split_attribute(self, X: object, y: np.ndarray, attribute: str, groups: object = None) -> list[Fold]:
        """The folds of one attribute (name and 0/1 labels); published splits look the name up."""
        return list(self.split(X, y if self.uses_labels else None, groups))

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
        """Yield ``(train_idx, test_idx)``: whole groups go to one side, forced concepts to train.

        With ``y`` and ``fold_assignment="per_attribute"`` the groups are dealt per
        attribute so its positives reach both sides where the groups allow.
        """
        matrix = _check_matrix(X)
        group_of, forced = self._concept_groups(matrix, groups)
        if y is not None and self.uses_labels:
            labels = _check_label_vector(y, matrix.shape[0])
            yield from _stratified_group_folds(group_of, forced, labels, self.n_splits, self.n_repeats, self.random_state)
            return
        yield from _grouped_folds(group_of, forced, self.n_splits, self.n_repeats, self.random_state)


def _check_label_vector(y: object, n: int) -> np.ndarray:
    labels = np.asarray(y)
    if labels.ndim != 1 or len(labels) != n:
        raise ValueError(
            f"y must be one attribute's label vector of length {n}, got shape {labels.shape}; split each attribute separately"
        )
    if len(np.unique(labels)) < 2:
        raise ValueError(
            f"y holds the single class {np.unique(labels).tolist()}: an attribute with zero positive "
            "(or zero negative) concepts cannot be split or probed"
        )
    return labels.astype(np.int64)


class _BalancedStratifiedGroupKFold(StratifiedGroupKFold):
    """scikit-learn's StratifiedGroupKFold with its best-fold search done for all folds at once.

    Same rule and tie-break as the parent (lowest mean class-share spread, then the
    smaller fold, first fold wins), one numpy call instead of one per fold: the search
    runs once per group, and THINGS has hundreds of groups per attribute.
    """

    def _find_best_fold(self, y_counts_per_fold: np.ndarray, y_cnt: np.ndarray, group_y_counts: np.ndarray) -> int:
        k = self.n_splits
        trial = y_counts_per_fold[None, :, :] + np.eye(k)[:, :, None] * group_y_counts[None, None, :]
        spread = np.std(trial / y_cnt.reshape(1, 1, -1), axis=1).mean(axis=1)
        sizes = y_counts_per_fold.sum(axis=1)
        best, best_spread, best_size = 0, np.inf, np.inf
        for fold in range(k):
            if spread[fold] < best_spread or (np.isclose(spread[fold], best_spread) and sizes[fold] < best_size):
                best, best_spread, best_size = fold, spread[fold], sizes[fold]
        return best


def _stratified_group_folds(
    group_of: np.ndarray,
    forced_train: np.ndarray,
    y: np.ndarray,
    n_splits: int,
    n_repeats: int,
    random_state: int | None,
) -> Iterator[Fold]:
    """Per-attribute folds: StratifiedGroupKFold over the splittable concepts, forced ones in train."""
    free = np.flatnonzero(~forced_train)
    forced = np.flatnonzero(forced_train)
    units = group_of[free]
    n_units = len(np.unique(units))
    if n_units < n_splits:
        raise ValueError(
            f"only {n_units} splittable groups of concepts for n_splits={n_splits}; "
            "use fewer folds, smaller groups or more concepts"
        )
    free_y = y[free]
    # One seed per repeat, the same for every attribute (so repeats differ, attributes reproduce).
    seeds = np.random.default_rng(random_state).integers(0, 2**31 - 1, size=n_repeats)
    for seed in seeds.tolist():
        if n_units == len(units):
            cv: object = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        else:
            cv = _BalancedStratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
        with warnings.catch_warnings():
            # Fewer positives than folds: some folds get none; CoverageReport counts them.
            warnings.simplefilter("ignore", UserWarning)
            if np.bincount(free_y, minlength=2).max() < n_splits:
                raise ValueError(f"every class has fewer splittable concepts than n_splits={n_splits}")
            folds = list(cv.split(np.zeros((len(free), 1)), free_y, units))  # type: ignore[attr-defined]
        for train_local, test_local in folds:
            yield np.sort(np.concatenate([free[train_local], forced])), np.sort(free[test_local])


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

    def split(self, X: object, y: object = None, groups: object = None) -> Iterator[Fold]:
        """Yield ``(train_idx, test_idx)`` for each of ``n_repeats`` x ``n_splits`` folds."""
        from sklearn.model_selection import RepeatedKFold, RepeatedStratifiedKFold

        matrix = _check_matrix(X)
        n = matrix.shape[0]
        if n < self.n_splits:
            raise ValueError(f"{n} concepts cannot be split into n_splits={self.n_splits} folds")
        if y is None or not self.uses_labels:
            cv = RepeatedKFold(n_splits=self.n_splits, n_repeats=self.n_repeats, random_state=self.random_state)
            yield from ((np.sort(a), np.sort(b)) for a, b in cv.split(matrix))
            return
        labels = np.asarray(y)
        if labels.ndim != 1 or len(labels) != n:
            raise ValueError(
                f"y must be one attribute's label vector of length {n}, got shape {labels.shape}; split each attribute separately"
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
    path, text, payload = read_list_file(path, "concept groups file")
    if payload is not None:
        if not isinstance(payload, list) or not all(isinstance(g, list) and all(isinstance(c, str) for c in g) for g in payload):
            raise ValueError(f"{path}: expected a JSON list of lists of concept ids")
        return [[c.strip() for c in g if c.strip()] for g in payload]
    return [[c.strip() for c in line.split(",") if c.strip()] for line in text.splitlines() if line.strip()]


def concept_groups_to_ids(groups: Sequence[Sequence[str]], concepts: Sequence[str]) -> tuple[np.ndarray, tuple[str, ...]]:
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
        fold_assignment: str = "per_attribute",
    ) -> None:
        super().__init__(n_splits, n_repeats, random_state, fold_assignment)
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
        fold_assignment: str = "per_attribute",
    ) -> None:
        super().__init__(n_splits, n_repeats, random_state, fold_assignment)
        SplitterOptions.make(n_groups=n_groups, group_fraction=group_fraction)
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
        n_init: int | None = 3,
        n_splits: int = 5,
        n_repeats: int = 2,
        random_state: int | None = 0,
        fold_assignment: str = "per_attribute",
    ) -> None:
        super().__init__(n_splits, n_repeats, random_state, fold_assignment)
        SplitterOptions.make(n_clusters=int(n_clusters))
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
        # n_init None: scikit-learn's own default (what paper 2's code used).
        options = {} if self.n_init is None else {"n_init": self.n_init}
        model = KMeans(n_clusters=self.n_clusters, random_state=self.random_state, **options)
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
        fold_assignment: str = "per_attribute",
    ) -> None:
        super().__init__(n_splits, n_repeats, random_state, fold_assignment)
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


# -------------------------------------------------------------------- published splits


class PublishedFolds(ConceptSplitter):
    """Per attribute, the folds a published split file gives (paper 2's clustering/supercategory JSON).

    ``folds_by_attribute`` maps an attribute name to its (train, test) row-index folds
    (rows of the concept matrix). An attribute the file lacks is an error naming it.
    """

    label_free: ClassVar[bool] = False

    def __init__(self, folds_by_attribute: dict[str, list[Fold]], source: str = "") -> None:
        counts = {len(f) for f in folds_by_attribute.values()} or {1}
        # n_splits is bookkeeping here (fold index = position in the file); 1 fold is allowed.
        self.n_splits = max(counts)
        self.n_repeats = 1
        self.random_state = None
        self.fold_assignment = "per_attribute"
        self.folds_by_attribute = folds_by_attribute
        self.source = source

    def __repr__(self) -> str:
        return f"PublishedFolds(source={self.source!r}, n_attributes={len(self.folds_by_attribute)})"

    def split(self, X: object, y: object = None, groups: object = None) -> Iterator[Fold]:
        """Published folds exist per attribute only: use :meth:`split_attribute`."""
        raise ValueError(f"published split {self.source or ''} has folds per attribute only; call split_attribute")

    def split_attribute(self, X: object, y: np.ndarray, attribute: str, groups: object = None) -> list[Fold]:
        """The file's folds of ``attribute``."""
        if attribute not in self.folds_by_attribute:
            raise ValueError(
                f"published split {self.source}: no folds for attribute {attribute!r}; restrict the attributes "
                "to those the file covers (--attributes FILE)"
            )
        return self.folds_by_attribute[attribute]


class MovedToTrainSplit(ConceptSplitter):
    """Paper 2's similarity/LLM splits: StratifiedShuffleSplit per attribute, listed concepts moved to train.

    Parameters
    ----------
    moved_rows:
        Row indices of the concepts that go from test to train in every fold.
    n_splits, test_size:
        StratifiedShuffleSplit's (10 draws, 20% test by default: as many folds as 5 x 2).
    """

    def __init__(
        self,
        moved_rows: Sequence[int] | np.ndarray,
        n_splits: int = 10,
        test_size: float = 0.2,
        random_state: int | None = 0,
    ) -> None:
        super().__init__(n_splits, 1, random_state, "per_attribute")
        SplitterOptions.make(test_size=test_size)
        self.moved_rows = np.unique(np.asarray(moved_rows, dtype=np.int64))
        self.test_size = test_size

    def split(self, X: object, y: object = None, groups: object = None) -> Iterator[Fold]:
        """Yield the shuffle-split folds (stratified on ``y`` when given) with the moved concepts in train."""
        from sklearn.model_selection import ShuffleSplit

        matrix = _check_matrix(X)
        n = matrix.shape[0]
        if len(self.moved_rows) and (self.moved_rows.min() < 0 or self.moved_rows.max() >= n):
            raise ValueError(f"moved concept rows must lie in [0, {n}); got {self.moved_rows.max()}")
        moved = np.zeros(n, dtype=bool)
        moved[self.moved_rows] = True
        if y is None:
            cv: object = ShuffleSplit(self.n_splits, test_size=self.test_size, random_state=self.random_state)
            folds = cv.split(matrix)  # type: ignore[attr-defined]
        else:
            labels = _check_label_vector(y, n)
            cv = StratifiedShuffleSplit(self.n_splits, test_size=self.test_size, random_state=self.random_state)
            folds = cv.split(matrix, labels)  # type: ignore[attr-defined]
        for train, test in folds:
            yield np.sort(np.concatenate([train, test[moved[test]]])), np.sort(test[~moved[test]])


@dataclass(frozen=True)
class PublishedSplit:
    """A published split file read against the concept rows: folds per attribute, or moved concepts.

    ``summary`` counts what did not map (indices of concepts not in the data, file
    attributes not in the data, data concepts on neither side of a fold).
    """

    name: str
    path: str
    kind: str  # "folds" or "moves"
    folds_by_attribute: dict[str, list[Fold]] | None = None
    moved_rows: np.ndarray | None = None
    summary: dict[str, object] = field(default_factory=dict)

    def splitter(self, seed: int = 0, **params: object) -> ConceptSplitter:
        """The splitter for this file (``seed`` drives the shuffle splits of a moves file)."""
        if self.kind == "folds":
            return PublishedFolds(self.folds_by_attribute or {}, self.path)
        return MovedToTrainSplit(self.moved_rows if self.moved_rows is not None else [], random_state=seed, **params)  # type: ignore[arg-type]


def _index_list(path: Path, where: str, value: object) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise ValueError(f"{path}: {where} must be a list of integer concept indices")
    return value


def _read_published_json(path: Path) -> dict[str, list[tuple[list[int], list[int]]]]:
    """Attribute -> [(train indices, test indices), ...] from either published JSON shape."""
    try:
        payload = load_json_text(path.read_text(encoding="utf-8-sig"), str(path))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from error
    folds: dict[str, list[tuple[list[int], list[int]]]] = {}
    if isinstance(payload, dict) and "features" in payload and "splits" in payload:
        features, splits = payload["features"], payload["splits"]
        if not isinstance(features, list) or not isinstance(splits, list) or len(features) != len(splits):
            raise ValueError(
                f"{path}: 'features' and 'splits' must be lists of the same length "
                f"(got {type(features).__name__} and {type(splits).__name__})"
            )
        for i, (name, split) in enumerate(zip(features, splits)):
            if not isinstance(split, list) or len(split) == 0:
                raise ValueError(f"{path}: splits[{i}] (feature {name!r}) must be [train, test] or a list of them")
            # [train, test] (one fold) or [[train, test], ...] (several folds).
            pairs = [split] if split and isinstance(split[0], list) and (not split[0] or isinstance(split[0][0], int)) else split
            folds[str(name)] = []
            for j, pair in enumerate(pairs):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ValueError(f"{path}: splits[{i}][{j}] (feature {name!r}) must be [train, test]")
                folds[str(name)].append(
                    (_index_list(path, f"splits[{i}] train", pair[0]), _index_list(path, f"splits[{i}] test", pair[1]))
                )
        return folds
    if isinstance(payload, dict):
        for name, entry in payload.items():
            if not isinstance(entry, dict) or "train_idxs" not in entry or "test_idxs" not in entry:
                raise ValueError(f"{path}: attribute {name!r} must map to {{'train_idxs': [...], 'test_idxs': [...]}}")
            folds[str(name)] = [
                (
                    _index_list(path, f"{name}.train_idxs", entry["train_idxs"]),
                    _index_list(path, f"{name}.test_idxs", entry["test_idxs"]),
                )
            ]
        return folds
    raise ValueError(
        f"{path}: expected a JSON object attribute -> {{train_idxs, test_idxs}} "
        "or {features: [...], splits: [[train, test], ...]}"
    )


def _read_moved_indices(path: Path) -> list[int]:
    indices = []
    for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        for token in line.split():
            try:
                indices.append(int(token))
            except ValueError:
                raise ValueError(f"{path}: line {number}: {token!r} is not an integer concept index") from None
    return indices


def load_published_split(
    name: str,
    path: str | Path,
    index_concepts: Sequence[str],
    concepts: Sequence[str],
    attributes: Sequence[str] | None = None,
) -> PublishedSplit:
    """Read a paper-2 split file; indices refer to ``index_concepts`` (the full THINGS concept list).

    ``.json`` files hold folds per attribute (attribute -> {train_idxs, test_idxs} or
    {features, splits}); any other file holds whitespace-separated concept indices
    that move from test to train. Indices are mapped to rows of ``concepts``; indices
    of concepts not in ``concepts`` are dropped and counted, an index outside the list
    is an error naming it.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"published split file {path} (strategy {name!r}) does not exist")
    row = {c: i for i, c in enumerate(concepts)}
    n_index = len(index_concepts)

    def rows(indices: list[int], where: str) -> tuple[np.ndarray, int]:
        bad = [i for i in indices if not 0 <= i < n_index]
        if bad:
            raise ValueError(f"{path}: {where}: concept index {bad[0]} is outside the concept list (0..{n_index - 1})")
        mapped = [row[index_concepts[i]] for i in indices if index_concepts[i] in row]
        return np.array(sorted(set(mapped)), dtype=np.int64), len(indices) - len(mapped)

    if path.suffix.lower() != ".json":
        moved, missing = rows(_read_moved_indices(path), "moved indices")
        summary = {"kind": "moves", "n_moved_concepts": int(len(moved)), "n_indices_not_in_data": missing}
        return PublishedSplit(name, str(path), "moves", moved_rows=moved, summary=summary)
    raw = _read_published_json(path)
    wanted = set(attributes) if attributes is not None else set(raw)
    folds: dict[str, list[Fold]] = {}
    missing_total = unassigned = 0
    for attribute in sorted(raw):
        if attribute not in wanted:
            continue
        folds[attribute] = []
        for k, (train_idx, test_idx) in enumerate(raw[attribute]):
            train, miss_train = rows(train_idx, f"{attribute} fold {k} train")
            test, miss_test = rows(test_idx, f"{attribute} fold {k} test")
            both = np.intersect1d(train, test)
            if len(both):
                raise ValueError(
                    f"{path}: attribute {attribute!r} fold {k}: {len(both)} concepts are in both train "
                    f"and test (first: {concepts[int(both[0])]!r})"
                )
            missing_total += miss_train + miss_test
            unassigned += len(concepts) - len(train) - len(test)
            folds[attribute].append((train, test))
    not_in_data = sorted(set(raw) - wanted)
    absent = sorted(wanted - set(raw))
    summary = {
        "kind": "folds",
        "n_attributes_in_file": len(raw),
        "n_file_attributes_not_in_data": len(not_in_data),
        "file_attributes_not_in_data": not_in_data[:50],
        "n_data_attributes_not_in_file": len(absent),
        "data_attributes_not_in_file": absent[:50],
        "n_indices_not_in_data": missing_total,
        "n_concept_folds_on_neither_side": unassigned,
    }
    return PublishedSplit(name, str(path), "folds", folds_by_attribute=folds, summary=summary)


# -------------------------------------------------------------- folds per attribute


def attribute_folds(
    splitter: ConceptSplitter,
    X: np.ndarray,
    labels: np.ndarray,
    groups: object = None,
    attributes: Sequence[str] | None = None,
) -> list[list[Fold]]:
    """Folds for every attribute (column of ``labels``; ``attributes`` names them).

    Per-attribute splitters (random, group splitters with ``fold_assignment="per_attribute"``,
    published splits) are asked once per attribute; a shared partition is computed once
    and serves every attribute.
    """
    labels = np.asarray(labels, dtype=bool)
    if labels.ndim != 2 or labels.shape[0] != _n_samples(X):
        raise ValueError(f"labels have shape {labels.shape}; expected ({_n_samples(X)}, n_attributes)")
    names = tuple(attributes) if attributes is not None else tuple(str(a) for a in range(labels.shape[1]))
    if len(names) != labels.shape[1]:
        raise ValueError(f"{len(names)} attribute names for {labels.shape[1]} label columns")
    if splitter.uses_labels:
        from tqdm.auto import tqdm

        columns = tqdm(range(labels.shape[1]), desc=f"folds ({type(splitter).__name__})", disable=progress_disable())
        if type(splitter)._concept_groups is not ConceptSplitter._concept_groups:
            # Group splitters: groups (k-means, similarity pairs) are computed once, dealt per attribute.
            matrix = _check_matrix(X)
            group_of, forced = splitter._concept_groups(matrix, groups)
            return [
                list(
                    _stratified_group_folds(
                        group_of,
                        forced,
                        _check_label_vector(labels[:, a], matrix.shape[0]),
                        splitter.n_splits,
                        splitter.n_repeats,
                        splitter.random_state,
                    )
                )
                for a in columns
            ]
        return [splitter.split_attribute(X, labels[:, a].astype(np.int64), names[a], groups) for a in columns]
    shared = list(splitter.split(X, None, groups))
    return [shared] * labels.shape[1]


#: What a degenerate fold scores (paper 2's reading; see CoverageReport).
DEGENERATE_RULE: str = (
    "every fold is scored; where train lacks a positive (or a negative) the probe has nothing to learn "
    "and predicts negative everywhere, and where test lacks a positive F1 is 0 whatever is predicted: "
    "those degenerate folds score test F1 = 0"
)


@dataclass(frozen=True)
class CoverageReport:
    """Which (attribute, fold) pairs need a probe fit and which are degenerate.

    Rule: every fold of every attribute is scored, so every strategy averages over the
    same attributes. A fold is *fitted* when train holds at least one positive and one
    negative concept and test holds at least one positive. Every other fold is
    *degenerate* and scores test F1 = 0 (:data:`DEGENERATE_RULE`).
    """

    fitted: np.ndarray  # bool (n_attributes, n_folds)
    no_positive_in_train: np.ndarray  # int per attribute: folds lacking train positives
    no_negative_in_train: np.ndarray  # int per attribute: folds lacking train negatives
    no_positive_in_test: np.ndarray  # int per attribute: folds lacking test positives
    attributes: tuple[str, ...] = field(default=())

    @property
    def degenerate(self) -> np.ndarray:
        """Bool (n_attributes, n_folds): folds scored F1 = 0 without a fit."""
        return ~self.fitted

    def summary(self) -> dict[str, object]:
        """Counts for reports: folds fitted and degenerate, and the attributes with degenerate folds (named)."""
        flagged = self.degenerate.any(axis=1)
        return {
            "rule": DEGENERATE_RULE,
            "n_attribute_folds": int(self.fitted.size),
            "n_fitted_attribute_folds": int(self.fitted.sum()),
            "n_degenerate_folds": int(self.degenerate.sum()),
            "n_folds_no_positive_in_train": int(self.no_positive_in_train.sum()),
            "n_folds_no_negative_in_train": int(self.no_negative_in_train.sum()),
            "n_folds_no_positive_in_test": int(self.no_positive_in_test.sum()),
            "n_attributes_with_degenerate_folds": int(flagged.sum()),
            "attributes_with_degenerate_folds": [a for a, f in zip(self.attributes, flagged) if f][:50],
        }


def coverage_report(labels: np.ndarray, folds: Sequence[Sequence[Fold]], attributes: Sequence[str]) -> CoverageReport:
    """Count (attribute, fold) pairs without a positive or negative in train or a positive in test."""
    labels = np.asarray(labels, dtype=bool)
    n_attr = labels.shape[1]
    if len(folds) != n_attr or len(attributes) != n_attr:
        raise ValueError(f"{len(folds)} fold lists and {len(attributes)} names for {n_attr} attributes")
    n_folds = max((len(f) for f in folds), default=0)
    if any(len(f) != n_folds for f in folds):
        raise ValueError(
            f"attributes have different fold counts {sorted({len(f) for f in folds})}; "
            "every attribute needs the same number of folds"
        )
    fitted = np.zeros((n_attr, n_folds), dtype=bool)
    no_pos_train = np.zeros(n_attr, dtype=np.int64)
    no_neg_train = np.zeros(n_attr, dtype=np.int64)
    no_pos_test = np.zeros(n_attr, dtype=np.int64)
    for a in range(n_attr):
        column = labels[:, a]
        for f, (train, test) in enumerate(folds[a]):
            train_pos = int(column[train].sum())
            has_test = bool(column[test].any())
            no_pos_train[a] += train_pos == 0
            no_neg_train[a] += train_pos == len(train)
            no_pos_test[a] += not has_test
            fitted[a, f] = 0 < train_pos < len(train) and has_test
    return CoverageReport(fitted, no_pos_train, no_neg_train, no_pos_test, tuple(attributes))


def leakage_folds(splitter: ConceptSplitter, X: np.ndarray, folds: Sequence[Sequence[Fold]]) -> list[Fold]:
    """The folds a label-free leakage score looks at.

    The strategy's label-free partition (``split(X)`` without ``y``) when it has one;
    otherwise (published per-attribute folds) the distinct folds over all attributes.
    """
    if splitter.label_free:
        return list(splitter.split(X))
    seen: dict[bytes, Fold] = {}
    for per_attribute in folds:
        for train, test in per_attribute:
            if len(train) == 0 or len(test) == 0:
                continue
            seen.setdefault(
                np.asarray(test, dtype=np.int64).tobytes() + b"|" + np.asarray(train, dtype=np.int64).tobytes(), (train, test)
            )
    return [seen[key] for key in sorted(seen)]


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
    published:
        Strategy name -> a published split file (:func:`load_published_split`).
    split_embedding_name:
        What made ``split_embeddings`` (a model name or file), recorded in results.
    """

    concepts: tuple[str, ...]
    supercategories: tuple[str | None, ...] | None = None
    concept_groups: tuple[tuple[str, ...], ...] | None = None
    split_embeddings: np.ndarray | None = None
    published: dict[str, PublishedSplit] = field(default_factory=dict)
    split_embedding_name: str | None = None

    def split_embedding_for(self, strategy: str) -> str:
        """Which embedding made the split of ``strategy``, for results."""
        if strategy not in EMBEDDING_STRATEGIES:
            return "not used by this strategy"
        if self.split_embeddings is None:
            return "each model's own embeddings"
        return self.split_embedding_name or "a fixed split embedding"


#: Strategies whose folds depend on an embedding (clustering, similarity).
EMBEDDING_STRATEGIES: tuple[str, ...] = ("similarity", "clustering")


@dataclass(frozen=True)
class Strategy:
    """A registered split strategy: factory(context, seed, **params) -> splitter."""

    name: str
    factory: Callable[..., ConceptSplitter]
    description: str


#: The strategies by name, in registration order (the order the demo and reports list them).
STRATEGIES: Registry[Strategy] = Registry("split strategy", ordered=True)


def register_strategy(name: str, description: str) -> Callable[[Callable[..., ConceptSplitter]], Callable[..., ConceptSplitter]]:
    """Decorator: register a splitter factory under ``name``."""

    def decorate(factory: Callable[..., ConceptSplitter]) -> Callable[..., ConceptSplitter]:
        STRATEGIES.register(name, Strategy(name, factory, description))
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
    if name in context.published:
        params.pop("fold_assignment", None)  # a published split fixes its own folds
        return context.published[name].splitter(seed, **params)
    if name not in STRATEGIES:
        published = ", ".join(sorted(context.published)) or "(none)"
        raise ValueError(f"{STRATEGIES.unknown_message(name)}; published splits: {published}")
    return STRATEGIES.get(name).factory(context, seed, **params)
