"""What `offsets_i16`'s copy of the columns costs, made by torch's ops as shipped or by one Triton pass.

    python benchmarks/spmv_offsets_copy.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 150]

Why: benchmarks/NOTES.md, SpMV 59. The copy (each column less its row, as int16, and whether every
offset fits) takes 0.11-2.5 ms on the H100's inputs (`prepare_ms:offsets_i16`): several torch
launches (each nonzero's row by `repeat_interleave`, the subtraction, `aminmax`, the conversion)
and a read-back. That repays after ~130 calls in median, so the trees take the variant only for
1,000 calls and more. The candidate here is one pass: each program walks its rows as the variant's
own tile does, writes the offsets and keeps their least and greatest, which two atomics gather for
one read-back.

Each input where the offsets can fit (bands, stencils, unpermuted replicas; smallest and largest
of each family by turns) gets both copies, checked equal (or both refused), each timed as the
tables time a preparation (`seer.profiling._preparation_ms`: CUDA events behind a sleep kernel, so
the host's planning is not counted but its read-back is; median of 5 on fresh problems). Writes
``spmv-offsets-copy-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import itertools
import statistics
import sys
from types import SimpleNamespace

import torch
import triton
import triton.language as tl

from large_set import run
from seer.datasets.cases import NNZ_BANDS, nnz_band_label
from seer.kernels import spmv
from seer.launch import cdiv
from seer.profiling import _preparation_ms, provenance

FAMILIES = ("synthetic/banded/", "synthetic/stencil_2d/", "synthetic/stencil_3d/", "derived/")


@triton.jit
def _offsets_kernel(indptr, indices, offsets, bounds, rows, ROWS: tl.constexpr, G: tl.constexpr):
    """Program p writes the offsets of rows [p * ROWS, (p + 1) * ROWS) and adds their least and
    greatest into ``bounds`` (which start at 0: only whether a bound is passed matters)."""
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = row < rows
    start = tl.load(indptr + row, mask=ok, other=0)
    end = tl.load(indptr + row + 1, mask=ok, other=0)
    lane = tl.arange(0, G)
    low = tl.zeros((ROWS, G), dtype=indices.dtype.element_ty)
    high = tl.zeros((ROWS, G), dtype=indices.dtype.element_ty)
    for step in range(0, tl.max(end - start, axis=0), G):
        k = start[:, None] + lane[None, :] + step
        inside = k < end[:, None]
        offset = tl.where(inside, tl.load(indices + k, mask=inside, other=0) - row[:, None], 0)
        tl.store(offsets + k, offset.to(tl.int16), mask=inside)
        low = tl.minimum(low, offset)
        high = tl.maximum(high, offset)
    tl.atomic_min(bounds, tl.min(tl.min(low, axis=1), axis=0))
    tl.atomic_max(bounds + 1, tl.max(tl.max(high, axis=1), axis=0))


def one_pass_offsets(csr) -> torch.Tensor | None:
    """The candidate: :func:`seer.kernels.spmv.column_offsets` in one launch and one read-back."""
    bounds = torch.zeros(2, dtype=csr.indices.dtype, device=csr.device)
    offsets = torch.empty(csr.nnz, dtype=torch.int16, device=csr.device)
    rows_per_program, group = spmv._vector_tile(cdiv(csr.nnz, csr.rows))
    _offsets_kernel[(cdiv(csr.rows, rows_per_program),)](csr.indptr, csr.indices, offsets, bounds, csr.rows,
                                                         ROWS=rows_per_program, G=group, num_warps=4)
    low, high = bounds.tolist()
    return offsets if spmv.fits_16_bits(low, high) else None


COPIES = {"torch ops (shipped)": spmv.column_offsets, "one pass": one_pass_offsets}


def same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return (a is None) == (b is None) and (a is None or torch.equal(a, b))


def select(cases: list) -> list:
    """The families where offsets can fit, by turns, each family smallest and largest by turns."""
    def alternate(members):
        ordered = sorted(members, key=lambda c: c.extra.get("size", 0))
        return [c for pair in itertools.zip_longest(ordered, reversed(ordered)) for c in pair if c is not None][
            :len(ordered)]

    fitting = [[c for c in cases if c.id.startswith(f) and (f != "derived/" or "permute0" in c.id)] for f in FAMILIES]
    return [c for turn in itertools.zip_longest(*map(alternate, fitting)) for c in turn if c is not None]


def measure(case, loaded) -> dict:
    parts, _ = case.build(loaded)
    csr = spmv.problem(parts)
    made = {name: copy(csr) for name, copy in COPIES.items()}
    shipped, candidate = made.values()
    if not same(shipped, candidate):
        raise AssertionError(f"the one-pass offsets differ from the shipped ones on {case.id}")
    ms = {name: _preparation_ms(SimpleNamespace(bind=copy), lambda: spmv.problem(parts)) for name, copy in COPIES.items()}
    return {"id": case.id, "rows": csr.rows, "nnz": csr.nnz, "fits": shipped is not None, "copy_ms": ms}


def describe(row: dict) -> str:
    shipped, candidate = row["copy_ms"].values()
    return f"{row['nnz']:,} nnz, fits {row['fits']}: {shipped:.3f} -> {candidate:.3f} ms"


def markdown(result: dict) -> str:
    rows = result["matrices"]
    names = list(COPIES)
    lines = [f"# offsets_i16's copy of the columns, {result['device']['name']}", "",
             provenance(result, result["command"]), "",
             "Each copy timed as the profile tables time a preparation (CUDA events behind a sleep kernel: "
             "kernels and read-backs count, host planning does not; median of 5 on fresh problems); the two "
             "copies checked equal on every input.", "",
             "| nnz | inputs | " + " | ".join(f"{n}, median ms" for n in names) + " | shipped over one pass, median |",
             "|" + "---|" * (3 + len(names))]
    bands = [(nnz_band_label(low, high), low, high) for low, high in NNZ_BANDS]
    for label, low, high in [*bands, ("all", 0, float("inf"))]:
        group = [r for r in rows if low <= r["nnz"] < high]
        if group:
            medians = [statistics.median(r["copy_ms"][n] for r in group) for n in names]
            ratio = statistics.median(r["copy_ms"][names[0]] / r["copy_ms"][names[1]] for r in group)
            lines.append(f"| {label} | {len(group)} | " + " | ".join(f"{m:.3f}" for m in medians) + f" | {ratio:.1f}x |")
    lines += ["", "| matrix | nnz | fits | " + " | ".join(f"{n}, ms" for n in names) + " |", "|" + "---|" * (3 + len(names))]
    for r in rows:
        lines.append(f"| {r['id']} | {r['nnz']:,} | {'yes' if r['fits'] else 'no'} | "
                     + " | ".join(f"{r['copy_ms'][n]:.3f}" for n in names) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(run(__doc__, "spmv-offsets-copy", select, measure, describe, markdown, budget_s=150, copy_ceiling=False))
