"""Validated CSR matrices: the input every sparse op in seer works on.

`as_csr` accepts a torch sparse CSR tensor, a scipy CSR matrix or an
``(indptr, indices, values, shape)`` tuple and checks it once; kernels then trust it.

The check is one pass over the index arrays whose totals the host reads once, and the same pass
sums the row lengths (:class:`RowLengthSums`), from which the sparse ops' gathered features
follow: a validated matrix carries its row statistics at no extra synchronisation.
"""
from __future__ import annotations

import operator
import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, NamedTuple

import numpy as np
import torch
import triton
import triton.language as tl

from seer.errors import InputError, check_no_grad, check_not_negated, dual_level_open
from seer.launch import LaunchCache, cdiv, on_device, sm_count, specialisation

VALUE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
INDEX_DTYPES = (torch.int32, torch.int64)
STRIDED = torch.strided  # a dense tensor's layout, compared by identity on every call
# Rows longer than this cannot be served well by one warp-sized group of lanes.
LONG_ROW = 256
# Shifted rows are counted on matrices of at least SHIFT_MIN_ROWS rows, on about SHIFT_SAMPLES of
# them, one in each stretch of `shift_stride` rows: the count tells the diagonal SpMV variant's
# ground (stencils, bands), which it never wins below 70k rows in either profile table, and
# checking every row cost the pass +24 to +26 us on 10M+ nonzeros and +0.3 us (a dependent load)
# on small matrices (NOTES SpMV 32).
SHIFT_MIN_ROWS = 65536
SHIFT_SAMPLES = 16384
# Where in its stretch each sample falls: the fractional parts of k * (golden ratio), as 32-bit
# fixed point. Samples at a fixed stride alias with a grid's side wherever the two share a factor
# (a 27-point stencil of side 84 read 0.857 against 0.964 over every row); this sequence has no
# period, so the sample's share follows the whole matrix's (NOTES SpMV 67).
_GOLDEN_FRACTION = 2654435769  # round(2**32 * (sqrt(5) - 1) / 2)
_GOLDEN = tl.constexpr(_GOLDEN_FRACTION)
# The same in words, recorded in the metadata of tables whose column was recounted so.
SHIFT_SAMPLE_DEFINITION = f"one row in each stretch of rows // {SHIFT_SAMPLES}, placed by the golden-ratio sequence"
_ROW_SUMS = ("row_length_sums",)  # scratch key of the sums the validation pass measured
_ADDRESSES = ("addresses",)  # scratch key of the arrays' device addresses
_VALUES_AT = ("values_at",)  # scratch key of the values' address and dtype when the plans were made


class RowLengthSums(NamedTuple):
    """Exact integer sums over the row lengths (no rounding: they fit int64 by far)."""

    sum_sq: int  # sum of squared row lengths
    longest: int
    empty: int  # rows without a stored value
    long_nnz: int  # stored values in rows longer than LONG_ROW
    shifted_rows: int  # sampled rows that shift the previous row (see shifts_previous_row)


@dataclass(eq=False, frozen=True)
class CsrMatrix:
    """A CSR matrix whose structure has been checked (``checked``), unless made with
    ``as_csr(..., check=False)``; one made by hand (``checked`` None) is checked, metadata and
    structure, the first time seer examines it.

    ``scratch`` holds per-matrix preprocessing that kernels compute once and reuse
    (row bins, chunk boundaries, rows that follow a diagonal pattern, the validation pass's
    row-length sums); it is dropped with the matrix. Use :meth:`cached`, which rebuilds an entry
    when ``indptr`` or ``indices`` has changed, and :meth:`forget_plans_of_moved_values`. The arrays
    cannot be reassigned (plans made from them would go stale unseen): write into them in place, or
    make a new matrix.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    values: torch.Tensor
    shape: tuple[int, int]
    scratch: dict = field(default_factory=dict, repr=False)
    checked: bool | None = field(default=None, repr=False)

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[1]

    @property
    def nnz(self) -> int:
        return self.values.numel()

    @property
    def device(self) -> torch.device:
        return self.values.device

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    def cached(self, key: tuple, build: Callable):
        """``build(self)`` computed once and kept in ``scratch``, rebuilt only if the structure
        (indptr or indices) changed.

        The stamp (the two index arrays and their in-place versions) costs no device work."""
        self.forget_plans_of_moved_values()
        entry = self.scratch.get(key)
        if entry is None or not self._stamped(entry):
            entry = (self.indptr, self.indices, self._structure_versions(), build(self))
            self.scratch[key] = entry
        return entry[3]

    def peek(self, key: tuple):
        """What :meth:`cached` holds for ``key`` if still current, else None; never builds."""
        entry = self.scratch.get(key)
        return entry[3] if entry is not None and self._stamped(entry) else None

    def forget_plans_of_moved_values(self) -> None:
        """Drop the plans in ``scratch`` if the values moved or changed dtype since they were made
        (``set_``, or ``.data`` replaced as ``module.half()`` and ``module.to()`` do; neither
        moves their version): plans hold copies of the values, kernels compiled for their dtype and
        alignment. The validation's row-length sums stay: the structure is the same. The record
        holds the planned values' storage, so that no later array is allocated at their address
        while the plans live: two moves landing back there would read as none (a cached call's key
        holds the address too). Values moved away are thus kept until the next check."""
        now = (self.values.data_ptr(), self.values.dtype)
        kept = self.scratch.get(_VALUES_AT)
        if kept is not None and kept[0] == now:
            return
        if kept is not None:
            sums = self.scratch.get(_ROW_SUMS)
            self.scratch.clear()
            if sums is not None:
                self.scratch[_ROW_SUMS] = sums
        self.scratch[_VALUES_AT] = (now, self.values.untyped_storage())

    def __post_init__(self) -> None:
        """Arrays and shape of the kinds the checks read (a matrix made by hand is checked later)."""
        for name in ("indptr", "indices", "values"):
            if not isinstance(getattr(self, name), torch.Tensor):
                raise InputError(f"CSR {name} must be a torch.Tensor, got {type(getattr(self, name)).__name__}")
        object.__setattr__(self, "shape", csr_shape(self.shape))

    def addresses(self) -> tuple[int, int, int]:
        """Device addresses of indptr, indices and values, for launches that pass raw pointers.

        Kept while none of the three has changed in place (``set_`` and ``resize_`` count: they
        may move the data); read afresh on every call for inference tensors, which keep no version."""
        versions = self._versions()
        kept = self.scratch.get(_ADDRESSES)
        if kept is None or versions is None or kept[0] != versions:
            kept = self.scratch[_ADDRESSES] = (
                versions, (self.indptr.data_ptr(), self.indices.data_ptr(), self.values.data_ptr()))
        return kept[1]

    def _versions(self) -> tuple | None:
        try:
            return self.indptr._version, self.indices._version, self.values._version
        except RuntimeError:  # an inference tensor
            return None

    def _stamped(self, entry: tuple) -> bool:
        return entry[0] is self.indptr and entry[1] is self.indices and entry[2] == self._structure_versions()

    def _structure_versions(self) -> tuple:
        # Inference tensors keep no version (and cannot be written in place outside inference mode).
        return tuple(None if a.is_inference() else a._version for a in (self.indptr, self.indices))

    def to_scipy(self):
        """The same matrix as a float64 scipy CSR matrix (for references and features)."""
        import scipy.sparse as sp

        # Copies: scipy sorts and merges a matrix's arrays in place (sum, abs, sort_indices), which
        # on shared memory would rewrite this matrix behind its version counters.
        return sp.csr_matrix(
            (
                self.values.detach().float().cpu().numpy().astype(np.float64),
                self.indices.cpu().numpy().copy(),
                self.indptr.cpu().numpy().copy(),
            ),
            shape=self.shape,
        )


def as_csr(matrix, *, check: bool = True) -> CsrMatrix:
    """Validate ``matrix`` and return it as a :class:`CsrMatrix`.

    ``check=False`` skips the one pass over the index arrays (monotone ``indptr``,
    in-range column indices) and with it the row-length sums, which features then measure on
    demand; the cheap metadata checks always run. It trusts the arrays: on a malformed matrix the
    kernels then read out of bounds (wrong results, or a crash).

    A strided array is replaced by a contiguous copy, which the matrix holds: later writes into
    the original are not seen (pass contiguous arrays to share their memory).

    A :class:`CsrMatrix` comes back as it is, validated first where ``check`` asks for it and it
    is not known valid: made with ``check=False``, or its index arrays written in place since.
    """
    if isinstance(matrix, CsrMatrix):
        if matrix.checked is None:  # made by hand
            return _examined(matrix, check)
        if check and validated_rows(matrix) is None:
            check_metadata(matrix)
            check_structure(matrix)
        return matrix
    return _examined(CsrMatrix(*_unpack(matrix)), check)


def _examined(csr: CsrMatrix, check: bool) -> CsrMatrix:
    """``csr``, new to seer, checked as :func:`as_csr` says, with where its values are noted."""
    check_metadata(csr)
    csr.forget_plans_of_moved_values()
    if check:
        check_structure(csr)
    else:
        object.__setattr__(csr, "checked", False)
    return csr


def _unpack(matrix):
    if isinstance(matrix, torch.Tensor):
        if matrix.layout != torch.sparse_csr:
            raise InputError(f"the sparse matrix must be a torch sparse CSR tensor, got a {matrix.layout} tensor of "
                             f"shape {list(matrix.shape)}; convert it with .to_sparse_csr() (spmv's inputs are (A, x), "
                             "the matrix first)")
        if matrix.dense_dim():
            raise InputError(f"expected a CSR matrix of scalars, got one of {matrix.dense_dim()} dense dimension(s) "
                             "per entry (hybrid CSR is not supported)")
        if matrix.dim() != 2:
            raise InputError(f"expected a 2-D CSR matrix, got {matrix.dim()} dimensions (batched CSR is not supported)")
        return (matrix.crow_indices(), matrix.col_indices(), matrix.values(), tuple(matrix.shape))
    if is_scipy_sparse(matrix):
        return _from_scipy(matrix)
    if isinstance(matrix, (tuple, list)) and len(matrix) == 4:
        indptr, indices, values, shape = matrix
        for name, t in (("indptr", indptr), ("indices", indices), ("values", values)):
            if not isinstance(t, torch.Tensor):
                raise InputError(f"CSR {name} must be a torch.Tensor, got {type(t).__name__}")
            if t.layout != torch.strided or t.is_nested:
                raise InputError(f"CSR {name} must be a dense tensor, got "
                                 f"{'a nested one' if t.is_nested else f'layout {t.layout}'}")
        return indptr, indices, values, csr_shape(shape)
    raise InputError(
        "a sparse matrix must be a torch sparse CSR tensor, a scipy CSR matrix or an "
        f"(indptr, indices, values, shape) tuple; got {type(matrix).__name__}"
    )


def _from_scipy(matrix):
    """Copies of a scipy matrix's CSR arrays (its own methods rewrite them in place: sum, abs,
    sort_indices), in native byte order, the index arrays in one dtype."""
    if len(matrix.shape) != 2:
        raise InputError(f"expected a 2-D sparse matrix, got a scipy array of shape {matrix.shape}")
    m = matrix.tocsr()
    if m.data.dtype.newbyteorder("=") not in (np.float32, np.float16):
        raise _scipy_dtype_error(m.data.dtype)
    index = np.promote_types(m.indptr.dtype, m.indices.dtype)
    return (torch.from_numpy(np.array(m.indptr, dtype=index.newbyteorder("="))),
            torch.from_numpy(np.array(m.indices, dtype=index.newbyteorder("="))),
            torch.from_numpy(np.array(m.data, dtype=m.data.dtype.newbyteorder("="))), m.shape)


def _scipy_dtype_error(dtype: np.dtype) -> InputError:
    """What to do with a scipy matrix of values seer cannot take. A cast is advised only where it
    keeps the values' meaning: a complex one would drop the imaginary parts in silence. bfloat16 is
    not offered for scipy, which does not hold it."""
    if dtype.kind == "c":
        return InputError(f"the scipy matrix holds complex values ({dtype}); seer's SpMV is real and does not "
                          "support them (A.real.astype(numpy.float32) takes the real parts, where those are all "
                          "that is wanted)")
    # float16 is taken too, but scipy's astype refuses it ("scipy.sparse does not support dtype float16"):
    # a scipy matrix holds it only when built from arrays of it, so no cast to it is advised.
    return InputError(f"the scipy matrix holds {dtype} values; seer takes a scipy matrix of float32 values (or float16 "
                      "ones, which scipy.sparse holds only in a matrix built from (data, indices, indptr) arrays of "
                      "them: A.astype(numpy.float16) is refused by scipy): convert with A.astype(numpy.float32); for "
                      "float16 or bfloat16 values, pass a torch sparse CSR tensor or an (indptr, indices, values, "
                      "shape) tuple of torch tensors")


def csr_shape(shape) -> tuple[int, int]:
    """``shape`` as ``(rows, cols)``: two whole numbers (``operator.index``: no float is truncated)."""
    try:
        rows, cols = shape
        if not (isinstance(rows, bool) or isinstance(cols, bool)):  # True is no size
            return operator.index(rows), operator.index(cols)
    except (TypeError, ValueError):
        pass
    raise InputError(f"CSR shape must be a pair of integers (rows, cols), got {shape!r}")


def is_scipy_sparse(obj) -> bool:
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a dependency
        return False
    return sp.issparse(obj)


def check_metadata(csr: CsrMatrix) -> None:
    """The cheap checks of a matrix's arrays (no pass over them); strided ones are replaced by contiguous
    copies, which only a matrix being made may have."""
    rows, cols = csr.shape
    if rows < 0 or cols < 0:
        raise InputError(f"CSR shape must be non-negative, got {csr.shape}")
    if rows >= ROWS_FIT_INT32_BELOW:
        raise InputError(f"{rows:,} rows come within 2**20 of 2**31: seer's SpMV kernels number rows in 32 bits; "
                         "multiply by blocks of fewer rows (A[i:j] @ x for each block), or use torch.sparse")
    for name in ("indptr", "indices", "values"):
        t = getattr(csr, name)
        if t.dim() != 1:
            raise InputError(f"CSR {name} must be 1-D, got shape {tuple(t.shape)}")
    if csr.values.dtype not in VALUE_DTYPES:
        raise InputError(
            f"CSR values have dtype {csr.values.dtype}; seer supports float32, float16 and bfloat16 "
            "(convert the values, or a torch sparse CSR tensor itself, with .to(torch.float32))"
        )
    if csr.indptr.dtype not in INDEX_DTYPES or csr.indices.dtype not in INDEX_DTYPES:
        raise InputError(
            f"CSR index arrays must be int32 or int64, got indptr {csr.indptr.dtype} and indices {csr.indices.dtype}"
        )
    if csr.indptr.dtype != csr.indices.dtype:
        raise InputError(
            f"CSR indptr ({csr.indptr.dtype}) and indices ({csr.indices.dtype}) must share one dtype"
        )
    devices = {csr.indptr.device, csr.indices.device, csr.values.device}
    if len(devices) != 1:
        raise InputError(f"CSR arrays live on different devices: {sorted(map(str, devices))}")
    if csr.indptr.device.type == "meta":
        raise InputError("CSR arrays are meta tensors, which hold no data to multiply; make them on a GPU")
    if csr.indptr.numel() != rows + 1:
        raise InputError(f"CSR indptr has {csr.indptr.numel()} entries; a matrix with {rows} rows needs {rows + 1}")
    if csr.indices.numel() != csr.values.numel():
        raise InputError(
            f"CSR indices ({csr.indices.numel()}) and values ({csr.values.numel()}) differ in length"
        )
    if csr.indices.dtype == torch.int32 and csr.nnz >= POSITIONS_FIT_INT32_BELOW:
        raise InputError(f"{csr.nnz:,} nonzeros come within 2**20 of int32's limit, where the kernels' positions "
                         "(a block past the last nonzero) would overflow int32 indices; use int64 index arrays")
    check_not_negated("spmv", values=csr.values)
    check_no_grad("spmv", values=csr.values)
    for name in ("indptr", "indices", "values"):  # copied once every check has passed
        if not getattr(csr, name).is_contiguous():
            object.__setattr__(csr, name, getattr(csr, name).contiguous())  # the matrix is still being made


def check_structure(csr: CsrMatrix) -> None:
    """The validation pass; the row-length sums it also measures are kept for the features."""
    accept_structure(csr, _structure(csr, check=True))


def accept_structure(csr: CsrMatrix, found: Structure) -> None:
    """Raise the error naming what the validation pass ``found`` wrong with ``csr``, if anything;
    else keep the row-length sums it measured for the features."""
    if found.first != 0:
        raise InputError(f"CSR indptr must start at 0, starts at {found.first}")
    if found.last != csr.nnz:
        raise InputError(f"CSR indptr ends at {found.last} but there are {csr.nnz} stored values")
    if found.decreasing:
        raise InputError(f"CSR indptr is not non-decreasing ({found.decreasing} rows end before they start): "
                         "row pointers must be sorted")
    if found.out_of_range:
        lo, hi = (int(v) for v in torch.aminmax(csr.indices))  # only to name the culprits
        raise InputError(f"CSR column indices must lie in [0, {csr.cols}); {found.out_of_range} lie outside, "
                         f"in [{lo}, {hi}]")
    csr.cached(_ROW_SUMS, lambda m: found.sums)
    object.__setattr__(csr, "checked", True)


def still_valid(csr: CsrMatrix) -> bool:
    """Whether ``csr`` needs no validation: made unchecked on purpose, or checked and its index
    arrays unchanged in place since (its row-length sums still current); one made by hand needs it."""
    return csr.checked is False or validated_rows(csr) is not None


def measure_rows(csr: CsrMatrix) -> RowLengthSums:
    """The row-length sums of a matrix, from a fresh pass over ``indptr`` (what gathering costs
    on a matrix that was not validated)."""
    return _structure(csr, check=False).sums


def validated_rows(csr: CsrMatrix) -> RowLengthSums | None:
    """The row-length sums the validation pass measured, if ``indptr`` is unchanged since; else None."""
    return csr.peek(_ROW_SUMS)


class Structure(NamedTuple):
    """What one validation pass found, added up over its programs."""

    first: int  # indptr[0]
    last: int  # indptr[rows]
    decreasing: int  # rows with indptr[r + 1] < indptr[r]
    out_of_range: int  # column indices outside [0, cols)
    sums: RowLengthSums


def _structure(csr: CsrMatrix, check: bool, stats: bool = True) -> Structure:
    """One pass over ``indptr`` (and ``indices`` when ``check``): Triton on a GPU, numpy on the CPU.

    ``stats=False`` (GPU only) leaves the row-length sums zero: benchmarks/spmv_validation.py
    measures with it what the sums add to the validation pass."""
    if csr.device.type == "cpu":
        return _structure_numpy(csr, check)
    return _structure_triton(csr, check, stats)


def _structure_numpy(csr: CsrMatrix, check: bool) -> Structure:
    indptr = csr.indptr.numpy().astype(np.int64)
    lengths = np.diff(indptr)
    outside = 0
    if check:
        cols = csr.indices.numpy()
        outside = int(((cols < 0) | (cols >= csr.cols)).sum())
    sums = _row_sums_numpy(indptr, csr.indices.numpy(), sampled_rows(csr.rows))
    return Structure(int(indptr[0]), int(indptr[-1]), int((lengths < 0).sum()), outside, sums)


def shift_stride(rows: int) -> int:
    """The length of the stretches of rows that hold one sampled row each; 0: none sampled (a small matrix)."""
    return rows // SHIFT_SAMPLES if rows >= SHIFT_MIN_ROWS else 0


def shift_samples(rows: int) -> int:
    """How many rows the pass checks: one in each of the stretches (0, stride], (stride, 2 stride],
    ... below ``rows``."""
    stride = shift_stride(rows)
    return (rows - 1) // stride if stride else 0


def sampled_rows(rows: int) -> np.ndarray:
    """The rows the pass checks (int64): sample k is row (k + 1) stride less an offset in
    [0, stride) that the golden-ratio sequence picks (see _GOLDEN_FRACTION); none on a small matrix."""
    stride = shift_stride(rows)
    sample = np.arange(shift_samples(rows), dtype=np.int64)
    offset = ((sample * _GOLDEN_FRACTION) & 0xFFFFFFFF) * stride >> 32
    return (sample + 1) * stride - offset



def _row_sums_numpy(indptr: np.ndarray, indices: np.ndarray, sampled: np.ndarray) -> RowLengthSums:
    """The pass's sums on the host (``indptr`` as int64; ``sampled``: :func:`sampled_rows`)."""
    lengths = np.diff(indptr)
    if lengths.size == 0:
        return RowLengthSums(0, 0, 0, 0, 0)
    return RowLengthSums(
        sum_sq=int(lengths @ lengths),
        longest=int(lengths.max()),
        empty=int((lengths == 0).sum()),
        long_nnz=int(lengths[lengths > LONG_ROW].sum()),
        shifted_rows=shifted_rows_among(indptr, indices, sampled),
    )


def shifted_rows_among(indptr: np.ndarray, indices: np.ndarray, row: np.ndarray) -> int:
    """How many of the rows ``row`` (each > 0) shift the row before them: the host twin of the
    pass's count (:func:`shifts_previous_row`), which it matches on a malformed ``indptr`` too."""
    lo, before, hi = indptr[row], indptr[row - 1], indptr[row + 1]
    same = (hi - lo > 0) & (lo - before == hi - lo) & (before >= 0) & (lo < len(indices))
    first, first_before = indices[lo[same]].astype(np.int64), indices[before[same]].astype(np.int64)
    return int((first == first_before + 1).sum())


# Each program loops over its share of the rows and of the indices, reduces its lanes to one row
# of counts and adds it into per-column sums with fire-and-forget atomics; the last to arrive,
# found by one atomic per program, copies the sums into host memory (add_up_counts). Atomics whose
# results were kept, with their barriers, had made the statistics cost a few us per program
# (benchmarks/NOTES.md, SpMV 14); the one arrival per program saves the host ~40 us of copying
# and adding, which a first call waits for (SpMV 37, 39); the last program adding up every
# program's stored row instead, in steps, had cost the pass ~7 us on 264 programs (SpMV 39, 54).
# Programs are capped at a few an SM; wide index blocks keep enough bytes in flight per program.
# One loop step loads a block of indptr and a block of indices together, so on a small matrix (a
# step or two per program) their latencies overlap, and the statistics use 32-bit lanes where
# nnz allows: both took what the statistics add to the pass from +0.18 to -0.06 us (median, real
# matrices, H100; SpMV 16).
_ROW_BLOCK = 1024
_SAMPLE_BLOCK = 128  # sampled rows per block of the shifted-row count
_INDEX_BLOCK = 4096
_PROGRAMS_PER_SM = 2
# A register budget for the pass. Left to itself, ptxas gives the statistics kernel 96 registers
# whenever nnz % 16 == 0 (the index loads then go 16 bytes at a time) and keeps 14-16 loads in
# flight in its main loop, the plain kernel 52 registers and 18 loads; told it may use 128, they
# take ~126 and ~80 and keep 24 (sm_90, triton 3.6 and 3.9; benchmarks/spmv_pass_registers.py).
# The pass is bound by its loads' latency: the shifted-row count had tipped the statistics kernel
# into the small budget (+12 to +24 us on the largest stencils and bands), and with the budget the
# plain pass takes 15-22% less on 10M+ nonzeros (NOTES SpMV 34).
_PASS_REGISTERS = 128
FOUND_COLUMNS = 9  # columns of a program's partial results (see _structure_kernel)
_FOUND_COLUMNS = tl.constexpr(FOUND_COLUMNS)  # the same, for kernels
# The counters (totals_buffers) hold a 128-byte line of int64s for the arrival count, then one
# for each column's sum (add_up_counts): a column's atomics queue apart from the others'.
_COUNTER_LINE = tl.constexpr(16)
# The positions a kernel steps to pass the last nonzero by a block at most: below this many nonzeros
# they fit 32 bits (int32 index arrays are refused from there on). The row-mapped kernels step
# further (each row as long as its program's longest): they read 64-bit row pointers from half this
# (kernels/spmv.py, row_pointers).
POSITIONS_FIT_INT32_BELOW = 2**31 - 2**20
# The kernels number rows in 32 bits (a program's first row, plus its block): below this many rows the
# numbers a block past the last row fit; a matrix of more is refused.
ROWS_FIT_INT32_BELOW = 2**31 - 2**20
NARROW_BELOW = POSITIONS_FIT_INT32_BELOW  # nnz below which row lengths, per-lane sums and positions fit 32 bits
_programs_cap: dict = {}


@triton.jit
def _add_max(a0, b0, c0, d0, e0, f0, a1, b1, c1, d1, e1, f1):
    return a0 + a1, b0 + b1, c0 + c1, tl.maximum(d0, d1), e0 + e1, f0 + f1


@triton.jit
def row_statistics(lo, hi, mask, decreasing, sum_sq, longest, empty, long_nnz,
                   STATS: tl.constexpr, NARROW: tl.constexpr, LONG_ROW: tl.constexpr):
    """A block of rows' share of the pass's counts, from their row pointers ``lo = indptr[r]``,
    ``hi = indptr[r + 1]`` (0 where ``mask`` is off). Kernels that validate on their way (the
    SpMV first call) add their rows with it too."""
    decreasing += (hi < lo).to(tl.int32)  # a comparison, not a difference: no overflow on garbage
    if STATS:
        # Kept only for a valid matrix, whose row lengths lie in [0, nnz].
        length = (hi - lo).to(tl.int32) if NARROW else (hi - lo).to(tl.int64)
        sum_sq += length.to(tl.int64) * length.to(tl.int64)
        longest = tl.maximum(longest, length)
        empty += ((length == 0) & mask).to(tl.int32)
        long_nnz += tl.where(length > LONG_ROW, length, 0)
    return decreasing, sum_sq, longest, empty, long_nnz


@triton.jit
def _row_block(indptr, start, rows, decreasing, sum_sq, longest, empty, long_nnz,
               STATS: tl.constexpr, NARROW: tl.constexpr, LONG_ROW: tl.constexpr, ROW_BLOCK: tl.constexpr):
    row = start + tl.arange(0, ROW_BLOCK)
    mask = row < rows
    lo = tl.load(indptr + row, mask=mask, other=0)
    hi = tl.load(indptr + row + 1, mask=mask, other=0)
    return row_statistics(lo, hi, mask, decreasing, sum_sq, longest, empty, long_nnz, STATS, NARROW, LONG_ROW)


@triton.jit
def shifts_previous_row(indices, lo, hi, before, mask, nnz):
    """Per lane (a row > 0 where ``mask``; ``lo = indptr[row]``, ``hi = indptr[row + 1]``,
    ``before = indptr[row - 1]``): whether the row is as long as the row before and starts one
    column to its right. Such rows make up stencils and bands, whose rows repeat one pattern of
    column offsets (the diagonal SpMV variant's ground), which rows of equal length alone do not
    tell apart from scattered ones. The matrix is not trusted yet: a garbage ``indptr`` reads
    nothing out of bounds (its rows count as not shifting) and is only reported."""
    length = hi - lo
    same = mask & (length > 0) & (lo - before == length) & (before >= 0) & (lo < nnz)
    first = tl.load(indices + lo, mask=same, other=0)
    first_before = tl.load(indices + before, mask=same, other=0)
    return same & (first == first_before + 1)


@triton.jit
def _sample_block(indptr, rows, shift_stride, block, sample_blocks, SAMPLE_BLOCK: tl.constexpr):
    """Sample block ``block`` of the shifted-row count: which of its lanes hold a sampled row (those
    of :func:`sampled_rows`) and their row pointers ``indptr[row]``, ``indptr[row + 1]``, ``indptr[row - 1]``."""
    sample = (block * SAMPLE_BLOCK + tl.arange(0, SAMPLE_BLOCK)).to(tl.int64)  # 64-bit: no wrap past 2**31 rows
    end = (sample + 1) * shift_stride  # the sample's stretch ends there; no division per row
    inside = (sample < sample_blocks * SAMPLE_BLOCK) & (end < rows)
    row = end - (((sample * _GOLDEN) & 0xFFFFFFFF) * shift_stride >> 32)
    lo = tl.load(indptr + row, mask=inside, other=0)
    hi = tl.load(indptr + row + 1, mask=inside, other=0)
    before = tl.load(indptr + row - 1, mask=inside, other=0)
    return inside, lo, hi, before


@triton.jit
def _index_block(indices, start, nnz, cols, outside, ROW_BLOCK: tl.constexpr, INDEX_BLOCK: tl.constexpr):
    k = start + tl.arange(0, INDEX_BLOCK)
    col = tl.load(indices + k, mask=k < nnz, other=0)
    bad = ((col < 0) | (col >= cols)).to(tl.int32)
    return outside + tl.sum(tl.reshape(bad, [INDEX_BLOCK // ROW_BLOCK, ROW_BLOCK]), axis=0)


@triton.jit
def _count_shifted_rows(indptr, indices, rows, nnz, shift_stride, sample_blocks, first, pid, programs,
                        SAMPLE_BLOCK: tl.constexpr):
    """How many of the sampled rows (:func:`sampled_rows`) shift the row before them, counted in
    blocks of SAMPLE_BLOCK rows by the last programs, which the main loop gives a block fewer
    whenever the blocks do not divide evenly: each gathers little, and its gathers' latency ends
    no later than the others' loops (1024-row blocks on 16 programs added 2.4 us). ``first``: this
    program's first sample block (:func:`_sample_block`), loaded before the main loop so that its
    row pointers' latency passes under it (-0.1 us on 1M-10M nonzeros, NOTES SpMV 53); only the
    gathers of column indices are left for after it."""
    inside, lo, hi, before = first
    sampled = shifts_previous_row(indices, lo, hi, before, inside, nnz).to(tl.int32)
    for block in range(2 * programs - 1 - pid, sample_blocks, programs):
        inside, lo, hi, before = _sample_block(indptr, rows, shift_stride, block, sample_blocks, SAMPLE_BLOCK)
        sampled += shifts_previous_row(indices, lo, hi, before, inside, nnz).to(tl.int32)
    return tl.sum(sampled, 0)


@triton.jit
def _structure_kernel(indptr, indices, rows, nnz, cols, shift_stride, sample_blocks, totals, counters, programs,
                      blocks, CHECK: tl.constexpr, STATS: tl.constexpr, COUNT: tl.constexpr, NARROW: tl.constexpr,
                      LONG_ROW: tl.constexpr, ROW_BLOCK: tl.constexpr, INDEX_BLOCK: tl.constexpr,
                      SAMPLE_BLOCK: tl.constexpr):
    # Each program's counts: [decreasing rows, out-of-range columns, sum of squared lengths,
    # longest row, empty rows, nnz in long rows, indptr[0], indptr[rows], shifted rows sampled],
    # added up into totals (add_up_counts). COUNT: the statistics
    # with the shifted-row count (matrices of SHIFT_MIN_ROWS rows and more); the small matrices'
    # pass compiles without the count's code.
    pid = tl.program_id(0)
    decreasing, outside, sum_sq, longest, empty, long_nnz = zero_counts(ROW_BLOCK, NARROW)
    shifted = 0
    first_samples = None
    if COUNT:
        first_samples = _sample_block(indptr, rows, shift_stride, programs - 1 - pid, sample_blocks, SAMPLE_BLOCK)
    for block in range(pid, blocks, programs):
        if CHECK:
            # Past NARROW_BELOW nonzeros the block's positions in 64 bits: block * INDEX_BLOCK in 32 wrapped
            # negative past 2**31, and the negative positions passed the mask k < nnz.
            first = block * INDEX_BLOCK if NARROW else tl.cast(block, tl.int64) * INDEX_BLOCK
            outside = _index_block(indices, first, nnz, cols, outside, ROW_BLOCK, INDEX_BLOCK)
        decreasing, sum_sq, longest, empty, long_nnz = _row_block(
            indptr, block * ROW_BLOCK, rows, decreasing, sum_sq, longest, empty, long_nnz,
            STATS, NARROW, LONG_ROW, ROW_BLOCK)
    if COUNT:
        shifted = _count_shifted_rows(indptr, indices, rows, nnz, shift_stride, sample_blocks, first_samples, pid,
                                      programs, SAMPLE_BLOCK)
    counts = program_counts(indptr, rows, decreasing, outside, sum_sq, longest, empty, long_nnz, shifted)
    add_up_counts(counts, programs, totals, counters)


@triton.jit
def zero_counts(LANES: tl.constexpr, NARROW: tl.constexpr):
    """The pass's per-lane counts, zeroed: decreasing rows, out-of-range columns, sum of squared
    lengths, longest row, empty rows, nnz in long rows (32-bit where ``NARROW``, see SpMV 16)."""
    width = tl.int32 if NARROW else tl.int64
    return (tl.zeros([LANES], dtype=tl.int32), tl.zeros([LANES], dtype=tl.int32), tl.zeros([LANES], dtype=tl.int64),
            tl.zeros([LANES], dtype=width), tl.zeros([LANES], dtype=tl.int32), tl.zeros([LANES], dtype=width))


@triton.jit
def program_counts(indptr, rows, decreasing, outside, sum_sq, longest, empty, long_nnz, shifted):
    """A program's lanes reduced to its row of counts (columns: see _structure_kernel), 16 wide;
    ``shifted``, the program's count of shifted rows sampled, is already one number."""
    # One reduction for every column (one exchange between warps, not one per column).
    d, o, q, m, e, n = tl.reduce((decreasing, outside, sum_sq, longest, empty, long_nnz), 0, _add_max)
    column = tl.arange(0, 16)
    first = tl.load(indptr).to(tl.int64)
    last = tl.load(indptr + rows).to(tl.int64)
    return tl.where(column == 0, d, tl.where(column == 1, o, tl.where(column == 2, q, tl.where(
        column == 3, m, tl.where(column == 4, e, tl.where(column == 5, n, tl.where(
            column == 6, first, tl.where(column == 7, last, shifted)))))))).to(tl.int64)


@triton.jit
def add_up_counts(counts, programs, totals, counters):
    """Called by every program with its row of :func:`program_counts`: adds the row into
    ``counters``' sums, arrives, and the last program to arrive copies the sums into ``totals``
    and sets ``counters`` back to 0 for the next launch (see :func:`totals_buffers`). ``totals``
    may be mapped host memory: the host then reads the totals once the kernel is done, with no
    copy and no sums of its own."""
    column = tl.arange(0, 16)
    used = column < _FOUND_COLUMNS
    # One line a column (_COUNTER_LINE). The atomics' results are not used, so they compile to
    # reductions that do not wait for a reply (REDG). The longest row is a maximum; indptr's ends
    # are the same in every program, and the last one takes its own. The rest are counts: sums.
    sums = counters + _COUNTER_LINE * (1 + column)
    ends = (column == 6) | (column == 7)
    tl.atomic_add(sums, counts, mask=used & (column != 3) & ~ends, sem="relaxed")
    tl.atomic_max(sums, counts, mask=column == 3, sem="relaxed")
    # Every lane's atomics before the arrival, whose release makes them visible to the last
    # program, whose acquire sees them.
    tl.debug_barrier()
    if tl.atomic_add(counters, 1, sem="acq_rel") == programs - 1:
        added = tl.load(sums, mask=used & ~ends, other=0, cache_modifier=".cg")
        tl.store(totals + column, tl.where(ends, counts, added), mask=used)
        tl.store(sums, 0, mask=used)
        tl.store(counters, 0)


_structure_launch = LaunchCache(_structure_kernel)


def _structure_triton(csr: CsrMatrix, check: bool, stats: bool) -> Structure:
    with on_device(csr.device):
        return read_totals(launch_structure(csr, check, stats), csr.device)


def _structure_of(totals: list[int]) -> Structure:
    """A :class:`Structure` from the totals' columns (the counts added up over programs)."""
    return Structure(totals[6], totals[7], totals[0], totals[1],
                     RowLengthSums(totals[2], totals[3], totals[4], totals[5], totals[8]))


def pass_warps(blocks: int, programs_cap: int) -> int:
    """Warps a program of the pass runs with. Where the programs take a step or more of the main
    loop each (blocks past half the cap), 8 warps: each thread then does half of a step's
    statistics between its loads and the next step's, and the pass took 0.95x / 0.97x the time of
    4 warps on 1M-10M / 10M+ nonzeros, the statistics adding 0.73 / 1.14 us over the plain pass
    instead of 0.88 / 1.60 (H100); on the small matrices, one block a program, 4 warps, 1.03x
    faster (benchmarks/spmv_pass_tiles.py, NOTES SpMV 53)."""
    return 8 if 2 * blocks > programs_cap else 4


def launch_structure(csr: CsrMatrix, check: bool, stats: bool, warps: int | None = None) -> torch.Tensor:
    """The pass's kernel alone, no wait; returns where its totals will be (this thread's totals
    buffer: read it with :func:`read_totals`). Benchmarks time it this way, with and without
    ``stats``, and with ``warps`` other than :func:`pass_warps`'s."""
    blocks = max(cdiv(csr.rows, _ROW_BLOCK), cdiv(csr.nnz, _INDEX_BLOCK) if check else 0, 1)
    cap = max_programs(csr.device)
    counters, totals = totals_buffers(csr.device)
    programs, narrow = min(blocks, cap), csr.nnz < NARROW_BELOW
    warps = pass_warps(blocks, cap) if warps is None else warps
    stride = shift_stride(csr.rows)
    count = stats and stride > 0
    args = (csr.indptr, csr.indices, csr.rows, csr.nnz, csr.cols, stride, cdiv(shift_samples(csr.rows), _SAMPLE_BLOCK),
            totals, counters, programs, blocks, check, stats, count, narrow, LONG_ROW, _ROW_BLOCK, _INDEX_BLOCK,
            _SAMPLE_BLOCK)
    key = (csr.device, specialisation(*args[:7], *args[9:11]), check, stats, count, narrow, warps)
    _structure_launch.launch(key, (programs,), args, num_warps=warps, maxnreg=_PASS_REGISTERS)
    return totals


class _TotalsBuffers(threading.local):
    """Per thread and device, what a pass that adds up its own counts needs: ``counters`` (zeroed
    int64 on the device, which every launch leaves at 0: the arrival count, then from element 16
    one 16-element line of sums a column) and ``totals`` (``FOUND_COLUMNS`` int64, pinned host
    memory on a GPU). Kept rather than allocated per call; per thread, because a call reads its
    totals after the launch, and another thread's launch on the same stream would overwrite them."""

    def __init__(self):
        self.by_device: dict = {}


_totals_buffers = _TotalsBuffers()


def totals_buffers(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(counters, totals)`` of this thread on ``device`` (see :class:`_TotalsBuffers`)."""
    buffers = _totals_buffers.by_device.get(device)
    if buffers is None:
        counters = torch.zeros(_COUNTER_LINE * (1 + FOUND_COLUMNS), dtype=torch.int64, device=device)
        # Pinned host memory is mapped into the device's address space (unified addressing): the
        # kernel's last program writes the totals straight into it, so reading them back costs a
        # wait for the kernel and no copy (copying 210 programs' rows back took 29-35 us of an H100
        # host's first call and adding them up in numpy 24-30 more; NOTES SpMV 37).
        totals = torch.empty(FOUND_COLUMNS, dtype=torch.int64, pin_memory=device.type == "cuda")
        buffers = _totals_buffers.by_device[device] = (counters, totals)
    return buffers


def read_totals(totals: torch.Tensor, device: torch.device) -> Structure:
    """The totals a pass added up on the device (:func:`add_up_counts`), once its kernel is done."""
    if device.type == "cuda":
        # The current device's current stream, where seer.launch sends kernels; named by index,
        # since current_stream() without one checks CUDA's availability first (through NVML:
        # ~10 us on an H100 host under cProfile, NOTES SpMV 37).
        torch.cuda.current_stream(torch._C._cuda_getDevice()).synchronize()
    return _structure_of(totals.tolist())


def max_programs(device: torch.device) -> int:
    cap = _programs_cap.get(device)
    if cap is None:
        # The interpreter (CPU tensors, tests) runs programs one by one: a few suffice.
        cap = _programs_cap[device] = _PROGRAMS_PER_SM * sm_count(device)
    return cap


def check_dense_vector(csr: CsrMatrix, x: torch.Tensor, name: str = "x") -> None:
    """Cheap per-call checks of the dense operand of a sparse matrix-vector op."""
    _check_vector((csr.cols,), csr.dtype, csr.device, name, x)


def dense_vector_check(csr: CsrMatrix, name: str = "x") -> Callable[[torch.Tensor], None]:
    """:func:`check_dense_vector` on ``csr`` as a function of the vector alone. It holds no
    reference to ``csr``, so it can be kept in the matrix's own cache without making a cycle
    (which would keep the matrix's device memory until the garbage collector ran)."""
    return partial(_check_vector, (csr.cols,), csr.dtype, csr.device, name)


def _check_vector(shape: tuple, dtype: torch.dtype, device: torch.device, name: str, x) -> None:
    """Raise the error that says what is wrong with ``x`` as a vector of ``shape``, if anything."""
    # Every call of a cached decision passes here: the common case is decided in one expression.
    try:
        if (isinstance(x, torch.Tensor) and x.shape == shape and x.dtype == dtype and x.device == device
                and x.layout is STRIDED and not x.requires_grad and not x.is_neg() and not dual_level_open()):
            return
    except RuntimeError:  # a nested tensor has no sizes to compare: named below
        pass
    if not isinstance(x, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.layout is not STRIDED or x.is_nested:
        got = "a nested one" if x.is_nested else f"layout {x.layout}"
        raise InputError(f"{name} must be a dense tensor, got {got}; pass {name}.to_dense()")
    if x.dim() != 1:
        raise InputError(f"{name} must be 1-D, got shape {tuple(x.shape)}")
    if x.numel() != shape[0]:
        raise InputError(f"{name} has {x.numel()} entries; the matrix has {shape[0]} columns")
    if x.device != device:
        host = " (a scipy matrix is in host memory: pass it as a torch sparse CSR tensor on the GPU)" if (
            device.type == "cpu") else ""
        raise InputError(f"{name} is on {x.device} but the matrix is on {device}; put both on one device{host}")
    if x.dtype != dtype:
        raise InputError(f"{name} has dtype {x.dtype} but the matrix values have {dtype}: pass {name}.to({dtype})")
    check_not_negated("spmv", **{name: x})
    check_no_grad("spmv", **{name: x})
