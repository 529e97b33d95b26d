"""Rows that follow one diagonal pattern: SpMV without their column indices, on the large regular matrices.

    python benchmarks/spmv_patterns.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: items 7, 8, 23, 24 and 25 of NOTES SpMV found the row-mapped kernels on the H200's bands and
stencils latency-bound on a dependent chain per row step (load the column indices, then gather x
at them) and each tile, load width, prefetch or occupancy change worth a few points at most. In
a stencil or a full band nearly every row's columns are the row number plus one fixed list of
offsets (the matrix's diagonals), so the index load carries no information there: skipping it
removes half of the bytes per nonzero (4 of 8) and the x addresses no longer wait on a load.

Preparation (timed here, synchronised, as a variant's preparation is charged): the longest row
gives the candidate pattern (its columns minus its row number; one read-back of its length), and
one pass over the structure flags each row whose columns are exactly the row plus the pattern.
Candidates ``diagonal_g<G>_r<ROWS>`` (the shipped row-mapped tiles, G lanes per row, ROWS rows per
program): a flagged row gathers x at row + offset and reads only its values; other rows read
their indices as the shipped kernel does. ``_dense`` candidates also skip the row pointers of a
program whose rows are all flagged (each row then starts ``length`` nonzeros after the previous).

Each large banded and stencil matrix (10M+ nnz) gets them beside the shipped row-mapped variants,
cuSPARSE (torch's and the prepared one), every result checked against float64, timed in
interleaved rounds (least of the do_bench medians, L2 flushed). Shares of copy are given under the
CSR byte model of ``spmv_bandwidth.py`` (effective) and under the bytes the candidate reads.
Writes ``spmv-patterns-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import statistics
import sys
import time

import torch
import triton
import triton.language as tl
from scipy.stats import gmean
from large_set import checked_times
from spmv_vector_loads import SHIPPED as ROW_MAPPED, best, large_regular, method, pattern_row

from seer.kernels import spmv

SHIPPED = (*ROW_MAPPED, "cusparse_prepared")
TILES = ((1, 128), (4, 128), (8, 64), (16, 32), (32, 16), (64, 8), (256, 4))  # the shipped (G, ROWS)


@triton.jit
def _diagonal_rows_kernel(indptr, indices, values, pattern, length, follows, x, x_stride, y, y_stride, rows,
                          ROWS: tl.constexpr, G: tl.constexpr, DENSE: tl.constexpr):
    """Row-mapped CSR in which a flagged row gathers x at row + pattern[k] without loading its
    column indices; with DENSE, a program whose rows are all flagged reads one row pointer."""
    first = tl.program_id(0) * ROWS
    row = first + tl.arange(0, ROWS)
    ok = row < rows
    flagged = tl.load(follows + row, mask=ok, other=0) != 0
    packed = ok & False
    if DENSE:  # all rows flagged: each starts length nonzeros after the one before
        packed = tl.zeros_like(row) + tl.min(flagged.to(tl.int32), axis=0) > 0
    start = tl.load(indptr + row, mask=ok & ~packed, other=0)
    end = tl.load(indptr + row + 1, mask=ok & ~packed, other=0)
    if DENSE:
        start = tl.where(packed, tl.load(indptr + first) + (row - first) * length, start)
        end = tl.where(packed, start + length, end)
    acc = tl.zeros([ROWS, G], dtype=tl.float32)
    for step in range(0, tl.max(end - start, axis=0), G):
        k = step + tl.arange(0, G)
        at = start[:, None] + k[None, :]
        inside = at < end[:, None]
        offset = tl.load(pattern + k, mask=k < length, other=0)
        stored = tl.load(indices + at, mask=inside & ~flagged[:, None], other=0)
        col = tl.where(flagged[:, None], row[:, None] + offset[None, :], stored)
        a = tl.load(values + at, mask=inside, other=0.0)
        xv = tl.load(x + col * x_stride, mask=inside, other=0.0)
        acc += a.to(tl.float32) * xv.to(tl.float32)
    tl.store(y + row * y_stride, tl.sum(acc, axis=1).to(y.dtype.element_ty), mask=ok)


def diagonal_pattern(csr) -> tuple[torch.Tensor, int, torch.Tensor]:
    """(pattern, its length, follows): the longest row's columns minus its row number, and which
    rows follow it exactly, from the shipped variant's own flag pass. One read-back (the length)."""
    pattern_row, follows = spmv._rows_following_pattern(csr)
    start = csr.indptr[pattern_row]
    length = int(csr.indptr[pattern_row + 1] - start)
    pattern = csr.indices[start + torch.arange(length, device=csr.device)] - pattern_row.to(csr.indices.dtype)
    return pattern, length, follows


def diagonal_spmv(csr, x: torch.Tensor, prepared, group: int, rows_per_program: int, dense: bool) -> torch.Tensor:
    pattern, length, follows = prepared
    y = torch.empty(csr.rows, dtype=csr.values.dtype, device=x.device)
    _diagonal_rows_kernel[(triton.cdiv(csr.rows, rows_per_program),)](
        csr.indptr, csr.indices, csr.values, pattern, length, follows, x, x.stride(0), y, y.stride(0), csr.rows,
        ROWS=rows_per_program, G=group, DENSE=dense, num_warps=4)
    return y


def configurations() -> dict[str, tuple[int, int, bool]]:
    """Candidate name -> (lanes per row, rows per program, dense blocks)."""
    return {f"diagonal_g{g}_r{r}{'_dense' if dense else ''}": (g, r, dense)
            for g, r in TILES for dense in (False, True)}


def preparation_ms(csr, repeats: int = 5) -> tuple[float, tuple]:
    """Median synchronised wall time of :func:`diagonal_pattern`, and its result."""
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        started = time.perf_counter()
        prepared = diagonal_pattern(csr)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples), prepared


def measure(case, loaded) -> dict:
    found = {}

    def timed_calls(csr, x) -> dict:
        found["ms"], prepared = preparation_ms(csr)
        pattern, length, follows = prepared
        flagged = follows.to(torch.int64)
        found.update(length=length, flagged_rows=int(flagged.sum()),
                     flagged_nnz=int(flagged.sum()) * length, pattern=pattern[:32].tolist())
        runs = {name: (lambda v=spmv.VARIANTS[name]: v.run(csr, x)) for name in SHIPPED}
        for name, config in configurations().items():
            runs[name] = lambda c=config: diagonal_spmv(csr, x, prepared, *c)
        return runs

    row = checked_times(case, loaded, timed_calls)
    return {**row, "preparation_ms": found.pop("ms"), **found}


def own_bytes(row: dict) -> float:
    """Bytes a candidate reads and writes: values once, indices of the rows not flagged, the
    flags, row pointers, x and y once."""
    unflagged = row["nnz"] - row["flagged_nnz"]
    return 4 * row["nnz"] + 4 * unflagged + row["rows"] + 4 * (row["rows"] + 1) + 4 * row["cols"] + 4 * row["rows"]


def describe(row: dict) -> str:
    (s_name, s_ms), (c_name, c_ms) = best(row["time_ms"], SHIPPED), best(row["time_ms"], configurations())
    return (f"pattern of {row['length']}, {row['flagged_nnz'] / row['nnz']:.0%} of nnz flagged; shipped {s_name} "
            f"{s_ms:.4f} ms, {c_name} {c_ms:.4f} ms, preparation {row['preparation_ms']:.2f} ms")


def markdown(result: dict) -> str:
    rows, copy, names = result["matrices"], result["copy_gbps"], list(configurations())
    lines = [*method(result, "SpMV without the column indices of rows that follow one diagonal pattern"), "",
             "Per matrix: the pattern's length and the share of nonzeros in rows that follow it; the best shipped "
             "variant (both cuSPARSE calls included) and the best candidate, with their shares of copy under the "
             "CSR byte model (effective) and the candidate's under the bytes it reads; preparation (synchronised "
             "wall time) and the calls after which it has paid for itself.", "",
             "| matrix | nnz / row | pattern | flagged nnz | best shipped | share | best candidate | effective share "
             "| own share | speed-up | preparation ms | pays after calls |", "|" + "---|" * 12]
    lines += [pattern_row(r, SHIPPED, names, copy, r["flagged_nnz"] / r["nnz"], own_bytes(r)) for r in rows]
    if rows:
        ratios = [best(r["time_ms"], SHIPPED)[1] / best(r["time_ms"], names)[1] for r in rows]
        lines += ["", f"Best candidate over the best shipped variant: {gmean(ratios):.3f}x in geometric mean "
                  f"({sum(x > 1 for x in ratios)} of {len(rows)} faster).", "",
                  "Each candidate over the best shipped variant (geometric mean), and the matrices it is the "
                  "fastest of all on:", "", "| candidate | over best shipped | fastest on |", "|---|---|---|"]
        for name in names:
            wins = sum(min(r["time_ms"], key=r["time_ms"].get) == name for r in rows)
            ratio = gmean([best(r["time_ms"], SHIPPED)[1] / r["time_ms"][name] for r in rows])
            lines.append(f"| {name} | {ratio:.3f}x | {wins} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-patterns", large_regular, measure, describe, markdown, budget_s=300)


if __name__ == "__main__":
    sys.exit(main())
