"""One image to encode: a key (its file relative to the source root) and its path or bytes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ImageItem:
    """One image: ``key`` names it (file relative to the source root), ``path`` or ``data`` holds it."""

    key: str
    path: Path | None = None
    data: bytes | None = None

    def read_bytes(self) -> bytes:
        if self.data is not None:
            data = self.data
        elif self.path is None:
            raise ValueError(f"image {self.key!r} has neither a path nor bytes")
        else:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError as error:
                raise FileNotFoundError(f"image {self.key!r} not found at {self.path}") from error
            except OSError as error:
                raise ValueError(f"image {self.key!r} at {self.path} is unreadable: {error}") from error
        if not data:
            where = f" at {self.path}" if self.path is not None else " (embedded)"
            raise ValueError(
                f"image {self.key!r}{where} is an empty (0-byte) file; restore it or pass --skip-bad-images to count and skip it"
            )
        return data
