"""How the validation pass's kernel is cut, and what its row statistics cost under each cut.

A validated first call runs the pass with statistics; ``benchmarks/selection.py`` charges the
validated path what the statistics add over the pass without them (``spmv_validation.py``'s
``stats_us``), and on the large sets that charge is ~2 points of the one-call fraction of the
oracle (NOTES SpMV 53). The pass is bound by its loads' latency (NOTES SpMV 34): each step of its
main loop loads a block of row pointers and column indices, waits, then does the statistics'
integer work before the next step's loads go out, and the shifted-row count's two dependent
gathers come after the loop. This times the pass with and without statistics under several
``seer.sparse.PassTiles``: the shipped one; the main loop software-pipelined (``tl.range``
stages, the next steps' loads in flight while a step is added up); the count's first row
pointers loaded before the main loop; 8 warps a program, with the same or twice the block.
Every cut's totals are checked against the shipped cut's on every input before timing.
Kernel time as ``spmv_validation.py`` takes it (CUDA events, L2 flushed, least of three medians,
every cut with and without statistics in alternation). ``--real-every`` / ``--large-every`` take
every n-th real and generated input (in the cases' order) to keep a run inside one device call.

    python benchmarks/spmv_pass_tiles.py --matrices .carry/suitesparse --out benchmarks/results
    python benchmarks/spmv_pass_tiles.py --render benchmarks/results/spmv-pass-tiles-h100.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from spmv_validation import each_loaded  # a sibling script: benchmarks/ is on the path when run

from seer import sparse
from seer.datasets.cases import NNZ_BANDS, nnz_band_label, spmv_cases
from seer.profiling import TIMING_ROUNDS, _least_of_rounds, device_tag, environment, provenance, write_result
from seer.launch import sm_count
from seer.sparse import PassTiles, as_csr

SHIPPED = "shipped"
# Programs per SM given explicitly, since the run enlarges the totals buffers for the cuts that
# run more programs (most_programs): the shipped cut runs as seer does, two a program.
CUTS = {
    SHIPPED: PassTiles(programs_per_sm=2),
    "warps8": PassTiles(warps=8, programs_per_sm=2),
    "warps8_early": PassTiles(warps=8, early_count=True, programs_per_sm=2),
    "warps16": PassTiles(warps=16, programs_per_sm=2),
    "per_sm4": PassTiles(programs_per_sm=4),
    "per_sm4_warps8": PassTiles(warps=8, programs_per_sm=4),
    "per_sm1_warps8": PassTiles(warps=8, programs_per_sm=1),
}
# Earlier runs' cuts (their results name them): stages2 / stages3 (tl.range num_stages), early_count,
# stages2_early and warps8_wide (2048 rows and 8192 indices a step on 8 warps), NOTES SpMV 53.


def most_programs(device: torch.device) -> None:
    """Totals buffers for the cut that runs the most programs (this thread's, before any launch)."""
    per_sm = max(tiles.programs_per_sm for tiles in CUTS.values())
    sparse._programs_cap[device] = per_sm * sm_count(device)


def totals(csr, tiles: PassTiles) -> sparse.Structure:
    return sparse.read_totals(sparse.launch_structure(csr, True, True, tiles), csr.device)


def measure(case, loaded) -> dict:
    source, _ = case.build(loaded)
    csr = as_csr(source, check=False)
    expected = totals(csr, CUTS[SHIPPED])
    wrong = [name for name, tiles in CUTS.items() if totals(csr, tiles) != expected]
    if wrong:
        raise AssertionError(f"{case.id}: cuts {wrong} add up other totals than the shipped pass")
    passes = {(name, stats): (lambda t=tiles, s=stats: sparse.launch_structure(csr, True, s, t))
              for name, tiles in CUTS.items() for stats in (True, False)}
    least = _least_of_rounds(passes, rep_ms=TIMING_ROUNDS * 25)
    return {"id": case.id, "source": case.source, "rows": csr.rows, "nnz": csr.nnz,
            "cuts": {name: {"stats_us": least[(name, True)] * 1e3, "plain_us": least[(name, False)] * 1e3}
                     for name in CUTS}}


def subsets(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    groups = [("real", [r for r in rows if r["source"] == "real"])]
    for lo, hi in NNZ_BANDS:
        band = [r for r in rows if r["source"] != "real" and lo <= r["nnz"] < hi]
        if band:
            groups.append((f"generated, {nnz_band_label(lo, hi)}", band))
    return [(name, group) for name, group in groups if group]


def summary(rows: list[dict]) -> list[dict]:
    """Per subset and cut: median pass with statistics (what a first call waits for), its median
    over the shipped cut's on the same inputs, and the mean of what the statistics add (the
    charge ``selection.py`` takes)."""
    out = []
    for name, group in subsets(rows):
        for cut in group[0]["cuts"]:
            with_stats = np.array([r["cuts"][cut]["stats_us"] for r in group])
            plain = np.array([r["cuts"][cut]["plain_us"] for r in group])
            shipped = np.array([r["cuts"][SHIPPED]["stats_us"] for r in group])
            out.append({"subset": name, "cut": cut, "inputs": len(group),
                        "stats_us": float(np.median(with_stats)), "plain_us": float(np.median(plain)),
                        "over_shipped": float(np.median(with_stats / shipped)),
                        "added_mean_us": float(np.mean(with_stats - plain)),
                        "added_median_us": float(np.median(with_stats - plain))})
    return out


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"# SpMV validation pass: cuts of its kernel, {env['device']['name']}", "",
             provenance(env, result["command"]) + f"; {len(result['rows'])} inputs.", "",
             "Device time of the pass's kernel, µs (CUDA events, L2 flushed, least of three medians in "
             "alternation). with: the pass with statistics (a validated first call's); plain: without; "
             "over shipped: median over inputs of with / the shipped cut's with; added: with minus plain, "
             "mean (what `selection.py` charges) and median.", "",
             "Cuts: " + "; ".join(f"`{name}` {tuple(tiles)}" for name, tiles in result["cuts"].items())
             + " (row block, index block, warps, stages, early count, programs per SM).", "",
             "| inputs | count | cut | with | plain | over shipped | added, mean | added, median |",
             "|---|---|---|---|---|---|---|---|"]
    for s in result["summary"]:
        lines.append(f"| {s['subset']} | {s['inputs']} | {s['cut']} | {s['stats_us']:.2f} | {s['plain_us']:.2f} | "
                     f"{s['over_shipped']:.3f} | {s['added_mean_us']:+.2f} | {s['added_median_us']:+.2f} |")
    return "\n".join(lines) + "\n"


def picked(cases: list, real_every: int, large_every: int) -> list:
    real = [c for c in cases if c.source == "real"][::real_every]
    large = [c for c in cases if c.source != "real"][::large_every]
    return real + large


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrices", type=Path, help="folder of real matrices (SuiteSparse layout)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--real-every", type=int, default=4)
    parser.add_argument("--large-every", type=int, default=3)
    parser.add_argument("--render", type=Path, help="write a result's Markdown again from its JSON")
    args = parser.parse_args()
    if args.render:
        result = json.loads(args.render.read_text())
        args.render.with_suffix(".md").write_text(markdown(result))
        return 0
    if args.matrices is None:
        parser.error("--matrices is required to measure")
    cases = picked(spmv_cases([args.matrices], synthetic="large"), args.real_every, args.large_every)
    most_programs(torch.device("cuda", torch.cuda.current_device()))
    rows = [measure(case, loaded) for case, loaded in each_loaded(cases, args.budget_s)]
    result = {"benchmark": "spmv validation pass cuts", "environment": environment(torch.device("cuda")),
              "command": " ".join(["python", *sys.argv]), "cuts": {k: list(v) for k, v in CUTS.items()},
              "summary": summary(rows), "rows": rows}
    write_result(args.out, f"spmv-pass-tiles-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
