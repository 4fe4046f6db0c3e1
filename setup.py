"""Build steps that setup.cfg cannot express; all metadata stays in setup.cfg.

The clip_benchmark plugin's start-up hook: ``clip_cycles_plugin.pth`` (one line,
``import _clip_cycles_hook; _clip_cycles_hook.install()``) and ``_clip_cycles_hook.py``
(a copy of ``clip_cycles/integrations/_activation.py``, stdlib only) at the site-packages
root. A regular build puts them in ``build_lib`` (so they land at the wheel root); an
editable build (PEP 660) ignores ``build_lib`` for such files, so there they go to the root
of the editable wheel being assembled (the ``install_lib`` that ``editable_wheel`` sets).
Either way pip byte-compiles the module and lists both files in RECORD (uninstall removes
them). The task YAMLs ship inside the package (``clip_cycles/tasks``) as package data.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py as _build_py

HERE = Path(__file__).resolve().parent
PTH_NAME = "clip_cycles_plugin.pth"
HOOK_MODULE = "_clip_cycles_hook"
PTH_LINE = f"import {HOOK_MODULE}; {HOOK_MODULE}.install()\n"
HOOK_SOURCE = HERE / "clip_cycles" / "integrations" / "_activation.py"


def _write_hook(root: Path) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HOOK_SOURCE, root / f"{HOOK_MODULE}.py")
    (root / PTH_NAME).write_text(PTH_LINE, encoding="utf-8")
    return [str(root / f"{HOOK_MODULE}.py"), str(root / PTH_NAME)]


class build_py(_build_py):
    """build_py plus the plugin hook."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            root = Path(self.get_finalized_command("install").install_lib)
        else:
            root = Path(self.build_lib)
        _write_hook(root)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = list(super().get_outputs(include_bytecode))
        if not getattr(self, "editable_mode", False):
            outputs.extend(str(Path(self.build_lib) / name) for name in (f"{HOOK_MODULE}.py", PTH_NAME))
        return outputs


setup(cmdclass={"build_py": build_py})
