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
    cusparse  cuSPARSE's SpMV called directly, its per-matrix partition made once instead of on
              every call as torch's product does (``seer.cusparse``).
    diagonal  one lane per row; rows whose columns are the row plus the longest row's offsets (a
              stencil's or a full band's diagonals) read no column indices.
    diagonal_major  those rows read from a copy of their values stored by diagonals: a block of
              rows reads each diagonal as one aligned run, as a copy does.
    offsets   vector CSR reading each column as a 16-bit offset from its row (bands, block
              replicas): 2 bytes a column instead of 4.
Preprocessing (merge chunk rows, adaptive bins, the rows that follow a pattern, the diagonal-major
copy, the columns as offsets) runs on the first call for a matrix and is cached with the matrix (``CsrMatrix.cached``);
later calls do not synchronise with the host, so they can be captured in CUDA graphs.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import partial, wraps
from typing import Callable

import numpy as np
import torch
from torch.autograd.graph import increment_version
import triton
import triton.language as tl

from seer import cusparse, sparse
from seer.errors import (InputError, check_no_grad, check_not_negated, check_writable, dual_level_open, no_memory_error,
                         overlap_error, warn, warn_once)
from seer.launch import (INTERPRETING, InputLaunches, LaunchCache, addresses, cdiv, current_stream, on_device,
                         sm_count, specialisation, through_triton, vector_operands)
from seer.registry import Variant, example_values
from seer.sparse import (POSITIONS_FIT_INT32_BELOW, STRIDED, CsrMatrix, add_up_counts, as_csr, check_dense_vector,
                         dense_vector_check, program_counts, row_statistics, zero_counts)

# ---------------------------------------------------------------- kernels and launchers


@triton.jit
def _segment_sums(start, end, indices, values, x, x_stride, row, G: tl.constexpr, OFFSETS: tl.constexpr):
    """fp32 sums of A[k] * x[col[k]] over k in [start, end) for each of a block of segments.

    ``start``/``end`` have shape [S]; G lanes walk each segment, so the loads of one
    segment are contiguous (coalesced) and the loop runs as long as the longest segment.
    With OFFSETS, ``indices`` holds each column less its segment's ``row`` (shape [S]).
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
        if OFFSETS:
            col = row[:, None] + col.to(tl.int32)
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
    sums = _segment_sums(start, end, indices, values, x, x_stride, row, G, False)
    tl.store(y + row * y_stride, sums.to(y.dtype.element_ty), mask=ok)


@triton.jit
def _offset_rows_kernel(indptr, offsets, values, x, x_stride, y, y_stride, rows,
                        ROWS: tl.constexpr, G: tl.constexpr):
    """``_csr_rows_kernel`` reading each column as a 16-bit offset from its row: 2 bytes a nonzero
    instead of 4 (int32) or 8 (int64)."""
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = row < rows
    start = tl.load(indptr + row, mask=ok, other=0)
    end = tl.load(indptr + row + 1, mask=ok, other=0)
    sums = _segment_sums(start, end, offsets, values, x, x_stride, row, G, True)
    tl.store(y + row * y_stride, sums.to(y.dtype.element_ty), mask=ok)


@triton.jit
def _row_end_offsets_kernel(indptr, indices, bounds, sampled, stride, BLOCK: tl.constexpr):
    """Folds the offsets of the first and last column of rows 0, stride, 2 * stride, ... (``sampled``
    rows) into the first pair of ``bounds``: a row's extremes where its columns are sorted, real
    entries either way."""
    row = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)) * stride
    ok = row < sampled * stride
    start = tl.load(indptr + row, mask=ok, other=0)
    end = tl.load(indptr + row + 1, mask=ok, other=0)
    filled = ok & (end > start)
    first = tl.where(filled, tl.load(indices + start, mask=filled, other=0) - row, 0)
    last = tl.where(filled, tl.load(indices + end - 1, mask=filled, other=0) - row, 0)
    tl.atomic_min(bounds, tl.min(first, axis=0))
    tl.atomic_max(bounds + 1, tl.max(last, axis=0))


@triton.jit
def _column_offsets_kernel(indptr, indices, offsets, bounds, rows, ROWS: tl.constexpr, G: tl.constexpr,
                           SLOTS: tl.constexpr):
    """offsets[k] = indices[k] - (k's row) as int16 for rows [p * ROWS, (p + 1) * ROWS), walked as
    ``_offset_rows_kernel`` walks them; the least and greatest offset are folded into slot p % SLOTS
    of ``bounds`` (pairs that start at 0: only whether a bound of int16 is passed matters), so that
    programs do not queue on one address. A program that finds slot 0 (the sampled rows' ends, and
    whatever programs folding into it have added) already out of int16's reach does nothing: the
    copy will not be used."""
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = row < rows
    start = tl.load(indptr + row, mask=ok, other=0)
    end = tl.load(indptr + row + 1, mask=ok, other=0)
    lane = tl.arange(0, G)
    low = tl.zeros((ROWS, G), dtype=indices.dtype.element_ty)
    high = tl.zeros((ROWS, G), dtype=indices.dtype.element_ty)
    in_reach = (tl.load(bounds) >= -32768) & (tl.load(bounds + 1) <= 32767)  # as fits_16_bits
    if in_reach:
        for step in range(0, tl.max(end - start, axis=0), G):
            k = start[:, None] + lane[None, :] + step
            inside = k < end[:, None]
            offset = tl.where(inside, tl.load(indices + k, mask=inside, other=0) - row[:, None], 0)
            tl.store(offsets + k, offset.to(tl.int16), mask=inside)
            low = tl.minimum(low, offset)
            high = tl.maximum(high, offset)
        slot = bounds + 2 * (tl.program_id(0) % SLOTS)
        tl.atomic_min(slot, tl.min(tl.min(low, axis=1), axis=0))
        tl.atomic_max(slot + 1, tl.max(tl.max(high, axis=1), axis=0))


@triton.jit
def _pattern(indptr, pattern_row):
    """The diagonal pattern of a matrix: the row it was taken from, where that row's columns start,
    and how many it has. Its k-th offset is ``indices[first + k] - row``."""
    row = tl.load(pattern_row)
    first = tl.load(indptr + row)
    return row, first, tl.load(indptr + row + 1) - first


@triton.jit
def _follows_pattern_kernel(indptr, indices, pattern_row, follows, rows, ROWS: tl.constexpr, G: tl.constexpr):
    """follows[r] = 1 where row r has exactly the columns r + offset[k] of the pattern, in order."""
    p_row, p_first, length = _pattern(indptr, pattern_row)
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = row < rows
    start = tl.load(indptr + row, mask=ok, other=0)
    end = tl.load(indptr + row + 1, mask=ok, other=0)
    same = ok & (end - start == length)
    # A program none of whose rows is as long as the pattern compares nothing: without this, every
    # program walked the whole pattern (rows / 64 programs times the longest row / 16 steps on a
    # matrix with one very long row; a review).
    compared = tl.where(tl.max(same.to(tl.int32), axis=0) > 0, length, 0)
    for step in range(0, compared, G):
        k = step + tl.arange(0, G)
        in_pattern = k < length
        offset = tl.load(indices + p_first + k, mask=in_pattern, other=0) - p_row
        inside = same[:, None] & in_pattern[None, :]
        col = tl.load(indices + start[:, None] + k[None, :], mask=inside, other=0)
        wrong = inside & (col != row[:, None] + offset[None, :])
        same = same & (tl.sum(wrong.to(tl.int32), axis=1) == 0)
    tl.store(follows + row, same.to(tl.int8), mask=ok)


@triton.jit
def _diagonal_rows_kernel(indptr, indices, values, pattern_row, follows, x, x_stride, y, y_stride, rows,
                          ROWS: tl.constexpr, PACK_FROM: tl.constexpr):
    """One lane per row; a row that follows the pattern gathers x at row + offset[k] without
    loading its column indices (half of a nonzero's bytes, and no load for x's addresses to wait
    on). A program whose rows all follow a pattern of PACK_FROM or more nonzeros reads one row
    pointer: each of its rows starts ``length`` nonzeros after the one before."""
    p_row, p_first, length = _pattern(indptr, pattern_row)
    first_row = tl.program_id(0) * ROWS
    row = first_row + tl.arange(0, ROWS)
    ok = row < rows
    flagged = tl.load(follows + row, mask=ok, other=0) != 0
    all_follow = tl.min(flagged.to(tl.int32), axis=0) * (length >= PACK_FROM).to(tl.int32)
    packed = tl.zeros_like(row) + all_follow > 0
    start = tl.load(indptr + row, mask=ok & ~packed, other=0)
    end = tl.load(indptr + row + 1, mask=ok & ~packed, other=0)
    start = tl.where(packed, tl.load(indptr + first_row) + (row - first_row) * length, start)
    end = tl.where(packed, start + length, end)
    acc = tl.zeros([ROWS], dtype=tl.float32)
    for k in range(0, tl.max(end - start, axis=0)):
        at = start + k
        inside = at < end
        # k < length: the pattern's row is the longest, so its offset k exists.
        offset = tl.load(indices + p_first + k) - p_row
        stored = tl.load(indices + at, mask=inside & ~flagged, other=0)
        col = tl.where(flagged, row + offset, stored)
        a = tl.load(values + at, mask=inside, other=0.0)
        xv = tl.load(x + col * x_stride, mask=inside, other=0.0)
        acc += a.to(tl.float32) * xv.to(tl.float32)
    tl.store(y + row * y_stride, acc.to(y.dtype.element_ty), mask=ok)


@triton.jit
def _to_diagonal_major_kernel(indptr, values, follows, diagonals, stride, length, rows,
                              ROWS: tl.constexpr, DIAGONALS: tl.constexpr):
    """diagonals[d * stride + r] = the d-th value of row r where row r follows the pattern, else 0
    (rows up to ``stride``). Read along rows, written along diagonals: Triton moves the tile
    between the two layouts through shared memory, so both sides stay coalesced."""
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    flagged = tl.load(follows + row, mask=row < rows, other=0) != 0
    start = tl.load(indptr + row, mask=flagged, other=0)
    for d0 in range(0, length, DIAGONALS):
        d = d0 + tl.arange(0, DIAGONALS)
        in_pattern = d < length
        a = tl.load(values + start[:, None] + d[None, :], mask=flagged[:, None] & in_pattern[None, :], other=0.0)
        tl.store(diagonals + d[None, :] * stride + row[:, None], a, mask=in_pattern[None, :])


@triton.jit
def _segmented_add(a_sum, a_head, b_sum, b_head):
    """Combine of a segmented inclusive scan: a segment head restarts the running sum."""
    return tl.where(b_head != 0, b_sum, a_sum + b_sum), a_head | b_head


@triton.jit
def _merge_kernel(indptr, indices, values, x, x_stride, hot_x, acc, acc_stride, sub_rows, nnz,
                  CHUNK: tl.constexpr, SUB: tl.constexpr, HOT: tl.constexpr):
    """Program p owns the nonzeros [p * CHUNK, (p + 1) * CHUNK): equal work whatever the rows.

    ``sub_rows[j]`` is the row holding nonzero j * SUB (the last entry: the row of the last
    nonzero), so nonzero k lies in a row of [sub_rows[k // SUB], sub_rows[k // SUB + 1]].
    ``acc`` is float32 and zeroed by the caller: rows wholly inside the chunk are stored, rows
    cut by a chunk edge are added atomically (at most two atomics per program).
    With ``HOT`` > 0 the column indices are renumbered: a column below ``HOT`` reads ``hot_x``,
    a packed copy of the most read x values, and column c >= ``HOT`` reads x[c - HOT].
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
    if HOT > 0:
        # One load through a pointer select: a hot value shares its sector with seven others.
        source = tl.where(col < HOT, hot_x + col, x + (col - HOT) * x_stride)
    else:
        source = x + col * x_stride
    xv = tl.load(source, mask=live, other=0.0)
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
def _zero_and_gather_kernel(acc, acc_stride, rows, x, x_stride, hot_columns, hot_x, hot, BLOCK: tl.constexpr):
    """Before a merge call on hot columns, in one launch: zero the float32 accumulator and pack the
    hot x values (``hot_x[i] = x[hot_columns[i]]``)."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(acc + i * acc_stride, tl.zeros((BLOCK,), dtype=tl.float32), mask=i < rows)
    gathered = i < hot
    column = tl.load(hot_columns + i, mask=gathered, other=0)
    tl.store(hot_x + i, tl.load(x + column * x_stride, mask=gathered), mask=gathered)


@triton.jit
def _bin_rows(pid, bin_rows, count, indptr, indices, values, x, x_stride, y, y_stride,
              ROWS: tl.constexpr, G: tl.constexpr):
    """Vector CSR over a list of rows: this program takes list entries [pid * ROWS, ...)."""
    slot = pid * ROWS + tl.arange(0, ROWS)
    ok = slot < count
    row = tl.load(bin_rows + slot, mask=ok, other=0)
    start = tl.load(indptr + row, mask=ok, other=0)
    end = tl.load(indptr + row + 1, mask=ok, other=0)
    sums = _segment_sums(start, end, indices, values, x, x_stride, row, G, False)
    tl.store(y + row * y_stride, sums.to(y.dtype.element_ty), mask=ok)


@triton.jit
def _add_up_splits(sums, split, splits, block, row, mine, partials, stride, arrivals, y, y_stride):
    """Split ``split`` of a block's ``splits`` leaves its sums in ``partials``; the split whose
    arrival makes the block's count a multiple of ``splits`` (the last) adds them all into ``y``, in
    split order (so that the result does not depend on which arrived last), and takes ``splits``
    off the count. One launch a call: a separate reduction costs a launch's host time, which is
    most of a call on the L2-sized matrices that take this path (NOTES SpMV 48).

    Taking ``splits`` off, rather than storing zero, keeps the count right even if two launches
    ever share it (the plan gives each stream its own, but two CUDA graphs captured on one stream
    and replayed at once would share): every ``splits``-th arrival finds a multiple whatever the
    order, so a race could spoil those launches' y, never a later call's."""
    tl.store(partials + split * stride + row, sums, mask=mine)
    tl.debug_barrier()  # every lane's partial stored before the count says so
    arrived = tl.atomic_add(arrivals + block, 1, sem="acq_rel", scope="gpu")
    if (arrived + 1) % splits == 0:
        total = tl.zeros_like(sums)
        for s in range(splits):
            # .cg: from L2, where the other splits' stores are; never a stale line of this SM's L1.
            total += tl.load(partials + s * stride + row, mask=mine, other=0.0, cache_modifier=".cg")
        tl.store(y + row * y_stride, total.to(y.dtype.element_ty), mask=mine)
        tl.atomic_add(arrivals + block, -splits, sem="relaxed", scope="gpu")


@triton.jit
def _diagonal_major_kernel(diagonals, stride, offsets, length, per_split, splits, follows, rest_rows, rest_count,
                           rest_programs, partials, arrivals, indptr, indices, values, x, x_stride, y, y_stride,
                           rows, ROWS: tl.constexpr, DIAGONALS: tl.constexpr, REST_ROWS: tl.constexpr,
                           REST_G: tl.constexpr):
    """The first ``rest_programs`` programs sum the rows that do not follow the pattern from CSR
    (vector CSR over their list, REST_G lanes a row). The others sum the rows that follow it from
    the diagonal-major copy of their values: DIAGONALS diagonals of ROWS consecutive rows a step,
    each a contiguous, aligned run of values (16-byte loads) and of x. Program p past the rest
    takes the rows of block p // splits and the diagonals of split p % splits; with several splits
    (wide bands on few rows) the splits' sums meet in ``partials`` (float32, ``splits`` rows of
    ``stride``) and one int32 count a block in ``arrivals`` (:func:`_add_up_splits`)."""
    pid = tl.program_id(0)
    if pid < rest_programs:
        _bin_rows(pid, rest_rows, rest_count, indptr, indices, values, x, x_stride, y, y_stride, REST_ROWS, REST_G)
    else:
        block = (pid - rest_programs) // splits
        split = (pid - rest_programs) % splits
        row = block * ROWS + tl.arange(0, ROWS)
        ok = row < rows
        flagged = tl.load(follows + row, mask=ok, other=0) != 0
        first = split * per_split
        last = tl.minimum(first + per_split, length)
        acc = tl.zeros([DIAGONALS, ROWS], dtype=tl.float32)
        for d0 in range(first, last, DIAGONALS):
            d = d0 + tl.arange(0, DIAGONALS)
            in_split = d < last
            offset = tl.load(offsets + d, mask=in_split, other=0)
            # Rows past ``rows`` and rows that do not follow hold zeros: only x is masked for them.
            a = tl.load(diagonals + d[:, None] * stride + row[None, :], mask=in_split[:, None], other=0.0)
            xv = tl.load(x + (row[None, :] + offset[:, None]) * x_stride,
                         mask=in_split[:, None] & flagged[None, :], other=0.0)
            acc += a.to(tl.float32) * xv.to(tl.float32)
        sums = tl.sum(acc, axis=0)
        if splits == 1:
            tl.store(y + row * y_stride, sums.to(y.dtype.element_ty), mask=ok & flagged)
        else:
            _add_up_splits(sums, split, splits, block, row, ok & flagged, partials, stride, arrivals, y, y_stride)


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
        sums = _segment_sums(start, end, indices, values, x, x_stride, start, PIECE_G, False)
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


@triton.jit
def _validating_product_kernel(indptr, indices, values, x, x_stride, y, y_stride, rows, nnz, cols, totals,
                               counters, programs, blocks, STATS: tl.constexpr, NARROW: tl.constexpr,
                               LONG_ROW: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """The validation pass of :mod:`seer.sparse` and y = A x in one launch, for a first call on
    a small matrix. Program p takes blocks of ROWS rows p, p + programs, ...; each block streams
    its rows' nonzeros BLOCK at a time (coalesced, so a long row costs its length over BLOCK
    steps, not over a few lanes) and adds every product into its row's sum through a
    [ROWS, BLOCK] ownership mask. The matrix is not trusted yet: row ranges are clamped into
    [0, nnz] and out-of-range columns counted, not read, so a bad matrix is only reported. The
    programs' counts are added up into ``totals`` (add_up_counts).
    seer always measures the row statistics (STATS); without them is what they cost, for
    benchmarks/spmv_validation.py."""
    pid = tl.program_id(0)
    decreasing, outside, sum_sq, longest, empty, long_nnz = zero_counts(ROWS, NARROW)
    for block in range(pid, blocks, programs):
        row = block * ROWS + tl.arange(0, ROWS)
        ok = row < rows
        lo = tl.load(indptr + row, mask=ok, other=0)
        hi = tl.load(indptr + row + 1, mask=ok, other=0)
        decreasing, sum_sq, longest, empty, long_nnz = row_statistics(
            lo, hi, ok, decreasing, sum_sq, longest, empty, long_nnz, STATS, NARROW, LONG_ROW)
        start = tl.minimum(tl.maximum(lo, 0), nnz)
        end = tl.minimum(tl.maximum(hi, start), nnz)
        first = tl.min(tl.where(ok, start, nnz), axis=0)
        last = tl.max(tl.where(ok, end, 0), axis=0)
        sums = tl.zeros([ROWS], dtype=tl.float32)
        for base in range(first, last, BLOCK):
            k = base + tl.arange(0, BLOCK)
            inside = k < last
            col = tl.load(indices + k, mask=inside, other=0)
            a = tl.load(values + k, mask=inside, other=0.0)
            bad = inside & ((col < 0) | (col >= cols))
            outside += tl.sum(tl.reshape(bad.to(tl.int32), [BLOCK // ROWS, ROWS]), axis=0)
            xv = tl.load(x + col * x_stride, mask=inside & ~bad, other=0.0)
            product = a.to(tl.float32) * xv.to(tl.float32)
            owner = (k[None, :] >= start[:, None]) & (k[None, :] < end[:, None])
            sums += tl.sum(tl.where(owner, product[None, :], 0.0), axis=1)
        tl.store(y + row * y_stride, sums.to(y.dtype.element_ty), mask=ok)
    # No shifted rows counted: the pass samples them only on matrices far above these bounds.
    add_up_counts(program_counts(indptr, rows, decreasing, outside, sum_sq, longest, empty, long_nnz, 0),
                  programs, totals, counters)


# ------------------------------------------------------------------ host side


def _output(csr: CsrMatrix, x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """``out`` checked against the result y, or a fresh y (x has the matrix's dtype and device:
    ``new_empty`` skips the parsing of ``torch.empty``'s arguments, a third of its host time)."""
    return x.new_empty(csr.rows) if out is None else _out_check(csr)(out, x)


def _out_check(csr: CsrMatrix) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The check of ``out`` as y of ``csr`` for the vector x (already checked), as a function of
    the two alone that returns ``out`` (no reference to ``csr``: see
    :func:`seer.sparse.dense_vector_check`): :func:`_check_apart`, and no autograd (seer's kernels
    have no backward)."""
    rows, cols, dtype, device, size = csr.rows, csr.cols, csr.dtype, csr.device, csr.values.element_size()
    shape = (rows,)
    arrays = tuple((name, array, array.nbytes) for name, array in
                   (("indptr", csr.indptr), ("indices", csr.indices), ("values", csr.values)))

    def check(out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        try:
            common = (isinstance(out, torch.Tensor) and out.shape == shape and out.dtype == dtype
                      and out.device == device and out.layout is STRIDED
                      and not (out.requires_grad or out.is_neg() or out.is_inference() or dual_level_open()))
        except RuntimeError:  # a nested tensor has no sizes to compare: named below
            common = False
        if common:
            _check_apart(out, x, rows, cols, size, arrays)
            increment_version(out)  # written in place: autograd must see it (a saved out would be stale)
            return out
        if not isinstance(out, torch.Tensor):
            raise InputError(f"out must be a torch.Tensor, got {type(out).__name__}")
        if out.is_nested:
            raise InputError("out must be a dense tensor, got a nested one")
        if out.shape != shape:
            raise InputError(f"out must have shape ({rows},) for a matrix of {rows} rows, got {tuple(out.shape)}")
        if out.dtype != dtype:
            raise InputError(f"out has dtype {out.dtype} but y has the dtype of the matrix values, {dtype}")
        if out.device != device:
            raise InputError(f"out is on {out.device} but the matrix is on {device}")
        if out.layout is not STRIDED:
            raise InputError(f"out must be a dense tensor, got layout {out.layout}")
        check_not_negated("spmv", out=out)
        check_no_grad("spmv", out=out)  # here out requires grad: served under torch.no_grad() only
        check_writable("spmv", out)
        _check_apart(out, x, rows, cols, size, arrays)
        increment_version(out)
        return out

    return check


def _check_apart(y: torch.Tensor, x: torch.Tensor, rows: int, cols: int, size: int, arrays: tuple) -> None:
    """Raise unless y (``rows`` elements of ``size`` bytes) is apart from x (``cols`` elements), from
    the matrix's ``arrays`` (``(name, array, bytes)``: every program reads them while others write
    y) and from itself (a stride of 0 would write every row into one element). Arithmetic on the
    memory spans, at a third of the host time of a loop over any tensor's dimensions: every call
    given an out pays it (``benchmarks/out_check.py``); the arrays' sizes are the plan's."""
    if not rows:
        return
    try:
        low, stride = y.data_ptr(), y.stride()[0]  # stride() then [0]: a third of stride(0)'s host time
        start = x.data_ptr() if cols else 0
    except RuntimeError:
        raise no_memory_error("spmv", "A @ x") from None
    if not stride and rows > 1:
        raise InputError("out has stride 0: every row's result would be written to one element; pass a tensor "
                         "with an element per row")
    high = low + ((rows - 1) * stride + 1) * size
    if cols:
        if start < high and low < start + ((cols - 1) * x.stride()[0] + 1) * size:
            raise overlap_error("x")
    for name, array, nbytes in arrays:
        start = array.data_ptr()
        if start < high and low < start + nbytes:
            raise overlap_error(f"the matrix's {name}")


# On small matrices the host path costs more than the kernel (benchmarks/results/host-path-*.md).
# So a kernel variant plans its work on a matrix once (grid, preprocessing, the matrix's share of
# the launch specialisation) and keeps the plan with the matrix as a *call*, ``call(x, out=None)``:
# it checks x (and out), and launches through seer's direct path once the specialisation is
# compiled. ``run(csr, x, out)`` looks the call up (rebuilt if indptr changed in place); dispatch
# binds it once per decision. Calls hold the matrix's arrays, never the matrix itself (no cycle
# through its cache), and read the arrays' addresses afresh: ``set_`` may move them.
_rows_launch = LaunchCache(_csr_rows_kernel)
_offset_rows_launch = LaunchCache(_offset_rows_kernel)
_diagonal_launch = LaunchCache(_diagonal_rows_kernel)
_merge_launch = LaunchCache(_merge_kernel)
_zero_and_gather_launch = LaunchCache(_zero_and_gather_kernel)
_adaptive_launch = LaunchCache(_adaptive_kernel)
_combine_launch = LaunchCache(_combine_pieces_kernel)
_to_diagonal_major_launch = LaunchCache(_to_diagonal_major_kernel)
_diagonal_major_launch = LaunchCache(_diagonal_major_kernel)


def _kernel_variant(key: tuple, plan: Callable[[CsrMatrix], Callable]) -> tuple[Callable, Callable]:
    """``(run, bind)`` of a kernel variant whose call on a matrix ``plan(csr)`` builds. Triton compiles,
    loads and launches on the current GPU, and a launch is kept under the matrix's device: where the
    process sees several, the matrix's is made current around the plan and ``run``'s call (else a
    call on another GPU's matrix ran there, and kept that GPU's kernel for the matrix's; a review).
    ``bind``'s call is made on the matrix's GPU by its caller, as dispatch makes every call."""

    def bind(csr: CsrMatrix) -> Callable:
        with on_device(csr.device):  # a plan may launch (preprocessing)
            return csr.cached(key, plan)

    def run(csr: CsrMatrix, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        with on_device(csr.device):
            return csr.cached(key, plan)(x, out)

    return run, bind


def _zero_call(csr: CsrMatrix) -> Callable:
    """The call on a matrix without nonzeros: y = 0."""
    check, out_check, rows = dense_vector_check(csr), _out_check(csr), csr.rows

    def call(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        check(x)
        return (x.new_empty(rows) if out is None else out_check(out, x)).zero_()

    return call


def _rows_variant(rows_per_program: int, group: int, num_warps: int) -> tuple[Callable, Callable]:
    """Scalar (group 1) and vector CSR: no preprocessing at all."""
    shape = (rows_per_program, group)  # the kernel's constexprs

    def plan(csr: CsrMatrix) -> Callable:
        if csr.nnz == 0:
            return _zero_call(csr)
        return _row_mapped_call(csr, _rows_launch, shape, num_warps)

    return _kernel_variant(("rows", rows_per_program, group, num_warps), plan)


def _aligned(values: torch.Tensor) -> bool:
    return values.data_ptr() % 16 == 0


def _values_at(values: torch.Tensor, aligned: bool) -> int:
    """The values' address for a launch compiled when they were 16-byte ``aligned``: values written
    in place keep a cached decision, and ``set_`` can move them where that code would fault."""
    at = values.data_ptr()
    if aligned and at % 16:
        raise InputError("the matrix values were moved (set_) to an address that is not 16-byte aligned since "
                         "seer planned this matrix's kernel for an aligned one; seer.dispatch plans it again on its "
                         "next call (the move changes its cache key): bind the variant again")
    return at


# From this many nonzeros a row-mapped kernel's int32 positions may pass 2**31: every row of a program
# steps as long as its longest row, masked by position (k < end), so a row after a long one reaches
# its start plus that length, which can wrap negative and pass the mask (a review: reads, and the
# offsets' copy writes, 8 GiB before the arrays). Below, start + longest <= 2 * nnz fits.
WIDE_POSITIONS_FROM = POSITIONS_FIT_INT32_BELOW // 2


def row_pointers(csr: CsrMatrix) -> torch.Tensor:
    """The row pointers the row-mapped kernels read: the matrix's own, or from
    :data:`WIDE_POSITIONS_FROM` nonzeros on int32 arrays an int64 copy made once per matrix, so that
    their positions are 64-bit (the kernels compile as they do for an int64 matrix's)."""
    if csr.indptr.dtype != torch.int32 or csr.nnz < WIDE_POSITIONS_FROM:
        return csr.indptr
    return csr.cached(("int64 row pointers",), lambda matrix: matrix.indptr.to(torch.int64))


def _row_mapped_call(csr: CsrMatrix, launch_cache: LaunchCache, shape: tuple, num_warps: int,
                     fixed: tuple = (), columns: torch.Tensor | None = None) -> Callable:
    """The call of a row-mapped kernel on ``csr``: ``(indptr, indices, values, *fixed, x, x_stride,
    y, y_stride, rows, *shape)`` launched over ``shape[0]`` rows a program. ``fixed``: arrays the
    plan made for the matrix, whose addresses never move (the matrix's own are read each call);
    ``columns``: such an array passed in place of the matrix's column indices."""
    check, out_check = dense_vector_check(csr), _out_check(csr)
    indptr, values, rows = row_pointers(csr), csr.values, csr.rows
    indices = csr.indices if columns is None else columns
    fixed_at = addresses(fixed)
    grid = cdiv(rows, shape[0])
    launches = InputLaunches(launch_cache, (csr.device, specialisation(indptr, indices, values, *fixed, rows), *shape),
                             {"num_warps": num_warps})
    values_aligned = _aligned(values)

    def call(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        check(x)
        values_at = _values_at(values, values_aligned)
        y = x.new_empty(rows) if out is None else out_check(out, x)
        vectors, x_at, x_stride, y_at, y_stride = vector_operands(x, y)
        launches.launch(vectors, grid, (indptr, indices, values, *fixed, x, x_stride, y, y_stride, rows, *shape),
                        (indptr.data_ptr(), indices.data_ptr(), values_at, *fixed_at, x_at,
                         x_stride, y_at, y_stride, rows, *shape))
        return y

    return call


# A program of rows that all follow the pattern reads one row pointer instead of its rows' own
# from this many nonzeros a row: on an H200 the packed starts were 6-10% slower on rows of 3-7,
# even on rows of 9 and 2-30% faster from 17 up (benchmarks/results/spmv-patterns-h200.md,
# ``_dense`` against plain).
PACK_FROM = 16
_FOLLOWS_TILE = {"ROWS": 64, "G": 16}


_FOLLOWING_PATTERN = ("rows following pattern",)


def _rows_following_pattern(csr: CsrMatrix) -> tuple[torch.Tensor, torch.Tensor]:
    """(pattern_row, follows): the matrix's longest row (the first of them) as a 0-d device tensor,
    whose columns minus its number are the diagonal pattern, and an int8 flag per row that has
    exactly those columns relative to itself. Both depend on the structure alone, so the diagonal
    variants share them, made once per structure (neither writes to them)."""
    return csr.cached(_FOLLOWING_PATTERN, _find_rows_following_pattern)


def _find_rows_following_pattern(csr: CsrMatrix) -> tuple[torch.Tensor, torch.Tensor]:
    """Two small reductions and one pass over the structure; no read-back, so the host never waits."""
    pattern_row = torch.argmax(csr.indptr[1:] - csr.indptr[:-1])
    follows = torch.empty(csr.rows, dtype=torch.int8, device=csr.device)
    through_triton(_follows_pattern_kernel, (cdiv(csr.rows, _FOLLOWS_TILE["ROWS"]),),
                   csr.indptr, csr.indices, pattern_row, follows, csr.rows, **_FOLLOWS_TILE, num_warps=4)
    return pattern_row, follows


def _diagonal_variant(rows_per_program: int, num_warps: int) -> tuple[Callable, Callable]:
    """Scalar CSR without the column indices of rows that follow the longest row's diagonals."""
    shape = (rows_per_program, PACK_FROM)  # the kernel's constexprs

    def plan(csr: CsrMatrix) -> Callable:
        if csr.nnz == 0:
            return _zero_call(csr)
        return _row_mapped_call(csr, _diagonal_launch, shape, num_warps, fixed=_rows_following_pattern(csr))

    return _kernel_variant(("diagonal", rows_per_program, num_warps), plan)


# Bands and block-diagonal matrices keep every column near its row: read as a 16-bit offset from
# the row, a column costs 2 bytes instead of 4, a quarter of what a nonzero of fp32 values moves
# (benchmarks/NOTES.md, SpMV 59). Where one lies farther (permuted or scattered columns) the
# variant is cusparse_prepared, the best single variant: the trees cannot see the offsets' range.
def fits_16_bits(low: int, high: int) -> bool:
    """Whether offsets from ``low`` to ``high`` fit int16."""
    return -(2**15) <= low and high < 2**15


SAMPLED_ROW_ENDS = 4096  # rows whose ends are read before the copy: one small launch
BOUND_SLOTS = 64  # pairs of bounds the copy's programs fold into, read back together


def sampled_offset_bounds(csr: CsrMatrix) -> torch.Tensor:
    """``BOUND_SLOTS`` pairs [least, greatest] of 0, the first holding the offsets of the first and
    last column of rows spread evenly (every row under 2 * ``SAMPLED_ROW_ENDS`` rows, else every
    ``rows // SAMPLED_ROW_ENDS``-th), on the device: where one is out of int16's reach, no copy is
    made."""
    bounds = torch.zeros(BOUND_SLOTS, 2, dtype=csr.indices.dtype, device=csr.device)
    stride = max(1, csr.rows // SAMPLED_ROW_ENDS)
    sampled = cdiv(csr.rows, stride)
    through_triton(_row_end_offsets_kernel, (cdiv(sampled, 1024),),
                   csr.indptr, csr.indices, bounds, sampled, stride, BLOCK=1024, num_warps=4)
    return bounds


def offset_range(bounds: torch.Tensor) -> tuple[int, int]:
    """The least and greatest of the pairs in ``bounds``, read back in one synchronisation."""
    pairs = bounds.tolist()
    return min(low for low, _ in pairs), max(high for _, high in pairs)


def column_offsets(csr: CsrMatrix) -> torch.Tensor | None:
    """Each column less its row as int16, or None where one does not fit: one pass over the columns
    (2.2x faster than torch's ops, NOTES SpMV 60), skipped where sampled rows' ends already do not
    fit (SpMV 62), and one read-back."""
    bounds = sampled_offset_bounds(csr)
    offsets = torch.empty(csr.nnz, dtype=torch.int16, device=csr.device)
    rows_per_program, group = _vector_tile(cdiv(csr.nnz, csr.rows))
    through_triton(_column_offsets_kernel, (cdiv(csr.rows, rows_per_program),),
                   row_pointers(csr), csr.indices, offsets, bounds, csr.rows,
                   ROWS=rows_per_program, G=group, SLOTS=BOUND_SLOTS, num_warps=4)
    return offsets if fits_16_bits(*offset_range(bounds)) else None


def _offsets_variant(num_warps: int) -> tuple[Callable, Callable]:
    """Vector CSR by the mean row length on the columns as 16-bit offsets from their rows
    (:func:`column_offsets`, made once per matrix); cusparse_prepared where they do not fit."""

    def plan(csr: CsrMatrix) -> Callable:
        if csr.nnz == 0:
            return _zero_call(csr)
        # cuSPARSE's fallback is planned before the offsets are read back: after it, its host work
        # (descriptors, workspace, preprocessing) would run while the device idles (NOTES SpMV 62).
        # A fitting matrix makes and drops it (~0.01 ms of device time).
        fallback = _cusparse_plan(csr) if csr.device.type == "cuda" and cusparse.available() else None
        offsets = column_offsets(csr)
        if offsets is None:
            return fallback or _cusparse_plan(csr)
        return _row_mapped_call(csr, _offset_rows_launch, _vector_tile(cdiv(csr.nnz, csr.rows)), num_warps,
                                columns=offsets)

    return _kernel_variant(("offsets", 16, num_warps), plan)


# Diagonal-major storage costs memory where rows do not follow the pattern (their slots hold
# zeros): it is made only where at least half of the nonzeros follow and the copy is at most twice
# the values; elsewhere the variant runs as vector CSR by the mean row length, so that a choice
# made for a structure the trees have not seen (rows of equal length that follow no pattern, as in
# a half-filled band) costs little. Rows are padded to a multiple of the largest row block, so
# that every block reads whole, aligned runs.
DIAGONAL_MAJOR_MIN_FOLLOWING = 0.5
DIAGONAL_MAJOR_MAX_FILL = 2.0
_DIAGONAL_MAJOR_PAD = 1024
_TO_DIAGONAL_MAJOR_TILE = {"ROWS": 64, "DIAGONALS": 16}
# Splitting the diagonals of a block over several programs keeps every SM busy on wide bands of
# few rows: at least this many programs per SM where the diagonals allow, each at least this many
# steps long.
_PROGRAMS_PER_SM = 4
_MIN_STEPS_PER_SPLIT = 8


@dataclass(frozen=True)
class _DiagonalLayout:
    """What storing a matrix by diagonals needs on the host and the device."""

    offsets: torch.Tensor  # int32 column offsets of the pattern, one a diagonal
    length: int  # diagonals
    rest_rows: torch.Tensor  # int32 numbers of the rows that do not follow the pattern
    rest_count: int


# Vector CSR tiles by row length: (up to this many nonzeros, rows a program, lanes a row), the
# shipped row-mapped tiles. The rows that do not follow (a band's ends, a stencil's boundary) take
# the tile of the pattern's length, which bounds theirs: one lane a row would walk a band's ends of
# 1,200 nonzeros one by one. A matrix stored by rows takes the tile of its mean row length.
_VECTOR_TILES = ((8, 128, 1), (32, 64, 8), (128, 32, 16), (512, 16, 32), (None, 8, 64))


def _vector_tile(length: int) -> tuple[int, int]:
    """(rows a program, lanes a row) for rows of about ``length`` nonzeros."""
    return next((rows, g) for longest, rows, g in _VECTOR_TILES if longest is None or length <= longest)


def _diagonal_major_layout(csr: CsrMatrix, pattern_row: torch.Tensor, follows: torch.Tensor) -> _DiagonalLayout | None:
    """The layout where storing the matrix by diagonals pays, else None. Reads four numbers back
    (the copy's size is needed on the host) and, where rows do not follow, their list."""
    first_at = csr.indptr[pattern_row]
    numbers = torch.stack([pattern_row.to(first_at.dtype), first_at, csr.indptr[pattern_row + 1] - first_at,
                           follows.sum(dtype=first_at.dtype)])
    p_row, first, length, following = numbers.tolist()
    if (following * length < DIAGONAL_MAJOR_MIN_FOLLOWING * csr.nnz
            or length * csr.rows > DIAGONAL_MAJOR_MAX_FILL * csr.nnz
            or length * (csr.rows + _DIAGONAL_MAJOR_PAD) >= 2**31  # int32 offsets into the copy
            or max(csr.rows, csr.cols) >= 2**31):  # int32 diagonal offsets (column - row) and columns
        return None
    offsets = (csr.indices[first:first + length] - p_row).to(torch.int32)
    rest_count = csr.rows - following
    # An empty list still needs a valid pointer of its type: its programs never run.
    rest_rows = torch.nonzero(follows == 0).flatten().to(torch.int32) if rest_count else offsets
    return _DiagonalLayout(offsets, length, rest_rows, rest_count)


def _split_diagonals(device: torch.device, row_blocks: int, length: int, diagonals_per_step: int) -> tuple[int, int]:
    """(splits, diagonals per split) for ``row_blocks`` blocks of rows."""
    # Off CUDA (the interpreter) a GPU of INTERPRETER_SMS SMs, so that small tests take the split path too.
    most = max(length // (diagonals_per_step * _MIN_STEPS_PER_SPLIT), 1)
    splits = min(max(cdiv(_PROGRAMS_PER_SM * sm_count(device), row_blocks), 1), most)
    per_split = cdiv(cdiv(length, splits), diagonals_per_step) * diagonals_per_step
    return cdiv(length, per_split), per_split


def _split_scratch(device: torch.device, splits: int, stride: int, row_blocks: int) -> tuple:
    """The split path's scratch, ``(partials, arrivals)``: float32 partial sums and an int32 count
    a block of rows (:func:`_add_up_splits`). One split needs neither: a valid pointer of each type
    stands in."""
    if splits == 1:
        return torch.empty(1, dtype=torch.float32, device=device), torch.empty(1, dtype=torch.int32, device=device)
    return (torch.empty(splits * stride, dtype=torch.float32, device=device),
            torch.zeros(row_blocks, dtype=torch.int32, device=device))


def _per_stream(make: Callable[[], tuple], device: torch.device) -> Callable[[], tuple]:
    """``get()``: ``(arguments, their addresses)`` that ``make()`` built for the current CUDA stream,
    on the first call there. Scratch shared by launches on two streams at once would mix their
    sums; a launch's own stream orders it after the last one on that stream. Under CUDA graph
    capture, built afresh for each capture: graphs may be captured on one stream (torch's own,
    unless given another) and replayed beside each other, or outlive the graph whose memory kept
    scratch came from."""
    on_cuda, made = device.type == "cuda", {}

    def get() -> tuple:
        if on_cuda and torch.cuda.is_current_stream_capturing():
            arguments = make()
            return arguments, addresses(arguments)
        stream = current_stream() if on_cuda else 0
        found = made.get(stream)
        if found is None:
            arguments = make()
            found = made[stream] = (arguments, addresses(arguments))
        return found

    return get


def _values_version(values: torch.Tensor) -> int | None:
    """The in-place version of ``values``; None for an inference tensor, which keeps none."""
    return None if values.is_inference() else values._version


def _values_refresher(values: torch.Tensor, make: Callable[[], None]) -> Callable[[], None]:
    """``refresh()`` for a copy that ``make()`` writes from ``values`` (and has just written): it
    writes it again when ``values`` changed in place since, on every call for inference tensors,
    whose changes cannot be seen. Kept per CUDA stream: a stream must not take a copy that another
    stream has queued but may not have run yet. A write queued while the stream is being captured
    is not counted as made: capture only records it, and a call before the graph's first replay
    must write the copy itself."""
    on_cuda = values.device.type == "cuda"
    made = {current_stream() if on_cuda else 0: _values_version(values)}

    def refresh() -> None:
        stream, version = current_stream() if on_cuda else 0, _values_version(values)
        if version is None or made.get(stream) != version:
            make()
            if not (on_cuda and torch.cuda.is_current_stream_capturing()):
                made[stream] = version

    return refresh


def _diagonal_copy(csr: CsrMatrix, follows: torch.Tensor, length: int) -> tuple[torch.Tensor, int, Callable]:
    """``(copy, row stride, refresh)``: the values of the rows that follow, stored by diagonals and
    made now; ``refresh()`` makes the copy again if the values changed in place since
    (:func:`_values_refresher`). No read-back."""
    indptr, values, rows = csr.indptr, csr.values, csr.rows
    stride = cdiv(rows, _DIAGONAL_MAJOR_PAD) * _DIAGONAL_MAJOR_PAD
    diagonals = torch.empty(length * stride, dtype=values.dtype, device=csr.device)
    args = (indptr, values, follows, diagonals, stride, length, rows, *_TO_DIAGONAL_MAJOR_TILE.values())
    launches = InputLaunches(_to_diagonal_major_launch, (csr.device, specialisation(*args[:7])), {"num_warps": 4})
    grid = stride // _TO_DIAGONAL_MAJOR_TILE["ROWS"]

    def make() -> None:
        launches.launch((), grid, args, addresses(args))  # addresses afresh: ``set_`` may move values

    make()
    return diagonals, stride, _values_refresher(values, make)


def _diagonal_major_variant(rows_per_program: int, diagonals_per_step: int, num_warps: int
                            ) -> tuple[Callable, Callable]:
    """Rows that follow the longest row's diagonals read from a copy of their values stored by
    diagonals (:func:`_diagonal_copy`), the other rows by vector CSR in the same launch."""
    shape = (rows_per_program, diagonals_per_step)  # the kernel's constexprs

    def plan(csr: CsrMatrix) -> Callable:
        if csr.nnz == 0:
            return _zero_call(csr)
        pattern_row, follows = _rows_following_pattern(csr)
        layout = _diagonal_major_layout(csr, pattern_row, follows)
        if layout is None:
            return _row_mapped_call(csr, _rows_launch, _vector_tile(cdiv(csr.nnz, csr.rows)), 4)
        check, out_check = dense_vector_check(csr), _out_check(csr)
        indptr, indices, values, rows, length = row_pointers(csr), csr.indices, csr.values, csr.rows, layout.length
        diagonals, stride, refresh = _diagonal_copy(csr, follows, length)
        row_blocks = cdiv(rows, rows_per_program)
        splits, per_split = _split_diagonals(csr.device, row_blocks, length, diagonals_per_step)
        rest_shape = _vector_tile(length)
        rest_programs = cdiv(layout.rest_count, rest_shape[0])
        head = (diagonals, stride, layout.offsets, length, per_split, splits, follows, layout.rest_rows,
                layout.rest_count, rest_programs)
        fixed_arguments = _per_stream(lambda: (*head, *_split_scratch(csr.device, splits, stride, row_blocks)),
                                      csr.device)
        launches = InputLaunches(_diagonal_major_launch,
                                 (csr.device, specialisation(*fixed_arguments()[0], indptr, indices, values, rows),
                                  *shape, *rest_shape), {"num_warps": num_warps})
        tail, grid = (rows, *shape, *rest_shape), rest_programs + row_blocks * splits
        values_aligned = _aligned(values)

        def call(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
            check(x)
            values_at = _values_at(values, values_aligned)  # refused before out or a scratch is written
            y = x.new_empty(rows) if out is None else out_check(out, x)
            refresh()
            fixed, fixed_at = fixed_arguments()
            vectors, x_at, x_stride, y_at, y_stride = vector_operands(x, y)
            launches.launch(vectors, grid, (*fixed, indptr, indices, values, x, x_stride, y, y_stride, *tail),
                            (*fixed_at, indptr.data_ptr(), indices.data_ptr(), values_at, x_at,
                             x_stride, y_at, y_stride, *tail))
            return y

        return call

    return _kernel_variant(("diagonal major", rows_per_program, diagonals_per_step, num_warps), plan)


def _bracket_rows(csr: CsrMatrix, sub: int) -> torch.Tensor:
    """Row of nonzero j * sub for every j, plus the row of the last nonzero at the end."""
    n_brackets = triton.cdiv(csr.nnz, sub)
    # Only the last entry passes nnz - 1. A clamp, not ``firsts[-1] = nnz - 1``: assigning a Python
    # number copies it from pageable host memory, which synchronised every first call on a matrix.
    firsts = (torch.arange(n_brackets + 1, device=csr.device, dtype=csr.indptr.dtype) * sub).clamp_(max=csr.nnz - 1)
    return torch.searchsorted(csr.indptr, firsts, right=True).to(csr.indptr.dtype) - 1


def _hot_columns(csr: CsrMatrix, hot: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(hot_columns, renumbered indices)``, both of the index dtype: the ``hot`` most read columns,
    most read first, become columns 0..hot-1 and every other column c becomes c + hot. No host
    synchronisation (a ``bincount`` would read its size back); 8-12 bytes a column meanwhile."""
    device, index_dtype = csr.device, csr.indices.dtype
    uses = torch.zeros(csr.cols, dtype=torch.int32, device=device)
    uses.index_add_(0, csr.indices, torch.ones(1, dtype=torch.int32, device=device).expand(csr.nnz))
    hot_columns = torch.topk(uses, hot).indices.to(index_dtype)
    slot = torch.arange(hot, hot + csr.cols, dtype=index_dtype, device=device)
    slot[hot_columns] = torch.arange(hot, dtype=index_dtype, device=device)
    return hot_columns, slot.index_select(0, csr.indices)


_GATHER_BLOCK = 1024


def _accumulator_zeroing(csr: CsrMatrix, hot_columns: torch.Tensor | None) -> Callable:
    """``prepare(x, acc, vectors, x_at, x_stride, acc_at, acc_stride) -> hot_x`` of a merge plan: the
    float32 accumulator zeroed and, given ``hot_columns``, their x values packed in the same launch
    (without, x itself is returned for the kernel's unused ``hot_x``)."""
    if hot_columns is None:
        def zero(x, acc, *_) -> torch.Tensor:
            acc.zero_()
            return x

        return zero
    hot = len(hot_columns)
    rows, columns_at, grid = csr.rows, hot_columns.data_ptr(), cdiv(max(csr.rows, hot), _GATHER_BLOCK)
    launches = InputLaunches(_zero_and_gather_launch, (csr.device, specialisation(rows, hot_columns, hot)),
                             {"num_warps": 4})

    def prepare(x, acc, vectors, x_at, x_stride, acc_at, acc_stride) -> torch.Tensor:
        hot_x = x.new_empty(hot)
        launches.launch(vectors, grid, (acc, acc_stride, rows, x, x_stride, hot_columns, hot_x, hot, _GATHER_BLOCK),
                        (acc_at, acc_stride, rows, x_at, x_stride, columns_at, hot_x.data_ptr(), hot, _GATHER_BLOCK))
        return hot_x

    return prepare


def _merge_variant(chunk: int, sub: int, num_warps: int, hot: int = 0) -> tuple[Callable, Callable]:
    """nnz-balanced: float32 y is accumulated in place, others via a float32 copy. With ``hot``,
    the ``hot`` most read columns are renumbered first, once per matrix, and each call packs their
    x values while it zeroes the accumulator (where the renumbered indices would pass the index
    dtype, the matrix runs unrenumbered)."""
    brackets_key = ("merge brackets", sub)  # the brackets depend on sub only: variants of one sub share them

    def plan(csr: CsrMatrix) -> Callable:
        if csr.nnz == 0:
            return _zero_call(csr)
        check, out_check = dense_vector_check(csr), _out_check(csr)
        indptr, indices, values, rows, nnz = csr.indptr, csr.indices, csr.values, csr.rows, csr.nnz
        hot_count = min(hot, csr.cols) if csr.cols + hot <= torch.iinfo(indices.dtype).max else 0
        hot_columns = None
        if hot_count:
            hot_columns, indices = csr.cached(("hot columns", hot_count), lambda m: _hot_columns(m, hot_count))
        prepare = _accumulator_zeroing(csr, hot_columns)
        sub_rows = csr.cached(brackets_key, lambda m: _bracket_rows(m, sub))
        sub_rows_at, grid, values_aligned = sub_rows.data_ptr(), cdiv(nnz, chunk), _aligned(values)
        launches = InputLaunches(_merge_launch, (csr.device, specialisation(indptr, indices, values, sub_rows, nnz),
                                                 chunk, sub, hot_count), {"num_warps": num_warps})

        def call(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
            check(x)
            values_at = _values_at(values, values_aligned)  # refused before out or a scratch is written
            y = x.new_empty(rows) if out is None else out_check(out, x)
            acc = y if y.dtype == torch.float32 else torch.empty(rows, dtype=torch.float32, device=y.device)
            vectors, x_at, x_stride, acc_at, acc_stride = vector_operands(x, acc)
            hot_x = prepare(x, acc, vectors, x_at, x_stride, acc_at, acc_stride)
            launches.launch(vectors, grid, (indptr, indices, values, x, x_stride, hot_x, acc, acc_stride, sub_rows,
                                            nnz, chunk, sub, hot_count),
                            (indptr.data_ptr(), indices.data_ptr(), values_at, x_at, x_stride,
                             hot_x.data_ptr(), acc_at, acc_stride, sub_rows_at, nnz, chunk, sub, hot_count))
            if acc is not y:
                y.copy_(acc)
            return y

        return call

    return _kernel_variant(("merge", chunk, sub, num_warps, hot), plan)


def _adaptive_bins(csr: CsrMatrix, p: dict) -> dict:
    """Bins rows by length (short, medium, large, long) and cuts long rows into pieces.

    Runs once per matrix and synchronises (bin sizes decide the grid); the result holds device
    tensors and the host ints every later launch needs."""
    indptr = csr.indptr
    length = indptr[1:] - indptr[:-1]
    edges = torch.tensor(p["bin_max"], dtype=length.dtype, device=length.device)
    bin_of = torch.bucketize(length, edges)  # 0 short, 1 medium, 2 large, 3 long
    order = torch.argsort(bin_of, stable=True).to(torch.int32)  # rows grouped by bin, ascending within
    counts = torch.bincount(bin_of, minlength=4).tolist()
    short, medium, large, long_rows = torch.split(order, counts)
    # an empty bin still needs a valid pointer argument: its programs never run
    bins = {name: rows if rows.numel() else indptr
            for name, rows in zip(("short", "medium", "large"), (short, medium, large))}
    bins.update(long=long_rows, counts=counts)

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
        bins.update(piece_start=piece_start, piece_end=torch.minimum(piece_start + piece, ends[owner]),
                    piece_ptr=piece_ptr, n_pieces=n_pieces)
    else:  # valid pointers for the pieces branch, which never runs
        bins.update(piece_start=indptr, piece_end=indptr, piece_ptr=None, n_pieces=0)

    progs = [triton.cdiv(counts[0], p["short"][0]), triton.cdiv(counts[1], p["medium"][0]),
             triton.cdiv(counts[2], p["large"][0]), triton.cdiv(bins["n_pieces"], p["pieces"][0])]
    bins["bases"] = np.cumsum(progs).tolist()  # program id where medium, large, pieces begin; grid
    return bins


def _adaptive_variant(p: dict) -> tuple[Callable, Callable]:
    """Binned rows; ``p`` holds its bin limits and tile shapes."""
    key = ("adaptive", repr(sorted(p.items())))
    shapes = (*p["short"], *p["medium"], *p["large"], *p["pieces"])  # the kernel's constexprs, in order

    def plan(csr: CsrMatrix) -> Callable:
        if csr.nnz == 0:
            return _zero_call(csr)
        check, out_check = dense_vector_check(csr), _out_check(csr)
        indptr, indices, values, rows = csr.indptr, csr.indices, csr.values, csr.rows
        bins = _adaptive_bins(csr, p)
        counts, n_pieces, long_rows, piece_ptr = bins["counts"], bins["n_pieces"], bins["long"], bins["piece_ptr"]
        grid = bins["bases"][3]
        # Every kernel argument but x, y and the partial sums is fixed for the matrix.
        bin_args = (bins["short"], counts[0], bins["medium"], counts[1], bins["large"], counts[2],
                    bins["piece_start"], bins["piece_end"])
        bin_at = addresses(bin_args)
        tail = (n_pieces, *bins["bases"][:3], *shapes)
        launches = InputLaunches(_adaptive_launch, (csr.device, specialisation(indptr, indices, values, *bin_args,
                                                                              n_pieces, *bins["bases"][:3]), key),
                                 {"num_warps": p["num_warps"]})
        no_partials = torch.empty(1, dtype=torch.float32, device=csr.device)
        values_aligned = _aligned(values)
        combine = InputLaunches(_combine_launch, (csr.device, specialisation(piece_ptr, long_rows)), {"num_warps": 4})

        def call(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
            check(x)
            values_at = _values_at(values, values_aligned)  # refused before out or a scratch is written
            y = x.new_empty(rows) if out is None else out_check(out, x)
            partials = torch.empty(n_pieces, dtype=torch.float32, device=y.device) if n_pieces else no_partials
            vectors, x_at, x_stride, y_at, y_stride = vector_operands(x, y)
            partials_at = partials.data_ptr()
            launches.launch((*vectors, partials_at % 16 == 0), grid,
                            (indptr, indices, values, x, x_stride, y, y_stride, *bin_args, partials, *tail),
                            (indptr.data_ptr(), indices.data_ptr(), values_at, x_at, x_stride,
                             y_at, y_stride, *bin_at, partials_at, *tail))
            if n_pieces:  # the long rows' sums from their pieces' partial sums
                vectors, partials_at, _, y_at, y_stride = vector_operands(partials, y)
                combine.launch(vectors, counts[3], (partials, piece_ptr, long_rows, y, y_stride, 128),
                               (partials_at, piece_ptr.data_ptr(), long_rows.data_ptr(), y_at, y_stride, 128))
            return y

        return call

    return _kernel_variant(key, plan)


_TORCH_CSR = ("torch_csr",)  # scratch key of the matrix as a torch sparse CSR tensor


def _torch_csr_run(csr: CsrMatrix, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """run() of the torch variant: ``torch.addmv`` on the matrix as a torch sparse CSR tensor."""
    check_dense_vector(csr, x)
    y = _output(csr, x, out)
    if csr.nnz == 0:
        return y.zero_()
    if csr.device.type == "cpu" and csr.dtype != torch.float32:
        # torch's CPU product (MKL) has no half types: float32 copies, made afresh on every call
        # (the interpreter's tests), so values written in place are never missed.
        return y.copy_(torch.mv(_torch_csr(csr, csr.values.float()), x.float()))
    return torch.addmv(y, torch_csr_tensor(csr), x, beta=0, out=y)  # beta 0: y is written, never read


def _torch_csr_bind(csr: CsrMatrix) -> Callable:
    """The torch variant's call: its run() on ``csr``, which checks x itself and follows moved
    arrays. Dispatch keeps it with the decision (which holds the matrix anyway), not in the
    matrix's cache, so it makes no cycle."""
    return partial(_torch_csr_run, csr)


def _cusparse_plan(csr: CsrMatrix) -> Callable:
    """The prepared cuSPARSE variant's call: cuSPARSE's CSR algorithm 1 with its partition made once
    (:class:`seer.cusparse.SpmvPlan`). Off CUDA, or where cuSPARSE cannot be found (with a warning),
    it is the torch variant's call: the same product, prepared on every call."""
    if csr.nnz == 0:
        return _zero_call(csr)
    if csr.device.type != "cuda" or not cusparse.available():
        if csr.device.type == "cuda":
            warn("seer could not find the cuSPARSE library torch loaded: cusparse_prepared runs "
                 "torch's sparse CSR product instead")
        # A twin on the same arrays: the call is kept in csr's cache and must not refer back to it.
        return partial(_torch_csr_run, CsrMatrix(csr.indptr, csr.indices, csr.values, csr.shape))
    check, out_check, rows = dense_vector_check(csr), _out_check(csr), csr.rows
    arrays = (csr.indptr, csr.indices, csr.values)
    plan = cusparse.SpmvPlan(*arrays, csr.shape)
    planned_at = [a.data_ptr() for a in arrays]

    def call(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        check(x)
        y = x.new_empty(rows) if out is None else out_check(out, x)
        at = [a.data_ptr() for a in arrays]
        if at != planned_at:  # ``set_`` moved an array: same structure, new place
            plan.repoint(*arrays)
            planned_at[:] = at
        # cuSPARSE's dense vectors have no stride: strided ones go through contiguous copies.
        target = y if y.stride(0) == 1 else torch.empty_like(y)
        plan(x if x.stride(0) == 1 else x.contiguous(), target)
        return y if target is y else y.copy_(target)

    return call


# Columns read evenly (log-normal rows, R-MATs of long rows) miss L1 on nearly every x value: the
# matrix cut into slices of 16k columns and stacked into one CSR matrix, once per matrix, so that
# while a slice's rows run their x values come from a window of 64 KB, which L1 keeps
# (benchmarks/results/spmv-column-slices-h100.md; NOTES SpMV 56). Each slice adds a row pointer and
# a partial sum a row: past half the matrix's bytes (rows too short for the slices) it does not pay.
SLICE_COLUMNS = 16384
SLICE_MAX_EXTRA = 0.5


def stacking_extra(csr: CsrMatrix, slices: int) -> float:
    """What stacking ``slices`` slices adds to a call (row pointers, partial sums written and read)
    over the bytes a call moves without it (fp32 values and int32 indices, row pointers, x, y)."""
    return (slices - 1) * csr.rows * 12 / (csr.nnz * 8 + csr.rows * 8 + csr.cols * 4)


def stacks(csr: CsrMatrix, slices: int) -> bool:
    """Whether ``cusparse_slices_16k`` stacks the matrix cut into ``slices`` slices (else it runs as
    ``cusparse_prepared``): see :func:`_column_slices_plan`."""
    return (slices >= 2 and 0 < csr.nnz < 2**31 - 1 and csr.dtype == torch.float32
            and stacking_extra(csr, slices) <= SLICE_MAX_EXTRA)


def _stacked_slices(csr: CsrMatrix, slices: int, width: int = SLICE_COLUMNS) -> tuple[CsrMatrix, Callable[[], None]]:
    """``(stack, restack)``: the matrix's ``slices`` slices of ``width`` columns stacked (slice s's
    part of row r is row s * rows + r, a row's entries in their order), and a function that gathers
    the values into the stack again if they changed in place since (:func:`_values_refresher`).
    No host synchronisation. Kept beside the stack's own arrays: where each of its values comes
    from (4 bytes a nonzero); meanwhile 24-32 more a nonzero (keys, their sort)."""
    rows, indices, values = csr.rows, csr.indices, csr.values
    key_dtype = torch.int32 if slices * rows < 2**31 else torch.int64
    # Made outside inference mode even under it: the stack is written again by later calls.
    with torch.inference_mode(False):
        key = torch.repeat_interleave((csr.indptr[1:] - csr.indptr[:-1]).to(key_dtype), output_size=csr.nnz)
        key += torch.div(indices, width, rounding_mode="floor").to(key_dtype) * rows  # now s * rows + r
        sorted_keys, order = torch.sort(key, stable=True)
        del key
        indptr = torch.searchsorted(sorted_keys, torch.arange(slices * rows + 1, device=csr.device, dtype=key_dtype),
                                    out_int32=csr.indptr.dtype == torch.int32)
        del sorted_keys
        order = order.to(torch.int32)  # the caller keeps nnz under 2**31 - 1
        stack = CsrMatrix(indptr, indices[order], values[order], (slices * rows, csr.cols))

    def make() -> None:
        torch.index_select(values, 0, order, out=stack.values)

    return stack, _values_refresher(values, make)


def _column_slices_plan(csr: CsrMatrix) -> Callable:
    """Prepared cuSPARSE on the matrix's stacked column slices (:func:`_stacked_slices`), the slices'
    partial results summed into y. As ``cusparse_prepared`` where stacking adds more than
    :data:`SLICE_MAX_EXTRA` of the matrix's bytes, on matrices of one slice and on values other
    than float32 (their partial sums would round before they are added up), and on 2**31 - 1
    nonzeros or more (torch sorts at most that many on CUDA)."""
    slices = cdiv(csr.cols, SLICE_COLUMNS)
    if not stacks(csr, slices):
        return _cusparse_plan(csr)
    stack, restack = _stacked_slices(csr, slices)
    product = _cusparse_plan(stack)
    check, out_check, rows = dense_vector_check(csr), _out_check(csr), csr.rows

    def call(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        check(x)
        y = x.new_empty(rows) if out is None else out_check(out, x)
        restack()
        return torch.sum(product(x).view(slices, rows), dim=0, out=y)

    return call


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


def _register(name: str, run_and_bind: tuple[Callable, Callable], params: dict, doc: str) -> None:
    run, bind = run_and_bind
    VARIANTS[name] = Variant(name, _examining(run), params, doc, _examining(bind))


def _examining(method: Callable) -> Callable:
    """A variant's ``run`` or ``bind``, which takes :func:`problem`'s matrix, taking any other form
    too through :func:`problem`: a ``CsrMatrix`` made by hand, never examined, would otherwise reach
    the kernels with strided or out-of-range arrays, read as if contiguous and in range."""

    @wraps(method)
    def examined(matrix, *args, **kwargs):
        if not (isinstance(matrix, CsrMatrix) and matrix.checked is not None):
            matrix = problem(matrix)
        return method(matrix, *args, **kwargs)

    return examined


VARIANTS: dict[str, Variant] = {}

_register("scalar_r128", _rows_variant(128, 1, 4), {"kind": "scalar", "rows": 128, "num_warps": 4},
          "one lane per row, 128 rows per program; for rows of a few nonzeros")
for _g, _rows in ((4, 128), (8, 64), (16, 32), (32, 16), (64, 8), (256, 4)):
    _register(f"vector_g{_g}", _rows_variant(_rows, _g, 4),
              {"kind": "vector", "group": _g, "rows": _rows, "num_warps": 4},
              f"{_g} lanes per row, {_rows} rows per program")
# Stencils and full bands: nearly every row's columns are the row plus the same offsets
# (benchmarks/results/spmv-patterns-h200.md: 1.24-1.52x over every shipped variant on those of
# 10M+ nonzeros with patterns of 3-27; 0.82-0.95x where few rows follow, as on half-filled bands).
_register("diagonal_r128", _diagonal_variant(128, 4), {"kind": "diagonal", "rows": 128, "pack_from": PACK_FROM,
                                                       "num_warps": 4},
          "one lane per row, 128 rows per program; rows whose columns are the row plus the longest row's "
          "offsets (a stencil's or a band's diagonals) read no column indices")
# The same rows from a copy of their values stored by diagonals, made once per matrix: a block of
# rows reads each diagonal as one aligned run (benchmarks/results/spmv-diagonal-major-h200.md:
# 1.43x over every other variant on the 33 bands and stencils of 10M+ nonzeros where the copy is
# made; 512 rows on 4 warps, four rows a lane, is the tile whose loads are 16 bytes wide).
_register("diagonal_major_r512", _diagonal_major_variant(512, 2, 4),
          {"kind": "diagonal_major", "rows": 512, "diagonals": 2, "num_warps": 4,
           "min_following": DIAGONAL_MAJOR_MIN_FOLLOWING, "max_fill": DIAGONAL_MAJOR_MAX_FILL},
          "rows that follow the longest row's diagonals read from a copy of their values stored by diagonals "
          "(made once per matrix, at most twice the values); 512 rows and 2 diagonals a step; runs as "
          "vector CSR by the mean row length where fewer than half of the nonzeros follow")
# Smaller chunks use fewer registers (ptxas, sm_90a: 32 and 44 per thread for 256 and 512
# nonzeros on 4 warps, 70 for 1024), so more programs share an SM. 1024 (fastest on none of
# either GPU's 437-453 inputs at any call count) and 4096 on 8 warps won nowhere and were dropped
# (benchmarks/NOTES.md, SpMV 10 and 41).
for _chunk, _warps in ((256, 4), (512, 4)):
    _register(f"merge_c{_chunk}", _merge_variant(_chunk, 32, _warps),
              {"kind": "merge", "chunk": _chunk, "bracket": 32, "num_warps": _warps},
              f"{_chunk} nonzeros per program whatever the rows; segmented scan, atomics at chunk edges")
# Skewed column use (R-MAT): the 64k most read columns renumbered first, once per matrix, their x
# values packed eight to a sector on every call (benchmarks/results/spmv-hot-select-h100.md: 1.13x
# over merge_c512 on R-MATs of 10M+ nonzeros, 0.98x where columns are read evenly; NOTES SpMV 55).
_HOT = 65536
_register("merge_c512_hot64k", _merge_variant(512, 32, 4, _HOT),
          {"kind": "merge", "chunk": 512, "bracket": 32, "num_warps": 4, "hot": _HOT},
          "merge_c512 with the 64k most read columns renumbered first (once per matrix: +4 or 8 bytes a "
          "nonzero); each call packs their x values in the launch that zeroes the accumulator")
# Narrow groups for short rows, wider ones as rows grow; pieces bound any program's work.
_ADAPTIVE = {"bin_max": [8, 128, 4096], "short": [128, 2], "medium": [32, 16], "large": [4, 128],
             "pieces": [4, 256], "piece": 4096, "num_warps": 4}
_register("adaptive", _adaptive_variant(_ADAPTIVE), {"kind": "adaptive", **_ADAPTIVE},
          "rows binned by length (<=8, <=128, <=4096 nonzeros) with a mapping per bin; "
          "longer rows cut into 4096-nonzero pieces over many programs")
_register("torch_csr", (_torch_csr_run, _torch_csr_bind), {"kind": "torch"},
          "torch sparse CSR @ x: cuSPARSE's SpMV on CUDA, torch's own kernel on the CPU")
_register("cusparse_prepared", _kernel_variant(("cusparse", "csr_alg1"), _cusparse_plan),
          {"kind": "cusparse", "algorithm": "csr_alg1", "preprocess": True},
          "cuSPARSE's CSR SpMV called directly, its partition made once per matrix "
          "(cusparseSpMV_preprocess); torch's product off CUDA")
_register("offsets_i16", _offsets_variant(4), {"kind": "offsets", "bits": 16, "num_warps": 4},
          "vector CSR by the mean row length reading each column as a 16-bit offset from its row (a copy of "
          "the indices made once per matrix: 2 bytes a nonzero); as cusparse_prepared where a column lies "
          "32k or more from its row")
_register("cusparse_slices_16k", _kernel_variant(("cusparse slices", SLICE_COLUMNS), _column_slices_plan),
          {"kind": "cusparse", "algorithm": "csr_alg1", "preprocess": True, "slice_columns": SLICE_COLUMNS,
           "max_extra": SLICE_MAX_EXTRA},
          "prepared cuSPARSE on the matrix cut into slices of 16k columns stacked into one CSR matrix (made "
          "once per matrix: +12 bytes a nonzero and 4 a row and slice), the slices' partial results summed "
          "(two launches a call); as cusparse_prepared on one slice, where rows are too short for the "
          "slices, on values other than float32 and past 2**31 - 2 nonzeros")


# ---------------------------------------------------------------- dispatch contract
def split(inputs):
    """``(A, x)`` -> ``(A, (x,))``: the choice depends on A only."""
    if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
        raise_input("spmv takes inputs (A, x): a CSR matrix and a dense vector")
    matrix = inputs[0]
    # Arrays in a list are held as a tuple: the key names them by id, and a cached decision holding the
    # caller's list would let an array put in its place free one whose id a new array then takes.
    return (tuple(matrix) if type(matrix) is list else matrix), (inputs[1],)


def cache_key(matrix):
    """``(identity, state)``: the arrays the decision was made from, and their in-place versions
    and whether the values need a gradient now (a cached call checks no more: a matrix whose
    values came to require grad, or one first called under ``torch.no_grad()``, is examined again,
    and refused while autograd is on)."""
    try:
        try:
            return _key(matrix, tracked=True)
        except RuntimeError:  # an inference tensor among the arrays keeps no version counter
            if not _inference_arrays(matrix):  # a nested one has none to read either: problem() names it
                return None
            _warn_once("inference tensors", "the CSR arrays are inference tensors, which keep no version counter: seer "
                       "cannot see their index arrays written in place (possible inside torch.inference_mode()); call "
                       "seer.clear_cache() after such a write")
            return _key(matrix, tracked=False)
    except TypeError:  # a shape that is no sequence: examined, and refused with what is wrong
        return None


def _inference_arrays(matrix) -> bool:
    """Whether any of ``matrix``'s arrays is an inference tensor (one that keeps no version counter)."""
    if isinstance(matrix, CsrMatrix):
        arrays = (matrix.indptr, matrix.indices, matrix.values)
    else:
        arrays = (matrix,) if isinstance(matrix, torch.Tensor) else matrix[:3]
    return any(isinstance(t, torch.Tensor) and t.is_inference() for t in arrays)


def _key(matrix, tracked: bool):
    """:func:`cache_key`; ``tracked=False`` for inference tensors: identity alone, every version
    read as None (their index arrays can be written in place only inside
    ``torch.inference_mode()``, and such writes go unseen: README)."""
    if isinstance(matrix, torch.Tensor) and matrix.layout == torch.sparse_csr:
        # Its member tensors share the tensor's version counter (tests/test_dispatch.py checks):
        # one read instead of two member aliases made per call.
        return (id(matrix),), (matrix._version if tracked else None, matrix.requires_grad and torch.is_grad_enabled())
    if isinstance(matrix, CsrMatrix):
        indptr, indices, values = matrix.indptr, matrix.indices, matrix.values
        # Contiguity too: values moved by set_ onto strided memory must reach _rechecked's refusal.
        return (id(matrix),), (indptr._version if tracked else None, indices._version if tracked else None,
                               values.shape, values.data_ptr(), values.dtype, values.is_contiguous(),
                               values.requires_grad and torch.is_grad_enabled())
    if isinstance(matrix, (tuple, list)) and len(matrix) == 4 and all(_dense_tensor(t) for t in matrix[:3]):
        indptr, indices, values, shape = matrix
        if isinstance(values, torch.Tensor) and not values.is_contiguous():
            # The kernels read a contiguous copy, which values written in place (a cache hit for
            # separate arrays) would leave stale.
            _warn_once("strided values", "the CSR values are not contiguous: seer multiplies a contiguous copy, so "
                       "it examines the matrix afresh on every call instead of caching its decision; pass "
                       "values.contiguous()")
            return None
        if not (type(shape) is tuple and len(shape) == 2 and type(shape[0]) is int and type(shape[1]) is int):
            shape = sparse.csr_shape(shape)  # by value: a tensor's hash is its id, a list has none
        # Values written in place are served at a hit; their length is keyed (``resize_``), and their
        # address: module.half() or .to() converts a parameter through .data, which moves no version,
        # and a plan compiled for the old dtype (or holding a copy of the old values) would read it.
        return ((id(indptr), id(indices), id(values), shape),
                (indptr._version if tracked else None, indices._version if tracked else None, values.shape,
                 values.data_ptr(), values.requires_grad and torch.is_grad_enabled()))
    if sparse.is_scipy_sparse(matrix):
        _warn_once("scipy", "a scipy sparse matrix is copied to a torch CSR matrix on every seer.dispatch call, so "
                   "its decision is not cached either: convert it once and pass that, e.g. B = A.tocsr().astype("
                   "numpy.float32); torch.sparse_csr_tensor(B.indptr, B.indices, B.data, B.shape).to('cuda')")
    return None  # uncacheable (scipy input, or members that are no dense tensors): examined on every call


def _dense_tensor(t) -> bool:
    return isinstance(t, torch.Tensor) and t.layout is STRIDED


# The kinds of uncacheable input warned of: once a process each, since a serving loop would pay
# the warnings machinery on every call.
_warned: set = set()


def _warn_once(kind: str, message: str) -> None:
    warn_once(_warned, message, kind)


def problem(matrix) -> CsrMatrix:
    return _rechecked(matrix) if isinstance(matrix, CsrMatrix) else as_csr(matrix)


def _rechecked(matrix: CsrMatrix) -> CsrMatrix:
    """A ``CsrMatrix`` made earlier (or by hand), checked again where it may have changed since:
    its arrays' metadata as when it was made (values resized, or converted through ``.data`` to
    another dtype or device), its plans dropped if its values moved, and validated anew if it was
    checked and its index arrays were written in place, or never checked (one made unchecked on
    purpose stays so)."""
    if matrix.checked is None:  # made by hand, never examined: examined now, strided arrays copied
        return as_csr(matrix)
    strided = [name for name in ("indptr", "indices", "values") if not getattr(matrix, name).is_contiguous()]
    if strided:  # moved since (set_ with strides): the kernels and plans read each array as contiguous
        raise InputError(f"CSR {' and '.join(strided)} moved onto non-contiguous memory since the matrix was made; "
                         "make it anew with seer.sparse.as_csr, which takes contiguous copies")
    sparse.check_metadata(matrix)
    matrix.forget_plans_of_moved_values()  # before deciding: a plan is looked up through cached(), which drops them too
    if not sparse.still_valid(matrix):
        sparse.check_structure(matrix)
    return matrix


# A first call on a matrix of at most this many rows and nonzeros validates it and computes y in
# one launch (_validating_product_kernel): there the host work and the launches are most of the
# call. Its programs are capped as the pass's are (seer.sparse.max_programs: each adds its counts
# into the same sums), so on more rows each program takes more blocks in turn; past these bounds
# the pass followed by the chosen variant is faster on the device
# (benchmarks/results/spmv-first-call-*.md; NOTES SpMV 30, 37 and 54).
VALIDATING_PRODUCT_MAX_ROWS = 4096
VALIDATING_PRODUCT_MAX_NNZ = 1 << 15
VALIDATING_TILE = {"rows": 4, "block": 128, "num_warps": 4}
_validating_launch = LaunchCache(_validating_product_kernel)


def within_validating_bounds(rows: int, nnz: int) -> bool:
    """Whether a first call on a matrix of ``rows`` rows and ``nnz`` nonzeros validates it
    through the validating product (on a GPU, or under the interpreter)."""
    return rows <= VALIDATING_PRODUCT_MAX_ROWS and nnz <= VALIDATING_PRODUCT_MAX_NNZ


def first_call(matrix, operands, out: torch.Tensor | None = None) -> tuple[CsrMatrix, torch.Tensor | None]:
    """The first call on ``matrix``: its validated :class:`CsrMatrix` and, for a small matrix,
    y = A x computed by the validating pass itself (else None: the chosen variant computes it).
    A ``CsrMatrix`` is returned as it is, with None, once :func:`_rechecked` and x checked. A matrix the pass
    refuses leaves ``out`` as it was: the small one's product goes to a new y, copied into ``out``
    once the matrix is accepted."""
    if isinstance(matrix, CsrMatrix):
        csr = _rechecked(matrix)
        check_dense_vector(csr, operands[0])  # before a variant plans its work on the matrix
        return csr, None
    csr = as_csr(matrix, check=False)
    (x,) = operands
    check_dense_vector(csr, x)  # first: a wrong x is named as such, not by where the pass cannot run
    if not (within_validating_bounds(csr.rows, csr.nnz) and _runs_here(csr.device)):
        sparse.check_structure(csr)
        return csr, None  # out is checked by the variant's call (it moves out's version counter)
    if out is not None:
        _out_check(csr)(out, x)
    y = x.new_empty(csr.rows)
    sparse.accept_structure(csr, sparse.read_totals(_launch_validating_product(csr, x, y), csr.device))
    return csr, y if out is None else out.copy_(y)


def _runs_here(device: torch.device) -> bool:
    return device.type == "cuda" or INTERPRETING


def _launch_validating_product(csr: CsrMatrix, x: torch.Tensor, y: torch.Tensor, tile: dict = VALIDATING_TILE,
                               stats: bool = True) -> torch.Tensor:
    """Launches :func:`_validating_product_kernel` into ``y``; returns where its totals will be
    (this thread's ``FOUND_COLUMNS`` totals buffer, :func:`seer.sparse.totals_buffers`: read it
    with :func:`seer.sparse.read_totals`). ``tile``: rows per block, nonzeros per step and warps
    (benchmarks/spmv_first_call.py); ``stats=False`` leaves the row statistics out (their cost,
    benchmarks/spmv_validation.py)."""
    blocks = max(cdiv(csr.rows, tile["rows"]), 1)
    counters, totals = sparse.totals_buffers(csr.device)
    programs, narrow = min(blocks, sparse.max_programs(csr.device)), csr.nnz < sparse.NARROW_BELOW
    vectors, x_at, x_stride, y_at, y_stride = vector_operands(x, y)
    args = (csr.indptr, csr.indices, csr.values, x, x_stride, y, y_stride, csr.rows, csr.nnz, csr.cols, totals,
            counters, programs, blocks, stats, narrow, sparse.LONG_ROW, tile["rows"], tile["block"])
    key = (csr.device, specialisation(*args[:3], *args[7:14]), vectors, stats, narrow, *tile.values())
    _validating_launch.launch(key, (programs,), args, addresses(args), num_warps=tile["num_warps"])
    return totals


def check_operands(csr: CsrMatrix, operands) -> None:
    check_dense_vector(csr, operands[0])


def reference(csr: CsrMatrix, x: torch.Tensor) -> torch.Tensor:
    """y = A x in float64 on the CPU through scipy."""
    return torch.from_numpy(csr.to_scipy() @ x.detach().double().cpu().numpy())


def examples() -> list[tuple]:
    """Small inputs ``(A, x)`` as ``seer.dispatch("spmv", ...)`` takes them, for the registry's
    contract test (tests/test_contract.py): float32 torch sparse CSR matrices. First a 100 x 100
    band of 6 diagonals, its rows following the diagonals of its longest but at the edges and in
    one row short of a nonzero, so that the diagonal variants take their own paths
    (``diagonal_major_r512`` a copy of the values stored by diagonals, which must follow the values
    written in place: the contract test writes the first example's); then one tall and one wide,
    with log-normal row lengths, an empty row and a full one (the variants map short and long rows
    differently). Values and x of either sign and away from 0, so that a term left out or a row
    left unwritten cannot match the reference by chance. Seeded: the same inputs every call."""
    def csr_tensor(rows_columns: list[torch.Tensor], cols: int, gen: torch.Generator) -> torch.Tensor:
        lengths = torch.tensor([len(columns) for columns in rows_columns])
        indices = torch.cat(rows_columns)
        indptr = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
        values = example_values(len(indices), generator=gen)
        return _torch_csr(CsrMatrix(indptr, indices, values, (len(rows_columns), cols)), values)

    gen = torch.Generator().manual_seed(2)
    band, offsets, short = 100, torch.tensor([-3, -1, 0, 1, 2, 7]), 33
    rows_columns = [(r + offsets)[(r + offsets >= 0) & (r + offsets < band) & ((r != short) | (offsets != 2))]
                    for r in range(band)]
    made = [(csr_tensor(rows_columns, band, gen), example_values(band, generator=gen))]
    for seed, (rows, cols, typical) in enumerate(((128, 96, 2), (16, 300, 6))):
        gen = torch.Generator().manual_seed(seed)
        lengths = (typical * torch.randn(rows, generator=gen).exp()).long().clamp(max=cols)
        lengths[0], lengths[rows // 2] = 0, cols
        rows_columns = [torch.randperm(cols, generator=gen)[:n].sort().values for n in lengths.tolist()]
        made.append((csr_tensor(rows_columns, cols, gen), example_values(cols, generator=gen)))
    return made


def raise_input(message: str):
    from seer.errors import InputError

    raise InputError(message)
