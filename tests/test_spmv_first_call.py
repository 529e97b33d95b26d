"""The first SpMV call on a small matrix: validation and y = A x in one launch (CPU, interpreter).

``spmv.first_call`` must compute the same y as scipy in float64 (into poisoned outputs), measure
the same row-length sums as the numpy pass, refuse every malformed matrix with the error
``as_csr`` gives, and ``seer.dispatch`` must launch it alone on a first call, then the chosen
variant on later calls.
"""
from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import seer
import seer.kernels.spmv as spmv
from seer import launch, sparse
from seer.dispatch import SHIPPED_MODELS
from seer.errors import InputError, SeerWarning
from test_spmv_kernels import (TOLERANCE, assert_spmv_close, random_csr, random_vector, real_matrices,  # noqa: F401
                               skewed_lengths)


def as_parts(matrix: sp.csr_matrix, dtype=torch.float32, index_dtype=torch.int32) -> tuple:
    return (torch.from_numpy(matrix.indptr.astype(np.int64)).to(index_dtype),
            torch.from_numpy(matrix.indices.astype(np.int64)).to(index_dtype),
            torch.from_numpy(matrix.data).to(dtype), matrix.shape)


def first_call_and_check(matrix: sp.csr_matrix, rng, dtype=torch.float32, index_dtype=torch.int32):
    parts = as_parts(matrix, dtype, index_dtype)
    exact = sp.csr_matrix((parts[2].double().numpy(), matrix.indices.copy(), matrix.indptr.copy()), shape=matrix.shape)
    x = random_vector(rng, matrix.shape[1], dtype)
    out = torch.full((matrix.shape[0],), float("nan"), dtype=dtype)
    csr, y = spmv.first_call(parts, (x,), out)
    assert y is out
    assert_spmv_close(y, exact, x, dtype)
    assert sparse.validated_rows(csr) == sparse._structure_numpy(csr, True).sums
    return csr


@pytest.mark.parametrize("dtype", list(TOLERANCE))
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_skewed_rectangular_matrices(dtype, index_dtype):
    rng = np.random.default_rng(11)
    for rows, cols, mean in ((300, 200, 6.0), (70, 900, 40.0), (1000, 15, 2.0)):
        first_call_and_check(random_csr(rng, rows, cols, skewed_lengths(rng, rows, cols, mean)), rng, dtype, index_dtype)


def test_long_rows_empty_rows_and_block_edges():
    rng = np.random.default_rng(12)
    block_rows = spmv.VALIDATING_TILE["rows"]
    rows = 3 * block_rows + 1  # a last block of one row
    lengths = np.zeros(rows, dtype=np.int64)
    lengths[[0, block_rows - 1, block_rows, 2 * block_rows, rows - 1]] = [5000, spmv.VALIDATING_TILE["block"], spmv.VALIDATING_TILE["block"] + 1, 1, 700]
    first_call_and_check(random_csr(rng, rows, 400, lengths), rng)


@pytest.mark.parametrize("shape", [(0, 5), (6, 0), (7, 9)])
def test_matrices_without_nonzeros(shape):
    csr = first_call_and_check(sp.csr_matrix(shape), np.random.default_rng(13))
    assert sparse.validated_rows(csr).empty == shape[0]


def test_wide_lanes_match_narrow_ones(monkeypatch):
    monkeypatch.setattr(sparse, "NARROW_BELOW", 0)  # the 64-bit lanes of a matrix past 2**31 nonzeros
    rng = np.random.default_rng(14)
    first_call_and_check(random_csr(rng, 200, 300, skewed_lengths(rng, 200, 300, 30.0)), rng, index_dtype=torch.int64)


def test_without_statistics_the_same_y_and_checks():
    # What benchmarks/spmv_validation.py times against the shipped launch: no row statistics, the
    # same product and the same faults counted.
    rng = np.random.default_rng(15)
    matrix = random_csr(rng, 300, 200, skewed_lengths(rng, 300, 200, 6.0))
    matrix.indices[[3, 9]] = [-1, 200]  # two columns out of range: counted, not read
    csr = sparse.as_csr(as_parts(matrix), check=False)
    x = random_vector(rng, 200, torch.float32)
    found = {}
    for stats in (True, False):
        y = torch.full((300,), float("nan"))
        found[stats] = sparse.read_totals(spmv._launch_validating_product(csr, x, y, stats=stats), csr.device)
        assert not torch.isnan(y).any()
        found[stats, "y"] = y
    assert found[False].sums == (0, 0, 0, 0, 0) and found[True].sums == sparse._structure_numpy(csr, True).sums
    assert found[False][:4] == found[True][:4] == (0, matrix.nnz, 0, 2)
    assert torch.equal(found[True, "y"], found[False, "y"])


def test_the_validating_launch_is_keyed_by_the_width_of_its_positions(monkeypatch):
    """NARROW (32-bit positions and sums) is compiled into the kernel, so it must be in the key its
    launch is kept under: a launch compiled narrow would serve a matrix past NARROW_BELOW with
    positions that wrap (a review; first calls cap nnz far below, direct callers do not)."""
    rng = np.random.default_rng(16)
    csr = sparse.as_csr(as_parts(random_csr(rng, 40, 30, np.full(40, 3))), check=False)
    x = random_vector(rng, 30, torch.float32)
    keys = []
    monkeypatch.setattr(spmv._validating_launch, "launch", lambda key, *args, **kwargs: keys.append(key))
    spmv._launch_validating_product(csr, x, torch.empty(40))
    monkeypatch.setattr(sparse, "NARROW_BELOW", csr.nnz)  # the same matrix, now past the limit
    spmv._launch_validating_product(csr, x, torch.empty(40))
    assert len(keys) == 2 and keys[0] != keys[1]


def in_a_new_thread(fn):
    """``fn()`` on a thread of its own, which gets its own totals buffers (sparse.totals_buffers)."""
    result = {}
    thread = threading.Thread(target=lambda: result.update(value=fn()))
    thread.start()
    thread.join()
    assert "value" in result, "the thread raised"
    return result["value"]


def test_many_programs_add_up_and_leave_the_counters_zeroed(monkeypatch):
    rng = np.random.default_rng(16)
    programs = 131
    monkeypatch.setattr(sparse, "_programs_cap", {torch.device("cpu"): programs})
    rows = programs * spmv.VALIDATING_TILE["rows"] + 1  # a block more than the programs: one takes two
    matrix = random_csr(rng, rows, 300, skewed_lengths(rng, rows, 300, 6.0))

    def check():
        first_call_and_check(matrix, rng)
        counters, totals = sparse.totals_buffers(torch.device("cpu"))
        assert not counters.any()  # the arrivals and the sums back to 0 for the next launch
        totals.fill_(-1)  # poisoned: the next call's totals must all be written again
        first_call_and_check(matrix, rng)
        return True

    in_a_new_thread(check)


def test_threads_keep_totals_of_their_own():
    rng = np.random.default_rng(20)
    buffers = in_a_new_thread(lambda: sparse.totals_buffers(torch.device("cpu")))
    assert buffers[1] is not sparse.totals_buffers(torch.device("cpu"))[1]
    first_call_and_check(small_matrix(rng), rng)


def test_strided_x_and_out():
    rng = np.random.default_rng(15)
    matrix = random_csr(rng, 90, 70, skewed_lengths(rng, 90, 70, 5.0))
    x = random_vector(rng, 140, torch.float32)[::2]
    out = torch.full((180,), float("nan"))[::2]
    _, y = spmv.first_call(as_parts(matrix), (x,), out)
    assert y is out
    assert_spmv_close(y, matrix, x, torch.float32)


def test_real_matrices(real_matrices):  # noqa: F811 (the fixture)
    rng = np.random.default_rng(16)
    for matrix in [m for m in real_matrices.values() if fits_one_launch(m)][::3]:
        first_call_and_check(matrix, rng)


GOOD = ([0, 2, 3, 5], [0, 4, 1, 2, 3])


@pytest.mark.parametrize("indptr, indices, message", [
    ([1, 2, 3, 5], GOOD[1], "must start at 0"),
    ([0, 2, 3, 4], GOOD[1], "ends at 4 but there are 5"),
    ([0, 3, 2, 5], GOOD[1], "not non-decreasing"),
    ([0, 2, 10**9, 5], GOOD[1], "not non-decreasing"),
    ([0, -7, 3, 5], GOOD[1], "not non-decreasing"),
    (GOOD[0], [0, 5, 1, -1, 3], "2 lie outside, in \\[-1, 5\\]"),
])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_malformed_matrices_are_refused_as_as_csr_refuses_them(indptr, indices, message, index_dtype):
    parts = (torch.tensor(indptr, dtype=index_dtype), torch.tensor(indices, dtype=index_dtype), torch.ones(5), (3, 5))
    with pytest.raises(InputError, match=message):
        spmv.first_call(parts, (torch.randn(5),))
    with pytest.raises(InputError, match=message):
        sparse.as_csr(parts)


def test_operands_are_checked_before_launching(monkeypatch):
    monkeypatch.setattr(spmv, "_launch_validating_product", lambda *a: pytest.fail("launched"))
    parts = as_parts(sp.csr_matrix(np.eye(4)))
    with pytest.raises(InputError, match="x has 3 entries"):
        spmv.first_call(parts, (torch.randn(3),))
    with pytest.raises(InputError, match="out must have shape"):
        spmv.first_call(parts, (torch.randn(4),), torch.empty(5))


@pytest.fixture
def kernels_launched(monkeypatch):
    """Names of the Triton kernels launched (under the interpreter every launch is a first one)."""
    names = []
    first_launch = launch.LaunchCache.first_launch

    def spied(self, *args):
        names.append(self.kernel.__name__)
        return first_launch(self, *args)

    monkeypatch.setattr(launch.LaunchCache, "first_launch", spied)
    return names


def small_matrix(rng, nnz_rows=(60, 50)):
    rows, cols = nnz_rows
    return random_csr(rng, rows, cols, skewed_lengths(rng, rows, cols, 4.0))


def test_dispatch_validates_and_multiplies_in_one_launch_then_runs_its_choice(kernels_launched):
    seer.clear_cache()
    rng = np.random.default_rng(17)
    matrix = small_matrix(rng)
    A = torch.sparse_csr_tensor(*as_parts(matrix)[:3], matrix.shape)
    x = random_vector(rng, matrix.shape[1], torch.float32)
    model = SHIPPED_MODELS / "spmv-h200.json"  # trained with the row statistics (stage 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        assert_spmv_close(seer.dispatch("spmv", (A, x), model=model), matrix, x, torch.float32)
        assert kernels_launched == ["_validating_product_kernel"]
        assert_spmv_close(seer.dispatch("spmv", (A, x), model=model), matrix, x, torch.float32)
        chosen = seer.explain("spmv", (A, x), model=model)
    assert chosen.stage.startswith("stage 2")  # the first call's pass measured the row statistics
    assert len(kernels_launched) == 2 and kernels_launched[1] != "_validating_product_kernel"


def test_larger_matrices_and_forced_variants_run_the_variant_at_once(kernels_launched, monkeypatch):
    seer.clear_cache()
    rng = np.random.default_rng(18)
    matrix = small_matrix(rng)
    x = random_vector(rng, matrix.shape[1], torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        forced = seer.dispatch("spmv", (as_parts(matrix), x), variant="vector_g8")
        assert kernels_launched == ["_csr_rows_kernel"]
        monkeypatch.setattr(spmv, "VALIDATING_PRODUCT_MAX_NNZ", matrix.nnz - 1)
        more_nonzeros = seer.dispatch("spmv", (as_parts(matrix), x))
        monkeypatch.setattr(spmv, "VALIDATING_PRODUCT_MAX_NNZ", matrix.nnz)
        monkeypatch.setattr(spmv, "VALIDATING_PRODUCT_MAX_ROWS", matrix.shape[0] - 1)
        more_rows = seer.dispatch("spmv", (as_parts(matrix), x))
    assert "_validating_product_kernel" not in kernels_launched and len(kernels_launched) == 3
    for y in (forced, more_nonzeros, more_rows):
        assert_spmv_close(y, matrix, x, torch.float32)


# ------------------------------------------------------------------ on a GPU


def fits_one_launch(matrix: sp.csr_matrix) -> bool:
    return matrix.nnz <= spmv.VALIDATING_PRODUCT_MAX_NNZ and matrix.shape[0] <= spmv.VALIDATING_PRODUCT_MAX_ROWS


def on_gpu(parts: tuple) -> tuple:
    return (*(t.cuda() for t in parts[:3]), parts[3])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
def test_gpu_against_float64(dtype, index_dtype, real_matrices):  # noqa: F811 (the fixture)
    rng = np.random.default_rng(19)
    giant = np.zeros(spmv.VALIDATING_PRODUCT_MAX_ROWS, dtype=np.int64)
    giant[7] = spmv.VALIDATING_PRODUCT_MAX_NNZ - 100  # one row of nearly every nonzero allowed
    matrices = [random_csr(rng, 3000, 2000, skewed_lengths(rng, 3000, 2000, 8)),
                random_csr(rng, 50, 20000, skewed_lengths(rng, 50, 20000, 400)),
                random_csr(rng, spmv.VALIDATING_PRODUCT_MAX_ROWS, 5000, giant),
                *(m for m in real_matrices.values() if fits_one_launch(m))]
    for matrix in matrices:
        assert fits_one_launch(matrix)
        parts = as_parts(matrix, dtype, index_dtype)
        exact = sp.csr_matrix((parts[2].double().numpy(), matrix.indices.copy(), matrix.indptr.copy()),
                              shape=matrix.shape)
        x = random_vector(rng, matrix.shape[1], dtype)
        out = torch.full((matrix.shape[0],), float("nan"), dtype=dtype, device="cuda")
        csr, y = spmv.first_call(on_gpu(parts), (x.cuda(),), out)
        assert y is out
        assert_spmv_close(y.cpu(), exact, x, dtype)
        assert sparse.validated_rows(csr) == sparse._structure_numpy(sparse.as_csr(parts, check=False), True).sums


@pytest.mark.gpu
@pytest.mark.parametrize("indptr, indices, message", [
    ([0, 2, 3, 4], GOOD[1], "ends at 4 but there are 5"),
    ([0, 2, 10**9, 5], GOOD[1], "not non-decreasing"),
    (GOOD[0], [0, 5, 1, -1, 3], "2 lie outside"),
])
def test_gpu_refuses_malformed_matrices(indptr, indices, message):
    parts = (torch.tensor(indptr, device="cuda"), torch.tensor(indices, device="cuda"), torch.ones(5, device="cuda"), (3, 5))
    with pytest.raises(InputError, match=message):
        spmv.first_call(parts, (torch.randn(5, device="cuda"),))
    torch.cuda.synchronize()  # no fault was left behind on the device


@pytest.mark.gpu
def test_gpu_first_calls_from_threads_on_one_stream():
    """Threads launching first calls on the same stream each read their own totals back, right,
    however their launches interleave."""
    matrices = [small_matrix(np.random.default_rng(seed), (500 + 37 * seed, 300)) for seed in range(6)]

    def first_calls(seed: int) -> bool:
        rng = np.random.default_rng(100 + seed)
        for round_ in range(20):
            matrix = matrices[(seed + round_) % len(matrices)]
            parts = as_parts(matrix)
            x = random_vector(rng, matrix.shape[1], torch.float32)
            csr, y = spmv.first_call(on_gpu(parts), (x.cuda(),))
            assert_spmv_close(y.cpu(), matrix, x, torch.float32)
            assert sparse.validated_rows(csr) == sparse._structure_numpy(sparse.as_csr(parts, check=False), True).sums
        return True

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(first_calls, range(4)))
