"""The benchmark audit of hand-built designs, number by number (no files, no encoder).

Each design is a few hard negatives (u, v+) - (u, v-) written with ``ComparisonSetBuilder``;
every expected value is worked out in the test from the design's own lists: signed degrees by
counting, credits by comparing with the tie tolerance, the model's score by plain dot products.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

# At the top, not inside the probe replay: mutation runs fork every mutant from a process that has only
# collected the tests, and an import there is paid once instead of once per mutant (seconds each).
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

from clip_cycles.benchmark_audit.audit import (
    AuditSettings,
    Embeddings,
    additive_values,
    audit_subset,
    degree_witness,
    global_degrees,
    summarize,
)
from clip_cycles.benchmark_audit.design import ComparisonSetBuilder
from clip_cycles.data.sources.images import ImageItem

TOL = 1e-9

#: (comparison id, item id, image, positive caption, negative caption, tags). c0 and c1 cross on
#: different images (one exact cycle); c1 and c2 share an item; lengths differ so the length rules decide.
ROWS = [
    ("c0", "i0", "a.png", "red cube", "blue cube", ("color",)),
    ("c1", "i1", "b.png", "blue cube", "red cube", ("color",)),
    ("c2", "i1", "a.png", "a cube", "a big cube", ("size",)),
    ("c3", "i2", "c.png", "a sphere", "a sphere on top", ("size", "shape")),
]


def _design(rows=ROWS, name: str = "hand"):
    builder = ComparisonSetBuilder(name)
    for cid, item, image, pos, neg, tags in rows:
        builder.add(cid, item, [ImageItem(image)] * 2, [pos, neg], [1.0, -1.0], tags)
    builder.skip("image missing", 3)
    return builder.build()


def _credit(value: float, tol: float = TOL) -> float:
    return 1.0 if value > tol else (0.0 if value < -tol else 0.5)


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def _embeddings(cs, seed: int = 0) -> tuple[Embeddings, dict[str, np.ndarray], dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(len(cs.images), 4))
    psi = rng.normal(size=(len(cs.captions), 4))
    img = {item.key: phi[i] for i, item in enumerate(cs.images)}
    cap = {c: psi[i] for i, c in enumerate(cs.captions)}
    return Embeddings(phi, psi), img, cap


def test_design_and_blind_scores_of_a_hand_built_subset() -> None:
    cs = _design()
    metrics = audit_subset(cs).metrics
    caption_degree: Counter = Counter()
    for _, _, _, pos, neg, _ in ROWS:
        caption_degree[pos] += 1
        caption_degree[neg] -= 1
    design = metrics["design"]
    assert (design["n_edges"], design["n_images"], design["n_captions"]) == (8, 3, 6)
    # Every comparison's image degree cancels (+1 and -1 on one image); its two captions do not.
    assert design["share_comparisons_unbalanced"] == 1.0
    assert design["share_comparisons_caption_decidable"] == 1.0
    assert design["share_comparisons_image_decidable"] == 0.0
    assert design["share_images_unbalanced"] == 0.0
    assert design["share_captions_unbalanced"] == _mean(d != 0 for d in caption_degree.values()) == 4 / 6
    # The witness is the first caption of largest |degree|: "a cube" (+1; red/blue cube cancel over c0, c1).
    assert design["theorem1_witness"] == {"side": "caption", "vertex": "a cube", "value": 1.0}
    assert (design["balanced"], design["max_abs_degree"]) == (False, 1.0)
    assert metrics["witness_acc"] == _mean(_credit(caption_degree[p] - caption_degree[n]) for *_, p, n, _ in ROWS) == 0.75
    assert metrics["shortest_caption_acc"] == _mean(_credit(len(n) - len(p)) for *_, p, n, _ in ROWS) == 0.75
    assert metrics["longest_caption_acc"] == _mean(_credit(len(p) - len(n)) for *_, p, n, _ in ROWS) == 0.25
    assert (metrics["best_blind"], metrics["best_blind_acc"]) == ("shortest_caption", 0.75)
    assert (metrics["kind"], metrics["n_comparisons"], metrics["n_items"]) == ("comparisons", 4, 3)
    assert metrics["skipped"] == {"image missing": 3}
    # Without a model every model-read score says why it is missing, and nothing is made up.
    for name in ("caption_probe", "image_probe"):
        assert metrics[f"{name}_unavailable_reason"] == "no model given: the probe reads the model's embeddings"
        assert f"{name}_acc" not in metrics
    assert metrics["model_unavailable_reason"] == "no model given" and "model_acc" not in metrics
    cycles = metrics["cycles"]
    assert cycles["n_cycles"] == 1 and cycles["declared_by_format"] is False
    assert (cycles["n_paired_comparisons"], cycles["n_paired_items"], cycles["share_items_paired"]) == (2, 2, 2 / 3)
    assert cycles["additive_cycle_acc_identity"] == 0.5
    assert cycles["unavailable_reason"] == "no model given: CycleAcc needs the model's scores"
    assert "cycle_acc" not in cycles


def test_model_cycles_and_per_tag_of_a_hand_built_subset() -> None:
    cs = _design()
    embeddings, img, cap = _embeddings(cs)
    audit = audit_subset(cs, embeddings, AuditSettings(probes=False))
    metrics = audit.metrics
    s = {(u, v): float(img[u] @ cap[v]) for u in img for v in cap}
    model = {cid: _credit(s[u, p] - s[u, n]) for cid, _, u, p, n, _ in ROWS}
    assert metrics["model_acc"] == pytest.approx(_mean(model.values()), abs=0)
    items: dict[str, list[float]] = {}
    for cid, item, *_ in ROWS:
        items.setdefault(item, []).append(model[cid])
    assert metrics["model_item_acc"] == pytest.approx(_mean(min(v) for v in items.values()), abs=0)
    np.testing.assert_array_equal(audit.credits["model"], [model[r[0]] for r in ROWS])
    for name in ("caption_probe", "image_probe"):
        assert metrics[f"{name}_unavailable_reason"] == "probes switched off (AuditSettings.probes=False)"
        assert name not in audit.credits
    # The cycle of c0 and c1: (u1, u2, v1, v2) = (a, b, red cube, blue cube).
    block = [[s["a.png", "red cube"], s["a.png", "blue cube"]], [s["b.png", "red cube"], s["b.png", "blue cube"]]]
    delta = block[0][0] + block[1][1] - block[0][1] - block[1][0]
    text = block[0][0] > block[0][1] and block[1][1] > block[1][0]
    image = block[0][0] > block[1][0] and block[1][1] > block[0][1]
    cycles = metrics["cycles"]
    assert cycles["cycle_acc"] == _credit(delta)
    assert (cycles["text_acc"], cycles["image_acc"], cycles["group_acc"]) == (float(text), float(image), float(text and image))
    assert cycles["n_ties"] == int(abs(delta) <= TOL) and "unavailable_reason" not in cycles
    np.testing.assert_array_equal(audit.credits["cycle"], [_credit(delta)])
    # Per tag: the comparisons carrying it, and the cycle under the tags of its first comparison (c0).
    per_tag = metrics["per_tag"]
    assert sorted(per_tag) == ["color", "shape", "size"]
    lengths = {cid: _credit(len(n) - len(p)) for cid, _, _, p, n, _ in ROWS}
    for tag, members in (("color", ["c0", "c1"]), ("size", ["c2", "c3"]), ("shape", ["c3"])):
        entry = per_tag[tag]
        assert entry["n_comparisons"] == len(members)
        assert entry["model_acc"] == pytest.approx(_mean(model[c] for c in members), abs=0)
        assert entry["shortest_caption_acc"] == _mean(lengths[c] for c in members)
    assert per_tag["color"]["n_cycles"] == 1 and per_tag["color"]["cycle_acc"] == _credit(delta)
    assert per_tag["size"]["n_cycles"] == 0 and "cycle_acc" not in per_tag["size"]


def test_the_tie_tolerance_of_the_settings_decides_every_credit() -> None:
    cs = _design()
    embeddings, img, cap = _embeddings(cs, seed=4)
    s = {(u, v): float(img[u] @ cap[v]) for u in img for v in cap}
    margins = {cid: s[u, p] - s[u, n] for cid, _, u, p, n, _ in ROWS}
    # A tolerance between the two smallest |margins|: exactly one comparison becomes a tie.
    ordered = sorted(abs(m) for m in margins.values())
    tol = (ordered[0] + ordered[1]) / 2
    metrics = audit_subset(cs, embeddings, AuditSettings(tie_tolerance=tol, probes=False)).metrics
    assert metrics["model_acc"] == pytest.approx(_mean(_credit(m, tol) for m in margins.values()), abs=0)
    assert metrics["model_acc"] != _mean(_credit(m) for m in margins.values())
    # The length rules tie on a margin of 1 character when the tolerance reaches it.
    wide = audit_subset(cs, None, AuditSettings(tie_tolerance=1.0)).metrics
    assert wide["shortest_caption_acc"] == _mean(_credit(len(n) - len(p), 1.0) for *_, p, n, _ in ROWS)
    with pytest.raises(
        ValueError,
        match=r"^AuditSettings option --tie-tolerance \(tie_tolerance\): must be a finite non-negative number, got -1.0 ",
    ):
        AuditSettings(tie_tolerance=-1.0)
    for bad in (float("inf"), float("nan")):
        with pytest.raises(
            ValueError,
            match=r"^AuditSettings option --tie-tolerance \(tie_tolerance\): must be a finite non-negative number, got ",
        ):
            AuditSettings(tie_tolerance=bad)
    with pytest.raises(
        ValueError, match=r"^AuditSettings option --probe-folds \(probe_folds\): must be at least 2 folds, got 1 "
    ):
        AuditSettings(probe_folds=1)
    assert AuditSettings(tie_tolerance=0.0, probe_folds=2).probe_folds == 2  # the edges are allowed


def _replayed_probe(features: np.ndarray, groups: list[str], folds: int, c: float) -> np.ndarray:
    """The probe as documented: folds by item (GroupKFold), mirrored training rows, no intercept."""
    codes = {g: i for i, g in enumerate(sorted(set(groups)))}
    group_codes = np.array([codes[g] for g in groups])
    values = np.zeros(len(groups))
    for train, test in GroupKFold(n_splits=folds).split(features, groups=group_codes):
        x = features[train]
        if not x.any():
            continue
        y = np.r_[np.ones(len(train)), np.zeros(len(train))]
        values[test] = (
            features[test] @ LogisticRegression(C=c, fit_intercept=False, max_iter=1000).fit(np.vstack([x, -x]), y).coef_.ravel()
        )
    return values


def test_probes_on_a_hand_built_subset() -> None:
    cs = _design()
    embeddings, img, cap = _embeddings(cs)
    # Default settings: 5 folds asked, 3 items in the subset, so 3 folds (one per item).
    audit = audit_subset(cs, embeddings)
    # The image side of every comparison cancels: the image probe has nothing to learn, every value ties.
    np.testing.assert_array_equal(audit.credits["image_probe"], np.full(4, 0.5))
    assert audit.metrics["image_probe_acc"] == 0.5
    # The caption probe: each comparison's caption degree vector psi(v+) - psi(v-), replayed here.
    features = np.array([cap[p] - cap[n] for _, _, _, p, n, _ in ROWS])
    replayed = _replayed_probe(features, [r[1] for r in ROWS], folds=3, c=10.0)
    np.testing.assert_array_equal(audit.credits["caption_probe"], [_credit(v) for v in replayed])
    assert audit.metrics["caption_probe_acc"] == _mean(_credit(v) for v in replayed)
    assert "caption_probe_unavailable_reason" not in audit.metrics
    # Another strength gives other values (probe_c reaches the regression).
    weak = audit_subset(cs, embeddings, AuditSettings(probe_c=1e-4, probe_folds=2))
    replayed_weak = _replayed_probe(features, [r[1] for r in ROWS], folds=2, c=1e-4)
    np.testing.assert_array_equal(weak.credits["caption_probe"], [_credit(v) for v in replayed_weak])
    # Two items are enough for a cross-validated probe; one item is not, and the record says so.
    two = _design([(c, "first" if c == "c0" else "second", u, p, n, t) for c, _, u, p, n, t in ROWS])
    assert "caption_probe_acc" in audit_subset(two, _embeddings(two)[0]).metrics
    single = _design([(c, "only", u, p, n, t) for c, _, u, p, n, t in ROWS])
    metrics = audit_subset(single, _embeddings(single)[0]).metrics
    for name in ("caption_probe", "image_probe"):
        assert metrics[f"{name}_unavailable_reason"] == "a cross-validated probe needs at least 2 items, the subset has 1"
        assert f"{name}_acc" not in metrics


def test_an_exact_tie_of_the_cycle_is_counted_at_zero_tolerance() -> None:
    # Integer additive embeddings, s(u, v) = a(u) + b(v) exactly: the cycle's Delta is exactly 0.
    cs = _design()
    a = {"a.png": 3.0, "b.png": -2.0, "c.png": 5.0}
    b = {c: float(i) for i, c in enumerate(cs.captions)}
    phi = np.array([[1.0, a[item.key]] for item in cs.images])
    psi = np.array([[b[c], 1.0] for c in cs.captions])
    cycles = audit_subset(cs, Embeddings(phi, psi), AuditSettings(tie_tolerance=0.0, probes=False)).metrics["cycles"]
    assert (cycles["n_ties"], cycles["cycle_acc"]) == (1, 0.5)


def test_witness_rules_ties_dust_and_balance() -> None:
    # One edge: image and caption degree both +1; images come first on a tie, as signed_degrees does.
    one = ComparisonSetBuilder("one")
    one.add("c0", "i0", [ImageItem("a.png")], ["x"], [1.0])
    one.add("c1", "i1", [ImageItem("b.png")] * 2, ["y", "z"], [2.0, -2.0])
    cs = one.build()
    image_degree, caption_degree = global_degrees(cs)
    np.testing.assert_array_equal(image_degree, [1.0, 0.0])
    np.testing.assert_array_equal(caption_degree, [1.0, 2.0, -2.0])
    # |caption y| = 2 beats image a's 1: the first caption of largest |degree|.
    assert degree_witness(cs, image_degree, caption_degree).__dict__ == {"side": "caption", "vertex": "y", "value": 2.0}
    assert degree_witness(cs, image_degree, np.array([1.0, 0.0, 0.0])).__dict__ == {
        "side": "image",
        "vertex": "a.png",
        "value": 1.0,
    }
    assert degree_witness(cs, np.array([0.0, -3.0]), np.array([1.0, 0.0, 0.0])).__dict__ == {
        "side": "image",
        "vertex": "b.png",
        "value": -3.0,
    }
    assert degree_witness(cs, np.zeros(2), np.zeros(3)) is None
    # Rounding dust (0.1 + 0.2 - 0.3) is a zero degree: the design is balanced, its witness none.
    dust = ComparisonSetBuilder("dust")
    dust.add("c0", "i0", [ImageItem("a.png")] * 3, ["x"] * 3, [0.1, 0.2, -0.3])
    dust.add("c1", "i1", [ImageItem("a.png")] * 2, ["x", "x"], [1.0, -1.0])
    dusty = dust.build()
    assert 0.1 + 0.2 - 0.3 != 0.0
    np.testing.assert_array_equal(global_degrees(dusty)[0], [0.0])
    design = audit_subset(dusty).metrics["design"]
    assert design["balanced"] is True and design["theorem1_witness"] is None and design["max_abs_degree"] == 0.0
    assert design["share_images_unbalanced"] == 0.0 and design["share_captions_unbalanced"] == 0.0
    # Additive values from each side alone, and both together.
    d_img, d_cap = cs.degree_matrices()
    a, b = np.array([10.0, 100.0]), np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(additive_values(d_img, d_cap, a, None), [10.0, 0.0])
    np.testing.assert_array_equal(additive_values(d_img, d_cap, None, b), [1.0, 2 * 2.0 - 2 * 3.0])
    np.testing.assert_array_equal(additive_values(d_img, d_cap, a, b), [11.0, -2.0])
    np.testing.assert_array_equal(additive_values(d_img, d_cap, None, None), [0.0, 0.0])


def test_equal_blind_scores_name_the_first_in_table_order() -> None:
    # Positive and negative of the same length: both length rules tie on every comparison (0.5 each).
    rows = [("c0", "i0", "a.png", "red cube", "tan cube", ()), ("c1", "i1", "b.png", "big ball", "old ball", ())]
    metrics = audit_subset(_design(rows)).metrics
    assert metrics["shortest_caption_acc"] == metrics["longest_caption_acc"] == 0.5
    assert (metrics["best_blind"], metrics["best_blind_acc"]) == ("shortest_caption", 0.5)
    assert summarize([audit_subset(_design(rows))])["best_blind"] == "shortest_caption"
    # longest_caption wins when it is strictly better.
    longer = [("c0", "i0", "a.png", "a red cube", "a cube", ())]
    assert audit_subset(_design(longer)).metrics["best_blind"] == "longest_caption"


def test_summary_weights_by_comparison_and_by_cycle() -> None:
    first = _design()
    second = _design(
        [
            ("d0", "j0", "x.png", "a dog", "a small dog", ("size",)),
            ("d1", "j1", "y.png", "a small dog", "a dog", ("size",)),
            ("d2", "j2", "z.png", "two cats", "one cat", ()),
        ],
        name="other",
    )
    audits = [audit_subset(first, _embeddings(first)[0]), audit_subset(second, _embeddings(second, 1)[0])]
    summary = summarize(audits)
    assert (summary["n_subsets"], summary["n_comparisons"], summary["n_cycles"]) == (2, 7, 2)
    for name in ("witness", "shortest_caption", "longest_caption", "word_frequency", "caption_probe", "image_probe", "model"):
        pooled = [c for a in audits for c in a.credits[name].tolist()]
        assert summary[f"{name}_acc"] == pytest.approx(_mean(pooled), abs=1e-15), name
    # Comparison-weighted, not the mean of the two subset means (4 and 3 comparisons).
    means = [a.metrics["shortest_caption_acc"] for a in audits]
    assert summary["shortest_caption_acc"] == pytest.approx((4 * means[0] + 3 * means[1]) / 7)
    cycle_credits = [c for a in audits for c in a.credits["cycle"].tolist()]
    assert summary["cycle_acc"] == _mean(cycle_credits)
    order = ["shortest_caption", "longest_caption", "word_frequency", "caption_probe", "image_probe"]
    blind = {k: summary[f"{k}_acc"] for k in order}
    best = max(blind.values())
    assert summary["best_blind"] == next(k for k in order if blind[k] == best) and summary["best_blind_acc"] == best
    # A score missing from one subset is missing overall; no cycles anywhere is None, not 0.
    partial = summarize([audits[0], audit_subset(second)])
    assert partial["model_acc"] is None and partial["caption_probe_acc"] is None
    assert partial["witness_acc"] == pytest.approx(
        _mean([*audits[0].credits["witness"].tolist(), *audit_subset(second).credits["witness"].tolist()])
    )
    assert partial["cycle_acc"] == _mean(audits[0].credits["cycle"].tolist())
    acyclic = summarize([audit_subset(_design(ROWS[2:]))])
    assert acyclic["cycle_acc"] is None and acyclic["n_cycles"] == 0


def test_a_declared_cycle_is_read_as_the_format_gives_it() -> None:
    """A Winoground-style block: four directional comparisons of one item and the cycle the format declares."""
    a, b = ImageItem("a.png"), ImageItem("b.png")
    builder = ComparisonSetBuilder("wino", kind="cycles")
    for cid, images, captions in (
        ("t0", [a, a], ["p", "q"]),
        ("t1", [b, b], ["q", "p"]),
        ("i0", [a, b], ["p", "p"]),
        ("i1", [b, a], ["q", "q"]),
    ):
        builder.add(cid, "w0", images, captions, [1.0, -1.0])
    builder.add_cycle(a, b, "p", "q", tags=("tag=Relation",))
    cs = builder.build()
    phi = np.array([[1.0, 0.2], [0.3, 1.0]])
    psi = np.array([[0.9, 0.1], [0.4, 0.8]])
    metrics = audit_subset(cs, Embeddings(phi, psi), AuditSettings(probes=False)).metrics
    s = phi @ psi.T  # rows a, b; columns p, q
    delta = s[0, 0] + s[1, 1] - s[0, 1] - s[1, 0]
    cycles = metrics["cycles"]
    assert (cycles["n_cycles"], cycles["declared_by_format"]) == (1, True)
    assert (cycles["n_paired_comparisons"], cycles["n_paired_items"], cycles["share_items_paired"]) == (4, 1, 1.0)
    assert cycles["cycle_acc"] == _credit(delta)
    text = s[0, 0] > s[0, 1] and s[1, 1] > s[1, 0]
    image = s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1]
    assert (cycles["text_acc"], cycles["image_acc"], cycles["group_acc"]) == (float(text), float(image), float(text and image))
    assert metrics["kind"] == "cycles"
    # The cycle's tag comes from the format's declaration; no comparison carries it.
    assert metrics["per_tag"] == {"tag=Relation": {"n_comparisons": 0, "n_cycles": 1, "cycle_acc": _credit(delta)}}
    # Each directional comparison alone is decidable by one side; the item is one comparison set's worth.
    model = [s[0, 0] - s[0, 1], s[1, 1] - s[1, 0], s[0, 0] - s[1, 0], s[1, 1] - s[0, 1]]
    assert metrics["model_acc"] == _mean(_credit(m) for m in model)
    assert metrics["model_item_acc"] == min(_credit(m) for m in model)
    assert metrics["design"]["share_comparisons_unbalanced"] == 1.0
    assert metrics["design"]["share_comparisons_image_decidable"] == 0.5
    assert metrics["design"]["share_comparisons_caption_decidable"] == 0.5


def test_decidable_and_unbalanced_shares_count_comparisons_by_hand() -> None:
    """Shares of comparisons whose image side, caption side or either side does not cancel."""
    builder = ComparisonSetBuilder("shares")
    builder.add("c0", "i0", [ImageItem("a.png")], ["x"], [1.0])  # one edge: image a and caption x both +1
    builder.add("c1", "i1", [ImageItem("b.png")] * 2, ["y", "z"], [2.0, -2.0])  # the image cancels, the captions not
    builder.add("c2", "i2", [ImageItem("a.png")] * 2, ["x", "x"], [1.0, -1.0])  # everything cancels
    design = audit_subset(builder.build()).metrics["design"]
    # Nonzero net weights per comparison, counted here: images (1, 0, 0), captions (1, 2, 0).
    assert design["share_comparisons_image_decidable"] == pytest.approx(1 / 3)
    assert design["share_comparisons_caption_decidable"] == pytest.approx(2 / 3)
    assert design["share_comparisons_unbalanced"] == pytest.approx(2 / 3)


def test_an_acyclic_subset_names_itself_and_says_why_it_has_no_cycle() -> None:
    audit = audit_subset(_design(ROWS[2:], name="acyclic"))
    assert audit.name == "acyclic"
    assert audit.metrics["cycles"]["n_cycles"] == 0
    assert audit.metrics["cycles"]["unavailable_reason"] == (
        "no two comparisons cross (u1, v1 > v2) and (u2, v2 > v1) on different images with the same caption texts"
    )


def test_a_tolerance_wider_than_every_cycle_contrast_ties_every_cycle() -> None:
    cs = _design()
    embeddings, _, _ = _embeddings(cs, seed=2)
    audit = audit_subset(cs, embeddings, AuditSettings(tie_tolerance=1e6, probes=False))
    assert audit.metrics["cycles"]["n_cycles"] == 1
    assert audit.metrics["cycles"]["cycle_acc"] == 0.5 and audit.credits["cycle"].tolist() == [0.5]
    assert audit.metrics["cycles"]["n_ties"] == 1


def test_a_cycle_carries_the_tags_of_its_first_comparison() -> None:
    rows = [ROWS[0], (*ROWS[1][:5], ("other",)), *ROWS[2:]]
    cs = _design(rows)
    embeddings, _, _ = _embeddings(cs)
    per_tag = audit_subset(cs, embeddings, AuditSettings(probes=False)).metrics["per_tag"]
    assert per_tag["color"]["n_cycles"] == 1 and per_tag["other"]["n_cycles"] == 0


def test_the_best_blind_score_is_the_highest_not_the_last_named() -> None:
    """Positives longer than their negatives: the longest-caption rule wins, whatever the names' order."""
    longer = [(cid, item, image, neg, pos, tags) for cid, item, image, pos, neg, tags in ROWS]
    summary = summarize([audit_subset(_design(longer), None, AuditSettings(probes=False))])
    assert summary["longest_caption_acc"] > summary["shortest_caption_acc"]
    assert summary["best_blind"] == "longest_caption" and summary["best_blind_acc"] == summary["longest_caption_acc"]


def test_the_witness_adds_the_image_side_of_a_comparison() -> None:
    """A comparison of two images with one caption: only the image degrees can decide it."""
    builder = ComparisonSetBuilder("images")
    builder.add("c0", "i0", [ImageItem("a.png"), ImageItem("b.png")], ["x", "x"], [1.0, -1.0])
    builder.add("c1", "i1", [ImageItem("a.png")], ["y"], [1.0])
    cs = builder.build()
    credits = audit_subset(cs).credits["witness"]
    # Global degrees: a +2, b -1; x 0, y +1. c0's value is a - b = 3 > 0; c1's is a + y = 3 > 0.
    np.testing.assert_array_equal(global_degrees(cs)[0], [2.0, -1.0])
    assert credits.tolist() == [1.0, 1.0]


def test_merged_caption_spellings_are_counted_in_the_metrics() -> None:
    builder = ComparisonSetBuilder("spellings")
    builder.add("c0", "i0", [ImageItem("a.png")] * 2, ["a dog", "a cat"], [1.0, -1.0])
    builder.add("c1", "i1", [ImageItem("b.png")] * 2, ["A dog ", "a  cat"], [1.0, -1.0])  # two other spellings
    metrics = audit_subset(builder.build()).metrics
    assert metrics["caption_variants_merged"] == 2 and metrics["design"]["n_captions"] == 2


def test_a_declared_cycle_without_tags_is_audited_with_none_and_an_acyclic_one_has_no_identity() -> None:
    import dataclasses

    a, b = ImageItem("a.png"), ImageItem("b.png")
    builder = ComparisonSetBuilder("wino", kind="cycles")
    for cid, images, captions in (("t0", [a, a], ["p", "q"]), ("t1", [b, b], ["q", "p"])):
        builder.add(cid, "w0", images, captions, [1.0, -1.0])
    builder.add_cycle(a, b, "p", "q", tags=("tag=Relation",))
    untagged = dataclasses.replace(builder.build(), cycle_tags=None)  # a reader that declares cycles without tags
    phi, psi = np.array([[1.0, 0.2], [0.3, 1.0]]), np.array([[0.9, 0.1], [0.4, 0.8]])
    metrics = audit_subset(untagged, Embeddings(phi, psi), AuditSettings(probes=False)).metrics
    assert metrics["cycles"]["n_cycles"] == 1 and metrics["cycles"]["additive_cycle_acc_identity"] == 0.5
    assert "tag=Relation" not in metrics["per_tag"]
    assert audit_subset(_design(ROWS[2:])).metrics["cycles"]["additive_cycle_acc_identity"] is None


def test_the_first_caption_can_be_the_witness() -> None:
    """Caption index 0 with the largest |degree| beats a smaller image degree (its value is read, not 0)."""
    builder = ComparisonSetBuilder("first")
    builder.add("c0", "i0", [ImageItem("a.png")] * 3, ["x", "x", "y"], [1.0, 1.0, -1.0])
    builder.add("c1", "i1", [ImageItem("b.png")] * 2, ["x", "y"], [1.0, -1.0])
    cs = builder.build()
    image_degree, caption_degree = global_degrees(cs)
    np.testing.assert_array_equal(image_degree, [1.0, 0.0])
    np.testing.assert_array_equal(caption_degree, [3.0, -2.0])
    assert degree_witness(cs, image_degree, caption_degree).__dict__ == {"side": "caption", "vertex": "x", "value": 3.0}


def _item_bootstrap(values: np.ndarray, items: list[str], n: int = 1000, seed: int = 0, level: float = 0.95) -> tuple:
    """Percentile interval of the mean credit, resampling items: one plain loop per resample."""
    codes = np.unique(np.asarray(items), return_inverse=True)[1]
    k = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(n):
        counts = np.bincount(rng.integers(0, k, size=k), minlength=k).astype(float)
        weights = counts[codes]
        means.append(float(weights @ values / weights.sum()))
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return min(max(float(low), 0.0), 1.0), min(max(float(high), 0.0), 1.0)


def test_the_summary_carries_each_scores_pooled_item_interval_and_the_pooled_ceilings() -> None:
    first, second = _design(), _design(ROWS[:2], name="other")  # the same item ids, other subsets: other items
    audits = [audit_subset(first, _embeddings(first)[0]), audit_subset(second, _embeddings(second, 1)[0])]
    summary = summarize(audits)
    items = [f"hand/{i}" for i in first.item_ids] + [f"other/{i}" for i in second.item_ids]
    for name in ("witness", "shortest_caption", "longest_caption", "word_frequency", "model"):
        pooled = np.concatenate([a.credits[name] for a in audits])
        ci = summary[f"{name}_acc_ci"]
        assert (ci["low"], ci["high"]) == pytest.approx(_item_bootstrap(pooled, items), abs=1e-12), name
        assert ci == {"low": ci["low"], "high": ci["high"], "level": 0.95, "n_resamples": 1000, "seed": 0,
                      "method": "percentile", "unit": "item"}  # fmt: skip
    assert summary["best_blind_acc_ci"] == summary[f"{summary['best_blind']}_acc_ci"]
    # Pooled ceilings: forced ties add up over the subsets' comparisons (6 in all).
    for view in ("bag_of_words", "length", "caption_only"):
        ties = sum(a.metrics["ceilings"][f"{view}_forced_ties"] for a in audits)
        assert summary["ceilings"][f"{view}_forced_ties"] == ties
        assert summary["ceilings"][f"{view}_forced_share"] == pytest.approx(ties / 6, abs=1e-15)
        assert summary["ceilings"][f"{view}_ceiling"] == pytest.approx(1 - ties / 12, abs=1e-15)


def test_pooled_ceilings_of_hand_written_counts() -> None:
    from clip_cycles.benchmark_audit.audit import SubsetAudit, pooled_ceilings

    views = ("bag_of_words", "length", "caption_only")
    a = SubsetAudit("a", {"n_comparisons": 4, "ceilings": {f"{v}_forced_ties": k for k, v in enumerate(views)}})
    b = SubsetAudit("b", {"n_comparisons": 6, "ceilings": {f"{v}_forced_ties": 3 for v in views}})
    out = pooled_ceilings([a, b])
    # 10 comparisons: bag of words 0 + 3 ties, length 1 + 3, caption only 2 + 3.
    assert out == {
        "bag_of_words_forced_ties": 3, "bag_of_words_forced_share": 0.3, "bag_of_words_ceiling": 0.85,
        "length_forced_ties": 4, "length_forced_share": 0.4, "length_ceiling": 0.8,
        "caption_only_forced_ties": 5, "caption_only_forced_share": 0.5, "caption_only_ceiling": 0.75,
    }  # fmt: skip


def test_blind_vs_model_record_names_each_number() -> None:
    from clip_cycles.algebra.paired import paired_difference
    from clip_cycles.benchmark_audit.audit import blind_vs_model

    blind = np.array([1.0, 1.0, 0.5, 0.0, 1.0, 1.0])
    model = np.array([0.0, 1.0, 1.0, 0.0, 0.0, 0.5])
    items = ["p", "p", "q", "r", "s", "s"]
    record = blind_vs_model("word_frequency", blind, model, items)
    reference = paired_difference(blind, model, np.asarray(items))
    assert set(record) == {"blind", "n_comparisons", "n_items", "blind_acc", "model_acc", "diff", "ci_low", "ci_high",
                           "level", "se", "df", "p_value", "interval_method", "unit", "verdict"}  # fmt: skip
    assert (record["blind"], record["n_comparisons"], record["n_items"], record["unit"]) == ("word_frequency", 6, 4, "item")
    assert record["blind_acc"] == pytest.approx(4.5 / 6) and record["model_acc"] == pytest.approx(2.5 / 6)
    assert record["diff"] == pytest.approx(2 / 6)
    assert (record["se"], record["df"]) == (reference.se, reference.df) and record["se"] > 0
    assert record["verdict"] == "too few comparisons"  # 6 comparisons on 4 items


def test_accuracy_intervals_draw_with_the_default_seed_over_items() -> None:
    from clip_cycles.benchmark_audit.audit import accuracy_intervals

    rng = np.random.default_rng(5)
    items = [f"i{k % 23}" for k in range(70)]  # 23 items: interior percentiles, which the seed moves
    credits = {"b": rng.choice([0.0, 0.5, 1.0], size=70), "a": rng.choice([0.0, 1.0], size=70)}
    found = accuracy_intervals(credits, items)
    assert list(found) == ["a", "b"]
    for name in ("a", "b"):
        assert (found[name]["low"], found[name]["high"]) == pytest.approx(_item_bootstrap(credits[name], items), abs=1e-12)
    assert accuracy_intervals({}, []) == {}
