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
