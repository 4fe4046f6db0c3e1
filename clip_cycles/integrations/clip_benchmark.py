"""The clip_benchmark plugin: ``clip_benchmark eval --dataset cycles/<task> ...``.

:func:`clip_cycles.commands.clip_benchmark.patch_cli` is applied to ``clip_benchmark.cli`` right after it is imported (by
the start-up hook in :mod:`clip_cycles.commands._activation`, or explicitly by
``python -m clip_cycles.commands.clip_benchmark eval ...``). It

- adds every clip_cycles backend (``hf``, ``features``, entry points) to clip_benchmark's
  model table, so they are valid ``--model_type`` choices and ``load_clip`` finds them;
- adds the task collections (``cycles/coco_all``, ...) to clip_benchmark's dataset
  collections, so ``--dataset cycles/coco_all`` expands to its tasks;
- routes the datasets of the task registry with ``--task auto`` to the runner of their
  ``output_type`` (:mod:`clip_cycles.evaluation.runners`): ``cycles/<task>`` (zero-shot scores),
  ``cycles_probe/<task>``, ``cycles_transfer/<collection>``, ``cycles_oe/<task>`` (paper-1
  experiments) and ``attributes/things_<strategy>`` (paper-2 splits on the THINGS root
  given as ``--dataset_root``; one split embedding for all models: the task's
  ``dataset_kwargs.split_embeddings`` or ``$CLIP_CYCLES_SPLIT_EMBEDDINGS``), loading the
  model through clip_benchmark's ``load_clip``
  and filling its ``--output`` template; the JSON is clip_benchmark's ``{dataset, model,
  pretrained, task, metrics, language}`` with flat metrics (``acc`` is CycleAcc) and the
  nested record beside it (:func:`clip_cycles.results.write_result`), and
  ``$CLIP_CYCLES_SAMPLES`` (a template with ``--output``'s fields) adds one JSON line per cycle;
- makes ``cycles/<task>`` a regular clip_benchmark dataset for ``--task
  image_caption_selection`` (two images and two captions per block, as Winoground), so
  clip_benchmark's own metric can be run on exactly the same blocks.

Every other dataset goes through clip_benchmark unchanged.

clip_benchmark's flags, for a cycles dataset (:data:`REFUSED_FLAGS` is the table):

- ``--dataset`` takes task names, collections and ``fnmatch`` patterns (``'cycles/coco_*'``,
  expanded to their single tasks before any run); an unknown name or a bare ``cycles`` stops
  with the nearest names (:mod:`clip_cycles.tasks.names`);
- ``--split`` (``--test_split``) is the split a zero-shot task scores, under ``--task auto``
  and ``image_caption_selection`` alike; the experiments and attribute tasks read the splits
  their design fixes and refuse another one;
- ``--model_type``, ``--model``, ``--pretrained``: clip_benchmark's *default* tag
  (``laion400m_e32``) and model reach only clip_benchmark's own model types (open_clip, ...);
  a backend of clip_cycles (``hf``, ``timm``, ``features``, entry points) gets no tag unless
  ``--pretrained`` is given (so it is never taken as a revision nor recorded) and needs ``--model``;
- the minimum-cycle rule has no clip_benchmark flag: ``CLIP_CYCLES_MIN_CYCLES``
  (:func:`clip_cycles.settings.min_cycles_override`) sets it for families built from a raw root
  and for the experiments;
- the backend is checked against every task before any data is read (an image-only model
  on a cycle task stops with a sentence);
- flags of clip_benchmark's other tasks (linear probe, retrieval, classification) are refused
  with a sentence when given, never silently ignored.

Launched under ``torchrun`` (without clip_benchmark's own ``--distributed``, which
splits whole runs across ranks instead), each ``cycles/`` run is sharded across the
ranks and rank 0 writes the result (:mod:`clip_cycles.encoding.distributed`).
"""

from __future__ import annotations

import logging
import os
import sys
from copy import copy
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from clip_cycles.data.folder.reader import CycleRows
from clip_cycles.data.sources.images import open_rgb
from clip_cycles.encoding.backends import (
    check_open_clip_request,
    clip_benchmark_model_types,
)
from clip_cycles.encoding.distributed import device_for_rank, process_group, world_from_env
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.encoding.run_context import ModelOptions, RunContext
from clip_cycles.encoding.tiny_model import register_tiny_model
from clip_cycles.evaluation.capabilities import check_backend_for_tasks
from clip_cycles.evaluation.runners import run_tasks, runner_for
from clip_cycles.outputs import is_stream, plan_outputs
from clip_cycles.results import detail_path, output_path, write_result
from clip_cycles.settings import SAMPLES_ENV, resolve_cache_dir, resolve_data_cache_dir, samples_template, skip_bad_images
from clip_cycles.tasks.loading import load_task_data, resolve_dataset_roots
from clip_cycles.tasks.names import folder_scope, is_pattern, match, resolve_task_names, unknown_name_message
from clip_cycles.tasks.registry import (
    NAMESPACES,
    SPLITS,
    AnyTask,
    GroupSpec,
    TaskRegistry,
    TaskSpec,
    expand_tasks,
    get_task,
    is_task_name,
)

logger = logging.getLogger(__name__)

#: clip_benchmark ``eval`` flags (by destination) that no cycles dataset can honour: what they are for.
REFUSED_FLAGS: dict[str, str] = {
    **dict.fromkeys(
        (
            "train_split",
            "val_split",
            "val_proportion",
            "fewshot_k",
            "fewshot_epochs",
            "fewshot_lr",
            "skip_load",
            "feature_root",
            "save_clf",
            "load_clfs",
        ),
        "linear probes",
    ),
    **dict.fromkeys(("recall_k", "annotation_file"), "retrieval"),
    **dict.fromkeys(
        ("custom_classname_file", "custom_template_file", "dump_classnames", "dump_templates"), "zero-shot classification"
    ),
    "normalize": "feature normalization (cycle scores always use L2-normalized features)",
    "wds_cache_dir": "webdataset datasets",
}
#: clip_benchmark's ``--split`` default: a split other than it counts as given even when the flags are unknown.
DEFAULT_SPLIT = "test"
#: clip_benchmark's ``--model`` and ``--pretrained`` defaults: an OpenCLIP model and its tag.
DEFAULT_MODEL = "ViT-B-32-quickgelu"
DEFAULT_PRETRAINED = "laion400m_e32"


class CycleBlocksDataset:
    """A map-style dataset of cycle blocks: item i is (two transformed images, two captions)."""

    def __init__(self, rows: Any, transform: Callable[[Any], Any] | None) -> None:
        self.rows = rows
        self.transform = transform

    def __len__(self) -> int:
        return len(self.rows)

    def _image(self, item: Any) -> Any:
        from PIL import Image

        where = f" ({item.path})" if item.path is not None else ""
        try:
            image = open_rgb(item.read_bytes(), f"image {item.key!r}{where}")
        except FileNotFoundError:
            raise
        except Image.DecompressionBombError as error:
            raise ValueError(f"image {item.key!r} ({item.path}) is refused as a possible decompression bomb: {error}") from None
        except (OSError, Image.UnidentifiedImageError) as error:
            raise ValueError(f"image {item.key!r}{where} cannot be decoded: {error}") from None
        return self.transform(image) if self.transform is not None else image

    def __getitem__(self, index: int) -> tuple[Any, list[str]]:
        import torch

        first, second = self.rows.image_pair(index)
        images = [self._image(first), self._image(second)]
        if self.transform is not None:
            images = torch.stack(images)
        return images, list(self.rows.caption_pair(index))


def _was_given(args: Any, dest: str, default: str) -> bool:
    """Whether flag ``dest`` was given; ``--pretrained_model`` gives ``--model`` and ``--pretrained`` too."""
    if getattr(args, "pretrained_model", "") and dest in ("model", "pretrained"):
        return True
    given = getattr(args, "_clip_cycles_given", None)
    if given is not None:
        return dest in given
    value = getattr(args, dest)
    return value != default and value != [default]  # eval's base holds lists, each run one value


def _is_ours(name: str, registry: TaskRegistry) -> bool:
    return is_task_name(name) or name.strip("/") in NAMESPACES or (is_pattern(name) and bool(match(name, registry)))


def expand_datasets(names: list[str], registry: TaskRegistry, dataset_root: str | None = None) -> list[str]:
    """clip_benchmark's ``--dataset`` list with the cycles patterns expanded to their tasks (order kept).

    Collections stay (clip_benchmark expands them); unknown cycles names, a bare namespace
    (``cycles``) and patterns of our namespaces that match nothing raise a ValueError naming
    the nearest names. Other datasets pass through untouched. With ``dataset_root`` a built
    folder (not a ``{dataset}`` template), a pattern keeps the matching tasks it holds
    (:func:`~clip_cycles.tasks.names.folder_scope`).
    """
    scope = None if dataset_root is None or "{" in dataset_root else folder_scope(_dataset_root(dataset_root, ""))
    out: list[str] = []
    for name in names:
        if os.path.isfile(name) or not _is_ours(name, registry):
            out.append(name)
        elif is_pattern(name) or name not in registry.names():
            if not is_pattern(name) and name in registry.unavailable:
                registry.get(name)  # the file's own error (file, line, field)
            if not is_pattern(name):
                raise ValueError(unknown_name_message(name, registry))
            out.extend(resolve_task_names([name], registry, scope))
        else:
            out.append(name)
    return list(dict.fromkeys(out))


def check_flags(args: Any, tasks: list[AnyTask]) -> None:
    """Refuse, with a sentence, the clip_benchmark flags the cycles datasets ``tasks`` cannot honour."""
    given = getattr(args, "_clip_cycles_given", None)
    if given is not None:
        refused = sorted(dest for dest in given if dest in REFUSED_FLAGS)
        if refused:
            what = "; ".join(f"--{dest} ({REFUSED_FLAGS[dest]})" for dest in refused)
            raise ValueError(
                f"clip_benchmark flags for other kinds of datasets cannot apply to the cycles datasets "
                f"{', '.join(t.name for t in tasks)}: {what}; drop them, or run those datasets in a separate command"
            )
    if _was_given(args, "split", DEFAULT_SPLIT):
        if args.split not in SPLITS:
            raise ValueError(f"--split {args.split!r}: cycles datasets have the splits {', '.join(SPLITS)}")
        fixed = [t.name for t in tasks if t.output_type != "cycle_selection" and args.split != getattr(t, "split", None)]
        if fixed:
            raise ValueError(
                f"--split {args.split}: {', '.join(fixed)} read the splits their design fixes (experiments: train, "
                "validation and test; attribute splits: their folds); only zero-shot cycles/ tasks score another "
                "split: drop --split for these"
            )
    native = args.model_type in clip_benchmark_model_types()
    if not native and not _was_given(args, "model", DEFAULT_MODEL):
        raise ValueError(
            f"--model_type {args.model_type} needs --model (clip_benchmark's default model is an OpenCLIP name; "
            f"e.g. a Hugging Face id for hf, a file for features)"
        )
    model = args.model if isinstance(args.model, str) else ", ".join(args.model or ())
    check_backend_for_tasks(tasks, args.model_type, model)


def check_weights(args: Any) -> None:
    """Before any data is read or built: the weights of each model this invocation is sure to load.

    A model whose features the feature cache (``$CLIP_CYCLES_CACHE``) holds none of is loaded by its
    first run: its weights must be here, or the hub reachable, else a
    :class:`~clip_cycles.encoding.hub_access.WeightsUnavailableError` (one sentence with the offline
    choices) stops the invocation now instead of a download's retries later. A model the cache knows
    is asked at its first cache miss (``ModelSpec.load``), so a warm run asks nothing. Models named
    through ``--pretrained_model`` are left to each run's own check.
    """
    if getattr(args, "pretrained_model", None):
        return

    def as_list(value: Any) -> list[Any]:
        return list(value) if isinstance(value, (list, tuple)) else [value]

    device = run_device(args)
    cache = resolve_cache_dir(None)  # the plugin's feature cache (clip_benchmark has no flag for it)
    for model in as_list(args.model):
        for pretrained in as_list(args.pretrained):
            one = copy(args)
            one.model, one.pretrained = model, pretrained
            # The spec each run of this model builds (options_from_clip_benchmark): the same cache identity.
            spec = ModelSpec(
                backend=one.model_type,
                model=model,
                pretrained=tag_for_backend(one),
                device=device,
                seed=one.seed,
                amp=one.amp,
                model_cache_dir=getattr(args, "model_cache_dir", None),
            )
            spec.require_weights_if_cold(cache)


def run_device(args: Any) -> str:
    """The device a run of the plugin encodes on: CUDA when available; under ``--distributed``, this rank's GPU."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    # clip_benchmark's --distributed hands each rank whole runs: encode this one alone, on this rank's GPU.
    if getattr(args, "distributed", False):
        device = device_for_rank(device, (world_from_env() or (0, 1, 0))[2])
    return device


def build_families_once(args: Any, tasks: list[AnyTask]) -> None:
    """Build, from their raw roots and in one pass per root and builder, the families of every cycles dataset
    of this clip_benchmark invocation (clip_benchmark runs one dataset at a time: each would rebuild the
    cached folder with one family more). Built folders given as ``--dataset_root`` are left to each run."""
    by_root: dict[str | None, list[TaskSpec]] = {}
    for task in tasks:
        members = expand_tasks(task.members) if isinstance(task, TaskSpec) and task.members else [task]
        for member in members:
            # Only cycle families built from a raw source; benchmark formats (cycles/winoground) read their own files.
            if not (isinstance(member, TaskSpec) and member.config and member.output_type == "cycle_selection"):
                continue
            root = _dataset_root(args.dataset_root, task.name)
            if root is not None and (Path(root) / "build_info.json").is_file():
                continue
            by_root.setdefault(root, []).append(member)
    for root, members in by_root.items():
        resolve_dataset_roots(members, root, resolve_data_cache_dir())


def tag_for_backend(args: Any) -> str | None:
    """``--pretrained`` for the backend: clip_benchmark's default tag only reaches its own model types.

    A clip_cycles backend (hf, timm, features, entry points) given no ``--pretrained`` gets None:
    the default revision or weights of that backend, as with ``clip-cycles eval``; nothing is recorded.
    """
    if args.model_type in clip_benchmark_model_types() or _was_given(args, "pretrained", DEFAULT_PRETRAINED):
        return args.pretrained
    return None


def cycle_blocks_dataset(
    task_name: str, dataset_root: str | None, transform: Any, split: str = "test", seeds: Any = None
) -> CycleBlocksDataset:
    """The blocks of a task's split, seeds concatenated in order (for clip_benchmark's own metrics)."""
    task = get_task(task_name)
    if not isinstance(task, TaskSpec):
        raise ValueError(f"{task_name} is a collection; pass one of its tasks: {', '.join(task.tasks)}")
    if split != task.split:
        task = replace(task, split=split)
    folder = resolve_dataset_roots([task], dataset_root, resolve_data_cache_dir())[task.name]
    data = load_task_data(task, folder, seeds)
    if data.unavailable is not None:
        raise ValueError(data.unavailable)
    merged = CycleRows.concat([data.splits[seed][task.split] for seed in sorted(data.splits)])
    return CycleBlocksDataset(merged, transform)


def _dataset_root(template: str, dataset_name: str) -> str | None:
    """clip_benchmark's ``--dataset_root`` template filled for one dataset (None: not given)."""
    root = template.format(dataset=dataset_name, dataset_cleaned=dataset_name.replace("/", "-"))
    # clip_benchmark's default "root" names no folder: treat it as "not given" (shapes tasks then
    # build their own world; other tasks get the error that says what is expected).
    return None if root == "root" and not os.path.exists(root) else root


def options_from_clip_benchmark(args: Any, device: str) -> ModelOptions:
    """The :class:`ModelOptions` of clip_benchmark's parsed ``eval`` flags (its ``--model_type``, ``--seed``, ...).

    The feature cache is ``$CLIP_CYCLES_CACHE`` (clip_benchmark has no such flag) and
    ``$CLIP_CYCLES_SKIP_BAD_IMAGES`` stands in for ``--skip-bad-images``.
    """
    return ModelOptions(
        model_type=args.model_type,
        model=args.model,
        pretrained=args.pretrained,
        model_cache_dir=args.model_cache_dir,
        device=device,
        amp=args.amp,
        model_seed=args.seed,
        encode_batch_size=args.batch_size,
        num_workers=args.num_workers,
        skip_bad_images=skip_bad_images(),
        dataset_root=_dataset_root(args.dataset_root, args.dataset),
    )


def clip_benchmark_loader(options: ModelOptions) -> Callable[[], Any]:
    """A ModelSpec loader through clip_benchmark's own ``load_clip``, with errors that name the model."""

    def loader() -> Any:
        from clip_benchmark.models import load_clip

        if options.model_type == "open_clip":  # clip_benchmark's own loader: check the names first
            register_tiny_model()  # `--model cycles-tiny --pretrained shapes`, whatever imported OpenCLIP
            check_open_clip_request(options.model, options.pretrained)  # type: ignore[arg-type]
        try:
            return load_clip(
                model_type=options.model_type,
                model_name=options.model,
                pretrained=options.pretrained,
                cache_dir=options.model_cache_dir,
                device=options.device,
            )
        except (RuntimeError, KeyError, OSError) as error:
            # Loaders fail deep inside their library: say which model could not be loaded.
            raise ValueError(
                f"model {options.model!r} (--model_type {options.model_type}, --pretrained "
                f"{options.pretrained!r}) could not be loaded: {type(error).__name__}: {error}"
            ) from error

    return loader


#: Samples files written by this process, with the dataset each holds: a template without
#: ``{dataset}`` must not let the next dataset of one clip_benchmark call replace the last one's lines.
_SAMPLES_WRITTEN: dict[str, str] = {}


def samples_path_for(args: Any, result_task: str, split: str | None = None) -> Path | None:
    """``$CLIP_CYCLES_SAMPLES`` filled for this dataset like ``--output`` (the split included); None when unset.

    ValueError when two datasets of one process would share the file.
    """
    template = samples_template()
    if template is None:
        return None
    path = output_path(template, args.dataset, args.model, args.pretrained, args.language, result_task, split=split)
    earlier = _SAMPLES_WRITTEN.get(path)
    if earlier is not None and earlier != args.dataset:
        raise ValueError(
            f"{SAMPLES_ENV}={template!r} names the same file {path} for {earlier} and {args.dataset}; "
            "put {dataset} in it so each dataset gets its own samples file"
        )
    _SAMPLES_WRITTEN[path] = args.dataset
    return Path(path)


def run_cycles(args: Any) -> int:
    """clip_benchmark's ``run`` for one dataset of this plugin with ``--task auto``.

    The task's ``output_type`` picks the runner (:mod:`clip_cycles.evaluation.runners`): zero-shot
    cycle scores, a paper-1 experiment or attribute splits; the JSON is clip_benchmark's.
    """
    task = get_task(args.dataset)
    if isinstance(task, GroupSpec):
        raise ValueError(f"{args.dataset} is a collection; pass one of its tasks: {', '.join(task.tasks)}")
    check_flags(args, [task])  # before any data is read or a model loaded
    if isinstance(task, TaskSpec) and task.output_type == "cycle_selection" and _was_given(args, "split", DEFAULT_SPLIT):
        task = replace(task, split=args.split)
    args = copy(args)
    args.pretrained = tag_for_backend(args)
    runner = runner_for(task.output_type)
    device = run_device(args)
    runs_split = bool(getattr(args, "distributed", False))  # whole runs per rank: no process group of ours
    # A split other than test is part of the file name (results.output_path): a validation run keeps the test run's file.
    split = getattr(task, "split", None)
    output = output_path(args.output, args.dataset, args.model, args.pretrained, args.language, runner.result_task, split=split)
    # The next lines are clip_benchmark's own (stdout, under its --verbose), printed for every dataset it
    # runs: the same here, so a run mixing its datasets and ours reads alike. Our notes go through logging.
    if os.path.exists(output) and args.skip_existing:
        if args.verbose:
            print(f"Skip {output}, exists already.")
        return 0
    if args.verbose:
        print(
            f"Running '{runner.result_task}' on '{args.dataset}' with the model '{args.pretrained}' on language '{args.language}'"
        )

    options = options_from_clip_benchmark(args, device)
    context = RunContext.from_options(options, language=args.language, loader=clip_benchmark_loader(options))
    context.samples_path = samples_path_for(args, runner.result_task, split)
    # The one output plan: the result, its detail file and the samples are three files, before any work.
    detail = None if is_stream(output) else detail_path(output)
    plan_outputs({"--output": output, "the detail file of --output": detail, SAMPLES_ENV: context.samples_path})
    # The group stays up for the next dataset of this clip_benchmark invocation (one init per process).
    with process_group(context.spec, keep=True, enabled=not runs_split):
        outcome = run_tasks([task], context)
    if not outcome.main:  # a rank other than 0: rank 0 writes the result
        return 0
    (record,) = outcome.records
    if args.verbose:
        if outcome.encoded is not None:
            stats = outcome.encoded.stats
            print(
                f"Encoded {stats.encoded_images} images, {stats.encoded_captions} captions "
                f"({stats.cached_images} + {stats.cached_captions} cached)"
            )
        print(f"Dump results to: {output}")
    write_result(record, output)
    return 0


if __name__ == "__main__":  # pragma: no cover
    # The explicit entry point is a command now (the commands layer, one above this one): say so rather
    # than run this library module as a script, do nothing and exit 0.
    sys.exit(f"{__name__} is a library module; run clip_benchmark with the plugin from the commands package (README.md)")
