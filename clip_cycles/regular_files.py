"""Reading a file a stranger handed over: regular files only, never more than a known bound.

A FIFO, a socket or a device (``/dev/zero``, ``/dev/stdin``), directly or through a symlink,
is refused before a byte is read, so a read never hangs waiting for a writer nor streams
forever; a file larger than its bound is refused before it is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

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
