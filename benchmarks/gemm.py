"""GEMM results: seer's choices on held-out shapes against the oracle, torch.matmul and triton.autotune.

    python benchmarks/gemm.py --out benchmarks/results/gemm-h100 [--model models/gemm-h100.json]
                              [--compare-model models/gemm-h200.json]
    python benchmarks/gemm.py --render benchmarks/results/gemm-h200/gemm-results.json   (the summary again, no GPU)

Held-out shapes: the LLM layers at token counts the profile sweep never saw, and random shapes
from another seed. For each shape every shipped variant is timed (as in gemm_profile.py), and so
is ``seer.dispatch`` end to end. Reported: seer's fraction of the oracle (over all shipped
variants, and over the Triton ones), geometric-mean speed-up over torch.matmul with and without
the vendor candidate, the worst shape, host overhead on decode shapes, and on a sample of shapes
``triton.autotune`` over the same tile configs (time to first result, steady-state time).
``--compare-model`` scores another model's choices on the same timings (another GPU's model, to
see what measuring this one bought).
Writes ``gemm-results.json`` and ``gemm-results.md`` under ``--out``.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemm_profile as sweep  # noqa: E402  (shapes, compiling ahead and timing are shared)

HELD_OUT_TOKENS = (2, 8, 32, 128, 512, 2048, 8192)  # none of them in seer.kernels.gemm.LLM_TOKENS
HELD_OUT_SEED = 1000


def held_out_shapes(random_count: int, seed: int) -> list[sweep.Shape]:
    from seer.kernels.gemm import llm_shapes

    llm = [sweep.Shape(f"{g}/m{m}", g, "real", m, n, k, torch.bfloat16)
           for g, m, n, k in llm_shapes(HELD_OUT_TOKENS, max_flops=sweep.LLM_MAX_FLOPS)]
    shapes = llm + sweep.random_shapes(random_count, HELD_OUT_SEED, sweep.LLM_MAX_FLOPS)
    return [shapes[i] for i in np.random.default_rng(seed).permutation(len(shapes))]


# ---------------------------------------------------------------- seer (the API the lead provides)
def seer_choice(a, b, model) -> tuple[str, str]:
    """(variant seer picks for (a, b), the model it used)."""
    import seer

    decision = seer.explain("gemm", (a, b), model=model)
    return decision.variant, decision.model


def seer_call(a, b, model):
    import seer

    return lambda: seer.dispatch("gemm", (a, b), model=model)


# ---------------------------------------------------------------- triton.autotune baseline
def autotune_configs() -> list:
    """The data-parallel tile configs of the candidate family, as triton.Config objects."""
    import triton

    from seer.kernels.gemm import CANDIDATES

    configs = []
    for variant in CANDIDATES.values():
        p = variant.params
        if p.get("kind") == "tiles" and not p["persistent"]:
            meta = dict(BLOCK_M=p["block_m"], BLOCK_N=p["block_n"], BLOCK_K=p["block_k"], GROUP_M=p["group_m"])
            configs.append(triton.Config(meta, num_warps=p["num_warps"], num_stages=p["num_stages"]))
    return configs


def autotuned_call(a, b, c):
    """A fresh ``triton.autotune`` over :func:`autotune_configs` (nothing tuned yet) for C = A B."""
    import triton

    from seer.kernels.gemm import _gemm_kernel

    tuned = triton.autotune(configs=autotune_configs(), key=["M", "N", "K"])(_gemm_kernel)
    m, k = a.shape
    n = b.shape[1]

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    return lambda: tuned[grid](a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride())


def first_call_ms(fn) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3


# ---------------------------------------------------------------- one shape
TIMING_ROUNDS = 2  # every variant's do_bench median taken this many times, interleaved; the least kept
LOOP_MS = 20.0  # a timed loop of calls lasts about this long (10 to 200 calls)


def variant_times(p, a, b, c, ref, timer: sweep.Timer, log, shape_id: str) -> dict:
    """``time_ms:<variant>`` for every shipped variant: each checked against ``ref`` on ``c``
    poisoned first (a wrong one is logged and gets NaN), then timed as gemm_profile.py screens
    (hopeless ones keep their screen), the rest in :data:`TIMING_ROUNDS` interleaved rounds."""
    from seer.kernels import gemm

    calls = {name: (lambda v=variant: v.run(p, a, b, out=c)) for name, variant in gemm.VARIANTS.items()}
    times, best = {}, math.inf
    for name, fn in calls.items():
        error = sweep.checked_error(fn, c, ref)
        if not error <= sweep.TOLERANCE:
            log(f"  WRONG {name} on {shape_id}: relative difference {error:.2e}")
            times[name] = math.nan
            continue
        times[name] = timer.screened_ms(fn, sweep.ABANDON * best)
        best = min(best, times[name])
    contenders = [name for name, ms in times.items() if ms <= sweep.ABANDON * best]
    for _ in range(TIMING_ROUNDS - 1):
        for name in contenders:
            times[name] = min(times[name], timer.median_ms(calls[name]))
    return {f"time_ms:{name}": ms for name, ms in times.items()}


def rotated_operands(a, b, seed: int) -> list[tuple]:
    """``(a, b)`` and fresh random copies, as many as make twice the L2 in all (at most 8, at most
    4 GiB): a loop over them reads its operands from memory, as a loop over a model's layers does."""
    l2 = torch.cuda.get_device_properties(a.device).L2_cache_size
    size = a.nbytes + b.nbytes
    copies = max(1, min(8, math.ceil(2 * l2 / size), (4 << 30) // size))
    return [(a, b)] + [sweep.random_operands(a.shape[0], b.shape[1], a.shape[1], a.dtype, seed + i)
                       for i in range(1, copies)]


def end_to_end_us(sets: list[tuple], model, kernel_ms: float) -> dict:
    """One call's share of a loop of calls (``gemm_profile.loops_us``): ``seer.dispatch`` on its cached
    decision and ``torch.matmul`` as a caller writes them (each allocating its result), looping over
    the same rotated operands, interleaved; so dispatch's host work counts wherever a kernel is
    shorter than it."""
    import seer

    calls = int(min(200, max(10, LOOP_MS / max(kernel_ms, 1e-3))))
    loops = {"loop_us:seer": lambda i: seer.dispatch("gemm", sets[i % len(sets)], model=model),
             "loop_us:torch_matmul": lambda i: torch.matmul(*sets[i % len(sets)])}
    return sweep.loops_us(loops, calls)


def measure(shape: sweep.Shape, model, timer: sweep.Timer, autotune: bool, log, compare_model=None) -> dict:
    import seer
    from seer.kernels import gemm
    from seer.profiling import host_call_us

    a, b = sweep.random_operands(shape.m, shape.n, shape.k, shape.dtype, seed=7)
    c = torch.empty(shape.m, shape.n, device="cuda", dtype=shape.dtype)
    p = gemm.problem((a, b))
    ref = gemm.reference(p, a, b)
    row = {"id": shape.id, "group": shape.group, "source": shape.source, "m": shape.m, "n": shape.n, "k": shape.k,
           "dtype": str(shape.dtype).removeprefix("torch."), **variant_times(p, a, b, c, ref, timer, log, shape.id)}
    row["choice"], row["model"] = seer_choice(a, b, model)
    if compare_model is not None:
        row["compared_choice"], row["compared_model"] = seer_choice(a, b, compare_model)
    seer.clear_cache()
    call = seer_call(a, b, model)
    row["seer_first_call_ms"] = first_call_ms(call)  # model read, features, tree, launch
    row["seer_error"] = cached_call_error(a, b, c, ref, model)
    if not row["seer_error"] <= sweep.TOLERANCE:
        log(f"  WRONG seer.dispatch ({row['choice']}) on {shape.id}: relative difference {row['seer_error']:.2e}")
    row["seer_ms"] = timer.median_ms(call)  # device time under do_bench's flush, as the autotuned call's
    row |= end_to_end_us(rotated_operands(a, b, seed=8), model, fastest_ms(row))
    if shape.m <= 16:  # decode: the host cost of a call is most of its cost
        row["call_us:seer"] = host_call_us(call)
        row["call_us:torch_matmul"] = host_call_us(lambda: torch.matmul(a, b))
    if autotune:
        tuned = autotuned_call(a, b, c)
        row["autotune_first_call_ms"] = first_call_ms(tuned)  # benchmarks every config first, each writing c
        error = sweep.checked_error(tuned, c, ref)  # the config it settled on, alone
        if error <= sweep.TOLERANCE:
            row["autotune_ms"] = timer.median_ms(tuned)
        else:
            log(f"  WRONG triton.autotune on {shape.id}: relative difference {error:.2e}; not timed")
    return row


def cached_call_error(a, b, c, ref, model) -> float:
    """seer's cached call (what is timed) into ``c`` filled with NaN: its error against ``ref``, inf
    where it wrote any entry non-finite or returned another tensor (a result it allocated might be a
    freed right one, handed out again)."""
    import seer

    c.fill_(float("nan"))
    y = seer.dispatch("gemm", (a, b), model=model, out=c)
    return sweep.relative_difference(c, ref) if y.data_ptr() == c.data_ptr() else math.inf


def fastest_ms(row: dict) -> float:
    """The least time among a row's variants that were right (1 ms where none was)."""
    return min((ms for key, ms in row.items() if key.startswith("time_ms:") and ms == ms), default=1.0)


def autotuned_shapes(count: int, wanted: int) -> set[int]:
    """Indices of ``wanted`` of ``count`` shapes, spread evenly (none for 0)."""
    if wanted <= 0 or count == 0:
        return set()
    return {int(i) for i in np.linspace(0, count - 1, min(wanted, count)).round()}


# ---------------------------------------------------------------- summary
def geomean(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(np.exp(np.mean(np.log(x)))) if len(x) else math.nan


def summarise(rows: list[dict]) -> dict:
    """Geometric means over the shapes whose every figure was checked right; those left out are
    named (a wrong variant, or seer's wrong result, fails the run: see :func:`main`)."""
    from seer.kernels.gemm import VARIANTS

    names = list(VARIANTS)
    left_out = [r["id"] for r in rows if not all(
        math.isfinite(r[key]) for key in (*(f"time_ms:{n}" for n in names), "loop_us:seer", "loop_us:torch_matmul"))
        or not r["seer_error"] <= sweep.TOLERANCE]
    rows = [r for r in rows if r["id"] not in left_out]
    if not rows:
        raise ValueError(f"no shape has every figure checked right ({len(left_out)} left out: {left_out[:5]})")
    triton_names = [n for n in names if n != "torch_matmul"]
    times = np.array([[r[f"time_ms:{n}"] for n in names] for r in rows])
    triton_times = np.array([[r[f"time_ms:{n}"] for n in triton_names] for r in rows])
    chosen = np.array([r[f"time_ms:{r['choice']}"] for r in rows])
    torch_ms = np.array([r["time_ms:torch_matmul"] for r in rows])
    loop_ratio = [r["loop_us:torch_matmul"] / r["loop_us:seer"] for r in rows]
    oracle, triton_oracle = times.min(axis=1), triton_times.min(axis=1)
    worst = int(np.argmax(chosen / oracle))
    summary = {
        "shapes": len(rows),
        "left_out": left_out,
        "fraction_of_oracle": geomean(oracle / chosen),
        "fraction_of_triton_oracle": geomean(triton_oracle / chosen),  # over 1: torch.matmul choices beat Triton
        "speedup_over_torch_matmul": geomean(torch_ms / chosen),
        "speedup_over_torch_matmul_dispatch_included": geomean(loop_ratio),
        "speedup_over_torch_matmul_triton_oracle": geomean(torch_ms / triton_oracle),
        "speedup_over_torch_matmul_oracle": geomean(torch_ms / oracle),
        "choices_of_torch_matmul": float(np.mean([r["choice"] == "torch_matmul" for r in rows])),
        "worst_shape": {"id": rows[worst]["id"], "choice": rows[worst]["choice"],
                        "slowdown_vs_oracle": float(chosen[worst] / oracle[worst]),
                        "slowdown_vs_torch_matmul": float(chosen[worst] / torch_ms[worst])},
        "seer_first_call_ms_median": float(np.median([r["seer_first_call_ms"] for r in rows])),
        "end_to_end_by_kernel_time": end_to_end_by_kernel_time(rows),
    }
    tuned = [r for r in rows if "autotune_ms" in r]
    if tuned:
        summary["autotune"] = {
            "shapes": len(tuned),
            "first_call_ms_median": float(np.median([r["autotune_first_call_ms"] for r in tuned])),
            "seer_first_call_ms_median": float(np.median([r["seer_first_call_ms"] for r in tuned])),
            "steady_state_seer_over_autotune": geomean([r["autotune_ms"] / r["seer_ms"] for r in tuned]),
        }
    if rows and "compared_choice" in rows[0]:
        summary["compared_model"] = compared(rows, oracle, torch_ms, chosen)
    decode = [r for r in rows if "call_us:seer" in r]
    if decode:
        summary["decode_host_call_us"] = {
            "seer": float(np.median([r["call_us:seer"] for r in decode])),
            "torch_matmul": float(np.median([r["call_us:torch_matmul"] for r in decode]))}
    return summary


KERNEL_US_BANDS = ((0, 20), (20, 50), (50, 200), (200, math.inf))  # torch.matmul's kernel time


def end_to_end_by_kernel_time(rows: list[dict]) -> list[dict]:
    """The loops' ratio per band of torch.matmul's kernel time: where a kernel is shorter than a
    call's host work, the host's extra microseconds a call (median, seer's loop less torch's) decide."""
    bands = []
    for low, high in KERNEL_US_BANDS:
        band = [r for r in rows if low <= 1e3 * r["time_ms:torch_matmul"] < high]
        if band:
            bands.append({"kernel_us": [low, None if high == math.inf else high], "shapes": len(band),
                          "speedup": geomean([r["loop_us:torch_matmul"] / r["loop_us:seer"] for r in band]),
                          "seer_extra_us_median": float(np.median([r["loop_us:seer"] - r["loop_us:torch_matmul"]
                                                                   for r in band]))})
    return bands


def compared(rows: list[dict], oracle, torch_ms, chosen) -> dict:
    """The compared model's choices scored on the same timings as the model's."""
    theirs = np.array([r[f"time_ms:{r['compared_choice']}"] for r in rows])
    return {"model": rows[0]["compared_model"],
            "fraction_of_oracle": geomean(oracle / theirs),
            "speedup_over_torch_matmul": geomean(torch_ms / theirs),
            "model_over_compared": geomean(theirs / chosen),  # over 1: the model's choices are faster
            "same_choice": float(np.mean([r["choice"] == r["compared_choice"] for r in rows]))}


def markdown(summary: dict, env: dict, rows: list[dict]) -> str:
    s = summary
    device, versions = env["device"], env["versions"]
    measures = [
        ("fraction of the oracle (shipped variants incl. torch.matmul)", f"{s['fraction_of_oracle']:.3f}"),
        ("best Triton variant per shape / seer's choice (over 1: the vendor candidate pays)",
         f"{s['fraction_of_triton_oracle']:.3f}"),
        ("speed-up over torch.matmul, seer's choice (kernel time)", f"{s['speedup_over_torch_matmul']:.3f}x"),
        ("same, end to end: loops of calls, dispatch's host work included, operands rotated past L2",
         f"{s['speedup_over_torch_matmul_dispatch_included']:.3f}x"),
        ("best Triton variant per shape (no vendor candidate, oracle)",
         f"{s['speedup_over_torch_matmul_triton_oracle']:.3f}x"),
        ("best variant per shape incl. torch.matmul (oracle)", f"{s['speedup_over_torch_matmul_oracle']:.3f}x"),
        ("share of shapes where seer picks torch.matmul", f"{s['choices_of_torch_matmul']:.0%}"),
        ("worst shape", f"{s['worst_shape']['id']} ({s['worst_shape']['choice']}): "
                        f"{s['worst_shape']['slowdown_vs_oracle']:.2f}x the oracle, "
                        f"{s['worst_shape']['slowdown_vs_torch_matmul']:.2f}x torch.matmul"),
        ("seer first call on an unseen shape, model file read, kernel and sync included (median)",
         f"{s['seer_first_call_ms_median']:.2f} ms"),
    ]
    if "autotune" in s:
        t = s["autotune"]
        measures += [
            (f"triton.autotune first call on an unseen shape (median of {t['shapes']})",
             f"{t['first_call_ms_median']:.1f} ms"),
            ("steady state: autotune time / seer time (geomean)", f"{t['steady_state_seer_over_autotune']:.3f}"),
        ]
    if "compared_model" in s:
        c = s["compared_model"]
        measures += [
            (f"compared model {c['model']}: fraction of the oracle / speed-up over torch.matmul (kernel time)",
             f"{c['fraction_of_oracle']:.3f} / {c['speedup_over_torch_matmul']:.3f}x"),
            ("the model's choices over the compared model's (geomean) / same choice",
             f"{c['model_over_compared']:.3f}x / {c['same_choice']:.0%}"),
        ]
    if "decode_host_call_us" in s:
        d = s["decode_host_call_us"]
        measures.append(("host time per call, M <= 16 (seer / torch.matmul)",
                         f"{d['seer']:.1f} / {d['torch_matmul']:.1f} us"))
    return "\n".join([
        f"# GEMM: seer on held-out shapes ({device['name']}, compute capability {device['capability']})", "",
        f"torch {versions['torch']}, triton {versions['triton']}, seer {versions['seer']}, CUDA {versions['cuda']}, "
        f"{env['date']}  ",
        f"command: `{env['command']}`  ",
        f"model: {rows[0]['model'] if rows else '?'}; {s['shapes']} shapes", "",
        "| measure | value |", "| --- | --- |",
        *(f"| {label} | {value} |" for label, value in measures),
        *([f"Left out (a figure not checked right): {', '.join(s['left_out'])}", ""] if s["left_out"] else []),
        "", "End to end by torch.matmul's kernel time:", "",
        "| kernel µs | shapes | torch.matmul loop / seer loop (geomean) | seer's loop longer a call (median µs) |",
        "|---|---|---|---|",
        *(f"| {b['kernel_us'][0]}-{b['kernel_us'][1] or ''} | {b['shapes']} | {b['speedup']:.3f}x | "
          f"{b['seer_extra_us_median']:.1f} |" for b in s["end_to_end_by_kernel_time"]),
        "", "Speed-ups are geometric means over shapes. Kernel times: the least of "
        f"{TIMING_ROUNDS} interleaved do_bench medians, the L2 flushed before every run (a variant "
        f"{sweep.ABANDON:g}x slower than the best keeps its screen). End to end: the median of five loops of "
        "back-to-back calls timed by CUDA events, seer's and torch.matmul's alternating, without flushes, over operand copies that make twice "
        "the L2.", "",
    ])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder of gemm-results.json / .md (required to measure)")
    parser.add_argument("--model", default=None, help="model file (default: what seer.dispatch resolves)")
    parser.add_argument("--compare-model", default=None,
                        help="another model whose choices are scored on the same timings (e.g. another GPU's)")
    parser.add_argument("--random", type=int, default=20, help="random held-out shapes")
    parser.add_argument("--autotune-shapes", type=int, default=12, help="shapes to run triton.autotune on")
    parser.add_argument("--budget-s", type=float, default=230)
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--render", type=Path, default=None,
                        help="only summarise the rows of this gemm-results.json again (no GPU), writing it and its .md")
    args = parser.parse_args(argv)
    if args.render:
        return render(args.render)
    if args.out is None:
        parser.error("--out is required to measure")
    if not torch.cuda.is_available():
        sys.exit("gemm.py benchmarks kernels on a CUDA GPU; none is visible")
    started = time.monotonic()
    from tqdm import tqdm

    from seer.kernels import gemm
    from seer.profiling import environment

    log = tqdm.write
    shapes = held_out_shapes(args.random, seed=0)[: args.limit]
    tuned_shapes = autotuned_shapes(len(shapes), args.autotune_shapes)
    tile_names = [n for n, v in gemm.CANDIDATES.items()
                  if v.params.get("kind") == "tiles" and not v.params["persistent"]]
    sweep.precompile(shapes, sorted(set(gemm.VARIANTS) | set(tile_names)), args.workers,
                     started + 0.4 * args.budget_s, log)
    env = {**environment(torch.device("cuda", torch.cuda.current_device())),
           "command": " ".join([sys.executable, *sys.argv])}
    timer = sweep.Timer()
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a TMA fallback or model warning per shape would drown the log
        for i, shape in enumerate(tqdm(shapes, unit="shape", mininterval=5)):
            if time.monotonic() > started + args.budget_s:
                log(f"budget reached after {len(rows)} of {len(shapes)} shapes")
                break
            rows.append(measure(shape, args.model, timer, autotune=i in tuned_shapes, log=log,
                                compare_model=args.compare_model))
            torch.cuda.empty_cache()
    if not rows:
        sys.exit(f"no shape measured within --budget-s {args.budget_s:g}")
    summary = summarise(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    results = {"env": env, "summary": summary, "rows": [json_row(r) for r in rows]}
    (args.out / "gemm-results.json").write_text(json.dumps(results, indent=2, allow_nan=False) + "\n")
    (args.out / "gemm-results.md").write_text(markdown(summary, env, rows))
    print(markdown(summary, env, rows))
    return 1 if summary["left_out"] else 0


def render(path: Path) -> int:
    """A results file's summary and Markdown made again from its rows (nulls read as NaN), beside it."""
    results = json.loads(path.read_text())
    rows = [{key: math.nan if value is None else value for key, value in row.items()} for row in results["rows"]]
    summary = summarise(rows)
    path.write_text(json.dumps({**results, "summary": summary}, indent=2, allow_nan=False) + "\n")
    path.with_suffix(".md").write_text(markdown(summary, results["env"], rows))
    return 1 if summary["left_out"] else 0


def json_row(row: dict) -> dict:
    """A row as JSON can hold it: a wrong variant's time (NaN) or a result's error where it wrote
    non-finite values (inf) written as null."""
    return {key: None if isinstance(value, float) and not math.isfinite(value) else value
            for key, value in row.items()}


if __name__ == "__main__":
    sys.exit(main())
