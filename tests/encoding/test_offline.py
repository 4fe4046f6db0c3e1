"""Offline, fail fast (issue 36): weights that are nowhere here and a hub out of reach are one sentence.

No test here touches the network: every connection attempt goes through a counting stand-in for
``socket.create_connection``, so "no retries" is a count (0 under ``HF_HUB_OFFLINE=1``, 1 probe
otherwise), never a timing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clip_cycles.commands.main import main as clip_cycles_main
from clip_cycles.encoding import hub_access
from clip_cycles.encoding.encoder import ModelSpec
from clip_cycles.encoding.hub_access import WeightsUnavailableError

REPO = Path(__file__).resolve().parents[2]
#: A real OpenCLIP tag whose weights live on the hub (open_clip's table: timm/vit_base_patch32_clip_224.laion400m_e32).
MODEL, TAG = "ViT-B-32", "laion400m_e32"
HUB_REPO = "timm/vit_base_patch32_clip_224.laion400m_e32"


class Connections:
    """A stand-in for ``socket.create_connection``: counts attempts, then refuses or answers."""

    def __init__(self, reachable: bool) -> None:
        self.reachable = reachable
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, address: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(address)
        if not self.reachable:
            raise OSError("network is unreachable (test)")

        class _Socket:
            def close(self) -> None:
                pass

        return _Socket()


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No offline switch, an empty model cache, no kept probe answer; returns the empty cache folder."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    hub_access.forget_probe()
    cache = tmp_path / "model-cache"
    cache.mkdir()
    yield cache
    hub_access.forget_probe()


def _count_connections(monkeypatch: pytest.MonkeyPatch, reachable: bool) -> Connections:
    counter = Connections(reachable)
    monkeypatch.setattr(hub_access.socket, "create_connection", counter)
    return counter


def _no_download(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """open_clip's hub download, replaced by a recorder: the check must stop the load before it."""
    from open_clip import pretrained

    calls: list[Any] = []
    monkeypatch.setattr(pretrained, "download_pretrained_from_hf", lambda *a, **k: calls.append(a) or "")
    return calls


def test_offline_switch_fails_without_any_connection(offline_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    connections = _count_connections(monkeypatch, reachable=True)
    downloads = _no_download(monkeypatch)
    spec = ModelSpec(backend="open_clip", model=MODEL, pretrained=TAG, model_cache_dir=str(offline_env))
    with pytest.raises(WeightsUnavailableError) as caught:
        spec.load()
    assert connections.calls == [] and downloads == []
    message = str(caught.value)
    assert "\n" not in message
    # What was tried: model, tag, the repo and the cache folder looked in, and why the hub was not asked.
    for part in (repr(MODEL), repr(TAG), HUB_REPO, str(offline_env), "HF_HUB_OFFLINE=1"):
        assert part in message
    # The offline choices.
    for choice in ("--pretrained ''", "random weights", "--pretrained /path/model.safetensors", "local-dir:"):
        assert choice in message


def test_unreachable_hub_is_probed_once(offline_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    connections = _count_connections(monkeypatch, reachable=False)
    downloads = _no_download(monkeypatch)
    spec = ModelSpec(backend="open_clip", model=MODEL, pretrained=TAG, model_cache_dir=str(offline_env))
    for _ in range(2):  # the second load reuses the first probe's answer
        with pytest.raises(WeightsUnavailableError, match="https://huggingface.co cannot be reached"):
            spec.load()
    assert connections.calls == [("huggingface.co", 443)] and downloads == []


def test_probe_honours_hf_endpoint(offline_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example:8080/")
    connections = _count_connections(monkeypatch, reachable=False)
    with pytest.raises(WeightsUnavailableError, match="http://mirror.example:8080 cannot be reached"):
        hub_access.require_weights("hf", "org/some-clip", None, str(offline_env))
    assert connections.calls == [("mirror.example", 8080)]


def test_reachable_hub_lets_the_load_download(offline_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    connections = _count_connections(monkeypatch, reachable=True)
    assert hub_access.require_weights("open_clip", MODEL, TAG, str(offline_env)) is False
    assert connections.calls == [("huggingface.co", 443)]


def _fake_hub_cache(cache: Path, repo: str, filename: str, payload: bytes) -> Path:
    """The huggingface_hub cache layout (refs/main -> snapshots/<commit>/<file>), written by hand."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    commit = "0" * 40
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    (folder / "snapshots" / commit).mkdir(parents=True)
    path = folder / "snapshots" / commit / filename
    path.write_bytes(payload)
    return path


def test_cached_weights_need_no_hub(offline_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_hub_cache(offline_env, HUB_REPO, "open_clip_model.safetensors", b"x")
    _fake_hub_cache(offline_env, "org/some-clip", "config.json", b"{}")
    connections = _count_connections(monkeypatch, reachable=False)
    # Cached and the hub unreachable: no error, and the load is told to stay offline.
    assert hub_access.require_weights("open_clip", MODEL, TAG, str(offline_env)) is True
    assert hub_access.require_weights("hf", "org/some-clip", None, str(offline_env)) is True
    assert len(connections.calls) == 1
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_access.require_weights("open_clip", MODEL, TAG, str(offline_env)) is True
    assert len(connections.calls) == 1


def test_local_weights_file_loads_offline(offline_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    connections = _count_connections(monkeypatch, reachable=True)
    saved = ModelSpec(backend="open_clip", model="cycles-tiny", pretrained="", seed=7).load()[0]
    path = tmp_path / "tiny.safetensors"
    save_file({k: v.contiguous() for k, v in saved.state_dict().items()}, str(path))
    loaded = ModelSpec(backend="open_clip", model="cycles-tiny", pretrained=str(path), seed=0).load()[0]
    for name, value in saved.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
    # Random weights and a local-dir: folder need nothing from the hub either.
    assert hub_access.require_weights("open_clip", MODEL, "", str(offline_env)) is False
    assert hub_access.require_weights("open_clip", f"local-dir:{tmp_path}", TAG, str(offline_env)) is False
    assert connections.calls == []


def test_cached_hub_file_loads_with_the_hub_unreachable(
    offline_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A tag whose file is in the hub cache loads from it with no request at all (huggingface_hub offline)."""
    import open_clip
    import torch
    from huggingface_hub import constants
    from open_clip import pretrained as open_clip_pretrained
    from safetensors.torch import save_file

    from clip_cycles.encoding.tiny_model import register_tiny_model

    register_tiny_model()
    # Online as far as huggingface_hub knows: only the check's offline mode keeps the load off the network.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    connections = _count_connections(monkeypatch, reachable=False)
    saved = ModelSpec(backend="open_clip", model="cycles-tiny", pretrained="", seed=3).load()[0]
    state = {k: v.contiguous() for k, v in saved.state_dict().items()}
    snapshot = _fake_hub_cache(offline_env, "test-org/cycles-tiny", "open_clip_model.safetensors", b"")
    save_file(state, str(snapshot))
    monkeypatch.setitem(
        open_clip_pretrained._PRETRAINED["cycles-tiny"],
        "hubtest",
        {"hf_hub": "test-org/cycles-tiny/", "mean": (0.5,) * 3, "std": (0.5,) * 3},
    )
    assert "hubtest" in open_clip.list_pretrained_tags_by_model("cycles-tiny")
    loaded = ModelSpec(backend="open_clip", model="cycles-tiny", pretrained="hubtest", model_cache_dir=str(offline_env))
    model = loaded.load()[0]
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    assert len(connections.calls) == 1  # the probe; the load itself asked the hub nothing
    assert constants.HF_HUB_OFFLINE is False  # offline only while the model loaded


def test_clip_cycles_eval_exits_2_with_the_sentence(
    offline_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CLIP_CYCLES_CACHE", str(tmp_path / "cache"))
    connections = _count_connections(monkeypatch, reachable=True)
    code = clip_cycles_main(
        ["eval", "--task", "cycles/coco_strict_size", "--model", MODEL, "--pretrained", TAG]
        + ["--model-cache-dir", str(offline_env), "--output", str(tmp_path / "out.json")]
    )
    err = capsys.readouterr().err
    assert code == 2 and connections.calls == []
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("clip-cycles eval: error: model 'ViT-B-32'"), err
    assert "--pretrained ''" in lines[0] and not (tmp_path / "out.json").exists()


def test_clip_benchmark_prints_the_sentence_once(tmp_path: Path) -> None:
    """The design card's command, offline: exit 2, one line on stderr, nothing downloaded or built."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLIP_CYCLES_", "PYTHONPATH", "HF_"))}
    env.update(
        {
            "CLIP_CYCLES_CACHE": str(tmp_path / "cache"),
            "HF_HUB_OFFLINE": "1",
            "HF_HOME": str(tmp_path / "hf"),
            "PYTHONPATH": str(REPO),
            "TQDM_DISABLE": "1",
        }
    )
    script = "import sys; from clip_cycles.commands.clip_benchmark import main; sys.exit(main(sys.argv[1:]))"
    args = ["eval", "--dataset", "cycles/coco_strict_size", "--model", MODEL, "--output", str(tmp_path / "o.json")]
    done = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("clip_benchmark: error: model 'ViT-B-32' with pretrained 'laion400m_e32'")
    assert "HF_HUB_OFFLINE=1" in lines[0] and "local-dir:" in lines[0]
    assert not (tmp_path / "cache" / "datasets").exists() and not (tmp_path / "o.json").exists()
    assert np.all([not p.is_file() for p in (tmp_path / "hf").rglob("*")])
