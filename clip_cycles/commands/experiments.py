"""``clip-cycles probe | transfer | oe``: the paper-1 experiments as commands.

The experiments themselves (:mod:`probes`, :mod:`transfer`, :mod:`oe`) are library
functions on :class:`~clip_cycles.experiments.experiment_data.ExperimentData`; this module
adds their flags, loads the features and writes the JSON and the report.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import Field

from clip_cycles.commands.flags import finite_float
from clip_cycles.commands.model_flags import add_model_arguments, add_task_argument, model_options
from clip_cycles.encoding.backends_vision import require_embeddings
from clip_cycles.encoding.run_context import ModelOptions, RunContext
from clip_cycles.evaluation.result_cache import ResultCache
from clip_cycles.experiments import oe, probes, transfer
from clip_cycles.experiments.experiment_data import (
    DEFAULT_MIN_CYCLES,
    ExperimentData,
    load_experiment_data,
    load_from_tasks,
    resolve_min_cycles,
)
from clip_cycles.experiments.oe import OESettings
from clip_cycles.experiments.probes import DEFAULT_SEEDS, FULL_HEADS, PROBE_RANKS, REFERENCE_RANK, ProbeSettings, run_probes
from clip_cycles.experiments.report import build_report
from clip_cycles.experiments.transfer import TransferSettings
from clip_cycles.processes import check_num_proc
from clip_cycles.results import write_json
from clip_cycles.schemas.options import Options
from clip_cycles.settings import MIN_CYCLES_ENV, resolve_cache_dir
from clip_cycles.tasks.names import resolve_task_names


def add_input_arguments(parser: Any) -> None:
    """Where an experiment's features come from: ``--features FILE.npz`` or tasks + a model (as ``clip-cycles eval``)."""
    group = parser.add_argument_group("input (either --features, or --task with --model)")
    group.add_argument("--features", default=None, help="an .npz written by save_experiment_data (skips encoding)")
    add_task_argument(group, required=False)
    # No --seed/--batch-size model aliases: here --batch-size is --train-batch-size and --seed is refused as ambiguous.
    add_model_arguments(group)


def load_input(
    features: str | Path | None,
    tasks: Sequence[str] | None,
    options: ModelOptions,
    seeds: Sequence[int] | None = None,
    with_markers: bool = False,
) -> ExperimentData:
    """An experiment's ExperimentData: the ``features`` npz, or ``tasks`` encoded with the model of ``options``."""
    if features is not None:
        if tasks or options.model:
            raise ValueError("give either --features or --task/--model, not both")
        return load_experiment_data(features)
    if not tasks or not options.model:
        raise ValueError("no input: give --features FILE.npz, or --task TASK ... with --model MODEL")
    # Before any data is read: every experiment needs image and caption embeddings.
    require_embeddings(options.model_type, options.model, need_text=True)

    context = RunContext.from_options(options, seeds=seeds)
    return load_from_tasks(
        resolve_task_names(tasks),  # names, collections and fnmatch patterns (cycles/coco_*)
        context.spec,
        context.dataset_root,
        context.cache_dir,
        context.data_cache_dir,
        context.seeds,
        with_markers,
        context.batch_size,
        context.num_workers,
        context.skip_bad_images,
    )


class _AmbiguousSeed(argparse.Action):
    """``--seed`` in an experiment command: refused with a sentence (argparse would read it as ``--seeds``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: str | None = None) -> None:
        parser.error(
            "--seed is ambiguous here: give --seeds (the cycle-split seeds, each also seeding its head's training) "
            "or --model-seed (the torch seed before loading a random-init model; `clip-cycles eval --seed`)"
        )


def add_train_batch_size(parser: Any) -> None:
    """``--train-batch-size`` (alias ``--batch-size``, its spelling before): cycles per training step of the heads.

    Not the encoder's batch: that is ``--encode-batch-size`` (``clip-cycles eval --batch-size``).
    """
    parser.add_argument(
        "--train-batch-size",
        "--batch-size",
        dest="train_batch_size",
        type=int,
        default=512,
        help="cycles per training step of the heads (alias --batch-size); the encoder's batch is --encode-batch-size",
    )


def add_experiment_arguments(parser: argparse.ArgumentParser, epochs: int, seeds: Sequence[int] = DEFAULT_SEEDS) -> None:
    """Arguments shared by the experiment commands: input, output, seeds, epochs, minimum cycles."""
    add_input_arguments(parser)
    parser.add_argument("--out", required=True, help="results directory (JSON, report.md and figures go here)")
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=list(seeds),
        help="cycle-split seeds (each also seeds its head's training); the model's torch seed is --model-seed",
    )
    parser.add_argument("--seed", nargs="*", action=_AmbiguousSeed, help=argparse.SUPPRESS)
    parser.add_argument("--epochs", type=int, default=epochs, help=f"training epochs (default {epochs})")
    parser.add_argument(
        "--min-cycles",
        type=int,
        default=None,
        help="families with fewer cycles in any seed/split are reported unavailable (default: "
        f"${MIN_CYCLES_ENV}, else the minimum the dataset folders were built with, else {DEFAULT_MIN_CYCLES})",
    )
    parser.add_argument("--no-report", action="store_true", help="write the JSON only, not report.md and figures")


def finish(record: dict[str, Any], out: str | Path, file_name: str, report: bool = True) -> int:
    """Write the JSON into ``out`` and (``report``: unless ``--no-report``) rebuild report.md and the figures there."""
    out = Path(out)
    path = write_json(record, out / file_name)
    print(f"wrote {path}")
    if report:
        paths = build_report(out)
        print(f"wrote {paths.markdown} and {len(paths.figures)} figure files")
    return 0


class ExperimentOptions(Options):
    """Options of ``clip-cycles probe | transfer | oe``: the input, the experiment's settings, the output."""

    features: str | None = Field(None, json_schema_extra={"flag": "--features"})
    task: tuple[str, ...] | None = Field(None, json_schema_extra={"flag": "--task"})
    model: ModelOptions
    settings: Any = Field(json_schema_extra={"flag": "--epochs/--seeds/--lr/..."})  # ProbeSettings, TransferSettings, OESettings
    min_cycles: int | None = Field(None, ge=1, json_schema_extra={"flag": "--min-cycles"})
    out: str = Field(json_schema_extra={"flag": "--out"})
    report: bool = Field(True, json_schema_extra={"flag": "--no-report"})


def experiment_options(args: argparse.Namespace, settings: Any) -> ExperimentOptions:
    """The :class:`ExperimentOptions` of parsed experiment flags and the experiment's settings (the edge)."""
    return ExperimentOptions.make(
        features=args.features,
        task=None if args.task is None else tuple(args.task),
        model=model_options(args),
        settings=settings,
        min_cycles=args.min_cycles,
        out=args.out,
        report=not args.no_report,
    )


def check_configuration(options: ExperimentOptions) -> None:
    """Refuse a configuration that cannot finish before any encoding or fitting: the input flags
    (``--features`` or ``--task`` with ``--model``), the output folder (writable) and the feature file."""
    if options.features is not None:
        if options.task or options.model.model:
            raise ValueError("give either --features or --task/--model, not both")
        if not Path(options.features).is_file():
            raise FileNotFoundError(f"--features {options.features}: no such file")
    elif not options.task or not options.model.model:
        raise ValueError("no input: give --features FILE.npz, or --task TASK ... with --model MODEL")
    out = Path(options.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ValueError(f"--out {out}: not a writable folder ({error.strerror or error}); choose another --out") from error


def experiment_cache(options: ModelOptions) -> ResultCache:
    """The result cache of an experiment command: the feature cache's root, none with ``--no-cache``."""
    return ResultCache(resolve_cache_dir(options.cache_dir) if options.use_cache else None)


def run_experiment(options: ExperimentOptions, run: Callable[..., dict[str, Any]], file_name: str,
                   with_markers: bool = False, num_proc: int | None = None) -> int:  # fmt: skip
    """Check the configuration, load the input, settle the minimum cycles, run the experiment (or reuse
    its cached result: same features, settings and code) and write its JSON (+ report).

    ``num_proc`` (probe, transfer): processes for the heads; the result is the same for any count, so
    it is neither in the record nor in the cache key.
    """
    check_configuration(options)
    extra = {} if num_proc is None else {"num_proc": check_num_proc(num_proc)}
    cache = experiment_cache(options.model)
    tasks = None if options.task is None else list(options.task)
    data = load_input(options.features, tasks, options.model, options.settings.seeds, with_markers=with_markers)
    settings = dataclasses.replace(options.settings, min_cycles=resolve_min_cycles(options.min_cycles, data))
    record, reused = cache.get_or_compute(run.__name__, data, settings, lambda: run(data, settings, **extra))
    print(f"{'reused the cached' if reused else 'computed the'} {run.__name__} result (result cache: {cache.root or 'off'})")
    return finish(record, options.out, file_name, report=options.report)


def add_head_training_arguments(parser: argparse.ArgumentParser, rank: int | None) -> None:
    """The heads' optimiser flags every experiment takes (and ``--rank`` where one rank is trained)."""
    if rank is not None:
        parser.add_argument("--rank", type=int, default=rank, help="probe rank (paper: 64)")
    parser.add_argument("--lr", type=finite_float, default=1e-3)
    parser.add_argument("--weight-decay", type=finite_float, default=1e-4)
    add_train_batch_size(parser)


def configure_probe_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles probe``: rank sweeps per family."""
    add_experiment_arguments(parser, epochs=30)
    parser.add_argument("--ranks", type=int, nargs="+", default=list(PROBE_RANKS), help="low-rank probe ranks")
    parser.add_argument("--full-heads", nargs="*", default=list(FULL_HEADS), help="full-matrix heads to train")
    add_head_training_arguments(parser, rank=None)
    parser.add_argument("--no-audit", action="store_true", help="skip the additive audit")
    add_num_proc_argument(parser)
    parser.set_defaults(func=probe_command)


def add_num_proc_argument(parser: argparse.ArgumentParser) -> None:
    """``--num-proc``: processes that train the heads (the record is the same for any count)."""
    parser.add_argument(
        "--num-proc",
        type=int,
        default=None,
        help="processes training the heads, one thread each (default: the usable cores); the result is the same for any count",
    )


def probe_command(args: argparse.Namespace) -> int:
    """Run the probe sweep and write ``probe.json`` (+ report)."""
    settings = ProbeSettings(
        epochs=args.epochs,
        lr=args.lr,
        weight_decay=args.weight_decay,
        batch_size=args.train_batch_size,
        ranks=tuple(args.ranks),
        full_heads=tuple(args.full_heads),
        seeds=tuple(args.seeds),
        audit=not args.no_audit,
    )
    check_num_proc(args.num_proc)  # before any loading or fitting
    return run_experiment(experiment_options(args, settings), run_probes, probes.RESULT_FILE, num_proc=args.num_proc)


def configure_transfer_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles transfer``: the transfer grid and alignment."""
    add_experiment_arguments(parser, epochs=30)
    add_head_training_arguments(parser, rank=REFERENCE_RANK)
    add_num_proc_argument(parser)
    parser.set_defaults(func=transfer_command)


def transfer_command(args: argparse.Namespace) -> int:
    """Run the transfer grid and write ``transfer.json`` (+ report)."""
    settings = TransferSettings(
        rank=args.rank,
        epochs=args.epochs,
        lr=args.lr,
        weight_decay=args.weight_decay,
        batch_size=args.train_batch_size,
        seeds=tuple(args.seeds),
    )
    check_num_proc(args.num_proc)  # before any loading or fitting
    return run_experiment(experiment_options(args, settings), transfer.run_transfer, transfer.RESULT_FILE, num_proc=args.num_proc)


def configure_oe_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles oe``: Cycle OE vs Shortcut OE vs four-entry BCE."""
    add_experiment_arguments(parser, epochs=8)
    add_head_training_arguments(parser, rank=64)
    parser.add_argument(
        "--text-only-epochs", type=int, default=50, help="epochs of the text-only and image-only shortcut probes (paper 1: 50)"
    )
    parser.add_argument(
        "--text-only-lr",
        type=finite_float,
        default=1e-2,
        help="learning rate of the text-only and image-only shortcut probes (paper 1: 1e-2)",
    )
    parser.set_defaults(func=oe_command)


def oe_command(args: argparse.Namespace) -> int:
    """Run the OE experiment and write ``oe.json`` (+ report)."""
    settings = OESettings(
        rank=args.rank,
        epochs=args.epochs,
        batch_size=args.train_batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        seeds=tuple(args.seeds),
        text_only_epochs=args.text_only_epochs,
        text_only_lr=args.text_only_lr,
    )
    return run_experiment(experiment_options(args, settings), oe.run_oe, oe.RESULT_FILE, with_markers=True)
