"""The hf_vlm backend on a tiny random-init LLaVA saved by the test, and the lmms-eval bridge."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tiny_vision_models import write_tiny_vlm

TASK = "cycles/shapes_box_left_right"


@pytest.fixture(scope="module")
def vlm(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm") / "vlm"))


@pytest.fixture(scope="module")
def native(vlm: str, shapes_cycles: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path]:
    from clip_cycles.encoding.encoder import ModelSpec
    from clip_cycles.evaluation.zero_shot import evaluate

    cache = tmp_path_factory.mktemp("vlm_cache")
    records, scores = evaluate([TASK], ModelSpec("hf_vlm", vlm, None), shapes_cycles, cache, seeds=[0], batch_size=64)
    return records, scores, cache


@pytest.fixture(scope="module")
def plain(vlm: str) -> tuple[Any, Any]:
    """The tiny VLM and its processor loaded with plain transformers."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    return AutoModelForImageTextToText.from_pretrained(vlm).eval(), AutoProcessor.from_pretrained(vlm)


N_CHECKED = 8


def _blocks(
    plain: tuple[Any, Any], shapes_cycles: Path, seed: int, prefix: str = "", prompt: str = "{image} Caption:"
) -> tuple[np.ndarray, np.ndarray]:
    """Blocks of the first cycles of a seed, scored pair by pair with plain transformers (an independent loop)."""
    import torch
    from PIL import Image

    from clip_cycles.data.folder.reader import open_built_folder, read_cycle_rows
    from clip_cycles.tasks.registry import get_task

    model, processor = plain
    rows = read_cycle_rows(open_built_folder(shapes_cycles), get_task(TASK), seed, "test")
    blocks, prefix_terms = [], []
    for (a, b), (c0, c1) in [(rows.image_pair(i), rows.caption_pair(i)) for i in range(min(N_CHECKED, len(rows)))]:
        block, terms = [], []
        for item in (a, b):
            image = Image.open(item.path).convert("RGB")
            row, trow = [], []
            for caption in (c0, c1):
                text = prompt.replace("{image}", "<image>") + " " + prefix + caption
                inputs = processor(text=[text], images=[image], return_tensors="pt")
                ids = inputs["input_ids"][0]
                n_caption = len((prefix + caption).split())
                n_prefix = len(prefix.split())
                with torch.no_grad():
                    logp = torch.log_softmax(model(**inputs).logits[0].double(), -1)
                picked = [float(logp[t - 1, ids[t]]) for t in range(len(ids) - n_caption, len(ids))]
                row.append(sum(picked))
                trow.append(sum(picked[:n_prefix]))
            block.append(row)
            terms.append(trow)
        blocks.append(block)
        prefix_terms.append(terms)
    return np.asarray(blocks), np.asarray(prefix_terms)


def test_scores_are_caption_log_likelihoods_and_cycle_acc_matches(native: Any, plain: Any, shapes_cycles: Path) -> None:
    from clip_cycles.algebra.contrast import cycle_acc, deltas_from_blocks
    from clip_cycles.data.folder.reader import open_built_folder, read_cycle_rows
    from clip_cycles.encoding.task_encoding import cycle_index
    from clip_cycles.tasks.registry import get_task

    records, scores, _ = native
    metrics = records[0]["metrics"]
    task = get_task(TASK)
    expected, _ = _blocks(plain, shapes_cycles, 0)
    index, _ = cycle_index(read_cycle_rows(open_built_folder(shapes_cycles), task, 0, "test"), scores)
    got = scores.block_scores(task, index[:N_CHECKED])
    np.testing.assert_allclose(got, expected, atol=1e-4)
    # CycleAcc of the record is CycleAcc of all blocks of the seed, computed here by hand.
    all_blocks = scores.block_scores(task, index)
    assert metrics["per_seed"]["0"]["cycle_acc"] == cycle_acc(deltas_from_blocks(all_blocks), task.tie_tolerance)
    assert metrics["additive_audit"]["available"] is False
    assert scores.stats.unique_pairs < scores.stats.requested_pairs  # pairs shared by cycles are scored once


def test_contrast_cancels_a_planted_caption_prior_and_a_shared_prefix(plain: Any, vlm: str, shapes_cycles: Path) -> None:
    from clip_cycles.algebra.contrast import deltas_from_blocks
    from clip_cycles.algebra.winoground import winoground_scores
    from clip_cycles.encoding.vlm_scores import PromptConfig

    blocks, _ = _blocks(plain, shapes_cycles, 0)
    # A caption-only term (a caption prior log p(c)) that strongly favours caption 0 of
    # every cycle: Winoground's text score collapses to 0, no Delta moves.
    prior = np.zeros((blocks.shape[0], 2))
    prior[:, 0] = 1000.0
    planted = blocks + prior[:, None, :]
    assert winoground_scores(planted).text_acc == 0.0
    np.testing.assert_allclose(deltas_from_blocks(planted), deltas_from_blocks(blocks), atol=1e-9)
    rng = np.random.default_rng(0)
    noisy = blocks + rng.normal(0, 50, size=(blocks.shape[0], 1, 2))  # any caption-only term
    np.testing.assert_allclose(deltas_from_blocks(noisy), deltas_from_blocks(blocks), atol=1e-9)
    # The same prefix before every caption: its log-likelihood given the image is an
    # image-only term, so through the hf_vlm scorer log p(prefix + c | x) has the Deltas of
    # log p(c | x, prompt + prefix).
    _, terms = _blocks(plain, shapes_cycles, 0, prefix="a very clearly ")
    assert np.abs(terms).min() > 0.1  # the prefix term is not negligible
    np.testing.assert_allclose(terms[:, :, 0], terms[:, :, 1], atol=1e-9)  # it depends on the image only
    prefixed = _scorer_blocks(vlm, shapes_cycles, PromptConfig("{image} Caption:"), "a very clearly ")
    moved = _scorer_blocks(vlm, shapes_cycles, PromptConfig("{image} Caption: a very clearly"), "")
    assert np.abs(prefixed - moved).min() > 0.1
    np.testing.assert_allclose(deltas_from_blocks(prefixed), deltas_from_blocks(moved), atol=1e-4)


def _scorer_blocks(vlm: str, shapes_cycles: Path, config: Any, prefix: str) -> np.ndarray:
    """Blocks of the first cycles of seed 0 from the hf_vlm scorer, captions with ``prefix``."""
    from PIL import Image

    from clip_cycles.data.folder.reader import open_built_folder, read_cycle_rows
    from clip_cycles.encoding.vlm_scores import load_hf_vlm
    from clip_cycles.tasks.registry import get_task

    scorer, _, _ = load_hf_vlm(vlm)
    rows = read_cycle_rows(open_built_folder(shapes_cycles), get_task(TASK), 0, "test")
    images, captions = [], []
    for pair, caps in [(rows.image_pair(i), rows.caption_pair(i)) for i in range(min(N_CHECKED, len(rows)))]:
        for item in pair:
            for caption in caps:
                images.append(Image.open(item.path).convert("RGB"))
                captions.append(prefix + caption)
    return scorer.score_batch(images, captions, config)[:, 0].reshape(-1, 2, 2)


def test_cache_is_keyed_by_content_not_path(native: Any, vlm: str, shapes_cycles: Path, tmp_path: Path) -> None:
    import shutil

    from clip_cycles.encoding.encoder import ModelSpec
    from clip_cycles.evaluation.zero_shot import evaluate

    records, _, cache = native
    moved = tmp_path / "moved_vlm"
    shutil.copytree(vlm, moved)
    again, scores = evaluate([TASK], ModelSpec("hf_vlm", str(moved), None), shapes_cycles, cache, seeds=[0])
    assert scores.stats.scored_pairs == 0 and not scores.stats.model_loaded
    assert again[0]["metrics"]["cycle_acc"] == records[0]["metrics"]["cycle_acc"]
    # Changing a weight changes the key: everything is scored again.
    from safetensors.torch import load_file, save_file

    state = load_file(str(moved / "model.safetensors"))
    name = sorted(state)[0]
    state[name] = state[name] + 0.5
    save_file(state, str(moved / "model.safetensors"), metadata={"format": "pt"})
    _, rescored = evaluate([TASK], ModelSpec("hf_vlm", str(moved), None), shapes_cycles, cache, seeds=[0])
    assert rescored.stats.scored_pairs == rescored.stats.unique_pairs > 0


def test_image_only_and_pair_backends_refuse_what_they_cannot_do(vlm: str, shapes_cycles: Path, tmp_path: Path) -> None:
    from clip_cycles.data.sources.images import ImageItem
    from clip_cycles.encoding.encoder import ModelSpec, encode

    with pytest.raises(ValueError, match="scores .image, caption. pairs and has no embeddings"):
        encode([ImageItem("x", data=b"1")], [], ModelSpec("hf_vlm", vlm, None))


def test_lmms_eval_bridge_gives_the_native_cycle_acc(
    native: Any, vlm: str, shapes_cycles: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip(
        "lmms_eval", reason="lmms-eval is the optional extra [lmms] (not in [test]); install it to run the bridge's own test"
    )
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.tasks import TaskManager

    from clip_cycles.integrations.lmms_bridge import ClipCyclesVLM, write_lmms_tasks

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    folder = tmp_path / "lmms_tasks"
    names = write_lmms_tasks(shapes_cycles, folder, [TASK], seeds=[0])
    assert names == ["clip_cycles_box_left_right_seed0", "clip_cycles_box_left_right"]
    model = ClipCyclesVLM(pretrained=vlm, batch_size=64)
    out = simple_evaluate(model=model, tasks=names[:1], task_manager=TaskManager(include_path=str(folder)), log_samples=False)
    records, _, _ = native
    per_seed = records[0]["metrics"]["per_seed"]
    for seed in (0,):
        result = out["results"][f"clip_cycles_box_left_right_seed{seed}"]
        assert result["n_cycles,none"] == per_seed[str(seed)]["n_cycles"]
        assert result["cycle_acc,none"] == per_seed[str(seed)]["cycle_acc"]
        assert result["text_acc,none"] == per_seed[str(seed)]["text_acc"]
    json.dumps(out["results"], default=str)


def test_pair_score_cache_round_trips_float64_and_drops_corrupt_shards(tmp_path: Path) -> None:
    from clip_cycles.encoding.vlm_scores import PairScoreCache

    description = {"model": {"content_sha256": "abc"}, "prompt": "{image} Caption:"}
    scores = np.array([[-12.345678901234567, 5.0], [-0.1, 1.0]])
    PairScoreCache(tmp_path, description).put(["p1", "p2"], scores)
    PairScoreCache(tmp_path, description).put(["p3"], np.array([[-3.0, 2.0]]))
    table = PairScoreCache(tmp_path, description).load()
    assert table["p1"].tolist() == scores[0].tolist() and table["p3"].tolist() == [-3.0, 2.0]
    assert PairScoreCache(tmp_path, {**description, "prompt": "other {image}"}).load() == {}
    shard = sorted((tmp_path / "pair_scores").rglob("*.safetensors"))[0]
    from safetensors import safe_open

    with safe_open(str(shard), framework="numpy") as handle:
        lost = set(json.loads(handle.metadata()["items"]))
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # flip a bit of the scores: the checksum no longer matches
    shard.write_bytes(bytes(data))
    cache = PairScoreCache(tmp_path, description)
    with pytest.warns(UserWarning, match="corrupt shard"):
        table = cache.load()
    assert cache.corrupt == [str(shard)] and not shard.exists()
    assert set(table) == {"p1", "p2", "p3"} - lost  # the intact shard is kept


def test_prompt_settings_are_validated_with_the_file_and_field(tmp_path: Path) -> None:
    from clip_cycles.encoding.vlm_scores import PromptConfig, prompt_config_from_yaml

    assert prompt_config_from_yaml({}, "t.yaml") == PromptConfig("{image} Caption:", "sum")
    data = {
        "lmms_eval_specific_kwargs": {"default": {"prompt": "A {image} B:", "score": "mean"}, "hf_vlm": {"prompt": "C {image}:"}}
    }
    assert prompt_config_from_yaml(data, "t.yaml") == PromptConfig("C {image}:", "mean")
    with pytest.raises(ValueError, match=r"t.yaml: field lmms_eval_specific_kwargs: .*must contain \{image\}"):
        prompt_config_from_yaml({"lmms_eval_specific_kwargs": {"default": {"prompt": "no image"}}}, "t.yaml")
    with pytest.raises(ValueError, match=r"PromptConfig option score: 'max' is not one of \['sum', 'mean'\]"):
        prompt_config_from_yaml({"lmms_eval_specific_kwargs": {"default": {"score": "max"}}}, "t.yaml")


def test_sharded_pair_scoring_rank_0_completes_and_sums_the_ranks(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    """Under a (stand-in) two-rank group each rank scores its shard of the unique pairs; rank 0 then scores the rest."""
    caplog.set_level(logging.INFO, logger="clip_cycles")
    from dataclasses import dataclass

    from clip_cycles.data.folder.reader import CycleRows
    from clip_cycles.data.sources.images import ImageItem
    from clip_cycles.encoding import distributed, vlm_scores
    from clip_cycles.encoding.distributed import DistContext
    from clip_cycles.encoding.encoder import ModelSpec

    @dataclass
    class Task:
        name: str = "cycles/mine"
        split: str = "test"
        path: str = "no-such-file.yaml"  # the default prompt

    @dataclass
    class Loaded:
        task: Task
        splits: dict

    a, b, c = (ImageItem(k, data=k.encode()) for k in ("a", "b", "c"))
    rows = CycleRows.from_pairs(["0", "1"], [(a, b), (a, c)], [("x", "y"), ("x", "z")])
    data = [Loaded(Task(), {0: {"test": rows}})]  # 8 pairs, 7 of them unique
    scored: list[list[tuple[str, str]]] = []

    def fake_score_pairs(pairs, spec, configs, cache_dir, batch_size, skip_bad_images):
        pairs = list(pairs)
        scored.append(sorted((i.key, t) for i, t in pairs))
        stats = vlm_scores.PairScoreStats(scored_pairs=len(set((i.key, t) for i, t in pairs)))
        return {"default": configs[0]}, vlm_scores.PairScores({}, {}, [], [], {}, {}, stats)

    other = {
        "rank": 1,
        "pairs": 3,
        "scored_pairs": 3,
        "cached_pairs": 0,
        "skipped_bad_images": 0,
        "bad_images": {"c": "unreadable"},
    }
    monkeypatch.setattr(vlm_scores, "score_pairs", fake_score_pairs)
    monkeypatch.setattr(vlm_scores, "current", lambda: DistContext(rank=0, world_size=2, backend="gloo"))
    monkeypatch.setattr(distributed, "barrier", lambda ctx=None: None)
    monkeypatch.setattr(distributed, "gather_to_main", lambda obj, ctx=None: [obj, other])
    result = vlm_scores.score_tasks(data, ModelSpec("hf_vlm", "vlm", None), "/shared")
    unique = [("a", "x"), ("a", "y"), ("a", "z"), ("b", "x"), ("b", "y"), ("c", "x"), ("c", "z")]
    assert scored[0] == unique[0::2]  # rank 0's shard: every second of the sorted unique pairs
    # Rank 0's completing pass: every pair of the cycles (duplicates kept) whose image no rank found bad.
    assert scored[1] == sorted([("a", "x"), ("a", "y"), ("b", "x"), ("b", "y"), ("a", "x"), ("a", "z")])
    assert result.stats.bad_images == {"c": "unreadable"}
    # The completing pass (5 unique pairs, as nothing was really cached) plus both ranks' shards (4 + 3).
    assert result.stats.scored_pairs == 5 + 4 + 3
    assert [r["rank"] for r in result.stats.ranks] == [0, 1]
    assert result.task_configs == {"cycles/mine": ("default", vlm_scores.PromptConfig())}
    assert "rank 0 had to score 5 pairs" in caplog.text
