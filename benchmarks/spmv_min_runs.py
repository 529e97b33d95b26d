"""The profile table's slowest cells, timed again over at least 20 runs a round (GPU).

``seer profile`` took each time as the least of three rounds' medians, each round ``do_bench``
over 25 / 3 ms; ``do_bench`` fits as many runs into that as its estimate of one run (an L2 flush
included) allows, so a kernel of a third of a millisecond or more had fewer than 20 runs a round
(a review's finding; ``seer.profiling.time_ms`` now times such a kernel again over a longer span).
This takes the table's inputs whose fastest variant was timed so (by the table's own times and this
GPU's flush), times that variant, the next two and cuSPARSE again as the campaign did (checked
against float64, three interleaved rounds, the least median kept), with every median now over 20
runs or more, and compares:

    python benchmarks/spmv_min_runs.py datasets/profiles/spmv-h200.csv --matrices .carry/suitesparse \\
        --out benchmarks/results --budget-s 240

writes ``spmv-min-runs-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import numpy as np
import torch

from seer.datasets.cases import _cases_of, recorded_inputs
from seer.profiling import (MIN_RUNS, TIMING_ROUNDS, device_tag, environment, measured_within_budget,
                            timed_if_correct, write_result)
from seer.registry import get_op
from seer.table import BASELINE, TIME, read_table

SPAN_MS = 25 / TIMING_ROUNDS  # each round's do_bench span in the campaign
COMPARED = 3  # the row's fastest variants timed again


def l2_flush_ms() -> float:
    """What do_bench's L2 flush before each run (zeroing its buffer) costs on this GPU, in ms: its
    estimate of one run, which set how many runs fitted into a round, included it."""
    import triton
    import triton.testing

    buffer = triton.runtime.driver.active.get_empty_cache_for_benchmark()
    return float(triton.testing.do_bench(buffer.zero_, warmup=1, rep=5, return_mode="median"))


def runs_per_round(ms: np.ndarray, flush_ms: float) -> np.ndarray:
    """How many runs do_bench fitted into a round's span for kernels of ``ms``."""
    return np.maximum(1, np.floor(SPAN_MS / (ms + flush_ms)))


def few_run_rows(table, flush_ms: float) -> list[tuple[str, list[str]]]:
    """(input id, its COMPARED fastest variants) where the fastest was timed over < MIN_RUNS runs a round."""
    times = table.times
    chosen = []
    for i in np.flatnonzero(runs_per_round(np.nanmin(times, axis=1), flush_ms) < MIN_RUNS):
        order = np.argsort(times[i])[:COMPARED]
        chosen.append((table.ids[i], [table.variants[j] for j in order]))
    return chosen


def remeasure(case, loaded, variants: list[str], before: dict) -> dict:
    op = get_op("spmv")
    source, operands = case.build(loaded)
    problem = op.kernels.problem(source)
    # Partials: timed_if_correct checks each a second time into a NaN-filled out=.
    candidates = {f"{TIME}{v}": functools.partial(op.variants[v].run, problem, *operands) for v in variants}
    candidates.update({f"{BASELINE}{name}": (lambda f=fn: f(problem, *operands)) for name, fn in case.baselines.items()})
    _, times = timed_if_correct(op, problem, operands, candidates, case.id)
    return {"id": case.id, "cells": {column: {"table_ms": before[column], "again_ms": ms}
                                     for column, ms in times.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", type=Path)
    parser.add_argument("--matrices", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=240)
    args = parser.parse_args()
    table = read_table(args.table, "spmv")
    flush = l2_flush_ms()
    rows = few_run_rows(table, flush)
    cases = _cases_of([i for i, _ in rows], str(args.table), [args.matrices], device="cuda",
                      **recorded_inputs(table))
    frame = table.frame.set_index("id")
    compared = dict(rows)

    def measure(case, loaded):
        columns = [f"{TIME}{v}" for v in compared[case.id]] + [c for c in frame.columns if c.startswith(BASELINE)]
        return remeasure(case, loaded, compared[case.id], {c: float(frame.at[case.id, c]) for c in columns})

    def describe(row):
        return ", ".join(f"{c.split(':')[1]} {v['again_ms'] / v['table_ms']:.3f}x" for c, v in row["cells"].items())

    measured = measured_within_budget([cases[i] for i, _ in rows], measure, args.budget_s, describe)
    env = environment(torch.device("cuda", torch.cuda.current_device()))
    ratios = [v["again_ms"] / v["table_ms"] for row in measured for v in row["cells"].values()]
    winners_kept = sum(min(row["cells"], key=lambda c: row["cells"][c]["again_ms"] if c.startswith(TIME) else np.inf)
                       == f"{TIME}{compared[row['id']][0]}" for row in measured)
    result = {**env, "command": "python " + " ".join(sys.argv), "table": str(args.table), "flush_ms": flush,
              "min_runs": MIN_RUNS, "inputs": len(rows), "measured": measured,
              "summary": {"cells": len(ratios), "median_ratio": float(np.median(ratios)) if ratios else None,
                          "max_abs_change": float(np.max(np.abs(np.log(ratios)))) if ratios else None,
                          "fastest_kept": winners_kept}}
    lines = [f"# The table's few-run cells timed again over {MIN_RUNS}+ runs a round, {env['device']['name']}", "",
             f"{env['date']}; torch {env['versions']['torch']}, triton {env['versions']['triton']}; "
             f"`{result['command']}`. L2 flush {flush * 1e3:.0f} µs; {len(rows)} inputs of `{args.table}` whose "
             f"fastest variant had fewer than {MIN_RUNS} runs a round, {len(measured)} measured within the budget. "
             f"Each cell: the table's ms (runs a round then) -> again ({MIN_RUNS}+ runs a round), ratio.", "",
             f"| input | cell | table ms (runs) | again ms ({MIN_RUNS}+ runs) | ratio |", "|---|---|---|---|---|"]
    for row in measured:
        for column, cell in row["cells"].items():
            then = runs_per_round(np.array(cell["table_ms"]), flush)
            lines.append(f"| {row['id']} | {column} | {cell['table_ms']:.4f} ({then:.0f}) | {cell['again_ms']:.4f} "
                         f"| {cell['again_ms'] / cell['table_ms']:.3f} |")
    summary = result["summary"]
    if ratios:
        lines += ["", f"{summary['cells']} cells: median ratio {summary['median_ratio']:.3f}, largest change "
                      f"{np.expm1(summary['max_abs_change']):.1%}; the table's fastest variant still the fastest on "
                      f"{winners_kept} of {len(measured)} inputs."]
    write_result(args.out, f"spmv-min-runs-{device_tag(env['device']['name'])}", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
