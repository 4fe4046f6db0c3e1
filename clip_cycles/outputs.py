"""The one output policy: how every file the project writes reaches the disk.

- A regular file (or a missing one) is written whole or not at all: into a pid-tagged sibling
  ``<name>.tmp-<pid>-<ns>``, then ``os.replace``; siblings left by dead processes are removed by
  the next write of the same name.
- An existing FIFO or character device (``/dev/null``, ``/dev/stdout``, a named pipe with a
  reader) is written to as a stream and never replaced; a socket, a block device or a FIFO with
  no reader is refused with a sentence.
- A set of files (a page site, an audit's ``.json``/``.md``/``.png``) is a transaction
  (:func:`write_file_set`): staged in ``.<folder>.building-<pid>`` beside the folder, then swapped
  in with one atomic exchange of the two folders (two renames where the system has no
  exchange), so a kill at any moment leaves the old set or the new set.
- A folder a builder fills itself (a dataset folder, a shapes world, a task's cached build) is
  staged the same way: :func:`staging_folder` gives the fresh ``.<name>.building-<pid>`` (after
  :func:`recover_sets` cleaned up what dead processes left), :func:`replace_folder` swaps it in.
- A folder that cannot be swapped (:func:`unswappable_reason`: the working folder, a mount point, a
  parent refusing writes; or a swap refused with EBUSY) is written inside: staged in full in a hidden
  folder within it, then a manifest, then each file renamed into place (:data:`INSIDE_GUARANTEE`: per
  file, not per set; a set killed midway is finished by the next write's :func:`recover_sets`).
- Every path a command will write is planned before the work (:func:`plan_outputs`): two outputs
  that name one file, or an output that names an input, are refused with a sentence.
- Every OS error (no space, quota, read-only, permission, name too long, a loop of links, a
  folder or file in the way) is an :class:`OutputError`: an OSError and a ValueError, so every
  entry point reports it as one sentence naming the path and what to do (exit 2).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import time
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

logger = logging.getLogger(__name__)

#: The longest path the system accepts (Linux PATH_MAX) and the longest name of one entry.
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255

#: errno -> what the environment refused, for the sentence.
_REASONS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENAMETOOLONG: "the path is too long for the file system",
    errno.ELOOP: "the path loops through symbolic links",
    errno.EISDIR: "a folder is in the way",
    errno.ENOTDIR: "a file is in the way where a folder is needed",
}
DEFAULT_HINT = "free space there, fix the permissions or choose another path; any previous output was left as it was"


class OutputError(OSError, ValueError):
    """The environment refused a write: one sentence naming the path and what to do.

    An OSError (code that tolerates failed writes still does) and a ValueError (every entry
    point reports it as a sentence, exit 2, never a traceback).
    """


def output_error(error: OSError, path: str | os.PathLike[str], hint: str = DEFAULT_HINT) -> OSError:
    """``error`` as an :class:`OutputError` naming ``path`` and ``hint`` when it is one the environment
    caused (see ``_REASONS``); any other error, or one already named, is returned as it was."""
    if isinstance(error, OutputError) or error.errno not in _REASONS:
        return error
    named = OutputError(f"{_REASONS[error.errno]} while writing {path}; {hint}")
    named.errno = error.errno
    return named


def check_path_length(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Refuse a path over :data:`MAX_PATH_BYTES` or with a name over :data:`MAX_NAME_BYTES` with a sentence."""
    raw = os.fsencode(os.fspath(path))
    if len(raw) > MAX_PATH_BYTES:
        raise _too_long(f"{what} path of {len(raw)} bytes ({_short(raw)}) is longer than the {MAX_PATH_BYTES} the system accepts")
    for part in raw.split(b"/"):
        if len(part) > MAX_NAME_BYTES:
            raise _too_long(
                f"{what} {_short(raw)}: the name {_short(part)} has {len(part)} bytes, "
                f"more than the {MAX_NAME_BYTES} a file system accepts for one name"
            )
    return Path(path)


def _short(raw: bytes) -> str:
    text = os.fsdecode(raw)
    return text if len(text) <= 80 else f"{text[:40]}...{text[-30:]}"


def _too_long(message: str) -> OutputError:
    error = OutputError(f"{message}; choose a shorter path")
    error.errno = errno.ENAMETOOLONG
    return error


_KINDS = (
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISCHR, "char"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISBLK, "block"),
    (stat.S_ISDIR, "dir"),
)


def _special_kind(path: Path) -> str | None:
    """What ``path`` (after symlinks) is when it exists and is neither a regular file nor missing."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ENOTDIR:
            return None  # reported when written
        raise
    if stat.S_ISREG(mode):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return "other"


def is_stream(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` exists as a FIFO or character device (after symlinks): written as a stream, never replaced."""
    try:
        return _special_kind(Path(path)) in ("fifo", "char")
    except OSError:
        return False


class OutputCollision(ValueError):
    """Two outputs of one command name the same file, or an output names an input: refused before any work."""


def _file_identity(path: Path) -> tuple[object, ...]:
    """What makes two paths one file: an existing one's device and inode (so symbolic and hard links meet),
    else its absolute path with every symbolic link of its folders resolved."""
    try:
        info = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    return ("inode", info.st_dev, info.st_ino)


def plan_outputs(
    writes: Mapping[str, str | os.PathLike[str] | None], reads: Mapping[str, str | os.PathLike[str] | None] | None = None
) -> dict[str, Path]:
    """The one output plan of a command: every path it will write, checked against each other and its inputs.

    ``writes`` maps what names an output (``"--samples"``, ``"the detail file of --output"``) to its
    path, ``reads`` maps each input (``"A"``, ``"--features"``) to its path; ``None`` is an output or
    input not asked for. Two writes that name one file (the same path, a symbolic or a hard link to
    it), or a write that names an input, are an :class:`OutputCollision` sentence naming both, before
    any work. Streams (``/dev/null``, a FIFO) are written into and never replaced, so they may be shared.
    Returns each write as a :class:`~pathlib.Path`.
    """
    owners: dict[tuple[object, ...], tuple[str, str, bool]] = {}
    for label, path in (reads or {}).items():
        if path is not None and not is_stream(path):
            owners.setdefault(_file_identity(Path(path)), (label, os.fspath(path), True))
    planned: dict[str, Path] = {}
    for label, path in writes.items():
        if path is None:
            continue
        planned[label] = Path(path)
        if is_stream(path):
            continue
        key = _file_identity(Path(path))
        if key in owners:
            other, other_path, is_input = owners[key]
            if is_input:
                raise OutputCollision(
                    f"{label} {os.fspath(path)} is the input {other} ({other_path}): an output never replaces "
                    f"what its command reads; give {label} another path"
                )
            raise OutputCollision(
                f"{other} {other_path} and {label} {os.fspath(path)} name the same file: one would overwrite the "
                "other; give each its own path"
            )
        owners[key] = (label, os.fspath(path), False)
    return planned


def _stream(path: Path, data: bytes, kind: str, what: str) -> None:
    """Write ``data`` into an existing FIFO or character device without ever replacing it."""
    if kind in ("socket", "block", "other"):
        name = {"socket": "a socket", "block": "a block device", "other": "not a regular file"}[kind]
        raise OutputError(f"{what} {path} is {name}; it is never written nor replaced: choose a regular file")
    if kind == "dir":
        raise OutputError(f"{what} {path} is a folder; name a file inside it")
    flags = os.O_WRONLY | getattr(os, "O_NOCTTY", 0)
    if kind == "fifo":
        flags |= os.O_NONBLOCK  # no reader: refused at once instead of waiting forever
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ENXIO:
            message = f"{what} {path} is a FIFO with no reader; start its reader first or choose a regular file"
            raise OutputError(message) from None
        raise output_error(error, path) from None
    try:
        if kind == "fifo":
            os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as error:
        if error.errno == errno.EPIPE:
            message = f"{what} {path}: its reader went away before everything was written; run again with a reader"
            raise OutputError(message) from None
        raise output_error(error, path) from None
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return pid > 0


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Remove ``<name>.tmp-<pid>-<ns>`` siblings of ``path`` left by processes that are gone (or this one)."""
    removed: list[Path] = []
    prefix = f"{path.name}.tmp-"
    try:
        entries = [entry for entry in os.scandir(path.parent if str(path.parent) else ".") if entry.name.startswith(prefix)]
    except OSError:
        return removed
    for entry in entries:
        pid = entry.name[len(prefix) :].split("-", 1)[0]
        if not pid.isdigit() or (int(pid) != os.getpid() and _pid_alive(int(pid))):
            continue
        try:
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


def _temporary_name(path: Path) -> Path:
    suffix = f".tmp-{os.getpid()}-{time.monotonic_ns()}"
    name = path.name
    while len(os.fsencode(name + suffix)) > MAX_NAME_BYTES:
        name = name[:-1]
    return path.with_name(name + suffix)


def _write_new_file(path: Path, data: bytes, durable: bool = True) -> None:
    """Create ``path`` (never an existing name, never through a link), write all of ``data``, sync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic_raw(path: Path, data: bytes, *, durable: bool = True, sweep: bool = True) -> None:
    """The policy without sentences: a FIFO or character device is streamed into, anything else is written
    through a temporary sibling and ``os.replace``; OS errors are raised as they are (callers name them)."""
    kind = _special_kind(path)
    if kind is not None:
        _stream(path, data, kind, "output")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if sweep:
        remove_stale_temporaries(path)
    tmp = _temporary_name(path)
    try:
        _write_new_file(tmp, data, durable)
        os.replace(tmp, path)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        except OSError:
            pass


def cache_record_replaceable(record: str | os.PathLike[str]) -> bool:
    """Whether a cache may (re)write ``record``: nothing is there yet, or a regular file (a cache's own kind).

    A FIFO, a device or a symbolic link someone put at a record's place is neither written into
    (a FIFO without a reader would hang the run) nor replaced: the cache leaves it and recomputes.
    """
    try:
        return stat.S_ISREG(os.lstat(record).st_mode)
    except OSError:  # absent, or its folder unreachable: the write itself says what is wrong
        return True


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> None:
    """:func:`write_atomic_raw` for callers that name their own errors (:func:`output_error`).

    ``durable=False`` skips the ``fsync`` and the sweep of dead processes' temporaries: for cache
    files whose checksum every read verifies (feature shards, cached audits), where a file a crash
    left torn is detected, deleted and recomputed.
    """
    write_atomic_raw(Path(path), data, durable=durable, sweep=durable)


def write_output(
    path: str | os.PathLike[str], data: bytes, *, what: str = "output", hint: str = DEFAULT_HINT, durable: bool = True
) -> Path:
    """Write ``data`` to ``path`` under the policy; any OS error is an :class:`OutputError` sentence.

    A regular or missing ``path`` gets the whole new content or keeps its old one; a FIFO or a
    character device is streamed into and stays what it was.
    """
    path = check_path_length(path, what)
    try:
        write_atomic_raw(path, data, durable=durable)
    except OutputError:
        raise
    except OSError as error:
        named = output_error(error, path, hint)
        if named is error:
            raise OutputError(f"could not write {what} {path}: {error.strerror or error}; {hint}") from error
        raise named from None
    return path


def write_text_output(path: str | os.PathLike[str], text: str, *, what: str = "output", hint: str = DEFAULT_HINT) -> Path:
    """:func:`write_output` of ``text`` in UTF-8."""
    return write_output(path, text.encode("utf-8"), what=what, hint=hint)


def write_outputs(files: Mapping[str | os.PathLike[str], bytes], *, what: str = "output", hint: str = DEFAULT_HINT) -> None:
    """Write several files that may lie in different folders: all or none for every error.

    A target that already holds exactly its new bytes (a regular file of one link: a rerun's result) is
    left as it is. Every other regular (or missing) target's bytes are first written and synced to its temporary
    sibling; only when all are on disk are they renamed into place, in the order of ``files``
    (streams are written last). A full disk, a quota or a refused folder before the renames
    leaves every previous file as it was and no temporary behind; a rename that fails puts
    back the files already renamed (each previous file was kept as a hard link until then).
    A kill during the renames (after every file is on disk) can leave the first files of the
    order renamed and the rest old: callers order the files so that a reader detects that
    (``eval`` renames the samples file first, then each result's detail, then its JSON, which
    names the samples by sha256).
    """
    staged: list[tuple[Path, Path]] = []
    streams: list[tuple[Path, bytes, str]] = []
    kept: dict[Path, Path | None] = {}  # target -> hard link of its previous file (None: there was none)
    renamed: list[Path] = []
    current: Path | None = None
    try:
        for name, data in files.items():
            path = current = check_path_length(name, what)
            kind = _special_kind(path)
            if kind is not None:
                streams.append((path, data, kind))
                continue
            if _holds_already(path, data):  # a rerun's identical file: nothing to write, sync or rename
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(path)
            tmp = _temporary_name(path)
            staged.append((tmp, path))
            _write_new_file(tmp, data)
        for _, path in staged:
            kept[path] = _keep_previous(path)
        for tmp, path in staged:
            current = path
            os.replace(tmp, path)
            renamed.append(path)
        renamed = []  # every rename done: nothing to put back
        for path, data, kind in streams:
            current = path  # the error names the stream, not the last file renamed
            written = [str(target) for _, target in staged]
            if written:  # every file is in place by now: the hint must not say they were left as they were
                hint = f"{', '.join(written)} hold the new content; {path} did not receive it all: write it again"
            _stream(path, data, kind, what)
    except OutputError:
        raise
    except OSError as error:
        unrestored = _put_back(renamed, kept)
        if unrestored:
            hint = (
                f"the files renamed before the error could not all be put back ({', '.join(map(str, unrestored))} "
                "hold the new content); run again once the cause is fixed"
            )
        named = output_error(error, current or "", hint)
        if named is error:
            raise OutputError(f"could not write {what} {current}: {error.strerror or error}; {hint}") from error
        raise named from None
    finally:
        for tmp, _ in staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        for link in kept.values():
            if link is not None:
                try:
                    os.unlink(link)
                except OSError:
                    pass


def _holds_already(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a regular file of one link (not a symbolic link) that holds exactly ``data``.

    Such a file is left alone by :func:`write_outputs`: rewriting it would give the same bytes at the cost
    of a sync and a rename per file (most of a warm evaluation's writing). A file with other links is
    rewritten as before (the rename gives this path its own file), and any error reading it means "no".
    """
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_size != len(data):
            return False
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        held = bytearray()
        while len(held) <= len(data):  # one byte past the expected size tells a file that grew since the stat
            chunk = os.read(fd, max(len(data) + 1 - len(held), 1))
            if not chunk:
                break
            held += chunk
        return bytes(held) == data
    except OSError:
        return False
    finally:
        os.close(fd)


def _keep_previous(path: Path) -> Path | None:
    """A hard link to ``path``'s previous regular file (a temporary sibling name, swept if this process dies), or None."""
    if not os.path.isfile(path) or os.path.islink(path):
        return None
    link = _temporary_name(path)
    try:
        os.link(path, link)
    except OSError:  # a file system without hard links: a copy (results and samples are small)
        shutil.copy2(path, link)
    return link


def _put_back(renamed: Sequence[Path], kept: Mapping[Path, Path | None]) -> list[Path]:
    """Undo ``renamed`` (newest first): each previous file back from its link, a new file removed; the paths left new."""
    left = []
    for path in reversed(renamed):
        previous = kept.get(path)
        try:
            if previous is None:
                os.unlink(path)
            else:
                os.replace(previous, path)
        except OSError:
            left.append(path)
    return left


# --- sets of files: staged beside the folder, swapped in whole ------------------------------------------------

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange_paths(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where the system cannot."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), os.fspath(a))


def set_target(folder: str | os.PathLike[str], what: str = "--out") -> Path:
    """The folder a set (or a build of ``--out folder``) replaces: ``folder`` itself, or the folder a symlink
    ``folder`` points to.

    A symlinked folder is followed so the link keeps pointing at the rewritten folder (the target
    is replaced; the link is never turned into a folder), and the staging folder sits beside the
    target, on its file system, where the final rename must happen. A path too long for the
    system, or one the system cannot look at, is an :class:`OutputError` naming ``what``.
    """
    folder = check_path_length(folder, what)
    try:
        return Path(os.path.realpath(folder)) if folder.is_symlink() else folder
    except OSError as error:
        raise _named(error, folder, what, DEFAULT_HINT) from None


def _named(error: OSError, path: str | os.PathLike[str], what: str, hint: str) -> OutputError:
    """``error`` as one :class:`OutputError` sentence naming ``path`` (a generic one where ``_REASONS`` has none)."""
    named = output_error(error, path, hint)
    if isinstance(named, OutputError):
        return named
    generic = OutputError(f"could not write {what} {path}: {error.strerror or error}; {hint}")
    generic.errno = error.errno
    return generic


def remove_stale_staging(parent: Path, prefixes: Iterable[str]) -> list[Path]:
    """Remove ``parent/<prefix><pid>`` entries left by processes that are gone (a build killed with ``kill -9``).

    A live process's staging folder is never touched, nor is a name whose suffix is not a
    pid; this process's own leftovers are removed. Returns the removed paths.
    """
    removed: list[Path] = []
    if not parent.is_dir():
        return removed
    for prefix in prefixes:
        for path in _named_from(parent, prefix):
            pid = path.name[len(prefix) :]
            if not pid.isdigit() or (int(pid) != os.getpid() and _pid_alive(int(pid))):
                continue
            if path.is_symlink() or not path.is_dir():
                path.unlink(missing_ok=True)
            else:
                shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _named_from(parent: Path, prefix: str) -> list[Path]:
    """The entries of ``parent`` whose names start with ``prefix``, sorted (the prefix is text, never a glob pattern:
    a folder named ``run[1]`` or ``a*b`` matches only its own leftovers); none where ``parent`` cannot be listed."""
    try:
        return sorted(path for path in parent.iterdir() if path.name.startswith(prefix))
    except OSError:
        return []


def recover_sets(target: Path) -> list[Path]:
    """Finish or undo what a dead process left beside ``target``: an old folder swapped out but not back
    in is put back, staging and old folders are removed. Inside ``target`` (a folder written in place,
    :func:`unswappable_reason`), a dead process's set whose manifest was written is moved in the rest of
    the way, and a staging folder without one is removed. Returns the removed or restored paths."""
    parent = target.parent
    touched: list[Path] = []
    if not parent.is_dir():
        return touched
    for prefix in (f".{target.name}.old-", f".{target.name}.building-"):
        for path in _named_from(parent, prefix):
            pid = path.name[len(prefix) :]
            if not pid.isdigit() or (int(pid) != os.getpid() and _pid_alive(int(pid))):
                continue
            if prefix.endswith(".old-") and not os.path.lexists(target) and path.is_dir():
                os.replace(path, target)  # killed between the two renames: the old set comes back
            elif path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            touched.append(path)
    if target.is_dir() and not target.is_symlink():
        touched += _recover_inside(Path(os.path.abspath(target)))
    return touched


#: A staging folder's name (:func:`staging_folder`): the target's name between a dot and ``.building-<pid>``.
_STAGED = re.compile(r"\.(.+)\.building-\d+")


def staging_folder(target: Path) -> Path:
    """A fresh, empty ``.<name>.building-<pid>`` beside ``target`` (its parents made), after :func:`recover_sets`
    cleaned up (or put back) what dead processes left beside it.

    Where ``target`` cannot be swapped (:func:`unswappable_reason`: a mount point, a parent that is not
    writable), the staging folder is made inside it instead and :func:`replace_folder` moves its files
    in one by one. OS errors are :class:`OutputError` sentences.
    """
    try:
        recover_sets(target)
        why = unswappable_reason(target)
        inside = _inside_names(Path(os.path.abspath(target)), os.getpid())[0]
        staging = inside if why else target.parent / f".{target.name}.building-{os.getpid()}"
        if staging.exists():
            shutil.rmtree(staging)
        try:
            staging.mkdir(parents=True)
        except OSError as error:
            if why or error.errno not in _UNSWAPPABLE or not target.is_dir():
                raise
            staging = inside  # no room beside the folder (a parent refusing writes): stage inside it
            if staging.exists():
                shutil.rmtree(staging)
            staging.mkdir()
    except OSError as error:
        raise _named(error, target, "output folder", DEFAULT_HINT) from None
    return staging


def staged_name(folder: Path) -> str:
    """The name ``folder`` will have once swapped into place: its target's name for a folder made by
    :func:`staging_folder` (``.<name>.building-<pid>``), else its own name.

    A writer that records its folder's name (a card's ``load_dataset("<name>")``) records this one, so the
    same build writes the same bytes whichever process staged it.
    """
    match = _STAGED.fullmatch(folder.name)
    return match.group(1) if match else folder.name


def replace_folder(staging: Path, target: Path) -> None:
    """Move the filled ``staging`` folder into place as ``target``, never leaving a moment without ``target``.

    A new ``target`` is one rename; an existing one is exchanged with ``staging`` in one atomic
    step (then removed), or, where the system has no exchange, renamed to ``.<name>.old-<pid>``
    and replaced (a kill between those two renames is undone by the next :func:`recover_sets`).
    A staging folder made inside ``target`` (:func:`staging_folder` on a folder that cannot be
    swapped), or a target the system refuses to rename (EBUSY: a mount point), has its files moved
    in one by one under a manifest (:func:`_move_in`); the other OS errors are raised as they are,
    for the caller to name.
    """
    absolute = Path(os.path.abspath(target))
    if Path(os.path.abspath(staging)).parent == absolute:
        _commit_inside(absolute, staging, True, unswappable_reason(absolute) or "it could not be renamed", "output folder")
        return
    if not target.exists():
        os.replace(staging, target)
        return
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    if old.exists():
        shutil.rmtree(old)
    try:
        if exchange_paths(staging, target):  # after the exchange the staging name holds the old folder
            shutil.rmtree(staging, ignore_errors=True)
            return
        os.replace(target, old)
    except OSError as error:
        if error.errno not in (errno.EBUSY, errno.EXDEV):
            raise
        # The folder itself cannot move (a bind mount os.path.ismount does not see): its files are moved in.
        inside = _inside_names(absolute, os.getpid())[0]
        shutil.rmtree(inside, ignore_errors=True)
        shutil.copytree(staging, inside, symlinks=True)
        shutil.rmtree(staging, ignore_errors=True)
        _commit_inside(absolute, inside, True, f"it could not be renamed: {error.strerror or error}", "output folder")
        return
    try:
        os.replace(staging, target)
    except BaseException:
        try:
            os.replace(old, target)  # the second rename failed: the old folder goes back at once
        except OSError as undo:
            raise OutputError(
                f"could not move the new {target} into place, nor the previous one back ({undo.strerror or undo}); "
                f"the previous folder is {old}, and the next write to {target} puts it back"
            ) from undo
        raise
    shutil.rmtree(old, ignore_errors=True)


# --- a folder that cannot be swapped (a mount point, a read-only parent): written inside, file by file ----------

#: The errors of a swap that mean "stage inside the folder instead": it cannot be renamed (a mount point, another
#: file system) or nothing can be made beside it (a parent not writable, or on a read-only file system).
_UNSWAPPABLE = (errno.EBUSY, errno.EXDEV, errno.EACCES, errno.EPERM, errno.EROFS)
#: The longest manifest a recovery reads (a stranger's planted file is ignored past it).
_MAX_MANIFEST_BYTES = 64 << 20
#: What the message says holds for a folder written in place.
INSIDE_GUARANTEE = (
    "every file was staged in full inside it first, then moved into place one by one: each file is whole, "
    "a reader during the moves may see old and new files together, and a run killed midway is finished by the "
    "next write of this folder"
)


def unswappable_reason(target: str | os.PathLike[str]) -> str | None:
    """Why the existing folder ``target`` cannot be replaced by a rename beside it, or None where it can.

    The working folder (or one above it) is never swapped out from under the process; a mount point
    cannot be renamed (EBUSY); a parent that refuses writes has no room for a staging folder.
    """
    target = Path(os.path.abspath(target))
    if not target.is_dir():
        return None
    cwd = Path(os.getcwd())
    if target == target.parent:
        return "it is the root folder"
    if target == cwd or target in cwd.parents:
        return "it is the working folder or holds it"
    if os.path.ismount(target):
        return "it is a mount point"
    if not os.access(target.parent, os.W_OK | os.X_OK):
        return "its parent folder is not writable"
    return None


def _inside_names(target: Path, pid: int) -> tuple[Path, Path, Path]:
    """A set written inside ``target`` by process ``pid``: the folder it is staged in, the folder its files are
    moved from once complete (the staging folder renamed, so a builder's clean-up of its staging folder never
    takes them), and the manifest."""
    name = target.name or "root"
    return target / f".{name}.building-{pid}", target / f".{name}.moving-{pid}", target / f".{name}.manifest-{pid}.json"


def _own_entry(name: str, target: Path) -> bool:
    """Whether ``name`` (an entry of ``target``) is a staging folder, a moving folder or a manifest of a set."""
    prefix = f".{target.name or 'root'}."
    return name.startswith(prefix) and any(tag in name for tag in (".building-", ".moving-", ".manifest-"))


def _staged_files(staging: Path) -> list[str]:
    """Every file (and link) under ``staging``, as sorted relative paths."""
    found = []
    for folder, dirs, names in os.walk(staging):
        base = Path(folder).relative_to(staging)
        found += [(base / n).as_posix() for n in names]
        found += [(base / d).as_posix() for d in dirs if os.path.islink(os.path.join(folder, d))]
    return sorted(found)


def _safe_name(name: object) -> bool:
    return isinstance(name, str) and bool(name) and not Path(name).is_absolute() and ".." not in Path(name).parts


def _move_in(target: Path, moving: Path, manifest: Path) -> None:
    """Move each file the manifest names from ``moving`` into ``target`` (each one an atomic rename), remove the
    others when it says so, then the moving folder and the manifest. Files already moved (a run killed midway)
    are skipped, so running it again finishes the set."""
    plan = json.loads(manifest.read_bytes())
    if not isinstance(plan, dict):
        raise ValueError(f"{manifest} is not a manifest")
    files = [name for name in plan.get("files", []) if _safe_name(name)]
    for name in files:
        source, destination = moving / name, target / name
        if not os.path.lexists(source):
            continue  # moved before the kill
        destination.parent.mkdir(parents=True, exist_ok=True)
        if destination.is_dir() and not destination.is_symlink():
            shutil.rmtree(destination)  # a folder where the new set has a file
        os.replace(source, destination)
    if plan.get("remove_others"):
        _remove_others(target, set(files))
    shutil.rmtree(moving, ignore_errors=True)
    manifest.unlink(missing_ok=True)  # last: from here on nothing is left to finish


def _remove_others(target: Path, keep: set[str]) -> None:
    """Remove every file under ``target`` the new set does not hold, then the folders left empty (never a staging
    folder or manifest of a set written in place, nor ``lost+found``)."""
    for folder, dirs, names in os.walk(target, topdown=True):
        base = Path(folder).relative_to(target)
        if base == Path("."):
            dirs[:] = [d for d in dirs if not _own_entry(d, target) and d != "lost+found"]
            names = [n for n in names if not _own_entry(n, target)]
        for name in names + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            if (base / name).as_posix() not in keep:
                os.unlink(os.path.join(folder, name))
    for folder, _, _ in sorted(os.walk(target), key=lambda entry: -len(Path(entry[0]).parts)):
        relative = Path(folder).relative_to(target)
        if relative != Path(".") and not _own_entry(relative.parts[0], target) and relative.parts[0] != "lost+found":
            try:
                os.rmdir(folder)  # only an empty one
            except OSError:
                pass


def _commit_inside(target: Path, staging: Path, remove_others: bool, why: str, what: str) -> None:
    """Move a complete staging folder inside ``target`` into place: renamed to the moving folder, the manifest
    written (from here a kill is finished by the next write), then each file moved in (:func:`_move_in`)."""
    _, moving, manifest = _inside_names(target, os.getpid())
    try:
        files = _staged_files(staging)
        shutil.rmtree(moving, ignore_errors=True)
        os.replace(staging, moving)
        data = json.dumps({"files": files, "remove_others": remove_others}, sort_keys=True).encode("utf-8")
        write_atomic_raw(manifest, data)
    except OSError as error:
        # No file of the folder was touched yet: the previous files are all there.
        for leftover in (staging, moving):
            shutil.rmtree(leftover, ignore_errors=True)
        manifest.unlink(missing_ok=True)
        raise _named(error, target, what, DEFAULT_HINT) from None
    try:
        _move_in(target, moving, manifest)
    except OSError as error:
        hint = (
            f"{target} cannot be swapped whole ({why}), so its staged files are moved in one by one and that stopped "
            f"midway: some files are new, the rest wait in {moving}; the next write of this folder moves them in"
        )
        raise _named(error, target, what, hint) from None
    logger.info("%s %s cannot be swapped whole (%s): %s", what, target, why, INSIDE_GUARANTEE)


def _recover_inside(target: Path) -> list[Path]:
    """Sets written inside ``target`` by dead processes: finished where the manifest was written, else removed."""
    touched: list[Path] = []
    try:
        entries = sorted(os.scandir(target), key=lambda e: e.name)
    except OSError:
        return touched
    own = len(f".{target.name or 'root'}.")
    for entry in entries:
        if not _own_entry(entry.name, target):
            continue
        # After the folder's own name (which may hold ".tmp-" itself): a manifest's temporary, whose writer was
        # killed before the manifest existed.
        if ".tmp-" in entry.name[own:]:
            writer = entry.name.rsplit(".tmp-", 1)[1].split("-", 1)[0]
            if writer.isdigit() and (int(writer) == os.getpid() or not _pid_alive(int(writer))):
                Path(entry.path).unlink(missing_ok=True)
                touched.append(Path(entry.path))
            continue
        pid = entry.name.rsplit("-", 1)[-1].removesuffix(".json")
        if not pid.isdigit() or (int(pid) != os.getpid() and _pid_alive(int(pid))):
            continue
        staging, moving, manifest = _inside_names(target, int(pid))
        if Path(entry.path) == manifest:
            try:
                if manifest.stat().st_size > _MAX_MANIFEST_BYTES:
                    raise ValueError("too large")
                _move_in(target, moving, manifest)  # every file was on disk before the manifest: finish the set
            except (OSError, ValueError):
                shutil.rmtree(moving, ignore_errors=True)
                manifest.unlink(missing_ok=True)
            touched.append(manifest)
        elif Path(entry.path) in (staging, moving) and not manifest.exists():
            shutil.rmtree(entry.path, ignore_errors=True)  # killed before its manifest: the old files were never touched
            touched.append(Path(entry.path))
    return touched


def _link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


def write_file_set(
    folder: str | os.PathLike[str],
    files: Mapping[str, bytes],
    *,
    keep_others: bool = True,
    what: str = "output",
    hint: str = DEFAULT_HINT,
) -> Path:
    """Write ``files`` (relative path -> bytes) into ``folder`` as one transaction; returns the folder.

    The new folder is built in ``.<name>.building-<pid>`` beside it (with the folder's other
    entries linked in when ``keep_others``), then exchanged with the old one in one step, so a
    reader or a kill sees the old set or the new one, never a mixture. Leftovers of dead
    processes are removed (or an old folder put back) first. A folder that cannot be swapped
    (:func:`unswappable_reason`: the working folder, a mount point, a parent refusing writes, or a
    rename refused with EBUSY) is written inside: every file staged in ``.<name>.building-<pid>``
    within it, then a manifest, then each file moved into place (:data:`INSIDE_GUARANTEE`, said in
    a note). OS errors are :class:`OutputError`.
    """
    check_path_length(folder, what)
    for name in files:
        if Path(name).is_absolute() or ".." in Path(name).parts or not Path(name).parts:
            raise ValueError(f"{what} {folder}: file name {name!r} would land outside the folder; refusing to write any")
        check_path_length(Path(folder) / name, what)
    target = Path(os.path.abspath(set_target(folder, what)))
    why = unswappable_reason(target)
    if why:
        return _write_set_inside(target, files, keep_others, what, hint, why)
    staging = target.parent / f".{target.name}.building-{os.getpid()}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        recover_sets(target)
        if os.path.lexists(target) and not target.is_dir():
            raise OutputError(f"{what} {folder} is an existing file, not a folder; choose a folder (new or existing)")
        if staging.exists():
            shutil.rmtree(staging)
        if keep_others and target.is_dir():
            shutil.copytree(target, staging, symlinks=True, copy_function=_link_or_copy)
            for name in files:  # a linked old file is unlinked, never written through
                old = staging / name
                if os.path.lexists(old) and not old.is_dir():
                    old.unlink()
        else:
            staging.mkdir()
        for name, data in sorted(files.items()):
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_new_file(path, data)
        replace_folder(staging, target)
    except OutputError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        if error.errno in _UNSWAPPABLE and target.is_dir() and error.errno not in (errno.ENOSPC, errno.EDQUOT):
            # Nothing could be made beside the folder, or the folder itself would not move: write inside it.
            reason = _REASONS.get(error.errno, error.strerror or str(error))
            return _write_set_inside(target, files, keep_others, what, hint, f"nothing could be staged beside it: {reason}")
        raise _named(error, folder, what, hint) from None
    return target


def _write_set_inside(target: Path, files: Mapping[str, bytes], keep_others: bool, what: str, hint: str, why: str) -> Path:
    """:func:`write_file_set` inside a folder that cannot be swapped: staged and synced in full, a manifest, then moves."""
    staging = _inside_names(target, os.getpid())[0]
    try:
        recover_sets(target)
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir()
        for name, data in sorted(files.items()):
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_new_file(path, data)
    except OSError as error:
        # Nothing in the folder was touched yet: the previous files are all there.
        shutil.rmtree(staging, ignore_errors=True)
        raise _named(error, target, what, hint) from None
    _commit_inside(target, staging, not keep_others, why, what)
    return target


# --- drawn files kept by what they were drawn from -------------------------------------------------------------

#: The folder where :func:`drawn_files` keeps rendered files by the content they were drawn from (None: always drawn).
_DRAWN_CACHE: ContextVar[Path | None] = ContextVar("drawn_cache", default=None)


@contextmanager
def drawn_files_cache(folder: str | os.PathLike[str] | None) -> Iterator[None]:
    """Inside the block, :func:`drawn_files` keeps and reuses its files under ``folder`` (None: draws every time).

    The demo sets it to its cache: a warm rerun copies the figures it drew before from the same
    records instead of drawing them again (matplotlib took most of a warm demo's time).
    """
    token = _DRAWN_CACHE.set(None if folder is None else Path(folder))
    try:
        yield
    finally:
        _DRAWN_CACHE.reset(token)


#: The names a kept entry may hold: plain file names, never a path out of the entry (the cache may be shared).
_KEPT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: The largest kept file read back (figures are well below it).
_KEPT_MAX_BYTES = 64 << 20


def _kept_file(path: Path) -> bytes:
    """A kept file's bytes if it is a regular file within :data:`_KEPT_MAX_BYTES` (a FIFO put there never blocks)."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_size > _KEPT_MAX_BYTES:
        raise ValueError(f"{path}: not a kept file")
    return path.read_bytes()


@functools.cache
def drawing_code(source_file: str) -> str:
    """What a drawing's bytes depend on besides its inputs: the drawing module's source (sha256) and
    matplotlib's version; name it in :func:`drawn_files`'s ``kind``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        matplotlib_version = version("matplotlib")
    except PackageNotFoundError:
        matplotlib_version = ""
    return hashlib.sha256(Path(source_file).read_bytes()).hexdigest() + " matplotlib " + matplotlib_version


def _key_value(value: object) -> object:
    """A numpy scalar as its Python value; anything else without an exact JSON form is refused (TypeError)."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        return item()
    raise TypeError(f"{type(value).__name__} has no exact JSON form")


def drawn_files(kind: str, inputs: object, draw: Callable[[], Mapping[str, bytes]]) -> dict[str, bytes]:
    """The files ``draw()`` makes (name -> bytes), reused from :func:`drawn_files_cache`'s folder when kept there.

    They are keyed by ``kind`` (name the drawing code and its version in it) and ``inputs`` (JSON-able:
    everything the drawing reads), so the same key means the same bytes. A kept entry is read only
    when every file matches the sha256 its manifest records; anything else is drawn again and kept
    (a cache that cannot be written is not an error: the files are drawn as without it).
    """
    folder = _DRAWN_CACHE.get()
    if folder is None:
        return dict(draw())
    try:
        text = json.dumps([kind, inputs], sort_keys=True, default=_key_value, allow_nan=True)
    except (TypeError, ValueError):
        return dict(draw())  # an input with no exact JSON form is never a key (a repr may elide values)
    entry = folder / hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
    try:
        manifest = json.loads(_kept_file(entry / "manifest.json"))
        if not isinstance(manifest, dict) or not all(_KEPT_NAME.fullmatch(name) for name in manifest):
            raise ValueError(f"{entry}: not a manifest of drawn files")
        files = {name: _kept_file(entry / "files" / name) for name in manifest}
        if all(hashlib.sha256(data).hexdigest() == manifest[name] for name, data in files.items()):
            return files
    except (OSError, ValueError, TypeError):
        pass
    files = dict(draw())
    try:
        for name, data in files.items():
            atomic_write_bytes(entry / "files" / name, data, durable=False)
        # In the order drawn (not sorted): a reused entry gives its files back in that order.
        manifest_text = json.dumps({name: hashlib.sha256(data).hexdigest() for name, data in files.items()})
        atomic_write_bytes(entry / "manifest.json", manifest_text.encode("utf-8"), durable=False)  # last: the entry is whole
    except OSError:
        pass
    return files
