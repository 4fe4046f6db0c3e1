"""``python -m clip_cycles`` runs the ``clip-cycles`` command line."""

import sys

from clip_cycles.cli import main

sys.exit(main())
