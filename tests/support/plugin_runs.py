"""Run ``clip_benchmark eval --dataset cycles/<name>`` through the plugin in a fresh process, on precomputed features."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from clip_cycles.results import read_result


def clip_benchmark_features_run(tmp_path: Path, dataset: str, root: Path) -> dict[str, Any]:
    """The result record of ``clip_benchmark eval --dataset <dataset> --dataset_root <root>`` scored with the
    features file ``tmp_path/f.npz`` (a fresh interpreter, its own cache and home under ``tmp_path``)."""
    common = ["--model_type", "features", "--model", str(tmp_path / "f.npz"), "--pretrained", "none"]
    common += ["--dataset_root", str(root), "--task", "auto", "--num_workers", "0"]
    common += ["--output", str(tmp_path / "{dataset}_{task}.json")]
    script = (
        "import sys; from clip_cycles.commands.clip_benchmark import main; "
        f"main(['eval', '--dataset', {dataset!r}, *sys.argv[1:]])"
    )
    env = {"CLIP_CYCLES_CACHE": str(tmp_path / "cache"), "TQDM_DISABLE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script, *common], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return read_result(tmp_path / f"{dataset.replace('/', '_')}_cycles.json")


def block_scores_by_loop(blocks, phi, psi, tolerance: float = 1e-9) -> dict[str, float]:
    """CycleAcc and Winoground's text/image/group by a plain loop over each block's four similarities.

    ``blocks``: ``(image_0, image_1, caption_0, caption_1)`` keys, each image paired with its own caption;
    ``phi`` / ``psi``: key -> feature vector. Independent of the package's scoring (the tests' expected values).
    """
    cycle = text = image = group = 0.0
    for k0, k1, c0, c1 in blocks:
        s00, s01 = float(phi[k0] @ psi[c0]), float(phi[k0] @ psi[c1])
        s10, s11 = float(phi[k1] @ psi[c0]), float(phi[k1] @ psi[c1])
        delta = s00 + s11 - s01 - s10
        cycle += 1.0 if delta > tolerance else (0.0 if delta < -tolerance else 0.5)
        t, i = s00 > s01 and s11 > s10, s00 > s10 and s11 > s01
        text, image, group = text + t, image + i, group + (t and i)
    n = len(blocks)
    return {"cycle_acc": cycle / n, "text_acc": text / n, "image_acc": image / n, "group_acc": group / n}
