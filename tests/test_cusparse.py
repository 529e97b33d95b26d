"""seer.cusparse off CUDA: the binding says it is unavailable and refuses to plan, clearly (the
variant built on it then runs torch's product; tests/test_spmv_kernels.py checks its results and
tests/test_spmv_gpu.py the library itself); and, against a library that records its calls, a
plan's call makes only the ctypes calls that something changed asks for."""
import contextlib

import pytest
import torch

from seer import cusparse
from seer.errors import SeerError

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CUDA-less path")


def test_unavailable_without_cuda():
    assert not cusparse.available()


def test_a_plan_names_what_is_missing():
    indptr, indices, values = torch.tensor([0, 1]), torch.tensor([0]), torch.ones(1)
    with pytest.raises(SeerError, match="cuSPARSE is not loaded"):
        cusparse.SpmvPlan(indptr, indices, values, (1, 1))


class _RecordingLibrary:
    """cuSPARSE's entry points as the plan calls them, recorded (status 0: success)."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def entry(*args):
            self.calls.append((name, args))
            return 0
        return entry

    def named(self, name):
        return [args for called, args in self.calls if called == name]


def test_a_call_binds_a_stream_and_points_a_vector_only_when_they_changed(monkeypatch):
    library, streams = _RecordingLibrary(), iter([11, 11, 11, 22, 22])
    monkeypatch.setattr(cusparse, "_library", library)
    monkeypatch.setattr(cusparse, "_functions", lambda: library)
    monkeypatch.setattr(cusparse, "_handles", type(cusparse._handles)())
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: next(streams), raising=False)
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
    indptr, indices, values = torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.ones(2)
    x, y, other_y = torch.ones(2), torch.empty(2), torch.empty(2)  # alive: the plan's placeholders lie elsewhere
    plan = cusparse.SpmvPlan(indptr, indices, values, (2, 2), preprocess=False)  # stream 11 bound
    plan(x, y)        # stream 11 again: not rebound; x and y new: both pointed
    plan(x, y)        # nothing moved: the product alone
    plan(x, other_y)  # stream 22: rebound; y pointed
    plan(x, other_y)  # the product alone
    assert [args[1] for args in library.named("cusparseSetStream")] == [11, 22]
    assert [args[1] for args in library.named("cusparseDnVecSetValues")] == [x.data_ptr(), y.data_ptr(),
                                                                            other_y.data_ptr()]
    assert len(library.named("cusparseSpMV")) == 4


def test_a_threads_handle_is_destroyed_when_the_thread_ends(monkeypatch):
    """Each thread has its own handle: one that ends must not leak it (and its device memory)."""
    import gc
    import threading

    library = _RecordingLibrary()
    monkeypatch.setattr(cusparse, "_library", library)
    monkeypatch.setattr(cusparse, "_handles", type(cusparse._handles)())
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 11, raising=False)
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
    worker = threading.Thread(target=lambda: [cusparse._handle(0), cusparse._handle(0)])
    worker.start()
    worker.join()
    gc.collect()
    assert len(library.named("cusparseCreate")) == 1
    assert len(library.named("cusparseDestroy")) == 1
