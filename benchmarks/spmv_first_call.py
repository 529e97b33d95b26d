"""Device time of a first SpMV call on a real matrix: validating and multiplying in one kernel,
against the validation pass followed by the variant the shipped model chooses.

seer's first call on a matrix validates it (one pass over ``indptr`` and the column indices, which
also measures the row statistics stage 2 needs) and reads the pass's results back. On matrices of
up to ``spmv.VALIDATING_PRODUCT_MAX_NNZ`` nonzeros the same kernel also computes y
(``_validating_product_kernel``) if it also has at most ``VALIDATING_PRODUCT_MAX_ROWS`` rows;
larger ones run the chosen variant after the pass. For every
real matrix (all sizes, so that the threshold can be judged) this times, on one GPU, with
``do_bench`` (CUDA events, L2 flushed), each the least of three medians taken in alternation:
  fused_us     the validating product
  pass_us      the validation pass alone (with statistics)
  variant_us   the chosen variant's call alone (the shipped model's choice for one call)
  both_us      the pass then the variant, as a first call launched them before
and checks the validating product's y against float64. Writes
benchmarks/results/spmv-first-call-<device>.json and .md.

    python benchmarks/spmv_first_call.py --matrices .carry/suitesparse --out benchmarks/results
    python benchmarks/spmv_first_call.py --render benchmarks/results/spmv-first-call-h100.json   (the .md again)
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

import seer
from seer import sparse
from seer.datasets.cases import spmv_cases
from seer.kernels import spmv
from seer.profiling import (TIMING_ROUNDS, _least_of_rounds, device_tag, environment, provenance, relative_error,
                             write_result)
from spmv_validation import each_loaded

BANDS = ((0, 1_000), (1_000, 10_000), (10_000, 100_000), (100_000, 1 << 17), (1 << 17, 10**9))
TOLERANCE = 1e-4
# Other tiles of the validating product, timed alongside the shipped one (rows, nonzeros per step, warps).
TILES = [{"rows": r, "block": b, "num_warps": w} for r, b, w in ((8, 128, 4), (2, 128, 4), (4, 256, 4), (4, 64, 2))]


def measure(case, loaded) -> dict:
    source, (x,) = case.build(loaded)
    csr = sparse.as_csr(source)
    variant = seer.explain("spmv", (csr, x), calls=1).variant
    call = spmv.VARIANTS[variant].bind(csr)
    y = torch.empty((csr.rows,), dtype=x.dtype, device=x.device)
    fns = {"fused": lambda: spmv._launch_validating_product(csr, x, y),
           **{f"tile_{t['rows']}x{t['block']}w{t['num_warps']}": (lambda t=t: spmv._launch_validating_product(csr, x, y, t))
              for t in TILES},
           "pass": lambda: sparse.launch_structure(csr, check=True, stats=True),
           "variant": lambda: call(x, y),
           "both": lambda: (sparse.launch_structure(csr, check=True, stats=True), call(x, y))}
    errors = checked_errors(fns, y, spmv.reference(csr, x))
    right = {name: fn for name, fn in fns.items() if errors.get(name, 0.0) <= TOLERANCE}  # the pass writes no y
    least = {name: float("nan") for name in fns} | _least_of_rounds(right, rep_ms=TIMING_ROUNDS * 25)
    worst = max(errors.values())
    return {"id": case.id, "rows": csr.rows, "nnz": csr.nnz, "variant": variant,
            "error": worst if math.isfinite(worst) else None,  # None: some kernel wrote non-finite values
            "wrong": sorted(set(fns) - set(right)), **{f"{name}_us": ms * 1e3 for name, ms in least.items()}}


def checked_errors(fns: dict, y: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """Each function that writes ``y`` (all but the pass) run once on ``y`` filled with NaN: its
    relative error against ``reference``. The ones over TOLERANCE are not timed."""
    errors = {}
    for name, fn in fns.items():
        if name != "pass":
            y.fill_(float("nan"))
            fn()
            errors[name] = relative_error(y, reference)
    return errors


def summary(rows: list[dict]) -> list[dict]:
    """Per nnz band, over the matrices whose every kernel was right (a wrong one's time is NaN: the
    run names them and fails)."""
    rows = [r for r in rows if not r.get("wrong")]
    found = []
    for lo, hi in BANDS:
        band = [r for r in rows if lo <= r["nnz"] < hi]
        if not band:
            continue
        ratio = np.array([r["both_us"] / r["fused_us"] for r in band])
        found.append({"nnz": f"{lo:,}-{hi:,}" if hi < 10**9 else f"{lo:,}+", "matrices": len(band),
                      **{f"{k}_us": float(np.median([r[f'{k}_us'] for r in band])) for k in ("fused", "pass", "variant", "both")},
                      "both_over_fused": float(np.exp(np.log(ratio).mean())), "fused_faster": int((ratio > 1).sum()),
                      "fused_over_variant": float(np.exp(np.mean([np.log(r["fused_us"] / r["variant_us"]) for r in band]))),
                      "both_over_tile": {k[:-3]: float(np.exp(np.mean([np.log(r["both_us"] / r[k]) for r in band])))
                                         for k in band[0] if k.startswith("tile_")}})
    return found


def within_bounds(rows: list[dict]) -> dict:
    """both / fused over the matrices inside the shipped bounds, where first calls use the fused kernel."""
    inside = [r for r in rows if spmv.within_validating_bounds(r["rows"], r["nnz"]) and not r.get("wrong")]
    ratio = np.array([r["both_us"] / r["fused_us"] for r in inside])
    return {"matrices": len(inside), "both_over_fused": float(np.exp(np.log(ratio).mean())),
            "fused_faster": int((ratio > 1).sum())}


def threshold_text(threshold) -> str:
    if isinstance(threshold, dict):
        return f"The validating product runs on first calls on matrices of at most {threshold['rows']:,} rows and {threshold['nnz']:,} nonzeros."
    return (f"Measured while the validating product ran on every matrix of at most {threshold:,} nonzeros; the shipped "
            "bounds were chosen from this run (NOTES SpMV 30).")


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"# The first SpMV call's device time, validating product against pass + variant, {env['device']['name']}",
             "", provenance(env, result['command']) +
                 f"; {len(result['rows'])} real matrices; every timed kernel's y within "
             f"{TOLERANCE:g} of float64 on {result['correct']} of them (a wrong one untimed). {threshold_text(result['threshold'])}", "",
             "Medians per nnz band, µs of device time (do_bench, L2 flushed, least of three medians). fused: the "
             "validating product; pass: the validation pass; variant: the shipped model's one-call choice; both: "
             "pass then variant. both/fused: geometric mean of the ratio (above 1: one kernel is faster).", "",
             "| nnz | matrices | fused | pass | variant | both | both / fused | fused faster on | fused / variant |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in result["summary"]:
        lines.append(f"| {s['nnz']} | {s['matrices']} | {s['fused_us']:.1f} | {s['pass_us']:.1f} | "
                     f"{s['variant_us']:.1f} | {s['both_us']:.1f} | {s['both_over_fused']:.2f}x | {s['fused_faster']} | "
                     f"{s['fused_over_variant']:.2f}x |")
    wrong = [f"{r['id']} ({', '.join(r['wrong'])})" for r in result["rows"] if r.get("wrong")]
    if wrong:
        lines += ["", f"Left out, a kernel wrong there (untimed): {'; '.join(wrong)}."]
    inside = within_bounds(result["rows"])
    lines += ["", f"Inside the shipped bounds ({spmv.VALIDATING_PRODUCT_MAX_ROWS:,} rows, "
              f"{spmv.VALIDATING_PRODUCT_MAX_NNZ:,} nonzeros): {inside['matrices']} matrices, pass + variant / fused "
              f"{inside['both_over_fused']:.2f}x in geometric mean, the fused kernel faster on {inside['fused_faster']}."]
    tiles = list(result["summary"][0]["both_over_tile"])
    lines += ["", "Other tiles of the validating product (rows per block x nonzeros per step, warps): geometric mean "
              "of both / tile per band.", "", "| nnz | " + " | ".join(tiles) + " |", "|---|" + "---|" * len(tiles)]
    for s in result["summary"]:
        lines.append(f"| {s['nnz']} | " + " | ".join(f"{s['both_over_tile'][t]:.2f}x" for t in tiles) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrices", type=Path, help="folder of real matrices (SuiteSparse layout); required to measure")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--render", type=Path, help="rewrite the .md of this results .json (no GPU)")
    args = parser.parse_args()
    if args.render:
        args.render.with_suffix(".md").write_text(markdown(json.loads(args.render.read_text())))
        return 0
    if args.matrices is None:
        parser.error("--matrices is required to measure")
    rows = [measure(case, loaded) for case, loaded in each_loaded(spmv_cases([args.matrices]), args.budget_s)]
    result = {"benchmark": "spmv first call", "environment": environment(torch.device("cuda")),
              "command": " ".join(["python", *sys.argv]), "threshold": {"rows": spmv.VALIDATING_PRODUCT_MAX_ROWS, "nnz": spmv.VALIDATING_PRODUCT_MAX_NNZ},
              "correct": sum(not r["wrong"] for r in rows), "summary": summary(rows), "rows": rows}
    write_result(args.out, f"spmv-first-call-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    print(markdown(result))
    return 0 if result["correct"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
