"""Column slices: do the skewed families' x gathers stay in cache when a call walks the matrix one
slice of columns at a time?

    python benchmarks/spmv_column_slices.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: item 21 of benchmarks/NOTES.md (SpMV) bounds log-normal rows and permuted replicas by their
own x requests (one 32-byte sector from L2 for each 4-byte value, columns read evenly), and item
22 found them a third faster with every x read a cache hit. Renumbering columns cannot help where
columns are read evenly; walking them in slices can: a matrix cut into slices of W columns and
stacked (slice s's part of row r becomes row s * rows + r) is one CSR matrix whose kernel reads x
only within slice s while it works on slice s's rows, a window of W values (W * 4 bytes) that L1
can hold. Each call then sums the slices' partial results. The cost: slices * rows more row
pointers and partial sums, and the sum.

Each matrix (log-normal rows, permuted replicas and R-MAT by turns, largest first) gets the
skewed families' winners on the matrix itself and merge and prepared cuSPARSE on its stacked
slices for three W (a W is skipped where the stacked matrix's extra row pointers and partial
sums would pass half the matrix's bytes), every result checked against float64, timed in
interleaved rounds (least of do_bench medians, L2 flushed); the stacking itself once (CUDA
events, median of 5). Writes ``spmv-column-slices-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import statistics
import sys

from scipy.stats import gmean
from spmv_bandwidth import share_of_copy

from large_set import check_all, events_ms, method, run
from seer.datasets.cases import SKEWED_FAMILIES, skewed_round_robin
from seer.kernels import spmv
from seer.profiling import _least_of_rounds

OWN = ("merge_c256", "merge_c512", "cusparse_prepared", "torch_csr")  # the skewed families' winners
ON_SLICES = ("merge_c512", "cusparse_prepared")
WIDTHS = (16384, 65536, 262144)  # columns a slice: 64 KB, 256 KB, 1 MB of fp32 x
MAX_EXTRA = spmv.SLICE_MAX_EXTRA  # stacked matrices whose extra bytes pass this share of the matrix's are skipped


def stacked(csr, width: int):
    """``(slices, stack)``: the matrix cut into slices of ``width`` columns and stacked as the
    ``cusparse_slices_16k`` variant stacks it (:func:`seer.kernels.spmv._stacked_slices`)."""
    slices = -(-csr.cols // width)
    return slices, spmv._stacked_slices(csr, slices, width)[0]


def measure(case, loaded) -> dict:
    parts, (x,) = case.build(loaded)
    csr = spmv.problem(parts)
    extras = {width: spmv.stacking_extra(csr, -(-csr.cols // width)) for width in WIDTHS}
    widths = [w for w, extra in extras.items() if csr.cols > w and extra <= MAX_EXTRA]
    row = {"id": case.id, "rows": csr.rows, "cols": csr.cols, "nnz": csr.nnz,
           "extra_share": {str(w): e for w, e in extras.items()}, "stacking_ms": {}, "time_ms": None}
    if not widths:  # rows too short for this many slices: nothing to time
        return row
    runs = {name: (lambda v=spmv.VARIANTS[name]: v.run(csr, x)) for name in OWN}
    for width in widths:
        row["stacking_ms"][str(width)] = events_ms(lambda w=width: stacked(csr, w))
        slices, tall = stacked(csr, width)
        for name in ON_SLICES:
            runs[f"{name} on {width // 1024}k slices"] = (
                lambda v=spmv.VARIANTS[name], t=tall, s=slices: v.run(t, x).view(s, csr.rows).sum(0))
    check_all(runs, spmv.reference(csr, x), case.id)
    return {**row, "time_ms": _least_of_rounds(runs)}


def select(cases: list) -> list:
    """Log-normal rows and permuted replicas first (columns read evenly: slicing's ground), then R-MAT."""
    skewed = skewed_round_robin(cases, largest_first=True)
    rmat = SKEWED_FAMILIES[0]
    return [c for c in skewed if not c.id.startswith(rmat)] + [c for c in skewed if c.id.startswith(rmat)]


def sliced(times: dict) -> dict:
    return {name: ms for name, ms in times.items() if " on " in name}


def best(times: dict) -> tuple[str, float]:
    name = min(times, key=times.get)
    return name, times[name]


def describe(row: dict) -> str:
    t = row["time_ms"]
    if t is None:
        return f"skipped: every W adds more than {MAX_EXTRA:.0%} of the matrix's bytes"
    own, cut = best({n: t[n] for n in OWN}), best(sliced(t))
    return f"own {own[0]} {own[1]:.4f}, slices {cut[0]} {cut[1]:.4f} ms ({own[1] / cut[1]:.2f}x)"


def groups(rows: list):
    for family in SKEWED_FAMILIES:
        members = [r for r in rows if r["id"].startswith(family) and r["time_ms"] is not None]
        for label, group in ((family.rstrip("/"), members),
                             (family.rstrip("/") + ", nnz >= 10M", [r for r in members if r["nnz"] >= 10_000_000])):
            if group:
                yield label, group


def markdown(result: dict) -> str:
    rows, copy = result["matrices"], result["copy_gbps"]
    names = [f"{n} on {w // 1024}k slices" for w in WIDTHS for n in ON_SLICES]
    lines = [*method(result, "Column slices"), "",
             f"*Own*: the best of {', '.join(OWN)} on the matrix itself. *Slices*: the matrix cut into "
             "slices of W columns stacked into one CSR matrix (slice s's part of row r is row s * rows + r), "
             "run by the variant named, then the slices' partial results summed (included in the time). "
             f"A W is skipped where the extra row pointers and partial sums would pass {MAX_EXTRA:.0%} of the "
             "matrix's bytes. Groups hold the matrices with at least one W timed.", "",
             "Geometric means per group: own best over the best sliced run (> 1: slices win), slices "
             "fastest on; medians of the share of copy:", "",
             "| group | matrices | own / slices | slices fastest on | copy share, own | copy share, best of both |",
             "|" + "---|" * 6]
    for label, group in groups(rows):
        own = [best({n: r["time_ms"][n] for n in OWN})[1] for r in group]
        cut = [best(sliced(r["time_ms"]))[1] for r in group]
        both = [min(o, c) for o, c in zip(own, cut)]
        shares = [statistics.median(share_of_copy(r, v, copy) for r, v in zip(group, vs)) for vs in (own, both)]
        lines.append(f"| {label} | {len(group)} | {gmean([o / c for o, c in zip(own, cut)]):.2f}x | "
                     f"{sum(c < o for o, c in zip(own, cut))} | {shares[0]:.0%} | {shares[1]:.0%} |")
    lines += ["", "Each sliced run over the same variant on the matrix itself (geometric mean over the "
              "matrices where it ran):", "", "| group | " + " | ".join(names) + " |", "|" + "---|" * (1 + len(names))]
    for label, group in groups(rows):
        cells = []
        for name in names:
            ratios = [r["time_ms"][name.split(" on ")[0]] / r["time_ms"][name] for r in group if name in r["time_ms"]]
            cells.append(f"{gmean(ratios):.2f}x ({len(ratios)})" if ratios else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Per matrix (ms; extra bytes of the stacked matrix at each W as a share of the matrix's):", "",
              "| matrix | nnz | cols | own best | sliced best | extra at " + " / ".join(f"{w // 1024}k" for w in WIDTHS)
              + " | stacking |", "|" + "---|" * 7]
    for r in (r for r in rows if r["time_ms"] is not None):
        t = r["time_ms"]
        own, cut = best({n: t[n] for n in OWN}), best(sliced(t))
        extras = " / ".join(f"{r['extra_share'][str(w)]:.2f}" for w in WIDTHS)
        stacking = ", ".join(f"{ms:.2f}" for ms in r["stacking_ms"].values())
        lines.append(f"| {r['id']} | {r['nnz']:,} | {r['cols']:,} | {own[0]} {own[1]:.4f} | {cut[0]} {cut[1]:.4f} | "
                     f"{extras} | {stacking} |")
    skipped = [r["id"] for r in rows if r["time_ms"] is None]
    if skipped:
        lines += ["", f"Skipped, every W adding more than {MAX_EXTRA:.0%} of the matrix's bytes ({len(skipped)}): "
                  + ", ".join(skipped) + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(run(__doc__, "spmv-column-slices", select, measure, describe, markdown, budget_s=300))
