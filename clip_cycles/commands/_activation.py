"""Activation hook of the clip_benchmark plugin; stdlib only, runs at every interpreter start.

``setup.py`` installs a copy of this file as the top-level module ``_clip_cycles_hook``
and a one-line ``clip_cycles_plugin.pth`` that imports it and calls :func:`install`, both
at the site-packages root (for ``pip install .`` and ``pip install -e .``), so start-up
reads one small cached module. At start-up it only puts a finder
on ``sys.meta_path`` that answers for one name, ``clip_benchmark.cli``: nothing is
imported, so unrelated processes pay one string comparison per import. When a process
imports ``clip_benchmark.cli``, the real module is loaded as usual and then handed to
:func:`clip_cycles.commands.clip_benchmark.patch_cli`. Without clip_benchmark nothing happens;
``CLIP_CYCLES_NO_PLUGIN=1`` disables the hook.
"""

import os
import sys
import warnings

DISABLE_ENV = "CLIP_CYCLES_NO_PLUGIN"
TARGET = "clip_benchmark.cli"


class PatchingLoader:
    """Delegates to the real loader, then lets clip_cycles patch the module."""

    def __init__(self, loader: object) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> object:
        return getattr(self.loader, name)

    def create_module(self, spec: object) -> object:
        return self.loader.create_module(spec)

    def exec_module(self, module: object) -> None:
        self.loader.exec_module(module)
        activate(module)


class ClipBenchmarkFinder:
    """A meta-path finder that only answers for ``clip_benchmark.cli``."""

    @classmethod
    def find_spec(cls, fullname: str, path: object = None, target: object = None) -> object:
        if fullname != TARGET:
            return None
        for finder in sys.meta_path:
            if finder is cls or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = PatchingLoader(spec.loader)
                return spec
        return None


def activate(module: object) -> None:
    """Patch an imported ``clip_benchmark.cli``; a broken clip_cycles warns instead of breaking clip_benchmark."""
    if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
        return
    try:
        from clip_cycles.commands.clip_benchmark import patch_cli
    except ImportError:  # clip_cycles uninstalled but this hook left behind: stay out of the way
        return
    try:
        patch_cli(module)
    except Exception as error:  # noqa: BLE001 - clip_benchmark must keep working for its own datasets
        # A warning, not a log record: no handler is set up this early, and `-W` can still silence it.
        warnings.warn(
            f"clip_cycles: plugin not activated ({type(error).__name__}: {error}); set {DISABLE_ENV}=1 to silence this",
            RuntimeWarning,
            stacklevel=2,
        )


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once); patch at once if clip_benchmark.cli is already loaded."""
    if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
        return
    if any(getattr(f, "__name__", "") == ClipBenchmarkFinder.__name__ for f in sys.meta_path):
        return
    sys.meta_path.insert(0, ClipBenchmarkFinder)
    if TARGET in sys.modules:
        activate(sys.modules[TARGET])
