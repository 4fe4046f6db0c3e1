"""The eight adapters of issue 40 on fixtures in their published formats: floors, exact ceilings,
cycles, refusals naming file / entry / field, dropped counts, and `audit-benchmark all`.

Expected floors and ceilings are computed here from the fixtures' texts, never with the package's
helpers: a comparison's shortest-caption credit from the two lengths, a bag-of-words forced tie from
the two captions' lowercase word multisets (punctuation stripped with str.translate), a length
forced tie from the two lengths.
"""

from __future__ import annotations

import csv
import json
import os
import re
import stat
import string
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from benchmark_formats import (
    cycle_table_rows,
    write_aro,
    write_features,
    write_sugarcrepe,
    write_table,
    write_winoground,
)
from benchmark_formats_published import (
    write_cola,
    write_colorswap,
    write_crepe,
    write_eqben,
    write_mmvp_vlm,
    write_sugarcrepe_pp,
    write_sugarcrepe_published_sizes,
    write_valse,
    write_vl_checklist,
)

from clip_cycles.benchmark_audit import ADAPTERS, load_benchmark
from clip_cycles.benchmark_audit.run import audit_benchmark
from clip_cycles.cli import main
from clip_cycles.encoding.encoder import ModelSpec

PAIR_FORMATS = {
    "valse": write_valse,
    "vl_checklist": write_vl_checklist,
    "sugarcrepe_pp": write_sugarcrepe_pp,
    "crepe": write_crepe,
}
BLOCK_FORMATS = {
    "cola": write_cola,
    "eqben": write_eqben,
    "mmvp_vlm": write_mmvp_vlm,
    "colorswap": write_colorswap,
}
PUNCTUATION = str.maketrans({c: " " for c in string.punctuation if c != "_"})


def words(text: str) -> Counter:
    return Counter(text.lower().translate(PUNCTUATION).split())


def length_credit(winner: str, loser: str) -> float:
    """Credit of the shortest-caption rule on (winner over loser)."""
    return 1.0 if len(winner) < len(loser) else (0.5 if len(winner) == len(loser) else 0.0)


def expected_pairs(rows: list[tuple[str, str, str]]) -> dict[str, float]:
    n = len(rows)
    bow = sum(words(p) == words(q) for _, p, q in rows)
    same_length = sum(len(p) == len(q) for _, p, q in rows)
    return {
        "n_comparisons": n,
        "shortest_caption_acc": float(np.mean([length_credit(p, q) for _, p, q in rows])),
        "bag_of_words_ceiling": 1 - 0.5 * bow / n,
        "length_ceiling": 1 - 0.5 * same_length / n,
        "caption_only_ceiling": 1.0,
        "bag_of_words_forced_ties": bow,
        "length_forced_ties": same_length,
        "caption_only_forced_ties": 0,
    }


def expected_blocks(blocks: list[tuple[str, str, str, str]]) -> dict[str, float]:
    """Four comparisons per block: two text ones (caption vs the other caption on one image), two image ones."""
    credits, bow, same_length = [], 0, 0
    for _, _, c0, c1 in blocks:
        credits += [length_credit(c0, c1), length_credit(c1, c0), 0.5, 0.5]
        bow += 2 * (words(c0) == words(c1))
        same_length += 2 * (len(c0) == len(c1))
    n = 4 * len(blocks)
    return {
        "n_comparisons": n,
        "shortest_caption_acc": float(np.mean(credits)),
        "bag_of_words_ceiling": 1 - 0.5 * bow / n,
        "length_ceiling": 1 - 0.5 * same_length / n,
        # Each image comparison holds one caption on both sides: every caption-only score ties there.
        "caption_only_ceiling": 0.75,
        "bag_of_words_forced_ties": bow,
        "length_forced_ties": same_length,
        "caption_only_forced_ties": 2 * len(blocks),
    }


def check(metrics: dict, expected: dict[str, float]) -> None:
    assert metrics["n_comparisons"] == expected["n_comparisons"]
    assert metrics["shortest_caption_acc"] == pytest.approx(expected["shortest_caption_acc"], abs=1e-12)
    for name in ("bag_of_words", "length", "caption_only"):
        assert metrics["ceilings"][f"{name}_ceiling"] == pytest.approx(expected[f"{name}_ceiling"], abs=1e-12), name
        assert metrics["ceilings"][f"{name}_forced_ties"] == expected[f"{name}_forced_ties"], name
    floor = max(metrics["shortest_caption_acc"], metrics["longest_caption_acc"])
    assert metrics["ceilings"]["length_floor"] == floor


@pytest.mark.parametrize("name", sorted(PAIR_FORMATS))
def test_hard_negative_formats_floor_and_ceilings(tmp_path: Path, name: str) -> None:
    expected = PAIR_FORMATS[name](tmp_path / name)
    audit = audit_benchmark(name, tmp_path / name)
    found = {a.name: a.metrics for a in audit.audits}
    assert sorted(found) == sorted(expected)
    for subset, rows in expected.items():
        check(found[subset], expected_pairs(rows))
    assert "lowercase" in found[subset]["ceilings"]["normalisation"]["bag_of_words"]


@pytest.mark.parametrize("name", sorted(BLOCK_FORMATS))
def test_block_formats_floor_ceilings_and_declared_cycles(tmp_path: Path, name: str) -> None:
    expected = BLOCK_FORMATS[name](tmp_path / name)
    audit = audit_benchmark(name, tmp_path / name)
    found = {a.name: a.metrics for a in audit.audits}
    assert sorted(found) == sorted(expected)
    for subset, blocks in expected.items():
        check(found[subset], expected_blocks(blocks))
        assert found[subset]["cycles"]["n_cycles"] == len(blocks)
        assert found[subset]["cycles"]["declared_by_format"] is True


def test_valse_pieces_items_cycle_and_dropped_foil(tmp_path: Path) -> None:
    write_valse(tmp_path)
    metrics = {a.name: a for a in audit_benchmark("valse", tmp_path).audits}
    swap = metrics["actant-swap"]
    # Item a has two foils: two comparisons, one item; item c's foil equals its caption; d is not in the valid set.
    assert swap.metrics["n_items"] == 2 and swap.metrics["n_comparisons"] == 3
    assert swap.metrics["skipped"] == {"negative_equal_to_caption": 1, "not_valid_mturk_caption_lt_2": 1}
    assert metrics["existence"].metrics["skipped"] == {"not_valid_mturk_caption_lt_2": 1}
    # a (man pushes woman > woman pushes man) and b (the reverse) on two images: one exact cycle.
    assert swap.metrics["cycles"]["n_cycles"] == 1 and swap.metrics["cycles"]["n_paired_items"] == 2
    assert metrics["existence"].metrics["cycles"]["n_cycles"] == 0
    assert {t for tags in load_benchmark("valse", tmp_path, ["existence"])[0].tags for t in tags} == {"dataset=visual7w"}


def test_valse_all_reads_every_instance_and_valse_needs_the_votes(tmp_path: Path) -> None:
    """valse_all keeps the instances outside the valid set; its figures come from the files read here."""
    write_valse(tmp_path)
    found = {a.name: a.metrics for a in audit_benchmark("valse_all", tmp_path).audits}
    for piece, file in (("existence", "existence.json"), ("actant-swap", "actions/actant-swap.json")):
        data = json.loads((tmp_path / file).read_text())
        rows = [
            (r["image_file"], r["caption"], foil)
            for r in data.values()
            for foil in ([r["foil"]] if "foil" in r else r["foils"])
            if foil != r["caption"]
        ]
        check(found[piece], expected_pairs(rows))
        assert "not_valid_mturk_caption_lt_2" not in found[piece].get("skipped", {})
    assert found["actant-swap"]["n_comparisons"] == 4 and found["existence"]["n_comparisons"] == 3
    # Without the votes the valid set cannot be chosen: refused, naming the field and the way out.
    _rewrite_json(tmp_path / "existence.json", lambda d: d["existence_0"].pop("mturk"))
    with pytest.raises(ValueError, match=r"existence.json: item existence_0: field 'mturk' .*use format valse_all"):
        load_benchmark("valse", tmp_path)
    _rewrite_json(tmp_path / "existence.json", lambda d: d["existence_0"].update(mturk={"caption": "three"}))
    with pytest.raises(ValueError, match=r"existence.json: item existence_0: mturk: field 'caption'"):
        load_benchmark("valse", tmp_path)
    assert len(load_benchmark("valse_all", tmp_path)) == 2
    # A piece is named by its stem: two files of one name (a copy beside the published one) are refused.
    (tmp_path / "existence.json").rename(tmp_path / "actions" / "existence.json")
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "existence.json").write_text((tmp_path / "actions" / "existence.json").read_text())
    with pytest.raises(ValueError, match=r"two VALSE piece files named 'existence'"):
        load_benchmark("valse_all", tmp_path)


def test_block_cycles_cycle_acc_with_model_features(tmp_path: Path) -> None:
    blocks = write_eqben(tmp_path / "eq")["ann_json_finegrained_random"]
    keys = sorted({b[0] for b in blocks} | {b[1] for b in blocks})
    captions = sorted({b[2] for b in blocks} | {b[3] for b in blocks})
    phi, psi = write_features(tmp_path / "f.npz", keys, captions, seed=3)
    img = {k: phi[i].astype(np.float64) for i, k in enumerate(keys)}
    cap = {c: psi[i].astype(np.float64) for i, c in enumerate(captions)}
    spec = ModelSpec(backend="features", model=str(tmp_path / "f.npz"), pretrained=None)
    (sub,) = audit_benchmark("eqben", tmp_path / "eq", spec).audits
    deltas = [img[u0] @ cap[c0] + img[u1] @ cap[c1] - img[u0] @ cap[c1] - img[u1] @ cap[c0] for u0, u1, c0, c1 in blocks]
    expected = np.mean([1.0 if d > 1e-9 else (0.0 if d < -1e-9 else 0.5) for d in deltas])
    assert sub.metrics["cycles"]["cycle_acc"] == pytest.approx(expected, abs=0)


def test_sugarcrepe_order_blind_ceilings_at_published_sizes(tmp_path: Path) -> None:
    r"""SugarCrepe's subset sizes (7,511 in all); under the word rule ``\w+``, 408 of swap_att's 666 and 166 of
    swap_obj's 245 reorder the same words (574 in all), as the published files hold: 0.694, 0.661 and 0.9618."""
    write_sugarcrepe_published_sizes(tmp_path)
    audit = audit_benchmark("sugarcrepe", tmp_path)
    found = {a.name: a.metrics["ceilings"] for a in audit.audits}
    assert round(found["swap_att"]["bag_of_words_ceiling"], 3) == 0.694
    assert round(found["swap_obj"]["bag_of_words_ceiling"], 3) == 0.661
    assert found["add_obj"]["bag_of_words_ceiling"] == 1.0
    pooled = audit.summary["ceilings"]
    assert pooled["bag_of_words_forced_ties"] == 574 and audit.summary["n_comparisons"] == 7511
    assert round(pooled["bag_of_words_ceiling"], 4) == 0.9618


def test_existing_sugarcrepe_fixture_ceilings(tmp_path: Path) -> None:
    items = write_sugarcrepe(tmp_path, images=False)
    found = {a.name: a.metrics for a in audit_benchmark("sugarcrepe", tmp_path).audits}
    for subset, data in items.items():
        rows = [(r["filename"], r["caption"], r["negative_caption"]) for r in data.values()]
        check(found[subset], expected_pairs(rows))


def test_lengths_are_read_as_published_where_spellings_merge(tmp_path: Path) -> None:
    """SugarCrepe captions carry trailing spaces: "X " and "X" are one caption vertex (they pair into a cycle),
    but the length rules and the length ceiling read each occurrence's own characters, as the files hold them;
    a negative equal to its caption up to whitespace and case is dropped (every score ties there)."""
    rows = [
        ("1.jpg", "A red cube left of a blue ball. ", "A blue cube left of a red ball."),
        ("2.jpg", "a blue cube left of a red ball.", "A red cube left of a blue ball."),  # the first one's spellings
        ("3.jpg", "Two dogs on a sofa.", "Two dogs  on a sofa. "),  # dropped: same caption vertex
        ("4.jpg", "A cat. ", "A dog."),  # trailing space: 7 vs 6 characters
        ("5.jpg", "A dog.", "A cat."),  # merged vertices, equal published lengths: a length tie
    ]
    items = {str(i): {"filename": f, "caption": p, "negative_caption": n} for i, (f, p, n) in enumerate(rows)}
    (tmp_path / "swap_att.json").write_text(json.dumps(items))
    (sub,) = audit_benchmark("sugarcrepe", tmp_path).audits
    kept = [r for r in rows if " ".join(r[1].split()).lower() != " ".join(r[2].split()).lower()]
    check(sub.metrics, expected_pairs(kept))
    assert sub.metrics["skipped"] == {"negative_equal_to_caption": 1}
    assert sub.metrics["caption_variants_merged"] >= 3
    assert sub.metrics["cycles"]["n_cycles"] == 2  # items 0/1 and 3/4 cross on different images


# --------------------------------------------------------------------------- refusals


def _rewrite_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_malformed_files_are_refused_naming_file_entry_and_field(tmp_path: Path) -> None:
    write_valse(tmp_path / "valse")
    _rewrite_json(tmp_path / "valse" / "existence.json", lambda d: d["existence_1"].pop("caption"))
    with pytest.raises(ValueError, match=r"existence.json: item existence_1: field 'caption' is missing"):
        load_benchmark("valse", tmp_path / "valse")
    write_valse(tmp_path / "valse")
    _rewrite_json(tmp_path / "valse" / "existence.json", lambda d: d["existence_1"].update(foil=7))
    with pytest.raises(ValueError, match=r"existence.json: item existence_1: field 'foil' must be a non-empty string"):
        load_benchmark("valse_all", tmp_path / "valse")

    write_vl_checklist(tmp_path / "vl")
    _rewrite_json(tmp_path / "vl" / "Attribute/vg/color.json", lambda d: d[1][1].update(NEG=[]))
    with pytest.raises(ValueError, match=r"color.json: entry 1: field 'NEG'"):
        load_benchmark("vl_checklist", tmp_path / "vl")
    _rewrite_json(tmp_path / "vl" / "Attribute/vg/color.json", lambda d: d.__setitem__(0, {"POS": ["x"]}))
    with pytest.raises(ValueError, match=r"color.json: entry 0 must be \[image path"):
        load_benchmark("vl_checklist", tmp_path / "vl")

    write_sugarcrepe_pp(tmp_path / "pp")
    _rewrite_json(tmp_path / "pp" / "swap_att.json", lambda d: d["1"].update(caption2=""))
    with pytest.raises(ValueError, match=r"swap_att.json: item 1: field 'caption2'"):
        load_benchmark("sugarcrepe_pp", tmp_path / "pp")

    write_crepe(tmp_path / "crepe")
    path = tmp_path / "crepe" / "prod_hard_negatives" / "prod_vg_hard_negs_swap_all.csv"
    path.write_text(path.read_text().replace("['a blue kite in a red sky']", "not a list"))
    with pytest.raises(ValueError, match=r"prod_vg_hard_negs_swap_all.csv: line 3: field 'hard_negs' must be a list"):
        load_benchmark("crepe", tmp_path / "crepe")

    write_cola(tmp_path / "cola")
    _rewrite_json(tmp_path / "cola" / "COLA_multiobjects_matching_benchmark.json", lambda d: d[1].__setitem__(3, 7))
    with pytest.raises(ValueError, match=r"entry 1: field 'caption_2' \(position 3\) must be a non-empty string"):
        load_benchmark("cola", tmp_path / "cola")

    write_eqben(tmp_path / "eq")
    _rewrite_json(tmp_path / "eq" / "ann_json_finegrained_random.json", lambda d: d[2].pop("image1"))
    with pytest.raises(ValueError, match=r"ann_json_finegrained_random.json: sample 2: field 'image1' is missing"):
        load_benchmark("eqben", tmp_path / "eq")

    write_mmvp_vlm(tmp_path / "mmvp")
    table = tmp_path / "mmvp" / "MMVP_VLM" / "Questions.csv"
    table.write_text(table.read_text().replace("The flower is purple.", ""))
    with pytest.raises(ValueError, match=r"Questions.csv: line 5: field 'Statement'"):
        load_benchmark("mmvp_vlm", tmp_path / "mmvp")
    table.write_text("Question ID,Type,Statement\n1,Color and Appearance,The flower is yellow.\n")
    with pytest.raises(ValueError, match=r"Questions.csv: line 2: rows come in pairs"):
        load_benchmark("mmvp_vlm", tmp_path / "mmvp")

    write_colorswap(tmp_path / "cs")
    rows = (tmp_path / "cs" / "test.jsonl").read_text().splitlines()
    rows[1] = rows[1].replace('"caption_1": "the green car', '"caption_one": "the green car')
    (tmp_path / "cs" / "test.jsonl").write_text("\n".join(rows))
    with pytest.raises(ValueError, match=r"test.jsonl: row 1 \(id 1\): field 'caption_1' is missing"):
        load_benchmark("colorswap", tmp_path / "cs")


def test_dropped_entries_are_counted_per_reason(tmp_path: Path) -> None:
    write_colorswap(tmp_path)
    (sub,) = audit_benchmark("colorswap", tmp_path).audits
    assert sub.metrics["skipped"] == {"block_with_repeated_image_or_caption": 1}
    assert sub.metrics["n_comparisons"] == 8
    # VL-CheckList's published color file holds an entry whose negative is its positive: counted, not scored;
    # a repeated entry is two comparisons, as VL-CheckList's own loop scores it twice.
    write_vl_checklist(tmp_path / "vl")
    color = {a.name: a.metrics for a in audit_benchmark("vl_checklist", tmp_path / "vl").audits}["Attribute/vg/color"]
    assert color["skipped"] == {"negative_equal_to_caption": 1}
    assert color["n_comparisons"] == 4


def test_missing_files_name_what_the_root_must_hold(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for name in (*PAIR_FORMATS, *BLOCK_FORMATS):
        with pytest.raises(FileNotFoundError, match=str(tmp_path / "empty")):
            load_benchmark(name, tmp_path / "empty")


# --------------------------------------------------------------------------- audit-benchmark all

ALL_WRITERS = {
    **PAIR_FORMATS,
    **BLOCK_FORMATS,
    "sugarcrepe": lambda root: write_sugarcrepe(root, images=False),
    "winoground": write_winoground,
    "aro": write_aro,
    "comparison_table": lambda root: write_table(root / "comparisons.csv", cycle_table_rows(4)),
}


def test_audit_benchmark_all_writes_one_combined_table(tmp_path: Path, capsys) -> None:
    root = tmp_path / "benchmarks"
    expected: dict[tuple[str, str], dict[str, float]] = {}
    for name, writer in ALL_WRITERS.items():
        folder = root / (name.replace("_", "-") if name == "vl_checklist" else name)
        folder.mkdir(parents=True)
        found = writer(folder)
        if name in PAIR_FORMATS:
            expected.update({(name, s): expected_pairs(rows) for s, rows in found.items()})
        elif name in BLOCK_FORMATS:
            expected.update({(name, s): expected_blocks(rows) for s, rows in found.items()})
    (root / "notes").mkdir()  # a folder named like no format is left alone
    assert main(["audit-benchmark", "all", "--root", str(root), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    record = json.loads((tmp_path / "out" / "audit_all.json").read_text())
    rows = {(r["benchmark"], r["subset"]): r for r in record["rows"]}
    assert {b for b, _ in rows} == set(ALL_WRITERS) and len(ALL_WRITERS) >= 8
    assert set(record["benchmarks"]) == set(ALL_WRITERS)
    assert "unusable_benchmarks" not in record and "Not audited" not in printed  # every benchmark audited
    for key, want in expected.items():
        row = rows[key]
        assert row["n_comparisons"] == want["n_comparisons"]
        assert row["bag_of_words_ceiling"] == pytest.approx(want["bag_of_words_ceiling"], abs=1e-12)
        assert row["length_ceiling"] == pytest.approx(want["length_ceiling"], abs=1e-12)
        assert row["best_blind_acc"] >= want["shortest_caption_acc"] - 1e-12
    # The `all` row of a benchmark pools its subsets' exact counts.
    valse = [r for (b, s), r in rows.items() if b == "valse" and s != "all"]
    assert rows[("valse", "all")]["n_comparisons"] == sum(r["n_comparisons"] for r in valse)
    assert rows[("colorswap", "all")]["dropped"] == "block_with_repeated_image_or_caption=1"
    assert rows[("eqben", "ann_json_finegrained_random")]["n_cycles"] == 3
    with open(tmp_path / "out" / "audit_all.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [(r["benchmark"], r["subset"]) for r in table] == [(r["benchmark"], r["subset"]) for r in record["rows"]]
    assert list(table[0]) == record["columns"]
    markdown = (tmp_path / "out" / "audit_all.md").read_text()
    assert markdown == printed.split("wrote ")[0].rstrip("\n") + "\n"
    assert markdown.count("\n| ") == len(record["rows"])  # header first, then one line per row
    for name in ALL_WRITERS:
        assert (tmp_path / "out" / name / f"audit_{name}.json").is_file()


def test_audit_benchmark_all_with_name_path_pairs_and_refusals(tmp_path: Path, capsys) -> None:
    write_cola(tmp_path / "c")
    write_valse(tmp_path / "v")
    args = ["audit-benchmark", "all", "--benchmark", f"cola={tmp_path / 'c'}", f"valse={tmp_path / 'v'}"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 0
    record = json.loads((tmp_path / "out" / "audit_all.json").read_text())
    assert [r["benchmark"] for r in record["rows"]] == ["cola", "cola", "valse", "valse", "valse"]
    capsys.readouterr()
    refusals = [
        (["--benchmark", "nope=/x"], r"--benchmark 'nope=/x': unknown benchmark format 'nope'"),
        (["--benchmark", "cola"], r"--benchmark 'cola': expected NAME=PATH"),
        (["--benchmark", f"cola={tmp_path / 'c'}", f"cola={tmp_path / 'c'}"], r"cola is listed twice"),
        ([], r"give either --root DIR .* or --benchmark NAME=PATH"),
        (["--root", str(tmp_path / "out" / "cola")], r"no subfolder named like a benchmark format"),
        (["--root", str(tmp_path / "c"), "--benchmark", f"cola={tmp_path / 'c'}"], r"give either --root"),
    ]
    for k, (extra, message) in enumerate(refusals):
        # A user error: exit code 2 and one sentence naming the flag, no traceback, nothing written.
        assert main(["audit-benchmark", "all", *extra, "--out", str(tmp_path / f"o{k}")]) == 2
        err = capsys.readouterr().err
        assert re.search(message, err) and "Traceback" not in err, err
        assert not (tmp_path / f"o{k}" / "audit_all.json").exists()
    assert main(["audit-benchmark", "cola", "--out", str(tmp_path / "o9")]) == 2
    assert "--root is required" in capsys.readouterr().err


def test_audit_benchmark_all_reports_a_benchmark_with_nothing_to_audit_as_a_row(tmp_path: Path, capsys) -> None:
    """A whole benchmark with no usable subset (every file ``[]``; a folder with no readable file) is a row with
    count 0 and its reason, the other benchmarks are audited, the exit status is 0 (it used to abort them all)."""
    root = tmp_path / "benchmarks"
    write_cola(root / "cola")
    for size in ("small", "medium", "large"):  # as VL-CheckList publishes swig_place_{small,medium,large}.json
        path = root / "vl-checklist" / "Object" / "Size" / "swig_size" / "swig_place" / f"swig_place_{size}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("[]")
    (root / "bivlc").mkdir()
    (root / "bivlc" / "README.md").write_text("images come later\n")
    write_valse(root / "valse")
    assert main(["audit-benchmark", "all", "--root", str(root), "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    record = json.loads((tmp_path / "out" / "audit_all.json").read_text())
    rows = {(r["benchmark"], r["subset"]): r for r in record["rows"]}
    assert set(record["benchmarks"]) == {"cola", "valse"}
    assert rows[("cola", "all")]["n_comparisons"] > 0 and rows[("valse", "all")]["n_comparisons"] > 0
    for name, reason in (("vl_checklist", "no subset has a comparison to audit"), ("bivlc", "no BiVLC file")):
        row = rows[(name, "all")]
        assert row["n_comparisons"] == 0 and row["model_acc"] is None and row["best_blind_acc"] is None
        assert row["dropped"].startswith("not audited: ") and reason in row["dropped"], row["dropped"]
        assert reason in record["unusable_benchmarks"][name]["reason"]
        assert f"audit-benchmark all: {name} not audited: " in captured.err
        assert not (tmp_path / "out" / name).exists()
        assert str(root) not in row["dropped"]  # no machine path in the table
    assert "swig_place_small" in rows[("vl_checklist", "all")]["dropped"]  # each empty subset named
    markdown = (tmp_path / "out" / "audit_all.md").read_text()
    assert "Not audited: 2 benchmark(s) with no subset to audit (bivlc, vl_checklist)" in markdown
    with open(tmp_path / "out" / "audit_all.csv", newline="") as handle:
        table = {(r["benchmark"], r["subset"]): r for r in csv.DictReader(handle)}
    assert table[("bivlc", "all")]["n_comparisons"] == "0" and table[("bivlc", "all")]["model_acc"] == ""

    # Nothing at all to audit: one sentence listing each benchmark's reason, exit status 2, nothing written.
    empty = tmp_path / "empty"
    (empty / "bivlc").mkdir(parents=True)
    (empty / "vl_checklist").mkdir()
    (empty / "vl_checklist" / "a.json").write_text("[]")
    assert main(["audit-benchmark", "all", "--root", str(empty), "--out", str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err
    assert "no benchmark has a subset to audit (bivlc: " in err and "vl_checklist: " in err and "Traceback" not in err
    assert not (tmp_path / "out2" / "audit_all.json").exists()


def test_every_new_format_is_registered_lazily_with_its_module() -> None:
    for name in (*PAIR_FORMATS, *BLOCK_FORMATS):
        entry = ADAPTERS.entry(name)
        assert entry.lazy and entry.target == f"clip_cycles.benchmark_audit.formats.{name}:ADAPTER"
        assert ADAPTERS.get(name).name == name


def test_audit_benchmark_all_with_a_model_reports_model_and_cycle_acc(tmp_path: Path) -> None:
    blocks = {"cola": write_cola(tmp_path / "cola"), "eqben": write_eqben(tmp_path / "eqben")}
    rows = [b for found in blocks.values() for subset in found.values() for b in subset]
    keys = sorted({b[0] for b in rows} | {b[1] for b in rows})
    captions = sorted({b[2] for b in rows} | {b[3] for b in rows})
    phi, psi = write_features(tmp_path / "f.npz", keys, captions, seed=11)
    img = {k: phi[i].astype(np.float64) for i, k in enumerate(keys)}
    cap = {c: psi[i].astype(np.float64) for i, c in enumerate(captions)}
    args = ["audit-benchmark", "all", "--benchmark", *(f"{n}={tmp_path / n}" for n in blocks)]
    model = ["--model-type", "features", "--model", str(tmp_path / "f.npz"), "--pretrained", "none"]
    cache = ["--cache-dir", str(tmp_path / "cache"), "--num-workers", "0", "--out", str(tmp_path / "out")]
    assert main([*args, *model, *cache]) == 0
    record = json.loads((tmp_path / "out" / "audit_all.json").read_text())
    found = {(r["benchmark"], r["subset"]): r for r in record["rows"]}

    def credit(value: float) -> float:
        return 1.0 if value > 1e-9 else (0.0 if value < -1e-9 else 0.5)

    for name, subsets in blocks.items():
        for subset, block_rows in subsets.items():
            row = found[(name, subset)]
            deltas = [
                img[u0] @ cap[c0] + img[u1] @ cap[c1] - img[u0] @ cap[c1] - img[u1] @ cap[c0] for u0, u1, c0, c1 in block_rows
            ]
            assert row["cycle_acc"] == pytest.approx(np.mean([credit(d) for d in deltas]), abs=1e-12)
            comparisons = []
            for u0, u1, c0, c1 in block_rows:
                comparisons += [
                    img[u0] @ cap[c0] - img[u0] @ cap[c1],
                    img[u1] @ cap[c1] - img[u1] @ cap[c0],
                    img[u0] @ cap[c0] - img[u1] @ cap[c0],
                    img[u1] @ cap[c1] - img[u0] @ cap[c1],
                ]
            assert row["model_acc"] == pytest.approx(np.mean([credit(v) for v in comparisons]), abs=1e-12)
            assert row["model"] == "f.npz"  # a features file by its name, never a machine path (issue 51)
            assert row["blind_vs_model"] == "too few comparisons"  # 8 or 12 comparisons: below the declared minimum


# --------------------------------------------------------------------------- regular files only


def _load_within(seconds: float, name: str, root: Path) -> BaseException | None:
    """load_benchmark in a thread: what it raised, or a failure if it is still reading after ``seconds``."""
    import threading

    raised: list[BaseException] = []

    def run() -> None:
        try:
            load_benchmark(name, root)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            raised.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{name}: reading {root} hangs on a FIFO"
    return raised[0] if raised else None


@pytest.mark.parametrize(
    ("name", "writer", "replace"),
    [
        ("valse", write_valse, "actions/actant-swap.json"),  # found by the recursive search
        ("vl_checklist", write_vl_checklist, "Relation/swig/action.json"),
        ("crepe", write_crepe, "syst_hard_negatives/syst_vg_hard_negs_seen_compounds_in_laion.csv"),
        ("mmvp_vlm", write_mmvp_vlm, "MMVP_VLM/Questions.csv"),
        ("winoground", write_winoground, "examples.jsonl"),
    ],
)
def test_a_fifo_among_the_files_is_refused_not_read(tmp_path: Path, name: str, writer, replace: str) -> None:
    """JSON, CSV and JSON-lines readers take regular files only: a FIFO in a file's place is one sentence, no hang."""
    writer(tmp_path)
    target = tmp_path / replace
    assert target.is_file(), "the fixture writes this file"
    assert _load_within(60, name, tmp_path) is None  # the published layout reads
    target.unlink()
    os.mkfifo(target)
    error = _load_within(20, name, tmp_path)
    if name in PIECE_FORMATS:
        # One piece among many: refused all the same, and reported as that subset's row (the others still read).
        assert error is None
        (row,) = [cs for cs in load_benchmark(name, tmp_path) if cs.unusable]
        assert "FIFO" in row.unusable and str(target) in row.unusable and row.n_comparisons == 0
    else:
        assert isinstance(error, ValueError) and "FIFO" in str(error) and str(target) in str(error)
    assert target.exists() and stat.S_ISFIFO(target.stat().st_mode)  # left as it was


#: Formats of one file per subset, where an unreadable file is that subset's row rather than an abort.
PIECE_FORMATS = ("valse", "vl_checklist")


def test_a_parquet_benchmark_file_is_read_through_the_bounded_reader(tmp_path: Path, monkeypatch) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from clip_cycles.benchmark_audit import adapters

    rows = [{"filename": "1.jpg", "caption": "a red cube", "negative_caption": "a blue cube"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    assert adapters.read_records(tmp_path / "t.parquet") == rows
    monkeypatch.setattr(adapters, "MAX_BENCHMARK_FILE_BYTES", 10)
    with pytest.raises(ValueError, match=r"t.parquet has \d+ bytes, more than the 10 allowed"):
        adapters.read_records(tmp_path / "t.parquet")
