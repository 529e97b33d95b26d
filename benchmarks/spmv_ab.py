"""The SpMV variants' kernel time under two versions of kernels/spmv.py, in one process.

A change inside a kernel's loop reaches every input of the variants that run it. Here the version
before the change is imported from a file as a module of its own, so both versions' kernels run side
by side on one GPU, alternated within each round (gemm_ab.py does the same for GEMM):

    git show <commit>:kernels/spmv.py > .carry/spmv-before.py                     (this machine)
    python benchmarks/spmv_ab.py --before .carry/spmv-before.py --label "<change>" \\
        --matrices .carry/suitesparse --out benchmarks/results

Inputs: the large generated suite (10M-50M nonzeros: bands, stencils, R-MAT, log-normal rows,
replicas of real matrices), each kind's smallest and largest by turns until ``--budget-s``. Each side
has a matrix object of its own (a variant's plan is cached on the matrix under a key both versions
share). Every result is checked against float64 first; each time is the least of three interleaved
rounds of do_bench medians (L2 flushed). ``merge_c512`` is the control where the change leaves it
alone. Writes ``spmv-ab-<device>.json`` and ``.md`` under ``--out``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from scipy.stats import gmean

import gemm_ab
from large_set import by_turns, check_all
from seer.datasets.cases import spmv_cases
from seer.kernels import spmv as after
from seer.profiling import _least_of_rounds, device_tag, environment, measured_within_budget, provenance, write_result

VARIANTS = ("scalar_r128", "vector_g4", "vector_g16", "vector_g64", "vector_g256", "diagonal_r128", "offsets_i16",
            "merge_c512")


def load_before(path: Path):
    """``path`` imported as ``seer.kernels.spmv_before``: its kernels are JIT functions of their own."""
    return gemm_ab.load_before(path, "seer.kernels.spmv_before")


def checked_runs(before, parts, x, case_id: str) -> tuple[dict, object]:
    """``({"<variant>@<side>": call}, the after side's matrix)`` on one input, every call's result checked
    against float64."""
    sides = {"before": before.problem(parts), "after": after.problem(parts)}
    runs = {f"{name}@{side}": (lambda m=module, c=sides[side], n=name: m.VARIANTS[n].run(c, x))
            for name in VARIANTS for side, module in (("before", before), ("after", after))}
    check_all(runs, after.reference(sides["after"], x), case_id)
    return runs, sides["after"]


def measure(before, case, loaded) -> dict:
    parts, (x,) = case.build(loaded)
    runs, csr = checked_runs(before, parts, x, case.id)  # the matrix validated once, not again for its sizes
    return {"id": case.id, "group": case.group, "rows": csr.rows, "nnz": csr.nnz, "time_ms": _least_of_rounds(runs)}


def describe(row: dict) -> str:
    return " ".join(f"{name} {row['time_ms'][f'{name}@after'] / row['time_ms'][f'{name}@before']:.3f}"
                    for name in VARIANTS)


def markdown(result: dict) -> str:
    rows = result["matrices"]
    lines = [f"# SpMV variants before and after: {result['label']}, {result['device']['name']}", "",
             provenance(result, result["command"]) + f". Before: `{result['before']}`; after: the working tree. "
             "Least of three interleaved rounds of each side's do_bench median (L2 flushed); every result checked "
             "against float64. after / before < 1: the change is faster.", "",
             "| variant | matrices | after / before, geometric mean | min | max |", "|---|---|---|---|---|"]
    for name in VARIANTS:
        ratios = [r["time_ms"][f"{name}@after"] / r["time_ms"][f"{name}@before"] for r in rows]
        control = " (control: unchanged)" if name == "merge_c512" else ""
        if ratios:
            lines.append(f"| {name}{control} | {len(ratios)} | {gmean(ratios):.3f} | {min(ratios):.3f} | "
                         f"{max(ratios):.3f} |")
    lines += ["", "| matrix | nnz | " + " | ".join(VARIANTS) + " |", "|---|---|" + "---|" * len(VARIANTS)]
    lines += [f"| {r['id']} | {r['nnz']:,} | " + " | ".join(
        f"{r['time_ms'][f'{n}@after'] / r['time_ms'][f'{n}@before']:.3f}" for n in VARIANTS) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="kernels/spmv.py before the change")
    parser.add_argument("--label", required=True, help="the change, in a few words")
    parser.add_argument("--matrices", type=Path, required=True, help="real matrices the replicas are built from")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=200)
    args = parser.parse_args()
    before = load_before(args.before)
    generated = [c for c in spmv_cases([args.matrices], synthetic="large") if c.source != "real"]
    groups = {}
    for case in generated:
        groups.setdefault(case.group, []).append(case)
    cases = by_turns(list(groups.values()))
    rows = measured_within_budget(cases, lambda case, loaded: measure(before, case, loaded), args.budget_s, describe)
    result = {**environment(torch.device("cuda")), "command": " ".join(["python", *sys.argv]), "label": args.label,
              "before": str(args.before), "matrices": rows}
    write_result(args.out, f"spmv-ab-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
