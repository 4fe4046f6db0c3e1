"""Zero-shot evaluation of a model on cycle tasks: CycleAcc, Winoground scores, the additive audit.

``clip-cycles eval --task cycles/<name> --model-type open_clip --model ViT-B-32
--pretrained openai --dataset-root <built folder or raw root>`` and the clip_benchmark
plugin (:mod:`clip_cycles.clip_benchmark`) both end here:

1. tasks are resolved through the registry (:mod:`clip_cycles.tasks`), collections expanded;
2. each task's dataset root is resolved: a built folder is used as is, a raw COCO/GQA
   root (or the shapes world) has the needed families built into a cache directory
   first and reused afterwards;
3. the unique images and captions of every cycle of every task and seed are encoded
   once (:func:`clip_cycles.encoder.encode`, through the feature cache);
4. each seed's (N, 2, 2) cosine blocks give CycleAcc (float64, one fixed tie tolerance)
   and text/image/group accuracy with Winoground semantics; seeds are summarized by
   mean and sample sd.

Under ``torchrun`` the encoding is sharded across ranks and rank 0 scores
(:mod:`clip_cycles.distributed`); the other ranks write nothing.

Results use clip_benchmark's JSON format ``{dataset, model, pretrained, task, metrics,
language}`` so ``clip_benchmark build`` aggregates them to CSV.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from clip_cycles.contrast import block_scores_from_embeddings, cycle_acc, deltas_from_blocks, mean_and_sd
from clip_cycles.encoder import EncodedFeatures, ImageItem, ModelSpec, add_model_arguments
from clip_cycles.tasks import TaskSpec, expand_tasks
from clip_cycles.winoground import winoground_scores

#: clip_benchmark's task name for cycle results (the ``task`` field and ``{task}`` in --output).
RESULT_TASK = "cycles"
CACHE_ENV = "CLIP_CYCLES_CACHE"
DEFAULT_OUTPUT = "{dataset}_{pretrained}_{model}_{language}_{task}.json"
ROW_FIELDS = ("image_0", "image_1", "caption_0", "caption_1", "cycle_id")

#: Default size of the shapes world generated when a shapes task gets no --dataset-root.
DEFAULT_SHAPES_IMAGES = 400


def resolve_cache_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """Feature cache root: ``path``, else ``$CLIP_CYCLES_CACHE``, else ``~/.cache/clip_cycles``."""
    if path:
        return Path(path)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path.home() / ".cache" / "clip_cycles"


# --------------------------------------------------------------------------- dataset roots


@dataclass
class BuiltFolder:
    """A built dataset folder (DEVELOPING.md "Built dataset folders")."""

    root: Path
    info: dict[str, Any]

    @property
    def source(self) -> str:
        return str(self.info.get("source", ""))

    @property
    def source_root(self) -> Path:
        return Path(self.info.get("source_root", ""))

    def is_shapes_world(self) -> bool:
        return self.source == "shapes" or (self.source_root / "shapes_world.json").is_file()


def open_built_folder(root: str | Path) -> BuiltFolder:
    """Read ``build_info.json`` of a built folder; errors name the file and field."""
    root = Path(root)
    path = root / "build_info.json"
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error
    if not isinstance(info, dict):
        raise ValueError(f"{path}: expected a JSON object")
    for key in ("source", "families"):
        if key not in info:
            raise ValueError(f"{path}: field {key!r} is missing (rebuild the folder with `clip-cycles build`)")
    return BuiltFolder(root, info)


def raw_source_kind(root: Path) -> str | None:
    """``"shapes"``, ``"coco"``, ``"gqa"`` or None for a directory that holds no raw source."""
    if (root / "shapes_world.json").is_file():
        return "shapes"
    if (root / "annotations" / "instances_val2017.json").is_file():
        return "coco"
    if any((root / name).is_file() for name in ("val_sceneGraphs.json", "train_sceneGraphs.json")):
        return "gqa"
    return None


def family_builder_source(family: str) -> str:
    """Which builder (``coco`` or ``gqa``) registers ``family``."""
    from clip_cycles import families as registry

    for source in ("coco", "gqa"):
        try:
            if family in registry.list_families(source):
                return source
        except (ValueError, ImportError):
            continue
    raise ValueError(f"no COCO or GQA builder registers a family named {family!r}")


def build_from_raw(source: str, raw_root: Path, families: Sequence[str], out: Path) -> Path:
    """Build ``families`` with builder ``source`` (coco | gqa) from ``raw_root`` into ``out``.

    Calls the builder API of :mod:`clip_cycles.build` (``build_coco_folder`` /
    ``build_gqa_folder``), the code behind ``clip-cycles build coco|gqa``, with its defaults.
    """
    from clip_cycles import build

    builders = {"coco": build.build_coco_folder, "gqa": build.build_gqa_folder}
    folder, _ = builders[source](raw_root, out, families=list(families))
    return Path(folder)


def _expected_roots_message(task: TaskSpec, root: Path | None) -> str:
    where = f"--dataset_root {root}" if root is not None else "no --dataset_root"
    return (
        f"task {task.name}: {where} is neither a built dataset folder (a folder with build_info.json and "
        f"data/<family>/seed<k>/<split>.parquet, made by `clip-cycles build {task.source if task.source != 'shapes' else 'coco'} "
        f"--{task.source if task.source != 'shapes' else 'coco'}-root <raw root> --out <folder>`) nor a raw source root "
        f"(COCO: annotations/instances_val2017.json and val2017/; GQA: val_sceneGraphs.json; shapes world: "
        f"shapes_world.json, made by `clip-cycles build shapes --out <folder>`)"
    )


def _check_source(task: TaskSpec, folder: BuiltFolder) -> None:
    have = "shapes" if folder.is_shapes_world() else folder.source
    if have != task.source:
        raise ValueError(
            f"task {task.name} needs {task.source} cycles but {folder.root / 'build_info.json'} holds "
            f"{'shapes-world' if have == 'shapes' else have} cycles (source {folder.source!r}, source_root "
            f"{str(folder.source_root)!r}); pass a {task.source} folder or raw root"
        )


def _raw_root(task: TaskSpec, root: Path | None, data_cache_dir: Path) -> tuple[str, Path]:
    if root is None:
        if task.source != "shapes":
            raise ValueError(_expected_roots_message(task, None))
        raw = data_cache_dir / "shapes_world"
        if not (raw / "shapes_world.json").is_file():
            from clip_cycles.shapes_world import write_shapes_world

            print(f"generating the shapes world ({DEFAULT_SHAPES_IMAGES} images) in {raw}", file=sys.stderr)
            write_shapes_world(raw, n_images=DEFAULT_SHAPES_IMAGES)
        return "shapes", raw
    kind = raw_source_kind(root)
    if kind is None:
        raise ValueError(_expected_roots_message(task, root))
    if kind != task.source and not (kind == "shapes" and task.source in ("coco", "gqa")):
        raise ValueError(f"task {task.name} needs {task.source} data but {root} is a raw {kind} root")
    return kind, root


def resolve_dataset_roots(tasks: Sequence[TaskSpec], dataset_root: str | Path | None, data_cache_dir: Path,
                          build: Callable[[str, Path, Sequence[str], Path], Path] = build_from_raw
                          ) -> dict[str, BuiltFolder]:
    """The built folder of each task: the given one, or one built from a raw root into ``data_cache_dir``.

    Families needed from the same raw root and builder are built together, once; the
    folder is reused by later runs and rebuilt (with the union of families) only when a
    task needs a family it lacks.
    """
    root = Path(dataset_root).expanduser() if dataset_root else None
    if root is not None and not root.exists():
        raise FileNotFoundError(f"--dataset_root {root} does not exist")
    out: dict[str, BuiltFolder] = {}
    if root is not None and (root / "build_info.json").is_file():
        folder = open_built_folder(root)
        for task in tasks:
            _check_source(task, folder)
            out[task.name] = folder
        return out
    from clip_cycles.feature_cache import digest

    groups: dict[tuple[str, Path, str], list[TaskSpec]] = {}
    for task in tasks:
        kind, raw = _raw_root(task, root, data_cache_dir)
        groups.setdefault((kind, raw, family_builder_source(task.config)), []).append(task)
    for (kind, raw, builder), members in groups.items():
        target = data_cache_dir / f"{kind}-{builder}-{digest(str(raw.resolve()), 16)}"
        needed = sorted({t.config for t in members})
        have: list[str] = []
        if (target / "build_info.json").is_file():
            have = sorted(open_built_folder(target).info.get("families", {}))
        if not set(needed) <= set(have):
            families = sorted(set(needed) | set(have))
            print(f"building {builder} families {families} from {raw} into {target}", file=sys.stderr)
            staging = target.with_name(target.name + f".building-{os.getpid()}")
            if staging.exists():
                shutil.rmtree(staging)
            build(builder, raw, families, staging)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        folder = open_built_folder(target)
        for task in members:
            out[task.name] = folder
    return out


# --------------------------------------------------------------------------- cycle rows


class UnavailableFamily(ValueError):
    """The family was built but declared unavailable (minimum-cycle rule); reported, not scored."""


@dataclass
class CycleRows:
    """The cycles of one (task, seed, split): two image items and two captions per row."""

    cycle_ids: list[str]
    images: list[tuple[ImageItem, ImageItem]]
    captions: list[tuple[str, str]]


def _image_item(value: Any, folder: BuiltFolder, where: str) -> ImageItem:
    if isinstance(value, str):
        if not value or Path(value).is_absolute() or ".." in Path(value).parts:
            raise ValueError(f"{where}: image file name {value!r} must be relative to the source root")
        return ImageItem(key=value, path=folder.source_root / value)
    if isinstance(value, dict) and (value.get("bytes") or value.get("path")):
        data = value.get("bytes")
        name = value.get("path") or ""
        if data is None:
            return ImageItem(key=name, path=(folder.root / name))
        from clip_cycles.feature_cache import content_hash

        return ImageItem(key=name or f"sha256:{content_hash(data)}", data=bytes(data))
    raise ValueError(f"{where}: image value must be a file name or a datasets.Image struct, got {type(value).__name__}")


def read_cycle_rows(folder: BuiltFolder, task: TaskSpec, seed: int, split: str) -> CycleRows:
    """Read ``data/<family>/seed<k>/<split>.parquet`` of the task's family, validating each row."""
    import pyarrow.parquet as pq

    family = task.config
    entry = folder.info.get("families", {}).get(family)
    if not isinstance(entry, dict):
        available = sorted(folder.info.get("families", {}))
        raise ValueError(
            f"task {task.name}: family {family!r} is not in {folder.root / 'build_info.json'} "
            f"(families: {available}); rebuild with `clip-cycles build ... --families {family}`"
        )
    if entry.get("available") is False:
        reason = folder.info.get("unavailable", {}).get(family) or entry.get("reason") or "no reason recorded"
        raise UnavailableFamily(f"task {task.name}: family {family!r} is unavailable in {folder.root}: {reason}")
    path = folder.root / "data" / family / f"seed{seed}" / f"{split}.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"task {task.name}: {path} does not exist (seed {seed}, split {split})")
    table = pq.read_table(path)
    missing = [c for c in ROW_FIELDS if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: columns {missing} are missing (have {table.column_names})")
    columns = {c: table.column(c).to_pylist() for c in ROW_FIELDS}
    rows = CycleRows([], [], [])
    seen: set[str] = set()
    for i in range(table.num_rows):
        cid = columns["cycle_id"][i]
        where = f"{path} row {i} (cycle_id {cid!r})"
        if not isinstance(cid, str) or not cid or cid in seen:
            raise ValueError(f"{where}: cycle_id must be a unique non-empty string")
        seen.add(cid)
        caps = (columns["caption_0"][i], columns["caption_1"][i])
        for k, cap in enumerate(caps):
            if not isinstance(cap, str) or not cap.strip():
                raise ValueError(f"{where}: caption_{k} is empty or not a string")
        if caps[0] == caps[1]:
            raise ValueError(f"{where}: caption_0 equals caption_1; a cycle needs two distinct captions")
        pair = (_image_item(columns["image_0"][i], folder, where + " image_0"),
                _image_item(columns["image_1"][i], folder, where + " image_1"))
        if pair[0].key == pair[1].key:
            raise ValueError(f"{where}: image_0 equals image_1; a cycle needs two distinct images")
        rows.cycle_ids.append(cid)
        rows.images.append(pair)
        rows.captions.append((task.format_caption(caps[0]), task.format_caption(caps[1])))
    if not rows.cycle_ids:
        raise ValueError(f"{path} holds no cycles")
    return rows


@dataclass
class TaskData:
    """Everything one task needs from its folder: test cycles per seed (and train/validation for the audit).

    ``unavailable`` holds the reason when the folder declares the family unavailable.
    """

    task: TaskSpec
    folder: BuiltFolder
    splits: dict[int, dict[str, CycleRows]] = field(default_factory=dict)
    unavailable: str | None = None

    def all_rows(self) -> list[CycleRows]:
        return [rows for by_split in self.splits.values() for rows in by_split.values()]


def load_task_data(task: TaskSpec, folder: BuiltFolder, seeds: Sequence[int] | None = None,
                   with_audit: bool = False) -> TaskData:
    """Read the task's cycles for each seed: the test split, plus train/validation for the audit."""
    data = TaskData(task, folder)
    wanted = (task.split, task.train_split, "validation") if with_audit else (task.split,)
    try:
        read_cycle_rows(folder, task, (seeds or task.seeds)[0], task.split)
    except UnavailableFamily as reason:
        print(f"warning: {reason}", file=sys.stderr)
        data.unavailable = str(reason)
        return data
    for seed in seeds if seeds is not None else task.seeds:
        data.splits[seed] = {}
        for split in dict.fromkeys(wanted):
            data.splits[seed][split] = read_cycle_rows(folder, task, seed, split)
    return data


# --------------------------------------------------------------------------- encoding and scoring


def model_spec_from_args(args: argparse.Namespace, loader: Callable[[], Any] | None = None) -> ModelSpec:
    """A ModelSpec from the shared CLI arguments."""
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return ModelSpec(backend=args.model_type, model=args.model, pretrained=args.pretrained, device=device,
                     seed=args.seed, amp=args.amp, model_cache_dir=args.model_cache_dir, loader=loader)


def encode_tasks(tasks: Sequence[TaskSpec], spec: ModelSpec, dataset_root: str | Path | None,
                 cache_dir: Path | None, data_cache_dir: str | Path | None = None, batch_size: int = 64,
                 num_workers: int | None = None, skip_bad_images: bool = False, with_audit: bool | None = None,
                 seeds: Sequence[int] | None = None) -> tuple[list[TaskData], EncodedFeatures | None]:
    """Load every task's cycles and encode all their unique images and captions in one pass.

    Under a process group (:func:`clip_cycles.distributed.process_group`) the encoding is
    sharded across ranks and the features come back on rank 0 only (None elsewhere).
    """
    from clip_cycles.distributed import encode_sharded, main_process_first

    unsupported = [t.name for t in tasks if not isinstance(t, TaskSpec) or t.members]
    if unsupported:
        raise ValueError(f"tasks {unsupported} are not single-family cycle tasks; their runners "
                         "(clip_cycles.task_runners) encode what they need")
    data_cache = Path(data_cache_dir) if data_cache_dir else resolve_cache_dir(cache_dir) / "datasets"
    with main_process_first():  # rank 0 builds shared data folders once; the others reuse them
        folders = resolve_dataset_roots(tasks, dataset_root, data_cache)
    loaded = []
    for task in tasks:
        audit = ("additive_audit" in task.metric_names) if with_audit is None else with_audit
        loaded.append(load_task_data(task, folders[task.name], seeds, audit))
    from clip_cycles.vlm_scores import score_tasks, uses_pair_scores

    if uses_pair_scores(spec):  # issue 18: generative VLMs score each unique (image, caption) pair instead
        return loaded, score_tasks(loaded, spec, cache_dir, batch_size, skip_bad_images)  # type: ignore[return-value]
    images: list[ImageItem] = []
    captions: list[str] = []
    for data in loaded:
        for rows in data.all_rows():
            for pair in rows.images:
                images.extend(pair)
            for pair in rows.captions:
                captions.extend(pair)
    encoded = encode_sharded(images, captions, spec, cache_dir, batch_size=batch_size, num_workers=num_workers,
                             skip_bad_images=skip_bad_images)
    return loaded, encoded


def cycle_index(rows: CycleRows, encoded: EncodedFeatures) -> tuple[np.ndarray, int]:
    """(N, 4) indices into the encoded tables; cycles touching a skipped image are dropped and counted."""
    index = []
    dropped = 0
    for (a, b), (c0, c1) in zip(rows.images, rows.captions):
        if a.key not in encoded.image_rows or b.key not in encoded.image_rows:
            dropped += 1
            continue
        index.append((encoded.image_rows[a.key], encoded.image_rows[b.key], encoded.caption_rows[c0],
                      encoded.caption_rows[c1]))
    return np.asarray(index, dtype=np.int64).reshape(-1, 4), dropped


def score_blocks(blocks: np.ndarray, tol: float) -> dict[str, Any]:
    """CycleAcc (half ties), text/image/group accuracy and counts of one set of blocks."""
    deltas = deltas_from_blocks(blocks)
    wino = winoground_scores(blocks)
    return {
        "cycle_acc": cycle_acc(deltas, tol),
        "text_acc": wino.text_acc,
        "image_acc": wino.image_acc,
        "group_acc": wino.group_acc,
        "n_cycles": int(blocks.shape[0]),
        "n_ties": int((np.abs(deltas) <= tol).sum()),
    }


def _audit(task: TaskSpec, seed: int, data: TaskData, encoded: EncodedFeatures,
           phi: np.ndarray, psi: np.ndarray) -> dict[str, Any]:
    from clip_cycles.additive_audit import additive_audit

    splits = data.splits[seed]
    train, _ = cycle_index(splits[task.train_split], encoded)
    val, _ = cycle_index(splits["validation"], encoded) if "validation" in splits else (None, 0)
    test, _ = cycle_index(splits[task.split], encoded)
    report = additive_audit(phi, psi, train, test, val_cycles=val, seed=seed, tie_tol=task.tie_tolerance)
    return report.to_dict()


def score_task(data: TaskData, encoded: EncodedFeatures) -> dict[str, Any]:
    """clip_benchmark-style ``metrics`` of one task: per-seed values, their mean and sd."""
    task = data.task
    if data.unavailable is not None:
        return {"available": False, "unavailable_reason": data.unavailable, "n_cycles": 0,
                "tie_tolerance": task.tie_tolerance}
    pair_blocks = getattr(encoded, "block_scores", None)  # issue 18: pair scorers (clip_cycles.vlm_scores)
    if pair_blocks is None:
        phi = encoded.image_features.astype(np.float64)
        psi = encoded.caption_features.astype(np.float64)
    per_seed: dict[str, dict[str, Any]] = {}
    dropped_total = 0
    audits: dict[str, Any] = {}
    for seed in sorted(data.splits):
        index, dropped = cycle_index(data.splits[seed][task.split], encoded)
        dropped_total += dropped
        if index.shape[0] == 0:
            raise ValueError(f"task {task.name} seed {seed}: every cycle touches a skipped image; nothing to score")
        blocks = pair_blocks(task, index) if pair_blocks else block_scores_from_embeddings(phi, psi, index)
        per_seed[str(seed)] = score_blocks(blocks, task.tie_tolerance)
        per_seed[str(seed)]["dropped_cycles"] = dropped
        if "additive_audit" in task.metric_names and pair_blocks is None:
            audits[str(seed)] = _audit(task, seed, data, encoded, phi, psi)
    metrics: dict[str, Any] = {}
    for name in ("cycle_acc", "text_acc", "image_acc", "group_acc"):
        if name in task.metric_names:
            summary = mean_and_sd([per_seed[s][name] for s in per_seed])
            metrics[name] = summary["mean"]
            metrics[f"{name}_sd"] = summary["sd"]
    if "group_acc" in task.metric_names:
        metrics["acc"] = metrics["group_acc"]  # clip_benchmark's image_caption_selection name
    metrics["n_cycles"] = int(sum(v["n_cycles"] for v in per_seed.values()))
    metrics["tie_tolerance"] = task.tie_tolerance
    metrics["seeds"] = [int(s) for s in per_seed]
    metrics["per_seed"] = per_seed
    if audits:
        metrics["additive_audit"] = {"passed": all(a["passed"] for a in audits.values()), "per_seed": audits}
    elif pair_blocks and "additive_audit" in task.metric_names:
        metrics["additive_audit"] = encoded.audit_unavailable()  # type: ignore[attr-defined]
    metrics["dropped_cycles"] = dropped_total
    bad = encoded.stats.bad_images
    metrics["skipped_bad_images"] = len(bad)
    if bad:
        metrics["bad_images"] = dict(sorted(bad.items()))
    return metrics


def result_record(task: TaskSpec, model: str, pretrained: str | None, metrics: dict[str, Any],
                  language: str = "en") -> dict[str, Any]:
    """clip_benchmark's result JSON: ``{dataset, model, pretrained, task, metrics, language}``."""
    return {"dataset": task.name, "model": model, "pretrained": pretrained or "", "task": RESULT_TASK,
            "metrics": metrics, "language": language}


def output_path(template: str, dataset: str, model: str, pretrained: str | None, language: str = "en",
                task: str = RESULT_TASK) -> str:
    """Fill clip_benchmark's ``--output`` template fields the way its ``run`` does."""
    pretrained = pretrained or ""
    is_file = os.path.isfile(pretrained)
    return template.format(
        model=model,
        pretrained=os.path.basename(pretrained) if is_file else pretrained,
        pretrained_full_path=pretrained.replace("/", "_") if is_file else pretrained,
        task=task,
        dataset=dataset.replace("/", "_"),
        language=language,
    )


def evaluate(task_names: Sequence[str], spec: ModelSpec, dataset_root: str | Path | None = None,
             cache_dir: str | Path | None = None, use_cache: bool = True, data_cache_dir: str | Path | None = None,
             batch_size: int = 64, num_workers: int | None = None, skip_bad_images: bool = False,
             seeds: Sequence[int] | None = None) -> tuple[list[dict[str, Any]], EncodedFeatures | None]:
    """Evaluate ``spec`` on cycle_selection tasks (collections expanded); returns result records and the encoder output.

    Under torchrun only rank 0 scores: the other ranks get ``([], None)``. Tasks of
    other output types run through :func:`clip_cycles.task_runners.run_tasks`.
    """
    tasks = expand_tasks(task_names)
    cache = resolve_cache_dir(cache_dir) if use_cache else None
    return evaluate_tasks(tasks, spec, dataset_root, cache, data_cache_dir or resolve_cache_dir(cache_dir) / "datasets",
                          batch_size, num_workers, skip_bad_images, seeds)


def evaluate_tasks(tasks: Sequence[TaskSpec], spec: ModelSpec, dataset_root: str | Path | None,
                   cache: Path | None, data_cache_dir: str | Path, batch_size: int = 64, num_workers: int | None = None,
                   skip_bad_images: bool = False, seeds: Sequence[int] | None = None
                   ) -> tuple[list[dict[str, Any]], EncodedFeatures | None]:
    """:func:`evaluate` on resolved task specs, with the feature cache (None: none) and data cache already chosen."""
    other = [t.name for t in tasks if t.output_type != "cycle_selection"]
    if other:
        raise ValueError(f"tasks {other} are not cycle_selection tasks; run them with clip_cycles.task_runners.run_tasks "
                         "(`clip-cycles eval` and the clip_benchmark plugin do)")
    loaded, encoded = encode_tasks(tasks, spec, dataset_root, cache, data_cache_dir, batch_size,
                                   num_workers, skip_bad_images, seeds=seeds)
    if encoded is None:
        return [], None
    records = [result_record(data.task, spec.model, spec.pretrained, score_task(data, encoded)) for data in loaded]
    return records, encoded


def write_record(record: dict[str, Any], path: str | Path) -> Path:
    """Write one result JSON (sorted keys, so equal results give equal bytes)."""
    path = Path(path)
    if path.parent != Path("."):
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- CLI


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles eval``: the same results as the clip_benchmark plugin, without its CLI."""
    add_model_arguments(parser)
    parser.add_argument("--output", default=DEFAULT_OUTPUT,
                        help="result file template (clip_benchmark's fields: {dataset} {model} {pretrained} "
                             "{task} {language} {pretrained_full_path}); '-' prints to stdout")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="restrict to these seeds")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate and write one JSON per task (rank 0 under torchrun); each output type goes to its runner."""
    from clip_cycles.distributed import process_group
    from clip_cycles.task_runners import RunContext, run_tasks

    spec = model_spec_from_args(args)
    context = RunContext.create(spec, args.dataset_root, args.cache_dir, not args.no_cache, args.data_cache_dir,
                                batch_size=args.batch_size, num_workers=args.num_workers,
                                skip_bad_images=args.skip_bad_images, seeds=args.seeds)
    with process_group(spec):
        outcome = run_tasks(args.task, context)
    if not outcome.main:  # a rank other than 0: its shard is in the cache, rank 0 reports
        return 0
    if outcome.encoded is not None:
        stats = outcome.encoded.stats
        print(f"encoded {stats.encoded_images} images and {stats.encoded_captions} captions "
              f"({stats.cached_images} + {stats.cached_captions} from the cache; "
              f"{len(stats.bad_images)} bad images skipped)", file=sys.stderr)
    for record in outcome.records:
        if args.output == "-":
            print(json.dumps(record, sort_keys=True, indent=2))
        else:
            path = write_record(record, output_path(args.output, record["dataset"], spec.model, spec.pretrained,
                                                    task=record["task"]))
            print(f"{record['dataset']}: {_headline(record['metrics'])} -> {path}", file=sys.stderr)
    return 0


def _headline(metrics: dict[str, Any]) -> str:
    """The first headline number of a result, for the one-line summary."""
    for name in ("cycle_acc", "pearson", "f1_selectivity"):
        if name in metrics:
            return f"{name} {metrics[name]}"
    return f"available {metrics.get('available')}"
