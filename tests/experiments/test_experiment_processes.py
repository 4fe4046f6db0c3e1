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
    # The range is declared on the options model's field: the one Options sentence, naming flag and field.
    assert "option --num-proc (num_proc): input should be greater than or equal to 1, got 0" in capsys.readouterr().err
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


# --- one fork pool for the experiments and the dataset builds ------------------------------------------------


def _square_with_pid(shared: int, job: int) -> tuple[int, int]:
    time.sleep(0.02)
    return job * job + shared, os.getpid()


def _build_map_in_a_worker(shared: None, job: int) -> tuple[list[int], set[int], int]:
    from clip_cycles.data.families.registry import parallel_map

    mapped = parallel_map(lambda x: (x + job, os.getpid()), list(range(6)), chunk_size=2, processes=2)
    return [value for value, _ in mapped], {pid for _, pid in mapped}, os.getpid()


def test_the_one_pool_serves_the_builds_and_the_experiments_with_the_same_results() -> None:
    from clip_cycles.data.families.registry import parallel_imap, parallel_map

    items = list(range(20))
    serial = [(x * x + 1) for x in items]
    experiments = run_jobs(_square_with_pid, 1, items, num_proc=2)
    builds = parallel_map(lambda x: _square_with_pid(1, x), items, chunk_size=3, processes=2)
    families = list(parallel_imap(lambda x: _square_with_pid(1, x), items, processes=2))
    for results in (experiments, builds, families):
        assert [value for value, _ in results] == serial  # job order, the values one process gives
        assert os.getpid() not in {pid for _, pid in results}  # and really on forked workers


def test_a_build_map_inside_an_experiment_worker_runs_in_that_worker() -> None:
    # One pool: a worker of either caller never starts a pool of its own (a daemonic worker cannot have children).
    out = run_jobs(_build_map_in_a_worker, None, [10, 20], num_proc=2)
    assert [values for values, _, _ in out] == [[10, 11, 12, 13, 14, 15], [20, 21, 22, 23, 24, 25]]
    assert all(pids == {worker} for _, pids, worker in out) and os.getpid() not in {w for _, _, w in out}


#: Process pools outside processes.py: none (paper 2's scikit-learn fits run on the one fork pool too).
OTHER_PROCESS_POOLS: set[str] = set()


def test_only_the_processes_module_starts_processes() -> None:
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "clip_cycles"
    starters = set()
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom)) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] == "multiprocessing" or n == "ProcessPoolExecutor" for n in names):
                starters.add(path.relative_to(package).as_posix())
    assert starters - OTHER_PROCESS_POOLS == {"processes.py"}
