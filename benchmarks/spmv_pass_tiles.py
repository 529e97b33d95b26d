"""How the validation pass's kernel is cut, and what its row statistics cost under each cut.

A validated first call runs the pass with statistics; ``benchmarks/selection.py`` charges the
validated path what the statistics add over the pass without them (``spmv_validation.py``'s
``stats_us``), and on the large sets that charge is ~2 points of the one-call fraction of the
oracle (NOTES SpMV 53). The pass is bound by its loads' latency (NOTES SpMV 34): each step of its
main loop loads a block of row pointers and column indices, waits, then does the statistics'
integer work before the next step's loads go out, and the shifted-row count's two dependent
gathers come after the loop. This times the pass with and without statistics on 4 warps a
program, on 8, and as seer launches it (``seer.sparse.pass_warps``: 8 warps where the programs
take a step or more each, else 4). Earlier runs (their results name their cuts) also tried the
main loop software-pipelined (``tl.range`` stages), the count's first row pointers loaded before
the main loop (shipped since), twice the block, 16 warps, and 1 or 4 programs an SM. Every cut's
totals are checked against the host's twin of the pass on every input before timing.
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
from spmv_validation import each_loaded, subsets  # a sibling script: benchmarks/ is on the path when run

from seer import sparse
from seer.datasets.cases import spmv_cases
from seer.profiling import TIMING_ROUNDS, _least_of_rounds, device_tag, environment, provenance, write_result
from seer.sparse import as_csr

BASELINE = "warps4"
# Warps a program (None: seer's choice by size, sparse.pass_warps). Earlier runs also tried
# software-pipelined main loops, the shifted-row count's first loads before the main loop (since
# shipped), twice the block, 16 warps, and 1 or 4 programs an SM; their results name their cuts
# (results/spmv-pass-tiles-h100-earlier-runs/, NOTES SpMV 53).
CUTS = {BASELINE: 4, "warps8": 8, "shipped": None}


def totals(csr, warps: int | None) -> sparse.Structure:
    return sparse.read_totals(sparse.launch_structure(csr, True, True, warps), csr.device)


def host_twin(csr) -> sparse.Structure:
    """What the pass must add up on ``csr``, from the host's copy of it."""
    host = as_csr((csr.indptr.cpu(), csr.indices.cpu(), csr.values.cpu(), csr.shape), check=False)
    return sparse._structure_numpy(host, check=True)


def measure(case, loaded) -> dict:
    source, _ = case.build(loaded)
    csr = as_csr(source, check=False)
    expected = host_twin(csr)
    wrong = [name for name, warps in CUTS.items() if totals(csr, warps) != expected]
    if wrong:
        raise AssertionError(f"{case.id}: cuts {wrong} add up other totals than the host's twin of the pass")
    passes = {(name, stats): (lambda w=warps, s=stats: sparse.launch_structure(csr, True, s, w))
              for name, warps in CUTS.items() for stats in (True, False)}
    least = _least_of_rounds(passes, rep_ms=TIMING_ROUNDS * 25)
    return {"id": case.id, "source": case.source, "rows": csr.rows, "nnz": csr.nnz,
            "cuts": {name: {"stats_us": least[(name, True)] * 1e3, "plain_us": least[(name, False)] * 1e3}
                     for name in CUTS}}


def reference(row: dict) -> str:
    """The cut others are compared with: 4 warps (the earlier runs': the pass as shipped then)."""
    return BASELINE if BASELINE in row["cuts"] else "shipped"


def summary(rows: list[dict]) -> list[dict]:
    """Per subset and cut: median pass with statistics (what a first call waits for), its median
    over the baseline cut's on the same inputs, and the mean of what the statistics add (the
    charge ``selection.py`` takes)."""
    out = []
    for name, group in subsets(rows):
        for cut in group[0]["cuts"]:
            with_stats = np.array([r["cuts"][cut]["stats_us"] for r in group])
            plain = np.array([r["cuts"][cut]["plain_us"] for r in group])
            baseline = np.array([r["cuts"][reference(group[0])]["stats_us"] for r in group])
            out.append({"subset": name, "cut": cut, "inputs": len(group),
                        "stats_us": float(np.median(with_stats)), "plain_us": float(np.median(plain)),
                        "over_baseline": float(np.median(with_stats / baseline)),
                        "added_mean_us": float(np.mean(with_stats - plain)),
                        "added_median_us": float(np.median(with_stats - plain))})
    return out


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"# SpMV validation pass: cuts of its kernel, {env['device']['name']}", "",
             provenance(env, result["command"]) + f"; {len(result['rows'])} inputs.", "",
             "Device time of the pass's kernel, µs (CUDA events, L2 flushed, least of three medians in "
             "alternation). with: the pass with statistics (a validated first call's); plain: without; "
             "over baseline: median over inputs of with / the baseline cut's with (4 warps; in earlier runs the "
             "then shipped cut); added: with minus plain, "
             "mean (what `selection.py` charges) and median.", "",
             "Cuts: " + "; ".join(f"`{name}` {cut}" for name, cut in result["cuts"].items())
             + " (warps a program, None: seer's choice by size; in earlier runs: row block, index block, warps, "
             "stages, early count, programs per SM).", "",
             "| inputs | count | cut | with | plain | over baseline | added, mean | added, median |",
             "|---|---|---|---|---|---|---|---|"]
    for s in result["summary"]:
        lines.append(f"| {s['subset']} | {s['inputs']} | {s['cut']} | {s['stats_us']:.2f} | {s['plain_us']:.2f} | "
                     f"{s.get('over_baseline', s.get('over_shipped')):.3f} | {s['added_mean_us']:+.2f} | {s['added_median_us']:+.2f} |")
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
    rows = [measure(case, loaded) for case, loaded in each_loaded(cases, args.budget_s)]
    result = {"benchmark": "spmv validation pass cuts", "environment": environment(torch.device("cuda")),
              "command": " ".join(["python", *sys.argv]), "cuts": CUTS,
              "summary": summary(rows), "rows": rows}
    write_result(args.out, f"spmv-pass-tiles-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
