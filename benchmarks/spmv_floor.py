"""How far above its floor each large matrix runs, and what that leaves for selection.

    python benchmarks/spmv_floor.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 400]

Why: the issue asks seer to beat the best single variant (``merge_c512``) by 1.3x on the large set,
and the best variant on large regular matrices to reach 75% of copy. The profile tables put the
oracle only 1.14x (H100) / 1.18x (H200) above ``merge_c512``, so the question is whether any
kernel could do better, and where. Each large matrix gets, in one process and interleaved rounds
(least of the medians, L2 flushed):

- ``merge_c512`` and the variant its device's profile table found fastest on it;
- that variant on the same matrix with every column index set to 0 (*free gathers*: the same
  streams and row structure, every x read a cache hit), to tell a kernel that streams slowly from
  one held up by its x requests;
- the *gather bound*: ``x.index_select(0, indices)``, the matrix's own x requests with a coalesced
  stream of nnz indices in and nnz values out (as many bytes as A's values) and nothing else;
- a *same-size copy*: a device-to-device copy moving the byte model's bytes (values, indices,
  row pointers, x and y once), launch and ramp-up included, which no kernel reading those bytes
  from memory beats by much.

Every variant result is checked against float64. Writes ``spmv-floor-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import functools
import itertools
import statistics
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from scipy.stats import gmean
from spmv_bandwidth import minimum_bytes, share_of_copy

from seer.kernels import spmv
from seer.profiling import _least_of_rounds, device_tag, relative_error
from seer.sparse import as_csr
from seer.table import read_table

SINGLE = "merge_c512"  # the large sets' best variant alone on both GPUs (NOTES SpMV 19)
FAMILIES = ("rmat", "lognormal_rows", "replicas, permuted", "banded", "stencil_2d", "stencil_3d", "replicas")
SKEWED = FAMILIES[:3]


def family(case_id: str) -> str:
    """The large suite's family of an input id: the generator's name, or a replica of a real matrix
    (rows and columns permuted or not)."""
    if case_id.startswith("derived/"):
        return "replicas, permuted" if "permute1" in case_id else "replicas"
    return case_id.split("/")[1]


def round_robin(cases: list) -> list:
    """One family after another, so that a run cut short by its budget still covers them all."""
    groups = {f: [c for c in cases if family(c.id) == f] for f in FAMILIES}
    return [c for group in itertools.zip_longest(*groups.values()) for c in group if c is not None]


def timed_calls(csr, x, table_best: str) -> tuple[dict, dict]:
    """``(variants, controls)``: the runs whose results are checked against float64 (each with its
    matrix) and the controls timed beside them."""
    free = as_csr((csr.indptr, torch.zeros_like(csr.indices), csr.values, csr.shape))
    variants = {name: (csr, lambda v=spmv.VARIANTS[name]: v.run(csr, x)) for name in dict.fromkeys((SINGLE, table_best))}
    variants["free gathers"] = (free, lambda v=spmv.VARIANTS[table_best]: v.run(free, x))
    source = torch.empty(minimum_bytes(csr.rows, csr.cols, csr.nnz) // 8, device=x.device)  # read + written
    target = torch.empty_like(source)
    controls = {"gather bound": lambda: x.index_select(0, csr.indices), "same-size copy": lambda: target.copy_(source)}
    return variants, controls


@functools.cache
def table_winners(device_name: str, leave_out: Callable[[str], bool] = lambda name: False) -> dict[str, str]:
    """Each input id's fastest variant in this device's shipped profile table, among the variants
    ``leave_out`` does not name."""
    table = read_table(Path("datasets/profiles") / f"spmv-{device_tag(device_name)}.csv")
    kept = [i for i, name in enumerate(table.variants) if not leave_out(name)]
    winners = [table.variants[kept[i]] for i in np.nanargmin(table.times[:, kept], axis=1)]
    return dict(zip(table.frame["id"], winners))


def measure(case, loaded) -> dict:
    parts, (x,) = case.build(loaded)
    csr = spmv.problem(parts)
    table_best = table_winners(torch.cuda.get_device_name()).get(case.id, SINGLE)
    variants, controls = timed_calls(csr, x, table_best)
    for name, (matrix, fn) in variants.items():
        error = relative_error(fn(), spmv.reference(matrix, x))
        if not error <= 1e-4:
            raise AssertionError(f"{name} is wrong on {case.id}: relative error {error:.1e}")
    times = _least_of_rounds({**{n: fn for n, (_, fn) in variants.items()}, **controls})
    return {"id": case.id, "family": family(case.id), "rows": csr.rows, "cols": csr.cols, "nnz": csr.nnz,
            "table_best": table_best, "time_ms": times}


def floors(row: dict) -> dict:
    """One matrix's times: its best (of ``SINGLE`` and the table's winner), the floors under it, and
    the floor that binds it: its gather bound where that is under its best time (its own x requests
    take that long with nothing else to do), else a same-size copy (where ``index_select`` streams
    worse than the SpMV kernels, as on most bands and stencils, the gather bound is no floor) or its
    best time, whichever is lower."""
    t = row["time_ms"]
    best, gather = min(t[SINGLE], t[row["table_best"]]), t["gather bound"]
    return {"single": t[SINGLE], "best": best, "free": t["free gathers"], "gather": gather,
            "copy": t["same-size copy"], "floor": gather if gather < best else min(best, t["same-size copy"])}


def summary(group: list[dict]) -> dict:
    """Geometric means over ``group``: the best time's distance to each floor, and four ceilings of
    the speed-up over ``SINGLE`` (each matrix at its best variant, at the lesser of that and the
    gather bound, at the lesser of that and a same-size copy, at the floor that binds it)."""
    f = [floors(r) for r in group]

    def mean(fn):
        return float(gmean([fn(x) for x in f]))

    return {"matrices": len(group),
            "gather_over_best": mean(lambda x: x["gather"] / x["best"]),
            "free_over_best": mean(lambda x: x["free"] / x["best"]),
            "copy_over_best": mean(lambda x: x["copy"] / x["best"]),
            "oracle_over_single": mean(lambda x: x["single"] / x["best"]),
            "gather_floor_over_single": mean(lambda x: x["single"] / min(x["best"], x["gather"])),
            "copy_floor_over_single": mean(lambda x: x["single"] / min(x["best"], x["copy"])),
            "binding_floor_over_single": mean(lambda x: x["single"] / x["floor"])}


def groups(rows: list[dict]):
    yield "all", rows
    yield "skewed (R-MAT, log-normal rows, permuted replicas)", [r for r in rows if r["family"] in SKEWED]
    yield "regular (bands, stencils, replicas)", [r for r in rows if r["family"] not in SKEWED]
    for name in FAMILIES:
        members = [r for r in rows if r["family"] == name]
        if members:
            yield name, members
        big = [r for r in members if r["nnz"] >= 10_000_000]
        if big:
            yield f"{name}, nnz >= 10M", big


def markdown(result: dict) -> str:
    rows, copy = result["matrices"], result["copy_gbps"]
    lines = [f"# SpMV floors and the ceiling of selection, {result['device']['name']}", "",
             f"torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}, measured "
             f"{result['date']}; `{result['command']}`. do_bench medians (L2 flushed), least of three "
             f"interleaved rounds; every variant result checked against float64. Copy ceiling {copy:.0f} GB/s "
             "(1 GiB) measured in the same run.", "",
             f"*Best*: the lesser of `{SINGLE}` and the variant the device's profile table found fastest on "
             "the matrix. *Free gathers*: that variant with every column index 0 (same streams, every x read "
             "a cache hit). *Gather bound*: `x.index_select(0, indices)`. *Same-size copy*: a copy moving "
             "the byte model's bytes. Ratios are geometric means; a floor over best < 1 is room left.", "",
             f"Ceilings of the speed-up over `{SINGLE}` alone: each matrix at its best variant (the oracle "
             "of this run), at the lesser of that and its gather bound, at the lesser of that and a "
             "same-size copy, and at the floor that binds it (its gather bound where that is under its best "
             "time; else the lesser of its best and a same-size copy, since where `index_select` streams "
             "worse than the SpMV kernels, as on most bands and stencils, the gather bound is no floor).", "",
             "| inputs | matrices | gather bound / best | free gathers / best | same-size copy / best | "
             "best, median share of copy | oracle over single | gather-floor ceiling | copy-floor ceiling | "
             "binding-floor ceiling |",
             "|" + "---|" * 10]
    for label, group in groups(rows):
        s = summary(group)
        share = statistics.median(share_of_copy(r, floors(r)["best"], copy) for r in group)
        lines.append(f"| {label} | {s['matrices']} | {s['gather_over_best']:.2f} | {s['free_over_best']:.2f} | "
                     f"{s['copy_over_best']:.2f} | {share:.0%} | {s['oracle_over_single']:.2f}x | "
                     f"{s['gather_floor_over_single']:.2f}x | {s['copy_floor_over_single']:.2f}x | "
                     f"{s['binding_floor_over_single']:.2f}x |")
    lines += ["", "Per matrix (ms):", "", f"| matrix | nnz | table's best | {SINGLE} | best | free gathers | "
              "gather bound | same-size copy |", "|" + "---|" * 8]
    for r in rows:
        f = floors(r)
        lines.append(f"| {r['id']} | {r['nnz']:,} | {r['table_best']} | {f['single']:.4f} | {f['best']:.4f} | "
                     f"{f['free']:.4f} | {f['gather']:.4f} | {f['copy']:.4f} |")
    return "\n".join(lines) + "\n"


def describe(row: dict) -> str:
    f = floors(row)
    return " ".join(f"{k} {v:.4f}" for k, v in f.items())


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-floor", round_robin, measure, describe, markdown, budget_s=400)


if __name__ == "__main__":
    sys.exit(main())
