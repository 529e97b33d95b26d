"""Hot x values packed per call, read through a pointer select: does merge get R-MAT through the L2
faster when its most read x values share sectors?

    python benchmarks/spmv_hot_select.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: item 21 of benchmarks/NOTES.md (SpMV) measured the shipped kernels on columns renumbered
hot first (the H most read columns become 0..H-1, the others shift up by H) and found R-MAT
1.13x faster in merge's kernel with x already in that order, but per call that order cost a
gather of H values *and a copy of all of x*, which took most of the gain. The merge kernel now
takes ``HOT``: a renumbered column below H reads a packed copy of the hot x values, any other
reads x itself at c - H (one load through a pointer select), and the launch that zeroes merge's
accumulator before each call also packs the H hot values, so a call launches no more kernels
than plain merge. Per matrix: the hot columns and a renumbered copy of the column indices (+4 or
8 bytes a nonzero), made once. (A first run gathered with torch's ``index_select``, a launch of
its own: 11-15 µs a call, more than R-MATs under ~10M nonzeros gained.)

Each matrix (every R-MAT of the large suite, largest first, then log-normal rows and permuted
replicas by turns) gets the skewed families' winners on their own columns and merge with hot
columns at two H, every result checked against float64, timed in interleaved rounds (least of
do_bench medians, L2 flushed); the per-call launches before the kernel alone, and the renumbering
(CUDA events, median of 5). Writes ``spmv-hot-select-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import statistics
import sys

import torch
from scipy.stats import gmean
from spmv_bandwidth import share_of_copy

from large_set import check_all, events_ms, method, run
from seer.datasets.cases import SKEWED_FAMILIES, skewed_round_robin
from seer.kernels import spmv
from seer.profiling import _least_of_rounds

OWN = ("merge_c256", "merge_c512", "cusparse_prepared", "torch_csr")  # the skewed families' winners
CHUNKS, HOTS = (256, 512), (16384, 65536)
HOT_VARIANTS = {f"merge_c{c}+hot{h // 1024}k": spmv._merge_variant(c, 32, 4, h)[0] for c in CHUNKS for h in HOTS}
GATHERED = max(HOTS)


def measure(case, loaded) -> dict:
    parts, (x,) = case.build(loaded)
    csr = spmv.problem(parts)
    runs = {name: (lambda v=spmv.VARIANTS[name]: v.run(csr, x)) for name in OWN}
    runs.update({name: (lambda r=r: r(csr, x)) for name, r in HOT_VARIANTS.items()})
    check_all(runs, spmv.reference(csr, x), case.id)
    uses = torch.bincount(csr.indices, minlength=csr.cols).sort(descending=True).values
    return {"id": case.id, "rows": csr.rows, "cols": csr.cols, "nnz": csr.nnz,
            "hot_share": float(uses[:GATHERED].sum()) / csr.nnz,
            "renumbering_ms": events_ms(lambda: spmv._hot_columns(csr, min(GATHERED, csr.cols))),
            "time_ms": _least_of_rounds({**runs, **per_call_preparations(csr, x)})}


def per_call_preparations(csr, x) -> dict:
    """What a merge call launches before its kernel: the accumulator zeroed, alone and with the hot
    values packed in the same launch, and torch's gather of the hot values for comparison."""
    hot_columns, _ = spmv._hot_columns(csr, min(GATHERED, csr.cols))
    acc = torch.empty(csr.rows, dtype=torch.float32, device=x.device)
    operands = spmv.vector_operands(x, acc)
    zero, zero_and_gather = (spmv._accumulator_zeroing(csr, columns) for columns in (None, hot_columns))
    return {"zero": lambda: zero(x, acc, *operands), "zero and gather": lambda: zero_and_gather(x, acc, *operands),
            "torch gather": lambda: x.index_select(0, hot_columns)}


def select(cases: list) -> list:
    """Every R-MAT, largest first, then the other skewed families by turns."""
    rmat = sorted((c for c in cases if c.id.startswith(SKEWED_FAMILIES[0])), key=lambda c: -c.extra["size"])
    return rmat + [c for c in skewed_round_robin(cases, largest_first=True) if not c.id.startswith(SKEWED_FAMILIES[0])]


def best(times: dict, names) -> tuple[str, float]:
    name = min(names, key=times.get)
    return name, times[name]


def describe(row: dict) -> str:
    t = row["time_ms"]
    own, hot = best(t, OWN), best(t, HOT_VARIANTS)
    return (f"own {own[0]} {own[1]:.4f}, hot {hot[0]} {hot[1]:.4f} ({own[1] / hot[1]:.2f}x), zero {t['zero']:.4f}, "
            f"zero and gather {t['zero and gather']:.4f}, torch gather {t['torch gather']:.4f} ms, "
            f"hot share {row['hot_share']:.2f}")


def groups(rows: list):
    for family in SKEWED_FAMILIES:
        members = [r for r in rows if r["id"].startswith(family)]
        for label, group in ((family.rstrip("/"), members),
                             (family.rstrip("/") + ", nnz >= 10M", [r for r in members if r["nnz"] >= 10_000_000]),
                             (family.rstrip("/") + ", hot share >= 0.8",
                              [r for r in members if r["hot_share"] >= 0.8])):
            if group:
                yield label, group


def markdown(result: dict) -> str:
    rows, copy = result["matrices"], result["copy_gbps"]
    lines = [*method(result, "Hot x values through a pointer select"), "",
             f"*Own*: the best of {', '.join(OWN)} on the matrix's own columns. *Hot*: merge with the H most "
             "read columns renumbered first; each call gathers their x values (included in its time) and "
             "reads them through a pointer select. *Hot share*: the nonzeros that read the "
             f"{GATHERED:,} hottest columns. *Gather*: the per-call launch that zeroes the accumulator and "
             f"packs {GATHERED:,} hot values, alone (the plain merge call's zeroing alone and torch's "
             "`index_select` of the same values are in the JSON).", "",
             "Geometric means per group: own best over hot best (> 1: hot wins), own best over the best of "
             "both (what adding hot to the choices gains), hot wins; medians of the share of copy:", "",
             "| group | matrices | hot share | own / hot | own / both | hot fastest on | copy share, own | "
             "copy share, both | gather ms |", "|" + "---|" * 9]
    for label, group in groups(rows):
        t = [r["time_ms"] for r in group]
        own = [best(x, OWN)[1] for x in t]
        hot = [best(x, HOT_VARIANTS)[1] for x in t]
        both = [min(o, h) for o, h in zip(own, hot)]
        shares = [statistics.median(share_of_copy(r, v, copy) for r, v in zip(group, vs)) for vs in (own, both)]
        lines.append(f"| {label} | {len(group)} | {statistics.median(r['hot_share'] for r in group):.2f} | "
                     f"{gmean([o / h for o, h in zip(own, hot)]):.2f}x | "
                     f"{gmean([o / b for o, b in zip(own, both)]):.2f}x | {sum(h < o for o, h in zip(own, hot))} | "
                     f"{shares[0]:.0%} | {shares[1]:.0%} | {statistics.median(x['zero and gather'] for x in t):.4f} |")
    med = {name: 1e3 * statistics.median(r["time_ms"][name] for r in rows)
           for name in ("zero", "zero and gather", "torch gather")}
    extra = 1e3 * statistics.median(r["time_ms"]["zero and gather"] - r["time_ms"]["zero"] for r in rows)
    lines += ["", f"Before the kernel, medians over the {len(rows)} inputs: the plain merge call's zeroing "
              f"{med['zero']:.1f} µs, zeroing and packing the hot values in one launch {med['zero and gather']:.1f} µs "
              f"(+{extra:.1f} µs, the median of the differences), torch's `index_select` of the same values "
              f"{med['torch gather']:.1f} µs."]
    lines += ["", "Each hot configuration over the same chunk on its own columns (geometric mean):", "",
              "| group | " + " | ".join(HOT_VARIANTS) + " |", "|" + "---|" * (1 + len(HOT_VARIANTS))]
    for label, group in groups(rows):
        cells = [gmean([r["time_ms"][n.split("+")[0]] / r["time_ms"][n] for r in group]) for n in HOT_VARIANTS]
        lines.append(f"| {label} | " + " | ".join(f"{v:.2f}x" for v in cells) + " |")
    lines += ["", "Per matrix (ms):", "",
              "| matrix | nnz | hot share | own best | hot best | gather | renumbering |", "|" + "---|" * 7]
    for r in rows:
        t = r["time_ms"]
        (on, ov), (hn, hv) = best(t, OWN), best(t, HOT_VARIANTS)
        lines.append(f"| {r['id']} | {r['nnz']:,} | {r['hot_share']:.2f} | {on} {ov:.4f} | {hn} {hv:.4f} | "
                     f"{t['zero and gather']:.4f} | {r['renumbering_ms']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    return run(__doc__, "spmv-hot-select", select, measure, describe, markdown, budget_s=300)


if __name__ == "__main__":
    sys.exit(main())
