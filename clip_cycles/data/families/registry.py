"""The registry of cycle families and the source-independent machinery that builds them.

A *family* is a rule that turns annotated images into exact cycles: two valid pairs
(image_0, caption_0), (image_1, caption_1) whose swaps are invalid under the family
predicate. Families of every source (COCO, GQA) register here with a decorator::

    @register_family("coco", "strict_size", predicate="... in words ...")
    class StrictSize(Family):
        def build_cycles(self, index, image_ids, rng): ...   # -> list[Cycle]
        def holds(self, index, image_id, meaning): ...       # -> bool

``index`` is the source's annotation index (anything with ``source``, ``root`` and
``file_name(image_id)``, see :class:`SourceIndex`); sources register a loader with
:func:`register_index_loader` so ``clip-cycles audit`` can rebuild the index from the raw
annotations named in ``build_info.json``. Which builders exist, and which module registers
each one's families, the source registry says (:mod:`clip_cycles.data.sources.registry`).

Each caption carries a *meaning*: a small JSON object saying what the caption asserts
(e.g. ``{"subject": "circle", "relation": "left of", "object": "square"}``). The family's
``holds(index, image_id, meaning)`` decides the predicate from the raw annotations
alone, so the validity audit re-evaluates all four pairs of every cycle independently
of how the builder found them.

:func:`build_families` does the rest for every source: fixed image pools, image-disjoint
per-seed splits (train/validation from the train pool, test from the val pool), one
deterministic generator per (source, family, seed, split), the audits of
:mod:`clip_cycles.algebra.audits` on every split (a failing audit raises :class:`AuditError`),
the *same candidate stratum* gate (both pairs of a cycle come from one stratum, recorded in
the row's ``predicate`` as ``"stratum"``), and the minimum-cycle rule, per split: a split
short of ``min_cycles`` in some seed is not *available* (zero-shot scoring needs only the
split it scores, probe experiments need all three); a family with no short split is
``available``. Candidates the family rule rejects (a swap that is only sub-margin, an
ambiguous multi-instance image, ...) are counted per reason in ``FamilyBuild.excluded``.

Gates and identities: matched validity, swapped captions false beyond doubt
(``Family.refutes``) and the shared stratum are gates that a faulty family trips. Marginal
TV and signed-degree balance are recorded too, but they are identities of any complete
set of 2x2 blocks (they cannot fail on a well-formed cycle), so they are reported as such.

The families of a build go through :func:`parallel_imap` (one family per task) and heavy
per-image steps (text-neighbour search, candidate indexing) through :func:`parallel_map`;
both run on ``processes`` workers of the one fork pool (:mod:`clip_cycles.processes`; the
build's ``BuildConfig.num_proc``, carried with the work: the family's config travels to the
worker with the family). A map inside a worker runs in that worker, so in a build a
family's per-image steps run on the worker that builds the family. Results come back in input order and each family depends only
on the index, the pools and its own seeded generators, so the output is byte-identical for
any process count.
"""

from __future__ import annotations

import gc
import hashlib
import json
import typing
from collections import Counter
from contextlib import contextmanager
from copy import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, Protocol, Sequence, TypeVar

import numpy as np

from clip_cycles.algebra.audits import audit_cycles
from clip_cycles.data.families.build_config import DEFAULT_BUILD, DEFAULT_MIN_CYCLES, DEFAULT_VALIDATION_FRACTION, BuildConfig
from clip_cycles.data.sources.registry import builder_names, get_builder
from clip_cycles.fingerprints import canonical_json
from clip_cycles.processes import iterate_jobs
from clip_cycles.registry import Registry, resolve_target
from clip_cycles.settings import MIN_CYCLES_ENV
from clip_cycles.verbosity import progress_disable

SPLITS: tuple[str, ...] = ("train", "validation", "test")

#: How a user sets the minimum-cycle rule, named in every unavailable-family reason.
MIN_CYCLES_HINT = (
    f"minimum-cycle rule: `clip-cycles build ... --min-cycles N`; for families built from a raw root "
    f"by clip_benchmark or clip-cycles eval, the environment variable {MIN_CYCLES_ENV}=N"
)

#: Seed of the fixed pool draw; the pools are the same for every split seed (paper 1).
POOL_SEED: int = 0

T = TypeVar("T")
R = TypeVar("R")


@contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Python's cycle collector off inside the block (as it was before, after it).

    A build holds millions of live objects (the annotation index, memos, records), and each
    full collection walks all of them: on COCO that was a quarter of the build's time.
    The build makes no reference cycles to speak of (its peak memory is the same either
    way), so nothing waits for a collection.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


#: What a build keeps when one of its workers dies (a build is written aside and swapped in only when complete).
BUILD_KEPT = "the output folder was left as it was"


def _apply_to_chunk(fn: Callable[[T], R], chunk: Sequence[T]) -> list[R]:
    """One job of the pool: ``fn`` (inherited by the forked worker, never pickled) over a chunk of items."""
    return [fn(item) for item in chunk]


def _chunk_results(fn: Callable[[T], R], chunks: list[list[T]], processes: int) -> Iterator[list[R]]:
    """``[fn(x) for x in chunk]`` for each chunk, in order, on ``processes`` workers of the one fork pool
    (:func:`clip_cycles.processes.iterate_jobs`: each free worker takes the next chunk); here with one
    process, inside a worker, or without the ``fork`` start method (Windows)."""
    return iterate_jobs(_apply_to_chunk, fn, chunks, processes, "build steps", BUILD_KEPT)


def parallel_map(fn: Callable[[T], R], items: Sequence[T], chunk_size: int = 64, processes: int = 1) -> list[R]:
    """``[fn(x) for x in items]``, on ``processes`` worker processes when there are several.

    Workers are forked, so ``fn`` may close over the (large) annotation index without it
    being pickled; only the items and results travel. Results keep the input order, and
    ``fn`` must be a pure function of its item, so any process count gives the same list.
    Without the ``fork`` start method (Windows) the map runs in this process.
    """
    items = list(items)
    chunks = [items[i : i + chunk_size] for i in range(0, len(items), chunk_size)]
    return [result for part in _chunk_results(fn, chunks, processes) for result in part]


def parallel_imap(fn: Callable[[T], R], items: Sequence[T], processes: int = 1) -> Iterator[R]:
    """``fn(x) for x in items``, one item per task on ``processes`` workers; input order.

    For a few long tasks (the families of a build): the next free worker takes the next
    item, and each result is yielded as soon as it and all before it are done. Inside a
    worker, or with one process, the items run here.
    """
    for part in _chunk_results(fn, [[item] for item in items], processes):
        yield part[0]


class SourceIndex(Protocol):
    """What the generic builder and writer need from a source's annotation index."""

    source: str
    root: Path

    def file_name(self, image_id: int) -> str:
        """Image file name relative to ``root`` (e.g. ``val2017/000000000139.jpg``)."""
        ...


@dataclass(frozen=True)
class Cycle:
    """One candidate cycle as a family builds it, before ids and splits are attached.

    ``meaning_0``/``meaning_1`` are :func:`canonical_json` objects stating what each caption
    asserts (evaluated by ``Family.holds``); ``details`` is :func:`canonical_json` with the
    geometry and parameters used (boxes, margins, categories) for the card and audit. All
    three must come from :func:`canonical_json`: the row's ``predicate`` is assembled from
    them verbatim (byte-identical output).
    """

    image_id_0: int
    image_id_1: int
    caption_0: str
    caption_1: str
    meaning_0: str
    meaning_1: str
    details: str = "{}"
    #: The candidate stratum each pair was drawn from (e.g. the category pair of a strict
    #: relation). Both must be equal (the stratum gate); None on both means the family's
    #: whole candidate pool is one stratum (recorded as the family name).
    stratum_0: str | None = None
    stratum_1: str | None = None


#: Columns of a cycle row, in file order (Winoground's names first); see DEVELOPING.md.
ROW_COLUMNS: tuple[str, ...] = (
    "image_0",
    "image_1",
    "caption_0",
    "caption_1",
    "cycle_id",
    "family",
    "seed",
    "split",
    "image_id_0",
    "image_id_1",
    "predicate",
)


@dataclass(frozen=True)
class CycleRecord:
    """One Parquet row (DEVELOPING.md row schema); ``image_*`` are reference-mode file names.

    ``predicate`` is canonical JSON ``{"caption_0": meaning, "caption_1": meaning,
    "details": {...}, "stratum": "..."}``: everything needed to re-check the four pairs, and
    the candidate stratum both pairs were drawn from.
    """

    image_0: str
    image_1: str
    caption_0: str
    caption_1: str
    cycle_id: str
    family: str
    seed: int
    split: str
    image_id_0: int
    image_id_1: int
    predicate: str

    def meanings(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The two caption meanings stored in ``predicate``."""
        data = json.loads(self.predicate)
        return data["caption_0"], data["caption_1"]

    def as_row(self) -> dict[str, Any]:
        """The row as a dict in :data:`ROW_COLUMNS` order."""
        return {name: getattr(self, name) for name in ROW_COLUMNS}


class Family:
    """Base class of a registered family; ``source``, ``name``, ``predicate`` set by the decorator."""

    source: ClassVar[str] = ""
    name: ClassVar[str] = ""
    predicate: ClassVar[str] = ""
    #: The build's settings this family reads (geometry, ``num_proc``); the registered instance
    #: holds the defaults, a build works on :meth:`configured` copies.
    config: BuildConfig = DEFAULT_BUILD

    def configured(self, config: BuildConfig) -> typing.Self:
        """A copy of this family that builds under ``config`` (the registered one is left as it is)."""
        family = copy(self)
        family.config = config
        return family

    def build_cycles(self, index: Any, image_ids: Sequence[int], rng: np.random.Generator) -> list[Cycle]:
        """All cycles of this family among ``image_ids`` (one split), in a deterministic order."""
        raise NotImplementedError

    def holds(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> bool:
        """Whether a caption with this meaning is valid for the image, from raw annotations."""
        raise NotImplementedError

    def verdict(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> str:
        """``"true"``, ``"false"`` (false beyond doubt) or the reason the caption is undecided.

        Default: two-valued, from :meth:`holds`. Families whose captions can be neither
        clearly true nor clearly false (sub-margin geometry, several instances that
        disagree, crowd regions) override it.
        """
        return "true" if self.holds(index, image_id, meaning) else "false"

    def refutes(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> bool:
        """Whether the caption is false beyond doubt for the image: what a swapped caption must be."""
        return self.verdict(index, image_id, meaning) == "false"

    def holds_and_refutes(self, index: Any, image_id: int, meaning: Mapping[str, Any]) -> tuple[bool, bool]:
        """(:meth:`holds`, :meth:`refutes`) of one pair. A family whose two answers come from one
        :meth:`verdict` overrides it: the build's audit then decides each pair once, for both gates
        (otherwise it asks each method only for the pairs that gate checks)."""
        return bool(self.holds(index, image_id, meaning)), bool(self.refutes(index, image_id, meaning))

    def exclude(self, reason: str, count: int = 1) -> None:
        """Count a candidate the family rule rejected (``FamilyBuild.excluded``, the card)."""
        counter = self.__dict__.get("_excluded")
        if counter is None:
            counter = self.__dict__["_excluded"] = Counter()
        counter[reason] += count

    def take_exclusions(self) -> Counter:
        """The exclusions counted since the last call (and reset them)."""
        return self.__dict__.pop("_excluded", None) or Counter()

    def caption_matches(self, index: Any, caption: str, meaning: Mapping[str, Any]) -> bool:
        """Whether ``caption`` says what ``meaning`` claims (audit; default: trusted)."""
        return True

    def prepare(self, index: Any, pools: Mapping[str, Sequence[int]]) -> None:
        """Optional hook, called once per build with the fixed pools (``train``, ``val``) before any
        split: a family may precompute pool-level structures it reuses for every seed. Default: nothing."""


#: Per source, the registry of its families by name in registration order (filled by ``register_family``).
FAMILIES: Registry[Registry[Family]] = Registry("family source", ordered=True)


def _families_of(source: str) -> Registry[Family]:
    """The family registry of ``source`` (an empty one, not stored, for a source with none)."""
    return FAMILIES.get(source) if source in FAMILIES else Registry(f"{source} family", ordered=True)


#: Which registered families paper 1 names (README, cards, build_info.json ``provenance``);
#: every other registered family is this project's addition. Paper 1's COCO families:
#: coarse object, matched object, text neighbour, box relation, strict left/right, strict
#: above/below, strict same-pair relation change, strict size, object variant. Its GQA
#: families: attribute, relation/object, binding; its transfer study uses "7 available"
#: GQA families without listing them, and binding is NOT among them (reported unavailable).
PAPER_FAMILIES: dict[str, dict[str, str]] = {
    "coco": {
        "coarse_object": "paper 1: coarse object",
        "matched_object": "paper 1: matched object",
        "text_neighbor": "paper 1: text neighbour",
        "box_left_right": "paper 1: box relation (split by axis here; the split is this project's choice)",
        "box_above_below": "paper 1: box relation (split by axis here; the split is this project's choice)",
        "strict_left_right": "paper 1: strict left/right",
        "strict_above_below": "paper 1: strict above/below",
        "strict_same_pair": "paper 1: strict same-pair relation change",
        "strict_size": "paper 1: strict size",
        "object_variant": "paper 1: object variant",
    },
    "gqa": {
        "attribute_color": "paper 1: attribute (split by attribute type here; the split is this project's choice)",
        "attribute_material": "paper 1: attribute (split by attribute type here; the split is this project's choice)",
        "attribute_size": "paper 1: attribute (split by attribute type here; the split is this project's choice)",
        "relation_object": "paper 1: relation/object",
        "binding": "paper 1: binding (reported unavailable there, 18-19 validation cycles; not one of its 7)",
    },
}


def family_provenance(source: str, name: str) -> str:
    """``paper 1: ...`` for a family paper 1 names, else ``added by this project``."""
    return PAPER_FAMILIES.get(source, {}).get(name, "added by this project")


def register_family(source: str, name: str, predicate: str) -> Callable[[type[Family]], type[Family]]:
    """Class decorator: register a :class:`Family` subclass as ``source``/``name``.

    ``predicate`` is the family predicate in words (what makes a pair valid, what makes
    the swap invalid, ambiguity rules, margins); it goes into the dataset card verbatim.
    """

    def decorate(cls: type[Family]) -> type[Family]:
        if not issubclass(cls, Family):
            raise TypeError(f"family {source}/{name}: {cls.__name__} must subclass clip_cycles.data.families.registry.Family")
        if source not in FAMILIES:
            FAMILIES.register(source, Registry(f"{source} family", ordered=True))
        registry = FAMILIES.get(source)
        registry.check_free(name)  # a taken name is refused before the class is touched
        cls.source, cls.name, cls.predicate = source, name, " ".join(predicate.split())
        registry.register(name, cls())
        return cls

    return decorate


#: Index loader per family builder (``coco``, ``gqa``), registered by the builder's families module.
INDEX_LOADERS: Registry[Callable[..., Any]] = Registry("index loader")


def register_index_loader(builder: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register ``loader(root: Path, **options) -> SourceIndex`` for family builder ``builder``."""

    def decorate(loader: Callable[..., Any]) -> Callable[..., Any]:
        INDEX_LOADERS.register(builder, loader)
        return loader

    return decorate


def _import_builder(builder: str) -> None:
    # The module registering a builder's families is named by its source (clip_cycles.data.sources.registry);
    # it is imported on first use so that the family registry stays importable on its own.
    resolve_target(get_builder(builder).families_module)  # type: ignore[arg-type]


def load_source(source: str, root: str | Path, **options: Any) -> Any:
    """Load the annotation index of ``source`` from ``root`` via its registered loader."""
    _import_builder(source)
    return INDEX_LOADERS.get(source)(Path(root), **options)


def get_family(source: str, name: str) -> Family:
    """The registered family ``name`` of ``source``; a clear error lists the known names."""
    if source not in FAMILIES and source in builder_names():
        _import_builder(source)
    return _families_of(source).get(name)


def list_families(source: str) -> list[str]:
    """Names of the registered families of ``source`` in registration order."""
    if source not in FAMILIES and source in builder_names():
        _import_builder(source)
    return list(_families_of(source))


def family_builder_source(family: str) -> str:
    """Which family builder (a source of :mod:`clip_cycles.data.sources.registry` that builds families) registers ``family``."""
    for builder in builder_names():
        if family in list_families(builder):
            return builder
    raise ValueError(f"no family builder ({', '.join(builder_names())}) registers a family named {family!r}")


def stable_seed(*parts: Any) -> int:
    """A 64-bit seed from the parts' text (sha256), independent of PYTHONHASHSEED."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little")


def family_rng(source: str, family: str, seed: int, split: str) -> np.random.Generator:
    """The generator a family uses for one split of one seed."""
    return np.random.default_rng(stable_seed("family", source, family, seed, split))


def select_pool(image_ids: Iterable[int], size: int | None, pool_seed: int = POOL_SEED) -> list[int]:
    """A fixed pool of ``size`` ids drawn without replacement (all when ``size`` is None or larger); sorted."""
    ids = sorted(set(image_ids))
    if size is None or size >= len(ids):
        return ids
    if size <= 0:
        raise ValueError(f"pool size must be positive, got {size}")
    rng = np.random.default_rng(stable_seed("pool", pool_seed, len(ids)))
    chosen = rng.choice(len(ids), size=size, replace=False)
    return sorted(ids[i] for i in chosen.tolist())


def split_pools(
    train_pool: Sequence[int],
    val_pool: Sequence[int],
    seed: int,
    validation_fraction: float = DEFAULT_VALIDATION_FRACTION,
) -> dict[str, list[int]]:
    """Image-disjoint splits of one seed: train/validation partition the train pool, test is the val pool.

    Returns sorted id lists keyed by ``train``, ``validation``, ``test``.
    """
    BuildConfig.make(validation_fraction=validation_fraction)  # its range is declared there, once
    ids = sorted(set(train_pool))
    overlap = set(ids) & set(val_pool)
    if overlap:
        raise ValueError(f"train and val pools share {len(overlap)} image ids, e.g. {sorted(overlap)[0]}")
    order = np.random.default_rng(stable_seed("split", seed, len(ids))).permutation(len(ids))
    n_validation = int(round(validation_fraction * len(ids)))
    validation = sorted(ids[i] for i in order[:n_validation].tolist())
    train = sorted(ids[i] for i in order[n_validation:].tolist())
    return {"train": train, "validation": validation, "test": sorted(set(val_pool))}


class AuditError(ValueError):
    """A built family split failed an audit; the message names family, seed, split and the numbers."""


def caption_vertex(caption: str, meaning: str) -> tuple[str, str]:
    """The audit's caption identity: text and canonical meaning together (two meanings of one text stay distinct)."""
    return (caption, meaning)


def audit_family_cycles(
    family: Family, index: Any, cycles: Sequence[Cycle], cycle_ids: Sequence[str] | None = None
) -> dict[str, Any]:
    """Run :func:`clip_cycles.algebra.audits.audit_cycles` with the family predicate; the report as a dict.

    Also checks the block shape (two distinct images, two distinct captions), which the
    cycle definition requires and the algebraic audits cannot see.
    """
    # The same (image, meaning) comes back in other cycles, splits and seeds of the build: each
    # meaning is parsed and each truth value computed once per index (its ``memo``, where it has one).
    memo = getattr(index, "memo", None)
    memo = memo if isinstance(memo, dict) else {}
    parsed: dict[str, dict[str, Any]] = memo.setdefault(("gate_meanings",), {})
    meanings: dict[tuple[str, str], dict[str, Any]] = {}
    rows = []
    for i, c in enumerate(cycles):
        v0, v1 = caption_vertex(c.caption_0, c.meaning_0), caption_vertex(c.caption_1, c.meaning_1)
        if c.image_id_0 == c.image_id_1 or v0 == v1:
            name = cycle_ids[i] if cycle_ids is not None else i
            raise AuditError(f"{family.source}/{family.name}: cycle {name} is degenerate (repeated image or caption)")
        for vertex, meaning in ((v0, c.meaning_0), (v1, c.meaning_1)):
            if vertex not in meanings:
                if meaning not in parsed:
                    parsed[meaning] = json.loads(meaning)
                meanings[vertex] = parsed[meaning]
        rows.append((c.image_id_0, c.image_id_1, v0, v1))
    # One memo per (image, meaning) of [holds, refutes], each filled when first asked; a family that decides
    # both from one verdict (it overrides holds_and_refutes) fills both at once.
    truths: dict[tuple[int, str], list[bool | None]] = memo.setdefault(("gate", family.source, family.name), {})
    both_at_once = type(family).holds_and_refutes is not Family.holds_and_refutes

    def truth(image_id: int, vertex: tuple[str, str], which: int) -> bool:
        key = (image_id, vertex[1])
        value = truths.get(key)
        if value is None:
            value = truths[key] = [None, None]
        found = value[which]
        if found is None:
            meaning = meanings[vertex]
            if both_at_once:
                value[0], value[1] = family.holds_and_refutes(index, image_id, meaning)
            elif which == 0:
                value[0] = bool(family.holds(index, image_id, meaning))
            else:
                value[1] = bool(family.refutes(index, image_id, meaning))
            found = value[which]
        return bool(found)

    def holds(image_id: int, vertex: tuple[str, str]) -> bool:
        return truth(image_id, vertex, 0)

    def refutes(image_id: int, vertex: tuple[str, str]) -> bool:
        return truth(image_id, vertex, 1)

    report = audit_cycles(rows, predicate=holds, cycle_ids=cycle_ids, refutes=refutes)
    return report.to_dict()


class StratumError(AuditError):
    """A cycle's two pairs were drawn from different candidate strata."""


def cycle_stratum(family: Family, cycle: Cycle, name: Any) -> str:
    """The stratum both pairs of ``cycle`` come from; :class:`StratumError` when they differ (the gate)."""
    if cycle.stratum_0 is None and cycle.stratum_1 is None:
        return family.name
    if cycle.stratum_0 != cycle.stratum_1 or not cycle.stratum_0:
        raise StratumError(
            f"{family.source}/{family.name}: cycle {name} draws its pairs from different candidate strata "
            f"({cycle.stratum_0!r} and {cycle.stratum_1!r}); both pairs of a cycle must share one stratum"
        )
    return cycle.stratum_0


def audit_summary(report: Mapping[str, Any]) -> str:
    """The card's one-line audit cell: ``matched/swap/image TV/caption TV/balance``.

    The first two are gates; TV and balance are identities of the block design.
    """
    balance = "balanced" if report["balanced"] else "UNBALANCED"
    return f"{report['matched_violations']}/{report['swap_violations']}/{report['image_tv']:g}/{report['caption_tv']:g}/{balance}"


@dataclass
class FamilyBuild:
    """The outcome of one family over all seeds and splits."""

    source: str
    name: str
    predicate: str
    available: bool = True
    reason: str | None = None
    records: dict[int, dict[str, list[CycleRecord]]] = field(default_factory=dict)
    audits: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)
    counts: dict[int, dict[str, int]] = field(default_factory=dict)
    #: Splits with at least ``min_cycles`` cycles in every seed (what zero-shot scoring may read).
    available_splits: list[str] = field(default_factory=list)
    #: Candidates rejected by the family rule, per reason, summed over seeds and splits.
    excluded: dict[str, int] = field(default_factory=dict)
    #: Parquet bytes of the records by (mode, folder path), made where the family was built
    #: (``dataset_folder.encode_family``); the writer writes them as they are.
    encoded: dict[tuple[str, str], bytes] = field(default_factory=dict)


def to_records(family: Family, index: SourceIndex, cycles: Sequence[Cycle], seed: int, split: str) -> list[CycleRecord]:
    """Attach file names, ids and the stored predicate to a split's cycles (the stratum gate on each)."""
    records = []
    strata_json: dict[str, str] = {}
    for i, c in enumerate(cycles):
        # The parts are canonical JSON already and the keys are in sorted order: this equals
        # canonical_json({"caption_0": ..., "caption_1": ..., "details": ..., "stratum": ...}) without re-encoding.
        identifier = cycle_id(family.name, seed, split, i)
        name = cycle_stratum(family, c, identifier)
        stratum = strata_json.get(name)
        if stratum is None:
            stratum = strata_json[name] = canonical_json(name)
        predicate = f'{{"caption_0":{c.meaning_0},"caption_1":{c.meaning_1},"details":{c.details},"stratum":{stratum}}}'
        records.append(
            CycleRecord(
                image_0=index.file_name(c.image_id_0),
                image_1=index.file_name(c.image_id_1),
                caption_0=c.caption_0,
                caption_1=c.caption_1,
                cycle_id=identifier,
                family=family.name,
                seed=int(seed),
                split=split,
                image_id_0=int(c.image_id_0),
                image_id_1=int(c.image_id_1),
                predicate=predicate,
            )
        )
    return records


def cycle_id(family: str, seed: int, split: str, position: int) -> str:
    """Folder-unique cycle id, e.g. ``strict_size-s0-test-000012``."""
    return f"{family}-s{seed}-{split}-{position:06d}"


def build_family(
    family: Family,
    index: SourceIndex,
    splits_by_seed: Mapping[int, Mapping[str, Sequence[int]]],
    min_cycles: int = DEFAULT_MIN_CYCLES,
) -> FamilyBuild:
    """Build, gate, audit and record one family for every seed and split.

    Raises :class:`AuditError` if any split fails a gate (matched validity, swaps false
    beyond doubt, shared stratum). The minimum-cycle rule is applied per split: a split
    with fewer than ``min_cycles`` cycles in some seed is not in ``available_splits``;
    the family is ``available`` (usable by probe experiments) only when every split is,
    and otherwise carries a reason naming each short split, seed and count. Records are
    kept whenever some split is available (zero-shot scoring reads only the split it
    scores) and dropped when none is.
    """
    result = FamilyBuild(source=family.source, name=family.name, predicate=family.predicate)
    shortfalls, short_splits = [], set()
    excluded: Counter = Counter()
    family.take_exclusions()  # start from zero
    for seed in sorted(splits_by_seed):
        result.records[seed], result.audits[seed], result.counts[seed] = {}, {}, {}
        for split in SPLITS:
            image_ids = splits_by_seed[seed][split]
            cycles = family.build_cycles(index, image_ids, family_rng(family.source, family.name, seed, split))
            excluded.update(family.take_exclusions())
            result.counts[seed][split] = len(cycles)
            if len(cycles) < min_cycles:
                shortfalls.append(f"{split} seed {seed}: {len(cycles)} cycles")
                short_splits.add(split)
            records = to_records(family, index, cycles, seed, split)  # the stratum gate
            result.records[seed][split] = records
            if not cycles:
                continue
            report = audit_family_cycles(family, index, cycles, [r.cycle_id for r in records])
            if not report["passed"]:
                raise AuditError(
                    f"{family.source}/{family.name} seed {seed} split {split} failed its audit "
                    f"(matched/swap/image TV/caption TV/balance = {audit_summary(report)}); "
                    f"first offending cycles: {report['validity'] and report['validity']['matched_violation_cycles'][:3]} "
                    f"{report['validity'] and report['validity']['swap_violation_cycles'][:3]}"
                )
            result.audits[seed][split] = report
    result.excluded = dict(sorted(excluded.items()))
    result.available_splits = [s for s in SPLITS if s not in short_splits]
    if shortfalls:
        result.available = False
        result.reason = f"fewer than {min_cycles} cycles in " + "; ".join(shortfalls) + f" ({MIN_CYCLES_HINT})"
    if not result.available_splits:
        result.records = {}
    return result


def build_families(
    index: SourceIndex,
    names: Sequence[str],
    train_pool: Sequence[int],
    val_pool: Sequence[int],
    config: BuildConfig = DEFAULT_BUILD,
    progress: bool | None = None,
    finish: Callable[[FamilyBuild], None] | None = None,
) -> list[FamilyBuild]:
    """Build the named families of ``index.source`` on fixed pools for every seed.

    Parameters
    ----------
    index:
        The source's annotation index (see :class:`SourceIndex`).
    names:
        Registered family names of ``index.source``; unknown names raise ValueError.
    train_pool, val_pool:
        Image ids; per seed, train/validation partition ``train_pool`` and test is ``val_pool``.
    config:
        The build's settings: ``seeds``, ``min_cycles``, ``validation_fraction`` (see :func:`split_pools`
        and :func:`build_family`), ``num_proc``, and what the families read (geometry); each family is
        a :meth:`Family.configured` copy, so the config reaches a worker with its family.
    progress:
        tqdm ``disable`` semantics inverted: None shows a bar only on a terminal.
    finish:
        Called on each build where it was made (a ``--num-proc`` worker, or here), before it
        comes back: the writer encodes a family's files there (``dataset_folder.encode_family``).
    """
    from tqdm.auto import tqdm

    families = [get_family(index.source, n).configured(config) for n in names]
    if len(set(names)) != len(names):
        raise ValueError(f"family names repeat: {list(names)}")
    splits_by_seed = {int(s): split_pools(train_pool, val_pool, int(s), config.validation_fraction) for s in config.seeds}
    disable = progress_disable(progress)
    pools = {"train": sorted(set(train_pool)), "val": sorted(set(val_pool))}

    def one(position: int) -> FamilyBuild:  # a position, not the family: only the number travels to a worker
        family = families[position]
        family.prepare(index, pools)
        build = build_family(family, index, splits_by_seed, config.min_cycles)
        if finish is not None:
            finish(build)
        return build

    # Each family depends only on the index, the pools and its own seeded generators, so the
    # families may be built on the --num-proc workers, one family per task, in any order.
    bar = tqdm(total=len(families), desc=f"{index.source} families", disable=disable)
    builds = []
    for build in parallel_imap(one, range(len(families)), config.num_proc):
        builds.append(build)
        bar.update()
    bar.close()
    return builds


def check_seeds(seeds: Sequence[int]) -> list[int]:
    """Split seeds chosen for a run, under the one seeds rule a build declares (:class:`BuildConfig` ``seeds``)."""
    return list(BuildConfig.make(seeds=tuple(seeds)).seeds)
