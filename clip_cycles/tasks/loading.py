"""A task's data: its built folder (given, or built once from a raw root into the cache) and its cycle rows."""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from clip_cycles.data.families.registry import DEFAULT_MIN_CYCLES, family_builder_source
from clip_cycles.data.folder.reader import (
    BuiltFolder,
    CycleRows,
    UnavailableFamily,
    _family_entry,
    open_built_folder,
    read_cycle_rows,
)
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.data.sources.registry import (
    build_from_raw,
    detect_source,
    fingerprint_changes,
    get_builder,
    get_source,
    provenance_label,
    raw_root_fingerprint,
    resolve_hook,
    source_names,
)
from clip_cycles.fingerprints import canonical_json, digest
from clip_cycles.outputs import atomic_write_bytes, remove_stale_staging, replace_folder, staging_folder
from clip_cycles.regular_files import load_json_text
from clip_cycles.settings import MIN_CYCLES_ENV, min_cycles_override
from clip_cycles.tasks.registry import TaskSpec, source_twins

logger = logging.getLogger(__name__)


def _expected_roots_message(task: TaskSpec, root: Path | None) -> str:
    builder = get_builder(get_source(task.source).builders[0])
    roots = "; ".join(f"{source.title}: {source.layout}" for source in map(get_source, source_names()))
    built = (
        f"a built dataset folder (a folder with build_info.json and data/<family>/seed<k>/<split>.parquet, made by "
        f"`clip-cycles build {builder.name} {builder.root_flag} <raw root> --out <folder>`)"
    )
    if root is None:  # say what to pass, with an example, rather than what the missing value is not
        return (
            f"task {task.name} needs its data and no --dataset-root was given (--dataset_root under clip_benchmark): "
            f"pass {built} or a raw source root ({roots}), e.g. --dataset-root {task.source}_cycles for a built "
            f"folder or --dataset-root /data/{task.source} for the raw root"
        )
    return f"task {task.name}: --dataset_root {root} is neither {built} nor a raw source root ({roots})"


def _accepting(task: TaskSpec, raw_source: str) -> str:
    """The clause naming the task that reads ``task``'s family from ``raw_source`` (or that none does)."""
    twin = source_twins(task.name).get(raw_source)
    title = get_source(raw_source).title if raw_source in source_names() else raw_source
    if twin is None or twin == task.name:
        return f"no task reads this family from {title}"
    return f"the task that reads this family from {title} is {twin}"


def _check_source(task: TaskSpec, folder: BuiltFolder) -> None:
    # A task's prefix names the raw source of its cycles (README "Task names"): a folder the COCO builder made
    # from the shapes world serves cycles/shapes_<family>, not cycles/coco_<family>.
    if folder.raw_source != task.source:
        raise ValueError(
            f"task {task.name} reads cycles from {_title(task.source)} (a task's prefix names its raw source), but "
            f"{folder.root / 'build_info.json'} holds {provenance_label(folder.builder, folder.raw_source)} cycles "
            f"(built from {folder.source_root}); {_accepting(task, folder.raw_source)}"
        )


def _title(source: str) -> str:
    return get_source(source).title if source in source_names() else source


def _raw_root(task: TaskSpec, root: Path | None, data_cache_dir: Path) -> tuple[str, Path]:
    if root is None:
        source = get_source(task.source)
        if source.default_root is None:
            raise ValueError(_expected_roots_message(task, None))
        return source.name, Path(resolve_hook(source.default_root, f"source {source.name!r} default_root")(data_cache_dir))
    kind = detect_source(root)
    if kind is None:
        raise ValueError(_expected_roots_message(task, root))
    # A task's prefix names its raw source: a shapes world serves cycles/shapes_*, never cycles/coco_*.
    if kind != task.source:
        raise ValueError(
            f"task {task.name} reads cycles from {_title(task.source)} (a task's prefix names its raw source), but "
            f"{root} is a raw {_title(kind)} root; {_accepting(task, kind)}"
        )
    return kind, root


#: What a cached build of a raw root (``<data cache>/<kind>-<builder>-<root digest>``) is keyed by: the raw
#: source kind, the family builder and the root's path (the folder name), the root's content fingerprint
#: (the ``.source.json`` stamp beside it) and the families it holds. A task needing fewer families than the
#: cached build holds is served by it.
BUILT_FOLDER_KEY_FIELDS: tuple[str, ...] = ("kind", "builder", "raw_root", "fingerprint", "families")


def keep_row_decodes(folders: Mapping[str, BuiltFolder], cache_dir: str | Path | None) -> None:
    """Keep the row files' decodes under ``<cache_dir>/rows``, beside the features and audits (None: keep none).

    A warm run then reads no Parquet (:func:`clip_cycles.data.folder.reader.read_cycle_rows`).
    """
    if cache_dir is not None:
        for folder in folders.values():
            folder.rows_cache = Path(cache_dir) / "rows"


def resolve_dataset_roots(
    tasks: Sequence[TaskSpec],
    dataset_root: str | Path | None,
    data_cache_dir: Path,
    build: Callable[..., Path] = build_from_raw,
) -> dict[str, BuiltFolder]:
    """The built folder of each task: the given one, or one built from a raw root into ``data_cache_dir``.

    Families needed from the same raw root and builder are built together, once; the
    folder is reused by later runs and rebuilt (with the union of families) only when a
    task needs a family it lacks, the raw root changed, or the minimum-cycle rule differs.
    ``$CLIP_CYCLES_MIN_CYCLES`` (clip_benchmark has no ``--min-cycles``) sets that rule for
    raw-root builds; a built folder keeps the rule it was built with (asking for another is refused).
    """
    root = Path(dataset_root).expanduser() if dataset_root else None
    if root is not None and not root.exists():
        raise FileNotFoundError(f"--dataset_root {root} does not exist")
    out: dict[str, BuiltFolder] = {}
    asked = min_cycles_override()
    if root is not None and (root / "build_info.json").is_file():
        folder = open_built_folder(
            root, families=sorted({t.config for t in tasks if t.config}), hash_cache=data_cache_dir / "fingerprints"
        )
        built_with = folder.info.get("min_cycles")
        if asked is not None and built_with != asked:
            # A built folder's minimum-cycle rule was applied when it was built; it cannot be changed here.
            raise ValueError(
                f"{MIN_CYCLES_ENV}={asked} asks for a minimum of {asked} cycles, but {root / 'build_info.json'} was "
                f"built with --min-cycles {built_with}; rebuild it with `clip-cycles build ... --min-cycles {asked}`, "
                f"pass its raw root as --dataset_root instead, or unset {MIN_CYCLES_ENV}"
            )
        logger.debug("reading the built folder %s (families %s)", root, sorted(folder.info.get("families", {})))
        for task in tasks:
            _check_source(task, folder)
            out[task.name] = folder
        return out

    groups: dict[tuple[str, Path, str], list[TaskSpec]] = {}
    for task in tasks:
        kind, raw = _raw_root(task, root, data_cache_dir)
        groups.setdefault((kind, raw, family_builder_source(task.config)), []).append(task)
    for (kind, raw, builder), members in groups.items():
        target = data_cache_dir / f"{kind}-{builder}-{digest(str(raw.resolve()), 16)}"
        # The fingerprint of the raw root the cached build was made from sits beside it.
        stamp = target.with_name(target.name + ".source.json")
        fingerprint = raw_root_fingerprint(kind, raw, data_cache_dir / "fingerprints")
        needed = sorted({t.config for t in members})
        have: list[str] = []
        why = ""
        minimum = DEFAULT_MIN_CYCLES if asked is None else asked
        if (target / "build_info.json").is_file():
            try:
                stored = load_json_text(stamp.read_text(encoding="utf-8"), str(stamp))
            except (OSError, ValueError):
                stored = None
            if stored != fingerprint:
                why = f"the raw root changed since the cached build ({fingerprint_changes(stored, fingerprint)})"
            else:
                try:
                    cached = open_built_folder(target, source_fingerprint=fingerprint).info
                    have = sorted(cached.get("families", {}))
                    if cached.get("min_cycles") != minimum:
                        why = f"the cached build used --min-cycles {cached.get('min_cycles')}, this run asks for {minimum}"
                except (ValueError, FileNotFoundError) as error:
                    why = f"the cached build does not verify ({error})"
        if why or not set(needed) <= set(have):
            families = sorted(set(needed) | set(have))
            reason = why or f"families {sorted(set(needed) - set(have))} are not in the cached build"
            logger.info("building %s families %s from %s into %s: %s", builder, families, raw, target, reason)
            # Staging folders of killed builds of this target are removed (a live process's never), also those
            # an earlier version named without the leading dot.
            remove_stale_staging(target.parent, (target.name + ".building-",))
            staging = staging_folder(target)
            try:
                # The default builder gets the rule only when asked, so a stand-in `build` keeps its 4-argument form.
                build(builder, raw, families, staging, **({} if asked is None else {"min_cycles": asked}))
                # Fingerprint again: a raw root edited during the build must not be stamped as its source.
                if raw_root_fingerprint(kind, raw, data_cache_dir / "fingerprints") != fingerprint:
                    raise ValueError(f"{raw} changed while the families were being built from it; run again")
                # Built beside the cached folder, then swapped in: a reader never finds the target missing.
                replace_folder(staging, target)
            finally:
                if staging.exists():
                    shutil.rmtree(staging, ignore_errors=True)
            atomic_write_bytes(stamp, (canonical_json(fingerprint) + "\n").encode("utf-8"))
        else:
            logger.debug("%s families %s from the cache: %s (built from %s, unchanged)", builder, needed, target, raw)
        folder = open_built_folder(target, families=needed, source_fingerprint=fingerprint)
        for task in members:
            out[task.name] = folder
    return out


@dataclass
class TaskData:
    """Everything one task needs from its folder: test cycles per seed (and train/validation for the audit).

    ``unavailable`` holds the reason when the folder declares the family unavailable.
    """

    task: TaskSpec
    folder: BuiltFolder
    splits: dict[int, dict[str, CycleRows]] = field(default_factory=dict)
    unavailable: str | None = None
    #: Why the additive audit's train/validation splits could not be read (the scored split was).
    audit_unavailable: str | None = None

    def all_rows(self) -> list[CycleRows]:
        return [rows for by_split in self.splits.values() for rows in by_split.values()]


def load_task_data(task: TaskSpec, folder: BuiltFolder, seeds: Sequence[int] | None = None, with_audit: bool = False) -> TaskData:
    """Read the task's cycles for each seed: the test split, plus train/validation for the audit."""
    data = TaskData(task, folder)
    wanted = (task.split, task.train_split, "validation") if with_audit else (task.split,)
    try:
        _family_entry(folder, task, task.split)
    except UnavailableFamily as reason:
        logger.warning("%s", reason)
        data.unavailable = str(reason)
        return data
    for seed in seeds if seeds is not None else task.seeds:
        data.splits[seed] = {}
        for split in dict.fromkeys(wanted):
            try:
                data.splits[seed][split] = read_cycle_rows(folder, task, seed, split)
            except UnavailableFamily as reason:  # an audit split short of the minimum: score without the audit
                data.audit_unavailable = str(reason)
    if data.audit_unavailable is not None:  # nothing but the scored split is needed (or encoded) then
        data.splits = {seed: {task.split: rows[task.split]} for seed, rows in data.splits.items()}
    return data


def unique_items(loaded: Sequence[TaskData]) -> tuple[list[ImageItem], list[str]]:
    """The unique image items (by key) and captions of every split of ``loaded``, in order of first appearance."""
    images: dict[str, ImageItem] = {}
    captions: dict[str, None] = {}
    for data in loaded:
        for rows in data.all_rows():
            for item in rows.image_items:
                images.setdefault(item.key, item)
            captions.update(dict.fromkeys(rows.captions))
    return list(images.values()), list(captions)
