"""The page reads what eval wrote: two checkpoints' result folders and their samples files, nothing recomputed.

Issue 51's "Done when": with an empty cache and no model flags, the page shows example cycles
whose captions are the run's own, imports neither torch nor OpenCLIP, writes nothing outside
``--out`` and names both checkpoints without any part of the (long, absolute) path their
weights sit under.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

TASK = "cycles/shapes_strict_size"
#: A long absolute folder the weights sit under: no part of it may reach any file of the page.
DEEP = ("machine-only-home", "very-long-checkpoint-store-7f3a", "run-2026-11-30-sweep", "noise-levels")


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root``: relative path -> (size, mtime_ns)."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


@pytest.fixture(scope="module")
def two_checkpoints(shapes_cycles: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two cycles-tiny checkpoints (the shipped weights, and a noisy copy) under a long path, each evaluated with --samples."""
    from safetensors.numpy import load_file, save_file

    from clip_cycles.cli import main
    from clip_cycles.encoding.tiny_model import WEIGHTS_PATH

    tmp = tmp_path_factory.mktemp("records")
    store = tmp.joinpath(*DEEP)
    store.mkdir(parents=True)
    tensors = load_file(str(WEIGHTS_PATH))
    save_file(tensors, str(store / "tiny_clean.safetensors"))
    rng = np.random.default_rng(0)
    noisy = {
        k: np.asarray(v + rng.normal(0, 0.05, v.shape).astype(v.dtype), dtype=v.dtype) if v.dtype.kind == "f" else v
        for k, v in tensors.items()
    }
    save_file(noisy, str(store / "tiny_noise0p05.safetensors"))
    for name in ("clean", "noise0p05"):
        out = tmp / "results" / name
        args = ["eval", "--task", TASK, "--model", "cycles-tiny", "--pretrained", str(store / f"tiny_{name}.safetensors")]
        args += ["--dataset-root", str(shapes_cycles), "--cache-dir", str(tmp / "eval_cache"), "--seeds", "0", "1"]
        args += ["--device", "cpu", "--num-workers", "0", "--output", str(out / "{dataset}.json")]
        assert main([*args, "--samples", str(out / "samples.jsonl")]) == 0
    return tmp


class _Examples(HTMLParser):
    """The captions of every example cycle on a family page (``figcaption`` after "matched caption k: ")."""

    def __init__(self) -> None:
        super().__init__()
        self.captions: list[str] = []
        self._in = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in = tag == "figcaption"

    def handle_endtag(self, tag: str) -> None:
        self._in = False if tag == "figcaption" else self._in

    def handle_data(self, data: str) -> None:
        if self._in and ": " in data:
            self.captions.append(data.split(": ", 1)[1])


def test_page_from_two_checkpoints_records_alone(two_checkpoints: Path, tmp_path: Path) -> None:
    results = two_checkpoints / "results"
    out = tmp_path / "site"
    cache = tmp_path / "empty_cache"
    before = _tree(two_checkpoints)
    code = (
        "import sys, json; from clip_cycles.cli import main; rc = main(sys.argv[1:]); "
        "print(json.dumps({'rc': rc, 'heavy': sorted(m for m in ('torch', 'open_clip', 'clip_cycles.encoding.encoder', "
        "'clip_cycles.encoding.task_encoding') if m in sys.modules)}))"
    )
    env = {**os.environ, "CLIP_CYCLES_CACHE": str(cache), "HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", code, "page", str(results / "clean"), str(results / "noise0p05"), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"rc": 0, "heavy": []}  # no torch, no OpenCLIP, no encoders
    # Nothing written outside --out: not in the results, not in a cache, not in a reproduced world.
    assert _tree(two_checkpoints) == before
    assert not cache.exists() and not (tmp_path / "home").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]

    # Example cycles whose captions are the run's own (the samples lines of that model).
    family = (out / "families" / "shapes_strict_size.html").read_text(encoding="utf-8")
    run_captions = set()
    for name in ("clean", "noise0p05"):
        for line in (results / name / "samples.jsonl").read_text().splitlines():
            sample = json.loads(line)
            run_captions |= {sample["caption_0"], sample["caption_1"]}
    parser = _Examples()
    parser.feed(family)
    assert parser.captions, "no example cycles on the family page"
    assert set(parser.captions) <= run_captions
    assert 'data-kind="hardest"' in family and 'data-kind="random"' in family
    assert "thumbs/" in family  # the image files the samples name are reachable here

    # Both checkpoints named, by file name and weights digest, and no part of the machine path anywhere.
    index = (out / "index.html").read_text(encoding="utf-8")
    records = {
        name: json.loads((results / name / "cycles_shapes_strict_size.json").read_text()) for name in ("clean", "noise0p05")
    }
    for name, record in records.items():
        assert f"tiny_{name}.safetensors, weights {record['weights_sha256'][:12]}" in index
    forbidden = [str(two_checkpoints), *DEEP]
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", errors="replace")
            assert not [part for part in forbidden if part in text], path


def test_records_name_their_samples_and_lines_validate(two_checkpoints: Path) -> None:
    from clip_cycles.schemas.samples import SampleLine

    jsonschema = pytest.importorskip("jsonschema")
    from clip_cycles.commands.schema_formats import schema_text

    schema = json.loads(schema_text("samples"))
    from clip_cycles.results import read_result

    folder = two_checkpoints / "results" / "clean"
    record = read_result(folder / "cycles_shapes_strict_size.json")
    content = (folder / "samples.jsonl").read_bytes()
    import hashlib

    assert record["samples"] == {"path": "samples.jsonl", "sha256": hashlib.sha256(content).hexdigest()}
    assert isinstance(record["source"], dict) and record["source"]["kind"] == "shapes"
    assert record["source"]["world"]["n_images"] == 300 and record["source_line"].startswith("shapes world: 300 images")
    assert record["family"]["predicate"] and record["family"]["provenance"]
    for line in content.decode().splitlines():
        sample = json.loads(line)
        jsonschema.validate(sample, schema)
        SampleLine.model_validate(sample)
        assert sample["items_sha256"] == record["items_sha256"] and sample["weights_sha256"] == record["weights_sha256"]


def test_compare_reports_each_sides_recorded_cycle_acc(two_checkpoints: Path) -> None:
    from clip_cycles.evaluation.compare import compare_samples

    results = two_checkpoints / "results"
    got = compare_samples(results / "clean" / "samples.jsonl", results / "noise0p05" / "samples.jsonl", n_resamples=50)
    row = got["families"][TASK]
    for side, name in (("a", "clean"), ("b", "noise0p05")):
        record = json.loads((results / name / "cycles_shapes_strict_size.json").read_text())
        assert row[f"cycle_acc_{side}"] == pytest.approx(record["metrics"]["cycle_acc"], abs=1e-12)


def test_swapped_samples_are_shown_apart_with_the_reason(two_checkpoints: Path, tmp_path: Path) -> None:
    import shutil

    from clip_cycles.evaluation.page import build_page

    results = tmp_path / "results"
    shutil.copytree(two_checkpoints / "results", results)
    a, b = results / "clean" / "samples.jsonl", results / "noise0p05" / "samples.jsonl"
    a_bytes, b_bytes = a.read_bytes(), b.read_bytes()
    a.write_bytes(b_bytes)
    b.write_bytes(a_bytes)
    build_page([results / "clean", results / "noise0p05"], tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "is not the file the result names" in index
    compare = next((tmp_path / "site" / "compare").glob("*.html")).read_text(encoding="utf-8")
    assert "is not the file the result names" in compare and "A above B" not in compare and "B above A" not in compare


def _copy_results(two_checkpoints: Path, tmp_path: Path) -> Path:
    import shutil

    results = tmp_path / "results"
    shutil.copytree(two_checkpoints / "results", results)
    return results


def _rename_samples(folder: Path, content: bytes) -> None:
    """Write ``content`` as the folder's samples file and name it, with its sha256, in the folder's record."""
    import hashlib

    (folder / "samples.jsonl").write_bytes(content)
    for path in folder.glob("*.detail.jsonl"):  # the record's objects (samples among them) are in its detail
        record = json.loads(path.read_text())
        record["samples"]["sha256"] = hashlib.sha256(content).hexdigest()
        path.write_text(json.dumps(record) + "\n")


def test_samples_of_another_item_set_are_shown_apart_with_the_reason(two_checkpoints: Path, tmp_path: Path) -> None:
    from clip_cycles.evaluation.page import build_page

    results = _copy_results(two_checkpoints, tmp_path)
    folder = results / "clean"
    lines = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    other = "0" * 64
    _rename_samples(folder, "".join(json.dumps({**x, "items_sha256": other}) + "\n" for x in lines).encode())
    build_page([folder], tmp_path / "site")
    family = (tmp_path / "site" / "families" / "shapes_strict_size.html").read_text(encoding="utf-8")
    assert "the samples are of item set 000000000000" in family and '<article class="cycle"' not in family


@pytest.mark.parametrize(
    ("change", "field"),
    [({"credit": 5.66}, "credit"), ({"seed": None}, "seed"), ({"seed": [0]}, "seed"), ({"delta": [0.1]}, "delta")],
)
def test_a_bad_samples_value_is_a_sentence_on_the_page_never_a_traceback(
    two_checkpoints: Path, tmp_path: Path, change: dict, field: str
) -> None:
    from clip_cycles.cli import main

    results = _copy_results(two_checkpoints, tmp_path)
    folder = results / "clean"
    lines = (folder / "samples.jsonl").read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), **change})
    _rename_samples(folder, ("\n".join(lines) + "\n").encode())
    assert main(["page", str(folder), "--out", str(tmp_path / "site")]) == 0
    family = (tmp_path / "site" / "families" / "shapes_strict_size.html").read_text(encoding="utf-8")
    assert f"line 3: field &#39;{field}&#39;" in family and '<article class="cycle"' not in family


def test_a_missing_samples_file_is_said_without_its_machine_path(two_checkpoints: Path, tmp_path: Path) -> None:
    from clip_cycles.evaluation.page import build_page

    results = _copy_results(two_checkpoints, tmp_path)
    (results / "clean" / "samples.jsonl").unlink()
    build_page([results / "clean"], tmp_path / "site")
    family = (tmp_path / "site" / "families" / "shapes_strict_size.html").read_text(encoding="utf-8")
    assert "clean/samples.jsonl, is not there" in family
    for path in (tmp_path / "site").rglob("*.html"):
        assert str(tmp_path) not in path.read_text(encoding="utf-8"), path
