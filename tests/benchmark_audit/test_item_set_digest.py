"""Versions told apart: an audit records the item-set digest of what it read, so two releases of one
benchmark (MMVP's two ground truths: which statement goes with which image) give two digests, and the
same files read again (or copied elsewhere) give the same one."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

from benchmark_formats_published import write_mmvp_vlm, write_vl_checklist

from clip_cycles.benchmark_audit.run import audit_benchmark


def _swap_first_pair(root: Path) -> None:
    """The other ground truth of the first pair: its two statements trade images."""
    path = root / "MMVP_VLM" / "Questions.csv"
    rows = list(csv.reader(path.open(newline="")))
    rows[1][2], rows[2][2] = rows[2][2], rows[1][2]
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)


def test_two_mmvp_releases_give_two_digests(tmp_path: Path) -> None:
    write_mmvp_vlm(tmp_path / "v1")
    shutil.copytree(tmp_path / "v1", tmp_path / "copy")
    shutil.copytree(tmp_path / "v1", tmp_path / "v2")
    _swap_first_pair(tmp_path / "v2")
    first = audit_benchmark("mmvp_vlm", tmp_path / "v1")
    digest = first.metrics()["items_sha256"]
    assert len(digest) == 64 and first.record()["metrics"]["items_sha256"] == digest
    assert audit_benchmark("mmvp_vlm", tmp_path / "copy").items_sha256 == digest  # by content, not by path
    other = audit_benchmark("mmvp_vlm", tmp_path / "v2")
    # The same counts and the same design numbers: only the digest tells the releases apart.
    assert other.summary["n_comparisons"] == first.summary["n_comparisons"]
    assert other.items_sha256 != digest


def test_an_empty_piece_enters_the_digest(tmp_path: Path) -> None:
    write_mmvp_vlm(tmp_path / "a")
    base = audit_benchmark("mmvp_vlm", tmp_path / "a").items_sha256
    write_vl_checklist(tmp_path / "vl")
    without = audit_benchmark("vl_checklist", tmp_path / "vl").items_sha256
    (tmp_path / "vl" / "empty.json").write_text("[]")
    assert audit_benchmark("vl_checklist", tmp_path / "vl").items_sha256 not in (without, base)
