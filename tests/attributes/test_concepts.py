"""Loaders for the McRae x THINGS formats, assembly of the label matrix, concept embeddings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clip_cycles.attributes.concepts import (
    ConceptAttributeData,
    align_embeddings,
    assign_supercategories,
    build_concept_attribute_data,
    concept_base_name,
    concept_embeddings_from_images,
    concept_embeddings_from_texts,
    concept_texts,
    find_concept_images,
    load_concept_attribute_pairs,
    load_concept_list,
    load_embeddings_npz,
    load_supercategory_tsv,
    load_things,
    save_embeddings_npz,
)

# The THINGSplus wide format: Word, Definition, category columns; quoted definitions with
# tabs, commas and doubled quotes; a homonym (bat x2); a concept with no category;
# trailing empty cells dropped by a spreadsheet export.
TSV = (
    "Word\tDefinition\tanimal\tsports equipment\tfood\n"
    'aardvark\t"nocturnal burrowing mammal\twith long ears"\t1\t\t\n'
    'bat\t"nocturnal mouselike mammal, ""flying"""\t1\t\t\n'
    'bat\t"a club used for hitting a ball"\t\t1\t\n'
    'air conditioner\t"a system that keeps air cool"\t\t\t\n'
    "apple\tfruit with red or yellow skin\t\t\t1\n"
    'cheese\t"a solid food"\t\t1\t1\n'
)
CONCEPTS = ["aardvark", "bat1", "bat2", "air_conditioner", "apple", "cheese"]


def write_root(tmp_path, pairs=None, pair_format="json"):
    (tmp_path / "unique_id.txt").write_text("\n".join(CONCEPTS) + "\n\n")
    (tmp_path / "category53_wideFormat.tsv").write_text(TSV)
    pairs = (
        pairs
        if pairs is not None
        else [[c, "has_legs"] for c in ("aardvark", "bat1")]
        + [[c, "is_edible"] for c in ("apple", "cheese", "aardvark")]
        + [["bat2", "made_of_wood"]]
    )
    if pair_format == "json":
        (tmp_path / "concept_attribute_pairs.json").write_text(json.dumps(pairs))
    else:
        (tmp_path / "concept_attribute_pairs.csv").write_text(
            "concept,attribute\n" + "\n".join(f"{c},{a}" for c, a in pairs) + "\n"
        )
    return tmp_path


def test_tsv_quirks_are_parsed(tmp_path):
    path = tmp_path / "cats.tsv"
    path.write_text(TSV)
    table = load_supercategory_tsv(path)
    assert table.categories == ("animal", "sports equipment", "food")
    assert table.words == ("aardvark", "bat", "bat", "air conditioner", "apple", "cheese")
    assert table.definitions[0] == "nocturnal burrowing mammal\twith long ears"
    assert table.definitions[1] == 'nocturnal mouselike mammal, "flying"'
    assert [table.first_category(i) for i in range(6)] == [
        "animal",
        "animal",
        "sports equipment",
        None,
        "food",
        "sports equipment",
    ]


def test_supercategory_assignment_handles_homonyms_and_spaces(tmp_path):
    path = tmp_path / "cats.tsv"
    path.write_text(TSV)
    result = assign_supercategories(CONCEPTS + ["zebra"], load_supercategory_tsv(path))
    assert result.supercategories == ("animal", "animal", "sports equipment", None, "food", "sports equipment", None)
    assert result.concepts_without_row == ("zebra",)
    assert result.rows_without_concept == ()
    assert result.definitions[2] == "a club used for hitting a ball"


def test_changed_tsv_header_is_a_clear_error(tmp_path):
    path = tmp_path / "cats.tsv"
    path.write_text(TSV.replace("Word\tDefinition", "Concept\tDefinition", 1))
    with pytest.raises(ValueError, match=r"cats\.tsv: header starts .*'Word', 'Definition'"):
        load_supercategory_tsv(path)


def test_bad_tsv_cell_names_line_and_column(tmp_path):
    path = tmp_path / "cats.tsv"
    path.write_text(TSV.replace("apple\tfruit with red or yellow skin\t\t\t1", "apple\tfruit\t\tyes\t1"))
    with pytest.raises(ValueError, match=r"line 6, column 'sports equipment': cell 'yes'"):
        load_supercategory_tsv(path)


def test_concept_list_rejects_duplicates_with_line_numbers(tmp_path):
    path = tmp_path / "ids.txt"
    path.write_text("a\nb\n\na\n")
    with pytest.raises(ValueError, match="line 4: concept id 'a' repeats line 1"):
        load_concept_list(path)


@pytest.mark.parametrize("pair_format", ["json", "csv"])
def test_load_things_root_both_pair_formats(tmp_path, pair_format):
    root = write_root(tmp_path, pair_format=pair_format)
    data = load_things(root, min_concepts=2)
    assert data.concepts == tuple(CONCEPTS)
    assert data.attributes == ("has_legs", "is_edible")  # made_of_wood has 1 concept < 2
    assert data.labels[:, 0].tolist() == [True, True, False, False, False, False]
    assert data.labels[:, 1].tolist() == [True, False, False, False, True, True]
    assert data.skipped == {"attribute_below_min_concepts": 1}
    assert data.skipped_names["attribute_below_min_concepts"] == ("made_of_wood",)
    assert data.supercategories[3] is None and data.supercategories[1] == "animal"


def test_unknown_concepts_and_duplicates_are_counted_and_named(tmp_path):
    pairs = [["aardvark", "x"], ["aardvark", "x"], ["apple", "x"], ["unicorn", "x"], ["dragon", "x"], ["unicorn", "y"]]
    root = write_root(tmp_path, pairs=pairs)
    data = load_things(root, min_concepts=2)
    assert data.skipped["duplicate_pair"] == 1
    assert data.skipped["pair_unknown_concept"] == 3
    assert data.skipped_names["pair_unknown_concept"] == ("dragon", "unicorn")
    assert data.summary()["skipped"]["pair_unknown_concept"] == 3


def test_pairs_json_must_hold_pairs(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps([["a", "b"], ["c"]]))
    with pytest.raises(ValueError, match=r"item 1 is \['c'\]"):
        load_concept_attribute_pairs(path)
    csv_path = tmp_path / "p.csv"
    csv_path.write_text("name,feature\na,b\n")
    with pytest.raises(ValueError, match="lacks the columns 'concept' and 'attribute'"):
        load_concept_attribute_pairs(csv_path)


def test_no_attribute_survives_filter_is_an_error():
    with pytest.raises(ValueError, match="no attribute has at least min_concepts=10"):
        build_concept_attribute_data(["a", "b"], [("a", "x"), ("b", "x")])


def test_restrict_refilters_attributes():
    data = build_concept_attribute_data(["a", "b", "c"], [("a", "x"), ("b", "x"), ("c", "y"), ("a", "y")], min_concepts=2)
    kept = data.restrict(np.array([True, False, True]), min_concepts=2, reason="gone")
    assert kept.attributes == ("y",)
    assert kept.skipped["gone"] == 1 and kept.skipped_names["gone"] == ("b",)
    assert kept.skipped["attribute_below_min_concepts"] == 1


def test_data_validates_shapes():
    with pytest.raises(ValueError, match="labels has shape"):
        ConceptAttributeData(("a",), ("x", "y"), np.zeros((1, 1), bool), (None,))
    with pytest.raises(ValueError, match="duplicate concept ids"):
        ConceptAttributeData(("a", "a"), ("x",), np.zeros((2, 1), bool), (None, None))


def test_embeddings_npz_roundtrip_and_alignment(tmp_path):
    data = build_concept_attribute_data(CONCEPTS, [(c, "x") for c in CONCEPTS[:4]] + [(c, "y") for c in CONCEPTS], min_concepts=3)
    ids = ["cheese", "apple", "aardvark", "bat1", "bat2"]  # air_conditioner missing, order shuffled
    matrix = np.arange(10, dtype=float).reshape(5, 2)
    path = tmp_path / "e.npz"
    save_embeddings_npz(path, ids, matrix)
    loaded_ids, loaded = load_embeddings_npz(path)
    assert loaded_ids == tuple(ids) and np.array_equal(loaded, matrix)
    aligned, X = align_embeddings(data, loaded_ids, loaded, min_concepts=3)
    assert aligned.concepts == ("aardvark", "bat1", "bat2", "apple", "cheese")
    assert aligned.skipped_names["concept_without_embedding"] == ("air_conditioner",)
    assert np.array_equal(X[0], matrix[2]) and np.array_equal(X[-1], matrix[0])


def test_nan_embeddings_error_or_reported_skip():
    data = build_concept_attribute_data(CONCEPTS, [(c, "y") for c in CONCEPTS], min_concepts=3)
    matrix = np.ones((6, 3))
    matrix[4, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or inf for 1 concepts: 'apple'"):
        align_embeddings(data, CONCEPTS, matrix, min_concepts=3)
    kept, X = align_embeddings(data, CONCEPTS, matrix, min_concepts=3, on_nonfinite="skip")
    assert "apple" not in kept.concepts and kept.skipped["concept_nonfinite_embedding"] == 1
    assert np.isfinite(X).all()


def test_npz_missing_array_is_named(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, vectors=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="missing array 'concepts'"):
        load_embeddings_npz(path)


def test_image_layout_and_mean_embeddings(tmp_path):
    for concept, n in (("aardvark", 2), ("bat1", 1)):
        folder = tmp_path / "object_images" / concept
        folder.mkdir(parents=True)
        for i in range(n):
            (folder / f"{concept}_{i:02d}s.jpg").write_bytes(b"jpg")
    images = find_concept_images(tmp_path, ["aardvark", "bat1", "apple"])
    assert images.missing == ("apple",)
    assert [p.name for p in images.paths["aardvark"]] == ["aardvark_00s.jpg", "aardvark_01s.jpg"]

    def encode(paths):  # a fake encoder: one feature per image name
        return np.array([[float(len(p.name)), float(p.name.endswith("01s.jpg"))] for p in paths])

    ids, X = concept_embeddings_from_images(images, encode, batch_size=2)
    assert ids == ("aardvark", "bat1")
    assert np.allclose(X[0], [len("aardvark_00s.jpg"), 0.5]) and np.allclose(X[1], [len("bat1_00s.jpg"), 0.0])


def test_text_embeddings_from_names_and_definitions():
    texts = concept_texts(["bat2", "air_conditioner"], ["a club", None], template="{name}")
    assert texts == {"bat2": "bat: a club", "air_conditioner": "air conditioner"}
    ids, X = concept_embeddings_from_texts(texts, lambda batch: np.array([[len(t)] for t in batch], float))
    assert ids == ("bat2", "air_conditioner") and X[:, 0].tolist() == [11.0, 15.0]
    assert concept_base_name("bat12") == "bat"


# ------------------------------------------------------------ the files as THINGS ships them


def test_real_format_category_tsv_loads(tmp_path):
    from things_fixture import CATEGORIES, concept_rows, write_things_root

    info = write_things_root(tmp_path)
    member = info["member"]
    table = load_supercategory_tsv(tmp_path / "category53_wideFormat.tsv")
    assert table.categories == CATEGORIES and table.n_empty_columns == 1
    assert table.totals == tuple(member.sum(axis=0).tolist())  # the totals row is not a concept
    assert len(table.words) == len(concept_rows())
    sizes = member.sum(axis=0)
    for rule in ("largest", "first"):
        got = load_things(tmp_path, min_concepts=5, multi_category=rule)
        # Independent reading of the rule from the membership matrix.
        expected = []
        for row in member:
            hits = np.flatnonzero(row)
            if not len(hits):
                expected.append(None)
                continue
            pick = hits[np.argmax(sizes[hits])] if rule == "largest" else hits[0]
            expected.append(CATEGORIES[pick])
        assert list(got.supercategories) == expected, rule
        assert got.notes["n_multi_category_concepts"] == 3 and got.notes["multi_category_rule"] == rule
    largest = load_things(tmp_path, min_concepts=5)
    first = load_things(tmp_path, min_concepts=5, multi_category="first")
    differ = [c for c, a, b in zip(largest.concepts, largest.supercategories, first.supercategories) if a != b]
    assert differ == ["food_0", "vehicle_1", "plant_2"]
    assert sum(s is None for s in largest.supercategories) == 8


def test_totals_row_that_disagrees_is_a_clear_error(tmp_path):
    from things_fixture import write_things_root

    write_things_root(tmp_path)
    path = tmp_path / "category53_wideFormat.tsv"
    lines = path.read_text().splitlines()
    cells = lines[-1].split("\t")
    cells[3] = str(int(cells[3]) + 1)
    path.write_text("\n".join(lines[:-1] + ["\t".join(cells)]) + "\n")
    with pytest.raises(ValueError, match=r"column totals but column 'food' says 12 where 11"):
        load_supercategory_tsv(path)


def test_attribute_list_restricts_and_names_both_differences(tmp_path):
    from things_fixture import ATTRIBUTES, LISTED_ATTRIBUTES, write_things_root

    write_things_root(tmp_path)
    data = load_things(tmp_path, min_concepts=5, attributes="attributes.json")
    assert set(data.attributes) == set(LISTED_ATTRIBUTES) & set(ATTRIBUTES)
    assert data.skipped_names["attribute_not_in_list"] == tuple(sorted(set(ATTRIBUTES) - set(LISTED_ATTRIBUTES)))
    assert data.skipped_names["listed_attribute_not_in_data"] == ("not_in_data",)
    (tmp_path / "lines.txt").write_text("is_alive\n\nis_metal\n")
    assert load_things(tmp_path, min_concepts=5, attributes=tmp_path / "lines.txt").attributes == ("is_alive", "is_metal")
    (tmp_path / "none.json").write_text('["nothing"]')
    with pytest.raises(ValueError, match="none of its 1 attributes is in the data"):
        load_things(tmp_path, min_concepts=5, attributes="none.json")


def test_tabular_concept_list_with_extra_columns(tmp_path):
    path = tmp_path / "things_concepts.tsv"
    path.write_text("Word\tuniqueID\tWordnet ID\naardvark\taardvark\tn1\nbat\tbat1\tn2\nbat\tbat2\tn3\n\n")
    assert load_concept_list(path) == ("aardvark", "bat1", "bat2")
    path.write_text("Word\tWordnet ID\naardvark\tn1\n")
    with pytest.raises(ValueError, match="needs a 'uniqueID' column"):
        load_concept_list(path)


def test_a_tsv_row_spelled_with_a_hyphen_or_another_case_matches_its_concept(tmp_path):
    """THINGS writes the row ``flip-flop`` for the concept id ``flip_flop``; exact ids still win,
    and a key two concepts share matches neither (no silent guess)."""
    path = tmp_path / "cats.tsv"
    rows = [("flip-flop", "footwear"), ("T-Shirt", "clothing"), ("ice cream", "dessert"), ("x-y", "tool")]
    cats = ["footwear", "clothing", "dessert", "tool"]
    lines = ["\t".join(["Word", "Definition", *cats])]
    lines += ["\t".join([w, "d", *("1" if c == cat else "" for c in cats)]) for w, cat in rows]
    path.write_text("\n".join(lines) + "\n")
    concepts = ["flip_flop", "t_shirt", "ice_cream", "x_y", "x-y_"]  # "x-y" is the exact id of no concept
    result = assign_supercategories(concepts, load_supercategory_tsv(path))
    assert result.supercategories[:3] == ("footwear", "clothing", "dessert")
    assert result.supercategories[3:] == (None, None)  # x_y and x-y_ share the key x_y: ambiguous, unmatched
    assert result.rows_without_concept == ("x-y",)


def test_pairs_naming_a_concept_in_another_spelling_are_matched_and_counted():
    concepts = [f"c{i}" for i in range(12)] + ["flip_flop"]
    pairs = [(c, "is_thing") for c in concepts[:11]] + [("Flip-Flop", "is_thing"), ("nobody", "is_thing")]
    data = build_concept_attribute_data(concepts, pairs, min_concepts=10)
    assert data.labels[concepts.index("flip_flop"), 0]
    assert data.notes["n_pair_concepts_matched_by_key"] == 1
    assert data.skipped["pair_unknown_concept"] == 1 and data.skipped_names["pair_unknown_concept"] == ("nobody",)
