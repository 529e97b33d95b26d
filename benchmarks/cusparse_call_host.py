"""Host time of a prepared cuSPARSE call (``seer.cusparse.SpmvPlan``), this tree's against an
earlier version of the module, in one process.

On matrices that fit in L2 a loop of SpMV calls is host-bound, and ``cusparse_prepared``'s call
costs more host time than the Triton variants' (``spmv-loop-parts-<device>.md``). The plan's call
made four ctypes calls (bind the stream, point x, point y, the product); it now binds the stream
and points a vector only when they changed. On real matrices spread over sizes up to 1M nonzeros,
each version's plan call is timed in three patterns, each a loop of 2,000 calls, alternated over
rounds (least kept): ``same``: one x into one out (a solver writing into its own vector);
``new_out``: one x, a new y each call (``y = A @ x``); ``alternating``: two x into two outs in turn.
Every plan's product is checked against float64 first.

    git show e969435:seer/cusparse.py >.carry/cusparse-before.py   # the module before the change
    python benchmarks/cusparse_call_host.py --matrices .carry/suitesparse --before .carry/cusparse-before.py

Writes ``cusparse-call-host-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.stats import gmean

from seer import cusparse
from seer.datasets.cases import spmv_cases
from seer.kernels import spmv
from seer.profiling import alternated_host_us, device_tag, environment, relative_error, write_result

PATTERNS = ("same", "new_out", "alternating")


def module_from(path: Path):
    spec = importlib.util.spec_from_file_location("cusparse_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spread(folder: Path, count: int) -> list:
    """``count`` real matrices of the folder, as profiling cases, spread evenly over its sizes
    (smallest first)."""
    cases = spmv_cases([folder])
    return [cases[i] for i in np.linspace(0, len(cases) - 1, count).round().astype(int)]


def loops(plan, x: torch.Tensor, rows: int) -> dict:
    xs, outs = (x, x.clone()), (x.new_empty(rows), x.new_empty(rows))
    turn = [0]

    def alternating():
        turn[0] ^= 1
        plan(xs[turn[0]], outs[turn[0]])

    return {"same": lambda: plan(x, outs[0]), "new_out": lambda: plan(x, x.new_empty(rows)),
            "alternating": alternating}


def matrix_row(case, versions: dict, calls: int, rounds: int) -> dict:
    parts, (x,) = case.build(case.load())
    csr = spmv.problem(parts)
    reference = spmv.reference(csr, x)
    fns = {}
    for version, module in versions.items():
        plan = module.SpmvPlan(*parts[:3], csr.shape)
        y = plan(x, torch.full((csr.rows,), float("nan"), device=x.device))
        error = relative_error(y, reference)
        if not error < 1e-4:
            raise AssertionError(f"{version} plan disagrees with float64 on {case.id}: {error:.1e}")
        fns.update({f"{version}:{p}": fn for p, fn in loops(plan, x, csr.rows).items()})
    least = {name: min(samples) for name, samples in alternated_host_us(fns, calls, rounds).items()}
    return {"id": case.id, "nnz": csr.nnz, **{f"{name}_us": us for name, us in least.items()}}


def summary(rows: list[dict]) -> dict:
    return {p: {"before_us": float(np.median([r[f"before:{p}_us"] for r in rows])),
                "now_us": float(np.median([r[f"now:{p}_us"] for r in rows])),
                "speedup": float(gmean([r[f"before:{p}_us"] / r[f"now:{p}_us"] for r in rows]))} for p in PATTERNS}


def markdown(result: dict) -> str:
    lines = [f"# Prepared cuSPARSE call, host time, {result['device']['name']}", "",
             f"{result['date']}; torch {result['versions']['torch']}, triton {result['versions']['triton']}; "
             f"`{result['command']}`", "",
             f"µs per call of `SpmvPlan.__call__`, loops of {result['calls']:,} calls, least of {result['rounds']} "
             "alternated rounds; before: the module given by `--before`; now: this tree's. same: one x into one "
             "out; new_out: one x, a new y each call; alternating: two x into two outs in turn.", "",
             "| pattern | median before µs | median now µs | before / now (geomean) |", "|---|---|---|---|"]
    lines += [f"| {p} | {s['before_us']:.1f} | {s['now_us']:.1f} | {s['speedup']:.2f}x |"
              for p, s in result["summary"].items()]
    lines += ["", "| matrix | nnz | " + " | ".join(f"{p} before / now µs" for p in PATTERNS) + " |",
              "|---|---|" + "---|" * len(PATTERNS)]
    lines += [f"| {r['id']} | {r['nnz']:,} | " + " | ".join(f"{r[f'before:{p}_us']:.1f} / {r[f'now:{p}_us']:.1f}"
                                                        for p in PATTERNS) + " |" for r in result["matrices"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=Path, required=True, help="folder of the real matrices")
    parser.add_argument("--before", type=Path, required=True, help="an earlier seer/cusparse.py")
    parser.add_argument("--count", type=int, default=12, help="matrices, spread over sizes")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    versions = {"before": module_from(args.before), "now": cusparse}
    rows = []
    for case in spread(args.matrices, args.count):
        rows.append(matrix_row(case, versions, args.calls, args.rounds))
        print(f"{case.id}: " + ", ".join(f"{p} {rows[-1][f'before:{p}_us']:.1f} -> {rows[-1][f'now:{p}_us']:.1f} µs"
                                         for p in PATTERNS), flush=True)
    result = {"benchmark": "prepared cuSPARSE call host time", **environment(torch.device("cuda")),
              "command": " ".join(["python", *sys.argv]), "calls": args.calls, "rounds": args.rounds,
              "summary": summary(rows), "matrices": rows}
    write_result(args.out, f"cusparse-call-host-{device_tag(result['device']['name'])}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
