"""16-byte loads in the row-mapped SpMV kernel, on the large regular matrices.

    python benchmarks/spmv_vector_loads.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: ``spmv-floor-h200.md`` shows the H200's banded matrices and 3-D stencils running no faster
with every x read a cache hit (68% of copy for banded, 10M+ nnz) while a copy of the same bytes
reaches 88%: the row-mapped kernels stream rows of 17-1,200 nonzeros slowly, and the gathers are
not why. The shipped kernel starts each row's loads at ``indptr[r]``, of unknown alignment, so
Triton loads indices and values 4 bytes per lane. Here each row's loads start at ``indptr[r]``
rounded down to a multiple of 4 and are masked by whole groups of four, which lets the compiler
issue 16-byte loads (4 elements per lane); elements of the neighbouring rows inside a group are
loaded and dropped (same sectors, no extra DRAM traffic). The last ``nnz % 4`` nonzeros of the
arrays, whose group would run past their end, are added by scalar loads after the loop.

Candidates ``aligned_w<W>_r<ROWS>``: W elements of a row per step (W / 4 lanes), ROWS rows per
program, 4 warps. Each large banded and stencil matrix (10M+ nnz) gets the shipped row-mapped
variants, cuSPARSE and every candidate, checked against float64 and timed in interleaved rounds
(least of the do_bench medians, L2 flushed). Writes ``spmv-vector-loads-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import statistics
import sys

import torch
import triton
import triton.language as tl
from scipy.stats import gmean
from large_set import checked_times, method
from spmv_bandwidth import share_of_copy

from seer.kernels import spmv

FAMILIES = ("synthetic/banded/", "synthetic/stencil_2d/", "synthetic/stencil_3d/")
MIN_NNZ = 10_000_000
SHIPPED = ("scalar_r128", "vector_g4", "vector_g8", "vector_g16", "vector_g32", "vector_g64", "vector_g256",
           "torch_csr")
CANDIDATES = ((4, 128), (4, 256), (8, 64), (16, 32), (32, 16), (64, 8), (256, 4))  # (W, ROWS)


@triton.jit
def _aligned_rows_kernel(indptr, indices, values, x, x_stride, y, y_stride, rows, nnz,
                         ROWS: tl.constexpr, W: tl.constexpr, STAGES: tl.constexpr):
    """Row-mapped CSR whose index and value loads start on 16-byte boundaries, masked by whole
    groups of four elements so that they compile to 16-byte loads; STAGES > 1 lets Triton
    pipeline the row loop (asynchronous copies to shared memory, STAGES - 1 steps ahead)."""
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = row < rows
    start = tl.load(indptr + row, mask=ok, other=0)
    end = tl.load(indptr + row + 1, mask=ok, other=0)
    base = start // 4 * 4
    # groups that overlap the row and lie wholly inside the arrays
    groups_end = tl.minimum((end + 3) // 4, nnz // 4)
    first = base[:, None] + tl.arange(0, W)[None, :]
    acc = tl.zeros([ROWS, W], dtype=tl.float32)
    for step in tl.range(0, tl.max(end - base, axis=0), W, num_stages=STAGES):
        k = first + step
        whole = k // 4 < groups_end[:, None]
        col = tl.load(indices + k, mask=whole, other=0)
        a = tl.load(values + k, mask=whole, other=0.0)
        inside = whole & (k >= start[:, None]) & (k < end[:, None])
        xv = tl.load(x + col * x_stride, mask=inside, other=0.0)
        acc += tl.where(inside, a.to(tl.float32) * xv.to(tl.float32), 0.0)
    # The arrays' last partial group: at most three nonzeros, in this block's rows or not.
    t = (nnz // 4 * 4 + tl.arange(0, 4))[None, :]
    tail = (t >= start[:, None]) & (t < end[:, None])
    t_col = tl.load(indices + t, mask=tail, other=0)
    t_a = tl.load(values + t, mask=tail, other=0.0)
    t_x = tl.load(x + t_col * x_stride, mask=tail, other=0.0)
    sums = tl.sum(acc, axis=1) + tl.sum(t_a.to(tl.float32) * t_x.to(tl.float32), axis=1)
    tl.store(y + row * y_stride, sums.to(y.dtype.element_ty), mask=ok)


def large_regular(cases: list) -> list:
    """The banded and stencil matrices of 10M+ nonzeros, where the goal of 75% of copy is read."""
    return [c for c in cases if c.id.startswith(FAMILIES) and c.extra["size"] >= MIN_NNZ]


def aligned_spmv(csr, x: torch.Tensor, width: int, rows_per_program: int, stages: int = 1) -> torch.Tensor:
    y = torch.empty(csr.rows, dtype=csr.values.dtype, device=x.device)
    _aligned_rows_kernel[(triton.cdiv(csr.rows, rows_per_program),)](
        csr.indptr, csr.indices, csr.values, x, x.stride(0), y, y.stride(0), csr.rows, csr.nnz,
        ROWS=rows_per_program, W=width, STAGES=stages, num_warps=4)
    return y


def configurations() -> dict[str, tuple[int, int]]:
    """Candidate name -> (elements of a row per step, rows per program)."""
    return {f"aligned_w{w}_r{r}": (w, r) for w, r in CANDIDATES}


def shipped_and_candidates(csr, x, configurations: dict, launch) -> dict:
    """The runs of one matrix: the shipped row-mapped variants and cuSPARSE, then
    ``launch(csr, x, *config)`` for each candidate."""
    runs = {name: (lambda v=spmv.VARIANTS[name]: v.run(csr, x)) for name in SHIPPED}
    for name, config in configurations.items():
        runs[name] = lambda c=config: launch(csr, x, *c)
    return runs


def timed_calls(csr, x) -> dict:
    return shipped_and_candidates(csr, x, configurations(), aligned_spmv)


def measure(case, loaded) -> dict:
    return checked_times(case, loaded, timed_calls)


def best(times: dict, names) -> tuple[str, float]:
    name = min(names, key=times.get)
    return name, times[name]


def calls_to_pay(preparation_ms: float, shipped_ms: float, candidate_ms: float) -> str:
    """After how many calls a candidate's preparation has paid for itself against the shipped
    variant's time ("never" where it is no faster)."""
    saved = shipped_ms - candidate_ms
    return f"{preparation_ms / saved:.0f}" if saved > 0 else "never"


def pattern_row(r: dict, shipped, names, copy_gbps: float, following: float, own_bytes: float | None) -> str:
    """One matrix's line in the pattern benchmarks' tables (``spmv_patterns.py``,
    ``spmv_diagonal_major.py``): the best shipped variant and the best candidate with their shares
    of copy, the candidate's share under the bytes it moves itself (``own_bytes``; None: "-"), the
    speed-up, and the preparation with the calls it takes to pay. ``following``: the share of
    nonzeros in rows that follow the pattern."""
    (s_name, s_ms), (c_name, c_ms) = best(r["time_ms"], shipped), best(r["time_ms"], names)
    own = "-" if own_bytes is None else f"{own_bytes / (c_ms * 1e-3) / 1e9 / copy_gbps:.0%}"
    return (f"| {r['id']} | {r['nnz'] / r['rows']:.1f} | {r['length']} | {following:.0%} | {s_name} | "
            f"{share_of_copy(r, s_ms, copy_gbps):.0%} | {c_name} | {share_of_copy(r, c_ms, copy_gbps):.0%} | {own} | "
            f"{s_ms / c_ms:.2f}x | {r['preparation_ms']:.2f} | {calls_to_pay(r['preparation_ms'], s_ms, c_ms)} |")


def overall(rows: list[dict], names, copy_gbps: float) -> str:
    """The best candidate per matrix over the best shipped variant, and the median shares of copy."""
    shipped = [best(r["time_ms"], SHIPPED)[1] for r in rows]
    ratios = [s / best(r["time_ms"], names)[1] for r, s in zip(rows, shipped)]
    shares = [share_of_copy(r, s / max(q, 1.0), copy_gbps) for r, s, q in zip(rows, shipped, ratios)]
    shipped_shares = [share_of_copy(r, s, copy_gbps) for r, s in zip(rows, shipped)]
    return (f"Best candidate over the best shipped variant: {gmean(ratios):.3f}x in geometric mean "
            f"({sum(x > 1 for x in ratios)} of {len(rows)} faster). Median share of copy, best shipped "
            f"{statistics.median(shipped_shares):.0%}; best of both {statistics.median(shares):.0%}.")


def describe_best(row: dict, names, label: str) -> str:
    """One matrix's progress line: the best shipped variant and the best candidate."""
    t = row["time_ms"]
    shipped, candidate = best(t, SHIPPED), best(t, names)
    return f"shipped {shipped[0]} {shipped[1]:.4f} ms, {label} {candidate[0]} {candidate[1]:.4f} ms"


def describe(row: dict) -> str:
    return describe_best(row, configurations(), "aligned")


def per_matrix(rows: list[dict], names, label: str, copy_gbps: float) -> list[str]:
    """Per matrix: the best shipped variant and the best candidate, with their shares of copy."""
    lines = [f"| matrix | nnz / row | best shipped | share | best {label} | share | speed-up |", "|" + "---|" * 7]
    for r in rows:
        (s_name, s_ms), (c_name, c_ms) = best(r["time_ms"], SHIPPED), best(r["time_ms"], names)
        lines.append(f"| {r['id']} | {r['nnz'] / r['rows']:.1f} | {s_name} | "
                     f"{share_of_copy(r, s_ms, copy_gbps):.0%} | {c_name} | {share_of_copy(r, c_ms, copy_gbps):.0%} "
                     f"| {s_ms / c_ms:.2f}x |")
    return lines


def each_candidate(rows: list[dict], names, shipped=SHIPPED) -> list[str]:
    """Each candidate over the best of ``shipped``, and the matrices it is the fastest of all on."""
    lines = ["Each candidate over the best shipped variant (geometric mean), and the matrices it is the "
             "fastest of all on:", "", "| candidate | over best shipped | fastest on |", "|---|---|---|"]
    for name in names:
        wins = sum(min(r["time_ms"], key=r["time_ms"].get) == name for r in rows)
        ratio = gmean([best(r["time_ms"], shipped)[1] / r["time_ms"][name] for r in rows])
        lines.append(f"| {name} | {ratio:.3f}x | {wins} |")
    return lines


def markdown(result: dict) -> str:
    rows, copy, names = result["matrices"], result["copy_gbps"], list(configurations())
    lines = [*method(result, "16-byte loads in the row-mapped SpMV kernel"), "",
             "Per matrix: the best shipped variant (cuSPARSE included), the best aligned candidate, and "
             "the candidate against the shipped variant of the same width (vector_g<W>; scalar_r128 for W = 4).",
             "", "| matrix | nnz / row | best shipped | share | best aligned | share | speed-up | "
             "same width |", "|" + "---|" * 8]
    for r in rows:
        t = r["time_ms"]
        (s_name, s_ms), (c_name, c_ms) = best(t, SHIPPED), best(t, names)
        width = int(c_name.split("_")[1][1:])
        twin = "scalar_r128" if width == 4 else f"vector_g{width}"
        lines.append(f"| {r['id']} | {r['nnz'] / r['rows']:.1f} | {s_name} | {share_of_copy(r, s_ms, copy):.0%} | "
                     f"{c_name} | {share_of_copy(r, c_ms, copy):.0%} | {s_ms / c_ms:.2f}x | "
                     f"{t[twin] / c_ms:.2f}x |")
    if rows:
        lines += ["", overall(rows, names, copy), "", *each_candidate(rows, names)]
    return "\n".join(lines) + "\n"


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-vector-loads", large_regular, measure, describe, markdown, budget_s=300)


if __name__ == "__main__":
    sys.exit(main())
