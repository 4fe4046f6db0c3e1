"""Fixtures shared by the attribute-split tests (paper 2)."""

from __future__ import annotations

import pytest

from clip_cycles.attributes.concept_world import ConceptWorld, make_concept_world


@pytest.fixture(scope="module")
def world() -> ConceptWorld:
    """The synthetic concept world of seed 0 (concepts, attributes, embeddings), one per test module."""
    return make_concept_world(seed=0)
