"""What refusing an ``out`` that overlaps x or the matrix, or repeats an element, costs a cached SpMV call
(``kernels.spmv._check_apart``).

On the small real matrix ``host_path.py`` uses (a torch sparse CSR tensor; the kernel is shorter
than the host work, so loops of calls are host-bound), loops of each path, alternated, the least
of ``ROUNDS`` loops of ``CALLS`` calls:
  bound_call_out        the call dispatch keeps for the matrix (``bind``), into a preallocated y
  bound_call_out_bare   the same call with the memory check passing everything
  dispatch_out          ``seer.dispatch("spmv", (A, x), out=y)``, decision cached
  dispatch_out_bare     the same with the memory check passing everything
Every path's y is checked against float64 first, and an out over x is refused.

    python benchmarks/out_check.py --matrices .carry/suitesparse [--out benchmarks/results]
"""
from __future__ import annotations

import sys

import torch

import seer
from seer.datasets.cases import launch_bound_arguments
from seer.errors import InputError
from seer.kernels import spmv
from seer.profiling import alternated_host_us, device_tag, environment, provenance, write_result

CALLS = 2000
ROUNDS = 7
VARIANT = "vector_g16"  # host_path.py's: a row-mapped variant, one launch, no per-call scratch


class _Bare:
    """Calls ``fn`` with ``kernels.spmv._check_apart`` replaced by a check that passes everything
    (the module global the out check looks up on every call)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self):
        kept, spmv._check_apart = spmv._check_apart, _always_apart
        try:
            return self.fn()
        finally:
            spmv._check_apart = kept


def _always_apart(*_) -> None:
    pass


def paths(A: torch.Tensor, x: torch.Tensor) -> dict:
    csr = seer.explain("spmv", (A, x)).problem
    call = spmv.VARIANTS[VARIANT].bind(csr)
    y = torch.empty(csr.rows, dtype=x.dtype, device=x.device)
    reference = spmv.reference(csr, x)
    found = {"bound_call_out": lambda: call(x, y),
             "dispatch_out": lambda: seer.dispatch("spmv", (A, x), out=y, variant=VARIANT)}
    for name in list(found):
        y.fill_(float("nan"))
        if not torch.allclose(found[name]().double().cpu(), reference, rtol=1e-4, atol=1e-4):
            raise AssertionError(f"{name}: the call computed a wrong y")
        found[f"{name}_bare"] = found[name]
    if csr.rows == csr.cols:
        try:
            call(x, x)
        except InputError:
            pass
        else:
            raise AssertionError("an out over x was not refused")
    return found


def loops(found: dict) -> dict:
    """Each path as a loop of ``CALLS`` calls; the bare ones with the check replaced once per loop."""
    def loop(fn):
        def run():
            for _ in range(CALLS):
                fn()
        return run

    return {name: (_Bare(loop(fn)) if name.endswith("_bare") else loop(fn)) for name, fn in found.items()}


def main() -> int:
    args, case, parts, x = launch_bound_arguments(__doc__)
    A = torch.sparse_csr_tensor(*parts[:3], parts[3])
    times = alternated_host_us(loops(paths(A, x)), 1, ROUNDS)
    least = {name: min(values) / CALLS for name, values in times.items()}
    result = {"benchmark": "out check", "environment": environment(x.device),
              "command": " ".join(["python", *sys.argv]), "matrix": case.id, "nnz": A.values().numel(),
              "variant": VARIANT, "calls": CALLS, "rounds": ROUNDS, "host_us": least, "all_loop_us": times}
    env = result["environment"]
    cost = {name: least[name] - least[f"{name}_bare"] for name in ("bound_call_out", "dispatch_out")}
    lines = [f"# What refusing an out over x or the matrix costs a cached SpMV call, {env['device']['name']}", "",
             provenance(env, result["command"]) + f"; matrix {case.id} ({result['nnz']} nnz) as a torch sparse "
             f"CSR tensor, variant {VARIANT}.", "",
             f"Host µs per call, least of {ROUNDS} alternated loops of {CALLS} calls; `_bare`: the memory check "
             "(`_check_apart`) passing everything.", "",
             "| path | µs |", "|---|---|", *[f"| {n} | {v:.2f} |" for n, v in least.items()], "",
             "| the check costs | µs a call |", "|---|---|", *[f"| {n} | {v:+.2f} |" for n, v in cost.items()]]
    write_result(args.out, f"out-check-{device_tag(torch.cuda.get_device_name())}", result, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
