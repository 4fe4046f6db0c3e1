"""``python -m clip_cycles.commands.lmms_bridge``: write an lmms-eval task folder for cycle tasks.

The flags of the lmms-eval bridge (:mod:`clip_cycles.integrations.lmms_bridge`) and its entry point.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from clip_cycles.commands.flags import add_verbosity_arguments, seed_argument
from clip_cycles.integrations import lmms_bridge
from clip_cycles.outputs import plan_outputs
from clip_cycles.processes import WorkerDiedError
from clip_cycles.verbosity import command_level, configured_logging

#: The command's spelling, in its usage line and its error sentences (argparse's own say ``PROG: error:`` too).
PROG = "python -m clip_cycles.commands.lmms_bridge"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m clip_cycles.commands.lmms_bridge``: write the lmms-eval task folder and print its task names."""
    parser = argparse.ArgumentParser(prog=PROG, description=str(lmms_bridge.__doc__).split("\n")[0])
    parser.add_argument("--dataset-root", required=True, help="built dataset folder (clip-cycles build)")
    parser.add_argument(
        "--task",
        nargs="+",
        required=True,
        help="cycle task or collection names or fnmatch patterns, e.g. cycles/coco_all, 'cycles/coco_strict_*'",
    )
    parser.add_argument("--out", required=True, help="task folder to write (pass it to lmms-eval --include_path)")
    parser.add_argument("--seeds", type=seed_argument, nargs="+", default=None, help="restrict to these seeds")
    parser.add_argument(
        "--loglikelihood-is-loss", action="store_true", help="the lmms-eval model returns a loss (lower = better): flip the sign"
    )
    add_verbosity_arguments(parser)
    args = parser.parse_args(argv)
    try:
        with configured_logging(command_level(args.quiet, args.verbose)):  # notes (families built) on stderr
            plan_outputs({"--out": args.out}, {"--dataset-root": args.dataset_root})  # never over the folder it reads
            names = lmms_bridge.write_lmms_tasks(args.dataset_root, args.out, args.task, args.seeds, args.loglikelihood_is_loss)
    except (ValueError, FileNotFoundError, WorkerDiedError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"include_path": str(Path(args.out).resolve()), "tasks": names}, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
