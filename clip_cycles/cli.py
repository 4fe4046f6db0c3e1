"""The ``clip-cycles`` command line: a registry of subcommands, imported lazily.

Each subcommand lives in the module that owns its concept. The module exposes
``configure_parser(parser: argparse.ArgumentParser) -> None`` (or the function named
after a colon, ``module:function``) which adds its arguments and sets
``parser.set_defaults(func=callable)``; the callable takes the
parsed namespace and returns an exit code (or None for 0). Only the module of the
command being run is imported, so ``clip-cycles --help`` stays fast and a broken
optional dependency of one command never breaks the others.

A command prints its result (tables, JSON, the paths it wrote) on stdout; its notes go
through ``logging`` to stderr (:mod:`clip_cycles.verbosity`): ``-q/--quiet`` keeps warnings
only (and no progress bars), ``-v/--verbose`` adds the debug notes (cache and build
decisions). Both are accepted before the command name and after it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from typing import Sequence

from clip_cycles.verbosity import QUIET_FLAGS, VERBOSE_FLAGS, add_verbosity_arguments, command_level, configured_logging


@dataclass(frozen=True)
class Command:
    """One registered subcommand: where it lives and what it does."""

    module: str
    help: str


COMMANDS: dict[str, Command] = {}


def register_command(name: str, module: str, help: str) -> None:
    """Register subcommand ``name`` configured by ``module.configure_parser`` (or ``module:function``)."""
    if name in COMMANDS:
        raise ValueError(f"clip-cycles command {name!r} is already registered by {COMMANDS[name].module}")
    COMMANDS[name] = Command(module=module, help=help)


register_command("synthetic", "clip_cycles.experiments.synthetic", "Synthetic controls (paper 1, Table 1): algebra before data.")
register_command("build", "clip_cycles.data.build", "Build cycle families (shapes world, COCO, GQA) into a dataset folder.")
register_command("audit", "clip_cycles.data.folder_audit", "Re-check a built dataset folder; non-zero exit on any violation.")
register_command(
    "tasks", "clip_cycles.tasks.list_command", "List tasks and collections (name, type, data, description); PATTERN: fnmatch."
)
register_command("eval", "clip_cycles.evaluation.eval_command", "Zero-shot CycleAcc and Winoground scores of a model on a task.")
register_command(
    "encode", "clip_cycles.evaluation.encode_command", "Encode the unique images and captions of tasks into the feature cache."
)
register_command(
    "probe", "clip_cycles.experiments.commands:configure_probe_parser", "Probe rank sweeps per family (cycle loss, seeds 0,1,2)."
)
register_command(
    "transfer",
    "clip_cycles.experiments.commands:configure_transfer_parser",
    "Family-to-family probe transfer and cycle-difference alignment.",
)
register_command("oe", "clip_cycles.experiments.commands:configure_oe_parser", "Cycle OE vs Shortcut OE vs four-entry BCE.")
register_command("report", "clip_cycles.experiments.report", "Rebuild the markdown report and figures from a results directory.")
register_command(
    "splits", "clip_cycles.attributes.attribute_experiments", "Attribute generalization splits: F1 selectivity and CS."
)
register_command("train-tiny", "clip_cycles.encoding.tiny_model", "Train the cycles-tiny CLIP on the shapes world.")
register_command(
    "audit-benchmark", "clip_cycles.evaluation.benchmark_audit_command", "Audit a benchmark: blind scores vs the model."
)
register_command("demo", "clip_cycles.evaluation.demo", "The whole pipeline offline on the embedded default.")
register_command(
    "page", "clip_cycles.evaluation.page", "A static results page (leaderboard, audits, family pages) from result folders."
)
register_command(
    "schema",
    "clip_cycles.tasks.schema_command",
    "Print the JSON Schema of a file format (task, build-info, result, additive-audit).",
)


def _top_parser() -> argparse.ArgumentParser:
    lines = [f"  {name:<12} {cmd.help}" for name, cmd in sorted(COMMANDS.items())]
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
        top.error(f"unknown command {name!r}; available: {', '.join(sorted(COMMANDS))}")
    command = COMMANDS[name]
    module_name, _, function = command.module.partition(":")
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"clip-cycles {name}", description=command.help)
    getattr(module, function or "configure_parser")(parser)
    add_verbosity_arguments(parser)
    namespace = parser.parse_args(rest)
    quiet = namespace.quiet or any(flag in QUIET_FLAGS for flag in leading)
    verbose = namespace.verbose or any(flag in VERBOSE_FLAGS for flag in leading)
    try:
        with configured_logging(command_level(quiet, verbose)):
            code = namespace.func(namespace)
    except (ValueError, FileNotFoundError, PermissionError) as error:
        # User-facing errors: the message already names the file, field or id.
        print(f"clip-cycles {name}: error: {error}", file=sys.stderr)
        return 2
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
