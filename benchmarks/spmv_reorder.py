"""Columns renumbered by use: do skewed matrices get through the L2 faster when hot x values share
sectors?

    python benchmarks/spmv_reorder.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: on scrambled R-MAT every variant and cuSPARSE are bound by the L2's request rate, one 4-byte x
value per 32-byte sector (NOTES SpMV 17 and 19). Renumbering the columns by how many nonzeros read
them (most used first, ties in their original order) packs the hot x values eight to a sector and
lets them stay in L1. Per call that costs one gather of x into the new order (``x[order]``); per
matrix, a histogram, a sort of the columns and one renumbered copy of the column indices. An
earlier try (``spmv-hot-h100.md``) packed only the hot columns, with two masked loads per gather,
and measured while the merge kernel's atomics still invalidated L1 at every chunk edge; here the
kernels are the shipped ones unchanged, only their column indices differ.

Each matrix (R-MAT, log-normal rows and permuted replicas of the large suite, round-robin by
family) gets the shipped variants on its own columns and on the renumbered ones (each renumbered
call includes its gather of x), every result checked against float64, timed in interleaved rounds
(least median). The renumbering itself is timed once per matrix (CUDA events, median of 5).
Writes ``spmv-reorder-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import statistics
import sys
from functools import partial

import torch
from scipy.stats import gmean
from large_set import check_all, events_ms, method
from spmv_bandwidth import share_of_copy

from seer.datasets.cases import SKEWED_FAMILIES, skewed_round_robin
from seer.kernels import spmv
from seer.profiling import _least_of_rounds
from seer.sparse import as_csr

VARIANTS = ("scalar_r128", "vector_g16", "vector_g64", "merge_c256", "merge_c512", "adaptive",
            "torch_csr")
HOT = 65536  # columns packed by ``hot_first``: 256 KB of x, about one SM's L1
# Each layout: (title, suffix of its timed columns); "kernel" layouts leave out the per-call x preparation
LAYOUTS = (("own columns", ""), ("renumbered", "+renumbered"), ("renumbered, kernel", "+renumbered kernel"),
           ("hot first", "+hot"), ("hot first, kernel", "+hot kernel"))


def by_use(indices: torch.Tensor, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(order, renumbered)``: ``order[j]`` is the original column that becomes column j (most
    used first, a stable sort so ties keep their order) and ``renumbered`` the column indices in
    the new numbering. Per call x becomes ``x[order]``: a gather of every x value."""
    uses = torch.bincount(indices, minlength=cols)
    order = torch.sort(uses, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank[order] = torch.arange(cols, device=order.device)
    return order, rank.index_select(0, indices).to(indices.dtype)


def hot_first(indices: torch.Tensor, cols: int, hot: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(hot_columns, renumbered)``: the ``hot`` most used columns become 0..hot-1 and every
    other column c becomes c + hot, so per call x becomes ``[x[hot_columns], x]``: a gather of
    ``hot`` values and a copy of x, no gather of the whole of x."""
    uses = torch.bincount(indices, minlength=cols)
    hot_columns = torch.topk(uses, min(hot, cols)).indices
    slot = torch.arange(cols, device=indices.device) + len(hot_columns)
    slot[hot_columns] = torch.arange(len(hot_columns), device=indices.device)
    return hot_columns, slot.index_select(0, indices).to(indices.dtype)


def timed_calls(csr, x) -> dict:
    """Every variant on every layout, plus the per-call preparations of x and the gather bounds."""
    order, renumbered_indices = by_use(csr.indices, csr.cols)
    renumbered = as_csr((csr.indptr, renumbered_indices, csr.values, csr.shape))
    hot_columns, hot_indices = hot_first(csr.indices, csr.cols, HOT)
    hot = as_csr((csr.indptr, hot_indices, csr.values, (csr.rows, csr.cols + len(hot_columns))))

    def x_renumbered():
        return x.index_select(0, order)

    def x_hot():
        return torch.cat((x.index_select(0, hot_columns), x))

    x_renumbered_ready, x_hot_ready = x_renumbered(), x_hot()
    runs = {}
    for name in VARIANTS:
        v = spmv.VARIANTS[name]
        runs[name] = lambda v=v: v.run(csr, x)
        runs[f"{name}+renumbered"] = lambda v=v: v.run(renumbered, x_renumbered())
        runs[f"{name}+renumbered kernel"] = lambda v=v: v.run(renumbered, x_renumbered_ready)
        runs[f"{name}+hot"] = lambda v=v: v.run(hot, x_hot())
        runs[f"{name}+hot kernel"] = lambda v=v: v.run(hot, x_hot_ready)
    # The same column sequence gathered with nothing else: the x requests of any CSR kernel, plus
    # a coalesced stream of nnz indices in and nnz values out (as many bytes as A's values).
    extras = {"x renumbered": x_renumbered, "x hot": x_hot,
              "gather bound": lambda: x.index_select(0, csr.indices),
              "gather bound renumbered": lambda: x_renumbered_ready.index_select(0, renumbered_indices)}
    return runs, extras


def measure(case, loaded) -> dict:
    parts, (x,) = case.build(loaded)
    csr = spmv.problem(parts)
    reference = spmv.reference(csr, x)
    runs, extras = timed_calls(csr, x)
    check_all(runs, reference, case.id)
    uses = torch.bincount(csr.indices, minlength=csr.cols).sort(descending=True).values
    return {"id": case.id, "rows": csr.rows, "cols": csr.cols, "nnz": csr.nnz,
            "hot_share": float(uses[:HOT].sum()) / csr.nnz,
            "renumbering_ms": events_ms(lambda: by_use(csr.indices, csr.cols)),
            "time_ms": _least_of_rounds({**runs, **extras})}


def best(times: dict, suffix: str) -> tuple[str, float]:
    name = min((n + suffix for n in VARIANTS), key=times.get)
    return name.removesuffix(suffix), times[name]


def family_groups(rows: list):
    for family in SKEWED_FAMILIES:
        for big in (False, True):
            group = [r for r in rows if r["id"].startswith(family) and (not big or r["nnz"] >= 10_000_000)]
            if group:
                yield family.rstrip("/") + (", nnz >= 10M" if big else ""), group


def describe(row: dict) -> str:
    t = row["time_ms"]
    return (", ".join(f"{title} {' '.join(map(str, best(t, suffix)))}" for title, suffix in LAYOUTS)
            + f", gather bound {t['gather bound']:.4f} ms")


def markdown(result: dict) -> str:
    rows, copy = result["matrices"], result["copy_gbps"]
    lines = [*method(result, "Columns renumbered by use"), "",
             "Layouts: *renumbered*, every column by use (per call x[order], a gather of all of x); *hot "
             f"first*, the {HOT:,} most used columns first and the others shifted (per call a gather of "
             f"{HOT:,} values and a copy of x); *kernel*: the same without the per-call preparation of x, "
             "what a kernel reading the hot values through a pointer select would approach. *Gather "
             "bound*: `x.index_select(0, indices)` with the matrix's column sequence, the x requests of any "
             "CSR kernel with no arithmetic.", "",
             "Geometric means per family of the best variant on the matrix's own columns over the best on "
             "each layout (> 1: the layout wins), and of the gather bound over the best own time (share of "
             "the bound reached); medians of the share of copy:", "",
             "| family | matrices | hot share | " + " | ".join(t for t, _ in LAYOUTS[1:])
             + " | share of gather bound | copy share, own | renumbered | hot first |",
             "|" + "---|" * (6 + len(LAYOUTS))]
    for label, group in family_groups(rows):
        t = [r["time_ms"] for r in group]
        ratios = [gmean([best(x, "")[1] / best(x, suffix)[1] for x in t]) for _, suffix in LAYOUTS[1:]]
        bound = gmean([x["gather bound"] / best(x, "")[1] for x in t])
        shares = [statistics.median(share_of_copy(r, best(r["time_ms"], s)[1], copy) for r in group)
                  for s in ("", "+renumbered", "+hot")]
        hot = statistics.median(r["hot_share"] for r in group)
        lines.append(f"| {label} | {len(group)} | {hot:.2f} | " + " | ".join(f"{v:.2f}x" for v in ratios)
                     + f" | {bound:.2f} | " + " | ".join(f"{v:.0%}" for v in shares) + " |")
    lines += ["", "Each variant's own ratio (own columns over the layout, geometric mean), per family:", "",
              "| family | layout | " + " | ".join(VARIANTS) + " |", "|" + "---|" * (2 + len(VARIANTS))]
    for label, group in family_groups(rows):
        for title, suffix in LAYOUTS[1:]:
            cells = [gmean([r["time_ms"][n] / r["time_ms"][n + suffix] for r in group]) for n in VARIANTS]
            lines.append(f"| {label} | {title} | " + " | ".join(f"{v:.2f}x" for v in cells) + " |")
    lines += ["", "Per matrix (ms): best variant per layout, the per-call preparations of x, the gather bound "
              "and the renumbering by use (once per matrix):", "",
              "| matrix | nnz | hot share | own | renumbered | hot first | hot first, kernel | x renumbered | "
              "x hot | gather bound | renumbering |", "|" + "---|" * 11]
    for r in rows:
        t = r["time_ms"]
        cells = [f"{n} {v:.4f}" for n, v in (best(t, s) for s in ("", "+renumbered", "+hot", "+hot kernel"))]
        lines.append(f"| {r['id']} | {r['nnz']:,} | {r['hot_share']:.2f} | " + " | ".join(cells)
                     + f" | {t['x renumbered']:.4f} | {t['x hot']:.4f} | {t['gather bound']:.4f} | "
                     f"{r['renumbering_ms']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    from large_set import run

    return run(__doc__, "spmv-reorder", partial(skewed_round_robin, largest_first=True), measure, describe,
               markdown, budget_s=300)


if __name__ == "__main__":
    sys.exit(main())
