"""One image to encode: a key (its file relative to the source root) and its path or bytes; and its decoding.

Reading is bounded (:data:`MAX_IMAGE_BYTES`, regular files only: a FIFO or a symlink to
``/dev/zero`` is refused by name, never waited on). Decoding (:func:`decode_rgb`) turns every
PIL mode into the 8-bit RGB image it shows:

- 16-bit grayscale (``I;16``, ``I;16B``, ``I;16L``, and ``I`` holding 0..65535) is scaled
  to 8 bits (``round(v * 255 / 65535)``), never clipped (PIL's own ``convert("RGB")`` clips
  every value above 255 to white);
- images with transparency (``RGBA``, ``LA``, ``PA``, ``P`` or ``L``/``RGB`` with a
  ``transparency`` entry) are composited over white, as transformers' ``convert_to_rgb`` does;
- ``CMYK``, ``YCbCr``, ``1``, ``L``, ``P`` convert with PIL's standard formulas;
- 32-bit float (``F``), signed 16-bit and ``I`` values outside 0..65535 are refused by name
  (no faithful 8-bit view exists without a choice of range).

The EXIF orientation tag is *not* applied: the reference pipelines the backends reproduce
(OpenCLIP's and clip_benchmark's ``Image.open(...).convert("RGB")``, transformers' image
processors given a PIL image) score the pixels as stored, so clip_cycles does the same and
its numbers stay comparable to theirs. :data:`IMAGE_DECODING` names these rules and enters
the feature-cache key, so features decoded under older rules are never served.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clip_cycles.regular_files import read_regular_file

#: An image file larger than this is refused (no photo in COCO, GQA or Winoground comes near).
MAX_IMAGE_BYTES = 256 << 20
#: The decoding rules of :func:`decode_rgb`; part of the feature-cache key.
IMAGE_DECODING = "rgb8-v2:16bit-scaled,alpha-over-white,exif-orientation-ignored"

_SIXTEEN_BIT_MODES = frozenset({"I;16", "I;16B", "I;16L", "I;16N"})
_ALPHA_MODES = frozenset({"RGBA", "LA", "PA", "La", "RGBa"})
_SKIP_HINT = "pass --skip-bad-images to count and skip it"


@dataclass(frozen=True)
class ImageItem:
    """One image: ``key`` names it (file relative to the source root), ``path`` or ``data`` holds it."""

    key: str
    path: Path | None = None
    data: bytes | None = None

    def read_bytes(self) -> bytes:
        """The image file's bytes: a regular file of at most :data:`MAX_IMAGE_BYTES`, not empty."""
        if self.data is not None:
            data = self.data
        elif self.path is None:
            raise ValueError(f"image {self.key!r} has neither a path nor bytes")
        else:
            try:
                data = read_regular_file(self.path, MAX_IMAGE_BYTES, "image file")
            except FileNotFoundError as error:
                raise FileNotFoundError(f"image {self.key!r} not found at {self.path}") from error
            except ValueError as error:
                raise ValueError(f"image {self.key!r}: {error}; restore it or {_SKIP_HINT}") from None
        if not data:
            where = f" at {self.path}" if self.path is not None else " (embedded)"
            raise ValueError(f"image {self.key!r}{where} is an empty (0-byte) file; restore it or {_SKIP_HINT}")
        return data


def decode_errors() -> tuple[type[BaseException], ...]:
    """Every error PIL raises on a file it cannot decode: OSError (UnidentifiedImageError, a truncated file),
    ValueError, SyntaxError and EOFError (malformed chunks), IndexError and struct.error (lying headers),
    and DecompressionBombError (more pixels than PIL allows). ``--skip-bad-images`` counts each one."""
    from PIL import Image

    return (OSError, ValueError, SyntaxError, EOFError, IndexError, struct.error, Image.DecompressionBombError)


def _sixteen_bit_to_8(values: np.ndarray) -> np.ndarray:
    # round(v * 255 / 65535) in integers: 0 -> 0, 65535 -> 255, monotone, no clipping.
    return ((values.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)


def decode_rgb(image: Any, label: str = "image") -> Any:
    """The 8-bit RGB PIL image that ``image`` (an opened PIL image) shows; ValueError names ``label``.

    The rules are the module docstring's (16-bit scaled, transparency over white, EXIF
    orientation not applied, float and out-of-range integer images refused).
    """
    from PIL import Image

    mode = image.mode
    if mode == "RGB" and "transparency" not in image.info:
        return image
    if mode in _SIXTEEN_BIT_MODES or mode == "I":
        values = np.asarray(image)
        if values.dtype.kind not in "ui" or (values.dtype.kind == "i" and mode != "I"):
            raise ValueError(f"{label} has {mode} pixels of type {values.dtype}; save it as 8- or 16-bit unsigned")
        if values.size and (int(values.min()) < 0 or int(values.max()) > 65535):
            raise ValueError(
                f"{label} has 32-bit integer pixels from {int(values.min())} to {int(values.max())}, outside 0..65535; "
                "save it as 8- or 16-bit"
            )
        return Image.fromarray(_sixteen_bit_to_8(values), mode="L").convert("RGB")
    if mode in ("F", "I;16S", "I;32", "I;32S"):
        raise ValueError(f"{label} has {mode} pixels (floating point or signed); save it as 8- or 16-bit unsigned")
    if mode in _ALPHA_MODES or "transparency" in image.info:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def open_rgb(data: bytes, label: str = "image") -> Any:
    """Decode image bytes fully (``load()``) to 8-bit RGB with :func:`decode_rgb`."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return decode_rgb(image, label)
