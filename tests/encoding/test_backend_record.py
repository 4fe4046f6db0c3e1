"""One Backend record (issue 50): resolved once, carried in ModelSpec, asked by every capability check.

- the shipped backends' records equal the table written here (capabilities, weights lookup, loader);
- a third-party backend declared through the record (in code, or by an entry point naming it) is
  honoured by every check: pair scores, image-only, precomputed features;
- a loader's old ``capabilities`` attribute still works for one release, with a FutureWarning;
- the weights check runs once per eval;
- no comparison of a backend name with "features" is left in clip_cycles/ (an AST scan).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clip_cycles.commands.main import main as clip_cycles_main
from clip_cycles.data.sources.images import ImageItem
from clip_cycles.encoding import backends, backends_vision, hub_access, vlm_scores
from clip_cycles.encoding.backends import Backend, PrecomputedFeatures, register_backend, resolve_backend
from clip_cycles.encoding.backends_vision import require_embeddings
from clip_cycles.encoding.encoder import ModelSpec, encode
from clip_cycles.evaluation.capabilities import check_backend_for_tasks
from clip_cycles.tasks.registry import expand_tasks

REPO = Path(__file__).resolve().parents[2]

#: name -> (capabilities, weights lookup, loader): what each shipped backend is, written out by hand.
SHIPPED = {
    "open_clip": ({"image", "text"}, "open_clip", "clip_cycles.encoding.backends:load_open_clip"),
    "hf": ({"image", "text"}, "hub_id", "clip_cycles.encoding.backends:load_hf"),
    "features": ({"image", "text", "precomputed_features"}, None, "clip_cycles.encoding.backends:load_features"),
    "timm": ({"image"}, None, "clip_cycles.encoding.backends_vision:load_timm"),
    "hf_vision": ({"image"}, "hub_id", "clip_cycles.encoding.backends_vision:load_hf_vision"),
    "hf_vlm": ({"pair_scores"}, "hub_id", "clip_cycles.encoding.vlm_scores:load_hf_vlm"),
}


@pytest.fixture
def registered() -> Any:
    """Register backends for one test; each is removed afterwards."""
    names: list[str] = []

    def add(name: str, backend: Any) -> Backend:
        register_backend(name, backend)
        names.append(name)
        return resolve_backend(name)

    yield add
    for name in names:
        backends.BACKENDS.unregister(name)


def _tiny_loader(**kwargs: Any) -> tuple[Any, Any, Any]:
    return object(), None, None


# --------------------------------------------------------------------------- the shipped records


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_backend_records_equal_the_table(name: str) -> None:
    capabilities, weights, loader = SHIPPED[name]
    record = ModelSpec(name, "m", None).backend  # a name given to ModelSpec is resolved to its record
    assert isinstance(record, Backend) and record.name == name and str(record) == name
    assert record.capabilities == capabilities and record.weights == weights and record.origin == "builtin"
    assert all(record.can(c) == (c in capabilities) for c in backends.CAPABILITIES)
    module, _, attribute = loader.partition(":")
    assert record.loader_function() is getattr(sys.modules[module], attribute)
    assert record.identity("m", None) is None  # clip_cycles' own code is keyed by its version


def test_the_table_covers_every_shipped_backend_and_loaders_carry_no_capabilities() -> None:
    assert set(backends.BUILTIN_BACKENDS) == set(SHIPPED)
    for name in SHIPPED:
        assert not hasattr(backends.get_backend(name), "capabilities"), name  # declared in the record only


def test_a_name_nobody_registers_is_clip_benchmarks_two_tower_type_read_lazily() -> None:
    script = (
        "import json, sys\n"
        "from clip_cycles.encoding.backends import resolve_backend\n"
        "record = resolve_backend('ja_clip')\n"
        "print(json.dumps([sorted(record.capabilities), record.origin, record.identity('m', None), "
        "'clip_benchmark.models' in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [["image", "text"], "clip_benchmark", None, False]


def test_unknown_capabilities_and_weights_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown backend capability 'pair_score'; known: image, pair_scores"):
        resolve_backend("open_clip").can("pair_score")
    with pytest.raises(ValueError, match=r"capabilities must be a non-empty subset of image, pair_scores"):
        Backend("x", _tiny_loader, capabilities=("image", "captions"))
    with pytest.raises(ValueError, match="non-empty subset"):
        Backend("x", _tiny_loader, capabilities=())
    with pytest.raises(ValueError, match=r"weights must be one of open_clip, hub_id or None, got 'timm'"):
        Backend("x", _tiny_loader, weights="timm")
    assert Backend("x", _tiny_loader, capabilities="image").capabilities == {"image"}  # one name is one capability


def test_unknown_names_are_refused_when_loaded_with_the_registry_sentence() -> None:
    record = resolve_backend("nope")
    with pytest.raises(ValueError, match=r"unknown model backend 'nope'; registered: .*open_clip"):
        record.loader_function()


# --------------------------------------------------------------------------- third-party records


def _probe_task() -> Any:
    return expand_tasks(["cycles_probe/coco_strict_size"])[0]


def _cycle_task() -> Any:
    return expand_tasks(["cycles/shapes_strict_left_right"])[0]


def test_a_third_party_pair_scorer_is_honoured_by_every_check(registered: Any) -> None:
    record = registered("acme_vlm", Backend(loader=_tiny_loader, capabilities=("pair_scores",)))
    assert record.name == "acme_vlm" and record.origin == "registered"
    spec = ModelSpec("acme_vlm", "m", None)
    assert vlm_scores.uses_pair_scores(spec)
    assert not vlm_scores.uses_pair_scores(ModelSpec("acme_vlm", "m", None, loader=lambda: _tiny_loader()))
    check_backend_for_tasks([_cycle_task()], "acme_vlm", "m")  # cycles are scored from pair scores
    with pytest.raises(ValueError, match=r"model backend 'acme_vlm' \(m\) scores \(image, caption\) pairs"):
        check_backend_for_tasks([_probe_task()], spec.backend, "m")


def test_a_third_party_image_only_backend_is_refused_for_captions(registered: Any) -> None:
    registered("acme_vit", Backend(loader=_tiny_loader, capabilities=("image",)))
    require_embeddings("acme_vit", "m", need_text=False)
    with pytest.raises(ValueError) as caught:
        require_embeddings(ModelSpec("acme_vit", "m", None).backend, "m", need_text=True)
    assert str(caught.value) == backends_vision.text_missing_message("acme_vit", "m")
    with pytest.raises(ValueError, match="task cycles/shapes_strict_left_right: model backend 'acme_vit'"):
        check_backend_for_tasks([_cycle_task()], "acme_vit", "m")


def test_precomputed_features_are_a_capability_not_a_name(registered: Any, tmp_path: Path) -> None:
    images = np.array([[3.0, 4.0], [0.0, 2.0]], dtype=np.float32)
    captions = np.array([[1.0, 0.0]], dtype=np.float32)
    table = PrecomputedFeatures(tmp_path / "t.npz", {"a.png": 0, "b.png": 1}, {"a cat": 0}, images, captions)
    registered(
        "acme_table",
        Backend(loader=lambda **kwargs: (table, None, None), capabilities=backends.EMBEDDINGS | {"precomputed_features"}),
    )
    # The bytes are not images: a backend that encodes would fail to decode them; the table is read instead.
    items = [ImageItem(key="a.png", data=b"not an image"), ImageItem(key="b.png", data=b"nor this")]
    out = encode(items, ["a cat"], ModelSpec("acme_table", "t", None), None, num_workers=0)
    assert out.stats.encoded_images == 0 and out.image_hashes == {}
    np.testing.assert_allclose(out.image_features, [[0.6, 0.8], [0.0, 1.0]])
    np.testing.assert_allclose(out.caption_features, [[1.0, 0.0]])


def _install_distribution(root: Path, name: str, body: str) -> None:
    """A distribution ``acmebackend`` 2.5 on ``root`` whose entry point ``name`` names ``acme_backend:BACKEND``."""
    info = root / "acmebackend-2.5.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acmebackend\nVersion: 2.5\n")
    (info / "entry_points.txt").write_text(f"[clip_cycles.backends]\n{name} = acme_backend:BACKEND\n")
    (root / "acme_backend.py").write_text(
        "from clip_cycles.encoding.backends import Backend\n\n\n"
        "def load(model_name, pretrained=None, cache_dir=None, device='cpu'):\n"
        "    return object(), None, None\n\n\n" + body
    )


@pytest.fixture
def entry_point_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import importlib

    root = tmp_path / "site"
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    yield root
    sys.modules.pop("acme_backend", None)
    backends.BACKENDS.refresh_entry_points()


def test_an_entry_point_naming_a_record_is_honoured(entry_point_site: Path) -> None:
    body = "BACKEND = Backend(loader=load, capabilities=('image',), weights='hub_id', cache_fingerprint={'w': 1})\n"
    _install_distribution(entry_point_site, "acme", body)
    record = ModelSpec("acme", "org/acme-vit", None).backend
    assert record.name == "acme" and record.capabilities == {"image"} and record.origin == "entry point"
    identity = record.identity("org/acme-vit", None)
    assert identity["target"] == "acme_backend:BACKEND" and identity["fingerprint"] == {"w": 1}
    assert (identity["distribution"], identity["version"], identity["source"]) == ("acmebackend", "2.5", "entry_point")
    # Its declared weights lookup is the hub id one: a hub id it would download is looked for before the load.
    need = hub_access.weights_need(record, "org/acme-vit", None, str(entry_point_site / "empty-cache"))
    assert need is not None and need.what == "hub model org/acme-vit" and not need.cached
    with pytest.raises(ValueError, match="gives image embeddings only"):
        check_backend_for_tasks([_cycle_task()], "acme", "org/acme-vit")


def test_an_entry_point_record_of_another_name_is_refused(entry_point_site: Path) -> None:
    _install_distribution(entry_point_site, "acme", "BACKEND = Backend('other', loader=load)\n")
    with pytest.raises(ValueError, match=r"model backend 'acme' \(acme_backend:BACKEND\) is a record named 'other'"):
        resolve_backend("acme")


# --------------------------------------------------------------------------- the old function attribute


def test_the_old_capabilities_attribute_works_and_warns(registered: Any) -> None:
    def load_old(**kwargs: Any) -> tuple[Any, Any, Any]:
        return object(), None, None

    load_old.capabilities = ("pair_scores",)  # type: ignore[attr-defined]
    load_old.cache_fingerprint = {"v": 3}  # type: ignore[attr-defined]
    with pytest.warns(FutureWarning) as caught:
        record = registered("old_vlm", load_old)
    message = str(caught[0].message)
    assert "'old_vlm'" in message and "load_old.capabilities" in message and "Backend(loader=..., capabilities=...)" in message
    assert record.capabilities == {"pair_scores"} and record.loader_function() is load_old
    assert record.identity("m", None)["fingerprint"] == {"v": 3}
    with pytest.warns(FutureWarning, match="'old_vlm'"):
        spec = ModelSpec("old_vlm", "m", None)
    assert vlm_scores.uses_pair_scores(spec)


def test_a_bare_loader_is_a_two_tower_backend_without_a_warning(registered: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record = registered("bare", _tiny_loader)
    assert record.capabilities == {"image", "text"} and record.weights is None


# --------------------------------------------------------------------------- the weights check, once


def test_the_weights_check_runs_once_per_spec(registered: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    registered("acme_hub", Backend(loader=_tiny_loader, weights="hub_id"))
    asked: list[str] = []
    monkeypatch.setattr(hub_access, "weights_need", lambda backend, model, *args: asked.append(model))
    spec = ModelSpec("acme_hub", "org/model", None)
    assert spec.require_weights() is False
    spec.load()
    spec.load()
    assert asked == ["org/model"]
    ModelSpec("acme_hub", "org/other", None).load()  # another spec asks again
    assert asked == ["org/model", "org/other"]


def test_the_weights_check_runs_once_per_eval(shapes_cycles: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, str]] = []
    original = hub_access.weights_need

    def counting(backend: Any, model: str, *args: Any) -> Any:
        asked.append((resolve_backend(backend).name, model))
        return original(backend, model, *args)

    monkeypatch.setattr(hub_access, "weights_need", counting)
    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "cache"))
    code = clip_cycles_main(
        ["eval", "--task", "cycles/shapes_strict_left_right", "--model", "cycles-tiny", "--pretrained", "shapes"]
        + ["--dataset-root", str(shapes_cycles), "--num-workers", "0", "--output", str(tmp_path / "out.json")]
    )
    assert code == 0 and (tmp_path / "out.json").is_file()
    assert json.loads((tmp_path / "out.json").read_text())["backend"] == "open_clip"  # records still write the name
    assert asked == [("open_clip", "cycles-tiny")]  # before any data is read; the load reused the answer


# --------------------------------------------------------------------------- no name branch on "features"


def features_comparisons(source: str, filename: str = "<source>") -> list[str]:
    """``file:line`` of every ``x == "features"``, ``x != "features"`` or ``x in ("features", ...)`` in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, sides, sides[1:]):
            if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
                hit = any(isinstance(side, ast.Constant) and side.value == "features" for side in (left, right))
            elif isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
                hit = any(isinstance(item, ast.Constant) and item.value == "features" for item in right.elts)
            else:
                hit = False
            if hit:
                found.append(f"{filename}:{node.lineno}")
    return found


def test_the_scan_finds_a_planted_features_branch() -> None:
    planted = (
        "if spec.backend == 'features':\n    pass\n"
        "ok = 'features' in payload\n"  # a key lookup, not a name comparison
        "if 'features' != name or kind in ('hf', 'features'):\n    pass\n"
    )
    assert sorted(features_comparisons(planted)) == ["<source>:1", "<source>:4", "<source>:4"]


def test_no_features_name_branch_is_left_in_clip_cycles() -> None:
    found = []
    for path in sorted((REPO / "clip_cycles").rglob("*.py")):
        found += features_comparisons(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    assert found == [], "ask the backend record (spec.backend.can('precomputed_features')) instead: " + ", ".join(found)
