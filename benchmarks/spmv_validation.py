"""What a first SpMV call pays to validate its matrix, and what the row statistics add to it.

seer validates a matrix on its first call (monotone ``indptr``, in-range columns) with one pass
and one read-back, and the same pass sums the row lengths that stage 2 of the selector needs.
For every input of the profile campaign (the real matrices and the large generated suite) this
times, on one GPU:
  before_us      the validation seer made before the pass was fused: five torch reductions and
                 one read-back, no statistics (kept below as the baseline)
  validate_us    ``as_csr`` now: metadata checks plus the fused pass with statistics
  plain_us       the fused pass without statistics (``stats=False``)
  gather_us      the statistics alone from a fresh pass (a matrix passed unchecked)
host wall times, median of 15 runs after one warm-up, the device drained before each; and
  kernel_us      device time of the launch that validates the matrix on a first call (CUDA
                 events through ``do_bench``, median, L2 flushed; the least of three medians,
                 with and without statistics in alternation): on a matrix within the validating
                 product's bounds (``kernels.spmv.VALIDATING_PRODUCT_MAX_ROWS`` / ``_NNZ``) the
                 validating product, which computes y too (``first_launch``), else the pass;
                 everything else in a call is the same either way, so
  stats_us       kernel_us with statistics minus without is what the statistics add to a first
                 call, which ``benchmarks/selection.py --validation`` charges to the validated path.
                 (Runs before 2026-11-26 timed the pass on every input, NOTES SpMV 53; until SpMV
                 54 both launches ended with the last program adding up every program's row.)
Writes benchmarks/results/spmv-validation-<device>.json and .md.

    python benchmarks/spmv_validation.py --matrices .carry/suitesparse --out benchmarks/results
"""
from __future__ import annotations

import argparse
import sys
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import torch

from seer import sparse
from seer.datasets.cases import NNZ_BANDS, nnz_band_label, spmv_cases
from seer.errors import SeerError
from seer.features import spmv as features
from seer.kernels import spmv
from seer.profiling import (TIMING_ROUNDS, _least_of_rounds, _Prefetched, _median_wall_ms, device_tag,
                            environment, provenance, write_result)
from seer.sparse import as_csr


def previous_check(csr) -> list:
    """seer's validation before the fused pass (commit 3804e60), for comparison."""
    p = csr.indptr
    lo, hi = torch.aminmax(csr.indices) if csr.nnz else (p.new_zeros(()), p.new_zeros(()))
    return torch.stack([p[0].long(), p[-1].long(), (p[1:] >= p[:-1]).all().long(), lo.long(), hi.long()]).tolist()


def wall_us(fn) -> float:
    fn()
    return _median_wall_ms(fn) * 1e3


def kernel_us(csr) -> tuple[float, float]:
    """Device time of the pass with and without statistics, each the least of three medians taken
    in alternation (the profiling harness's rounds, each of a full ``do_bench`` repetition time): a
    host stalled by the loader threads (the GIL) delays a launch past its start event and only ever
    adds time, which a single median let through."""
    passes = {stats: (lambda s=stats: sparse.launch_structure(csr, check=True, stats=s)) for stats in (True, False)}
    return _with_and_without(passes)


def validating_product_us(csr) -> tuple[float, float]:
    """:func:`kernel_us` of the validating product, the launch a first call on a small matrix
    makes (x of fresh random values)."""
    x = torch.rand(csr.cols, dtype=csr.dtype, device=csr.device) + 0.5
    y = torch.empty(csr.rows, dtype=csr.dtype, device=csr.device)
    launches = {stats: (lambda s=stats: spmv._launch_validating_product(csr, x, y, stats=s)) for stats in (True, False)}
    return _with_and_without(launches)


def first_launch(csr) -> str:
    """Which launch validates ``csr`` on a first call: the validating product or the pass."""
    return "validating product" if spmv.within_validating_bounds(csr.rows, csr.nnz) else "pass"


def _with_and_without(fns: dict) -> tuple[float, float]:
    least = _least_of_rounds(fns, rep_ms=TIMING_ROUNDS * 25)
    return least[True] * 1e3, least[False] * 1e3


def measure(case, loaded) -> dict:
    source, _ = case.build(loaded)
    csr = as_csr(source, check=False)
    launch = first_launch(csr)
    with_stats, without = validating_product_us(csr) if launch == "validating product" else kernel_us(csr)
    return {
        "id": case.id, "source": case.source, "rows": csr.rows, "nnz": csr.nnz, "first_launch": launch,
        "before_us": wall_us(lambda: previous_check(csr)),
        "validate_us": wall_us(lambda: as_csr(source)),
        "plain_us": wall_us(lambda: sparse._structure(csr, check=True, stats=False)),
        "gather_us": wall_us(lambda: features.gathered(csr)),
        "kernel_us": with_stats, "plain_kernel_us": without, "stats_us": with_stats - without,
    }


def subsets(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """``(name, rows)`` of the real matrices and of the generated suite by nnz band, the empty left out."""
    groups = [("real", [r for r in rows if r["source"] == "real"])]
    for lo, hi in NNZ_BANDS:
        groups.append((f"generated, {nnz_band_label(lo, hi)}",
                       [r for r in rows if r["source"] != "real" and lo <= r["nnz"] < hi]))
    return [(name, group) for name, group in groups if group]


def summary(rows: list[dict]) -> list[dict]:
    """Medians per subset: real matrices, and the generated suite by nnz band."""
    keys = ("before_us", "validate_us", "plain_us", "gather_us", "kernel_us", "stats_us")
    return [{"subset": name, "inputs": len(group), **{k: float(np.median([r[k] for r in group])) for k in keys}}
            for name, group in subsets(rows)]


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"# SpMV validation pass on {env['device']['name']}", "",
             provenance(env, result['command']) + f"; {len(result['rows'])} inputs.", "",
             "Medians, µs. before: seer's validation until this change (torch reductions, one read-back, no "
             "statistics); validate: `as_csr` with the fused pass (statistics included); plain: the fused pass "
             "without statistics; gather: statistics from a fresh pass (matrix passed unchecked): host wall times. "
             "kernel: device time of the launch that validates the matrix on a first call (CUDA events): the "
             "validating product (which computes y too) on the matrices within its bounds, the pass on the rest "
             "(before 2026-11-26, the pass on every input); stats: what the statistics add to it (with minus "
             "without).", "",
             "| inputs | count | before | validate | plain | gather | kernel | stats |",
             "|---|---|---|---|---|---|---|---|"]
    for s in result["summary"]:
        lines.append(f"| {s['subset']} | {s['inputs']} | {s['before_us']:.1f} | {s['validate_us']:.1f} | "
                     f"{s['plain_us']:.1f} | {s['gather_us']:.1f} | {s['kernel_us']:.1f} | {s['stats_us']:+.2f} |")
    return "\n".join(lines) + "\n"


def each_loaded(cases: list, budget_s: float | None):
    """``(case, loaded input)`` in order, loaded ahead in threads, until ``budget_s`` seconds have
    passed; an unreadable input is skipped, as the profile campaign does. Each is handed out once no
    load is in flight: a loader thread holding the GIL stalls the timed one, which inflates even
    ``do_bench`` medians (benchmarks/NOTES.md, SpMV 15 and 47)."""
    started = time.monotonic()
    with closing(_Prefetched(cases, ahead=3)) as loads:
        for done, case in enumerate(cases):
            if budget_s is not None and time.monotonic() - started > budget_s:
                print(f"budget reached after {done} of {len(cases)} inputs")
                return
            try:
                loaded = next(loads).result()
            except SeerError as error:
                print(f"skipped {case.id}: {error}")
                continue
            loads.settle()
            yield case, loaded


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrices", type=Path, required=True, help="folder of real matrices (SuiteSparse layout)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--generated-only", action="store_true", help="only the large generated suite")
    args = parser.parse_args()
    cases = spmv_cases([args.matrices], synthetic="large")
    if args.generated_only:
        cases = [case for case in cases if case.source != "real"]
    rows = [measure(case, loaded) for case, loaded in each_loaded(cases, args.budget_s)]
    result = {"benchmark": "spmv validation pass", "environment": environment(torch.device("cuda")),
              "command": " ".join(["python", *sys.argv]), "summary": summary(rows), "rows": rows}
    name = device_tag(torch.cuda.get_device_name())
    write_result(args.out, f"spmv-validation-{name}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
