"""Independent jobs in forked worker processes, results in job order: more cores, never other numbers.

Each job runs ``fn(shared, job)``; ``shared`` (features, folds) reaches the workers by ``fork``
(copied on write, never serialised), jobs and results are small plain values. Workers compute
what the parent would (each job seeds itself; each worker runs torch on one thread, which is
also what keeps a forked child out of the parent's OpenMP pool), so one process and many give
the same results, in the same order.

This is the project's one fork pool: :func:`run_jobs` (experiments: a list, a progress bar) and
:func:`iterate_jobs` (each result as soon as it and all before it are done; the dataset builds'
``parallel_map`` / ``parallel_imap`` in :mod:`clip_cycles.data.families.registry`) share it. A pool is never
started inside a worker: there the jobs run in that worker, in order.

A worker that dies (the out-of-memory killer's ``SIGKILL``, a crash in native code) is noticed at
once: the pool is a :class:`concurrent.futures.ProcessPoolExecutor` on ``fork``, which watches every
worker's sentinel, and the run stops with one :class:`WorkerDiedError` sentence naming the jobs,
what the caller kept and how to resume (a ``multiprocessing.Pool`` silently replaces the dead
worker and waits forever for the job it held).
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Iterator, NoReturn, Sequence, TypeVar

from clip_cycles.verbosity import progress_disable

J = TypeVar("J")
R = TypeVar("R")

#: What the forked workers read: set by :func:`iterate_jobs` just before the pool starts, reset after it.
_SHARED: tuple[Callable[[Any, Any], Any], Any] | None = None
#: How long :meth:`Helper.finish` waits for a helper to end its current piece of work before killing it.
HELPER_STOP_SECONDS = 60.0
#: A helper's replaced standard streams, held so that dropping them never flushes the parent's buffered output.
_HELD_STREAMS: list[tuple[Any, Any]] = []
#: What a caller that says nothing about its caches kept when a worker died.
NOTHING_KEPT = "nothing of this step was kept"


class WorkerDiedError(RuntimeError):
    """A worker process died while running ``desc`` (``done`` of ``total`` finished): the whole sentence for the user.

    ``kept`` says what survives (a caller that knows its caches says so through :meth:`keeping`);
    ``flag`` is the process-count flag a rerun may lower.
    """

    def __init__(self, desc: str, done: int, total: int, kept: str = NOTHING_KEPT, flag: str = "--num-proc") -> None:
        self.desc, self.done, self.total, self.kept, self.flag = desc, done, total, kept, flag
        super().__init__(
            f"a worker process died while running the {desc} ({done} of {total} done; the out-of-memory "
            f"killer is the usual cause); {kept}; rerun the same command to resume, "
            f"with a lower {flag} if memory ran out"
        )

    def keeping(self, kept: str) -> WorkerDiedError:
        """The same death, saying ``kept`` survives (the command layer knows its caches)."""
        return WorkerDiedError(self.desc, self.done, self.total, kept, self.flag)


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def check_num_proc(num_proc: int | None, flag: str = "--num-proc") -> int:
    """``num_proc`` as a count of processes (None: :func:`usable_cores`); ValueError naming ``flag`` below 1."""
    if num_proc is None:
        return usable_cores()
    if isinstance(num_proc, bool) or not isinstance(num_proc, int) or num_proc < 1:
        raise ValueError(f"{flag} must be a whole number of processes, 1 or more, not {num_proc!r}")
    return num_proc


def _single_threaded() -> None:
    """Start of each worker: one intra-op thread for torch (if the parent imported it) and for BLAS.

    A forked child must not enter an OpenMP parallel region the parent's thread pool owned (it
    would wait for threads that were not copied); with one thread torch runs every kernel inline.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    # numpy's BLAS too (the exact float64 scoring): two workers of two BLAS threads each on two
    # cores spin against each other and run slower than one process.
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def _run_one(job: Any) -> Any:
    assert _SHARED is not None
    fn, shared = _SHARED
    return fn(shared, job)


def _stop_workers(executor: ProcessPoolExecutor) -> None:
    """Kill the workers still running jobs nobody will read (the caller stopped early or a job raised)."""
    terminate = getattr(executor, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    # Before 3.14 the executor keeps its worker processes here; shutdown alone would wait for their jobs.
    for process in list((getattr(executor, "_processes", None) or {}).values()):
        if process.is_alive():
            process.terminate()


def iterate_jobs(
    fn: Callable[[Any, J], R],
    shared: Any,
    jobs: Sequence[J],
    num_proc: int | None = None,
    desc: str = "jobs",
    kept: str = NOTHING_KEPT,
) -> Iterator[R]:
    """``fn(shared, job) for job in jobs``, in job order, on up to ``num_proc`` forked processes (None: the usable cores).

    The next free worker takes the next job; each result is yielded as soon as it and all before it
    are done. One process, one job, a platform without ``fork``, or a call from inside a worker (or
    while this process's pool is open) runs the jobs here, in order. A worker that dies raises
    :class:`WorkerDiedError` (with ``desc`` and ``kept``: what the caller's
    caches hold) within moments; the other workers are stopped.
    """
    global _SHARED
    workers = min(check_num_proc(num_proc), len(jobs))
    if workers <= 1 or _SHARED is not None or "fork" not in multiprocessing.get_all_start_methods():
        for job in jobs:
            yield fn(shared, job)
        return
    _SHARED = (fn, shared)  # inherited by the forked workers: ``shared`` is never pickled
    context = multiprocessing.get_context("fork")
    executor = ProcessPoolExecutor(workers, mp_context=context, initializer=_single_threaded)
    finished = False
    try:
        # One job per task, read in order: a long job never holds the ones behind it in another worker.
        # With fork the executor starts every worker at the first submit, while ``_SHARED`` is set.
        futures = [executor.submit(_run_one, job) for job in jobs]
        for done, future in enumerate(futures):
            try:
                result = future.result()
            except BrokenProcessPool as error:
                raise WorkerDiedError(desc, done, len(jobs), kept) from error
            yield result
        finished = True
    finally:
        _SHARED = None
        if not finished:
            _stop_workers(executor)
        executor.shutdown(wait=True, cancel_futures=True)


def run_jobs(
    fn: Callable[[Any, J], R],
    shared: Any,
    jobs: Sequence[J],
    num_proc: int | None = None,
    desc: str = "jobs",
    kept: str = NOTHING_KEPT,
) -> list[R]:
    """``[fn(shared, job) for job in jobs]``, in up to ``num_proc`` forked processes (None: the usable cores).

    :func:`iterate_jobs` collected into a list; a progress bar counts finished jobs.
    """
    from tqdm.auto import tqdm

    check_num_proc(num_proc)  # a bad count is refused before the bar is drawn
    with tqdm(total=len(jobs), desc=desc, disable=progress_disable(), leave=False) as bar:
        results = []
        for result in iterate_jobs(fn, shared, jobs, num_proc, desc, kept):
            results.append(result)
            bar.update(1)
        return results


class Helper:
    """A forked child doing work the parent would otherwise do later (see :func:`start_helper`)."""

    def __init__(self, pid: int, stop_fd: int) -> None:
        self.pid, self._stop_fd = pid, stop_fd

    def finish(self, timeout: float = HELPER_STOP_SECONDS) -> bool:
        """Ask the child to stop (it ends after its current piece of work) and wait for it; whether it exited cleanly.

        A child still running after ``timeout`` seconds (stuck on a stalled file system) is killed:
        the parent never waits on an accelerator longer than that.
        """
        if self._stop_fd < 0:
            return False
        os.close(self._stop_fd)
        self._stop_fd = -1
        deadline = time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status) == 0
            if time.monotonic() >= deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                return False
            time.sleep(0.002)


def start_helper(work: Callable[[Callable[[], bool]], None]) -> Helper | None:
    """Run ``work(stopped)`` in a forked child beside the parent, on a core the parent leaves idle; None when it would not help.

    The helper is an accelerator, never a dependency: its only effect must be files the parent
    reads and checks anyway (cache records it would otherwise compute itself), so a helper that
    dies, fails or is never started changes no result. ``stopped()`` turns True once the parent
    calls :meth:`Helper.finish` (or dies): the work checks it between pieces. The child writes
    nothing to the terminal (its warnings, logs and bars are silenced), never runs the parent's
    exit handlers, and runs torch and BLAS on one thread (:func:`_single_threaded`). Not started
    with one usable core, inside a pool worker, or where ``fork`` is not the platform's (only Linux
    forks a process that has loaded numpy's and torch's thread pools safely).
    """
    if usable_cores() < 2 or _SHARED is not None or not sys.platform.startswith("linux"):
        return None
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid:
        os.close(read_fd)
        return Helper(pid, write_fd)
    code = 1
    try:  # the child: nothing it does reaches the parent but its files
        os.close(write_fd)
        logging.disable(logging.CRITICAL)
        warnings.simplefilter("ignore")
        # The parent's streams are kept, never flushed here (their buffers hold the parent's unwritten
        # output), and replaced at both levels: Python's objects and the descriptors a library writes to.
        _HELD_STREAMS.append((sys.stdout, sys.stderr))
        try:
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            sys.stdout = sys.stderr = open(quiet, "w", closefd=False)  # noqa: SIM115 - lives until os._exit
        except OSError:  # no /dev/null: logs and warnings are off already
            pass
        _single_threaded()

        def stopped() -> bool:
            # The pipe turns readable (end of file) when the parent closes its end or exits.
            return bool(select.select([read_fd], [], [], 0)[0])

        work(stopped)
        code = 0
    except BaseException:  # noqa: BLE001 - whatever went wrong, the parent does this work itself
        pass
    finally:
        os._exit(code)


def exit_without_teardown(code: int) -> NoReturn:
    """End the process as the interpreter's own exit would, less its teardown of every module and object.

    Python's exit waits for the threads that are not daemons, runs the ``atexit`` handlers and
    flushes the standard streams, then frees every module and object one by one: about a second
    once torch and OpenCLIP are loaded (0.4 s for torch alone), which nothing outside the process
    sees. This does the first three, as Python does them, then ends the process with ``code``
    (120, as Python's, when a standard stream cannot be flushed).
    """
    shutdown = getattr(threading, "_shutdown", None)  # CPython's own wait for the non-daemon threads
    if shutdown is not None:
        shutdown()
    else:  # pragma: no cover - other interpreters
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and not thread.daemon:
                thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`), a closed stream: Python exits 120 then
            code = 120
    os._exit(code)
