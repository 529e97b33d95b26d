"""The diagonal variants' planning pass (which rows follow the longest row's pattern) under two
versions of kernels/spmv.py, in one process (as spmv_ab.py runs the variants).

The pass compares each row's columns with the longest row's offsets; a program none of whose rows
is as long as the pattern need compare nothing. Inputs: matrices where one row is far longer than
the rest (where every program walked the whole long row), an R-MAT and log-normal rows, and a
stencil and a band (every row follows: the pass's work is unchanged). Each time is the median of
CUDA-event times of the pass alone; both versions' flags are checked equal first.

    git show <commit>:kernels/spmv.py > .carry/spmv-before.py                     (this machine)
    python benchmarks/spmv_follows_pattern.py --before .carry/spmv-before.py --out benchmarks/results

Writes ``spmv-follows-pattern-<device>.json`` and ``.md`` under ``--out``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from large_set import events_ms
from spmv_ab import load_before
from seer.datasets import generators
from seer.kernels import spmv as after
from seer.profiling import device_tag, environment, provenance, write_result


def one_long_row(rows: int, mean: int, longest: int) -> sp.csr_matrix:
    """``rows`` rows of ``mean`` nonzeros (random columns), one of them ``longest`` long."""
    rng = np.random.default_rng(0)
    lengths = np.full(rows, mean, dtype=np.int64)
    lengths[rows // 2] = longest
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    columns = np.sort(rng.integers(0, rows, size=(rows, mean)), axis=1).ravel()
    long_columns = np.arange(longest, dtype=np.int64) * (rows // longest)
    indices = np.concatenate([columns[:rows // 2 * mean], long_columns, columns[rows // 2 * mean + mean:]])
    return sp.csr_matrix((np.ones(indptr[-1], dtype=np.float32), indices, indptr), shape=(rows, rows))


INPUTS = {
    "4M rows of 8, one of 250k": lambda: one_long_row(4_000_000, 8, 250_000),
    "2M rows of 16, one of 100k": lambda: one_long_row(2_000_000, 16, 100_000),
    "rmat scale 21, edge factor 16": lambda: generators.rmat(21, 16),
    "log-normal rows, 2M x 2M, mean 16, sigma 1.5": lambda: generators.lognormal_rows(2_000_000, 2_000_000, 16, 1.5),
    "2-D stencil, 3000 x 3000, 5 points": lambda: generators.stencil_2d(3000, 5),
    "band of 21, 3M rows": lambda: generators.banded(3_000_000, 10),
}


def measure(before, matrix: sp.csr_matrix) -> dict:
    parts = (torch.from_numpy(matrix.indptr.astype(np.int32)).cuda(), torch.from_numpy(matrix.indices.astype(np.int32)).cuda(),
             torch.from_numpy(matrix.data).cuda(), matrix.shape)
    sides = {"before": before, "after": after}
    matrices = {side: module.problem(parts) for side, module in sides.items()}
    found = {side: module._find_rows_following_pattern(matrices[side]) for side, module in sides.items()}
    if not all(torch.equal(found["before"][i], found["after"][i]) for i in range(2)):
        raise AssertionError("the two versions flag different rows")
    times = {side: [] for side in sides}
    for _ in range(3):  # interleaved rounds
        for side, module in sides.items():
            times[side].append(events_ms(lambda m=module, c=matrices[side]: m._find_rows_following_pattern(c), tries=7))
    return {"rows": matrix.shape[0], "nnz": int(matrix.nnz), "longest": int(np.diff(matrix.indptr).max()),
            "following": int(found["after"][1].sum()), **{f"{side}_ms": min(t) for side, t in times.items()}}


def markdown(result: dict) -> str:
    lines = [f"# The diagonal variants' planning pass before and after, {result['device']['name']}", "",
             provenance(result, result["command"]) + f". Before: `{result['before']}`; after: the working tree. "
             "Least of three interleaved rounds of the median of 7 CUDA-event times of the pass alone; both versions' "
             "flags checked equal.", "",
             "| input | rows | nnz | longest row | rows following | before ms | after ms | after / before |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {name} | {r['rows']:,} | {r['nnz']:,} | {r['longest']:,} | {r['following']:,} | {r['before_ms']:.3f} | "
              f"{r['after_ms']:.3f} | {r['after_ms'] / r['before_ms']:.3f} |" for name, r in result["inputs"].items()]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="kernels/spmv.py before the change")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    before = load_before(args.before)
    rows = {}
    for name, make in INPUTS.items():
        rows[name] = measure(before, make())
        print(name, rows[name], flush=True)
    result = {**environment(torch.device("cuda")), "command": " ".join(["python", *sys.argv]),
              "before": str(args.before), "inputs": rows}
    write_result(args.out, f"spmv-follows-pattern-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
