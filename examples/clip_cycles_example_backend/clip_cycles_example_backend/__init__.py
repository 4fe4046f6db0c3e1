"""An example clip_cycles model backend (see docs/backends.md in clip_cycles).

The entry point ``example_bow = clip_cycles_example_backend.backend:BACKEND`` registers its record.
"""

from clip_cycles_example_backend.backend import BACKEND, load

__all__ = ["BACKEND", "load"]
