"""L2 eviction hints in the SpMV kernels: every variant timed with and without them, same matrices.

    python benchmarks/spmv_hints.py [--out benchmarks/results] [--budget-s 200] [--per-family 4]

The kernels stream A (indices and values, read once) with ``evict_first`` and gather x with
``evict_last`` (``seer.kernels.spmv.STREAM`` / ``KEEP``), so that the stream does not push x out
of L2. Each setting runs in its own process (Triton compiles a module constant into the kernel,
so it cannot change inside one process; each process gets its own Triton cache), on the same
large matrices: up to ``--per-family`` of 5M-30M nonzeros from every family of the large suite.
cuSPARSE is timed in both processes as a control for drift between them. Every result is checked
against the float64 reference. Writes ``spmv-hints-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
import triton.language as tl

from seer.datasets.cases import spmv_cases
from seer.kernels import spmv
from seer.profiling import device_tag, environment, relative_error, time_ms, write_result

MIN_NNZ, MAX_NNZ = 5_000_000, 30_000_000
SETTINGS = ("off", "on")


def family(case) -> str:
    return case.id.split("/")[1] if case.source == "synthetic" else case.source


def chosen_cases(per_family: int) -> list:
    """Up to ``per_family`` matrices of every family, spread over the size range."""
    by_family = defaultdict(list)
    for case in spmv_cases([Path(".carry/suitesparse")], synthetic="large"):
        if case.source != "real" and MIN_NNZ <= case.extra["size"] <= MAX_NNZ:
            by_family[family(case)].append(case)
    chosen = []
    for cases in by_family.values():
        cases.sort(key=lambda c: c.extra["size"])
        picks = np.unique(np.linspace(0, len(cases) - 1, min(per_family, len(cases))).round().astype(int))
        chosen += [cases[i] for i in picks]
    return chosen


def measure_setting(setting: str, per_family: int, budget_s: float) -> list[dict]:
    """Times of every variant and cuSPARSE per matrix, in this process's hint setting."""
    if setting == "off":
        spmv.STREAM = spmv.KEEP = tl.constexpr("")  # before any kernel compiles: the default policy
    started = time.monotonic()
    rows = []
    for case in chosen_cases(per_family):
        if time.monotonic() - started > budget_s:
            print(f"[{setting}] budget reached after {len(rows)} matrices", flush=True)
            break
        parts, (x,) = case.build(case.load())
        csr = spmv.problem(parts)
        reference = spmv.reference(csr, x)
        runs = {name: (lambda v=variant: v.run(csr, x)) for name, variant in spmv.VARIANTS.items()}
        runs["cusparse"] = lambda: case.baselines["cusparse"](csr, x)
        times = {}
        for name, fn in runs.items():
            error = relative_error(fn(), reference)
            if not error <= 1e-4:
                raise AssertionError(f"{name} is wrong on {case.id} with hints {setting}: relative error {error:.1e}")
            times[name] = time_ms(fn)
        rows.append({"id": case.id, "family": family(case), "nnz": csr.nnz, "rows": csr.rows, "cols": csr.cols,
                     "ms": times})
        print(f"[{setting}] {case.id}: {min(times.items(), key=lambda i: i[1])}", flush=True)
        del csr, x, reference
        torch.cuda.empty_cache()
    return rows


def run_settings(args) -> dict[str, list[dict]]:
    """Each setting in a child process with its own Triton cache."""
    measured = {}
    with tempfile.TemporaryDirectory() as scratch:
        for setting in SETTINGS:
            part = Path(scratch) / f"{setting}.json"
            env = {**os.environ, "TRITON_CACHE_DIR": str(Path(scratch) / f"triton-{setting}")}
            subprocess.run([sys.executable, __file__, "--setting", setting, "--part", str(part),
                            "--per-family", str(args.per_family), "--budget-s", str(args.budget_s / 2)],
                           env=env, check=True)
            measured[setting] = json.loads(part.read_text())
    return measured


def summarise(measured: dict[str, list[dict]]) -> list[dict]:
    """Per matrix present in both settings: times off and on, and the best variant of each."""
    on = {row["id"]: row for row in measured["on"]}
    rows = []
    for off in measured["off"]:
        if off["id"] not in on:
            continue
        both = {"off": off["ms"], "on": on[off["id"]]["ms"]}
        variants = [n for n in off["ms"] if n != "cusparse"]
        best = {s: min(variants, key=both[s].get) for s in SETTINGS}
        rows.append({**{k: off[k] for k in ("id", "family", "nnz", "rows", "cols")}, "ms": both,
                     "best": best, "best_speedup": both["off"][best["off"]] / both["on"][best["on"]],
                     "cusparse_drift": both["on"]["cusparse"] / both["off"]["cusparse"]})
    return rows


def markdown(result: dict) -> str:
    rows = result["matrices"]
    lines = [f"# SpMV with and without L2 eviction hints, {result['device']['name']}", "",
             f"torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}, measured "
             f"{result['date']}; `{result['command']}`. do_bench medians, L2 flushed; speed-up = time without "
             "hints / time with them (> 1: the hints help). cuSPARSE drift = its time in the second process / "
             "in the first (the noise floor between the two).", "",
             "| family | matrices | best variant, speed-up (median, min, max) | cuSPARSE drift (median) |",
             "|---|---|---|---|"]
    by_family = defaultdict(list)
    for row in rows:
        by_family[row["family"]].append(row)
    for name, group in sorted(by_family.items()):
        speedups = [r["best_speedup"] for r in group]
        lines.append(f"| {name} | {len(group)} | {np.median(speedups):.3f} ({min(speedups):.3f}, {max(speedups):.3f}) | "
                     f"{np.median([r['cusparse_drift'] for r in group]):.3f} |")
    speedups = [r["best_speedup"] for r in rows]
    lines.append(f"| all | {len(rows)} | {np.median(speedups):.3f} ({min(speedups):.3f}, {max(speedups):.3f}) | "
                 f"{np.median([r['cusparse_drift'] for r in rows]):.3f} |")
    variants = [n for n in rows[0]["ms"]["off"] if n != "cusparse"]
    lines += ["", "Each variant, speed-up over all matrices (median, min, max):", "",
              "| variant | median | min | max |", "|---|---|---|---|"]
    for name in variants:
        s = [r["ms"]["off"][name] / r["ms"]["on"][name] for r in rows]
        lines.append(f"| {name} | {np.median(s):.3f} | {min(s):.3f} | {max(s):.3f} |")
    lines += ["", "| matrix | nnz | best without (ms) | best with (ms) | speed-up | cuSPARSE off / on (ms) |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        off, on = r["ms"]["off"], r["ms"]["on"]
        lines.append(f"| {r['id']} | {r['nnz']:,} | {r['best']['off']} {off[r['best']['off']]:.4f} | "
                     f"{r['best']['on']} {on[r['best']['on']]:.4f} | {r['best_speedup']:.3f} | "
                     f"{off['cusparse']:.4f} / {on['cusparse']:.4f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=200)
    parser.add_argument("--per-family", type=int, default=4)
    parser.add_argument("--setting", choices=SETTINGS, help=argparse.SUPPRESS)  # a child process
    parser.add_argument("--part", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setting:
        args.part.write_text(json.dumps(measure_setting(args.setting, args.per_family, args.budget_s)))
        return 0
    rows = summarise(run_settings(args))
    device = torch.device("cuda")
    result = {**environment(device), "command": " ".join(["python", *sys.argv]), "matrices": rows}
    write_result(args.out, f"spmv-hints-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
