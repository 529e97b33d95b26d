"""Host time of one direct launch of a compiled SpMV kernel: pointers passed as tensors or as ints.

Triton's launcher takes a pointer argument either as an object with ``data_ptr()`` (it calls the
method, then asks the driver whether the address is device memory: ``cuPointerGetAttribute``) or
as a plain int (used as is). seer's cached SpMV call passes five tensors (indptr, indices, values,
x, y); the matrix's three addresses could be kept with its cached plan and x's and y's are read
anyway for the alignment key. This times, on one small real matrix, a loop of launches of the
compiled vector kernel:
  tensors     every pointer a tensor (seer's path until this measurement)
  ints        every pointer an int read beforehand
  ints_xy     the matrix's pointers as cached ints, x's and y's ``data_ptr()`` read in the loop
host wall time per launch (the loop's time over its length, the device drained at both ends; the
kernel is shorter than a launch, so the loop is host-bound), the least of 5 alternated loops.

    python benchmarks/launch_pointers.py --matrices .carry/suitesparse [--out benchmarks/results]
"""
from __future__ import annotations

import sys

import torch

from seer.datasets.cases import launch_bound_arguments
from seer.kernels import spmv
from seer.profiling import alternated_host_us, device_tag, environment, provenance, write_result
from seer.sparse import as_csr

CALLS = 2000
ROUNDS = 5


def main() -> int:
    args, case, source, x = launch_bound_arguments(__doc__)
    csr = as_csr(source)
    y = torch.empty(csr.rows, dtype=x.dtype, device=x.device)
    rows_per_program, group, warps = 32, 16, 4
    grid = (-(-csr.rows // rows_per_program),)
    tensor_args = (csr.indptr, csr.indices, csr.values, x, 1, y, 1, csr.rows, rows_per_program, group)
    compiled = spmv._csr_rows_kernel[grid](*tensor_args, num_warps=warps)
    stream = torch.cuda.current_stream().cuda_stream
    head = (grid[0], 1, 1, stream, compiled.function, compiled.packed_metadata, None, None, None)
    matrix = (csr.indptr.data_ptr(), csr.indices.data_ptr(), csr.values.data_ptr())
    int_args = (*matrix, x.data_ptr(), 1, y.data_ptr(), 1, csr.rows, rows_per_program, group)
    forms = {
        "tensors": lambda: compiled.run(*head, *tensor_args),
        "ints": lambda: compiled.run(*head, *int_args),
        "ints_xy": lambda: compiled.run(*head, *matrix, x.data_ptr(), 1, y.data_ptr(), 1, csr.rows,
                                        rows_per_program, group),
    }
    reference = spmv.reference(csr, x)
    for name, fn in forms.items():
        y.fill_(float("nan"))
        fn()
        if not torch.allclose(y.double().cpu(), reference, rtol=1e-4, atol=1e-4):
            raise AssertionError(f"{name}: the launch computed a wrong y")
    times = alternated_host_us(forms, CALLS, ROUNDS)
    least = {name: min(values) for name, values in times.items()}
    result = {"benchmark": "launch pointers", "environment": environment(x.device),
              "command": " ".join(["python", *sys.argv]), "matrix": case.id, "nnz": csr.nnz,
              "calls": CALLS, "rounds": ROUNDS, "host_us": least, "all_us": times}
    env = result["environment"]
    lines = [f"# Direct launch of a compiled SpMV kernel, pointers as tensors or ints, on {env['device']['name']}",
             "", provenance(env, result['command']) +
                 f"; matrix {case.id} ({csr.nnz} nnz), vector kernel 32 x 16, 4 warps.", "",
             f"Host µs per launch, least of {ROUNDS} alternated loops of {CALLS}.", "",
             "| pointers | µs |", "|---|---|", *[f"| {n} | {v:.2f} |" for n, v in least.items()]]
    write_result(args.out, f"launch-pointers-{device_tag(torch.cuda.get_device_name())}", result,
                 "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
