"""Where a whole first ``seer.dispatch`` SpMV call's host time goes, step by step inside the call.

``first_call_profile.py`` times a first call's pieces one after another outside ``seer.dispatch``;
their sum can miss what the call itself adds. Here the steps of ``seer.dispatch`` are timed inside
the call (its module functions wrapped to stamp the clock when they return), on the small real
matrix of ``host_path.py``, a new torch CSR tensor per try (nothing cached), alternated with
another call as ``first_call_profile.py``'s loops alternate their paths:
  _first_call         validation: unpacking, checks, the validating product's launch, its wait and totals
  _decide             features, model lookup, tree walk
  _bound              the chosen variant's call bound to the matrix
  _schedule_recheck   when to decide again (nothing on a small matrix)
  put                 the decision into the LRU cache (once full, dropping the oldest decision)
  rest_of_dispatch    what is left of the call
  final_sync          ``torch.cuda.synchronize()`` after the call returns (the device already idle)
Medians over the tries after 60 of warm-up, per alternation: none, torch's ``A @ x``, and torch's
checked first call (``check_invariants=True``).

    python benchmarks/first_call_steps.py --matrices .carry/suitesparse [--out benchmarks/results]
"""
from __future__ import annotations

import statistics
import sys
import time

import torch

import seer
from seer.datasets.cases import launch_bound_arguments
from seer.profiling import device_tag, environment, provenance, write_result

TRIES = 260
WARMUP = 60
STEPS = ("_first_call", "_decide", "_bound", "_schedule_recheck")


def stamped(marks: list):
    """Wraps ``seer.dispatch``'s steps (and its cache's ``put``) to append ``(name, time)`` to
    ``marks`` when each returns."""
    module = sys.modules["seer.dispatch"]  # seer.dispatch is also the function

    def wrap(name, fn):
        def wrapped(*args, **kwargs):
            result = fn(*args, **kwargs)
            marks.append((name, time.perf_counter()))
            return result
        return wrapped

    for name in STEPS:
        setattr(module, name, wrap(name, getattr(module, name)))
    module._cache.put = wrap("put", module._cache.put)


def steps(parts: tuple, x: torch.Tensor, other, marks: list) -> dict[str, float]:
    """Median µs of each step of a first call, ``other()`` run between the tries."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)  # the CPU: tests
    rows = []
    for i in range(TRIES):
        A = torch.sparse_csr_tensor(*parts[:3], parts[3])
        sync()
        marks.clear()
        start = time.perf_counter()
        seer.dispatch("spmv", (A, x))
        end = time.perf_counter()
        sync()
        synced = time.perf_counter()
        other()
        sync()
        if i < WARMUP:
            continue
        row, last = {}, start
        for name, at in marks:
            row[name], last = (at - last) * 1e6, at
        row.update(rest_of_dispatch=(end - last) * 1e6, final_sync=(synced - end) * 1e6, whole=(synced - start) * 1e6)
        rows.append(row)
    return {name: statistics.median(r[name] for r in rows) for name in rows[0]}


def main() -> int:
    args, case, parts, x = launch_bound_arguments(__doc__)
    marks: list = []
    stamped(marks)
    others = {"none": lambda: None,
              "torch": lambda: torch.sparse_csr_tensor(*parts[:3], parts[3]) @ x,
              "torch_checked": lambda: torch.sparse_csr_tensor(*parts[:3], parts[3], check_invariants=True) @ x}
    found = {name: steps(parts, x, other, marks) for name, other in others.items()}
    result = {"benchmark": "first call steps", "environment": environment(x.device),
              "command": " ".join(["python", *sys.argv]), "matrix": case.id, "tries": TRIES, "warmup": WARMUP,
              "median_us": found}
    env = result["environment"]
    names = list(next(iter(found.values())))
    lines = [f"# A first seer.dispatch SpMV call, step by step inside the call, {env['device']['name']}", "",
             provenance(env, result["command"]) + f"; matrix {case.id}, a new torch CSR tensor per try.", "",
             f"Median host µs over {TRIES - WARMUP} tries; columns: what ran between the tries.", "",
             "| step | " + " | ".join(found) + " |", "|---|" + "---|" * len(found),
             *[f"| {n} | " + " | ".join(f"{found[o][n]:.1f}" for o in found) + " |" for n in names]]
    write_result(args.out, f"first-call-steps-{device_tag(torch.cuda.get_device_name())}", result,
                 "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
