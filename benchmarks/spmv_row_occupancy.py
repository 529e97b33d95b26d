"""Occupancy of the row-mapped SpMV kernel on the large regular matrices: register caps and smaller tiles.

    python benchmarks/spmv_row_occupancy.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: Nsight Compute on the H200 (``spmv-ncu-regular-h200.md``, a band of 49 nonzeros a row) has
``vector_g16`` at 52% of DRAM throughput with 48 registers per thread and 60% achieved occupancy,
its warps stalled on loads (long scoreboard) for 62% of their cycles; cuSPARSE's kernel runs the
same matrix at 56% with 32 registers and 93% occupancy. A latency-bound kernel with more warps
resident keeps more loads in flight. Candidates, the shipped kernel unchanged: each shipped
vector tile capped at 32 and 40 registers per thread (Triton's ``maxnreg``), and the same lanes
per row with half the rows per program (half the registers of the tile), capped or not. Each
large banded and stencil matrix (10M+ nnz) gets them beside the shipped row-mapped variants and
cuSPARSE, every result checked against float64, timed in interleaved rounds (least of the
do_bench medians, L2 flushed). Writes ``spmv-row-occupancy-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import sys

import torch
import triton
from scipy.stats import gmean
from large_set import checked_times
from spmv_vector_loads import (best, describe_best, large_regular, method, overall, per_matrix,
                               shipped_and_candidates)

from seer.kernels import spmv

TILES = {"vector_g8": (8, 64), "vector_g16": (16, 32), "vector_g32": (32, 16), "vector_g64": (64, 8),
         "vector_g256": (256, 4)}  # the shipped vector variants: (lanes per row, rows per program)
CAPS = (None, 40, 32)


def configurations() -> dict[str, tuple[int, int, int | None]]:
    """Candidate name -> (lanes per row, rows per program, register cap)."""
    found = {}
    for name, (group, rows) in TILES.items():
        for cap in CAPS:
            suffix = f"_r{cap}" if cap else ""
            if cap:
                found[f"{name}{suffix}"] = (group, rows, cap)
            if rows > 1:
                found[f"{name}_half{suffix}"] = (group, rows // 2, cap)
    return found


def rows_spmv(csr, x: torch.Tensor, group: int, rows_per_program: int, cap: int | None,
              kernel=spmv._csr_rows_kernel) -> torch.Tensor:
    """The shipped row-mapped kernel (or ``kernel``, one of its signature) through Triton's own
    launch, with a register cap if given."""
    y = torch.empty(csr.rows, dtype=csr.values.dtype, device=x.device)
    options = {"num_warps": 4, **({"maxnreg": cap} if cap else {})}
    kernel[(triton.cdiv(csr.rows, rows_per_program),)](
        csr.indptr, csr.indices, csr.values, x, x.stride(0), y, y.stride(0), csr.rows, ROWS=rows_per_program,
        G=group, **options)
    return y


def timed_calls(csr, x) -> dict:
    return shipped_and_candidates(csr, x, configurations(), rows_spmv)


def measure(case, loaded) -> dict:
    return checked_times(case, loaded, timed_calls)


def describe(row: dict) -> str:
    return describe_best(row, configurations(), "candidate")


def markdown(result: dict) -> str:
    rows, copy, names = result["matrices"], result["copy_gbps"], list(configurations())
    lines = [*method(result, "Occupancy of the row-mapped SpMV kernel"), "",
             "Candidates: `<shipped tile>_r<cap>` the shipped tile capped at that many registers per thread, "
             "`_half` half the rows per program.", "", *per_matrix(rows, names, "candidate", copy)]
    if rows:
        lines += ["", overall(rows, names, copy), "", *over_own_tile(rows, names)]
    return "\n".join(lines) + "\n"


def over_own_tile(rows: list[dict], names) -> list[str]:
    """Each candidate (named ``<shipped tile>_...``) over its own shipped tile, on the matrices that
    tile is the best shipped vector variant on."""
    lines = ["Each candidate over its own shipped tile (geometric mean over the matrices that tile is the "
             "best shipped vector variant on):", "", "| candidate | matrices | over its shipped tile |", "|---|---|---|"]
    for name in names:
        tile = next(t for t in TILES if name.startswith(f"{t}_"))
        own = [r for r in rows if best(r["time_ms"], TILES)[0] == tile]
        if own:
            lines.append(f"| {name} | {len(own)} | {gmean([r['time_ms'][tile] / r['time_ms'][name] for r in own]):.3f}x |")
    return lines


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-row-occupancy", large_regular, measure, describe, markdown, budget_s=300)


if __name__ == "__main__":
    sys.exit(main())
