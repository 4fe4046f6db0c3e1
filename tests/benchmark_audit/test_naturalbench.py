"""NaturalBench in its published schemas (HF BaiqiL/NaturalBench): the Parquet rows (Image_0, Image_1,
Question_0, Question_1, the four Image_i_Question_j answers, Question Type, Source) and the
NaturalBench-Retrieval metadata.json. A yes/no row whose questions are each "Yes" on a different image is
one 2x2 cycle; it is scored through ``clip-cycles eval --task cycles/naturalbench`` and ``clip_benchmark
eval --dataset cycles/naturalbench`` with CycleAcc and text/image/group computed here by a plain loop."""

from __future__ import annotations

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

# (Question_0, Question_1, answers (I0Q0, I1Q0, I0Q1, I1Q1), Question Type, Source)
ROWS = [
    ("Is the dog on the sofa?", "Is the dog under the sofa?", ("Yes", "No", "No", "Yes"), "yes_no", "Flickr"),
    ("Is the light red?", "Is the light green?", ("No", "Yes", "Yes", "No"), "yes_no", "DOCCI"),
    ("Is anyone riding the horse?", "Is the horse alone?", ("yes", "no", "no", "yes"), "yes_no", "Flickr"),
    ("Is it daytime?", "Is it night?", ("No", "Yes", "Yes", "No"), "yes_no", "DOCCI"),
    # Dropped: the option letters of a multiple-choice row are no statements about the images.
    ("Which is bigger? A. cat B. dog", "Which is smaller? A. cat B. dog", ("A", "B", "B", "A"), "multiple_choice", "Flickr"),
    # Dropped: both questions "Yes" on Image_0: no one-to-one pairing.
    ("Is there a tree?", "Is there grass?", ("Yes", "No", "Yes", "No"), "yes_no", "DOCCI"),
]
KEPT = 4


def png(seed: int) -> bytes:
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, size=(8, 8, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def write_naturalbench(root: Path, rows=ROWS, shard: str = "train-00000-of-00001") -> None:
    """``data/<shard>.parquet`` with the hub's columns (images as {bytes, path} structs)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "data").mkdir(parents=True, exist_ok=True)
    table = {
        "Index": list(range(len(rows))),
        "Source": [r[4] for r in rows],
        "Question Type": [r[3] for r in rows],
        "Question_0": [r[0] for r in rows],
        "Question_1": [r[1] for r in rows],
        "Image_0": [{"bytes": png(2 * i), "path": None} for i in range(len(rows))],
        "Image_1": [{"bytes": png(2 * i + 1), "path": None} for i in range(len(rows))],
        "Image_0_Question_0": [r[2][0] for r in rows],
        "Image_1_Question_0": [r[2][1] for r in rows],
        "Image_0_Question_1": [r[2][2] for r in rows],
        "Image_1_Question_1": [r[2][3] for r in rows],
    }
    pq.write_table(pa.table(table), root / "data" / f"{shard}.parquet")


def true_blocks(rows=ROWS, shard: str = "train-00000-of-00001") -> list[tuple[str, str, str, str]]:
    """``(image_0 key, image_1 key, caption true of image_0, caption true of image_1)`` for each usable row, from the answers."""
    out = []
    for i, (q0, q1, answers, kind, _) in enumerate(rows):
        if kind != "yes_no":
            continue
        i0q0, i1q0, i0q1, i1q1 = (a.lower() == "yes" for a in answers)
        if i0q0 and i1q1 and not i1q0 and not i0q1:
            captions = (q0, q1)
        elif i1q0 and i0q1 and not i0q0 and not i1q1:
            captions = (q1, q0)
        else:
            continue
        out.append((f"{shard} row {i}/Image_0", f"{shard} row {i}/Image_1", *captions))
    return out


def test_naturalbench_rows_are_cycles_and_odd_rows_are_counted(tmp_path: Path) -> None:
    write_naturalbench(tmp_path)
    (cs,) = load_benchmark("naturalbench", tmp_path)
    assert cs.name == "train" and len(cs.cycles) == KEPT and cs.n_comparisons == 4 * KEPT
    assert cs.skipped == {"not_a_yes_no_question": 1, "answers_do_not_pair_questions_with_images": 1}
    # Row 1 answers "Yes" to Question_1 on Image_0: the block pairs Image_0 with Question_1.
    u1, u2, v1, v2 = cs.cycles[1]
    assert (cs.captions[v1], cs.captions[v2]) == (ROWS[1][1], ROWS[1][0]) and cs.images[u1].data == png(2)
    assert cs.cycle_tags[1] == ("source=DOCCI",)
    audit = audit_benchmark("naturalbench", tmp_path)
    assert audit.summary["n_cycles"] == KEPT and audit.summary["witness_acc"] == 0.5
    # As an audit-benchmark format on the command line: its files written, the dropped rows counted.
    assert main(["audit-benchmark", "naturalbench", "--root", str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    written = json.loads((tmp_path / "out" / "audit_naturalbench.json").read_text())
    assert written["dataset"] == "audit/naturalbench" and written["metrics"]["n_cycles"] == KEPT


def test_naturalbench_retrieval_metadata(tmp_path: Path) -> None:
    folder = tmp_path / "NaturalBench-Retrieval"
    (folder / "images").mkdir(parents=True)
    entries = [
        {"index": i, "image_0": f"{i}_0.png", "image_1": f"{i}_1.png", "caption_0": f"a cat {i}", "caption_1": f"a dog {i}"}
        for i in range(3)
    ]
    (folder / "metadata.json").write_text(json.dumps(entries))
    (cs,) = load_benchmark("naturalbench", tmp_path)
    assert cs.name == "retrieval" and len(cs.cycles) == 3
    u1, u2, v1, v2 = cs.cycles[2]
    assert (cs.images[u1].key, cs.captions[v1], cs.images[u2].key, cs.captions[v2]) == (
        "2_0.png",
        "a cat 2",
        "2_1.png",
        "a dog 2",
    )
    # A malformed entry is a sentence naming the file, the entry and the field.
    entries[1]["caption_1"] = " "
    (folder / "metadata.json").write_text(json.dumps(entries))
    with pytest.raises(ValueError, match=r"metadata.json: entry 1: field 'caption_1'"):
        load_benchmark("naturalbench", tmp_path)


def test_naturalbench_refusals_name_the_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no NaturalBench file; expected NaturalBench Parquet"):
        load_benchmark("naturalbench", tmp_path)
    rows = [(*ROWS[0][:2], ("Yes", "", "No", "Yes"), "yes_no", "Flickr")]
    write_naturalbench(tmp_path, rows)
    with pytest.raises(ValueError, match=r"train-00000-of-00001.parquet: row 0: field 'Image_1_Question_0'"):
        load_benchmark("naturalbench", tmp_path)


@pytest.fixture()
def scored(tmp_path: Path):
    write_naturalbench(tmp_path / "nb")
    blocks = true_blocks()
    keys = [k for b in blocks for k in b[:2]]
    captions = sorted({c for b in blocks for c in b[2:]})
    phi, psi = write_features(tmp_path / "f.npz", keys, captions, seed=5)
    img = {k: phi[i].astype(np.float64) for i, k in enumerate(keys)}
    txt = {c: psi[i].astype(np.float64) for i, c in enumerate(captions)}
    return tmp_path, block_scores_by_loop(blocks, img, txt)


def test_cycles_naturalbench_through_clip_cycles_eval(scored, capsys) -> None:
    tmp_path, expected = scored
    args = ["eval", "--task", "cycles/naturalbench", "--model-type", "features", "--model", str(tmp_path / "f.npz")]
    args += ["--pretrained", "none", "--dataset-root", str(tmp_path / "nb"), "--num-workers", "0"]
    args += ["--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "{dataset}_{task}.json")]
    assert main(args) == 0, capsys.readouterr().err
    m = read_result(tmp_path / "cycles_naturalbench_cycles.json")["metrics"]
    assert m["n_cycles"] == KEPT
    assert {k: m[k] for k in expected} == pytest.approx(expected, abs=1e-12)
    assert m["per_tag"]["source=DOCCI"]["n_cycles"] == 2
    digest = m["items_sha256"]
    assert len(digest) == 64

    # Another release (one answer relabelled: row 0 now pairs Image_0 with Question_1) gives another digest.
    rows = [(*ROWS[0][:2], ("No", "Yes", "Yes", "No"), "yes_no", "Flickr"), *ROWS[1:]]
    write_naturalbench(tmp_path / "nb2", rows)
    args2 = [a if a != str(tmp_path / "nb") else str(tmp_path / "nb2") for a in args]
    args2[args2.index("--output") + 1] = str(tmp_path / "v2_{dataset}_{task}.json")
    assert main(args2) == 0
    assert read_result(tmp_path / "v2_cycles_naturalbench_cycles.json")["metrics"]["items_sha256"] != digest


def test_cycles_naturalbench_through_clip_benchmark(scored) -> None:
    tmp_path, expected = scored
    record = clip_benchmark_features_run(tmp_path, "cycles/naturalbench", tmp_path / "nb")
    assert (record["dataset"], record["task"]) == ("cycles/naturalbench", "cycles")
    assert {k: record["metrics"][k] for k in expected} == pytest.approx(expected, abs=1e-12)
    assert record["metrics"]["n_cycles"] == KEPT
