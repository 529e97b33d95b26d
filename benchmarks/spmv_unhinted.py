"""SpMV calls without a ``calls`` hint: the first choice kept, against the choice made again as
calls on one matrix add up (what ``seer.dispatch`` does on matrices of 1M+ nonzeros: at the 10th,
100th and 1,000th call it decides for that many calls).

From a profile table (CPU): the nested CV's held-out choices for 1, 10, 100 and 1,000 calls on the
validated path (each matrix scored by trees trained without its family, the statistics charged
as ``benchmarks/selection.py`` charges them), and for a loop of N calls on one matrix the cost of
four policies against the oracle for N calls (the least over variants of N t + p): the 1-call
choice kept; the choice made again at each count reached, as dispatch makes it (changed only to a
variant the choices for every larger count agree on; a variant's preparation paid on its first use
only: dispatch keeps every plan with the matrix); switched to each count's choice as it is reached
(dispatch's first rule); and the choice hinted with N.

    python benchmarks/spmv_unhinted.py datasets/profiles/spmv-h100.csv \
        --validation benchmarks/results/spmv-validation-h100.json

On a GPU (``--matrices``): loops of N ``seer.dispatch`` calls on the large derived and synthetic
matrices as a user makes them, each on a new tensor object (so seer decides afresh), synchronised
wall time of the whole loop (first call, re-decisions and bindings included), unhinted, unhinted
under dispatch's first rule (``_REQUIRE_AGREEMENT`` off: each count's tree followed), with
``calls=1`` (the first choice kept), with ``calls=N``, and torch CSR's ``A @ x``; the least of
alternated rounds.

    python benchmarks/spmv_unhinted.py --matrices .carry/suitesparse --calls 1000 --budget-s 150

Writes ``benchmarks/results/spmv-unhinted-<device>.json`` / ``.md`` (table) or
``spmv-unhinted-loops-<device>.json`` / ``.md`` (GPU).
"""
from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from dispatch import first_calls
from scipy.stats import gmean
from selection import validation_costs

import seer
from seer.datasets.cases import spmv_cases
from seer.features.spmv import HOST_BOUND_BELOW, redecides
from seer.profiling import device_tag, environment, measured_within_budget, provenance, write_result
from seer.table import read_table
from seer.train import TwoStageSelector

COUNTS = (1, 10, 100, 1000)  # the shipped SpMV models' call counts
LOOPS = (1, 10, 30, 100, 300, 1000, 3000, 10000)
POLICIES = {"kept": "first choice kept", "again": "decided again", "escaped": "decided again or escaped",
            "switched": "switched at each count", "hinted": "hinted with N"}


# ------------------------------------------------------------------ from the table
def held_out_choices(table, free: np.ndarray) -> dict[int, np.ndarray]:
    """Variant index per row for each call count: the validated path's held-out choice."""
    frame = TwoStageSelector().evaluate(table, calls=COUNTS, free_gather_ms=free).validated_held_out
    index = {v: i for i, v in enumerate(table.variants)}
    return {c: frame[f"choice@{c}"].map(index).to_numpy() for c in COUNTS}


def loop_ms(times: np.ndarray, prepare: np.ndarray, schedule: list[tuple[int, np.ndarray]], n: int) -> np.ndarray:
    """ms per row of ``n`` calls run by ``schedule``: (first call, variant per row) in call order, a
    variant's preparation paid the first time it runs."""
    rows = np.arange(len(times))
    total, paid = np.zeros(len(times)), np.zeros(times.shape, dtype=bool)
    for k, (start, chosen) in enumerate(schedule):
        if start > n:
            break
        end = min(schedule[k + 1][0], n + 1) if k + 1 < len(schedule) else n + 1
        total += (end - start) * times[rows, chosen] + np.where(paid[rows, chosen], 0.0, prepare[rows, chosen])
        paid[rows, chosen] = True
    return total


def redeciding(table) -> np.ndarray:
    """Per row, whether dispatch decides again on that matrix: the feature module's own rule."""
    return redecides({"nnz": table.frame["nnz"].to_numpy()})


def decided_again(choice: dict[int, np.ndarray], redeciding_rows: np.ndarray,
                  escape: bool) -> list[tuple[int, np.ndarray]]:
    """The schedule of seer.dispatch's rule: at each count reached, to the choice for it where the
    choices for every larger count agree on it; with ``escape`` also where none of them keeps the
    variant in use (the agreement alone keeps a variant every later tree rejects: NOTES SpMV 76)."""
    schedule, current = [], choice[1]
    for k, c in enumerate(COUNTS):
        later = [choice[d] for d in COUNTS[k:]]
        move = np.all([d == choice[c] for d in later], axis=0)
        if escape:
            move |= np.all([d != current for d in later], axis=0)
        current = np.where(redeciding_rows & move, choice[c], current)
        schedule.append((c, current))
    return schedule


def policies(table, choice: dict[int, np.ndarray], free: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """ms per row of ``n`` calls under each policy, the statistics' cost included once. "switched" is
    dispatch's first rule (NOTES SpMV 46): each count's choice taken when the count is reached,
    whatever the larger counts choose; kept beside the shipped rule because which of the two loses
    less moves with the variants the tables hold. "escaped": the shipped rule, which also leaves a
    variant no later count's choice keeps (a candidate, not shipped)."""
    times, prepare, redeciding_rows = table.times, table.prepare_ms, redeciding(table)
    switched = [(c, np.where(redeciding_rows, choice[c], choice[1])) for c in COUNTS]
    hinted = choice[max(c for c in COUNTS if c <= n)]
    return {"kept": loop_ms(times, prepare, [(1, choice[1])], n) + free,
            "again": loop_ms(times, prepare, decided_again(choice, redeciding_rows, escape=False), n) + free,
            "escaped": loop_ms(times, prepare, decided_again(choice, redeciding_rows, escape=True), n) + free,
            "switched": loop_ms(times, prepare, switched, n) + free,
            "hinted": loop_ms(times, prepare, [(1, hinted)], n) + free}


def table_result(table_path: Path, validation: Path) -> dict:
    table = read_table(table_path)
    free, notes = validation_costs(table, validation)
    choice = held_out_choices(table, free)
    subsets = {"real": table.sources == "real", "large": table.sources != "real"}
    loops = []
    for n in LOOPS:
        oracle = (n * table.times + table.prepare_ms).min(axis=1)
        costs = policies(table, choice, free, n)
        loops.append({"calls": n, **{subset: {name: float(gmean(oracle[mask] / ms[mask])) for name, ms in costs.items()}
                                     for subset, mask in subsets.items()}})
    meta = table.meta
    return {"benchmark": "SpMV calls without a hint, from the table", "device": meta["device"],
            "versions": meta.get("versions", {}), "measured": meta.get("date"),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "table": str(table_path),
            "validation": str(validation), "command": " ".join(["python", *sys.argv]),
            "subset_rows": {s: int(m.sum()) for s, m in subsets.items()},
            "redeciding_rows": {s: int((m & redeciding(table)).sum()) for s, m in subsets.items()},
            "loops": loops, "notes": notes}


def table_markdown(result: dict) -> str:
    versions = result["versions"]
    lines = [f"# SpMV calls without a hint, {result['device']['name']} (from the table)", "",
             f"Scored {result['date']}; table `{result['table']}` measured {result['measured']} (torch "
             f"{versions.get('torch')}, triton {versions.get('triton')}), statistics charged from "
             f"`{result['validation']}`; command: `{result['command']}`.", "",
             "Held-out fraction of the oracle for N calls on one matrix (geometric mean of the oracle's cost over "
             "the policy's, each matrix scored by trees trained without its family, validated path): the 1-call "
             "choice kept; decided again at the 10th, 100th and 1,000th call for that many calls (changed only to a "
             "variant the choices for every larger count agree on, as shipped; or also to the count's choice where "
             "none of them keeps the variant in use: escaped, a candidate) or switched to each count's choice as it "
             "is reached (dispatch's first rule), on matrices of "
             f"{HOST_BOUND_BELOW:,}+ nonzeros ({result['redeciding_rows']['real']} of "
             f"{result['subset_rows']['real']} real, {result['redeciding_rows']['large']} of "
             f"{result['subset_rows']['large']} large), as `seer.dispatch` does without a hint; and hinted "
             "with N (`calls=N`, the tree for the largest count <= N).", "",
             "| N calls | " + " | ".join(f"{s}: {POLICIES[p]}" for s in ("real", "large") for p in POLICIES) + " |",
             "|---|" + "---|" * (2 * len(POLICIES))]
    for row in result["loops"]:
        lines.append(f"| {row['calls']:,} | " + " | ".join(f"{row[s][p]:.3f}" for s in ("real", "large")
                                                           for p in POLICIES) + " |")
    lines += ["", *[f"Note: {n}" for n in result["notes"]]]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ on the GPU
def loop_seconds(paths: dict, new_matrix, n: int, rounds: int) -> dict[str, float]:
    """Least over alternated rounds of each path's ``n`` calls on a new matrix object, synchronised
    (``dispatch.py``'s :func:`first_calls`, timing a loop instead of one call)."""
    def loop(call):
        def calls(matrix):
            for _ in range(n):
                call(matrix)
        return calls

    us = first_calls({name: loop(call) for name, call in paths.items()}, new_matrix, rounds)
    return {name: t / 1e6 for name, t in us.items()}


def checked_matrix(case, loaded, hints) -> tuple:
    """``(new_matrix, x)`` for ``case``: ``new_matrix()`` a new torch CSR object on the same
    arrays each time (so seer decides afresh), after ``seer.dispatch`` with each of ``hints`` for
    ``calls`` was checked against torch CSR."""
    parts, (x,) = case.build(loaded)

    def new_matrix():
        return torch.sparse_csr_tensor(*parts[:3], parts[3])

    expected = new_matrix() @ x
    for calls in hints:
        y = seer.dispatch("spmv", (new_matrix(), x), calls=calls)
        error = ((y - expected).norm() / expected.norm().clamp_min(1e-30)).item()
        if not error < 1e-4:
            raise AssertionError(f"seer (calls={calls}) and torch CSR disagree on {case.id}: {error:.1e}")
    return new_matrix, x


def under_first_rule(call: Callable) -> Callable:
    """``call`` with seer's deciding again under its first rule (NOTES SpMV 46), the shipped rule
    restored after each call so that the other paths of the alternated rounds keep it."""
    dispatch_module = sys.modules["seer.dispatch"]  # ``seer.dispatch`` names the function

    def switched(*args):
        dispatch_module._REQUIRE_AGREEMENT = False
        try:
            return call(*args)
        finally:
            dispatch_module._REQUIRE_AGREEMENT = True
    return switched


def matrix_loops(case, loaded, n: int, rounds: int) -> dict:
    new_matrix, x = checked_matrix(case, loaded, (None, 1, n))
    A = new_matrix()
    paths = {"unhinted": lambda B: seer.dispatch("spmv", (B, x)),
             "switched": under_first_rule(lambda B: seer.dispatch("spmv", (B, x))),
             "kept": lambda B: seer.dispatch("spmv", (B, x), calls=1),
             "hinted": lambda B: seer.dispatch("spmv", (B, x), calls=n),
             "torch": lambda B: B @ x}
    seconds = loop_seconds(paths, new_matrix, n, rounds)
    row = {"id": case.id, "nnz": int(A.values().numel()), "first_choice": seer.explain("spmv", (A, x)).variant,
           "choice_for_n": seer.explain("spmv", (A, x), calls=n).variant,
           **{f"{name}_s": s for name, s in seconds.items()}}
    # Each round's matrices stay cached with their plans (index copies, cuSPARSE buffers): a dozen
    # entries a large matrix, which the next matrices' loops would allocate around.
    seer.clear_cache()
    return row


def loops_markdown(result: dict) -> str:
    rows, n = result["matrices"], result["calls"]
    lines = [f"# SpMV loops of {n:,} calls without a hint, {result['device']['name']}", "",
             provenance(result, result["command"]), "",
             f"Per large matrix, {n:,} `seer.dispatch` calls on a new torch CSR tensor (first call, re-decisions "
             f"and bindings included), synchronised wall time, the least of {result['rounds']} alternated rounds; "
             "every path's first result checked against torch CSR. Geometric means over the matrices of the "
             "other path's time over the unhinted loop's:", "",
             "| matrices | over the first rule (switched at each count) | over `calls=1` (first choice kept) | "
             "over `calls=N` (hinted) | over torch CSR | unhinted faster than `calls=1` on | "
             "choice changed by N calls on |",
             "|---|---|---|---|---|---|---|"]
    paths = ("switched", "kept", "hinted", "torch")
    if rows:
        unhinted = np.array([r["unhinted_s"] for r in rows])
        ratio = {k: gmean(np.array([r[f"{k}_s"] for r in rows]) / unhinted) for k in paths}
        faster = sum(r["unhinted_s"] < r["kept_s"] for r in rows)
        changed = sum(r["first_choice"] != r["choice_for_n"] for r in rows)
        lines.append(f"| {len(rows)} | " + " | ".join(f"{ratio[k]:.3f}x" for k in paths) + f" | {faster} | {changed} |")
    lines += ["", "| matrix | nnz | first choice | choice for N | unhinted ms | switched ms | calls=1 ms | calls=N ms | "
              "torch ms |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['id']} | {r['nnz']:,} | {r['first_choice']} | {r['choice_for_n']} | "
                     + " | ".join(f"{r[f'{k}_s'] * 1e3:.2f}" for k in ("unhinted", *paths)) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path, nargs="?", help="spmv-<device>.csv: score the policies from it (CPU)")
    parser.add_argument("--validation", type=Path, help="spmv-validation-<device>.json (with a table)")
    parser.add_argument("--matrices", type=Path, help="time loops on the GPU over the large suite of this folder")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--budget-s", type=float, default=150)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    if (args.table is None) == (args.matrices is None) or (args.table is not None and args.validation is None):
        parser.error("give a table with --validation, or --matrices (on a GPU)")
    if args.table is not None:
        result = table_result(args.table, args.validation)
        write_result(args.out, f"spmv-unhinted-{device_tag(result['device']['name'])}", result, table_markdown(result))
        return 0
    device = torch.device("cuda")
    cases = [c for c in spmv_cases([args.matrices], synthetic="large") if c.source != "real"]
    rows = measured_within_budget(cases, lambda case, loaded: matrix_loops(case, loaded, args.calls, args.rounds),
                                  args.budget_s, lambda r: f"unhinted {r['unhinted_s'] * 1e3:.1f} ms, "
                                                           f"calls=1 {r['kept_s'] * 1e3:.1f} ms")
    result = {"benchmark": "SpMV loops without a hint", **environment(device), "command": " ".join(["python", *sys.argv]),
              "calls": args.calls, "rounds": args.rounds, "matrices": rows}
    write_result(args.out, f"spmv-unhinted-loops-{device_tag(result['device']['name'])}", result,
                 loops_markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
