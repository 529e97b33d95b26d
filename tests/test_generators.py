"""Synthetic and derived matrix generators and the named suites (small sizes only)."""
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp

from seer.datasets.generators import (
    SyntheticSpec,
    banded,
    block_replicate,
    build,
    lognormal_rows,
    rmat,
    stencil_2d,
    stencil_3d,
    synthetic_suite,
)
from seer.datasets.suitesparse import read_matrix
from seer.errors import InputError

# One small call per family; each (maker, seed) -> matrix.
FAMILIES = {
    "rmat": lambda seed: rmat(12, 8, seed=seed),
    "stencil_2d": lambda seed: stencil_2d(40, 9, seed=seed),
    "stencil_3d": lambda seed: stencil_3d(12, 27, seed=seed),
    "banded": lambda seed: banded(3000, 7, fill=0.6, seed=seed),
    "lognormal_rows": lambda seed: lognormal_rows(3000, 5000, 12, 1.0, seed=seed),
    "block_replicate": lambda seed: block_replicate(_random_block(), 9, seed=seed, coupling=3),
}
RANDOM_STRUCTURE = {"rmat", "banded", "lognormal_rows", "block_replicate"}


def _random_block():
    return sp.random(30, 30, density=0.1, format="csr", random_state=7) + sp.eye(30)


def row_lengths(m):
    return np.diff(m.indptr)


def cv(values):
    return values.std() / values.mean()


def assert_canonical(m, shape):
    assert isinstance(m, sp.csr_matrix) and m.shape == shape
    assert m.indices.dtype == np.int32 and m.indptr.dtype == np.int32
    assert m.indptr[0] == 0 and m.indptr[-1] == m.nnz and (np.diff(m.indptr) >= 0).all()
    assert m.nnz == 0 or (0 <= m.indices.min() and m.indices.max() < shape[1])
    row_of = np.repeat(np.arange(shape[0]), row_lengths(m))
    same_row = row_of[1:] == row_of[:-1]
    assert (np.diff(m.indices.astype(np.int64))[same_row] > 0).all(), "indices sorted, no duplicates"
    assert np.isfinite(m.data).all() and (m.data != 0).all()


def same_matrix(a, b):
    return all(np.array_equal(x, y) for x, y in ((a.indptr, b.indptr), (a.indices, b.indices), (a.data, b.data)))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_reproducible_and_seed_sensitive(family):
    make = FAMILIES[family]
    first, again, other = make(1), make(1), make(2)
    assert_canonical(first, first.shape)
    assert first.dtype == np.float32
    assert same_matrix(first, again)
    assert not np.array_equal(first.data[:100], other.data[:100])
    if family in RANDOM_STRUCTURE:
        assert first.nnz != other.nnz or not np.array_equal(first.indices, other.indices)


def test_values_are_spread_and_signed():
    values = stencil_2d(100, 5, seed=3).data
    assert 0.5 <= np.abs(values).min() and np.abs(values).max() < 1
    assert 0.45 < (values > 0).mean() < 0.55
    assert len(np.unique(values)) > 0.9 * len(values)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_dtype_option_keeps_values_under_one(dtype):
    """float16 rounded the largest magnitudes up to 1.0 (27 of 128k values)."""
    values = banded(64_000, 1, dtype=dtype).data
    assert values.dtype == dtype and 0.5 <= np.abs(values).min() and np.abs(values).max() < 1


# ---------------------------------------------------------------------------------------------
# R-MAT


@pytest.mark.parametrize(
    "scale, edge_factor, a, b, c, min_cv",
    [(12, 8, 0.57, 0.19, 0.19, 2.0), (13, 4, 0.75, 0.1, 0.1, 4.0), (11, 16, 0.45, 0.15, 0.15, 0.5)],
)
def test_rmat_nnz_matches_expectation_and_is_heavy_tailed(scale, edge_factor, a, b, c, min_cv):
    m = rmat(scale, edge_factor, a, b, c, seed=4)
    kwargs = dict(scale=scale, edge_factor=edge_factor, a=a, b=b, c=c)
    expected = SyntheticSpec("x", "f", "rmat", kwargs).expected_nnz
    assert_canonical(m, (2**scale, 2**scale))
    assert abs(m.nnz / expected - 1) < 0.02
    assert m.nnz < edge_factor * 2**scale  # duplicates were dropped
    assert cv(row_lengths(m)) > min_cv  # uniform random graphs: 1 / sqrt(edge_factor)


def test_rmat_quadrants_follow_probabilities():
    """Without relabelling, the top-level quadrant shares of the edges are about a, b, c, d."""
    a, b, c = 0.5, 0.2, 0.2
    m = rmat(16, 1, a, b, c, seed=5, scramble=False)
    half = 2**15
    rows, cols = m.nonzero()
    top, left = rows < half, cols < half
    shares = [np.mean(top & left), np.mean(top & ~left), np.mean(~top & left), np.mean(~top & ~left)]
    np.testing.assert_allclose(shares, [a, b, c, 0.1], atol=0.015)
    # without relabelling vertex 0 (all-"a" path) is the heaviest; relabelling moves it
    assert row_lengths(m).argmax() == 0
    assert row_lengths(rmat(16, 1, a, b, c, seed=5)).argmax() != 0


def test_rmat_skew_raises_row_length_spread():
    mild, strong = rmat(13, 8, 0.45, 0.15, 0.15, seed=1), rmat(13, 8, 0.75, 0.1, 0.1, seed=1)
    assert cv(row_lengths(strong)) > 2 * cv(row_lengths(mild))


# ---------------------------------------------------------------------------------------------
# Stencils


def _tridiagonal_pattern(n):
    return sp.diags([1.0, 1.0, 1.0], [-1, 0, 1], shape=(n, n), format="csr")


def _star_pattern(n, dims):
    eye, tri = sp.eye(n, format="csr"), _tridiagonal_pattern(n)
    total = None
    for axis in range(dims):
        term = sp.csr_matrix(np.ones((1, 1)))
        for other in range(dims):
            term = sp.kron(term, tri if other == axis else eye, format="csr")
        total = term if total is None else total + term
    return total


def _box_pattern(n, dims, radius=1):
    band = sp.diags([1.0] * (2 * radius + 1), range(-radius, radius + 1), shape=(n, n), format="csr")
    total = sp.csr_matrix(np.ones((1, 1)))
    for _ in range(dims):
        total = sp.kron(total, band, format="csr")
    return total


def _wide_box_pattern(radius):
    return lambda n, dims: _box_pattern(n, dims, radius)


def _box_without_corners_pattern(n, dims):
    """The box's neighbours less those moving along every axis (the 3-D 19-point stencil)."""
    step = sp.diags([1.0, 1.0], [-1, 1], shape=(n, n), format="csr")
    corners = sp.csr_matrix(np.ones((1, 1)))
    for _ in range(dims):
        corners = sp.kron(corners, step, format="csr")
    pattern = (_box_pattern(n, dims) - corners).tocsr()
    pattern.eliminate_zeros()
    return pattern


@pytest.mark.parametrize(
    "make, dims, points, reference",
    [
        (stencil_2d, 2, 5, _star_pattern),
        (stencil_2d, 2, 9, _box_pattern),
        *[(stencil_2d, 2, (2 * r + 1) ** 2, _wide_box_pattern(r)) for r in (2, 3, 4, 5)],  # r = 5 wider than the grid
        (stencil_3d, 3, 7, _star_pattern),
        (stencil_3d, 3, 19, _box_without_corners_pattern),
        (stencil_3d, 3, 27, _box_pattern),
    ],
)
def test_stencil_pattern_matches_kronecker_reference(make, dims, points, reference):
    n = 9
    m = make(n, points, seed=2)
    assert_canonical(m, (n**dims, n**dims))
    expected = reference(n, dims)
    expected.data[:] = 1
    pattern = m.copy()
    pattern.data[:] = 1
    assert (pattern != expected).nnz == 0
    spec = SyntheticSpec("x", "f", make.__name__, {"n": n, "points": points})
    assert spec.expected_nnz == m.nnz


@pytest.mark.parametrize(
    "make, points, dims, radius",
    [(stencil_2d, 5, 2, 1), (stencil_2d, 9, 2, 1), (stencil_2d, 25, 2, 2), (stencil_2d, 49, 2, 3), (stencil_2d, 121, 2, 5),
     (stencil_3d, 7, 3, 1), (stencil_3d, 19, 3, 1), (stencil_3d, 27, 3, 1)],
)
def test_stencil_interior_rows_are_uniform(make, points, dims, radius):
    n = 14
    lengths = row_lengths(make(n, points)).reshape((n,) * dims)
    interior = lengths[(slice(radius, -radius),) * dims]
    assert (interior == points).all() and cv(interior.ravel().astype(float)) == 0
    assert lengths.min() < points  # boundary rows lose neighbours


# ---------------------------------------------------------------------------------------------
# Banded


@pytest.mark.parametrize("n, bandwidth", [(50, 0), (50, 3), (20, 30)])
def test_full_band_matches_reference(n, bandwidth):
    m = banded(n, bandwidth)
    distance = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    np.testing.assert_array_equal(m.toarray() != 0, distance <= bandwidth)
    assert SyntheticSpec("x", "f", "banded", {"n": n, "bandwidth": bandwidth}).expected_nnz == m.nnz


def test_a_band_wider_than_the_matrix_is_the_full_matrix_at_its_size(monkeypatch):
    """Its n x (2 w + 1) candidates were built whatever n: banded(20, 10**7) took 2.6 GiB and
    banded(2000, 10**6), a full 4M-entry matrix, was refused as 4e9 entries (a review)."""
    import seer.datasets.generators as generators

    built = []
    make = generators._csr_from_candidates
    monkeypatch.setattr(generators, "_csr_from_candidates", lambda inside, *rest: built.append(inside.size) or make(inside, *rest))
    for n, bandwidth, fill in ((20, 10**7, 1.0), (2000, 10**6, 1.0), (30, 10**5, 0.5)):
        m = banded(n, bandwidth, fill, seed=1)
        assert built.pop() == n * (2 * n - 1)
        assert_canonical(m, (n, n))
        assert m.nnz == n * n if fill == 1 else (m.diagonal() != 0).all()


def test_partial_band_keeps_diagonal_and_fill_share():
    n, bandwidth, fill = 4000, 10, 0.3
    m = banded(n, bandwidth, fill, seed=8)
    assert_canonical(m, (n, n))
    rows, cols = m.nonzero()
    assert (np.abs(rows - cols) <= bandwidth).all() and (m.diagonal() != 0).all()
    expected = SyntheticSpec("x", "f", "banded", {"n": n, "bandwidth": bandwidth, "fill": fill}).expected_nnz
    assert abs(m.nnz / expected - 1) < 0.02


# ---------------------------------------------------------------------------------------------
# Log-normal rows


@pytest.mark.parametrize("sigma", [0.3, 1.0])
def test_lognormal_row_lengths(sigma):
    rows, mean_row = 20_000, 200
    m = lognormal_rows(rows, 100_000, mean_row, sigma, seed=6)
    assert_canonical(m, (rows, 100_000))
    lengths = row_lengths(m)
    kwargs = {"rows": rows, "cols": 100_000, "mean_row": mean_row, "sigma": sigma}
    spec = SyntheticSpec("x", "f", "lognormal_rows", kwargs)
    tolerance = 5 * np.sqrt(np.expm1(sigma**2) / rows)  # five standard errors of the mean length
    assert abs(m.nnz / spec.expected_nnz - 1) < tolerance
    assert abs(np.log(lengths[lengths > 0]).std() - sigma) < 0.05
    assert abs(cv(lengths) - np.sqrt(np.expm1(sigma**2))) < 0.1


def test_lognormal_caps_rows_at_cols():
    m = lognormal_rows(2000, 30, 20, 2.0, seed=1)
    assert row_lengths(m).max() <= 30 and (row_lengths(m) == 0).any()


# ---------------------------------------------------------------------------------------------
# Block replication


def test_block_replicate_keeps_blocks_in_place(suitesparse_dir):
    A = read_matrix(suitesparse_dir / "HB__bcsstk01.mtx.gz")
    copies = 5
    B = block_replicate(A, copies, permute=False, seed=1, coupling=3)
    assert_canonical(B, (copies * 48, copies * 48))
    assert B.nnz == (copies + 3) * A.nnz
    expected_block = A.astype(np.float32).toarray()
    dense = B.toarray().reshape(copies, 48, copies, 48).transpose(0, 2, 1, 3)
    filled = {(i, j) for i in range(copies) for j in range(copies) if dense[i, j].any()}
    assert {(i, i) for i in range(copies)} <= filled and len(filled) == copies + 3
    for i, j in filled:
        np.testing.assert_array_equal(dense[i, j], expected_block)


def test_block_replicate_permutation_is_symmetric(suitesparse_dir):
    A = read_matrix(suitesparse_dir / "HB__bcsstk01.mtx.gz")
    copies = 7
    plain, shuffled = block_replicate(A, copies, permute=False), block_replicate(A, copies, seed=3)
    assert_canonical(shuffled, plain.shape)
    assert not same_matrix(plain, shuffled)
    # one relabelling of rows and columns: row and column lengths, values and the diagonal survive
    for axis in (0, 1):
        np.testing.assert_array_equal(np.sort(plain.getnnz(axis=axis)), np.sort(shuffled.getnnz(axis=axis)))
    np.testing.assert_array_equal(np.sort(plain.data), np.sort(shuffled.data))
    np.testing.assert_array_equal(np.sort(plain.diagonal()), np.sort(shuffled.diagonal()))
    assert abs(shuffled - shuffled.T).max() == 0  # bcsstk01 is symmetric, so is P B P^T


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_block_replicate_takes_every_floating_dtype(suitesparse_dir, dtype):
    """scipy builds no float16 matrix from coordinates: block_replicate raised its ValueError where the other
    generators made float16 matrices (a review). The same entries as float32's, the file's values cast."""
    A = read_matrix(suitesparse_dir / "HB__bcsstk01.mtx.gz")
    A.data = np.linspace(-0.9, 0.9, A.nnz) + 0.05  # in float16's range (the file's stiffnesses reach 1e9)
    B, single, double = (block_replicate(A, 4, seed=2, coupling=3, dtype=d) for d in (dtype, np.float32, np.float64))
    assert_canonical(B, single.shape)
    assert B.dtype == dtype and (B.indptr == single.indptr).all() and (B.indices == single.indices).all()
    np.testing.assert_array_equal(B.data, double.data.astype(dtype))


def test_block_replicate_rectangular(suitesparse_dir):
    A = read_matrix(suitesparse_dir / "LPnetlib__lpi_galenet.mtx.gz")
    B = block_replicate(A, 4, seed=2)
    assert_canonical(B, (4 * A.shape[0], 4 * A.shape[1]))
    for axis in (0, 1):
        np.testing.assert_array_equal(np.sort(B.getnnz(axis=axis)), np.sort(np.tile(A.getnnz(axis=axis), 4)))
    assert block_replicate(A, 4, seed=2, coupling=2).nnz == 6 * A.nnz


@pytest.mark.parametrize(
    "call, problem",
    [
        (lambda: rmat(0, 4), "scale"),
        (lambda: rmat(8, 4, 0.6, 0.3, 0.2), "a \\+ b \\+ c < 1"),
        (lambda: stencil_2d(10, 7), "5, 9, 25, 49, 81 or 121"),
        (lambda: stencil_3d(10, 9), "7, 19 or 27"),
        (lambda: banded(10, 2, fill=0), "fill"),
        (lambda: lognormal_rows(10, 10, -1, 1), "mean_row"),
        (lambda: block_replicate(sp.eye(3), 2, coupling=3), "coupling"),
        (lambda: synthetic_suite("huge"), "suite kind"),
        # sizes that are no whole numbers, parameters that are not finite: named, not numpy's errors
        (lambda: rmat(3.0, 4), "scale must be a whole number, got 3.0"),
        (lambda: stencil_2d(2.5), "n must be a whole number, got 2.5"),
        (lambda: banded(5, 1.5), "bandwidth must be a whole number, got 1.5"),  # had built a lopsided band
        (lambda: lognormal_rows(5, 2.5, 2, 1), "cols must be a whole number"),
        (lambda: block_replicate(sp.eye(3), 2.5), "copies must be a whole number"),
        (lambda: block_replicate(sp.eye(3), 3, coupling=1.5), "coupling must be a whole number"),
        (lambda: rmat(4, 4, 0.5, float("nan"), 0.1), "b must be a finite number, got nan"),
        (lambda: lognormal_rows(5, 5, 2, float("inf")), "sigma must be a finite number"),
        (lambda: rmat(True, 4), "scale must be a whole number, got True"),
        # sizes past what host memory holds: said before numpy tries
        (lambda: rmat(30, 64), r"about 6\.87e\+10 entries"),
        (lambda: stencil_2d(10**6), "more than the generators build"),
        (lambda: banded(10**9, 1000), "more than the generators build"),
        (lambda: block_replicate(sp.eye(3), 10**9), "more than the generators build"),
        # an integer dtype would round the random values (magnitudes in [0.5, 1)) to zero
        (lambda: banded(5, 1, dtype=np.int32), "floating dtype, got int32"),
        # found by an audit: a float count of points passed, sigma**2 overflowed, imaginary parts were dropped
        (lambda: stencil_2d(10, 5.0), "points must be a whole number, got 5.0"),
        (lambda: stencil_3d(10, 7.0), "points must be a whole number, got 7.0"),
        (lambda: lognormal_rows(5, 5, 2, 1e200), r"sigma in \[0, 10\.0\]"),
        (lambda: block_replicate(sp.eye(3, dtype=complex) * 1j, 2), "takes a real matrix"),
        # found by a review: numpy's TypeError, the integer reason for a complex dtype, a bool taken for a
        # number, a string taken for True, scipy's ValueError
        (lambda: rmat(4, 2, dtype="bfloat16"), "numpy floating dtype, got 'bfloat16'"),
        (lambda: rmat(4, 2, dtype=np.complex64), "real floating dtype, got complex64: the generators make real"),
        (lambda: rmat(4, True), "edge_factor must be a finite number, got True"),
        (lambda: rmat(4, 2, scramble="no"), "scramble must be True or False, got 'no'"),
        (lambda: block_replicate(sp.eye(3), 2, permute="no"), "permute must be True or False, got 'no'"),
        (lambda: block_replicate("x", 2), "block_replicate takes a 2-D matrix .*got str"),
        # parameters that give an empty matrix, which no benchmark wants
        (lambda: rmat(4, 0.01), "R-MAT of scale 4 and edge_factor 0.01 .*gives an empty matrix"),
        (lambda: lognormal_rows(5, 5, 1e-300, 0), "every row rounds to length 0.*gives an empty matrix"),
        (lambda: block_replicate(sp.csr_matrix((3, 4)), 2), "a 3 x 4 matrix without entries gives an empty matrix"),
        # a MemoryError from the row lengths and pointers; int64 keys row * cols + col that overflow
        (lambda: lognormal_rows(2**40, 5, 1e-9, 0), "row lengths and pointers of 1,099,511,627,776 rows"),
        (lambda: lognormal_rows(10, 2**62, 3, 1), "more cells than int64 keys number"),
        # Many copies of a tall block: a block of 2**31 rows took 35 s and a 16 GiB indptr to build.
        (lambda: block_replicate(sp.csr_matrix(([1.0], ([0], [0])), shape=(2**20, 1)), 2**12), "row pointers and labels"),
    ],
)
def test_bad_arguments(call, problem):
    with pytest.raises(InputError, match=problem):
        call()


# ---------------------------------------------------------------------------------------------
# Suites


def test_large_suite_without_real_matrices():
    specs = synthetic_suite("large")
    assert len(specs) >= 150 and len({s.id for s in specs}) == len(specs)
    assert {s.family for s in specs} == {
        "synthetic/rmat", "synthetic/stencil_2d", "synthetic/stencil_3d", "synthetic/banded", "synthetic/lognormal_rows"
    }
    nnz = np.array([s.expected_nnz for s in specs])
    assert nnz.min() >= 1_000_000 and nnz.max() <= 50_000_000
    assert nnz.min() < 1_500_000 and nnz.max() > 40_000_000
    sigmas = {s.kwargs["sigma"] for s in specs if s.generator == "lognormal_rows"}
    assert min(sigmas) == 0.3 and max(sigmas) == 2.0
    assert len({s.kwargs["a"] for s in specs if s.generator == "rmat"}) >= 3
    assert {s.kwargs["points"] for s in specs if s.generator.startswith("stencil")} == {5, 9, 25, 49, 81, 121, 7, 19, 27}
    assert len({s.kwargs["bandwidth"] for s in specs if s.generator == "banded"}) >= 5
    # per family the sizes span the range (no family stuck at one size)
    for family, sizes in _by_family(specs).items():
        assert max(sizes) / min(sizes) > 10, family


def _by_family(specs):
    sizes = {}
    for spec in specs:
        sizes.setdefault(spec.family, []).append(spec.expected_nnz)
    return sizes


def test_suite_ids_are_stable_and_seeded():
    specs = synthetic_suite("large")
    assert specs == synthetic_suite("large")
    assert "synthetic/stencil_2d/n3000-points5/seed0" in {s.id for s in specs}
    reseeded = synthetic_suite("large", seed=1)
    assert all(s.id.endswith("/seed1") for s in reseeded)
    assert [s.id.removesuffix("/seed0") for s in specs] == [s.id.removesuffix("/seed1") for s in reseeded]
    assert len({s.kwargs["seed"] for s in specs} & {s.kwargs["seed"] for s in reseeded}) == 0
    hash(specs[0])


def test_large_suite_with_real_matrices(suitesparse_dir):
    specs = synthetic_suite("large", real_folder=suitesparse_dir)
    derived = [s for s in specs if s.generator == "block_replicate"]
    assert len(specs) - len(derived) >= 150 and len(derived) >= 40
    assert all(s.family == "derived/" + s.kwargs["matrix"].split("/")[0] for s in derived)
    assert all(1_000_000 <= s.expected_nnz <= 50_000_000 for s in derived)
    assert {s.kwargs["permute"] for s in derived} == {True, False}
    assert len({s.family for s in derived}) >= 5
    assert len({s.id for s in specs}) == len(specs)


def test_small_suite_builds_as_promised(suitesparse_dir):
    specs = synthetic_suite("small", real_folder=suitesparse_dir)
    assert 18 <= len(specs) <= 24
    assert Counter(s.generator for s in specs).keys() == {
        "rmat", "stencil_2d", "stencil_3d", "banded", "lognormal_rows", "block_replicate"
    }
    for spec in specs:
        m = build(spec, real_folder=suitesparse_dir)
        assert_canonical(m, m.shape)
        assert 10_000 <= spec.expected_nnz <= 200_000
        tolerance = 0.1 if spec.generator == "lognormal_rows" else 0.02
        assert abs(m.nnz / spec.expected_nnz - 1) <= tolerance, spec.id


def test_derived_spec_needs_real_folder(suitesparse_dir):
    spec = next(s for s in synthetic_suite("small", real_folder=suitesparse_dir) if s.generator == "block_replicate")
    with pytest.raises(InputError, match="real_folder"):
        build(spec)
    assert build(spec, suitesparse_dir).nnz == spec.expected_nnz


@pytest.mark.parametrize("seed", [-1, None, 1.5, True])
def test_a_seed_that_names_no_one_matrix_is_refused(seed):
    """-1 raised numpy's own error; None gave another matrix on every call."""
    with pytest.raises(InputError, match="seed must be a whole number >= 0"):
        banded(100, 2, seed=seed)
    with pytest.raises(InputError, match="seed must be a whole number >= 0"):
        synthetic_suite("small", seed=seed)


def test_sizes_given_as_small_or_unsigned_numpy_integers_make_the_same_matrices():
    """Sizes were computed in the argument's own type: np.uint8(10) made an empty R-MAT, np.uint16(3)
    a band without its diagonals, np.int16(256) a broadcasting error (a review)."""
    def same(x, y):
        return x.shape == y.shape and (x != y).nnz == 0

    assert same(rmat(np.uint8(10), 4, seed=1), rmat(10, 4, seed=1))
    assert same(banded(1000, np.uint16(3), seed=1), banded(1000, 3, seed=1))
    assert same(stencil_2d(np.int16(256), np.int8(5), seed=1), stencil_2d(256, 5, seed=1))
    assert same(lognormal_rows(np.uint16(300), np.uint16(200), 5.0, 1.0, seed=1),
                lognormal_rows(300, 200, 5.0, 1.0, seed=1))
