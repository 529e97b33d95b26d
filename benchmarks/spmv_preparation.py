"""Measure each SpMV input's one-time costs again and write them into a profile table.

    python benchmarks/spmv_preparation.py datasets/profiles/spmv-<device>.csv --matrices .carry/suitesparse [--deadline 500]
    python benchmarks/spmv_preparation.py datasets/profiles/spmv-<device>.csv --matrices .carry/suitesparse --gather
    python benchmarks/spmv_preparation.py datasets/profiles/spmv-<device>.csv --matrices .carry/suitesparse --only NAME

Without ``--gather``: every variant's ``prepare_ms:<variant>``, or with ``--only`` the named
variants' alone (their preparation changed, their kernels did not: ``offsets_i16``'s copy made in
one pass, NOTES SpMV 61). With ``--gather``: ``gather_ms``, what the
row-statistics pass costs an unchecked matrix (``seer.profiling.gather_ms``), and the gathered
feature columns that pass yields, a column the table lacks added: first after the pass's
host-side sums became one numpy reduction (benchmarks/NOTES.md, SpMV 29), then when the pass
learned to count shifted rows (``shifted_row_frac``, SpMV 32). Kernel times stay as they were.

Why the preparation was re-measured: the tables of 2026-11-24 (second campaign) first recorded ``prepare_ms:<variant>`` as the
host wall time of ``bind`` with the device drained, which counted the host's own planning
(Python, 7-20 µs a variant) that no time in the tables counts for a call, and so charged every
Triton variant more at one call than the cuSPARSE baseline's own per-call host work. The harness
now records what the preparation adds to the device's timeline (``seer.profiling.preparation_columns``:
events behind a sleep kernel; kernels and host synchronisations count, planning does not). This
rebuilds each input of the table (the same cases, ids and seeds as ``seer profile``), measures
the chosen columns again and rewrites them, leaving every other cell as it was; a run stopped by
``--deadline`` keeps the inputs already measured (and a column ``remeasured_<what>`` saying which
rows were) so the next run resumes. Under ``torchrun`` each rank measures every world-th input
left and rank 0 writes the table: the inputs' builds, the slow part, shared over the GPUs.
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from contextlib import closing
from pathlib import Path

import pandas as pd
import torch

from seer.datasets.cases import spmv_cases
from seer.profiling import (SPMV_CALL_OVERHEAD_BELOW, _Prefetched, _rank_and_world, current_device, environment,
                            gather_ms, host_call_us, preparation_columns, runs_with, timed_if_correct)
from seer.registry import get_op
from seer.files import replace_atomically
from seer.table import device_of, meta_path, read_frame, read_meta


def preparation(names: list[str]):
    def measure(case, loaded) -> dict[str, float]:
        op = get_op("spmv")
        source, _ = case.build(loaded)
        return preparation_columns(op, source, names)

    return measure


def gathering(case, loaded) -> dict[str, float]:
    op = get_op("spmv")
    source, _ = case.build(loaded)
    problem = op.kernels.problem(source)
    return {**op.features.gathered(problem), "gather_ms": gather_ms(op, problem)}


# Re-timed beside a variant added to a table, to show how far this run's timings sit from the
# campaign's: their ratios to the table's own cells are kept in its metadata, not in the table.
ANCHORS = ("diagonal_r128", "cusparse_prepared")


def addition(names: list[str], kernel_time_only: bool = False):
    """The measure of variants the table lacks: each one's kernel time (least of interleaved rounds
    beside the anchors' and each other's, as ``seer profile`` times every variant), host call time
    and preparation, each checked against float64 first (a wrong or failing variant gets NaN, as
    in a campaign). Several variants share one build of each input, the slowest part on the large
    ones. ``kernel_time_only``: the kernel times alone, for variants whose kernels changed but whose
    host work did not: the lent hosts differ in host time by more than such a change (NOTES SpMV 49)."""

    def measure(case, loaded) -> dict[str, float]:
        op = get_op("spmv")
        source, operands = case.build(loaded)
        problem = op.kernels.problem(source)
        # Partials: timed_if_correct checks each a second time into a NaN-filled out=.
        fns = {n: functools.partial(op.variants[n].run, problem, *operands) for n in (*names, *ANCHORS)}
        checked, times = timed_if_correct(op, problem, operands, fns, case.id)
        row = {**{f"time_ms:{n}": times[n] for n in names}, **{f"{ANCHOR_PREFIX}{n}": times[n] for n in ANCHORS}}
        if kernel_time_only:
            return row
        for name in names:
            row.update({f"call_us:{name}": float("nan"), f"prepare_ms:{name}": float("nan")})
            if name in checked:
                if case.extra.get("size", 0) < SPMV_CALL_OVERHEAD_BELOW:  # as seer profile decides
                    row[f"call_us:{name}"] = host_call_us(checked[name])
                row.update(preparation_columns(op, source, [name]))
        return row

    return measure


ANCHOR_PREFIX = "anchor_ms:"


def place_columns(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """The added variant's columns where ``seer profile`` would write them: after the columns of
    the variant registered before it, in each of the per-variant groups."""
    names = list(get_op("spmv").variants)
    before = names[names.index(name) - 1]
    order = [c for c in frame.columns if not c.endswith(f":{name}")]
    for prefix in ("time_ms:", "call_us:", "prepare_ms:"):
        if f"{prefix}{name}" in frame:
            order.insert(order.index(f"{prefix}{before}") + 1, f"{prefix}{name}")
    return frame[order]


def anchor_ratios(frame: pd.DataFrame) -> dict[str, float]:
    """Median over the inputs of each anchor's time in this run over the table's own cell."""
    return {n: float((frame[f"{ANCHOR_PREFIX}{n}"] / frame[f"time_ms:{n}"]).median()) for n in ANCHORS}


def measured_in_time(cases: list, measure, deadline_s: float) -> dict[str, dict[str, float]]:
    """Each case's measured columns by id, in order, until ``deadline_s`` has passed (checked between
    inputs: what is left waits for the next run)."""
    started, measured = time.monotonic(), {}
    with closing(_Prefetched(cases)) as loads:
        for case in cases:
            if time.monotonic() - started > deadline_s:
                print(f"deadline reached: {len(cases) - len(measured)} inputs left for the next run")
                break
            loaded = next(loads).result()
            loads.settle()  # gather_ms is host wall time: nothing may load meanwhile
            measured[case.id] = measure(case, loaded)
            torch.cuda.empty_cache()
    return measured


def gathered(measured: dict, world: int) -> dict:
    """Every rank's measurements on rank 0 (each rank has measured a shard); the others get {}."""
    if world == 1:
        return measured
    shards = [None] * world if torch.distributed.get_rank() == 0 else None
    torch.distributed.gather_object(measured, shards, dst=0)
    return {case_id: values for shard in shards or [] for case_id, values in shard.items()}


def command(world: int) -> str:
    """How this run was started, as the metadata records it."""
    start = ["python"] if world == 1 else ["torchrun", "--nproc-per-node", str(world)]
    return " ".join([*start, *sys.argv])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path)
    parser.add_argument("--matrices", type=Path, required=True)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--gather", action="store_true", help="re-measure gather_ms instead of prepare_ms")
    what.add_argument("--add-variant", metavar="NAME", nargs="+",
                      help="measure registered variants the table lacks (several share each input's build)")
    parser.add_argument("--only", metavar="NAME", nargs="+",
                        help="without --gather or --add-variant: re-measure these variants' prepare_ms alone")
    parser.add_argument("--again", action="store_true",
                        help="with --add-variant: measure the variants' columns again (their code changed)")
    parser.add_argument("--kernel-time-only", action="store_true",
                        help="with --add-variant --again: measure the kernel times alone; the host columns keep theirs")
    parser.add_argument("--deadline", type=float, default=500, help="seconds; stops between inputs")
    args = parser.parse_args()
    if args.kernel_time_only and not (args.add_variant and args.again):
        parser.error("--kernel-time-only measures a variant the table has again: give --add-variant NAME --again")
    if args.only and (args.gather or args.add_variant):
        parser.error("--only names the variants whose preparation is re-measured: give it without --gather or --add-variant")
    added, only = (list(dict.fromkeys(names or [])) for names in (args.add_variant, args.only))  # each once, in order
    registered = get_op("spmv").variants
    unknown = [n for n in added + only if n not in registered]
    if unknown:
        parser.error(f"no spmv variant {', '.join(unknown)}; registered: {', '.join(registered)}")
    if added:
        measure, marker = addition(added, args.kernel_time_only), "added_" + "+".join(added)
    elif args.gather:
        measure, marker = gathering, "remeasured_gather"
    else:
        measure, marker = preparation(only or list(registered)), "remeasured_preparation" + "".join(f"_{n}" for n in only)
    # The table's cells and the ones measured here must come from one GPU.
    here = environment(current_device())
    measured_on = device_of(read_meta(meta_path(args.table)))["name"]
    if measured_on != here["device"]["name"]:
        parser.error(f"{args.table} was measured on {measured_on!r}, this run is on {here['device']['name']!r}: "
                     "its cells would mix two GPUs' timings; run it on that GPU")
    # read_frame: every cell it does not re-measure is written back to the last bit
    frame = read_frame(args.table, dtype={"id": str, "group": str, "source": str})
    present = [n for n in added if f"time_ms:{n}" in frame]
    if present and marker not in frame and not args.again:
        if len(present) == len(added):
            print(f"{args.table} has {', '.join(present)} already: nothing to add (--again measures them again)")
            return 0
        parser.error(f"{args.table} has {', '.join(present)} already: add the others alone, "
                     "or measure them all again with --again")
    if marker not in frame:
        frame[marker] = False
    todo = set(frame.loc[~frame[marker].astype(bool), "id"])
    rank, world = _rank_and_world()
    cases = [c for c in spmv_cases([args.matrices], synthetic="large") if c.id in todo][rank::world]
    measured = gathered(measured_in_time(cases, measure, args.deadline), world)
    if rank != 0:
        return 0
    index = {i: n for n, i in enumerate(frame["id"])}
    for case_id, values in measured.items():
        row = index[case_id]
        for column, value in values.items():
            # A variant that failed on the input keeps no preparation. ``loc``, not ``at``: it
            # adds a gathered feature's column the table lacks.
            if args.add_variant or not column.startswith("prepare_ms:") or pd.notna(frame.at[row, column]):
                frame.loc[row, column] = value
        frame.at[row, marker] = True
        todo.discard(case_id)
    meta = json.loads(meta_path(args.table).read_text())
    if not todo:  # every row re-measured: the marker has done its job
        frame = frame.drop(columns=marker)
        if added:
            ratios, by = anchor_ratios(frame), command(world)
            meta["added_variants"] = [*meta.get("added_variants", []),
                                      *({"variant": n, "by": by, "anchor_ratio_median": ratios} for n in added)]
            frame = frame.drop(columns=[f"{ANCHOR_PREFIX}{n}" for n in ANCHORS])
            registered = list(get_op("spmv").variants)
            for name in sorted(added, key=registered.index):  # each after the variant registered before it
                frame = place_columns(frame, name)
            print(f"anchors, this run over the table (median): {ratios}")
    # Each replaced whole or not at all: a kill mid-write would leave a campaign's table cut short.
    replace_atomically(Path(args.table), frame.to_csv(index=False).encode())
    meta["commands"] = [*meta.get("commands", []), command(world)]
    meta["runs"] = runs_with(meta, command(world), here)  # this run's date and versions, beside the profiling runs
    replace_atomically(meta_path(args.table), (json.dumps(meta, indent=2) + "\n").encode())
    print(f"{len(frame) - len(todo)} of {len(frame)} inputs re-measured; wrote {args.table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
