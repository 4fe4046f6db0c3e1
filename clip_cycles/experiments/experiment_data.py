"""Inputs of the paper-1 experiments: frozen feature tables plus cycle index arrays per family, seed and split.

The probe, transfer and OE experiments never see images or captions, only features.
:class:`FamilyFeatures` is one family: an image feature table, a caption feature
table, and for each seed and split (train / validation / test) an (N, 4) cycle index
array with columns (u1, u2, v1, v2) into those tables (DEVELOPING.md). For the OE
experiment it also knows, for each caption row, the row of the same caption with the
OE marker prefix (``marker_rows``), encoded through the same backend and cache.
:class:`ExperimentData` is several families plus the identity every result records
(model, pretrained, tie tolerance).

Three ways to get one:

- :func:`load_from_tasks`: task names + a model, through :mod:`clip_cycles.evaluation.zero_shot`
  (dataset roots, built folders) and :func:`clip_cycles.encoding.encoder.encode` (the feature cache);
- :func:`load_experiment_data`: an ``.npz`` written by :func:`save_experiment_data`;
- :func:`planted_experiment_data`: synthetic features with planted interaction directions
  (tests, benchmarks), shaped like the shapes-world / COCO families.
"""

from __future__ import annotations

import io
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from clip_cycles.algebra.contrast import DEFAULT_TIE_TOLERANCE, validate_cycles
from clip_cycles.data.families.build_config import DEFAULT_MIN_CYCLES, BuildConfig
from clip_cycles.encoding.encoder import encode
from clip_cycles.encoding.task_encoding import cycle_index
from clip_cycles.experiments.item_sets import item_identity
from clip_cycles.outputs import write_output
from clip_cycles.settings import min_cycles_override, resolve_data_cache_dir
from clip_cycles.tasks.loading import keep_row_decodes, load_task_data, resolve_dataset_roots, unique_items
from clip_cycles.tasks.registry import expand_tasks

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from clip_cycles.encoding.encoder import ModelSpec

SPLITS: tuple[str, ...] = ("train", "validation", "test")

#: The Shortcut-OE marker (REFERENCE.md, OE protocol).
OE_MARKER: str = "this is an out of distribution negative example"

#: Version of the npz layout written by save_experiment_data (2: the meta key ``tie_tol`` became ``tie_tolerance``).
NPZ_FORMAT = "clip_cycles.experiment_data/2"


def marker_caption(caption: str) -> str:
    """The Shortcut-OE negative caption: the true caption prefixed with the OE marker."""
    return f"{OE_MARKER}: {caption}"


@dataclass
class FamilyFeatures:
    """One family: feature tables and (N, 4) cycle arrays per seed and split.

    ``marker_rows[v]`` is the caption-table row of ``marker_caption(caption v)``, or -1
    where that caption has no marked twin (only needed by the OE experiment).
    ``dropped_cycles`` counts cycles the loader could not index (e.g. a skipped image).
    """

    name: str
    image_features: np.ndarray
    caption_features: np.ndarray
    cycles: dict[int, dict[str, np.ndarray]]
    marker_rows: np.ndarray | None = None
    dropped_cycles: int = 0

    @property
    def seeds(self) -> list[int]:
        return sorted(self.cycles)

    @property
    def image_dim(self) -> int:
        return int(self.image_features.shape[1])

    @property
    def caption_dim(self) -> int:
        return int(self.caption_features.shape[1])

    def split(self, seed: int, split: str) -> np.ndarray:
        """The (N, 4) cycles of ``seed`` and ``split``; ValueError naming the family when absent."""
        if seed not in self.cycles:
            raise ValueError(f"family {self.name!r} has no seed {seed} (seeds: {self.seeds})")
        if split not in self.cycles[seed]:
            raise ValueError(f"family {self.name!r} seed {seed} has no {split!r} split (has {sorted(self.cycles[seed])})")
        return self.cycles[seed][split]

    def counts(self) -> dict[str, dict[str, int]]:
        """Cycles per seed and split, JSON-ready (string seed keys)."""
        return {str(s): {k: int(v.shape[0]) for k, v in sorted(by.items())} for s, by in sorted(self.cycles.items())}

    def validate(self) -> None:
        """Check tables and indices; errors name the family, seed and split."""
        for what, table in (("image_features", self.image_features), ("caption_features", self.caption_features)):
            if table.ndim != 2 or table.shape[0] == 0:
                raise ValueError(f"family {self.name!r}: {what} must be a non-empty 2-D table, got shape {table.shape}")
            if not np.isfinite(table).all():
                raise ValueError(f"family {self.name!r}: {what} has a non-finite value")
        for seed, by_split in self.cycles.items():
            for split, index in by_split.items():
                try:
                    by_split[split] = validate_cycles(index, self.image_features.shape[0], self.caption_features.shape[0])
                except ValueError as error:
                    raise ValueError(f"family {self.name!r} seed {seed} split {split!r}: {error}") from None
        if self.marker_rows is not None:
            rows = np.asarray(self.marker_rows)
            if rows.shape != (self.caption_features.shape[0],):
                raise ValueError(
                    f"family {self.name!r}: marker_rows must have one entry per caption row "
                    f"({self.caption_features.shape[0]}), got shape {rows.shape}"
                )
            if ((rows < -1) | (rows >= self.caption_features.shape[0])).any():
                raise ValueError(f"family {self.name!r}: marker_rows holds an index outside the caption table")


@dataclass
class ExperimentData:
    """Families for the experiments plus the identity every result JSON records."""

    model: str
    pretrained: str
    families: dict[str, FamilyFeatures]
    tie_tolerance: float = DEFAULT_TIE_TOLERANCE
    unavailable: dict[str, str] = field(default_factory=dict)
    source: str = ""
    #: The minimum-cycle rule the dataset folders were built with (``build_info.json``; the
    #: strictest of several); None when unknown (planted data, older npz files).
    built_min_cycles: int | None = None
    #: Family -> the item set its test split holds (:func:`clip_cycles.experiments.item_sets.item_identity`:
    #: ``split``, ``items_sha256``, ``source``, ``source_line``); empty for planted data.
    item_sets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """``model``, ``pretrained``, ``tie_tolerance``, ``source`` and each family's ``item_sets`` for result JSONs."""
        return {
            "model": self.model,
            "pretrained": self.pretrained,
            "tie_tolerance": self.tie_tolerance,
            "source": self.source,
            "item_sets": {name: dict(item) for name, item in sorted(self.item_sets.items())},
        }

    def family_names(self) -> list[str]:
        """Every family, available or not, in a stable order (loaded ones first, as given)."""
        return list(self.families) + [n for n in self.unavailable if n not in self.families]


def resolve_min_cycles(explicit: int | None, data: ExperimentData) -> int:
    """The minimum-cycle rule of an experiment: ``explicit`` (a flag or ``experiment_kwargs``), else
    ``$CLIP_CYCLES_MIN_CYCLES``, else the minimum the folders were built with, else the default (20)."""
    for value in (explicit, min_cycles_override(), data.built_min_cycles):
        if value is not None:
            return int(value)
    return DEFAULT_MIN_CYCLES


def screen_families(
    data: ExperimentData, seeds: Sequence[int], min_cycles: int = DEFAULT_MIN_CYCLES, splits: Sequence[str] = SPLITS
) -> tuple[dict[str, FamilyFeatures], dict[str, str]]:
    """Split families into usable ones and unavailable ones (with the reason).

    A family is unavailable when the loader declared it so, or when any requested seed
    lacks a split or has fewer than ``min_cycles`` cycles in it (the minimum-cycle rule).
    Nothing is dropped silently: every unavailable family comes back with its reason.
    """
    BuildConfig.make(min_cycles=min_cycles)  # the builders' minimum-cycle rule: its range is declared there, once
    usable: dict[str, FamilyFeatures] = {}
    unavailable = dict(data.unavailable)
    for name, family in data.families.items():
        reason = None
        for seed in seeds:
            if seed not in family.cycles:
                reason = f"no cycles for seed {seed}"
                break
            for split in splits:
                n = int(family.cycles[seed][split].shape[0]) if split in family.cycles[seed] else 0
                if n < min_cycles:
                    reason = f"seed {seed} split {split!r} has {n} cycles (minimum {min_cycles})"
                    break
            if reason:
                break
        if reason:
            unavailable[name] = reason
        else:
            usable[name] = family
    return usable, unavailable


def usable_families(
    data: ExperimentData, seeds: Sequence[int], min_cycles: int
) -> tuple[dict[str, FamilyFeatures], dict[str, str]]:
    """``screen_families`` for an experiment: warns about each unavailable family and checks widths agree."""
    usable, unavailable = screen_families(data, seeds, min_cycles)
    for name, reason in unavailable.items():
        logger.warning("family %r is unavailable: %s", name, reason)
    check_dimensions(usable)
    return usable, unavailable


def check_dimensions(families: dict[str, FamilyFeatures]) -> tuple[int, int]:
    """The common (image_dim, caption_dim); ValueError naming two families whose widths differ."""
    if not families:
        raise ValueError("no usable family: nothing to run (see the unavailable reasons)")
    names = list(families)
    first = families[names[0]]
    for name in names[1:]:
        other = families[name]
        if (other.image_dim, other.caption_dim) != (first.image_dim, first.caption_dim):
            raise ValueError(
                f"feature dimensions differ between families {names[0]!r} (image {first.image_dim}, caption "
                f"{first.caption_dim}) and {name!r} (image {other.image_dim}, caption {other.caption_dim}); "
                "all families of one experiment must come from the same model"
            )
    return first.image_dim, first.caption_dim


# --------------------------------------------------------------------------- npz round trip


def save_experiment_data(data: ExperimentData, path: str | Path) -> Path:
    """Write ``data`` to an ``.npz`` (no pickle); tables shared by families are stored once."""
    path = Path(path)
    arrays: dict[str, np.ndarray] = {}
    table_ids: dict[int, int] = {}

    def table_key(table: np.ndarray) -> int:
        if id(table) not in table_ids:
            table_ids[id(table)] = len(table_ids)
            arrays[f"table_{table_ids[id(table)]}"] = np.asarray(table)
        return table_ids[id(table)]

    families = []
    for i, (name, family) in enumerate(data.families.items()):
        entry: dict[str, Any] = {
            "name": name,
            "image_table": table_key(family.image_features),
            "caption_table": table_key(family.caption_features),
            "dropped_cycles": int(family.dropped_cycles),
            "cycles": {},
        }
        for seed, by_split in sorted(family.cycles.items()):
            for split, index in sorted(by_split.items()):
                key = f"cycles_{i}_{seed}_{split}"
                arrays[key] = np.asarray(index, dtype=np.int64)
                entry["cycles"].setdefault(str(seed), {})[split] = key
        if family.marker_rows is not None:
            arrays[f"marker_rows_{i}"] = np.asarray(family.marker_rows, dtype=np.int64)
            entry["marker_rows"] = f"marker_rows_{i}"
        families.append(entry)
    meta = {"format": NPZ_FORMAT, **data.identity(), "families": families, "unavailable": data.unavailable}
    if data.built_min_cycles is not None:
        meta["built_min_cycles"] = int(data.built_min_cycles)
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return write_output(path, buffer.getvalue(), what="experiment data")  # whole or not at all


def load_experiment_data(path: str | Path) -> ExperimentData:
    """Read an ``.npz`` written by :func:`save_experiment_data`; errors name the file and field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"experiment features file {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError) as error:
        raise ValueError(f"{path} is not a readable npz file: {error}") from error
    if "meta" not in arrays:
        raise ValueError(f"{path}: array 'meta' is missing (write the file with save_experiment_data)")
    meta = json.loads(str(arrays["meta"]))
    if meta.get("format") != NPZ_FORMAT:
        raise ValueError(
            f"{path}: field 'format' is {meta.get('format')!r}, expected {NPZ_FORMAT!r}; "
            "write the file again with save_experiment_data"
        )

    def get(key: str) -> np.ndarray:
        if key not in arrays:
            raise ValueError(f"{path}: array {key!r} named in 'meta' is missing")
        return arrays[key]

    families: dict[str, FamilyFeatures] = {}
    for entry in meta["families"]:
        cycles = {int(s): {split: get(k) for split, k in by.items()} for s, by in entry["cycles"].items()}
        family = FamilyFeatures(
            name=entry["name"],
            image_features=get(f"table_{entry['image_table']}"),
            caption_features=get(f"table_{entry['caption_table']}"),
            cycles=cycles,
            marker_rows=get(entry["marker_rows"]) if "marker_rows" in entry else None,
            dropped_cycles=int(entry.get("dropped_cycles", 0)),
        )
        family.validate()
        families[family.name] = family
    return ExperimentData(
        model=meta["model"],
        pretrained=meta["pretrained"],
        families=families,
        tie_tolerance=float(meta["tie_tolerance"]),
        unavailable=dict(meta.get("unavailable", {})),
        source=meta.get("source", ""),
        built_min_cycles=meta.get("built_min_cycles"),
        item_sets=dict(meta.get("item_sets") or {}),
    )


# --------------------------------------------------------------------------- from tasks and a model


def family_name(task_name: str) -> str:
    """Family key of a task in results: the task name without its ``cycles/`` prefix."""
    return task_name.split("/", 1)[1] if task_name.startswith("cycles/") else task_name


def load_from_tasks(
    task_names: Sequence[str],
    spec: ModelSpec,
    dataset_root: str | Path | None = None,
    cache_dir: str | Path | None = None,
    data_cache_dir: str | Path | None = None,
    seeds: Sequence[int] | None = None,
    with_markers: bool = False,
    batch_size: int = 64,
    num_workers: int | None = None,
    skip_bad_images: bool = False,
) -> ExperimentData:
    """Cycles of every task (train, validation and test of each seed) and their features from one encoder pass.

    Tasks are resolved and their folders found exactly as ``clip-cycles eval`` does
    (:mod:`clip_cycles.evaluation.zero_shot`); all unique images and captions, plus the OE-marked
    captions when ``with_markers``, go through :func:`clip_cycles.encoding.encoder.encode` once,
    so marked captions use the same backend and feature cache as the rest. Families the
    folder declares unavailable are recorded in ``unavailable`` with the reason.
    """
    tasks = expand_tasks(task_names)
    if not tasks:
        raise ValueError(f"tasks {list(task_names)} expand to no task")
    tolerances = {t.tie_tolerance for t in tasks}
    if len(tolerances) != 1:
        raise ValueError(
            "tasks disagree on tie_tolerance ("
            + ", ".join(f"{t.name}: {t.tie_tolerance}" for t in tasks)
            + "); one experiment uses one fixed tolerance"
        )
    data_cache = resolve_data_cache_dir(data_cache_dir, cache_dir)
    folders = resolve_dataset_roots(tasks, dataset_root, data_cache)
    keep_row_decodes(folders, cache_dir)
    built = [int(f.info["min_cycles"]) for f in folders.values() if isinstance(f.info.get("min_cycles"), int)]
    loaded = []
    unavailable: dict[str, str] = {}
    for task in tasks:
        task_data = load_task_data(task, folders[task.name], seeds, with_audit=True)
        if task_data.unavailable is not None:
            unavailable[family_name(task.name)] = task_data.unavailable
        elif task_data.audit_unavailable is not None:  # probe experiments need train and validation too
            unavailable[family_name(task.name)] = task_data.audit_unavailable
        else:
            loaded.append(task_data)
    images, unique_captions = unique_items(loaded)
    extra = [marker_caption(c) for c in unique_captions] if with_markers else []
    encoded = encode(
        images,
        unique_captions + extra,
        spec,
        cache_dir,
        batch_size=batch_size,
        num_workers=num_workers,
        skip_bad_images=skip_bad_images,
    )
    marker_rows = None
    if with_markers:
        marker_rows = np.full(encoded.caption_features.shape[0], -1, dtype=np.int64)
        for caption in unique_captions:
            marker_rows[encoded.caption_rows[caption]] = encoded.caption_rows[marker_caption(caption)]
    families: dict[str, FamilyFeatures] = {}
    item_sets: dict[str, dict[str, Any]] = {}
    for task_data in loaded:
        cycles: dict[int, dict[str, np.ndarray]] = {}
        dropped = 0
        for seed, by_split in sorted(task_data.splits.items()):
            cycles[seed] = {}
            for split, rows in by_split.items():
                index, n_dropped = cycle_index(rows, encoded)
                dropped += n_dropped
                cycles[seed][split] = index
        name = family_name(task_data.task.name)
        item_sets[name] = item_identity(task_data, encoded)
        families[name] = FamilyFeatures(name, encoded.image_features, encoded.caption_features, cycles, marker_rows, dropped)
    return ExperimentData(
        model=spec.model,
        pretrained=spec.pretrained or "",
        families=families,
        tie_tolerance=tasks[0].tie_tolerance,
        unavailable=unavailable,
        source=f"tasks {', '.join(t.name for t in tasks)} via backend {spec.backend}",
        built_min_cycles=max(built, default=None),
        item_sets=item_sets,
    )


# --------------------------------------------------------------------------- planted synthetic features


def _unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def planted_experiment_data(
    family_groups: Sequence[int] | dict[str, int],
    dim: int = 64,
    n_train: int = 200,
    n_validation: int = 60,
    n_test: int = 120,
    seeds: Sequence[int] = (0, 1, 2),
    pool_size: int = 1200,
    signal: float = 0.35,
    marker_strength: float = 0.0,
    cycle_counts: dict[str, tuple[int, int, int]] | None = None,
    seed: int = 0,
    model: str = "planted",
    pretrained: str = "synthetic",
) -> ExperimentData:
    """Synthetic features where each family's cycles are solved by one planted interaction direction.

    Every image i carries a sign x[i, g] = +-1 per direction group g and its feature is
    noise + signal * sum_g x[i, g] a_g (unit directions a_g); captions likewise with
    b_g. In a family of group g a pair (u, v) is valid iff x[u, g] == y[v, g]; a cycle
    takes u1, v1 with sign s and u2, v2 with sign -s, so the swaps are invalid and the
    score a_g^T phi . b_g^T psi gives Delta > 0 on average. Families of the same group
    share their direction (transfer and alignment high); different groups do not.
    Seeds split the pool image- and caption-disjointly into train / validation / test.
    With ``marker_strength`` > 0, caption rows ``n .. 2n-1`` are OE-marked twins
    (caption + marker_strength * a fixed marker direction) and ``marker_rows`` points at them.

    Parameters
    ----------
    family_groups:
        Direction group of each family (a list gives names ``family_00``, ...).
    cycle_counts:
        Per-family override of (n_train, n_validation, n_test), e.g. to make one too small.
    """
    rng = np.random.default_rng(seed)
    groups = (
        dict(family_groups)
        if isinstance(family_groups, dict)
        else {f"family_{i:02d}": int(g) for i, g in enumerate(family_groups)}
    )
    n_groups = max(groups.values()) + 1
    image_dirs = _unit_rows(rng, n_groups, dim)
    caption_dirs = _unit_rows(rng, n_groups, dim)
    x = rng.choice(np.array([-1.0, 1.0]), size=(pool_size, n_groups))
    y = rng.choice(np.array([-1.0, 1.0]), size=(pool_size, n_groups))
    noise = 1.0 / np.sqrt(dim)
    phi = rng.standard_normal((pool_size, dim)) * noise + signal * x @ image_dirs
    psi = rng.standard_normal((pool_size, dim)) * noise + signal * y @ caption_dirs
    marker_rows = None
    if marker_strength > 0:
        marker = _unit_rows(rng, 1, dim)[0]
        psi = np.vstack([psi, psi + marker_strength * marker])
        marker_rows = np.concatenate([np.arange(pool_size, 2 * pool_size), np.full(pool_size, -1)]).astype(np.int64)
    phi = (phi / np.linalg.norm(phi, axis=1, keepdims=True)).astype(np.float32)
    psi = (psi / np.linalg.norm(psi, axis=1, keepdims=True)).astype(np.float32)
    fractions = np.array([0.5, 0.2, 0.3])
    families: dict[str, FamilyFeatures] = {}
    for position, (name, g) in enumerate(groups.items()):
        counts = (cycle_counts or {}).get(name, (n_train, n_validation, n_test))
        cycles: dict[int, dict[str, np.ndarray]] = {}
        for s in seeds:
            split_rng = np.random.default_rng([seed, int(s), position, 7])
            bounds = np.concatenate([[0], np.cumsum((fractions * pool_size).astype(int))])
            image_perm, caption_perm = split_rng.permutation(pool_size), split_rng.permutation(pool_size)
            cycles[int(s)] = {}
            for k, split in enumerate(SPLITS):
                imgs = image_perm[bounds[k] : bounds[k + 1]]
                caps = caption_perm[bounds[k] : bounds[k + 1]]
                cycles[int(s)][split] = _planted_cycles(split_rng, imgs, caps, x[:, g], y[:, g], counts[k])
        families[name] = FamilyFeatures(name, phi, psi, cycles, marker_rows)
    return ExperimentData(
        model=model, pretrained=pretrained, families=families, source=f"planted synthetic features (dim {dim}, seed {seed})"
    )


def _planted_cycles(
    rng: np.random.Generator, images: np.ndarray, captions: np.ndarray, x: np.ndarray, y: np.ndarray, n: int
) -> np.ndarray:
    if n == 0:
        return np.zeros((0, 4), dtype=np.int64)
    by_sign_image = {s: images[x[images] == s] for s in (-1.0, 1.0)}
    by_sign_caption = {s: captions[y[captions] == s] for s in (-1.0, 1.0)}
    for kind, groups in (("image", by_sign_image), ("caption", by_sign_caption)):
        if any(len(members) == 0 for members in groups.values()):
            raise ValueError(f"planted split of {len(images)} items has no {kind} of one sign; use a larger pool_size")
    signs = rng.choice(np.array([-1.0, 1.0]), size=n)
    out = np.empty((n, 4), dtype=np.int64)
    for sign in (-1.0, 1.0):
        rows = np.flatnonzero(signs == sign)
        out[rows, 0] = rng.choice(by_sign_image[sign], size=rows.size)
        out[rows, 1] = rng.choice(by_sign_image[-sign], size=rows.size)
        out[rows, 2] = rng.choice(by_sign_caption[sign], size=rows.size)
        out[rows, 3] = rng.choice(by_sign_caption[-sign], size=rows.size)
    return out
