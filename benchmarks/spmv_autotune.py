"""seer.dispatch against ``triton.autotune`` over the same row kernels, on real and large matrices.

A user without seer who wants a fast Triton SpMV would wrap one CSR kernel in ``triton.autotune``
and let it time its configs on the first call of each new matrix shape. Here that peer is seer's
own row kernel (``_csr_rows_kernel``, what ``scalar_r128`` and ``vector_g4``-``vector_g256`` launch)
under ``triton.autotune`` with those seven variants' tiles as its configs, keyed on the row count,
with Triton's default timing (``do_bench``: 25 ms of warm-up and 100 ms of runs per config). Per
matrix, as a user holds it (a torch sparse CSR tensor):

  first    the first call, synchronised: the autotuner fresh (every config timed, then the best
           launched; once, each config compiled for the matrix by an untimed launch before, so no
           compilation is timed on either side); seer on a new tensor object (validation pass,
           row statistics, tree, preparation, launch; the least of ``rounds``);
  hundred  seer's first 100 calls on a new tensor object, synchronised once at the end: on 1M+
           nonzeros seer decides again at its 10th and 100th call (``features/spmv.py``:
           ``redecides``), each new variant's preparation included (after the same calls on another
           tensor object over the same arrays, untimed, so that, as on the autotuner's side, no
           compilation is timed, nor the model's loading, which ``seer.clear_cache`` between
           matrices undoes);
  cached   then the least of ``rounds`` alternated loops of ``calls`` calls, a new y per call, of
           ``seer.dispatch`` (the variant it settled on, recorded from its cache), the tuned kernel
           and torch's ``A @ x`` (cuSPARSE) for scale.

Every result is checked against torch's: the tuned kernel's first, seer's first decision's, its
decision's at the 100th call and its cached call's after the loops. Over N calls on one matrix
the tuned kernel costs first + (N - 1) x cached and seer hundred + (N - 100) x cached (first alone
at N = 1); the summary gives their ratio at 1, 100 and 10,000 calls and, where the tuned kernel's
call is the faster, the calls after which it catches up (counted after the first). Writes
``spmv-autotune-<device>.json`` / ``.md``.

    python benchmarks/spmv_autotune.py --matrices .carry/suitesparse --out benchmarks/results \\
        [--real-budget-s 260] [--large-budget-s 140]
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import triton
from scipy.stats import gmean

import seer
from seer.datasets.cases import spmv_cases
from seer.kernels import spmv
from seer.profiling import (alternated_host_us, device_tag, environment, measured_within_budget, provenance,
                            relative_error, synchronised_us, write_result)

ROUNDS = 5
CALL_COUNTS = (1, 100, 10_000)
TOLERANCE = 1e-4  # relative 2-norm difference from torch's result
SETTLED_AT = 100  # seer's last new decision before 1,000 calls on 1M+ nonzeros (features/spmv.py: redecides)
LONG_NNZ = 10_000_000  # matrices whose kernels take tens of µs or more: the host's cost weighs less


def row_kernel_configs() -> list[triton.Config]:
    """The tiles of seer's row variants (scalar and vector CSR) as ``triton.Config`` objects."""
    return [triton.Config({"ROWS": v.params["rows"], "G": v.params.get("group", 1)}, num_warps=v.params["num_warps"])
            for v in spmv.VARIANTS.values() if v.params["kind"] in ("scalar", "vector")]


def autotuned_spmv(indptr, indices, values, rows: int, configs: list[triton.Config] | None = None):
    """A fresh ``triton.autotune`` of the row kernel over ``configs`` (nothing tuned yet), as a
    call ``x -> A @ x`` allocating y, and the autotuner (its ``best_config`` once tuned)."""
    tuned = triton.autotune(configs=configs or row_kernel_configs(), key=["rows"])(spmv._csr_rows_kernel)

    def grid(meta):
        return (triton.cdiv(rows, meta["ROWS"]),)

    def call(x: torch.Tensor) -> torch.Tensor:
        y = x.new_empty(rows)
        tuned[grid](indptr, indices, values, x, x.stride(0), y, y.stride(0), rows)
        return y

    return call, tuned


def matrix_row(case, loaded, calls: int, rounds: int) -> dict:
    """One matrix: cached and first calls of seer, the tuned kernel and torch (see the module's doc)."""
    parts, (x,) = case.build(loaded)
    indptr, indices, values, shape = parts
    rows = shape[0]
    reference = (torch.sparse_csr_tensor(indptr, indices, values, shape) @ x).double().cpu()
    for config in row_kernel_configs():  # each config compiled for this matrix alone, untimed
        autotuned_spmv(indptr, indices, values, rows, [config])[0](x)
    tuned_call, tuned = autotuned_spmv(indptr, indices, values, rows)
    y_tuned, tuned_first_us = synchronised_us(lambda: tuned_call(x))  # every config timed, the best run
    check(case, "autotune", y_tuned, reference)
    # As the autotuner's configs were compiled above, seer's kernels for this matrix compiled and
    # its model loaded again (clear_cache dropped it): the same calls on another tensor object over
    # the same arrays, which is another input to seer's cache.
    first_hundred_calls(torch.sparse_csr_tensor(indptr, indices, values, shape), x)
    A, misses = torch.sparse_csr_tensor(indptr, indices, values, shape), seer.cache_info()["misses"]
    (y_first, y_settled), seer_hundred_us = synchronised_us(lambda: first_hundred_calls(A, x))
    if seer.cache_info()["misses"] != misses + 1:
        raise AssertionError(f"seer's timed first call on {case.id} was not its first on that input")
    check(case, "seer's first decision", y_first, reference)
    check(case, f"seer's decision at call {SETTLED_AT}", y_settled, reference)
    paths = {"seer": lambda: seer.dispatch("spmv", (A, x)), "autotune": lambda: tuned_call(x),
             "torch": lambda: A @ x}
    cached = {name: min(us) for name, us in alternated_host_us(paths, calls, rounds).items()}
    check(case, "seer's cached call", seer.dispatch("spmv", (A, x)), reference)
    seer_first = min(synchronised_us(lambda: seer.dispatch("spmv", (torch.sparse_csr_tensor(
        indptr, indices, values, shape), x)))[1] for _ in range(rounds))
    row = {"id": case.id, "source": case.source, "rows": rows, "nnz": values.numel(),
           "seer_choice": seer.explain("spmv", (A, x), calls=1).variant,
           "seer_settled_choice": cached_variant(A, x),
           "autotune_choice": str(tuned.best_config), **{f"{name}_us": us for name, us in cached.items()},
           "seer_first_us": seer_first, "seer_hundred_us": seer_hundred_us, "autotune_first_us": tuned_first_us}
    seer.clear_cache()  # the matrix's decisions and plans go with it
    return row


def cached_variant(A, x) -> str:
    """The variant of the decision seer's cache holds for ``A``: what its cached calls ran."""
    entry = seer.get_op("spmv")
    source, _ = entry.kernels.split((A, x))
    return sys.modules["seer.dispatch"]._cache.get(("spmv", entry.kernels.cache_key(source), None, None)).variant


def first_hundred_calls(A, x) -> tuple[torch.Tensor, torch.Tensor]:
    """seer's first ``SETTLED_AT`` calls on a new matrix, as a caller's loop makes them (the first
    decision, and on 1M+ nonzeros the new ones at the 10th and 100th call with their
    preparations): the first and the last result."""
    first = seer.dispatch("spmv", (A, x))
    for _ in range(SETTLED_AT - 2):
        seer.dispatch("spmv", (A, x))
    return first, seer.dispatch("spmv", (A, x))


def check(case, who: str, y: torch.Tensor, reference: torch.Tensor) -> None:
    error = relative_error(y, reference)
    if not error < TOLERANCE:
        raise AssertionError(f"{who} and torch CSR disagree on {case.id}: relative difference {error:.1e}")


def total_us(row: dict, path: str, calls: int) -> float:
    """What ``calls`` calls on one matrix cost ``path``: its first call, then cached ones; seer's
    first hundred as measured, re-decisions included (rows from before that measurement, without
    ``seer_hundred_us``, charge seer's like the tuned kernel's)."""
    if path == "seer" and calls >= SETTLED_AT and "seer_hundred_us" in row:
        return row["seer_hundred_us"] + (calls - SETTLED_AT) * row["seer_us"]
    return row[f"{path}_first_us"] + (calls - 1) * row[f"{path}_us"]


def summary(rows: list[dict]) -> dict:
    """Geometric-mean speed-ups of seer over the tuned kernel (cached, first, over N calls), and
    where the tuned kernel's call is the faster, the calls after which its tuning has paid."""
    seer_us, tuned_us = (np.array([r[f"{p}_us"] for r in rows]) for p in ("seer", "autotune"))
    catch_up = [(r["autotune_first_us"] - r["seer_first_us"]) / (r["seer_us"] - r["autotune_us"])
                for r in rows if r["autotune_us"] < r["seer_us"]]
    long = [r["autotune_us"] / r["seer_us"] for r in rows if r["nnz"] >= LONG_NNZ]
    settled = [r for r in rows if "seer_settled_choice" in r]
    return {"matrices": len(rows),
            "seer_hundred_measured": all("seer_hundred_us" in r for r in rows),
            "seer_decided_again_on": sum(r["seer_settled_choice"] != r["seer_choice"] for r in settled)
                                     if len(settled) == len(rows) else None,
            "cached_speedup": gmean(tuned_us / seer_us), "seer_cached_faster_on": int((seer_us < tuned_us).sum()),
            "cached_speedup_10m": {"matrices": len(long), "speedup": gmean(long) if long else None},
            "median_seer_us": float(np.median(seer_us)), "median_autotune_us": float(np.median(tuned_us)),
            "median_torch_us": float(np.median([r["torch_us"] for r in rows])),
            "first_speedup": gmean([r["autotune_first_us"] / r["seer_first_us"] for r in rows]),
            "median_seer_first_us": float(np.median([r["seer_first_us"] for r in rows])),
            "median_autotune_first_us": float(np.median([r["autotune_first_us"] for r in rows])),
            "speedup_over_calls": {str(n): gmean([total_us(r, "autotune", n) / total_us(r, "seer", n) for r in rows])
                                   for n in CALL_COUNTS},
            "autotune_cached_faster_on": len(catch_up),
            "median_calls_to_catch_up": float(np.median(catch_up)) if catch_up else None}


def ratio_text(ratio: float) -> str:
    return f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:.2f}x"


def render_set(title: str, s: dict) -> str:
    over = ", ".join(ratio_text(s["speedup_over_calls"][str(n)]) for n in CALL_COUNTS)
    ten_m = s["cached_speedup_10m"]
    ten_m_text = (f" On the {ten_m['matrices']} of 10M+ nonzeros seer's cached call is {ten_m['speedup']:.2f}x faster."
                  if ten_m["matrices"] else "")
    catch = (f"; where the tuned kernel's call is the faster ({s['autotune_cached_faster_on']} matrices) its tuning "
             f"pays after {s['median_calls_to_catch_up']:,.0f} calls (median)" if s["autotune_cached_faster_on"] else "")
    if s.get("seer_hundred_measured"):
        totals = "seer's first 100 calls as measured, then cached ones"
        again = (f" seer decided again, to another variant, on {s['seer_decided_again_on']} of these matrices; its "
                 "cached call is the variant it settled on." if s.get("seer_decided_again_on") else "")
    else:  # rows measured before the first hundred calls were timed
        totals = ("seer's first call then cached ones: rows measured before seer's first 100 calls were timed, so "
                  "its new decisions at the 10th and 100th call on 1M+ nonzeros, their preparations and the calls "
                  "before them are not charged, and its cached call is the variant it settled on, not the "
                  "recorded first choice")
        again = ""
    return (f"\n## {title} ({s['matrices']} matrices)\n\n"
            "| | seer | triton.autotune | speed-up of seer (geomean) | seer faster on |\n|---|---|---|---|---|\n"
            f"| cached call, median | {s['median_seer_us']:.1f} µs | {s['median_autotune_us']:.1f} µs | "
            f"{s['cached_speedup']:.2f}x | {s['seer_cached_faster_on']} |\n"
            f"| first call, median | {s['median_seer_first_us']:.0f} µs | {s['median_autotune_first_us'] / 1e3:.0f} ms | "
            f"{ratio_text(s['first_speedup'])} | |\n\n"
            f"Over N calls on one matrix (the tuned kernel's first call then cached ones; {totals}), seer's speed-up "
            f"at N = {', '.join(f'{n:,}' for n in CALL_COUNTS)}: {over}{catch}.{again}{ten_m_text} torch's cached "
            f"call, median: {s['median_torch_us']:.1f} µs.\n")


def render(result: dict) -> str:
    text = (f"# seer.dispatch against triton.autotune on SpMV, {result['device']['name']}\n\n"
            + provenance(result, result["command"]) + "\n\n" + result["method"] + "\n")
    for key, title in (("real", "Real matrices"), ("large", "Large matrices (derived and synthetic, 1M-50M nnz)")):
        if result.get(key):
            text += render_set(title, result[key]["summary"])
    return text


def rerender(path: Path) -> None:
    result = json.loads(path.read_text())
    for key in ("real", "large"):
        if result.get(key):
            result[key]["summary"] = summary(result[key]["rows"])
    path.write_text(json.dumps(result, indent=2) + "\n")
    path.with_suffix(".md").write_text(render(result))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrices", type=Path, help="folder of real matrices (SuiteSparse layout)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--real-budget-s", type=float, default=260)
    parser.add_argument("--large-budget-s", type=float, default=140)
    parser.add_argument("--real-calls", type=int, default=500, help="calls per loop on each real matrix")
    parser.add_argument("--large-calls", type=int, default=50, help="calls per loop on each large matrix")
    parser.add_argument("--render", type=Path, default=None,
                        help="only rewrite this result JSON's summaries (from its rows) and its .md")
    args = parser.parse_args()
    if args.render:
        rerender(args.render)
        return 0
    if args.matrices is None:
        parser.error("--matrices is required unless --render is given")
    warnings.simplefilter("ignore", seer.SeerWarning)
    env = environment(torch.device("cuda", torch.cuda.current_device()))
    configs = ", ".join(f"{c.kwargs['ROWS']}x{c.kwargs['G']}" for c in row_kernel_configs())
    result = {"benchmark": "seer.dispatch against triton.autotune (SpMV)", **env,
              "command": " ".join([Path(sys.executable).name, *sys.argv]), "rounds": ROUNDS,
              "method": (f"triton.autotune over the row kernel's {len(row_kernel_configs())} tiles (rows per program "
                         f"x lanes per row: {configs}), keyed on the row count, Triton's default timing; seer: "
                         "`seer.dispatch` with the shipped model. Cached: the least of "
                         f"{ROUNDS} alternated loops ({args.real_calls} calls a loop on real matrices, "
                         f"{args.large_calls} on large ones), a new y per call. First: synchronised; seer's the least "
                         f"of {ROUNDS} on new tensor objects, the autotuner's once, fresh, each config compiled before; "
                         "seer's first 100 calls after the same calls on another tensor object over the same arrays, "
                         "untimed (its kernels compiled and its model loaded).")}
    rng = np.random.default_rng(0)  # seeded shuffle: host speed drifts over minutes
    real = [c for c in spmv_cases([args.matrices]) if c.source == "real"]
    large = [c for c in spmv_cases([args.matrices], synthetic="large") if c.source != "real"]
    for key, cases, calls, budget in (("real", [real[i] for i in rng.permutation(len(real))], args.real_calls,
                                       args.real_budget_s),
                                      ("large", large, args.large_calls, args.large_budget_s)):
        rows = measured_within_budget(cases, lambda case, loaded: matrix_row(case, loaded, calls, ROUNDS), budget,
                                      lambda r: f"seer {r['seer_us']:.1f} µs, autotune {r['autotune_us']:.1f} µs, "
                                                f"tuning {r['autotune_first_us'] / 1e3:.0f} ms")
        if rows:
            result[key] = {"calls_per_loop": calls, "summary": summary(rows), "rows": rows}
    write_result(args.out, f"spmv-autotune-{device_tag(env['device']['name'])}", result, render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
