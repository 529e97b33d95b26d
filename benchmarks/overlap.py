"""Multi-GPU GEMM + communication: remote-memory bandwidth, then every overlap pattern on LLM shapes.

    torchrun --nproc-per-node 2 benchmarks/overlap.py [--out benchmarks/results] [--budget-s 170]

1. Bandwidth one rank sends to its peers: Triton remote stores (put) and loads (get) through the
   symmetric heap on several program counts, the copy engines (``copy_`` between the heaps), and
   an NCCL all-gather moving the same bytes; and the bf16 rate of torch.matmul. These are the
   machine constants of ``seer.features.overlap``.
2. Tensor-parallel shapes of real LLM layers (Megatron-style with sequence parallelism):
   all_gather_gemm for the column-parallel layers (qkv, mlp_up), gemm_reduce_scatter for the
   row-parallel ones (o, mlp_down), gemm_all_scatter for the column-parallel ones with a gathered
   output. Every variant is checked against torch.matmul + NCCL (bulk_torch), then all are timed
   with CUDA events in turn, for several rounds (the median over rounds of the slowest rank's
   median after warm-up, as a collective ends with its slowest rank).

3. Selection (CPU, also run at the end of the GPU run): per op, grouped cross-validation by model
   layer (a layer's token counts never sit on both sides) scores seer's held-out choice on every
   shape against the pattern oracle, torch.matmul + NCCL and PyTorch's fused_all_gather_matmul.

Writes (rank 0): ``<op>-<device>.csv`` per op under ``--tables`` (columns id, group, source, the
feature columns, ``time_ms:<variant>``, ``baseline_ms:torch_nccl`` and ``baseline_ms:torch_nccl_graph``,
the same captured in a CUDA graph) with its ``.meta.json``; and
``overlap-<device>.json`` / ``.md`` under ``--out`` (bandwidths, GEMM rate, machine constants,
every shape's times and seer's choice, summaries). Tables are rewritten after every shape, so
stopping at ``--budget-s`` leaves valid tables.

    python benchmarks/overlap.py --select h200x2

redoes step 3 from the committed tables and the measured constants in ``overlap-h200x2.json``.
``--chunk-sweep`` then times pipelined_torch at several chunk counts on the shapes that send the
most (``overlap-chunks-<device>.json`` / ``.md``): how its default chunk count was chosen.
``--copy-sweep`` only times Triton remote copies over block sizes and programs per SM against the
copy engines (``overlap-copy-<device>.json`` / ``.md``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
import triton
import triton.language as tl

from seer.kernels import remote
from seer.kernels.gemm import LLM_LAYERS
from seer.profiling import device_tag, environment, write_result
from seer.registry import get_op
from seer.symmetric_heap import SymmetricHeap

TOLERANCE = 2e-2  # relative 2-norm difference from bulk_torch's result
MODELS = ("llama-8b", "qwen-14b", "llama-70b")
TOKENS = (128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
MAX_RANK_FLOP = 8e12  # leaves out shapes whose GEMM alone takes over ~10 ms per rank
LAYERS_OF = {"all_gather_gemm": ("qkv", "mlp_up"), "gemm_all_scatter": ("qkv", "mlp_up"),
             "gemm_reduce_scatter": ("o", "mlp_down")}
BANDWIDTH_BYTES = 256 << 20
COPY_PROGRAMS = (8, 16, 32, 0)  # 0: one program per SM
ROUNDS = 5


# ---------------------------------------------------------------- collective timing
def time_ms(fn, *, warmup: int = 3, reps: int = 10) -> float:
    """Median of ``reps`` timed calls after ``warmup``, the slowest rank's (every rank calls this together)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return slowest(np.median([s.elapsed_time(e) for s, e in zip(starts, ends)]))


def log(*parts) -> None:
    if dist.get_rank() == 0:
        print(*parts, flush=True)


# ---------------------------------------------------------------- bandwidth
@triton.jit
def _copy_kernel(src_ptr, dst_ptr, numel, rank, world_size, heap_bases, BLOCK: tl.constexpr, PUSH: tl.constexpr):
    """Every peer's copy of ``dst`` gets this rank's ``src`` (PUSH), or this rank pulls every peer's ``src``."""
    for step in range(1, world_size):
        peer = (rank + step) % world_size
        for start in range(tl.program_id(0) * BLOCK, numel, tl.num_programs(0) * BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < numel
            if PUSH:
                remote.put(src_ptr + offs, dst_ptr + offs, rank, peer, heap_bases, mask)
            else:
                remote.get(src_ptr + offs, dst_ptr + offs, rank, peer, heap_bases, mask)


def bandwidth(heap) -> dict:
    """GB/s one rank sends (or receives) to (from) its peers together, per method."""
    src, dst, sent = _copy_buffers(heap)
    sms = torch.cuda.get_device_properties(heap.device).multi_processor_count
    rates = {}
    for push in (True, False):
        for programs in COPY_PROGRAMS:
            name = f"triton_{'put' if push else 'get'}_{programs or 'all'}sm"
            rates[name] = _triton_gbps(heap, src, dst, sent, push=push, programs=programs or sms, block=4096)
            log(f"  {name:22s} {rates[name]:8.1f} GB/s")
    for push in (True, False):  # the copy engines (cudaMemcpy between the heaps), as pipelined_torch moves data
        name = f"copy_engine_{'put' if push else 'get'}"
        rates[name] = _engine_gbps(heap, src, dst, sent, push=push)
        log(f"  {name:22s} {rates[name]:8.1f} GB/s")
    gathered = torch.empty((heap.world_size * src.numel(),), dtype=torch.bfloat16, device=heap.device)
    rates["nccl_all_gather"] = sent / time_ms(lambda: dist.all_gather_into_tensor(gathered, src)) / 1e6
    log(f"  {'nccl_all_gather':22s} {rates['nccl_all_gather']:8.1f} GB/s")
    heap.free_all()
    return rates


COPY_BLOCKS = (4096, 8192, 16384)  # elements a program moves per step
COPY_PROGRAMS_PER_SM = (1, 2, 4)


def copy_sweep(heap) -> dict:
    """Triton put and get from every SM over block sizes and programs per SM, next to the copy engines."""
    src, dst, sent = _copy_buffers(heap)
    sms = torch.cuda.get_device_properties(heap.device).multi_processor_count
    rates = {}
    for push in (True, False):
        for block in COPY_BLOCKS:
            for per_sm in COPY_PROGRAMS_PER_SM:
                name = f"triton_{'put' if push else 'get'}_block{block}_x{per_sm}"
                rates[name] = _triton_gbps(heap, src, dst, sent, push=push, programs=per_sm * sms, block=block)
                log(f"  {name:28s} {rates[name]:8.1f} GB/s")
        rates[f"copy_engine_{'put' if push else 'get'}"] = _engine_gbps(heap, src, dst, sent, push=push)
    heap.free_all()
    return rates


def _copy_buffers(heap):
    """(src, dst): BANDWIDTH_BYTES each in a fresh heap; and the bytes one rank moves to or from its peers."""
    heap.free_all()
    numel = BANDWIDTH_BYTES // 2
    src, dst = heap.empty((numel,), torch.bfloat16).normal_(), heap.empty((numel,), torch.bfloat16)
    return src, dst, (heap.world_size - 1) * BANDWIDTH_BYTES


def _triton_gbps(heap, src, dst, sent: int, *, push: bool, programs: int, block: int) -> float:
    """Every peer's dst gets this rank's src (push), or this rank pulls every peer's src, by a Triton kernel."""
    def copy():
        heap.barrier()
        _copy_kernel[(programs,)](src, dst, src.numel(), heap.rank, heap.world_size, heap.heap_bases,
                                  BLOCK=block, PUSH=push, num_warps=8)

    return sent / time_ms(copy) / 1e6


def _engine_gbps(heap, src, dst, sent: int, *, push: bool) -> float:
    """The same transfers by the copy engines (``copy_`` between the heaps)."""
    peers = [(heap.rank + step) % heap.world_size for step in range(1, heap.world_size)]
    pairs = [(heap.peer_view(dst, peer), src) if push else (dst, heap.peer_view(src, peer)) for peer in peers]

    def copy():
        heap.barrier()
        for to, source in pairs:
            to.copy_(source)

    return sent / time_ms(copy) / 1e6


def _copy_markdown(rates: dict, meta: dict) -> str:
    lines = [f"# Remote copies on {meta['world_size']} x {meta['device']['name']}", "",
             f"torch {meta['versions'].get('torch')}, triton {meta['versions'].get('triton')}, measured "
             f"{meta['date']}; `{meta['command']}`. {BANDWIDTH_BYTES >> 20} MiB bf16 per peer, a barrier "
             "inside each timed call; median of CUDA-event times, slowest rank.", "",
             "| method | GB/s | of the copy engine's |", "|---|---|---|"]
    for name, rate in rates.items():
        engine = rates["copy_engine_put" if "put" in name else "copy_engine_get"]
        lines.append(f"| {name} | {rate:.0f} | {rate / engine:.0%} |")
    return "\n".join(lines) + "\n"


def gemm_tflops(size: int = 8192) -> float:
    a, b = (torch.randn(size, size, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return 2 * size**3 / time_ms(lambda: torch.matmul(a, b)) / 1e9


# ---------------------------------------------------------------- shapes
def cases(world_size: int) -> list[dict]:
    """One dict per (op, model layer, tokens): the local input shapes of every rank."""
    found = []
    for layer in LLM_LAYERS:
        if layer.model not in MODELS:
            continue
        for op, names in LAYERS_OF.items():
            if layer.layer not in names or layer.n % world_size or layer.k % world_size:
                continue
            for tokens in TOKENS:
                a_shape, b_shape, flop = _local_shapes(op, tokens, layer.n, layer.k, world_size)
                if flop <= MAX_RANK_FLOP:
                    found.append({"op": op, "id": f"{op}/{layer.model}/{layer.layer}/t{tokens}",
                                  "group": f"{layer.model}/{layer.layer}", "a": a_shape, "b": b_shape})
    order = np.random.default_rng(0).permutation(len(found))  # every op and size early, whatever the budget
    return [found[i] for i in order]


def _local_shapes(op: str, tokens: int, n: int, k: int, w: int):
    if op == "all_gather_gemm":  # tokens sharded by rows; the weight's column shard
        return (tokens // w, k), (k, n // w), 2 * tokens * k * n // w
    if op == "gemm_all_scatter":  # all tokens; the weight's column shard; output gathered by columns
        return (tokens, k), (k, n // w), 2 * tokens * k * n // w
    return (tokens, k // w), (k // w, n), 2 * tokens * k * n // w  # row-parallel: K split


def measure(heap, case: dict) -> dict:
    op = get_op(case["op"])
    heap.free_all()
    generator = torch.Generator(device="cuda").manual_seed(1000 + heap.rank)
    a = torch.randn(case["a"], device="cuda", generator=generator).to(torch.bfloat16)
    b = (torch.randn(case["b"], device="cuda", generator=generator) / math.sqrt(case["b"][0])).to(torch.bfloat16)
    spec, operands = op.kernels.split((a, b), heap=heap)
    problem = op.kernels.problem(spec)
    row = {"id": case["id"], "group": case["group"], "source": "real", **op.features.known(problem)}
    expected = op.variants["bulk_torch"].run(problem, *operands).float()
    runs = {name: (lambda v=variant: v.run(problem, *operands)) for name, variant in op.variants.items()}
    correct = {name: fn for name, fn in runs.items() if _correct(name, fn, expected, heap)}
    graphed_bulk = _graphed(runs["bulk_torch"])
    if graphed_bulk is not None:
        correct[GRAPHED_PEER] = graphed_bulk
    # Small shapes are bound by the host, whose pace wavers: more calls give a steadier median.
    times = _interleaved_ms(correct, heap, reps=20 if expected.numel() < 1 << 26 else 3)
    for name in runs:
        row[f"time_ms:{name}"] = times.get(name, float("nan"))
    row["baseline_ms:torch_nccl"] = row["time_ms:bulk_torch"]
    row["baseline_ms:torch_nccl_graph"] = times.get(GRAPHED_PEER, float("nan"))
    return row


GRAPHED_PEER = "peer:torch_nccl_graph"


def _graphed(fn):
    """``fn`` (torch.matmul + NCCL) captured once in a CUDA graph, as a user of ``torch.cuda.graph`` would:
    its replay, or None where any rank failed to capture (each rank warms up and captures together).
    Its inputs and output stay fixed, which the caller must arrange: the best case for this peer."""
    graph = torch.cuda.CUDAGraph()
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up on a side stream, as torch's CUDA-graph notes ask
            fn()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            fn()
        failed = 0.0
    except RuntimeError as exc:
        print(f"  rank {dist.get_rank()} could not capture torch.matmul + NCCL: {exc}", flush=True)
        failed = 1.0
    return None if slowest(failed) else graph.replay


def _correct(name, fn, expected, heap) -> bool:
    """Whether fn ran and matched on every rank (every rank agrees, so all stay in step)."""
    try:
        error = ((fn().float() - expected).norm() / expected.norm()).item()
        heap.raise_wait_errors(name)
    except Exception as exc:  # a failing variant is recorded (NaN), not fatal to the campaign
        print(f"  rank {heap.rank} FAILED {name}: {type(exc).__name__}: {exc}", flush=True)
        error = float("inf")
    worst = slowest(error if math.isfinite(error) else float("inf"))
    if not worst <= TOLERANCE:
        log(f"  WRONG {name}: relative error {worst:.2e}")
        return False
    return True


def _interleaved_ms(runs: dict, heap, reps: int) -> dict:
    """Median over ROUNDS rounds, each timing every variant in turn: a slow spell of the host (it
    decides the time of small shapes) then hits every variant alike instead of whichever ran in it."""
    samples = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, fn in runs.items():
            if samples[name] is None:
                continue
            ms = time_ms(fn, warmup=2, reps=reps)
            timed_out = heap.wait_errors[0].item()
            heap.wait_errors.zero_()
            if slowest(timed_out):
                log(f"  TIMED OUT {name}: a flag wait gave up while timing")
                samples[name] = None
            else:
                samples[name].append(ms)
    return {name: float(np.median(values)) for name, values in samples.items() if values}


def slowest(value: float) -> float:
    """The largest ``value`` over the ranks."""
    value = torch.tensor(float(value), device="cuda")
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return value.item()


CHUNK_COUNTS = (1, 2, 4, 8)


SWEEP_RANKS = (0, 1 / 8, 1 / 4, 1 / 2)  # shapes at these fractions down each op's list, most bytes sent first


def chunk_sweep(heap, todo: list[dict], ids: list[str] | None = None) -> list[dict]:
    """pipelined_torch at several chunk counts on each op's shapes, from the one that sends the most bytes
    to a middling one; or on the shapes ``ids`` names."""
    rows = []
    for op_name in LAYERS_OF:
        op = get_op(op_name)
        ranked = sorted((c for c in todo if c["op"] == op_name), key=lambda c: -sent_elements(c, heap.world_size))
        if not ranked:  # an op left out by --ops
            continue
        chosen = ([c for c in ranked if c["id"] in ids] if ids else
                  [ranked[i] for i in sorted({int(f * (len(ranked) - 1)) for f in SWEEP_RANKS})])
        for case in chosen:
            heap.free_all()
            a = torch.randn(case["a"], device="cuda").to(torch.bfloat16)
            b = (torch.randn(case["b"], device="cuda") / math.sqrt(case["b"][0])).to(torch.bfloat16)
            spec, operands = op.kernels.split((a, b), heap=heap)
            problem = op.kernels.problem(spec)
            run = op.variants["pipelined_torch"].run
            times = {chunks: time_ms(lambda: run(problem, *operands, chunks=chunks)) for chunks in CHUNK_COUNTS}
            times["bulk_torch"] = time_ms(lambda: op.variants["bulk_torch"].run(problem, *operands))
            log(f"  {case['id']}: " + ", ".join(f"{k}: {v:.3f} ms" for k, v in times.items()))
            rows.append({"id": case["id"], "times_ms": {str(k): v for k, v in times.items()}})
    return rows


def sent_elements(case: dict, world_size: int) -> int:
    (a_rows, a_cols), (_, b_cols) = case["a"], case["b"]
    if case["op"] == "all_gather_gemm":
        return a_rows * a_cols
    return a_rows * b_cols if case["op"] == "gemm_all_scatter" else a_rows * b_cols // world_size


def _chunk_markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"# pipelined_torch: row chunks per block on {meta['world_size']} x {meta['device']['name']}", "",
             f"torch {meta['versions'].get('torch')}, triton {meta['versions'].get('triton')}, measured "
             f"{meta['date']}; `{meta['command']}`. Median ms (CUDA events, slowest rank). The counts are "
             "those asked: `_row_chunks` runs at most one chunk per MIN_CHUNK_FLOP of a block's GEMM, so "
             "columns above that cap time the same code (their spread is the noise).", "",
             "| shape | " + " | ".join(f"{c} chunks" for c in CHUNK_COUNTS) + " | bulk_torch |",
             "|---|" + "---|" * (len(CHUNK_COUNTS) + 1)]
    for row in rows:
        lines.append(f"| {row['id']} | " + " | ".join(f"{v:.3f}" for v in row["times_ms"].values()) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- output
def write_tables(tables: Path, tag: str, rows: list[dict], meta: dict) -> None:
    tables.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(rows)
    for op, table in frame.groupby(frame["id"].str.split("/").str[0]):
        table = table.dropna(axis=1, how="all")
        table.to_csv(tables / f"{op}-{tag}.csv", index=False)
        (tables / f"{op}-{tag}.meta.json").write_text(json.dumps(
            {**meta, "op": op, "rows": len(table),
             "notes": "time_ms:<variant> and baseline_ms:torch_nccl (= bulk_torch): the slowest rank's median "
                      "of CUDA-event times after warm-up; NaN where a variant failed or was wrong; "
                      "baseline_ms:torch_nccl_graph: bulk_torch captured once in a CUDA graph on fixed inputs"},
            indent=2) + "\n")


# ---------------------------------------------------------------- selection (no GPU needed)
COMM_SHARE = 0.2  # the bar: shapes whose communication is at least a fifth of the bulk time


def select(tables: Path, out: Path, tag: str, machine: dict, command: str, ops: list[str] | None = None) -> dict:
    """Held-out selection on every op table of ``tag`` (``ops``: on theirs alone, as a run of ``--ops``
    timed them); writes ``overlap-<tag>.json`` and ``.md``, crediting every run behind the tables.
    Tables of another GPU or world size than the first one's are refused: one result names one machine."""
    from seer.table import read_table
    from seer.train import TwoStageSelector

    scored, shapes, environment_meta, runs = {}, [], None, []
    for path in sorted(tables.glob(f"*-{tag}.csv")):
        table = read_table(path)
        if ops is not None and table.op not in ops:
            continue
        here = {k: table.meta.get(k) for k in ("device", "versions", "date", "world_size", "command")}
        environment_meta = environment_meta or here
        if (here["device"], here["world_size"]) != (environment_meta["device"], environment_meta["world_size"]):
            raise ValueError(f"{path} was timed on {here['world_size']} x {here['device']}, the other tables of "
                             f"{tag} on {environment_meta['world_size']} x {environment_meta['device']}")
        if table.meta.get("campaigns"):  # a table of several runs averaged by `seer merge`: name the runs
            environment_meta["merged"] = True
            runs += [{"commands": c["commands"], "date": c["date"]} for c in table.meta["campaigns"]]
        else:
            runs.append({"commands": [here["command"]], "date": here["date"]})
        report = TwoStageSelector().evaluate(table, calls=(1,))
        rows = _shape_rows(table, report.held_out, machine["bandwidth_gbps"]["nccl_all_gather"])
        shapes += rows
        scored[table.op] = _op_summary(table, report, rows)
    if environment_meta is None:
        raise ValueError(f"no table of {tag} in {tables}" + (f" for {', '.join(ops)}" if ops else ""))
    distinct = [run for i, run in enumerate(runs) if run not in runs[:i]]
    if len(distinct) > 1 or environment_meta.get("merged"):
        environment_meta["runs"] = distinct
    result = {"benchmark": "GEMM + communication overlap, held-out selection", **machine,
              "environment": environment_meta, "command": command, "ops": scored, "shapes": shapes}
    write_result(out, f"overlap-{tag}", result, _markdown(result))
    return result


def _shape_rows(table, held_out, nccl_gbps: float) -> list[dict]:
    frame = table.frame.set_index("id")
    rows = []
    for shape in held_out.to_dict("records"):
        line = frame.loc[shape["id"]]
        times = {v: float(line[f"time_ms:{v}"]) for v in table.variants}
        torch_nccl = float(line["baseline_ms:torch_nccl"])
        graphed = float(line.get("baseline_ms:torch_nccl_graph", float("nan")))
        comm_ms = line["send_mb"] * 1e6 / (nccl_gbps * 1e9) * 1e3  # at NCCL's measured rate
        rows.append({"op": table.op, "id": shape["id"], "group": shape["group"], "times_ms": times,
                     "seer_choice": shape["choice@1"], "oracle": shape["oracle"],
                     "seer_ms": times[shape["choice@1"]], "oracle_ms": float(shape["oracle_ms"]),
                     "torch_nccl_ms": torch_nccl, "torch_fused_ms": times.get("torch_fused"),
                     "torch_nccl_graph_ms": graphed if math.isfinite(graphed) else None,
                     "estimated_comm_share": round(min(comm_ms / torch_nccl, 1.0), 4)})
    return rows


def _op_summary(table, report, rows: list[dict]) -> dict:
    def geomean(values):  # None for no values (no comm-heavy shapes); read_table keeps only finite times
        return float(np.exp(np.mean(np.log(values)))) if values else None

    heavy = [r for r in rows if r["estimated_comm_share"] >= COMM_SHARE]
    worst = min(rows, key=lambda r: r["torch_nccl_ms"] / r["seer_ms"])
    summary = {
        "shapes": len(rows), "groups": report.groups, "folds": report.folds,
        "fraction_of_oracle": geomean([r["oracle_ms"] / r["seer_ms"] for r in rows]),
        "speedup_vs_torch_nccl": geomean([r["torch_nccl_ms"] / r["seer_ms"] for r in rows]),
        "comm_heavy_shapes": len(heavy),
        "speedup_vs_torch_nccl_comm_heavy": geomean([r["torch_nccl_ms"] / r["seer_ms"] for r in heavy]),
        "oracle_speedup_vs_torch_nccl": geomean([r["torch_nccl_ms"] / r["oracle_ms"] for r in rows]),
        "worst_shape": {"id": worst["id"], "seer_choice": worst["seer_choice"],
                        "speedup_vs_torch_nccl": worst["torch_nccl_ms"] / worst["seer_ms"]},
        "pattern_speedup_vs_torch_nccl": {v: geomean([r["torch_nccl_ms"] / r["times_ms"][v] for r in rows])
                                          for v in table.variants},
        "fastest_count": pd.Series([r["oracle"] for r in rows]).value_counts().to_dict(),
        "seer_choice_count": pd.Series([r["seer_choice"] for r in rows]).value_counts().to_dict(),
    }
    if "torch_fused" in table.variants:
        summary["speedup_vs_torch_fused"] = geomean([r["torch_fused_ms"] / r["seer_ms"] for r in rows])
    graphed = [r for r in heavy if r["torch_nccl_graph_ms"] is not None]
    if graphed:  # the peer at its best: torch.matmul + NCCL replayed from a CUDA graph on fixed inputs
        summary["comm_heavy_shapes_with_graphed_peer"] = len(graphed)
        summary["speedup_vs_torch_nccl_graph_comm_heavy"] = geomean(
            [r["torch_nccl_graph_ms"] / r["seer_ms"] for r in graphed])
    every_graphed = [r for r in rows if r["torch_nccl_graph_ms"] is not None]
    if every_graphed:  # on every shape too: on small ones the graph's saved launches decide
        summary["shapes_with_graphed_peer"] = len(every_graphed)
        summary["speedup_vs_torch_nccl_graph"] = geomean(
            [r["torch_nccl_graph_ms"] / r["seer_ms"] for r in every_graphed])
    return summary


def _provenance(env: dict, selection: str) -> str:
    """Which commands timed the tables and which made the selection."""
    if env.get("runs"):
        runs = "; ".join(f"`{' && '.join(run['commands'])}` ({run['date']})" for run in env["runs"])
        merged = "; each op's tables averaged by `seer merge`" if env.get("merged") else ""
        return f"Timing runs: {runs}{merged}. Selection: `{selection}`."
    if env["command"] == selection:
        return f"Timing run and selection (in the same command): `{selection}`."
    return f"Timing run: `{env['command']}`; selection: `{selection}`."


def _markdown(result: dict) -> str:
    env = result["environment"]
    bandwidth = result["bandwidth_gbps"]
    lines = [f"# GEMM + communication on {env['world_size']} x {env['device']['name']}", "",
             f"torch {env['versions'].get('torch')}, triton {env['versions'].get('triton')}, measured {env['date']}.  ",
             _provenance(env, result["command"]), "",
             "## Machine", "", "| measure | GB/s |", "|---|---|"]
    lines += [f"| {name} | {rate:.0f} |" for name, rate in bandwidth.items()]
    lines += ["", f"torch.matmul bf16 8192^3: {result['gemm_tflops']:.0f} TFLOP/s. Machine constants for "
              f"`seer.features.overlap`: {result['machine_constants']}.", "",
              "## Seer on held-out shapes (grouped by model layer)", "",
              "| op | shapes | fraction of oracle | vs torch+NCCL | comm-heavy shapes | vs torch+NCCL there "
              "| oracle vs torch+NCCL | vs torch+NCCL in a CUDA graph, all / comm-heavy | vs fused_all_gather_matmul "
              "| worst shape |", "|---|---|---|---|---|---|---|---|---|---|"]
    for op, s in result["ops"].items():
        lines.append(f"| {op} | {s['shapes']} | {s['fraction_of_oracle']:.3f} | {s['speedup_vs_torch_nccl']:.3f}x "
                     f"| {s['comm_heavy_shapes']} | {_times(s['speedup_vs_torch_nccl_comm_heavy'])} "
                     f"| {s['oracle_speedup_vs_torch_nccl']:.3f}x "
                     f"| {_times(s.get('speedup_vs_torch_nccl_graph'))} / "
                     f"{_times(s.get('speedup_vs_torch_nccl_graph_comm_heavy'))} "
                     f"| {_times(s.get('speedup_vs_torch_fused'))} | {_worst(s['worst_shape'])} |")
    lines += ["", "Comm-heavy: communication estimated (bytes sent / the NCCL rate above) at 1/5 or more of the "
              "torch.matmul + NCCL time. The graphed peer is torch.matmul + NCCL captured once in a CUDA graph "
              "on fixed inputs and output (its best case; seer's graphed pattern stages its input each call).",
              "", "## Every shape (ms)", ""]
    for op, s in result["ops"].items():
        variants = list(s["pattern_speedup_vs_torch_nccl"])
        lines += [f"### {op}", "", "| shape | " + " | ".join(variants) +
                  " | torch+NCCL graphed | seer's choice | comm share |", "|---|" + "---|" * (len(variants) + 3)]
        for r in (r for r in result["shapes"] if r["op"] == op):
            cells = [f"**{r['times_ms'][v]:.3f}**" if v == r["oracle"] else f"{r['times_ms'][v]:.3f}" for v in variants]
            graphed = r.get("torch_nccl_graph_ms")
            lines.append(f"| {r['id'].split('/', 1)[1]} | " + " | ".join(cells) +
                         f" | {'-' if graphed is None else f'{graphed:.3f}'} | {r['seer_choice']} "
                         f"| {r['estimated_comm_share']:.2f} |")
        lines.append("")
    lines.append("Bold: the fastest pattern. bulk_torch is torch.matmul + NCCL.")
    return "\n".join(lines) + "\n"


def _times(value) -> str:
    return "-" if value is None else f"{value:.3f}x"


def _worst(worst: dict) -> str:
    return f"{worst['id'].split('/', 1)[1]} ({worst['seer_choice']}): {worst['speedup_vs_torch_nccl']:.2f}x"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="folder of the results file")
    parser.add_argument("--tables", type=Path, default=Path("datasets/profiles"), help="folder of the op tables")
    parser.add_argument("--select", metavar="TAG", help="only redo the selection from the tables of TAG (no GPU)")
    parser.add_argument("--budget-s", type=float, default=170, help="stop timing shapes after this long")
    parser.add_argument("--heap-gib", type=float, default=8)
    parser.add_argument("--ops", nargs="+", choices=sorted(LAYERS_OF), default=None,
                        help="time (with --select: score) these ops only; default every op")
    parser.add_argument("--chunk-sweep", action="store_true", help="then time pipelined_torch at several chunk counts")
    parser.add_argument("--sweep-ids", nargs="+", metavar="ID", help="the chunk sweep's shapes (default: 4 per op)")
    parser.add_argument("--copy-sweep", action="store_true",
                        help="only time remote copies over block sizes and programs per SM (overlap-copy-<device>)")
    args = parser.parse_args(argv)
    if args.select:
        machine = json.loads((args.out / f"overlap-{args.select}.json").read_text())
        machine = {k: machine[k] for k in ("bandwidth_gbps", "gemm_tflops", "machine_constants")}
        select(args.tables, args.out, args.select, machine, " ".join(["python", *sys.argv]),
               args.ops)
        return
    started = time.monotonic()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    world_size = dist.get_world_size()
    heap = SymmetricHeap(int(args.heap_gib * 2**30))
    heap.check_waits = False  # no synchronisation per call while timing; checked after every variant
    heap.max_spins = 1 << 22  # a few seconds: a pattern that deadlocks costs little of the budget
    tag = f"{device_tag(torch.cuda.get_device_name())}x{world_size}"
    log(f"overlap benchmark on {world_size} x {torch.cuda.get_device_name()} ({tag})")
    meta = {**environment(heap.device), "command": " ".join(["torchrun", f"--nproc-per-node {world_size}", *sys.argv]),
            "world_size": world_size}
    if args.copy_sweep:
        rates = copy_sweep(heap)
        if dist.get_rank() == 0:
            write_result(args.out, f"overlap-copy-{tag}", {**meta, "bandwidth_gbps": rates}, _copy_markdown(rates, meta))
        dist.barrier()
        dist.destroy_process_group()
        return
    log("bandwidth, one rank to its peers:")
    rates = bandwidth(heap)
    tflops = gemm_tflops()
    log(f"  torch.matmul bf16 8192^3: {tflops:.0f} TFLOP/s")
    constants = {"gemm_tflops": round(tflops), "link_gbps": round(rates["triton_put_allsm"])}
    log(f"machine constants for seer.features.overlap: {constants}")
    rows: list[dict] = []
    ops = args.ops or sorted(LAYERS_OF)
    todo = [case for case in cases(world_size) if case["op"] in ops]
    for i, case in enumerate(todo):
        if time.monotonic() - started > args.budget_s:
            log(f"budget reached: {len(todo) - i} of {len(todo)} shapes left for a later run")
            break
        row = measure(heap, case)
        rows.append(row)
        times = {k.split(":", 1)[1]: v for k, v in row.items() if k.startswith("time_ms:")}
        best = min((v, k) for k, v in times.items() if math.isfinite(v))
        log(f"[{i + 1}/{len(todo)}] {case['id']}: torch+nccl {row['baseline_ms:torch_nccl']:.3f} ms, "
            f"best {best[1]} {best[0]:.3f} ms  ({time.monotonic() - started:.0f} s)")
        if dist.get_rank() == 0:
            write_tables(args.tables, tag, rows, {**meta, "shapes_timed": len(rows)})
    if dist.get_rank() == 0 and rows:
        machine = {"bandwidth_gbps": rates, "gemm_tflops": tflops, "machine_constants": constants}
        select(args.tables, args.out, tag, machine, meta["command"], args.ops)
    if args.chunk_sweep:
        log("pipelined_torch chunk counts:")
        sweep = chunk_sweep(heap, todo, args.sweep_ids)
        if dist.get_rank() == 0:
            write_result(args.out, f"overlap-chunks-{tag}", {**meta, "chunk_counts": list(CHUNK_COUNTS),
                                                             "shapes": sweep}, _chunk_markdown(sweep, meta))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
