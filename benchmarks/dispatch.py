"""Host cost of one call: raw Triton launch vs seer.dispatch (cache hit, cold) vs torch CSR.

Most real matrices are tiny, so the host path decides who wins. For each matrix size this times
back-to-back loops (synchronised at the end; the GPU work of these sizes is shorter than the
host work, so the loop time is host time) of:
  raw       the chosen kernel's own ``kernel[grid](...)`` launch, output preallocated
  launcher  seer's thin launcher of the chosen variant (``VARIANTS[v].run``), output preallocated
  hit_out   ``seer.dispatch(..., out=y)`` on the same matrix object again (decision cached): the
            same work as raw, so ``hit - raw`` is what seer adds to a launch
  hit       the same without ``out=``: a new y per call
  cold      ``seer.dispatch`` after ``seer.clear_cache()`` (validate + features + tree + launch)
  torch     ``torch`` sparse CSR ``A @ x`` (cuSPARSE)
With ``--matrices``, also every real matrix of that folder as a user holds it (a torch sparse CSR
tensor): one cached ``seer.dispatch`` call (the shipped model's choice, a new y) against one
``A @ x`` on the same tensor, each the least of five alternated loops' per-call times, after
checking that the two results agree; and each one's *first* call on a new tensor of that matrix
(seer: validation pass, row statistics, tree, the variant's preparation and launch; torch: its one
call), synchronised, the least of five. Beside them two like-for-like pairs: seer on the matrix
passed unchecked (``as_csr(A, check=False)``: no validation, stage 1 on shape and nnz), as torch
takes it; and torch validating as seer does (the tensor built with ``check_invariants=True``, its
construction timed, since that is where torch checks). With ``--large-budget-s``, the same on the generated large
suite (1M-50M nnz; its matrices built as the profile campaign builds them) for that many seconds.
Writes benchmarks/results/dispatch-<device>.json and .md.

    python benchmarks/dispatch.py --out benchmarks/results --matrices .carry/suitesparse
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

import seer
import seer.dispatch
from seer.datasets.cases import spmv_cases
from seer.errors import SeerError
from seer.kernels import spmv as kernels
from seer.sparse import as_csr
from seer.profiling import (alternated_host_us, device_tag, environment, host_call_us, measured_within_budget,
                            provenance, synchronised_us, write_result)

dispatch_module = sys.modules["seer.dispatch"]

SIZES = (1_000, 16_000, 100_000)
REAL_ROUNDS = 5


def matrix(nnz: int, seed: int = 0):
    rows = max(nnz // 8, 1)
    m = sp.random(rows, rows, density=nnz / rows**2, format="csr", random_state=seed, dtype=np.float32)
    return m, tuple(torch.from_numpy(a).cuda() for a in (m.indptr, m.indices, m.data)) + (m.shape,)


def raw_launch(csr, x, y, variant):
    """``kernel[grid](...)`` of a row-mapped variant with y preallocated: the floor of a launch."""
    p = kernels.VARIANTS[variant].params
    if p["kind"] not in ("scalar", "vector"):
        return None
    group = p.get("group", 1)
    grid = (-(-csr.rows // p["rows"]),)

    def launch():
        kernels._csr_rows_kernel[grid](csr.indptr, csr.indices, csr.values, x, 1, y, 1, csr.rows,
                                       ROWS=p["rows"], G=group, num_warps=p["num_warps"])

    return launch


def measure(nnz: int, calls: int, repeats: int) -> dict:
    m, parts = matrix(nnz)
    x = torch.randn(m.shape[1], device="cuda")
    seer.clear_cache()
    decision = seer.explain("spmv", (parts, x))
    csr = decision.problem
    variant = decision.variant if kernels.VARIANTS[decision.variant].params["kind"] in ("scalar", "vector") else "vector_g8"
    y = torch.empty(csr.rows, device="cuda")
    torch_csr = torch.sparse_csr_tensor(*parts[:3], m.shape)

    def cold():
        seer.clear_cache()
        seer.dispatch("spmv", (parts, x))

    entry = seer.get_op("spmv")

    def bookkeeping():  # what a cache hit adds to the decision's bound call: split, key, lookup
        source, _ = entry.kernels.split((parts, x))
        dispatch_module._cache.get(("spmv", entry.kernels.cache_key(source), None, variant))

    paths = {
        "bookkeeping": bookkeeping,
        "raw": raw_launch(csr, x, y, variant),
        "launcher": lambda: kernels.VARIANTS[variant].run(csr, x, y),
        "hit_out": lambda: seer.dispatch("spmv", (parts, x), out=y, variant=variant),
        "hit": lambda: seer.dispatch("spmv", (parts, x), variant=variant),
        "hit_model_choice": lambda: seer.dispatch("spmv", (parts, x)),
        "cold": cold,
        "torch": lambda: torch_csr @ x,
    }
    result = {"nnz": m.nnz, "rows": m.shape[0], "variant_timed": variant, "seer_choice": decision.variant,
              "seer_stage": decision.stage}
    for name, fn in paths.items():
        n = max(calls // 20, 50) if name == "cold" else calls
        samples = [host_call_us(fn, n, warmup=20) for _ in range(repeats)]
        result[f"{name}_us"] = float(np.median(samples))
        result[f"{name}_us_spread"] = float(np.max(samples) - np.min(samples))
    result["hit_minus_raw_us"] = result["hit_out_us"] - result["raw_us"]
    return result


def real_matrix_calls(folder: Path, calls: int, rounds: int = REAL_ROUNDS, device: str = "cuda") -> list[dict]:
    """Host time per call of seer.dispatch (cached) and torch CSR on each real matrix of ``folder``."""
    rows = []
    cases = spmv_cases([folder], device=device)
    # Seeded shuffle: the host's speed drifts over minutes, which in size order would pass for a
    # trend with matrix size.
    for i in np.random.default_rng(0).permutation(len(cases)):
        case = cases[i]
        try:
            loaded = case.load()
        except SeerError as error:  # as the profile campaign does: an unreadable input is skipped
            print(f"skipped {case.id}: {error}")
            continue
        rows.append(matrix_calls(case, loaded, calls, rounds))
    return rows


def large_matrix_calls(folder: Path, calls: int, rounds: int, budget_s: float) -> list[dict]:
    """The same on the large derived and synthetic suite (seeded order, every family early), for
    ``budget_s`` seconds: there the kernels outlast the host work, so a loop's time per call is the
    device's, what a caller's loop sees."""
    cases = [c for c in spmv_cases([folder], synthetic="large") if c.source != "real"]
    return measured_within_budget(cases, lambda case, loaded: matrix_calls(case, loaded, calls, rounds), budget_s,
                                  lambda row: f"seer {row['seer_us']:.1f} µs, torch {row['torch_us']:.1f} µs")


def matrix_calls(case, loaded, calls: int, rounds: int) -> dict:
    """One matrix as a user holds it (a torch sparse CSR tensor): a cached seer.dispatch against
    ``A @ x`` (least of ``rounds`` alternated loops of ``calls``), and each one's first call."""
    parts, (x,) = case.build(loaded)
    A = torch.sparse_csr_tensor(*parts[:3], parts[3])
    y_torch = A @ x
    _agree(case.id, seer.dispatch("spmv", (A, x)), y_torch, "on the first call")  # which validates and decides
    paths = {"seer": lambda: seer.dispatch("spmv", (A, x)), "torch": lambda: A @ x}
    samples = alternated_host_us(paths, calls, rounds)  # least kept: a stalled host only ever adds time
    # As calls add up seer may choose again (1M+ nonzeros): the variant the loops ended on is checked too.
    _agree(case.id, seer.dispatch("spmv", (A, x)), y_torch, "after the timed loops")
    def torch_checked(_):
        return torch.sparse_csr_tensor(*parts[:3], parts[3], check_invariants=True) @ x

    firsts = first_calls({"seer": lambda B: seer.dispatch("spmv", (B, x)), "torch": lambda B: B @ x,
                          "seer_unchecked": lambda B: seer.dispatch("spmv", (as_csr(B, check=False), x)),
                          "torch_checked": torch_checked},
                         lambda: torch.sparse_csr_tensor(*parts[:3], parts[3]), rounds)
    return {"id": case.id, "rows": A.shape[0], "nnz": A.values().numel(),
            "seer_choice": seer.explain("spmv", (A, x)).variant,
            **{f"{name}_us": min(values) for name, values in samples.items()},
            **{f"{name}_first_us": us for name, us in firsts.items()}}


def _agree(case_id: str, y_seer, y_torch, when: str) -> None:
    error = ((y_seer - y_torch).norm() / y_torch.norm().clamp_min(1e-30)).item()
    if not error < 1e-4:
        raise AssertionError(f"seer and torch CSR disagree on {case_id} {when}: relative difference {error:.1e}")


def first_calls(paths: dict, new_matrix, rounds: int) -> dict[str, float]:
    """Host time of each path's first call on a new matrix object (so seer decides afresh; the
    cache keeps the old ones alive, so their ids are not reused), up to a synchronisation: the
    least of ``rounds`` alternated tries, each round starting one path later than the last so
    that no path always runs first."""
    best, names = {name: float("inf") for name in paths}, list(paths)
    for round_ in range(rounds):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            fn = paths[name]
            matrix = new_matrix()
            best[name] = min(best[name], synchronised_us(lambda: fn(matrix))[1])
    return best


def real_summary(rows: list[dict]) -> dict:
    if not rows:  # its geometric means would be NaN, which JSON cannot hold and the results would quote
        raise ValueError("no matrix was measured")
    seer_us, torch_us = (np.array([r[f"{k}_us"] for r in rows]) for k in ("seer", "torch"))
    summary = {"matrices": len(rows), "speedup_vs_torch_call": float(np.exp(np.log(torch_us / seer_us).mean())),
               "median_seer_us": float(np.median(seer_us)), "median_torch_us": float(np.median(torch_us)),
               "seer_faster_on": int((seer_us < torch_us).sum())}
    if all("seer_first_us" in r for r in rows):
        seer_first, torch_first = (np.array([r[f"{k}_first_us"] for r in rows]) for k in ("seer", "torch"))
        summary.update(first_call_speedup_vs_torch=float(np.exp(np.log(torch_first / seer_first).mean())),
                       median_seer_first_us=float(np.median(seer_first)),
                       median_torch_first_us=float(np.median(torch_first)),
                       seer_first_faster_on=int((seer_first < torch_first).sum()))
    if all("seer_unchecked_first_us" in r for r in rows):
        for seer_path, torch_path in (("seer_unchecked", "torch"), ("seer", "torch_checked")):
            mine, theirs = (np.array([r[f"{k}_first_us"] for r in rows]) for k in (seer_path, torch_path))
            summary[f"first_call_{seer_path}_vs_{torch_path}"] = {
                "speedup": float(np.exp(np.log(theirs / mine).mean())), "seer_faster_on": int((mine < theirs).sum()),
                "median_seer_us": float(np.median(mine)), "median_torch_us": float(np.median(theirs))}
    return summary


def render(result: dict) -> str:
    """Markdown of a result: medians of the repeats, with the spread (max - min) of each path."""
    has_out = all("hit_out_us" in r for r in result["rows"])  # results from before out= have no such column
    header = ("| nnz | seer choice | raw | launcher | " + ("hit, out= | " if has_out else "") +
              "hit, new y | bookkeeping | cold | torch CSR | hit - raw |\n|---|---|---|---|"
              + ("---|" if has_out else "") + "---|---|---|---|---|\n")
    cell = lambda r, k: f"{r[k + '_us']:.1f} ± {r[k + '_us_spread'] / 2:.1f}"
    lines = [f"| {r['nnz']:,} | {r['seer_choice']} | {cell(r, 'raw')} | {cell(r, 'launcher')} | "
             + (f"{cell(r, 'hit_out')} | " if has_out else "") +
             f"{cell(r, 'hit')} | {cell(r, 'bookkeeping')} | {cell(r, 'cold')} | {cell(r, 'torch')} | "
             f"{r['hit_minus_raw_us']:+.1f} |" for r in result["rows"]]
    return (f"# Dispatch host cost per call (us), {result['device']['name']}\n\n"
            + provenance(result, result['command'])
            + f"; median of {result['repeats']} loops of {result['calls_per_loop']} calls (± half the spread)\n\n"
            + header + "\n".join(lines) + "\n\nbookkeeping: what a cache hit adds to the call its decision keeps "
            "(split, cache key, LRU lookup; the call checks the operands), timed alone. hit - raw: "
            + ("with out=, the same work as the raw launch.\n" if has_out else "the hit allocates y, raw does not.\n")
            + render_real(result.get("real_matrices"))
            + render_real(result.get("large_matrices"), "Large matrices (derived and synthetic, 1M-50M nnz)"))


def render_real(real: dict | None, title: str = "Real matrices") -> str:
    if not real:
        return ""
    s = real["summary"]
    return (f"\n## {title}: one cached call against one torch CSR call\n\n`{real['folder']}`; per matrix "
            f"the least of {real['rounds']} alternated loops of {real['calls_per_loop']} calls; seer: `seer.dispatch` "
            "on the torch CSR tensor (the shipped model's choice, a new y per call); torch: `A @ x` on the same tensor.\n\n"
            "| matrices | speed-up over torch CSR (geomean) | seer faster on | median seer call | median torch call |\n"
            "|---|---|---|---|---|\n"
            f"| {s['matrices']} | {s['speedup_vs_torch_call']:.2f}x | {s['seer_faster_on']} | "
            f"{s['median_seer_us']:.1f} µs | {s['median_torch_us']:.1f} µs |\n" + render_first_calls(s))


def render_first_calls(s: dict) -> str:
    if "first_call_speedup_vs_torch" not in s:
        return ""
    return ("\n### The first call on a new matrix\n\nseer decides afresh (validation pass with row statistics, "
            "tree, the chosen variant's preparation, launch); torch makes its one call; each on a new tensor "
            "object, synchronised, the least of the rounds.\n\n"
            "| matrices | speed-up over torch CSR (geomean) | seer faster on | median seer first call | "
            "median torch first call |\n|---|---|---|---|---|\n"
            f"| {s['matrices']} | {s['first_call_speedup_vs_torch']:.2f}x | {s['seer_first_faster_on']} | "
            f"{s['median_seer_first_us']:.1f} µs | {s['median_torch_first_us']:.1f} µs |\n" + render_like_for_like(s))


LIKE_FOR_LIKE = {"first_call_seer_unchecked_vs_torch": "neither validates: seer on `as_csr(A, check=False)` "
                                                       "(stage 1, no read-back), torch's `A @ x`",
                 "first_call_seer_vs_torch_checked": "both validate: seer as above, torch building the tensor "
                                                     "with `check_invariants=True` (construction timed), then `A @ x`"}


def render_like_for_like(s: dict) -> str:
    pairs = [(key, s[key]) for key in LIKE_FOR_LIKE if key in s]
    if not pairs:
        return ""
    return ("\nLike for like, on the same matrices and rounds:\n\n| first call | speed-up over torch (geomean) | "
            "seer faster on | median seer | median torch |\n|---|---|---|---|---|\n"
            + "".join(f"| {LIKE_FOR_LIKE[key]} | {v['speedup']:.2f}x | {v['seer_faster_on']} | "
                      f"{v['median_seer_us']:.1f} µs | {v['median_torch_us']:.1f} µs |\n" for key, v in pairs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--render", type=Path, default=None, help="only rewrite the .md of this result JSON")
    parser.add_argument("--matrices", type=Path, default=None,
                        help="folder of real matrices (SuiteSparse layout): also time every one against torch CSR")
    parser.add_argument("--real-calls", type=int, default=None, help="calls per loop on each real matrix (500)")
    parser.add_argument("--large-budget-s", type=float, default=0,
                        help="with --matrices, also time the large suite's matrices for this many seconds")
    parser.add_argument("--large-calls", type=int, default=None, help="calls per loop on each large matrix (50)")
    args = parser.parse_args()
    if args.matrices is None and (args.large_budget_s > 0 or args.real_calls is not None or args.large_calls is not None):
        parser.error("--real-calls, --large-calls and --large-budget-s time the matrices of --matrices: give it too")
    args.real_calls, args.large_calls = args.real_calls or 500, args.large_calls or 50
    if args.render:
        args.render.with_suffix(".md").write_text(render(json.loads(args.render.read_text())))
        return 0
    warnings.simplefilter("ignore", seer.SeerWarning)
    env = environment(torch.device("cuda", torch.cuda.current_device()))
    rows = [measure(nnz, args.calls, args.repeats) for nnz in SIZES]
    result = {"benchmark": "dispatch host cost per call (us)", **env,
              "command": " ".join([Path(sys.executable).name, *sys.argv]), "calls_per_loop": args.calls,
              "repeats": args.repeats, "rows": rows}
    if args.matrices:
        real = real_matrix_calls(args.matrices, args.real_calls)
        if not real:
            sys.exit(f"no real matrix of {args.matrices} could be measured")
        result["real_matrices"] = {"folder": str(args.matrices), "calls_per_loop": args.real_calls,
                                   "rounds": REAL_ROUNDS, "summary": real_summary(real), "rows": real}
        large = (large_matrix_calls(args.matrices, args.large_calls, REAL_ROUNDS, args.large_budget_s)
                 if args.large_budget_s > 0 else [])
        if large:
            result["large_matrices"] = {"folder": f"{args.matrices} (generated large suite)",
                                        "calls_per_loop": args.large_calls, "rounds": REAL_ROUNDS,
                                        "summary": real_summary(large), "rows": large}
        elif args.large_budget_s > 0:
            print(f"no large matrix measured within --large-budget-s {args.large_budget_s:g}: none reported")
    write_result(args.out, f"dispatch-{device_tag(env['device']['name'])}", result, render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
