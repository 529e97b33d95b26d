"""SpMV features: what a tree may ask about a CSR matrix before choosing a kernel.

Known features come from metadata in O(1) and never touch the device. Gathered features are
row-length statistics from the sums of one pass over ``indptr`` (:mod:`seer.sparse`): the
validation pass of a checked matrix measures them anyway (:func:`gathered_if_free`); a matrix
that was not checked pays a pass and a read-back of its own (:func:`gathered`).
"""
from __future__ import annotations

import math

from seer.features_base import Feature
from seer.sparse import LONG_ROW, CsrMatrix, RowLengthSums, measure_rows, shift_samples, validated_rows

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
    Feature("long_nnz_frac", f"nnz fraction in rows longer than {LONG_ROW}"),  # not "> 256 > 0.04"
    # Stencils and bands, where every row repeats one pattern of column offsets, apart from rows
    # that are merely of equal length (added for the diagonal variant: benchmarks/NOTES.md, SpMV 32).
    Feature("shifted_row_frac", "share of sampled rows shifting the previous row by one column"),
)


# Below this many nonzeros a call's host time, not its kernel, decides which variant is fastest
# (``seer profile`` records the host call time there).
HOST_BOUND_BELOW = 1_000_000


def redecides(known_features: dict) -> bool:
    """Whether dispatch decides again as calls on this matrix add up (see :mod:`seer.dispatch`):
    not where the host decides a call's time, since binding another variant costs the host more
    than its kernel could save."""
    return known_features["nnz"] >= HOST_BOUND_BELOW


def known(csr: CsrMatrix) -> dict[str, float]:
    rows, cols, nnz = csr.rows, csr.cols, csr.nnz
    return {"rows": rows, "cols": cols, "nnz": nnz, "mean_row": nnz / rows if rows else 0.0}


def gathered(csr: CsrMatrix) -> dict[str, float]:
    """Row-length statistics from a fresh pass over ``indptr`` (one launch and one read-back)."""
    return _statistics(csr, measure_rows(csr))


def gathered_if_free(csr: CsrMatrix) -> dict[str, float] | None:
    """The same statistics when the validation pass already measured them, else None."""
    sums = validated_rows(csr)
    return None if sums is None else _statistics(csr, sums)


def hand_rule(features: dict) -> str:
    """The rule a person would write: tiny matrices by rows, big ones balanced by nnz."""
    return "scalar_r128" if features["nnz"] < 10_000 else "merge_c512"


def _statistics(csr: CsrMatrix, sums: RowLengthSums) -> dict[str, float]:
    rows, nnz = csr.rows, csr.nnz
    if rows == 0:
        return {f.name: 0 if f.integer else 0.0 for f in GATHERED}
    mean = nnz / rows
    variance = max(sums.sum_sq / rows - mean * mean, 0.0)
    std = math.sqrt(variance)
    return {
        "row_std": std,
        "row_cv": std / mean if mean else 0.0,
        "row_max": int(sums.longest),
        "empty_frac": sums.empty / rows,
        "skew": sums.longest / mean if mean else 0.0,
        "long_nnz_frac": sums.long_nnz / nnz if nnz else 0.0,
        "shifted_row_frac": sums.shifted_rows / samples if (samples := shift_samples(rows)) else 0.0,
    }
