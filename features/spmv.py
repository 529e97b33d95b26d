"""SpMV features: what a tree may ask about a CSR matrix before choosing a kernel.

Known features come from metadata in O(1) and never touch the device. Gathered features
take one pass over ``indptr`` (a Triton reduction on the GPU, numpy on the CPU) and one
read-back of four integers; :func:`gathered` returns them with the time it took.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import triton
import triton.language as tl

from seer.features_base import Feature
from seer.sparse import CsrMatrix

# Rows longer than this cannot be served well by one warp-sized group of lanes.
LONG_ROW = 256

KNOWN = (
    Feature("rows", "rows", integer=True),
    Feature("cols", "columns", integer=True),
    Feature("nnz", "nnz", integer=True),
    Feature("mean_row", "mean row length", unit="nnz/row"),
)
GATHERED = (
    Feature("row_std", "row-length std", unit="nnz"),
    Feature("row_cv", "row-length CV"),
    Feature("row_max", "longest row", unit="nnz", integer=True),
    Feature("empty_frac", "empty-row fraction"),
    Feature("skew", "max/mean row length"),
    Feature("long_nnz_frac", f"nnz fraction in rows > {LONG_ROW}"),
)


def known(csr: CsrMatrix) -> dict[str, float]:
    rows, cols, nnz = csr.rows, csr.cols, csr.nnz
    return {"rows": rows, "cols": cols, "nnz": nnz, "mean_row": nnz / rows if rows else 0.0}


def gathered(csr: CsrMatrix) -> dict[str, float]:
    """Row-length statistics from one pass over ``indptr``."""
    sum_sq, row_max, empty, long_nnz = _row_length_sums(csr.indptr, csr.rows)
    return _statistics(csr.rows, csr.nnz, sum_sq, row_max, empty, long_nnz)


def hand_rule(features: dict) -> str:
    """The rule a person would write: tiny matrices by rows, big ones balanced by nnz."""
    return "scalar_r128" if features["nnz"] < 10_000 else "merge_c1024"


def _statistics(rows, nnz, sum_sq, row_max, empty, long_nnz) -> dict[str, float]:
    if rows == 0:
        return {"row_std": 0.0, "row_cv": 0.0, "row_max": 0, "empty_frac": 0.0, "skew": 0.0, "long_nnz_frac": 0.0}
    mean = nnz / rows
    variance = max(sum_sq / rows - mean * mean, 0.0)
    std = math.sqrt(variance)
    return {
        "row_std": std,
        "row_cv": std / mean if mean else 0.0,
        "row_max": int(row_max),
        "empty_frac": empty / rows,
        "skew": row_max / mean if mean else 0.0,
        "long_nnz_frac": long_nnz / nnz if nnz else 0.0,
    }


def _row_length_sums(indptr: torch.Tensor, rows: int) -> tuple[int, int, int, int]:
    """(sum of squared row lengths, longest row, empty rows, nnz in long rows)."""
    if rows == 0:
        return 0, 0, 0, 0
    if indptr.device.type == "cpu":
        return _row_length_sums_numpy(indptr)
    return _row_length_sums_triton(indptr, rows)


def _row_length_sums_numpy(indptr: torch.Tensor) -> tuple[int, int, int, int]:
    lengths = np.diff(indptr.numpy()).astype(np.int64)
    return (
        int(lengths @ lengths),
        int(lengths.max()),
        int((lengths == 0).sum()),
        int(lengths[lengths > LONG_ROW].sum()),
    )


def _row_length_sums_triton(indptr: torch.Tensor, rows: int) -> tuple[int, int, int, int]:
    sums = torch.zeros(4, dtype=torch.int64, device=indptr.device)
    block = 1024
    _row_length_sums_kernel[(triton.cdiv(rows, block),)](indptr, sums, rows, LONG_ROW=LONG_ROW, BLOCK=block)
    return tuple(sums.tolist())


@triton.jit
def _row_length_sums_kernel(indptr_ptr, sums_ptr, rows, LONG_ROW: tl.constexpr, BLOCK: tl.constexpr):
    # Integer sums are exact: sum of squares <= nnz * longest row, far below 2**63.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < rows
    start = tl.load(indptr_ptr + offs, mask=mask, other=0).to(tl.int64)
    end = tl.load(indptr_ptr + offs + 1, mask=mask, other=0).to(tl.int64)
    length = end - start
    tl.atomic_add(sums_ptr + 0, tl.sum(length * length, axis=0))
    tl.atomic_max(sums_ptr + 1, tl.max(length, axis=0))
    tl.atomic_add(sums_ptr + 2, tl.sum((length == 0) & mask, axis=0).to(tl.int64))
    tl.atomic_add(sums_ptr + 3, tl.sum(tl.where(length > LONG_ROW, length, 0), axis=0))
