"""Task runners: paper-1 experiments and attribute splits through the task registry, the
clip_benchmark plugin (in-process, ``python -m clip_cycles.commands.clip_benchmark``'s ``main``),
``clip-cycles eval`` and ``clip-cycles splits``.

Fixtures: the session's ``shapes_cycles`` folder, a THINGS-format root written here
(120 categorised concepts in 6 supercategories, 4 without a category, one without
images; 32 px JPEGs coloured by supercategory; pairs JSON with a duplicate and an
unknown concept; the wide-format TSV with quoted definitions) and a tiny random
open_clip model from a local config. Quick settings come from task YAMLs added
through ``CLIP_CYCLES_TASKS_PATH``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from record_vocabulary import assert_one_vocabulary
from things_runner_root import CATEGORIES, write_things_root
from tiny_models import TINY_OPEN_CLIP

from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.evaluation.zero_shot import checked_record
from clip_cycles.results import IDENTITY_FIELDS, MODEL_SOURCE_FIELDS, read_result
from clip_cycles.settings import TASKS_PATH_ENV
from clip_cycles.tasks.registry import AttributeTaskSpec, GroupSpec, TaskRegistry, TaskSpec, get_task, shipped_tasks_dir

TINY = TINY_OPEN_CLIP
# clip_benchmark's keys and where the weights came from (these runs use local weights or features).
RESULT_KEYS = {"dataset", "model", "pretrained", "task", "metrics", "language", *MODEL_SOURCE_FIELDS}
#: Every record kind names the item set it scored (issue 51); experiments also each family's.
SCORED_KEYS = RESULT_KEYS | set(IDENTITY_FIELDS)


@pytest.fixture(scope="module")
def things_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("things")
    write_things_root(root)
    return root


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "open_clip_config.json").write_text(json.dumps(TINY))
    return f"local-dir:{folder}"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private feature cache and an empty extra task directory (returned) for quick YAMLs."""
    tasks = tmp_path / "extra_tasks"
    tasks.mkdir()
    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(TASKS_PATH_ENV, str(tasks))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # clip_benchmark's main reads (and we set) sys.argv
    return tasks


def _yaml(root: Path, name: str, text: str) -> None:
    path = root / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def clip_benchmark(dataset: str, model: str, root: Path, out: Path, *extra: str) -> dict[str, Any]:
    """``clip_benchmark eval`` with the plugin, in this process; returns the JSON it wrote."""
    from clip_cycles.commands.clip_benchmark import main

    template = str(out / "{dataset}_{task}.json")
    main(
        [
            "eval",
            "--dataset",
            dataset,
            "--model",
            model,
            "--pretrained",
            "none",
            "--dataset_root",
            str(root),
            "--no_amp",
            "--num_workers",
            "0",
            "--batch_size",
            "64",
            "--output",
            template,
            *extra,
        ]
    )
    files = sorted(out.glob(dataset.replace("/", "_") + "_*.json"))
    assert len(files) == 1, files
    return read_result(files[0])


# --------------------------------------------------------------------------- registry


def test_derived_namespaces_and_shipped_attribute_tasks(tmp_path: Path) -> None:
    registry = TaskRegistry([shipped_tasks_dir()])
    probe = registry.get("cycles_probe/coco_strict_size")
    base = registry.get("cycles/coco_strict_size")
    assert isinstance(probe, TaskSpec) and isinstance(base, TaskSpec)
    assert (probe.output_type, probe.config, probe.source, probe.seeds) == ("cycle_probe", "strict_size", "coco", base.seeds)
    assert probe.metric_names[0] == "cycle_acc" and not probe.experiment_kwargs
    group = registry.get("cycles_oe/shapes_all")
    assert isinstance(group, GroupSpec)
    assert {t.output_type for t in registry.expand(["cycles_oe/shapes_all"])} == {"cycle_oe"}
    transfer = registry.get("cycles_transfer/coco_all")
    assert isinstance(transfer, TaskSpec) and transfer.output_type == "cycle_transfer"
    assert list(transfer.members) == [t.name for t in registry.expand(["cycles/coco_all"])]
    with pytest.raises(ValueError, match="cycles_transfer/coco_strict_size"):
        registry.get("cycles_transfer/coco_strict_size")  # transfer is over collections only

    strategies = ("random", "llm", "similarity", "clustering", "supercategory")
    assert [t.name for t in registry.expand(["attributes/things_all"])] == [f"attributes/things_{s}" for s in strategies]
    clustering = registry.get("attributes/things_clustering")
    assert isinstance(clustering, AttributeTaskSpec)
    assert (clustering.strategy, clustering.k, clustering.min_concepts, clustering.embedding) == ("clustering", 100, 10, "image")
    assert set(clustering.metric_names) >= {"f1_selectivity", "cs"}

    # An explicit YAML of a derived name wins over the derivation.
    _yaml(
        tmp_path / "cycles_probe",
        "coco_strict_size",
        "task: cycles_probe/coco_strict_size\ndataset_path: coco\ndataset_kwargs: {config: strict_size, seeds: [1]}\n"
        "output_type: cycle_probe\nmetric_list: [cycle_acc]\nexperiment_kwargs: {epochs: 3}\n",
    )
    mine = TaskRegistry([tmp_path, shipped_tasks_dir()]).get("cycles_probe/coco_strict_size")
    assert isinstance(mine, TaskSpec) and mine.seeds == (1,) and mine.experiment_kwargs == {"epochs": 3}


ATTRIBUTE_YAML = """task: attributes/{name}
dataset_path: things
dataset_kwargs: {{strategy: clustering, k: 20, seeds: [0], embedding: definition}}
output_type: attribute_splits
metric_list: [f1_selectivity, cs]
experiment_kwargs: {{solver: sklearn}}
"""


@pytest.mark.parametrize(
    ("replace", "field"),
    [
        (("strategy: clustering, k: 20", "strategy: random, k: 20"), "dataset_kwargs.k"),
        (("k: 20", "k: 1"), "dataset_kwargs.k"),
        (("embedding: definition", "embedding: sound"), "dataset_kwargs.embedding"),
        (("seeds: [0]", "seeds: [0, 0]"), "dataset_kwargs.seeds"),
        (("solver: sklearn", "epochs: 3"), "experiment_kwargs.epochs"),
        (("[f1_selectivity, cs]", "[cycle_acc]"), "metric_list[0].metric"),
        (("dataset_path: things", "dataset_path: coco"), "dataset_path"),
        (("seeds: [0]", "seeds: [0], colour: red"), "dataset_kwargs.colour"),
    ],
)
def test_attribute_schema_errors_name_file_and_field(tmp_path: Path, replace: tuple[str, str], field: str) -> None:
    _yaml(tmp_path / "attributes", "ok", ATTRIBUTE_YAML.format(name="ok"))
    spec = TaskRegistry([tmp_path]).get("attributes/ok")
    assert isinstance(spec, AttributeTaskSpec) and spec.embedding == "definition"
    path = tmp_path / "attributes" / "bad.yaml"
    _yaml(tmp_path / "attributes", "bad", ATTRIBUTE_YAML.format(name="bad").replace(*replace))
    with pytest.raises(ValueError) as info:
        TaskRegistry([tmp_path]).get("attributes/bad")
    assert str(path) in str(info.value) and repr(field) in str(info.value)


def test_unknown_experiment_setting_names_file_and_field(tmp_path: Path) -> None:
    from clip_cycles.evaluation.experiment_runners import experiment_settings
    from clip_cycles.experiments.probes import ProbeSettings

    _yaml(
        tmp_path / "cycles_probe",
        "odd",
        "task: cycles_probe/odd\ndataset_path: shapes\n"
        "dataset_kwargs: {config: strict_size, seeds: [2]}\noutput_type: cycle_probe\nmetric_list: [cycle_acc]\n"
        "experiment_kwargs: {epochs: 2, ranks: [1, 4], learning_rate: 0.1}\n",
    )
    spec = TaskRegistry([tmp_path]).get("cycles_probe/odd")
    assert isinstance(spec, TaskSpec)
    with pytest.raises(ValueError, match=r"odd\.yaml: field 'experiment_kwargs\.learning_rate'"):
        experiment_settings(ProbeSettings, spec, [2])
    good = dataclasses.replace(spec, experiment_kwargs={"epochs": 2, "ranks": [1, 4]})
    settings = experiment_settings(ProbeSettings, good, [2])
    assert (settings.epochs, settings.ranks, settings.seeds) == (2, (1, 4), (2,))


# --------------------------------------------------------------------------- plugin: paper-1 experiments


def test_probe_and_oe_through_clip_benchmark(shapes_cycles: Path, tiny_model: str, env: Path, tmp_path: Path) -> None:
    quick = "experiment_kwargs: {{{kwargs}}}\n"
    _yaml(
        env / "cycles_probe",
        "shapes_strict_left_right",
        "task: cycles_probe/shapes_strict_left_right\ndataset_path: shapes\n"
        "dataset_kwargs: {config: strict_left_right, seeds: [0, 1]}\noutput_type: cycle_probe\n"
        "metric_list: [cycle_acc, zero_shot_cycle_acc]\n"
        # No min_cycles: the minimum the folder was built with (5), not the default 20.
        + quick.format(kwargs="epochs: 2, ranks: [1, 4], full_heads: [diagonal], audit_epochs: 1"),
    )
    _yaml(
        env / "cycles",
        "quick_left_right",
        "task: cycles/quick_left_right\ndataset_path: shapes\ndataset_kwargs: {config: strict_left_right, seeds: [0, 1]}\n"
        "metric_list: [cycle_acc]\n",
    )
    _yaml(
        env / "cycles_oe",
        "shapes_object_variant",
        "task: cycles_oe/shapes_object_variant\ndataset_path: shapes\n"
        "dataset_kwargs: {config: object_variant, seeds: [0]}\noutput_type: cycle_oe\n"
        "metric_list: [cycle_acc, shortcut_oe_cycle_acc, text_only_cycle_acc]\n"
        + quick.format(kwargs="epochs: 1, rank: 4, text_only_epochs: 2, min_cycles: 5"),
    )

    probe = clip_benchmark("cycles_probe/shapes_strict_left_right", tiny_model, shapes_cycles, tmp_path)
    zero = clip_benchmark("cycles/quick_left_right", tiny_model, shapes_cycles, tmp_path)
    assert set(probe) == SCORED_KEYS | {"item_sets"} and len(probe["items_sha256"]) == 64
    for record in (probe, zero):
        assert_one_vocabulary(record)
    assert (probe["dataset"], probe["task"], probe["pretrained"]) == (
        "cycles_probe/shapes_strict_left_right",
        "cycle_probe",
        "none",
    )
    m = probe["metrics"]
    assert m["available"] is True and m["seeds"] == [0, 1] and m["probe_rank"] == 4
    assert 0.0 <= m["cycle_acc"] <= 1.0 and m["cycle_acc"] == m["low_rank_r4_cycle_acc"]
    assert set(m["probe"]["settings"]["ranks"]) == {1, 4} and m["probe"]["settings"]["epochs"] == 2
    assert m["probe"]["settings"]["min_cycles"] == json.loads((shapes_cycles / "build_info.json").read_text())["min_cycles"]
    assert m["additive_audit_passed"] is True
    # Same model, same test cycles: the probe record's zero-shot score is the cycles/ task's CycleAcc.
    assert m["zero_shot_cycle_acc"] == pytest.approx(zero["metrics"]["cycle_acc"], abs=1e-12)
    assert zero["task"] == "cycles"

    oe = clip_benchmark("cycles_oe/shapes_object_variant", tiny_model, shapes_cycles, tmp_path)
    m = oe["metrics"]
    assert_one_vocabulary(oe)
    assert (oe["task"], m["available"], m["seeds"]) == ("cycle_oe", True, [0])
    for key in ("cycle_acc", "shortcut_oe_cycle_acc", "four_entry_bce_cycle_acc", "text_only_oe_val_acc"):
        assert 0.0 <= m[key] <= 1.0, key
    # A text-only score cannot order the swaps of an exact cycle: every cycle ties.
    assert m["text_only_cycle_acc"] == 0.5
    assert m["oe"]["marker_caption_example"].endswith(": <caption>")


def test_transfer_through_clip_cycles_eval(shapes_cycles: Path, tiny_model: str, env: Path, tmp_path: Path) -> None:
    from clip_cycles.cli import main as cli_main

    families = ["strict_left_right", "box_left_right", "object_variant"]
    members = ", ".join(f"cycles/shapes_{f}" for f in families)
    _yaml(
        env / "cycles_transfer",
        "shapes_three",
        f"task: cycles_transfer/shapes_three\ndataset_path: shapes\ndataset_kwargs: {{tasks: [{members}], seeds: [0]}}\n"
        "output_type: cycle_transfer\nmetric_list: [pearson, in_family_cycle_acc]\n"
        "experiment_kwargs: {epochs: 2, rank: 4, min_cycles: 5}\n",
    )
    out = tmp_path / "out"
    assert cli_main(
        [
            "eval",
            "--task",
            "cycles_transfer/shapes_three",
            "--model",
            tiny_model,
            "--pretrained",
            "none",
            "--dataset-root",
            str(shapes_cycles),
            "--num-workers",
            "0",
            "--output",
            str(out / "{dataset}_{task}.json"),
        ]
    ) in (0, None)
    record = read_result(out / "cycles_transfer_shapes_three_cycle_transfer.json")
    assert set(record) - {"source"} == SCORED_KEYS - {"source"} | {"item_sets"} and record["task"] == "cycle_transfer"
    assert len(record["items_sha256"]) == 64 and len(record["item_sets"]) > 1
    assert_one_vocabulary(record)
    m = record["metrics"]
    grid = m["transfer"]
    assert grid["families"] == [f"shapes_{f}" for f in families] and m["n_families"] == 3 and m["n_pairs"] == 6
    alignment = np.array(grid["per_seed"]["0"]["alignment"])
    assert np.allclose(alignment, alignment.T) and np.allclose(np.diag(alignment), 1.0)
    transfer = np.array(grid["per_seed"]["0"]["transfer"])
    assert m["in_family_cycle_acc"] == pytest.approx(np.diag(transfer).mean())
    assert m["cross_family_cycle_acc"] == pytest.approx(transfer[~np.eye(3, dtype=bool)].mean())


def test_unknown_task_suggests_the_nearest_ones(
    env: Path, tiny_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, near in (("cycles_probe/no_such_family", None), ("attributes/things_nothing", "attributes/things_")):
        with pytest.raises(SystemExit) as stop:
            clip_benchmark(name, tiny_model, tmp_path, tmp_path)
        assert stop.value.code == 2
        message = capsys.readouterr().err
        assert f"unknown task {name!r}" in message
        # No dump of every name: the nearest ones of the same namespace (if any), and the way to list them.
        assert ("did you mean" in message) == (
            near is not None
        ) and "List the tasks with `clip-cycles tasks [PATTERN]`" in message
        assert near is None or f"did you mean {near}" in message
        assert "cycles/shapes_strict_left_right" not in message
    with pytest.raises(SystemExit):
        clip_benchmark("cycles_probe/shapes_strict_left_rihgt", tiny_model, tmp_path, tmp_path)
    assert "did you mean cycles_probe/shapes_strict_left_right, cycles/shapes_strict_left_right" in capsys.readouterr().err
    # Image-caption selection is only for zero-shot cycle tasks.
    with pytest.raises(SystemExit):
        clip_benchmark("attributes/things_random", tiny_model, tmp_path, tmp_path, "--task", "image_caption_selection")
    assert "attribute_splits tasks support --task auto only" in capsys.readouterr().err


# --------------------------------------------------------------------------- attribute splits


def test_attribute_clustering_through_clip_benchmark(things_root: Path, tiny_model: str, env: Path, tmp_path: Path) -> None:
    first = clip_benchmark("attributes/things_clustering", tiny_model, things_root, tmp_path / "a")
    assert set(first) == SCORED_KEYS and first["split"] == "folds"
    assert_one_vocabulary(first)
    assert (first["dataset"], first["task"], first["model"]) == ("attributes/things_clustering", "attribute_splits", tiny_model)
    m = first["metrics"]
    assert m["available"] is True and m["strategy"] == "clustering" and m["k"] == 100 and m["seeds"] == [0, 1, 2]
    assert math.isfinite(m["f1_selectivity"]) and -1.0 <= m["cs"] <= 1.0 and m["cs_sd"] >= 0.0
    assert sorted(m["per_seed"]) == ["0", "1", "2"]
    assert m["f1_selectivity"] == pytest.approx(np.mean([s["f1_selectivity"] for s in m["per_seed"].values()]))
    # 6 category traits + 3 random attributes survive min_concepts=10; is_rare does not.
    assert m["n_attributes"] == 9 and m["n_concepts"] == 124
    skipped = m["data"]["skipped"]
    assert skipped["concept_without_images"] == 1 and skipped["duplicate_pair"] == 1
    assert skipped["pair_unknown_concept"] == 1 and skipped["attribute_below_min_concepts"] == 1
    assert m["data"]["skipped_names"]["concept_without_images"] == ["ghost_thing"]
    assert m["concept_embedding"] == {"embedding": "image", "n_images": 248, "dim": 32}
    assert any((tmp_path / "cache").rglob("*")), "concept images go through the feature cache"
    # Same inputs, same bytes (the second run reads the features from the cache).
    second = clip_benchmark("attributes/things_clustering", tiny_model, things_root, tmp_path / "b")
    assert json.dumps(second, sort_keys=True) == json.dumps(first, sort_keys=True)


def test_all_strategies_through_clip_cycles_eval(things_root: Path, tiny_model: str, env: Path, tmp_path: Path) -> None:
    from clip_cycles.cli import main as cli_main

    out = tmp_path / "out"
    assert cli_main(
        [
            "eval",
            "--task",
            "attributes/things_all",
            "--model",
            tiny_model,
            "--pretrained",
            "none",
            "--dataset-root",
            str(things_root),
            "--num-workers",
            "0",
            "--seeds",
            "0",
            "--output",
            str(out / "{dataset}.json"),
        ]
    ) in (0, None)
    results = {p.stem.removeprefix("attributes_things_"): read_result(p)["metrics"] for p in sorted(out.glob("*.json"))}
    assert sorted(results) == ["clustering", "llm", "random", "similarity", "supercategory"]
    for strategy, m in results.items():
        assert m["available"] is True and m["seeds"] == [0], strategy
        assert_one_vocabulary(m)
    # Whole supercategories to one side: the six category traits have no positive on one side,
    # so their folds are degenerate (F1 = 0) but every strategy scores every attribute.
    degenerate = results["supercategory"]["per_seed"]["0"]["coverage"]["attributes_with_degenerate_folds"]
    assert {f"{c}_trait" for c in CATEGORIES} <= set(degenerate)
    assert results["random"]["n_degenerate_folds"] == {"0": 0}
    # The runner's count is the folds', not zero: every attribute named has at least one degenerate fold.
    assert results["supercategory"]["n_degenerate_folds"]["0"] >= len(degenerate) >= len(CATEGORIES) > 0
    assert {m["n_attributes_scored"] for m in results.values()} == {results["random"]["n_attributes"]}
    # Colour carries the supercategory: category traits are learnable on random splits and
    # the random attributes are not, so selectivity follows dominance (the paper's CS).
    assert results["random"]["cs"] > 0.5
    assert results["random"]["f1_selectivity"] > results["supercategory"]["f1_selectivity"]


def test_one_split_embedding_for_every_model(
    things_root: Path, tiny_model: str, env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dataset_kwargs.split_embeddings (or $CLIP_CYCLES_SPLIT_EMBEDDINGS) makes the clustering split; results say so."""
    concepts = [c for c in (things_root / "unique_id.txt").read_text().split() if c]
    split_file = tmp_path / "split.npz"
    np.savez(split_file, concepts=np.array(concepts), embeddings=np.random.default_rng(0).standard_normal((len(concepts), 5)))
    (env / "attributes").mkdir()
    for name, extra in (("fixed", f", split_embeddings: {split_file}"), ("own", "")):
        (env / "attributes" / f"things_clustering_{name}.yaml").write_text(
            f"task: attributes/things_clustering_{name}\ndataset_path: things\n"
            f"dataset_kwargs: {{strategy: clustering, k: 10, seeds: [0]{extra}}}\n"
            "output_type: attribute_splits\nmetric_list:\n  - {metric: cs, aggregation: mean, higher_is_better: false}\n"
        )
    by_key = clip_benchmark("attributes/things_clustering_fixed", tiny_model, things_root, tmp_path / "a")["metrics"]
    assert by_key["split_embedding"] == str(split_file) == by_key["split_embeddings"]
    own = clip_benchmark("attributes/things_clustering_own", tiny_model, things_root, tmp_path / "b")["metrics"]
    assert own["split_embedding"] == "each model's own embeddings"
    monkeypatch.setenv("CLIP_CYCLES_SPLIT_EMBEDDINGS", str(split_file))
    by_env = clip_benchmark("attributes/things_clustering_own", tiny_model, things_root, tmp_path / "c")["metrics"]
    assert by_env["split_embedding"] == str(split_file)
    # Same split embedding, same folds: the degenerate counts agree; the model's own clustering differs.
    assert by_env["per_seed"]["0"]["coverage"] == by_key["per_seed"]["0"]["coverage"]
    assert by_env["per_seed"]["0"]["leakage"] == by_key["per_seed"]["0"]["leakage"]
    assert own["per_seed"]["0"]["leakage"] != by_key["per_seed"]["0"]["leakage"]


def test_splits_command_embeds_with_a_backend(things_root: Path, tiny_model: str, env: Path, tmp_path: Path) -> None:
    from clip_cycles.cli import main as cli_main

    common = [
        "splits",
        "--things-root",
        str(things_root),
        "--model",
        tiny_model,
        "--pretrained",
        "none",
        "--strategies",
        "random",
        "clustering",
        "--k",
        "20",
        "--k-values",
        "--num-workers",
        "0",
    ]
    assert cli_main([*common, "--out", str(tmp_path / "image")]) in (0, None)
    image = json.loads((tmp_path / "image" / "results.json").read_text())
    name = f"{tiny_model}/none"
    assert set(image["grid"]["table"]) == {name}
    assert set(image["grid"]["table"][name]) == {"random", "clustering"}
    assert image["data"]["skipped"]["concept_without_images"] == 1
    assert cli_main([*common, "--concept-text", "definition", "--model-name", "tiny-text", "--out", str(tmp_path / "text")]) in (
        0,
        None,
    )
    text = json.loads((tmp_path / "text" / "results.json").read_text())
    assert set(text["grid"]["table"]) == {"tiny-text"}
    # Text embeddings need no images: the imageless concept stays in.
    assert "concept_without_images" not in text["data"]["skipped"]
    assert text["grid"]["grid"]["tiny-text"]["random"]["0"]["n_attributes"] == 9
    image_f1 = image["grid"]["table"][name]["random"]["f1_selectivity"]["mean"]
    text_f1 = text["grid"]["table"]["tiny-text"]["random"]["f1_selectivity"]["mean"]
    assert image_f1 != text_f1


def test_a_runner_result_must_hold_every_metric_of_the_task_metric_list() -> None:
    task = get_task("cycles/shapes_box_left_right")
    spec = ModelSpec("features", "m.npz", None)
    # A value every metric kind accepts: 1 is an accuracy and a count.
    full = {name: 1 for name in task.metric_names}
    record = checked_record(task, spec, full)
    assert record["metrics"] == full and record["dataset"] == task.name
    short = {name: 1 for name in task.metric_names[1:]}
    with pytest.raises(ValueError, match=rf"{task.metric_names[0]}.*did not report"):
        checked_record(task, spec, short)
    # An unavailable result says why instead of reporting metrics: not checked.
    unavailable = {"available": False, "unavailable_reason": "too few cycles"}
    assert checked_record(task, spec, unavailable)["metrics"] == unavailable
