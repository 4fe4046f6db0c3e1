"""The samples file's reader and its pairing with a result, by hand: keys, refusals naming the line and field,
each side's recorded CycleAcc (mean over seeds of seed means), and which lines belong to which result."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from clip_cycles.data.sources.images import ImageItem
from clip_cycles.evaluation.samples import (
    check_samples_path,
    image_root,
    pairing_problem,
    read_samples,
    recorded_cycle_acc,
    samples_bytes,
    samples_reference,
)

ITEMS = "a" * 64
WEIGHTS = "b" * 64


def _line(task: str = "cycles/f", seed: int = 0, cycle: str = "c0", credit: float = 1.0, **extra) -> dict:
    line = {"task": task, "seed": seed, "split": "test", "cycle_id": cycle, "image_0": "u.jpg", "image_1": "v.jpg",
            "caption_0": "x", "caption_1": "y", "s11": 0.5, "s12": 0.25, "s21": 0.0, "s22": 0.5, "delta": 0.75,
            "credit": credit}  # fmt: skip
    return {**line, **extra}


def _write(path: Path, lines: list[dict | str]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_lines_are_keyed_by_task_then_seed_and_cycle(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", [_line(), "", _line(seed=1), _line(task="cycles/g", cycle="c9", credit=0.5)])
    out = read_samples(path)
    assert sorted(out) == ["cycles/f", "cycles/g"]
    assert sorted(out["cycles/f"]) == [(0, "c0"), (1, "c0")] and list(out["cycles/g"]) == [(0, "c9")]
    line = out["cycles/g"][0, "c9"]
    assert line["credit"] == 0.5 and line["items_sha256"] is None and line["image_root"] is None
    # Bytes given: the same parse, the file not read again.
    assert read_samples("not-read.jsonl", path.read_bytes()) == out


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_line(credit=5), r"line 2: field 'credit'"),
        ({k: v for k, v in _line().items() if k != "seed"}, r"line 2: field 'seed' .*write it with clip-cycles eval --samples"),
        ("[1, 2]", r"line 2: expected an object"),
        ("{not json", r"line 2: not JSON"),
        (_line(cycle="c0"), r"line 2: task cycles/f seed 0 cycle c0 twice"),
        ('{"delta": NaN}', r"line 2"),
    ],
)
def test_a_bad_line_is_one_sentence_naming_the_file_and_line(tmp_path: Path, bad, message: str) -> None:
    path = _write(tmp_path / "s.jsonl", [_line(), bad])
    with pytest.raises(ValueError, match=rf"samples file {path}, {message}"):
        read_samples(path)


def test_an_empty_file_holds_no_cycles(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", [""])
    with pytest.raises(ValueError, match=rf"samples file {path} holds no cycles; write it with clip-cycles eval --samples"):
        read_samples(path)


def test_an_older_line_with_source_is_read_without_it(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", [_line(source="coco val2017")])
    assert "source" not in read_samples(path)["cycles/f"][0, "c0"]


def test_recorded_cycle_acc_is_the_mean_over_seeds_of_seed_means() -> None:
    cycles = {(0, "a"): {"credit": 1.0}, (0, "b"): {"credit": 0.0}, (0, "c"): {"credit": 0.5}, (3, "a"): {"credit": 1.0}}
    assert recorded_cycle_acc(cycles) == pytest.approx((0.5 + 1.0) / 2)  # not the pooled 2.5 / 4


def test_a_samples_file_belongs_to_the_result_that_names_its_items_and_weights() -> None:
    mine = {(0, "a"): {"items_sha256": ITEMS, "weights_sha256": WEIGHTS}}
    assert pairing_problem(mine, ITEMS, WEIGHTS) is None
    assert pairing_problem(mine, "c" * 64, WEIGHTS) == f"the samples are of item set {ITEMS[:12]}, the result of {'c' * 12}"
    assert pairing_problem(mine, ITEMS, None) == f"the samples are of weights {WEIGHTS[:12]}, the result of none recorded"
    mixed = {**mine, (0, "b"): {"items_sha256": "d" * 64, "weights_sha256": WEIGHTS}}
    assert (
        pairing_problem(mixed, ITEMS, WEIGHTS)
        == f"the samples are of item set {ITEMS[:12]}, {'d' * 12}, the result of {ITEMS[:12]}"
    )
    older = {(0, "a"): {"items_sha256": None, "weights_sha256": None}}
    assert pairing_problem(older, None, None) is None  # written before lines carried them, result records neither
    assert pairing_problem(older, None, WEIGHTS) == f"the samples are of weights none recorded, the result of {WEIGHTS[:12]}"


def test_paths_roots_and_bytes(tmp_path: Path) -> None:
    assert image_root(ImageItem(key="sub/u.jpg", path=Path("/data/images/sub/u.jpg"))) == "/data/images"
    assert image_root(ImageItem(key="u.jpg", path=Path("/elsewhere/v.jpg"))) is None
    assert image_root(ImageItem(key="u.jpg", data=b"x")) is None
    with pytest.raises(ValueError, match="is a folder; name a file"):
        check_samples_path(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is not a folder"):
        check_samples_path(tmp_path / "file" / "s.jsonl")
    assert check_samples_path(tmp_path / "new" / "s.jsonl") == tmp_path / "new" / "s.jsonl"
    data = samples_bytes([{"b": 1, "a": 2}, {"c": 3}])
    assert data == b'{"a": 2, "b": 1}\n{"c": 3}\n'
    assert samples_reference("s.jsonl", data) == {"path": "s.jsonl", "sha256": hashlib.sha256(data).hexdigest()}


def test_the_sentences_in_full(tmp_path: Path) -> None:
    good = _line(cycle="a")
    cases = [
        (_line(credit=5), "field 'credit' is 5.0; a cycle's credit is 0, 0.5 or 1"),
        ({k: v for k, v in _line().items() if k != "seed"},
         "field 'seed' is missing; must be an integer: the build seed the cycle comes from; "
         "write it with clip-cycles eval --samples"),
        (_line(source="s", image_root="r"), "field 'source' unknown key (allowed: caption_0, caption_1, credit, cycle_id, delta, "
         "image_0, image_1, image_root, items_sha256, s11, s12, s21, s22, seed, split, task, weights_sha256)"),
    ]  # fmt: skip
    for bad, sentence in cases:
        path = _write(tmp_path / "s.jsonl", [good, bad, _line(cycle="z", credit=7)])  # two bad lines: the first is named
        with pytest.raises(ValueError) as caught:
            read_samples(path)
        assert str(caught.value) == f"samples file {path}, line 2: {sentence}"
    with pytest.raises(FileNotFoundError, match=rf"^samples file {tmp_path / 'missing.jsonl'} does not exist"):
        read_samples(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError) as caught:
        check_samples_path(tmp_path)
    assert str(caught.value) == f"samples file {tmp_path} is a folder; name a file, e.g. {tmp_path / 'samples.jsonl'}"
    with pytest.raises(ValueError, match=r"^samples file path of \d+ bytes"):
        check_samples_path("x/" * 3000 + "s.jsonl")
    weights = {
        (0, "a"): {"items_sha256": None, "weights_sha256": WEIGHTS},
        (0, "b"): {"items_sha256": None, "weights_sha256": None},
    }
    assert (
        pairing_problem(weights, None, WEIGHTS)
        == f"the samples are of weights {WEIGHTS[:12]}, none recorded, the result of {WEIGHTS[:12]}"
    )
    assert image_root(ImageItem(key="u.jpg", path=Path("/data/imgX/u.jpg"))) == "/data/imgX"


def test_lines_written_for_a_result_carry_its_digests_and_their_shared_image_root(tmp_path: Path) -> None:
    from types import SimpleNamespace

    import numpy as np

    from clip_cycles.data.folder.reader import CycleRows
    from clip_cycles.encoding.encoder import EncodedFeatures, EncodeStats
    from clip_cycles.evaluation.samples import cycle_samples, write_samples

    root = tmp_path / "images"
    a, b = ImageItem(key="a.jpg", path=root / "a.jpg"), ImageItem(key="b.jpg", path=root / "b.jpg")
    c = ImageItem(key="c.jpg", path=tmp_path / "other" / "c.jpg")
    rows = CycleRows.from_pairs(["c0", "c1"], [(a, b), (a, c)], [("x", "y"), ("x", "y")])
    encoded = EncodedFeatures(np.zeros((3, 2), np.float32), np.zeros((2, 2), np.float32), {"a.jpg": 0, "b.jpg": 1, "c.jpg": 2},
                              {"x": 0, "y": 1}, EncodeStats())  # fmt: skip
    task = SimpleNamespace(name="cycles/t", split="test", tie_tolerance=0.0)
    blocks = np.zeros((2, 2, 2))
    lines = cycle_samples(task, 0, rows, encoded, blocks, {"items_sha256": ITEMS, "weights_sha256": WEIGHTS})
    assert [(x["items_sha256"], x["weights_sha256"]) for x in lines] == [(ITEMS, WEIGHTS)] * 2
    assert [x["image_root"] for x in lines] == [str(root), None]  # one root only when both images share it
    assert cycle_samples(task, 0, rows, encoded, blocks)[0]["items_sha256"] is None
    with pytest.raises(ValueError, match=r"^task cycles/t seed 0: 2 kept rows for 3 blocks$"):
        cycle_samples(task, 0, rows, encoded, np.zeros((3, 2, 2)))
    path = write_samples(lines, tmp_path / "out" / "s.jsonl")
    assert path.read_bytes() == samples_bytes(lines)
    with pytest.raises(OSError, match="samples file"):
        write_samples(lines, tmp_path / "out" / "s.jsonl" / "below.jsonl")
