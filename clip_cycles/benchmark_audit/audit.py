"""The audit of one benchmark subset: its design, blind baselines, the model, and its exact cycles.

Every accuracy here is the mean credit (1 win / 0.5 tie / 0 loss, one absolute
``tie_tolerance``) of T_c(s) over the subset's comparisons, for a score s that is:

- ``witness``: Theorem 1's witness summed over the design, s(u, v) = d(u) + d(v) with d
  the signed degrees of the whole subset (it reads the labels, so it shows what the
  design lets an additive score reach; on a balanced design it is exactly 0.5);
- ``shortest_caption`` / ``longest_caption``: b(v) = -len(v) / +len(v), characters of the caption as published;
- ``word_frequency``: a grammar-free, order-blind text rule, b(v) = the mean over the caption's words
  (the bag-of-words normalisation of :mod:`clip_cycles.benchmark_audit.ceilings`) of
  log(1 + the number of the subset's other captions that hold the word): the caption made of the
  subset's commoner words wins. It reads only the captions, never which one is true;
- ``caption_probe``: b(v) = w . psi(v) on the model's text embeddings, w a logistic
  regression on the comparisons' caption degree vectors D_cap[c] @ Psi (mirrored, no
  intercept), cross-validated with folds by item; ``image_probe`` likewise on images;
- ``model``: the model's cosine s(u, v) = phi(u) . psi(v).

Additive scores are evaluated through the per-comparison degree matrices, so a balanced
comparison gives exactly T = 0 (a tie, 0.5) with no rounding: on a design made of
cycles every blind score is 0.5 exactly.

Every accuracy carries ``<name>_acc_ci``: a 95 % percentile bootstrap interval resampling items (the
comparisons of an item move together; all scores read the same draws), so a floor is read with its
uncertainty; ``best_blind_acc_ci`` is the best blind score's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np
from pydantic import Field

from clip_cycles.algebra.audits import DEGREE_TOL, Witness
from clip_cycles.algebra.bootstrap import (
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_LEVEL,
    DEFAULT_N_RESAMPLES,
    bootstrap_image_means,
    percentile_intervals,
)
from clip_cycles.algebra.contrast import (
    DEFAULT_TIE_TOLERANCE,
    block_scores_from_embeddings,
    cycle_acc,
    cycle_credits,
    deltas_from_blocks,
)
from clip_cycles.algebra.multiplicity import COMPARISON_ADJUSTMENT, adjusted_verdicts
from clip_cycles.algebra.paired import VERDICTS, paired_difference
from clip_cycles.algebra.winoground import winoground_scores
from clip_cycles.benchmark_audit.ceilings import VIEWS, bag_of_words, subset_ceilings
from clip_cycles.benchmark_audit.design import ComparisonSet, pair_crossing_comparisons
from clip_cycles.schemas.options import CheckedOptions

#: Blind baselines, in table order.
BLIND_SCORES: tuple[str, ...] = (
    "witness",
    "shortest_caption",
    "longest_caption",
    "word_frequency",
    "caption_probe",
    "image_probe",
)
#: Verdicts of ``best_blind_vs_model``, one per :data:`clip_cycles.algebra.paired.VERDICTS` (A = the best blind
#: score, B = the model): a blind score beats the model only when the paired interval lies above 0.
BLIND_VS_MODEL_VERDICTS: tuple[str, ...] = ("blind beats model", "model above blind", "within noise", "too few comparisons")


class AuditSettings(CheckedOptions):
    """Settings of the learned probes and the tie tolerance of every credit, ranges declared on the fields."""

    tie_tolerance: float = Field(
        DEFAULT_TIE_TOLERANCE,
        ge=0.0,
        allow_inf_nan=False,
        json_schema_extra={"flag": "--tie-tolerance"},
        description="a finite non-negative number",
    )
    probe_folds: int = Field(5, ge=2, json_schema_extra={"flag": "--probe-folds"}, description="at least 2 folds")
    #: Inverse L2 strength of the probes' logistic regression (scikit-learn's ``C``).
    probe_c: float = 10.0
    #: False leaves the learned probes out (reported unavailable), e.g. to time the design audit alone.
    probes: bool = True


@dataclass
class Embeddings:
    """float64 model features aligned with a subset's ``images`` and ``captions`` (L2-normalized)."""

    images: np.ndarray
    captions: np.ndarray


@dataclass
class SubsetAudit:
    """The JSON-ready metrics of one subset and the per-comparison credits behind them."""

    name: str
    metrics: dict[str, Any]
    credits: dict[str, np.ndarray] = field(default_factory=dict)
    #: The item (image) of each comparison, the unit the paired interval resamples.
    item_ids: list[str] = field(default_factory=list)


def blind_vs_model(blind_name: str, blind: np.ndarray, model: np.ndarray, item_ids: Sequence[str]) -> dict[str, Any]:
    """The best blind score's mean credit minus the model's, on the same comparisons, resampling items.

    ``verdict`` is one of :data:`BLIND_VS_MODEL_VERDICTS`: "blind beats model" only when the paired
    interval excludes 0 from above, with at least the declared minimum of comparisons and items.
    """
    result = paired_difference(blind, model, np.asarray(item_ids, dtype=str))
    return {
        "blind": blind_name,
        "n_comparisons": result.n_cycles,
        "n_items": result.n_images,
        "blind_acc": result.mean_a,
        "model_acc": result.mean_b,
        "diff": result.diff,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "level": result.level,
        "se": result.se,
        "df": result.df,
        "p_value": result.p_value,
        "interval_method": result.interval_method,
        "unit": "item",
        "verdict": BLIND_VS_MODEL_VERDICTS[VERDICTS.index(result.verdict)],
    }


def adjust_blind_vs_model(audits: Sequence[SubsetAudit]) -> None:
    """Holm over the subsets' "blind beats model" calls: each subset's ``best_blind_vs_model`` gains its adjusted verdict.

    The raw interval and verdict stay; ``adjusted_verdict``, ``adjusted_p``, ``adjustment`` and
    ``n_adjusted`` (:func:`clip_cycles.algebra.multiplicity.adjusted_verdicts`) are added.
    """
    holders = [a.metrics for a in audits if isinstance(a.metrics.get("best_blind_vs_model"), dict)]
    records = [m["best_blind_vs_model"] for m in holders]
    if not records:
        return
    level = records[0]["level"]
    adjusted = adjusted_verdicts(records, COMPARISON_ADJUSTMENT, level, BLIND_VS_MODEL_VERDICTS[:2], BLIND_VS_MODEL_VERDICTS[2])
    for metrics, record in zip(holders, adjusted):
        metrics["best_blind_vs_model"] = record


def additive_values(d_img: Any, d_cap: Any, a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray:
    """T_c(a(u) + b(v)) for every comparison, from the degree matrices (exact 0 when balanced)."""
    total = np.zeros(d_img.shape[0], dtype=np.float64)
    if a is not None:
        total += d_img @ np.asarray(a, dtype=np.float64)
    if b is not None:
        total += d_cap @ np.asarray(b, dtype=np.float64)
    return total


def global_degrees(cs: ComparisonSet) -> tuple[np.ndarray, np.ndarray]:
    """Signed degree of every image and caption over the whole subset (Theorem 1's d_w)."""
    image = np.bincount(cs.edge_image, weights=cs.edge_weight, minlength=len(cs.images))
    caption = np.bincount(cs.edge_caption, weights=cs.edge_weight, minlength=len(cs.captions))
    image[np.abs(image) <= DEGREE_TOL] = 0.0
    caption[np.abs(caption) <= DEGREE_TOL] = 0.0
    return image, caption


def degree_witness(cs: ComparisonSet, image_degree: np.ndarray, caption_degree: np.ndarray) -> Witness | None:
    """Theorem 1's witness of the whole subset, chosen as :func:`clip_cycles.algebra.audits.signed_degrees` does.

    The vertex of largest |degree| (images first, then captions, first one on ties);
    None when every degree is zero (the subset taken as one comparison is balanced).
    """
    best_image = int(np.argmax(np.abs(image_degree))) if image_degree.size else -1
    best_caption = int(np.argmax(np.abs(caption_degree))) if caption_degree.size else -1
    image_value = float(image_degree[best_image]) if best_image >= 0 else 0.0
    caption_value = float(caption_degree[best_caption]) if best_caption >= 0 else 0.0
    if abs(caption_value) > abs(image_value):
        return Witness("caption", cs.captions[best_caption], caption_value)
    if image_value != 0.0:
        return Witness("image", cs.images[best_image].key, image_value)
    return None


def word_frequency_scores(captions: Sequence[str]) -> np.ndarray:
    """b(v) of the ``word_frequency`` rule for each caption: mean over its words of log(1 + other captions holding it)."""
    bags = [bag_of_words(text) for text in captions]
    holding: dict[str, int] = {}
    for bag in bags:
        for word, _ in bag:
            holding[word] = holding.get(word, 0) + 1
    out = np.zeros(len(bags), dtype=np.float64)
    for index, bag in enumerate(bags):
        n_words = sum(count for _, count in bag)
        if n_words:
            # The caption itself holds each of its words: "other captions" is one fewer.
            out[index] = sum(count * np.log1p(holding[word] - 1) for word, count in bag) / n_words
    return out


def accuracy_intervals(credits: dict[str, np.ndarray], item_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{name: interval}`` of each score's mean credit, resampling items (one set of draws for all scores)."""
    names = sorted(credits)
    if not names:
        return {}
    values = np.column_stack([credits[name] for name in names])
    means = bootstrap_image_means(values, np.asarray(item_ids, dtype=str), DEFAULT_N_RESAMPLES, DEFAULT_BOOTSTRAP_SEED)
    found = percentile_intervals(means, DEFAULT_LEVEL, DEFAULT_N_RESAMPLES, DEFAULT_BOOTSTRAP_SEED)
    # Percentiles of means of credits in [0, 1] lie in [0, 1]; clip the float dust of the weighted means.
    return {
        name: {**ci, "low": min(max(ci["low"], 0.0), 1.0), "high": min(max(ci["high"], 0.0), 1.0), "unit": "item"}
        for name, ci in zip(names, found)
    }


def model_values(cs: ComparisonSet, embeddings: Embeddings) -> np.ndarray:
    """T_c(s) with the model's cosine on every edge."""
    phi = embeddings.images[cs.edge_image]
    psi = embeddings.captions[cs.edge_caption]
    scores = np.einsum("ij,ij->i", phi, psi)
    return np.bincount(cs.edge_comparison, weights=cs.edge_weight * scores, minlength=cs.n_comparisons)


def probe_values(features: np.ndarray, groups: Sequence[str], settings: AuditSettings) -> tuple[np.ndarray | None, str]:
    """Cross-validated values w . x_c of a linear probe on comparison vectors x_c (folds by item).

    Each training comparison gives (x_c, won) and its mirror (-x_c, lost), so the probe
    has no preferred side; the intercept is off, keeping T(0) = 0 for balanced comparisons.
    Returns (values, "") or (None, unavailable_reason).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    group_codes = np.unique(np.asarray(groups), return_inverse=True)[1]
    n_groups = int(group_codes.max()) + 1
    if n_groups < 2:
        return None, f"a cross-validated probe needs at least 2 items, the subset has {n_groups}"
    values = np.zeros(features.shape[0], dtype=np.float64)
    folds = GroupKFold(n_splits=min(settings.probe_folds, n_groups))
    for train, test in folds.split(features, groups=group_codes):
        x = features[train]
        if not np.any(x):
            continue  # nothing to learn: w = 0, every test value is an exact tie
        probe = LogisticRegression(C=settings.probe_c, fit_intercept=False, max_iter=1000)
        probe.fit(np.vstack([x, -x]), np.r_[np.ones(len(train)), np.zeros(len(train))])
        values[test] = features[test] @ probe.coef_.ravel().astype(np.float64)
    return values, ""


def _mean(credits: np.ndarray) -> float:
    return float(np.mean(credits))


def _cycle_metrics(
    cs: ComparisonSet, embeddings: Embeddings | None, settings: AuditSettings
) -> tuple[dict[str, Any], np.ndarray | None, list[tuple[str, ...]]]:
    pairing = pair_crossing_comparisons(cs)
    n = int(pairing.cycles.shape[0])
    if pairing.declared:
        paired_comparisons = cs.n_comparisons
        paired_items = cs.n_items
        tags = list(cs.cycle_tags or [() for _ in range(n)])
    else:
        joined = sorted(set(pairing.comparisons.ravel().tolist()))
        paired_comparisons = len(joined)
        paired_items = len({cs.item_ids[c] for c in joined})
        tags = [cs.tags[int(c)] for c in pairing.comparisons[:, 0]] if n else []
    out: dict[str, Any] = {
        "n_cycles": n,
        "declared_by_format": pairing.declared,
        "n_paired_comparisons": paired_comparisons,
        "n_paired_items": paired_items,
        "share_items_paired": paired_items / cs.n_items,
        # Every additive score cancels in each cycle's contrast: an identity of the design, not a result.
        "additive_cycle_acc_identity": 0.5 if n else None,
    }
    credits = None
    if n and embeddings is not None:
        blocks = block_scores_from_embeddings(embeddings.images, embeddings.captions, pairing.cycles)
        deltas = deltas_from_blocks(blocks)
        credits = cycle_credits(deltas, settings.tie_tolerance)
        wino = winoground_scores(blocks)
        out.update(
            {
                "cycle_acc": cycle_acc(deltas, settings.tie_tolerance),
                "text_acc": wino.text_acc,
                "image_acc": wino.image_acc,
                "group_acc": wino.group_acc,
                "n_ties": int((np.abs(deltas) <= settings.tie_tolerance).sum()),
            }
        )
    elif n:
        out["unavailable_reason"] = "no model given: CycleAcc needs the model's scores"
    else:
        out["unavailable_reason"] = (
            "no two comparisons cross (u1, v1 > v2) and (u2, v2 > v1) on different images with the same caption texts"
        )
    return out, credits, tags


def audit_subset(cs: ComparisonSet, embeddings: Embeddings | None = None, settings: AuditSettings | None = None) -> SubsetAudit:
    """Design, blind baselines, model accuracy and exact cycles of one subset (see the module docstring)."""
    settings = settings or AuditSettings()
    tie_tolerance = settings.tie_tolerance
    d_img, d_cap = cs.degree_matrices()
    per_image = np.asarray((d_img != 0).sum(axis=1)).ravel()
    per_caption = np.asarray((d_cap != 0).sum(axis=1)).ravel()
    image_degree, caption_degree = global_degrees(cs)
    witness = degree_witness(cs, image_degree, caption_degree)
    design = {
        "n_edges": int(cs.edge_weight.shape[0]),
        "n_images": len(cs.images),
        "n_captions": len(cs.captions),
        "share_comparisons_unbalanced": float(np.mean((per_image + per_caption) > 0)),
        "share_comparisons_image_decidable": float(np.mean(per_image > 0)),
        "share_comparisons_caption_decidable": float(np.mean(per_caption > 0)),
        "share_images_unbalanced": float(np.mean(image_degree != 0)),
        "share_captions_unbalanced": float(np.mean(caption_degree != 0)),
        "balanced": witness is None,
        "max_abs_degree": 0.0 if witness is None else abs(witness.value),
        "theorem1_witness": None if witness is None else {**asdict(witness), "vertex": str(witness.vertex)},
    }
    values: dict[str, np.ndarray] = {
        "witness": additive_values(d_img, d_cap, image_degree, caption_degree),
    }
    # Each edge reads its caption's length as published (a merged spelling keeps its own length).
    lengths = np.bincount(cs.edge_comparison, weights=cs.edge_weight * cs.caption_lengths(), minlength=cs.n_comparisons)
    values["shortest_caption"] = -lengths
    values["longest_caption"] = lengths
    values["word_frequency"] = additive_values(d_img, d_cap, None, word_frequency_scores(cs.captions))
    metrics: dict[str, Any] = {
        "kind": cs.kind,
        "n_comparisons": cs.n_comparisons,
        "n_items": cs.n_items,
        "skipped": dict(sorted(cs.skipped.items())),
        "caption_variants_merged": cs.caption_variants_merged,
        "design": design,
    }
    if embeddings is not None:
        for name, matrix, table in (("caption_probe", d_cap, embeddings.captions), ("image_probe", d_img, embeddings.images)):
            if not settings.probes:
                metrics[f"{name}_unavailable_reason"] = "probes switched off (AuditSettings.probes=False)"
                continue
            found, reason = probe_values(np.asarray(matrix @ table, dtype=np.float64), cs.item_ids, settings)
            if found is None:
                metrics[f"{name}_unavailable_reason"] = reason
            else:
                values[name] = found
        values["model"] = model_values(cs, embeddings)
    else:
        for name in ("caption_probe", "image_probe"):
            metrics[f"{name}_unavailable_reason"] = "no model given: the probe reads the model's embeddings"
        metrics["model_unavailable_reason"] = "no model given"
    credits = {name: cycle_credits(v, tie_tolerance) for name, v in values.items()}
    for name, credit in credits.items():
        metrics[f"{name}_acc"] = _mean(credit)
    intervals = accuracy_intervals(credits, cs.item_ids)
    for name, ci in intervals.items():
        metrics[f"{name}_acc_ci"] = ci
    blind = {name: metrics[f"{name}_acc"] for name in BLIND_SCORES[1:] if f"{name}_acc" in metrics}
    best = max(blind, key=lambda k: (blind[k], -BLIND_SCORES.index(k)))
    metrics["best_blind"], metrics["best_blind_acc"] = best, blind[best]
    metrics["best_blind_acc_ci"] = intervals[best]
    metrics["ceilings"] = subset_ceilings(cs, metrics)
    if "model" in credits:
        codes = np.unique(np.asarray(cs.item_ids), return_inverse=True)[1]
        weakest = np.ones(int(codes.max()) + 1)
        np.minimum.at(weakest, codes, credits["model"])
        metrics["model_item_acc"] = float(weakest.mean())
        metrics["best_blind_vs_model"] = blind_vs_model(best, credits[best], credits["model"], cs.item_ids)
    cycles, cycle_credit, cycle_tags = _cycle_metrics(cs, embeddings, settings)
    metrics["cycles"] = cycles
    metrics["per_tag"] = _per_tag(cs, credits, cycle_credit, cycle_tags)
    if cycle_credit is not None:
        credits["cycle"] = cycle_credit
    return SubsetAudit(cs.name, metrics, credits, [str(i) for i in cs.item_ids])


def _per_tag(
    cs: ComparisonSet, credits: dict[str, np.ndarray], cycle_credit: np.ndarray | None, cycle_tags: list[tuple[str, ...]]
) -> dict[str, Any]:
    tags = sorted({t for ts in cs.tags for t in ts} | {t for ts in cycle_tags for t in ts})
    out: dict[str, Any] = {}
    for tag in tags:
        mask = np.array([tag in ts for ts in cs.tags], dtype=bool)
        entry: dict[str, Any] = {"n_comparisons": int(mask.sum())}
        if mask.any():
            for name, credit in credits.items():
                entry[f"{name}_acc"] = _mean(credit[mask])
        if cycle_credit is not None:
            cmask = np.array([tag in ts for ts in cycle_tags], dtype=bool)
            entry["n_cycles"] = int(cmask.sum())
            if cmask.any():
                entry["cycle_acc"] = _mean(cycle_credit[cmask])
        out[tag] = entry
    return out


def summarize(audits: Sequence[SubsetAudit]) -> dict[str, Any]:
    """Headline numbers over all subsets: comparison-weighted means of each accuracy, cycle-weighted CycleAcc.

    The subsets' blind-vs-model calls are adjusted together first (:func:`adjust_blind_vs_model`).
    """
    adjust_blind_vs_model(audits)
    total = sum(a.metrics["n_comparisons"] for a in audits)
    out: dict[str, Any] = {
        "n_subsets": len(audits),
        "n_comparisons": total,
        "n_cycles": sum(a.metrics["cycles"]["n_cycles"] for a in audits),
    }
    # A score missing from some subset (no model, too few items for a probe) is None over all of them.
    for name in (*BLIND_SCORES, "model"):
        found = all(name in a.credits for a in audits)
        out[f"{name}_acc"] = float(np.mean(np.concatenate([a.credits[name] for a in audits]))) if found else None
    blind = {k: out[f"{k}_acc"] for k in BLIND_SCORES[1:] if out[f"{k}_acc"] is not None}
    best = max(blind, key=lambda k: (blind[k], -BLIND_SCORES.index(k)))
    out["best_blind"], out["best_blind_acc"] = best, blind[best]
    # Items of different subsets are different units, even under one id.
    items = [f"{a.name}/{i}" for a in audits for i in a.item_ids]
    present = [name for name in (*BLIND_SCORES, "model") if out[f"{name}_acc"] is not None]
    intervals = accuracy_intervals({name: np.concatenate([a.credits[name] for a in audits]) for name in present}, items)
    for name, ci in intervals.items():
        out[f"{name}_acc_ci"] = ci
    out["best_blind_acc_ci"] = intervals[best]
    if out["model_acc"] is not None:
        pooled = [np.concatenate([a.credits[name] for a in audits]) for name in (best, "model")]
        out["best_blind_vs_model"] = blind_vs_model(best, pooled[0], pooled[1], items)
    out["ceilings"] = pooled_ceilings(audits)
    cycle_sets = [a.credits["cycle"] for a in audits if "cycle" in a.credits]
    out["cycle_acc"] = float(np.mean(np.concatenate(cycle_sets))) if cycle_sets else None
    return out


def pooled_ceilings(audits: Sequence[SubsetAudit]) -> dict[str, Any]:
    """Each view's forced ties and ceiling over all subsets' comparisons together (exact: counts add up)."""
    total = sum(a.metrics["n_comparisons"] for a in audits)
    out: dict[str, Any] = {}
    for name in (*VIEWS, "caption_only"):
        count = sum(a.metrics["ceilings"][f"{name}_forced_ties"] for a in audits)
        out[f"{name}_forced_ties"] = count
        out[f"{name}_forced_share"] = count / total
        out[f"{name}_ceiling"] = 1.0 - 0.5 * count / total
    return out
