"""`clip-cycles audit-benchmark` with the shipped cycles-tiny model, and the clip_benchmark reach:
`cycles/winoground` (blocks of a Winoground-format root as cycles) and `audit/<format>`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from benchmark_formats import write_features, write_sugarcrepe, write_winoground

from clip_cycles.cli import main
from clip_cycles.results import IDENTITY_FIELDS, read_result

TOL = 1e-9


def test_audit_benchmark_command_with_cycles_tiny(tmp_path: Path, capsys) -> None:
    write_sugarcrepe(tmp_path / "sc")
    args = [
        "audit-benchmark",
        "sugarcrepe",
        "--root",
        str(tmp_path / "sc"),
        "--model",
        "cycles-tiny",
        "--pretrained",
        "shapes",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--device",
        "cpu",
        "--num-workers",
        "0",
    ]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    table = capsys.readouterr().out
    assert "| add_obj | 8 | 8 |" in table and "| swap_att | 4 | 4 |" in table
    record = json.loads((tmp_path / "a" / "audit_sugarcrepe.json").read_text())
    assert set(record) - {"weights_sha256"} == {"dataset", "model", "pretrained", "task", "metrics", "language", "backend"} | set(
        IDENTITY_FIELDS
    )
    assert record["split"] == "all" and re.fullmatch(r"[0-9a-f]{64}", record["items_sha256"])  # never "not recorded"
    assert record["source"]["kind"] == "benchmark" and record["source_line"].startswith("benchmark sugarcrepe")
    assert (record["dataset"], record["model"], record["pretrained"]) == ("audit/sugarcrepe", "cycles-tiny", "shapes")
    subsets = record["metrics"]["subsets"]
    assert subsets["add_obj"]["shortest_caption_acc"] == 1.0
    for m in subsets.values():
        assert 0.0 <= m["model_acc"] <= 1.0 and m["image_probe_acc"] == 0.5
    assert (tmp_path / "a" / "audit_sugarcrepe.png").read_bytes()[:4] == b"\x89PNG"
    first = record["metrics"]["encoding"]
    assert first["model_loaded"] and first["encoded_images"] == first["unique_images"] > 0

    # Same inputs: the same bytes, served from the feature cache without loading the model.
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    again = json.loads((tmp_path / "b" / "audit_sugarcrepe.json").read_text())
    assert not again["metrics"]["encoding"]["model_loaded"]
    assert again["metrics"]["encoding"]["cached_captions"] == first["unique_captions"]
    for key in ("encoding",):
        record["metrics"].pop(key), again["metrics"].pop(key)
    assert json.dumps(record, sort_keys=True) == json.dumps(again, sort_keys=True)
    assert (tmp_path / "a" / "audit_sugarcrepe.md").read_text() == (tmp_path / "b" / "audit_sugarcrepe.md").read_text()

    # An unreadable image with --skip-bad-images: its comparisons are dropped, counted and named.
    (tmp_path / "sc" / "val2017" / "000000000101.jpg").write_bytes(b"not a jpeg")
    assert main([*args, "--out", str(tmp_path / "c"), "--skip-bad-images"]) == 0
    skipped = json.loads((tmp_path / "c" / "audit_sugarcrepe.json").read_text())["metrics"]
    swap = skipped["subsets"]["swap_att"]
    assert swap["skipped"] == {"comparison_of_item_with_bad_image": 1} and swap["n_comparisons"] == 3
    assert swap["cycles"]["n_cycles"] == 0  # item 101 was the only partner of item 100
    assert "000000000101.jpg" in skipped["encoding"]["bad_images"]
    assert main([*args, "--out", str(tmp_path / "d")]) == 2  # without the flag: an error naming the image
    assert "000000000101.jpg" in capsys.readouterr().err

    # A user error: a clear message and exit code 2, no traceback.
    assert main(["audit-benchmark", "sugarcrepe", "--root", str(tmp_path / "missing")]) == 2
    assert "sugarcrepe root" in capsys.readouterr().err


def test_an_audit_whose_images_are_elsewhere_names_the_layout_and_the_ways_out(tmp_path: Path, capsys) -> None:
    """Images in a folder the layout does not name: one sentence naming val2017/, --skip-bad-images and no --model."""
    write_sugarcrepe(tmp_path / "sc")
    (tmp_path / "sc" / "val2017").rename(tmp_path / "sc" / "coco_images")  # where a new user might put them
    args = ["audit-benchmark", "sugarcrepe", "--root", str(tmp_path / "sc"), "--out", str(tmp_path / "out")]
    model = ["--model", "cycles-tiny", "--pretrained", "shapes", "--cache-dir", str(tmp_path / "cache"), "--device", "cpu"]
    assert main([*args, *model]) == 2
    err = capsys.readouterr().err
    assert re.search(r"sugarcrepe root \S+: \d+ of \d+ images are not there \(the first, '\S+\.jpg', was looked for at ", err)
    assert "an audit with a model reads the seven SugarCrepe files" in err and "COCO val2017 images (val2017/ or images/)" in err
    assert "pass --skip-bad-images to count and skip the missing ones, or drop --model to audit the design" in err
    assert "Traceback" not in err and not (tmp_path / "cache").exists()  # refused before the model was loaded
    # Each way out works: the design audit without a model, and the images where the layout puts them.
    assert main(args) == 0
    (tmp_path / "sc" / "coco_images").rename(tmp_path / "sc" / "val2017")
    assert main([*args, *model, "--num-workers", "0"]) == 0


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLIP_CYCLES_", "PYTHONPATH"))}
    env.update({"CLIP_CYCLES_CACHE": str(tmp / "cache"), "TQDM_DISABLE": "1"})
    return env


def test_winoground_and_audit_through_clip_benchmark(tmp_path: Path) -> None:
    rows = write_winoground(tmp_path / "wg")
    keys = [f"{r[f'image_{k}']}.png" for r in rows for k in (0, 1)]
    captions = [str(r[f"caption_{k}"]) for r in rows for k in (0, 1)]
    phi, psi = write_features(tmp_path / "f.npz", keys, captions, seed=7)
    common = [
        "--model_type",
        "features",
        "--model",
        str(tmp_path / "f.npz"),
        "--pretrained",
        "none",
        "--dataset_root",
        str(tmp_path / "wg"),
        "--task",
        "auto",
        "--num_workers",
        "0",
        "--output",
        str(tmp_path / "{dataset}_{task}.json"),
    ]
    script = (
        "import sys; from clip_cycles.commands.clip_benchmark import main; a = sys.argv[1:]; "
        "main(['eval', '--dataset', 'cycles/winoground', *a]); main(['eval', '--dataset', 'audit/winoground', *a])\n"
        "try:\n    main(['eval', '--dataset', 'cycles/winoground', *a[:6], *a[8:]])\n"
        "except SystemExit as e:\n    print('EXIT', e.code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *common], env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cycles = read_result(tmp_path / "cycles_winoground_cycles.json")
    assert (cycles["dataset"], cycles["task"]) == ("cycles/winoground", "cycles")
    phi, psi = phi.astype(np.float64), psi.astype(np.float64)
    s = np.array(
        [
            [
                [phi[2 * i] @ psi[2 * i], phi[2 * i] @ psi[2 * i + 1]],
                [phi[2 * i + 1] @ psi[2 * i], phi[2 * i + 1] @ psi[2 * i + 1]],
            ]
            for i in range(len(rows))
        ]
    )
    delta = s[:, 0, 0] + s[:, 1, 1] - s[:, 0, 1] - s[:, 1, 0]
    credit = np.where(delta > TOL, 1.0, np.where(delta < -TOL, 0.0, 0.5))
    text = (s[:, 0, 0] > s[:, 0, 1]) & (s[:, 1, 1] > s[:, 1, 0])
    image = (s[:, 0, 0] > s[:, 1, 0]) & (s[:, 1, 1] > s[:, 0, 1])
    m = cycles["metrics"]
    assert m["n_cycles"] == len(rows) and m["cycle_acc"] == credit.mean()
    assert (m["text_acc"], m["image_acc"], m["group_acc"]) == (text.mean(), image.mean(), (text & image).mean())
    relation = [i for i, r in enumerate(rows) if r["collapsed_tag"] == "Relation"]
    assert m["per_tag"]["collapsed_tag=Relation"]["cycle_acc"] == credit[relation].mean()
    assert m["per_tag"]["collapsed_tag=Relation"]["n_cycles"] == len(relation)

    audit = read_result(tmp_path / "audit_winoground_benchmark_audit.json")
    assert (audit["dataset"], audit["task"]) == ("audit/winoground", "benchmark_audit")
    am = audit["metrics"]
    assert am["cycle_acc"] == credit.mean() and am["n_cycles"] == len(rows)
    assert am["caption_probe_acc"] == am["witness_acc"] == am["best_blind_acc"] == 0.5

    # No root (the same call without --dataset_root): the task says what it needs, exit code 2.
    assert "EXIT 2" in done.stdout and "needs a benchmark root" in done.stderr and "examples.jsonl" in done.stderr
