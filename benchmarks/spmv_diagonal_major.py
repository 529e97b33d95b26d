"""Stencils and full bands stored by diagonals: SpMV from a diagonal-major copy of the values.

    python benchmarks/spmv_diagonal_major.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: NOTES SpMV 7, 8 and 22-25 found every row-mapped kernel (and cuSPARSE) on the H200's bands
of 17-1,200 nonzeros a row at 48-69% of copy however its tile, loads or occupancy were set, and
item 31's index-free rows (``diagonal_r128``) help only where rows are short: one lane a row
strides through the values by the row's length, so a load instruction touches one line per lane.
Stored by diagonals (value d of every row that follows the pattern, row after row), the values
of a block of rows at one diagonal are one contiguous, aligned run, read with 16-byte loads as a
copy reads, and x at that diagonal is the run shifted by its offset.

Candidates ``diagonal_major_r<ROWS>_d<D>_w<WARPS>`` (``seer.kernels.spmv._diagonal_major_variant``,
the code a shipped variant would run): ROWS rows a program, D diagonals a step. Preparation
(pattern, flags, the copy: synchronised wall time, median of 5) is timed apart. Each large banded
and stencil matrix (10M+ nnz) gets them beside the shipped row-mapped variants, ``diagonal_r128``
and both cuSPARSE calls, every result checked against float64, timed in interleaved rounds (least
of the do_bench medians, L2 flushed). Shares of copy under the CSR byte model of
``spmv_bandwidth.py`` (effective) and under the bytes the candidate reads (its own).
Writes ``spmv-diagonal-major-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import statistics
import sys
import time

import torch
from large_set import checked_times
from scipy.stats import gmean
from spmv_vector_loads import SHIPPED as ROW_MAPPED, best, each_candidate, large_regular, method, pattern_row

from seer.kernels import spmv

SHIPPED = (*ROW_MAPPED, "diagonal_r128", "cusparse_prepared")
TILES = ((128, 4, 4), (256, 4, 4), (256, 2, 4), (512, 2, 4), (512, 4, 4), (256, 8, 4), (512, 4, 8))  # (ROWS, D, warps)


def configurations() -> dict[str, tuple[int, int, int]]:
    return {f"diagonal_major_r{r}_d{d}_w{w}": (r, d, w) for r, d, w in TILES}


def candidate_runs(csr, x) -> dict:
    """Each candidate's run on ``csr``, planned (copy made) before timing."""
    runs = {}
    for name, tile in configurations().items():
        run, _ = spmv._diagonal_major_variant(*tile)
        run(csr, x)
        runs[name] = lambda r=run: r(csr, x)
    return runs


def preparation_ms(csr, repeats: int = 5) -> float:
    """Median synchronised wall time of one candidate's plan (all candidates prepare alike)."""
    samples = []
    for _ in range(repeats):
        fresh = spmv.problem((csr.indptr, csr.indices, csr.values, csr.shape))
        torch.cuda.synchronize()
        started = time.perf_counter()
        spmv._diagonal_major_variant(*TILES[0])[1](fresh)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples)


def measure(case, loaded) -> dict:
    found = {}

    def timed_calls(csr, x) -> dict:
        pattern_row, follows = spmv._rows_following_pattern(csr)
        layout = spmv._diagonal_major_layout(csr, pattern_row, follows)
        found.update(stored=layout is not None, length=0 if layout is None else layout.length,
                     flagged_rows=int(follows.sum()), preparation_ms=preparation_ms(csr))
        runs = {name: (lambda v=spmv.VARIANTS[name]: v.run(csr, x)) for name in SHIPPED}
        return {**runs, **candidate_runs(csr, x)}

    return {**checked_times(case, loaded, timed_calls), **found}


def own_bytes(row: dict) -> float:
    """Bytes a candidate moves when the copy is made: the copy (its zeros too), the other rows'
    CSR (values, indices, two row pointers), a flag a row, x and y once."""
    rows, length = row["rows"], row["length"]
    padded = -(-rows // spmv._DIAGONAL_MAJOR_PAD) * spmv._DIAGONAL_MAJOR_PAD
    unflagged_nnz = row["nnz"] - row["flagged_rows"] * length
    unflagged_rows = rows - row["flagged_rows"]
    return 4 * length * padded + 8 * unflagged_nnz + 8 * unflagged_rows + rows + 4 * row["cols"] + 4 * rows


def markdown(result: dict) -> str:
    rows, copy, names = result["matrices"], result["copy_gbps"], list(configurations())
    lines = [*method(result, "SpMV from a diagonal-major copy of the values"), "",
             "Per matrix: the pattern's length (0: the copy not made, the candidates run as vector CSR) and "
             "the share of nonzeros in rows that follow it; the best shipped variant and the best candidate with "
             "their shares of copy under the CSR byte model (effective), the candidate's under the bytes it "
             "moves (own); preparation (synchronised wall time) and the calls after which it has paid for itself.",
             "", "| matrix | nnz / row | pattern | following nnz | best shipped | share | best candidate | "
             "effective share | own share | speed-up | preparation ms | pays after calls |", "|" + "---|" * 12]
    lines += [pattern_row(r, SHIPPED, names, copy, r["flagged_rows"] * r["length"] / r["nnz"],
                          own_bytes(r) if r["stored"] else None) for r in rows]
    if rows:
        stored = [r for r in rows if r["stored"]]
        ratios = [best(r["time_ms"], SHIPPED)[1] / best(r["time_ms"], names)[1] for r in stored]
        lines += ["", f"Where the copy is made ({len(stored)} of {len(rows)} matrices), best candidate over the best "
                  f"shipped variant: {gmean(ratios):.3f}x in geometric mean ({sum(x > 1 for x in ratios)} faster)."
                  if stored else "The copy was made on none of the matrices.", "",
                  "Where the copy is made:", "", *each_candidate(stored, names, SHIPPED)]
    return "\n".join(lines) + "\n"


def describe(row: dict) -> str:
    (s_name, s_ms), (c_name, c_ms) = best(row["time_ms"], SHIPPED), best(row["time_ms"], configurations())
    return (f"pattern of {row['length']}, copy {'made' if row['stored'] else 'not made'}; shipped {s_name} "
            f"{s_ms:.4f} ms, {c_name} {c_ms:.4f} ms, preparation {row['preparation_ms']:.2f} ms")


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-diagonal-major", large_regular, measure, describe, markdown, budget_s=300)


if __name__ == "__main__":
    sys.exit(main())
