"""VisMin in its published schema (HF mair-lab/vismin-bench: a ``datasets`` ``save_to_disk`` folder, Arrow
shards with image_0, image_1, text_0, text_1, id, category; which text goes with which image in the
benchmark's solutions/sim_solution.csv): each row one 2x2 cycle, scored through ``clip-cycles eval --task
cycles/vismin`` and ``clip_benchmark eval --dataset cycles/vismin`` with CycleAcc and text/image/group
computed here by a plain loop."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from benchmark_formats import write_features
from plugin_runs import block_scores_by_loop, clip_benchmark_features_run

from clip_cycles.benchmark_audit.adapters import load_benchmark
from clip_cycles.benchmark_audit.run import audit_benchmark
from clip_cycles.cli import main
from clip_cycles.results import read_result

SAME = ("T0_I0 > T1_I0 & T1_I1 > T0_I1", "T0_I0 > T0_I1 & T1_I1 > T1_I0")
SWAPPED = ("T1_I0 > T0_I0 & T0_I1 > T1_I1", "T0_I1 > T0_I0 & T1_I0 > T1_I1")
# (text_0, text_1, category, solution (Text, Image))
ROWS = [
    ("A cat on the left of a dog.", "A cat on the right of a dog.", "relation", SAME),
    ("Two apples on a plate.", "Three apples on a plate.", "counting", SWAPPED),
    ("A red bus.", "A blue bus.", "attribute", SWAPPED),
    ("A horse in a field.", "A cow in a field.", "object", SAME),
    ("A man with a hat.", "A man with an umbrella.", "object", SAME),
    # Dropped: the Text and Image relations name different pairings.
    ("A small boat.", "A large boat.", "attribute", (SAME[0], SWAPPED[1])),
]
KEPT = 5
SHARD = "data-00000-of-00001"


def png(seed: int) -> bytes:
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, size=(8, 8, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def write_vismin(root: Path, rows=ROWS) -> None:
    """``data/`` as ``DatasetDict.save_to_disk`` writes it (split ``test``) and ``solutions/sim_solution.csv``."""
    import datasets

    features = datasets.Features(
        {
            "image_0": datasets.Image(),
            "image_1": datasets.Image(),
            "text_0": datasets.Value("string"),
            "text_1": datasets.Value("string"),
            "id": datasets.Value("string"),
            "category": datasets.Value("string"),
        }
    )
    table = {
        "image_0": [{"bytes": png(2 * i), "path": None} for i in range(len(rows))],
        "image_1": [{"bytes": png(2 * i + 1), "path": None} for i in range(len(rows))],
        "text_0": [r[0] for r in rows],
        "text_1": [r[1] for r in rows],
        "id": [str(i) for i in range(len(rows))],
        "category": [r[2] for r in rows],
    }
    split = datasets.Dataset.from_dict(table, features=features)
    datasets.DatasetDict({"test": split}).save_to_disk(str(root / "data"))
    (root / "solutions").mkdir(parents=True, exist_ok=True)
    with open(root / "solutions" / "sim_solution.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["idx", "Text", "Image", "category"])
        writer.writerows([i, r[3][0], r[3][1], r[2]] for i, r in enumerate(rows))


def true_blocks(rows=ROWS) -> list[tuple[str, str, str, str]]:
    """``(image_0 key, image_1 key, text true of image_0, text true of image_1)`` from the solution, row by row."""
    out = []
    for i, (t0, t1, _, solution) in enumerate(rows):
        if solution not in (SAME, SWAPPED):
            continue
        texts = (t0, t1) if solution == SAME else (t1, t0)
        out.append((f"test/{SHARD} row {i}/image_0", f"test/{SHARD} row {i}/image_1", *texts))
    return out


def test_vismin_rows_are_cycles_oriented_by_the_solution(tmp_path: Path) -> None:
    write_vismin(tmp_path)
    assert sorted(p.name for p in (tmp_path / "data" / "test").iterdir()) == [f"{SHARD}.arrow", "dataset_info.json", "state.json"]
    (cs,) = load_benchmark("vismin", tmp_path)
    assert cs.name == "test" and len(cs.cycles) == KEPT and cs.n_comparisons == 4 * KEPT
    assert cs.skipped == {"solution_names_no_pairing": 1}
    # Row 1's solution says text_1 is true of image_0.
    u1, u2, v1, v2 = cs.cycles[1]
    assert (cs.captions[v1], cs.captions[v2]) == (ROWS[1][1], ROWS[1][0]) and cs.images[u1].data == png(2)
    assert cs.cycle_tags[1] == ("category=counting",)
    # The split folder itself, or the folder holding data/ and solutions/, reads the same.
    audit = audit_benchmark("vismin", tmp_path)
    assert audit.summary["n_cycles"] == KEPT and audit.summary["witness_acc"] == 0.5
    # As an audit-benchmark format on the command line: its files written, the dropped rows counted.
    assert main(["audit-benchmark", "vismin", "--root", str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    written = json.loads((tmp_path / "out" / "audit_vismin.json").read_text())
    assert written["dataset"] == "audit/vismin" and written["metrics"]["n_cycles"] == KEPT


def test_vismin_refusals_name_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no VisMin Arrow folder"):
        load_benchmark("vismin", tmp_path)
    write_vismin(tmp_path)
    (tmp_path / "solutions" / "sim_solution.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"no VisMin solution file; VisMin's rows do not say which text"):
        load_benchmark("vismin", tmp_path)
    # A solution of another release (one row fewer) is refused: rows are matched by position.
    write_vismin(tmp_path / "short")
    lines = (tmp_path / "short" / "solutions" / "sim_solution.csv").read_text().splitlines()
    (tmp_path / "short" / "solutions" / "sim_solution.csv").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ValueError, match=r"sim_solution.csv: 5 solution rows for the 6 rows of split 'test'"):
        load_benchmark("vismin", tmp_path / "short")
    # A shard that is not Arrow is a sentence naming it.
    write_vismin(tmp_path / "bad")
    (tmp_path / "bad" / "data" / "test" / f"{SHARD}.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(ValueError, match=rf"{SHARD}.arrow: not an Arrow shard"):
        load_benchmark("vismin", tmp_path / "bad")
    # state.json naming a file outside the split folder is refused before anything is opened.
    write_vismin(tmp_path / "escape")
    state = tmp_path / "escape" / "data" / "test" / "state.json"
    state.write_text(state.read_text().replace(f"{SHARD}.arrow", "../../../etc/passwd"))
    with pytest.raises(ValueError, match=r"state.json: field '_data_files' must list"):
        load_benchmark("vismin", tmp_path / "escape")


@pytest.fixture()
def scored(tmp_path: Path):
    write_vismin(tmp_path / "vismin")
    blocks = true_blocks()
    keys = [k for b in blocks for k in b[:2]]
    captions = sorted({c for b in blocks for c in b[2:]})
    phi, psi = write_features(tmp_path / "f.npz", keys, captions, seed=3)
    img = {k: phi[i].astype(np.float64) for i, k in enumerate(keys)}
    txt = {c: psi[i].astype(np.float64) for i, c in enumerate(captions)}
    expected = block_scores_by_loop(blocks, img, txt)
    # The fixture tells the solution's orientation apart: text_0 always taken as image_0's scores otherwise.
    as_stored = [(k0, k1, r[0], r[1]) for (k0, k1, _, _), r in zip(blocks, [r for r in ROWS if r[3] in (SAME, SWAPPED)])]
    assert block_scores_by_loop(as_stored, img, txt)["cycle_acc"] != expected["cycle_acc"]
    return tmp_path, expected


def test_cycles_vismin_through_clip_cycles_eval(scored, capsys) -> None:
    tmp_path, expected = scored
    args = ["eval", "--task", "cycles/vismin", "--model-type", "features", "--model", str(tmp_path / "f.npz")]
    args += ["--pretrained", "none", "--dataset-root", str(tmp_path / "vismin"), "--num-workers", "0"]
    args += ["--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "{dataset}_{task}.json")]
    assert main(args) == 0, capsys.readouterr().err
    m = read_result(tmp_path / "cycles_vismin_cycles.json")["metrics"]
    assert m["n_cycles"] == KEPT
    assert {k: m[k] for k in expected} == pytest.approx(expected, abs=1e-12)
    assert m["per_tag"]["category=object"]["n_cycles"] == 2
    digest = m["items_sha256"]

    # Another release of the solution (row 0 swapped) gives another digest.
    rows = [(*ROWS[0][:3], SWAPPED), *ROWS[1:]]
    write_vismin(tmp_path / "vismin2", rows)
    args2 = [a if a != str(tmp_path / "vismin") else str(tmp_path / "vismin2") for a in args]
    args2[args2.index("--output") + 1] = str(tmp_path / "v2_{dataset}_{task}.json")
    assert main(args2) == 0
    assert read_result(tmp_path / "v2_cycles_vismin_cycles.json")["metrics"]["items_sha256"] != digest


def test_cycles_vismin_through_clip_benchmark(scored) -> None:
    tmp_path, expected = scored
    record = clip_benchmark_features_run(tmp_path, "cycles/vismin", tmp_path / "vismin")
    assert (record["dataset"], record["task"]) == ("cycles/vismin", "cycles")
    assert {k: record["metrics"][k] for k in expected} == pytest.approx(expected, abs=1e-12)
    assert record["metrics"]["n_cycles"] == KEPT
