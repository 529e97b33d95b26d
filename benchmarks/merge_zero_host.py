"""Host time of a ``merge_c256`` call with its accumulator zeroed by torch's ``zero_`` against
``seer.launch.zero_`` (``cudaMemsetAsync`` through ctypes), in one process.

The merge variants add the rows cut by a chunk edge atomically, so every call first zeroes y:
with torch's ``zero_`` a dispatched fill kernel, several µs of host time on the lent hosts, where
loops on matrices that fit in L2 are host-bound (``spmv-loop-parts-<device>.md``). The call reads
``zero_`` from ``seer.kernels.spmv`` at call time, so both ways run the same bound call: the
module's name is pointed at torch's method or at seer's, alternately over rounds (least kept),
on real matrices spread over sizes, loops of 2,000 calls into one out and with a new y each call.
Every result is checked against float64 first, both ways.

    python benchmarks/merge_zero_host.py --matrices .carry/suitesparse

Writes ``merge-zero-host-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from cusparse_call_host import spread
from scipy.stats import gmean

import seer.kernels.spmv as spmv
from seer.datasets.suitesparse import read_matrix
from seer.launch import zero_
from seer.profiling import device_tag, environment, host_call_us, relative_error, write_result

WAYS = {"torch": torch.Tensor.zero_, "memset": zero_}
PATTERNS = ("out", "new_y")
VARIANT = "merge_c256"


def matrix_row(info, calls: int, rounds: int, device: str = "cuda") -> dict:
    matrix = read_matrix(info.path)
    rng = np.random.default_rng(0)
    values = (rng.uniform(0.5, 1.5, matrix.nnz) * rng.choice([-1.0, 1.0], matrix.nnz)).astype(np.float32)
    csr = spmv.problem(tuple(torch.from_numpy(a).to(device) for a in (matrix.indptr, matrix.indices, values))
                       + (matrix.shape,))
    x = rng.uniform(-1, 1, matrix.shape[1]).astype(np.float32)
    reference = torch.from_numpy(sp.csr_matrix((values.astype(np.float64), matrix.indices, matrix.indptr),
                                               shape=matrix.shape) @ x.astype(np.float64))
    x = torch.from_numpy(x).to(device)
    call, out = spmv.VARIANTS[VARIANT].bind(csr), torch.empty(matrix.shape[0], device=device)
    loops = {"out": lambda: call(x, out), "new_y": lambda: call(x)}
    least = {f"{way}:{p}": float("inf") for way in WAYS for p in PATTERNS}
    try:
        for way, zero in WAYS.items():
            spmv.zero_ = zero
            error = relative_error(call(x, out.fill_(float("nan"))), reference)
            if not error < 1e-4:
                raise AssertionError(f"{VARIANT} ({way}) disagrees with float64 on {info.id}: {error:.1e}")
        for _ in range(rounds):
            for way, zero in WAYS.items():
                spmv.zero_ = zero
                for p in PATTERNS:
                    least[f"{way}:{p}"] = min(least[f"{way}:{p}"], host_call_us(loops[p], calls, warmup=20))
    finally:
        spmv.zero_ = zero_
    return {"id": info.id, "nnz": int(matrix.nnz), **{f"{name}_us": us for name, us in least.items()}}


def summary(rows: list[dict]) -> dict:
    return {p: {"torch_us": float(np.median([r[f"torch:{p}_us"] for r in rows])),
                "memset_us": float(np.median([r[f"memset:{p}_us"] for r in rows])),
                "speedup": float(gmean([r[f"torch:{p}_us"] / r[f"memset:{p}_us"] for r in rows]))} for p in PATTERNS}


def markdown(result: dict) -> str:
    lines = [f"# `{VARIANT}` call with torch's zero_ against a memset, host time, {result['device']['name']}", "",
             f"{result['date']}; torch {result['versions']['torch']}, triton {result['versions']['triton']}; "
             f"`{result['command']}`", "",
             f"µs per bound call, loops of {result['calls']:,} calls, least of {result['rounds']} alternated rounds. "
             "out: into one out; new_y: a new y each call.", "",
             "| pattern | median with torch's zero_ µs | median with the memset µs | torch / memset (geomean) |",
             "|---|---|---|---|"]
    lines += [f"| {p} | {s['torch_us']:.1f} | {s['memset_us']:.1f} | {s['speedup']:.2f}x |"
              for p, s in result["summary"].items()]
    lines += ["", "| matrix | nnz | " + " | ".join(f"{p} torch / memset µs" for p in PATTERNS) + " |",
              "|---|---|" + "---|" * len(PATTERNS)]
    lines += [f"| {r['id']} | {r['nnz']:,} | " + " | ".join(f"{r[f'torch:{p}_us']:.1f} / {r[f'memset:{p}_us']:.1f}"
                                                        for p in PATTERNS) + " |" for r in result["matrices"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=Path, required=True, help="folder of the real matrices")
    parser.add_argument("--count", type=int, default=12, help="matrices, spread over sizes")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    rows = []
    for info in spread(args.matrices, args.count):
        rows.append(matrix_row(info, args.calls, args.rounds))
        print(f"{info.id}: " + ", ".join(f"{p} {rows[-1][f'torch:{p}_us']:.1f} -> {rows[-1][f'memset:{p}_us']:.1f} µs"
                                         for p in PATTERNS), flush=True)
    result = {"benchmark": f"{VARIANT} zeroing host time", **environment(torch.device("cuda")),
              "command": " ".join(["python", *sys.argv]), "calls": args.calls, "rounds": args.rounds,
              "summary": summary(rows), "matrices": rows}
    write_result(args.out, f"merge-zero-host-{device_tag(result['device']['name'])}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
