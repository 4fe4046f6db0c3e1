"""``clip-cycles encode``: encode the unique images and captions of tasks into the feature cache."""

from __future__ import annotations

import argparse
import json

from clip_cycles.commands.derived import configure
from clip_cycles.commands.model_flags import model_field, task_field
from clip_cycles.encoding.distributed import process_group
from clip_cycles.encoding.run_context import ModelOptions, RunContext
from clip_cycles.encoding.task_encoding import encode_tasks
from clip_cycles.evaluation.capabilities import check_backend_for_tasks
from clip_cycles.schemas.options import Options
from clip_cycles.tasks.names import resolve_task_names
from clip_cycles.tasks.registry import expand_tasks


class EncodeCommandOptions(Options):
    """Options of ``clip-cycles encode``: the tasks and the model."""

    task: tuple[str, ...] = task_field()
    model: ModelOptions = model_field(model_required=True, aliases=True)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles encode``: fill the feature cache for tasks without scoring them."""
    configure(parser, EncodeCommandOptions, encode)


def encode(command: EncodeCommandOptions) -> int:
    """Encode the unique items of the tasks into the cache and print the counts as JSON (rank 0 under torchrun)."""
    tasks = expand_tasks(resolve_task_names(list(command.task)))  # names, collections and fnmatch patterns
    options = command.model
    check_backend_for_tasks(tasks, options.model_type, options.model)
    context = RunContext.from_options(options)
    with process_group(context.spec):
        _, encoded = encode_tasks(
            tasks,
            context.spec,
            context.dataset_root,
            context.cache_dir,
            data_cache_dir=context.data_cache_dir,
            batch_size=context.batch_size,
            num_workers=context.num_workers,
            skip_bad_images=context.skip_bad_images,
        )
    if encoded is not None:  # None on the ranks other than 0
        print(json.dumps(encoded.stats.to_dict(), indent=2, sort_keys=True))
    return 0
