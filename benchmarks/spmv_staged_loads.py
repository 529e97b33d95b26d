"""16-byte loads pipelined through shared memory in the row-mapped SpMV kernel, on the large regular
matrices.

    python benchmarks/spmv_staged_loads.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: Nsight Compute has the row-mapped kernel latency-bound on the H200's bands (NOTES SpMV 24:
52% of DRAM, warps waiting on loads), and every way tried of putting more loads in flight through
registers gained a few points at most: a bigger tile costs occupancy (item 7), fewer registers
spill (item 24). Triton's software pipeline keeps loads in flight in shared memory instead, but
on the shipped kernel it copied every element with a 4-byte asynchronous copy and lost badly
(item 8). With the row loads aligned and masked by groups of four (``spmv_vector_loads.py``), the
sm_90 PTX shows the pipelined index and value loads as 16-byte ``cp.async.cg`` copies (the x
gathers stay 4-byte). Candidates ``aligned_w<W>_r<ROWS>_s<S>``: that kernel with its row loop
pipelined over S stages, beside the shipped row-mapped variants and cuSPARSE, on each large banded
and stencil matrix (10M+ nnz); every result checked against float64, timed in interleaved rounds
(least of the do_bench medians, L2 flushed). Writes ``spmv-staged-loads-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import sys

from large_set import checked_times
from spmv_vector_loads import (CANDIDATES, aligned_spmv, describe_best, each_candidate, large_regular,
                               method, overall, per_matrix, shipped_and_candidates)

STAGES = (1, 2, 3, 4)  # 1: the unpipelined loop of spmv_vector_loads.py, as a control


def configurations() -> dict[str, tuple[int, int, int]]:
    """Candidate name -> (elements of a row per step, rows per program, stages)."""
    return {f"aligned_w{w}_r{r}_s{s}": (w, r, s) for w, r in CANDIDATES for s in STAGES}


def timed_calls(csr, x) -> dict:
    return shipped_and_candidates(csr, x, configurations(), aligned_spmv)


def measure(case, loaded) -> dict:
    return checked_times(case, loaded, timed_calls)


def describe(row: dict) -> str:
    return describe_best(row, configurations(), "staged")


def markdown(result: dict) -> str:
    rows, names = result["matrices"], list(configurations())
    lines = [*method(result, "16-byte loads pipelined through shared memory"), "",
             *per_matrix(rows, names, "staged", result["copy_gbps"])]
    if rows:
        lines += ["", overall(rows, names, result["copy_gbps"]), "", *each_candidate(rows, names)]
    return "\n".join(lines) + "\n"


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-staged-loads", large_regular, measure, describe, markdown, budget_s=300)


if __name__ == "__main__":
    sys.exit(main())
