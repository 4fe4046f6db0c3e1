"""Probes and the transfer grid in processes: the same record for any --num-proc, and really in processes."""

from __future__ import annotations

import json
import os
import time

import pytest

from clip_cycles.experiments.experiment_data import planted_experiment_data
from clip_cycles.experiments.probes import ProbeSettings, run_probes
from clip_cycles.experiments.transfer import TransferSettings, run_transfer
from clip_cycles.processes import check_num_proc, run_jobs


@pytest.fixture(scope="module")
def data():
    return planted_experiment_data({"a": 1, "b": 1, "c": 2}, dim=16, n_train=80, n_validation=30, n_test=40, seeds=(0, 1))


def _job(shared: int, job: int) -> tuple[int, int, int]:
    time.sleep(0.05)  # long enough that both workers take jobs
    return job, job * shared, os.getpid()


def test_jobs_come_back_in_order_from_several_processes() -> None:
    out = run_jobs(_job, 3, list(range(12)), num_proc=2)
    assert [(j, v) for j, v, _ in out] == [(j, 3 * j) for j in range(12)]
    pids = {pid for _, _, pid in out}
    assert os.getpid() not in pids and len(pids) == 2  # forked workers did the work
    alone = run_jobs(_job, 3, list(range(4)), num_proc=1)
    assert {pid for _, _, pid in alone} == {os.getpid()}


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_a_bad_process_count_is_a_sentence_naming_the_flag(bad) -> None:
    with pytest.raises(ValueError, match=r"--num-proc must be a whole number of processes, 1 or more"):
        check_num_proc(bad)


def test_probes_are_the_same_record_in_one_process_or_two(data) -> None:
    settings = ProbeSettings(epochs=3, ranks=(1, 4), full_heads=("bilinear",), seeds=(0, 1), audit=False, min_cycles=5)
    one = run_probes(data, settings, num_proc=1)
    two = run_probes(data, settings, num_proc=2)
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    assert "num_proc" not in json.dumps(one["settings"])  # not part of what the record says it computed
    # Every family has its three probes (ranks 1 and 4, bilinear), each trained on both seeds.
    assert len(one["families"]) >= 3
    for family in one["families"].values():
        assert len(family["probes"]) == 3 and all(set(p["runs"]) == {"0", "1"} for p in family["probes"].values())


def test_the_transfer_grid_is_the_same_record_in_one_process_or_two(data) -> None:
    settings = TransferSettings(epochs=3, rank=4, seeds=(0, 1), min_cycles=5)
    one = run_transfer(data, settings, num_proc=1)
    two = run_transfer(data, settings, num_proc=2)
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    k = len(one["families"])
    assert k >= 3 and all(len(row) == k for row in one["per_seed"]["0"]["transfer"])


@pytest.mark.parametrize("command", ["probe", "transfer"])
def test_a_bad_num_proc_is_refused_before_any_work(command: str, tmp_path, capsys) -> None:
    from clip_cycles.cli import main

    out = tmp_path / "out"
    features = tmp_path / "f.npz"
    features.write_bytes(b"not read")
    assert main([command, "--num-proc", "0", "--features", str(features), "--out", str(out)]) == 2
    assert "--num-proc must be a whole number of processes, 1 or more, not 0" in capsys.readouterr().err
    assert not out.exists()


HANG_SCRIPT = """
import torch
from clip_cycles.processes import run_jobs
torch.set_num_threads(2)
big = torch.randn(4000, 512)
(big[torch.randperm(4000)] - big).sum()  # the parent's OpenMP pool is started

def job(shared, k):
    x = shared[torch.randperm(shared.shape[0])] - shared  # a kernel torch would split over threads
    return float(x.abs().sum()) + k

print(len(run_jobs(job, big, list(range(6)), num_proc=2)))
"""


def test_workers_forked_after_torch_used_its_threads_do_not_hang(tmp_path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", HANG_SCRIPT], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "6", done.stderr[-2000:]
