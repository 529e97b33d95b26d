"""The diagonal-major variant (``diagonal_major_r512``): rows that follow the longest row's
diagonals read from a copy of their values stored by diagonals. On the CPU (Triton interpreter)
against scipy float64: where the copy is made and where it is not, the rows that do not follow,
diagonals split over several programs (their counts back to zero after each call; on the GPU
also replayed from a CUDA graph, the same bits on every call, and two streams at once), every
dtype pair, values changed in place (inference tensors too; through dispatch:
tests/test_spmv_diagonal.py), and x holding infinities only where a row does not reach.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from graph_checks import assert_graphs_keep_their_own_scratch
from test_spmv_diagonal import expected_follows, nearly_banded
from test_spmv_kernels import assert_graph_replays, assert_spmv_close, random_vector, run_and_check, to_seer

import seer.kernels.spmv as spmv
from seer.datasets import generators
from seer.sparse import as_csr

NAME = "diagonal_major_r512"
ROWS, DIAGONALS = (spmv.VARIANTS[NAME].params[k] for k in ("rows", "diagonals"))


def layout(matrix: sp.csr_matrix):
    csr, _ = to_seer(matrix)
    return spmv._diagonal_major_layout(csr, *spmv._rows_following_pattern(csr))


STORED = {  # (matrix, rows that do not follow)
    "stencil 2-D, 5 points": (lambda: generators.stencil_2d(30, 5, seed=1), 30 * 30 - 28 * 28),
    "box of 49": (lambda: generators.stencil_2d(24, 49, seed=2), 24 * 24 - 18 * 18),
    "band of 17": (lambda: generators.banded(1100, 8, seed=3), 16),
    "band of 3, every row but two": (lambda: generators.banded(700, 1, seed=4), 2),
}


@pytest.mark.parametrize("name", STORED)
def test_stored_by_diagonals_matches_scipy(name):
    build, rest = STORED[name]
    matrix = build()
    found = layout(matrix)
    assert found is not None and found.rest_count == rest
    assert np.array_equal(found.rest_rows.numpy(), np.flatnonzero(~expected_follows(matrix)))
    run_and_check(NAME, matrix, np.random.default_rng(0))


@pytest.mark.parametrize("matrix", [
    generators.banded(300, 6, fill=0.5, seed=5),  # rows are random subsets of the band: none follows
    generators.stencil_3d(6, 27, seed=6),  # the boundary is most of a small grid
    generators.rmat(9, 8, seed=7),  # the longest row's pattern would cost far more than the values
], ids=["half-filled band", "small 27-point stencil", "R-MAT"])
def test_without_the_copy_it_runs_as_vector_csr(matrix):
    assert layout(matrix) is None
    run_and_check(NAME, matrix, np.random.default_rng(1))


def test_wide_band_splits_its_diagonals_over_programs():
    """A band of 241 on 1,500 rows: 3 blocks of rows, so the diagonals are split (the interpreter
    counts 4 SMs) and the partial sums added up; the band's 240 end rows take the rest path."""
    matrix = generators.banded(1500, 120, seed=8)
    found = layout(matrix)
    assert found is not None and found.length == 241
    splits, per_split = spmv._split_diagonals(torch.device("cpu"), -(-1500 // ROWS), 241, DIAGONALS)
    assert splits > 1 and per_split % DIAGONALS == 0 and (splits - 1) * per_split < 241 <= splits * per_split
    run_and_check(NAME, matrix, np.random.default_rng(2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_split_diagonals_add_up_into_a_strided_out(dtype):
    """The split path's sums, added up in float32 by the last split of each block of rows, land in
    every other element of a poisoned buffer, and nowhere else."""
    matrix = generators.banded(1500, 120, seed=8)
    csr, exact = to_seer(matrix, dtype)
    x = random_vector(np.random.default_rng(5), 2 * csr.cols, dtype)[::2]
    buffer = torch.full((2 * csr.rows,), float("nan"), dtype=dtype)
    y = spmv.VARIANTS[NAME].run(csr, x, buffer[::2])
    assert y.data_ptr() == buffer.data_ptr() and y.stride() == (2,)
    assert_spmv_close(y, exact, x, dtype)
    assert torch.isnan(buffer[1::2]).all()


def test_split_diagonals_add_up_on_every_call():
    """The last split of each block is found again on every call, not only on the first: were it
    missed, y would keep its poison."""
    matrix = generators.banded(1500, 120, seed=8)
    csr, exact = to_seer(matrix)
    rng = np.random.default_rng(9)
    for _ in range(3):
        x = random_vector(rng, csr.cols, torch.float32)
        assert_spmv_close(spmv.VARIANTS[NAME].run(csr, x, torch.full((csr.rows,), float("nan"))), exact, x,
                          torch.float32)


def test_each_call_takes_its_arrivals_off_the_count(monkeypatch):
    """The last split of a block takes ``splits`` off its count: after every call each count is
    back to zero (a count left growing would overflow int32 after ~2**31 arrivals)."""
    made, split_scratch = [], spmv._split_scratch
    monkeypatch.setattr(spmv, "_split_scratch", lambda *shape: made.append(split_scratch(*shape)) or made[-1])
    csr, exact = to_seer(generators.banded(1500, 120, seed=8))
    rng = np.random.default_rng(11)
    for _ in range(3):
        x = random_vector(rng, csr.cols, torch.float32)
        assert_spmv_close(spmv.VARIANTS[NAME].run(csr, x), exact, x, torch.float32)
        (partials, arrivals), = made  # one stream (the CPU's), so one pair
        assert partials.numel() > 1 and arrivals.numel() == -(-1500 // ROWS) and not arrivals.any()


def test_rows_of_the_pattern_length_off_the_pattern_read_their_columns():
    matrix = nearly_banded(1200, 9, seed=9)
    assert layout(matrix).rest_count == 18 + 18  # the band's ends and the 18 rows moved off it
    run_and_check(NAME, matrix, np.random.default_rng(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
def test_value_and_index_dtypes(dtype, index_dtype):
    run_and_check(NAME, generators.stencil_2d(25, 9, seed=10), np.random.default_rng(4), dtype, index_dtype)


def test_infinities_in_x_reach_only_the_rows_that_read_them():
    """A boundary row of a box of 49 does not follow the pattern and lacks the column one to its
    left, though that column is in range; x is infinite there. The copy holds zeros in that row's
    slots, and the programs of the split holding that diagonal add partial sums for every row: a
    zero times an infinity would be NaN. y must be finite wherever scipy's is."""
    matrix = generators.stencil_2d(24, 49, seed=11)
    found = layout(matrix)
    assert spmv._split_diagonals(torch.device("cpu"), -(-24 * 24 // ROWS), found.length, DIAGONALS)[0] > 1
    csr, exact = to_seer(matrix)
    x = random_vector(np.random.default_rng(5), csr.cols, torch.float32)
    boundary = 24 * 5  # the first row of the sixth grid row: no neighbour at its left
    x[boundary - 1] = float("inf")
    y = spmv.VARIANTS[NAME].run(csr, x, torch.full((csr.rows,), float("nan")))
    with np.errstate(invalid="ignore"):
        reference = exact @ x.double().numpy()
    finite = np.isfinite(reference)
    assert not finite.all() and finite[boundary]
    assert np.array_equal(np.isfinite(y.numpy()), finite)
    np.testing.assert_allclose(y.numpy()[finite], reference[finite], rtol=1e-5, atol=1e-5)


def test_values_changed_in_place_are_copied_again():
    matrix = generators.banded(900, 4, seed=12)
    csr, _ = to_seer(matrix)
    x = random_vector(np.random.default_rng(6), 900, torch.float32)
    spmv.VARIANTS[NAME].run(csr, x)
    csr.values.mul_(-3.0).add_(0.25)
    exact = sp.csr_matrix((csr.values.double().numpy(), matrix.indices, matrix.indptr), shape=matrix.shape)
    assert_spmv_close(spmv.VARIANTS[NAME].run(csr, x, torch.full((900,), float("nan"))), exact, x, torch.float32)


def test_inference_values_are_copied_on_every_call():
    """An inference tensor keeps no version, so a change made in inference mode cannot be seen: the
    copy is made again on every call."""
    matrix = generators.banded(900, 4, seed=13)
    with torch.inference_mode():
        csr, _ = to_seer(matrix)
        x = random_vector(np.random.default_rng(7), 900, torch.float32)
        spmv.VARIANTS[NAME].run(csr, x)
        csr.values.mul_(2.0)
        y = spmv.VARIANTS[NAME].run(csr, x)
    exact = sp.csr_matrix((csr.values.double().numpy(), matrix.indices, matrix.indptr), shape=matrix.shape)
    assert_spmv_close(y, exact, x, torch.float32)


def split_band_on_the_gpu():
    """A band of 601 on 30,000 rows on the GPU (59 blocks of rows: its diagonals split) and scipy's."""
    matrix = generators.banded(30_000, 300, seed=16)
    host, exact = to_seer(matrix)
    csr = spmv.problem((host.indptr.cuda(), host.indices.cuda(), host.values.cuda(), host.shape))
    found = spmv._diagonal_major_layout(csr, *spmv._rows_following_pattern(csr))
    assert spmv._split_diagonals(csr.device, -(-csr.rows // ROWS), found.length, DIAGONALS)[0] > 1
    return csr, exact


@pytest.mark.gpu
def test_split_diagonals_replay_from_a_cuda_graph():
    """Captured with a float32 out: each replay on a new x adds the splits' sums into out, poisoned
    before it."""
    csr, exact = split_band_on_the_gpu()
    assert_graph_replays(spmv.VARIANTS[NAME].run, csr, exact, np.random.default_rng(8), torch.float32)


@pytest.mark.gpu
def test_split_diagonals_of_two_graphs_keep_their_own_sums():
    """The splits' partial sums and counts were kept per stream, so two graphs of one matrix (both
    captured on torch's one capture stream) shared them, and their replays at once mixed their sums."""
    csr, exact = split_band_on_the_gpu()
    rng = np.random.default_rng(14)
    xs = [random_vector(rng, csr.cols, torch.float32).cuda() for _ in range(2)]
    outs = [torch.empty(csr.rows, device="cuda") for _ in range(2)]
    assert_graphs_keep_their_own_scratch(
        [lambda i=i: spmv.VARIANTS[NAME].run(csr, xs[i], outs[i]) for i in (0, 1)],
        outs, lambda i, y: assert_spmv_close(y.cpu(), exact, xs[i].cpu(), torch.float32))


@pytest.mark.gpu
def test_split_diagonals_give_the_same_bits_on_every_call():
    """Which split of a block arrives last varies from call to call on a GPU; the last one adds
    the splits up in split order, so y does not."""
    csr, exact = split_band_on_the_gpu()
    x = random_vector(np.random.default_rng(10), csr.cols, torch.float32).cuda()
    first = spmv.VARIANTS[NAME].run(csr, x)
    assert_spmv_close(first.cpu(), exact, x.cpu(), torch.float32)
    out = torch.empty_like(first)
    for _ in range(50):
        out.fill_(float("nan"))
        assert torch.equal(spmv.VARIANTS[NAME].run(csr, x, out), first)


@pytest.mark.gpu
def test_split_diagonals_on_two_streams_at_once():
    """Calls on one matrix from two CUDA streams, queued alternately without waiting, each into its
    own poisoned out: each stream has its own partial sums and counts, so neither adds up the
    other's; then a call on the default stream is right too."""
    csr, exact = split_band_on_the_gpu()
    rng = np.random.default_rng(12)
    xs = [random_vector(rng, csr.cols, torch.float32).cuda() for _ in range(2)]
    outs = [torch.full((csr.rows,), float("nan"), device="cuda") for _ in range(2)]
    streams = [torch.cuda.Stream() for _ in range(2)]
    torch.cuda.synchronize()
    for _ in range(20):
        for stream, x, out in zip(streams, xs, outs):
            with torch.cuda.stream(stream):
                spmv.VARIANTS[NAME].run(csr, x, out)
    torch.cuda.synchronize()
    for x, out in zip(xs, outs):
        assert_spmv_close(out.cpu(), exact, x.cpu(), torch.float32)
    assert_spmv_close(spmv.VARIANTS[NAME].run(csr, xs[0]).cpu(), exact, xs[0].cpu(), torch.float32)



def test_no_layout_where_diagonal_offsets_pass_int32():
    """Columns r and r + 2**31 in every row: the offsets were cast to int32, 2**31 read as -2**31, and
    the kernel read x before its start (a segfault on the CPU: a review)."""
    n, far = 64, 2**31
    indices = torch.stack([torch.arange(n), torch.arange(n) + far], 1).flatten()
    csr = as_csr((torch.arange(0, 2 * n + 1, 2), indices, torch.ones(2 * n), (n, far + n)))
    pattern_row, follows = spmv._rows_following_pattern(csr)
    assert int(follows.sum()) == n  # every row follows the pattern: a layout would pay
    assert spmv._diagonal_major_layout(csr, pattern_row, follows) is None
