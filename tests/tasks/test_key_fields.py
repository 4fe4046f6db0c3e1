"""Every content key, by construction: each field it declares to cover changes the key and misses; each
field it declares to ignore keeps the key and hits.

The declarations sit next to the keys (``NAMESPACE_KEY_FIELDS``, ``MODEL_KEY_FIELDS``/``MODEL_KEY_IGNORES``,
``PAIR_SCORE_KEY_FIELDS``/``PAIR_SCORE_KEY_IGNORES``, ``RAW_ROOT_KEY_FIELDS``/``RAW_ROOT_KEY_IGNORES``,
``AUDIT_KEY_FIELDS``, ``BUILT_FOLDER_KEY_FIELDS``); each test below is parametrised over the declared
tuple and first checks that its table of changes covers exactly the declared fields, so a field added to
a key without a test (or a test for a field the key dropped) fails here.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import shutil
import types
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from clip_cycles.data.sources import registry as sources
from clip_cycles.encoding import encoder, feature_cache, vlm_scores
from clip_cycles.encoding.backends import Backend
from clip_cycles.evaluation import zero_shot
from clip_cycles.tasks import loading

# --------------------------------------------------------------------------- feature namespaces

BASE_MODEL = {"backend": "open_clip", "model": "ViT-B-32", "pretrained": "openai", "precision": "fp32", "seed": 0}
# Image and text preprocessing spelled alike, so that changing the kind changes nothing else.
BASE_PREP = {"image": "Compose(Resize(224))", "text": "Compose(Resize(224))", "precision": "fp32"}

NAMESPACE_CHANGES: dict[str, Callable[[dict, dict, str], tuple[dict, dict, str]]] = {
    "kind": lambda m, p, k: (m, p, "text"),
    "model": lambda m, p, k: ({**m, "model": "RN50"}, p, k),
    "preprocessing": lambda m, p, k: (m, {**p, "image": "Compose(Resize(256))"}, k),
    "precision": lambda m, p, k: (m, {**p, "precision": "amp"}, k),
}


def test_namespace_declaration_matches_the_key() -> None:
    description = feature_cache.namespaces_for("unused", BASE_MODEL, BASE_PREP)["image"].description
    assert set(description) == set(feature_cache.NAMESPACE_KEY_FIELDS) == set(NAMESPACE_CHANGES)


@pytest.mark.parametrize("field", feature_cache.NAMESPACE_KEY_FIELDS)
def test_each_namespace_field_changes_the_key_and_misses(field: str, tmp_path: Path) -> None:
    base = feature_cache.namespaces_for(tmp_path, BASE_MODEL, BASE_PREP)["image"]
    base.put(["item-a"], np.ones((1, 3), dtype=np.float32))
    model, prep, kind = NAMESPACE_CHANGES[field](dict(BASE_MODEL), dict(BASE_PREP), "image")
    changed = feature_cache.namespaces_for(tmp_path, model, prep, kinds=(kind,))[kind]
    assert changed.description[field] != base.description[field]
    assert changed.name != base.name
    found, missing = changed.lookup(["item-a"])
    assert found == {} and missing == ["item-a"]
    # The unchanged namespace still hits (the miss above is the key's doing, not a lost shard).
    assert feature_cache.namespaces_for(tmp_path, BASE_MODEL, BASE_PREP)["image"].lookup(["item-a"])[1] == []


def test_the_other_kinds_preprocessing_is_ignored(tmp_path: Path) -> None:
    base = feature_cache.namespaces_for(tmp_path, BASE_MODEL, BASE_PREP)["image"]
    base.put(["item-a"], np.ones((1, 3), dtype=np.float32))
    other = feature_cache.namespaces_for(tmp_path, BASE_MODEL, {**BASE_PREP, "text": "tokenizer:context_length=32"})["image"]
    assert other.name == base.name and other.lookup(["item-a"])[1] == []


# --------------------------------------------------------------------------- the model key (ModelSpec.description)


def _checkpoint(tmp_path: Path) -> Path:
    path = tmp_path / "weights.pt"
    path.write_bytes(b"\x00" * 64)
    return path


def _spec(**fields: Any) -> encoder.ModelSpec:
    base = {"backend": "open_clip", "model": "ViT-B-32", "pretrained": "openai", "device": "cuda", "amp": True}
    return encoder.ModelSpec(**{**base, **fields})


def _change_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[encoder.ModelSpec, dict, dict]:
    path = _checkpoint(tmp_path)
    spec = _spec(pretrained=str(path))
    before = spec.description()
    stat = path.stat()
    path.write_bytes(b"\x01" + b"\x00" * 63)  # same size, same mtime: only the content differs
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    return spec, before, spec.description()


def _change_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[encoder.ModelSpec, dict, dict]:
    spec = _spec()
    before = spec.description()
    monkeypatch.setattr(encoder, "_version", lambda name: "99.0" if name == "open_clip_torch" else "")
    return spec, before, spec.description()


def _change_image_decoding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[encoder.ModelSpec, dict, dict]:
    spec = _spec()
    before = spec.description()
    monkeypatch.setattr(encoder, "IMAGE_DECODING", "other decoding rules")
    return spec, before, spec.description()


def _change_backend_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[encoder.ModelSpec, dict, dict]:
    # A built-in backend has no identity entry; an entry-point backend's distribution, version and code enter the key.
    spec = _spec()
    before = spec.description()
    monkeypatch.setattr(Backend, "identity", lambda self, *args: {"distribution": "acme-clip", "version": "2.0"})
    return spec, before, spec.description()


def _field_change(**fields: Any) -> Callable[[Path, pytest.MonkeyPatch], tuple[encoder.ModelSpec, dict, dict]]:
    def change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[encoder.ModelSpec, dict, dict]:
        return _spec(**fields), _spec().description(), _spec(**fields).description()

    return change


MODEL_CHANGES = {
    "backend": _field_change(backend="hf_clip"),
    "model": _field_change(model="RN50"),
    "pretrained": _field_change(pretrained="laion2b_s34b_b79k"),
    "seed": _field_change(seed=1),
    "precision": _field_change(amp=False),  # amp on a CUDA device is the precision
    "weights": _change_weights,
    "backend_identity": _change_backend_identity,
    "image_decoding": _change_image_decoding,
    "versions": _change_versions,
}


def test_model_key_declaration_matches_the_spec() -> None:

    assert set(encoder.MODEL_KEY_FIELDS) == set(MODEL_CHANGES)
    spec_fields = {f.name for f in dataclasses.fields(encoder.ModelSpec)}
    # Every ModelSpec field is either covered (directly or as precision) or declared ignored.
    assert spec_fields == set(encoder.MODEL_KEY_FIELDS) - {
        "precision",
        "weights",
        "backend_identity",
        "image_decoding",
        "versions",
    } | {"device", "amp"} | set(encoder.MODEL_KEY_IGNORES)


@pytest.mark.parametrize("field", encoder.MODEL_KEY_FIELDS)
def test_each_model_field_changes_the_key_and_misses(field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, before, after = MODEL_CHANGES[field](tmp_path, monkeypatch)
    assert before.get(field) != after.get(field), field
    old = feature_cache.namespaces_for(tmp_path / "cache", before, BASE_PREP)["image"]
    old.put(["item-a"], np.ones((1, 3), dtype=np.float32))
    new = feature_cache.namespaces_for(tmp_path / "cache", after, BASE_PREP)["image"]
    assert new.name != old.name and new.lookup(["item-a"])[1] == ["item-a"]


@pytest.mark.parametrize("field", encoder.MODEL_KEY_IGNORES)
def test_each_ignored_model_field_keeps_the_key(field: str, tmp_path: Path) -> None:
    value = {"model_cache_dir": str(tmp_path / "downloads"), "loader": lambda: (None, None, None)}[field]
    before, after = _spec().description(), _spec(**{field: value}).description()
    assert before == after
    old = feature_cache.namespaces_for(tmp_path, before, BASE_PREP)["image"]
    old.put(["item-a"], np.ones((1, 3), dtype=np.float32))
    assert feature_cache.namespaces_for(tmp_path, after, BASE_PREP)["image"].lookup(["item-a"])[1] == []


# --------------------------------------------------------------------------- pair scores (hf_vlm)


class _CountingScorer:
    """A pair scorer that counts the pairs it is asked for; the score is the caption's length."""

    pair_scorer = True

    def __init__(self) -> None:
        self.pairs = 0

    def score_batch(self, images: list[Any], captions: list[str], config: Any) -> np.ndarray:
        self.pairs += len(captions)
        return np.array([[float(len(c)), 1.0] for c in captions])


def _png(value: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (value, 0, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


def _vlm_folder(path: Path, content: bytes = b'{"model_type": "tiny"}') -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_bytes(content)
    return path


def _pairs() -> list[tuple[Any, str]]:
    from clip_cycles.data.sources.images import ImageItem

    return [(ImageItem("a.png", data=_png(10)), "a red square"), (ImageItem("b.png", data=_png(200)), "a blue square")]


def _score(spec: encoder.ModelSpec, config: Any, cache: Path) -> int:
    scorer = _CountingScorer()
    vlm_scores.score_pairs(_pairs(), spec, [config], cache, scorer=scorer)
    return scorer.pairs


def _pair_change(field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(spec, config) after changing ``field`` of the base (hf_vlm, tiny folder, default prompt, cpu)."""
    spec = encoder.ModelSpec("hf_vlm", str(tmp_path / "vlm"), None)
    config = vlm_scores.PromptConfig()
    if field == "backend":
        spec = dataclasses.replace(spec, backend="hf_vlm_other")  # the name resolved to its record
    elif field == "model":
        _vlm_folder(tmp_path / "vlm", b'{"model_type": "tinier"}')
    elif field == "prompt":
        config = vlm_scores.PromptConfig(prompt="{image} Describe:")
    elif field == "precision":
        spec = encoder.ModelSpec("hf_vlm", str(tmp_path / "vlm"), None, device="cuda", amp=True)
    elif field == "seed":
        spec.seed = 1
    elif field == "image_decoding":
        monkeypatch.setattr(vlm_scores, "IMAGE_DECODING", "other decoding rules")
    elif field == "transformers":
        monkeypatch.setattr(vlm_scores, "_version", lambda name: "0.0-other")
    elif field == "score":
        config = vlm_scores.PromptConfig(score="mean")
    else:
        raise AssertionError(f"no change defined for pair score field {field}")
    return spec, config


def test_pair_score_declaration_matches_the_key(tmp_path: Path) -> None:
    _vlm_folder(tmp_path / "vlm")
    description = vlm_scores.cache_description(
        encoder.ModelSpec("hf_vlm", str(tmp_path / "vlm"), None), vlm_scores.PromptConfig()
    )
    assert set(description) == set(vlm_scores.PAIR_SCORE_KEY_FIELDS)
    assert set(vlm_scores.PAIR_SCORE_KEY_IGNORES) <= set(vlm_scores.PromptConfig.model_fields)


@pytest.mark.parametrize("field", vlm_scores.PAIR_SCORE_KEY_FIELDS)
def test_each_pair_score_field_changes_the_key_and_rescores(field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    _vlm_folder(tmp_path / "vlm")
    base_spec, base_config = encoder.ModelSpec("hf_vlm", str(tmp_path / "vlm"), None), vlm_scores.PromptConfig()
    before = vlm_scores.cache_description(base_spec, base_config)
    assert _score(base_spec, base_config, cache) == 2
    assert _score(base_spec, base_config, cache) == 0  # served from the cache
    spec, config = _pair_change(field, tmp_path, monkeypatch)
    after = vlm_scores.cache_description(spec, config)
    assert after[field] != before[field]
    assert _score(spec, config, cache) == 2  # a miss: every pair scored again


@pytest.mark.parametrize("field", vlm_scores.PAIR_SCORE_KEY_IGNORES)
def test_each_ignored_pair_score_field_hits(field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    _vlm_folder(tmp_path / "vlm")
    assert _score(encoder.ModelSpec("hf_vlm", str(tmp_path / "vlm"), None), vlm_scores.PromptConfig(), cache) == 2
    spec, config = _pair_change(field, tmp_path, monkeypatch)
    assert _score(spec, config, cache) == 0


def test_moved_vlm_folder_hits(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _vlm_folder(tmp_path / "vlm")
    assert _score(encoder.ModelSpec("hf_vlm", str(tmp_path / "vlm"), None), vlm_scores.PromptConfig(), cache) == 2
    shutil.copytree(tmp_path / "vlm", tmp_path / "moved")
    assert _score(encoder.ModelSpec("hf_vlm", str(tmp_path / "moved"), None), vlm_scores.PromptConfig(), cache) == 0


# --------------------------------------------------------------------------- raw-root source fingerprints


@pytest.fixture(scope="module")
def small_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from clip_cycles.data.sources.shapes_world import write_shapes_world

    return write_shapes_world(tmp_path_factory.mktemp("key_world") / "world", n_images=40, seed=0, image_size=64, progress=False)


def _copy_world(small_world: Path, where: Path) -> Path:
    shutil.copytree(small_world, where)  # copy2: sizes and mtimes kept
    return where


def _edit_annotation(root: Path) -> None:
    path = root / "annotations" / "captions_val2017.json"
    stat = path.stat()
    text = path.read_text(encoding="utf-8")
    assert "circle" in text
    path.write_text(text.replace("circle", "CIRCLE", 1), encoding="utf-8")  # same size, mtime kept below
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _add_image(root: Path) -> None:
    shutil.copy2(next(iter(sorted((root / "val2017").iterdir()))), root / "val2017" / "extra.png")


RAW_ROOT_CHANGES: dict[str, Callable[[Path], str]] = {
    # Each change edits the root in place and returns the kind to fingerprint it as afterwards.
    "kind": lambda root: "coco",  # the same files read as a plain COCO root
    "annotations": lambda root: (_edit_annotation(root), "shapes")[1],
    "images": lambda root: (_add_image(root), "shapes")[1],
}


def _reference_info(root: Path, fingerprint: dict) -> dict:
    return {"mode": "reference", "source_root": str(root), "source_fingerprint": fingerprint}


def test_raw_root_declaration_matches_the_fingerprint(small_world: Path) -> None:
    fingerprint = sources.raw_root_fingerprint("shapes", small_world)
    assert set(fingerprint) == set(sources.RAW_ROOT_KEY_FIELDS) | set(sources.RAW_ROOT_KEY_IGNORES)
    assert set(RAW_ROOT_CHANGES) == set(sources.RAW_ROOT_KEY_FIELDS)


@pytest.mark.parametrize("field", sources.RAW_ROOT_KEY_FIELDS)
def test_each_raw_root_field_changes_the_fingerprint_and_is_refused(field: str, small_world: Path, tmp_path: Path) -> None:
    from clip_cycles.data.folder.writer import source_problems

    root = _copy_world(small_world, tmp_path / "world")
    stored = sources.raw_root_fingerprint("shapes", root)
    assert source_problems(tmp_path, _reference_info(root, stored), tmp_path / "h") == []
    kind = RAW_ROOT_CHANGES[field](root)
    now = sources.raw_root_fingerprint(kind, root)
    assert now[field] != stored[field]
    # The check fingerprints the root itself; for a kind change it is given the root read as that kind.
    current = now if field == "kind" else None
    problems = source_problems(tmp_path, _reference_info(root, stored), tmp_path / "h", current=current)
    assert len(problems) == 1 and "changed since the build" in problems[0]


@pytest.mark.parametrize("field", sources.RAW_ROOT_KEY_IGNORES)
def test_a_moved_raw_root_is_the_same_source(field: str, small_world: Path, tmp_path: Path) -> None:
    from clip_cycles.data.folder.writer import source_problems

    assert field == "root"
    root = _copy_world(small_world, tmp_path / "world")
    stored = sources.raw_root_fingerprint("shapes", root)
    moved = _copy_world(small_world, tmp_path / "moved")
    assert sources.raw_root_fingerprint("shapes", moved)["root"] != stored["root"]
    assert source_problems(tmp_path, _reference_info(moved, stored), tmp_path / "h") == []
    # Files outside the annotation globs and image folders are not the source either.
    (moved / "notes.txt").write_text("mine", encoding="utf-8")
    assert source_problems(tmp_path, _reference_info(moved, stored), tmp_path / "h") == []


# --------------------------------------------------------------------------- the additive audit's cache


class _AuditCalls:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, phi: np.ndarray, psi: np.ndarray, train: np.ndarray, test: np.ndarray, **kwargs: Any) -> Any:
        self.calls += 1
        # A report of the declared shape (schemas.audit_report), so the cache may serve it; phi_sum tells inputs apart.
        report = {
            "passed": True,
            "design": "cycles",
            "probes": {},
            "pair_auroc_over": "pairs",
            "n_train_pairs": 0,
            "n_eval_pairs": 0,
            "n_test": int(test.shape[0]),
            "n_val": 0,
            "n_unbalanced_comparisons": 0,
            "witness": None,
            "epochs": 5,
            "seed": 0,
            "tie_tolerance": 1e-9,
            "failures": [],
            "phi_sum": float(phi.sum()),
        }
        return types.SimpleNamespace(to_dict=lambda: dict(report))


def _audit_inputs() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    cycles = np.array([[0, 1, 0, 1], [2, 3, 2, 3], [1, 2, 1, 2]])
    return {
        "task": types.SimpleNamespace(split="test", train_split="test", audit_fit="scored", tie_tolerance=1e-9),
        "seed": 0,
        "splits": {0: {"test": cycles, "validation": cycles}, 1: {"test": cycles, "validation": cycles}},
        # Row 4 of each table is used by no cycle.
        "phi": rng.normal(size=(5, 3)),
        "psi": rng.normal(size=(5, 3)),
    }


def _with_task(inputs: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**inputs, "task": types.SimpleNamespace(**{**vars(inputs["task"]), **fields})}


def _changed_rows(inputs: dict[str, Any]) -> dict[str, Any]:
    phi = inputs["phi"].copy()
    phi[0] += 1.0  # a row the cycles use
    return {**inputs, "phi": phi}


AUDIT_CHANGES: dict[str, Callable[[dict[str, Any], pytest.MonkeyPatch], dict[str, Any]]] = {
    "version": lambda i, mp: (mp.setattr(zero_shot, "AUDIT_CACHE_VERSION", zero_shot.AUDIT_CACHE_VERSION + 1), i)[1],
    "code": lambda i, mp: (mp.setattr(zero_shot, "_code_digest", lambda: "other code"), i)[1],
    "arrays": lambda i, mp: _changed_rows(i),
    # Fitted on train_split (named "test": the same rows), no validation split: only the fit rule differs.
    "fit": lambda i, mp: {**_with_task(i, audit_fit="train"), "splits": {0: {"test": i["splits"][0]["test"]}}},
    # The same rows scored under another split name: the report's fit_split differs.
    "fit_split": lambda i, mp: _with_task(i, split="validation", train_split="validation"),
    # A validation split adds its cycles to what the audit sees, so arrays differ too.
    "has_validation": lambda i, mp: _with_task(i, audit_fit="train"),
    "seed": lambda i, mp: {**i, "seed": 1},
    "tie_tolerance": lambda i, mp: _with_task(i, tie_tolerance=1e-6),
}


def _run_audit(inputs: dict[str, Any], cache: Path) -> dict[str, Any]:
    data = types.SimpleNamespace(splits=inputs["splits"])
    return zero_shot._audit(inputs["task"], inputs["seed"], data, None, inputs["phi"], inputs["psi"], cache)  # type: ignore[arg-type]


@pytest.fixture
def audit_calls(monkeypatch: pytest.MonkeyPatch) -> _AuditCalls:
    calls = _AuditCalls()
    monkeypatch.setattr(zero_shot, "additive_audit", calls)
    # The cycles are given as index arrays already (nothing to look up in encoded tables).
    monkeypatch.setattr(zero_shot, "cycle_index", lambda rows, encoded: (rows, 0))
    return calls


def test_audit_declaration_matches_the_key(audit_calls: _AuditCalls, tmp_path: Path) -> None:
    import json

    assert set(AUDIT_CHANGES) == set(zero_shot.AUDIT_KEY_FIELDS)
    _run_audit(_audit_inputs(), tmp_path)
    (written,) = (tmp_path / "audits").iterdir()
    assert set(json.loads(written.read_text())["settings"]) == set(zero_shot.AUDIT_KEY_FIELDS)


@pytest.mark.parametrize("field", zero_shot.AUDIT_KEY_FIELDS)
def test_each_audit_field_changes_the_key_and_recomputes(
    field: str, audit_calls: _AuditCalls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = _audit_inputs()
    first = _run_audit(inputs, tmp_path)
    assert _run_audit(inputs, tmp_path) == first and audit_calls.calls == 1  # a hit
    changed = AUDIT_CHANGES[field](inputs, monkeypatch)
    report = _run_audit(changed, tmp_path)
    assert audit_calls.calls == 2, f"{field}: the cached audit was served across the change"
    assert len(list((tmp_path / "audits").iterdir())) == 2  # another key, another file
    if field == "fit_split":
        assert report["fit_split"] == "validation" and first["fit_split"] == "test"


def test_audit_ignores_unused_rows_and_the_table_order(audit_calls: _AuditCalls, tmp_path: Path) -> None:
    inputs = _audit_inputs()
    first = _run_audit(inputs, tmp_path)
    unused = {**inputs, "phi": inputs["phi"].copy()}
    unused["phi"][4] += 5.0  # no cycle reads row 4
    assert _run_audit(unused, tmp_path) == first
    # The same features at other rows of the encoded tables (other tasks encoded first), cycles re-indexed.
    order = np.array([4, 3, 2, 1, 0])
    where = np.argsort(order)  # old row -> new row
    moved = {
        **inputs,
        "phi": inputs["phi"][order],
        "psi": inputs["psi"][order],
        "splits": {s: {k: where[v] for k, v in by.items()} for s, by in inputs["splits"].items()},
    }
    assert _run_audit(moved, tmp_path) == first
    assert audit_calls.calls == 1


# --------------------------------------------------------------------------- the built-folder cache of raw roots

KEY_TASK = "cycles/shapes_strict_left_right"
OTHER_FAMILY_TASK = "cycles/shapes_box_left_right"
GQA_TASK = "cycles/shapes_gqa_attribute_color"


def _counting_build(builds: list[tuple[str, str, tuple[str, ...]]]) -> Callable[..., Path]:
    def build(builder: str, raw: Path, families: Any, out: Path) -> Path:
        builds.append((builder, str(raw), tuple(families)))
        return sources.build_from_raw(builder, raw, families, out)

    return build


def _change_kind(root: Path) -> tuple[Path, list[str]]:
    (root / "shapes_world.json").unlink()  # now a plain COCO root (and its fingerprint lost a file)
    return root, [KEY_TASK.replace("shapes_", "coco_")]


BUILT_CHANGES: dict[str, Callable[[Path, Path], tuple[Path, list[str]]]] = {
    "kind": lambda root, tmp: _change_kind(root),
    "builder": lambda root, tmp: (root, [GQA_TASK]),
    "raw_root": lambda root, tmp: (_copy_world(root, tmp / "elsewhere"), [KEY_TASK]),
    "fingerprint": lambda root, tmp: (_edit_annotation(root), (root, [KEY_TASK]))[1],
    "families": lambda root, tmp: (root, [OTHER_FAMILY_TASK]),
}


def test_built_folder_declaration_is_tested() -> None:
    assert set(BUILT_CHANGES) == set(loading.BUILT_FOLDER_KEY_FIELDS)


@pytest.mark.parametrize("field", loading.BUILT_FOLDER_KEY_FIELDS)
def test_each_built_folder_field_rebuilds(
    field: str, small_world: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from clip_cycles.tasks.registry import get_task

    caplog.set_level(logging.INFO, logger="clip_cycles")  # the rebuild's reason is a logged note

    root = _copy_world(small_world, tmp_path / "world")
    cache = tmp_path / "datasets"
    builds: list[tuple[str, str, tuple[str, ...]]] = []
    first = loading.resolve_dataset_roots([get_task(KEY_TASK)], root, cache, build=_counting_build(builds))[KEY_TASK]
    loading.resolve_dataset_roots([get_task(KEY_TASK)], root, cache, build=_counting_build(builds))
    assert len(builds) == 1  # unchanged: served from the cache
    where, names = BUILT_CHANGES[field](root, tmp_path)
    served = loading.resolve_dataset_roots([get_task(n) for n in names], where, cache, build=_counting_build(builds))
    assert len(builds) == 2, f"{field}: the cached build was served across the change"
    folder = served[names[0]]
    if field == "fingerprint":  # the stamp's own comparison says so (not only the folder's source check)
        assert "the raw root changed since the cached build (annotations/captions_val2017.json changed)" in caplog.text
    if field in ("kind", "builder", "raw_root"):
        assert folder.root != first.root  # another cache entry
    if field == "families":  # rebuilt with the union of families
        assert set(builds[1][2]) == {"strict_left_right", "box_left_right"} and folder.root == first.root


def test_built_folder_cache_serves_a_subset_of_its_families(small_world: Path, tmp_path: Path) -> None:
    from clip_cycles.tasks.registry import get_task

    root = _copy_world(small_world, tmp_path / "world")
    cache = tmp_path / "datasets"
    builds: list[tuple[str, str, tuple[str, ...]]] = []
    both = [get_task(KEY_TASK), get_task(OTHER_FAMILY_TASK)]
    loading.resolve_dataset_roots(both, root, cache, build=_counting_build(builds))
    loading.resolve_dataset_roots([get_task(OTHER_FAMILY_TASK)], root, cache, build=_counting_build(builds))
    loading.resolve_dataset_roots(both[::-1], root, cache, build=_counting_build(builds))
    assert len(builds) == 1
