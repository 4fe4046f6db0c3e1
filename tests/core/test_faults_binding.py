"""Fault injection, issue 23 (second half): every cached or referenced result bound to what produced it.

1. a reference-mode folder whose raw root was regenerated (or one image replaced) is refused before
   scoring; an unchanged root, a copy of the folder and an old folder without a fingerprint still read;
   the error for an edited copy names the copy;
2. feature-cache shards record their namespace and are refused (a miss, rewritten) in any other;
3. cached additive-audit reports carry a checksum: an edited report is recomputed;
4. ``splits --synthetic`` refuses ``--embeddings`` (and the other flags it would ignore);
5. ``eval --output`` and ``audit-benchmark --out`` are checked before any work;
6. a symlinked ``--out`` rebuilds its target; stale staging folders of dead builds are removed;
7. named errors for the environment (full disk, unusable cache roots), a checked folder format
   version, finite float flags and JSON without NaN/Infinity.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clip_cycles.cli import main
from clip_cycles.registry import Registry

TASK = "cycles/shapes_strict_left_right"
FAMILY = "strict_left_right"
WORLD = {"n_images": 300, "image_size": 64, "progress": False}


def _world_and_folder(tmp_path: Path, self_contained: bool = False) -> tuple[Path, Path]:
    """A private shapes world (seed 0) and a reference-mode (or self-contained) folder built from it."""
    from clip_cycles.data.folder.build import build_coco_folder
    from clip_cycles.data.sources.shapes_world import write_shapes_world

    world = write_shapes_world(tmp_path / "world", seed=0, **WORLD)
    folder, _ = build_coco_folder(
        world, tmp_path / "built", families=[FAMILY], seeds=[0], min_cycles=5, self_contained=self_contained
    )
    return world, folder


def _eval_args(tiny: str, root: Path, cache: Path, output: str, tasks: list[str] | None = None) -> list[str]:
    return ["eval", "--task", *(tasks or [TASK]), "--model-type", "open_clip", "--model", tiny, "--pretrained", "none",
            "--dataset-root", str(root), "--cache-dir", str(cache), "--seeds", "0", "--device", "cpu",
            "--num-workers", "0", "--output", output]  # fmt: skip


# --------------------------------------------------------------------------- 1. source fingerprints


def test_1_regenerated_raw_root_is_refused_before_scoring(tmp_path: Path, tiny: str, capsys, monkeypatch) -> None:
    from clip_cycles.data.sources.shapes_world import write_shapes_world
    from clip_cycles.tasks.loading import resolve_dataset_roots
    from clip_cycles.tasks.registry import get_task

    world, folder = _world_and_folder(tmp_path)
    info = json.loads((folder / "build_info.json").read_text())
    recorded = info["source_fingerprint"]
    # The record is the root's own content: every annotation file by sha256, both image folders by listing.
    for name in ("shapes_world.json", "annotations/instances_val2017.json", "annotations/captions_val2017.json"):
        assert recorded["annotations"][name]["sha256"] == __import__("hashlib").sha256((world / name).read_bytes()).hexdigest()
    assert recorded["images"]["val2017"]["files"] == len(list((world / "val2017").iterdir()))
    assert recorded["kind"] == "shapes"
    resolve_dataset_roots([get_task(TASK)], folder, tmp_path / "datasets")  # unchanged root: served

    write_shapes_world(world, seed=1, **WORLD)  # regenerated at the same path: other images, other captions
    with pytest.raises(ValueError) as info_error:
        resolve_dataset_roots([get_task(TASK)], folder, tmp_path / "datasets")
    message = str(info_error.value)
    assert f"raw root {world}" in message and "changed since the build" in message
    assert "annotations/instances_val2017.json changed" in message and "val2017/ listing changed" in message
    assert f"--out {folder}" in message  # how to rebuild it

    # The command: refused with a sentence, before anything is encoded, and no result is written.
    from clip_cycles.encoding import task_encoding

    def no_encoding(*args, **kwargs):
        raise AssertionError("images were encoded for a folder whose raw root changed")

    monkeypatch.setattr(task_encoding, "encode_sharded", no_encoding)
    capsys.readouterr()
    assert main(_eval_args(tiny, folder, tmp_path / "cache", str(tmp_path / "out_{dataset}.json"))) != 0
    assert "changed since the build" in capsys.readouterr().err
    assert not list(tmp_path.glob("out_*.json"))


def test_1_one_replaced_image_is_seen_by_its_size_and_mtime(tmp_path: Path) -> None:
    from clip_cycles.data.folder.reader import open_built_folder

    world, folder = _world_and_folder(tmp_path)
    open_built_folder(folder, hash_cache=tmp_path / "fp")
    victim = sorted((world / "val2017").iterdir())[0]
    victim.write_bytes(victim.read_bytes() + b"\x00")  # another image behind the same name
    with pytest.raises(ValueError, match="val2017/ listing changed"):
        open_built_folder(folder, hash_cache=tmp_path / "fp")


def test_1_copies_old_folders_and_self_contained_folders_still_read(tmp_path: Path, shapes_cycles: Path) -> None:
    from clip_cycles.data.folder.reader import open_built_folder
    from clip_cycles.data.sources.shapes_world import write_shapes_world

    copy = tmp_path / "copy"
    shutil.copytree(shapes_cycles, copy)
    assert open_built_folder(copy).info["source_fingerprint"]["kind"] == "shapes"  # same raw root: fine
    # A folder built before fingerprints were recorded reads as before (it cannot be checked).
    info = json.loads((copy / "build_info.json").read_text())
    del info["source_fingerprint"], info["format_version"]
    (copy / "build_info.json").write_text(json.dumps(info))
    assert "source_fingerprint" not in open_built_folder(copy).info
    # Self-contained: the fingerprint is provenance; its images are its own, so a changed root does not matter.
    world, contained = _world_and_folder(tmp_path / "sc", self_contained=True)
    assert json.loads((contained / "build_info.json").read_text())["source_fingerprint"]["kind"] == "shapes"
    write_shapes_world(world, seed=1, **WORLD)
    open_built_folder(contained)


def test_1_the_error_for_an_edited_copy_names_the_copy(tmp_path: Path, shapes_cycles: Path) -> None:
    from clip_cycles.data.folder.reader import open_built_folder

    copy = tmp_path / "my copy"
    shutil.copytree(shapes_cycles, copy)
    victim = copy / "data" / FAMILY / "seed0" / "test.parquet"
    victim.write_bytes(victim.read_bytes()[:-8] + b"\x00" * 8)
    with pytest.raises(ValueError) as info:
        open_built_folder(copy)
    message = str(info.value)
    hint = message.split("Rebuild it:")[1]
    assert f"--out '{copy}'" in hint and str(shapes_cycles) not in hint


# --------------------------------------------------------------------------- 2. shard namespaces


def test_2_a_shard_copied_from_another_namespace_is_a_miss_and_rewritten(tmp_path: Path) -> None:
    from clip_cycles.encoding.feature_cache import FeatureNamespace

    mine = FeatureNamespace(tmp_path, {"model": "a"})
    other = FeatureNamespace(tmp_path, {"model": "b"})
    rng = np.random.default_rng(0)
    theirs = rng.standard_normal((2, 4)).astype(np.float32)
    shard = other.put(["h1", "h2"], theirs)
    assert FeatureNamespace(tmp_path, {"model": "b"}).lookup(["h1", "h2"])[1] == []  # at home: served
    mine._ensure_directory()
    stray = mine.directory / shard.name
    shutil.copy(shard, stray)
    fresh = FeatureNamespace(tmp_path, {"model": "a"})
    with pytest.warns(UserWarning, match=f"belongs to namespace {other.name}, not {mine.name}"):
        found, missing = fresh.lookup(["h1", "h2"])
    assert found == {} and missing == ["h1", "h2"] and fresh.stats.foreign_shards == [str(stray)]
    assert not stray.exists()
    ours = rng.standard_normal((2, 4)).astype(np.float32)
    fresh.put(["h1", "h2"], ours)  # rewritten under this namespace
    again = FeatureNamespace(tmp_path, {"model": "a"})
    np.testing.assert_array_equal(again.lookup(["h1"])[0]["h1"], ours[0])


def test_2_a_shard_whose_namespace_field_was_edited_fails_its_checksum(tmp_path: Path) -> None:
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    from clip_cycles.encoding.feature_cache import FeatureNamespace

    other = FeatureNamespace(tmp_path, {"model": "b"})
    shard = other.put(["h1"], np.ones((1, 4), np.float32))
    mine = FeatureNamespace(tmp_path, {"model": "a"})
    mine._ensure_directory()
    with safe_open(str(shard), framework="numpy") as handle:
        meta = dict(handle.metadata())
    meta["namespace"] = mine.name  # relabelled, checksum left as it was
    save_file(load_file(str(shard)), str(mine.directory / shard.name), metadata=meta)
    fresh = FeatureNamespace(tmp_path, {"model": "a"})
    with pytest.warns(UserWarning, match="checksum mismatch"):
        assert fresh.lookup(["h1"])[1] == ["h1"]


def test_2_shards_without_a_namespace_are_refused(tmp_path: Path) -> None:
    from safetensors.numpy import save

    from clip_cycles.encoding.feature_cache import FeatureNamespace, shard_checksum

    mine = FeatureNamespace(tmp_path, {"model": "a"})
    mine._ensure_directory()
    features = np.ones((1, 4), np.float32)
    legacy = {"items": json.dumps(["h1"]), "checksum": shard_checksum(["h1"], features)}  # the old format
    (mine.directory / "old.safetensors").write_bytes(save({"features": features}, metadata=legacy))
    with pytest.warns(UserWarning, match="belongs to no namespace"):
        assert mine.lookup(["h1"])[1] == ["h1"]


# --------------------------------------------------------------------------- 3. audit checksums


def test_3_an_edited_cached_audit_report_is_recomputed(shapes_cycles: Path, tiny: str, tmp_path: Path) -> None:
    from clip_cycles.encoding.encoder import ModelSpec
    from clip_cycles.evaluation.zero_shot import evaluate

    spec = ModelSpec("open_clip", tiny, None, seed=0)
    cache = tmp_path / "cache"
    first, _ = evaluate([TASK], spec, shapes_cycles, cache, num_workers=0, seeds=[0])
    (report_path,) = sorted((cache / "audits").glob("*.json"))
    stored = json.loads(report_path.read_text())
    assert len(stored["checksum"]) == 64
    audit = first[0]["metrics"]["additive_audit"]
    # The report as computed without any cache, for comparison.
    uncached, _ = evaluate([TASK], spec, shapes_cycles, None, num_workers=0, seeds=[0], use_cache=False)
    assert uncached[0]["metrics"]["additive_audit"] == audit

    stored["report"]["passed"] = not stored["report"]["passed"]
    stored["report"]["edited"] = "by hand"
    report_path.write_text(json.dumps(stored))
    with pytest.warns(UserWarning, match="fails its checksum"):
        second, _ = evaluate([TASK], spec, shapes_cycles, cache, num_workers=0, seeds=[0])
    assert second[0]["metrics"]["additive_audit"] == audit
    assert "edited" not in json.dumps(second[0]) and "edited" not in report_path.read_text()
    third, _ = evaluate([TASK], spec, shapes_cycles, cache, num_workers=0, seeds=[0])  # valid file: served quietly
    assert third[0]["metrics"]["additive_audit"] == audit


# --------------------------------------------------------------------------- 4. splits --synthetic


def test_4_splits_synthetic_refuses_embeddings_it_would_ignore(tmp_path: Path, capsys) -> None:
    from clip_cycles.attributes.attribute_experiments import SplitInputs, load_inputs

    npz = tmp_path / "f.npz"
    np.savez(npz, concepts=np.array(["a", "b"]), embeddings=np.eye(2, dtype=np.float32))
    code = main(["splits", "--synthetic", "small", "--embeddings", f"x={npz}", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code != 0 and "--embeddings would be ignored" in err and "--things-root" in err
    assert not (tmp_path / "out").exists()
    data, embeddings, _ = load_inputs(SplitInputs(synthetic="small"))  # valid: the world's own embeddings
    assert set(embeddings) == {"synthetic"} and embeddings["synthetic"].shape[0] == len(data.concepts)


# --------------------------------------------------------------------------- 5. outputs checked first


@pytest.fixture()
def no_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any runner call fails the test: the refusal must come before the work."""
    from clip_cycles.evaluation import runners

    def no_work(*args, **kwargs):
        raise AssertionError("the evaluation ran before --output was checked")

    idle: Registry[runners.Runner] = Registry("output type")
    for name, runner in runners.RUNNERS.items():
        idle.register(name, dataclasses.replace(runner, target=no_work))
    monkeypatch.setattr(runners, "RUNNERS", idle)


def test_5_a_template_that_maps_several_results_to_one_file_is_refused(
    shapes_cycles: Path, tiny: str, tmp_path: Path, capsys, no_evaluation
) -> None:
    tasks = [TASK, "cycles/shapes_strict_above_below"]
    assert main(_eval_args(tiny, shapes_cycles, tmp_path / "c", str(tmp_path / "{task}.json"), tasks)) != 0
    err = capsys.readouterr().err
    assert "writes 2 results to the same file" in err and str(tmp_path / "cycles.json") in err and "{dataset}" in err
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.parametrize("case", ["unknown field", "existing folder", "under a file", "bad brace"])
def test_5_bad_output_paths_are_named_before_any_encoding(
    case: str, shapes_cycles: Path, tiny: str, tmp_path: Path, capsys, no_evaluation
) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "plain").write_text("x")
    output, expected = {
        "unknown field": (str(tmp_path / "{datset}.json"), "unknown field {datset}"),
        "existing folder": (str(tmp_path / "folder"), "is an existing folder"),
        "under a file": (str(tmp_path / "plain" / "{dataset}.json"), f"{tmp_path / 'plain'} is a file"),
        "bad brace": (str(tmp_path / "{dataset.json"), "is not a valid template"),
    }[case]
    assert main(_eval_args(tiny, shapes_cycles, tmp_path / "c", output)) != 0
    assert expected in capsys.readouterr().err


def test_5_valid_output_plans_pass(tmp_path: Path) -> None:
    from clip_cycles.results import check_output_plan, output_path

    tasks = [TASK, "cycles/shapes_strict_above_below"]
    template = str(tmp_path / "new" / "{dataset}_{task}.json")
    plan = {t: output_path(template, t, "m", None) for t in tasks}
    assert sorted(plan.values()) == sorted(str(tmp_path / "new" / f"{t.replace('/', '_')}_cycles.json") for t in tasks)
    check_output_plan(plan, template)  # distinct files in a folder still to be made
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "cycles_shapes_strict_left_right_cycles.json").write_text("{}")
    check_output_plan(plan, template)  # an earlier result file is replaced, as before


def test_5_audit_benchmark_out_that_is_a_file_is_refused_first(tmp_path: Path, capsys, monkeypatch) -> None:
    from clip_cycles.commands import audit_benchmark as benchmark_audit_command

    def no_work(*args, **kwargs):
        raise AssertionError("the audit ran before --out was checked")

    monkeypatch.setattr(benchmark_audit_command, "audit_benchmark", no_work)
    existing = tmp_path / "report.json"
    existing.write_text("{}")
    assert main(["audit-benchmark", "winoground", "--root", str(tmp_path), "--out", str(existing)]) != 0
    assert f"--out {existing} is an existing file" in capsys.readouterr().err
    assert existing.read_text() == "{}"


# --------------------------------------------------------------------------- 6. builds: links and staging


def test_6_symlinked_out_rebuilds_its_target(shapes_world: Path, tmp_path: Path) -> None:
    common = ["--coco-root", str(shapes_world), "--seeds", "0", "--min-cycles", "5"]
    target = tmp_path / "builds" / "v1"
    target.parent.mkdir()
    assert main(["build", "coco", *common, "--out", str(target), "--families", FAMILY]) == 0
    link = tmp_path / "current"
    link.symlink_to(target, target_is_directory=True)
    assert main(["build", "coco", *common, "--out", str(link), "--families", "strict_above_below"]) == 0
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert sorted(json.loads((target / "build_info.json").read_text())["families"]) == ["strict_above_below"]
    leftovers = [p.name for p in [*tmp_path.iterdir(), *target.parent.iterdir()] if p.name.startswith(".")]
    assert leftovers == []
    # build shapes through a link: the world behind the link is rewritten, the link stays.
    world = tmp_path / "worlds" / "w"
    world.parent.mkdir()
    assert main(["build", "shapes", "--out", str(world), "--n-images", "40", "--image-size", "64"]) == 0
    world_link = tmp_path / "world_link"
    world_link.symlink_to(world, target_is_directory=True)
    assert main(["build", "shapes", "--out", str(world_link), "--n-images", "60", "--image-size", "64"]) == 0
    assert world_link.is_symlink() and len(list((world / "val2017").iterdir())) + len(list((world / "train2017").iterdir())) == 60
    assert [p.name for p in [*tmp_path.iterdir(), *world.parent.iterdir()] if p.name.startswith(".")] == []


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_6_stale_staging_of_dead_builds_is_removed_never_a_live_ones(shapes_world: Path, tmp_path: Path) -> None:
    out = tmp_path / "built"
    dead = tmp_path / f".built.building-{_dead_pid()}"
    (dead / "data").mkdir(parents=True)
    (dead / "data" / "half.parquet").write_bytes(b"x" * 100)
    live_process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".built.building-{live_process.pid}"
        live.mkdir()
        other = tmp_path / f".other.building-{_dead_pid()}"  # another --out's: not this build's business
        other.mkdir()
        args = ["build", "coco", "--coco-root", str(shapes_world), "--out", str(out), "--families", FAMILY,
                "--seeds", "0", "--min-cycles", "5"]  # fmt: skip
        assert main(args) == 0
        assert not dead.exists() and live.is_dir() and other.is_dir()
    finally:
        live_process.kill()
        live_process.wait()


def test_6_data_cache_builds_remove_their_stale_staging_too(shapes_world: Path, tmp_path: Path) -> None:
    from clip_cycles.fingerprints import digest
    from clip_cycles.tasks.loading import resolve_dataset_roots
    from clip_cycles.tasks.registry import get_task

    cache = tmp_path / "datasets"
    target = cache / f"shapes-coco-{digest(str(shapes_world.resolve()), 16)}"  # where a raw root's families are cached
    dead = target.with_name(f"{target.name}.building-{_dead_pid()}")
    dead.mkdir(parents=True)
    folder = resolve_dataset_roots([get_task(TASK)], shapes_world, cache)[TASK]
    assert folder.root == target and not dead.exists()


def test_6_shapes_builds_remove_their_stale_staging_too(tmp_path: Path) -> None:
    dead = tmp_path / f".w.building-{_dead_pid()}"
    dead.mkdir()
    assert main(["build", "shapes", "--out", str(tmp_path / "w"), "--n-images", "40", "--image-size", "64"]) == 0
    assert not dead.exists()


# --------------------------------------------------------------------------- 7. the environment


def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_7_a_full_disk_during_build_is_a_sentence_and_the_old_build_stays(
    shapes_world: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    from clip_cycles.data.folder import writer as dataset_folder

    out = tmp_path / "built"
    args = ["build", "coco", "--coco-root", str(shapes_world), "--out", str(out), "--families", FAMILY, "--seeds", "0",
            "--min-cycles", "5"]  # fmt: skip
    assert main(args) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    monkeypatch.setattr(dataset_folder, "write_parquet", _disk_full)
    assert main(args) != 0
    err = capsys.readouterr().err
    assert "no space left on the device" in err and "choose another --out" in err and "Traceback" not in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_7_a_full_disk_during_build_shapes_is_a_sentence(tmp_path: Path, capsys, monkeypatch) -> None:
    from clip_cycles.data.sources import shapes_world

    args = ["build", "shapes", "--out", str(tmp_path / "w"), "--n-images", "40", "--image-size", "64"]
    assert main(args) == 0
    before = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "w").rglob("*"))
    monkeypatch.setattr(shapes_world, "_write_world", _disk_full)
    capsys.readouterr()
    assert main(args) != 0
    err = capsys.readouterr().err
    assert "no space left on the device" in err and "choose another --out" in err
    assert sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "w").rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_7_a_full_disk_during_a_feature_cache_write_is_named(tmp_path: Path, monkeypatch) -> None:
    from clip_cycles.encoding import feature_cache
    from clip_cycles.outputs import OutputError

    namespace = feature_cache.FeatureNamespace(tmp_path, {"model": "a"})
    namespace._ensure_directory()
    monkeypatch.setattr(feature_cache, "atomic_write_bytes", _disk_full)
    with pytest.raises(ValueError, match="no space left on the device while writing .*--cache-dir") as info:
        namespace.put(["h1"], np.ones((1, 4), np.float32))
    assert isinstance(info.value, OutputError) and info.value.errno == errno.ENOSPC
    with pytest.raises(OutputError, match="no space left on the device while writing .*models"):
        feature_cache.write_manifest(tmp_path, {"model": "a"}, {"image": "p"})


def test_7_a_cache_root_that_is_a_regular_file_is_named(
    tmp_path: Path, tiny: str, shapes_cycles: Path, capsys, monkeypatch
) -> None:
    from clip_cycles import settings

    plain = tmp_path / "cache.txt"
    plain.write_text("not a folder")
    monkeypatch.setenv(settings.CACHE_ENV, str(plain))
    with pytest.raises(ValueError, match=f"CLIP_CYCLES_CACHE={plain}.*is a regular file"):
        settings.resolve_cache_dir()
    with pytest.raises(ValueError, match="is a regular file"):
        settings.resolve_cache_dir(plain / "sub")  # a folder under it cannot be made either
    args = _eval_args(tiny, shapes_cycles, tmp_path, str(tmp_path / "{dataset}.json"))
    cache_at = args.index("--cache-dir")
    del args[cache_at : cache_at + 2]
    assert main(args) != 0
    assert "is a regular file, not a folder" in capsys.readouterr().err
    monkeypatch.setenv(settings.CACHE_ENV, str(tmp_path / "fresh"))  # valid: a folder to be made
    assert settings.resolve_cache_dir() == tmp_path / "fresh"


def test_7_an_empty_read_only_cache_is_named_a_populated_one_is_read(tmp_path: Path, monkeypatch) -> None:
    from clip_cycles import settings

    empty, full = tmp_path / "empty", tmp_path / "full"
    empty.mkdir()
    (full / "features").mkdir(parents=True)
    read_only = {str(empty), str(full)}
    real_access = os.access
    empty.chmod(0o555)
    full.chmod(0o555)
    try:
        # Tests may run as root, which writes anywhere: the read-only bit is then reported by os.access only.
        monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) in read_only else real_access(p, mode))
        with pytest.raises(ValueError, match="is empty and read-only.*--no-cache"):
            settings.resolve_cache_dir(empty)
        with pytest.raises(ValueError, match="cannot be created"):
            settings.resolve_cache_dir(empty / "sub")
        assert settings.resolve_cache_dir(full) == full  # a shared read-only cache can still be read
    finally:
        empty.chmod(0o755)
        full.chmod(0o755)


def test_7_folder_format_version_is_checked(tmp_path: Path, shapes_cycles: Path) -> None:
    from clip_cycles.data.folder.writer import FORMAT_VERSION, read_build_info

    copy = tmp_path / "copy"
    shutil.copytree(shapes_cycles, copy)
    info = json.loads((copy / "build_info.json").read_text())
    assert info["format_version"] == FORMAT_VERSION == 1
    for version, expected in ((FORMAT_VERSION + 1, "format version 2 was written by a newer clip_cycles.*version 1"),
                              ("1", "field 'format_version': .*got '1'"), (0, "field 'format_version': .*got 0")):  # fmt: skip
        info["format_version"] = version
        (copy / "build_info.json").write_text(json.dumps(info))
        with pytest.raises(ValueError, match=expected):
            read_build_info(copy)
    del info["format_version"]  # an old folder: the current format
    (copy / "build_info.json").write_text(json.dumps(info))
    assert read_build_info(copy)["source"] == "coco"


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400"])
def test_7_non_finite_float_flags_are_refused(value: str, shapes_world: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["build", "coco", "--coco-root", str(shapes_world), "--out", str(tmp_path / "b"), f"--size-ratio={value}"])
    assert "not a finite number" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_7_non_finite_thresholds_are_refused_by_the_library_before_the_build(shapes_world: Path, tmp_path: Path) -> None:
    from clip_cycles.data.folder.build import build_coco_folder, build_gqa_folder

    with pytest.raises(
        ValueError, match=r"BuildConfig option --size-ratio \(size_ratio\): must be a finite area ratio >= 1, got inf"
    ):
        build_coco_folder(shapes_world, tmp_path / "c", families=[FAMILY], size_ratio=float("inf"))
    with pytest.raises(ValueError, match=r"BuildConfig option --validation-fraction \(validation_fraction\): .*got nan"):
        build_gqa_folder(shapes_world, tmp_path / "g", validation_fraction=float("nan"))
    assert not (tmp_path / "c").exists() and not (tmp_path / "g").exists()


def test_7_json_writing_never_emits_infinity_or_nan(tmp_path: Path) -> None:
    from clip_cycles.fingerprints import canonical_json
    from clip_cycles.results import write_json

    with pytest.raises(ValueError, match=r"field metrics\.per_seed\.0\.ratio is inf"):
        write_json({"metrics": {"per_seed": {"0": {"ratio": float("inf"), "n": 3}}}}, tmp_path / "r.json")
    with pytest.raises(ValueError, match=r"field values\[1\] is nan"):
        write_json({"values": [1.0, float("nan")]}, tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()
    with pytest.raises(ValueError):
        canonical_json({"size_ratio": float("inf")})
    write_json({"metrics": {"ratio": 1.5, "none": None}}, tmp_path / "r.json")  # finite values: written
    assert json.loads((tmp_path / "r.json").read_text()) == {"metrics": {"ratio": 1.5, "none": None}}
