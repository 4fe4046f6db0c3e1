"""The YAML header of a dataset card (``README.md``), written by a YAML serializer from a plain mapping.

A Hugging Face card opens with ``---``, a YAML mapping (``license``, ``configs: [{config_name,
data_files}]``, ``dataset_info``, ...) and ``---``. The header is dumped by PyYAML's safe dumper, so
any value (a title with a colon, a leading ``*``, a newline) is quoted or escaped as YAML needs and
reads back as the value written; the layout is fixed so the same mapping always gives the same bytes:
keys in the mapping's own order, block style, lists at their key's indentation, no line folding.
Prose (:class:`Quoted`) is written double-quoted with escapes, one line per value.
"""

from __future__ import annotations

from typing import Any, Mapping

import yaml

__all__ = ["Quoted", "card_header", "read_card_header"]

#: The line that opens and closes a card's YAML header.
HEADER_FENCE = "---"


class Quoted(str):
    """A string the header writes double-quoted on one line (descriptions, citations, reasons)."""


class _CardDumper(yaml.SafeDumper):
    """The safe dumper, with :class:`Quoted` strings double-quoted."""


def _represent_quoted(dumper: yaml.SafeDumper, value: Quoted) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style='"')


_CardDumper.add_representer(Quoted, _represent_quoted)


def card_header(fields: Mapping[str, Any]) -> str:
    """The card's YAML header for ``fields``: the fences and the mapping between them, without a final newline.

    Keys keep the mapping's order (the order a reader of the card expects), not sorted; the width is
    unbounded so a long description stays one line and the bytes do not depend on a folding rule.
    """
    body = yaml.dump(
        dict(fields),
        Dumper=_CardDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=False,
        width=float("inf"),
    )
    return f"{HEADER_FENCE}\n{body}{HEADER_FENCE}"


def read_card_header(text: str) -> dict[str, Any]:
    """The mapping of a card's YAML header (``text`` is the whole card); a ValueError when it has none."""
    lines = text.split("\n")
    if not lines or lines[0] != HEADER_FENCE or HEADER_FENCE not in lines[1:]:
        raise ValueError(f"a dataset card must open with a YAML header between {HEADER_FENCE!r} lines")
    end = lines.index(HEADER_FENCE, 1)
    data = yaml.safe_load("\n".join(lines[1:end]))
    if not isinstance(data, dict):
        raise ValueError(f"a dataset card's YAML header must hold a mapping, got {type(data).__name__}")
    return data
