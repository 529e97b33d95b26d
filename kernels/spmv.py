"""Sparse matrix-vector product y = A x (A in CSR) as Triton kernels with different load balancing.

Every variant accumulates in float32 and returns y in the dtype of A's values.

Kinds of kernel (a variant is a kind plus fixed block shapes):
    scalar    one lane per row, a block of rows per program: cheap for very short rows.
    vector    G lanes per row, a [ROWS, G] tile per program: coalesced loads along each row.
    merge     equal-nnz chunks per program whatever the row lengths (merge-path style).
    adaptive  rows binned by length once, each bin with its own mapping, very long rows
              split over several programs.
    torch     torch's own sparse CSR product (cuSPARSE's SpMV on CUDA), so that seer picks the
              vendor kernel where it is the fastest, as the GEMM op keeps cuBLAS.
Preprocessing (merge chunk rows, adaptive bins) runs on the first call for a matrix and is
cached with the matrix (``CsrMatrix.cached``); later calls do not synchronise with the host,
so they can be captured in CUDA graphs.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch
import triton
import triton.language as tl

from seer.errors import InputError
from seer.launch import LaunchCache, addresses, cdiv, operand, specialisation
from seer.registry import Variant
from seer.sparse import CsrMatrix, as_csr, check_dense_vector

# ---------------------------------------------------------------- kernels and launchers


@triton.jit
def _segment_sums(start, end, indices, values, x, x_stride, G: tl.constexpr):
    """fp32 sums of A[k] * x[col[k]] over k in [start, end) for each of a block of segments.

    ``start``/``end`` have shape [S]; G lanes walk each segment, so the loads of one
    segment are contiguous (coalesced) and the loop runs as long as the longest segment.
    """
    lane = tl.arange(0, G)
    first = start[:, None] + lane[None, :]
    stop = end[:, None]
    acc = tl.zeros(first.shape, dtype=tl.float32)
    longest = tl.max(end - start, axis=0)
    for step in range(0, longest, G):
        k = first + step
        inside = k < stop
        col = tl.load(indices + k, mask=inside, other=0)
        a = tl.load(values + k, mask=inside, other=0.0)
        xv = tl.load(x + col * x_stride, mask=inside, other=0.0)
        acc += a.to(tl.float32) * xv.to(tl.float32)
    return tl.sum(acc, axis=1)


@triton.jit
def _csr_rows_kernel(indptr, indices, values, x, x_stride, y, y_stride, rows,
                     ROWS: tl.constexpr, G: tl.constexpr):
    """Scalar (G == 1) and vector CSR: program p owns rows [p * ROWS, (p + 1) * ROWS)."""
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = row < rows
    start = tl.load(indptr + row, mask=ok, other=0)
    end = tl.load(indptr + row + 1, mask=ok, other=0)
    sums = _segment_sums(start, end, indices, values, x, x_stride, G)
    tl.store(y + row * y_stride, sums.to(y.dtype.element_ty), mask=ok)


@triton.jit
def _segmented_add(a_sum, a_head, b_sum, b_head):
    """Combine of a segmented inclusive scan: a segment head restarts the running sum."""
    return tl.where(b_head != 0, b_sum, a_sum + b_sum), a_head | b_head


@triton.jit
def _merge_kernel(indptr, indices, values, x, x_stride, acc, acc_stride, sub_rows, nnz,
                  CHUNK: tl.constexpr, SUB: tl.constexpr):
    """Program p owns the nonzeros [p * CHUNK, (p + 1) * CHUNK): equal work whatever the rows.

    ``sub_rows[j]`` is the row holding nonzero j * SUB (the last entry: the row of the last
    nonzero), so nonzero k lies in a row of [sub_rows[k // SUB], sub_rows[k // SUB + 1]].
    ``acc`` is float32 and zeroed by the caller: rows wholly inside the chunk are stored, rows
    cut by a chunk edge are added atomically (at most two atomics per program).
    """
    pid = tl.program_id(0)
    first = pid.to(indptr.dtype.element_ty) * CHUNK  # int64 when indices are: nnz may pass 2**31
    k = first + tl.arange(0, CHUNK)
    live = k < nnz
    chunk_end = tl.minimum(first + CHUNK, nnz)

    # Vectorised binary search for the row of each nonzero: the last row r with indptr[r] <= k.
    # [lo, hi] holds the answer; brackets of SUB nonzeros keep it narrow, so few halvings
    # (bit length of the widest bracket) close it.
    sub = pid * (CHUNK // SUB) + tl.arange(0, CHUNK) // SUB
    lo = tl.load(sub_rows + sub, mask=live, other=0)
    hi = tl.load(sub_rows + sub + 1, mask=live, other=0)
    span = tl.max(hi - lo, axis=0)
    while span > 0:
        mid = hi - (hi - lo) // 2
        right = tl.load(indptr + mid) <= k
        lo = tl.where(right, mid, lo)
        hi = tl.where(right, hi, mid - 1)
        span = span // 2
    row = lo
    row_start = tl.load(indptr + row)
    row_end = tl.load(indptr + row + 1)

    col = tl.load(indices + k, mask=live, other=0)
    a = tl.load(values + k, mask=live, other=0.0)
    xv = tl.load(x + col * x_stride, mask=live, other=0.0)
    prod = a.to(tl.float32) * xv.to(tl.float32)

    head = ((k == row_start) | (k == first)).to(tl.int32)
    sums, _ = tl.associative_scan((prod, head), 0, _segmented_add)
    tail = live & ((k == row_end - 1) | (k == chunk_end - 1))
    whole = (row_start >= first) & (row_end <= chunk_end)
    target = acc + row * acc_stride
    tl.store(target, sums, mask=tail & whole)
    # Relaxed: the sums need only atomic addition, nothing reads them before the kernel ends.
    # Triton's default (acquire-release) adds a memory barrier and invalidates the SM's whole L1
    # at every chunk edge, which cost the kernel 13% (21% on R-MAT; NOTES SpMV 19).
    tl.atomic_add(target, sums, mask=tail & ~whole, sem="relaxed")


@triton.jit
def _bin_rows(pid, bin_rows, count, indptr, indices, values, x, x_stride, y, y_stride,
              ROWS: tl.constexpr, G: tl.constexpr):
    """Vector CSR over a list of rows: this program takes list entries [pid * ROWS, ...)."""
    slot = pid * ROWS + tl.arange(0, ROWS)
    ok = slot < count
    row = tl.load(bin_rows + slot, mask=ok, other=0)
    start = tl.load(indptr + row, mask=ok, other=0)
    end = tl.load(indptr + row + 1, mask=ok, other=0)
    sums = _segment_sums(start, end, indices, values, x, x_stride, G)
    tl.store(y + row * y_stride, sums.to(y.dtype.element_ty), mask=ok)


@triton.jit
def _adaptive_kernel(indptr, indices, values, x, x_stride, y, y_stride,
                     short_rows, n_short, medium_rows, n_medium, large_rows, n_large,
                     piece_start, piece_end, partials, n_pieces,
                     medium_base, large_base, pieces_base,
                     SHORT_ROWS: tl.constexpr, SHORT_G: tl.constexpr,
                     MEDIUM_ROWS: tl.constexpr, MEDIUM_G: tl.constexpr,
                     LARGE_ROWS: tl.constexpr, LARGE_G: tl.constexpr,
                     PIECES: tl.constexpr, PIECE_G: tl.constexpr):
    """One launch for all bins: the program id range picks the bin (short, medium, large rows,
    then pieces of long rows). Pieces write float32 partial sums that
    ``_combine_pieces_kernel`` adds up."""
    pid = tl.program_id(0)
    if pid < medium_base:
        _bin_rows(pid, short_rows, n_short, indptr, indices, values, x, x_stride, y, y_stride,
                  SHORT_ROWS, SHORT_G)
    elif pid < large_base:
        _bin_rows(pid - medium_base, medium_rows, n_medium, indptr, indices, values, x, x_stride,
                  y, y_stride, MEDIUM_ROWS, MEDIUM_G)
    elif pid < pieces_base:
        _bin_rows(pid - large_base, large_rows, n_large, indptr, indices, values, x, x_stride,
                  y, y_stride, LARGE_ROWS, LARGE_G)
    else:
        piece = (pid - pieces_base) * PIECES + tl.arange(0, PIECES)
        ok = piece < n_pieces
        start = tl.load(piece_start + piece, mask=ok, other=0)
        end = tl.load(piece_end + piece, mask=ok, other=0)
        sums = _segment_sums(start, end, indices, values, x, x_stride, PIECE_G)
        tl.store(partials + piece, sums, mask=ok)


@triton.jit
def _combine_pieces_kernel(partials, piece_ptr, long_rows, y, y_stride, BLOCK: tl.constexpr):
    """y[long_rows[i]] = sum of the partial sums of the pieces of long row i."""
    i = tl.program_id(0)
    lo = tl.load(piece_ptr + i)
    hi = tl.load(piece_ptr + i + 1)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(lo, hi, BLOCK):
        at = k + tl.arange(0, BLOCK)
        acc += tl.load(partials + at, mask=at < hi, other=0.0)
    row = tl.load(long_rows + i)
    tl.store(y + row * y_stride, tl.sum(acc, axis=0).to(y.dtype.element_ty))


# ------------------------------------------------------------------ host side


def _output(csr: CsrMatrix, x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """``out`` checked against the result y, or a fresh y (x has the matrix's dtype and device:
    ``new_empty`` skips the parsing of ``torch.empty``'s arguments, a third of its host time)."""
    if out is None:
        return x.new_empty(csr.rows)
    if not isinstance(out, torch.Tensor):
        raise InputError(f"out must be a torch.Tensor, got {type(out).__name__}")
    if out.dim() != 1 or out.shape[0] != csr.rows:
        raise InputError(f"out must have shape ({csr.rows},) for a matrix of {csr.rows} rows, got {tuple(out.shape)}")
    if out.dtype != csr.dtype:
        raise InputError(f"out has dtype {out.dtype} but y has the dtype of the matrix values, {csr.dtype}")
    if out.device != csr.device:
        raise InputError(f"out is on {out.device} but the matrix is on {csr.device}")
    return out


# On small matrices the host launch costs more than the kernel, so every variant launches through
# seer's direct path once a specialisation is compiled. The matrix's share of the specialisation
# key is fixed, so it is worked out once per matrix (``CsrMatrix.cached``).
_rows_launch = LaunchCache(_csr_rows_kernel)
_merge_launch = LaunchCache(_merge_kernel)
_adaptive_launch = LaunchCache(_adaptive_kernel)


def _rows_run(rows_per_program: int, group: int, num_warps: int):
    """run() of a scalar (group 1) or vector CSR variant: no preprocessing at all."""
    key = ("rows", rows_per_program)

    def launch_plan(csr: CsrMatrix) -> tuple:
        """The grid and the matrix's part of the launch specialisation."""
        matrix_key = (csr.device, specialisation(csr.indptr, csr.indices, csr.values, csr.rows))
        return (cdiv(csr.rows, rows_per_program),), matrix_key

    def run(csr: CsrMatrix, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        y = _output(csr, x, out)
        if csr.nnz == 0:
            return y.zero_()
        grid, matrix_key = csr.cached(key, launch_plan)
        x_stride, y_stride = x.stride(0), y.stride(0)
        (x_key, x_at), (y_key, y_at) = operand(x, x_stride), operand(y, y_stride)
        shape = (csr.rows, rows_per_program, group)
        args = (csr.indptr, csr.indices, csr.values, x, x_stride, y, y_stride, *shape)
        direct_args = (*csr.addresses(), x_at, x_stride, y_at, y_stride, *shape)
        launch_key = (matrix_key, x_key, y_key, rows_per_program, group, num_warps)
        _rows_launch.launch(launch_key, grid, args, direct_args, num_warps=num_warps)
        return y

    return run


def _bracket_rows(csr: CsrMatrix, sub: int) -> torch.Tensor:
    """Row of nonzero j * sub for every j, plus the row of the last nonzero at the end."""
    n_brackets = triton.cdiv(csr.nnz, sub)
    firsts = torch.arange(n_brackets + 1, device=csr.device, dtype=csr.indptr.dtype) * sub
    firsts[-1] = csr.nnz - 1
    return torch.searchsorted(csr.indptr, firsts, right=True).to(csr.indptr.dtype) - 1


def _merge_plan(csr: CsrMatrix, sub: int) -> tuple:
    """The brackets of ``sub`` nonzeros, their address, and the matrix's part of the merge launch
    specialisation."""
    sub_rows = _bracket_rows(csr, sub)
    return sub_rows, sub_rows.data_ptr(), (csr.device, specialisation(csr.indptr, csr.indices, csr.values, sub_rows,
                                                                      csr.nnz))


def _merge_run(chunk: int, sub: int, num_warps: int):
    """run() of an nnz-balanced variant; float32 y is accumulated in place, others via a copy."""
    key = ("merge", sub)  # the brackets depend on sub only: variants of one sub share them

    def run(csr: CsrMatrix, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        y = _output(csr, x, out)
        if csr.nnz == 0:
            return y.zero_()
        sub_rows, sub_rows_at, matrix_key = csr.cached(key, lambda m: _merge_plan(m, sub))
        acc = y.zero_() if y.dtype == torch.float32 else torch.zeros(csr.rows, dtype=torch.float32, device=y.device)
        x_stride, acc_stride = x.stride(0), acc.stride(0)
        (x_key, x_at), (acc_key, acc_at) = operand(x, x_stride), operand(acc, acc_stride)
        args = (csr.indptr, csr.indices, csr.values, x, x_stride, acc, acc_stride, sub_rows, csr.nnz, chunk, sub)
        direct_args = (*csr.addresses(), x_at, x_stride, acc_at, acc_stride, sub_rows_at, csr.nnz, chunk, sub)
        launch_key = (matrix_key, x_key, acc_key, chunk, sub, num_warps)
        _merge_launch.launch(launch_key, (cdiv(csr.nnz, chunk),), args, direct_args, num_warps=num_warps)
        if acc is not y:
            y.copy_(acc)
        return y

    return run


def _adaptive_plan(csr: CsrMatrix, p: dict) -> dict:
    """Bins rows by length (short, medium, large, long) and cuts long rows into pieces.

    Runs once per matrix and synchronises (bin sizes decide the grid); the plan holds device
    tensors and the host ints every later launch needs."""
    indptr = csr.indptr
    length = indptr[1:] - indptr[:-1]
    edges = torch.tensor(p["bin_max"], dtype=length.dtype, device=length.device)
    bin_of = torch.bucketize(length, edges)  # 0 short, 1 medium, 2 large, 3 long
    order = torch.argsort(bin_of, stable=True).to(torch.int32)  # rows grouped by bin, ascending within
    counts = torch.bincount(bin_of, minlength=4).tolist()
    short, medium, large, long_rows = torch.split(order, counts)
    # an empty bin still needs a valid pointer argument: its programs never run
    plan = {name: rows if rows.numel() else indptr
            for name, rows in zip(("short", "medium", "large"), (short, medium, large))}
    plan.update(long=long_rows, counts=counts)

    piece = p["piece"]
    if counts[3]:
        starts, ends = indptr[long_rows.long()], indptr[long_rows.long() + 1]
        per_row = (ends - starts + piece - 1) // piece
        piece_ptr = torch.zeros(counts[3] + 1, dtype=torch.int64, device=indptr.device)
        torch.cumsum(per_row, 0, out=piece_ptr[1:])
        n_pieces = int(piece_ptr[-1])
        owner = torch.repeat_interleave(torch.arange(counts[3], device=indptr.device), per_row,
                                        output_size=n_pieces)
        rank = torch.arange(n_pieces, device=indptr.device) - piece_ptr[owner]
        piece_start = starts[owner] + rank.to(indptr.dtype) * piece
        plan.update(piece_start=piece_start, piece_end=torch.minimum(piece_start + piece, ends[owner]),
                    piece_ptr=piece_ptr, n_pieces=n_pieces)
    else:  # valid pointers for the pieces branch, which never runs
        plan.update(piece_start=indptr, piece_end=indptr, piece_ptr=None, n_pieces=0,
                    no_partials=torch.empty(1, dtype=torch.float32, device=indptr.device))

    progs = [triton.cdiv(counts[0], p["short"][0]), triton.cdiv(counts[1], p["medium"][0]),
             triton.cdiv(counts[2], p["large"][0]), triton.cdiv(plan["n_pieces"], p["pieces"][0])]
    plan["bases"] = np.cumsum(progs).tolist()  # program id where medium, large, pieces begin; grid
    # Every kernel argument but x, y and the partial sums is fixed for the matrix.
    plan["matrix_args"] = (plan["short"], counts[0], plan["medium"], counts[1], plan["large"], counts[2],
                           plan["piece_start"], plan["piece_end"])
    plan["matrix_at"] = addresses(plan["matrix_args"])
    plan["specialisation"] = (csr.device, specialisation(csr.indptr, csr.indices, csr.values, *plan["matrix_args"],
                                                         plan["n_pieces"], *plan["bases"][:3]))
    return plan


def _adaptive_run(p: dict):
    """run() of the binned variant; ``p`` holds its bin limits and tile shapes."""
    key = ("adaptive", repr(sorted(p.items())))
    shapes = (*p["short"], *p["medium"], *p["large"], *p["pieces"])  # the kernel's constexprs, in order

    def run(csr: CsrMatrix, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        y = _output(csr, x, out)
        if csr.nnz == 0:
            return y.zero_()
        plan = csr.cached(key, lambda m: _adaptive_plan(m, p))
        n = plan["counts"]
        medium_base, large_base, pieces_base, grid = plan["bases"]
        partials = (torch.empty(plan["n_pieces"], dtype=torch.float32, device=y.device)
                    if n[3] else plan["no_partials"])
        x_stride, y_stride = x.stride(0), y.stride(0)
        (x_key, x_at), (y_key, y_at) = operand(x, x_stride), operand(y, y_stride)
        partials_at = partials.data_ptr()
        tail = (plan["n_pieces"], medium_base, large_base, pieces_base, *shapes)
        args = (csr.indptr, csr.indices, csr.values, x, x_stride, y, y_stride, *plan["matrix_args"], partials, *tail)
        direct_args = (*csr.addresses(), x_at, x_stride, y_at, y_stride, *plan["matrix_at"], partials_at, *tail)
        launch_key = (plan["specialisation"], x_key, y_key, partials_at % 16 == 0)
        _adaptive_launch.launch(launch_key, (grid,), args, direct_args, num_warps=p["num_warps"])
        if n[3]:
            _combine_pieces_kernel[(n[3],)](partials, plan["piece_ptr"], plan["long"], y, y.stride(0),
                                            BLOCK=128, num_warps=4)
        return y

    return run


_TORCH_CSR = ("torch_csr",)  # scratch key of the matrix as a torch sparse CSR tensor


def _torch_csr_run(csr: CsrMatrix, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """run() of the torch variant: ``torch.addmv`` on the matrix as a torch sparse CSR tensor."""
    y = _output(csr, x, out)
    if csr.nnz == 0:
        return y.zero_()
    if csr.device.type == "cpu" and csr.dtype != torch.float32:
        # torch's CPU product (MKL) has no half types: float32 copies, made afresh on every call
        # (the interpreter's tests), so values written in place are never missed.
        return y.copy_(torch.mv(_torch_csr(csr, csr.values.float()), x.float()))
    return torch.addmv(y, torch_csr_tensor(csr), x, beta=0, out=y)  # beta 0: y is written, never read


def torch_csr_tensor(csr: CsrMatrix) -> torch.Tensor:
    """The matrix as a torch sparse CSR tensor sharing its arrays: built once, and again only if
    an array has moved (its address changed). The torch variant and the profiles' cuSPARSE
    baseline both use it."""
    matrix_at = csr.addresses()
    kept = csr.scratch.get(_TORCH_CSR)
    if kept is None or kept[0] != matrix_at:
        kept = csr.scratch[_TORCH_CSR] = (matrix_at, _torch_csr(csr, csr.values))
    return kept[1]


def _torch_csr(csr: CsrMatrix, values: torch.Tensor) -> torch.Tensor:
    """The matrix as a torch sparse CSR tensor on its index arrays and ``values`` (no copy)."""
    with warnings.catch_warnings():  # torch's notes on every build: beta support, checks skipped
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta state")
        warnings.filterwarnings("ignore", "Sparse invariant checks are implicitly disabled")
        return torch.sparse_csr_tensor(csr.indptr, csr.indices, values, csr.shape, check_invariants=False)


def _register(name: str, run, params: dict, doc: str) -> None:
    VARIANTS[name] = Variant(name, run, params, doc)


VARIANTS: dict[str, Variant] = {}

_register("scalar_r128", _rows_run(128, 1, 4), {"kind": "scalar", "rows": 128, "num_warps": 4},
          "one lane per row, 128 rows per program; for rows of a few nonzeros")
for _g, _rows in ((4, 128), (8, 64), (16, 32), (32, 16), (64, 8), (256, 4)):
    _register(f"vector_g{_g}", _rows_run(_rows, _g, 4),
              {"kind": "vector", "group": _g, "rows": _rows, "num_warps": 4},
              f"{_g} lanes per row, {_rows} rows per program")
# Smaller chunks use fewer registers (ptxas, sm_90a: 32, 44 and 70 per thread for 256, 512 and
# 1024 nonzeros on 4 warps), so more programs share an SM; 4096 on 8 warps won nowhere.
for _chunk, _warps in ((256, 4), (512, 4), (1024, 4)):
    _register(f"merge_c{_chunk}", _merge_run(_chunk, 32, _warps),
              {"kind": "merge", "chunk": _chunk, "bracket": 32, "num_warps": _warps},
              f"{_chunk} nonzeros per program whatever the rows; segmented scan, atomics at chunk edges")
# Narrow groups for short rows, wider ones as rows grow; pieces bound any program's work.
_ADAPTIVE = {"bin_max": [8, 128, 4096], "short": [128, 2], "medium": [32, 16], "large": [4, 128],
             "pieces": [4, 256], "piece": 4096, "num_warps": 4}
_register("adaptive", _adaptive_run(_ADAPTIVE), {"kind": "adaptive", **_ADAPTIVE},
          "rows binned by length (<=8, <=128, <=4096 nonzeros) with a mapping per bin; "
          "longer rows cut into 4096-nonzero pieces over many programs")
_register("torch_csr", _torch_csr_run, {"kind": "torch"},
          "torch sparse CSR @ x: cuSPARSE's SpMV on CUDA, torch's own kernel on the CPU")


# ---------------------------------------------------------------- dispatch contract
def split(inputs):
    """``(A, x)`` -> ``(A, (x,))``: the choice depends on A only."""
    if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
        raise_input("spmv takes inputs (A, x): a CSR matrix and a dense vector")
    return inputs[0], (inputs[1],)


def cache_key(matrix):
    """Identity and in-place version of the arrays the decision was made from."""
    if isinstance(matrix, torch.Tensor) and matrix.layout == torch.sparse_csr:
        # Its member tensors share the tensor's version counter (tests/test_dispatch.py checks):
        # one read instead of two member aliases made per call.
        return (id(matrix), matrix._version)
    if isinstance(matrix, CsrMatrix):
        return (id(matrix), matrix.indptr._version, matrix.indices._version)
    if isinstance(matrix, (tuple, list)) and len(matrix) == 4 and isinstance(matrix[0], torch.Tensor):
        indptr, indices, values, _ = matrix
        return (id(indptr), indptr._version, id(indices), indices._version, id(values), tuple(matrix[3]))
    return None  # uncacheable (scipy input): examined on every call


def problem(matrix) -> CsrMatrix:
    return as_csr(matrix)


def check_operands(csr: CsrMatrix, operands) -> None:
    check_dense_vector(csr, operands[0])


def reference(csr: CsrMatrix, x: torch.Tensor) -> torch.Tensor:
    """y = A x in float64 on the CPU through scipy."""
    return torch.from_numpy(csr.to_scipy() @ x.detach().double().cpu().numpy())


def raise_input(message: str):
    from seer.errors import InputError

    raise InputError(message)
