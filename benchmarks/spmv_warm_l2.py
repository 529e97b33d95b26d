"""SpMV variants timed back to back, the matrix left in L2 between calls as a solver's loop leaves
it, against the same variants timed cold (L2 flushed before each run, as the profile tables are):
how often the fastest variant changes, and what running the cold winner costs in a warm loop.

    python benchmarks/spmv_warm_l2.py --matrices .carry/suitesparse [--budget-s 200]

Why: in loops of 1,000 calls the choice for 1,000 calls (trained on cold times) ran slower than the
choices for fewer calls on the H200 (NOTES SpMV 46-47). Each large matrix of at most 12M nonzeros
(round-robin by family) gets every variant checked against float64 and timed cold
(``do_bench``, least of interleaved rounds) and warm: ``WARM_CALLS`` calls captured in one CUDA
graph (no host time between them), replayed in interleaved rounds, the least median per call. A
variant that cannot be captured is left out of the warm comparison and named. Writes
``spmv-warm-l2-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import statistics
import sys

import torch
from large_set import checked_times, run
from scipy.stats import gmean
from spmv_floor import round_robin

from seer.kernels import spmv

MAX_SIZE = 12_000_000  # nonzeros (the suite's size estimate): from L2-sized matrices to 5x past it
BANDS = ((0, 3_000_000), (3_000_000, 6_000_000), (6_000_000, None))
WARM_CALLS, WARM_REPLAYS, WARM_ROUNDS = 20, 10, 3


def captured(fn):
    """A CUDA graph of ``WARM_CALLS`` back-to-back calls of ``fn`` (already run once, so planned)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(WARM_CALLS):
            fn()
    return graph


def replay_ms(graph) -> float:
    """Median device ms per call over ``WARM_REPLAYS`` replays, timed by CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()  # the matrix brought into L2
    per_call = []
    for _ in range(WARM_REPLAYS):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / WARM_CALLS)
    return statistics.median(per_call)


def warm_times(runs: dict) -> tuple[dict, dict]:
    """``(warm ms per variant, capture errors)``: the least over interleaved rounds of replays."""
    graphs, errors = {}, {}
    for name, fn in runs.items():
        try:
            graphs[name] = captured(fn)
        except Exception as error:  # named in the result; the variant is left out of the warm side
            errors[name] = f"{type(error).__name__}: {error}"[:200]
            torch.cuda.synchronize()
    warm = {name: float("inf") for name in graphs}
    for _ in range(WARM_ROUNDS):
        for name, graph in graphs.items():
            warm[name] = min(warm[name], replay_ms(graph))
    return warm, errors


def measure(case, loaded) -> dict:
    runs = {}

    def timed_calls(csr, x):
        runs.update({name: (lambda v=variant: v.run(csr, x)) for name, variant in spmv.VARIANTS.items()})
        return runs

    row = checked_times(case, loaded, timed_calls)  # every variant checked (so planned), then timed cold
    row["warm_ms"], row["capture_errors"] = warm_times(runs)
    return row


def winners(row: dict) -> tuple[str, str]:
    """(cold winner, warm winner) among the variants timed both ways."""
    both = [name for name in row["warm_ms"] if name in row["time_ms"]]
    return min(both, key=row["time_ms"].get), min(both, key=row["warm_ms"].get)


def band_summary(rows: list[dict]) -> list[str]:
    cold_won, warm_won = zip(*(winners(r) for r in rows))
    same = sum(c == w for c, w in zip(cold_won, warm_won))
    loss = gmean([r["warm_ms"][c] / r["warm_ms"][w] for r, c, w in zip(rows, cold_won, warm_won)])
    gain = gmean([r["time_ms"][w] / r["warm_ms"][w] for r, w in zip(rows, warm_won)])
    return [str(len(rows)), str(same), f"{loss:.3f}x", f"{gain:.2f}x"]


def markdown(result: dict) -> str:
    rows = result["matrices"]
    lines = [f"# SpMV warm in L2 against cold, {result['device']['name']}", "",
             f"{result['date']}; torch {result['versions']['torch']}, triton {result['versions']['triton']}; "
             f"`{result['command']}`", "",
             f"Cold: `do_bench` median, L2 flushed before each run, least of interleaved rounds (as the profile "
             f"tables). Warm: {WARM_CALLS} calls in one CUDA graph, replayed {WARM_REPLAYS} times after one replay, "
             f"median per call, least of {WARM_ROUNDS} interleaved rounds. Every variant checked against float64.", "",
             "| nnz | matrices | cold winner also warm winner | cold winner's warm time over the warm winner's "
             "(geomean) | warm winner: cold over warm time (geomean) |", "|---|---|---|---|---|"]
    for low, high in BANDS:
        band = [r for r in rows if r["nnz"] >= low and (high is None or r["nnz"] < high)]
        if band:
            label = f"{low / 1e6:g}M-{high / 1e6:g}M" if high else f"{low / 1e6:g}M+"
            lines.append(f"| {label} | " + " | ".join(band_summary(band)) + " |")
    lines += ["", "| matrix | nnz | cold winner | cold µs | warm winner | warm µs | cold winner warm µs |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        cold, warm = winners(r)
        lines.append(f"| {r['id']} | {r['nnz']:,} | {cold} | {r['time_ms'][cold] * 1e3:.1f} | {warm} | "
                     f"{r['warm_ms'][warm] * 1e3:.1f} | {r['warm_ms'][cold] * 1e3:.1f} |")
    errors = sorted({f"{name}: {e}" for r in rows for name, e in r["capture_errors"].items()})
    lines += ["", *[f"Not captured: {e}" for e in errors]]
    return "\n".join(lines) + "\n"


def main() -> int:
    return run(__doc__, "spmv-warm-l2", lambda cases: round_robin([c for c in cases if c.extra["size"] <= MAX_SIZE]),
               measure, lambda r: "cold %s, warm %s" % winners(r), markdown, budget_s=200, copy_ceiling=False)


if __name__ == "__main__":
    sys.exit(main())
