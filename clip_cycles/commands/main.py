"""The ``clip-cycles`` command line: a registry of subcommands, imported lazily.

Each subcommand is registered as a lazy ``"module:function"`` target in :data:`COMMANDS`
(a :class:`~clip_cycles.registry.Registry`); the function, ``configure_parser(parser)`` by
convention, adds the command's arguments and sets ``parser.set_defaults(func=callable)``; the
callable takes the parsed namespace and returns an exit code (or None for 0). Only the module
of the command being run is imported, so ``clip-cycles --help`` stays fast and a broken
optional dependency of one command never breaks the others.

A command prints its result (tables, JSON, the paths it wrote) on stdout; its notes go
through ``logging`` to stderr (:mod:`clip_cycles.verbosity`): ``-q/--quiet`` keeps warnings
only (and no progress bars), ``-v/--verbose`` adds the debug notes (cache and build
decisions). Both are accepted before the command name and after it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from clip_cycles.commands.flags import add_verbosity_arguments
from clip_cycles.processes import WorkerDiedError
from clip_cycles.registry import Registry
from clip_cycles.verbosity import QUIET_FLAGS, VERBOSE_FLAGS, command_level, configured_logging

#: Name -> the function that configures the command's parser (lazy ``"module:function"``); each entry's
#: ``description`` is the one-line help of ``clip-cycles --help``, read without importing the command.
COMMANDS: Registry[Callable[[argparse.ArgumentParser], None]] = Registry("clip-cycles command")


def register_command(name: str, target: str | Callable[[argparse.ArgumentParser], None], help: str) -> None:
    """Register subcommand ``name`` configured by ``target`` (``"module:function"`` or the function)."""
    COMMANDS.register(name, target, description=help)


def unregister_command(name: str) -> None:
    """Remove subcommand ``name`` (tests that register one temporarily)."""
    COMMANDS.unregister(name)


def command_help(name: str) -> str:
    """The one-line help of command ``name`` (its registry entry's description)."""
    return COMMANDS.entry(name).description


_HERE = "clip_cycles.commands"
register_command(
    "synthetic", f"{_HERE}.synthetic:configure_parser", "Synthetic controls (paper 1, Table 1): algebra before data."
)
register_command(
    "build", f"{_HERE}.build:configure_parser", "Build cycle families (shapes world, COCO, GQA) into a dataset folder."
)
register_command("audit", f"{_HERE}.audit:configure_parser", "Re-check a built dataset folder; non-zero exit on any violation.")
register_command(
    "tasks", f"{_HERE}.tasks:configure_parser", "List tasks and collections (name, type, data, description); PATTERN: fnmatch."
)
register_command("eval", f"{_HERE}.eval:configure_parser", "Zero-shot CycleAcc and Winoground scores of a model on a task.")
register_command(
    "encode", f"{_HERE}.encode:configure_parser", "Encode the unique images and captions of tasks into the feature cache."
)
register_command(
    "probe", f"{_HERE}.experiments:configure_probe_parser", "Probe rank sweeps per family (cycle loss, seeds 0,1,2)."
)
register_command(
    "transfer",
    f"{_HERE}.experiments:configure_transfer_parser",
    "Family-to-family probe transfer and cycle-difference alignment.",
)
register_command("oe", f"{_HERE}.experiments:configure_oe_parser", "Cycle OE vs Shortcut OE vs four-entry BCE.")
register_command(
    "report", f"{_HERE}.report:configure_parser", "Rebuild the markdown report and figures from a results directory."
)
register_command("splits", f"{_HERE}.splits:configure_parser", "Attribute generalization splits: F1 selectivity and CS.")
register_command("train-tiny", f"{_HERE}.train_tiny:configure_parser", "Train the cycles-tiny CLIP on the shapes world.")
register_command("compare", f"{_HERE}.compare:configure_parser", "Paired CycleAcc differences of two models on the same cycles.")
register_command("audit-benchmark", f"{_HERE}.audit_benchmark:configure_parser", "Audit a benchmark: blind scores vs the model.")
register_command("demo", f"{_HERE}.demo:configure_parser", "The whole pipeline offline on the embedded default.")
register_command(
    "page", f"{_HERE}.page:configure_parser", "A static results page (leaderboard, audits, family pages) from result folders."
)
register_command(
    "schema",
    f"{_HERE}.schema:configure_parser",
    "Print the JSON Schema of a file format (task, build-info, result, additive-audit, samples).",
)


def _top_parser() -> argparse.ArgumentParser:
    lines = [f"  {name:<12} {command_help(name)}" for name in COMMANDS.names()]
    parser = argparse.ArgumentParser(
        prog="clip-cycles",
        usage="clip-cycles [-q | -v] COMMAND [options]",
        description="Counterfactual pairing cycles for CLIP-like models.\n\ncommands:\n" + "\n".join(lines),
        epilog="-q/--quiet: the result only; -v/--verbose: debug notes too; $CLIP_CYCLES_LOG_LEVEL sets the level "
        "where neither is given (default info)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_verbosity_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``clip-cycles``; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    top = _top_parser()
    # -q / -v before the command name; the command's parser takes them after it.
    leading = []
    while args and args[0] in QUIET_FLAGS + VERBOSE_FLAGS:
        leading.append(args.pop(0))
    if not args or args[0] in ("-h", "--help"):
        top.print_help()
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        top.error(COMMANDS.unknown_message(name))
    parser = argparse.ArgumentParser(prog=f"clip-cycles {name}", description=command_help(name))
    COMMANDS.get(name)(parser)
    add_verbosity_arguments(parser)
    namespace = parser.parse_args(rest)
    quiet = namespace.quiet or any(flag in QUIET_FLAGS for flag in leading)
    verbose = namespace.verbose or any(flag in VERBOSE_FLAGS for flag in leading)
    try:
        with configured_logging(command_level(quiet, verbose)):
            code = namespace.func(namespace)
    except (ValueError, FileNotFoundError, PermissionError, WorkerDiedError) as error:
        # User-facing errors: the message already names the file, field or id (or the jobs a dead worker ran).
        print(f"clip-cycles {name}: error: {error}", file=sys.stderr)
        return 2
    return int(code or 0)
