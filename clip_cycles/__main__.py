"""``python -m clip_cycles`` runs the ``clip-cycles`` command line."""

from clip_cycles.cli import run

run()
