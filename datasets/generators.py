"""Seeded generators of large sparse matrices (1M to 50M nnz) that the real set lacks.

Every generator returns a canonical scipy CSR matrix (sorted column indices, no duplicate entries,
int32 indices when they fit) with nonzero random values (magnitudes uniform in [0.5, 1), random
signs; float32 unless ``dtype`` says otherwise), but for :func:`block_replicate`, which keeps the
replicated matrix's values. The same arguments and seed give the same matrix.
Large arrays are built in place where numpy allows: fresh memory costs as much as the arithmetic.

:func:`synthetic_suite` lists named, reproducible :class:`SyntheticSpec` s; :func:`build` makes one.
Their ``family`` (``synthetic/<generator>`` or ``derived/<Group>``) names where a spec comes from; the
group for cross-validation is :mod:`seer.datasets.cases`' (a replica's is its original's problem
family, so that cross-validation never splits the two; a generated matrix's, its structure family).
"""
from __future__ import annotations

import itertools
import math
import numbers
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln, ndtr

from seer.datasets.suitesparse import MatrixInfo, list_matrices, read_header, read_listed_matrix, readable
from seer.errors import InputError

# R-MAT draws edges in chunks so that its dozens of passes over random words stay in cache.
_RMAT_CHUNK = 1 << 18
# Binary digits of each R-MAT bit probability: |rounding| <= 2**-13 (expected_nnz accounts for it),
# but for a probability under 2**-12 or over 1 - 2**-12, held at the nearest (a level never certain).
_PROBABILITY_DIGITS = 12
_INT32_MAX = np.iinfo(np.int32).max
_INT64_MAX = np.iinfo(np.int64).max


# ---------------------------------------------------------------------------------------------
# Shared pieces


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InputError(message)


def _whole(**values) -> list[int]:
    """Each value a whole number (a numpy integer counts; a bool or a float, even 3.0, does not), as a
    Python int: sizes computed in a small or unsigned numpy type (``np.uint8(10)``) overflowed into
    empty matrices."""
    for name, value in values.items():
        _require(isinstance(value, numbers.Integral) and not isinstance(value, bool),
                 f"{name} must be a whole number, got {value!r}")
    return [int(value) for value in values.values()]


def _finite(**values) -> None:
    """Each value a finite real number (a bool is no number here, as in :func:`_whole`)."""
    for name, value in values.items():
        _require(isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value),
                 f"{name} must be a finite number, got {value!r}")


def _flags(**values) -> None:
    """Each value True or False: a string such as "no" is true, and would switch the option on."""
    for name, value in values.items():
        _require(isinstance(value, (bool, np.bool_)), f"{name} must be True or False, got {value!r}")


# Log-normal row lengths of a log-space spread past this put nearly every nonzero in a few rows.
MAX_LOG_SIGMA = 10.0
# Generated matrices are built in host memory, several arrays of this many entries at once.
MAX_ENTRIES = 2**31


def _fits(entries: float, what: str) -> None:
    _require(entries <= MAX_ENTRIES, f"{what} would hold about {entries:.3g} entries, more than the generators build "
                                     f"({MAX_ENTRIES:,}); choose a smaller size")


def _some_entries(count: float, what: str) -> None:
    """An empty matrix measures nothing: parameters that give one are a mistake, said as such."""
    _require(count >= 1, f"{what} gives an empty matrix; choose larger parameters")


def _value_dtype(dtype) -> None:
    try:
        dtype = np.dtype(dtype)
    except TypeError as err:  # "bfloat16" and the like: not a numpy dtype at all
        raise InputError(f"values must have a numpy floating dtype, got {dtype!r} ({err})") from None
    _require(not np.issubdtype(dtype, np.complexfloating), f"values must have a real floating dtype, got {dtype}: "
                                                           "the generators make real matrices")
    _require(np.issubdtype(dtype, np.floating), f"values must have a floating dtype, got {dtype}: "
                                                "an integer one would round the random values to zero")


def _index_dtype(largest: int) -> type:
    return np.int32 if largest <= _INT32_MAX else np.int64


def _fair_words(rng: np.random.Generator, count: int) -> np.ndarray:
    """uint32 words of fair random bits: the bit generator's raw output, twice as fast as integers()."""
    return rng.bit_generator.random_raw((count + 1) // 2).view(np.uint32)[:count]


def _random_values(rng: np.random.Generator, count: int, dtype) -> np.ndarray:
    """Magnitudes uniform in [0.5, 1) with random signs, written as float32 bit patterns in place;
    for a narrower ``dtype`` the mantissa bits it lacks are cleared, so that rounding cannot reach 1."""
    bits = _fair_words(rng, count)
    dropped = max(0, 23 - np.finfo(dtype).nmant)
    bits &= np.uint32(0x807FFFFF & ~((1 << dropped) - 1))  # keep a random sign and mantissa
    bits |= np.uint32(0x3F000000)  # exponent of 0.5
    return bits.view(np.float32).astype(dtype, copy=False)


def _csr(indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    index_dtype = _index_dtype(max(len(indices), *shape))
    return sp.csr_matrix(
        (values, indices.astype(index_dtype, copy=False), indptr.astype(index_dtype, copy=False)), shape=shape
    )


def _indptr_from_counts(counts: np.ndarray) -> np.ndarray:
    indptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr


def _csr_from_keys(keys: np.ndarray, shape: tuple[int, int], rng, dtype) -> sp.csr_matrix:
    """CSR of the distinct entries ``keys = row * cols + col`` (int64, consumed): sort, drop repeats."""
    n_rows, n_cols = shape
    keys.sort()
    distinct = np.empty(len(keys), dtype=bool)
    distinct[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=distinct[1:])
    keys = keys[distinct]
    indptr = np.searchsorted(keys, np.arange(n_rows + 1, dtype=np.int64) * n_cols)
    keys %= n_cols
    return _csr(indptr, keys, _random_values(rng, len(keys), dtype), shape)


def _csr_from_candidates(inside: np.ndarray, columns: np.ndarray, shape, rng, dtype) -> sp.csr_matrix:
    """CSR of the ``columns[i, k]`` with ``inside[i, k]``; each row's candidates in increasing order."""
    indptr = _indptr_from_counts(inside.sum(axis=1))
    indices = columns[inside]
    return _csr(indptr, indices, _random_values(rng, len(indices), dtype), shape)


def _expected_distinct(draws: np.ndarray, bins: float) -> np.ndarray:
    """Expected number of occupied bins after ``draws`` uniform draws into ``bins`` (with repeats)."""
    return -bins * np.expm1(draws * np.log1p(-1.0 / bins)) if bins > 1 else np.minimum(draws, 1.0)


# ---------------------------------------------------------------------------------------------
# R-MAT


def _rng(seed) -> np.random.Generator:
    """The generator of ``seed``, a whole number >= 0: None (fresh entropy on every call) would break
    the promise that the same arguments give the same matrix."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"seed must be a whole number >= 0 (the same seed gives the same matrix); got {seed!r}")
    return np.random.default_rng(seed)


def rmat(
    scale: int, edge_factor: float, a: float = 0.57, b: float = 0.19, c: float = 0.19,
    seed=0, *, scramble: bool = True, dtype=np.float32,
) -> sp.csr_matrix:
    """Power-law graph: ``edge_factor * 2**scale`` R-MAT edges on ``2**scale`` vertices, deduplicated.

    Each edge picks a quadrant per level with probabilities a, b, c, d = 1 - a - b - c. ``scramble``
    relabels vertices by a random permutation (as Graph500 does) so heavy rows are not all at the top.
    """
    (scale,) = _whole(scale=scale)
    _finite(edge_factor=edge_factor, a=a, b=b, c=c)
    _flags(scramble=scramble)
    _value_dtype(dtype)
    _require(1 <= scale <= 30, f"R-MAT scale must lie in [1, 30], got {scale}")
    _require(edge_factor > 0, f"R-MAT edge_factor must be positive, got {edge_factor}")
    _fits(edge_factor * 2.0**scale, "this R-MAT graph")
    _some_entries(round(edge_factor * 2.0**scale), f"R-MAT of scale {scale} and edge_factor {edge_factor} (no edge)")
    d = 1.0 - a - b - c
    _require(min(a, b, c, d) > 0, f"R-MAT needs a, b, c > 0 with a + b + c < 1, got a={a}, b={b}, c={c}")
    rng = _rng(seed)
    n = 1 << scale
    relabel = rng.permutation(n).astype(np.uint32) if scramble else None
    keys = _rmat_keys(rng, scale, round(edge_factor * n), _rmat_bit_probabilities(a, b, c), relabel)
    return _csr_from_keys(keys, (n, n), rng, dtype)


def _rmat_bit_probabilities(a: float, b: float, c: float) -> tuple[int, int, int]:
    """Per level: P(row bit), P(col bit | top half), P(col bit | bottom half), in 1/4096ths.

    The row bit is 1 (bottom half) with probability c + d; the column bit is then 1 with
    probability b / (a + b) in the top half and d / (c + d) in the bottom half.
    """
    d = 1.0 - a - b - c
    top = 1 << _PROBABILITY_DIGITS
    return tuple(min(max(round(p * top), 1), top - 1) for p in (c + d, b / (a + b), d / (c + d)))


def _rmat_keys(rng, scale: int, count: int, bit_probabilities, relabel) -> np.ndarray:
    """``row << scale | col`` of ``count`` R-MAT edges, every level at once.

    A word of row bits and two words of column bits (one per half) selected by the row word give
    all levels in a few word operations; chunks keep those passes in cache.
    """
    p_row, p_col_top, p_col_bottom = bit_probabilities
    mask = np.uint32((1 << scale) - 1)
    keys = np.empty(count, dtype=np.int64)
    for start in range(0, count, _RMAT_CHUNK):
        size = min(_RMAT_CHUNK, count - start)
        row = _bernoulli_words(rng, size, p_row) & mask
        col = (_bernoulli_words(rng, size, p_col_top) & ~row) | (_bernoulli_words(rng, size, p_col_bottom) & row)
        col &= mask
        if relabel is not None:
            row, col = relabel[row], relabel[col]
        chunk = keys[start:start + size]
        chunk[:] = row
        chunk <<= scale
        chunk |= col
    return keys


def _bernoulli_words(rng, count: int, scaled_p: int) -> np.ndarray:
    """uint32 words whose bits are independent Bernoulli(scaled_p / 4096) draws.

    Reading p's binary digits from the least significant one, OR-ing a fair random word for a 1 and
    AND-ing one for a 0 turns the bit probability q into (digit + q) / 2, which ends at p.
    """
    lowest_one = (scaled_p & -scaled_p).bit_length() - 1  # digits below it would leave the word at 0
    word = _fair_words(rng, count)  # the lowest 1 digit: q = 1/2
    for digit in range(lowest_one + 1, _PROBABILITY_DIGITS):
        if (scaled_p >> digit) & 1:
            word |= _fair_words(rng, count)
        else:
            word &= _fair_words(rng, count)
    return word


def _rmat_expected_nnz(scale: int, edge_factor: float, a=0.57, b=0.19, c=0.19, **_) -> float:
    """Expected distinct edges: sum over cells of P(cell hit), grouping cells by quadrant counts.

    Uses the quadrant probabilities the generator really samples (bit probabilities in 1/4096ths).
    """
    p_row, p_col_top, p_col_bottom = (p / (1 << _PROBABILITY_DIGITS) for p in _rmat_bit_probabilities(a, b, c))
    a, b = (1 - p_row) * (1 - p_col_top), (1 - p_row) * p_col_top
    c, d = p_row * (1 - p_col_bottom), p_row * p_col_bottom
    edges = round(edge_factor * (1 << scale))
    ka, kb, kc = (k.ravel() for k in np.meshgrid(*[np.arange(scale + 1)] * 3, indexing="ij"))
    kd = scale - ka - kb - kc
    ok = kd >= 0
    ka, kb, kc, kd = ka[ok], kb[ok], kc[ok], kd[ok]
    log_cells = gammaln(scale + 1) - gammaln(ka + 1) - gammaln(kb + 1) - gammaln(kc + 1) - gammaln(kd + 1)
    log_p = ka * math.log(a) + kb * math.log(b) + kc * math.log(c) + kd * math.log(d)
    p_hit = -np.expm1(edges * np.log1p(-np.exp(log_p)))
    return float(np.sum(np.exp(log_cells) * p_hit))


# ---------------------------------------------------------------------------------------------
# Stencils


# The whole box of radius 2 to 5 around each point of a 2-D grid, by its point count: wide filters
# and high-order schemes, regular rows of 25 to 121 nonzeros in 2r + 1 runs (NOTES SpMV 43).
_WIDE_BOXES_2D = {(2 * radius + 1) ** 2: radius for radius in (2, 3, 4, 5)}


def stencil_2d(n: int, points: int = 5, seed=0, *, dtype=np.float32) -> sp.csr_matrix:
    """5- or 9-point stencil on an n x n grid (n**2 rows, row-major numbering), or the whole box of
    radius 2 to 5 around each point (25, 49, 81 or 121 points)."""
    (points,) = _whole(points=points)  # 5.0 passed the membership test
    _require(points in (5, 9, *_WIDE_BOXES_2D), f"2-D stencils have 5, 9, 25, 49, 81 or 121 points, got {points}")
    return _grid_stencil(n, _stencil_offsets(2, points), seed, dtype)


def stencil_3d(n: int, points: int = 7, seed=0, *, dtype=np.float32) -> sp.csr_matrix:
    """7-, 19- or 27-point stencil on an n x n x n grid (n**3 rows): the faces' neighbours, then
    the edges' too, then the whole 3 x 3 x 3 box."""
    (points,) = _whole(points=points)
    _require(points in (7, 19, 27), f"3-D stencils have 7, 19 or 27 points, got {points}")
    return _grid_stencil(n, _stencil_offsets(3, points), seed, dtype)


def _stencil_offsets(dims: int, points: int) -> np.ndarray:
    """Neighbour offsets in lexicographic order, which is increasing column order in every row:
    those of the 3**dims box that move along at most k axes, k giving ``points`` offsets, or a
    wide 2-D box whole."""
    if dims == 2 and points in _WIDE_BOXES_2D:
        steps = range(-_WIDE_BOXES_2D[points], _WIDE_BOXES_2D[points] + 1)
        return np.array(list(itertools.product(steps, repeat=dims)))
    box = np.array(list(itertools.product((-1, 0, 1), repeat=dims)))
    axes_moved = np.abs(box).sum(axis=1)
    k = next(k for k in range(dims + 1) if (axes_moved <= k).sum() == points)
    return box[axes_moved <= k]


def _grid_stencil(n: int, offsets: np.ndarray, seed, dtype) -> sp.csr_matrix:
    (n,) = _whole(n=n)
    _value_dtype(dtype)
    _require(n >= 1, f"grid size n must be >= 1, got {n}")
    dims = offsets.shape[1]
    _fits(float(n) ** dims * len(offsets), f"a {len(offsets)}-point stencil on a grid of side {n}")
    size = n**dims
    strides = n ** np.arange(dims - 1, -1, -1)
    index_dtype = _index_dtype(size + int(np.abs(offsets @ strides).max()))
    inside = np.empty((size, len(offsets)), dtype=bool)
    columns = np.empty((size, len(offsets)), dtype=index_dtype)
    points = np.arange(size, dtype=index_dtype)
    for k, offset in enumerate(offsets):
        inside[:, k] = _inside_grid(n, offset).ravel()
        columns[:, k] = points + int(offset @ strides)
    return _csr_from_candidates(inside, columns, (size, size), _rng(seed), dtype)


def _inside_grid(n: int, offset: np.ndarray) -> np.ndarray:
    """Which grid points keep their neighbour at ``offset`` inside the grid (broadcast per axis)."""
    coordinate = np.arange(n)
    inside = np.ones((n,) * len(offset), dtype=bool)
    for axis, step in enumerate(offset):
        axis_ok = (coordinate + step >= 0) & (coordinate + step < n)
        inside &= axis_ok.reshape([-1 if i == axis else 1 for i in range(len(offset))])
    return inside


def _stencil_expected_nnz(n: int, points: int, dims: int) -> float:
    offsets = _stencil_offsets(dims, points)
    return float(np.prod(np.clip(n - np.abs(offsets), 0, None), axis=1).sum())


# ---------------------------------------------------------------------------------------------
# Banded


def banded(n: int, bandwidth: int, fill: float = 1.0, seed=0, *, dtype=np.float32) -> sp.csr_matrix:
    """n x n band |i - j| <= bandwidth; off-diagonal band entries kept with probability ``fill``."""
    n, bandwidth = _whole(n=n, bandwidth=bandwidth)
    _finite(fill=fill)
    _value_dtype(dtype)
    _require(n >= 1 and bandwidth >= 0, f"banded needs n >= 1 and bandwidth >= 0, got n={n}, bandwidth={bandwidth}")
    _require(0 < fill <= 1, f"banded fill must lie in (0, 1], got {fill}")
    # Diagonals past n - 1 hold no entry: a half-width beyond it would only cost memory (n x 2w cells).
    width = min(bandwidth, n - 1)
    _fits(float(n) * (2 * width + 1), f"a band of half-width {bandwidth} on {n} rows")  # candidates, before fill
    rng = _rng(seed)
    index_dtype = _index_dtype(n + width)
    columns = np.arange(n, dtype=index_dtype)[:, None] + np.arange(-width, width + 1, dtype=index_dtype)
    inside = columns >= 0
    inside &= columns < n
    if fill < 1:
        inside &= rng.random(columns.shape, dtype=np.float32) < fill
        inside[:, width] = True  # the diagonal stays: no empty rows
    return _csr_from_candidates(inside, columns, (n, n), rng, dtype)


def _banded_expected_nnz(n: int, bandwidth: int, fill: float = 1.0, **_) -> float:
    width = min(bandwidth, n - 1)
    off_diagonal = 2 * (width * n - width * (width + 1) // 2)  # diagonals 1..width, both sides
    return n + fill * off_diagonal


# ---------------------------------------------------------------------------------------------
# Log-normal row lengths


def lognormal_rows(rows: int, cols: int, mean_row: float, sigma: float, seed=0, *, dtype=np.float32) -> sp.csr_matrix:
    """Rows with log-normal lengths (mean ``mean_row``, log-space std ``sigma``) of uniform columns.

    Lengths are rounded and capped at ``cols`` (zero-length rows occur for large sigma); columns are
    drawn with repeats and deduplicated, so a row of length L holds slightly fewer than L entries.
    """
    rows, cols = _whole(rows=rows, cols=cols)
    _finite(mean_row=mean_row, sigma=sigma)
    _value_dtype(dtype)
    _require(rows >= 1 and cols >= 1, f"lognormal_rows needs rows, cols >= 1, got {rows} x {cols}")
    _require(mean_row > 0 and 0 <= sigma <= MAX_LOG_SIGMA,  # past it, sigma**2 overflows or no row is left
             f"lognormal_rows needs mean_row > 0 and sigma in [0, {MAX_LOG_SIGMA}], got {mean_row}, {sigma}")
    _fits(float(rows) * mean_row, f"{rows:,} rows of {mean_row:g} nonzeros on average")
    _fits(float(rows), f"the row lengths and pointers of {rows:,} rows")
    # Entry (i, j) is sorted by the int64 key i * cols + j.
    _require(rows * cols <= _INT64_MAX, f"lognormal_rows of {rows:,} x {cols:,} has more cells than int64 keys "
                                        "number; choose a smaller size")
    rng = _rng(seed)
    mu = math.log(mean_row) - sigma**2 / 2  # so that E[length] = mean_row
    lengths = np.clip(np.rint(rng.lognormal(mu, sigma, rows)), 0, cols).astype(np.int64)
    _some_entries(lengths.sum(), f"lognormal_rows with mean_row {mean_row:g}, sigma {sigma:g} and seed {seed} "
                                 "(every row rounds to length 0)")
    keys = np.repeat(np.arange(rows, dtype=np.int64) * cols, lengths)
    keys += rng.integers(0, cols, size=len(keys), dtype=np.int64)
    return _csr_from_keys(keys, (rows, cols), rng, dtype)


def _lognormal_expected_nnz(rows: int, cols: int, mean_row: float, sigma: float, **_) -> float:
    """E[distinct entries per row] integrated over the normal variable on a fine grid."""
    mu = math.log(mean_row) - sigma**2 / 2
    z = np.linspace(-9.0, 9.0, 36001)
    edges = np.concatenate(([-np.inf], (z[1:] + z[:-1]) / 2, [np.inf]))
    weights = np.diff(ndtr(edges))
    lengths = np.clip(np.rint(np.exp(mu + sigma * z)), 0, cols)
    return rows * float(weights @ _expected_distinct(lengths, cols))


# ---------------------------------------------------------------------------------------------
# Block replication of a real matrix


def block_replicate(
    A, copies: int, permute: bool = True, seed=0, *, coupling: int = 0, dtype=np.float32,
) -> sp.csr_matrix:
    """``copies`` of ``A`` on the block diagonal, plus ``coupling`` copies at random off-diagonal blocks.

    With ``permute`` rows and columns are relabelled by one random permutation (two when ``A`` is
    not square), which hides the block structure from row order while keeping every block's pattern.
    Values are ``A``'s (explicit zeros included); nnz is exactly ``(copies + coupling)`` times ``A``'s
    nnz once its duplicate entries are summed (as :func:`~seer.datasets.suitesparse.read_matrix` sums them).
    """
    copies, coupling = _whole(copies=copies, coupling=coupling)
    _flags(permute=permute)
    _value_dtype(dtype)
    _require(copies >= 1, f"block_replicate needs copies >= 1, got {copies}")
    _require(
        0 <= coupling <= copies * (copies - 1),
        f"coupling must lie in [0, copies * (copies - 1)] = [0, {copies * (copies - 1)}], got {coupling}",
    )
    block = _sparse_block(A)
    _require(not np.iscomplexobj(block.data), "block_replicate takes a real matrix: its values would lose their "
                                              "imaginary parts")
    block.sum_duplicates()
    _fits(float(copies + coupling) * block.nnz, f"{copies + coupling} copies of a matrix of {block.nnz:,} nonzeros")
    _fits(float(copies) * max(block.shape), f"the row pointers and labels of {copies} copies of a "
                                            f"{block.shape[0]:,} x {block.shape[1]:,} matrix")
    _some_entries(block.nnz, f"block_replicate of a {block.shape[0]:,} x {block.shape[1]:,} matrix without entries")
    rng = _rng(seed)
    block_row, block_col = _block_positions(rng, copies, coupling)
    m, n = block.shape
    rows = (block.row[None, :] + (block_row * m)[:, None]).ravel()
    cols = (block.col[None, :] + (block_col * n)[:, None]).ravel()
    values = np.tile(block.data.astype(dtype, copy=False), len(block_row))
    shape = (copies * m, copies * n)
    if permute:
        row_label = rng.permutation(shape[0])
        col_label = row_label if m == n else rng.permutation(shape[1])
        rows, cols = row_label[rows], col_label[cols]
    # Sorted by key, as _csr_from_keys does (the copies share no entry): scipy builds no float16 matrix
    # from coordinates, and the other generators make float16 ones.
    keys = rows.astype(np.int64) * shape[1] + cols
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    indptr = np.searchsorted(keys, np.arange(shape[0] + 1, dtype=np.int64) * shape[1])
    return _csr(indptr, keys % shape[1], values[order], shape)


def _sparse_block(A) -> sp.coo_matrix:
    """``A`` (a scipy sparse matrix, or anything 2-D that scipy turns into one) as COO."""
    try:
        return sp.coo_matrix(A)
    except (TypeError, ValueError) as err:
        raise InputError(f"block_replicate takes a 2-D matrix (scipy sparse or array-like), got {type(A).__name__}: "
                         f"{err}") from None


def _block_positions(rng, copies: int, coupling: int) -> tuple[np.ndarray, np.ndarray]:
    """Block (row, col) of every copy: the diagonal, then distinct random off-diagonal places."""
    off_diagonal = rng.choice(copies * (copies - 1), size=coupling, replace=False) if coupling else np.zeros(0, int)
    row, col = np.divmod(off_diagonal, max(copies - 1, 1))
    col += col >= row  # skip the diagonal block of that block row
    diagonal = np.arange(copies)
    return np.concatenate((diagonal, row)), np.concatenate((diagonal, col))


# ---------------------------------------------------------------------------------------------
# Named suites


GENERATORS: dict[str, Callable[..., sp.csr_matrix]] = {
    "rmat": rmat,
    "stencil_2d": stencil_2d,
    "stencil_3d": stencil_3d,
    "banded": banded,
    "lognormal_rows": lognormal_rows,
    "block_replicate": block_replicate,
}

_EXPECTED_NNZ: dict[str, Callable[..., float]] = {
    "rmat": _rmat_expected_nnz,
    "stencil_2d": lambda n, points=5, **_: _stencil_expected_nnz(n, points, 2),
    "stencil_3d": lambda n, points=7, **_: _stencil_expected_nnz(n, points, 3),
    "banded": _banded_expected_nnz,
    "lognormal_rows": _lognormal_expected_nnz,
    "block_replicate": lambda matrix_nnz, copies, coupling=0, **_: (copies + coupling) * matrix_nnz,
}


@dataclass(frozen=True)
class SyntheticSpec:
    """A named matrix recipe: ``build(spec)`` calls ``GENERATORS[generator](**kwargs)``.

    ``kwargs`` include the generator's seed, derived from the id, so an id pins one matrix. Derived
    specs name their real matrix (``matrix``: "Group/Name", with its ``matrix_nnz``) in place of ``A``.
    Treat ``kwargs`` as read-only.
    """

    id: str
    family: str
    generator: str
    kwargs: Mapping[str, Any] = field(hash=False)

    @property
    def expected_nnz(self) -> int:
        """nnz estimated without building: exact for stencils, full bands and replicas of matrices a manifest
        lists, expected otherwise (a symmetric file listed by its header alone counts its stored
        triangle twice, diagonal included: an upper bound)."""
        return round(_EXPECTED_NNZ[self.generator](**self.kwargs))


def build(spec: SyntheticSpec, real_folder=None) -> sp.csr_matrix:
    """Generate the matrix of ``spec``; derived specs read their real matrix from ``real_folder``."""
    kwargs = dict(spec.kwargs)
    if spec.generator == "block_replicate":
        _require(real_folder is not None, f"{spec.id} replicates a real matrix: pass real_folder")
        kwargs.pop("matrix_nnz")
        kwargs["A"] = read_listed_matrix(_real_info(real_folder, kwargs.pop("matrix")))
    return GENERATORS[spec.generator](**kwargs)


def synthetic_suite(kind: str = "large", seed: int = 0, real_folder=None) -> list[SyntheticSpec]:
    """The specs of one suite, in a fixed order.

    ``"large"``: 1M to 50M expected nnz, every synthetic family, plus block-replicated real matrices
    (10k+ nnz) when ``real_folder`` is given. ``"small"``: about 20 specs of 10k to 200k nnz for tests.
    """
    _rng(seed)  # checked here: the suite's seed is written into every id
    suites = {"large": (_large_synthetic, _large_derived, 1_000_000, 50_000_000),
              "small": (_small_synthetic, _small_derived, 10_000, 200_000)}
    _require(kind in suites, f"suite kind must be one of {sorted(suites)}, got {kind!r}")
    synthetic, derived, low, high = suites[kind]
    specs = synthetic(seed)
    if real_folder is not None:
        specs += derived(_replicable(real_folder), seed)
    return [spec for spec in specs if low <= spec.expected_nnz <= high]


def _spec(
    generator: str, suite_seed: int, family: str | None = None, subject: str = "", extra=None, **params
) -> SyntheticSpec:
    """Spec whose id lists its parameters; the generator seed is a hash of that id."""
    family = family or f"synthetic/{generator}"
    tag = "-".join(f"{name}{_tag_value(value)}" for name, value in params.items())
    spec_id = "/".join(part for part in (family, subject, tag, f"seed{suite_seed}") if part)
    kwargs = {**(extra or {}), **params, "seed": zlib.crc32(spec_id.encode())}
    return SyntheticSpec(spec_id, family, generator, kwargs)


def _tag_value(value) -> str:
    return str(int(value)) if isinstance(value, (bool, int, np.integer)) else f"{value:g}"


def _derived_spec(info, suite_seed: int, target_nnz: float, permute: bool, coupling_share: float) -> SyntheticSpec:
    copies = max(2, round(target_nnz / info.nnz))
    return _spec(
        "block_replicate", suite_seed, family=f"derived/{info.group}", subject=info.name,
        extra={"matrix": info.id, "matrix_nnz": info.nnz},
        copies=copies, permute=permute, coupling=round(coupling_share * copies),
    )


_RMAT_SKEWS = ((0.45, 0.15, 0.15), (0.57, 0.19, 0.19), (0.65, 0.15, 0.15), (0.75, 0.1, 0.1))


def _large_synthetic(seed: int) -> list[SyntheticSpec]:
    specs = [
        _spec("rmat", seed, scale=scale, edge_factor=edge_factor, a=a, b=b, c=c)
        for a, b, c in _RMAT_SKEWS for scale in range(16, 23) for edge_factor in (4, 16, 64)
    ]
    targets = np.geomspace(1.2e6, 45e6, 8)
    # Boxes of 49, 81 and 121 points were added on 2026-11-26: the held-out full bands of rows of
    # 49-129 had no other family of long regular rows to learn from (NOTES SpMV 43). The box of 25
    # (radius 2) on 2026-11-29: held out, the 27-point stencils had no other family of regular rows
    # of 20-30 nonzeros on grids, and the trees sent them to one thread a row (NOTES SpMV 68).
    for generator, dims, point_counts in (("stencil_2d", 2, (5, 9, 25, 49, 81, 121)), ("stencil_3d", 3, (7, 19, 27))):
        specs += [
            _spec(generator, seed, n=round((target / points) ** (1 / dims)), points=points)
            for points in point_counts for target in targets
        ]
    # Rows of 3 to 1,201 nonzeros, about 1.6x apart: 12 and 40 were added on 2026-11-25, when
    # the 27-point stencils, held out, showed a gap between rows of 17 and 49 (NOTES SpMV 40).
    for bandwidth in (1, 3, 8, 12, 24, 40, 64, 200, 600):
        for i, target in enumerate(np.geomspace(1.2e6, 45e6, 4)):
            fill = 1.0 if i % 2 == 0 else 0.5
            n = round(target / (1 + 2 * bandwidth * fill))
            specs.append(_spec("banded", seed, n=n, bandwidth=bandwidth, fill=fill))
    for sigma in (0.3, 0.6, 1.0, 1.5, 2.0):
        for mean_row in (8, 32, 128):
            for target in np.geomspace(1.2e6, 45e6, 3):
                rows = round(target / mean_row)
                specs.append(_spec("lognormal_rows", seed, rows=rows, cols=rows, mean_row=mean_row, sigma=sigma))
    return specs


def _large_derived(bases: list, seed: int) -> list[SyntheticSpec]:
    """Two replicas of every real matrix with 10k+ nnz: a block-diagonal one of a few million
    nnz and a permuted, coupled one of tens of millions; targets spread so sizes do not cluster."""
    bases = [info for info in bases if info.nnz >= 10_000]
    low_targets = np.geomspace(1.2e6, 6e6, max(len(bases), 1))
    high_targets = np.geomspace(10e6, 45e6, max(len(bases), 1))
    specs = []
    for info, low, high in zip(bases, low_targets, high_targets):
        specs.append(_derived_spec(info, seed, low, permute=False, coupling_share=0.0))
        specs.append(_derived_spec(info, seed, high, permute=True, coupling_share=0.1))
    return specs


def _small_synthetic(seed: int) -> list[SyntheticSpec]:
    return [
        _spec("rmat", seed, scale=11, edge_factor=8, a=0.57, b=0.19, c=0.19),
        _spec("rmat", seed, scale=12, edge_factor=16, a=0.45, b=0.15, c=0.15),
        _spec("rmat", seed, scale=13, edge_factor=8, a=0.75, b=0.1, c=0.1),
        _spec("stencil_2d", seed, n=60, points=5),
        _spec("stencil_2d", seed, n=120, points=9),
        _spec("stencil_3d", seed, n=20, points=7),
        _spec("stencil_3d", seed, n=14, points=27),
        _spec("banded", seed, n=20_000, bandwidth=2, fill=1.0),
        _spec("banded", seed, n=3_000, bandwidth=16, fill=0.5),
        _spec("banded", seed, n=500, bandwidth=100, fill=1.0),
        _spec("lognormal_rows", seed, rows=4_000, cols=4_000, mean_row=8, sigma=0.3),
        _spec("lognormal_rows", seed, rows=5_000, cols=8_000, mean_row=16, sigma=0.8),
        _spec("lognormal_rows", seed, rows=20_000, cols=20_000, mean_row=4, sigma=1.4),
        _spec("lognormal_rows", seed, rows=10_000, cols=10_000, mean_row=10, sigma=2.0),
    ]


def _small_derived(bases: list, seed: int) -> list[SyntheticSpec]:
    """One replica of the smallest 2k-40k nnz matrix of up to six groups."""
    chosen = {}
    for info in bases:
        if 2_000 <= info.nnz <= 40_000:
            chosen.setdefault(info.group, info)
    picked = list(chosen.values())[:6]
    targets = np.geomspace(30_000, 150_000, max(len(picked), 1))
    return [
        _derived_spec(info, seed, target, permute=i % 2 == 0, coupling_share=0.25 * (i % 2 == 0))
        for i, (info, target) in enumerate(zip(picked, targets))
    ]


def _replicable(real_folder) -> list:
    """Real matrices a replica can start from: those stored with real, integer or pattern values."""
    fields = readable(list_matrices(real_folder), lambda info: (info, read_header(info.path).field))
    return [info for info, field in fields if field != "complex"]


def _real_info(real_folder, matrix_id: str) -> MatrixInfo:
    for info in list_matrices(real_folder):
        if info.id == matrix_id:
            return info
    raise InputError(f"real matrix {matrix_id} is not in {real_folder}")
