"""The tree is `ruff format`-ed and `ruff check`-clean (issue 27): CI runs both through this file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:  # pragma: no cover - the test extras install ruff
        pytest.fail("ruff is not installed: pip install -e '.[test]'")


def test_tree_is_formatted() -> None:
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, "run `ruff format .`; these files differ:\n" + result.stdout + result.stderr


def test_tree_passes_ruff_check() -> None:
    result = _ruff("check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_format_check_trips_on_an_unformatted_file(tmp_path: Path) -> None:
    # The check must be able to fail: a file ruff would rewrite is reported, with the tree's settings.
    (tmp_path / "ruff.toml").write_text((ROOT / "ruff.toml").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "bad.py").write_text("x = {  'a':1,\n'b' :2 }\n\n\n\n\ndef f( ):\n  return x\n", encoding="utf-8")
    result = _ruff("format", "--check", ".", cwd=tmp_path)
    assert result.returncode == 1 and "bad.py" in (result.stdout + result.stderr)
