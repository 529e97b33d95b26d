"""seer's GEMM against PyTorch Inductor's max-autotune, with and without AutoHeuristic's learned ranking.

    python benchmarks/gemm_inductor.py --out benchmarks/results [--budget-s 420] \\
        [--model models/gemm-h100.json]
    python benchmarks/gemm_inductor.py --render benchmarks/results/gemm-inductor-h100.json

The compiler's way to a tuned GEMM: ``torch.compile(torch.mm, mode="max-autotune-no-cudagraphs")``
benchmarks cuBLAS and Inductor's Triton templates at compile time and keeps the fastest.
AutoHeuristic (``mm`` added to ``TORCHINDUCTOR_AUTOHEURISTIC_USE``) adds Inductor's decision
tree learned on H100 (``_MMRankingH100``), which ranks the templates so that only the top 10 and
cuBLAS are benchmarked: the peer closest to seer's idea, a learned tree deciding per shape. On held-out
shapes of ``gemm.py`` (LLM layers at unseen token counts in bf16, random shapes in fp16 or bf16),
each in turn:

  torch     ``torch.matmul``
  seer      ``seer.dispatch`` with the shipped model; its first call after ``seer.clear_cache()``
            (the model file read again, since ``clear_cache`` drops it too, then features, tree,
            launch: its kernels were compiled by an untimed call before, as ``gemm.py`` times them)
  inductor  a fresh ``torch.compile`` (dynamo reset, Inductor's caches off and a new cache folder,
            so its first call compiles and tunes from nothing, as on a new machine)
  ah        the same with AutoHeuristic's ranking

Steady state: device time per call, the L2 flushed before each call, the host's cost of a call
(a compiled function's guards, seer's lookup) left out, since in a model the compiled mm would be
one node of a larger graph. Two ways: outside any graph, each call's span on the GPU (first
kernel's start to last kernel's end) from the profiler's trace, the headline; and CUDA graphs of
flush-and-call pairs less the flushes, which in this process read some cuBLAS calls 1.2-5x over
the profiler (``gemm_capture_check.py`` finds them within ~2 µs of it in a process of their own).
First calls: synchronised wall time.
Every result is checked against ``torch.matmul`` first. The two compiled peers run in one
process, in alternating order from shape to shape: the second may reuse kernels the first
compiled in memory, so the summary also gives each one's first calls where it compiled first.
Writes ``gemm-inductor-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemm_profile as sweep  # noqa: E402
from gemm import first_call_ms, geomean, held_out_shapes, seer_call  # noqa: E402

PEERS = ("inductor", "ah")
METHOD = ("Peers: `torch.compile(mm, mode=\"max-autotune-no-cudagraphs\")` fresh for each shape (dynamo reset, "
          "Inductor's caches off, a new cache folder), alone and with `TORCHINDUCTOR_AUTOHEURISTIC_USE=mixed_mm,mm` "
          "(Inductor's learned ranking benchmarks its top 10 templates and cuBLAS); seer: `seer.dispatch` with the "
          "shipped model, its first call after `seer.clear_cache()` (the model file read again) with its kernel "
          "compiled before. Steady state: "
          "device time per call, no host cost: outside any graph, the median over 20 flushed calls of each call's "
          "span on the GPU (its first kernel's start to its last kernel's end) from the profiler's device trace, "
          "the headline, and the repayment counts' basis; and from CUDA graphs of 10 flush-and-call pairs less "
          "the flushes alone (medians of 5 replays); first calls: synchronised wall time; every result checked "
          "against torch.matmul.")
AUTOHEURISTIC_ENV = "TORCHINDUCTOR_AUTOHEURISTIC_USE"


def compiled_mm(autoheuristic: bool, cache_root: Path):
    """A fresh max-autotune ``torch.mm`` that has compiled nothing (dynamo reset, Inductor's
    caches off, a new cache folder), with the learned mm ranking on if ``autoheuristic``; Inductor
    reads these settings when it lowers the mm, at the first call, so they hold until the caller
    calls the returned ``restore``. Also a list that records, for each mm Inductor lowers, how many
    choices the ranking kept (None where it declined the shape; nothing where it was not consulted)."""
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()
    use = "mixed_mm,mm" if autoheuristic else "mixed_mm"  # mixed_mm: Inductor's default
    ranked: list = []
    settings = contextlib.ExitStack()
    with settings:  # on any error the settings made so far are undone
        settings.enter_context(inductor_config.patch(force_disable_caches=True))
        settings.enter_context(environment(**{AUTOHEURISTIC_ENV: use,
                                              "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(dir=cache_root)}))
        settings.enter_context(ranking_patch(inductor_config, use))
        settings.enter_context(recording_ranking(ranked))
        settings = settings.pop_all()

    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    return torch.compile(mm, mode="max-autotune-no-cudagraphs", dynamic=False), settings.close, ranked


@contextlib.contextmanager
def environment(**values: str):
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def recording_ranking(ranked: list):
    """Inductor's mm ranking wrapped to append how many choices it kept to ``ranked``."""
    from torch._inductor.kernel import mm as mm_lowering

    ranking = mm_lowering.mm_autoheuristic

    def recorded(*args, **kwargs):
        choices = ranking(*args, **kwargs)
        ranked.append(None if choices is None else len(choices))
        return choices

    mm_lowering.mm_autoheuristic = recorded
    try:
        yield
    finally:
        mm_lowering.mm_autoheuristic = ranking


def ranking_patch(inductor_config, use: str):
    """Where Inductor reads ``autoheuristic_use`` from its config (a string read from the
    environment at import, as torch 2.11 does) a patch of it; where it reads the environment at
    each lowering (torch 2.13) nothing."""
    if isinstance(getattr(inductor_config, "autoheuristic_use", None), str):
        return inductor_config.patch(autoheuristic_use=use)
    return contextlib.nullcontext()


def captured_graph(body, calls: int) -> torch.cuda.CUDAGraph:
    """A CUDA graph of ``calls`` calls of ``body``."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            body()
    return graph


def graph_ms(fn, flush: torch.Tensor, calls: int = 10, replays: int = 5) -> float:
    """Device time of one call of ``fn`` with the L2 flushed before it, free of the host's launch
    cost (a compiled call's guards, seer's lookup): a CUDA graph of ``calls`` flush-and-call pairs
    and one of the flushes alone, each replayed ``replays`` times; their medians' difference per
    call."""
    def median_ms(graph: torch.cuda.CUDAGraph) -> float:
        samples = []
        for _ in range(replays):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
        return float(np.median(samples))

    both, flushes = captured_graph(lambda: (flush.zero_(), fn()), calls), captured_graph(flush.zero_, calls)
    for graph in (both, flushes):  # a first replay uploads the graph
        graph.replay()
    per_call = (median_ms(both) - median_ms(flushes)) / calls
    if not per_call > 0:
        raise RuntimeError(f"a call timed at {per_call:.4f} ms: the flushes' spread swamped it")
    return per_call


def profiled_ms(fn, flush: torch.Tensor, calls: int = 20) -> float:
    """Device time of one call of ``fn`` with the L2 flushed before it, outside any CUDA graph:
    the median over ``calls`` of each call's span on the GPU, from the start of its first kernel to
    the end of its last, read from the profiler's device trace. The gaps between one call's kernels
    count, as a caller waits for them; no launch gap enters, since the flush's ~80 µs on the GPU
    leave the host time to queue the whole call. The headline timing: ``graph_ms`` misread some
    small calls in this benchmark's process (NOTES, GEMM against Inductor)."""
    def flushed_calls():
        for _ in range(calls):
            flush.zero_()
            fn()

    fn()  # compiled and warm before the trace
    return float(np.median(spans_after_flushes(device_trace(flushed_calls), flush_kernels(flush), calls))) / 1e6


def device_trace(body) -> list:
    """The GPU work (kernels, memsets, copies) that ``body`` launched, in order of start."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as trace:
        body()
        torch.cuda.synchronize()
    return sorted((e for e in trace.profiler.kineto_results.events()
                   if e.device_type() == torch.autograd.DeviceType.CUDA and not e.is_user_annotation()),
                  key=lambda e: e.start_ns())


def flush_kernels(flush: torch.Tensor) -> set[str]:
    """The names of the GPU work an L2 flush (``flush.zero_()``) launches: what splits a trace into calls."""
    return {e.name() for e in device_trace(flush.zero_)}


def kernel_names(body) -> list[str]:
    """The names (their first 80 characters) of the GPU work ``body`` launched."""
    return sorted({e.name()[:80] for e in device_trace(body)})


def work_between_flushes(events: list, flush_kernels: set[str], calls: int) -> list[list]:
    """The GPU work in ``events`` (in order of start) after each flush, up to the next one: there
    must be ``calls`` flushes, each followed by some work, or the call launched a kernel of the
    flush's name and the trace cannot be split."""
    groups: list[list] = []
    for event in events:
        if event.name() in flush_kernels:
            groups.append([])
        elif groups:
            groups[-1].append(event)
    if len(groups) != calls or not all(groups):
        raise RuntimeError(f"the trace split into {len(groups)} calls, not {calls}, or a call ran no GPU work: "
                           "the call may launch the flush's own kernel")
    return groups


def spans_after_flushes(events: list, flush_kernels: set[str], calls: int) -> list[int]:
    """Per flush in ``events``, nanoseconds from the start of the first work after it to the end of
    the last before the next flush."""
    return [max(e.end_ns() for e in work) - work[0].start_ns()
            for work in work_between_flushes(events, flush_kernels, calls)]


def measure(shape: sweep.Shape, model, timer: sweep.Timer, order: tuple, cache_root: Path, log) -> dict:
    import seer
    from seer.profiling import synchronised_us

    a, b = sweep.random_operands(shape.m, shape.n, shape.k, shape.dtype, seed=7)
    reference = torch.matmul(a, b).float()
    row = {"id": shape.id, "source": shape.source, "m": shape.m, "n": shape.n, "k": shape.k,
           "dtype": str(shape.dtype).removeprefix("torch."), "order": list(order)}
    row["torch_ms"] = graph_ms(lambda: torch.matmul(a, b), timer.flush)
    row["torch_profiled_ms"] = profiled_ms(lambda: torch.matmul(a, b), timer.flush)
    row["torch_kernels"] = kernel_names(lambda: torch.matmul(a, b))
    call = seer_call(a, b, model)
    check(shape, "seer", call(), reference)  # compiles seer's chosen kernel, untimed
    seer.clear_cache()
    row["seer_first_ms"] = first_call_ms(call)
    row["seer_ms"] = graph_ms(call, timer.flush)
    row["seer_profiled_ms"] = profiled_ms(call, timer.flush)
    row["seer_kernels"] = kernel_names(call)
    row["seer_choice"] = seer.explain("gemm", (a, b), model=model).variant
    for peer in order:
        mm, restore, ranked = compiled_mm(peer == "ah", cache_root)
        try:
            c, first_us = synchronised_us(lambda: mm(a, b))
            row[f"{peer}_first_ms"] = first_us / 1e3
        finally:
            restore()
        row[f"{peer}_ranked"] = ranked
        check(shape, peer, c, reference)
        row[f"{peer}_ms"] = graph_ms(lambda: mm(a, b), timer.flush)
        row[f"{peer}_profiled_ms"] = profiled_ms(lambda: mm(a, b), timer.flush)
        row[f"{peer}_kernels"] = kernel_names(lambda: mm(a, b))
    log(f"{shape.id} ({shape.m}x{shape.n}x{shape.k} {row['dtype']}), ms by the profiler / the graphs: torch "
        f"{times(row, 'torch')}, seer {times(row, 'seer')} ({row['seer_choice']}), inductor {times(row, 'inductor')} "
        f"after {row['inductor_first_ms'] / 1e3:.1f} s, ah {times(row, 'ah')} after {row['ah_first_ms'] / 1e3:.1f} s "
        f"(ranking kept {row['ah_ranked']})")
    return row


def check(shape: sweep.Shape, who: str, c: torch.Tensor, reference: torch.Tensor) -> None:
    error = sweep.relative_difference(c, reference)
    if not error < sweep.TOLERANCE:
        raise AssertionError(f"{who} disagrees with torch.matmul on {shape.id}: relative difference {error:.1e}")


def summarise(rows: list[dict]) -> dict:
    """Geometric means of each peer's steady-state time over seer's (from the graphs and from the
    profiler), and first-call medians."""
    def ratio(peer: str, timing: str) -> float:
        return geomean([r[f"{peer}{timing}"] / r[f"seer{timing}"] for r in rows])

    def faster(timing: str) -> dict:
        return {peer: int(sum(r[f"seer{timing}"] < r[f"{peer}{timing}"] for r in rows)) for peer in ("torch", *PEERS)}

    return {"shapes": len(rows),
            "steady_peer_over_seer": {peer: ratio(peer, "_ms") for peer in ("torch", *PEERS)},
            "seer_faster_on": faster("_ms"),
            "profiled_peer_over_seer": {peer: ratio(peer, "_profiled_ms") for peer in ("torch", *PEERS)},
            "seer_faster_on_profiled": faster("_profiled_ms"),
            "first_call_ms_median": {peer: float(np.median([r[f"{peer}_first_ms"] for r in rows]))
                                     for peer in ("seer", *PEERS)},
            "first_call_ms_median_compiled_first": {
                peer: float(np.median(firsts)) if (firsts := [r[f"{peer}_first_ms"] for r in rows
                                                              if r["order"][0] == peer]) else None
                for peer in PEERS},
            "calls_to_catch_up_median": {peer: catch_up(rows, peer) for peer in PEERS}}


def catch_up(rows: list[dict], peer: str) -> float | None:
    """Median over the shapes where the peer's call is the faster (by the profiler) of the calls
    after which its first call's cost is repaid (None where it is never the faster)."""
    calls = [(r[f"{peer}_first_ms"] - r["seer_first_ms"]) / (r["seer_profiled_ms"] - r[f"{peer}_profiled_ms"])
             for r in rows if r[f"{peer}_profiled_ms"] < r["seer_profiled_ms"]]
    return float(np.median(calls)) if calls else None


NAMES = {"torch": "`torch.matmul` (cuBLAS)", "inductor": "Inductor max-autotune",
         "ah": "Inductor max-autotune + AutoHeuristic"}


def steady(s: dict, peer: str) -> str:
    """A peer's geomean ratio to seer and the shapes seer is faster on, by both timings."""
    return (f"{s['profiled_peer_over_seer'][peer]:.3f}, {s['steady_peer_over_seer'][peer]:.3f} | "
            f"{s['seer_faster_on_profiled'][peer]}, {s['seer_faster_on'][peer]}")


def times(row: dict, who: str) -> str:
    return f"{row[f'{who}_profiled_ms']:.4f} / {row[f'{who}_ms']:.4f}"


def markdown(result: dict) -> str:
    from seer.profiling import provenance

    s, rows = result["summary"], result["rows"]
    lines = [f"# GEMM: seer against Inductor's max-autotune and AutoHeuristic, {result['device']['name']}", "",
             provenance(result, result["command"]), "", result["method"], "",
             f"{s['shapes']} held-out shapes.", "",
             "| peer | its steady-state time / seer's (geomean; profiler, graphs) | seer faster on (profiler, "
             "graphs) | first call, median (where it compiled first) | calls until its first call is repaid "
             "(median, where it is faster; profiler) |",
             "|---|---|---|---|---|",
             f"| seer | 1.000 | - | {s['first_call_ms_median']['seer']:.2f} ms | - |",
             f"| {NAMES['torch']} | {steady(s, 'torch')} | - | - |"]
    for peer in PEERS:
        catch, alone = s["calls_to_catch_up_median"][peer], s["first_call_ms_median_compiled_first"][peer]
        alone = "-" if alone is None else f"{alone / 1e3:.1f} s"
        lines.append(f"| {NAMES[peer]} | {steady(s, peer)} | {s['first_call_ms_median'][peer] / 1e3:.1f} s ({alone}) | "
                     f"{'never' if catch is None else f'{catch:,.0f}'} |")
    lines += ["", "Per shape (steady state, ms, from the profiler / from the graphs; first calls of the compiled "
              "peers in s):", "",
              "| shape | M x N x K | torch | seer (choice) | inductor (first) | + AutoHeuristic (first) | choices the "
              "ranking kept |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['id']} | {r['m']} x {r['n']} x {r['k']} {r['dtype']} | {times(r, 'torch')} | {times(r, 'seer')} "
              f"({r['seer_choice']}) | {times(r, 'inductor')} ({r['inductor_first_ms'] / 1e3:.1f}) | "
              f"{times(r, 'ah')} ({r['ah_first_ms'] / 1e3:.1f}) | {r['ah_ranked']} |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    from seer.profiling import device_tag, environment, write_result

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--model", default=None, help="seer's GEMM model (default: the shipped one for this GPU)")
    parser.add_argument("--budget-s", type=float, default=420)
    parser.add_argument("--random", type=int, default=40, help="random shapes among the held-out ones")
    parser.add_argument("--render", type=Path, default=None,
                        help="only rewrite this result JSON's summary (from its rows) and its .md")
    args = parser.parse_args()
    if args.render:
        result = json.loads(args.render.read_text())
        if not all("seer_profiled_ms" in row for row in result["rows"]):
            parser.error(f"{args.render} predates the profiler's timing: its .md is the one rendered when it was made")
        result["summary"] = summarise(result["rows"])
        args.render.write_text(json.dumps(result, indent=2) + "\n")
        args.render.with_suffix(".md").write_text(markdown(result))
        return 0
    warnings.simplefilter("ignore")  # Inductor's and seer's notices would drown the log
    env = environment(torch.device("cuda", torch.cuda.current_device()))
    timer, started, rows = sweep.Timer(), time.monotonic(), []
    with tempfile.TemporaryDirectory() as cache_root:
        for i, shape in enumerate(held_out_shapes(args.random, seed=0)):
            if time.monotonic() - started > args.budget_s:
                break
            order = PEERS if i % 2 == 0 else PEERS[::-1]
            rows.append(measure(shape, args.model, timer, order, Path(cache_root), print))
    result = {"benchmark": "GEMM against Inductor max-autotune and AutoHeuristic", **env,
              "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "method": METHOD, "rows": rows,
              "summary": summarise(rows)}
    write_result(args.out, f"gemm-inductor-{device_tag(env['device']['name'])}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
