"""The clip_benchmark plugin's command-line part: it patches clip_benchmark's own parser and CLI.

:func:`patch_cli` (called by the start-up hook :mod:`clip_cycles.commands._activation`, installed
by ``setup.py`` as ``_clip_cycles_hook``) teaches an imported ``clip_benchmark.cli`` the cycles
datasets, collections and backends; :func:`given_flags` reads clip_benchmark's parser to tell a
given flag from a default; ``python -m clip_cycles.commands.clip_benchmark eval ...`` runs
clip_benchmark's CLI with the patch applied (:func:`main`), without the start-up hook. The runs
themselves are the library's (:mod:`clip_cycles.integrations.clip_benchmark`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from contextlib import AbstractContextManager
from copy import copy
from types import ModuleType
from typing import Any, Callable

from clip_cycles.encoding.backends import available_backends, get_backend, no_prompts
from clip_cycles.encoding.tiny_model import register_tiny_model
from clip_cycles.integrations.clip_benchmark import (
    build_families_once,
    check_flags,
    check_weights,
    cycle_blocks_dataset,
    expand_datasets,
    run_cycles,
    tag_for_backend,
)
from clip_cycles.processes import WorkerDiedError
from clip_cycles.tasks.registry import TaskRegistry, expand_tasks, get_task, is_task_name
from clip_cycles.verbosity import command_level, configured_logging


def given_flags(parser: Any, argv: list[str]) -> set[str] | None:
    """Destinations of the ``eval`` flags given on ``argv`` (abbreviations resolved as argparse does).

    None when the parser's ``eval`` subcommand cannot be found (then defaults are told apart by value).
    """
    subparsers = [a for a in getattr(parser, "_actions", ()) if isinstance(a, argparse._SubParsersAction)]
    eval_parser = subparsers[0].choices.get("eval") if subparsers else None
    if eval_parser is None:
        return None
    options = eval_parser._option_string_actions
    given: set[str] = set()
    for token in argv:
        if token == "--":
            break
        if not token.startswith("--"):
            continue
        name = token.split("=", 1)[0]
        action = options.get(name)
        if action is None:  # an abbreviation argparse accepted: the one long option it starts
            candidates = [o for o in options if o.startswith(name)]
            action = options[candidates[0]] if len(candidates) == 1 else None
        if action is not None:
            given.add(action.dest)
    return given


def plugin_logging(args: Any) -> AbstractContextManager[logging.Logger]:
    """Notes of a plugin run on stderr: clip_benchmark configures no logging, so its entry points do it here.

    clip_benchmark's ``--quiet`` (``verbose`` False) keeps warnings only and turns the progress
    bars off, as ``clip-cycles -q`` does; otherwise ``$CLIP_CYCLES_LOG_LEVEL``, else INFO.
    """
    return configured_logging(command_level(quiet=not getattr(args, "verbose", True)))


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

    # clip_benchmark's own open_clip loader then resolves `--model cycles-tiny --pretrained shapes`. Its models
    # module imports OpenCLIP; one that does not is left so (the cycles runs' loader registers the tiny model).
    if "open_clip" in sys.modules:
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
        # One bad task file disables that task only; say which and why, then carry on. A warning, not a
        # log record: this runs as clip_benchmark.cli is imported, before anything configures logging.
        warnings.warn(f"clip_cycles: task {name} is unavailable: {reason}", stacklevel=2)
    for group in registry.group_names():
        cli.dataset_collection[group] = [task.name for task in registry.expand([group])]

    original_run = cli.run
    original_build = cli.build_dataset
    original_collate = cli.get_dataset_collate_fn
    # Older or stand-in clip_benchmark CLIs may lack these two: then patterns are not expanded up front
    # and a default --pretrained or --split is told apart by its value (run() still checks each dataset).
    original_parse = getattr(cli, "get_parser_args", None)
    original_main_eval = getattr(cli, "main_eval", None)

    def get_parser_args() -> Any:
        parser, args = original_parse()  # type: ignore[misc]
        # Which flags were given, not defaulted: a default --pretrained or --split must not count as asked for.
        args._clip_cycles_given = given_flags(parser, sys.argv[1:])
        return parser, args

    def main_eval(base: Any) -> Any:
        try:
            with plugin_logging(base):
                names = base.dataset if isinstance(base.dataset, list) else [base.dataset]
                # Read the task folders now, not at patch time: CLIP_CYCLES_TASKS_PATH may have changed since.
                base.dataset = expand_datasets(list(names), TaskRegistry.default(), getattr(base, "dataset_root", None))
                ours = [n for n in base.dataset if is_task_name(n) and not os.path.isfile(n)]
                if ours:  # every cycles dataset checked before the first run: flags, split, model and backend
                    tasks = expand_tasks(ours)
                    check_flags(base, tasks)
                    check_weights(base)  # a model that cannot be had stops the run before any data is built
                    build_families_once(base, tasks)
        except (ValueError, FileNotFoundError, WorkerDiedError) as error:
            print(f"clip_benchmark: error: {error}", file=sys.stderr)
            raise SystemExit(2) from None
        with plugin_logging(base):  # the runs of cycles datasets (and the families built for them) say so
            return original_main_eval(base)  # type: ignore[misc]

    def run(args: Any) -> Any:
        if not is_task_name(args.dataset):
            return original_run(args)
        try:
            if args.task == "auto":
                with plugin_logging(args):
                    return run_cycles(args)

            output_type = getattr(get_task(args.dataset), "output_type", None)
            if args.task == "image_caption_selection" and output_type == "cycle_selection":
                args = copy(args)
                args.pretrained = tag_for_backend(args) or ""  # clip_benchmark's run needs a string
                with plugin_logging(args):
                    return original_run(args)
            if output_type != "cycle_selection":
                raise ValueError(f"{args.dataset}: {output_type} tasks support --task auto only, not {args.task!r}")
            raise ValueError(
                f"{args.dataset}: cycles datasets support --task auto (cycle metrics) or "
                f"image_caption_selection, not {args.task!r}"
            )
        except (ValueError, FileNotFoundError, WorkerDiedError) as error:
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
    if original_parse is not None:
        cli.get_parser_args = get_parser_args
    if original_main_eval is not None:
        cli.main_eval = main_eval
    cli.build_dataset = build_dataset
    cli.get_dataset_collate_fn = get_dataset_collate_fn
    cli._clip_cycles_patched = True


def main(argv: list[str] | None = None) -> int:
    """``python -m clip_cycles.commands.clip_benchmark ...``: clip_benchmark's CLI with the plugin applied."""
    import clip_benchmark.cli as cli

    patch_cli(cli)
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    return int(cli.main() or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
