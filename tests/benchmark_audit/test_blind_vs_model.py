"""audit-benchmark: a blind score "beats" the model only when the paired interval over items excludes 0."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from clip_cycles.benchmark_audit.audit import BLIND_VS_MODEL_VERDICTS, AuditSettings, Embeddings, audit_subset, summarize
from clip_cycles.benchmark_audit.design import ComparisonSetBuilder
from clip_cycles.benchmark_audit.report import markdown_table
from clip_cycles.benchmark_audit.run import BenchmarkAudit
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.evaluation.demo import audit_summary

SETTINGS = AuditSettings(probes=False)


def _audit(model_wins: Sequence[bool], negative_longer: Sequence[bool], name: str = "sub") -> tuple:
    """Items of one image, a positive and a negative caption; the model wins item i iff ``model_wins[i]``.

    The shortest-caption rule wins item i iff its negative is longer: that is the best blind score
    whenever it wins more than half (the longest-caption rule wins the others).
    """
    n = len(model_wins)
    builder = ComparisonSetBuilder(name)
    image_vectors, caption_vectors = {}, {}
    for i in range(n):
        image = f"img{i}.png"
        pos, neg = f"pos {i:03d}", f"neg {i:03d}"
        if negative_longer[i]:
            neg += " and more"
        else:
            pos += " and more"
        builder.add(f"c{i}", f"item{i}", [ImageItem(image)] * 2, [pos, neg], [1.0, -1.0])
        axis = np.zeros(n)
        axis[i] = 1.0
        image_vectors[image] = axis
        caption_vectors[pos] = axis if model_wins[i] else -axis
        caption_vectors[neg] = -axis if model_wins[i] else axis
    cs = builder.build()
    embeddings = Embeddings(
        np.array([image_vectors[item.key] for item in cs.images]), np.array([caption_vectors[c] for c in cs.captions])
    )
    return cs, audit_subset(cs, embeddings, SETTINGS)


def test_a_small_lead_of_a_blind_score_is_within_noise_not_a_win() -> None:
    rng = np.random.default_rng(0)
    n = 60
    model_wins = np.zeros(n, dtype=bool)
    model_wins[rng.permutation(n)[:30]] = True
    negative_longer = np.zeros(n, dtype=bool)
    negative_longer[rng.permutation(n)[:33]] = True  # the length rule wins 33 of 60: 0.55 against 0.50
    _, audit = _audit(model_wins, negative_longer)
    paired = audit.metrics["best_blind_vs_model"]
    assert audit.metrics["best_blind_acc"] > audit.metrics["model_acc"]  # the old reading: "blind beats model"
    assert paired["blind"] == "shortest_caption" and paired["diff"] == pytest.approx(33 / 60 - 30 / 60)
    assert (paired["n_comparisons"], paired["n_items"]) == (60, 60)
    assert paired["ci_low"] < 0 < paired["ci_high"] and paired["verdict"] == "within noise"


def test_a_clear_lead_either_way_is_called_and_too_little_evidence_is_said() -> None:
    n = 40
    _, blind_wins = _audit([i % 2 == 0 for i in range(n)], [True] * n)  # length rule 1.0, model 0.5
    assert blind_wins.metrics["best_blind_vs_model"]["verdict"] == "blind beats model"
    assert blind_wins.metrics["best_blind_vs_model"]["ci_low"] > 0
    _, model_wins = _audit([True] * n, [i % 2 == 0 for i in range(n)])  # model 1.0, blind 0.5
    assert model_wins.metrics["best_blind_vs_model"]["verdict"] == "model above blind"
    _, few = _audit([False] * 10, [True] * 10)  # blind 1.0 against 0.0, but 10 items
    assert few.metrics["best_blind_vs_model"]["verdict"] == "too few comparisons"
    assert set(BLIND_VS_MODEL_VERDICTS) == {"blind beats model", "model above blind", "within noise", "too few comparisons"}


def test_the_summary_pools_subsets_and_the_table_has_the_column() -> None:
    n = 15  # too few alone; 30 comparisons on 30 items together
    _, one = _audit([False] * n, [True] * n, "one")
    _, two = _audit([False] * n, [True] * n, "two")  # the same item ids: still different items
    summary = summarize([one, two])
    assert one.metrics["best_blind_vs_model"]["verdict"] == "too few comparisons"
    assert summary["best_blind_vs_model"]["n_items"] == 2 * n
    assert summary["best_blind_vs_model"]["verdict"] == "blind beats model"
    audit = BenchmarkAudit("b", [one, two], summary, SETTINGS)
    table = markdown_table(audit)
    header = table.splitlines()[0].split(" | ")
    assert "best blind - model" in header
    assert "too few comparisons: shortest_caption +1.000 [+1.000, +1.000]" in table
    assert "blind beats model: shortest_caption +1.000" in table.splitlines()[4]


def test_the_demo_line_gives_the_paired_verdict_not_a_bare_comparison() -> None:
    n = 60
    _, audit = _audit([i % 2 == 0 for i in range(n)], [i % 2 == 1 or i < 6 for i in range(n)])
    metrics = {**summarize([audit]), "subsets": {"s": audit.metrics}}
    line = audit_summary({"dataset": "audit/x", "metrics": metrics}).splitlines()[1]
    paired = audit.metrics["best_blind_vs_model"]
    assert audit.metrics["best_blind_acc"] >= audit.metrics["model_acc"]  # the old line said "reaches the model's"
    assert line.endswith(f"<- {paired['verdict']} ({paired['diff']:+.3f} [{paired['ci_low']:+.3f}, {paired['ci_high']:+.3f}])")
    assert paired["verdict"] == "within noise" and "reaches" not in line


def test_blind_beats_model_is_adjusted_with_holm_over_the_subsets() -> None:
    # A clear blind win on one subset and a marginal one on another (the length rule wins 50 of 80 items, the model 36,
    # drawn independently: raw p between 0.025 and 0.05) and a third with no difference. Holm over the three keeps only
    # the clear call (the marginal one is its second step: 2 p > 0.05); the raw verdicts stay in the records.
    _, clear = _audit([False] * 80, [True] * 80, "clear")
    rng = np.random.default_rng(21)
    wins, longer = np.zeros(80, dtype=bool), np.zeros(80, dtype=bool)
    wins[rng.permutation(80)[:36]] = True
    longer[rng.permutation(80)[:50]] = True
    _, marginal = _audit(wins, longer, "marginal")
    same = np.arange(80) % 2 == 0
    _, null = _audit(same, same, "null")  # the length rule wins exactly where the model does
    summarize([clear, marginal, null])
    a, b = clear.metrics["best_blind_vs_model"], marginal.metrics["best_blind_vs_model"]
    assert a["adjusted_verdict"] == "blind beats model" and (a["adjustment"], a["n_adjusted"]) == ("holm", 3)
    assert a["interval_method"] == "cluster bootstrap, percentile" and a["unit"] == "item"
    assert b["verdict"] == "blind beats model" and 0.025 < b["p_value"] < 0.05  # called alone ...
    assert b["adjusted_p"] == pytest.approx(2 * b["p_value"]) and b["adjusted_verdict"] != "blind beats model"  # ... not both
