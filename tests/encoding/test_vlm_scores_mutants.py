"""Pair scoring without a model: keys, counts, batches, bad images and tables against values made in the test.

A fake pair scorer scores a pair from the image's red value and the caption's length, so
every table entry, block and count has an expected value computed here by hand; the tiny
transformers model of ``tests/encoding/test_vlm_scores.py`` is not needed (these tests take a
second, which is what the mutation score of ``clip_cycles/encoding/vlm_scores.py`` runs).
"""

from __future__ import annotations

import hashlib
import io
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from clip_cycles.data.sources.images import IMAGE_DECODING, ImageItem
from clip_cycles.encoding import vlm_scores
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.encoding.vlm_scores import PairScoreStats, PromptConfig, cache_description, pair_key, score_pairs


def _png(red: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (3, 3), (red, 7, 9)).save(buffer, format="PNG")
    return buffer.getvalue()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _key(image: bytes, caption: str) -> str:
    """The pair key, written out: sha256 of the image hash, a NUL and the caption's text hash."""
    caption_hash = _sha(b"text\x00" + caption.encode())
    return _sha(f"{_sha(image)}\0{caption_hash}".encode())


def _expected(red: int, caption: str) -> tuple[float, float]:
    return -(len(caption) + red / 256), float(len(caption.split()))


class _FakeScorer:
    """Scores (image, caption) as (-(len(caption) + red/256), words); records every batch it is given."""

    pair_scorer = True

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, str]]] = []
        self.configs: list[PromptConfig] = []

    def score_batch(self, images: list[Any], captions: list[str], config: PromptConfig) -> np.ndarray:
        batch = [(image.getpixel((0, 0))[0], caption) for image, caption in zip(images, captions)]
        self.batches.append(batch)
        self.configs.append(config)
        return np.array([_expected(red, caption) for red, caption in batch], dtype=np.float64)


def _spec(model: str = "org/vlm", pretrained: str | None = "rev1") -> ModelSpec:
    return ModelSpec("hf_vlm", model, pretrained)


REDS = {"a.png": 10, "b.png": 200, "c.png": 90}


def _items() -> dict[str, ImageItem]:
    return {key: ImageItem(key, data=_png(red)) for key, red in REDS.items()}


def _pairs() -> list[tuple[ImageItem, str]]:
    items = _items()
    # Duplicates on purpose: requested 7, unique pairs 5.
    return [
        (items["a.png"], "a red square"),
        (items["a.png"], "two circles"),
        (items["b.png"], "a red square"),
        (items["b.png"], "a red square"),
        (items["c.png"], "one big star"),
        (items["a.png"], "a red square"),
        (items["c.png"], "two circles"),
    ]


UNIQUE = [("a.png", "a red square"), ("a.png", "two circles"), ("b.png", "a red square"), ("c.png", "one big star"),
          ("c.png", "two circles")]  # fmt: skip


# --- prompt settings --------------------------------------------------------------------------------------------


def test_prompt_config_checks_its_fields() -> None:
    assert PromptConfig() == PromptConfig("{image} Caption:", "sum")
    assert PromptConfig(score="mean").score == "mean"
    with pytest.raises(ValueError, match=r"PromptConfig option score: 'max' is not one of \['sum', 'mean'\]"):
        PromptConfig(score="max")
    with pytest.raises(ValueError, match=r"prompt template 'Caption:' must contain \{image\}"):
        PromptConfig(prompt="Caption:")
    with pytest.raises(ValueError, match="PromptConfig option prompt: input should be a valid string, got 3"):
        PromptConfig(prompt=3)  # type: ignore[arg-type]


def test_prompt_config_from_yaml_overrides_default_with_the_backend_entry() -> None:
    data = {"lmms_eval_specific_kwargs": {"default": {"prompt": "{image} A:", "score": "mean", "other": 1},
                                          "hf_vlm": {"prompt": "{image} B:"}, "llava": {"score": "sum"}}}  # fmt: skip
    assert vlm_scores.prompt_config_from_yaml(data, "t.yaml") == PromptConfig("{image} B:", "mean")
    assert vlm_scores.prompt_config_from_yaml(data, "t.yaml", backend="llava") == PromptConfig("{image} A:", "sum")
    assert vlm_scores.prompt_config_from_yaml({}, "t.yaml") == PromptConfig()
    assert vlm_scores.prompt_config_from_yaml({"lmms_eval_specific_kwargs": {"default": None}}, "t.yaml") == PromptConfig()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ([1], r"t\.yaml: field 'lmms_eval_specific_kwargs' must be a mapping"),
        ({"default": "x"}, r"t\.yaml: field lmms_eval_specific_kwargs\.default must be a mapping"),
        ({"hf_vlm": [1]}, r"t\.yaml: field lmms_eval_specific_kwargs\.hf_vlm must be a mapping"),
        (
            {"hf_vlm": {"score": "max"}},
            r"t\.yaml: field lmms_eval_specific_kwargs: PromptConfig option score: 'max' is not one of",
        ),
    ],
)
def test_prompt_config_from_yaml_names_the_file_and_field(kwargs: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        vlm_scores.prompt_config_from_yaml({"lmms_eval_specific_kwargs": kwargs}, "t.yaml")


def test_prompt_config_for_task_reads_the_task_file(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("task: t\nlmms_eval_specific_kwargs:\n  hf_vlm: {prompt: '{image} Seen:', score: mean}\n", encoding="utf-8")
    assert vlm_scores.prompt_config_for_task(SimpleNamespace(path=str(path))) == PromptConfig("{image} Seen:", "mean")
    assert vlm_scores.prompt_config_for_task(SimpleNamespace(path=str(tmp_path / "none.yaml"))) == PromptConfig()
    path.write_text("task: t\nlmms_eval_specific_kwargs: {default: {score: max}}\n", encoding="utf-8")
    with pytest.raises(ValueError) as info:
        vlm_scores.prompt_config_for_task(SimpleNamespace(path=str(path)))
    assert str(info.value).startswith(f"{path}: field lmms_eval_specific_kwargs: PromptConfig option score: 'max' is not one of")


# --- model identity and keys -------------------------------------------------------------------------------------


def test_model_fingerprint_of_a_hub_id() -> None:
    assert vlm_scores.model_fingerprint("org/vlm", "abc") == {"hub_id": "org/vlm", "revision": "abc"}
    assert vlm_scores.model_fingerprint("org/vlm") == {"hub_id": "org/vlm", "revision": "main"}


def _folder_digest(folder: Path, names: list[str]) -> str:
    total = hashlib.sha256()
    for name in sorted(names):
        total.update(Path(name).name.encode() + b"\0" + _sha((folder / name).read_bytes()).encode() + b"\n")
    return total.hexdigest()


def test_model_fingerprint_of_a_folder_hashes_the_model_files_by_content(tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "vlm"
    (folder / "sub").mkdir(parents=True)
    (folder / ".cache" / "x").mkdir(parents=True)
    files = {"config.json": b"{}", "model.safetensors": b"w" * 9, "sub/tokenizer.model": b"tok", "vocab.txt": b"v"}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (folder / "notes.md").write_bytes(b"not a model file")
    (folder / "run.py").write_bytes(b"print()")
    (folder / ".cache" / "x" / "stale.json").write_bytes(b"{}")
    expected = {"content_sha256": _folder_digest(folder, list(files)), "files": sorted(files)}
    assert vlm_scores.model_fingerprint(str(folder)) == expected
    assert vlm_scores.model_fingerprint(str(folder), "ignored") == expected  # a folder has no revision
    shutil.copytree(folder, tmp_path / "moved")
    assert vlm_scores.model_fingerprint(str(tmp_path / "moved")) == expected
    (folder / "model.safetensors").write_bytes(b"v" * 10)
    assert vlm_scores.model_fingerprint(str(folder))["content_sha256"] == _folder_digest(folder, list(files))
    assert vlm_scores.model_fingerprint(str(folder))["content_sha256"] != expected["content_sha256"]


def test_model_fingerprint_of_a_folder_without_model_files_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "readme.md").write_text("nothing to load")
    with pytest.raises(ValueError, match=f"model folder {tmp_path} holds no weights or config files"):
        vlm_scores.model_fingerprint(str(tmp_path))


def test_pair_key_is_the_image_hash_and_the_caption_text_hash() -> None:
    assert pair_key(_sha(b"img"), "a cat") == _key(b"img", "a cat")
    assert pair_key(_sha(b"img"), "a cat") != pair_key(_sha(b"img"), "a dog")
    assert pair_key(_sha(b"img"), "a cat") != pair_key(_sha(b"imh"), "a cat")


def test_cache_description_holds_each_field_it_promises() -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        transformers = version("transformers")
    except PackageNotFoundError:
        transformers = ""
    spec = ModelSpec("hf_vlm", "org/vlm", "rev1", device="cuda", seed=3, amp=True)
    assert cache_description(spec, PromptConfig("{image} X:", "mean")) == {
        "backend": "hf_vlm",
        "model": {"hub_id": "org/vlm", "revision": "rev1"},
        "prompt": "{image} X:",
        "precision": spec.precision,
        "seed": 3,
        "transformers": transformers,
        "image_decoding": IMAGE_DECODING,
    }
    # Random initialisation reads no revision: the hub id at main.
    assert cache_description(_spec(pretrained=None), PromptConfig())["model"] == {"hub_id": "org/vlm", "revision": "main"}
    assert cache_description(_spec(pretrained="none"), PromptConfig())["model"] == {"hub_id": "org/vlm", "revision": "main"}


# --- counts ------------------------------------------------------------------------------------------------------


def test_stats_to_dict_reports_every_count() -> None:
    stats = PairScoreStats(unique_images=3, unique_image_contents=2, unique_captions=4, unique_pairs=5, requested_pairs=6,
                           scored_pairs=7, cached_pairs=8, forward_passes=9, model_loaded=True,
                           bad_images={"z.png": "bad", "y.png": "worse"}, corrupt_shards=["s1"])  # fmt: skip
    expected = {"unique_images": 3, "unique_image_contents": 2, "unique_captions": 4, "requested_pairs": 6, "unique_pairs": 5,
                "scored_pairs": 7, "cached_pairs": 8, "forward_passes": 9, "model_loaded": True, "skipped_bad_images": 2,
                "bad_images": {"y.png": "worse", "z.png": "bad"}, "corrupt_shards": ["s1"]}  # fmt: skip
    assert stats.to_dict() == expected
    assert list(stats.to_dict()["bad_images"]) == ["y.png", "z.png"]
    stats.ranks = [{"rank": 0}, {"rank": 1}]
    assert stats.to_dict() == {**expected, "world_size": 2, "ranks": [{"rank": 0}, {"rank": 1}]}


# --- scoring -----------------------------------------------------------------------------------------------------


def test_score_pairs_scores_each_unique_pair_once_in_sorted_batches(tmp_path: Path) -> None:
    scorer = _FakeScorer()
    names, scores = score_pairs(_pairs(), _spec(), [PromptConfig()], tmp_path, batch_size=2, scorer=scorer)
    (name,) = names
    assert names == {name: PromptConfig()}
    # Batches in (image content hash, caption) order, two pairs each, the last one short.
    order = sorted(UNIQUE, key=lambda pair: (_sha(_png(REDS[pair[0]])), pair[1]))
    flat = [(REDS[key], caption) for key, caption in order]
    assert scorer.batches == [flat[0:2], flat[2:4], flat[4:5]]
    assert scorer.configs == [PromptConfig()] * 3
    table = scores.tables[name]
    assert set(table) == {_key(_png(REDS[k]), c) for k, c in UNIQUE}
    for key, caption in UNIQUE:
        assert tuple(table[_key(_png(REDS[key]), caption)]) == _expected(REDS[key], caption)
    stats = scores.stats
    counts = (stats.requested_pairs, stats.unique_pairs, stats.unique_images, stats.unique_image_contents, stats.unique_captions)
    assert counts == (7, 5, 3, 3, 3)
    assert (stats.scored_pairs, stats.cached_pairs, stats.forward_passes, stats.model_loaded) == (5, 0, 3, False)
    assert (stats.encoded_images, stats.encoded_captions, stats.cached_images, stats.cached_captions) == (3, 3, 0, 0)
    assert scores.image_rows == {"a.png": 0, "b.png": 1, "c.png": 2}  # first appearance
    assert scores.caption_rows == {"a red square": 0, "two circles": 1, "one big star": 2}
    assert scores.image_hashes == [_sha(_png(REDS[k])) for k in ("a.png", "b.png", "c.png")]
    assert scores.captions == ["a red square", "two circles", "one big star"]
    assert scores.task_configs == {}


def test_a_second_run_is_served_from_the_cache_and_a_new_pair_alone_is_scored(tmp_path: Path) -> None:
    score_pairs(_pairs(), _spec(), [PromptConfig()], tmp_path, batch_size=2, scorer=_FakeScorer())
    again = _FakeScorer()
    names, scores = score_pairs(_pairs(), _spec(), [PromptConfig()], tmp_path, batch_size=2, scorer=again)
    assert again.batches == []
    stats = scores.stats
    assert (stats.scored_pairs, stats.cached_pairs, stats.forward_passes) == (0, 5, 0)
    assert (stats.encoded_images, stats.encoded_captions, stats.cached_images, stats.cached_captions) == (0, 0, 3, 3)
    (name,) = names
    assert tuple(scores.tables[name][_key(_png(10), "two circles")]) == _expected(10, "two circles")
    more = _FakeScorer()
    extra = ImageItem("d.png", data=_png(33))
    _, scores = score_pairs([*_pairs(), (extra, "a red square")], _spec(), [PromptConfig()], tmp_path, scorer=more)
    assert more.batches == [[(33, "a red square")]]
    stats = scores.stats
    assert (stats.scored_pairs, stats.cached_pairs, stats.forward_passes, stats.unique_pairs) == (1, 5, 1, 6)
    assert (stats.encoded_images, stats.encoded_captions, stats.cached_images, stats.cached_captions) == (1, 1, 3, 2)


def test_without_a_cache_folder_nothing_is_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    score_pairs(_pairs(), _spec(), [PromptConfig()], None, scorer=_FakeScorer())
    again = _FakeScorer()
    _, scores = score_pairs(_pairs(), _spec(), [PromptConfig()], None, scorer=again)
    assert scores.stats.scored_pairs == 5 and scores.stats.cached_pairs == 0 and len(again.batches) == 1
    assert list(tmp_path.iterdir()) == []


def test_each_prompt_gets_its_own_table_and_equal_prompts_one(tmp_path: Path) -> None:
    scorer = _FakeScorer()
    configs = [PromptConfig(), PromptConfig("{image} Other:"), PromptConfig()]
    names, scores = score_pairs(_pairs(), _spec(), configs, tmp_path, batch_size=10, scorer=scorer)
    assert sorted(names.values(), key=lambda c: c.prompt) == [PromptConfig("{image} Caption:"), PromptConfig("{image} Other:")]
    assert len(scores.tables) == 2 and all(len(table) == 5 for table in scores.tables.values())
    assert scorer.configs == [PromptConfig(), PromptConfig("{image} Other:")]
    assert scores.stats.scored_pairs == 10 and scores.stats.forward_passes == 2
    assert scores.stats.cached_pairs == 0  # the repeated prompt is not looked up a second time
    # The score mode is applied afterwards: a mean-mode prompt reads the sum-mode table.
    again = _FakeScorer()
    _, scores = score_pairs(_pairs(), _spec(), [PromptConfig(score="mean")], tmp_path, scorer=again)
    assert again.batches == [] and scores.stats.cached_pairs == 5


def test_a_model_is_loaded_only_when_a_pair_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[int] = []
    spec = _spec()

    def load() -> tuple[Any, Any, Any]:
        loaded.append(1)
        return _FakeScorer(), None, None

    monkeypatch.setattr(spec, "load", load)
    _, scores = score_pairs(_pairs(), spec, [PromptConfig()], tmp_path)
    assert loaded == [1] and scores.stats.model_loaded and scores.stats.scored_pairs == 5
    _, scores = score_pairs(_pairs(), spec, [PromptConfig()], tmp_path)
    assert loaded == [1] and not scores.stats.model_loaded


def test_a_backend_that_is_not_a_pair_scorer_is_refused(tmp_path: Path) -> None:
    class _Encoder:
        pair_scorer = False

    with pytest.raises(ValueError, match="backend 'hf_vlm' loaded _Encoder, not a pair scorer"):
        score_pairs(_pairs(), _spec(), [PromptConfig()], tmp_path, scorer=_Encoder())
    with pytest.raises(ValueError, match="loaded object, not a pair scorer"):
        score_pairs(_pairs(), _spec(), [PromptConfig()], tmp_path, scorer=object())


@pytest.mark.parametrize("caption", ["", "   ", None])
def test_an_empty_caption_is_named(caption: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"caption {caption!r} paired with image 'a.png' is empty or not a string"):
        score_pairs([(_items()["a.png"], caption)], _spec(), [PromptConfig()], tmp_path, scorer=_FakeScorer())


@pytest.mark.parametrize("size", [0, -1])
def test_batch_size_must_be_positive(size: int, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=rf"^EncodeOptions option --batch-size \(batch_size\): .*got {size}"):
        score_pairs(_pairs(), _spec(), [PromptConfig()], tmp_path, batch_size=size, scorer=_FakeScorer())


def _with_bad_images(tmp_path: Path) -> list[tuple[ImageItem, str]]:
    items = _items()
    garbage = b"not an image at all"
    return [
        *_pairs(),
        (ImageItem("broken.png", data=garbage), "two circles"),
        (ImageItem("broken.png", data=garbage), "a red square"),
        (ImageItem("copy_of_broken.png", data=garbage), "one big star"),
        (ImageItem("gone.png", path=tmp_path / "gone.png"), "two circles"),
        (items["b.png"], "two circles"),
    ]


def test_an_image_that_cannot_be_read_or_decoded_stops_the_run_with_its_name(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="image 'gone.png' not found"):
        score_pairs(_with_bad_images(tmp_path), _spec(), [PromptConfig()], tmp_path, scorer=_FakeScorer())
    pairs = [p for p in _with_bad_images(tmp_path) if p[0].key != "gone.png"]
    with pytest.raises(ValueError) as info:
        score_pairs(pairs, _spec(), [PromptConfig()], tmp_path, scorer=_FakeScorer())
    assert str(info.value).startswith("image 'broken.png' cannot be decoded: UnidentifiedImageError: ")
    assert str(info.value).endswith(" (pass --skip-bad-images to count and skip it)")


def test_skipped_bad_images_are_counted_named_and_left_out(tmp_path: Path) -> None:
    scorer = _FakeScorer()
    names, scores = score_pairs(_with_bad_images(tmp_path), _spec(), [PromptConfig()], tmp_path, batch_size=2,
                                skip_bad_images=True, scorer=scorer)  # fmt: skip
    stats = scores.stats
    assert sorted(stats.bad_images) == ["broken.png", "copy_of_broken.png", "gone.png"]
    assert "not found" in stats.bad_images["gone.png"]
    assert stats.bad_images["broken.png"].startswith("image 'broken.png' cannot be decoded: UnidentifiedImageError: ")
    assert stats.bad_images["copy_of_broken.png"] == "same file content as an image that cannot be decoded"
    assert stats.to_dict()["skipped_bad_images"] == 3
    # Six good pairs (the five, and b.png with "two circles"); the broken content's three pairs are tried, not scored.
    assert (stats.requested_pairs, stats.unique_pairs, stats.unique_images, stats.unique_image_contents) == (12, 9, 6, 4)
    assert stats.scored_pairs == 6 and sum(len(b) for b in scorer.batches) == 6
    assert all(len(batch) <= 2 for batch in scorer.batches) and stats.forward_passes == len(scorer.batches)
    (name,) = names
    assert len(scores.tables[name]) == 6
    assert scores.image_rows == {"a.png": 0, "b.png": 1, "c.png": 2}
    assert scores.image_hashes == [_sha(_png(REDS[k])) for k in ("a.png", "b.png", "c.png")]
    assert (stats.encoded_images, stats.encoded_captions) == (3, 3)


# --- tables to blocks ------------------------------------------------------------------------------------------------


def test_block_scores_read_the_table_with_the_tasks_score_mode(tmp_path: Path) -> None:
    images = ["a.png", "b.png", "c.png"]
    captions = ["a red square", "two circles", "one big star"]
    items = _items()
    every_pair = [(items[key], caption) for key in images for caption in captions]
    names, scores = score_pairs(every_pair, _spec(), [PromptConfig()], tmp_path, scorer=_FakeScorer())
    (name,) = names
    scores.task_configs = {"summed": (name, PromptConfig()), "averaged": (name, PromptConfig(score="mean"))}
    index = np.array([[0, 2, 0, 1], [1, 0, 2, 1], [2, 1, 1, 0]])  # rows: u1, u2, v1, v2

    def expected(mode: str) -> np.ndarray:
        out = np.empty((3, 2, 2))
        for n, (u1, u2, v1, v2) in enumerate(index.tolist()):
            for a, u in enumerate((u1, u2)):
                for b, v in enumerate((v1, v2)):
                    total, words = _expected(REDS[images[u]], captions[v])
                    out[n, a, b] = total / words if mode == "mean" else total
        return out

    np.testing.assert_array_equal(scores.block_scores(SimpleNamespace(name="summed"), index), expected("sum"))
    np.testing.assert_array_equal(scores.block_scores(SimpleNamespace(name="averaged"), index), expected("mean"))
    assert not math.isclose(expected("sum")[0, 0, 0], expected("mean")[0, 0, 0])


def test_audit_is_unavailable_for_a_pair_scorer(tmp_path: Path) -> None:
    _, scores = score_pairs(_pairs(), _spec(), [PromptConfig()], tmp_path, scorer=_FakeScorer())
    assert scores.audit_unavailable() == {
        "available": False,
        "passed": None,
        "unavailable_reason": "backend hf_vlm scores (image, caption) pairs and has no image or caption embeddings for "
        "the additive probes; the cycle contrast still removes every image-only and caption-only term of its scores",
    }
    assert scores.pair_scorer is True


def test_cycle_pairs_are_the_four_pairs_of_each_test_cycle_of_every_seed() -> None:
    items = [ImageItem(f"{i}.png", data=b"x") for i in range(4)]
    texts = ["t0", "t1", "t2", "t3"]

    def rows(image_index: list[list[int]], caption_index: list[list[int]]) -> SimpleNamespace:
        return SimpleNamespace(image_items=items, captions=texts, image_index=np.array(image_index),
                               caption_index=np.array(caption_index))  # fmt: skip

    test0, test1 = rows([[0, 1]], [[2, 3]]), rows([[2, 3], [1, 0]], [[0, 1], [3, 2]])
    train = rows([[3, 3]], [[3, 3]])  # another split: not scored
    task = SimpleNamespace(task=SimpleNamespace(split="test"),
                           splits={0: {"test": test0, "train": train}, 1: {"test": test1, "train": train}})  # fmt: skip
    got = [(item.key, caption) for item, caption in vlm_scores.cycle_pairs([task])]
    expected = []
    for image_pairs, caption_pairs in (([[0, 1]], [[2, 3]]), ([[2, 3], [1, 0]], [[0, 1], [3, 2]])):
        for (a, b), (c, d) in zip(image_pairs, caption_pairs):
            expected += [(f"{a}.png", texts[c]), (f"{a}.png", texts[d]), (f"{b}.png", texts[c]), (f"{b}.png", texts[d])]
    assert got == expected
    assert vlm_scores.cycle_pairs([task, task]) == vlm_scores.cycle_pairs([task]) * 2


def test_a_corrupt_pair_score_shard_is_named_and_its_pairs_rescored(tmp_path: Path) -> None:
    score_pairs(_pairs(), _spec(), [PromptConfig()], tmp_path, batch_size=3, scorer=_FakeScorer())
    shards = sorted((tmp_path / "pair_scores").rglob("*.safetensors"))
    assert len(shards) == 2  # batches of 3 and 2 pairs
    shards[0].write_bytes(b"not a safetensors file")
    again = _FakeScorer()
    with pytest.warns(UserWarning, match="corrupt shard"):
        _, scores = score_pairs(_pairs(), _spec(), [PromptConfig()], tmp_path, batch_size=3, scorer=again)
    assert scores.stats.corrupt_shards == [str(shards[0])]
    assert scores.stats.to_dict()["corrupt_shards"] == [str(shards[0])]
    rescored = sum(len(batch) for batch in again.batches)
    assert rescored in (2, 3) and scores.stats.scored_pairs == rescored and scores.stats.cached_pairs == 5 - rescored


def test_the_default_batch_holds_sixteen_pairs(tmp_path: Path) -> None:
    items = [ImageItem(f"{i}.png", data=_png(i)) for i in range(5)]
    captions = [f"caption number {j}" for j in range(4)]
    scorer = _FakeScorer()
    _, scores = score_pairs([(item, c) for item in items for c in captions], _spec(), [PromptConfig()], tmp_path, scorer=scorer)
    assert [len(batch) for batch in scorer.batches] == [16, 4] and scores.stats.forward_passes == 2


def test_a_bad_image_inside_a_batch_does_not_end_the_batch(tmp_path: Path) -> None:
    good = _items()
    hashes = sorted(_sha(_png(red)) for red in REDS.values())
    # Bytes whose content hash sorts before every good image's: the bad pair comes first in the one batch.
    garbage = next(data for data in (b"junk %d" % i for i in range(1000)) if _sha(data) < hashes[0])
    pairs = [(ImageItem("broken.png", data=garbage), "two circles"), *[(good[k], "two circles") for k in REDS]]
    scorer = _FakeScorer()
    _, scores = score_pairs(pairs, _spec(), [PromptConfig()], tmp_path, batch_size=100, skip_bad_images=True, scorer=scorer)
    assert scorer.batches == [sorted(((REDS[k], "two circles") for k in REDS), key=lambda p: _sha(_png(p[0])))]
    assert scores.stats.scored_pairs == 3 and list(scores.stats.bad_images) == ["broken.png"]


def test_a_batch_of_one_pair_is_allowed(tmp_path: Path) -> None:
    scorer = _FakeScorer()
    _, scores = score_pairs(_pairs(), _spec(), [PromptConfig()], None, batch_size=1, scorer=scorer)
    assert [len(batch) for batch in scorer.batches] == [1] * 5 and scores.stats.forward_passes == 5


def test_cached_pairs_add_up_over_the_prompts(tmp_path: Path) -> None:
    configs = [PromptConfig(), PromptConfig("{image} Other:")]
    score_pairs(_pairs(), _spec(), configs, tmp_path, scorer=_FakeScorer())
    _, scores = score_pairs(_pairs(), _spec(), configs, tmp_path, scorer=_FakeScorer())
    assert scores.stats.cached_pairs == 10 and scores.stats.scored_pairs == 0
