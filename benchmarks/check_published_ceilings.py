r"""audit-benchmark's floors and ceilings on a benchmark's files, checked by an independent computation.

Run it on the files as their authors publish them (no images are read):

    python benchmarks/check_published_ceilings.py sugarcrepe=/data/sugar-crepe/data \\
        valse=/data/VALSE/data vl_checklist=/data/VL-CheckList/data

It prints one JSON object. Per benchmark and subset: the comparisons counted, the shortest-caption
floor and the bag-of-words ceiling as ``audit-benchmark`` reports them (``ours``) and as this script
computes them from the JSON with its own reader and rules (``independent``), and whether they agree.
A subset with no comparison (VL-CheckList publishes three files holding ``[]``) is a row with count 0
on both sides and no rates. For SugarCrepe it adds the order-blind ceilings quoted for it
(sugar-crepe#10), each quoted with its word rule and recomputed under that rule:

- word rule ``\w+`` (the project's): swap_att 0.694, swap_obj 0.661, 0.9618 over all 7,511;
- word rule ``[a-z0-9']+`` (an apostrophe stays inside its word): swap_att 0.694, swap_obj 0.665, 0.9619.

Both rules lowercase first and drop the comparisons whose two captions are equal up to whitespace runs
and case; they differ on swap_obj's two possessive swaps ("a woman's head" / "a boy's head").

The independent rules, written out here from the declared normalisation, never with the package's
helpers:

- a comparison is (image, positive) over (image, negative); one whose two captions are equal up to
  whitespace runs and case is not a comparison (every score ties there);
- VALSE (``valse``): instances with ``mturk.caption >= 2`` (the paper's valid set); ``valse_all``: all;
  a ``foil`` string or a ``foils`` list; VL-CheckList: every POS x NEG pair of every entry;
- shortest-caption credit: 1 when the positive has fewer characters (as published), 0.5 when equal;
- bag of words: the lowercase caption cut into maximal runs of characters that are alphanumeric or
  ``_``; a comparison is a forced tie when the two multisets are equal; ceiling = 1 - ties / (2 n).

Exit status 1 when any figure differs between ``ours`` and ``independent`` (or, with
``--require-quoted``, when a quoted SugarCrepe figure does not hold); each failing figure is named on
stderr with its word rule, the value expected and the value computed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from clip_cycles.benchmark_audit.adapters import read_json
from clip_cycles.benchmark_audit.run import audit_benchmark

#: The formats this script reads itself.
FORMATS = ("sugarcrepe", "valse", "valse_all", "vl_checklist")
#: SugarCrepe's order-blind ceilings as quoted: (subset or "all", value, digits quoted, word rule).
QUOTED = (
    ("swap_att", 0.694, 3, r"\w+"),
    ("swap_obj", 0.661, 3, r"\w+"),
    ("all", 0.9618, 4, r"\w+"),
    ("swap_att", 0.694, 3, r"[a-z0-9']+"),
    ("swap_obj", 0.665, 3, r"[a-z0-9']+"),
    ("all", 0.9619, 4, r"[a-z0-9']+"),
)
QUOTED_N = 7511
#: Named here, not imported: a subset the package forgot would then show as missing from ``ours``.
SUGARCREPE_FILES = ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")

Pairs = list[tuple[str, str]]


def _same_caption(a: str, b: str) -> bool:
    return " ".join(a.split()).lower() == " ".join(b.split()).lower()


def _words(text: str) -> Counter:
    runs, word = [], []
    for ch in text.lower():
        if ch.isalnum() or ch == "_":
            word.append(ch)
        elif word:
            runs.append("".join(word))
            word = []
    if word:
        runs.append("".join(word))
    return Counter(runs)


def _words_apostrophe(text: str) -> Counter:
    """The word rule ``[a-z0-9']+`` on the lowercase text: ASCII letters, digits and apostrophes."""
    runs, word = [], []
    for ch in text.lower():
        if "a" <= ch <= "z" or "0" <= ch <= "9" or ch == "'":
            word.append(ch)
        elif word:
            runs.append("".join(word))
            word = []
    if word:
        runs.append("".join(word))
    return Counter(runs)


#: The word rules a quoted figure may state, written out here (never the package's).
WORD_RULES = {r"\w+": _words, r"[a-z0-9']+": _words_apostrophe}


def _load(path: Path) -> Any:
    # Parsing is not what is checked: the project's bounded, regular-file-only reader parses; the rules below are ours.
    return read_json(path)


def _folder(root: Path, names: list[str]) -> Path:
    return root if any((root / n).is_file() for n in names) else root / "data"


def read_sugarcrepe(root: Path) -> dict[str, Pairs]:
    folder = _folder(root, [f"{s}.json" for s in SUGARCREPE_FILES])
    out = {}
    for subset in SUGARCREPE_FILES:
        path = folder / f"{subset}.json"
        if path.is_file():
            out[subset] = [(r["caption"], r["negative_caption"]) for r in _load(path).values()]
    return out


def read_valse(root: Path, valid_only: bool) -> dict[str, Pairs]:
    out = {}
    for path in sorted(root.rglob("*.json")):
        pairs = []
        for row in _load(path).values():
            if valid_only and row["mturk"]["caption"] < 2:
                continue
            foils = row["foils"] if "foils" in row else row["foil"]
            for foil in [foils] if isinstance(foils, str) else foils:
                pairs.append((row["caption"], foil))
        out[path.stem] = pairs
    return out


def read_vl_checklist(root: Path) -> dict[str, Pairs]:
    out = {}
    for path in sorted(root.rglob("*.json")):
        if "images" in path.relative_to(root).parts:
            continue
        name = path.relative_to(root).with_suffix("").as_posix()
        out[name] = [(p, n) for _, texts in _load(path) for p in texts["POS"] for n in texts["NEG"]]
    return out


def independent(pairs: Pairs) -> dict[str, Any]:
    """n, shortest-caption floor and bag-of-words ceiling of one subset's (positive, negative) pairs."""
    kept = [(p, n) for p, n in pairs if not _same_caption(p, n)]
    if not kept:  # an empty subset: counted, no rate
        return EMPTY
    credit = sum(1.0 if len(p) < len(n) else 0.5 if len(p) == len(n) else 0.0 for p, n in kept)
    ties = sum(_words(p) == _words(n) for p, n in kept)
    return {
        "n_comparisons": len(kept),
        "shortest_caption_acc": credit / len(kept),
        "bag_of_words_forced_ties": ties,
        "bag_of_words_ceiling": 1.0 - 0.5 * ties / len(kept),
    }


#: A subset with no comparison, on either side.
EMPTY: dict[str, Any] = {
    "n_comparisons": 0,
    "shortest_caption_acc": None,
    "bag_of_words_forced_ties": 0,
    "bag_of_words_ceiling": None,
}


def count_ties(pairs: Pairs, rule: str) -> tuple[int, int]:
    """(comparisons, forced ties) of the pairs under word rule ``rule``."""
    kept = [(p, n) for p, n in pairs if not _same_caption(p, n)]
    words = WORD_RULES[rule]
    return len(kept), sum(words(p) == words(n) for p, n in kept)


def ours(metrics: dict[str, Any]) -> dict[str, Any]:
    ceilings = metrics["ceilings"]
    return {
        "n_comparisons": metrics["n_comparisons"],
        "shortest_caption_acc": metrics["shortest_caption_acc"],
        "bag_of_words_forced_ties": ceilings["bag_of_words_forced_ties"],
        "bag_of_words_ceiling": ceilings["bag_of_words_ceiling"],
    }


def agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    counts = ("n_comparisons", "bag_of_words_forced_ties")
    rates = ("shortest_caption_acc", "bag_of_words_ceiling")
    if not all(a[k] == b[k] for k in counts):
        return False
    return all(a[k] is None and b[k] is None or None not in (a[k], b[k]) and abs(a[k] - b[k]) <= 1e-12 for k in rates)


def check(name: str, root: Path) -> dict[str, Any]:
    """One benchmark: every subset by both computations, pooled figures, and SugarCrepe's quoted ones."""
    readers = {
        "sugarcrepe": read_sugarcrepe,
        "valse": lambda r: read_valse(r, True),
        "valse_all": lambda r: read_valse(r, False),
        "vl_checklist": read_vl_checklist,
    }
    read = readers[name](root)
    expected = {subset: independent(pairs) for subset, pairs in read.items()}
    audit = audit_benchmark(name, root)
    found = {a.name: ours(a.metrics) for a in audit.audits}
    found.update({subset: {**EMPTY, "reason": row["reason"]} for subset, row in audit.unusable.items()})
    subsets = {
        subset: {"ours": found.get(subset), "independent": expected.get(subset)} for subset in sorted(set(expected) | set(found))
    }
    for row in subsets.values():
        row["agree"] = row["ours"] is not None and row["independent"] is not None and agree(row["ours"], row["independent"])
    n = sum(e["n_comparisons"] for e in expected.values())
    ties = sum(e["bag_of_words_forced_ties"] for e in expected.values())
    pooled = {
        "n_comparisons": [audit.summary["n_comparisons"], n],
        "bag_of_words_ceiling": [audit.summary["ceilings"]["bag_of_words_ceiling"], 1.0 - 0.5 * ties / n],
    }
    out: dict[str, Any] = {"root": str(root), "subsets": subsets, "pooled_ours_independent": pooled}
    out["agree"] = all(r["agree"] for r in subsets.values()) and pooled["n_comparisons"][0] == n
    out["agree"] = out["agree"] and abs(pooled["bag_of_words_ceiling"][0] - pooled["bag_of_words_ceiling"][1]) <= 1e-12
    if name == "sugarcrepe":
        quoted = {}
        for subset, value, digits, rule in QUOTED:
            chosen = [pairs for key, pairs in read.items() if subset in ("all", key)]
            counts = [count_ties(pairs, rule) for pairs in chosen]
            total, tied = sum(c for c, _ in counts), sum(t for _, t in counts)
            got = 1.0 - 0.5 * tied / total if total else None
            label = f"{subset} bag_of_words_ceiling, word rule {rule}"
            quoted[label] = {
                "quoted": value,
                "computed": got,
                "word_rule": rule,
                "normalisation": "lowercase; captions equal up to whitespace runs and case are no comparison",
                "holds": got is not None and round(got, digits) == value,
            }
        quoted["n_all"] = {"quoted": QUOTED_N, "computed": n, "holds": n == QUOTED_N}
        out["quoted"] = quoted
        out["quoted_hold"] = all(q["holds"] for q in quoted.values())
    return out


def failures(report: dict[str, Any]) -> list[str]:
    """One sentence per figure that does not hold: which figure, under which rule, expected and computed."""
    lines = []
    for name, found in report.items():
        for subset, row in found["subsets"].items():
            if not row["agree"]:
                lines.append(f"{name} {subset}: audit-benchmark {row['ours']} != independent {row['independent']}")
        for figure, row in (found.get("quoted") or {}).items():
            if not row["holds"]:
                lines.append(f"{name} quoted {figure}: expected {row['quoted']}, computed {row['computed']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+", metavar="NAME=PATH", help=f"NAME one of {', '.join(FORMATS)}")
    parser.add_argument("--require-quoted", action="store_true", help="exit 1 unless SugarCrepe's quoted ceilings hold")
    args = parser.parse_args(argv)
    pairs = []
    for item in args.benchmarks:
        name, sep, path = item.partition("=")
        if not sep or name not in FORMATS or not path:
            parser.error(f"{item!r}: expected NAME=PATH with NAME one of {', '.join(FORMATS)}")
        pairs.append((name, Path(path).expanduser()))
    report = {name: check(name, root) for name, root in pairs}
    ok = all(r["agree"] for r in report.values())
    quoted_ok = all(r.get("quoted_hold", True) for r in report.values())
    print(json.dumps({"agree": ok, "quoted_hold": quoted_ok, "benchmarks": report}, indent=1, sort_keys=True))
    for line in failures(report):
        print(line, file=sys.stderr)
    return 0 if ok and (quoted_ok or not args.require_quoted) else 1


if __name__ == "__main__":
    sys.exit(main())
