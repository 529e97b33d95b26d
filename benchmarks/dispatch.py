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
Writes benchmarks/results/dispatch-<device>.json and .md.

    python benchmarks/dispatch.py --out benchmarks/results
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

import seer
import seer.dispatch
from seer.kernels import spmv as kernels
from seer.profiling import device_tag, environment, write_result

dispatch_module = sys.modules["seer.dispatch"]

SIZES = (1_000, 16_000, 100_000)


def per_call_us(fn, calls: int) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


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

    def bookkeeping():  # what a cache hit adds to the launcher: split, key, lookup, checks
        source, operands = entry.kernels.split((parts, x))
        dispatch_module._cache.get(("spmv", entry.kernels.cache_key(source), None, variant))
        entry.kernels.check_operands(csr, operands)

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
        samples = [per_call_us(fn, n) for _ in range(repeats)]
        result[f"{name}_us"] = float(np.median(samples))
        result[f"{name}_us_spread"] = float(np.max(samples) - np.min(samples))
    result["hit_minus_raw_us"] = result["hit_out_us"] - result["raw_us"]
    return result


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
    return (f"# Dispatch host cost per call (us), {result['device']['name']}\n\n{result['date']}; torch "
            f"{result['versions']['torch']}, triton {result['versions']['triton']}; `{result['command']}`; "
            f"median of {result['repeats']} loops of {result['calls_per_loop']} calls (± half the spread)\n\n"
            + header + "\n".join(lines) + "\n\nbookkeeping: what a cache hit adds to seer's own launcher "
            "(split, cache key, LRU lookup, operand checks), timed alone. hit - raw: "
            + ("with out=, the same work as the raw launch.\n" if has_out else "the hit allocates y, raw does not.\n"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--render", type=Path, default=None, help="only rewrite the .md of this result JSON")
    args = parser.parse_args()
    if args.render:
        args.render.with_suffix(".md").write_text(render(json.loads(args.render.read_text())))
        return 0
    warnings.simplefilter("ignore", seer.SeerWarning)
    env = environment(torch.device("cuda", torch.cuda.current_device()))
    rows = [measure(nnz, args.calls, args.repeats) for nnz in SIZES]
    result = {"benchmark": "dispatch host cost per call (us)", **env,
              "command": " ".join([Path(sys.executable).name, *sys.argv]), "calls_per_loop": args.calls,
              "repeats": args.repeats, "rows": rows}
    write_result(args.out, f"dispatch-{device_tag(env['device']['name'])}", result, render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
