"""Reading task files: regular files only, bounded, no YAML aliases, ``include:`` resolved, errors located.

A task file is untrusted input (a YAML from a paper's repository on
``CLIP_CYCLES_TASKS_PATH``): it is read only if it is a regular file of at most
:data:`MAX_TASK_FILE_BYTES` (never opened long enough to hang on a FIFO or /dev/zero),
with PyYAML's safe loader, and refused if it uses an alias (an alias bomb is a few
lines that expand without bound). :func:`read_task_yaml` resolves lmms-eval's
``include:``; :func:`bad_field` turns a problem into an error naming the file that sets
the field and its line, following includes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

#: PyYAML's libyaml loader where PyYAML was built with it (several times faster), else the Python one.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: The key that pulls other YAML files' keys into a task file (lmms-eval's ``include``).
INCLUDE_KEY = "include"


def is_template(path: Path) -> bool:
    """Whether ``path`` is an include template, never a task itself: its name starts with ``_``
    (``_default_template_yaml``, ``_coco_yaml``)."""
    return path.name.startswith("_")


#: The largest task file (or template) read, in bytes: real ones hold a few hundred; the bound keeps
#: a huge or endless file (a symlink to /dev/zero swapped in after the check) from hanging every run.
MAX_TASK_FILE_BYTES = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(path: Path, mode: int) -> ValueError:
    kind = next((what for test, what in _KINDS if test(mode)), "not a regular file")
    return ValueError(f"{path}: is {kind}, not a regular file; a task file must be a regular YAML file (rename or remove it)")


def _read_text(path: Path) -> str:
    """The text of a task file: a regular file only (never opened if it is a FIFO, device or folder), bounded in size."""
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        # O_NONBLOCK: a FIFO swapped in after the check opens at once instead of waiting for a writer.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(descriptor, "rb") as stream:
            mode = os.fstat(stream.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise _not_regular(path, mode)
            raw = stream.read(MAX_TASK_FILE_BYTES + 1)
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror or error}); check the file and its permissions") from None
    if len(raw) > MAX_TASK_FILE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_TASK_FILE_BYTES} bytes; a task file is a short YAML mapping")
    return raw.decode("utf-8")


def _refuse_aliases(path: Path, text: str) -> None:
    """Task files may not use YAML aliases: a few lines of nested aliases expand to gigabytes (an alias bomb)."""
    for event in yaml.parse(text, Loader=_SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise ValueError(
                f"{path} line {event.start_mark.line + 1}: YAML alias *{event.anchor}: task files may not use anchors "
                "and aliases (nested aliases can expand a small file without bound); write the value out, or share "
                "keys through `include:`"
            )


def _compose(path: Path) -> yaml.Node | None:
    try:
        return yaml.compose(_read_text(path), Loader=_SafeLoader)
    except (ValueError, yaml.YAMLError):  # UnicodeDecodeError is a ValueError
        return None


def _entry(node: yaml.Node, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next(((k, v) for k, v in node.value if getattr(k, "value", None) == key), None)


def _include_names(node: yaml.Node) -> list[str]:
    found = _entry(node, INCLUDE_KEY)
    if found is None:
        return []
    value = found[1]
    items = value.value if isinstance(value, yaml.SequenceNode) else [value]
    return [item.value for item in items if isinstance(item, yaml.ScalarNode) and isinstance(item.value, str)]


def _locate(path: Path, field_name: str, trail: tuple[Path, ...] = ()) -> tuple[Path, int | None] | None:
    """The file that sets a (dotted) field, following includes as :func:`read_task_yaml` does, and the
    1-based line of the field (or of its nearest present parent) there; None when no file sets it."""
    node = _compose(path)
    if not isinstance(node, yaml.MappingNode):
        return None
    parts = field_name.split(".")
    if _entry(node, parts[0].split("[", 1)[0]) is None:
        here = (*trail, path.resolve())
        for name in reversed(_include_names(node)):  # the last include wins, so look there first
            target = path.parent / name
            if target.is_file() and target.resolve() not in here:
                found = _locate(target, field_name, here)
                if found is not None:
                    return found
        return None
    line = None
    for part in parts:
        entry = _entry(node, part.split("[", 1)[0])
        if entry is None:
            break
        line = entry[0].start_mark.line + 1
        node = entry[1]
    return path, line


def bad_field(path: Path, field_name: str, message: str) -> ValueError:
    located = _locate(path, field_name) if path.is_file() else None
    origin, line = located if located is not None else (path, None)
    at = f" line {line}" if line else ""
    if origin == path:
        return ValueError(f"{path}{at}: field {field_name!r}: {message}")
    return ValueError(f"{path}: field {field_name!r} (set in included {origin}{at}): {message}")


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        text = _read_text(path)
        _refuse_aliases(path, text)
        data = yaml.load(text, Loader=_SafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{path}{where}: not valid YAML: {error}") from error
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text at byte {error.start}: {error.reason}") from error
    except RecursionError:
        raise ValueError(f"{path}: YAML nested too deeply to read; a task file is a short, flat mapping") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a task file (or template) must hold a mapping, got {type(data).__name__}")
    return data


def read_task_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping a task file stands for, its ``include:`` resolved.

    ``include`` names one file or a list of files, relative to the including file's
    folder; each may include others. The included files' keys come first (later
    includes override earlier ones) and the file's own keys override them all; the
    merge is by top-level key, as in lmms-eval (a mapping or list is replaced whole).
    A missing included file and an include cycle are errors naming the file and line.
    """
    return _resolve_includes(Path(path), ())


def _resolve_includes(path: Path, trail: tuple[Path, ...]) -> dict[str, Any]:
    data = _read_mapping(path)
    if INCLUDE_KEY not in data:
        return data
    names = data.pop(INCLUDE_KEY)
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise bad_field(path, INCLUDE_KEY, f"must be a file name, or a list of them, relative to {path.parent}; got {names!r}")
    here = (*trail, path.resolve())
    merged: dict[str, Any] = {}
    for name in names:
        target = path.parent / name
        if target.resolve() in here:
            chain = " -> ".join(p.name for p in (*here, target.resolve()))
            raise bad_field(path, INCLUDE_KEY, f"including {name!r} closes an include cycle ({chain}); remove one include")
        if not target.exists():
            raise bad_field(
                path,
                INCLUDE_KEY,
                f"included file {target} does not exist (include paths are relative to the including file's folder)",
            )
        merged.update(_resolve_includes(target, here))
    merged.update(data)
    return merged
