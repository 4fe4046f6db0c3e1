"""A synthetic concept world with planted taxonomic structure (paper 2 without THINGS).

Concepts sit in a three-level taxonomy: supercategory -> subgroup -> concept. Some
concepts belong to a hidden supercategory and carry no label, like the 407 THINGS
concepts without a category. Attributes come in two kinds:

- *taxonomic* attributes are held mostly by the concepts of one home supercategory
  (high supercategory dominance) and have no direction of their own in embedding
  space: a probe can only predict them by recognising the category, so they are
  learnable when related concepts sit in train (random split) and unlearnable when
  whole supercategories are held out;
- *cross-cutting* attributes are spread over all categories (low dominance) and add
  their own direction to the embedding of every concept that has them, so a probe
  learns them wherever the train concepts come from.

Embeddings = supercategory centre + subgroup centre + attribute directions + noise.
This reproduces the paper's mechanism: on a random split, F1 selectivity is high for
dominant attributes (positive CS); holding out whole clusters or supercategories
removes that shortcut.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import Field

from clip_cycles.attributes.concepts import ConceptAttributeData
from clip_cycles.schemas.options import CheckedOptions


class ConceptWorldConfig(CheckedOptions):
    """Size and signal strengths of a synthetic concept world.

    The defaults give a small world for tests; ``things_sized()`` gives the THINGS
    shape (1,854 concepts, 53 supercategories, 211 attributes, 768-d).
    """

    n_concepts: int = Field(300, ge=1)
    n_supercategories: int = Field(10, ge=1)
    n_hidden_supercategories: int = Field(2, ge=0)
    subgroups_per_category: int = Field(4, ge=1)
    n_attributes: int = Field(32, ge=1)
    taxonomic_fraction: float = Field(0.5, ge=0, le=1)
    dim: int = Field(32, ge=1)
    supercategory_scale: float = Field(1.0, ge=0, allow_inf_nan=False)
    subgroup_scale: float = Field(0.7, ge=0, allow_inf_nan=False)
    attribute_scale: float = Field(0.3, ge=0, allow_inf_nan=False)
    noise_scale: float = Field(0.45, ge=0, allow_inf_nan=False)
    home_rate: float = Field(0.8, ge=0, le=1)
    away_rate: float = Field(0.01, ge=0, le=1)
    cross_rate: float = Field(0.12, ge=0, le=1)
    llm_group_fraction: float = Field(0.12, ge=0, le=1)

    @classmethod
    def things_sized(cls) -> ConceptWorldConfig:
        """The THINGS shape: 1,854 concepts, 53 supercategories, 211 attributes, 768-d."""
        return cls(
            n_concepts=1854,
            n_supercategories=53,
            n_hidden_supercategories=12,
            subgroups_per_category=4,
            n_attributes=211,
            dim=768,
            # Noise per direction shrinks as 1/sqrt(dim); shrink the attribute directions with it
            # so cross-cutting attributes stay as hard to read out as in the small world.
            attribute_scale=0.1,
        )

    @classmethod
    def things_sparsity(cls) -> ConceptWorldConfig:
        """The THINGS shape with McRae x THINGS's label sparsity: 10-20 positive concepts per attribute.

        1,854 concepts, 53 supercategories, 211 attributes, 384-d (a MiniLM-sized text
        embedding); so few positives in 384 dimensions make many probe columns near-separable,
        where an L-BFGS run is long and float rounding has room to grow.
        """
        # The THINGS shape of things_sized(), with its own width, signal and label rates.
        return cls.things_sized().replace(dim=384, attribute_scale=0.15, home_rate=0.45, away_rate=0.001, cross_rate=0.008)


@dataclass(frozen=True)
class ConceptWorld:
    """A generated world: labelled concepts, their embeddings and near-duplicate groups."""

    data: ConceptAttributeData
    embeddings: np.ndarray
    attribute_kind: tuple[str, ...]
    subgroups: np.ndarray
    llm_groups: tuple[tuple[str, ...], ...]


def _unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    rows = rng.standard_normal((n, dim))
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def make_concept_world(config: ConceptWorldConfig | None = None, seed: int = 0) -> ConceptWorld:
    """Generate a concept world; same config and seed give identical arrays.

    Parameters
    ----------
    config:
        Sizes and signal strengths; ``ConceptWorldConfig()`` when omitted.
    seed:
        Seed of the numpy generator that draws everything.
    """
    cfg = config or ConceptWorldConfig()
    if cfg.n_concepts < 2 * (cfg.n_supercategories + cfg.n_hidden_supercategories):
        raise ValueError(
            f"n_concepts={cfg.n_concepts} is too small for "
            f"{cfg.n_supercategories + cfg.n_hidden_supercategories} supercategories; give at least two per category"
        )
    rng = np.random.default_rng(seed)
    n_categories = cfg.n_supercategories + cfg.n_hidden_supercategories
    # Uneven category sizes, like THINGS (food and animal are large, others small).
    weights = rng.gamma(shape=2.0, scale=1.0, size=n_categories)
    category = rng.choice(n_categories, size=cfg.n_concepts, p=weights / weights.sum())
    category[:n_categories] = np.arange(n_categories)  # every category is non-empty
    order = np.argsort(category, kind="stable")
    category = category[order]
    subgroup = category * cfg.subgroups_per_category + rng.integers(0, cfg.subgroups_per_category, cfg.n_concepts)

    n_taxonomic = int(round(cfg.taxonomic_fraction * cfg.n_attributes))
    kinds = ["taxonomic"] * n_taxonomic + ["cross_cutting"] * (cfg.n_attributes - n_taxonomic)
    labels = np.zeros((cfg.n_concepts, cfg.n_attributes), dtype=bool)
    homes = rng.integers(0, cfg.n_supercategories, size=cfg.n_attributes)
    for a, kind in enumerate(kinds):
        if kind == "taxonomic":
            # A taxonomic attribute lives in some subgroups of its home category.
            home_subgroups = homes[a] * cfg.subgroups_per_category + np.flatnonzero(rng.random(cfg.subgroups_per_category) < 0.75)
            at_home = np.isin(subgroup, home_subgroups)
            rate = np.where(at_home, cfg.home_rate, cfg.away_rate)
        else:
            rate = np.full(cfg.n_concepts, cfg.cross_rate)
        labels[:, a] = rng.random(cfg.n_concepts) < rate
        # Keep every attribute above the paper's 10-concept filter.
        missing = max(0, 10 - int(labels[:, a].sum()))
        if missing:
            candidates = np.flatnonzero(~labels[:, a] & (rate == rate.max()))
            if len(candidates) < missing:
                candidates = np.flatnonzero(~labels[:, a])
            labels[rng.choice(candidates, size=missing, replace=False), a] = True

    super_centres = _unit_rows(rng, n_categories, cfg.dim)
    sub_centres = _unit_rows(rng, n_categories * cfg.subgroups_per_category, cfg.dim)
    attribute_dirs = _unit_rows(rng, cfg.n_attributes, cfg.dim)
    attribute_dirs[np.array(kinds) == "taxonomic"] = 0.0
    embeddings = (
        cfg.supercategory_scale * super_centres[category]
        + cfg.subgroup_scale * sub_centres[subgroup]
        + cfg.attribute_scale * labels.astype(np.float64) @ attribute_dirs
        + cfg.noise_scale * rng.standard_normal((cfg.n_concepts, cfg.dim)) / np.sqrt(cfg.dim) * 4.0
    )

    concepts = tuple(f"concept{i:05d}" for i in range(cfg.n_concepts))
    attributes = tuple(f"{kind[:3]}_attr{a:03d}" for a, kind in enumerate(kinds))
    supercategories = tuple(f"category{c:02d}" if c < cfg.n_supercategories else None for c in category.tolist())
    data = ConceptAttributeData(
        concepts=concepts,
        attributes=attributes,
        labels=labels,
        supercategories=supercategories,
    )
    llm_groups = _near_duplicate_groups(embeddings, concepts, cfg.llm_group_fraction)
    return ConceptWorld(
        data=data,
        embeddings=embeddings,
        attribute_kind=tuple(kinds),
        subgroups=subgroup,
        llm_groups=llm_groups,
    )


def _near_duplicate_groups(embeddings: np.ndarray, concepts: tuple[str, ...], fraction: float) -> tuple[tuple[str, ...], ...]:
    """Pairs of mutual nearest neighbours, closest first, until ``fraction`` of concepts is grouped.

    Stands in for the paper's LLM-found near-duplicates (cup/mug): about 12% of concepts.
    """
    unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    nearest = np.argmax(sims, axis=1)
    mutual = [(i, int(j)) for i, j in enumerate(nearest.tolist()) if i < j and nearest[j] == i]
    mutual.sort(key=lambda pair: (-sims[pair[0], pair[1]], pair))
    budget = int(round(fraction * len(concepts)))
    groups = []
    used = 0
    for i, j in mutual:
        if used + 2 > budget:
            break
        groups.append((concepts[i], concepts[j]))
        used += 2
    return tuple(groups)
