"""Where the host time of a first ``seer.dispatch`` SpMV call goes, function by function.

``host_path.py`` times a first call's layers; this names the functions inside them. On two real
matrices, one small enough for the validating product and one past its bounds (a new torch CSR
tensor per try, so nothing is cached), it runs ``tries`` first calls under cProfile on two paths
and prints each profile's functions by own time and by cumulative time:
  validated   ``seer.dispatch("spmv", (A, x))``: the validation pass (computing y on the small
              matrix), its read-back, stage 2 on the row statistics, binding
  unchecked   ``seer.dispatch("spmv", (as_csr(A, check=False), x))``: stage 1 on shape and nnz,
              binding, the chosen variant's launch; no read-back
The validated path's pieces are also timed one after another without the profiler (median host
µs). On the small matrix: ``wait_kernel`` is the stream synchronisation after which the validating
product's totals lie in pinned host memory, ``read_totals`` reads them. Past the validating
product's bounds the pass and the chosen variant are separate: ``wait_pass`` waits for the pass,
``wait_preparation`` for the device work of the variant's preparation (its plan), ``wait_variant``
for its kernel; the waits show the device's share, the rest is the host's. ``--large N`` adds N
matrices of the generated large suite (1M-50M nnz, one per generator), where the device's share
is largest.
Before profiling, the same paths without the profiler (median host µs, each synchronised at both
ends), with torch's first call beside them: ``A @ x`` on a tensor built unchecked, and on one built
with ``check_invariants=True`` (construction timed too: that is where torch checks).

    python benchmarks/first_call_profile.py --matrices .carry/suitesparse [--large 4] [--out benchmarks/results]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch

import seer
from seer.datasets.cases import launch_bound_case, spmv_cases
from seer.kernels.spmv import VALIDATING_PRODUCT_MAX_NNZ
from seer.profiling import device_tag, environment, provenance, synchronised_us
from seer import sparse
from seer.dispatch import _decide
from seer.kernels import spmv
from seer.registry import get_op
from seer.sparse import as_csr

TRIES = 300
SHOWN = 45


def paths(parts: tuple, x: torch.Tensor) -> dict:
    """Each path as a function of a new tensor; torch's checked path builds its own."""
    def checked_torch(_):
        return torch.sparse_csr_tensor(*parts[:3], parts[3], check_invariants=True) @ x

    return {"validated": lambda A: seer.dispatch("spmv", (A, x)),
            "unchecked": lambda A: seer.dispatch("spmv", (as_csr(A, check=False), x)),
            "torch": lambda A: A @ x,
            "torch_checked_built": checked_torch}


def timed(fns: dict, new_matrix, tries: int) -> dict[str, float]:
    """Median synchronised host µs of each path's first call, the paths alternated per try."""
    samples = {name: [] for name in fns}
    for _ in range(tries):
        for name, fn in fns.items():
            matrix = new_matrix()
            samples[name].append(synchronised_us(lambda: fn(matrix))[1])
    return {name: statistics.median(values) for name, values in samples.items()}


def profiled(fn, new_matrix, tries: int) -> str:
    """cProfile of ``tries`` first calls (each synchronised), by own and by cumulative time."""
    matrices = [new_matrix() for _ in range(tries)]
    profile = cProfile.Profile()
    torch.cuda.synchronize()
    profile.enable()
    for matrix in matrices:
        fn(matrix)
        torch.cuda.synchronize()
    profile.disable()
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text).strip_dirs()
    stats.sort_stats("tottime").print_stats(SHOWN)
    stats.sort_stats("cumulative").print_stats(SHOWN)
    return text.getvalue()


def pieces(parts: tuple, x: torch.Tensor, tries: int) -> dict[str, float]:
    """Median host µs of the validated first call's pieces, in order (synchronised where named
    ``wait_``): the validating product on a small matrix, else the pass then the variant."""
    entry, samples = get_op("spmv"), {}
    fused = spmv.within_validating_bounds(parts[3][0], parts[1].numel())

    def clock(name, start):
        now = time.perf_counter()
        samples.setdefault(name, []).append((now - start) * 1e6)
        return now

    def wait(name, start):
        torch.cuda.current_stream().synchronize()
        return clock(name, start)

    for _ in range(tries):
        A = torch.sparse_csr_tensor(*parts[:3], parts[3])
        torch.cuda.synchronize()
        t = time.perf_counter()
        csr = as_csr(A, check=False)
        t = clock("unpack_and_metadata", t)
        sparse.check_dense_vector(csr, x)
        if fused:
            y = spmv._output(csr, x, None)
            t = clock("x_check_and_y", t)
            totals = spmv._launch_validating_product(csr, x, y)
            t = wait("wait_kernel", clock("launch", t))
        else:
            t = clock("x_check", t)
            totals = sparse.launch_structure(csr, True, True)
            t = wait("wait_pass", clock("launch_pass", t))
        found = sparse._structure_of(totals.tolist())  # the totals the kernel wrote to pinned memory
        t = clock("read_totals", t)
        sparse.accept_structure(csr, found)
        t = clock("accept", t)
        decision = _decide(entry, A, (x,), calls=None, model=None, variant=None, problem=csr)
        t = clock("decide", t)
        call = entry.variants[decision.variant].bind(csr)
        t = clock("bind", t)
        if not fused:
            t = wait("wait_preparation", t)
            call(x)
            wait("wait_variant", clock("launch_variant", t))
    return {name: statistics.median(values) for name, values in samples.items()}


def matrix_report(case, tries: int) -> list[str]:
    parts, (x,) = case.build(case.load())

    def new_matrix():
        return torch.sparse_csr_tensor(*parts[:3], parts[3])

    fns = paths(parts, x)
    reference = new_matrix() @ x
    for name, fn in fns.items():  # warm-up: the model's load, every kernel's compile; and a check
        y = fn(new_matrix())
        error = ((y - reference).norm() / reference.norm()).item()
        if not error < 1e-4:
            raise AssertionError(f"{name} disagrees with torch CSR on {case.id}: relative difference {error:.1e}")
    medians = timed(fns, new_matrix, tries)
    chosen = {name: seer.explain("spmv", (as_csr(new_matrix(), check=check), x)).variant
              for name, check in (("validated", True), ("unchecked", False))}
    lines = ["", f"######## matrix {case.id}: {parts[1].numel()} nnz, {parts[3][0]} rows; variant chosen "
             f"validated {chosen['validated']}, unchecked {chosen['unchecked']}", "",
             f"Median host µs of a first call, synchronised at both ends ({tries} tries, paths alternated):"]
    lines += [f"  {name:22s} {us:8.1f}" for name, us in medians.items()]
    lines += ["", "Validated first call, piece by piece (median host µs):"]
    lines += [f"  {name:22s} {us:8.1f}" for name, us in pieces(parts, x, tries).items()]
    for name in ("validated", "unchecked"):
        lines += ["", f"===== cProfile, {name}, {tries} first calls", profiled(fns[name], new_matrix, tries)]
    return lines


def large_cases(folder: Path, count: int) -> list:
    """``count`` generated large matrices of 2M-20M nnz, each from another generator."""
    chosen, generators = [], set()
    for case in spmv_cases([folder], synthetic="large"):
        generator = case.id.split("/")[1]
        if case.source == "synthetic" and 2e6 <= case.extra["size"] <= 2e7 and generator not in generators:
            chosen.append(case)
            generators.add(generator)
    return chosen[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrices", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--tries", type=int, default=TRIES)
    parser.add_argument("--large", type=int, default=0, help="also this many generated large matrices")
    args = parser.parse_args()
    small = launch_bound_case(args.matrices)
    larger = next(c for c in spmv_cases([args.matrices]) if c.extra["size"] > 4 * VALIDATING_PRODUCT_MAX_NNZ)
    env = environment(torch.device("cuda"))
    lines = [f"First seer.dispatch SpMV calls, profiled, on {env['device']['name']}",
             provenance(env, " ".join(["python", *sys.argv]))]
    for case in (small, larger, *large_cases(args.matrices, args.large)):
        lines += matrix_report(case, args.tries)
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"first-call-profile-{device_tag(env['device']['name'])}.txt").write_text(text)
    print(text)
    return 0

if __name__ == "__main__":
    sys.exit(main())
