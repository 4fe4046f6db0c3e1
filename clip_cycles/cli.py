"""The ``clip-cycles`` console script (setup.cfg): a thin entry point into :mod:`clip_cycles.commands.main`.

The command registry, the parsers and every flag live in :mod:`clip_cycles.commands`.
"""

from __future__ import annotations

import sys

from clip_cycles.commands.main import COMMANDS, command_help, main, register_command, unregister_command

__all__ = ["COMMANDS", "command_help", "main", "register_command", "unregister_command"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
