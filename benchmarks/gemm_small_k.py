"""Would a shallow-K tile win the skinny-K GEMMs that Inductor's templates win? (one GPU)

    python benchmarks/gemm_small_k.py --out benchmarks/results [--budget-s 200]

Against Inductor (``gemm_inductor.py``) seer loses one held-out shape, 382x5344x133, by 1.36-1.6x:
Inductor's picks there were shallow tiles (128x128x32, 64x128x32, 64x64x16 over three runs), and
seer's candidate family has only one tile that shallow (128x128x32), none 64 wide. Here, on skinny-K
shapes (K of 64-256; bf16; M and N from decode to prefill sizes, the held-out two among them),
each timed with the L2 flushed (``gemm_profile.Timer``, ``do_bench`` medians), every result
checked against ``torch.matmul`` first:

  torch     ``torch.matmul`` (cuBLAS)
  shipped   the fastest of the shipped Triton variants (``seer.kernels.gemm.VARIANTS``): the
            best seer's tree could pick today
  shallow   the fastest of the 32-deep tiles of ``SHALLOW`` (six new, and the family's 128x128x32
            with 3 stages instead of 4), each also kept per shape

(The rest of the candidate family is left out: each path compiles for every shape class, and the
tree picks among the shipped variants only.)

Writes ``gemm-small-k-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemm_profile as sweep  # noqa: E402
from gemm import geomean  # noqa: E402

# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, GROUP_M): 32 deep, the widths Inductor's mm templates use.
SHALLOW = ((64, 128, 32, 4, 3, 8), (64, 64, 32, 4, 3, 8), (128, 64, 32, 4, 3, 8), (128, 128, 32, 4, 3, 8),
           (64, 128, 32, 4, 4, 8), (32, 128, 32, 4, 3, 8), (64, 256, 32, 8, 3, 8))
HELD_OUT = ((382, 5344, 133), (44, 5632, 64))  # where Inductor won in gemm-inductor-h100*.md
GRID = tuple((m, n, k) for k in (64, 133, 256) for m in (16, 128, 512, 2048) for n in (4096, 14336))


def shallow_variants() -> dict:
    from seer.kernels.gemm import GemmConfig, as_variant

    configs = [GemmConfig("tiles", *t) for t in SHALLOW]
    return {c.name: as_variant(c) for c in configs}


def time_shape(m: int, n: int, k: int, paths: dict, timer: sweep.Timer) -> dict:
    """The time of every path on one shape; a wrong result stops the run."""
    from seer.kernels import gemm

    a, b = sweep.random_operands(m, n, k, torch.bfloat16, seed=m * 1_000_003 + n * 1_009 + k)
    problem, reference = gemm.problem((a, b)), (a @ b).float()
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    times = {}
    for name, variant in paths.items():
        run = variant.run
        c.fill_(float("nan"))
        run(problem, a, b, out=c)  # compiled, then checked before it is timed
        if not sweep.relative_difference(c, reference) <= sweep.TOLERANCE:
            raise AssertionError(f"{name} disagrees with torch.matmul on {m}x{n}x{k}")
        times[name] = timer.median_ms(lambda: run(problem, a, b, out=c))  # noqa: B023 (called at once)
    return times


def summarise_row(m: int, n: int, k: int, times: dict, shallow: list[str]) -> dict:
    from seer.kernels.gemm import VARIANTS

    def best(names) -> tuple[str, float]:
        name = min(names, key=lambda n: times[n])
        return name, times[name]

    triton_shipped = [n for n in VARIANTS if n != "torch_matmul"]
    row = {"m": m, "n": n, "k": k, "torch_ms": times["torch_matmul"], "times_ms": times}
    for key, names in (("shipped", triton_shipped), ("shallow", shallow)):
        row[f"{key}_choice"], row[f"{key}_ms"] = best(names)
    return row


def summary(rows: list[dict]) -> dict:
    """Per depth of K: how much the best shallow tile gains over cuBLAS, the shipped Triton set
    and the best of both, what seer can run today (time ratios, geometric means over the shapes)."""
    def gains(subset: list[dict]) -> dict:
        known = [(min(r["torch_ms"], r["shipped_ms"]), r["shallow_ms"]) for r in subset]
        return {"shapes": len(subset),
                "shallow_over_torch": geomean([r["torch_ms"] / r["shallow_ms"] for r in subset]),
                "shallow_over_shipped": geomean([r["shipped_ms"] / r["shallow_ms"] for r in subset]),
                "shallow_over_best_known": geomean([best / shallow for best, shallow in known]),
                "shallow_fastest_on": int(sum(shallow < best for best, shallow in known))}

    return {"by_k": {str(k): gains([r for r in rows if r["k"] == k]) for k in sorted({r["k"] for r in rows})},
            "all": gains(rows)}


def markdown(result: dict) -> str:
    from seer.profiling import provenance

    s = result["summary"]
    lines = [f"# GEMM: shallow-K tiles on skinny-K shapes, {result['device']['name']}", "",
             provenance(result, result["command"]), "", result["method"], "",
             "| K | shapes | best shallow tile's speed-up over cuBLAS | over the shipped Triton variants | over "
             "the best of both (seer's oracle today) | fastest of all on |", "|---|---|---|---|---|---|"]
    for k, g in [*s["by_k"].items(), ("all", s["all"])]:
        lines.append(f"| {k} | {g['shapes']} | {g['shallow_over_torch']:.3f} | {g['shallow_over_shipped']:.3f} | "
                     f"{g['shallow_over_best_known']:.3f} | {g['shallow_fastest_on']} |")
    lines += ["", "Per shape (ms):", "",
              "| M x N x K | torch | shipped best | shallow best |", "|---|---|---|---|"]
    lines += [f"| {r['m']} x {r['n']} x {r['k']} | {r['torch_ms']:.4f} | {r['shipped_ms']:.4f} ({r['shipped_choice']}) "
              f"| {r['shallow_ms']:.4f} ({r['shallow_choice']}) |"
              for r in result["rows"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    from seer.errors import SeerWarning
    from seer.kernels.gemm import VARIANTS
    from seer.profiling import device_tag, environment, write_result

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=200)
    args = parser.parse_args()
    env = environment(torch.device("cuda", torch.cuda.current_device()))
    shallow = shallow_variants()
    warnings.simplefilter("ignore", SeerWarning)  # the TMA variants' fallback notice on unaligned K
    paths, timer, started, rows = {**VARIANTS, **shallow}, sweep.Timer(), time.monotonic(), []
    order = list(HELD_OUT) + [GRID[i] for i in np.random.default_rng(0).permutation(len(GRID))]
    for m, n, k in order:
        if time.monotonic() - started > args.budget_s:
            print(f"budget reached: {len(order) - len(rows)} shapes left")
            break
        rows.append(summarise_row(m, n, k, time_shape(m, n, k, paths, timer), list(shallow)))
        r = rows[-1]
        print(f"{m}x{n}x{k}: torch {r['torch_ms']:.4f}, shipped {r['shipped_ms']:.4f}, "
              f"shallow {r['shallow_ms']:.4f} ({r['shallow_choice']}) ms ({time.monotonic() - started:.0f} s)",
              flush=True)
    result = {"benchmark": "GEMM shallow-K tiles", **env, "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "method": ("bf16, random data; every path checked against torch.matmul, then timed by "
                         "triton.testing.do_bench (median, L2 flushed before each run); shapes: the two held-out "
                         "ones Inductor won, then a seeded shuffle of M in {16, 128, 512, 2048} x N in {4096, 14336} "
                         f"x K in {{64, 133, 256}}; shallow tiles: {', '.join(shallow)}."),
              "rows": rows, "summary": summary(rows)}
    write_result(args.out, f"gemm-small-k-{device_tag(env['device']['name'])}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
