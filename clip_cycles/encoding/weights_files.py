"""Weights files checked before any library loads them: regular files, and safetensors headers that fit the file.

A safetensors file starts with an 8-byte little-endian header length and a JSON header
naming each tensor's dtype, shape and byte range; loaders allocate what the header says.
:func:`check_weights_file` reads that header (bounded, :func:`clip_cycles.regular_files.load_json_text`)
and compares every declared size with the bytes the file holds, so a lying header (a 2^40-byte
tensor in a 1 kB file) is a sentence, not an allocation. A weights path that is a FIFO, a device
(a link to ``/dev/zero``) or a socket is refused by name before it is opened for reading.
"""

from __future__ import annotations

import json
import math
import os
import stat
import struct
from pathlib import Path
from typing import Any

from clip_cycles.regular_files import load_json_text

#: Suffixes of the weights files a model folder may hold (safetensors, torch checkpoints).
WEIGHTS_SUFFIXES: tuple[str, ...] = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
#: The largest safetensors header read (the format's own limit is 100 MB).
MAX_SAFETENSORS_HEADER_BYTES = 100 * 1024 * 1024
#: Bytes per element of each safetensors dtype.
DTYPE_BYTES: dict[str, int] = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
_FIX = "download or export it again (safetensors.torch.save_file writes a valid one)"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def check_regular_weights(path: str | Path, what: str = "weights file") -> int:
    """The size of ``path`` when it is a regular file (after links); ValueError naming it otherwise."""
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} does not exist") from None
    except OSError as error:
        raise ValueError(f"{what} {path} cannot be read: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        target = f" (a link to {os.path.realpath(path)})" if path.is_symlink() else ""
        raise ValueError(
            f"{what} {path}{target} is {_kind(info.st_mode)}, not a regular file; "
            "weights are read only from regular files: point at the real weights file"
        )
    return info.st_size


def check_safetensors_header(path: str | Path, size: int, what: str = "weights file") -> dict[str, Any]:
    """The parsed header of safetensors file ``path`` (of ``size`` bytes), every tensor's size checked against the file.

    Raises ValueError naming the file and the tensor when a declared range or shape does not fit.
    """
    path = Path(path)
    if size < 8:
        raise ValueError(f"{what} {path} has {size} bytes, too few for a safetensors file; {_FIX}")
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > min(size - 8, MAX_SAFETENSORS_HEADER_BYTES):
            raise ValueError(
                f"{what} {path} declares a {length}-byte header but holds {size} bytes "
                f"(at most {MAX_SAFETENSORS_HEADER_BYTES} allowed); the header lies or the file is truncated: {_FIX}"
            )
        raw = handle.read(length)
    try:
        header = load_json_text(raw, f"the header of {what} {path}")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{what} {path} has a header that is not valid JSON ({error}); {_FIX}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{what} {path} has a header that is not a JSON object; {_FIX}")
    data_bytes = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        problem = _tensor_problem(entry, data_bytes)
        if problem is not None:
            raise ValueError(f"{what} {path}: tensor {name!r} {problem}; the header lies or the file is truncated: {_FIX}")
    return header


def _tensor_problem(entry: Any, data_bytes: int) -> str | None:
    """Why a header entry cannot describe a tensor within ``data_bytes`` of data, else None."""
    if not isinstance(entry, dict):
        return "is not an object with dtype, shape and data_offsets"
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        return f"has dtype {dtype!r}, not one of {sorted(DTYPE_BYTES)}"
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        return f"has shape {shape!r}, not a list of non-negative integers"
    ints = isinstance(offsets, list) and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
    if not ints or len(offsets) != 2 or not 0 <= offsets[0] <= offsets[1]:
        return f"has data_offsets {offsets!r}, not [begin, end] with 0 <= begin <= end"
    declared = math.prod(shape) * DTYPE_BYTES[dtype]
    if offsets[1] > data_bytes:
        return f"ends at byte {offsets[1]} of the data, but the file holds {data_bytes} bytes of data"
    if declared != offsets[1] - offsets[0]:
        return f"declares {declared} bytes ({dtype} of shape {shape}) in a range of {offsets[1] - offsets[0]} bytes"
    return None


def check_weights_file(path: str | Path, what: str = "weights file") -> None:
    """Refuse, by name, a weights file that is not a regular file or a safetensors file whose header does not fit it."""
    size = check_regular_weights(path, what)
    if str(path).endswith(".safetensors"):
        check_safetensors_header(path, size, what)


def check_weights_folder(folder: str | Path) -> None:
    """:func:`check_weights_file` on every weights file at the top of ``folder`` (an HF or ``local-dir:`` folder)."""
    folder = Path(folder)
    for path in sorted(folder.iterdir()):
        if path.name.endswith(WEIGHTS_SUFFIXES):
            check_weights_file(path)


def require_file(folder: str | Path, name: str, fix: str, what: str = "model folder") -> None:
    """ValueError naming ``folder/name`` and ``fix`` when that regular file is missing."""
    path = Path(folder) / name
    if not path.exists():
        raise ValueError(f"{what} {folder} has no {name} ({path} is missing); {fix}")
    check_regular_weights(path, f"{what} file")
