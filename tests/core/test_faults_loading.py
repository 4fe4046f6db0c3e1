"""Fault cases of issue 23 about loading: nothing a stranger hands over runs code, hangs, or is mis-decoded.

1. a model folder asking for remote code is refused before transformers, even with ``y`` on stdin;
   every ``from_pretrained`` gets ``trust_remote_code=False``;
2. pickle payloads in HF, OpenCLIP ``local-dir:`` and timm folders get a named refusal; floors
   in setup.cfg make torch loading weights-only by default;
3. entry-point backends enter the feature-cache key with distribution, version, code and their
   declared fingerprint (a change is a cache miss);
4. only regular files are read, with bounds (FIFO and ``/dev/zero`` images, nested and oversized
   annotation JSON), and self-contained struct paths are confined to the folder;
5. images decode to what they show (16-bit, palette with transparency, LA/PA, CMYK, EXIF);
6. resolving a backend imports that backend alone.
"""

from __future__ import annotations

import configparser
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tiny_models import TINY_OPEN_CLIP

from clip_cycles.data.sources import annotations, images
from clip_cycles.data.sources.images import ImageItem, decode_rgb, open_rgb
from clip_cycles.encoding import backends
from clip_cycles.regular_files import read_regular_file

REPO = Path(__file__).resolve().parents[2]
TASK = "cycles/shapes_strict_left_right"


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests" / "support"), env.get("PYTHONPATH", "")])
    env["HF_HOME"] = str(tmp_path / "hf_home")  # transformers copies remote code into its modules cache
    env["HF_HUB_OFFLINE"] = "1"
    env["CLIP_CYCLES_CACHE"] = str(tmp_path / "cc_cache")
    return env


class _Payload:
    """A pickle that runs ``touch marker`` when unpickled without weights-only protection."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def _save_payload(path: Path, marker: Path) -> None:
    import torch

    torch.save({"weight": _Payload(marker)}, path)


def _tiny_hf_clip(folder: Path) -> Path:
    from tiny_models import tiny_hf_clip as write

    folder.mkdir(parents=True, exist_ok=True)
    return write(folder)


# --------------------------------------------------------------------------- 1. remote code


def _remote_code_folder(folder: Path, marker: Path, config_name: str = "config.json") -> Path:
    """A model folder whose config names its own Python files; importing them writes ``marker``."""
    folder.mkdir(parents=True, exist_ok=True)
    code = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    config_class = "from transformers import PretrainedConfig\nclass EvilConfig(PretrainedConfig):\n    model_type = 'evil'\n"
    (folder / "configuration_evil.py").write_text(code + config_class)
    (folder / "modeling_evil.py").write_text(code)
    auto_map = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModel": "modeling_evil.EvilModel"}
    config = {"model_type": "evil_clip", "auto_map": auto_map}
    if config_name != "config.json":
        (folder / "config.json").write_text(json.dumps({"model_type": "clip"}))
        config = {"auto_map": {"AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]}}
    (folder / config_name).write_text(json.dumps(config))
    return folder


def test_1_remote_code_folder_never_runs_even_with_yes_on_stdin(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    folder = _remote_code_folder(tmp_path / "evil", marker)
    script = textwrap.dedent(
        f"""
        import json
        from clip_cycles.encoding.backends import load_model
        errors = {{}}
        for backend in ("hf", "hf_vision", "hf_vlm"):
            try:
                load_model(backend, {str(folder)!r}, None)
                errors[backend] = None
            except ValueError as error:
                errors[backend] = str(error)
        print(json.dumps(errors))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input="y\n" * 20, capture_output=True, text=True, env=_env(tmp_path), timeout=300
    )
    assert not marker.exists(), "the folder's Python ran"
    assert done.returncode == 0, done.stderr[-3000:]
    errors = json.loads(done.stdout.strip().splitlines()[-1])
    for backend, message in errors.items():
        assert message is not None, backend
        assert str(folder / "config.json") in message and "auto_map" in message, message
        assert "configuration_evil.py" in message and "modeling_evil.py" in message


def test_1_eval_with_a_remote_code_model_is_refused_naming_the_config(shapes_cycles: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    folder = _remote_code_folder(tmp_path / "evil", marker)
    done = subprocess.run(
        [sys.executable, "-m", "clip_cycles", "eval", "--task", TASK, "--model-type", "hf", "--model", str(folder),
         "--dataset-root", str(shapes_cycles), "--cache-dir", str(tmp_path / "cache"), "--num-workers", "0",
         "--output", "-"],
        input="y\n" * 20, capture_output=True, text=True, env=_env(tmp_path), timeout=600,
    )  # fmt: skip
    assert not marker.exists(), "the folder's Python ran"
    assert done.returncode != 0
    assert str(folder / "config.json") in done.stderr and "trust_remote_code=False" in done.stderr


def test_1_tokenizer_config_auto_map_is_refused_by_name(tmp_path: Path) -> None:
    folder = _remote_code_folder(tmp_path / "evil", tmp_path / "ran.txt", config_name="tokenizer_config.json")
    with pytest.raises(ValueError, match=re.escape(str(folder / "tokenizer_config.json"))) as info:
        backends.refuse_remote_code(str(folder))
    assert "tokenization_evil.py" in str(info.value)


def test_1_a_real_format_folder_passes_the_remote_code_check(tmp_path: Path) -> None:
    folder = _tiny_hf_clip(tmp_path / "clip")
    backends.refuse_remote_code(str(folder))  # no auto_map anywhere: nothing to refuse
    model, _, _ = backends.load_model("hf", str(folder), None)
    assert hasattr(model, "encode_image")


def test_1_every_from_pretrained_call_passes_trust_remote_code_false(monkeypatch: pytest.MonkeyPatch) -> None:
    import transformers

    calls: list[tuple[str, dict[str, Any]]] = []

    class Stop(Exception):
        pass

    def recorder(owner: str) -> Any:
        def from_pretrained(name: str, **kwargs: Any) -> Any:
            calls.append((owner, kwargs))
            raise Stop(owner)

        return from_pretrained

    for name in ("AutoModel", "AutoImageProcessor", "AutoTokenizer", "AutoProcessor", "AutoModelForImageTextToText"):
        monkeypatch.setattr(getattr(transformers, name), "from_pretrained", recorder(name))
    for backend in ("hf", "hf_vision", "hf_vlm"):
        with pytest.raises(Stop):
            backends.load_model(backend, "some-org/some-model", "main")
    assert {owner for owner, _ in calls} == {"AutoModel", "AutoProcessor"}
    assert all(kwargs.get("trust_remote_code") is False for _, kwargs in calls), calls


def test_1_open_clip_text_tower_from_a_remote_code_folder_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    evil = _remote_code_folder(tmp_path / "evil", marker)
    folder = tmp_path / "oc"
    folder.mkdir()
    config = json.loads(json.dumps(TINY_OPEN_CLIP))
    config["model_cfg"]["text_cfg"] = {"hf_model_name": str(evil), "hf_tokenizer_name": str(evil), "context_length": 16}
    (folder / "open_clip_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=re.escape(str(evil / "config.json")) + ".*auto_map"):
        backends.load_model("open_clip", f"local-dir:{folder}", None)
    assert not marker.exists()


def test_1_no_library_can_read_an_answer_from_stdin_while_a_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n" * 5))
    with backends.no_prompts(), pytest.raises(EOFError):
        input("run the custom code? [y/N] ")
    assert sys.stdin.readline() == "y\n"  # restored afterwards


# --------------------------------------------------------------------------- 2. weights only


def test_2_hf_pickle_payload_is_refused_by_name(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    folder = _tiny_hf_clip(tmp_path / "clip")
    for weights in folder.glob("*.safetensors"):
        weights.unlink()
    _save_payload(folder / "pytorch_model.bin", marker)
    with pytest.raises(ValueError, match=re.escape(str(folder / "pytorch_model.bin"))) as info:
        backends.load_model("hf", str(folder), None)
    assert "safetensors" in str(info.value) and not marker.exists()


def test_2_open_clip_local_dir_pickle_payload_is_refused_by_name(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    folder = tmp_path / "oc"
    folder.mkdir()
    (folder / "open_clip_config.json").write_text(json.dumps(TINY_OPEN_CLIP))
    _save_payload(folder / "open_clip_pytorch_model.bin", marker)
    with pytest.raises(ValueError, match=re.escape(str(folder / "open_clip_pytorch_model.bin"))) as info:
        backends.load_model("open_clip", f"local-dir:{folder}", None)
    assert "safetensors" in str(info.value) and not marker.exists()


def test_2_timm_folder_pickle_payload_is_refused_by_name(tmp_path: Path) -> None:
    pytest.importorskip("timm")
    from tiny_vision_models import write_tiny_timm_vit

    marker = tmp_path / "ran.txt"
    folder = write_tiny_timm_vit(tmp_path / "timm")
    (folder / "model.safetensors").unlink()
    _save_payload(folder / "pytorch_model.bin", marker)
    with pytest.raises(ValueError, match=re.escape(str(folder / "pytorch_model.bin"))) as info:
        backends.load_model("timm", f"local-dir:{folder}", None)
    assert "safetensors" in str(info.value) and not marker.exists()


def _floor(requirement: str) -> tuple[int, ...]:
    match = re.search(r">=\s*([0-9.]+)", requirement)
    assert match, requirement
    return tuple(int(part) for part in match.group(1).split("."))


def test_2_setup_floors_make_torch_loading_weights_only_by_default(tmp_path: Path) -> None:
    import torch

    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    requires = {
        re.split(r"[<>=]", line.strip())[0]: line.strip()
        for line in parser["options"]["install_requires"].splitlines()
        if line.strip()
    }
    assert _floor(requires["torch"]) >= (2, 6)  # torch 2.6 made weights_only=True the default of torch.load
    assert _floor(requires["open_clip_torch"]) >= (2, 29)  # passes weights_only=True itself
    assert "<=2.14.1" in requires["torch"] and "<=0.29.1" in requires["torchvision"]  # upper pins kept
    # The installed torch honours it: a bare torch.load of a payload refuses, nothing runs.
    marker = tmp_path / "ran.txt"
    _save_payload(tmp_path / "payload.pt", marker)
    with pytest.raises(Exception, match="Weights only load failed"):
        torch.load(tmp_path / "payload.pt")
    assert not marker.exists()


# --------------------------------------------------------------------------- 3. entry-point backends in the cache key

_FAKE_BACKEND = """
import numpy as np
import torch


class Model:
    def eval(self):
        return self

    def encode_image(self, pixels):
        return pixels.flatten(1)[:, :8] + 1.0

    def encode_text(self, tokens):
        return tokens.float() + 1.0


def transform(image):
    return torch.from_numpy(np.asarray(image.resize((4, 4)), dtype=np.float32).transpose(2, 0, 1) / 255.0)


def tokenizer(texts):
    return torch.tensor([[len(t), sum(map(ord, t)) % 97, 1, 2, 3, 4, 5, 6] for t in texts])


def load(model_name, pretrained, cache_dir, device):
    return Model(), transform, tokenizer
"""


def _install_fake_backend(root: Path, version: str, extra: str = "") -> None:
    for old in root.glob("fakeccbackend-*.dist-info"):
        shutil.rmtree(old)
    info = root / f"fakeccbackend-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakeccbackend\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[clip_cycles.backends]\nfakecc = fake_cc_backend:load\n")
    (root / "fake_cc_backend.py").write_text(_FAKE_BACKEND + extra)


def _png(value: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.full((6, 6, 3), value, dtype=np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()


def test_3_entry_point_backend_change_is_a_cache_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    import importlib

    from clip_cycles.encoding.encoder import ModelSpec, encode

    root = tmp_path / "site"
    _install_fake_backend(root, "1.0")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(backends, "_WARNED_NAME_ONLY", set())
    items = [ImageItem(key=f"{v}.png", data=_png(v)) for v in (10, 120, 240)]
    captions = ["a red circle", "a blue square"]
    cache = tmp_path / "cache"

    def run() -> Any:
        importlib.invalidate_caches()
        sys.modules.pop("fake_cc_backend", None)  # the module as it is now on disk
        return encode(items, captions, ModelSpec("fakecc", "m", None), cache, num_workers=0).stats

    with caplog.at_level(logging.WARNING, logger="clip_cycles.encoding.backends"):
        first = run()
    assert first.encoded_images == 3 and first.encoded_captions == 2
    warnings = [r for r in caplog.records if "declares no cache_fingerprint" in r.getMessage()]
    assert len(warnings) == 1 and "'fakecc'" in warnings[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="clip_cycles.encoding.backends"):
        again = run()
    assert again.cached_images == 3 and again.cached_captions == 2 and again.encoded_images == 0
    assert not [r for r in caplog.records if "declares no cache_fingerprint" in r.getMessage()]  # once per process

    _install_fake_backend(root, "1.1")  # a new release of the backend
    bumped = run()
    assert bumped.cached_images == 0 and bumped.encoded_images == 3
    assert run().cached_images == 3

    _install_fake_backend(root, "1.1", extra="\n# the encoder changed, the version did not\n")
    assert run().cached_images == 0

    _install_fake_backend(root, "1.1", extra="\nload.cache_fingerprint = lambda model, pretrained: {'weights': 'w1'}\n")
    assert run().cached_images == 0
    assert run().cached_images == 3
    _install_fake_backend(root, "1.1", extra="\nload.cache_fingerprint = lambda model, pretrained: {'weights': 'w2'}\n")
    assert run().cached_images == 0

    weights = tmp_path / "fake_weights.bin"  # local weights it loads, named by --model: hashed into the key
    weights.write_bytes(b"w" * 64)
    before = ModelSpec("fakecc", str(weights), None).description()
    weights.write_bytes(b"v" * 64)
    assert ModelSpec("fakecc", str(weights), None).description()["weights"] != before["weights"]

    identity = ModelSpec("fakecc", "m", None).description()["backend_identity"]
    assert identity["distribution"] == "fakeccbackend" and identity["version"] == "1.1"
    assert identity["fingerprint"] == {"weights": "w2"} and identity["target"] == "fake_cc_backend:load"


def test_3_builtin_backends_have_no_third_party_identity() -> None:
    assert backends.backend_identity("open_clip", "ViT-B-32", None) is None
    assert backends.backend_identity("hf", "x", None) is None


# --------------------------------------------------------------------------- 4. regular files, bounds, confinement


def _run_isolated(script: str, tmp_path: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    """Run ``script`` in a child with a memory cap and a timeout: a hang or an endless read fails the test, not the machine."""
    import resource

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))

    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=_env(tmp_path), timeout=timeout, preexec_fn=limits
    )


def test_4_fifo_and_dev_zero_images_are_refused_and_skipped_by_name(tmp_path: Path) -> None:
    good = tmp_path / "good.png"
    good.write_bytes(_png(90))
    fifo = tmp_path / "pipe.jpg"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.jpg"
    zero.symlink_to("/dev/zero")
    folder = tmp_path / "oc"
    folder.mkdir()
    (folder / "open_clip_config.json").write_text(json.dumps(TINY_OPEN_CLIP))
    script = textwrap.dedent(
        f"""
        import json
        from pathlib import Path
        from clip_cycles.data.sources.images import ImageItem
        from clip_cycles.encoding.encoder import ModelSpec, encode
        items = [ImageItem(key=name, path=Path({str(tmp_path)!r}) / name) for name in ("good.png", "pipe.jpg", "zero.jpg")]
        out = {{}}
        for item in items[1:]:
            try:
                item.read_bytes()
                out[item.key] = None
            except ValueError as error:
                out[item.key] = str(error)
        stats = encode(items, ["a red circle"], ModelSpec("open_clip", "local-dir:{folder}", None), None,
                       num_workers=0, skip_bad_images=True).stats
        out["bad"] = stats.bad_images
        out["encoded"] = stats.encoded_images
        print(json.dumps(out))
        """
    )
    done = _run_isolated(script, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "FIFO" in out["pipe.jpg"] and str(fifo) in out["pipe.jpg"] and "--skip-bad-images" in out["pipe.jpg"]
    assert "character device" in out["zero.jpg"] and str(zero) in out["zero.jpg"]
    assert sorted(out["bad"]) == ["pipe.jpg", "zero.jpg"] and out["encoded"] == 1


def test_4_read_regular_file_bounds_and_kinds(tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    path.write_bytes(b"x" * 100)
    assert read_regular_file(path, 100) == b"x" * 100
    with pytest.raises(ValueError, match="has 100 bytes, more than the 99 allowed"):
        read_regular_file(path, 99)
    with pytest.raises(ValueError, match="is a directory"):
        read_regular_file(tmp_path, 100)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_regular_file(tmp_path / "missing", 100)
    link = tmp_path / "null.jpg"
    link.symlink_to("/dev/null")
    with pytest.raises(ValueError, match="character device"):
        read_regular_file(link, 100)


def test_4_image_over_the_size_bound_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.png"
    path.write_bytes(_png(5))
    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", 10)
    with pytest.raises(ValueError, match=r"image 'big.png': .* more than the 10 allowed .*--skip-bad-images"):
        ImageItem(key="big.png", path=path).read_bytes()


def test_4_deeply_nested_annotation_json_is_a_named_error(tmp_path: Path) -> None:
    path = tmp_path / "instances_val2017.json"
    depth = 200_000
    path.write_text('{"images": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*nested too deeply"):
        annotations.read_json(path)


def test_4_annotation_json_bounds_fifo_and_valid_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "instances_val2017.json"
    payload = {"images": [{"id": 1, "file_name": "a.jpg", "width": 4, "height": 3}], "annotations": []}
    path.write_text(json.dumps(payload))
    assert annotations.read_json(path) == json.loads(path.read_text())
    monkeypatch.setattr(annotations, "MAX_ANNOTATION_BYTES", 10)
    with pytest.raises(ValueError, match="annotation file .* more than the 10 allowed"):
        annotations.read_json(path)
    fifo = tmp_path / "captions_val2017.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="FIFO"):
        annotations.read_json(fifo)


def test_4_scene_graph_files_are_bounded_regular_files_too(tmp_path: Path) -> None:
    from clip_cycles.data.sources.scene_graphs import load_scene_graphs

    nested = tmp_path / "val_sceneGraphs.json"
    nested.write_text('{"1": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(ValueError, match=re.escape(str(nested)) + ".*nested too deeply"):
        load_scene_graphs(nested)
    fifo = tmp_path / "train_sceneGraphs.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="scene-graph file .* FIFO"):
        load_scene_graphs(fifo)


def _struct_folder(shapes_cycles: Path, tmp_path: Path, first_path: str) -> tuple[Any, Path]:
    """A self-contained copy of the fixture: images in ``images/`` by struct path (bytes null).

    Row 0's ``image_0`` gets ``first_path`` instead.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from clip_cycles.data.folder.reader import open_built_folder

    folder = tmp_path / "built"
    shutil.copytree(shapes_cycles, folder)
    source = Path(open_built_folder(folder, verify=False).info["source_root"])
    path = folder / "data" / "strict_left_right" / "seed0" / "test.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        for k in ("image_0", "image_1"):
            target = folder / "images" / row[k]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / row[k], target)
            row[k] = {"bytes": None, "path": first_path if (i, k) == (0, "image_0") else f"images/{row[k]}"}
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([pa.field(f.name, image if f.name in ("image_0", "image_1") else f.type) for f in table.schema])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return open_built_folder(folder, verify=False), source


@pytest.mark.parametrize("outside", ["../../../../etc/passwd", "/dev/zero", "/etc/passwd", "images/../../build_info.json"])
def test_4_struct_path_outside_the_folder_is_refused(shapes_cycles: Path, tmp_path: Path, outside: str) -> None:
    from clip_cycles.data.folder.reader import read_cycle_rows
    from clip_cycles.tasks.registry import get_task

    folder, _ = _struct_folder(shapes_cycles, tmp_path, outside)
    with pytest.raises(ValueError, match=r"row 0 .* image_0: image struct path .* must be relative to the folder"):
        read_cycle_rows(folder, get_task(TASK), 0, "test")


def test_4_struct_path_inside_the_folder_reads_its_file(shapes_cycles: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from clip_cycles.data.folder.reader import read_cycle_rows
    from clip_cycles.tasks.registry import get_task

    first = pq.read_table(shapes_cycles / "data" / "strict_left_right" / "seed0" / "test.parquet").column("image_0")[0].as_py()
    folder, source = _struct_folder(shapes_cycles, tmp_path, f"images/{first}")
    rows = read_cycle_rows(folder, get_task(TASK), 0, "test")
    for item in rows.image_items:
        assert item.path == folder.root / item.key and item.read_bytes() == (source / item.key[len("images/") :]).read_bytes()


# --------------------------------------------------------------------------- 5. decoding


def _encoded(image: Any, fmt: str, **save: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **save)
    return buffer.getvalue()


def _sixteen_bit_expected(values: np.ndarray) -> np.ndarray:
    gray = np.round(values.astype(np.float64) / 257.0).astype(np.uint8)  # 65535 / 255 = 257 exactly
    return np.repeat(gray[..., None], 3, axis=2)


def test_5_sixteen_bit_png_is_scaled_not_clipped() -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    values = rng.integers(0, 65536, size=(9, 7), dtype=np.uint16)
    values[0, 0], values[0, 1] = 0, 65535
    data = _encoded(Image.fromarray(values), "PNG")
    with Image.open(io.BytesIO(data)) as opened:
        assert opened.mode.startswith("I")  # PIL's 16-bit gray (I;16 or I)
    decoded = np.asarray(open_rgb(data))
    assert decoded.dtype == np.uint8 and decoded.shape == (9, 7, 3)
    np.testing.assert_array_equal(decoded, _sixteen_bit_expected(values))
    assert (decoded < 255).mean() > 0.9  # PIL's own convert("RGB") made almost all of it white


@pytest.mark.parametrize("mode", ["I;16", "I;16B", "I"])
def test_5_every_sixteen_bit_mode_scales_the_same(mode: str) -> None:
    from PIL import Image

    values = np.arange(0, 65536, 997, dtype=np.uint32)[:60].reshape(6, 10)
    if mode == "I":
        image = Image.fromarray(values.astype(np.int32))
    else:
        dtype = ">u2" if mode == "I;16B" else "<u2"
        image = Image.frombytes(mode, (10, 6), values.astype(dtype).tobytes())
    np.testing.assert_array_equal(np.asarray(decode_rgb(image)), _sixteen_bit_expected(values))


def test_5_float_and_out_of_range_images_are_refused_by_name() -> None:
    from PIL import Image

    with pytest.raises(ValueError, match="image 'x.tif' has F pixels"):
        decode_rgb(Image.fromarray(np.ones((3, 3), dtype=np.float32)), "image 'x.tif'")
    with pytest.raises(ValueError, match="outside 0..65535"):
        decode_rgb(Image.fromarray(np.full((3, 3), 70000, dtype=np.int32)), "image 'y.tif'")


def _over_white(color: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    a = alpha.astype(np.float64)[..., None] / 255.0
    return color.astype(np.float64) * a + 255.0 * (1.0 - a)


def test_5_palette_with_transparency_shows_white_where_transparent() -> None:
    from PIL import Image

    palette = np.zeros((256, 3), dtype=np.uint8)
    palette[:4] = [[200, 10, 10], [10, 200, 10], [10, 10, 200], [0, 0, 0]]
    index = np.array([[0, 1, 2, 3], [3, 2, 1, 0]], dtype=np.uint8)
    image = Image.fromarray(index, mode="P")
    image.putpalette(palette.ravel().tolist())
    data = _encoded(image, "PNG", transparency=3)
    expected = palette[index].astype(np.float64)
    expected[index == 3] = 255.0
    np.testing.assert_allclose(np.asarray(open_rgb(data)).astype(np.float64), expected, atol=1)


@pytest.mark.parametrize("mode", ["LA", "PA", "RGBA"])
def test_5_alpha_images_are_composited_over_white(mode: str) -> None:
    from PIL import Image

    rng = np.random.default_rng(1)
    alpha = rng.integers(0, 256, size=(5, 6), dtype=np.uint8)
    if mode == "RGBA":
        color = rng.integers(0, 256, size=(5, 6, 3), dtype=np.uint8)
        image = Image.fromarray(np.dstack([color, alpha]), mode="RGBA")
    elif mode == "LA":
        gray = rng.integers(0, 256, size=(5, 6), dtype=np.uint8)
        color = np.repeat(gray[..., None], 3, axis=2)
        image = Image.fromarray(np.dstack([gray, alpha]), mode="LA")
    else:
        palette = rng.integers(0, 256, size=(256, 3), dtype=np.uint8)
        index = rng.integers(0, 256, size=(5, 6), dtype=np.uint8)
        color = palette[index]
        image = Image.fromarray(index, mode="P")
        image.putpalette(palette.ravel().tolist())
        image = image.convert("PA")
        image.putalpha(Image.fromarray(alpha, mode="L"))
    np.testing.assert_allclose(np.asarray(decode_rgb(image)).astype(np.float64), _over_white(color, alpha), atol=1)


def test_5_cmyk_converts_with_the_standard_formula() -> None:
    from PIL import Image

    rng = np.random.default_rng(2)
    cmyk = rng.integers(0, 256, size=(4, 5, 4), dtype=np.uint8)
    data = _encoded(Image.fromarray(cmyk, mode="CMYK"), "TIFF")
    c, m, y, k = (cmyk[..., i].astype(np.float64) / 255.0 for i in range(4))
    expected = 255.0 * np.stack([(1 - c) * (1 - k), (1 - m) * (1 - k), (1 - y) * (1 - k)], axis=2)
    np.testing.assert_allclose(np.asarray(open_rgb(data)).astype(np.float64), expected, atol=1)


def test_5_exif_orientation_is_not_applied_like_the_reference_pipelines() -> None:
    from PIL import Image

    pixels = np.zeros((4, 8, 3), dtype=np.uint8)
    pixels[:, :2] = 255  # a white band on the left as stored
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    data = _encoded(Image.fromarray(pixels), "PNG", exif=exif)
    with Image.open(io.BytesIO(data)) as opened:
        assert opened.getexif().get(0x0112) == 6
    np.testing.assert_array_equal(np.asarray(open_rgb(data)), pixels)  # stored orientation, as OpenCLIP sees it


def test_5_the_encoder_decodes_with_these_rules_and_keys_them() -> None:
    from PIL import Image

    from clip_cycles.encoding.encoder import ModelSpec, _ImageDataset

    values = np.linspace(0, 65535, 48).astype(np.uint16).reshape(6, 8)
    item = ImageItem(key="gray16.png", data=_encoded(Image.fromarray(values), "PNG"))
    _, pixels, error = _ImageDataset([item], np.asarray)[0]
    assert error is None
    np.testing.assert_array_equal(pixels, _sixteen_bit_expected(values))
    assert ModelSpec("open_clip", "ViT-B-32", None).description()["image_decoding"] == images.IMAGE_DECODING
    from clip_cycles.encoding.vlm_scores import PromptConfig, cache_description

    pair_key = cache_description(ModelSpec("hf_vlm", "org/vlm", None), PromptConfig())
    assert pair_key["image_decoding"] == images.IMAGE_DECODING  # pair scores are keyed by the rules too


# --------------------------------------------------------------------------- 6. resolving imports that backend alone


def test_6_resolving_open_clip_imports_neither_clip_benchmark_nor_open_clip(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import json, sys
        from clip_cycles.encoding.backends import get_backend
        loader = get_backend("open_clip")
        first = {m: m in sys.modules for m in ("clip_benchmark", "clip_benchmark.models", "open_clip", "transformers")}
        try:
            get_backend("ja_clip")  # a clip_benchmark model type: its table loads now, on demand
            second = "clip_benchmark.models" in sys.modules
        except ValueError:
            second = None  # clip_benchmark not installed
        print(json.dumps({"loader": loader.__name__, "first": first, "second": second}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_env(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["loader"] == "load_open_clip"
    assert out["first"] == {"clip_benchmark": False, "clip_benchmark.models": False, "open_clip": False, "transformers": False}
    assert out["second"] in (True, None)


def test_6_precedence_and_unknown_names_are_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = lambda **kwargs: (None, None, None)  # noqa: E731
    monkeypatch.setattr(backends, "_WARNED_NAME_ONLY", set())  # the sentinel's warning stays in this test
    shipped = backends.BACKENDS.entry("open_clip")
    backends.register_backend("open_clip", sentinel, replace=True)
    try:
        assert backends.get_backend("open_clip") is sentinel  # registered replaces built in
        assert backends.backend_identity("open_clip", "m", None)["source"] == "registered"  # and is keyed as third-party
    finally:
        backends.BACKENDS.register("open_clip", shipped.target, replace=True, origin=shipped.origin)
    assert backends.get_backend("open_clip") is backends.load_open_clip
    assert backends.backend_identity("open_clip", "m", None) is None
    with pytest.raises(ValueError, match=r"unknown model backend 'nope'; registered: .*open_clip"):
        backends.get_backend("nope")
