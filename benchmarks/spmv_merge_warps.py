"""Fewer warps per merge chunk: more nonzeros per lane, fewer steps of the scan across lanes?

    python benchmarks/spmv_merge_warps.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 200]

Why: on R-MATs of a few million nonzeros merge runs 3.8-5.0 instructions per nonzero against
cuSPARSE's 1.6-1.7 and a quarter to a third of its stall cycles are on shared memory (NOTES SpMV
26), and the row search is not the cause (narrower brackets changed nothing). That leaves the
segmented scan: on 4 warps a chunk of 512 nonzeros puts 4 in each lane, so most of the scan runs
across lanes (shuffles) and across warps (shared memory and a barrier). The same chunk on 2 or 1
warps puts 8 or 16 in each lane: more of the scan runs in registers, none of it across warps on
1 warp, at the price of fewer warps resident if registers grow. Each skewed matrix of the large
suite (round-robin by family) gets ``merge_c256`` / ``merge_c512`` / ``merge_c1024`` on 1, 2 and
4 warps (4: as shipped; brackets of 32) and cuSPARSE; every result checked against float64,
timed in interleaved rounds (least of the do_bench medians, L2 flushed). Writes
``spmv-merge-warps-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import sys

from large_set import checked_times
from spmv_merge_brackets import against_shipped, family_table
from spmv_registers import merge

from seer.datasets.cases import skewed_round_robin
from seer.kernels import spmv

CHUNKS = (256, 512, 1024)
WARPS = (1, 2, 4)  # 4: as shipped
SHIPPED = "merge_c512_w4"


def configurations() -> dict[str, tuple[int, int]]:
    return {f"merge_c{chunk}_w{warps}": (chunk, warps) for chunk in CHUNKS for warps in WARPS}


def timed_calls(csr, x) -> dict:
    sub_rows = spmv._bracket_rows(csr, 32)
    runs = {name: (lambda c=c: merge(csr, x, sub_rows, *c)) for name, c in configurations().items()}
    runs["torch_csr"] = lambda: spmv.VARIANTS["torch_csr"].run(csr, x)
    return runs


def measure(case, loaded) -> dict:
    return checked_times(case, loaded, timed_calls)


def describe(row: dict) -> str:
    return against_shipped(row, SHIPPED, configurations())


def markdown(result: dict) -> str:
    return family_table(result, "Warps per merge chunk", SHIPPED, configurations(), "`_w<W>`: W warps per program")


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-merge-warps", skewed_round_robin, measure, describe, markdown, budget_s=200,
               copy_ceiling=False)


if __name__ == "__main__":
    sys.exit(main())
