"""Is cuBLAS slower inside a CUDA graph, or is the graph timing wrong? A check of ``gemm_inductor.py``.

    python benchmarks/gemm_capture_check.py --out benchmarks/results [--rounds 3]

``gemm_inductor.py`` times each path two ways, and on a few shapes its CUDA graphs read a cuBLAS
call 1.2-5x over the profiler, the same cells in every run (torch's call on 44x5632x64,
seer's identical call on 7x283x449). For ``torch.matmul`` on shapes where they disagreed and two
where they agreed, each round measures, the L2 flushed before every call:

  graph    ``graph_ms``: graphs of 10 flush-and-call pairs and of the flushes alone, replayed,
           their difference per call (events around each replay)
  inside   the same flush-and-call graph replayed under the profiler: per call, its span on the
           GPU between one flush and the next, and the flushes' durations there and in the graph
           of flushes alone (which the subtraction assumes equal)
  outside  ``profiled_ms``: the span from 20 flushed calls outside any graph

and names the kernels each ran. All of it twice: in a fresh process, then after Inductor's
max-autotune has compiled one mm, as in ``gemm_inductor.py``. Writes
``gemm-capture-check-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemm_profile as sweep  # noqa: E402
from gemm_inductor import (  # noqa: E402
    captured_graph, compiled_mm, device_trace, flush_kernels, graph_ms, kernel_names, profiled_ms, spans_after_flushes)

# M, N, K, dtype: the held-out shapes whose two timings disagreed most in gemm_inductor.py's runs,
# and two where they agreed.
SHAPES = ((44, 5632, 64, torch.bfloat16), (7, 283, 449, torch.float16), (1108, 1344, 2176, torch.bfloat16),
          (128, 4096, 4096, torch.bfloat16), (791, 704, 1984, torch.bfloat16))
CALLS = 10
METHOD = ("torch.matmul on each shape's dtype, the L2 flushed (a 256 MB write) before every call; per round: "
          "graph = gemm_inductor.graph_ms ({calls} flush-and-call pairs in a graph less {calls} flushes, medians of 5 "
          "replays timed by events); inside = each call's span on the GPU in that graph's replay from the "
          "profiler's trace (median of {calls}); outside = gemm_inductor.profiled_ms (the span, median of 20 flushed "
          "calls outside any graph, from the trace); in a fresh process, then after Inductor's max-autotune "
          "compiled an mm of {compiled}; the flushes' durations inside the flush-and-call graph and in the graph "
          "of flushes alone, from the trace.")


def graph_anatomy(fn, flush: torch.Tensor) -> dict:
    """What ``graph_ms`` subtracts, from the profiler: in a replayed graph of ``CALLS``
    flush-and-call pairs, the median span per call and the median flush; in one of the flushes
    alone, the median flush."""
    def median_us(nanoseconds) -> float:
        return float(np.median(nanoseconds)) / 1e3

    names = flush_kernels(flush)
    pairs, flushes = captured_graph(lambda: (flush.zero_(), fn()), CALLS), captured_graph(flush.zero_, CALLS)
    for graph in (pairs, flushes):
        graph.replay()  # uploads the graph
    in_pairs = device_trace(pairs.replay)
    return {"call_us": median_us(spans_after_flushes(in_pairs, names, CALLS)),
            "flush_in_pairs_us": median_us([e.duration_ns() for e in in_pairs if e.name() in names]),
            "flush_alone_us": median_us([e.duration_ns() for e in device_trace(flushes.replay)])}


def measure(m: int, n: int, k: int, dtype: torch.dtype, timer: sweep.Timer, rounds: int, phase: str) -> dict:
    a, b = sweep.random_operands(m, n, k, dtype, seed=7)

    def call():
        return torch.matmul(a, b)

    call()
    graph = captured_graph(call, 1)
    graph.replay()
    row = {"phase": phase, "m": m, "n": n, "k": k, "dtype": str(dtype).removeprefix("torch."),
           "kernels_outside": kernel_names(call), "kernels_inside": kernel_names(graph.replay),
           "rounds": [{"graph_us": graph_ms(call, timer.flush) * 1e3, **graph_anatomy(call, timer.flush),
                       "outside_us": profiled_ms(call, timer.flush) * 1e3} for _ in range(rounds)]}
    print(f"{phase}, {m}x{n}x{k} {row['dtype']}: " + "; ".join(
        f"graph {r['graph_us']:.1f} inside {r['call_us']:.1f} outside {r['outside_us']:.1f} µs, flushes "
        f"{r['flush_in_pairs_us']:.1f} / {r['flush_alone_us']:.1f}" for r in row["rounds"]))
    return row


def inductor_compiles(m: int, n: int, k: int, dtype: torch.dtype) -> None:
    """Inductor's max-autotune compiles and tunes an mm of this shape, from nothing."""
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(k, n, device="cuda", dtype=dtype)
    with tempfile.TemporaryDirectory() as cache_root:
        mm, restore, _ = compiled_mm(False, Path(cache_root))
        try:
            mm(a, b)
        finally:
            restore()
    torch.cuda.synchronize()


def markdown(result: dict) -> str:
    from seer.profiling import provenance

    lines = [f"# cuBLAS inside and outside a CUDA graph, {result['device']['name']}", "",
             provenance(result, result["command"]), "", result["method"], "",
             "| process | M x N x K | round | graph (µs) | inside the graph (µs) | outside (µs) | a flush among the "
             "calls / alone (µs) |", "|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        lines += [f"| {row['phase']} | {row['m']} x {row['n']} x {row['k']} {row['dtype']} | {i + 1} | "
                  f"{r['graph_us']:.1f} | {r['call_us']:.1f} | {r['outside_us']:.1f} | "
                  f"{r['flush_in_pairs_us']:.1f} / {r['flush_alone_us']:.1f} |" for i, r in enumerate(row["rounds"])]
    lines += ["", "Kernels (outside; inside where they differ):", ""]
    for row in result["rows"]:
        inside = "" if row["kernels_inside"] == row["kernels_outside"] else f"; inside: {row['kernels_inside']}"
        lines.append(f"- {row['phase']}, {row['m']} x {row['n']} x {row['k']} {row['dtype']}: "
                     f"{row['kernels_outside']}{inside}")
    return "\n".join(lines) + "\n"


def main() -> int:
    from seer.profiling import device_tag, environment, write_result

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    env = environment(torch.device("cuda", torch.cuda.current_device()))
    timer = sweep.Timer()
    rows = [measure(*shape, timer, args.rounds, "fresh") for shape in SHAPES]
    inductor_compiles(*SHAPES[1])
    rows += [measure(*shape, timer, args.rounds, "after an Inductor compile") for shape in SHAPES]
    result = {"benchmark": "cuBLAS inside and outside a CUDA graph", **env,
              "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "method": METHOD.format(calls=CALLS, compiled="x".join(map(str, SHAPES[1][:3]))),
              "rows": rows}
    write_result(args.out, f"gemm-capture-check-{device_tag(env['device']['name'])}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
