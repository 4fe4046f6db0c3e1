"""Concepts, their binary attributes and supercategories, and concept embeddings (paper 2).

Readers for the real formats of McRae x THINGS:

- concept-attribute pairs: a JSON list of ``[concept, attribute]`` or a CSV with the
  columns ``concept`` and ``attribute``;
- the THINGS concept list: one concept id a line (``unique_id.txt``), or a TSV with a
  ``uniqueID`` column among others (``things_concepts.tsv``);
- the THINGSplus supercategory TSV in wide format as THINGS ships it: ``Word``,
  ``Definition (from WordNet, Google, or Wikipedia)`` (or plain ``Definition``), then
  one column per category holding 1 where the concept belongs, and a last row of
  column totals (recognised, checked and left out); definitions may be quoted; empty
  trailing columns are ignored; some concepts have no category. A concept in several
  categories gets, by default, the largest of them (most concepts), as paper 2's
  scripts do; ``multi_category="first"`` takes its first 1 (this project's old rule);
- an attribute list (paper 2's 211 names): a JSON list of names or one name a line;
- concept images in the THINGS layout ``object_images/<concept>/*.jpg``.

Everything lands in one :class:`ConceptAttributeData` (concept ids, attribute names,
a binary label matrix, supercategories, and the counted skips). Concept embeddings
come from a user matrix, or from any image/text encoder passed as a callable, so
model backends and feature caches plug in without this module importing them.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
from pydantic import Field

from clip_cycles.data.sources.text_normalize import concept_key
from clip_cycles.outputs import write_output
from clip_cycles.registry import Registry
from clip_cycles.regular_files import load_json_text
from clip_cycles.schemas.options import Options
from clip_cycles.verbosity import progress_disable

#: The paper keeps an attribute when at least this many concepts have it (277 -> 211).
DEFAULT_MIN_CONCEPTS: int = 10

#: How many offending ids an error or report names before it says "and N more".
NAMES_SHOWN: int = 10

CONCEPT_LIST_NAMES: tuple[str, ...] = ("unique_id.txt", "concepts.txt")
PAIR_FILE_NAMES: tuple[str, ...] = (
    "concept_attribute_pairs.json",
    "concept_attribute_pairs.csv",
    "pairs.json",
    "pairs.csv",
)
CATEGORY_TSV_NAMES: tuple[str, ...] = ("category53_wideFormat.tsv", "supercategories.tsv")
IMAGE_FOLDER: str = "object_images"
TSV_LEADING_COLUMNS: tuple[str, str] = ("Word", "Definition")
#: How a concept in several categories gets one (``largest``: paper 2's scripts; ``first``: first 1).
MULTI_CATEGORY_RULES: tuple[str, ...] = ("largest", "first")


class ConceptOptions(Options):
    """The attribute filter of a concept-attribute label matrix, its range declared once."""

    min_concepts: int = Field(
        DEFAULT_MIN_CONCEPTS,
        ge=1,
        json_schema_extra={"flag": "--min-concepts"},
        description="a count >= 1 of positive concepts per attribute",
    )


def _show(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:NAMES_SHOWN])
    more = len(names) - NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class ConceptAttributeData:
    """Concepts x binary attributes, with supercategories and what was skipped.

    Attributes
    ----------
    concepts:
        Concept ids, in the order of the rows of ``labels`` (and of any embedding matrix).
    attributes:
        Attribute names, in the order of the columns of ``labels``.
    labels:
        Bool array (n_concepts, n_attributes); True where the concept has the attribute.
    supercategories:
        One per concept: its supercategory name, or None when it has none.
    skipped:
        Reason -> count of everything dropped on the way (pairs, attributes, concepts).
    skipped_names:
        Reason -> the ids dropped for that reason (sorted), so a report can name them.
    notes:
        Choices made on the way that drop nothing (e.g. multi-category concepts resolved).
    """

    concepts: tuple[str, ...]
    attributes: tuple[str, ...]
    labels: np.ndarray
    supercategories: tuple[str | None, ...]
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    notes: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        labels = np.asarray(self.labels)
        if labels.shape != (len(self.concepts), len(self.attributes)):
            raise ValueError(
                f"labels has shape {labels.shape}, expected (n_concepts, n_attributes) = "
                f"({len(self.concepts)}, {len(self.attributes)})"
            )
        if len(self.supercategories) != len(self.concepts):
            raise ValueError(f"supercategories has {len(self.supercategories)} entries for {len(self.concepts)} concepts")
        for kind, names in (("concept", self.concepts), ("attribute", self.attributes)):
            if len(set(names)) != len(names):
                seen: set[str] = set()
                dupes = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
                raise ValueError(f"duplicate {kind} ids: {_show(dupes)}")
        object.__setattr__(self, "labels", labels.astype(bool, copy=False))

    @property
    def n_positives(self) -> np.ndarray:
        """Number of concepts having each attribute, int64 (n_attributes,)."""
        return self.labels.sum(axis=0).astype(np.int64)

    def restrict(self, keep: np.ndarray, min_concepts: int = DEFAULT_MIN_CONCEPTS, reason: str = "") -> ConceptAttributeData:
        """Keep the concepts where ``keep`` is True, then re-apply the attribute filter.

        Dropped concepts are recorded under ``reason``; attributes that fall below
        ``min_concepts`` positives are recorded under ``attribute_below_min_concepts``.
        """
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (len(self.concepts),):
            raise ValueError(f"keep mask has shape {keep.shape}, expected ({len(self.concepts)},)")
        skipped = dict(self.skipped)
        names = dict(self.skipped_names)
        dropped = [c for c, k in zip(self.concepts, keep) if not k]
        if dropped:
            key = reason or "concept_dropped"
            skipped[key] = skipped.get(key, 0) + len(dropped)
            names[key] = tuple(sorted(set(names.get(key, ())) | set(dropped)))
        labels = self.labels[keep]
        attr_keep = labels.sum(axis=0) >= min_concepts
        low = [a for a, k in zip(self.attributes, attr_keep) if not k]
        if low:
            key = "attribute_below_min_concepts"
            skipped[key] = skipped.get(key, 0) + len(low)
            names[key] = tuple(sorted(set(names.get(key, ())) | set(low)))
        return ConceptAttributeData(
            concepts=tuple(c for c, k in zip(self.concepts, keep) if k),
            attributes=tuple(a for a, k in zip(self.attributes, attr_keep) if k),
            labels=labels[:, attr_keep],
            supercategories=tuple(s for s, k in zip(self.supercategories, keep) if k),
            skipped=skipped,
            skipped_names=names,
            notes=dict(self.notes),
        )

    def select_attributes(self, names: Sequence[str], source: str = "attribute list") -> ConceptAttributeData:
        """Keep only the attributes in ``names`` (e.g. paper 2's 211); both differences are counted and named.

        Data attributes not listed go under ``attribute_not_in_list``; listed names the
        data lacks (unknown, or below ``min_concepts``) under ``listed_attribute_not_in_data``.
        """
        wanted = set(names)
        keep = np.array([a in wanted for a in self.attributes], dtype=bool)
        if not keep.any():
            raise ValueError(
                f"{source}: none of its {len(wanted)} attributes is in the data (data has e.g. {_show(self.attributes)})"
            )
        skipped = dict(self.skipped)
        skipped_names = dict(self.skipped_names)
        for key, ids in (
            ("attribute_not_in_list", [a for a, k in zip(self.attributes, keep) if not k]),
            ("listed_attribute_not_in_data", sorted(wanted - set(self.attributes))),
        ):
            if ids:
                skipped[key] = skipped.get(key, 0) + len(ids)
                skipped_names[key] = tuple(sorted(set(skipped_names.get(key, ())) | set(ids)))
        notes = dict(self.notes)
        notes["attribute_list"] = source
        return ConceptAttributeData(
            self.concepts,
            tuple(a for a, k in zip(self.attributes, keep) if k),
            self.labels[:, keep],
            self.supercategories,
            skipped,
            skipped_names,
            notes,
        )

    def summary(self) -> dict[str, object]:
        """Counts for reports: concepts, attributes, uncategorised concepts, skips."""
        return {
            "n_concepts": len(self.concepts),
            "n_attributes": len(self.attributes),
            "n_supercategories": len({s for s in self.supercategories if s is not None}),
            "n_concepts_without_supercategory": sum(s is None for s in self.supercategories),
            "skipped": dict(sorted(self.skipped.items())),
            "skipped_names": {k: list(v[:NAMES_SHOWN]) for k, v in sorted(self.skipped_names.items())},
            "notes": dict(sorted(self.notes.items())),
        }


# ---------------------------------------------------------------------------- readers


#: Column holding the concept id in THINGS's tabular concept lists (``things_concepts.tsv``).
CONCEPT_ID_COLUMN: str = "uniqueID"


def load_concept_list(path: str | Path) -> tuple[str, ...]:
    """Read a THINGS concept list: one concept id a line, or a TSV with a ``uniqueID`` column.

    Blank lines are ignored. Raises ValueError naming the file and line of a duplicate id.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"concept list {path} does not exist")
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    column = None
    if lines and "\t" in lines[0]:
        header = [cell.strip() for cell in lines[0].split("\t")]
        if CONCEPT_ID_COLUMN not in header:
            raise ValueError(f"{path}: a tabular concept list needs a {CONCEPT_ID_COLUMN!r} column; header is {header!r}")
        column = header.index(CONCEPT_ID_COLUMN)
    concepts: list[str] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if column is not None:
            if number == 1:
                continue
            cells = line.split("\t")
            line = cells[column] if len(cells) > column else ""
        concept = line.strip()
        if not concept:
            continue
        if concept in first_line:
            raise ValueError(
                f"{path}: line {number}: concept id {concept!r} repeats line {first_line[concept]}; ids must be unique"
            )
        first_line[concept] = number
        concepts.append(concept)
    if not concepts:
        raise ValueError(f"concept list {path} holds no concept id")
    return tuple(concepts)


@dataclass(frozen=True)
class ConceptAttributePairs:
    """Unique (concept, attribute) pairs in file order, and the duplicates dropped."""

    pairs: tuple[tuple[str, str], ...]
    n_duplicates: int = 0
    duplicate_examples: tuple[tuple[str, str], ...] = ()


def _dedupe(raw: Iterable[tuple[str, str]]) -> ConceptAttributePairs:
    seen: set[tuple[str, str]] = set()
    pairs: list[tuple[str, str]] = []
    dupes: list[tuple[str, str]] = []
    for pair in raw:
        if pair in seen:
            dupes.append(pair)
            continue
        seen.add(pair)
        pairs.append(pair)
    return ConceptAttributePairs(tuple(pairs), len(dupes), tuple(dupes[:NAMES_SHOWN]))


def _read_pairs_json(path: Path) -> list[tuple[str, str]]:
    try:
        payload = load_json_text(path.read_text(encoding="utf-8-sig"), str(path))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(payload, list):
        raise ValueError(f"{path}: expected a JSON list of [concept, attribute] pairs, got {type(payload).__name__}")
    pairs = []
    for index, item in enumerate(payload):
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            raise ValueError(f"{path}: item {index} is {item!r}; expected [concept, attribute] (two strings)")
        pairs.append((item[0].strip(), item[1].strip()))
    return pairs


def _read_pairs_csv(path: Path) -> list[tuple[str, str]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        columns = {name.strip().lower(): name for name in (reader.fieldnames or [])}
        if "concept" not in columns or "attribute" not in columns:
            raise ValueError(f"{path}: header {reader.fieldnames!r} lacks the columns 'concept' and 'attribute'")
        pairs = []
        for number, row in enumerate(reader, start=2):
            concept = (row.get(columns["concept"]) or "").strip()
            attribute = (row.get(columns["attribute"]) or "").strip()
            if not concept or not attribute:
                raise ValueError(f"{path}: line {number}: empty concept or attribute in {row!r}")
            pairs.append((concept, attribute))
    return pairs


#: File suffix -> reader of concept-attribute pairs.
PAIR_READERS: Registry[Callable[[Path], list[tuple[str, str]]]] = Registry("pairs format")
PAIR_READERS.register(".json", _read_pairs_json)
PAIR_READERS.register(".csv", _read_pairs_csv)


def load_concept_attribute_pairs(path: str | Path) -> ConceptAttributePairs:
    """Read concept-attribute pairs from JSON (list of pairs) or CSV (concept, attribute).

    Exact duplicate pairs are dropped and counted in the result.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"concept-attribute pairs file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix not in PAIR_READERS:
        raise ValueError(f"{path}: {PAIR_READERS.unknown_message(suffix)}")
    return _dedupe(PAIR_READERS.get(suffix)(path))


@dataclass(frozen=True)
class SupercategoryTable:
    """The THINGSplus wide-format category table, row by row (the totals row left out)."""

    words: tuple[str, ...]
    definitions: tuple[str, ...]
    categories: tuple[str, ...]
    membership: np.ndarray  # bool (n_rows, n_categories)
    #: The trailing row of column totals as shipped (None when the file has none).
    totals: tuple[int, ...] | None = None
    #: Empty trailing columns (extra tabs) that were ignored.
    n_empty_columns: int = 0
    #: Each row's ``Word`` cell exactly as the file holds it (paper 2's CS script keys concepts by it).
    raw_words: tuple[str, ...] = ()

    def category(self, row: int, multi_category: str = "largest") -> str | None:
        """The row's supercategory, or None; several 1s are resolved by ``multi_category``.

        ``largest``: the category with the most rows (ties: the earlier column), as
        paper 2's scripts do; ``first``: the first column holding 1.
        """
        if multi_category not in MULTI_CATEGORY_RULES:
            raise ValueError(f"multi_category={multi_category!r} is not one of {list(MULTI_CATEGORY_RULES)}")
        hits = np.flatnonzero(self.membership[row])
        if not len(hits):
            return None
        if multi_category == "largest" and len(hits) > 1:
            sizes = self.membership.sum(axis=0)[hits]
            return self.categories[int(hits[int(np.argmax(sizes))])]
        return self.categories[int(hits[0])]

    def first_category(self, row: int) -> str | None:
        """The row's first category column holding 1, or None."""
        return self.category(row, "first")


_TRUE_CELLS = {"1", "1.0", "true", "True"}
_FALSE_CELLS = {"", "0", "0.0", "na", "NA", "nan", "NaN", "false", "False"}


def _is_totals_row(row: list[str]) -> bool:
    """THINGS ends the table with column totals: an empty word, or counts above 1 in category cells."""
    cells = [cell.strip() for cell in row[2:]]
    if not all(cell == "" or cell.isdigit() for cell in cells):
        return False
    return not row[0].strip() or any(cell.isdigit() and int(cell) > 1 for cell in cells)


def load_supercategory_tsv(path: str | Path) -> SupercategoryTable:
    """Read the wide-format supercategory TSV (``Word``, ``Definition...``, one column per category).

    Accepts the file as THINGS ships it: the long ``Definition (from WordNet, Google,
    or Wikipedia)`` header, a last row of column totals (checked against the counted
    1s; a mismatch is an error), empty trailing columns. Definitions may be quoted and
    contain tabs or quotes (csv quoting rules). A row with no 1 is a concept without a
    supercategory. Raises ValueError naming the file and line for a changed header, a
    ragged row or a cell that is neither 1 nor empty/0.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"supercategory table {path} does not exist")
    with path.open(newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quotechar='"'))
    if not rows:
        raise ValueError(f"{path}: empty file; expected a header Word<TAB>Definition<TAB><category>...")
    header = [cell.strip() for cell in rows[0]]
    if len(header) < 3 or header[0] != TSV_LEADING_COLUMNS[0] or not header[1].startswith(TSV_LEADING_COLUMNS[1]):
        raise ValueError(
            f"{path}: header starts {header[:3]!r}; expected 'Word', 'Definition' (or 'Definition (from ...)'), "
            "then one column per category"
        )
    n_empty = 0
    while len(header) > 2 and not header[-1]:
        header.pop()  # trailing tabs: an empty column name, ignored if its cells are empty too
        n_empty += 1
    width = len(header)
    categories = tuple(header[2:])
    if any(not c for c in categories) or len(set(categories)) != len(categories):
        raise ValueError(f"{path}: category columns must be non-empty and unique, got {list(categories)!r}")
    numbered = [(n, row) for n, row in enumerate(rows[1:], start=2) if any(cell.strip() for cell in row)]
    totals: tuple[int, ...] | None = None
    if numbered and _is_totals_row(numbered[-1][1]):
        _, last = numbered.pop()
        totals = tuple(int(c.strip() or 0) for c in (last + [""] * width)[2:width])
    words, definitions, member_rows, raw_words = [], [], [], []
    for number, row in numbered:
        if len(row) > width:
            if any(cell.strip() for cell in row[width:]):
                raise ValueError(f"{path}: line {number} has {len(row)} fields, header has {width}")
            row = row[:width]
        # Spreadsheet exports drop trailing empty cells; pad them back.
        row = row + [""] * (width - len(row))
        cells = [cell.strip() for cell in row[2:]]
        member = []
        for column, cell in zip(categories, cells):
            if cell in _TRUE_CELLS:
                member.append(True)
            elif cell in _FALSE_CELLS:
                member.append(False)
            else:
                raise ValueError(f"{path}: line {number}, column {column!r}: cell {cell!r} is neither 1 nor empty/0")
        words.append(row[0].strip())
        raw_words.append(row[0])
        definitions.append(row[1].strip())
        member_rows.append(member)
    membership = np.array(member_rows, dtype=bool).reshape(len(member_rows), len(categories))
    if totals is not None:
        counted = membership.sum(axis=0).tolist()
        wrong = [(c, t, k) for c, t, k in zip(categories, totals, counted) if t != k]
        if wrong:
            c, t, k = wrong[0]
            raise ValueError(
                f"{path}: the last row looks like column totals but column {c!r} says {t} "
                f"where {k} rows hold 1 ({len(wrong)} columns disagree); fix or remove that row"
            )
    return SupercategoryTable(tuple(words), tuple(definitions), categories, membership, totals, n_empty, tuple(raw_words))


def word_to_concept_id(word: str) -> str:
    """THINGS spelling of a word as an id: lower case, spaces as underscores."""
    return re.sub(r"\s+", "_", word.strip().lower())


def concept_base_name(concept: str) -> str:
    """The word behind a THINGS id: homonym digits stripped (``bat2`` -> ``bat``), underscores as spaces."""
    return re.sub(r"\d+$", "", concept).replace("_", " ").strip() or concept


@dataclass(frozen=True)
class SupercategoryAssignment:
    """Per-concept supercategory (None when none) and the rows/concepts that did not match."""

    supercategories: tuple[str | None, ...]
    definitions: tuple[str | None, ...]
    concepts_without_row: tuple[str, ...]
    rows_without_concept: tuple[str, ...]
    multi_category_concepts: tuple[str, ...] = ()
    #: Per concept, the index of its table row (None when it has none).
    rows: tuple[int | None, ...] = ()


def assign_supercategories(
    concepts: Sequence[str], table: SupercategoryTable, multi_category: str = "largest"
) -> SupercategoryAssignment:
    """Match table rows to concept ids and give each concept one category (``multi_category`` rule).

    Matching rule: a row's ``Word`` is turned into an id (lower case, spaces as
    underscores); an id that is not a concept matches the concept with the same
    :func:`clip_cycles.data.sources.text_normalize.concept_key` (``flip-flop`` -> ``flip_flop``).
    The k-th row with a word that several rows share (THINGS homonyms, ``bat``) matches
    ``<word>k`` (``bat1``, ``bat2``) when that id exists; otherwise a row matches the id
    equal to its word. Concepts without a row get None and are listed; rows matching no
    concept are listed too.
    """
    known = set(concepts)
    # A row spelled differently from its id (``flip-flop`` for ``flip_flop``, another case) still
    # matches: exact ids first, then concept_key; a key two concepts share matches neither.
    by_key: dict[str, str | None] = {}
    for concept in concepts:
        key = concept_key(concept)
        by_key[key] = None if key in by_key else concept
    ids = [word_to_concept_id(w) for w in table.words]
    totals: dict[str, int] = {}
    for i in ids:
        totals[i] = totals.get(i, 0) + 1
    occurrence: dict[str, int] = {}
    row_of: dict[str, int] = {}
    unmatched_rows: list[str] = []
    for row, word_id in enumerate(ids):
        occurrence[word_id] = occurrence.get(word_id, 0) + 1
        candidates = [f"{word_id}{occurrence[word_id]}"] if totals[word_id] > 1 else []
        candidates.append(word_id)
        target = next((c for c in candidates if c in known and c not in row_of), None)
        if target is None:
            target = next((t for c in candidates if (t := by_key.get(concept_key(c))) and t not in row_of), None)
        if target is None:
            unmatched_rows.append(table.words[row])
            continue
        row_of[target] = row
    supers = tuple(table.category(row_of[c], multi_category) if c in row_of else None for c in concepts)
    definitions = tuple(table.definitions[row_of[c]] if c in row_of else None for c in concepts)
    missing = tuple(c for c in concepts if c not in row_of)
    several = tuple(c for c in concepts if c in row_of and table.membership[row_of[c]].sum() > 1)
    rows = tuple(row_of.get(c) for c in concepts)
    return SupercategoryAssignment(supers, definitions, missing, tuple(unmatched_rows), several, rows)


@dataclass(frozen=True)
class ConceptImages:
    """Image paths per concept (sorted) and the concepts with no image."""

    paths: dict[str, tuple[Path, ...]]
    missing: tuple[str, ...]


def find_concept_images(root: str | Path, concepts: Sequence[str], pattern: str = "*.jpg") -> ConceptImages:
    """Find ``<root>/object_images/<concept>/*.jpg`` (THINGS layout) for each concept."""
    folder = Path(root) / IMAGE_FOLDER
    if not folder.is_dir():
        raise FileNotFoundError(f"image folder {folder} does not exist; expected the THINGS layout {IMAGE_FOLDER}/<concept>/")
    paths: dict[str, tuple[Path, ...]] = {}
    missing = []
    for concept in concepts:
        found = tuple(sorted((folder / concept).glob(pattern)))
        if found:
            paths[concept] = found
        else:
            missing.append(concept)
    return ConceptImages(paths, tuple(missing))


# ------------------------------------------------------------------------ assembling


def build_concept_attribute_data(
    concepts: Sequence[str],
    pairs: ConceptAttributePairs | Sequence[tuple[str, str]],
    supercategories: Sequence[str | None] | None = None,
    min_concepts: int = DEFAULT_MIN_CONCEPTS,
) -> ConceptAttributeData:
    """Assemble the label matrix from pairs; count and name every pair or attribute dropped.

    Pairs whose concept is not in ``concepts`` are skipped (``pair_unknown_concept``,
    the concept ids are named); duplicate pairs are counted (``duplicate_pair``);
    attributes with fewer than ``min_concepts`` positive concepts are dropped
    (``attribute_below_min_concepts``). Attributes are sorted by name.
    """
    ConceptOptions.make(min_concepts=min_concepts)
    if not isinstance(pairs, ConceptAttributePairs):
        pairs = _dedupe((str(c), str(a)) for c, a in pairs)
    concepts = tuple(concepts)
    supers = tuple(supercategories) if supercategories is not None else (None,) * len(concepts)
    index = {c: i for i, c in enumerate(concepts)}
    by_key: dict[str, int | None] = {}
    for i, c in enumerate(concepts):
        key = concept_key(c)
        by_key[key] = None if key in by_key else i
    # A pair naming its concept in another spelling (case, ``-`` for ``_``) is matched by concept_key.
    renamed = {c for c, _ in pairs.pairs if c not in index and by_key.get(concept_key(c)) is not None}
    if renamed:
        pairs = _dedupe((concepts[by_key[concept_key(c)]] if c in renamed else c, a) for c, a in pairs.pairs)  # type: ignore[index]
    skipped: dict[str, int] = {}
    names: dict[str, tuple[str, ...]] = {}
    if pairs.n_duplicates:
        skipped["duplicate_pair"] = pairs.n_duplicates
        names["duplicate_pair"] = tuple(f"{c}/{a}" for c, a in pairs.duplicate_examples)
    unknown = [c for c, _ in pairs.pairs if c not in index]
    if unknown:
        skipped["pair_unknown_concept"] = len(unknown)
        names["pair_unknown_concept"] = tuple(sorted(set(unknown)))
    attributes = sorted({a for c, a in pairs.pairs if c in index})
    column = {a: j for j, a in enumerate(attributes)}
    labels = np.zeros((len(concepts), len(attributes)), dtype=bool)
    for c, a in pairs.pairs:
        if c in index:
            labels[index[c], column[a]] = True
    notes: dict[str, object] = {"n_pair_concepts_matched_by_key": len(renamed)} if renamed else {}
    data = ConceptAttributeData(concepts, tuple(attributes), labels, supers, skipped, names, notes)
    result = data.restrict(np.ones(len(concepts), dtype=bool), min_concepts=min_concepts)
    if not result.attributes:
        raise ValueError(
            f"no attribute has at least min_concepts={min_concepts} positive concepts "
            f"({len(attributes)} attributes before the filter)"
        )
    return result


def _find_file(root: Path, explicit: str | Path | None, names: Sequence[str], what: str) -> Path:
    if explicit is not None:
        path = Path(explicit)
        return path if path.is_absolute() or path.exists() else root / path
    for name in names:
        if (root / name).is_file():
            return root / name
    raise FileNotFoundError(f"no {what} under {root}; looked for {list(names)} (pass its path explicitly)")


def load_things(
    root: str | Path,
    pairs: str | Path | None = None,
    concept_list: str | Path | None = None,
    categories: str | Path | None = None,
    min_concepts: int = DEFAULT_MIN_CONCEPTS,
    multi_category: str = "largest",
    attributes: str | Path | None = None,
) -> ConceptAttributeData:
    """Load a THINGS-format root: concept list, pairs file and (optional) supercategory TSV.

    Missing file names fall back to the conventional names (``unique_id.txt``,
    ``concept_attribute_pairs.json``/``.csv``, ``category53_wideFormat.tsv``). Without
    a TSV every concept has supercategory None. Concepts without a table row and table
    rows without a concept are counted and named in ``skipped``; concepts in several
    categories are resolved by ``multi_category`` and counted in ``notes``.
    ``attributes`` (a file, see :func:`load_attribute_list`) restricts the attributes.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"THINGS root {root} is not a folder")
    concepts = load_concept_list(_find_file(root, concept_list, CONCEPT_LIST_NAMES, "concept list"))
    pair_file = load_concept_attribute_pairs(_find_file(root, pairs, PAIR_FILE_NAMES, "concept-attribute pairs file"))
    supers: tuple[str | None, ...] | None = None
    extra_skips: dict[str, tuple[str, ...]] = {}
    try:
        tsv = _find_file(root, categories, CATEGORY_TSV_NAMES, "supercategory TSV")
    except FileNotFoundError:
        if categories is not None:
            raise
        tsv = None
    notes: dict[str, object] = {}
    if tsv is not None:
        table = load_supercategory_tsv(tsv)
        assignment = assign_supercategories(concepts, table, multi_category)
        supers = assignment.supercategories
        notes.update(
            {
                "multi_category_rule": multi_category,
                "n_multi_category_concepts": len(assignment.multi_category_concepts),
                "multi_category_concepts": list(assignment.multi_category_concepts[:NAMES_SHOWN]),
                "category_totals_row": table.totals is not None,
                "n_empty_category_columns": table.n_empty_columns,
            }
        )
        if assignment.concepts_without_row:
            extra_skips["concept_without_category_row"] = assignment.concepts_without_row
        if assignment.rows_without_concept:
            extra_skips["category_row_without_concept"] = assignment.rows_without_concept
    data = build_concept_attribute_data(concepts, pair_file, supers, min_concepts=min_concepts)
    skipped = dict(data.skipped)
    names = dict(data.skipped_names)
    for key, ids in extra_skips.items():
        skipped[key] = len(ids)
        names[key] = tuple(sorted(ids))
    data = ConceptAttributeData(
        data.concepts, data.attributes, data.labels, data.supercategories, skipped, names, {**data.notes, **notes}
    )
    if attributes is not None:
        path = Path(attributes)
        path = path if path.is_absolute() or path.exists() else root / path
        data = data.select_attributes(load_attribute_list(path), str(path))
    return data


def read_list_file(path: str | Path, what: str) -> tuple[Path, str, Any]:
    """Read a user's list file: ``(path, text, payload)``; ``payload`` is the parsed JSON for a
    ``.json`` file (a named ValueError when it does not parse), else None (one entry a line)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist")
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() != ".json":
        return path, text, None
    try:
        return path, text, load_json_text(text, str(path))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from error


def load_attribute_list(path: str | Path) -> tuple[str, ...]:
    """Read attribute names: a JSON list of strings (paper 2's 211) or one name a line."""
    path, text, payload = read_list_file(path, "attribute list")
    if payload is not None:
        if not isinstance(payload, list) or not all(isinstance(a, str) for a in payload):
            raise ValueError(f"{path}: expected a JSON list of attribute names (strings)")
        names = [a.strip() for a in payload if a.strip()]
    else:
        names = [line.strip() for line in text.splitlines() if line.strip()]
    if not names:
        raise ValueError(f"{path}: the attribute list is empty")
    return tuple(dict.fromkeys(names))


# ------------------------------------------------------------------------ embeddings


def load_embeddings_npz(path: str | Path) -> tuple[tuple[str, ...], np.ndarray]:
    """Read ``concepts`` (n,) strings and ``embeddings`` (n, d) floats from an npz (no pickle)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"embeddings file {path} does not exist")
    with np.load(path, allow_pickle=False) as archive:
        for key in ("concepts", "embeddings"):
            if key not in archive.files:
                raise ValueError(f"{path}: missing array {key!r}; found {sorted(archive.files)}")
        ids = tuple(str(c) for c in archive["concepts"].tolist())
        matrix = np.asarray(archive["embeddings"], dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != len(ids):
        raise ValueError(f"{path}: embeddings shape {matrix.shape} does not match {len(ids)} concept ids")
    return ids, matrix


def save_embeddings_npz(path: str | Path, concepts: Sequence[str], embeddings: np.ndarray) -> None:
    """Write concept ids and embeddings in the format :func:`load_embeddings_npz` reads."""
    path = Path(path)
    if path.suffix != ".npz":  # as np.savez names it
        path = path.with_name(path.name + ".npz")
    buffer = io.BytesIO()
    np.savez(buffer, concepts=np.asarray(list(concepts), dtype=str), embeddings=np.asarray(embeddings))
    write_output(path, buffer.getvalue(), what="concept embeddings")


def align_embeddings(
    data: ConceptAttributeData,
    concepts: Sequence[str],
    embeddings: np.ndarray,
    min_concepts: int = DEFAULT_MIN_CONCEPTS,
    on_nonfinite: str = "error",
) -> tuple[ConceptAttributeData, np.ndarray]:
    """Order a user embedding matrix like ``data.concepts``; drop and report concepts without one.

    Parameters
    ----------
    data, concepts, embeddings:
        The labelled concepts, and an (n, d) matrix whose rows belong to ``concepts``.
    on_nonfinite:
        ``"error"`` (default) raises naming the concepts whose row has NaN/inf;
        ``"skip"`` drops them and records ``concept_nonfinite_embedding``.

    Returns
    -------
    (data restricted to concepts with an embedding, float64 matrix in data order)
    """
    matrix = np.asarray(embeddings, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != len(concepts):
        raise ValueError(f"embeddings have shape {matrix.shape}; expected ({len(concepts)}, d), one row per concept id")
    if on_nonfinite not in ("error", "skip"):
        raise ValueError(f"on_nonfinite must be 'error' or 'skip', got {on_nonfinite!r}")
    row = {c: i for i, c in enumerate(concepts)}
    if len(row) != len(concepts):
        raise ValueError("embedding concept ids are not unique")
    finite = np.isfinite(matrix).all(axis=1)
    bad = [c for c in data.concepts if c in row and not finite[row[c]]]
    if bad and on_nonfinite == "error":
        raise ValueError(f"embeddings have NaN or inf for {len(bad)} concepts: {_show(bad)} (fix them or skip them)")
    have = np.array([c in row for c in data.concepts], dtype=bool)
    restricted = data.restrict(have, min_concepts=min_concepts, reason="concept_without_embedding")
    if bad:
        keep = np.array([c not in set(bad) for c in restricted.concepts], dtype=bool)
        restricted = restricted.restrict(keep, min_concepts=min_concepts, reason="concept_nonfinite_embedding")
    if not restricted.attributes:
        raise ValueError("no attribute keeps min_concepts positives among the concepts that have embeddings")
    ordered = matrix[[row[c] for c in restricted.concepts]]
    return restricted, ordered


def mean_embeddings_by_concept(
    items: Mapping[str, Sequence[object]],
    encode: Callable[[list[object]], np.ndarray],
    batch_size: int = 256,
    normalize_items: bool = False,
) -> tuple[tuple[str, ...], np.ndarray]:
    """Mean of ``encode`` over each concept's items (images or texts), batched across concepts.

    ``encode`` maps a list of items to an (len, d) array; concepts with no item are
    left out of the result (the caller reports them). With ``normalize_items`` each
    item embedding is L2-normalised before the mean.
    """
    order = [c for c in items if len(items[c])]
    flat: list[object] = [item for c in order for item in items[c]]
    owner = np.repeat(np.arange(len(order)), [len(items[c]) for c in order])
    if not flat:
        raise ValueError("no concept has any item to encode")
    from tqdm.auto import tqdm

    chunks = []
    for start in tqdm(range(0, len(flat), batch_size), desc="encode concepts", disable=progress_disable()):
        chunk = np.asarray(encode(flat[start : start + batch_size]), dtype=np.float64)
        if chunk.ndim != 2 or chunk.shape[0] != len(flat[start : start + batch_size]):
            raise ValueError(f"encoder returned shape {chunk.shape} for {len(flat[start : start + batch_size])} items")
        chunks.append(chunk)
    features = np.concatenate(chunks)
    if normalize_items:
        features = features / np.maximum(np.linalg.norm(features, axis=1, keepdims=True), 1e-12)
    sums = np.zeros((len(order), features.shape[1]))
    np.add.at(sums, owner, features)
    counts = np.bincount(owner, minlength=len(order)).astype(np.float64)
    return tuple(order), sums / counts[:, None]


def concept_embeddings_from_images(
    images: ConceptImages | Mapping[str, Sequence[Path]],
    encode_images: Callable[[list[Path]], np.ndarray],
    batch_size: int = 256,
) -> tuple[tuple[str, ...], np.ndarray]:
    """Concept embedding = mean image embedding over the concept's images (paper 2)."""
    paths = images.paths if isinstance(images, ConceptImages) else images
    return mean_embeddings_by_concept(paths, encode_images, batch_size=batch_size)  # type: ignore[arg-type]


def concept_texts(
    concepts: Sequence[str], definitions: Sequence[str | None] | None = None, template: str = "a photo of a {name}"
) -> dict[str, str]:
    """One text per concept: ``template`` on the concept's word, plus ``: definition`` when known."""
    texts = {}
    for i, concept in enumerate(concepts):
        text = template.format(name=concept_base_name(concept))
        if definitions is not None and definitions[i]:
            text = f"{text}: {definitions[i]}"
        texts[concept] = text
    return texts


def concept_embeddings_from_texts(
    texts: Mapping[str, str], encode_texts: Callable[[list[str]], np.ndarray], batch_size: int = 256
) -> tuple[tuple[str, ...], np.ndarray]:
    """Concept embedding = text embedding of the concept's name or definition."""
    return mean_embeddings_by_concept(
        {c: [t] for c, t in texts.items()},
        encode_texts,
        batch_size=batch_size,  # type: ignore[arg-type]
    )
