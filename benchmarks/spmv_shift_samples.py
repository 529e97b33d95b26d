"""How the shifted-row count's cost to the validation pass grows with the rows it samples.

The count (``seer.sparse``, NOTES SpMV 33) costs the pass under 1 µs in median but 12-24 µs on
the largest stencils and bands, the matrices whose sampled rows do shift and so load two column
indices each. This times the pass's kernel on those matrices (the ``--top`` costliest of a
``benchmarks/validation_delta.py`` result) and on as many of the same size whose count is cheap,
with the count sampling 0 (off), 1,024, 4,096 and 16,384 (shipped) rows: a cost that follows the
sample count is the gathers' own; one that does not is elsewhere in the kernel.
Kernel time as ``spmv_validation.py`` takes it (CUDA events, L2 flushed, least of three medians
with and without statistics in alternation); ``added_us`` is with minus without.

    python benchmarks/spmv_shift_samples.py --matrices .carry/suitesparse \
        --costs benchmarks/results/spmv-validation-h100-count.json --out benchmarks/results
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from spmv_validation import each_loaded, kernel_us  # a sibling script: benchmarks/ is on the path when run

from seer import sparse
from seer.datasets.cases import spmv_cases
from seer.profiling import device_tag, environment, provenance, write_result
from seer.sparse import as_csr

SAMPLES = (0, 1024, 4096, 16384)


def picked_ids(costs: dict, top: int) -> dict[str, str]:
    """id -> "costly" or "cheap": the ``top`` inputs the count costs most, and as many of the
    inputs of at least the smallest of those sizes that it costs least."""
    rows = sorted(costs["rows"], key=lambda r: r["stats_us"])
    costly = rows[-top:]
    floor = min(r["nnz"] for r in costly)
    cheap = [r for r in rows if r["nnz"] >= floor and r not in costly][:top]
    return {**{r["id"]: "cheap" for r in cheap}, **{r["id"]: "costly" for r in costly}}


def added_us(csr, samples: int) -> float:
    """What the statistics add to the pass with the count sampling ``samples`` rows (0: off); on a
    seer without the count (an older checkout, for comparison) the pass as it is, under 0 only."""
    if not hasattr(sparse, "SHIFT_SAMPLES"):
        return _added_us(csr) if samples == 0 else float("nan")
    saved = sparse.SHIFT_SAMPLES, sparse.SHIFT_MIN_ROWS
    sparse.SHIFT_SAMPLES, sparse.SHIFT_MIN_ROWS = max(samples, 1), (saved[1] if samples else 2**62)
    try:
        return _added_us(csr)
    finally:
        sparse.SHIFT_SAMPLES, sparse.SHIFT_MIN_ROWS = saved


def _added_us(csr) -> float:
    with_stats, without = kernel_us(csr)  # one timing, both kernels in alternation
    return with_stats - without


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"# Shifted-row count: cost by rows sampled, {env['device']['name']}", "",
             provenance(env, result['command']) + ".", "",
             "What the statistics add to the validation pass's kernel (µs, with minus without), by rows the "
             "count samples (0: count off).", "",
             "| input | kind | rows | nnz | " + " | ".join(f"{s:,}" for s in SAMPLES) + " |",
             "|---|---|---|---|" + "---|" * len(SAMPLES)]
    for r in result["rows"]:
        lines.append(f"| {r['id']} | {r['kind']} | {r['rows']:,} | {r['nnz']:,} | "
                     + " | ".join(f"{r['added_us'][str(s)]:+.2f}" for s in SAMPLES) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrices", type=Path, required=True)
    parser.add_argument("--costs", type=Path, required=True, help="a benchmarks/validation_delta.py result")
    parser.add_argument("--top", type=int, default=6)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    kinds = picked_ids(json.loads(args.costs.read_text()), args.top)
    cases = [c for c in spmv_cases([args.matrices], synthetic="large") if c.id in kinds]
    rows = []
    for case, loaded in each_loaded(cases, None):
        csr = as_csr(case.build(loaded)[0], check=False)
        rows.append({"id": case.id, "kind": kinds[case.id], "rows": csr.rows, "nnz": csr.nnz,
                     "added_us": {str(s): added_us(csr, s) for s in SAMPLES}})
        del csr
        torch.cuda.empty_cache()
    result = {"benchmark": "spmv shifted-row count by samples", "environment": environment(torch.device("cuda")),
              "command": " ".join(["python", *sys.argv]), "rows": rows}
    write_result(args.out, f"spmv-shift-samples-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
