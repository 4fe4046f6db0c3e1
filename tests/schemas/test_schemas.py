"""Declared formats: shipped JSON Schemas equal the models' export, real files validate, crafted violations fail.

The JSON Schema checks use ``jsonschema`` (a validator independent of pydantic, in the
``test`` extra), so a shipped schema that pydantic would accept but an editor would not
is caught.
"""

from __future__ import annotations

import configparser
import copy
import json
from pathlib import Path

import pytest
import yaml

from clip_cycles.cli import main
from clip_cycles.commands.schema_formats import SCHEMAS, schema_file_name, schema_text, shipped_schema_dir, write_schemas
from clip_cycles.data.folder.writer import MODES, read_build_info
from clip_cycles.results import benchmark_record
from clip_cycles.schemas.build_info import FOLDER_MODES, BuildInfo
from clip_cycles.schemas.declared import field_path, first_problem, validate
from clip_cycles.schemas.result import ResultRecord, check_result_record
from clip_cycles.tasks.registry import TaskRegistry, is_template, read_task_yaml, shipped_tasks_dir
from clip_cycles.tasks.task_schema import OUTPUT_TYPES, TASK_MODELS

REPO = Path(__file__).resolve().parents[2]


def _validator(name: str):
    """A validator independent of pydantic (``jsonschema``, in the ``test`` extra) for the shipped schema ``name``."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((shipped_schema_dir() / schema_file_name(name)).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _shipped_task_files() -> list[Path]:
    return [p for p in sorted(shipped_tasks_dir().rglob("*.yaml")) if not is_template(p)]


# --- the shipped files are what the models export -------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_shipped_schema_equals_the_models_export(name: str, tmp_path: Path) -> None:
    shipped = (shipped_schema_dir() / schema_file_name(name)).read_text(encoding="utf-8")
    assert shipped == schema_text(name), f"regenerate with `clip-cycles schema --out-dir {shipped_schema_dir()}`"
    # The export is deterministic: written twice, the same bytes.
    first = [p.read_bytes() for p in write_schemas(tmp_path / "a")]
    second = [p.read_bytes() for p in write_schemas(tmp_path / "b")]
    assert first == second


def test_schema_command_prints_the_shipped_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "task"]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed)["title"] == "clip_cycles task file"
    assert printed == (shipped_schema_dir() / "task.schema.json").read_text(encoding="utf-8")
    assert main(["schema", "build-info", "--path"]) == 0
    assert Path(capsys.readouterr().out.strip()) == shipped_schema_dir() / "build-info.schema.json"
    assert main(["schema"]) == 2  # no format: a sentence, not a traceback
    assert "name a format (task, build-info, result, additive-audit, samples)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["schema", "nonsense"])


def test_schema_files_are_package_data() -> None:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    patterns = [p.strip() for p in config["options.package_data"]["clip_cycles"].splitlines() if p.strip()]
    shipped = {path for pattern in patterns for path in (REPO / "clip_cycles").glob(pattern)}
    files = sorted(shipped_schema_dir().glob("*.schema.json"))
    assert [p.name for p in files] == sorted(schema_file_name(n) for n in SCHEMAS)
    assert all(p in shipped for p in files)
    assert "graft clip_cycles/schemas/json" in (REPO / "MANIFEST.in").read_text(encoding="utf-8")
    assert "pydantic>=2" in config["options"]["install_requires"]


# --- task files ----------------------------------------------------------------------------------------------------


def test_every_shipped_task_validates_against_the_exported_schema() -> None:
    validator = _validator("task")
    files = _shipped_task_files()
    assert (
        len(files) == 51
    )  # 46 task files (valse, bivlc, naturalbench, vismin twice) and 5 collections (the 21 shapes twins have no file)
    for path in files:
        resolved = read_task_yaml(path)
        errors = [e.message for e in validator.iter_errors(resolved)]
        assert errors == [], f"{path} (resolved): {errors}"
        # As an editor sees it, before include is resolved, the file validates too.
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert [e.message for e in validator.iter_errors(raw)] == [], path
    # Every output type has a model and appears in the schema.
    assert set(TASK_MODELS) == set(OUTPUT_TYPES)
    assert {f"{''.join(p.capitalize() for p in n.split('_'))}Task" for n in OUTPUT_TYPES} <= set(validator.schema["$defs"])


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"test_split": "dev"}, "test_split"),
        ({"tie_tolerance": -1.0}, "tie_tolerance"),
        ({"metric_list": ["recall_at_5"]}, "metric_list[0].metric"),
        ({"prompt": "x"}, "prompt"),
        ({"dataset_kwargs": {"config": "strict_size", "seeds": [0, True]}}, "dataset_kwargs.seeds[1]"),
        ({"output_type": "cycle_probe", "metric_list": ["additive_audit"]}, "metric_list[0].metric"),
    ],
)
def test_a_crafted_task_violation_fails_both_the_schema_and_the_registry(tmp_path: Path, change: dict, field: str) -> None:
    good = read_task_yaml(shipped_tasks_dir() / "cycles" / "coco_strict_size.yaml")
    good["task"] = "cycles/mine"
    validator = _validator("task")
    assert list(validator.iter_errors(good)) == []
    bad = {**copy.deepcopy(good), **change}
    assert list(validator.iter_errors(bad)) != []
    (tmp_path / "cycles").mkdir()
    path = tmp_path / "cycles" / "mine.yaml"
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    with pytest.raises(ValueError) as info:
        TaskRegistry([tmp_path]).get("cycles/mine")
    assert str(path) in str(info.value) and f"field {field!r}" in str(info.value)


def test_messages_say_what_was_found_and_what_is_allowed(tmp_path: Path) -> None:
    body = "task: cycles/m\ndataset_path: shapes\ndataset_kwargs: {config: strict_size, colour: red}\nmetric_list: [cycle_acc]\n"
    (tmp_path / "cycles").mkdir()
    (tmp_path / "cycles" / "m.yaml").write_text(body, encoding="utf-8")
    with pytest.raises(ValueError) as info:
        TaskRegistry([tmp_path]).get("cycles/m")
    assert "line 3: field 'dataset_kwargs.colour': unknown key (allowed: config, seeds, train_split)" in str(info.value)
    (tmp_path / "cycles" / "m.yaml").write_text(body.replace(", colour: red", "") + "test_split: dev\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"field 'test_split': 'dev' is not one of \['train', 'validation', 'test'\]"):
        TaskRegistry([tmp_path]).get("cycles/m")
    (tmp_path / "cycles" / "m.yaml").write_text(body.replace(", colour: red", "") + "tag: 5\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"field 'tag': must be a string or a list of strings, got 5"):
        TaskRegistry([tmp_path]).get("cycles/m")


def test_a_misspelt_key_is_reported_before_the_key_it_leaves_missing(tmp_path: Path) -> None:
    (tmp_path / "cycles").mkdir()
    path = tmp_path / "cycles" / "t.yaml"
    path.write_text("task: cycles/t\ndataset_path: shapes\ndataset_kwargs: {confg: strict_size}\nmetrc_list: [cycle_acc]\n")
    with pytest.raises(ValueError) as info:
        TaskRegistry([tmp_path]).get("cycles/t")
    message = str(info.value)
    assert f"{path} line 3: field 'dataset_kwargs.confg': unknown key (allowed: config, seeds, train_split)" in message
    assert message.endswith("(and 3 more problems)")  # metrc_list unknown, config and metric_list missing


def test_attribute_protocol_is_declared_with_its_default(tmp_path: Path) -> None:
    body = (
        "task: attributes/p\ndataset_path: things\ndataset_kwargs: {strategy: random}\n"
        "output_type: attribute_splits\nmetric_list: [cs]\n"
    )
    (tmp_path / "attributes").mkdir()
    (tmp_path / "attributes" / "p.yaml").write_text(body, encoding="utf-8")
    spec = TaskRegistry([tmp_path]).get("attributes/p")
    assert spec.protocol == "project" and spec.experiment_kwargs == {}  # type: ignore[union-attr]
    (tmp_path / "attributes" / "p.yaml").write_text(body + "experiment_kwargs: {protocol: paper2}\n", encoding="utf-8")
    spec = TaskRegistry([tmp_path]).get("attributes/p")
    assert spec.protocol == "paper2" and spec.experiment_kwargs == {"protocol": "paper2"}  # type: ignore[union-attr]
    (tmp_path / "attributes" / "p.yaml").write_text(body + "experiment_kwargs: {protocol: paper3}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"field 'experiment_kwargs\.protocol': 'paper3' is not one of \['project', 'paper2'\]"):
        TaskRegistry([tmp_path]).get("attributes/p")


def test_field_paths_are_written_as_users_write_them() -> None:
    assert field_path(("metric_list", 1, "metric")) == "metric_list[1].metric"
    assert field_path(("families", "a", "counts", "0")) == "families.a.counts.0"
    assert field_path(()) == ""


# --- build_info.json -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fresh_folder(shapes_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from clip_cycles.data.folder.build import build_coco_folder

    out = tmp_path_factory.mktemp("schema_folder") / "folder"
    folder, _ = build_coco_folder(shapes_world, out, families=["strict_size", "box_left_right"], seeds=[0, 1], min_cycles=5)
    return Path(folder)


def test_a_freshly_built_build_info_validates_against_the_exported_schema(fresh_folder: Path) -> None:
    info = json.loads((fresh_folder / "build_info.json").read_text(encoding="utf-8"))
    assert [e.message for e in _validator("build-info").iter_errors(info)] == []
    assert read_build_info(fresh_folder) == info  # the model accepts it and the reader returns it unchanged
    assert MODES == FOLDER_MODES


def _first(mapping: dict) -> str:
    return sorted(mapping)[0]


@pytest.mark.parametrize("case", ["mode", "sha256", "available", "file name", "no files"])
def test_a_crafted_build_info_violation_fails_both_the_schema_and_the_reader(
    fresh_folder: Path, tmp_path: Path, case: str
) -> None:
    info = json.loads((fresh_folder / "build_info.json").read_text(encoding="utf-8"))
    file, family = _first(info["files"]), _first(info["families"])
    if case == "mode":
        info["mode"] = "zipped"
        message = "field 'mode': 'zipped' is not one of ['reference', 'self_contained']"
    elif case == "sha256":
        info["files"][file]["sha256"] = "abc"
        message = f"field 'files.{file}.sha256': must be a sha256 hex digest (64 lowercase hex digits), got 'abc'"
    elif case == "available":
        info["families"][family]["available"] = "yes"
        message = f"field 'families.{family}.available': must be true or false"
    elif case == "file name":
        info["files"]["data/x.parquet"] = {"rows": 1, "sha256": "0" * 64}
        message = "field 'files' has key 'data/x.parquet', which is not allowed"
    else:
        info["families"] = {}
        message = "field 'families' lists no families"
    if case != "no files":
        assert list(_validator("build-info").iter_errors(info)) != []
    (tmp_path / "build_info.json").write_text(json.dumps(info), encoding="utf-8")
    with pytest.raises(ValueError) as error:
        read_build_info(tmp_path)
    text = str(error.value)
    assert text.startswith(f"{tmp_path / 'build_info.json'}: {message}") and text.endswith(
        "rebuild the folder with `clip-cycles build`"
    )


def test_build_info_keeps_keys_later_builds_add(fresh_folder: Path) -> None:
    info = json.loads((fresh_folder / "build_info.json").read_text(encoding="utf-8"))
    info["built_by"] = {"tool": "a later clip_cycles"}  # a key this version does not declare
    model, problem = validate(BuildInfo, info)
    assert problem is None and model.model_extra["built_by"] == {"tool": "a later clip_cycles"}  # type: ignore[union-attr]


# --- result records --------------------------------------------------------------------------------------------


def test_a_result_record_validates_and_a_crafted_one_is_refused() -> None:
    record = benchmark_record("cycles/shapes_strict_size", "ViT-B-32", None, {"cycle_acc": {"mean": 0.5}, "tie_tolerance": 1e-9})
    assert [e.message for e in _validator("result").iter_errors(record)] == []
    for bad, field in (
        ({**record, "model": None}, "model"),
        ({**record, "metrics": {"tie_tolerance": -1.0}}, "metrics.tie_tolerance"),
        ({k: v for k, v in record.items() if k != "language"}, "language"),
    ):
        assert list(_validator("result").iter_errors(bad)) != []
        with pytest.raises(ValueError, match=rf"here: result record field '{field}'"):
            check_result_record(bad, "here")
    # Every runner's record goes through checked_record, which refuses one its schema would not accept.
    from clip_cycles.encoding.encoder import ModelSpec
    from clip_cycles.evaluation.zero_shot import checked_record

    task = TaskRegistry([shipped_tasks_dir()]).get("cycles/shapes_strict_size")
    metrics = {name: {"mean": 0.5, "sd": 0.0} for name in task.metric_names}  # type: ignore[union-attr]
    good = checked_record(task, ModelSpec("open_clip", "ViT-B-32", None), {**metrics, "tie_tolerance": 1e-9})  # type: ignore[arg-type]
    assert [e.message for e in _validator("result").iter_errors(good)] == []
    with pytest.raises(
        ValueError,
        match=r"coco_strict_size\.yaml: the result record of cycles/shapes_strict_size: "
        r"result record field 'model': must be a non-empty string",
    ):
        checked_record(task, ModelSpec("open_clip", "", None), metrics)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="result record field 'metrics.tie_tolerance'"):
        checked_record(task, ModelSpec("open_clip", "m", None), {**metrics, "tie_tolerance": -1.0})  # type: ignore[arg-type]
    # The first problem pydantic reports is the one the message names.
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        ResultRecord.model_validate({**record, "model": None})
    assert first_problem(info.value, ResultRecord)[0] == "model"


def test_import_clip_cycles_stays_free_of_pydantic() -> None:
    """The package top (the algebra, ``results``) never imports pydantic; only the modules that validate a format do."""
    import subprocess
    import sys

    code = "import sys, clip_cycles; print('pydantic' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.stdout.strip() == "False", done.stderr
    code = "import sys, clip_cycles.tasks.registry; print('pydantic' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.stdout.strip() == "True", done.stderr  # the check above can fail: the registry does import it
