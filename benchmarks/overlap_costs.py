"""Where pipelined_torch's time goes: its parts timed alone, next to the whole, on a few shapes.

    torchrun --nproc-per-node 2 benchmarks/overlap_costs.py [--out benchmarks/results]

    torchrun --nproc-per-node 2 benchmarks/overlap_costs.py --profile [--out DIR]

Per shape (bf16), every rank: the whole pattern and bulk_torch (CUDA events, the slowest rank's
median), the host time to issue one call of each (no synchronisation inside the loop: where it
reaches the event time, the host is the bound), and the parts: one symmetric-heap barrier, the
local GEMM (torch.matmul of everything this rank computes) and the copy engines moving the bytes
this rank sends. Writes ``overlap-costs-<device>.json`` / ``.md``. With ``--profile``, instead: where
the host time of the torch patterns goes, as cProfile's table for each op's smallest listed shape
(``overlap-host-<device>.txt``).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import math
import pstats
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from overlap import cases, log, sent_elements, slowest, time_ms
from seer.profiling import device_tag, environment, write_result
from seer.registry import get_op
from seer.symmetric_heap import SymmetricHeap

SHAPES = ("all_gather_gemm/llama-8b/qkv/t2048", "all_gather_gemm/llama-70b/qkv/t8192",
          "gemm_all_scatter/llama-8b/qkv/t2048", "gemm_all_scatter/llama-8b/mlp_up/t8192",
          "gemm_reduce_scatter/llama-8b/o/t1024", "gemm_reduce_scatter/llama-8b/o/t8192",
          "gemm_reduce_scatter/qwen-14b/o/t16384")
HOST_CALLS = 20


def host_us(fn) -> float:
    """Host time to issue one call, averaged over a loop without synchronisation (the slowest rank's)."""
    fn()
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(HOST_CALLS):
        fn()
    issued = (time.perf_counter() - start) / HOST_CALLS * 1e6
    torch.cuda.synchronize()
    return slowest(issued)


def _case_problem(heap, case: dict):
    """(op, problem, operands, a, b) of ``case`` in bf16 on a freshly emptied heap."""
    op = get_op(case["op"])
    heap.free_all()
    a = torch.randn(case["a"], device="cuda").to(torch.bfloat16)
    b = (torch.randn(case["b"], device="cuda") / math.sqrt(case["b"][0])).to(torch.bfloat16)
    spec, operands = op.kernels.split((a, b), heap=heap)
    return op, op.kernels.problem(spec), operands, a, b


def costs(heap, case: dict) -> dict:
    op, problem, operands, a, b = _case_problem(heap, case)
    pipelined, bulk = (op.variants[name].run for name in ("pipelined_torch", "bulk_torch"))
    gemm_a = torch.randn((problem.m if case["op"] == "all_gather_gemm" else a.shape[0], a.shape[1]),
                         device="cuda").to(torch.bfloat16)
    sent = heap.empty((sent_elements(case, heap.world_size),), torch.bfloat16).normal_()
    peer_copy = heap.peer_view(heap.empty(sent.shape, torch.bfloat16), (heap.rank + 1) % heap.world_size)
    row = {"id": case["id"], "sent_mb": sent.numel() * 2 / 1e6}
    row["pipelined_torch_ms"] = time_ms(lambda: pipelined(problem, *operands))
    row["bulk_torch_ms"] = time_ms(lambda: bulk(problem, *operands))
    row["pipelined_torch_host_ms"] = host_us(lambda: pipelined(problem, *operands)) / 1e3
    row["bulk_torch_host_ms"] = host_us(lambda: bulk(problem, *operands)) / 1e3
    row["barrier_ms"] = time_ms(heap.barrier)
    row["gemm_ms"] = time_ms(lambda: torch.matmul(gemm_a, b))
    row["copy_engine_ms"] = time_ms(lambda: peer_copy.copy_(sent))
    log("  " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else str(v) for k, v in row.items()))
    return row


def markdown(rows: list[dict], meta: dict) -> str:
    columns = [k for k in rows[0] if k != "id"]
    lines = [f"# pipelined_torch's parts on {meta['world_size']} x {meta['device']['name']}", "",
             f"torch {meta['versions'].get('torch')}, triton {meta['versions'].get('triton')}, measured "
             f"{meta['date']}; `{meta['command']}`. Times in ms: CUDA-event medians (slowest rank), except "
             "`*_host_ms`, the host time to issue one call.", "",
             "| shape | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for row in rows:
        lines.append(f"| {row['id']} | " + " | ".join(f"{row[c]:.3f}" for c in columns) + " |")
    return "\n".join(lines) + "\n"


def host_profile(heap, case: dict, patterns=("pipelined_torch", "fused_torch", "pipelined_graph", "bulk_torch"), calls=50) -> str:
    """cProfile's table (by own time) of ``calls`` calls of each pattern, no synchronisation inside."""
    op, problem, operands, _, _ = _case_problem(heap, case)
    text = []
    for name in (p for p in patterns if p in op.variants):
        run = op.variants[name].run
        host_us(lambda: run(problem, *operands))  # warm: compiled kernels, cached views
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(calls):
            run(problem, *operands)
        profiler.disable()
        torch.cuda.synchronize()
        table = io.StringIO()
        pstats.Stats(profiler, stream=table).sort_stats("tottime").print_stats(22)
        text.append(f"==== {case['id']} {name}: {calls} calls, host {host_us(lambda: run(problem, *operands)):.0f} us "
                    f"per call without the profiler\n{table.getvalue()}")
    return "\n".join(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--profile", action="store_true", help="profile the host side of the torch patterns instead")
    args = parser.parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    heap = SymmetricHeap(4 << 30)
    heap.check_waits = False  # no synchronisation per call: the host time of the pattern alone
    world_size = dist.get_world_size()
    meta = {**environment(heap.device), "world_size": world_size,
            "command": " ".join(["torchrun", f"--nproc-per-node {world_size}", *sys.argv])}
    chosen = [case for case in cases(world_size) if case["id"] in SHAPES]
    tag = f"{device_tag(torch.cuda.get_device_name())}x{world_size}"
    if args.profile:
        smallest = [min((c for c in chosen if c["op"] == op), key=lambda c: sent_elements(c, world_size))
                    for op in dict.fromkeys(c["op"] for c in chosen)]
        text = "\n".join(host_profile(heap, case) for case in smallest)
        if dist.get_rank() == 0:
            args.out.mkdir(parents=True, exist_ok=True)
            header = (f"{world_size} x {meta['device']['name']}, torch {meta['versions'].get('torch')}, triton "
                      f"{meta['versions'].get('triton')}, {meta['date']}: `{meta['command']}`")
            (args.out / f"overlap-host-{tag}.txt").write_text(f"{header}\n{text}")
        dist.barrier()
        dist.destroy_process_group()
        return
    rows = [costs(heap, case) for case in sorted(chosen, key=lambda c: SHAPES.index(c["id"]))]
    if dist.get_rank() == 0:
        write_result(args.out, f"overlap-costs-{tag}", {**meta, "shapes": rows}, markdown(rows, meta))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
