"""The test suite stays in its temporary folders: nothing under the user's HOME afterwards.

A few tests that load a folder with ``datasets`` (default cache) and draw figures with matplotlib run
in a subprocess with a temporary HOME and every cache variable unset, so only ``tests/conftest.py``
(``CACHE_ENV_FOLDERS``) can keep them out of ``~/.cache`` and ``~/.config``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fixture_data import CACHE_ENV_FOLDERS

REPO = Path(__file__).resolve().parents[2]
#: Tests that write where libraries cache by default: ``datasets.load_dataset`` without a cache folder,
#: and matplotlib figures (its font cache and config folder).
REPRESENTATIVE = (
    "tests/attributes/test_attribute_experiments.py::test_hf_dataset_loads_per_strategy_with_seed_splits",
    "tests/attributes/test_attribute_experiments.py::test_synthetic_grid_k_ablation_figures_and_determinism",
)
#: What the conftest must set: the caches of the libraries those tests use.
NEEDED = {"HF_HOME", "HF_DATASETS_CACHE", "MPLCONFIGDIR", "XDG_CACHE_HOME", "CLIP_CYCLES_CACHE"}


def _files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def test_conftest_points_every_cache_into_the_session_folder() -> None:
    assert NEEDED <= set(CACHE_ENV_FOLDERS)
    home = Path.home().resolve()
    for name in CACHE_ENV_FOLDERS:
        assert not Path(os.environ[name]).resolve().is_relative_to(home), name  # this very session too


def test_a_run_with_a_temporary_home_leaves_nothing_there(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV_FOLDERS and not k.startswith("PYTEST_")}
    env.update({"HOME": str(home), "PYTHONPATH": str(REPO), "TQDM_DISABLE": "1"})
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "basetemp")]
    done = subprocess.run([*command, *REPRESENTATIVE], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{len(REPRESENTATIVE)} passed" in done.stdout
    assert _files_under(home) == []  # no ~/.cache/huggingface, ~/.cache/matplotlib, ~/.config/matplotlib, ...
