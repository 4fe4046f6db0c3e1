"""``clip-cycles probe | transfer | oe``: the paper-1 experiments as commands.

The experiments themselves (:mod:`probes`, :mod:`transfer`, :mod:`oe`) are library
functions on :class:`~clip_cycles.experiments.experiment_data.ExperimentData`; this module
adds their flags, loads the features and writes the JSON and the report.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Annotated, Any, Callable, Sequence

from pydantic import Field

from clip_cycles.commands.derived import RefusedFlag, configure
from clip_cycles.commands.model_flags import model_field, task_field
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
from clip_cycles.outputs import plan_outputs
from clip_cycles.processes import WorkerDiedError, check_num_proc
from clip_cycles.results import write_json
from clip_cycles.schemas.options import Options
from clip_cycles.settings import MIN_CYCLES_ENV, resolve_cache_dir
from clip_cycles.tasks.names import resolve_task_names


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
    # A run sure to load the model (no cache, or nothing of it there): its weights, or one sentence now.
    context.spec.require_weights_if_cold(context.cache_dir)
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


#: ``--seed`` in an experiment command: refused (argparse would read it as an abbreviation of ``--seeds``).
AMBIGUOUS_SEED = (
    "--seed is ambiguous here: give --seeds (the cycle-split seeds, each also seeding its head's training) "
    "or --model-seed (the torch seed before loading a random-init model; `clip-cycles eval --seed`)"
)
INPUT = "input (either --features, or --task with --model)"


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
    """Options of ``clip-cycles probe | transfer | oe``: the input, the output, and the settings every experiment has."""

    features: str | None = Field(
        None,
        json_schema_extra={
            "flag": "--features",
            "group": INPUT,
            "help": "an .npz written by save_experiment_data (skips encoding)",
        },
    )
    task: tuple[str, ...] | None = task_field(required=False, group=INPUT)
    # No --seed/--batch-size model aliases: here --batch-size is --train-batch-size and --seed is refused as ambiguous.
    model: ModelOptions = model_field(group=INPUT)
    out: str = Field(json_schema_extra={"flag": "--out", "help": "results directory (JSON, report.md and figures go here)"})
    seeds: tuple[int, ...] = Field(
        DEFAULT_SEEDS,
        min_length=1,
        json_schema_extra={
            "flag": "--seeds",
            "help": "cycle-split seeds (each also seeds its head's training); the model's torch seed is --model-seed",
        },
    )
    epochs: int = Field(30, ge=1, json_schema_extra={"flag": "--epochs", "help": "training epochs (default 30)"})
    min_cycles: int | None = Field(
        None,
        ge=1,
        json_schema_extra={
            "flag": "--min-cycles",
            "help": "families with fewer cycles in any seed/split are reported unavailable (default: "
            f"${MIN_CYCLES_ENV}, else the minimum the dataset folders were built with, else {DEFAULT_MIN_CYCLES})",
        },
    )
    report: bool = Field(
        True, json_schema_extra={"flag": "--no-report", "help": "write the JSON only, not report.md and figures"}
    )
    lr: float = Field(1e-3, gt=0.0, json_schema_extra={"flag": "--lr", "type": "finite"})
    weight_decay: float = Field(1e-4, ge=0.0, json_schema_extra={"flag": "--weight-decay", "type": "finite"})
    # Not the encoder's batch: that is --encode-batch-size (`clip-cycles eval --batch-size`).
    train_batch_size: int = Field(
        512,
        ge=1,
        json_schema_extra={
            "flag": "--train-batch-size",
            "aliases": ("--batch-size",),
            "help": "cycles per training step of the heads (alias --batch-size); the encoder's batch is --encode-batch-size",
        },
    )


def _num_proc_field() -> Any:
    """``--num-proc``: processes that train the heads (the record is the same for any count)."""
    return Field(
        None,
        ge=1,
        json_schema_extra={
            "flag": "--num-proc",
            "help": "processes training the heads, one thread each (default: the usable cores); the result is the same "
            "for any count",
        },
    )


def _rank_field(rank: int) -> Any:
    return Field(rank, ge=1, json_schema_extra={"flag": "--rank", "help": "probe rank (paper: 64)"})


class ProbeOptions(ExperimentOptions):
    """Options of ``clip-cycles probe``: rank sweeps per family."""

    ranks: tuple[Annotated[int, Field(ge=1)], ...] = Field(
        PROBE_RANKS, min_length=1, json_schema_extra={"flag": "--ranks", "help": "low-rank probe ranks"}
    )
    full_heads: tuple[str, ...] = Field(
        FULL_HEADS, json_schema_extra={"flag": "--full-heads", "nargs": "*", "help": "full-matrix heads to train"}
    )
    audit: bool = Field(True, json_schema_extra={"flag": "--no-audit", "help": "skip the additive audit"})
    num_proc: int | None = _num_proc_field()

    def settings(self) -> ProbeSettings:
        return ProbeSettings(
            epochs=self.epochs, lr=self.lr, weight_decay=self.weight_decay, batch_size=self.train_batch_size,
            ranks=self.ranks, full_heads=self.full_heads, seeds=self.seeds, audit=self.audit,
        )  # fmt: skip


class TransferOptions(ExperimentOptions):
    """Options of ``clip-cycles transfer``: the transfer grid and alignment."""

    rank: int = _rank_field(REFERENCE_RANK)
    num_proc: int | None = _num_proc_field()

    def settings(self) -> TransferSettings:
        return TransferSettings(
            rank=self.rank, epochs=self.epochs, lr=self.lr, weight_decay=self.weight_decay,
            batch_size=self.train_batch_size, seeds=self.seeds,
        )  # fmt: skip


class OEOptions(ExperimentOptions):
    """Options of ``clip-cycles oe``: Cycle OE vs Shortcut OE vs four-entry BCE."""

    epochs: int = Field(8, ge=1, json_schema_extra={"flag": "--epochs", "help": "training epochs (default 8)"})
    rank: int = _rank_field(64)
    text_only_epochs: int = Field(
        50,
        ge=1,
        json_schema_extra={
            "flag": "--text-only-epochs",
            "help": "epochs of the text-only and image-only shortcut probes (paper 1: 50)",
        },
    )
    text_only_lr: float = Field(
        1e-2,
        gt=0.0,
        json_schema_extra={
            "flag": "--text-only-lr",
            "type": "finite",
            "help": "learning rate of the text-only and image-only shortcut probes (paper 1: 1e-2)",
        },
    )

    def settings(self) -> OESettings:
        return OESettings(
            rank=self.rank, epochs=self.epochs, batch_size=self.train_batch_size, lr=self.lr,
            weight_decay=self.weight_decay, seeds=self.seeds, text_only_epochs=self.text_only_epochs,
            text_only_lr=self.text_only_lr,
        )  # fmt: skip


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


def _kept_after_death(options: ExperimentOptions, cache: ResultCache) -> str:
    """What a rerun finds when a worker died: the features come back without encoding again (or nothing)."""
    if options.features is not None:
        return f"the features file {options.features} is unchanged"
    if cache.root is None:
        return "nothing was cached (--no-cache): the rerun encodes again"
    return f"the encoded features stay in the feature cache {cache.root}"


def run_experiment(options: ExperimentOptions, settings: Any, run: Callable[..., dict[str, Any]], file_name: str,
                   with_markers: bool = False, num_proc: int | None = None) -> int:  # fmt: skip
    """Check the configuration, load the input, settle the minimum cycles, run the experiment (or reuse
    its cached result: same features, settings and code) and write its JSON (+ report).

    ``num_proc`` (probe, transfer): processes for the heads; the result is the same for any count, so
    it is neither in the record nor in the cache key.
    """
    check_configuration(options)
    plan_outputs({"--out": options.out, f"--out's {file_name}": Path(options.out) / file_name}, {"--features": options.features})
    extra = {} if num_proc is None else {"num_proc": check_num_proc(num_proc)}
    cache = experiment_cache(options.model)
    tasks = None if options.task is None else list(options.task)
    data = load_input(options.features, tasks, options.model, settings.seeds, with_markers=with_markers)
    settings = settings.replace(min_cycles=resolve_min_cycles(options.min_cycles, data))
    try:
        record, reused = cache.get_or_compute(run.__name__, data, settings, lambda: run(data, settings, **extra))
    except WorkerDiedError as died:
        raise died.keeping(_kept_after_death(options, cache)) from died
    print(f"{'reused the cached' if reused else 'computed the'} {run.__name__} result (result cache: {cache.root or 'off'})")
    return finish(record, options.out, file_name, report=options.report)


def _configure(parser: argparse.ArgumentParser, model: type[ExperimentOptions], run: Callable[[Any], int]) -> None:
    configure(parser, model, run)
    parser.add_argument("--seed", action=RefusedFlag, sentence=AMBIGUOUS_SEED)


def configure_probe_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles probe``: rank sweeps per family."""
    _configure(parser, ProbeOptions, probe_command)


def probe_command(options: ProbeOptions) -> int:
    """Run the probe sweep and write ``probe.json`` (+ report)."""
    settings = options.settings()
    check_num_proc(options.num_proc)  # before any loading or fitting
    return run_experiment(options, settings, run_probes, probes.RESULT_FILE, num_proc=options.num_proc)


def configure_transfer_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles transfer``: the transfer grid and alignment."""
    _configure(parser, TransferOptions, transfer_command)


def transfer_command(options: TransferOptions) -> int:
    """Run the transfer grid and write ``transfer.json`` (+ report)."""
    settings = options.settings()
    check_num_proc(options.num_proc)  # before any loading or fitting
    return run_experiment(options, settings, transfer.run_transfer, transfer.RESULT_FILE, num_proc=options.num_proc)


def configure_oe_parser(parser: argparse.ArgumentParser) -> None:
    """``clip-cycles oe``: Cycle OE vs Shortcut OE vs four-entry BCE."""
    _configure(parser, OEOptions, oe_command)


def oe_command(options: OEOptions) -> int:
    """Run the OE experiment and write ``oe.json`` (+ report)."""
    return run_experiment(options, options.settings(), oe.run_oe, oe.RESULT_FILE, with_markers=True)
