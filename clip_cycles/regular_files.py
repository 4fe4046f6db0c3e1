"""Reading a file a stranger handed over: regular files only, never more than a known bound; JSON bounded too.

A FIFO, a socket or a device (``/dev/zero``, ``/dev/stdin``), directly or through a symlink,
is refused before a byte is read, so a read never hangs waiting for a writer nor streams
forever; a file larger than its bound is refused before it is read.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)
_CHUNK = 1 << 22


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(path: str | Path, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of ``path`` if it is a regular file (after symlinks) of at most ``max_bytes``.

    Raises FileNotFoundError when it does not exist and ValueError naming ``what``, the path
    and the reason when it is a FIFO, device, socket or directory, or larger than ``max_bytes``
    (checked on the open file, so a file swapped after a check is still bounded).
    """
    path = Path(path)
    # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting; it changes
    # nothing for a regular file.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise ValueError(f"{what} {path} is a directory, not a regular file") from None
    except OSError as error:
        raise ValueError(f"{what} {path} cannot be opened: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{what} {path} is {_kind(info.st_mode)}, not a regular file; only regular files are read")
        if info.st_size > max_bytes:
            raise ValueError(f"{what} {path} has {info.st_size} bytes, more than the {max_bytes} allowed for it")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while being read
                raise ValueError(f"{what} {path} grew past the {max_bytes} bytes allowed for it while being read")
        return b"".join(chunks)
    except OSError as error:
        raise ValueError(f"{what} {path} is unreadable: {error.strerror or error}") from None
    finally:
        os.close(fd)


#: The deepest nesting of arrays and objects a JSON file may have (a record of this project nests < 10).
MAX_JSON_DEPTH = 64
#: The most digits a JSON integer may have (ids, counts, seeds; HF tokenizer configs hold int(1e30), 31 digits);
#: a longer one is refused before ``int()``.
MAX_JSON_INT_DIGITS = 40

# A JSON string (with its escapes) or one bracket: strings are skipped so brackets inside them do not count.
_JSON_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JSONLimitError(ValueError):
    """A JSON text nested too deep, or holding a number too long or not finite: refused before it is parsed."""


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text``, found without recursion."""
    steps = (_DEPTH_STEP.get(m.group(), 0) for m in _JSON_STRUCTURE.finditer(text))
    return max(itertools.accumulate(steps, initial=0))


def load_json_text(
    text: str | bytes,
    what: str,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    max_int_digits: int = MAX_JSON_INT_DIGITS,
    allow_non_finite: bool = False,
) -> Any:
    """``json.loads(text)``, bounded: the one JSON parser of every file a stranger may hand over.

    Nesting deeper than ``max_depth`` is refused before parsing (so a 200,000-deep nest is a
    sentence, not a RecursionError), an integer of more than ``max_int_digits`` digits before
    ``int()``, and ``NaN``, ``Infinity`` and numbers that overflow a float unless
    ``allow_non_finite``. Raises :class:`JSONLimitError` (a ValueError) naming ``what``, and
    json.JSONDecodeError / UnicodeDecodeError for text that is not JSON.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8-sig")
    # The depth is at most the number of opening brackets (counted at C speed): a short or flat text,
    # such as a samples line, skips the scan.
    depth = 0 if text.count("[") + text.count("{") <= max_depth else json_depth(text)
    if depth > max_depth:
        raise JSONLimitError(
            f"{what} nests arrays or objects {depth} levels deep, more than the {max_depth} allowed; "
            "it is not a file this project writes or reads"
        )

    def parse_int(token: str) -> int:
        if len(token.lstrip("-")) > max_int_digits:
            raise JSONLimitError(
                f"{what} holds an integer of {len(token.lstrip('-'))} digits, more than the {max_int_digits} allowed "
                f"({token[:12]}...); give a number of at most {max_int_digits} digits"
            )
        return int(token)

    def parse_float(token: str) -> float:
        value = float(token)
        if not allow_non_finite and not math.isfinite(value):
            raise JSONLimitError(f"{what} holds the number {token[:24]!r}, too large for a float; give a finite number")
        return value

    def parse_constant(token: str) -> float:
        if not allow_non_finite:
            raise JSONLimitError(f"{what} holds {token}, which standard JSON does not allow; give a finite number or null")
        return float(token)

    return json.loads(text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant)


def read_json_file(path: str | Path, max_bytes: int, what: str = "JSON file", **limits: Any) -> Any:
    """The parsed JSON of regular file ``path`` (:func:`read_regular_file`, then :func:`load_json_text`).

    Raises FileNotFoundError, or ValueError naming ``what`` and the path (not valid JSON, too
    deep, a number too long; see :func:`load_json_text` for ``limits``).
    """
    raw = read_regular_file(path, max_bytes, what)
    try:
        return load_json_text(raw, f"{what} {path}", **limits)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{what} {path} is not valid JSON: {error}") from None
