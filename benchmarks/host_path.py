"""Where the host time of one cached ``seer.dispatch`` SpMV call goes, piece by piece.

On small matrices the host path decides who wins against ``torch`` CSR (cuSPARSE), so this
times, on one small real matrix held as a torch sparse CSR tensor, loops of each layer of the
cached call alone, from the whole call down to the driver launch:
  torch_csr       ``A @ x`` (allocation, cuSPARSE descriptors, its kernel)
  dispatch        ``seer.dispatch("spmv", (A, x))``, decision cached, a new y
  dispatch_out    the same into a preallocated y
  dispatch_arrays the matrix as separate arrays, ``(indptr, indices, values, shape)``; _out: into y
  variant_run     the variant's ``run(csr, x)`` (new y): dispatch's lookups skipped; _out: into y
  bound_call      the call ``bind(csr)`` returns, which dispatch keeps with its decision; _out: into y
  direct_launch   ``seer.launch.direct_launch``: the launcher's C entry, reading the current stream
  compiled_run    Triton's ``CompiledKernel.run`` (its launcher's Python wrapper), stream read beforehand
  stream          torch's current raw stream of the current device, as ``direct_launch`` reads it
  new_empty       ``x.new_empty(rows)``
Per layer: host wall time per call, the least of 5 alternated loops of 2000 calls (the device
drained at both ends; the kernel is shorter than the host work, so the loops are host-bound).

Then the *first* call on a new matrix (a new tensor object each time, so nothing is cached), layer
by layer, median of 200 tries, each synchronised at its start and end:
  first_call      ``spmv.first_call(A, (x,))``: the checks, the validation pass and its read-back;
                  on a matrix within ``spmv.VALIDATING_PRODUCT_MAX_ROWS`` and ``_MAX_NNZ`` (this
                  one) the same kernel computes y
  decide          ``seer.explain`` on the validated matrix: features, model lookup, tree walk
  bind            the chosen variant's ``bind``: its plan (grid, preparation, launch lookup)
  launch          on a larger matrix only: the bound call's first ``call(x)``, up to the end of the kernel
  whole           ``seer.dispatch`` on a new tensor, against torch CSR's ``A @ x`` on one

    python benchmarks/host_path.py --matrices .carry/suitesparse [--out benchmarks/results]
"""
from __future__ import annotations

import statistics
import sys

import torch
import seer
from seer.datasets.cases import launch_bound_arguments
from seer.kernels import spmv
from seer.launch import direct_launch, vector_operands
from seer.profiling import alternated_host_us, device_tag, environment, provenance, synchronised_us, write_result

CALLS = 2000
ROUNDS = 5
VARIANT = "vector_g16"  # a row-mapped variant: one launch, no per-call scratch


def layers(A: torch.Tensor, x: torch.Tensor, arrays: tuple) -> dict:
    """The call's layers as argument-less functions, each checked to compute y where it can; ``arrays``:
    the same matrix as separate arrays."""
    csr = seer.explain("spmv", (A, x)).problem
    run, bind = spmv.VARIANTS[VARIANT].run, spmv.VARIANTS[VARIANT].bind
    y = run(csr, x)  # compiles, plans and keeps the call
    call = bind(csr)
    p = spmv.VARIANTS[VARIANT].params
    grid = -(-csr.rows // p["rows"])
    _, x_at, x_stride, y_at, y_stride = vector_operands(x, y)
    tensor_args = (csr.indptr, csr.indices, csr.values, x, x_stride, y, y_stride, csr.rows, p["rows"], p["group"])
    args = (*csr.addresses(), x_at, x_stride, y_at, y_stride, csr.rows, p["rows"], p["group"])
    compiled = spmv._csr_rows_kernel[(grid,)](*tensor_args, num_warps=p["num_warps"])
    direct = direct_launch(compiled)
    stream = torch.cuda.current_stream().cuda_stream
    found = {
        "torch_csr": lambda: A @ x,
        "dispatch": lambda: seer.dispatch("spmv", (A, x), variant=VARIANT),
        "dispatch_out": lambda: seer.dispatch("spmv", (A, x), out=y, variant=VARIANT),
        "dispatch_arrays": lambda: seer.dispatch("spmv", (arrays, x), variant=VARIANT),
        "dispatch_arrays_out": lambda: seer.dispatch("spmv", (arrays, x), out=y, variant=VARIANT),
        "variant_run": lambda: run(csr, x),
        "variant_run_out": lambda: run(csr, x, y),
        "bound_call": lambda: call(x),
        "bound_call_out": lambda: call(x, y),
        "direct_launch": lambda: direct(grid, args),
        "compiled_run": lambda: compiled.run(grid, 1, 1, stream, compiled.function, compiled.packed_metadata,
                                             None, None, None, *args),
        "stream": lambda: torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice()),
        "new_empty": lambda: x.new_empty(csr.rows),
    }
    reference = spmv.reference(csr, x)
    for name in ("dispatch", "dispatch_arrays", "variant_run_out", "bound_call", "direct_launch", "compiled_run"):
        y.fill_(float("nan"))
        result = found[name]()
        if not torch.allclose((y if result is None else result).double().cpu(), reference, rtol=1e-4, atol=1e-4):
            raise AssertionError(f"{name}: the call computed a wrong y")
    return found


FIRST_TRIES = 200


def first_call_layers(parts: tuple, x: torch.Tensor, tries: int = FIRST_TRIES) -> dict[str, float]:
    """Median host µs of each layer of a first call (see the module doc), a new tensor each try."""
    samples: dict[str, list[float]] = {}

    def timed(name: str, fn):
        result, us = synchronised_us(fn)
        samples.setdefault(name, []).append(us)
        return result

    for _ in range(tries):
        A = torch.sparse_csr_tensor(*parts[:3], parts[3])
        csr, y = timed("first_call", lambda: spmv.first_call(A, (x,)))
        decision = timed("decide", lambda: seer.explain("spmv", (csr, x)))
        call = timed("bind", lambda: spmv.VARIANTS[decision.variant].bind(csr))
        if y is None:
            timed("launch", lambda: call(x))
        B = torch.sparse_csr_tensor(*parts[:3], parts[3])
        timed("whole", lambda: seer.dispatch("spmv", (B, x)))
        C = torch.sparse_csr_tensor(*parts[:3], parts[3])
        timed("torch_csr", lambda: C @ x)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> int:
    args, case, parts, x = launch_bound_arguments(__doc__)
    A = torch.sparse_csr_tensor(*parts[:3], parts[3])
    found = layers(A, x, parts)
    times = alternated_host_us(found, CALLS, ROUNDS)
    least = {name: min(values) for name, values in times.items()}
    first = first_call_layers(parts, x)
    result = {"benchmark": "host path", "environment": environment(x.device),
              "command": " ".join(["python", *sys.argv]), "matrix": case.id, "nnz": A.values().numel(),
              "variant": VARIANT, "calls": CALLS, "rounds": ROUNDS, "host_us": least, "all_us": times,
              "first_call_us": first, "first_call_tries": FIRST_TRIES}
    env = result["environment"]
    lines = [f"# Host time of a cached seer.dispatch SpMV call, layer by layer, on {env['device']['name']}",
             "", provenance(env, result['command']) +
                 f"; matrix {case.id} ({result['nnz']} nnz) as a torch sparse CSR tensor, "
             f"variant {VARIANT}.", "",
             f"Host µs per call, least of {ROUNDS} alternated loops of {CALLS}.", "",
             "| layer | µs |", "|---|---|", *[f"| {n} | {v:.2f} |" for n, v in least.items()], "",
             f"The first call on a new matrix, layer by layer (the model's choice; median of {FIRST_TRIES} "
             "tries, each synchronised at both ends):", "",
             "| layer | µs |", "|---|---|", *[f"| {n} | {v:.1f} |" for n, v in first.items()]]
    write_result(args.out, f"host-path-{device_tag(torch.cuda.get_device_name())}", result, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
