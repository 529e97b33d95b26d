"""Where a loop of SpMV calls on one matrix spends its time: the first call against the rest.

``spmv_unhinted.py --matrices`` times whole loops of N ``seer.dispatch`` calls (first call
included). Where the choice for N calls (``calls=N``) differs from the first choice (``calls=1``)
and its loop is not faster, the loss is either one-time (the first call: validation, decision, the
variant's plan and its host work, which the tables' ``prepare_ms`` leaves out where it overlaps
the device) or every call's (host time per call, L2). On the matrices of such a loops file whose
two choices differ, this times each path's first call on a new matrix object (synchronised), then
its next N - 1 calls (synchronised at the end), the least of alternated rounds for each part.

    python benchmarks/spmv_loop_parts.py --matrices .carry/suitesparse \\
        --loops benchmarks/results/spmv-unhinted-loops-h100.json

Writes ``benchmarks/results/spmv-loop-parts-<device>.json`` / ``.md``; ``--render RESULT.json``
writes a result's Markdown again from its JSON.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.stats import gmean
from spmv_unhinted import checked_matrix

import seer
from seer.datasets.cases import spmv_cases
from seer.profiling import device_tag, environment, measured_within_budget, synchronised_us, write_result


def first_and_rest_us(call, matrix, n: int) -> tuple[float, float]:
    """``call``'s first call on ``matrix`` (µs, synchronised), then µs per call of its next n - 1."""
    first = synchronised_us(lambda: call(matrix))[1]

    def others():
        for _ in range(n - 1):
            call(matrix)
    return first, synchronised_us(others)[1] / (n - 1)


def matrix_parts(case, loaded, n: int, rounds: int) -> dict:
    hints = {"kept": 1, "hinted": n}
    new_matrix, x = checked_matrix(case, loaded, hints.values())
    A = new_matrix()
    row = {"id": case.id, "nnz": int(A.values().numel())}
    for path, calls in hints.items():
        row[f"{path}_variant"] = seer.explain("spmv", (A, x), calls=calls).variant
        row[f"{path}_first_us"] = row[f"{path}_rest_us"] = float("inf")
    for round_ in range(rounds):  # alternated, each round starting with the other path
        for path in sorted(hints, reverse=bool(round_ % 2)):
            first, rest = first_and_rest_us(lambda B, c=hints[path]: seer.dispatch("spmv", (B, x), calls=c),
                                            new_matrix(), n)
            row[f"{path}_first_us"] = min(row[f"{path}_first_us"], first)
            row[f"{path}_rest_us"] = min(row[f"{path}_rest_us"], rest)
    # The loop per call, rebuilt from its parts (spmv_unhinted.py times it whole).
    for path in hints:
        row[f"{path}_loop_us"] = (row[f"{path}_first_us"] + (n - 1) * row[f"{path}_rest_us"]) / n
    return row


L2_SIZED_BELOW = 6_000_000  # nnz under which the H100's loops were bound by the host (NOTES SpMV 50)


def by_hinted_variant(rows: list[dict]) -> list[tuple]:
    """Per variant the hint chose: (variant, matrices under L2_SIZED_BELOW nonzeros, their median
    later-call time over the kept variant's, the same two from there up; None where there are none)."""
    def band(mine):
        return len(mine), float(np.median([r["hinted_rest_us"] / r["kept_rest_us"] for r in mine])) if mine else None

    out = []
    for variant in sorted({r["hinted_variant"] for r in rows}):
        mine = [r for r in rows if r["hinted_variant"] == variant]
        out.append((variant, *band([r for r in mine if r["nnz"] < L2_SIZED_BELOW]),
                    *band([r for r in mine if r["nnz"] >= L2_SIZED_BELOW])))
    return out


def markdown(result: dict) -> str:
    n, rows = result["calls"], result["matrices"]
    first_gap = [r["hinted_first_us"] - r["kept_first_us"] for r in rows]
    rest_ratio = [r["hinted_rest_us"] / r["kept_rest_us"] for r in rows]
    slower = [r for r in rows if r["hinted_loop_us"] > 1.03 * r["kept_loop_us"]]
    speedup = float(gmean([r["kept_loop_us"] / r["hinted_loop_us"] for r in rows]))
    lines = [f"# SpMV loops in parts, {result['device']['name']}", "",
             f"{result['date']}; torch {result['versions']['torch']}, triton {result['versions']['triton']}; "
             f"`{result['command']}`", "",
             f"Matrices of `{result['loops']}` whose choice for {n:,} calls differs from the first choice. "
             f"Per path: its first call on a new matrix object and the µs per call of the next {n - 1:,} "
             f"(each synchronised, the least of {result['rounds']} alternated rounds); loop: both together, "
             f"per call. kept: `calls=1`; hinted: `calls={n}`.", "",
             f"Median over {len(rows)} matrices: the hinted first call {np.median(first_gap):+.0f} µs against "
             f"the kept one's; the hinted later calls {np.median(rest_ratio):.2f}x the kept ones' time. "
             f"The hinted loops {speedup:.2f}x faster than the kept ones (geometric mean); {len(slower)} slower "
             f"by more than 3%, {sum(r['nnz'] < L2_SIZED_BELOW for r in slower)} of them under "
             f"{L2_SIZED_BELOW:,} nonzeros.", "",
             f"| hinted variant | matrices under {L2_SIZED_BELOW:,} nnz | their later calls over the kept ones' "
             f"(median) | matrices from {L2_SIZED_BELOW:,} | their later calls over the kept ones' (median) |",
             "|---|---|---|---|---|"]
    lines += [f"| {v} | {n_small} | {'-' if r_small is None else f'{r_small:.2f}x'} | {n_large} | "
              f"{'-' if r_large is None else f'{r_large:.2f}x'} |" for v, n_small, r_small, n_large, r_large
              in by_hinted_variant(rows)]
    lines += ["", "| matrix | nnz | kept | first µs | later µs | loop µs | hinted | first µs | later µs | loop µs |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['nnz']:,} | {r['kept_variant']} | {r['kept_first_us']:,.0f} | "
              f"{r['kept_rest_us']:.1f} | {r['kept_loop_us']:.1f} | {r['hinted_variant']} | "
              f"{r['hinted_first_us']:,.0f} | {r['hinted_rest_us']:.1f} | {r['hinted_loop_us']:.1f} |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=Path, help="folder of the real matrices")
    parser.add_argument("--loops", type=Path, help="spmv-unhinted-loops-<device>.json")
    parser.add_argument("--render", type=Path, help="a result of this script: write its Markdown again (CPU)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=150)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    if args.render is not None:
        result = json.loads(args.render.read_text())
        write_result(args.render.parent, args.render.stem, result, markdown(result))
        return 0
    if args.matrices is None or args.loops is None:
        parser.error("give --matrices and --loops (on a GPU), or --render a result")
    loops = json.loads(args.loops.read_text())
    wanted = {m["id"] for m in loops["matrices"] if m["first_choice"] != m["choice_for_n"]}
    cases = [c for c in spmv_cases([args.matrices], synthetic="large") if c.id in wanted]
    rows = measured_within_budget(
        cases, lambda case, loaded: matrix_parts(case, loaded, loops["calls"], args.rounds), args.budget_s,
        lambda r: f"kept {r['kept_first_us']:.0f} + {r['kept_rest_us']:.1f}/call, "
                  f"hinted {r['hinted_first_us']:.0f} + {r['hinted_rest_us']:.1f}/call")
    result = {"benchmark": "SpMV loops in parts", **environment(torch.device("cuda")),
              "command": " ".join(["python", *sys.argv]), "loops": str(args.loops), "calls": loops["calls"],
              "rounds": args.rounds, "matrices": rows}
    write_result(args.out, f"spmv-loop-parts-{device_tag(result['device']['name'])}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
