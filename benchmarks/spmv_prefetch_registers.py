"""Prefetching the next step and capping registers together, in the row-mapped SpMV kernel.

    python benchmarks/spmv_prefetch_registers.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: on the H200's large bands and stencils the vector variants are latency-bound (NOTES SpMV 24:
60% of their warps' cycles stalled on loads, 59% achieved occupancy at 48 registers). Two remedies
were each worth a few points alone: loading step i + 1's indices and values before step i's x
gather (``spmv_tiles.py``'s ``prefetch_g<G>``, NOTES SpMV 8: +3 points in median) and a cap of 40
registers per thread, more warps resident (``spmv_row_occupancy.py``, NOTES SpMV 24: +3-4%). The
prefetch holds a second step's loads in registers, which the cap takes away, so the two may add
up or cancel. Candidates, each shipped vector tile unchanged otherwise: prefetching
(``<tile>_prefetch``), prefetching capped at 40 registers (``<tile>_prefetch_r40``) and the cap
alone (``<tile>_r40``, item 24's control). Each large banded and stencil matrix (10M+ nnz) gets
them beside the shipped row-mapped variants and cuSPARSE, every result checked against float64,
timed in interleaved rounds (least of the do_bench medians, L2 flushed). Writes
``spmv-prefetch-registers-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import sys

import torch
from large_set import checked_times
from spmv_row_occupancy import TILES, over_own_tile, rows_spmv
from spmv_tiles import _prefetch_rows_kernel
from spmv_vector_loads import describe_best, large_regular, method, overall, per_matrix, shipped_and_candidates

CAP = 40  # registers per thread: item 24's best cap (32 spilled)


def configurations() -> dict[str, tuple[int, int, int | None, bool]]:
    """Candidate name -> (lanes per row, rows per program, register cap, prefetching)."""
    found = {}
    for name, (group, rows) in TILES.items():
        found[f"{name}_prefetch"] = (group, rows, None, True)
        found[f"{name}_prefetch_r{CAP}"] = (group, rows, CAP, True)
        found[f"{name}_r{CAP}"] = (group, rows, CAP, False)
    return found


def candidate_spmv(csr, x: torch.Tensor, group: int, rows_per_program: int, cap: int | None,
                   prefetching: bool) -> torch.Tensor:
    if prefetching:
        return rows_spmv(csr, x, group, rows_per_program, cap, kernel=_prefetch_rows_kernel)
    return rows_spmv(csr, x, group, rows_per_program, cap)


def timed_calls(csr, x) -> dict:
    return shipped_and_candidates(csr, x, configurations(), candidate_spmv)


def measure(case, loaded) -> dict:
    return checked_times(case, loaded, timed_calls)


def describe(row: dict) -> str:
    return describe_best(row, configurations(), "candidate")


def markdown(result: dict) -> str:
    rows, copy, names = result["matrices"], result["copy_gbps"], list(configurations())
    lines = [*method(result, "Prefetching and a register cap in the row-mapped SpMV kernel"), "",
             f"Candidates: `<shipped tile>_prefetch` the next step's indices and values loaded before this step's "
             f"x gather, `_r{CAP}` capped at {CAP} registers per thread, `_prefetch_r{CAP}` both.", "",
             *per_matrix(rows, names, "candidate", copy)]
    if rows:
        lines += ["", overall(rows, names, copy), "", *over_own_tile(rows, names)]
    return "\n".join(lines) + "\n"


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-prefetch-registers", large_regular, measure, describe, markdown, budget_s=300)


if __name__ == "__main__":
    sys.exit(main())
