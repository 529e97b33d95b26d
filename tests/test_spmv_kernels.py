"""SpMV kernels on the CPU (Triton interpreter) against scipy float64 references.

Every registered variant runs on random matrices (skewed row lengths, rectangular both ways,
duplicate and unsorted column indices), on the edge cases (empty rows and matrices, a row of
4,097 or 32,769 nonzeros, half-precision values on rows long enough to show sums not kept in
float32), on every value x index dtype pair and on real SuiteSparse matrices, among them those
that take the diagonal, stacked-slice, hot-column and large-row paths.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

import seer.kernels.spmv as spmv
from seer import sparse
from seer.datasets.suitesparse import read_matrix
from seer.errors import InputError
from seer.launch import cdiv
from seer.sparse import as_csr

VARIANT_NAMES = sorted(spmv.VARIANTS)
# Relative error bound per value dtype: float32 accumulation, then rounding of y to its dtype.
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}


# ------------------------------------------------------------------ matrices and checks


def random_csr(rng, rows: int, cols: int, lengths, *, sort_columns: bool = False) -> sp.csr_matrix:
    """float64 CSR with the given row lengths; columns drawn with replacement (duplicates occur)
    and left unsorted unless asked; values nonzero in +-[0.5, 1.5]."""
    lengths = np.asarray(lengths, dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = rng.integers(0, cols, size=indptr[-1]) if cols else np.zeros(0, dtype=np.int64)
    if sort_columns:
        for r in range(rows):
            indices[indptr[r]:indptr[r + 1]].sort()
    values = rng.uniform(0.5, 1.5, size=indptr[-1]) * rng.choice([-1.0, 1.0], size=indptr[-1])
    return sp.csr_matrix((values, indices, indptr), shape=(rows, cols))


def skewed_lengths(rng, rows: int, cols: int, mean: float) -> np.ndarray:
    """Power-law row lengths with some empty rows: a few rows far longer than the rest."""
    lengths = np.floor(mean * 0.3 * (rng.pareto(1.3, size=rows) + rng.uniform(0, 1, size=rows)))
    lengths[rng.random(rows) < 0.1] = 0
    return np.minimum(lengths, 4 * cols + 10).astype(np.int64)


def to_seer(matrix: sp.csr_matrix, dtype=torch.float32, index_dtype=torch.int32):
    """The matrix as a validated CsrMatrix, and the float64 scipy matrix of its rounded values."""
    values = torch.from_numpy(matrix.data).to(dtype)
    csr = as_csr((
        torch.from_numpy(matrix.indptr.astype(np.int64)).to(index_dtype),
        torch.from_numpy(matrix.indices.astype(np.int64)).to(index_dtype),
        values,
        matrix.shape,
    ))
    # copies: scipy may sort and merge duplicates in place, which must not reach ``matrix``
    exact = sp.csr_matrix((values.double().numpy(), matrix.indices.copy(), matrix.indptr.copy()),
                          shape=matrix.shape)
    return csr, exact


def random_vector(rng, n: int, dtype) -> torch.Tensor:
    return torch.from_numpy(rng.uniform(0.5, 1.5, size=n) * rng.choice([-1.0, 1.0], size=n)).to(dtype)


def assert_spmv_close(y: torch.Tensor, exact: sp.csr_matrix, x: torch.Tensor, dtype) -> None:
    """Error bounded by |A| |x| element by element: one wrong or unwritten row fails even in a
    long vector (NaN compares false and fails too). Not relative to |A x|, which a long row whose
    terms nearly cancel makes small while its rounding error grows with its length."""
    assert y.dtype == dtype and y.shape == (exact.shape[0],)
    x64 = x.double().numpy()
    ref = exact @ x64
    # |A| entry by entry (scipy's abs() would merge duplicates first)
    magnitude = sp.csr_matrix((np.abs(exact.data), exact.indices.copy(), exact.indptr.copy()), shape=exact.shape)
    scale = magnitude @ np.abs(x64)
    got = y.double().numpy()
    err = np.abs(got - ref)
    tol = TOLERANCE[dtype]
    bad = ~(err <= tol * scale)
    assert not bad.any(), f"{bad.sum()} rows off, e.g. row {np.flatnonzero(bad)[0]}: {got[bad][0]} vs {ref[bad][0]}"


def assert_graph_replays(run, csr, exact: sp.csr_matrix, rng, dtype) -> None:
    """``run(csr, x, out)`` called once, then captured in a CUDA graph and replayed twice on new x
    written into the captured x, ``out`` poisoned before each replay: each must match float64."""
    x = random_vector(rng, csr.cols, dtype).cuda()
    out = torch.empty(csr.rows, dtype=dtype, device="cuda")
    run(csr, x, out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run(csr, x, out)
    for _ in range(2):
        fresh = random_vector(rng, csr.cols, dtype)
        x.copy_(fresh)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_spmv_close(out.cpu(), exact, fresh, dtype)


def run_and_check(name: str, matrix: sp.csr_matrix, rng, dtype=torch.float32, index_dtype=torch.int32):
    csr, exact = to_seer(matrix, dtype, index_dtype)
    x = random_vector(rng, matrix.shape[1], dtype)
    out = torch.full((matrix.shape[0],), float("nan"), dtype=dtype)
    y = spmv.VARIANTS[name].run(csr, x, out)
    assert y is out
    assert_spmv_close(y, exact, x, dtype)
    return csr


# ------------------------------------------------------------------ registry


def test_variants_are_registered_consistently():
    assert 7 <= len(spmv.VARIANTS) <= 17
    kinds = set()
    for name, variant in spmv.VARIANTS.items():
        assert variant.name == name and variant.doc
        kind = variant.params["kind"]
        # the name is the kind, then its tile and flavour: adaptive, diagonal_major_r512, merge_c512_hot64k
        assert (name == kind or name.startswith(kind + "_")) and ("num_warps" in variant.params) == (kind not in ("torch", "cusparse"))
        kinds.add(kind)
    assert kinds == {"scalar", "vector", "diagonal", "diagonal_major", "merge", "adaptive", "torch", "cusparse",
                     "offsets"}


# ------------------------------------------------------------------ random matrices

SHAPES = [
    # rows, cols, mean row length
    (300, 200, 6),      # tall
    (40, 3000, 60),     # wide, long rows
    (257, 263, 3),      # odd sizes, very short rows
    (1, 700, 500),      # one row
    (600, 1, 1),        # one column
]


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("rows,cols,mean", SHAPES)
def test_random_skewed_matrices(name, rows, cols, mean):
    rng = np.random.default_rng(rows * 7919 + cols)
    lengths = skewed_lengths(rng, rows, cols, mean)
    run_and_check(name, random_csr(rng, rows, cols, lengths), rng)


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
def test_value_and_index_dtypes(name, dtype, index_dtype):
    rng = np.random.default_rng(11)
    matrix = random_csr(rng, 150, 120, skewed_lengths(rng, 150, 120, 8), sort_columns=True)
    run_and_check(name, matrix, rng, dtype, index_dtype)


@pytest.mark.parametrize("name", [n for n in VARIANT_NAMES if spmv.VARIANTS[n].params["kind"] in ("merge", "adaptive")])
def test_chunk_and_bin_edges(name):
    """Rows that end exactly on merge chunk edges (256 to 1024, and 4096), rows spanning several chunks,
    chunks holding only empty rows around them, and several rows long enough to be cut into
    adaptive pieces next to rows of every bin."""
    rng = np.random.default_rng(5)
    lengths = [1024, 1024, 0, 0, 2048, 1, 1023, 0, 4096, 4097, 9000, 0, 3, 8, 9, 128, 129, 4095, 5000, 0]
    run_and_check(name, random_csr(rng, len(lengths), 64, lengths), rng)


@pytest.mark.parametrize("hot", [1, 7, 64])
@pytest.mark.parametrize("dtype,index_dtype", [(torch.float32, torch.int32), (torch.bfloat16, torch.int64)], ids=str)
def test_hot_columns_read_packed_and_plain_x(hot, dtype, index_dtype):
    """Merge on hot columns with fewer of them than the matrix has columns (the shipped variant's
    64k cover every column of a test-sized matrix), so both sides of the pointer select run:
    columns read by Zipf counts, a strided x and out, the out's gaps and y poisoned. The hot
    columns are the most read, and the renumbered indices map back to the matrix's. Column 0 is
    read, but too rarely to be hot for 1 or 7 hot columns: renumbered, it is the select's first
    plain column, ``HOT`` itself (a Zipf count from column 0 made it always hot, and a select
    sending ``HOT`` to the packed side went unseen)."""
    rng = np.random.default_rng(hot)
    rows, cols = 300, 400
    matrix = random_csr(rng, rows, cols, skewed_lengths(rng, rows, cols, 12))
    matrix.indices = np.minimum(rng.zipf(1.5, matrix.nnz), cols - 1)
    matrix.indices[::199] = 0
    csr, exact = to_seer(matrix, dtype, index_dtype)
    run, _ = spmv._merge_variant(512, 32, 4, hot)
    x = random_vector(rng, 2 * cols, dtype)[::2]
    out = torch.full((2 * rows,), float("nan"), dtype=dtype)
    assert_spmv_close(run(csr, x, out[::2]), exact, x, dtype)
    assert out[1::2].isnan().all()

    hot_columns, renumbered = csr.scratch[("hot columns", hot)][-1]
    assert hot_columns.dtype == renumbered.dtype == index_dtype
    uses = np.bincount(matrix.indices, minlength=cols)
    assert uses[hot_columns.numpy()].min() >= np.delete(uses, hot_columns.numpy()).max() > 0
    packed = renumbered < hot
    back = torch.where(packed, hot_columns[renumbered.clamp(max=hot - 1)], renumbered - hot)
    assert torch.equal(back, csr.indices) and 0 < packed.sum() < csr.nnz
    assert bool((renumbered == hot).any()) == (hot < 64)


def test_hot_columns_are_not_renumbered_past_the_index_dtype():
    """Columns renumbered c + 64k would pass int32 on a matrix of 2**31 - 100 columns: its plan
    reads the matrix's own indices instead (its x is not needed to make the plan)."""
    cols = 2**31 - 100
    indptr, indices = torch.tensor([0, 2, 3], dtype=torch.int32), torch.tensor([5, cols - 1, 7], dtype=torch.int32)
    csr = as_csr((indptr, indices, torch.ones(3), (2, cols)))
    spmv.VARIANTS["merge_c512_hot64k"].bind(csr)
    assert not any(key[0] == "hot columns" for key in csr.scratch)


def offsets_matrix(rng, right: int = 0, left: int = 0) -> sp.csr_matrix:
    """Row 0 reaches 32,767 + ``right`` columns right of itself and row 32,768 + ``left`` reaches
    32,768 + ``left`` columns left of itself (both fit 16-bit offsets at 0), between them a band
    of 3 diagonals."""
    rows = 2**15 + 2 + left
    coo = sp.diags([np.ones(rows - 1), np.ones(rows), np.ones(rows - 1)], [-1, 0, 1], format="coo")
    row = np.concatenate([coo.row, [0, 2**15 + left]])
    col = np.concatenate([coo.col, [2**15 - 1 + right, 0]])
    values = rng.uniform(0.5, 1.5, size=row.size) * rng.choice([-1.0, 1.0], size=row.size)
    matrix = sp.csr_matrix((values, (row, col)), shape=(rows, rows + right))
    matrix.sort_indices()
    return matrix


# One column farther than 16 bits reach on either side, checked apart: each bound is kept on its own.
BEYOND_16_BITS = {"fits": (0, 0), "one-right": (1, 0), "one-left": (0, 1)}


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("reach", BEYOND_16_BITS.values(), ids=BEYOND_16_BITS.keys())
def test_offsets_from_the_row_up_to_16_bits(reach, index_dtype, monkeypatch):
    """offsets_i16 reads columns 32,767 right and 32,768 left of their row as 16-bit offsets
    (each offset its column less its row); one column farther on either side and it runs as
    cusparse_prepared (off CUDA torch's product). Either way it matches
    float64 into a poisoned strided out, and values written in place are seen."""
    far = int(any(reach))
    rng = np.random.default_rng(15 + sum(reach))
    matrix = offsets_matrix(rng, *reach)
    csr, exact = to_seer(matrix, index_dtype=index_dtype)
    # Row 0 is among the sampled rows, row 32,769 is not: the copy is refused by the sample on the
    # right and by the pass on the left.
    assert spmv.fits_16_bits(*spmv.offset_range(spmv.sampled_offset_bounds(csr))) == (reach != (1, 0))
    offsets = spmv.column_offsets(csr)
    if far:
        assert offsets is None
    else:
        rows_of = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
        assert offsets.dtype == torch.int16
        assert (offsets.numpy() == matrix.indices - rows_of).all()
        assert offsets.min() == -(2**15) and offsets.max() == 2**15 - 1
    fallback_calls = []

    def counted_plan(csr, real=spmv._cusparse_plan):  # planned for every matrix, called where no fit
        call = real(csr)
        return lambda *operands: fallback_calls.append(1) or call(*operands)

    monkeypatch.setattr(spmv, "_cusparse_plan", counted_plan)
    run = spmv.VARIANTS["offsets_i16"].run
    x = random_vector(rng, 2 * csr.cols, torch.float32)[::2]
    out = torch.full((2 * csr.rows,), float("nan"))
    assert_spmv_close(run(csr, x, out[::2]), exact, x, torch.float32)
    assert out[1::2].isnan().all() and len(fallback_calls) == far
    csr.values.mul_(-2.0)
    assert_spmv_close(run(csr, x), -2.0 * exact, x, torch.float32)


@pytest.mark.parametrize("reach", [-33_000, 33_000], ids=["left", "right"])
def test_a_far_column_in_any_program_refuses_the_copy(reach):
    """A band with one column 33,000 (past int16) left or right of its row, in rows the sampled row
    ends miss and whose programs fold their bounds into different slots: each refuses the copy."""
    rng = np.random.default_rng(21)
    rows = 36_000  # over 2 * SAMPLED_ROW_ENDS, so that the sample skips rows
    band = sp.diags([np.ones(rows - 1), np.ones(rows), np.ones(rows - 1)], [-1, 0, 1], format="coo")
    stride = rows // spmv.SAMPLED_ROW_ENDS
    rows_per_program = spmv._vector_tile(cdiv(band.nnz + 1, rows))[0]

    def slot(row: int) -> int:
        return (row // rows_per_program) % spmv.BOUND_SLOTS

    low = max(0, -reach) + 1
    unsampled = [int(r) for r in rng.integers(low, low + rows - abs(reach) - 1, 20) if r % stride]
    far_rows = [unsampled[0], next(r for r in unsampled if slot(r) != slot(unsampled[0]))]
    for far in far_rows:
        matrix = sp.csr_matrix((np.concatenate([band.data, [2.0]]),
                                (np.concatenate([band.row, [far]]), np.concatenate([band.col, [far + reach]]))),
                               shape=(rows, rows))
        matrix.sort_indices()
        csr, _ = to_seer(matrix)
        assert spmv.fits_16_bits(*spmv.offset_range(spmv.sampled_offset_bounds(csr)))  # the sample misses it
        assert spmv.column_offsets(csr) is None


SLICED_COLS = 3 * spmv.SLICE_COLUMNS + 123  # four column slices


def sliced_matrix(rng, rows: int = 60, mean: float = 400) -> sp.csr_matrix:
    """A matrix of four column slices whose rows are long enough for them to be stacked."""
    return random_csr(rng, rows, SLICED_COLS, skewed_lengths(rng, rows, SLICED_COLS, mean))


def spy_on_stacking(monkeypatch) -> list:
    """The (stack, restack) pairs the sliced variant's plans make, recorded as they are made."""
    made, stacked_slices = [], spmv._stacked_slices
    monkeypatch.setattr(spmv, "_stacked_slices", lambda csr, slices: made.append(stacked_slices(csr, slices)) or made[-1])
    return made


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
def test_column_slices_stack_each_slice_and_add_them_up(index_dtype, monkeypatch):
    """cusparse_slices_16k on four slices (off CUDA its product on the stack is torch's): each
    slice's rows of the stack hold that slice's columns of the matrix and nothing else, the sum
    of the slices' products matches float64 into a poisoned strided out, and values written in
    place are gathered into the stack again before the next call."""
    rng = np.random.default_rng(11)
    csr, exact = to_seer(sliced_matrix(rng), index_dtype=index_dtype)
    assert spmv.stacking_extra(csr, 4) <= spmv.SLICE_MAX_EXTRA
    made = spy_on_stacking(monkeypatch)
    run = spmv.VARIANTS["cusparse_slices_16k"].run
    x = random_vector(rng, 2 * SLICED_COLS, torch.float32)[::2]
    out = torch.full((2 * csr.rows,), float("nan"))
    assert_spmv_close(run(csr, x, out[::2]), exact, x, torch.float32)
    assert out[1::2].isnan().all()

    (stack, _), = made
    assert stack.shape == (4 * csr.rows, SLICED_COLS) and stack.nnz == csr.nnz
    tall = sp.csr_matrix((stack.values.double().numpy(), stack.indices.numpy(), stack.indptr.numpy()), shape=stack.shape)
    for s in range(4):
        part = tall[s * csr.rows:(s + 1) * csr.rows].tocoo()
        assert (part.col // spmv.SLICE_COLUMNS == s).all()
        in_slice = exact.multiply(sp.csr_matrix(((np.arange(SLICED_COLS) // spmv.SLICE_COLUMNS) == s)[None, :]))
        assert abs(part.tocsr() - in_slice).max() == 0

    csr.values.mul_(-2.0)
    assert_spmv_close(run(csr, x), -2.0 * exact, x, torch.float32)
    assert len(made) == 1  # the stack is kept; only its values were gathered again


@pytest.mark.parametrize("case", ["short rows", "one slice", "float16"])
def test_column_slices_run_unsliced_where_stacking_does_not_pay(case, monkeypatch):
    """Rows too short for four slices (the stack would add more than half the matrix's bytes), a
    matrix of one slice, and half-precision values (partial sums would round before they are
    added up) run as cusparse_prepared: right, and nothing stacked."""
    rng = np.random.default_rng(12)
    if case == "short rows":
        matrix = random_csr(rng, 5000, SLICED_COLS, np.ones(5000, dtype=np.int64))
    elif case == "one slice":
        matrix = random_csr(rng, 60, spmv.SLICE_COLUMNS, skewed_lengths(rng, 60, spmv.SLICE_COLUMNS, 400))
    else:
        matrix = sliced_matrix(rng)
    dtype = torch.float16 if case == "float16" else torch.float32
    csr, exact = to_seer(matrix, dtype)
    if case == "short rows":
        assert spmv.stacking_extra(csr, 4) > spmv.SLICE_MAX_EXTRA
    made = spy_on_stacking(monkeypatch)
    x = random_vector(rng, csr.cols, dtype)
    assert_spmv_close(spmv.VARIANTS["cusparse_slices_16k"].run(csr, x), exact, x, dtype)
    assert made == []


@pytest.mark.parametrize("inference_values", [False, True])
def test_column_slices_planned_in_inference_mode_serve_calls_outside_it(inference_values):
    """A stack made under ``torch.inference_mode()`` is written again by later calls outside it
    (after values written in place, or on every call for inference-tensor values, whose writes
    cannot be seen): it must not be made of inference tensors, which refuse such writes."""
    rng = np.random.default_rng(14)
    matrix = sliced_matrix(rng)
    with torch.inference_mode(inference_values):
        csr, exact = to_seer(matrix)
    x = random_vector(rng, SLICED_COLS, torch.float32)
    run = spmv.VARIANTS["cusparse_slices_16k"].run
    with torch.inference_mode():
        assert_spmv_close(run(csr, x), exact, x, torch.float32)
    if not inference_values:
        with torch.no_grad():
            csr.values.mul_(3.0)
        exact = 3.0 * exact
    for _ in range(2):
        assert_spmv_close(run(csr, x), exact, x, torch.float32)


def test_column_slices_are_not_made_past_what_torch_can_sort():
    """2**31 - 1 nonzeros and more run as cusparse_prepared: torch's CUDA sort takes at most 2**31
    - 1 elements. (Only the decision is tested: such a matrix does not fit here.)"""
    from types import SimpleNamespace

    def matrix(nnz):
        return SimpleNamespace(rows=1, cols=SLICED_COLS, nnz=nnz, dtype=torch.float32)

    assert spmv.stacks(matrix(2**31 - 2), 4) and not spmv.stacks(matrix(2**31 - 1), 4)
    assert not spmv.stacks(matrix(0), 4)


def test_a_stacked_matrix_is_freed_at_once():
    """The stack's plan refers to the matrix's values, not to the matrix."""
    def make():
        rng = np.random.default_rng(13)
        csr, _ = to_seer(sliced_matrix(rng))
        spmv.VARIANTS["cusparse_slices_16k"].run(csr, random_vector(rng, SLICED_COLS, torch.float32))
        return csr

    assert_freed_when_dropped(make)


@pytest.mark.parametrize("name", [n for n in VARIANT_NAMES if spmv.VARIANTS[n].params["kind"] == "merge"])
@pytest.mark.parametrize("nnz", [1, 2, 3, 5, 518, 1031])
def test_arrays_that_end_inside_a_chunk(name, nnz):
    """Matrices whose last chunk is partial, down to one nonzero. The arrays are views of buffers
    poisoned past the end (NaN values, an out-of-range column), so an element past nnz that
    reached a sum would show in y."""
    rng = np.random.default_rng(nnz)
    rows = 7
    lengths = np.bincount(rng.integers(0, rows, size=nnz), minlength=rows)
    matrix = random_csr(rng, rows, 40, lengths)
    csr, exact = to_seer(matrix)
    indices = torch.full((nnz + 5,), 10**9, dtype=torch.int32)
    values = torch.full((nnz + 5,), float("nan"))
    indices[:nnz], values[:nnz] = csr.indices, csr.values
    poisoned = as_csr((csr.indptr, indices[:nnz], values[:nnz], matrix.shape))
    x = random_vector(rng, 40, torch.float32)
    y = spmv.VARIANTS[name].run(poisoned, x, torch.full((rows,), float("nan")))
    assert_spmv_close(y, exact, x, torch.float32)


# ------------------------------------------------------------------ edge cases


def long_row(name: str) -> int:
    """The long row's nonzeros for a variant. Narrow ones (one lane, or up to 8, a row) walk it a few
    nonzeros per step, milliseconds a step in the interpreter: 2**12 + 1 are 513 steps or more.
    The others take 2**15 + 1: nine 4,096-nonzero pieces of the adaptive variant over three
    programs of four, the last one short, 128 steps or more of every wider row tile and 64 chunks
    or more of the merge variants. (A row of 10^5 for all tested nothing more and cost a quarter
    of the CPU suite's time.)"""
    params = spmv.VARIANTS[name].params
    narrow = params["kind"] in ("scalar", "diagonal") or (params["kind"] == "vector" and params["group"] <= 8)
    return 2**12 + 1 if narrow else 2**15 + 1


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_one_long_row(name):
    rng = np.random.default_rng(3)
    lengths = [4, long_row(name), 0, 17]
    run_and_check(name, random_csr(rng, len(lengths), 1000, lengths), rng)


# Error of a half-precision y relative to A x on rows of positive terms, for sums kept in float32:
# every product is exact in float32 (11 or 8 significant bits a factor), a row of n terms adds at
# most n float32 roundings (2**-24 each), and y is rounded once to its dtype: half an ulp of
# float16 (2**-11), a whole ulp of bfloat16 (2**-7: Triton's interpreter converts float32 to
# bfloat16 by dropping the low bits; a GPU rounds, 2**-8). TOLERANCE's 2e-3 for float16 would let
# an accumulator that rounds to float16 pass.
HALF_Y_ROUNDING = {torch.float16: 2**-11, torch.bfloat16: 2**-7}
HALF_LONG_ROWS = (2**12 + 1, 2**12)  # the uniform row and the row of large first terms
HALF_HEAD = 64


def half_accumulation_matrix(rng) -> sp.csr_matrix:
    """Short rows (one empty) around two long rows of positive values, for x in [0.5, 1.5]. The
    first, 4,097 values in [0.5, 1.5]: a float16 sum of one lane passes 2,048, where its ulp is 2
    and terms near 1 round away (adaptive cuts the row into pieces). The second, 4,096 values whose
    first 64 lie in [96, 128] and the others in [0.005, 0.01]: each later term (below 0.015) is
    under half a float16 ulp of any running sum holding one of the first (at least 48, half an ulp
    2**-6), so an accumulator of up to 64 lanes a row that rounds to float16 drops every one of
    them, 0.4% of the row's sum (of 128 lanes, half of them; of 256, a quarter)."""
    uniform, headed = HALF_LONG_ROWS
    lengths = [3, uniform, 0, 5, headed, 1, 9]
    cols = 5000
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(cols, n, replace=False)) for n in lengths])
    values = rng.uniform(0.5, 1.5, size=indptr[-1])
    head = indptr[4]
    values[head:head + HALF_HEAD] = rng.uniform(96, 128, size=HALF_HEAD)
    values[head + HALF_HEAD:indptr[5]] = rng.uniform(0.005, 0.01, size=headed - HALF_HEAD)
    return sp.csr_matrix((values, indices, indptr), shape=(len(lengths), cols))


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_values_are_summed_in_float32(name, dtype):
    """Every variant promises float32 sums for float16 and bfloat16 values: y, written into a
    poisoned out, is held to HALF_Y_ROUNDING plus 2**-24 a term of the longest row against the
    float64 product of the rounded values. On the long rows of positive terms of
    :func:`half_accumulation_matrix`, sums rounded to the values' dtype after each add miss that by
    1.4 to 90 times (float16 on the large first terms, at any lane count; bfloat16, which the
    interpreter truncates, on the uniform row; float16 there too for a lane or a few a row)."""
    rng = np.random.default_rng(31)
    csr, exact = to_seer(half_accumulation_matrix(rng), dtype)
    x = torch.from_numpy(rng.uniform(0.5, 1.5, size=csr.cols)).to(dtype)
    out = torch.full((csr.rows,), float("nan"), dtype=dtype)
    assert spmv.VARIANTS[name].run(csr, x, out) is out
    expected = exact @ x.double().numpy()
    got = out.double().numpy()
    tolerance = HALF_Y_ROUNDING[dtype] + max(HALF_LONG_ROWS) * 2**-24
    bad = ~(np.abs(got - expected) <= tolerance * expected)  # expected >= 0: every term is positive
    assert not bad.any(), f"rows {np.flatnonzero(bad)}: {got[bad]} vs {expected[bad]} (relative {tolerance:.1e})"


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_duplicates_and_unsorted_columns(name):
    """Repeated columns in a row are summed, in whatever order they are stored."""
    indptr = np.array([0, 4, 4, 7, 9])
    indices = np.array([3, 1, 3, 3, 0, 2, 0, 1, 1])
    values = np.array([1.5, -2.0, 0.75, 1.25, 3.0, -1.0, 0.5, 2.0, -0.25])
    matrix = sp.csr_matrix((values, indices, indptr), shape=(4, 4))
    run_and_check(name, matrix, np.random.default_rng(0))


@pytest.fixture
def no_launches(monkeypatch):
    """Makes any kernel launch fail: empty inputs must be answered on the host."""

    class NoLaunch:
        def __getitem__(self, grid):
            raise AssertionError("a kernel was launched for an empty matrix")

    for cache in (spmv._rows_launch, spmv._merge_launch, spmv._adaptive_launch, spmv._combine_launch):
        monkeypatch.setattr(cache, "kernel", NoLaunch())


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("shape", [(0, 0), (0, 5), (7, 5), (4, 0)])
def test_empty_matrices_give_zeros_without_launching(name, shape, no_launches):
    rows, cols = shape
    csr = as_csr((torch.zeros(rows + 1, dtype=torch.int32), torch.zeros(0, dtype=torch.int32),
                  torch.zeros(0, dtype=torch.float16), shape))
    x = torch.ones(cols, dtype=torch.float16)
    out = torch.full((rows,), float("nan"), dtype=torch.float16)
    y = spmv.VARIANTS[name].run(csr, x, out)
    assert y is out and torch.equal(y, torch.zeros(rows, dtype=torch.float16))
    fresh = spmv.VARIANTS[name].run(csr, x)
    assert fresh.shape == (rows,) and fresh.dtype == torch.float16 and not fresh.any()


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_mostly_empty_rows(name):
    rng = np.random.default_rng(9)
    lengths = np.zeros(3000, dtype=np.int64)
    lengths[[0, 1500, 2999]] = [3, 40, 2]
    run_and_check(name, random_csr(rng, 3000, 50, lengths), rng)


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_strided_x_and_out(name):
    """Views with stride 2 are read and written in place."""
    rng = np.random.default_rng(2)
    matrix = random_csr(rng, 90, 70, skewed_lengths(rng, 90, 70, 5))
    csr, exact = to_seer(matrix)
    x = random_vector(rng, 140, torch.float32)[::2]
    buffer = torch.full((180,), float("nan"))
    y = spmv.VARIANTS[name].run(csr, x, buffer[::2])
    assert_spmv_close(y, exact, x, torch.float32)
    assert torch.isnan(buffer[1::2]).all()


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_out_overlapping_x_is_refused(name):
    """y written over the x it is computed from would be silently wrong: refused before and after
    the plan, x left as it was; views of one buffer that do not overlap are served."""
    rng = np.random.default_rng(3)
    matrix = random_csr(rng, 60, 60, skewed_lengths(rng, 60, 60, 4))
    csr, exact = to_seer(matrix)
    buffer = random_vector(rng, 130, torch.float32)
    kept = buffer.clone()
    for x, out in ((buffer[:60], buffer[:60]), (buffer[:60], buffer[59:119]), (buffer[1:61], buffer[:60]),
                   (buffer[0:120:2], buffer[1:121:2])):  # spans that interleave count as overlapping
        for _ in range(2):  # on the matrix's first call, then on its kept plan
            with pytest.raises(InputError, match="overlaps x"):
                spmv.VARIANTS[name].run(csr, x, out)
            spmv.VARIANTS[name].run(csr, torch.ones(60))
        assert torch.equal(buffer, kept)
    x, out = buffer[:60], buffer[60:120].fill_(float("nan"))
    assert spmv.VARIANTS[name].run(csr, x, out) is out
    assert_spmv_close(out, exact, x, torch.float32)


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_out_overlapping_the_matrix_is_refused(name):
    """y written over the matrix's own arrays would be silently wrong (and corrupt the matrix):
    refused before and after the plan, the arrays left as they were."""
    rng = np.random.default_rng(4)
    matrix = random_csr(rng, 40, 50, np.full(40, 3))
    csr, exact = to_seer(matrix)
    kept = [a.clone() for a in (csr.indptr, csr.indices, csr.values)]
    x = random_vector(rng, 50, torch.float32)
    overlapping = {"values": csr.values[5:45], "indices": csr.indices.view(torch.float32)[70:110],
                   "indptr": csr.indptr.view(torch.float32)[1:41]}
    for array, out in overlapping.items():
        for _ in range(2):  # on the matrix's first call, then on its kept plan
            with pytest.raises(InputError, match=f"overlaps the matrix's {array}"):
                spmv.VARIANTS[name].run(csr, x, out)
            spmv.VARIANTS[name].run(csr, x)
    for array, before in zip((csr.indptr, csr.indices, csr.values), kept):
        assert torch.equal(array, before)
    out = torch.full((40,), float("nan"))
    assert_spmv_close(spmv.VARIANTS[name].run(csr, x, out), exact, x, torch.float32)


def test_an_out_that_requires_grad_is_written_under_no_grad():
    csr, exact = to_seer(random_csr(np.random.default_rng(0), 6, 4, [1, 2, 0, 3, 1, 1]))
    x = torch.ones(4)
    for variant in spmv.VARIANTS.values():
        out = torch.full((6,), float("nan"), requires_grad=True)
        with torch.no_grad():
            assert variant.run(csr, x, out) is out
        assert_spmv_close(out.detach(), exact, x, torch.float32)


def test_vectors_beyond_32_bit_offsets_are_refused():
    """The kernels index x and y by 32-bit offsets (index times stride): a vector whose last
    element lies 2**31 or more elements past its first would wrap. Meta tensors: no memory."""
    from seer.launch import vector_operands

    near, far = torch.empty(2**31, device="meta"), torch.empty(2**32, device="meta")
    assert vector_operands(near[::2**20], near[:2048])[2] == 2**20  # last element 2**31 - 2**20 past
    for x, y, name in ((far[::2**21], far[:2048], "x"), (far[:2048], far[::2**21], "out")):
        with pytest.raises(InputError, match=f"{name} has stride 2097152.*contiguous"):
            vector_operands(x, y)


@pytest.mark.parametrize(
    "operand,value,message",
    [
        ("out", torch.zeros(5), "shape"),
        ("out", torch.zeros(6, 1), "shape"),
        ("out", torch.zeros(6, dtype=torch.float64), "dtype"),
        ("out", torch.zeros(6, device="meta"), "meta"),
        ("out", np.zeros(6, dtype=np.float32), "torch.Tensor"),
        ("out", torch.zeros(6).to_sparse(), "dense tensor"),
        ("out", torch.full((1,), float("nan")).expand(6), "stride 0"),  # every row into one element
        ("out", torch.zeros(6, requires_grad=True), "out requires grad"),
        ("x", torch.ones(4).to_sparse(), "dense tensor"),
        ("x", torch.ones(5), "columns"),
        ("x", torch.ones(4, 1), "1-D"),
        ("x", torch.ones(4, dtype=torch.float64), "dtype"),
        ("x", torch.ones(4, device="meta"), "meta"),
        ("x", np.ones(4, dtype=np.float32), "torch.Tensor"),
    ],
)
def test_bad_operands_are_rejected_before_and_after_the_plan(operand, value, message):
    csr, _ = to_seer(random_csr(np.random.default_rng(0), 6, 4, [1, 2, 0, 3, 1, 1]))
    operands = {"x": torch.ones(4), "out": None, operand: value}
    for variant in spmv.VARIANTS.values():
        with pytest.raises(InputError, match=message):
            variant.run(csr, operands["x"], operands["out"])
        variant.run(csr, torch.ones(4))  # plans and keeps the call
        with pytest.raises(InputError, match=message):
            variant.run(csr, operands["x"], operands["out"])


# The variants whose calls launch seer's Triton kernels (not torch's or cuSPARSE's product)
KERNEL_VARIANT_NAMES = [n for n in VARIANT_NAMES if spmv.VARIANTS[n].params["kind"] not in ("torch", "cusparse")]


@pytest.mark.parametrize("name", KERNEL_VARIANT_NAMES)
def test_a_bound_call_refuses_values_moved_off_16_byte_alignment(name):
    """A kernel variant's call is compiled for values 16 bytes aligned where they were when it was
    planned, and takes their address afresh on every call (``set_`` may move them). Moved 16 bytes
    on, still aligned, they are served where they now are (written in place there; the old buffer,
    which the matrix's record keeps alive, holds the old values). Moved 4 bytes on, where that code
    would fault on a GPU, the bound call refuses them before it writes anything (out as it was);
    ``run()`` plans the matrix again for the moved values (their address keys its
    plans) and is right."""
    rng = np.random.default_rng(8)
    matrix = random_csr(rng, 90, 70, skewed_lengths(rng, 90, 70, 6))
    csr, exact = to_seer(matrix)
    call = spmv.VARIANTS[name].bind(csr)
    x = random_vector(rng, 70, torch.float32)
    assert_spmv_close(call(x), exact, x, torch.float32)

    def move(offset: int) -> None:
        """The values, as they are, ``offset`` elements into a new NaN-filled buffer."""
        buffer = torch.full((csr.nnz + offset,), float("nan"))
        buffer[offset:] = csr.values
        csr.values.set_(buffer.untyped_storage(), offset, csr.values.shape)

    move(4)
    assert csr.values.data_ptr() % 16 == 0
    csr.values.mul_(-2.0)
    assert_spmv_close(call(x), -2.0 * exact, x, torch.float32)

    move(1)
    assert csr.values.data_ptr() % 16 == 4
    out = torch.full((csr.rows,), float("nan"))
    with pytest.raises(InputError, match="not 16-byte aligned"):
        call(x, out)
    assert out.isnan().all()  # refused before anything is written (merge zeroed its accumulator, out itself, first)
    assert spmv.VARIANTS[name].run(csr, x, out) is out
    assert_spmv_close(out, -2.0 * exact, x, torch.float32)


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_a_dropped_matrix_is_freed_at_once(name):
    """The plans kept in a matrix's cache must not refer back to it: through a cycle its device
    memory would stay taken until the garbage collector next ran."""
    def make():
        rng = np.random.default_rng(3)
        csr, _ = to_seer(random_csr(rng, 120, 80, skewed_lengths(rng, 120, 80, 40)))
        spmv.VARIANTS[name].run(csr, random_vector(rng, 80, torch.float32))
        return csr

    assert_freed_when_dropped(make)


def assert_freed_when_dropped(make) -> None:
    """The matrix ``make()`` returns, its plans made, is freed as soon as its one reference goes,
    with the garbage collector off."""
    import gc
    import weakref

    csr = make()
    gone = weakref.ref(csr)
    gc.disable()
    try:
        del csr
        assert gone() is None
    finally:
        gc.enable()


# ------------------------------------------------------------------ preprocessing cache


@pytest.mark.parametrize("name", [n for n in VARIANT_NAMES if spmv.VARIANTS[n].params["kind"] in ("merge", "adaptive")])
def test_preprocessing_runs_once_per_matrix(name, monkeypatch):
    rng = np.random.default_rng(4)
    matrix = random_csr(rng, 200, 150, skewed_lengths(rng, 200, 150, 30))
    csr = run_and_check(name, matrix, rng)
    plans = {k: e[-1] for k, e in csr.scratch.items()
             if k not in (sparse._ROW_SUMS, sparse._ADDRESSES, sparse._VALUES_AT)}
    assert plans

    def no_rebuild(*args):
        raise AssertionError("preprocessing ran again")

    with monkeypatch.context() as patch:
        patch.setattr(spmv, "_bracket_rows", no_rebuild)
        patch.setattr(spmv, "_adaptive_bins", no_rebuild)
        patch.setattr(spmv, "_hot_columns", no_rebuild)
        x = random_vector(rng, 150, torch.float32)
        assert_spmv_close(spmv.VARIANTS[name].run(csr, x), to_seer(matrix)[1], x, torch.float32)
    assert all(csr.scratch[key][-1] is plan for key, plan in plans.items())

    csr.indptr.add_(0)  # an in-place write to the structure invalidates the cache
    spmv.VARIANTS[name].run(csr, x)
    assert all(csr.scratch[key][-1] is not plan for key, plan in plans.items())


def test_cache_entries_follow_the_preprocessing_they_hold():
    """Every kernel variant keeps its own plan (grid and launches); merge variants with the same
    brackets share one entry of brackets, the diagonal variants one of the rows that follow the
    pattern. Validation keeps the row-length sums beside them, the launches the arrays' addresses,
    the matrix where its values were when the plans were made, and the torch variant its sparse CSR
    tensor."""
    rng = np.random.default_rng(6)
    csr, _ = to_seer(random_csr(rng, 100, 100, skewed_lengths(rng, 100, 100, 20)))
    x = random_vector(rng, 100, torch.float32)
    for variant in spmv.VARIANTS.values():
        variant.run(csr, x)
    params = [v.params for v in spmv.VARIANTS.values()]
    brackets = {p["bracket"] for p in params if p["kind"] == "merge"}
    hot_counts = {p["hot"] for p in params if "hot" in p}  # all cover this matrix's 100 columns: one entry
    kernels = [p for p in params if p["kind"] != "torch"]
    # + the pattern's rows, the row-length sums, the addresses, the values' place and the torch CSR tensor
    assert len(csr.scratch) == len(kernels) + len(brackets) + len(hot_counts) + 5
    assert spmv._TORCH_CSR in csr.scratch and spmv._FOLLOWING_PATTERN in csr.scratch
    assert all(key in csr.scratch for key in (sparse._ROW_SUMS, sparse._ADDRESSES, sparse._VALUES_AT))
    assert all(("merge brackets", b) in csr.scratch for b in brackets)


# ------------------------------------------------------------------ real matrices


def suitesparse_choice(folder, count: int = 32, max_nnz: int = 40_000) -> list[str]:
    """``count`` file names spread evenly over the manifest's matrices of at most ``max_nnz``."""
    manifest = pd.read_csv(folder / "manifest.csv")
    small = manifest[manifest.nnz_file <= max_nnz].sort_values(["nnz_file", "file"])
    picks = np.linspace(0, len(small) - 1, count).round().astype(int)
    return list(small.file.iloc[np.unique(picks)])


def read_real(path, rng) -> sp.csr_matrix:
    """The matrix's structure with fresh random nonzero values (file values may be zeros or absent)."""
    matrix = read_matrix(path)
    matrix.data = rng.uniform(0.5, 1.5, size=matrix.nnz) * rng.choice([-1.0, 1.0], size=matrix.nnz)
    return matrix


@pytest.fixture(scope="module")
def real_matrices(suitesparse_dir):
    rng = np.random.default_rng(2024)
    return {name: read_real(suitesparse_dir / name, rng) for name in suitesparse_choice(suitesparse_dir)}


def test_enough_real_matrices(real_matrices):
    assert len(real_matrices) >= 30
    assert any(m.shape[0] != m.shape[1] for m in real_matrices.values())


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_real_matrices(name, real_matrices):
    rng = np.random.default_rng(len(name))
    for matrix in real_matrices.values():
        run_and_check(name, matrix, rng, torch.float32, torch.int32)


# Real matrices that take a variant's own path, which suitesparse_choice's small ones never reach
# (each such test names its files as the folder lists them). Not reachable from the shared folder's
# matrices: diagonals split over several programs (every layout made there has a pattern of at
# most 9 diagonals; splitting needs 32 or more) and adaptive's pieces (its longest row has 1,463
# nonzeros; pieces start past 4,096). Those two run on generated matrices
# (tests/test_spmv_diagonal_major.py, test_chunk_and_bin_edges).


def run_real(name: str, matrix: sp.csr_matrix, rng):
    """``(csr, exact, x)`` after ``name`` ran on ``matrix`` into a strided out poisoned with NaN
    (its gaps too), checked against the float64 product."""
    csr, exact = to_seer(matrix)
    x = random_vector(rng, csr.cols, torch.float32)
    out = torch.full((2 * csr.rows,), float("nan"))
    assert_spmv_close(spmv.VARIANTS[name].run(csr, x, out[::2]), exact, x, torch.float32)
    assert out[1::2].isnan().all()
    return csr, exact, x


def spy_on(monkeypatch, function: str) -> list:
    """What ``spmv``'s ``function`` returns from now on, recorded as it is made."""
    made, real = [], getattr(spmv, function)
    monkeypatch.setattr(spmv, function, lambda *args: made.append(real(*args)) or made[-1])
    return made


@pytest.mark.parametrize("file", ["Bai__olm500.mtx.gz", "Bai__olm1000.mtx.gz", "HB__gr_30_30.mtx.gz"])
def test_real_matrices_stored_by_diagonals(file, suitesparse_dir, monkeypatch):
    """diagonal_major_r512 makes its copy of the values by diagonals on these (a pattern of 6 or 9
    diagonals that most of their nonzeros follow), in one launch with the rows that do not follow,
    summed from CSR: both sides right, and values written in place copied again."""
    rng = np.random.default_rng(41)
    matrix = read_real(suitesparse_dir / file, rng)
    layouts = spy_on(monkeypatch, "_diagonal_major_layout")
    csr, exact, x = run_real("diagonal_major_r512", matrix, rng)

    (layout,) = layouts
    offsets = [matrix.indices[matrix.indptr[r]:matrix.indptr[r + 1]] - r for r in range(matrix.shape[0])]
    pattern = offsets[int(np.argmax(np.diff(matrix.indptr)))]  # the first longest row's
    following = sum(np.array_equal(row, pattern) for row in offsets)
    assert layout is not None and layout.length == len(pattern) and 0 < layout.rest_count == matrix.shape[0] - following
    csr.values.mul_(-2.0)
    assert_spmv_close(spmv.VARIANTS["diagonal_major_r512"].run(csr, x), -2.0 * exact, x, torch.float32)


@pytest.mark.parametrize("file", ["DIMACS10__cs4.mtx.gz", "DIMACS10__cti.mtx.gz", "DIMACS10__de2010.mtx.gz"])
def test_real_matrices_stacked_in_column_slices(file, suitesparse_dir, monkeypatch):
    """cusparse_slices_16k stacks these (16,840 to 24,115 columns: two slices, rows long enough for
    them): the stack holds every nonzero once, the slices' products add up to A x, and values
    written in place are gathered into the stack again."""
    rng = np.random.default_rng(42)
    matrix = read_real(suitesparse_dir / file, rng)
    made = spy_on_stacking(monkeypatch)
    csr, exact, x = run_real("cusparse_slices_16k", matrix, rng)

    (stack, _), = made
    assert stack.shape == (2 * csr.rows, csr.cols) and stack.nnz == csr.nnz
    csr.values.mul_(-2.0)
    assert_spmv_close(spmv.VARIANTS["cusparse_slices_16k"].run(csr, x), -2.0 * exact, x, torch.float32)
    assert len(made) == 1


def rows_reading_new_columns(matrix: sp.csr_matrix, columns: int) -> sp.csr_matrix:
    """The matrix's rows in order, each kept where it reads no column a row kept before reads, until
    more than ``columns`` columns are read (each by one nonzero); every column kept."""
    read = np.zeros(matrix.shape[1], dtype=bool)
    kept, count = [], 0
    for r in range(matrix.shape[0]):
        row = matrix.indices[matrix.indptr[r]:matrix.indptr[r + 1]]
        if row.size and not read[row].any():
            read[row] = True
            kept.append(r)
            count += row.size
            if count > columns:
                break
    return matrix[kept]


@pytest.mark.slow  # about 25 s: the interpreter runs merge's scan one nonzero at a time
def test_a_real_matrix_read_past_the_hot_columns(suitesparse_dir):
    """merge_c512_hot64k on more columns than its 65,536 hot ones: the others are renumbered past
    them and read from x itself, the pointer select's plain side. DIMACS10/luxembourg_osm (114,599
    columns) whole is 468 chunks, over a minute in the interpreter, so its rows that read only
    columns no earlier kept row reads, until 66,560 columns are read: 131 chunks (129 at the
    least, for any column to be read past the hot ones), 1,025 nonzeros on the plain side, all
    114,599 columns kept. (DIMACS10/ct2010, 67,578 columns and 336,352 nonzeros, is left out for
    its time.)"""
    rng = np.random.default_rng(43)
    hot = spmv.VARIANTS["merge_c512_hot64k"].params["hot"]
    matrix = rows_reading_new_columns(read_real(suitesparse_dir / "DIMACS10__luxembourg_osm.mtx.gz", rng), hot + 1024)
    assert matrix.shape[1] == 114_599 and matrix.nnz == len(np.unique(matrix.indices)) > hot
    csr, _, _ = run_real("merge_c512_hot64k", matrix, rng)

    hot_columns, renumbered = csr.scratch[("hot columns", hot)][-1]
    plain = renumbered >= hot
    assert len(hot_columns) == hot and plain.sum() == csr.nnz - hot  # every column is read once
    assert torch.equal(renumbered[plain] - hot, csr.indices[plain])
    assert torch.equal(hot_columns[renumbered[~plain]], csr.indices[~plain])


@pytest.mark.parametrize("file", ["VDOL__hangGlider_2.mtx.gz", "Sandia__adder_dcop_05.mtx.gz"])
def test_real_matrices_with_rows_for_adaptives_large_bin(file, suitesparse_dir, monkeypatch):
    """adaptive sends rows of 129 to 4,096 nonzeros (1,463 and 1,310 in these) to its large bin,
    128 lanes a row, beside rows of its short and medium bins in the same launch; no real matrix
    here has a row long enough to be cut into pieces."""
    rng = np.random.default_rng(44)
    matrix = read_real(suitesparse_dir / file, rng)
    bins = spy_on(monkeypatch, "_adaptive_bins")
    run_real("adaptive", matrix, rng)

    (made,) = bins
    short, medium, large, long = made["counts"]
    assert short > 0 and medium > 0 and large > 0 and long == 0


@pytest.mark.parametrize("name", ["scalar_r128", "vector_g8", "diagonal_r128", "diagonal_major_r512", "offsets_i16"])
def test_row_mapped_kernels_read_int64_row_pointers_where_int32_positions_may_wrap(name, monkeypatch):
    """From WIDE_POSITIONS_FROM nonzeros an int32 matrix's row-mapped kernels read an int64 copy of
    its row pointers, so that their positions cannot wrap (tests/test_spmv_gpu.py shows the wrap
    on a matrix of 2.1e9 nonzeros); here the threshold is lowered to run that path on a small
    band (the diagonal and offsets variants take their own paths on it) and a skewed matrix."""
    monkeypatch.setattr(spmv, "WIDE_POSITIONS_FROM", 1)
    rng = np.random.default_rng(11)
    band = sp.diags([rng.uniform(0.5, 1.5, 300) for _ in range(5)], [-2, -1, 0, 1, 2], shape=(300, 300), format="csr")
    for matrix in (band, random_csr(rng, 200, 150, skewed_lengths(rng, 200, 150, 9), sort_columns=True)):
        csr, exact = to_seer(matrix)
        assert spmv.row_pointers(csr).dtype == torch.int64 and csr.indptr.dtype == torch.int32
        x = random_vector(rng, csr.cols, torch.float32)
        out = torch.full((csr.rows,), float("nan"))
        assert spmv.VARIANTS[name].run(csr, x, out) is out
        assert_spmv_close(out, exact, x, torch.float32)


def test_a_variants_run_and_plan_happen_on_the_matrixs_gpu(monkeypatch):
    """Triton compiles, loads and launches on the current GPU, and the launch is kept under the
    matrix's device: a run on another GPU's matrix ran on the current one and kept its kernel for the
    matrix's GPU (a review). Here the device switch is recorded: the plan and the call, each under the
    matrix's device (a no-op where the process sees one GPU, as on this host)."""
    entered = []
    real = spmv.on_device
    monkeypatch.setattr(spmv, "on_device", lambda device: entered.append(device) or real(device))
    rng = np.random.default_rng(17)
    csr, exact = to_seer(random_csr(rng, 50, 40, np.full(50, 4)))
    x = random_vector(rng, 40, torch.float32)
    assert_spmv_close(spmv.VARIANTS["vector_g4"].run(csr, x), exact, x, torch.float32)
    spmv.VARIANTS["merge_c512"].bind(csr)
    assert entered == [csr.device, csr.device]
