"""cuSPARSE's SpMV prepared once per matrix, against torch's call of it and seer's kernels.

    python benchmarks/spmv_cusparse.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: on R-MATs of a few million nonzeros cuSPARSE's SpMV kernel alone beats `merge_c512` (15.3
against 18.9 us on the H200), but torch's call runs a partition kernel before it every time (8.7-9.4
us), and so loses (NOTES SpMV 26); on a band of 49 nonzeros a row its kernel (42.0 us) also beats
`vector_g16` (45.3). ``cusparseSpMV_preprocess`` does the partition once per matrix
(:class:`seer.cusparse.SpmvPlan`). Each large matrix (round-robin by family) gets, in one process
and interleaved rounds (least of the do_bench medians, L2 flushed): `merge_c512`, the variant its
device's profile table found fastest among seer's kernels (cuSPARSE's own calls left out), `torch_csr` (torch's call), and plans with cuSPARSE's CSR
algorithms 1 and 2, preprocessed or not; each plan's one-time cost (descriptors, workspace,
preprocessing; host time, synchronised) is recorded. Every result is checked against float64.
Writes ``spmv-cusparse-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import statistics
import sys

import torch
from scipy.stats import gmean
from spmv_floor import FAMILIES, SINGLE, family, round_robin, table_winners

from seer.cusparse import SpmvPlan
from seer.kernels import spmv
from seer.profiling import _least_of_rounds, relative_error, synchronised_us

PLANS = {"cusparse_alg1_pre": ("csr_alg1", True), "cusparse_alg1": ("csr_alg1", False),
         "cusparse_alg2_pre": ("csr_alg2", True)}
PLAN_TRIES = 5


def calls_cusparse(variant: str) -> bool:
    """The variants that are cuSPARSE's own call (torch's, or prepared once as the plans here are),
    left out of "the shipped best": it is seer's kernels the plans are measured against."""
    return variant == "torch_csr" or variant.startswith("cusparse")


def planned(csr, algorithm: str, preprocess: bool) -> tuple[SpmvPlan, float]:
    """A plan and the median host µs of making one (synchronised at both ends)."""
    made = [synchronised_us(lambda: SpmvPlan(csr.indptr, csr.indices, csr.values, csr.shape, algorithm, preprocess))
            for _ in range(PLAN_TRIES)]
    return made[-1][0], statistics.median(us for _, us in made)


def measure(case, loaded) -> dict:
    parts, (x,) = case.build(loaded)
    csr = spmv.problem(parts)
    reference = spmv.reference(csr, x)
    table_best = table_winners(torch.cuda.get_device_name(), calls_cusparse).get(case.id, SINGLE)
    runs = {name: (lambda v=spmv.VARIANTS[name]: v.run(csr, x)) for name in dict.fromkeys((SINGLE, table_best,
                                                                                          "torch_csr"))}
    plan_us = {}
    for name, (algorithm, preprocess) in PLANS.items():
        plan, plan_us[name] = planned(csr, algorithm, preprocess)
        y = torch.empty(csr.rows, device=x.device)
        runs[name] = lambda plan=plan, y=y: plan(x, y)
    for name, fn in runs.items():
        error = relative_error(fn(), reference)
        if not error <= 1e-4:
            raise AssertionError(f"{name} is wrong on {case.id}: relative error {error:.1e}")
    return {"id": case.id, "family": family(case.id), "rows": csr.rows, "cols": csr.cols, "nnz": csr.nnz,
            "table_best": table_best, "time_ms": _least_of_rounds(runs), "plan_us": plan_us}


def shipped_best(row: dict) -> float:
    return min(row["time_ms"][SINGLE], row["time_ms"][row["table_best"]])


def summary(group: list[dict]) -> list[str]:
    """Geometric means over ``group`` of each plan against the shipped best and torch's call, and the
    oracle over ``merge_c512`` with and without the best plan."""
    cells = [str(len(group))]
    for name in PLANS:
        cells.append(f"{gmean([shipped_best(r) / r['time_ms'][name] for r in group]):.2f}x")
    for name in PLANS:
        cells.append(f"{gmean([r['time_ms']['torch_csr'] / r['time_ms'][name] for r in group]):.2f}x")
    oracle = gmean([r["time_ms"][SINGLE] / shipped_best(r) for r in group])
    with_plan = gmean([r["time_ms"][SINGLE] / min(shipped_best(r), r["time_ms"]["cusparse_alg1_pre"]) for r in group])
    wins = sum(r["time_ms"]["cusparse_alg1_pre"] < shipped_best(r) for r in group)
    return cells + [f"{oracle:.2f}x", f"{with_plan:.2f}x", str(wins)]


def groups(rows: list[dict]):
    yield "all", rows
    for name in FAMILIES:
        members = [r for r in rows if r["family"] == name]
        if members:
            yield name, members


def markdown(result: dict) -> str:
    rows = result["matrices"]
    names = list(PLANS)
    lines = [f"# cuSPARSE's SpMV prepared once per matrix, {result['device']['name']}", "",
             f"torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}, CUDA "
             f"{result['versions'].get('cuda')}, measured {result['date']}; `{result['command']}`. do_bench medians "
             "(L2 flushed), least of three interleaved rounds; every result checked against float64.", "",
             f"*Shipped best*: the lesser of `{SINGLE}` and the variant the device's profile table found fastest. "
             "Plans (`seer.cusparse.SpmvPlan`): `_alg1` / `_alg2` cuSPARSE's CSR algorithms, `_pre` with "
             "`cusparseSpMV_preprocess` run once when the plan is made. Speed-ups are geometric means (> 1: the "
             "plan is faster).", "",
             "| inputs | matrices | " + " | ".join(f"{n} over shipped best" for n in names) + " | "
             + " | ".join(f"{n} over torch_csr" for n in names)
             + f" | oracle over `{SINGLE}` | with cusparse_alg1_pre | alg1_pre beats shipped best on |",
             "|" + "---|" * (2 * len(names) + 5)]
    for label, group in groups(rows):
        lines.append(f"| {label} | " + " | ".join(summary(group)) + " |")
    lines += ["", "Per matrix (ms; plan cost in host µs, median of "
              f"{PLAN_TRIES}, synchronised):", "",
              f"| matrix | nnz | table's best | {SINGLE} | best shipped | torch_csr | "
              + " | ".join(names) + " | " + " | ".join(f"{n} plan µs" for n in names) + " |",
              "|" + "---|" * (6 + 2 * len(names))]
    for r in rows:
        t = r["time_ms"]
        lines.append(f"| {r['id']} | {r['nnz']:,} | {r['table_best']} | {t[SINGLE]:.4f} | {shipped_best(r):.4f} | "
                     f"{t['torch_csr']:.4f} | " + " | ".join(f"{t[n]:.4f}" for n in names) + " | "
                     + " | ".join(f"{r['plan_us'][n]:.0f}" for n in names) + " |")
    return "\n".join(lines) + "\n"


def describe(row: dict) -> str:
    t = row["time_ms"]
    return (f"shipped {shipped_best(row):.4f} torch {t['torch_csr']:.4f} "
            + " ".join(f"{n} {t[n]:.4f}" for n in PLANS))


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-cusparse", round_robin, measure, describe, markdown, budget_s=300, copy_ceiling=False)


if __name__ == "__main__":
    sys.exit(main())
