"""The profiling harness: time every variant of an op on many inputs and write a profile table.

Each input is a :class:`Case`; the harness validates it, measures its features and the cost of
gathering them, checks every variant and baseline against the float64 reference, times them on
the GPU (``triton.testing.do_bench``: median after warm-up, L2 flushed before every run; three
rounds interleaved across the candidates, the least median kept), and appends one row to the
table at once, so an interrupted
campaign resumes where it stopped. Under ``torchrun`` every rank takes a shard of the cases and
rank 0 merges the shard tables.
"""
from __future__ import annotations

import datetime as dt
import functools
import glob
import inspect
import json
import os
import platform
import re
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pandas as pd
import torch

from seer.errors import ProfileTableError, SeerError, warn
from seer.features import spmv as spmv_features
from seer.files import replace_atomically
from seer.registry import get_op
from seer.table import (CAMPAIGNS, PREPARE, TIME, check_table_path, device_of, meta_path, read_frame, read_header,
                        read_meta, read_rows)

# A variant whose result differs from the float64 reference by more than this (relative
# 2-norm) is recorded as failed (NaN time) rather than timed.
TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 5e-2}


@dataclass
class Case:
    """One input to profile: ``build(loaded)`` returns ``(source, operands)`` as the op's ``split``
    would, from what ``load()`` returned.

    ``load`` does the host-side work (reading or generating the input) and touches no device, so
    the harness runs it for the next inputs in a background thread while the GPU times this one;
    ``build`` moves the result to the device."""

    id: str
    group: str
    source: str
    load: Callable[[], object]
    build: Callable[[object], tuple]
    baselines: dict[str, Callable] = field(default_factory=dict)  # name -> fn(problem, *operands)
    extra: dict = field(default_factory=dict)  # columns copied into the row


def environment(device: torch.device) -> dict:
    """Device, versions and date: the metadata stored beside every table and result."""
    import triton

    import seer

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        about = {"name": props.name, "capability": list(torch.cuda.get_device_capability(device)),
                 "sm_count": props.multi_processor_count, "memory_gib": round(props.total_memory / 2**30, 1)}
    else:
        about = {"name": device.type, "capability": None}
    return {
        "device": about,
        "versions": {"torch": torch.__version__, "triton": triton.__version__, "seer": seer.__version__,
                     "cuda": torch.version.cuda, "python": platform.python_version()},
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
    }


def current_device() -> torch.device:
    """The device a profile runs on: the current GPU, or the CPU (the interpreter) where there is none."""
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def provenance(env: dict, command: str) -> str:
    """``date; torch ..., triton ...; `command` ``: the line under every result's Markdown title
    (``env`` as :func:`environment` returns it)."""
    return f"{env['date']}; torch {env['versions']['torch']}, triton {env['versions']['triton']}; `{command}`"


def device_tag(name: str) -> str:
    """Short name of a GPU for file names: "NVIDIA H100 80GB HBM3" -> "h100". The PCIe and NVL forms of
    a GPU keep their form ("NVIDIA H100 PCIe" -> "h100_pcie"), whose memory and clocks differ, so their
    results are not written over the SXM one's; a name of another kind, whole ("nvidia_gh200_480gb")."""
    model = re.search(r"\b([HABL]\d+[A-Za-z]?)\b", name)
    if model is None:
        return "_".join(name.split()).lower()
    form = [f"_{word.lower()}" for word in ("PCIe", "NVL") if re.search(rf"\b{word}\b", name, re.IGNORECASE)]
    return model[1].lower() + "".join(form)


def write_result(folder: Path, stem: str, result: dict, markdown: str) -> None:
    """A benchmark's result as ``<stem>.json`` and ``<stem>.md`` in ``folder``, and the Markdown printed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (folder / f"{stem}.md").write_text(markdown)
    print(markdown)


# The fewest timed runs a median is taken over. do_bench times as many runs as fit in ``rep_ms``
# by its estimate of one run (an L2 flush included): kernels of a third of a millisecond got fewer.
MIN_RUNS = 20


def time_ms(fn: Callable[[], object], *, warmup_ms: float = 5, rep_ms: float = 25, min_runs: int = MIN_RUNS) -> float:
    """Median device time of ``fn`` in ms over at least ``min_runs`` runs (CUDA events; L2 flushed
    before each run): timed again over a longer span while ``rep_ms`` held fewer runs."""
    import triton.testing

    for _ in range(4):  # the span scaled by the shortfall: once more at most for a kernel that runs steadily
        runs = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
        if len(runs) >= min_runs:
            return float(np.median(runs))
        rep_ms *= 1.5 * min_runs / len(runs)
    raise RuntimeError(f"do_bench timed {len(runs)} runs over {rep_ms:.0f} ms, under the {min_runs} asked for")


def host_call_us(fn: Callable[[], object], calls: int = 200, warmup: int = 1) -> float:
    """Wall time of one call in a back-to-back loop (what a caller's loop sees), in us; the device
    drained at both ends, so for work shorter on the device than on the host, host time."""
    for _ in range(warmup):
        fn()
    _sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    _sync()
    return (time.perf_counter() - start) / calls * 1e6


def synchronised_us(fn: Callable[[], object]) -> tuple[object, float]:
    """``fn()`` and its host wall time in us, from a drained device to the end of the device work
    it queued: one call timed alone (a first call, one layer of it). Whether to synchronise is
    settled before the clock starts, so the timed span holds nothing but the call and the drain."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    start = time.perf_counter()
    result = fn()
    sync()
    return result, (time.perf_counter() - start) * 1e6


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def relative_error(result: torch.Tensor, reference: torch.Tensor) -> float:
    result = result.detach().double().cpu()
    if not torch.isfinite(result).all():
        return float("inf")
    scale = reference.norm().item()
    return (result - reference).norm().item() / (scale if scale else 1.0)


def profile_case(op_name: str, case: Case, *, call_overhead: bool, log=print, loaded=None,
                 settle: Callable[[], None] = lambda: None) -> dict:
    """One table row for ``case``; ``loaded`` is ``case.load()``'s result if already at hand.
    ``settle`` waits until nothing else runs on the host: host wall times are measured after it."""
    op = get_op(op_name)
    source, operands = case.build(case.load() if loaded is None else loaded)
    problem = op.kernels.problem(source)
    op.kernels.check_operands(problem, operands)
    row = {"id": case.id, "group": case.group, "source": case.source, **case.extra}
    row.update(op.features.known(problem))
    if op.features.GATHERED:
        row.update(op.features.gathered(problem))
        row["gather_ms"] = float("nan")  # its column's place; measured below, once the host is quiet
    # Partials, not lambdas: the check passes them an ``out=`` (see _correct).
    candidates = {f"time_ms:{name}": functools.partial(variant.run, problem, *operands)
                  for name, variant in op.variants.items()}
    candidates.update({f"baseline_ms:{name}": lambda f=fn: f(problem, *operands) for name, fn in case.baselines.items()})
    checked, times = timed_if_correct(op, problem, operands, candidates, case.id, log)
    row.update(times)
    settle()  # the host times below: after the device timings, so the next inputs have mostly loaded
    if op.features.GATHERED:
        row["gather_ms"] = gather_ms(op, problem)
    if call_overhead:
        for column, fn in checked.items():
            row[f"call_us:{column.split(':', 1)[1]}"] = host_call_us(fn)
    row.update(preparation_columns(op, source, [c.split(":", 1)[1] for c in checked if c.startswith("time_ms:")]))
    return row


def timed_if_correct(op, problem, operands, candidates: dict[str, Callable], case_id: str, log=print
                     ) -> tuple[dict[str, Callable], dict[str, float]]:
    """``(checked, times)``: the candidates (``column: fn``; the column's part after ``:`` names it
    in the log) whose result matches ``op``'s float64 reference within the dtype's tolerance, and
    each candidate's time, the least of interleaved rounds; NaN for one that failed or was wrong."""
    reference = op.kernels.reference(problem, *operands)
    tolerance = TOLERANCE.get(getattr(problem, "dtype", torch.float32), 1e-2)
    checked = {column: fn for column, fn in candidates.items()
               if _correct(column.split(":", 1)[-1], fn, reference, tolerance, case_id, log,
                           skips_input=column.startswith("time_ms:"))}
    return checked, {column: float("nan") for column in candidates} | _least_of_rounds(checked)


def gather_ms(op, problem) -> float:
    """What gathering ``problem``'s features costs on an input that was not validated: median host
    wall time of ``op.features.gathered`` from a drained device, after one run as warm-up."""
    op.features.gathered(problem)
    return _median_wall_ms(lambda: op.features.gathered(problem))


def preparation_columns(op, source, names) -> dict[str, float]:
    """``prepare_ms:<name>`` of each named variant of ``op`` that has a ``bind`` (see
    :func:`_preparation_ms`), on fresh problems built from ``source``."""
    return {PREPARE + name: _preparation_ms(op.variants[name], lambda: op.kernels.problem(source))
            for name in names if op.variants[name].bind is not None}


PREPARE_TRIES = 5
# About 2-3 ms on an H100 or H200: longer than any variant's host-side planning before it waits
# on the device, so that planning overlaps the sleep and only what reaches the device is timed.
_BUSY_CYCLES = 5_000_000


def _preparation_ms(variant, fresh_problem: Callable[[], object]) -> float:
    """Median ms that ``variant.bind`` adds on a problem that has not seen it (its first call's
    one-time work: a plan, preprocessing, descriptors).

    On a GPU, what it adds to the device's timeline: CUDA events around the bind, queued behind a
    sleep kernel, so the host's own planning (Python, descriptors) overlaps the sleep and is not
    counted, as a launch's host time is not counted in the tables' times; its kernels are, and so
    is every synchronisation with the host (the device idles while the host reads back and plans
    on). On the CPU (the interpreter's tests), the host wall time. The problem is rebuilt outside
    the clock for each try."""
    samples = []
    for _ in range(PREPARE_TRIES):
        problem = fresh_problem()
        if not torch.cuda.is_available():
            samples.append(synchronised_us(lambda: variant.bind(problem))[1] / 1e3)
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        torch.cuda._sleep(_BUSY_CYCLES)
        start.record()
        variant.bind(problem)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return float(np.median(samples))


# A host stalled for a while (loader threads holding the GIL) launches after its start event and
# inflates one median: 62 entries of the H100 table of 2026-11-23 read >3x the H200's (NOTES SpMV
# 15). Each candidate is timed in several rounds, interleaved with the others, and keeps its least
# median; the rounds split the repetitions one median used to take (each adds its own warm-up).
TIMING_ROUNDS = 3


def _least_of_rounds(fns: dict, rounds: int = TIMING_ROUNDS, rep_ms: float = 25) -> dict:
    times = {column: [] for column in fns}
    for _ in range(rounds):
        for column, fn in fns.items():
            times[column].append(time_ms(fn, rep_ms=rep_ms / rounds))
    return {column: min(values) for column, values in times.items()}


def _correct(name, fn, reference, tolerance, case_id, log, skips_input: bool) -> bool:
    """Whether ``fn`` matches the float64 reference; a failure is logged, not fatal to the campaign.
    Where ``fn`` takes ``out=``, it is run a second time into an output filled with NaN, which it must
    write and return: a result it allocates may be the memory of the previous candidate's right one,
    freed and handed out again by the caching allocator, which a kernel writing nothing would pass.
    Out of device memory in a variant (``skips_input``) is raised: :func:`profile` skips the input and
    records it for ``--retry-skipped``, where a row without the variant's time would be dropped when
    the table is read and never retried. A baseline's leaves its cell empty (not measured)."""
    try:
        result = fn()
        error = relative_error(result, reference)
        if error <= tolerance and _takes_out(fn):
            poisoned = torch.full_like(result, float("nan"))
            written = fn(out=poisoned)
            if written is not poisoned and written.data_ptr() != poisoned.data_ptr():
                log(f"  WRONG {name} on {case_id}: it returned another tensor than the out= it was given")
                return False
            error = relative_error(written, reference)
    except Exception as exc:
        if skips_input and _out_of_memory(exc):
            raise
        log(f"  FAILED {name} on {case_id}: {type(exc).__name__}: {exc}")
        return False
    if not error <= tolerance:
        log(f"  WRONG {name} on {case_id}: relative error {error:.2e} > {tolerance:.0e}")
        return False
    return True


def _takes_out(fn: Callable) -> bool:
    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def alternated_host_us(fns: dict, calls: int, rounds: int) -> dict[str, list[float]]:
    """:func:`host_call_us` of each function (20 calls of warm-up), in ``rounds`` rounds that
    alternate them: a host stalled for a moment only ever adds time, to one loop, so callers keep
    each one's least."""
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(host_call_us(fn, calls, warmup=20))
    return samples


def _median_wall_ms(fn, repeats: int = 15) -> float:
    """Median host wall time of ``fn`` in ms, the device drained before each run (no warm-up)."""
    samples = []
    for _ in range(repeats):
        _sync()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return float(np.median(samples) * 1e3)


# ``seer profile spmv`` records each variant's host call time on inputs below this size (nonzeros),
# where launch overhead decides the winner.
SPMV_CALL_OVERHEAD_BELOW = spmv_features.HOST_BOUND_BELOW


def profile(op_name: str, cases: Iterable[Case], out: Path, *, command: str = "",
            call_overhead_below: int = 0, deadline_s: float | None = None, progress: bool = True,
            dtype: str = "float32", inputs: dict | None = None, retry_skipped: bool = False) -> Path:
    """Profile ``cases`` into the CSV table ``out`` (resuming it), writing its ``.meta.json``.

    ``call_overhead_below``: record ``call_us`` columns for cases whose ``extra['size']`` is
    below this. ``deadline_s``: no case starts after that many seconds (the table stays valid); the case
    being measured then, and the loads in flight, finish first, so a run may end later by about
    the largest case's load and measurement.
    ``dtype``: the values' dtype, recorded; a table of another is not resumed. ``inputs``: the
    options that chose ``cases`` (``{"synthetic": "large", "seed": 0}``), recorded; a table
    recorded with others is not resumed (see :func:`_inputs_of_table`). An input skipped (not
    supported, or out of memory) is recorded with its reason under ``skipped`` and not tried
    again on resume unless ``retry_skipped``.
    """
    out = Path(out)
    check_table_path(out)  # a folder, or a name read_table refuses: before any rank writes
    rank, world = _rank_and_world()
    device = current_device()
    here = environment(device)  # the GPU an earlier run's metadata must name
    earlier = _resumed_meta(out, here, op_name, dtype)
    earlier_skips = earlier.get("skipped", {}) if earlier else _skips_of_no_table(out, here, op_name, dtype)
    chosen_by = _inputs_of_table(out, earlier.get("inputs"), inputs)

    def write_meta(earlier: dict, skipped: dict) -> None:
        # What else the table's metadata says (notes, how its groups were defined) stays with it.
        env = environment(device)
        meta = {**earlier, "op": op_name, **env, "dtype": dtype, "command": command,
                "commands": [*earlier.get("commands", []), command], "runs": runs_with(earlier, command, env),
                "world_size": world, "skipped": skipped, **({"inputs": chosen_by} if chosen_by is not None else {})}
        _write_meta_file(out, meta)

    if rank == 0 and not earlier:  # a new table: said before its first row, so that a run killed
        out.parent.mkdir(parents=True, exist_ok=True)  # mid-way leaves rows whose GPU a resumed run
        write_meta({}, earlier_skips)                  # can check (and the skips an earlier run found)
    if world > 1:  # no rank writes a row before every rank has checked what an earlier run left
        _wait_for_every_rank(rank, world)
    shard = out if world == 1 else out.with_name(f"{out.stem}.rank{rank}{out.suffix}")
    _drop_cut_row(shard)
    # Resuming: inputs already in the merged table or in any shard an interrupted run left, at
    # whatever world size it ran (rank 0 merges them all at the end).
    ids = {table: _ids(table) for table in {out, shard, *_shards(out)}}
    # Rows in an interrupted run's shards are that run's (recorded by it), not this one's once merged.
    done = set().union(*ids.values())
    rows_before = len(done)
    mine = [c for i, c in enumerate(cases) if i % world == rank and c.id not in done]
    log = _logger(progress)
    # An input skipped by an earlier run is not tried again: out of memory, it would cost every resume
    # its load, its build and its reference before failing again.
    recorded = {} if retry_skipped else earlier_skips
    for case in mine:
        if case.id in recorded:
            log(f"  SKIPPED {case.id}, as recorded in {meta_path(out).name} (seer profile --retry-skipped tries "
                f"it again): {recorded[case.id]}")
    todo = [c for c in mine if c.id not in recorded]
    skipped = {}

    def record_run() -> None:
        """The run in the metadata (rank 0, once the shards are merged), where it added rows; else only
        the skips it found (its date and commands would say it measured what it did not)."""
        if _shards(out):
            _merge_shards(out)
        measured = set(_ids(out))
        # The skips on record less the inputs a row now measures (retried, or merged from a shard).
        kept = {i: why for i, why in {**earlier_skips, **skipped}.items() if i not in measured}
        if len(measured) > rows_before:
            write_meta(earlier, kept)
            return
        on_file = read_meta(meta_path(out))  # a new table's, written at the start, holds no skips yet
        if kept != on_file.get("skipped", {}):
            _write_meta_file(out, {**on_file, "skipped": kept})

    try:
        _profile_cases(op_name, todo, shard, skipped, call_overhead_below, deadline_s, log, progress and rank == 0)
    except BaseException:
        if world == 1:  # interrupted: its rows recorded as its own (every rank's skips would need its peers)
            record_run()
        elif rank == 0 and earlier and len(_ids(shard)) > len(ids[shard]):  # under torchrun, peers still writing:
            write_meta(earlier, {**earlier_skips, **skipped})  # the run recorded, its shards merged by the next
        raise
    if world > 1:  # every rank's skips, once it has finished its shard (rank 0 merges them all)
        skipped.update(_gathered(skipped, world))
    if rank == 0:
        record_run()
    if world > 1:  # no rank returns before rank 0 has merged the shards into out (each caller reads it)
        torch.distributed.barrier()
    return out


def _profile_cases(op_name: str, todo: list[Case], shard: Path, skipped: dict, call_overhead_below: int,
                   deadline_s: float | None, log, progress: bool) -> None:
    """Profile ``todo`` into ``shard``, a row each as it is measured; an input that cannot be (unreadable,
    unsupported, too large) is logged and added to ``skipped`` with its reason."""
    started = time.monotonic()
    with closing(_Prefetched(todo)) as loads:  # closed on any exit: no case is loaded in vain
        for done_count, case in enumerate(_progress(todo, progress)):
            if deadline_s is not None and time.monotonic() - started > deadline_s:
                log(f"deadline reached: {len(todo) - done_count} inputs left for the next run")
                break
            size = case.extra.get("size", 0)
            try:
                row = profile_case(op_name, case, call_overhead=size < call_overhead_below, log=log,
                                   loaded=next(loads).result(), settle=loads.settle)
            except (SeerError, RuntimeError) as error:
                if not (isinstance(error, SeerError) or _out_of_memory(error)):
                    raise
                # An unreadable, unsupported or too large input is skipped, not fatal: fatal, it would
                # stop every resumed run there too.
                log(f"  SKIPPED {case.id}: {error}")
                skipped[case.id] = str(error)
                if isinstance(error, RuntimeError):
                    torch.cuda.empty_cache()
                continue
            _append_row(shard, row)


# cuSPARSE out of device memory for a matrix's plan or buffers: torch raises its status as a RuntimeError,
# not torch.OutOfMemoryError, worded by cusparseGetErrorString ("CUDA error: out of memory when calling
# `cusparseSpMV_bufferSize(...)`" for CUSPARSE_STATUS_ALLOC_FAILED, "insufficient resources" for
# CUSPARSE_STATUS_INSUFFICIENT_RESOURCES); the statuses' names where a message gives them. No other.
_CUSPARSE_OUT_OF_MEMORY = re.compile(r"CUSPARSE_STATUS_(ALLOC_FAILED|INSUFFICIENT_RESOURCES)\b"
                                     r"|CUDA error: (out of memory|insufficient resources) when calling `cusparse")


def _out_of_memory(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and _CUSPARSE_OUT_OF_MEMORY.search(str(error)) is not None)


def _write_meta_file(out: Path, meta: dict) -> None:
    replace_atomically(meta_path(out), (json.dumps(meta, indent=2) + "\n").encode())  # others may read it


def _inputs_of_table(out: Path, recorded: dict | None, inputs: dict | None) -> dict | None:
    """What chose the table's inputs once this run has profiled its ``inputs`` into it (an option's
    name: its value), from what an earlier run ``recorded``. A value "none" chooses no input of its
    kind (``--synthetic none``: real matrices only), so it goes with any: a table of real matrices may
    gain the generated suite. Any other difference (another suite, another seed: other matrices, other
    values) would mix two suites in one table: ProfileTableError. Nothing recorded (a table from before
    the field): nothing to check."""
    if recorded is None or inputs is None:
        return inputs if recorded is None else recorded
    differ = [name for name, value in inputs.items()
              if name in recorded and "none" not in (value, recorded[name]) and value != recorded[name]]
    if differ:
        then = " ".join(f"--{name} {recorded[name]}" for name in differ)
        now = " ".join(f"--{name} {inputs[name]}" for name in differ)
        raise ProfileTableError(f"{out} was profiled with {then}, this run asks for {now}: its rows and the new ones "
                                f"would be of two suites; resume it with {then}, or profile into another table")
    return {**inputs, **{name: value for name, value in recorded.items() if inputs.get(name, "none") == "none"}}


# Before the first barrier every rank only checks what an earlier run left (rank 0 writes the
# metadata): seconds. A rank not there after this has hung, and its peers would wait for it for the
# process group's whole timeout. (A rank that failed has exited, and gloo ends the wait at once.)
CHECK_TIMEOUT = dt.timedelta(minutes=5)
# The ranks' last wait, for the slowest shard: a rank's shard may take hours more than another's
# (no --deadline, its inputs larger), which gloo's default 30 minutes would cut, losing the merge.
SHARD_TIMEOUT = dt.timedelta(hours=24)


def _wait_for_every_rank(rank: int, world: int) -> None:
    try:
        torch.distributed.monitored_barrier(timeout=CHECK_TIMEOUT, wait_all_ranks=True)
    except RuntimeError as error:  # its first line names the ranks that failed; the rest is gloo's trace
        raise SeerError(f"rank {rank} of {world}: not every rank checked the table within "
                        f"{CHECK_TIMEOUT.total_seconds():g} s ({str(error).splitlines()[0]}): it failed or hangs; "
                        "see its output, and resume once it is fixed") from None


def _gathered(skipped: dict, world: int) -> dict:
    """Every rank's ``skipped`` in one (a collective: it waits until each rank has finished)."""
    each = [None] * world
    torch.distributed.all_gather_object(each, skipped)
    return {i: why for part in each for i, why in part.items()}


def _drop_cut_row(table: Path) -> None:
    """A run killed while appending a row leaves it without its newline: read as done, it would
    keep its input from being profiled again, and the next row would be appended onto it."""
    if not table.exists():
        return
    text = table.read_bytes()  # empty too: a run killed before its header's first byte
    if text.endswith(b"\n"):
        return
    kept = _whole_lines(text)
    if not kept:  # cut inside its header: no row, nothing to keep
        warn(f"{table} holds no whole line (a run stopped while writing its header); removed, the table starts anew")
        table.unlink()
        return
    warn(f"{table}: its last line has no end (a run stopped while writing it); dropped, its input is profiled "
         f"again: {text[len(kept):][:80]!r}")
    replace_atomically(table, kept)


def _ids(table: Path) -> list[str]:
    """The ids of the table's whole rows, in order ([] while it does not exist): a last line without
    its end (a rank writing it now, or one killed while it did) is no row yet."""
    if not table.exists():
        return []
    whole = _whole_lines(table.read_bytes())
    if not whole.strip():
        return []
    try:
        return list(read_frame(table, data=whole, usecols=["id"], dtype=str, keep_default_na=False)["id"])
    except ProfileTableError:  # a line of another width than the header's, named: fixed, the table resumes
        raise
    except ValueError as error:  # pandas's ParserError and a missing column; bytes that are no text
        raise ProfileTableError(f"{table} is not a profile table to resume ({error}): profile into another "
                                "table") from None


def _whole_lines(text: bytes) -> bytes:
    """``text`` up to and with its last newline: a table's rows less one still being written."""
    return text[:text.rfind(b"\n") + 1]


def _shards(out: Path) -> list[Path]:
    """The rank tables beside ``out`` (``<stem>.rank<r>.csv``), of this run or an interrupted one; not a
    file whose name only starts so (``<stem>.rank0.backup.csv``)."""
    name = re.compile(rf"{re.escape(out.stem)}\.rank\d+{re.escape(out.suffix)}")
    return sorted(p for p in out.parent.glob(f"{glob.escape(out.stem)}.rank*") if name.fullmatch(p.name))


def _skips_of_no_table(out: Path, env: dict, op_name: str, dtype: str) -> dict:
    """The skips recorded beside ``out`` by runs that profiled no input into it (every input skipped:
    no table was written), where they were of this op and dtype on this GPU; else {} (metadata left
    beside a deleted table, or unreadable, is written over)."""
    try:
        meta = read_meta(meta_path(out)) if meta_path(out).is_file() else {}
        same = (meta.get("op") == op_name and meta.get("dtype", "float32") == dtype
                and device_of(meta)["name"] == env["device"]["name"])
    except ProfileTableError:
        return {}
    return dict(meta.get("skipped") or {}) if same else {}


def runs_with(earlier: dict, command: str, env: dict) -> list[dict]:
    """A table's ``runs`` with one more: each run's versions and date are kept, since the table's own
    are the last run's and a resumed run may have had others (it warns), which its rows were measured
    with. A table from before the field: its last run's, as its top level says, stands for its runs."""
    run = {"command": command, "date": env["date"], "versions": env["versions"]}
    return [*(earlier.get("runs") or ([{key: earlier.get(key) for key in run}] if earlier else [])), run]


def _resumed_meta(out: Path, env: dict, op_name: str, dtype: str) -> dict:
    """The metadata of the table ``out`` that a campaign resumes ({} for a new table). A table
    of another op or dtype, or measured on another GPU, is refused: its rows and the new ones would
    not be comparable; so is one with rows but no metadata (which GPU measured them?). Other
    versions of torch, Triton or seer are allowed with a warning that names them."""
    meta_file = meta_path(out)
    shards = _shards(out)  # an interrupted torchrun run's rows, not yet merged into ``out``
    if not out.exists() and not shards:  # a new table (metadata left beside a deleted one is written over)
        return {}
    if not meta_file.exists():
        holding = [table.name for table in [out, *shards] if _ids(table)]
        if holding:
            raise ProfileTableError(f"{out} has rows ({', '.join(holding)}) but no {meta_file.name} (a run stopped "
                                    "before writing it): nothing says which GPU measured them; restore the "
                                    "metadata or profile into a new table")
        return {}
    try:
        earlier = read_meta(meta_file)  # as a table's reader checks it: its fields' types too
    except ProfileTableError as error:
        raise ProfileTableError(f"{error}; fix or remove it before resuming {out}") from None
    if CAMPAIGNS in earlier:  # its rows are averages over campaigns, which its next merge would rebuild without new ones
        raise ProfileTableError(f"{out} is a merge of campaigns ({meta_file.name} lists them): profile into a "
                                "campaign's table, or a new one, and merge again")
    if earlier.get("op", op_name) != op_name:
        raise ProfileTableError(f"{out} profiles op {earlier['op']!r}, not {op_name!r}: profile into another table")
    if earlier.get("dtype", "float32") != dtype:  # tables before the field was recorded are float32
        raise ProfileTableError(f"{out} was profiled in {earlier.get('dtype', 'float32')}, this run in {dtype}: "
                                "profile into another table")
    measured_on = device_of(earlier)["name"]  # a device given by its name alone too
    if measured_on != env["device"]["name"]:
        raise ProfileTableError(f"{out} was measured on {measured_on!r}, this run is on {env['device']['name']!r}: "
                                "profile into another table (seer merge averages campaigns of one GPU only)")
    changed = {name: (then, env["versions"].get(name)) for name, then in (earlier.get("versions") or {}).items()
               if name in ("torch", "triton", "seer") and then != env["versions"].get(name)}
    if changed:
        versions = ", ".join(f"{name} {then} (now {now})" for name, (then, now) in changed.items())
        warn(f"resuming {out}, measured with {versions}: its rows and the new ones may not be comparable")
    _check_variants_timed(out, op_name, "retire the first (python -m seer.table retire) and time the second into "
                                        "its rows (benchmarks/spmv_preparation.py --add-variant)")
    for shard in shards:  # no tool adds to a rank file: the seer that wrote it finishes it
        _check_variants_timed(shard, op_name, "an interrupted run's rank file: resume with the seer that wrote it, "
                                              "or remove it")
    return earlier


def _check_variants_timed(table: Path, op_name: str, remedy: str) -> None:
    """Refuse to resume a table that times other variants than this seer's op has: new rows would
    leave its rows without the new variants' times (dropped when read) or its own without the
    retired ones'."""
    if not _ids(table):
        return
    timed = {c.removeprefix(TIME) for c in read_header(table) if c.startswith(TIME)}
    variants = set(get_op(op_name).variants)
    if timed != variants:
        differ = [f"times {sorted(timed - variants)}, which this seer's {op_name} lacks"] if timed - variants else []
        differ += [f"lacks {sorted(variants - timed)}, which this seer's {op_name} has"] if variants - timed else []
        raise ProfileTableError(f"{table} {' and '.join(differ)}: {remedy}; then resume it, or profile into a new "
                                "table")


class _Prefetched:
    """A future of ``case.load()`` for each case in order (``next``), the next ``ahead`` loading in
    background threads (generating a large matrix takes longer than timing it). ``settle()`` waits
    for the loads in flight: host wall-time measurements call it first, because a loader thread
    holding the GIL stalls the timed one (benchmarks/NOTES.md, SpMV 15 and 29). ``close()`` stops
    loading further cases."""

    def __init__(self, cases: list[Case], ahead: int = 2):
        from concurrent.futures import ThreadPoolExecutor

        self._cases, self._ahead, self._next = cases, ahead, 0
        self._pool = ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="seer-load")
        self._pending = [self._pool.submit(case.load) for case in cases[:ahead]]

    def __iter__(self):
        return self

    def __next__(self):
        i = self._next
        if i >= len(self._cases):
            raise StopIteration
        if i + self._ahead < len(self._cases):
            self._pending.append(self._pool.submit(self._cases[i + self._ahead].load))
        future, self._pending[i] = self._pending[i], None  # drop the input once handed out
        self._next += 1
        return future

    def settle(self) -> None:
        from concurrent.futures import wait

        wait([future for future in self._pending if future is not None])

    def close(self) -> None:
        for future in self._pending:
            if future is not None:
                future.cancel()
        self._pool.shutdown(wait=True)


def measured_within_budget(cases: list[Case], measure: Callable, budget_s: float,
                           describe: Callable[[dict], str]) -> list[dict]:
    """``measure(case, loaded)`` for each case in order until ``budget_s`` seconds have passed,
    printing ``describe(row)`` after each: the benchmark scripts' device runs are time-boxed, so
    they stop between inputs, not inside one. Each input loads before its measurement, not in a
    background thread alongside the previous one's: a loader thread holding the GIL stalls the
    timed one, which inflates host wall times and even ``do_bench`` medians (benchmarks/NOTES.md,
    SpMV 15 and 47). An input that cannot be read or is not supported (its load raises a
    :class:`SeerError`, as a complex matrix does) is skipped with a line saying why, as the
    profile campaign skips it; any error while measuring stops the run."""
    started, rows = time.monotonic(), []
    for done, case in enumerate(cases):
        if time.monotonic() - started > budget_s:
            print(f"budget reached: {len(cases) - done} matrices left", flush=True)
            break
        try:
            loaded = case.load()
        except SeerError as error:
            print(f"skipped {case.id}: {error}", flush=True)
            continue
        rows.append(measure(case, loaded))
        print(f"{case.id}: {describe(rows[-1])} ({time.monotonic() - started:.0f} s)", flush=True)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # large inputs one after another: hand their memory back
    return rows


def _append_row(path: Path, row: dict) -> None:
    frame = pd.DataFrame([row])
    if path.exists():
        header = read_header(path)
        frame = frame.reindex(columns=header + [c for c in frame.columns if c not in header])
        if list(frame.columns) != header:  # a new column appeared: rewrite with the wider header (whole
            wider = pd.concat([read_rows(path), frame], ignore_index=True)  # or not at all if killed)
            replace_atomically(path, wider.to_csv(index=False).encode())
            return
        frame.to_csv(path, mode="a", header=False, index=False)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)


def _merge_shards(out: Path) -> None:
    """Every rank table beside ``out`` merged into it (rank 0, once the ranks have stopped writing)."""
    shards = _shards(out)
    for s in [out, *shards]:  # a row the merged table was cut in (a run killed while merging) too
        _drop_cut_row(s)
    frames = [read_rows(out)] if out.exists() else []
    frames += [read_rows(s) for s in shards if s.exists()]  # one cut inside its header is gone
    if frames:
        merged = pd.concat(frames, ignore_index=True).drop_duplicates("id", keep="last")
        replace_atomically(out, merged.to_csv(index=False).encode())
    for s in shards:
        s.unlink(missing_ok=True)


def _rank_and_world() -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("gloo", timeout=SHARD_TIMEOUT)
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return int(os.environ.get("RANK", "0")), world


def _logger(enabled: bool):
    if not enabled:
        return lambda message: None
    from tqdm import tqdm

    return tqdm.write


def _progress(items, enabled: bool):
    from tqdm import tqdm

    return tqdm(items, disable=not enabled, unit="input", dynamic_ncols=True, mininterval=5)
