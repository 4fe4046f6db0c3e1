"""The clip_benchmark plugin: ``clip_benchmark eval --dataset cycles/<task> ...``.

:func:`patch_cli` is applied to ``clip_benchmark.cli`` right after it is imported (by
the start-up hook in :mod:`clip_cycles.integrations._activation`, or explicitly by
``python -m clip_cycles.integrations.clip_benchmark eval ...``). It

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
  pretrained, task, metrics, language}``;
- makes ``cycles/<task>`` a regular clip_benchmark dataset for ``--task
  image_caption_selection`` (two images and two captions per block, as Winoground), so
  clip_benchmark's own metric can be run on exactly the same blocks.

Every other dataset goes through clip_benchmark unchanged.

Launched under ``torchrun`` (without clip_benchmark's own ``--distributed``, which
splits whole runs across ranks instead), each ``cycles/`` run is sharded across the
ranks and rank 0 writes the result (:mod:`clip_cycles.encoding.distributed`).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Any, Callable

from clip_cycles.data.folder_reader import CycleRows
from clip_cycles.data.images import open_rgb
from clip_cycles.encoding.backends import available_backends, check_open_clip_request, get_backend, no_prompts
from clip_cycles.encoding.distributed import device_for_rank, process_group, world_from_env
from clip_cycles.encoding.run_context import ModelOptions, RunContext
from clip_cycles.encoding.tiny_model import register_tiny_model
from clip_cycles.evaluation.runners import run_tasks, runner_for
from clip_cycles.results import output_path, write_json
from clip_cycles.settings import resolve_data_cache_dir, skip_bad_images
from clip_cycles.tasks.loading import load_task_data, resolve_dataset_roots
from clip_cycles.tasks.registry import GroupSpec, TaskRegistry, TaskSpec, get_task, is_task_name


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


def cycle_blocks_dataset(
    task_name: str, dataset_root: str | None, transform: Any, split: str = "test", seeds: Any = None
) -> CycleBlocksDataset:
    """The blocks of a task's split, seeds concatenated in order (for clip_benchmark's own metrics)."""
    task = get_task(task_name)
    if not isinstance(task, TaskSpec):
        raise ValueError(f"{task_name} is a collection; pass one of its tasks: {', '.join(task.tasks)}")
    if split != task.split:
        from dataclasses import replace

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


def run_cycles(args: Any) -> int:
    """clip_benchmark's ``run`` for one dataset of this plugin with ``--task auto``.

    The task's ``output_type`` picks the runner (:mod:`clip_cycles.evaluation.runners`): zero-shot
    cycle scores, a paper-1 experiment or attribute splits; the JSON is clip_benchmark's.
    """
    import torch

    task = get_task(args.dataset)
    if isinstance(task, GroupSpec):
        raise ValueError(f"{args.dataset} is a collection; pass one of its tasks: {', '.join(task.tasks)}")
    runner = runner_for(task.output_type)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    # clip_benchmark's --distributed hands each rank whole runs: encode this one alone, on this rank's GPU.
    runs_split = bool(getattr(args, "distributed", False))
    if runs_split:
        device = device_for_rank(device, (world_from_env() or (0, 1, 0))[2])
    output = output_path(args.output, args.dataset, args.model, args.pretrained, args.language, runner.result_task)
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
    # The group stays up for the next dataset of this clip_benchmark invocation (one init per process).
    with process_group(context.spec, keep=True, enabled=not runs_split):
        outcome = run_tasks([args.dataset], context)
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
    write_json(record, output)
    return 0


def _lazy_loader(name: str) -> Callable[..., Any]:
    def load(model_name: str, pretrained: str, cache_dir: str | None = None, device: str = "cpu") -> Any:
        with no_prompts():  # clip_benchmark's own CLI calls this directly: no library may ask on stdin
            return get_backend(name)(model_name=model_name, pretrained=pretrained, cache_dir=cache_dir, device=device)

    load._clip_cycles_backend = True  # type: ignore[attr-defined]
    load.__name__ = f"load_{name}"
    return load


def patch_cli(cli: ModuleType) -> None:
    """Teach an imported ``clip_benchmark.cli`` the cycles datasets, collections and backends (idempotent)."""
    if getattr(cli, "_clip_cycles_patched", False):
        return
    from clip_benchmark import models

    # clip_benchmark's own open_clip loader then resolves `--model cycles-tiny --pretrained shapes`.
    register_tiny_model()
    for name in available_backends(include_clip_benchmark=False):
        if name not in models.TYPE2FUNC:
            models.TYPE2FUNC[name] = _lazy_loader(name)
        if name not in models.MODEL_TYPES:
            # The list object is argparse's `choices` for --model_type: extend it in place.
            models.MODEL_TYPES.append(name)

    registry = TaskRegistry.default()
    registry.names()  # reads every task file, filling registry.unavailable
    for name, reason in sorted(registry.unavailable.items()):
        # One bad task file disables that task only; say which and why, then carry on.
        print(f"clip_cycles: task {name} is unavailable: {reason}", file=sys.stderr)
    for group in registry.group_names():
        cli.dataset_collection[group] = [task.name for task in registry.expand([group])]

    original_run = cli.run
    original_build = cli.build_dataset
    original_collate = cli.get_dataset_collate_fn

    def run(args: Any) -> Any:
        if not is_task_name(args.dataset):
            return original_run(args)
        try:
            if args.task == "auto":
                return run_cycles(args)

            output_type = getattr(get_task(args.dataset), "output_type", None)
            if args.task == "image_caption_selection" and output_type == "cycle_selection":
                return original_run(args)
            if output_type != "cycle_selection":
                raise ValueError(f"{args.dataset}: {output_type} tasks support --task auto only, not {args.task!r}")
            raise ValueError(
                f"{args.dataset}: cycles datasets support --task auto (cycle metrics) or "
                f"image_caption_selection, not {args.task!r}"
            )
        except (ValueError, FileNotFoundError) as error:
            # User-facing errors already name the file, field or id: no traceback.
            print(f"clip_benchmark: error: {error}", file=sys.stderr)
            raise SystemExit(2) from None

    def build_dataset(dataset_name: str, root: str = "root", transform: Any = None, split: str = "test", **kwargs: Any) -> Any:
        if not is_task_name(dataset_name):
            return original_build(dataset_name, root=root, transform=transform, split=split, **kwargs)
        given = None if root == "root" and not os.path.exists(root) else root
        return cycle_blocks_dataset(dataset_name, given, transform, split)

    def get_dataset_collate_fn(dataset_name: str) -> Any:
        if is_task_name(dataset_name):
            from clip_benchmark.datasets.builder import image_captions_collate_fn

            return image_captions_collate_fn
        return original_collate(dataset_name)

    cli.run = run
    cli.build_dataset = build_dataset
    cli.get_dataset_collate_fn = get_dataset_collate_fn
    cli._clip_cycles_patched = True


def main(argv: list[str] | None = None) -> int:
    """``python -m clip_cycles.integrations.clip_benchmark ...``: clip_benchmark's CLI with the plugin applied."""
    import clip_benchmark.cli as cli

    patch_cli(cli)
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    return int(cli.main() or 0)


if __name__ == "__main__":
    sys.exit(main())
