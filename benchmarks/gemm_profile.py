"""GEMM sweep: time every candidate config and torch.matmul on LLM and random shapes (one GPU).

    python benchmarks/gemm_profile.py --out benchmarks/results/gemm-h100 [--budget-s 230]

Writes, under ``--out``:
  ``gemm-candidates.csv`` every candidate of ``seer.kernels.gemm.CANDIDATES`` (the space the
                         shipped set is cut from; the greedy cover reads it),
  ``gemm.csv``           the same rows with the shipped variants only: ready for ``seer train``,
each with its ``.meta.json`` (op, device, versions, date, command, coverage of the shipped set).

Bounded: kernels are compiled first by a pool of processes (one per signature Triton would
specialise on, on the smallest shape that has it), then each shape is timed with
``triton.testing.do_bench`` (median, warm-up, L2 flushed before every run; see
:meth:`Timer.screened_ms` for the shortcuts on hopeless configs and long kernels). Random non-zero
data; every result is checked against torch.matmul before it is timed. Shapes are visited in a
seeded random order and the tables are rewritten after each one, so stopping at ``--budget-s``
leaves valid tables that span every shape family; a later run into the same folder times only the
shapes still missing.

    python benchmarks/gemm_profile.py --recut DIR

rewrites ``DIR/gemm.csv`` from ``DIR/gemm-candidates.csv`` for the current shipped set (no GPU).
"""
from __future__ import annotations

import argparse
import concurrent.futures as futures
import json
import math
import multiprocessing
import os
import sys
import time
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

ABANDON = 3.0  # a first run this many times slower than the best config so far is not refined
REP_MS = 3.0  # do_bench's timing window: ~30 runs of a tiny kernel, a few of a 0.5 ms one
LONG_MS = 0.5  # kernels longer than this are timed as the median of three flushed runs
TOLERANCE = 2e-2  # relative 2-norm difference from torch.matmul's result
LLM_MAX_FLOPS = 1.6e13  # leaves out LM heads at 16k tokens (tens of ms per run, cuBLAS-bound)


@dataclass(frozen=True)
class Shape:
    id: str
    group: str
    source: str  # "real" (a layer of a real model) or "synthetic" (random)
    m: int
    n: int
    k: int
    dtype: torch.dtype

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k


def llm_suite(dtype: torch.dtype) -> list[Shape]:
    from seer.kernels.gemm import llm_shapes

    return [Shape(f"{group}/m{m}", group, "real", m, n, k, dtype)
            for group, m, n, k in llm_shapes(max_flops=LLM_MAX_FLOPS)]


def random_shapes(count: int, seed: int, max_flops: float) -> list[Shape]:
    """Log-uniform sizes; most N and K multiples of 64 (as real layers are), some odd; fp16 or bf16."""
    rng = np.random.default_rng(seed)
    shapes: list[Shape] = []
    while len(shapes) < count:
        m = int(np.exp(rng.uniform(0, math.log(8192))))
        n, k = (int(np.exp(rng.uniform(math.log(64), math.log(16384)))) for _ in range(2))
        if rng.random() < 0.75:
            n, k = 64 * max(1, round(n / 64)), 64 * max(1, round(k / 64))
        dtype = (torch.float16, torch.bfloat16)[int(rng.integers(2))]
        if 2.0 * m * n * k <= max_flops:
            i = len(shapes)
            shapes.append(Shape(f"random/{seed}/{i}", f"random/{seed}/{i}", "synthetic", m, n, k, dtype))
    return shapes


def skinny_shapes(count: int, seed: int, max_flops: float, odd_k: bool = False) -> list[Shape]:
    """Short K (32-512, log-uniform; half a multiple of 64, half any; every one odd with ``odd_k``),
    M of 1-8192 and N of 256-16384 (log-uniform); fp16 or bf16: where a Triton tile can beat cuBLAS
    (``gemm_small_k.py``), which the LLM suite and the random shapes rarely reach. Drawn from a
    stream of their own, and named with their sizes: the first sweep with them
    (``results/gemm-h100-skinny/``) drew from the random shapes' stream, so its ``skinny/0/<i>``
    share M and dtype with ``random/0/<i>``, and a sweep resumed into that table must not take
    them for these."""
    rng = np.random.default_rng([seed, 2 if odd_k else 1])
    kind = "odd-k" if odd_k else "skinny"
    shapes: list[Shape] = []
    while len(shapes) < count:
        m = int(np.exp(rng.uniform(0, math.log(8192))))
        n = int(np.exp(rng.uniform(math.log(256), math.log(16384))))
        k = int(np.exp(rng.uniform(math.log(32), math.log(512))))
        if odd_k:
            k |= 1
        elif rng.random() < 0.5:
            k = 64 * max(1, round(k / 64))
        dtype = (torch.float16, torch.bfloat16)[int(rng.integers(2))]
        if 2.0 * m * n * k <= max_flops:
            name = f"{kind}/{seed}/{len(shapes)}/{m}x{n}x{k}"
            shapes.append(Shape(name, name, "synthetic", m, n, k, dtype))
    return shapes


# ---------------------------------------------------------------- compiling ahead, in parallel
def _int_class(x: int) -> int:
    """How Triton specialises an integer argument: equal to 1, divisible by 16, or neither."""
    return 1 if x == 1 else 16 if x % 16 == 0 else 0


def signature(shape: Shape, name: str) -> tuple | None:
    """What decides which compiled kernel ``name`` runs on ``shape`` (None: nothing to compile)."""
    from seer.kernels import gemm

    variant = gemm.CANDIDATES[name]
    if variant.params["kind"] == "vendor":
        return None
    key = (name, shape.dtype, _int_class(shape.m), _int_class(shape.n), _int_class(shape.k))
    if variant.params["kind"] == "splitk":
        config = gemm.GemmConfig(**variant.params)
        splits = config.splits(_problem_of(shape))[0]
        key += (splits == 1, _int_class(shape.m * shape.n), _int_class(splits))
    return key


def _problem_of(shape: Shape):
    from seer.kernels import gemm

    device = torch.device("cuda", torch.cuda.current_device())
    return gemm.GemmProblem(shape.m, shape.n, shape.k, shape.dtype, device, (shape.k, 1), (shape.n, 1),
                            gemm.sm_count(device))


def _compile_one(name: str, m: int, n: int, k: int, dtype_name: str) -> str | None:
    """Worker: run ``name`` once on an (m, n, k) product so Triton compiles it into its disk cache."""
    from seer.kernels import gemm

    dtype = getattr(torch, dtype_name)
    try:
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gemm.CANDIDATES[name].run(gemm.problem((a, b)), a, b)
        torch.cuda.synchronize()
    except Exception as exc:  # reported, and the config is retried (and timed as failed) later
        return f"{name} on {m}x{n}x{k} {dtype_name}: {type(exc).__name__}: {exc}"
    return None


def precompile(shapes: list[Shape], names: list[str], workers: int, deadline: float, log) -> float:
    """Compile every (config, signature) the sweep will meet; returns the seconds it took."""
    jobs: dict[tuple, Shape] = {}
    for shape in sorted(shapes, key=lambda s: s.flops):  # the smallest shape of each signature
        for name in names:
            key = signature(shape, name)
            if key is not None and key not in jobs:
                jobs[key] = shape
    log(f"compiling {len(jobs)} kernels on {workers} processes")
    started = time.monotonic()
    context = multiprocessing.get_context("spawn")
    with futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        pending = [pool.submit(_compile_one, key[0], s.m, s.n, s.k, str(s.dtype).removeprefix("torch."))
                   for key, s in jobs.items()]
        try:
            for done, future in enumerate(futures.as_completed(pending, timeout=max(1.0, deadline - time.monotonic()))):
                if future.result():
                    log(f"  compile failed: {future.result()}")
                if (done + 1) % 50 == 0:
                    log(f"  {done + 1}/{len(jobs)} compiled ({time.monotonic() - started:.0f} s)")
        except futures.TimeoutError:  # the rest compiles lazily while timing
            log("  compile deadline reached; remaining kernels compile on first use")
            for future in pending:
                future.cancel()
    return time.monotonic() - started


# ---------------------------------------------------------------- timing
class Timer:
    """CUDA-event timings with the L2 flushed first (a 256 MB write), as do_bench does."""

    def __init__(self):
        self.flush = torch.empty(64 * 2**20, dtype=torch.int32, device="cuda")

    def once_ms(self, fn) -> float:
        self.flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def screened_ms(self, fn, hopeless_ms: float) -> float:
        """Median time of ``fn``, measured only as carefully as it matters.

        Up to three single runs first (noise only adds time, so their fastest is the screen): a
        config slower than ``hopeless_ms`` keeps its fastest run. Kernels over ``LONG_MS`` take
        the median of three runs (do_bench would spend five runs estimating before timing);
        the rest go through ``do_bench``.
        """
        samples = [self.once_ms(fn)]
        while min(samples) > hopeless_ms and len(samples) < 3:
            samples.append(self.once_ms(fn))
        if min(samples) > hopeless_ms:
            return min(samples)
        if min(samples) > LONG_MS:
            samples += [self.once_ms(fn) for _ in range(3 - len(samples))]
            return float(np.median(samples))
        return self.median_ms(fn)

    def median_ms(self, fn) -> float:
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=1, rep=REP_MS, return_mode="median"))


def loops_us(calls_by_name: dict, calls: int, loops: int = 5) -> dict:
    """Each ``call(i)``'s share of a loop of ``calls`` back-to-back calls, in us: the median of
    ``loops`` loops, CUDA events around each, the callables' loops alternating (a GPU's clock
    drifts as it warms over a run). What a caller's loop pays, host work and device work
    overlapping as they do there. No flush inside a loop: the callables rotate their operands."""
    for call in calls_by_name.values():
        for i in range(3):
            call(i)
    shares = {name: [] for name in calls_by_name}
    for _ in range(loops):
        for name, call in calls_by_name.items():
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for i in range(calls):
                call(i)
            end.record()
            end.synchronize()
            shares[name].append(start.elapsed_time(end) * 1e3 / calls)
    return {name: float(np.median(values)) for name, values in shares.items()}


def checked_error(fn, c: torch.Tensor, ref: torch.Tensor) -> float:
    """``fn()``, which writes C into ``c``, run once on ``c`` filled with NaN first; the relative
    difference of what it wrote from ``ref`` (inf where it left any entry unwritten)."""
    c.fill_(float("nan"))
    fn()
    return relative_difference(c, ref)


def relative_difference(c: torch.Tensor, ref: torch.Tensor) -> float:
    if not torch.isfinite(c).all():
        return float("inf")
    return ((c.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def random_operands(m: int, n: int, k: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random non-zero A (m x k) and B (k x n) on the GPU, B scaled by 1/sqrt(k) so that C's entries
    stay near 1 whatever K is; the same for the same seed."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=dtype, generator=gen)
    b = (torch.randn(k, n, device="cuda", generator=gen) / k ** 0.5).to(dtype)
    return a, b


def time_shape(shape: Shape, names: list[str], timer: Timer, log) -> dict:
    """One table row: features and the time of every candidate on ``shape``."""
    from seer.features import gemm as features
    from seer.kernels import gemm

    a, b = random_operands(shape.m, shape.n, shape.k, shape.dtype, zlib.crc32(shape.id.encode()))
    p = gemm.problem((a, b))
    c = torch.empty(shape.m, shape.n, device="cuda", dtype=shape.dtype)
    ref = torch.matmul(a, b).float()
    row = {"id": shape.id, "group": shape.group, "source": shape.source, **features.known(p)}
    best = math.inf
    for name in names:  # torch_matmul first: a strong best-so-far to abandon slow configs against
        run = gemm.CANDIDATES[name].run
        fn = lambda: run(p, a, b, out=c)  # noqa: E731
        try:
            error = checked_error(fn, c, ref)  # loads the compiled kernel; checked before it is timed
            if not error <= TOLERANCE:
                log(f"  WRONG {name} on {shape.id}: relative difference {error:.2e}")
                row[f"time_ms:{name}"] = math.nan
                continue
            ms = timer.screened_ms(fn, ABANDON * best)
        except Exception as exc:  # recorded as NaN, never fatal to the sweep
            log(f"  FAILED {name} on {shape.id}: {type(exc).__name__}: {exc}")
            ms = math.nan
        row[f"time_ms:{name}"] = ms
        best = min(best, ms) if ms == ms else best
    row["baseline_ms:cublas"] = row["time_ms:torch_matmul"]
    return row


# ---------------------------------------------------------------- tables and coverage
def coverage(frame: pd.DataFrame, names: list[str], shipped: list[str]) -> dict:
    """Fraction of the oracle (over every candidate) the shipped set reaches, and a greedy set of its size."""
    from seer.kernels.gemm import greedy_cover, oracle_fraction

    times = frame[[f"time_ms:{n}" for n in names]].to_numpy(dtype=float)
    times = times[np.isfinite(np.nan_to_num(times, nan=np.inf)).any(axis=1)]
    if len(times) == 0:
        return {}
    index = {n: i for i, n in enumerate(names)}
    picks = greedy_cover(times, len(shipped))
    return {
        "shapes": len(times),
        "shipped": oracle_fraction(times, [index[n] for n in shipped]),
        "greedy_set": [names[j] for j in picks],
        "greedy_curve": [round(oracle_fraction(times, picks[:i]), 4) for i in range(1, len(picks) + 1)],
        "torch_matmul_alone": oracle_fraction(times, [index["torch_matmul"]]),
    }


def write_tables(out: Path, frame: pd.DataFrame, names: list[str], shipped: list[str], meta: dict) -> dict:
    """Both tables (every candidate; shipped variants only) with their metadata; returns the coverage."""
    cover = coverage(frame, names, shipped)
    base = ["id", "group", "source"] + [c for c in frame.columns if ":" not in c and c not in ("id", "group", "source")]
    for stem, keep in (("gemm-candidates", names), ("gemm", shipped)):
        columns = base + [f"time_ms:{n}" for n in keep] + ["baseline_ms:cublas"]
        frame[columns].to_csv(out / f"{stem}.csv", index=False)
        note = "every candidate config" if keep is names else "the shipped variants (seer.kernels.gemm.VARIANTS)"
        (out / f"{stem}.meta.json").write_text(json.dumps(
            {**meta, "notes": f"time_ms columns: {note}", "coverage": cover}, indent=2) + "\n")
    return cover


def recut(folder: Path) -> dict:
    """Rewrite ``gemm.csv`` from ``gemm-candidates.csv`` for the shipped set of this install."""
    from seer.kernels.gemm import VARIANTS

    frame = pd.read_csv(folder / "gemm-candidates.csv")
    meta = json.loads((folder / "gemm-candidates.meta.json").read_text())
    names = [c.removeprefix("time_ms:") for c in frame.columns if c.startswith("time_ms:")]
    missing = sorted(set(VARIANTS) - set(names))
    if missing:
        sys.exit(f"{folder}/gemm-candidates.csv has no times for shipped variants {missing}: sweep again")
    meta.pop("coverage", None)
    return write_tables(folder, frame, names, list(VARIANTS), meta)


def earlier_rows(folder: Path, names: list[str], device_name: str) -> tuple[list[dict], dict]:
    """Rows and metadata of an earlier sweep into ``folder`` with the same candidates, measured on this
    GPU (resuming it); a sweep of other candidates or on another GPU is refused (its rows and the new
    ones would not be comparable, and the metadata would name only this run's GPU)."""
    table, meta_file = folder / "gemm-candidates.csv", folder / "gemm-candidates.meta.json"
    if not table.exists():
        return [], {}
    frame = pd.read_csv(table)
    timed = [c.removeprefix("time_ms:") for c in frame.columns if c.startswith("time_ms:")]
    if timed != names:
        sys.exit(f"{table} was swept over other candidates than seer.kernels.gemm.CANDIDATES: "
                 f"move it away to start a fresh sweep")
    meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
    measured_on = (meta.get("device") or {}).get("name")
    if measured_on != device_name:
        sys.exit(f"{table} was swept on {measured_on or 'an unrecorded GPU'!r}, this run is on {device_name!r}: "
                 "sweep into another folder")
    return frame.to_dict("records"), meta


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for the tables")
    parser.add_argument("--recut", type=Path, help="only rewrite this folder's gemm.csv for the current shipped set")
    parser.add_argument("--budget-s", type=float, default=230, help="stop after this many seconds (tables stay valid)")
    parser.add_argument("--random", type=int, default=40, help="random shapes besides the LLM suite")
    parser.add_argument("--skinny", type=int, default=0, help="short-K shapes besides those")
    parser.add_argument("--odd-k", type=int, default=0, help="short, odd-K shapes besides those")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)))
    parser.add_argument("--limit", type=int, default=None, help="time at most this many shapes (smoke runs)")
    args = parser.parse_args(argv)
    if args.recut:
        print(json.dumps(recut(args.recut), indent=2))
        return 0
    if args.out is None:
        parser.error("--out is required (or --recut)")
    if not torch.cuda.is_available():
        sys.exit("gemm_profile.py times kernels on a CUDA GPU; none is visible")
    started = time.monotonic()
    deadline = started + args.budget_s
    from tqdm import tqdm

    from seer.errors import SeerWarning
    from seer.kernels import gemm
    from seer.profiling import environment, runs_with

    log = tqdm.write
    device = torch.device("cuda", torch.cuda.current_device())
    shapes = (llm_suite(torch.bfloat16) + random_shapes(args.random, args.seed, LLM_MAX_FLOPS)
              + skinny_shapes(args.skinny, args.seed, LLM_MAX_FLOPS)
              + skinny_shapes(args.odd_k, args.seed, LLM_MAX_FLOPS, odd_k=True))
    shapes = [shapes[i] for i in np.random.default_rng(args.seed).permutation(len(shapes))][: args.limit]
    names = list(gemm.CANDIDATES)  # torch_matmul comes first
    shipped = list(gemm.VARIANTS)
    env = environment(device)
    rows, earlier = earlier_rows(args.out, names, env["device"]["name"])
    shapes = [s for s in shapes if s.id not in {row["id"] for row in rows}]
    log(f"{len(rows)} shapes already timed in {args.out}; {len(shapes)} to go")
    compile_s = precompile(shapes, names, args.workers, started + 0.45 * args.budget_s, log)
    command = " ".join([sys.executable, *sys.argv])
    earlier_commands = earlier.get("commands", [earlier["command"]] if "command" in earlier else [])
    meta = {"op": "gemm", **env, "command": command, "commands": [*earlier_commands, command],
            "runs": runs_with(earlier, command, env), "compile_s": round(compile_s, 1),
            "shapes_planned": len(rows) + len(shapes)}
    args.out.mkdir(parents=True, exist_ok=True)
    timer = Timer()
    cover: dict = {}
    warnings.simplefilter("ignore", SeerWarning)  # TMA configs on unaligned shapes: their fallback is what is timed
    for shape in tqdm(shapes, unit="shape", mininterval=5):
        if time.monotonic() > deadline:
            log(f"budget of {args.budget_s:.0f} s reached: {len(rows)} of {meta['shapes_planned']} shapes timed")
            break
        rows.append(time_shape(shape, names, timer, log))
        torch.cuda.empty_cache()
        meta.update(shapes_timed=len(rows), elapsed_s=round(time.monotonic() - started, 1))
        cover = write_tables(args.out, pd.DataFrame(rows), names, shipped, meta)
    log(f"{len(rows)} shapes timed, {time.monotonic() - started:.0f} s this run (compiling {compile_s:.0f} s); tables in {args.out}")
    log(json.dumps(cover, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
