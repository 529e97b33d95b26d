"""The diagonal variant (``diagonal_r128``): rows whose columns are the row plus the longest row's
offsets read no column indices. On the CPU (Triton interpreter) against scipy float64, on the
generators' stencils and bands, with rows that almost follow the pattern, with programs whose
rows all follow it (one row pointer read), and after the structure or the values change in place.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from test_spmv_kernels import assert_spmv_close, random_vector, run_and_check, to_seer

import seer
import seer.kernels.spmv as spmv
from seer.datasets import generators

NAME = "diagonal_r128"
ROWS = spmv.VARIANTS[NAME].params["rows"]


def expected_follows(matrix: sp.csr_matrix) -> np.ndarray:
    """Which rows have exactly the columns row + offset of the first longest row, in order."""
    lengths = np.diff(matrix.indptr)
    longest = int(np.argmax(lengths))
    pattern = matrix.indices[matrix.indptr[longest]:matrix.indptr[longest + 1]] - longest
    return np.array([lengths[r] == len(pattern)
                     and np.array_equal(matrix.indices[matrix.indptr[r]:matrix.indptr[r + 1]] - r, pattern)
                     for r in range(matrix.shape[0])])


MATRICES = {
    "stencil 2-D, 5 points": lambda: generators.stencil_2d(13, 5, seed=1),
    "stencil 2-D, 9 points": lambda: generators.stencil_2d(12, 9, seed=2),
    "stencil 3-D, 7 points": lambda: generators.stencil_3d(6, 7, seed=3),
    "stencil 3-D, 27 points": lambda: generators.stencil_3d(7, 27, seed=4),
    "band of 17": lambda: generators.banded(400, 8, seed=5),
    "band of 3": lambda: generators.banded(300, 1, seed=6),
    "half-filled band": lambda: generators.banded(300, 6, fill=0.5, seed=7),
}


@pytest.mark.parametrize("name", MATRICES)
def test_generated_matrices_match_scipy_and_flag_the_right_rows(name):
    matrix = MATRICES[name]()
    csr = run_and_check(NAME, matrix, np.random.default_rng(0))
    _, follows = spmv._rows_following_pattern(csr)
    assert np.array_equal(follows.numpy().astype(bool), expected_follows(matrix))


def test_full_bands_follow_the_pattern_away_from_the_edges():
    """The flags are not trivially all set or all clear: a band of 17 has its 8 rows at each end short."""
    follows = expected_follows(generators.banded(400, 8, seed=5))
    assert follows[8:392].all() and not follows[:8].any() and not follows[392:].any()


def nearly_banded(rows: int, bandwidth: int, seed: int) -> sp.csr_matrix:
    """A full band in which some rows of the full length have their first or their last column
    moved off the pattern (still sorted, in range) and some have two columns swapped: same length,
    other columns. The last column sits past the kernels' first step of 16 on the wider band, so
    a check that compared one step alone would be seen."""
    band = generators.banded(rows, bandwidth, seed=seed)
    rng = np.random.default_rng(seed)
    indices = band.indices.copy()
    chosen = rng.choice(np.arange(bandwidth + 1, rows - bandwidth - 1), size=18, replace=False)
    for r in chosen[:6]:
        indices[band.indptr[r]] -= 1  # the first column one further left: a different diagonal
    for r in chosen[6:12]:
        indices[band.indptr[r + 1] - 1] += 1  # the last column one further right
    for r in chosen[12:]:
        first = band.indptr[r]
        indices[first], indices[first + 1] = indices[first + 1], indices[first]
    return sp.csr_matrix((band.data.copy(), indices, band.indptr.copy()), shape=band.shape)


@pytest.mark.parametrize("bandwidth", [2, 9])  # patterns below and above PACK_FROM
def test_rows_of_the_right_length_off_the_pattern_read_their_columns(bandwidth):
    matrix = nearly_banded(600, bandwidth, seed=bandwidth)
    csr = run_and_check(NAME, matrix, np.random.default_rng(1))
    _, follows = spmv._rows_following_pattern(csr)
    expected = expected_follows(matrix)
    assert np.array_equal(follows.numpy().astype(bool), expected)
    lengths = np.diff(matrix.indptr)
    assert (~expected & (lengths == lengths.max())).sum() == 18


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
def test_value_and_index_dtypes_on_a_band(dtype, index_dtype):
    """A band of 19 (the packed row starts) and a 2-D stencil (per-row starts)."""
    for matrix in (generators.banded(3 * ROWS, 9, seed=8), generators.stencil_2d(17, 5, seed=9)):
        run_and_check(NAME, matrix, np.random.default_rng(2), dtype, index_dtype)


def test_packed_programs_read_the_right_rows():
    """Rows of programs that all follow the pattern start ``length`` after each other: with values
    poisoned past the end of every row but the pattern, a wrong start would read NaN or another
    row's values. The band is long enough for several whole programs of flagged rows."""
    matrix = generators.banded(5 * ROWS, 10, seed=10)
    assert expected_follows(matrix)[ROWS:2 * ROWS].all()
    csr, exact = to_seer(matrix)
    x = random_vector(np.random.default_rng(3), matrix.shape[1], torch.float32)
    values = torch.full((csr.nnz + 64,), float("nan"))
    values[:csr.nnz] = csr.values
    poisoned = spmv.problem((csr.indptr, csr.indices, values[:csr.nnz], matrix.shape))
    y = spmv.VARIANTS[NAME].run(poisoned, x, torch.full((csr.rows,), float("nan")))
    assert_spmv_close(y, exact, x, torch.float32)


def test_the_diagonal_variants_find_the_following_rows_once(monkeypatch):
    """Both diagonal variants planned on one matrix share one pass over its structure."""
    passes = []
    find = spmv._find_rows_following_pattern
    monkeypatch.setattr(spmv, "_find_rows_following_pattern", lambda csr: passes.append(1) or find(csr))
    csr, exact = to_seer(generators.banded(400, 4, seed=10))
    x = random_vector(np.random.default_rng(3), 400, torch.float32)
    for name in (NAME, "diagonal_major_r512"):
        assert_spmv_close(spmv.VARIANTS[name].run(csr, x, torch.full((400,), float("nan"))), exact, x, torch.float32)
    assert len(passes) == 1


@pytest.mark.parametrize("first, then", [(NAME, NAME), (NAME, "diagonal_major_r512"), ("diagonal_major_r512", NAME)])
def test_structure_changed_in_place_rebuilds_the_flags(first, then):
    """New columns written into the same indices array (indptr unchanged) must not be read as the
    old pattern by either variant, whichever found the flags first: their stamp covers indices."""
    band = generators.banded(400, 4, seed=11)
    csr, _ = to_seer(band)
    x = random_vector(np.random.default_rng(4), 400, torch.float32)
    spmv.VARIANTS[first].run(csr, x)
    moved = nearly_banded(400, 4, seed=11)
    csr.indices.copy_(torch.from_numpy(moved.indices.astype(np.int32)))
    y = spmv.VARIANTS[then].run(csr, x, torch.full((400,), float("nan")))
    exact = sp.csr_matrix((csr.values.double().numpy(), moved.indices, moved.indptr), shape=moved.shape)
    assert_spmv_close(y, exact, x, torch.float32)


@pytest.mark.parametrize("name", [NAME, "diagonal_major_r512"])
def test_dispatch_reads_new_values_and_new_columns(name):
    """Through ``seer.dispatch`` with the variant forced: new values in place are read by the
    cached call (diagonal_major_r512 copies them again), and new columns in place make a new plan."""
    band = generators.banded(300, 3, seed=12)
    csr, _ = to_seer(band)
    x = random_vector(np.random.default_rng(5), 300, torch.float32)
    seer.dispatch("spmv", (csr, x), variant=name)
    csr.values.mul_(-2.0)
    exact = sp.csr_matrix((csr.values.double().numpy(), band.indices, band.indptr), shape=band.shape)
    assert_spmv_close(seer.dispatch("spmv", (csr, x), variant=name), exact, x, torch.float32)
    moved = nearly_banded(300, 3, seed=12)
    csr.indices.copy_(torch.from_numpy(moved.indices.astype(np.int32)))
    exact = sp.csr_matrix((csr.values.double().numpy(), moved.indices, moved.indptr), shape=band.shape)
    assert_spmv_close(seer.dispatch("spmv", (csr, x), variant=name), exact, x, torch.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("generate,interior", [
    (lambda: generators.stencil_2d(1000, 5, seed=13), 998**2),
    (lambda: generators.stencil_3d(90, 27, seed=14), 88**3),
    (lambda: generators.banded(1_000_000, 12, seed=15), 1_000_000 - 24),
    (lambda: generators.banded(30_000, 300, seed=16), 30_000 - 600),
], ids=["stencil 2-D", "stencil 3-D 27", "band of 25", "band of 601"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("name", [NAME, "diagonal_major_r512"])
def test_large_generated_matrices_on_the_gpu(generate, interior, index_dtype, name):
    """Up to a million rows: exactly the interior rows follow the pattern, and y matches float64
    (the band's and the 27-point stencil's whole programs take the packed row starts; stored by
    diagonals, the wide band's diagonals are split over several programs)."""
    matrix = generate()
    csr, exact = to_seer(matrix, torch.float32, index_dtype)
    csr = spmv.problem((csr.indptr.cuda(), csr.indices.cuda(), csr.values.cuda(), csr.shape))
    _, follows = spmv._rows_following_pattern(csr)
    assert int(follows.sum()) == interior
    rng = np.random.default_rng(6)
    x = random_vector(rng, csr.cols, torch.float32)
    out = torch.full((csr.rows,), float("nan"), device="cuda")
    y = spmv.VARIANTS[name].run(csr, x.cuda(), out)
    assert_spmv_close(y.cpu(), exact, x, torch.float32)
