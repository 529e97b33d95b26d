"""What `offsets_i16`'s preparation costs where its offsets do not fit, step by step.

    python benchmarks/spmv_offsets_refusal.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 120]

Why: benchmarks/NOTES.md, SpMV 62. The sampled rows' ends were meant to refuse a permuted matrix
for two small launches and a read-back, yet the tables' `prepare_ms:offsets_i16` on such inputs
stayed at 0.15-1 ms. The suspect: the fallback's cuSPARSE plan, made after the read-back, where its
host work is no longer hidden behind queued device work, against 0.01 ms when made first.

Each input (R-MATs, log-normal rows and permuted replicas, where the offsets do not fit, and bands,
where they do; smallest and largest of each family by turns) has each step timed as the tables
time a preparation (`seer.profiling._preparation_ms`: CUDA events behind a sleep kernel, median of
5 on fresh problems). Writes ``spmv-offsets-refusal-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import statistics
import sys

import torch

from large_set import by_turns, run
from spmv_offsets_copy import matrix_lines, preparations_ms
from seer.kernels import spmv
from seer.profiling import provenance

FAMILIES = ("synthetic/rmat/", "synthetic/lognormal_rows/", "derived/", "synthetic/banded/")


def read_back_then(step):
    """``step`` after a read-back, as the fallback's plan follows the offsets' read-back."""
    def bind(csr):
        torch.ones(1, device=csr.device).tolist()
        return step(csr)
    return bind


def offsets_then_plan(csr):
    offsets = spmv.column_offsets(csr)
    return offsets if offsets is not None else spmv._cusparse_plan(csr)


STEPS = {
    "sample, read back": lambda csr: spmv.sampled_offset_bounds(csr).tolist(),
    "offsets (sample, pass, read back)": spmv.column_offsets,
    "cuSPARSE plan": spmv._cusparse_plan,
    "read back, cuSPARSE plan": read_back_then(spmv._cusparse_plan),
    # As offsets_i16 planned until SpMV 63 (the row-mapped call's set-up aside): the fallback after.
    "offsets, then cuSPARSE plan if refused": offsets_then_plan,
    # The candidate (shipped since): the fallback's plan made before the read-back, kept only where
    # the offsets do not fit.
    "cuSPARSE plan, then offsets": lambda csr: (spmv._cusparse_plan(csr), spmv.column_offsets(csr)),
}


def select(cases: list) -> list:
    """Each family's smallest and largest by turns, the families by turns; replicas permuted only
    (their unpermuted twins fit)."""
    return by_turns([[c for c in cases if c.id.startswith(f) and (f != "derived/" or "permute1" in c.id)] for f in FAMILIES])


def measure(case, loaded) -> dict:
    parts, _ = case.build(loaded)
    csr = spmv.problem(parts)
    fits = spmv.column_offsets(csr) is not None
    return {"id": case.id, "rows": csr.rows, "nnz": csr.nnz, "fits": fits, "step_ms": preparations_ms(STEPS, parts)}


def describe(row: dict) -> str:
    return f"{row['nnz']:,} nnz, fits {row['fits']}: " + ", ".join(f"{v:.3f}" for v in row["step_ms"].values())


def markdown(result: dict) -> str:
    rows = result["matrices"]
    names = list(rows[0]["step_ms"])  # as the run named them
    lines = [f"# offsets_i16's preparation step by step, {result['device']['name']}", "",
             provenance(result, result["command"]), "",
             "Each step timed as the profile tables time a preparation (CUDA events behind a sleep kernel: "
             "kernels and read-backs count, host work after a read-back counts, host work before it does not; "
             "median of 5 on fresh problems).", "",
             "| inputs | count | " + " | ".join(f"{n}, median ms" for n in names) + " |", "|" + "---|" * (2 + len(names))]
    for label, fits in (("offsets do not fit", False), ("offsets fit", True)):
        group = [r for r in rows if r["fits"] == fits]
        if group:
            lines.append(f"| {label} | {len(group)} | "
                         + " | ".join(f"{statistics.median(r['step_ms'][n] for r in group):.3f}" for n in names) + " |")
    return "\n".join(lines + matrix_lines(rows, "step_ms")) + "\n"


if __name__ == "__main__":
    sys.exit(run(__doc__, "spmv-offsets-refusal", select, measure, describe, markdown, budget_s=120, copy_ceiling=False))
