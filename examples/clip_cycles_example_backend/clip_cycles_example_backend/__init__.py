"""An example clip_cycles model backend (see docs/backends.md in clip_cycles).

The entry point ``example_bow = clip_cycles_example_backend.backend:load`` registers it.
"""

from clip_cycles_example_backend.backend import load

__all__ = ["load"]
