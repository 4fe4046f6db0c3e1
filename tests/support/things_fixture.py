"""A small THINGS-format root that copies the quirks of the files as published.

- ``category53_wideFormat.tsv``: header ``Word``, ``Definition (from WordNet, Google, or
  Wikipedia)``, category columns, a trailing empty column (extra tab), quoted
  definitions, a homonym (``bat`` twice), concepts in no category, a concept in two
  categories, and a last row of column totals;
- ``unique_id.txt``: a plain concept list (one id a line, blank line at the end);
- ``concept_attribute_pairs.json``: [concept, attribute] pairs;
- ``attributes.json``: paper 2's kind of attribute list (one listed name is unknown);
- paper 2's published split files: ``supercategory_splits.json`` (attribute ->
  {train_idxs, test_idxs}), ``kmeans_splits.json`` ({features, splits}) and
  ``similarity_moves.txt`` (whitespace-separated concept indices), all indexing the
  concept list.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

CATEGORIES = ("animal", "food", "tool", "vehicle", "plant")
N_PER_CATEGORY = 10
N_UNCATEGORISED = 8
ATTRIBUTES = ("is_alive", "is_edible", "is_metal", "has_wheels", "is_green", "is_small")
LISTED_ATTRIBUTES = ("is_alive", "is_edible", "is_metal", "has_wheels", "is_small", "not_in_data")
LONG_DEFINITION_HEADER = "Definition (from WordNet, Google, or Wikipedia)"


def concept_rows() -> list[tuple[str, str, str | None]]:
    """(concept id, word, category) in concept-list order; the first two are the homonym bat1/bat2."""
    rows: list[tuple[str, str, str | None]] = [("bat1", "bat", "animal"), ("bat2", "bat", "tool")]
    for c in CATEGORIES:
        for i in range(N_PER_CATEGORY - (1 if c in ("animal", "tool") else 0)):
            rows.append((f"{c}_{i}", f"{c} {i}", c))
    rows += [(f"thing_{i}", f"thing {i}", None) for i in range(N_UNCATEGORISED)]
    return rows


def labels_for(rows: list[tuple[str, str, str | None]]) -> np.ndarray:
    """Deterministic attribute labels with category structure (what the pairs file says)."""
    rng = np.random.default_rng(7)
    cats = [c for _, _, c in rows]
    labels = np.zeros((len(rows), len(ATTRIBUTES)), dtype=bool)
    home = {
        "is_alive": ("animal", "plant"),
        "is_edible": ("food", "plant"),
        "is_metal": ("tool", "vehicle"),
        "has_wheels": ("vehicle",),
        "is_green": ("plant",),
    }
    for a, name in enumerate(ATTRIBUTES):
        if name in home:
            labels[:, a] = [c in home[name] for c in cats]
            labels[:, a] |= rng.random(len(rows)) < 0.08
        else:
            labels[:, a] = rng.random(len(rows)) < 0.3
    return labels


def write_things_root(root: Path) -> dict[str, object]:
    """Write the root; return the concept ids, labels, categories and embeddings it holds."""
    root.mkdir(parents=True, exist_ok=True)
    rows = concept_rows()
    concepts = [c for c, _, _ in rows]
    (root / "unique_id.txt").write_text("\n".join(concepts) + "\n\n", encoding="utf-8")
    # The TSV lists words alphabetically like THINGS; one concept sits in two categories.
    header = ["Word", LONG_DEFINITION_HEADER, *CATEGORIES, ""]
    lines = ["\t".join(header)]
    member = np.zeros((len(rows), len(CATEGORIES)), dtype=int)
    for i, (_, _, cat) in enumerate(rows):
        if cat is not None:
            member[i, CATEGORIES.index(cat)] = 1
    # Three concepts in two categories; plant ends up the largest column (12), so "largest"
    # and "first" disagree for all three (each has its first 1 in a smaller column).
    member[concepts.index("food_0"), CATEGORIES.index("plant")] = 1
    member[concepts.index("vehicle_1"), CATEGORIES.index("plant")] = 1
    member[concepts.index("plant_2"), CATEGORIES.index("food")] = 1
    for i, (_, word, _) in enumerate(rows):
        cells = ["1" if m else "" for m in member[i]]
        lines.append("\t".join([word, f'"a {word}, ""quoted""\tdefinition"', *cells, ""]))
    lines.append("\t".join(["", "", *[str(t) for t in member.sum(axis=0)], ""]))
    (root / "category53_wideFormat.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    labels = labels_for(rows)
    pairs = [[c, a] for i, c in enumerate(concepts) for j, a in enumerate(ATTRIBUTES) if labels[i, j]]
    (root / "concept_attribute_pairs.json").write_text(json.dumps(pairs), encoding="utf-8")
    (root / "attributes.json").write_text(json.dumps(list(LISTED_ATTRIBUTES)), encoding="utf-8")
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((len(CATEGORIES) + 1, 8))
    cat_index = [CATEGORIES.index(c) if c else len(CATEGORIES) for _, _, c in rows]
    directions = rng.standard_normal((len(ATTRIBUTES), 8))
    embeddings = centres[cat_index] + 0.6 * rng.standard_normal((len(rows), 8)) + 0.5 * labels @ directions
    np.savez(root / "model_a.npz", concepts=np.array(concepts), embeddings=embeddings)
    np.savez(root / "model_b.npz", concepts=np.array(concepts), embeddings=embeddings[:, ::-1] * 2.0 + 0.1)
    return {"concepts": concepts, "labels": labels, "member": member, "embeddings": embeddings}


def write_published_splits(root: Path, attributes: list[str], n_concepts: int) -> dict[str, object]:
    """Paper 2's three published formats with known folds; returns what each file says."""
    rng = np.random.default_rng(11)
    supercat: dict[str, dict[str, list[int]]] = {}
    for a in [*attributes, "attribute_not_in_data"]:
        test = sorted(rng.choice(n_concepts, size=n_concepts // 4, replace=False).tolist())
        train = sorted(set(range(n_concepts)) - set(test) - {0})  # concept 0 on neither side
        supercat[a] = {"train_idxs": train, "test_idxs": test}
    (root / "supercategory_splits.json").write_text(json.dumps(supercat), encoding="utf-8")
    kmeans_splits = []
    for _ in attributes:
        test = sorted(rng.choice(n_concepts, size=n_concepts // 5, replace=False).tolist())
        kmeans_splits.append([sorted(set(range(n_concepts)) - set(test)), test])
    (root / "kmeans_splits.json").write_text(json.dumps({"features": attributes, "splits": kmeans_splits}), encoding="utf-8")
    moved = sorted(rng.choice(n_concepts, size=9, replace=False).tolist())
    text = " ".join(str(i) for i in moved[:5]) + "\n" + "  ".join(str(i) for i in moved[5:]) + "\n"
    (root / "similarity_moves.txt").write_text(text, encoding="utf-8")
    return {"supercategory": supercat, "kmeans": dict(zip(attributes, kmeans_splits)), "moved": moved}


# --------------------------------------------------------------- real sparsity (paper 2's files)

SPARSE_CATEGORIES = tuple(f"category {i}" for i in range(40))


def write_sparse_things_root(root: Path, n_concepts: int = 1854, n_attributes: int = 18, dim: int = 48, seed: int = 5) -> dict:
    """A THINGS-format root with the real label sparsity and paper 2's file formats.

    1,854 concepts (a homonym ``bat1``/``bat2``, the id ``flip_flop`` whose TSV row says
    ``flip-flop``), 40 categories plus about 22 % uncategorised concepts, some concepts in two
    categories; every attribute has 10-20 positive concepts, about half of them concentrated in one
    or two categories (high dominance), the rest spread; embeddings = category centre + noise +
    attribute directions (near-separable columns). Paper 2's files: ``intersect_features.json``
    (all attributes but two, plus one name the data lacks), ``mcrae++.json`` ({norm, concepts} with
    TSV words, one concept outside THINGS), ``k_means_split.json`` ({features, splits}, one
    [train, test] per attribute), ``categs_split.json`` (attribute -> {train_idxs, test_idxs}),
    ``similar_idxs.txt`` (concepts moved to train), one split embedding ``split.npz`` and one
    model's ``model.npz``.
    """
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    concepts = ["bat1", "bat2", "flip_flop"] + [f"concept_{i}" for i in range(n_concepts - 3)]
    words = ["bat", "bat", "flip-flop"] + [f"concept {i}" for i in range(n_concepts - 3)]
    n_cat = len(SPARSE_CATEGORIES)
    category = rng.integers(0, n_cat, n_concepts)
    category[rng.random(n_concepts) < 0.22] = -1  # uncategorised, like THINGS's 407
    member = np.zeros((n_concepts, n_cat), dtype=int)
    for i, c in enumerate(category):
        if c >= 0:
            member[i, c] = 1
            if rng.random() < 0.03:
                member[i, (c + 1 + rng.integers(n_cat - 1)) % n_cat] = 1
    attributes = [f"attribute_{j:02d}" for j in range(n_attributes)]
    labels = np.zeros((n_concepts, n_attributes), dtype=bool)
    for j in range(n_attributes):
        size = int(rng.integers(10, 21))
        if j % 2 == 0:  # concentrated: most positives in one or two categories
            home = rng.choice(n_cat, size=1 + j % 3 // 2, replace=False)
            pool = np.flatnonzero(np.isin(category, home))
            core = rng.choice(pool, size=min(len(pool), size - 2), replace=False)
            rest = rng.choice(np.setdiff1d(np.arange(n_concepts), core), size=size - len(core), replace=False)
            labels[np.concatenate([core, rest]), j] = True
        else:
            labels[rng.choice(n_concepts, size=size, replace=False), j] = True
    centres = rng.standard_normal((n_cat + 1, dim))
    directions = rng.standard_normal((n_attributes, dim))
    X = centres[category] + 0.8 * rng.standard_normal((n_concepts, dim)) + 0.7 * labels @ directions
    split_X = centres[category] + 0.5 * rng.standard_normal((n_concepts, dim))
    np.savez(root / "model.npz", concepts=np.array(concepts), embeddings=X)
    np.savez(root / "split.npz", concepts=np.array(concepts), embeddings=split_X)
    (root / "unique_id.txt").write_text("\n".join(concepts) + "\n", encoding="utf-8")
    header = ["Word", LONG_DEFINITION_HEADER, *SPARSE_CATEGORIES]
    lines = ["\t".join(header)]
    for i in range(n_concepts):
        lines.append("\t".join([words[i], f"a {words[i]}", *("1" if m else "" for m in member[i])]))
    lines.append("\t".join(["", "", *(str(t) for t in member.sum(axis=0))]))
    (root / "category53_wideFormat.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    pairs = [[concepts[i], a] for j, a in enumerate(attributes) for i in np.flatnonzero(labels[:, j])]
    (root / "concept_attribute_pairs.json").write_text(json.dumps(pairs), encoding="utf-8")
    listed = attributes[2:] + ["attribute_not_in_data"]
    (root / "intersect_features.json").write_text(json.dumps(listed), encoding="utf-8")
    mcrae = []
    for j, a in enumerate(attributes):  # TSV words (homonyms collapse); some sets name a concept THINGS lacks
        keyed = sorted({words[i] for i in np.flatnonzero(labels[:, j])})
        mcrae.append({"norm": a, "concepts": keyed + ["unicorn"] * (j % 5 == 0)})
    (root / "mcrae++.json").write_text(json.dumps(mcrae), encoding="utf-8")
    kmeans, categs = [], {}
    for a in listed[:-1]:
        col = labels[:, attributes.index(a)]
        pos, neg = np.flatnonzero(col), np.flatnonzero(~col)
        test = np.concatenate([rng.choice(pos, size=max(2, len(pos) // 5), replace=False),
                               rng.choice(neg, size=len(neg) // 5, replace=False)])  # fmt: skip
        kmeans.append([sorted(set(range(n_concepts)) - set(test.tolist())), sorted(test.tolist())])
        test2 = np.concatenate([rng.choice(pos, size=3, replace=False), rng.choice(neg, size=len(neg) // 4, replace=False)])
        categs[a] = {"train_idxs": sorted(set(range(n_concepts)) - set(test2.tolist())), "test_idxs": sorted(test2.tolist())}
    (root / "k_means_split.json").write_text(json.dumps({"features": listed[:-1], "splits": kmeans}), encoding="utf-8")
    (root / "categs_split.json").write_text(json.dumps(categs), encoding="utf-8")
    moved = sorted(rng.choice(n_concepts, size=n_concepts // 3, replace=False).tolist())
    (root / "similar_idxs.txt").write_text(" ".join(str(i) for i in moved) + "\n", encoding="utf-8")
    return {"concepts": concepts, "words": words, "attributes": attributes, "listed": listed, "labels": labels,
            "member": member, "X": X, "split_X": split_X, "moved": moved, "kmeans": dict(zip(listed[:-1], kmeans)),
            "categs": categs, "mcrae": {d["norm"]: d["concepts"] for d in mcrae}}  # fmt: skip
