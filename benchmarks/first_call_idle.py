"""How long a first call takes depends on how long the GPU and its host idled before it.

    python benchmarks/first_call_idle.py [--out benchmarks/results]

Why: a first ``seer.dispatch`` on a new matrix is timed alone, synchronised at both ends
(``dispatch.py``), and a first call in an application usually follows idle time too; the
validation pass it runs took 245-344 µs of host time on large matrices where do_bench, which
runs a kernel back to back, reads 12-55 µs. Here, after sleeping 0, 0.5, 5 and 50 ms with the
device drained: the validation pass's launch and read-back (host clock: the wait for its totals,
which its last program writes into host memory) and its kernel (CUDA events), and torch CSR's
``A @ x`` (host clock, synchronised), on one 4M-nonzero band matrix; medians of 30 tries. Writes ``first-call-idle-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from seer import sparse
from seer.datasets.generators import banded
from seer.kernels import spmv
from seer.profiling import device_tag, environment, provenance, write_result

IDLE_MS = (0, 0.5, 5, 50)
TRIES = 30


def after_idle(fn, idle_ms: float) -> float:
    """Host µs of ``fn()`` up to a synchronisation, started after ``idle_ms`` of a drained device."""
    torch.cuda.synchronize()
    time.sleep(idle_ms / 1e3)
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6


def validation_after_idle(csr, idle_ms: float) -> dict[str, float]:
    """The validation pass's pieces after ``idle_ms``: launch and read-back by the host clock, the
    kernel by CUDA events."""
    torch.cuda.synchronize()
    time.sleep(idle_ms / 1e3)
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    start = time.perf_counter()
    marks[0].record()
    totals = sparse.launch_structure(csr, True, True)
    marks[1].record()
    launched = time.perf_counter()
    sparse.read_totals(totals, csr.device)
    read = time.perf_counter()
    torch.cuda.synchronize()
    return {"launch_host_us": (launched - start) * 1e6, "readback_host_us": (read - launched) * 1e6,
            "kernel_us": marks[0].elapsed_time(marks[1]) * 1e3}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    matrix = banded(500_000, 8, 1.0, seed=0)
    parts = (torch.from_numpy(matrix.indptr.astype(np.int32)).cuda(),
             torch.from_numpy(matrix.indices.astype(np.int32)).cuda(),
             torch.from_numpy(matrix.data.astype(np.float32)).cuda(), matrix.shape)
    A = torch.sparse_csr_tensor(*parts[:3], parts[3])
    csr, x = spmv.problem(A), torch.rand(matrix.shape[1], device="cuda")
    A @ x  # warm: cuSPARSE handles, the pass's compiled kernel
    rows = []
    for idle in IDLE_MS:
        passes = [validation_after_idle(csr, idle) for _ in range(TRIES)]
        row = {key: statistics.median(p[key] for p in passes) for key in passes[0]}
        row["torch_call_us"] = statistics.median(after_idle(lambda: A @ x, idle) for _ in range(TRIES))
        rows.append({"idle_ms": idle, **row})
    env = environment(torch.device("cuda"))
    result = {**env, "command": " ".join(["python", *sys.argv]), "nnz": int(matrix.nnz), "tries": TRIES, "rows": rows}
    lines = [f"# A first call after idle time, {env['device']['name']}", "",
             provenance(env, result['command']) +
             f"; a {matrix.nnz:,}-nonzero band matrix; medians of {TRIES} tries, each after "
             "the idle time with the device drained.", "",
             "| idle before (ms) | pass launch, host µs | pass read-back, host µs | pass kernel, events µs | "
             "torch CSR call, host µs |", "|---|---|---|---|---|"]
    lines += [f"| {r['idle_ms']} | {r['launch_host_us']:.1f} | {r['readback_host_us']:.1f} | {r['kernel_us']:.1f} | "
              f"{r['torch_call_us']:.1f} |" for r in rows]
    write_result(args.out, f"first-call-idle-{device_tag(env['device']['name'])}", result, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
