"""Writing task YAML files into a tasks root (``<root>/cycles/<name>.yaml``), for registry tests."""

from __future__ import annotations

from pathlib import Path


def write_task_file(root: Path, name: str, text: str) -> Path:
    """Write ``text`` as the task file ``cycles/<name>.yaml`` under ``root`` (parents made) and return its path."""
    path = root / "cycles" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
