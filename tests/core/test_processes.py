"""A worker that dies is noticed (issue 55): the fork pool, the image-decoding DataLoader and ``probe --num-proc 2``.

Each test kills a worker with SIGKILL, as the out-of-memory killer would, and asserts that the run ends
within seconds with the one sentence (the jobs, what was kept, how to resume), never a hang or a traceback.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from clip_cycles.processes import WorkerDiedError, iterate_jobs, run_jobs

REPO = Path(__file__).resolve().parents[2]


def _children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (read from ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # "pid (name) state ppid ...": the name may hold spaces, so split after its closing parenthesis.
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _kill_own_worker(shared: int, job: int) -> int:
    if job == shared:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.05)
    return job


def _slow(shared: None, job: int) -> int:
    time.sleep(0 if job == 0 else 60)
    return os.getpid()


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process parents from /proc")


def test_a_worker_killed_by_the_system_ends_the_run_with_one_sentence() -> None:
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as died:
        run_jobs(_kill_own_worker, 3, list(range(12)), num_proc=2, desc="probes", kept="the features stay cached")
    assert time.monotonic() - start < 30
    sentence = str(died.value)
    assert sentence.startswith("a worker process died while running the probes (")
    assert " of 12 done; the out-of-memory killer is the usual cause); the features stay cached; " in sentence
    assert sentence.endswith("rerun the same command to resume, with a lower --num-proc if memory ran out")
    assert died.value.done <= 3  # job 3 never finished: the count never claims it


def test_a_worker_killed_from_outside_is_noticed_within_seconds() -> None:
    jobs = iterate_jobs(_slow, None, [0, 1, 2, 3], num_proc=2, desc="transfer probes")
    first = next(jobs)  # job 0 done; the workers now sleep in jobs 1 and 2
    workers = _children(os.getpid())
    assert first in workers and len(workers) == 2
    os.kill(workers[1], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError, match=r"^a worker process died while running the transfer probes \(1 of 4 done;"):
        next(jobs)
    assert time.monotonic() - start < 10
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists() and _children(os.getpid()).count(pid)]


def test_a_run_stopped_early_leaves_no_worker_behind() -> None:
    jobs = iterate_jobs(_slow, None, [0, 1, 2, 3], num_proc=2)
    next(jobs)
    workers = _children(os.getpid())
    start = time.monotonic()
    jobs.close()  # the caller stopped (an exception, a break): the workers' 60 s jobs are not waited for
    assert time.monotonic() - start < 10
    assert not set(workers) & set(_children(os.getpid()))


def test_the_same_results_in_the_same_order_as_one_process() -> None:
    assert run_jobs(_kill_own_worker, -1, list(range(9)), num_proc=3) == list(range(9))
    assert run_jobs(_kill_own_worker, -1, list(range(9)), num_proc=1) == list(range(9))


def test_a_killed_image_decoding_worker_is_a_sentence_not_torchs_traceback() -> None:
    torch = pytest.importorskip("torch")
    from PIL import Image

    from clip_cycles.data.sources.images import ImageItem
    from clip_cycles.encoding import encoder

    def transform(image):
        if torch.utils.data.get_worker_info() is not None:  # in a DataLoader worker: die as if OOM-killed
            os.kill(os.getpid(), signal.SIGKILL)
        return torch.zeros(3)

    png = io.BytesIO()
    Image.new("RGB", (4, 4)).save(png, format="PNG")
    items = [ImageItem(key=f"{i}.png", data=png.getvalue()) for i in range(8)]
    session = SimpleNamespace(get=lambda: (None, transform, None), spec=SimpleNamespace(precision="fp32", device="cpu"))
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as died:
        encoder._encode_images(
            session, items, [str(i) for i in range(8)], 2, 1, False, lambda *a: None, encoder.EncodeStats(),
            kept="the features encoded so far stay in the feature cache",
        )  # fmt: skip
    assert time.monotonic() - start < 30
    assert str(died.value) == (
        "a worker process died while running the image-decoding batches (0 of 4 done; the out-of-memory killer is "
        "the usual cause); the features encoded so far stay in the feature cache; rerun the same command to resume, "
        "with a lower --num-workers if memory ran out"
    )
    assert isinstance(died.value.__cause__, RuntimeError)  # torch's own words stay as the cause


def test_killing_a_worker_of_probe_num_proc_2_ends_the_run_within_30_s_with_a_sentence(tmp_path: Path) -> None:
    """The acceptance case: ``clip-cycles probe --num-proc 2``, one worker SIGKILLed once it runs."""
    from clip_cycles.experiments.experiment_data import planted_experiment_data, save_experiment_data

    data = planted_experiment_data({"a": 1, "b": 1}, dim=16, n_train=80, n_validation=30, n_test=40, seeds=(0,))
    features = save_experiment_data(data, tmp_path / "features.npz")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIP_CYCLES_")}
    env.update({"TQDM_DISABLE": "1", "PYTHONPATH": str(REPO)})
    args = ["probe", "--features", str(features), "--out", str(tmp_path / "out"), "--num-proc", "2", "--seeds", "0"]
    args += ["--epochs", "100000", "--no-report", "--cache-dir", str(tmp_path / "cache")]
    run = subprocess.Popen(
        [sys.executable, "-m", "clip_cycles", *args], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while len(_children(run.pid)) < 2 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = _children(run.pid)
        assert len(workers) == 2, run.communicate(timeout=5)
        time.sleep(1)
        os.kill(workers[0], signal.SIGKILL)
        killed = time.monotonic()
        out, err = run.communicate(timeout=30)
        assert time.monotonic() - killed < 30
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 2, err
    sentence = err.decode().strip()
    assert "Traceback" not in sentence and len(sentence.splitlines()) == 1, sentence
    assert re.fullmatch(
        r"clip-cycles probe: error: a worker process died while running the probes \(0 of \d+ done; the out-of-memory "
        f"killer is the usual cause\\); the features file {re.escape(str(features))} is unchanged; rerun the same "
        "command to resume, with a lower --num-proc if memory ran out",
        sentence,
    ), sentence
    assert not (tmp_path / "out" / "probe.json").exists()  # no result claims a run that did not finish
