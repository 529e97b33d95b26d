"""What the row-length statistics add to the validation pass, for candidate forms of its kernel.

The selector's stage 2 needs four row-length sums (sum of squares, longest row, empty rows, nnz in
long rows); seer gathers them in the pass that validates a matrix on its first call, and
``benchmarks/selection.py`` charges the validated path what they add to that pass
(``spmv_validation.py``'s ``stats_us``). On the real matrices the pass is a ~5 us latency chain
(one or a few row blocks per program), and the statistics add ~0.2 us to it: ALU work between the
``indptr`` loads and the reduction, one warp per scheduler, nothing to hide it behind. Candidates:
  shipped       seer's kernel as it is (``seer.sparse.launch_structure``)
  narrow_w<W>   32-bit lanes for the statistics (a validated matrix has every row length in
                [0, nnz], nnz < 2**31: only the sum of squares needs 64 bits, and it takes a widening
                multiply); the decreasing-row test compares the two loads instead of subtracting
  fused_w<W>    narrow, and one loop whose step loads a block of ``indptr`` and a block of
                ``indices`` together, so their latencies overlap instead of adding up
with W warps. Each is timed with and without statistics (device time, CUDA events, L2 flushed,
the least of three medians taken in interleaved rounds) on every real matrix, and its partial sums
are checked against the shipped kernel's. Writes ``spmv-stats-epilogue-<device>.json`` / ``.md``.
The committed ``spmv-stats-epilogue-h100`` was measured at commit f644c52, when the shipped kernel
was the two-loop, 64-bit one; seer now ships ``fused_w4`` (``benchmarks/NOTES.md``, SpMV 16).

    python benchmarks/spmv_stats_epilogue.py --matrices .carry/suitesparse [--out benchmarks/results]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

from spmv_validation import each_loaded  # a sibling script (benchmarks/ is on sys.path)

from seer import sparse
from seer.datasets.cases import spmv_cases
from seer.profiling import TIMING_ROUNDS, _least_of_rounds, device_tag, environment, provenance, write_result
from seer.sparse import FOUND_COLUMNS, LONG_ROW, _index_block, _row_block, as_csr, program_counts

CANDIDATES = {"narrow_w4": (False, 4), "narrow_w8": (False, 8), "fused_w4": (True, 4), "fused_w8": (True, 8)}


@triton.jit
def _candidate_kernel(indptr, indices, rows, nnz, cols, found, programs, blocks,
                      STATS: tl.constexpr, FUSED: tl.constexpr, LONG_ROW: tl.constexpr,
                      ROW_BLOCK: tl.constexpr, INDEX_BLOCK: tl.constexpr):
    """seer's pass with 32-bit lanes; ``FUSED``: one loop for both arrays, else a loop for each."""
    pid = tl.program_id(0)
    decreasing = tl.zeros([ROW_BLOCK], dtype=tl.int32)
    outside = tl.zeros([ROW_BLOCK], dtype=tl.int32)
    sum_sq = tl.zeros([ROW_BLOCK], dtype=tl.int64)
    longest = tl.zeros([ROW_BLOCK], dtype=tl.int32)
    empty = tl.zeros([ROW_BLOCK], dtype=tl.int32)
    long_nnz = tl.zeros([ROW_BLOCK], dtype=tl.int32)
    if FUSED:
        for block in range(pid, blocks, programs):
            outside = _index_block(indices, block * INDEX_BLOCK, nnz, cols, outside, ROW_BLOCK, INDEX_BLOCK)
            decreasing, sum_sq, longest, empty, long_nnz = _row_block(
                indptr, block * ROW_BLOCK, rows, decreasing, sum_sq, longest, empty, long_nnz,
                STATS, True, LONG_ROW, ROW_BLOCK)
    else:
        for start in range(pid * ROW_BLOCK, rows, programs * ROW_BLOCK):
            decreasing, sum_sq, longest, empty, long_nnz = _row_block(
                indptr, start, rows, decreasing, sum_sq, longest, empty, long_nnz, STATS, True, LONG_ROW, ROW_BLOCK)
        for start in range(pid * INDEX_BLOCK, nnz, programs * INDEX_BLOCK):
            outside = _index_block(indices, start, nnz, cols, outside, ROW_BLOCK, INDEX_BLOCK)
    # The length statistics only: the shifted-row count, added later to seer's pass, stays 0 here.
    counts = program_counts(indptr, rows, decreasing, outside, sum_sq, longest, empty, long_nnz, 0)
    column = tl.arange(0, 16)
    tl.store(found + pid * FOUND_COLUMNS + column, counts, mask=column < FOUND_COLUMNS)


def launch_candidate(csr, stats: bool, fused: bool, warps: int) -> torch.Tensor:
    """The candidate pass (``indices`` checked): its ``[programs, FOUND_COLUMNS]`` partial results."""
    blocks = max(triton.cdiv(csr.rows, sparse._ROW_BLOCK), triton.cdiv(csr.nnz, sparse._INDEX_BLOCK), 1)
    programs = min(blocks, sparse.max_programs(csr.device))
    found = torch.empty((programs, FOUND_COLUMNS), dtype=torch.int64, device=csr.device)
    _candidate_kernel[(programs,)](csr.indptr, csr.indices, csr.rows, csr.nnz, csr.cols, found, programs, blocks,
                                   STATS=stats, FUSED=fused, LONG_ROW=LONG_ROW, ROW_BLOCK=sparse._ROW_BLOCK,
                                   INDEX_BLOCK=sparse._INDEX_BLOCK, num_warps=warps)
    return found


def totals(found: torch.Tensor) -> list[int]:
    """The pass's answer from its partial results: the five sums, the longest row, indptr's ends."""
    parts = found.cpu().numpy()
    sums = parts[:, [0, 1, 2, 4, 5]].sum(axis=0)
    return [int(v) for v in sums] + [int(parts[:, 3].max()), int(parts[0, 6]), int(parts[0, 7])]


def passes(csr) -> dict:
    """Every candidate with and without statistics, as zero-argument launches."""
    fns = {f"shipped/{s}": (lambda s=s: sparse.launch_structure(csr, check=True, stats=s)) for s in (True, False)}
    for name, (fused, warps) in CANDIDATES.items():
        for s in (True, False):
            fns[f"{name}/{s}"] = lambda s=s, f=fused, w=warps: launch_candidate(csr, s, f, w)
    return fns


def measure(case, loaded) -> dict:
    source, _ = case.build(loaded)
    csr = as_csr(source, check=False)
    fns = passes(csr)
    shipped = sparse._structure_triton(csr, check=True, stats=True)
    expected = [shipped.decreasing, shipped.out_of_range, shipped.sums.sum_sq, shipped.sums.empty,
                shipped.sums.long_nnz, shipped.sums.longest, shipped.first, shipped.last]
    for name in CANDIDATES:
        got = totals(fns[f"{name}/True"]())
        if got != expected:
            raise AssertionError(f"{name} disagrees with the shipped pass on {case.id}: {got} != {expected}")
    least = _least_of_rounds(fns, rep_ms=TIMING_ROUNDS * 25)
    row = {"id": case.id, "rows": csr.rows, "nnz": csr.nnz}
    for name in ("shipped", *CANDIDATES):
        with_stats, without = least[f"{name}/True"] * 1e3, least[f"{name}/False"] * 1e3
        row[name] = {"kernel_us": with_stats, "plain_kernel_us": without, "stats_us": with_stats - without}
    return row


def summary(rows: list[dict]) -> list[dict]:
    """Per candidate: medians over the matrices, and the mean of the charge selection.py makes
    (negative differences count as 0)."""
    out = []
    for name in ("shipped", *CANDIDATES):
        kernel = np.array([r[name]["kernel_us"] for r in rows])
        plain = np.array([r[name]["plain_kernel_us"] for r in rows])
        stats = kernel - plain
        out.append({"candidate": name, "kernel_us": float(np.median(kernel)), "plain_kernel_us": float(np.median(plain)),
                    "stats_us": float(np.median(stats)), "charged_mean_us": float(np.maximum(stats, 0).mean())})
    return out


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"# Row statistics in the validation pass, candidate kernels, on {env['device']['name']}", "",
             provenance(env, result['command']) +
             f"; {len(result['rows'])} real matrices, every candidate's sums checked against "
             "the shipped pass.", "",
             "Device time of the pass, µs: with statistics (kernel), without (plain), their difference (stats, "
             "median) and the mean of what `selection.py` would charge (differences below 0 count as 0).", "",
             "| candidate | kernel | plain | stats | charged mean |", "|---|---|---|---|---|"]
    for s in result["summary"]:
        lines.append(f"| {s['candidate']} | {s['kernel_us']:.2f} | {s['plain_kernel_us']:.2f} | "
                     f"{s['stats_us']:+.3f} | {s['charged_mean_us']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrices", type=Path, required=True, help="folder of real matrices (SuiteSparse layout)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=None, help="stop after this many seconds")
    args = parser.parse_args()
    rows = [measure(case, loaded) for case, loaded in each_loaded(spmv_cases([args.matrices]), args.budget_s)]
    result = {"benchmark": "spmv statistics epilogue", "environment": environment(torch.device("cuda")),
              "command": " ".join(["python", *sys.argv]), "summary": summary(rows), "rows": rows}
    write_result(args.out, f"spmv-stats-epilogue-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
