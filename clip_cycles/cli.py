"""The ``clip-cycles`` console script (setup.cfg): a thin entry point into :mod:`clip_cycles.commands.main`.

The command registry, the parsers and every flag live in :mod:`clip_cycles.commands`.
"""

from __future__ import annotations

from typing import NoReturn

from clip_cycles.commands.main import COMMANDS, command_help, main, register_command, unregister_command
from clip_cycles.processes import exit_without_teardown

__all__ = ["COMMANDS", "command_help", "main", "register_command", "run", "unregister_command"]


def run() -> NoReturn:
    """The console script: :func:`main`, then the exit without the interpreter's teardown
    (:func:`clip_cycles.processes.exit_without_teardown`: a second saved once torch is loaded)."""
    exit_without_teardown(main())


if __name__ == "__main__":  # pragma: no cover
    run()
