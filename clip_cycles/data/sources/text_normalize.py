"""The one normalisation under which captions and concept names are matched.

Published files spell the same text in more than one way: a SugarCrepe caption with a
trailing space, a THINGS category row ``flip-flop`` for the concept id ``flip_flop``, a
word in another case. Matching by exact text silently loses those pairs, so every
matcher of captions (:mod:`clip_cycles.benchmark_audit.design`) and of concept names
(:mod:`clip_cycles.attributes.concepts`) keys its lookups with these functions; the text
itself is kept as the file gives it.
"""

from __future__ import annotations

import re

#: Separators that THINGS ids and words use interchangeably (``flip-flop``, ``flip_flop``, ``flip flop``).
_CONCEPT_SEPARATORS = re.compile(r"[\s_\-]+")


def caption_key(text: str) -> str:
    """Matching key of a caption: whitespace runs as one space, ends stripped, case folded.

    >>> caption_key("A dog  on a couch. ") == caption_key("a dog on a couch.")
    True
    """
    return " ".join(text.split()).casefold()


def concept_key(name: str) -> str:
    """Matching key of a concept name or id: case folded, runs of spaces, ``_`` and ``-`` as one ``_``.

    >>> concept_key("Flip-Flop") == concept_key("flip_flop") == concept_key(" flip flop ")
    True
    """
    return _CONCEPT_SEPARATORS.sub("_", name.strip().casefold()).strip("_")


__all__ = ["caption_key", "concept_key"]
