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


#: The largest seed (numpy's and torch's generators take 32-bit seeds everywhere; a larger one overflows in C).
MAX_SEED = 2**32 - 1


def seed_argument(text: str) -> int:
    """argparse type of one ``--seeds`` value: a non-negative integer of at most :data:`MAX_SEED`."""
    # The length first: int() of a 100,000-digit string is itself slow (and refused past 4,300 digits).
    if len(text.strip().lstrip("+-")) > len(str(MAX_SEED)) + 1:
        shown = text[:24] + ("..." if len(text) > 24 else "")
        raise argparse.ArgumentTypeError(f"{shown!r} is too long for a seed; seeds are 0 to {MAX_SEED}")
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; seeds are 0, 1, 2, ...")
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"{value} is larger than {MAX_SEED}, the largest seed; seeds are 0 to {MAX_SEED}")
    return value


def pool_size(text: str) -> int | None:
    """A pool-size flag: a positive count, or 0 for every valid image (``build_info.json`` records it so)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"pool size must be a positive count or 0 (all images), got {value}")
    return value or None
