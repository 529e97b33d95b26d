"""What the L2 flush before each timed run charges the large SpMV kernels: a flush that writes
against one that only reads.

    python benchmarks/spmv_flush.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: ``do_bench`` (and so every table seer profiles) flushes L2 by zeroing a 256 MB buffer before
each run. The timed kernel then starts with L2 full of that buffer's dirty lines and writes them
back to DRAM as its own data evicts them: up to L2's size (50 MB on an H100 or H200), ~12 us at
the H200's copy rate, charged to every kernel that reads more than L2 holds, and counted by no byte
model. Fitted to the committed tables (time = bytes / rate + fixed), cuSPARSE's times on the
regular families carry 10-13 us of fixed cost on both GPUs.

Each large banded and stencil matrix (10M+ nonzeros) gets the shipped row-mapped variants and
prepared cuSPARSE, every result checked against float64, each timed by one loop of CUDA events
(median of 40 runs after a warm-up) after each of three flushes, in interleaved rounds (least of
the medians): ``written`` (``do_bench``'s: the buffer zeroed), ``read`` (the buffer only read, so
L2 holds clean lines), ``written+read`` (zeroed then read: the write-back done before the clock
starts; it should time as ``read`` does if the write-back is the difference). So are a copy of the
matrix's own bytes (its byte model's count, half read and half written) and the 1 GiB copy that
sets the ceiling. Writes ``spmv-flush-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import statistics
import sys
from typing import Callable

import torch
from scipy.stats import gmean
from large_set import by_turns, check_all
from spmv_bandwidth import minimum_bytes, share_of_copy
from spmv_vector_loads import FAMILIES, MIN_NNZ

from seer.kernels import spmv

VARIANTS = ("scalar_r128", "vector_g4", "vector_g8", "vector_g16", "vector_g32", "vector_g64", "cusparse_prepared")
FLUSH_BYTES = 256 * 2**20  # do_bench's buffer
RUNS, ROUNDS = 40, 2
COPY_BYTES = 2**30


class Flushes:
    """The three ways to empty L2 of a kernel's data before it is timed."""

    def __init__(self):
        self.buffer = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        self.buffer.fill_(1)

    def written(self):
        self.buffer.zero_()

    def read(self):
        self.buffer.amax()  # every line read, one value written

    def written_read(self):
        self.written()
        self.read()

    def all(self) -> dict[str, Callable[[], object]]:
        return {"written": self.written, "read": self.read, "written+read": self.written_read}


def events_median_ms(fn: Callable[[], object], flush: Callable[[], object], runs: int = RUNS) -> float:
    """Median device time of ``fn`` over ``runs`` runs, ``flush`` before each (outside the events)."""
    fn()
    torch.cuda.synchronize()
    marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    for start, end in marks:
        flush()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in marks)


def timed(fns: dict[str, Callable], flushes: dict[str, Callable]) -> dict[str, dict[str, float]]:
    """{flush: {name: least over interleaved rounds of the median}}."""
    times = {f: {n: float("inf") for n in fns} for f in flushes}
    for _ in range(ROUNDS):
        for name, fn in fns.items():
            for flush_name, flush in flushes.items():
                times[flush_name][name] = min(times[flush_name][name], events_median_ms(fn, flush))
    return times


def copy_of(nbytes: int) -> Callable[[], object]:
    """A device copy moving ``nbytes`` (half read, half written), as the ceiling's copy does."""
    src = torch.ones(max(nbytes // 8, 1), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def runs_of(csr, x) -> dict[str, Callable]:
    """Each variant's call on x, its plan made once (as dispatch keeps it) where it has one."""
    runs = {}
    for name in VARIANTS:
        variant = spmv.VARIANTS[name]
        if variant.bind:
            runs[name] = lambda call=variant.bind(csr): call(x)
        else:
            runs[name] = lambda v=variant: v.run(csr, x)
    return runs


def measure_with(flushes: Flushes):
    def measure(case, loaded) -> dict:
        parts, (x,) = case.build(loaded)
        csr = spmv.problem(parts)
        runs = runs_of(csr, x)
        check_all(runs, spmv.reference(csr, x), case.id)
        runs["copy of its bytes"] = copy_of(minimum_bytes(csr.rows, csr.cols, csr.nnz))
        return {"id": case.id, "rows": csr.rows, "cols": csr.cols, "nnz": csr.nnz,
                "time_ms": timed(runs, flushes.all())}

    return measure


def describe(row: dict) -> str:
    t = row["time_ms"]
    best = min(VARIANTS, key=t["written"].get)
    return (f"{best}: written {t['written'][best] * 1e3:.1f} us, read {t['read'][best] * 1e3:.1f}, "
            f"written+read {t['written+read'][best] * 1e3:.1f}")


def markdown(result: dict) -> str:
    rows, ceilings = result["matrices"], result["copy_ceiling_gbps"]
    flushes = list(ceilings)
    lines = [f"# The L2 flush before each timed SpMV run, {result['device']['name']}", "",
             f"torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}, measured "
             f"{result['date']}; `{result['command']}`. Each time: CUDA events around one run, the flush before "
             f"it outside them; median of {RUNS} runs, least of {ROUNDS} interleaved rounds; every variant's "
             "result checked against float64. *written*: a 256 MB buffer zeroed (do_bench's flush, the tables'); "
             "*read*: the buffer only read; *written+read*: zeroed, then read.", "",
             "1 GiB copy (the ceiling), GB/s: " + ", ".join(f"{f} {ceilings[f]:,.0f}" for f in flushes) + ".", "",
             "| matrix | nnz / row | best variant (written) | " + " | ".join(f"{f} µs" for f in flushes)
             + " | written - read µs | share of copy, written / read | copy of its bytes, written - read µs |",
             "|" + "---|" * (6 + len(flushes))]
    for r in rows:
        t = r["time_ms"]
        best = min(VARIANTS, key=t["written"].get)
        read_best = min(VARIANTS, key=t["read"].get)
        copy = t["written"]["copy of its bytes"] - t["read"]["copy of its bytes"]
        lines.append(f"| {r['id']} | {r['nnz'] / r['rows']:.1f} | {best} | "
                     + " | ".join(f"{t[f][best] * 1e3:.1f}" for f in flushes)
                     + f" | {(t['written'][best] - t['read'][best]) * 1e3:.1f} | "
                     f"{share_of_copy(r, t['written'][best], ceilings['written']):.0%} / "
                     f"{share_of_copy(r, t['read'][read_best], ceilings['read']):.0%} | {copy * 1e3:.1f} |")
    if rows:
        lines += ["", "Over all matrices and variants:", "", "| variant | written / read, geometric mean | "
                  "written - read, median µs | written+read / read |", "|---|---|---|---|"]
        for name in (*VARIANTS, "copy of its bytes"):
            w, rd, wr = ([r["time_ms"][f][name] for r in rows] for f in ("written", "read", "written+read"))
            lines.append(f"| {name} | {gmean([a / b for a, b in zip(w, rd)]):.3f} | "
                         f"{statistics.median(a - b for a, b in zip(w, rd)) * 1e3:.1f} | "
                         f"{gmean([a / b for a, b in zip(wr, rd)]):.3f} |")
        for flush in ("written", "read"):
            shares = [share_of_copy(r, min(r["time_ms"][flush][v] for v in VARIANTS), ceilings[flush]) for r in rows]
            lines.append("")
            lines.append(f"Best variant per matrix under the *{flush}* flush, against the 1 GiB copy under the same "
                         f"flush: median {statistics.median(shares):.0%} of copy (min {min(shares):.0%}, "
                         f"max {max(shares):.0%}).")
    return "\n".join(lines) + "\n"


def main() -> int:
    import argparse
    from pathlib import Path

    from seer.datasets.cases import spmv_cases
    from seer.profiling import device_tag, environment, measured_within_budget, write_result

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=Path, required=True, help="real matrices the replicas are built from")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=300)
    args = parser.parse_args()
    flushes = Flushes()
    copy = copy_of(COPY_BYTES)
    ceilings = {f: COPY_BYTES / (ms * 1e-3) / 1e9 for f, ms in
                ((f, t["copy"]) for f, t in timed({"copy": copy}, flushes.all()).items())}
    cases = [c for c in spmv_cases([args.matrices], synthetic="large")
             if c.id.startswith(FAMILIES) and c.extra["size"] >= MIN_NNZ]
    cases = by_turns([[c for c in cases if c.id.startswith(f)] for f in FAMILIES])
    rows = measured_within_budget(cases, measure_with(flushes), args.budget_s, describe)
    name = torch.cuda.get_device_name()
    result = {**environment(torch.device("cuda")), "command": " ".join(["python", *sys.argv]),
              "copy_ceiling_gbps": ceilings, "matrices": rows}
    write_result(args.out, f"spmv-flush-{device_tag(name)}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
