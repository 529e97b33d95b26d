"""Host time of the lock around Triton's own launch path (`seer.launch.through_triton`).

Since session 41 one process-wide lock is held around Triton's ``kernel[grid](...)`` (Triton 3.9 let
a second thread launch a kernel whose binary another thread was still loading). Every GEMM call
launched that way until session 42, whose plans launch the tile and split-K kernels directly after
their first launch; TMA calls and every first launch still do. This times, on one small product that
the device runs faster than the host can launch it, a Triton GEMM call into a given ``out`` the way
it launched until then (``gemm_host.triton_path``):
  locked      as shipped
  unlocked    the lock swapped for a no-op context for that loop
host wall time per call (the loop's time over its length, the device drained at both ends), the
least of ``--rounds`` alternated loops of ``--calls``; each form's product checked against
torch.matmul in float32 first.

    python benchmarks/launch_lock.py [--out benchmarks/results]
"""
from __future__ import annotations

import argparse
import contextlib
import sys

import torch

import seer.launch
from gemm_host import check, operands, triton_path  # benchmarks/, first on the path when this script runs
from seer.kernels import gemm
from seer.profiling import device_tag, environment, host_call_us, provenance, write_result

VARIANTS = ("tile_64x128x64_w4s4g8", "splitk16fix_16x64x128_w4s4g1")
SHAPE = (128, 128, 128)


def _checked_call(name: str, a: torch.Tensor, b: torch.Tensor, forms: dict):
    config, p = gemm.CANDIDATES[name].run.args[0], gemm.problem((a, b))
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    call = lambda: triton_path(config, p, a, b, out)  # noqa: E731
    check(name, {form: lambda lock=lock: _timed(call, lock, 1) for form, lock in forms.items()}, a, b, out)
    return call


def _timed(call, lock, calls: int) -> float:
    shipped = seer.launch._TRITON_PATH
    seer.launch._TRITON_PATH = lock
    try:
        return host_call_us(call, calls, warmup=20)
    finally:
        seer.launch._TRITON_PATH = shipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    m, n, k = SHAPE
    a, b = operands(m, n, k, device)
    forms = {"locked": seer.launch._TRITON_PATH, "unlocked": contextlib.nullcontext()}
    samples = {name: {form: [] for form in forms} for name in VARIANTS}
    calls = {name: _checked_call(name, a, b, forms) for name in VARIANTS}
    for _ in range(args.rounds):
        for name, call in calls.items():
            for form, lock in forms.items():
                samples[name][form].append(_timed(call, lock, args.calls))
    least = {name: {form: min(values) for form, values in by_form.items()} for name, by_form in samples.items()}
    env = environment(device)
    command = " ".join(["python", *sys.argv])
    result = {"benchmark": "launch lock", "environment": env, "command": command, "shape": SHAPE,
              "dtype": "bfloat16", "calls": args.calls, "rounds": args.rounds, "host_us": least, "all_us": samples}
    lines = [f"# Host time of the Triton-path lock, on {env['device']['name']}", "",
             provenance(env, command) + f"; a bf16 product of {m}x{n}x{k} into `out`.", "",
             f"Host µs per call, least of {args.rounds} alternated loops of {args.calls}.", "",
             "| variant | locked | unlocked | lock's cost |", "|---|---|---|---|",
             *[f"| {name} | {v['locked']:.2f} | {v['unlocked']:.2f} | {v['locked'] - v['unlocked']:+.2f} |"
               for name, v in least.items()]]
    tag = device_tag(torch.cuda.get_device_name()) if device.type == "cuda" else "cpu"
    write_result(args.out, f"launch-lock-{tag}", result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
