"""Small promises of issue 24: the entry-point group the docs name, no undeclared or unused
requirement, the synthetic THINGS builder refusing model flags it would ignore, and the
benchmark audit's label of a features backend."""

from __future__ import annotations

import ast
import configparser
import importlib.util
from pathlib import Path

import pytest

from clip_cycles.benchmark_audit.report import weights_label
from clip_cycles.encoding import backends

REPO = Path(__file__).resolve().parents[2]


def test_backends_docstring_names_the_entry_point_group_in_use() -> None:
    assert f"``{backends.ENTRY_POINT_GROUP}``" in (backends.__doc__ or "")
    assert "clip_cycles.encoding.backends``\n" not in (backends.__doc__ or "")


def _imported_top_modules() -> set[str]:
    found = set()
    for folder in ("clip_cycles", "hf_datasets"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
    return found


def test_every_declared_requirement_is_imported() -> None:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    required = [
        line.split(">")[0].split("<")[0].split("=")[0].strip() for line in config["options"]["install_requires"].splitlines()
    ]
    # Distribution name -> the module it is imported as, where they differ.
    module_of = {"open_clip_torch": "open_clip", "scikit-learn": "sklearn", "pillow": "PIL", "pyyaml": "yaml"}
    imported = _imported_top_modules()
    unused = [name for name in required if name and module_of.get(name, name).replace("-", "_") not in imported]
    # Declared for others: open_clip's transforms need torchvision (datasets is imported by folder_reader.load_split);
    # clip_benchmark's CLI imports requests without declaring it, so a fresh install of ours must bring it.
    assert sorted(unused) == ["requests", "torchvision"]
    spec = importlib.util.find_spec("clip_benchmark")
    assert spec is not None and spec.origin is not None
    sources = "".join(p.read_text(encoding="utf-8") for p in Path(spec.origin).parent.rglob("*.py"))
    assert "import requests" in sources  # the reason it is declared


def _things_builder():
    spec = importlib.util.spec_from_file_location("things_split_builder", REPO / "hf_datasets/things_attribute_splits/build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--model", "ViT-B-32"], "--model"),
        (["--split-model-type", "timm", "--pretrained", "openai"], "--pretrained, --split-model-type"),
        (["--embeddings", "a=b.npz"], "--embeddings"),
    ],
)
def test_synthetic_things_build_refuses_model_flags(
    flags: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    builder = _things_builder()
    with pytest.raises(SystemExit) as stop:
        builder.main(["--synthetic", "small", "--out", str(tmp_path / "out"), *flags])
    assert stop.value.code == 2
    assert f"so {named} would be ignored; drop them" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any work


def test_synthetic_things_build_without_model_flags_runs(tmp_path: Path) -> None:
    builder = _things_builder()
    assert builder.main(["--synthetic", "small", "--strategies", "random", "--seeds", "0", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "data" / "random" / "seed0.parquet").is_file()


def test_a_features_backend_is_not_called_random_init() -> None:
    assert weights_label({"model": "f.safetensors", "pretrained": None, "backend": "features"}) == "precomputed features"
    assert weights_label({"model": "ViT-B-32", "pretrained": None, "backend": "open_clip"}) == "random init"
    assert weights_label({"model": "ViT-B-32", "pretrained": "openai", "backend": "open_clip"}) == "openai"
