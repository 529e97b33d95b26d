"""What a bandwidth-reducing order would cost and recover on the permuted replicas (host only).

    python benchmarks/spmv_rcm_locality.py --matrices ../shared/suitesparse [--out benchmarks/results] [--budget-s 300]

The permuted replicas of the large suite (``derived/...-permute1-...``: copies of a real matrix
on the block diagonal plus 10% coupling blocks, rows and columns relabelled at random) are bound by
their x requests (NOTES SpMV 21, 58). Their originals are banded or FEM-like, so reverse
Cuthill-McKee (``scipy.sparse.csgraph.reverse_cuthill_mckee`` on the pattern of A + A^T) should
bring most nonzeros back near the diagonal. For each replica (smallest first, until the budget):
the order's host time, the time to apply it (``A[p][:, p]``), and the share of nonzeros within
1k and 16k columns of the diagonal (an x window that L1 holds: NOTES SpMV 56) before and after.
With the H100 table's best time per call for that matrix, the calls an order of that cost needs
before it pays even if it halved every call (from ~33% of copy to ~66%): a lower bound.
Writes ``spmv-rcm-locality-cpu.json`` / ``.md`` (the host named inside).
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy.sparse.csgraph import reverse_cuthill_mckee

from seer.datasets.cases import spmv_cases
from seer.profiling import environment, measured_within_budget, provenance, write_result
from seer.table import read_frame

WINDOWS = (1024, 16384)


def near_diagonal(matrix, window: int) -> float:
    """Share of the nonzeros whose column lies within ``window`` of their row."""
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    return float((np.abs(rows - matrix.indices) < window).mean())


def reordered(case, loaded, best_ms: dict) -> dict:
    matrix = loaded[0]
    started = time.perf_counter()
    order = reverse_cuthill_mckee(matrix, symmetric_mode=False)
    order_s = time.perf_counter() - started
    started = time.perf_counter()
    local = matrix[order][:, order].tocsr()
    apply_s = time.perf_counter() - started
    if local.nnz != matrix.nnz:
        raise AssertionError(f"reordering {case.id} changed its nonzeros: {matrix.nnz} -> {local.nnz}")
    row = {"id": case.id, "rows": matrix.shape[0], "nnz": int(matrix.nnz), "order_s": order_s, "apply_s": apply_s,
           **{f"near_{w}_before": near_diagonal(matrix, w) for w in WINDOWS},
           **{f"near_{w}_after": near_diagonal(local, w) for w in WINDOWS}}
    if case.id in best_ms:
        row["best_call_ms"] = best_ms[case.id]
        row["calls_to_repay_if_halved"] = (order_s + apply_s) * 1e3 / (best_ms[case.id] / 2)
    return row


def best_call_ms(table: Path) -> dict[str, float]:
    frame = read_frame(table)
    times = frame[[c for c in frame.columns if c.startswith("time_ms:")]]
    return dict(zip(frame["id"], times.min(axis=1)))


def render(result: dict) -> str:
    rows = result["rows"]
    lines = [f"# Reverse Cuthill-McKee on the permuted replicas (host: {result['host']})", "",
             provenance(result, result["command"]), "", result["method"], "",
             "| matrix | nnz | order s | apply s | within 1k before / after | within 16k before / after | "
             "H100 best call ms | calls to repay if halved |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        repay = f"{r['calls_to_repay_if_halved']:,.0f}" if "calls_to_repay_if_halved" in r else "-"
        best = f"{r['best_call_ms']:.3f}" if "best_call_ms" in r else "-"
        lines.append(f"| {r['id']} | {r['nnz']:,} | {r['order_s']:.2f} | {r['apply_s']:.2f} | "
                     f"{r['near_1024_before']:.1%} / {r['near_1024_after']:.1%} | "
                     f"{r['near_16384_before']:.1%} / {r['near_16384_after']:.1%} | {best} | {repay} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrices", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--table", type=Path, default=Path("datasets/profiles/spmv-h100.csv"))
    parser.add_argument("--budget-s", type=float, default=300)
    args = parser.parse_args()
    cases = sorted((c for c in spmv_cases([args.matrices], synthetic="large", device="cpu")
                    if c.source == "derived" and "-permute1-" in c.id), key=lambda c: c.extra["size"])
    best = best_call_ms(args.table)
    rows = measured_within_budget(cases, lambda case, loaded: reordered(case, loaded, best), args.budget_s,
                                  lambda r: f"order {r['order_s']:.2f} s, within 1k {r['near_1024_after']:.0%}")
    host = f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    result = {"benchmark": "reverse Cuthill-McKee on the permuted replicas", **environment(torch.device("cpu")),
              "host": host, "command": " ".join([Path(sys.executable).name, *sys.argv]), "table": str(args.table),
              "method": "scipy's reverse_cuthill_mckee (symmetric_mode=False), wall time on the host named above; "
                        "nonzeros within a window of the diagonal before and after; the calls to repay the order "
                        "and its application if every call took half the H100 table's best time (a lower bound).",
              "rows": rows}
    write_result(args.out, "spmv-rcm-locality-cpu", result, render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
