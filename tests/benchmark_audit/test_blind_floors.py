"""The blind floors' word-frequency rule and the intervals of every floor (issue 40).

Expected values come from computations written here: the word-frequency score from the captions'
words (punctuation stripped with str.translate), each comparison's credit from the two scores, and
the intervals from a per-resample item bootstrap loop on numpy's generator.
"""

from __future__ import annotations

import json
import math
import string
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from benchmark_formats import write_sugarcrepe
from benchmark_formats_published import write_crepe, write_sugarcrepe_pp, write_valse, write_vl_checklist
from hypothesis import given, settings
from hypothesis import strategies as st

from clip_cycles.benchmark_audit.run import audit_benchmark

PUNCTUATION = str.maketrans({c: " " for c in string.punctuation if c != "_"})


def words(text: str) -> list[str]:
    return text.lower().translate(PUNCTUATION).split()


def word_frequency(captions: list[str]) -> dict[str, float]:
    """Per distinct caption (up to whitespace and case): mean over its words of log(1 + other captions holding it)."""
    distinct = {" ".join(c.split()).lower(): c for c in reversed(captions)}
    holding = Counter(w for c in distinct.values() for w in set(words(c)))
    out = {}
    for key, caption in distinct.items():
        ws = words(caption)
        out[key] = sum(math.log(1 + holding[w] - 1) for w in ws) / len(ws) if ws else 0.0
    return out


def credit(d: float) -> float:
    return 1.0 if d > 1e-9 else (0.0 if d < -1e-9 else 0.5)


def write_pairs(root: Path, rows: list[tuple[str, str, str]]) -> None:
    items = {str(i): {"filename": f, "caption": p, "negative_caption": n} for i, (f, p, n) in enumerate(rows)}
    root.mkdir(parents=True, exist_ok=True)
    (root / "replace_obj.json").write_text(json.dumps(items))


def test_word_frequency_rule_equals_an_independent_computation(tmp_path: Path) -> None:
    rows = [
        ("1.jpg", "A dog on a sofa.", "A zebra on a sofa."),
        ("2.jpg", "A dog near a tree.", "A dog near a lighthouse."),
        ("3.jpg", "Two dogs, a tree.", "Two cats, a tree."),
        ("4.jpg", "A cat near a tree.", "A dog near a tree."),
        ("5.jpg", "A quokka on a sofa.", "A dog on a sofa."),
    ]
    write_pairs(tmp_path, rows)
    (sub,) = audit_benchmark("sugarcrepe", tmp_path).audits
    score = word_frequency([c for _, p, n in rows for c in (p, n)])
    key = lambda c: " ".join(c.split()).lower()  # noqa: E731
    expected = [credit(score[key(p)] - score[key(n)]) for _, p, n in rows]
    np.testing.assert_array_equal(sub.credits["word_frequency"], expected)
    assert sub.metrics["word_frequency_acc"] == pytest.approx(np.mean(expected), abs=0)
    # The commoner words win (zebra, lighthouse are rare); quokka loses to dog, as a blind rule would say.
    assert expected[:2] == [1.0, 1.0] and expected[4] == 0.0


@pytest.mark.parametrize(
    "writer",
    [write_valse, write_vl_checklist, write_sugarcrepe_pp, write_crepe, lambda r: write_sugarcrepe(r, images=False)],
)
def test_every_order_blind_floor_stays_under_the_bag_of_words_ceiling(tmp_path: Path, writer) -> None:
    name = {
        "write_valse": "valse",
        "write_vl_checklist": "vl_checklist",
        "write_sugarcrepe_pp": "sugarcrepe_pp",
        "write_crepe": "crepe",
    }.get(getattr(writer, "__name__", ""), "sugarcrepe")
    writer(tmp_path)
    for sub in audit_benchmark(name, tmp_path).audits:
        assert sub.metrics["word_frequency_acc"] <= sub.metrics["ceilings"]["bag_of_words_ceiling"] + 1e-12, sub.name


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abcdefgh"), st.sampled_from("abcdefgh"), st.sampled_from("abcdefgh"), st.booleans()),
        min_size=1,
        max_size=12,
    )
)
def test_word_frequency_ties_where_the_words_are_the_same(tmp_path_factory, triples) -> None:
    """Property: a negative with the positive's words in another order is a tie for the rule, so the rule can
    never pass the bag-of-words ceiling."""
    rows = [("z.jpg", "p q", "p q r")]  # one usable comparison whatever is drawn
    for i, (a, b, c, swap) in enumerate(triples):
        positive = f"{a} x {b} y {c}"
        negative = f"{c} x {b} y {a}" if swap else f"{a} x {b} y {c} z"
        rows.append((f"{i}.jpg", positive, negative))
    root = tmp_path_factory.mktemp("wf")
    write_pairs(root, rows)
    (sub,) = audit_benchmark("sugarcrepe", root).audits
    kept = [r for r in rows if " ".join(r[1].split()) != " ".join(r[2].split())]
    for c, (_, p, n) in zip(sub.credits["word_frequency"], kept):
        if sorted(words(p)) == sorted(words(n)):
            assert c == 0.5
    assert sub.metrics["word_frequency_acc"] <= sub.metrics["ceilings"]["bag_of_words_ceiling"] + 1e-12


def item_bootstrap(values: np.ndarray, items: list[str], n: int = 1000, seed: int = 0, level: float = 0.95):
    """Percentile interval of the mean, resampling items: one loop per resample."""
    codes = np.unique(np.asarray(items), return_inverse=True)[1]
    k = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(n):
        counts = np.bincount(rng.integers(0, k, size=k), minlength=k).astype(float)
        w = counts[codes]
        means.append(float(w @ values / w.sum()))
    return np.quantile(means, [(1 - level) / 2, (1 + level) / 2])


def test_every_floor_carries_an_item_bootstrap_interval(tmp_path: Path) -> None:
    rows = [(f"{i % 17}.jpg", f"a dog number {i} on a sofa", f"a cat on the {'red ' * (i % 3)}sofa {i}") for i in range(60)]
    write_pairs(tmp_path, rows)
    audit = audit_benchmark("sugarcrepe", tmp_path)
    (sub,) = audit.audits
    items = sub.item_ids
    for name in ("shortest_caption", "longest_caption", "word_frequency", "witness"):
        ci = sub.metrics[f"{name}_acc_ci"]
        low, high = item_bootstrap(sub.credits[name], items)
        assert (ci["low"], ci["high"]) == pytest.approx((low, high), abs=1e-12), name
        assert ci["low"] <= sub.metrics[f"{name}_acc"] <= ci["high"] and ci["unit"] == "item" and ci["level"] == 0.95
    best = sub.metrics["best_blind"]
    assert sub.metrics["best_blind_acc_ci"] == sub.metrics[f"{best}_acc_ci"]
    # Over the benchmark: the pooled interval, items of other subsets being other units.
    pooled = audit.summary["best_blind_acc_ci"]
    assert pooled["low"] <= audit.summary["best_blind_acc"] <= pooled["high"]
