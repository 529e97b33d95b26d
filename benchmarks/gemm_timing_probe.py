"""One tiny GEMM timed four ways, to tell a kernel's time from its harness's (H200 session 53).

    python benchmarks/gemm_timing_probe.py --out benchmarks/results [--shape 418 320 192]

``gemm.py`` read ``torch.matmul`` at 39 µs on ``random/1000/3`` (418 x 320 x 192, bf16) against 6.7 µs
for a Triton tile, a 5.8x "worst shape", while its loops of calls read under 14 µs a call. Here, in
one process, for ``torch.matmul``, ``torch.matmul(out=)`` and seer's ``tile_persistent_64x128x64``
(each checked against float64 first): ``do_bench`` (L2 flushed), CUDA events around one call on an idle
GPU (median of 50), the same after a flush and a synchronisation, and the kernels' own device time
from the profiler (5 calls, each after a flush). Writes ``gemm-timing-probe-<gpu>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemm_profile as sweep  # noqa: E402

TILE = "tile_persistent_64x128x64_w4s4g8"


def events_us(fn, before=lambda: None, runs: int = 50) -> float:
    """Median µs between CUDA events around one call of ``fn``, ``before()`` and a synchronisation first."""
    times = []
    for _ in range(runs):
        before()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def kernels_us(fn, flush) -> dict[str, float]:
    """Each kernel's mean device µs over 5 calls, each after a flush (the flush's fill kernel left out)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    return {e.key[:80]: round(e.device_time_total / e.count, 2) for e in prof.key_averages()
            if e.device_time_total > 0 and "FillFunctor" not in e.key}


def main() -> int:
    import triton.testing

    from seer.kernels import gemm
    from seer.profiling import device_tag, environment, write_result

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shape", type=int, nargs=3, default=(418, 320, 192), metavar=("M", "N", "K"))
    args = parser.parse_args()
    m, n, k = args.shape
    a, b = sweep.random_operands(m, n, k, torch.bfloat16, seed=3)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    problem = gemm.problem((a, b))
    ref = gemm.reference(problem, a, b)
    flush = torch.empty(64 * 2**20, dtype=torch.int32, device="cuda")
    fns = {"torch.matmul": lambda: torch.matmul(a, b), "torch.matmul(out=)": lambda: torch.matmul(a, b, out=c),
           TILE: lambda: gemm.VARIANTS[TILE].run(problem, a, b, out=c)}
    rows = []
    for name, fn in fns.items():
        c.fill_(float("nan"))  # the out= calls write c and return it; torch.matmul returns its own
        error = sweep.relative_difference(fn(), ref)
        if not error <= sweep.TOLERANCE:
            raise AssertionError(f"{name} is wrong: relative difference {error:.2e}")
        rows.append({"call": name, "error": error,
                     "do_bench_us": triton.testing.do_bench(fn, warmup=5, rep=50, return_mode="median") * 1e3,
                     "events_idle_us": events_us(fn), "events_after_flush_us": events_us(fn, flush.zero_),
                     "kernels_us": kernels_us(fn, flush)})
    env = {**environment(torch.device("cuda", torch.cuda.current_device())),
           "command": " ".join(["python", *sys.argv]), "shape": [m, n, k]}
    lines = [f"# One {m} x {n} x {k} bf16 GEMM timed four ways ({env['device']['name']})", "",
             f"{env['date']}; torch {env['versions']['torch']}, triton {env['versions']['triton']}; `{env['command']}`. "
             "µs: `do_bench` median (L2 flushed); CUDA events around one call on an idle GPU (median of 50); the same "
             "after a flush and a synchronisation; the kernels' device time from the profiler.", "",
             "| call | do_bench | events, idle GPU | events, after flush + sync | kernels (profiler) |", "|---|---|---|---|---|"]
    lines += [f"| {r['call']} | {r['do_bench_us']:.1f} | {r['events_idle_us']:.1f} | {r['events_after_flush_us']:.1f} | "
              + "; ".join(f"`{name}` {us}" for name, us in r["kernels_us"].items()) + " |" for r in rows]
    write_result(args.out, f"gemm-timing-probe-{device_tag(env['device']['name'])}", {**env, "rows": rows},
                 "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
