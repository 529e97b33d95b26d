"""Where loops of SpMV calls on one matrix are host-bound (CPU, from two committed GPU results):
each loop's time per call (`spmv_unhinted.py --matrices`: 1,000 `seer.dispatch` calls, first call
included) against the same variant's warm kernel time on the same matrix (`spmv_warm_l2.py`: calls
replayed from a CUDA graph, no host time between them).

    python benchmarks/spmv_loop_host.py benchmarks/results/spmv-unhinted-loops-h100.json \\
        benchmarks/results/spmv-warm-l2-h100.json

A ratio near 1 means the kernel sets the loop's pace; well above 1, the host does (its call, the
variant's launches and allocations). Writes ``spmv-loop-host-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from seer.profiling import device_tag, write_result

PATHS = {"kept": "first_choice", "hinted": "choice_for_n"}  # loop path -> the variant it ran
HOST_BOUND = 1.5  # loop time over warm kernel time above which a loop counts as host-bound


def joined(loops: dict, warm: dict) -> list[dict]:
    """One row per (matrix, variant) timed both in a loop and warm, by nnz."""
    warm_by_id = {r["id"]: r for r in warm["matrices"]}
    rows, seen = [], set()
    for loop in loops["matrices"]:
        kernels = warm_by_id.get(loop["id"])
        for path, field in PATHS.items():
            variant = loop[field]
            if kernels is None or variant not in kernels["warm_ms"] or (loop["id"], variant) in seen:
                continue
            seen.add((loop["id"], variant))
            loop_us = loop[f"{path}_s"] / loops["calls"] * 1e6
            warm_us = kernels["warm_ms"][variant] * 1e3
            rows.append({"id": loop["id"], "nnz": loop["nnz"], "variant": variant, "loop_us": loop_us,
                         "warm_us": warm_us, "ratio": loop_us / warm_us})
    return sorted(rows, key=lambda r: r["nnz"])


def variant_summary(rows: list[dict]) -> list[dict]:
    """Per variant: rows, median loop and warm µs, median ratio, rows over ``HOST_BOUND``."""
    out = []
    for variant in sorted({r["variant"] for r in rows}):
        mine = [r for r in rows if r["variant"] == variant]
        out.append({"variant": variant, "rows": len(mine),
                    "median_loop_us": float(np.median([r["loop_us"] for r in mine])),
                    "median_warm_us": float(np.median([r["warm_us"] for r in mine])),
                    "median_ratio": float(np.median([r["ratio"] for r in mine])),
                    "host_bound": sum(r["ratio"] > HOST_BOUND for r in mine)})
    return out


def markdown(result: dict) -> str:
    lines = [f"# SpMV loops against warm kernels, {result['device']}", "",
             f"From `{result['loops']}` ({result['loops_date']}) and `{result['warm']}` ({result['warm_date']}); "
             f"command: `{result['command']}`. The two runs may have had different hosts.", "",
             f"Loop: µs per call of 1,000 `seer.dispatch` calls (first call included). Warm: the same variant's "
             f"kernel replayed from a CUDA graph. Host-bound: loop over warm above {HOST_BOUND}.", "",
             "| variant | rows | median loop µs | median warm µs | median loop / warm | host-bound |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {s['variant']} | {s['rows']} | {s['median_loop_us']:.1f} | {s['median_warm_us']:.1f} | "
              f"{s['median_ratio']:.2f} | {s['host_bound']} |" for s in result["variants"]]
    lines += ["", "| matrix | nnz | variant | loop µs | warm µs | loop / warm |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['nnz']:,} | {r['variant']} | {r['loop_us']:.1f} | {r['warm_us']:.1f} | "
              f"{r['ratio']:.2f} |" for r in result["rows"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("loops", type=Path, help="spmv-unhinted-loops-<device>.json")
    parser.add_argument("warm", type=Path, help="spmv-warm-l2-<device>.json (the same GPU model)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    loops, warm = (json.loads(p.read_text()) for p in (args.loops, args.warm))
    if loops["device"]["name"] != warm["device"]["name"]:
        parser.error(f"the loops ran on {loops['device']['name']!r}, the warm kernels on {warm['device']['name']!r}")
    rows = joined(loops, warm)
    result = {"benchmark": "SpMV loops against warm kernels", "device": loops["device"]["name"],
              "loops": str(args.loops), "loops_date": loops["date"], "warm": str(args.warm),
              "warm_date": warm["date"], "command": " ".join(["python", *sys.argv]),
              "variants": variant_summary(rows), "rows": rows}
    write_result(args.out, f"spmv-loop-host-{device_tag(result['device'])}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
