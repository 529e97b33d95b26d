"""Register caps on the merge kernel: does occupancy limit it on large irregular matrices?

    python benchmarks/spmv_registers.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 200]

Why: Nsight Compute (``spmv-ncu-h100.md``) shows ``merge_c512`` at 66% occupancy, limited by its
40 registers per thread, where cuSPARSE's kernel runs at 93% with 32 and gets 1.25x more nonzeros
through the same L2 load. Triton's ``maxnreg`` caps registers per thread at compile time. Each
matrix (R-MAT, log-normal rows and permuted replicas of the large suite, round-robin by family)
gets the merge kernel at 512 and 1024 nonzeros per program on 4 warps and at 4096 on 16 warps
(cuSPARSE's 512 threads with 8 nonzeros each), each uncapped and capped at 32 and 24 registers,
and cuSPARSE; every result checked against float64, timed in interleaved rounds (least median).
Writes ``spmv-registers-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import itertools
import sys

import torch
import triton
from scipy.stats import gmean

from seer.datasets.cases import SKEWED_FAMILIES, skewed_round_robin
from seer.kernels import spmv
from seer.profiling import _least_of_rounds, relative_error

SHAPES = ((512, 4), (1024, 4), (4096, 16))  # nonzeros per program, warps
CAPS = (None, 32, 24)


def configurations() -> dict:
    return {f"merge_c{chunk}_w{warps}" + (f"_r{cap}" if cap else ""): (chunk, warps, cap)
            for (chunk, warps), cap in itertools.product(SHAPES, CAPS)}


def merge(csr, x, sub_rows, chunk: int, warps: int = 4, cap: int | None = None, sub: int = 32) -> torch.Tensor:
    """The shipped merge kernel through Triton's own launch: ``chunk`` nonzeros per program on
    ``warps`` warps, a register cap if given, ``sub_rows`` the brackets of ``sub`` nonzeros."""
    y = torch.zeros(csr.rows, dtype=torch.float32, device=x.device)
    options = {"num_warps": warps, **({"maxnreg": cap} if cap else {})}
    spmv._merge_kernel[(triton.cdiv(csr.nnz, chunk),)](
        csr.indptr, csr.indices, csr.values, x, x.stride(0), x, y, y.stride(0), sub_rows, csr.nnz, chunk, sub, 0,
        **options)
    return y


def measure(case, loaded) -> dict:
    parts, (x,) = case.build(loaded)
    csr = spmv.problem(parts)
    reference = spmv.reference(csr, x)
    sub_rows = spmv._bracket_rows(csr, 32)
    runs = {name: (lambda c=c: merge(csr, x, sub_rows, *c)) for name, c in configurations().items()}
    runs["cusparse"] = lambda: case.baselines["cusparse"](csr, x)
    for name, fn in runs.items():
        error = relative_error(fn(), reference)
        if not error <= 1e-4:
            raise AssertionError(f"{name} is wrong on {case.id}: relative error {error:.1e}")
    return {"id": case.id, "nnz": csr.nnz, "time_ms": _least_of_rounds(runs)}


def describe(row: dict) -> str:
    t = row["time_ms"]
    best = min(configurations(), key=t.get)
    return f"merge_c512_w4 {t['merge_c512_w4']:.4f}, {best} {t[best]:.4f}, cuSPARSE {t['cusparse']:.4f} ms"


def markdown(result: dict) -> str:
    rows, names = result["matrices"], list(configurations())
    lines = [f"# Register caps on the merge SpMV kernel, {result['device']['name']}", "",
             f"torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}, measured "
             f"{result['date']}; `{result['command']}`. do_bench medians (L2 flushed), least of three "
             "interleaved rounds; every result checked against float64.", "",
             "Geometric mean per family of `merge_c512_w4` (uncapped, as shipped) time over each "
             "configuration's, and over cuSPARSE's:", "",
             "| family | matrices | " + " | ".join(names) + " | cusparse |", "|" + "---|" * (3 + len(names))]
    for family in SKEWED_FAMILIES:
        group = [r for r in rows if r["id"].startswith(family)]
        if group:
            cells = [gmean([r["time_ms"]["merge_c512_w4"] / r["time_ms"][n] for r in group])
                     for n in [*names, "cusparse"]]
            lines.append(f"| {family.rstrip('/')} | {len(group)} | " + " | ".join(f"{v:.2f}x" for v in cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-registers", skewed_round_robin, measure, describe, markdown, budget_s=200,
               copy_ceiling=False)


if __name__ == "__main__":
    sys.exit(main())
