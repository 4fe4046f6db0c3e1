"""Flags several commands share, declared once: verbosity, finite numbers, seeds.

Light on purpose (``clip-cycles --help`` imports it); the model flags are
:mod:`clip_cycles.commands.model_flags`.
"""

from __future__ import annotations

import argparse
import math

from clip_cycles.verbosity import QUIET_FLAGS, VERBOSE_FLAGS


def add_verbosity_arguments(parser: argparse.ArgumentParser, nested: bool = False) -> None:
    """``-q/--quiet`` and ``-v/--verbose`` on ``parser`` and on each of its subcommands' parsers.

    A subcommand's parser takes them with no default (``nested``), so its namespace never
    overwrites a flag given before the subcommand's name (``build -q coco ...``).
    """
    group = parser.add_argument_group("output")
    default = argparse.SUPPRESS if nested else False
    quiet_help = "print the result only: warnings, no notes, no progress bars"
    group.add_argument(*QUIET_FLAGS, action="store_true", default=default, help=quiet_help)
    group.add_argument(
        *VERBOSE_FLAGS, action="store_true", default=default, help="also print debug notes (cache and build decisions)"
    )
    for action in parser._actions:  # argparse lists a command's subcommands only there
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                add_verbosity_arguments(sub, nested=True)


def finite_float(text: str) -> float:
    """An argparse type: a finite number (``inf`` and ``nan`` would reach records and build_info.json)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; give a finite value")
    return value


def seed_argument(text: str) -> int:
    """argparse type of one ``--seeds`` value: a non-negative integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; seeds are 0, 1, 2, ...")
    return value
