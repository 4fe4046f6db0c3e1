"""Build steps that setup.cfg cannot express; all metadata stays in setup.cfg.

The clip_benchmark plugin's start-up hook: ``clip_cycles_plugin.pth`` (one line,
``import _clip_cycles_hook; _clip_cycles_hook.install()``) and ``_clip_cycles_hook.py``
(a copy of ``clip_cycles/commands/_activation.py``, stdlib only) at the site-packages
root. A regular build puts them in ``build_lib`` (so they land at the wheel root); an
editable build (PEP 660) ignores ``build_lib`` for such files, so there they go to the root
of the editable wheel being assembled (the ``install_lib`` that ``editable_wheel`` sets).
Either way pip byte-compiles the module and lists both files in RECORD (uninstall removes
them).

The top-level ``tasks/`` folder (the task YAMLs and their ``_*`` templates) and the
``hf_datasets/`` builder scripts and cards are package data of a built install: a regular
build copies them to ``clip_cycles/package_data/{tasks,hf_datasets}`` in ``build_lib`` (a
data folder, no Python package, so the name cannot collide with ``clip_cycles.tasks``).
An editable install copies nothing: the registry reads the checkout's ``tasks/`` (one
copy). MANIFEST.in puts both folders in the sdist, so a wheel built from it has them too.
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
HOOK_SOURCE = HERE / "clip_cycles" / "commands" / "_activation.py"
#: Inside the built package: where the top-level data folders go (clip_cycles.tasks.registry.INSTALLED_TASKS_DIR).
PACKAGE_DATA = Path("clip_cycles") / "package_data"


def _data_files() -> list[Path]:
    """The files of ``tasks/`` and ``hf_datasets/`` to install, relative to the project root, sorted.

    ``tasks/``: every file (YAMLs and templates). ``hf_datasets/<name>/``: the builder scripts and
    cards at the top of each folder, never what a build left there (``world/``, ``data/``).
    """
    tasks = [p for p in (HERE / "tasks").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    builders = [p for p in (HERE / "hf_datasets").glob("*/*") if p.is_file() and p.suffix in (".py", ".md")]
    if not tasks:
        raise FileNotFoundError(f"{HERE / 'tasks'} holds no task files: build from a checkout or an sdist of clip_cycles")
    return sorted(p.relative_to(HERE) for p in tasks + builders)


def _write_hook(root: Path) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HOOK_SOURCE, root / f"{HOOK_MODULE}.py")
    (root / PTH_NAME).write_text(PTH_LINE, encoding="utf-8")
    return [str(root / f"{HOOK_MODULE}.py"), str(root / PTH_NAME)]


def _copy_data(build_lib: Path) -> list[str]:
    written = []
    for relative in _data_files():
        target = build_lib / PACKAGE_DATA / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HERE / relative, target)
        written.append(str(target))
    return written


class build_py(_build_py):
    """build_py plus the plugin hook and (regular builds) the top-level tasks/ and hf_datasets/ folders."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            root = Path(self.get_finalized_command("install").install_lib)
        else:
            root = Path(self.build_lib)
            _copy_data(root)
        _write_hook(root)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = list(super().get_outputs(include_bytecode))
        if not getattr(self, "editable_mode", False):
            outputs.extend(str(Path(self.build_lib) / name) for name in (f"{HOOK_MODULE}.py", PTH_NAME))
            outputs.extend(str(Path(self.build_lib) / PACKAGE_DATA / relative) for relative in _data_files())
        return outputs


setup(cmdclass={"build_py": build_py})
