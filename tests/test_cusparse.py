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
    """cuSPARSE's entry points as the plan calls them, recorded (status 0: success, or ``failing``'s
    status for the entry points it names)."""

    def __init__(self, failing=None):
        self.calls, self.failing = [], failing or {}

    def __getattr__(self, name):
        def entry(*args):
            self.calls.append((name, args))
            return b"a failure on purpose" if name == "cusparseGetErrorString" else self.failing.get(name, 0)
        return entry

    def named(self, name):
        return [args for called, args in self.calls if called == name]


def _recorded(monkeypatch, streams, failing=None):
    """A recording library in cuSPARSE's place, torch's current raw stream read from ``streams``, and
    the streams a tensor was recorded on (``record_stream``) listed."""
    library, recorded = _RecordingLibrary(failing), []
    monkeypatch.setattr(cusparse, "_library", library)
    monkeypatch.setattr(cusparse, "_functions", lambda: library)
    monkeypatch.setattr(cusparse, "_handles", type(cusparse._handles)())
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: next(streams), raising=False)
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: f"stream of device {device}")
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda tensor, stream: recorded.append(stream))
    return library, recorded


def test_a_call_binds_a_stream_and_points_a_vector_only_when_they_changed(monkeypatch):
    library, recorded = _recorded(monkeypatch, iter([11, 11, 11, 22, 22]))
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
    # The workspace, made on stream 11, was used on 22 once: the allocator must wait for 22's work
    # before it reuses the memory (a review: a new tensor could overwrite it mid-product).
    assert recorded == [f"stream of device {values.device.index}"]


def test_a_failed_stream_binding_or_vector_pointing_raises_and_is_tried_again(monkeypatch):
    """Their statuses went unread: a failure left the cache saying done, and later calls ran on the
    old stream or address without a word."""
    for failing in ("cusparseSetStream", "cusparseDnVecSetValues"):
        streams = iter([11, 11, 22, 22] if failing == "cusparseSetStream" else [11] * 4)
        library, _ = _recorded(monkeypatch, streams, {failing: 7})
        indptr, indices, values = torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.ones(2)
        x, y = torch.ones(2), torch.empty(2)
        if failing == "cusparseSetStream":  # the handle's first binding fails when the plan is made
            with pytest.raises(SeerError, match=f"cuSPARSE {failing} failed: a failure on purpose"):
                cusparse.SpmvPlan(indptr, indices, values, (2, 2), preprocess=False)
            continue
        plan = cusparse.SpmvPlan(indptr, indices, values, (2, 2), preprocess=False)
        for _ in range(2):
            with pytest.raises(SeerError, match=f"cuSPARSE {failing} failed: a failure on purpose"):
                plan(x, y)
        assert len(library.named(failing)) == 2 and not library.named("cusparseSpMV")


def test_a_plan_names_the_dtype_or_algorithm_it_does_not_take(monkeypatch, recwarn):
    _recorded(monkeypatch, iter([11] * 4))
    indptr, indices = torch.tensor([0, 1]), torch.tensor([0])
    for values, algorithm, problem in ((torch.ones(1, dtype=torch.float64), "csr_alg1", "values' dtype of"),
                                       (torch.ones(1), "fastest", "algorithm of")):
        with pytest.raises(SeerError, match=f"a cuSPARSE plan takes an {problem} .*got"):
            cusparse.SpmvPlan(indptr, indices, values, (1, 1), algorithm=algorithm)
    import gc
    gc.collect()
    assert not [w for w in recwarn if "Exception ignored" in str(w.message)]


def test_a_library_that_will_not_load_leaves_cusparse_unavailable_with_a_warning(monkeypatch, tmp_path):
    not_a_library = tmp_path / "libcusparse.so.12"
    not_a_library.write_text("not an ELF file")
    monkeypatch.setattr(cusparse, "_library", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cusparse, "loaded_library", lambda name: str(not_a_library))
    with pytest.warns(UserWarning, match="could not load the cuSPARSE library torch loaded"):
        assert not cusparse.available()
    assert cusparse._library is False


def test_a_mapped_librarys_path_is_read_whole():
    """The last word of a maps line was taken for the path: a folder with a space in its name gave
    a path that does not exist, and loading it raised OSError at a user's first SpMV."""
    from seer.native import library_in_maps

    lines = ["7f00-7f01 r--p 00000000 00:00 0\n",  # anonymous
             "7f10-7f20 r-xp 00000000 fd:01 123   /opt/my envs/lib/libcudart.so.13\n",
             "7f20-7f30 r-xp 00000000 fd:01 124   /opt/my envs/lib/libcusparse.so.12 (deleted)\n"]
    assert library_in_maps(lines, "libcudart.so") == "/opt/my envs/lib/libcudart.so.13"
    assert library_in_maps(lines, "libcusparse.so") == "/opt/my envs/lib/libcusparse.so.12"
    assert library_in_maps(lines, "libcublas.so") is None


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


@pytest.mark.parametrize("index_dtype, value_dtype, index_code, value_code",
                         [(torch.int32, torch.float32, 2, 0), (torch.int64, torch.float16, 3, 2),
                          (torch.int32, torch.bfloat16, 2, 14)])
def test_a_plan_passes_cusparse_its_matrix_and_y_equal_a_x(monkeypatch, index_dtype, value_dtype, index_code,
                                                         value_code):
    """The recorded calls' arguments, against cuSPARSE's documented codes (cusparseIndexType_t,
    cudaDataType, cusparseSpMVAlg_t): a wrong beta (y += A x), algorithm or type code passed every test
    that counted calls only (a review)."""
    library, _ = _recorded(monkeypatch, iter([11] * 4))
    indptr, indices = torch.tensor([0, 1, 3], dtype=index_dtype), torch.tensor([0, 0, 1], dtype=index_dtype)
    values = torch.ones(3, dtype=value_dtype)
    plan = cusparse.SpmvPlan(indptr, indices, values, (2, 5), algorithm="csr_alg1", preprocess=True)
    (created,) = library.named("cusparseCreateCsr")
    assert created[1:] == (2, 5, 3, indptr.data_ptr(), indices.data_ptr(), values.data_ptr(), index_code, index_code,
                           0, value_code)
    (preprocessed,) = library.named("cusparseSpMV_preprocess")
    x, y = torch.ones(5, dtype=value_dtype), torch.empty(2, dtype=value_dtype)
    plan(x, y)
    (product,) = library.named("cusparseSpMV")
    operation, alpha, _, _, beta, _, compute, algorithm, workspace = product[1:]
    assert (operation, compute, algorithm) == (0, 0, 2)  # no transpose, float32 sums, CSR_ALG1
    assert (alpha._obj.value, beta._obj.value) == (1.0, 0.0)
    assert preprocessed[1:] == product[1:] and workspace == plan._workspace.data_ptr()
    with pytest.raises(SeerError, match=r"a cuSPARSE plan takes an index dtype of .*, got torch.int16"):
        cusparse.SpmvPlan(indptr.short(), indices.short(), values, (2, 5))
