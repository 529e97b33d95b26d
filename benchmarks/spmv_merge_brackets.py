"""Narrower row brackets in the merge kernel: fewer search steps per nonzero on skewed matrices?

    python benchmarks/spmv_merge_brackets.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 200]

Why: Nsight Compute (``spmv-ncu-small-h200.md``, NOTES SpMV 26) has merge bound by its own
instructions on R-MATs of a few million nonzeros: 3.8-5.0 per nonzero against cuSPARSE's 1.6-1.7
at the same L2 traffic. Each nonzero finds its row by a binary search inside a bracket of rows,
``sub_rows[k // SUB]`` to ``sub_rows[k // SUB + 1]``, one load of ``indptr`` per halving; the
shipped brackets hold 32 nonzeros. Narrower ones cost a longer bracket array (nnz / SUB entries,
built once per matrix) and leave fewer halvings. Each skewed matrix of the large suite (R-MAT,
log-normal rows, permuted replicas, round-robin by family) gets ``merge_c256`` and ``merge_c512``
with brackets of 4, 8, 16 and 32 nonzeros, and cuSPARSE; every result checked against float64,
timed in interleaved rounds (least of the do_bench medians, L2 flushed). Writes
``spmv-merge-brackets-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import sys

from large_set import checked_times
from scipy.stats import gmean
from spmv_registers import merge

from seer.datasets.cases import SKEWED_FAMILIES, skewed_round_robin
from seer.kernels import spmv

CHUNKS = (256, 512)
BRACKETS = (4, 8, 16, 32)  # 32: as shipped
SHIPPED = "merge_c512_b32"


def configurations() -> dict[str, tuple[int, int]]:
    return {f"merge_c{chunk}_b{sub}": (chunk, sub) for chunk in CHUNKS for sub in BRACKETS}


def timed_calls(csr, x) -> dict:
    brackets = {sub: spmv._bracket_rows(csr, sub) for sub in BRACKETS}
    runs = {name: (lambda chunk=chunk, sub=sub: merge(csr, x, brackets[sub], chunk, sub=sub))
            for name, (chunk, sub) in configurations().items()}
    runs["torch_csr"] = lambda: spmv.VARIANTS["torch_csr"].run(csr, x)
    return runs


def measure(case, loaded) -> dict:
    return checked_times(case, loaded, timed_calls)


def against_shipped(row: dict, shipped: str, names) -> str:
    """One matrix's progress line: the shipped configuration, the best of ``names`` and cuSPARSE."""
    t = row["time_ms"]
    best = min(names, key=t.get)
    return f"{shipped} {t[shipped]:.4f}, {best} {t[best]:.4f}, cuSPARSE {t['torch_csr']:.4f} ms"


def describe(row: dict) -> str:
    return against_shipped(row, SHIPPED, configurations())


def groups(rows: list[dict]):
    for family in SKEWED_FAMILIES:
        for label, keep in (("nnz < 10M", lambda n: n < 10_000_000), ("nnz >= 10M", lambda n: n >= 10_000_000)):
            group = [r for r in rows if r["id"].startswith(family) and keep(r["nnz"])]
            if group:
                yield f"{family.rstrip('/')}, {label}", group


def family_table(result: dict, title: str, shipped: str, names, legend: str) -> str:
    """A results file: per family and size, the shipped configuration's time over each of
    ``names``' and cuSPARSE's."""
    rows, names = result["matrices"], [*names, "torch_csr"]
    lines = [f"# {title}, {result['device']['name']}", "",
             f"torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}, measured "
             f"{result['date']}; `{result['command']}`. do_bench medians (L2 flushed), least of three "
             "interleaved rounds; every result checked against float64.", "",
             f"Geometric mean per family and size of `{shipped}` (as shipped) time over each configuration's "
             f"(> 1: faster than shipped); {legend}.", "",
             "| inputs | matrices | " + " | ".join(names) + " |", "|" + "---|" * (2 + len(names))]
    for label, group in groups(rows):
        cells = [gmean([r["time_ms"][shipped] / r["time_ms"][n] for r in group]) for n in names]
        lines.append(f"| {label} | {len(group)} | " + " | ".join(f"{v:.2f}x" for v in cells) + " |")
    return "\n".join(lines) + "\n"


def markdown(result: dict) -> str:
    return family_table(result, "Row brackets of the merge SpMV kernel", SHIPPED, configurations(),
                        "`_b<SUB>`: brackets of SUB nonzeros")


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-merge-brackets", skewed_round_robin, measure, describe, markdown, budget_s=200,
               copy_ceiling=False)


if __name__ == "__main__":
    sys.exit(main())
