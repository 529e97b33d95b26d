"""A simulated multi-GPU world on the CPU: ranks are processes, heaps live in shared memory.

Each rank is a process (multiprocessing, spawn) that runs Triton under the interpreter
(``TRITON_INTERPRET=1``). Every rank's heap is a file in shared memory that every process maps
with ``mmap``, so each process computes its own ``heap_bases`` from its own mappings, exactly as a
GPU rank does from PyTorch symmetric memory. The interpreter dereferences raw addresses, so a
pointer translated into a peer's heap reads and writes the peer's memory, and its atomics (hardware
atomics on the shared pages) order flags across processes. The ranks also share a gloo process
group (``heap.group``) for the torch collectives of the baselines and references.

The ops and kernels are the very ones that run on GPUs: :class:`SimHeap` and
:class:`seer.symmetric_heap.SymmetricHeap` share the :class:`seer.symmetric_heap.Heap` interface.

    results = run_world(4, fn, x)   # fn(heap, x) on every rank; per-rank results, rank order
"""
from __future__ import annotations

import atexit
import functools
import math
import multiprocessing as mp
import multiprocessing.connection
import numbers
import os
import pickle
import shutil
import sys
import tempfile
import threading
import time
import traceback
import weakref
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import torch

from seer.errors import InputError, SeerError
from seer.symmetric_heap import Heap, _heap_bytes, _spins, _whole

DEFAULT_HEAP_BYTES = 8 << 20
DEFAULT_TIMEOUT_S = 180.0
# A poll of a flag costs tens of microseconds under the interpreter: this bounds a wait to a minute or so.
SIM_MAX_SPINS = 1_000_000
_SHARED_MEMORY = Path("/dev/shm")


class SimHeap(Heap):
    """This rank's view of the simulated symmetric heap: every rank's heap file mapped here."""

    SIZE_HINT = "SimWorld(world_size, heap_bytes=...)"

    def __init__(self, rank: int, world_size: int, folder: Path, size_bytes: int, barrier, group,
                 *, max_spins: int = SIM_MAX_SPINS):
        self._views = [_map_heap(_heap_path(folder, r), size_bytes) for r in range(world_size)]
        bases = torch.tensor([view.data_ptr() for view in self._views], dtype=torch.int64)
        super().__init__(self._views[rank], bases, rank, world_size, group, max_spins=max_spins)
        self._barrier = barrier

    def barrier(self) -> None:
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise SeerError(f"rank {self.rank}: the simulated world's barrier broke (a peer failed or "
                            f"timed out)") from None

    def _peer_bytes(self, rank: int) -> torch.Tensor:
        return self._views[rank]


def _check_timeout(timeout_s) -> None:
    """InputError unless ``timeout_s`` is a positive, finite number of seconds: the barrier and gloo take
    it, and 0 breaks the first barrier while a negative one, None or NaN fails inside a rank's start."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real) or not 0 < timeout_s < math.inf:
        raise InputError(f"timeout_s must be a positive, finite number of seconds, got {timeout_s!r}")


class SimWorld:
    """``world_size`` rank processes kept alive between :meth:`run` calls (starting one costs seconds).

    ``timeout_s`` bounds every run, barrier and gloo collective, and the ranks' gloo rendezvous as
    they start (a start on a loaded machine can take tens of seconds: give a short timeout to a
    run, ``run(..., timeout_s=)``, not to the world); a world that times out is shut down.
    """

    def __init__(self, world_size: int, *, heap_bytes: int = DEFAULT_HEAP_BYTES,
                 timeout_s: float = DEFAULT_TIMEOUT_S, max_spins: int = SIM_MAX_SPINS):
        given, world_size = world_size, _whole(world_size)
        if world_size is None or world_size < 1:
            raise InputError(f"world_size must be a whole number of at least 1, got {given!r}")
        heap_bytes = _heap_bytes(heap_bytes, "heap_bytes")
        _check_timeout(timeout_s)
        _spins(max_spins)  # here, not in each rank's start
        main_file = _main_file()
        if _spawn_runs_main_file() and not os.path.isfile(main_file):
            raise InputError(f"the simulated world spawns its ranks, which run __main__ again from {main_file!r}, no "
                             "file (a script read from stdin?): run it from a file")
        self.world_size = world_size
        self.timeout_s = timeout_s
        parent = _SHARED_MEMORY if _SHARED_MEMORY.is_dir() else None
        self._folder = Path(tempfile.mkdtemp(prefix="seer-simworld-", dir=parent))
        self._conns, self._processes = [], []
        # Registered before anything can fail, so that a failed start leaves no folder nor process behind.
        self._finalizer = weakref.finalize(self, _shut_down, self._processes, self._conns, self._folder)
        try:
            self._start(world_size, heap_bytes, max_spins, timeout_s)
        except BaseException:
            self.close()
            raise

    def _start(self, world_size: int, heap_bytes: int, max_spins: int, timeout_s: float) -> None:
        for rank in range(world_size):
            with open(_heap_path(self._folder, rank), "wb") as file:
                file.truncate(heap_bytes)
        context = mp.get_context("spawn")
        self._barrier = context.Barrier(world_size, timeout=timeout_s)
        with _interpreted_children():
            for rank in range(world_size):
                parent_end, child_end = context.Pipe()
                process = context.Process(
                    target=_rank_main, daemon=True, name=f"seer-rank{rank}",
                    args=(rank, world_size, self._folder, heap_bytes, max_spins, timeout_s, self._barrier, child_end))
                process.start()
                child_end.close()
                self._conns.append(parent_end)
                self._processes.append(process)
        self._raise_failure(self._collect(max(timeout_s, 120.0), "start")[1])

    @property
    def alive(self) -> bool:
        return self._finalizer.alive

    def run(self, fn, *args, timeout_s: float | None = None) -> list:
        """``fn(heap, *args)`` on every rank; the results in rank order.

        ``fn`` and ``args`` must pickle (a module-level function). A rank's exception is raised
        here, its message prefixed with the rank and the rank's traceback attached as the cause;
        where the failure left the ranks' heaps out of step (one allocated what its peers did not),
        the world is shut down too, as it is when a run is interrupted.
        """
        if not self.alive:
            raise SeerError("this simulated world was shut down; make a new SimWorld")
        _check_importable(fn)
        if timeout_s is not None:
            _check_timeout(timeout_s)
        results, failures = self._exchange(fn, args, self.timeout_s if timeout_s is None else timeout_s)
        if failures and self.alive and self._out_of_step():
            self.close()
            self._raise_failure(failures, "; the world was shut down: the failure left the ranks' heaps out of "
                                          "step (allocations or epochs one rank made and its peers did not)")
        self._raise_failure(failures)
        return results

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> SimWorld:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _collect(self, timeout_s: float, what: str) -> tuple[list, list]:
        """Every rank's reply: (results in rank order, [(rank, exception, its traceback)] of the failed)."""
        results: list = [None] * self.world_size
        failures: list[tuple[int, BaseException, str]] = []
        pending = set(range(self.world_size))
        deadline = time.monotonic() + timeout_s
        while pending:
            waiting = {self._conns[r]: r for r in pending}
            ready = mp.connection.wait(list(waiting), timeout=max(deadline - time.monotonic(), 0))
            if not ready:
                for process in self._processes:  # hung: no point waiting for a clean exit
                    process.kill()
                self.close()
                raise SeerError(f"simulated world: rank(s) {sorted(pending)} did not finish {what} within "
                                f"{timeout_s:.0f} s; the world was shut down")
            for conn in ready:
                rank = waiting[conn]
                pending.discard(rank)
                try:
                    status, payload, remote_trace = pickle.loads(conn.recv_bytes())
                except EOFError:
                    self._processes[rank].join(5)
                    status, payload = "error", SeerError(
                        f"the process died (exit code {self._processes[rank].exitcode})")
                    remote_trace = ""
                if status == "ok":
                    results[rank] = payload
                    continue
                if not failures:
                    self._barrier.abort()  # peers blocked in a barrier fail now instead of at the timeout
                failures.append((rank, payload, remote_trace))
        if failures:
            self._barrier.reset()
            if any(not p.is_alive() for p in self._processes):
                self.close()
        return results, failures

    def _exchange(self, fn, args: tuple, timeout_s: float) -> tuple[list, list]:
        """``fn(heap, *args)`` sent to every rank and :meth:`_collect`'s replies; interrupted, the world
        is shut down (replies still on their way would be read as the next run's)."""
        job = pickle.dumps((fn, args))
        try:
            for conn in self._conns:
                conn.send_bytes(job)
            return self._collect(timeout_s, getattr(fn, "__name__", "fn"))
        except BaseException:
            self.close()
            raise

    def _out_of_step(self) -> bool:
        """Whether the ranks' heaps differ in what they allocated or the epochs they reached."""
        layouts, failures = self._exchange(_heap_layout, (), self.timeout_s)
        self._raise_failure(failures)
        return len(set(layouts)) > 1

    @staticmethod
    def _raise_failure(failures: list, more: str = "") -> None:
        if failures:
            _raise_from_rank(*failures[0], more)


def run_world(world_size: int, fn, *args, heap_bytes: int = DEFAULT_HEAP_BYTES,
              timeout_s: float = DEFAULT_TIMEOUT_S, max_spins: int = SIM_MAX_SPINS) -> list:
    """``fn(heap, *args)`` on each rank of a fresh simulated world; the per-rank results."""
    with SimWorld(world_size, heap_bytes=heap_bytes, timeout_s=timeout_s, max_spins=max_spins) as world:
        return world.run(fn, *args)


def _check_importable(fn) -> None:
    """Rank processes are spawned: they find ``fn`` by importing its module, which a REPL or a notebook
    has not (the ranks then die with an AttributeError of their own)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if getattr(fn, "__module__", None) == "__main__" and _main_file() is None:
        raise InputError(f"the rank function {getattr(fn, '__name__', fn)!r} is defined in a __main__ that the "
                         "ranks' processes cannot import (a REPL or a notebook); define it in a module or a script file")


def _main_file() -> str | None:
    return getattr(sys.modules.get("__main__"), "__file__", None)


def _spawn_runs_main_file() -> bool:
    """Whether spawned processes run __main__ from its file, as multiprocessing decides: not for a
    module run by name (``python -m``, a zipapp), nor in a frozen application."""
    main = sys.modules.get("__main__")
    return (getattr(getattr(main, "__spec__", None), "name", None) is None and not getattr(sys, "frozen", False)
            and _main_file() is not None)


_shared: dict[int, SimWorld] = {}


def shared_world(world_size: int) -> SimWorld:
    """A default-sized world of ``world_size`` ranks, kept for the life of this process (tests share it)."""
    world = _shared.get(world_size)
    if world is None or not world.alive:
        world = _shared[world_size] = SimWorld(world_size)
    return world


@atexit.register
def _close_shared() -> None:
    for world in _shared.values():
        world.close()


# ---------------------------------------------------------------- inside a rank process
def _rank_main(rank, world_size, folder, heap_bytes, max_spins, timeout_s, barrier, conn) -> None:
    torch.set_num_threads(1)  # ranks share the few cores; one thread each avoids oversubscription
    try:
        group = _gloo_group(rank, world_size, folder, timeout_s)
        heap = SimHeap(rank, world_size, folder, heap_bytes, barrier, group, max_spins=max_spins)
    except BaseException as exc:
        conn.send_bytes(pickle.dumps(("error", _portable(exc), traceback.format_exc())))
        return
    conn.send_bytes(pickle.dumps(("ok", None, "")))
    while True:
        try:
            job = conn.recv_bytes()
        except EOFError:  # the parent went away
            break
        if not job:
            break
        try:
            fn, args = pickle.loads(job)
            reply = pickle.dumps(("ok", fn(heap, *args), ""))  # plain pickle: tensors are copied, never shared
        except BaseException as exc:
            reply = pickle.dumps(("error", _portable(exc), traceback.format_exc()))
        conn.send_bytes(reply)
    torch.distributed.destroy_process_group()


def _heap_layout(heap: SimHeap) -> tuple:
    """What must match on every rank for twins to sit at one offset and flags to count alike."""
    base = heap._local.data_ptr()
    scratch = sorted((name, t.data_ptr() - base, t.numel()) for name, t in heap._scratch.items())
    return heap._used, tuple(scratch), heap._epoch


def _gloo_group(rank, world_size, folder, timeout_s):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{folder / 'gloo-store'}", rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=timeout_s))
    return dist.group.WORLD


def _map_heap(path: Path, size_bytes: int) -> torch.Tensor:
    storage = torch.UntypedStorage.from_file(str(path), shared=True, nbytes=size_bytes)
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, (size_bytes,), (1,))


def _heap_path(folder: Path, rank: int) -> Path:
    return Path(folder) / f"heap{rank}"


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a SeerError carrying its type and message."""
    try:
        return pickle.loads(pickle.dumps(exc))
    except Exception:
        return SeerError(f"{type(exc).__name__}: {exc}")


# ---------------------------------------------------------------- in the parent
@contextmanager
def _interpreted_children():
    """Children inherit the environment at start: make them run Triton under the interpreter."""
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = saved


class _RemoteTraceback(Exception):
    def __str__(self) -> str:
        return self.args[0]


def _raise_from_rank(rank: int, exc: BaseException, remote_trace: str, more: str = ""):
    if exc.args and isinstance(exc.args[0], str):
        exc.args = (f"rank {rank}: {exc.args[0]}{more}", *exc.args[1:])
    else:
        exc.args = (f"rank {rank}{more}", *exc.args)
    raise exc from _RemoteTraceback(f"\n--- traceback in rank {rank} ---\n{remote_trace}")


def _shut_down(processes, conns, folder: Path) -> None:
    for conn in conns:
        try:
            conn.send_bytes(b"")  # the stop message
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + 10
    for process in processes:
        process.join(max(deadline - time.monotonic(), 0))
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join()
    for conn in conns:
        conn.close()
    shutil.rmtree(folder, ignore_errors=True)
