"""How the programs of a first call's validating launch arrive, and what that does to its time.

Every program of the validation pass (``seer.sparse._structure_kernel``) and of the validating
product (``seer.kernels.spmv._validating_product_kernel``) stores a row of partial results and
counts itself in; the last one adds the rows up (``add_up_found``). With one counter for all, the
counting atomics queue when the programs arrive together: on the validating product the row
statistics cost 8.5 ns per program, up to 2.3 µs at 264 programs, and a probe found the cost only
where the programs arrive at the counter (NOTES SpMV 53). This times the launch a first call makes
on each input (the validating product within its bounds, else the pass; ``spmv_validation.py``'s
``first_launch``) with the programs counting in at one counter (``groups`` 1, as before) and in
``seer.sparse.ARRIVAL_GROUPS`` groups (shipped), each with and without statistics, and checks every
launch's totals against the host's twin of the pass. Kernel time as ``spmv_validation.py`` takes
it (CUDA events, L2 flushed, least of three medians, all four in alternation).

    python benchmarks/spmv_arrival.py --matrices .carry/suitesparse --out benchmarks/results
    python benchmarks/spmv_arrival.py --render benchmarks/results/spmv-arrival-h100.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.stats import trim_mean
from spmv_pass_tiles import host_twin, picked, subsets  # sibling scripts: benchmarks/ is on the path when run
from spmv_validation import each_loaded, first_launch

from seer import sparse
from seer.datasets.cases import spmv_cases
from seer.kernels import spmv
from seer.profiling import TIMING_ROUNDS, _least_of_rounds, device_tag, environment, provenance, write_result
from seer.sparse import as_csr

GROUPS = (1, sparse.ARRIVAL_GROUPS)
TRIMMED = 0.1  # as benchmarks/selection.py charges the statistics


def launcher(csr, launch: str):
    """``launch(stats, groups)`` of the launch that validates ``csr`` on a first call."""
    if launch == "pass":
        return lambda stats, groups: sparse.launch_structure(csr, True, stats, groups=groups)
    x = torch.rand(csr.cols, dtype=csr.dtype, device=csr.device) + 0.5
    y = torch.empty(csr.rows, dtype=csr.dtype, device=csr.device)
    return lambda stats, groups: spmv._launch_validating_product(csr, x, y, stats=stats, groups=groups)


def measure(case, loaded) -> dict:
    source, _ = case.build(loaded)
    csr = as_csr(source, check=False)
    launch = first_launch(csr)
    run = launcher(csr, launch)
    expected = host_twin(csr)
    for groups in GROUPS:
        if sparse.read_totals(run(True, groups), csr.device) != expected:
            raise AssertionError(f"{case.id}: the {launch} with {groups} arrival groups adds up other totals")
    least = _least_of_rounds({(g, s): (lambda g=g, s=s: run(s, g)) for g in GROUPS for s in (True, False)},
                             rep_ms=TIMING_ROUNDS * 25)
    return {"id": case.id, "source": case.source, "rows": csr.rows, "nnz": csr.nnz, "first_launch": launch,
            "groups": {str(g): {"stats_us": least[(g, True)] * 1e3, "plain_us": least[(g, False)] * 1e3}
                       for g in GROUPS}}


def summary(rows: list[dict]) -> list[dict]:
    """Per subset (and first launch) and arrival groups: median launch with statistics, its median
    over one counter's on the same inputs, and what the statistics add (trimmed mean, median)."""
    out = []
    for name, group in subsets(rows):
        for launch in ("validating product", "pass"):
            inputs = [r for r in group if r["first_launch"] == launch]
            if not inputs:
                continue
            one = np.array([r["groups"]["1"]["stats_us"] for r in inputs])
            for groups in inputs[0]["groups"]:
                with_stats = np.array([r["groups"][groups]["stats_us"] for r in inputs])
                added = with_stats - np.array([r["groups"][groups]["plain_us"] for r in inputs])
                out.append({"subset": name, "first_launch": launch, "groups": int(groups), "inputs": len(inputs),
                            "stats_us": float(np.median(with_stats)),
                            "over_one_counter": float(np.median(with_stats / one)),
                            "added_trimmed_mean_us": float(trim_mean(added, TRIMMED)),
                            "added_median_us": float(np.median(added))})
    return out


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"# SpMV first-call validation: how its programs arrive, {env['device']['name']}", "",
             provenance(env, result["command"]) + f"; {len(result['rows'])} inputs.", "",
             "Device time of the launch that validates a matrix on its first call (the validating product within "
             "its bounds, else the pass), µs (CUDA events, L2 flushed, least of three medians in alternation). "
             "groups: counters the programs arrive at (1: one for all). with: the launch with statistics; over one "
             "counter: median over inputs of with / with on one counter; added: with minus without statistics, "
             f"mean trimmed by {TRIMMED:.0%} at each end (what `selection.py` charges) and median.", "",
             "| inputs | first launch | count | groups | with | over one counter | added, trimmed mean | added, median |",
             "|---|---|---|---|---|---|---|---|"]
    for s in result["summary"]:
        lines.append(f"| {s['subset']} | {s['first_launch']} | {s['inputs']} | {s['groups']} | {s['stats_us']:.2f} | "
                     f"{s['over_one_counter']:.3f} | {s['added_trimmed_mean_us']:+.2f} | {s['added_median_us']:+.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrices", type=Path, help="folder of real matrices (SuiteSparse layout)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--real-every", type=int, default=1)
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
    result = {"benchmark": "spmv first-call arrival", "environment": environment(torch.device("cuda")),
              "command": " ".join(["python", *sys.argv]), "summary": summary(rows), "rows": rows}
    write_result(args.out, f"spmv-arrival-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
