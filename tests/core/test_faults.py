"""Fault injection: each numbered case of issue 13 replayed; the clear error, the intact data or the rebuild.

1. a raw --dataset-root changed after its families were cached -> rebuilt, and the reason said;
2. local weights replaced behind the same path -> new features, never the cached ones;
3. builds never destroy: foreign files refused, failed rebuilds leave the old build, shapes never
   overwrites a COCO layout;
4. bad annotations exclude their image and are counted by reason;
5. build_info.json validated with named errors, edited Parquet files refused by evaluation,
   an empty build refused unless --allow-empty;
6. named errors: decompression bombs (skippable), unknown tags and models, a bad task YAML,
   npz object arrays;
7. shard header inside the checksum, --seeds -1, single hit/miss counts, zero-byte images.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import types
from pathlib import Path

import numpy as np
import pytest
from tiny_models import TINY_OPEN_CLIP

from clip_cycles.cli import main

TASK = "cycles/shapes_strict_left_right"
FAMILY = "strict_left_right"


def _tree_digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` -> sha256 of its bytes (to prove nothing was modified)."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny_faults")
    (folder / "open_clip_config.json").write_text(json.dumps(TINY_OPEN_CLIP))
    return folder


# --------------------------------------------------------------------------- 1. stale raw-root builds


def test_1_changed_raw_root_is_rebuilt_and_says_why(shapes_world: Path, tmp_path: Path, caplog) -> None:
    from clip_cycles.data.folder.build import build_coco_folder
    from clip_cycles.data.sources.shapes_world import write_shapes_world
    from clip_cycles.tasks.loading import resolve_dataset_roots
    from clip_cycles.tasks.registry import get_task

    task = get_task(TASK)
    raw = tmp_path / "world"
    shutil.copytree(shapes_world, raw)
    cache = tmp_path / "datasets"
    caplog.set_level(logging.INFO, logger="clip_cycles")  # the build decisions are INFO notes
    first = resolve_dataset_roots([task], raw, cache)[TASK]
    assert "building" in caplog.text
    caplog.clear()
    test_file = first.root / "data" / FAMILY / "seed0" / "test.parquet"
    old_rows = test_file.read_bytes()
    resolve_dataset_roots([task], raw, cache)
    assert "building" not in caplog.text  # unchanged root: reused

    # Regenerate the world at the same path (what the issue did): a different world, same path.
    write_shapes_world(raw, n_images=300, seed=1, image_size=64, progress=False)
    second = resolve_dataset_roots([task], raw, cache)[TASK]
    err = caplog.text
    assert "raw root changed" in err and "annotations/instances_val2017.json changed" in err
    # The rebuilt folder equals a direct build from the new world (independent of the cache).
    direct, _ = build_coco_folder(raw, tmp_path / "direct", families=[FAMILY])
    rebuilt = second.root / "data" / FAMILY / "seed0" / "test.parquet"
    assert rebuilt.read_bytes() == (direct / "data" / FAMILY / "seed0" / "test.parquet").read_bytes()
    assert rebuilt.read_bytes() != old_rows


def test_1_same_size_same_mtime_annotation_edit_is_still_seen(shapes_world: Path, tmp_path: Path, caplog) -> None:
    from clip_cycles.tasks.loading import resolve_dataset_roots
    from clip_cycles.tasks.registry import get_task

    task = get_task(TASK)
    raw = tmp_path / "world"
    shutil.copytree(shapes_world, raw)
    cache = tmp_path / "datasets"
    resolve_dataset_roots([task], raw, cache)
    caplog.set_level(logging.INFO, logger="clip_cycles")
    path = raw / "annotations" / "captions_val2017.json"
    stat = path.stat()
    text = path.read_text()
    assert "circle" in text
    path.write_text(text.replace("circle", "CIRCLE", 1))  # same length
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    resolve_dataset_roots([task], raw, cache)
    assert "annotations/captions_val2017.json changed" in caplog.text


# --------------------------------------------------------------------------- 2. weights behind a path


def _save_weights(folder: Path, seed: int) -> None:
    import open_clip
    import torch
    from safetensors.torch import save_file

    weights = folder / "open_clip_model.safetensors"
    if weights.exists():
        weights.unlink()  # else local-dir loads the old weights instead of the seed's random init
    torch.manual_seed(seed)
    model = open_clip.create_model(f"local-dir:{folder}")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "open_clip_model.safetensors"))


def test_2_replaced_local_dir_weights_are_never_served_from_the_cache(tiny_dir: Path, tmp_path: Path) -> None:
    from clip_cycles.encoding.encoder import ModelSpec, encode

    folder = tmp_path / "model"
    shutil.copytree(tiny_dir, folder)
    _save_weights(folder, seed=1)
    spec = ModelSpec("open_clip", f"local-dir:{folder}", None, seed=0)
    captions = ["a red circle", "a blue square", "two green triangles"]
    cache = tmp_path / "cache"
    first = encode([], captions, spec, cache, num_workers=0)
    weights = folder / "open_clip_model.safetensors"
    stat = weights.stat()
    _save_weights(folder, seed=2)  # same size: only the content differs
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert weights.stat().st_size == stat.st_size and weights.stat().st_mtime_ns == stat.st_mtime_ns
    cached = encode([], captions, spec, cache, num_workers=0)
    fresh = encode([], captions, spec, None, num_workers=0)
    assert cached.stats.cached_captions == 0 and cached.stats.encoded_captions == 3
    np.testing.assert_allclose(cached.caption_features, fresh.caption_features, atol=1e-6)
    assert not np.allclose(cached.caption_features, first.caption_features, atol=1e-3)


def test_2_hf_folder_and_checkpoint_enter_the_key_by_content(tmp_path: Path) -> None:
    from clip_cycles.encoding.encoder import ModelSpec

    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    (hf / "model.safetensors").write_bytes(b"A" * 64)
    spec = ModelSpec("hf", str(hf), None)
    before = spec.description(tmp_path / "fp")
    assert before == spec.description(tmp_path / "fp")  # stable when nothing changed
    (hf / "model.safetensors").write_bytes(b"B" * 64)
    assert spec.description(tmp_path / "fp")["weights"] != before["weights"]
    checkpoint = tmp_path / "w.pt"
    checkpoint.write_bytes(b"x" * 32)
    ckpt = ModelSpec("open_clip", "ViT-B-32", str(checkpoint))
    key = ckpt.description(tmp_path / "fp")["weights"]["pretrained"]
    assert key["sha256"] == hashlib.sha256(b"x" * 32).hexdigest() and key["size"] == 32


# --------------------------------------------------------------------------- 3. builds never destroy


def test_3_out_with_foreign_files_is_refused_and_untouched(shapes_world: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "mine"
    (out / "data").mkdir(parents=True)
    (out / "README.md").write_text("my notes\n")
    (out / "data" / "table.csv").write_text("a,b\n1,2\n")
    before = _tree_digest(out)
    args = ["build", "coco", "--coco-root", str(shapes_world), "--out", str(out), "--families", FAMILY, "--min-cycles", "5"]
    assert main(args) != 0
    err = capsys.readouterr().err
    assert "README.md" in err and "data/table.csv" in err and "--overwrite" in err
    assert _tree_digest(out) == before
    assert not list(tmp_path.glob(".mine.*"))  # no staging left behind
    # --overwrite: the build is written, the foreign data file stays byte-identical.
    assert main(args + ["--overwrite"]) == 0
    assert (out / "data" / "table.csv").read_text() == "a,b\n1,2\n"
    assert (out / "data" / FAMILY / "seed0" / "test.parquet").is_file()
    assert "my notes" not in (out / "README.md").read_text()


def test_3_failed_rebuild_leaves_the_previous_build_intact(shapes_world: Path, tmp_path: Path, monkeypatch) -> None:
    from clip_cycles.data.folder import writer as dataset_folder
    from clip_cycles.data.folder.build import build_coco_folder

    out, _ = build_coco_folder(shapes_world, tmp_path / "built", families=[FAMILY], seeds=[0], min_cycles=5)
    before = _tree_digest(out)
    real = dataset_folder.write_parquet
    calls = []

    def failing(path, records, mode, root, *rest, **options):
        calls.append(path)
        if len(calls) == 5:  # halfway through the second seed's files
            raise OSError("disk full (injected)")
        return real(path, records, mode, root, *rest, **options)

    monkeypatch.setattr(dataset_folder, "write_parquet", failing)
    with pytest.raises(OSError, match="injected"):
        build_coco_folder(shapes_world, out, families=[FAMILY], seeds=[0, 1], min_cycles=5)
    assert len(calls) == 5
    assert _tree_digest(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["built"]  # staging removed


def test_3_rebuild_into_own_folder_replaces_it_whole(shapes_world: Path, tmp_path: Path) -> None:
    from clip_cycles.data.folder.build import build_coco_folder

    out, _ = build_coco_folder(shapes_world, tmp_path / "built", families=[FAMILY, "strict_size"], seeds=[0], min_cycles=5)
    build_coco_folder(shapes_world, out, families=[FAMILY], seeds=[0], min_cycles=5)  # no --overwrite needed
    assert not (out / "data" / "strict_size").exists()  # stale family gone: folder matches its card
    info = json.loads((out / "build_info.json").read_text())
    assert sorted(info["families"]) == [FAMILY]


def test_3_build_shapes_never_writes_into_a_coco_layout(write_coco, tmp_path: Path, capsys) -> None:
    root = write_coco(tmp_path / "coco", [(1, "dog", "animal")], [], [])
    (root / "val2017").mkdir()
    (root / "val2017" / "000000000001.jpg").write_bytes(b"\xff\xd8real photo")
    before = _tree_digest(root)
    assert main(["build", "shapes", "--out", str(root), "--n-images", "8"]) != 0
    err = capsys.readouterr().err
    assert "annotations/instances_train2017.json" in err and "never writes" in err
    assert _tree_digest(root) == before
    # A shapes world may be regenerated over itself (all its files are the project's own).
    world = tmp_path / "world"
    assert main(["build", "shapes", "--out", str(world), "--n-images", "8"]) == 0
    assert main(["build", "shapes", "--out", str(world), "--n-images", "12", "--seed", "3"]) == 0
    assert json.loads((world / "shapes_world.json").read_text())["n_images"] == 12


# --------------------------------------------------------------------------- 4. bad annotations


def test_4_unknown_category_and_non_finite_numbers_exclude_the_image(tmp_path: Path, write_coco) -> None:
    from clip_cycles.data.sources.annotations import load_coco_split

    cats = [(1, "bottle", "kitchen"), (2, "cup", "kitchen")]
    images = [
        {"id": 1, "objects": [(1, [10, 10, 20, 20]), (99, [50, 10, 20, 20])], "captions": ["one bottle"]},
        {"id": 2, "objects": [(1, [10, 10, 20, 20])], "captions": ["one bottle"]},
        {"id": 3, "objects": [(1, [10, 10, 20, 20])], "captions": ["one bottle"], "width": float("nan")},
        {"id": 4, "objects": [(2, [10, 10, float("nan"), 20])], "captions": ["a cup"]},
        {"id": 5, "objects": [(2, [10, 10, 20, 20])], "captions": ["a cup"], "height": 0},
    ]
    root = write_coco(tmp_path, cats, images, [])
    split = load_coco_split(root)
    assert sorted(split.images) == [2]  # only the image that can be described truthfully
    assert split.skipped["image_unknown_category"] == 1 and split.skipped["annotation_unknown_category"] == 1
    assert split.skipped["image_bad_size"] == 2
    assert split.skipped["box_not_finite"] == 1 and split.skipped["image_bad_box"] == 1
    assert split.skipped["caption_of_dropped_image"] == 4


# --------------------------------------------------------------------------- 5. folders verify themselves


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{}", "field 'source'"),
        ("[1, 2]", "top level must be a JSON object, got list"),
        ('{"source": "coco",\n "x": }', "malformed JSON at line 2"),
        (
            '{"source": "coco", "source_root": "/r", "mode": "reference", "families": {}, "files": {}}',
            "field 'families' lists no families",
        ),
        (
            '{"source": "coco", "source_root": "/r", "mode": "reference", "families": {"a": {"available": true, '
            '"counts": {"0": {"train": 1, "validation": 1}}}}, "files": {}}',
            "field 'families.a.counts.0.test' is missing",
        ),
        (
            '{"source": "coco", "source_root": "/r", "mode": "reference", "families": {"a": {"available": true, "counts": {}}}}',
            "field 'files' is missing",
        ),
    ],
)
def test_5_build_info_shape_errors_name_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    from clip_cycles.data.folder.writer import read_build_info

    (tmp_path / "build_info.json").write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        read_build_info(tmp_path)
    assert str(tmp_path / "build_info.json") in str(info.value)


def _rewrite(path: Path, change) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    pq.write_table(change(table), path)


@pytest.mark.parametrize("edit", ["remove", "duplicate", "caption"])
def test_5_evaluation_refuses_edited_parquet(shapes_cycles: Path, tiny_dir: Path, tmp_path: Path, edit: str, capsys) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from clip_cycles.data.folder.writer import read_build_info, verify_folder_files

    folder = tmp_path / "built"
    shutil.copytree(shapes_cycles, folder)
    path = folder / "data" / FAMILY / "seed0" / "test.parquet"
    n = pq.read_metadata(path).num_rows
    changes = {
        "remove": lambda t: t.slice(0, n - 1),
        "duplicate": lambda t: pa.concat_tables([t, t.slice(0, 1)]),
        "caption": lambda t: t.set_column(
            t.column_names.index("caption_0"), "caption_0", pa.array(["edited"] + t.column("caption_0").to_pylist()[1:])
        ),
    }
    _rewrite(path, changes[edit])
    problems = verify_folder_files(folder, read_build_info(folder))
    assert problems and all(p.startswith(f"{path}: ") for p in problems)
    expected = {
        "remove": [f"{n - 1} rows but build_info.json records {n}", "content differs"],
        "duplicate": [f"{n + 1} rows but build_info.json records {n}", "content differs"],
        "caption": ["content differs"],
    }[edit]
    assert len(problems) == len(expected) and all(e in p for e, p in zip(expected, problems))
    code = main(
        [
            "eval",
            "--task",
            TASK,
            "--model",
            f"local-dir:{tiny_dir}",
            "--dataset-root",
            str(folder),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-amp",
            "--num-workers",
            "0",
            "--output",
            "-",
        ]
    )
    err = capsys.readouterr().err
    assert code != 0 and str(path) in err and "refusing to score" in err


def test_5_build_with_no_available_family_fails_unless_allowed(shapes_world: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "empty"
    args = [
        "build",
        "coco",
        "--coco-root",
        str(shapes_world),
        "--out",
        str(out),
        "--families",
        FAMILY,
        "--seeds",
        "0",
        "--min-cycles",
        "100000",
    ]
    assert main(args) != 0
    assert "no family has an available split" in capsys.readouterr().err and not out.exists()
    assert main(args + ["--allow-empty"]) == 0
    info = json.loads((out / "build_info.json").read_text())
    assert info["families"][FAMILY]["available"] is False and info["files"] == {}


# --------------------------------------------------------------------------- 6. named errors


def _bomb_world(shapes_world: Path, tmp_path: Path) -> tuple[list, Path]:
    from PIL import Image

    from clip_cycles.data.sources.images import ImageItem

    names = sorted(p.relative_to(shapes_world).as_posix() for p in (shapes_world / "val2017").glob("*.jpg"))[:3]
    items = [ImageItem(key=n, path=shapes_world / n) for n in names]
    bomb = tmp_path / "bomb.png"
    Image.new("RGB", (400, 400)).save(bomb)  # 160000 px; the test lowers PIL's limit to 10000
    return items + [ImageItem(key="bomb.png", path=bomb)], bomb


def test_6_decompression_bomb_is_named_and_skippable(shapes_world: Path, tiny_dir: Path, tmp_path: Path, monkeypatch) -> None:
    from PIL import Image

    from clip_cycles.encoding.encoder import ModelSpec, encode

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10000)  # 64 px images pass, 400 px is over 2x the limit
    items, bomb = _bomb_world(shapes_world, tmp_path)
    spec = ModelSpec("open_clip", f"local-dir:{tiny_dir}", None)
    with pytest.raises(ValueError, match="decompression bomb") as info:
        encode(items, ["a circle"], spec, None, num_workers=0)
    assert str(bomb) in str(info.value) and "--skip-bad-images" in str(info.value)
    encoded = encode(items, ["a circle"], spec, None, num_workers=0, skip_bad_images=True)
    assert list(encoded.stats.bad_images) == ["bomb.png"] and len(encoded.image_rows) == 3


def test_6_decompression_bomb_in_clip_benchmark_blocks_is_named(shapes_world: Path, tmp_path: Path, monkeypatch) -> None:
    from PIL import Image

    from clip_cycles.integrations.clip_benchmark import CycleBlocksDataset

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10000)
    items, bomb = _bomb_world(shapes_world, tmp_path)
    from clip_cycles.data.folder.reader import CycleRows

    rows = CycleRows.from_pairs(["c0", "c1"], [(items[0], items[1]), (items[2], items[3])], [("a", "b"), ("c", "d")])
    dataset = CycleBlocksDataset(rows, None)
    assert len(dataset[0][0]) == 2  # ordinary images decode
    with pytest.raises(ValueError, match="decompression bomb") as info:
        dataset[1]
    assert str(bomb) in str(info.value)


def test_6_unknown_pretrained_tag_and_model_list_what_exists() -> None:
    from clip_cycles.encoding.backends import load_open_clip

    with pytest.raises(ValueError, match="unknown pretrained tag 'no_such_tag'") as info:
        load_open_clip("ViT-B-32", "no_such_tag")
    assert "openai" in str(info.value) and "laion2b_s34b_b79k" in str(info.value)
    with pytest.raises(ValueError, match="unknown OpenCLIP model 'ViT-B-33'; did you mean ViT-B-32, ") as info:
        load_open_clip("ViT-B-33", None)
    # Close names and how to list all, never the kilobytes of every name (issue 55).
    assert len(str(info.value)) < 400 and "open_clip.list_models()" in str(info.value)
    with pytest.raises(ValueError, match="unknown OpenCLIP model 'zzzz'; no OpenCLIP model has a name close to it"):
        load_open_clip("zzzz", None)


def test_6_unknown_model_through_clip_benchmark_is_a_sentence(shapes_cycles: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    from clip_cycles.commands.clip_benchmark import main as plugin_main

    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "cache"))
    with pytest.raises(SystemExit) as exit_info:
        plugin_main(
            [
                "eval",
                "--dataset",
                TASK,
                "--model",
                "ViT-Q-99",
                "--pretrained",
                "none",
                "--dataset_root",
                str(shapes_cycles),
                "--num_workers",
                "0",
                "--output",
                str(tmp_path / "r.json"),
            ]
        )
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unknown OpenCLIP model 'ViT-Q-99'; did you mean " in err and "Traceback" not in err
    assert "RN50x64-quickgelu" not in err  # not the whole list


def test_6_bad_task_yaml_disables_only_that_task(tmp_path: Path, monkeypatch, capsys) -> None:
    from clip_cycles.commands.clip_benchmark import patch_cli
    from clip_cycles.settings import TASKS_PATH_ENV
    from clip_cycles.tasks.registry import TaskRegistry, get_task

    (tmp_path / "cycles").mkdir()
    bad = tmp_path / "cycles" / "mine_bad.yaml"
    bad.write_text("task: cycles/mine_bad\ndataset_path: shapes\ndataset_kwargs: {config: strict_size\n")
    typo = tmp_path / "cycles" / "mine_typo.yaml"
    typo.write_text("task: cycles/mine_typo\ndataset_path: shapes\ndataset_kwargs: {config: strict_size}\ntest_split: tset\n")
    (tmp_path / "cycles" / "mine_good.yaml").write_text(
        "task: cycles/mine_good\ndataset_path: shapes\ndataset_kwargs: {config: strict_size}\nmetric_list: [cycle_acc]\n"
    )
    monkeypatch.setenv(TASKS_PATH_ENV, str(tmp_path))
    registry = TaskRegistry.default()
    assert "cycles/mine_good" in registry.names() and TASK in registry.names()
    with pytest.raises(ValueError, match=r"mine_bad\.yaml line \d+ column \d+: not valid YAML"):
        get_task("cycles/mine_bad")
    with pytest.raises(ValueError, match=r"mine_typo\.yaml line 4: field 'test_split'"):
        get_task("cycles/mine_typo")
    # The plugin activates, with every shipped collection, and names the broken files.
    fake = types.SimpleNamespace(
        run=lambda a: 0, build_dataset=lambda *a, **k: None, get_dataset_collate_fn=lambda n: None, dataset_collection={}
    )
    with pytest.warns(UserWarning) as warned:
        patch_cli(fake)
    assert fake._clip_cycles_patched and "cycles/coco_all" in fake.dataset_collection
    said = "\n".join(str(w.message) for w in warned)
    assert "task cycles/mine_bad is unavailable" in said and str(bad) in said and str(typo) in said
    args = types.SimpleNamespace(dataset="cycles/mine_typo", task="auto")
    with pytest.raises(SystemExit):
        fake.run(args)
    assert "mine_typo.yaml line 4" in capsys.readouterr().err


def test_6_npz_with_object_arrays_names_the_file(tmp_path: Path) -> None:
    from clip_cycles.encoding.backends import read_features_file

    path = tmp_path / "features.npz"
    np.savez(
        path,
        image_features=np.ones((1, 2)),
        caption_features=np.ones((1, 2)),
        image_keys=np.array(["a.jpg"], dtype=object),
        caption_keys=np.array(["x"]),
    )
    with pytest.raises(ValueError, match="holds Python objects") as info:
        read_features_file(path)
    assert str(path) in str(info.value)


# --------------------------------------------------------------------------- 7. smaller cases


def test_7_swapped_items_in_a_shard_header_are_detected(tmp_path: Path) -> None:
    from safetensors import safe_open
    from safetensors.numpy import save_file

    from clip_cycles.encoding.feature_cache import FeatureNamespace

    ns = FeatureNamespace(tmp_path, {"kind": "text"})
    features = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    shard = ns.put(["h1", "h2"], features)
    with safe_open(str(shard), framework="numpy") as handle:
        meta = handle.metadata()
        stored = handle.get_tensor("features")
    meta["items"] = json.dumps(["h2", "h1"])  # swap the header, keep the checksum
    save_file({"features": stored}, str(shard), metadata=meta)
    fresh = FeatureNamespace(tmp_path, {"kind": "text"})
    with pytest.warns(UserWarning, match="corrupt shard"):
        found, missing = fresh.lookup(["h1", "h2"])
    assert found == {} and missing == ["h1", "h2"] and fresh.stats.corrupt_shards == [str(shard)]


def test_7_negative_seeds_are_refused(shapes_world: Path, shapes_cycles: Path, tmp_path: Path, capsys) -> None:
    from clip_cycles.data.folder.build import build_coco_folder
    from clip_cycles.encoding.encoder import ModelSpec
    from clip_cycles.evaluation.zero_shot import evaluate

    with pytest.raises(SystemExit):
        main(["build", "coco", "--coco-root", str(shapes_world), "--out", str(tmp_path / "o"), "--seeds", "-1"])
    assert "-1 is negative" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^BuildConfig option --seeds \(seeds\[0\]\): .* got -1"):
        build_coco_folder(shapes_world, tmp_path / "o", families=[FAMILY], seeds=[-1])
    with pytest.raises(ValueError, match=r"^BuildConfig option --seeds \(seeds\[0\]\): .* got -1"):
        evaluate([TASK], ModelSpec("open_clip", "ViT-B-32", None), shapes_cycles, tmp_path, seeds=[-1])
    assert not (tmp_path / "o").exists()


def test_7_cache_hits_and_misses_count_each_item_once(shapes_world: Path, tiny_dir: Path, tmp_path: Path) -> None:
    from clip_cycles.data.sources.images import ImageItem
    from clip_cycles.encoding.encoder import ModelSpec, encode

    names = sorted(p.relative_to(shapes_world).as_posix() for p in (shapes_world / "val2017").glob("*.jpg"))[:4]
    items = [ImageItem(key=n, path=shapes_world / n) for n in names]
    captions = ["a circle", "a square", "a circle"]
    unique = len({hashlib.sha256((shapes_world / n).read_bytes()).hexdigest() for n in names}) + len(set(captions))
    spec = ModelSpec("open_clip", f"local-dir:{tiny_dir}", None)
    cold = encode(items, captions, spec, tmp_path / "cache", num_workers=0)
    assert (cold.stats.cache["hits"], cold.stats.cache["misses"]) == (0, unique)
    warm = encode(items, captions, spec, tmp_path / "cache", num_workers=0)
    assert (warm.stats.cache["hits"], warm.stats.cache["misses"]) == (unique, 0)


def test_7_zero_byte_image_is_never_embedded(shapes_world: Path, shapes_cycles: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from clip_cycles.data.folder.build import build_coco_folder
    from clip_cycles.data.sources.images import ImageItem

    world = tmp_path / "world"
    shutil.copytree(shapes_world, world)
    used = pq.read_table(shapes_cycles / "data" / FAMILY / "seed0" / "test.parquet").column("image_0")[0].as_py()
    (world / used).write_bytes(b"")
    out = tmp_path / "sc"
    with pytest.raises(ValueError, match="is empty") as info:
        build_coco_folder(world, out, families=[FAMILY], seeds=[0], min_cycles=5, self_contained=True)
    assert str(world / used) in str(info.value) and not out.exists()
    with pytest.raises(ValueError, match="empty"):
        ImageItem(key="x.jpg", data=b"").read_bytes()
