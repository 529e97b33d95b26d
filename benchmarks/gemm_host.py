"""Host time of one GEMM call, Triton's launch path against seer's direct launches.

Until session 42 every Triton GEMM call launched through ``kernel[grid](...)`` (Triton's binder,
cache lookup and launcher wrapper, behind ``seer.launch.through_triton``'s lock). The tile and
split-K variants now keep a plan per problem whose launches after the first are direct. This times,
on products the device runs faster than the host can launch them (so the loop is host-bound), per
shipped variant (and ``torch_matmul``, the choice on most small shapes, which has no Triton path):
  torch_matmul   ``torch.matmul(a, b, out=c)`` (cuBLAS), the peer
  triton_path    the call as it was: ``out`` checked, then each kernel through Triton's path
  run            ``VARIANTS[name].run(problem, a, b, out=c)``: the plan, then direct launches
  bound          the call dispatch keeps with a cached decision (``bind``)
  dispatch       ``seer.dispatch("gemm", (a, b), out=c, variant=name)``, cached
  matmul_new     ``torch.matmul(a, b)``, a new C each call: the caller's loop ``gemm.py`` times
  dispatch_new   ``seer.dispatch("gemm", (a, b), variant=name)``, a new C each call
host wall time per call (the loop's time over its length, the device drained at both ends), least and
median of ``--rounds`` alternated loops of ``--calls``; every form's product checked against
torch.matmul in float32 first, ``out`` poisoned.

    python benchmarks/gemm_host.py [--out benchmarks/results]
"""
from __future__ import annotations

import argparse
import statistics
import sys

import torch
import triton

import seer
from seer.kernels import gemm
from seer.launch import through_triton
from seer.profiling import alternated_host_us, device_tag, environment, provenance, write_result

# (variant, M, N, K): one of each planned kind, K long enough for the split-K ones to split.
CASES = (("torch_matmul", 128, 128, 128), ("tile_64x64x64_w4s4g8", 128, 128, 128), ("splitk4fix_16x64x128_w4s4g1", 16, 256, 1024),
         ("splitk2_64x64x64_w4s4g8", 64, 128, 1024))


def triton_path(config: gemm.GemmConfig, p: gemm.GemmProblem, a, b, out) -> torch.Tensor:
    """The call before plans: every kernel launched through Triton's own path."""
    c = gemm._output(p, out, a, b)
    meta = config.meta()
    if config.kind == "tiles":
        through_triton(gemm._gemm_kernel, (config.grid_size(p),), a, b, c, p.M, p.N, p.K, *a.stride(), *b.stride(),
                       *c.stride(), **meta)
        return c
    splits, k_per_split = config.splits(p)
    tiles = config.tiles(p)
    if config.kind == "splitk":
        partial = torch.empty((splits, p.M, p.N), dtype=torch.float32, device=p.device)
        through_triton(gemm._gemm_splitk_kernel, (tiles, splits), a, b, partial, p.M, p.N, p.K, *a.stride(),
                       *b.stride(), k_per_split, **meta)
        through_triton(gemm._sum_splits_kernel, (triton.cdiv(p.M * p.N, gemm._SUM_BLOCK),), partial, c, p.M * p.N,
                       splits, BLOCK=gemm._SUM_BLOCK)
        return c
    partial = torch.empty(tiles * splits * config.block_m * config.block_n, dtype=torch.float32, device=p.device)
    through_triton(gemm._gemm_splitk_fixup_kernel, (tiles, splits), a, b, c, partial,
                   gemm._arrival_counters(p.device, tiles), p.M, p.N, p.K, *a.stride(), *b.stride(), *c.stride(),
                   k_per_split, splits, **meta)
    return c


def forms(name: str, a, b, out) -> dict:
    variant = gemm.VARIANTS[name]
    p = gemm.problem((a, b))
    call = variant.bind(p)
    fns = {"torch_matmul": lambda: torch.matmul(a, b, out=out)}
    if name != "torch_matmul":
        config = variant.run.args[0]
        fns["triton_path"] = lambda: triton_path(config, p, a, b, out)
    return fns | {
        "run": lambda: variant.run(p, a, b, out=out),
        "bound": lambda: call(a, b, out=out),
        "dispatch": lambda: seer.dispatch("gemm", (a, b), out=out, variant=name),
        "matmul_new": lambda: torch.matmul(a, b),
        "dispatch_new": lambda: seer.dispatch("gemm", (a, b), variant=name),
    }


def operands(m: int, n: int, k: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """bf16 A and B, B scaled so that C's entries are of order 1, the same on every run."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(m, k, dtype=torch.bfloat16, device=device, generator=gen)
    return a, torch.randn(k, n, dtype=torch.bfloat16, device=device, generator=gen) / k ** 0.5


def check(name: str, fns: dict, a, b, out) -> None:
    """Each of ``fns`` returns A B (those given ``out`` writing it there, poisoned before), within 1% of
    torch.matmul in float32."""
    expected = a.float() @ b.float()
    for form, fn in fns.items():
        out.fill_(float("nan"))
        c = fn()
        error = ((c.float() - expected).norm() / expected.norm()).item()
        if not error < 1e-2:
            raise AssertionError(f"{name}, {form}: relative error {error:.3g} against torch.matmul in float32")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    device = torch.device("cuda")
    results = {}
    for name, m, n, k in CASES:
        a, b = operands(m, n, k, device)
        out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
        fns = forms(name, a, b, out)
        check(name, fns, a, b, out)
        samples = alternated_host_us(fns, args.calls, args.rounds)
        results[name] = {"shape": [m, n, k], "least_us": {f: min(v) for f, v in samples.items()},
                         "median_us": {f: statistics.median(v) for f, v in samples.items()}, "all_us": samples}
    env = environment(device)
    command = " ".join(["python", *sys.argv])
    names = list(dict.fromkeys(form for r in results.values() for form in r["least_us"]))
    lines = [f"# Host time of one GEMM call, on {env['device']['name']}", "",
             provenance(env, command) + "; bf16, `out` given.", "",
             f"Host µs per call: least (median) of {args.rounds} alternated loops of {args.calls}.", "",
             "| variant | M x N x K | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names),
             *[f"| {name} | {'x'.join(map(str, r['shape']))} | "
               + " | ".join(f"{r['least_us'][f]:.1f} ({r['median_us'][f]:.1f})" if f in r["least_us"] else "-"
                            for f in names) + " |"
               for name, r in results.items()]]
    result = {"benchmark": "gemm host", "environment": env, "command": command, "calls": args.calls,
              "rounds": args.rounds, "results": results}
    write_result(args.out, f"gemm-host-{device_tag(torch.cuda.get_device_name())}", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
