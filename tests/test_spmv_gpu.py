"""SpMV variants on a CUDA GPU against float64 references: random and large generated matrices,
every value dtype, no host synchronisation after the first call, CUDA graph capture, and one
matrix's plan called from several threads at once."""
from __future__ import annotations

import functools
import itertools
import threading

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import seer.kernels.spmv as spmv
from seer.errors import InputError
from seer.sparse import as_csr
from test_spmv_kernels import (VARIANT_NAMES, assert_graph_replays, assert_spmv_close, random_csr, random_vector,
                               skewed_lengths, sliced_matrix, to_seer)

pytestmark = pytest.mark.gpu
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def on_gpu(csr):
    return as_csr((csr.indptr.cuda(), csr.indices.cuda(), csr.values.cuda(), csr.shape))


def check_on_gpu(name, csr, exact, rng, dtype):
    """One run into a NaN-poisoned out, checked against the float64 reference on the host."""
    x = random_vector(rng, csr.cols, dtype)
    out = torch.full((csr.rows,), float("nan"), dtype=dtype, device="cuda")
    y = spmv.VARIANTS[name].run(csr, x.cuda(), out)
    assert y is out
    assert_spmv_close(y.cpu(), exact, x, dtype)


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("rows,cols,mean", [(3000, 2000, 12), (50, 20000, 900), (20000, 30, 3)])
def test_random_matrices(name, dtype, index_dtype, rows, cols, mean):
    rng = np.random.default_rng(rows + cols)
    csr, exact = to_seer(random_csr(rng, rows, cols, skewed_lengths(rng, rows, cols, mean)), dtype, index_dtype)
    check_on_gpu(name, on_gpu(csr), exact, rng, dtype)


def banded(rows: int, half_width: int, rng) -> sp.csr_matrix:
    """Band matrix with 2 * half_width + 1 diagonals (rows at the edges are shorter)."""
    offsets = range(-half_width, half_width + 1)
    diagonals = [rng.uniform(0.5, 1.5, rows - abs(k)) * rng.choice([-1.0, 1.0], rows - abs(k)) for k in offsets]
    return sp.diags(diagonals, list(offsets), shape=(rows, rows), format="csr")


def power_law_with_giant_row(rng, rows: int = 1_000_000, giant: int = 1_000_000) -> sp.csr_matrix:
    lengths = skewed_lengths(rng, rows, rows, 8)
    lengths[rows // 2] = giant
    return random_csr(rng, rows, rows, lengths)


@functools.lru_cache(maxsize=None)
def large_case(which: str, dtype: torch.dtype):
    """(csr on the GPU, float64 reference matrix), built once per matrix and dtype."""
    rng = np.random.default_rng(1)
    matrix = banded(2_000_000, 8, rng) if which == "banded_2M" else power_law_with_giant_row(rng)
    csr, exact = to_seer(matrix, dtype, torch.int32)
    return on_gpu(csr), exact


@pytest.mark.parametrize("which", ["banded_2M", "power_law"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_large_matrices(name, dtype, which):
    csr, exact = large_case(which, dtype)
    check_on_gpu(name, csr, exact, np.random.default_rng(7), dtype)


def skewed_on_gpu(dtype=torch.float16):
    rng = np.random.default_rng(3)
    lengths = skewed_lengths(rng, 5000, 4000, 20)
    lengths[[10, 4000]] = [30_000, 9000]  # long rows: adaptive cuts them into pieces
    csr, exact = to_seer(random_csr(rng, 5000, 4000, lengths), dtype)
    return on_gpu(csr), exact, rng


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_later_calls_do_not_synchronize(name):
    csr, exact, rng = skewed_on_gpu()
    x = random_vector(rng, csr.cols, torch.float16)
    x_gpu = x.cuda()  # a copy from pageable host memory synchronises: done before the check starts
    spmv.VARIANTS[name].run(csr, x_gpu)  # first call: preprocessing may synchronise
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        y = spmv.VARIANTS[name].run(csr, x_gpu)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert_spmv_close(y.cpu(), exact, x, torch.float16)


@pytest.mark.parametrize("name", [n for n in VARIANT_NAMES
                                  if spmv.VARIANTS[n].params["kind"] not in ("adaptive", "diagonal_major", "offsets")])
def test_preparation_does_not_synchronize(name):
    """A first call's plan (merge's brackets, cuSPARSE's partition) stays on the device: only
    adaptive and diagonal_major, which size their bins or their copy on the host, and offsets,
    which reads back whether the offsets fit, read back. The
    profile tables charge every synchronisation a plan makes to the variant's one-call cost."""
    csr, _, _ = skewed_on_gpu()
    fresh = as_csr((csr.indptr, csr.indices, csr.values, csr.shape))  # a problem no plan has seen
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        spmv.VARIANTS[name].bind(fresh)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_cuda_graph_replay(name):
    """After a first call, a call can be captured and replayed with new x."""
    csr, exact, rng = skewed_on_gpu()
    assert_graph_replays(spmv.VARIANTS[name].run, csr, exact, rng, torch.float16)


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_values_moved_in_place_are_followed(name):
    """Later calls launch with the arrays' cached addresses; an array moved by ``set_`` (a version
    bump) must be read at its new place."""
    csr, exact, rng = skewed_on_gpu()
    run = spmv.VARIANTS[name].run
    x = random_vector(rng, csr.cols, torch.float16)
    run(csr, x.cuda())
    run(csr, x.cuda())  # the direct path, addresses kept
    moved = csr.values.clone()
    csr.values.set_(moved)
    csr.values.mul_(-1)
    assert_spmv_close(run(csr, x.cuda()).cpu(), -exact, x, torch.float16)


def _rounded(exact: sp.csr_matrix, scale: float, dtype) -> sp.csr_matrix:
    """``exact`` times ``scale`` with its values rounded to ``dtype``, as float64."""
    values = torch.from_numpy(exact.data * scale).to(dtype).double().numpy()
    return sp.csr_matrix((values, exact.indices.copy(), exact.indptr.copy()), shape=exact.shape)


@pytest.mark.parametrize("name", [None, *VARIANT_NAMES])
@pytest.mark.parametrize("kind", ["banded", "wide"])
def test_a_made_matrix_whose_values_are_converted_through_data_is_planned_again(name, kind):
    """``.data =`` (module.to() and half()) moves no version: through dispatch, the diagonal copy and
    the column slices had served the old values, and plans compiled for float32 values would read
    float16 memory as float32 (a review's finding, CPU-tested; here on the device)."""
    import seer
    from seer.datasets import generators

    rng = np.random.default_rng(5)
    m = (generators.banded(30_000, 3) if kind == "banded"
         else random_csr(rng, 3000, 40_000, skewed_lengths(rng, 3000, 40_000, 12), sort_columns=True))
    csr, exact = to_seer(sp.csr_matrix(m, dtype=np.float64), torch.float32)
    A, x = on_gpu(csr), random_vector(rng, csr.cols, torch.float32)
    for _ in range(2):  # the plan, then the bound call
        assert_spmv_close(seer.dispatch("spmv", (A, x.cuda()), variant=name).cpu(), exact, x, torch.float32)
    A.values.data = A.values.detach() * 2
    assert_spmv_close(seer.dispatch("spmv", (A, x.cuda()), variant=name).cpu(), _rounded(exact, 2, torch.float32), x,
                      torch.float32)
    A.values.data = A.values.detach().half()
    assert_spmv_close(seer.dispatch("spmv", (A, x.half().cuda()), variant=name).cpu(),
                      _rounded(exact, 2, torch.float16), x.half(), torch.float16)


def test_values_replaced_through_data_again_and_again_are_planned_again():
    """The caching allocator gives a freed block to the next array of its size: two replacements
    land back at the planned address, which the key and the plans' record compare, and the
    diagonal copy served the values before last. The record now holds the planned storage."""
    import seer
    from seer.datasets import generators

    rng = np.random.default_rng(6)
    csr, exact = to_seer(sp.csr_matrix(generators.banded(30_000, 3), dtype=np.float64), torch.float32)
    A, x = on_gpu(csr), random_vector(rng, csr.cols, torch.float32)
    for round in range(5):
        for _ in range(2 if round else 0):  # the second block allocated while the first lives: the freed planned one
            A.values.data = A.values.detach() * 2
        y = seer.dispatch("spmv", (A, x.cuda()), variant="diagonal_major_r512")
        assert_spmv_close(y.cpu(), _rounded(exact, 4 ** round, torch.float32), x, torch.float32)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
def test_column_slices_with_cusparse(index_dtype):
    """cusparse_slices_16k on four stacked slices, cuSPARSE itself running the stack (the generic
    tests' matrices mostly run it unsliced): its plan and its later calls do not synchronise, it
    matches float64, replays from a CUDA graph, and follows values written in place."""
    rng = np.random.default_rng(21)
    cpu, exact = to_seer(sliced_matrix(rng, rows=400, mean=600), index_dtype=index_dtype)
    csr, variant = on_gpu(cpu), spmv.VARIANTS["cusparse_slices_16k"]
    x = random_vector(rng, csr.cols, torch.float32).cuda()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        variant.bind(csr)
        variant.run(csr, x)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    check_on_gpu("cusparse_slices_16k", csr, exact, rng, torch.float32)
    assert_graph_replays(variant.run, csr, exact, rng, torch.float32)
    csr.values.mul_(-1)
    assert_spmv_close(variant.run(csr, x).cpu(), -exact, x.cpu(), torch.float32)
    assert_copy_rewritten_after_a_captured_call(variant.run, csr, -exact, x)


def assert_copy_rewritten_after_a_captured_call(run, csr, exact, x) -> None:
    """Values written in place, then a call captured in a CUDA graph (which only records the copy
    of the values being written again): a call outside the graph before any replay must still
    write the copy itself, and the replay then reads it too."""
    csr.values.mul_(2)
    out = torch.empty(csr.rows, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run(csr, x, out)
    assert_spmv_close(run(csr, x).cpu(), 2 * exact, x.cpu(), torch.float32)
    out.fill_(float("nan"))
    graph.replay()
    assert_spmv_close(out.cpu(), 2 * exact, x.cpu(), torch.float32)


def test_diagonal_copy_rewritten_after_a_captured_call():
    """The same for diagonal_major_r512's copy of the values by diagonals, on a band."""
    rng = np.random.default_rng(22)
    cpu, exact = to_seer(banded(20_000, 3, rng))
    csr = on_gpu(cpu)
    run = spmv.VARIANTS["diagonal_major_r512"].run
    x = random_vector(rng, csr.cols, torch.float32).cuda()
    assert_spmv_close(run(csr, x).cpu(), exact, x.cpu(), torch.float32)
    assert_copy_rewritten_after_a_captured_call(run, csr, exact, x)


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_threads_share_one_plan(name):
    """Four threads call one matrix's plan 25 times each on their own x, into their own poisoned
    out, on one stream: a plan's state that a call changes (cuSPARSE's vector descriptors, the
    split diagonals' scratch) must not let one thread's call read another's x."""
    rng = np.random.default_rng(21)
    csr, exact = to_seer(banded(3000, 40, rng))  # 6 blocks of rows: diagonal_major splits its 81 diagonals
    csr = on_gpu(csr)
    xs = [random_vector(rng, csr.cols, torch.float32) for _ in range(4)]
    spmv.VARIANTS[name].run(csr, xs[0].cuda())  # planned before the threads start
    torch.cuda.synchronize()
    errors = []

    def worker(x):
        try:
            x_gpu, out = x.cuda(), torch.empty(csr.rows, device="cuda")
            for _ in range(25):
                out.fill_(float("nan"))
                spmv.VARIANTS[name].run(csr, x_gpu, out)
                torch.cuda.current_stream().synchronize()
                assert_spmv_close(out.cpu(), exact, x, torch.float32)
        except Exception as error:  # re-raised below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(x,)) for x in xs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]



def test_cusparse_plan_follows_moved_vectors_and_new_streams():
    """The prepared cuSPARSE plan repoints a vector descriptor only when its vector moved, and binds
    its handle to a stream only when torch's current stream changed: calls alternating two x, two
    outs and three streams, then an x changed in place, each get their own product."""
    rng = np.random.default_rng(5)
    csr, exact = to_seer(banded(3000, 40, rng))
    csr = on_gpu(csr)
    run = spmv.VARIANTS["cusparse_prepared"].run
    xs = [random_vector(rng, csr.cols, torch.float32) for _ in range(2)]
    xs_gpu = [x.cuda() for x in xs]
    outs = [torch.empty(csr.rows, device="cuda") for _ in range(2)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.current_stream()]
    for x_index, out_index, stream in itertools.product(range(2), range(2), streams):
        with torch.cuda.stream(stream):
            # A launch on any other stream would run at once, and this stream's poison, queued
            # behind the sleep, would then land after it.
            torch.cuda._sleep(1_000_000)
            outs[out_index].fill_(float("nan"))
            assert run(csr, xs_gpu[x_index], outs[out_index]) is outs[out_index]
        stream.synchronize()
        assert_spmv_close(outs[out_index].cpu(), exact, xs[x_index], torch.float32)
    xs_gpu[0].mul_(-1)  # same place, new values: nothing to repoint
    outs[0].fill_(float("nan"))
    run(csr, xs_gpu[0], outs[0])
    assert_spmv_close(outs[0].cpu(), exact, -xs[0], torch.float32)


@pytest.mark.parametrize("name", ["cusparse_prepared", "cusparse_slices_16k"])
def test_one_cusparse_plan_on_two_streams_at_once(name):
    """A plan keeps one workspace, and cuSPARSE does not say whether its SpMV writes there after the
    preprocessing: two streams run the same plan's products at once (each queued behind its own
    sleep so that they overlap), every product on its own x into its own out, checked against
    float64. A workspace written during the product would mix them."""
    rng = np.random.default_rng(9)
    matrix = random_csr(rng, 200_000, 200_000, rng.integers(1, 60, 200_000), sort_columns=True)  # 6M nonzeros
    csr, exact = to_seer(matrix)
    csr = on_gpu(csr)
    run = spmv.VARIANTS[name].run
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    xs = [[random_vector(rng, csr.cols, torch.float32) for _ in range(8)] for _ in streams]
    outs = [[torch.full((csr.rows,), float("nan"), device="cuda") for _ in range(8)] for _ in streams]
    run(csr, xs[0][0].cuda(), outs[0][0])  # the plan made before the streams start
    xs_gpu = [[x.cuda() for x in mine] for mine in xs]
    torch.cuda.synchronize()
    for outs_of_stream in outs:
        for out in outs_of_stream:
            out.fill_(float("nan"))
    torch.cuda.synchronize()
    for s, stream in enumerate(streams):
        with torch.cuda.stream(stream):
            torch.cuda._sleep(2_000_000)  # both streams' products start together
    for k in range(8):
        for s, stream in enumerate(streams):
            with torch.cuda.stream(stream):
                run(csr, xs_gpu[s][k], outs[s][k])
    torch.cuda.synchronize()
    for s in range(2):
        for k in range(8):
            assert_spmv_close(outs[s][k].cpu(), exact, xs[s][k], torch.float32)


def test_a_matrix_past_2_31_nonzeros_is_validated_to_its_last_index():
    """int64 indices past 2**31 nonzeros: the validation pass's block positions were 32-bit, wrapped
    negative and passed its mask k < nnz, reading before the indices' start (a review, from the
    kernel's IR). The valid matrix is accepted, a column out of range at the last position found.
    About 22 GB of device memory."""
    nnz, cols = 2**31 + 3 * 4096 + 5, 2**20
    indices = torch.arange(nnz, dtype=torch.int64, device="cuda").remainder_(cols)
    values = torch.ones(nnz, dtype=torch.float16, device="cuda")
    indptr = torch.tensor([0, nnz // 2, nnz], dtype=torch.int64, device="cuda")
    assert as_csr((indptr, indices, values, (2, cols))).nnz == nnz
    indices[-1] = cols
    with pytest.raises(InputError, match=rf"must lie in \[0, {cols}\); 1 lie outside"):
        as_csr((indptr, indices, values, (2, cols)))


# int32 indices a little under seer's limit: rows of 64 with one row of 2**21 at row LONG_AT, the first
# of a program for every row-mapped tile; the rows after it in its program start at LONG_AT * 64 + 2**21,
# so stepping as long as the long row took their int32 positions past 2**31 (from exactly 2**31).
_LONG_AT, _LONG = 2**25 - 2**16, 2**21
_ROWS = _LONG_AT + 129


@pytest.fixture(scope="module")
def int32_positions_near_their_limit():
    """``(csr, expected)``: regular rows r hold columns r .. r + 63, the long row columns 0 .. 2**21 - 1,
    values 1; ~17 GB of device memory."""
    ends = torch.arange(_ROWS + 1, device="cuda", dtype=torch.int64) * 64
    ends[_LONG_AT + 1:] += _LONG - 64
    nnz = int(ends[-1])
    assert 2**31 - 2**21 < nnz < 2**31 - 2**20 and _LONG_AT * 64 + 2 * _LONG == 2**31
    indices = torch.empty(nnz, dtype=torch.int32, device="cuda")
    lane = torch.arange(64, dtype=torch.int32, device="cuda")
    before, after = indices[:_LONG_AT * 64], indices[_LONG_AT * 64 + _LONG:]
    torch.add(torch.arange(_LONG_AT, dtype=torch.int32, device="cuda")[:, None], lane, out=before.view(-1, 64))
    torch.arange(_LONG, dtype=torch.int32, device="cuda", out=indices[_LONG_AT * 64:_LONG_AT * 64 + _LONG])
    torch.add(torch.arange(_LONG_AT + 1, _ROWS, dtype=torch.int32, device="cuda")[:, None], lane,
              out=after.view(-1, 64))
    csr = as_csr((ends.to(torch.int32), indices, torch.ones(nnz, device="cuda"), (_ROWS, _ROWS + 64)))
    expected = torch.full((_ROWS,), 64.0, device="cuda")
    expected[_LONG_AT] = _LONG
    yield csr, expected
    del csr, indices
    torch.cuda.empty_cache()


@pytest.mark.parametrize("name", [n for n in VARIANT_NAMES if not n.startswith(("torch", "cusparse"))])
def test_int32_positions_past_2_31_in_a_program_are_not_read(name, int32_positions_near_their_limit):
    """The row-mapped kernels step a row's positions as long as its program's longest row and mask
    them by position: in int32, past 2**31 they wrapped negative, passed the mask, and read (and the
    offsets' copy wrote) 8 GiB before the arrays (a review; an illegal address on an H200). From
    WIDE_POSITIONS_FROM nonzeros they read int64 row pointers. Seer's own kernels, exact sums of ones."""
    csr, expected = int32_positions_near_their_limit
    out = torch.full((csr.rows,), float("nan"), device="cuda")
    y = spmv.VARIANTS[name].run(csr, torch.ones(csr.cols, device="cuda"), out)
    wrong = torch.nonzero(y != expected).flatten()
    assert wrong.numel() == 0, f"{wrong.numel()} rows wrong, first {wrong[:4].tolist()}: {y[wrong[:4]].tolist()}"
