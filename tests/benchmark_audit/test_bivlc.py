"""BiVLC in its published schema (HF imirandam/BiVLC: Parquet with image, caption, negative_caption,
negative_image; images as ``{bytes, path}`` structs): each row one 2x2 cycle, scored through
``clip_benchmark eval --dataset cycles/bivlc`` and ``clip-cycles eval --task cycles/bivlc``, with
CycleAcc, text/image/group computed here from the features the backend serves."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from benchmark_formats import write_features
from plugin_runs import clip_benchmark_features_run

from clip_cycles.benchmark_audit.adapters import load_benchmark
from clip_cycles.benchmark_audit.run import audit_benchmark
from clip_cycles.cli import main
from clip_cycles.results import read_result

TOL = 1e-9
ROWS = [
    ("A dog on a sofa.", "A sofa on a dog.", "replace", "obj"),
    ("A red car next to a blue house.", "A blue car next to a red house.", "swap", "att"),
    ("A man riding a horse.", "A horse riding a man.", "swap", "obj"),
    ("Two cats on a bed.", "Two cats under a bed.", "replace", "rel"),
    ("A child holding a kite.", "A child holding a kite and a ball.", "add", "obj"),
]


def png(seed: int) -> bytes:
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, size=(8, 8, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def write_bivlc(root: Path, rows=ROWS, shard: str = "test-00000-of-00001") -> list[str]:
    """``data/<shard>.parquet`` as the hub publishes it; returns the image keys the adapter gives, row by row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "data").mkdir(parents=True, exist_ok=True)
    table = {
        "image": [{"bytes": png(2 * i), "path": None} for i in range(len(rows))],
        "caption": [r[0] for r in rows],
        "negative_caption": [r[1] for r in rows],
        "negative_image": [{"bytes": png(2 * i + 1), "path": None} for i in range(len(rows))],
        "type": [r[2] for r in rows],
        "subtype": [r[3] for r in rows],
    }
    pq.write_table(pa.table(table), root / "data" / f"{shard}.parquet")
    return [f"{shard} row {i}/{field}" for i in range(len(rows)) for field in ("image", "negative_image")]


def test_bivlc_rows_are_declared_cycles(tmp_path: Path) -> None:
    write_bivlc(tmp_path)
    (cs,) = load_benchmark("bivlc", tmp_path)
    assert cs.name == "test" and len(cs.cycles) == len(ROWS) and cs.n_comparisons == 4 * len(ROWS)
    u1, u2, v1, v2 = cs.cycles[1]
    assert (cs.captions[v1], cs.captions[v2]) == ROWS[1][:2] and cs.images[u1].data == png(2)
    assert cs.cycle_tags[1] == ("type=swap", "subtype=att")
    # The design audit: every block an exact cycle, so every additive score (the witness) sits at 0.5.
    audit = audit_benchmark("bivlc", tmp_path)
    assert audit.summary["n_cycles"] == len(ROWS) and audit.summary["witness_acc"] == 0.5


def expected_scores(phi: np.ndarray, psi: np.ndarray, n: int) -> dict[str, float]:
    """CycleAcc and Winoground's text/image/group from the tables (row 2i: image, 2i+1: negative image)."""
    phi, psi = phi.astype(np.float64), psi.astype(np.float64)
    s = np.array(
        [[[phi[2 * i] @ psi[2 * i + k] for k in (0, 1)], [phi[2 * i + 1] @ psi[2 * i + k] for k in (0, 1)]] for i in range(n)]
    )
    delta = s[:, 0, 0] + s[:, 1, 1] - s[:, 0, 1] - s[:, 1, 0]
    text = (s[:, 0, 0] > s[:, 0, 1]) & (s[:, 1, 1] > s[:, 1, 0])
    image = (s[:, 0, 0] > s[:, 1, 0]) & (s[:, 1, 1] > s[:, 0, 1])
    return {
        "cycle_acc": float(np.where(delta > TOL, 1.0, np.where(delta < -TOL, 0.0, 0.5)).mean()),
        "text_acc": float(text.mean()),
        "image_acc": float(image.mean()),
        "group_acc": float((text & image).mean()),
    }


@pytest.fixture()
def scored(tmp_path: Path):
    keys = write_bivlc(tmp_path / "bivlc")
    captions = [text for r in ROWS for text in r[:2]]
    phi, psi = write_features(tmp_path / "f.npz", keys, captions, seed=3)
    return tmp_path, expected_scores(phi, psi, len(ROWS))


def test_cycles_bivlc_through_clip_cycles_eval(scored, capsys) -> None:
    tmp_path, expected = scored
    args = ["eval", "--task", "cycles/bivlc", "--model-type", "features", "--model", str(tmp_path / "f.npz")]
    args += ["--pretrained", "none", "--dataset-root", str(tmp_path / "bivlc"), "--num-workers", "0"]
    args += ["--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "{dataset}_{task}.json")]
    assert main(args) == 0, capsys.readouterr().err
    m = read_result(tmp_path / "cycles_bivlc_cycles.json")["metrics"]
    assert m["n_cycles"] == len(ROWS)
    assert {k: m[k] for k in expected} == expected
    assert m["per_tag"]["type=swap"]["n_cycles"] == 2
    digest = m["items_sha256"]
    assert len(digest) == 64

    # Another release (one label swapped: the negative caption goes with the first image) is another digest.
    rows = [ROWS[0], (ROWS[1][1], ROWS[1][0], "swap", "att"), *ROWS[2:]]
    write_bivlc(tmp_path / "bivlc2", rows)
    args2 = [a if a != str(tmp_path / "bivlc") else str(tmp_path / "bivlc2") for a in args]
    args2[args2.index("--output") + 1] = str(tmp_path / "v2_{dataset}_{task}.json")
    assert main(args2) == 0
    assert read_result(tmp_path / "v2_cycles_bivlc_cycles.json")["metrics"]["items_sha256"] != digest


def test_cycles_bivlc_through_clip_benchmark(scored) -> None:
    tmp_path, expected = scored
    record = clip_benchmark_features_run(tmp_path, "cycles/bivlc", tmp_path / "bivlc")
    assert (record["dataset"], record["task"]) == ("cycles/bivlc", "cycles")
    assert {k: record["metrics"][k] for k in expected} == expected
    assert json.dumps(record["metrics"]["n_cycles"]) == str(len(ROWS))
