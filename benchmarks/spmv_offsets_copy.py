"""What `offsets_i16`'s copy of the columns costs, made by torch's ops as first shipped or by the one
Triton pass that replaced them (`seer.kernels.spmv.column_offsets`).

    python benchmarks/spmv_offsets_copy.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 150]

Why: benchmarks/NOTES.md, SpMV 59. The copy (each column less its row, as int16, and whether every
offset fits) takes 0.11-2.5 ms on the H100's inputs (`prepare_ms:offsets_i16`): several torch
launches (each nonzero's row by `repeat_interleave`, the subtraction, `aminmax`, the conversion)
and a read-back. That repays after ~130 calls in median, so the trees took the variant only for
1,000 calls and more. The one pass (a candidate here first, NOTES SpMV 60, then shipped): each
program walks its rows as the variant's own tile does, writes the offsets and folds their least and
greatest into the bounds read back once (since SpMV 63 behind a sample of the rows' ends, in 64
pairs).

Each input where the offsets can fit (bands, stencils, unpermuted replicas; smallest and largest
of each family by turns) gets both copies, checked equal (or both refused), each timed as the
tables time a preparation (`seer.profiling._preparation_ms`: CUDA events behind a sleep kernel, so
the host's planning is not counted but its read-back is; median of 5 on fresh problems). Writes
``spmv-offsets-copy-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import statistics
import sys
from types import SimpleNamespace

import torch

from large_set import by_turns, run
from seer.datasets.cases import NNZ_BANDS, nnz_band_label
from seer.kernels import spmv
from seer.profiling import _preparation_ms, provenance

FAMILIES = ("synthetic/banded/", "synthetic/stencil_2d/", "synthetic/stencil_3d/", "derived/")


def torch_ops_offsets(csr) -> torch.Tensor | None:
    """The copy as first shipped (commit 29ac44e): each nonzero's row by ``repeat_interleave``,
    the subtraction, ``aminmax`` read back, the conversion."""
    lengths = (csr.indptr[1:] - csr.indptr[:-1]).to(csr.indices.dtype)
    offsets = csr.indices - torch.repeat_interleave(lengths, output_size=csr.nnz)
    low, high = torch.stack(torch.aminmax(offsets)).tolist()
    return offsets.to(torch.int16) if spmv.fits_16_bits(low, high) else None


COPIES = {"torch ops (before)": torch_ops_offsets, "one pass (shipped)": spmv.column_offsets}


def preparations_ms(binds: dict, parts) -> dict[str, float]:
    """Each of ``binds`` timed as the tables time a preparation, on fresh problems built from ``parts``."""
    return {name: _preparation_ms(SimpleNamespace(bind=bind), lambda: spmv.problem(parts)) for name, bind in binds.items()}


def matrix_lines(rows: list[dict], key: str) -> list[str]:
    """The table of every matrix: its nnz, whether its offsets fit, and each of ``row[key]``'s times."""
    names = list(rows[0][key])
    lines = ["", "| matrix | nnz | fits | " + " | ".join(f"{n}, ms" for n in names) + " |", "|" + "---|" * (3 + len(names))]
    for r in rows:
        lines.append(f"| {r['id']} | {r['nnz']:,} | {'yes' if r['fits'] else 'no'} | "
                     + " | ".join(f"{r[key][n]:.3f}" for n in names) + " |")
    return lines


def same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return (a is None) == (b is None) and (a is None or torch.equal(a, b))


def select(cases: list) -> list:
    """The families where offsets can fit, by turns, each family smallest and largest by turns."""
    return by_turns([[c for c in cases if c.id.startswith(f) and (f != "derived/" or "permute0" in c.id)] for f in FAMILIES])


def measure(case, loaded) -> dict:
    parts, _ = case.build(loaded)
    csr = spmv.problem(parts)
    made = {name: copy(csr) for name, copy in COPIES.items()}
    before, shipped = made.values()
    if not same(before, shipped):
        raise AssertionError(f"the one-pass offsets differ from torch's ops' on {case.id}")
    return {"id": case.id, "rows": csr.rows, "nnz": csr.nnz, "fits": shipped is not None,
            "copy_ms": preparations_ms(COPIES, parts)}


def describe(row: dict) -> str:
    before, one_pass = row["copy_ms"].values()
    return f"{row['nnz']:,} nnz, fits {row['fits']}: {before:.3f} -> {one_pass:.3f} ms"


def markdown(result: dict) -> str:
    rows = result["matrices"]
    names = list(rows[0]["copy_ms"])  # as the run named them
    lines = [f"# offsets_i16's copy of the columns, {result['device']['name']}", "",
             provenance(result, result["command"]), "",
             "Each copy timed as the profile tables time a preparation (CUDA events behind a sleep kernel: "
             "kernels and read-backs count, host planning does not; median of 5 on fresh problems); the two "
             "copies checked equal on every input.", "",
             "| nnz | inputs | " + " | ".join(f"{n}, median ms" for n in names) + f" | {names[0]} over {names[1]}, median |",
             "|" + "---|" * (3 + len(names))]
    bands = [(nnz_band_label(low, high), low, high) for low, high in NNZ_BANDS]
    for label, low, high in [*bands, ("all", 0, float("inf"))]:
        group = [r for r in rows if low <= r["nnz"] < high]
        if group:
            medians = [statistics.median(r["copy_ms"][n] for r in group) for n in names]
            ratio = statistics.median(r["copy_ms"][names[0]] / r["copy_ms"][names[1]] for r in group)
            lines.append(f"| {label} | {len(group)} | " + " | ".join(f"{m:.3f}" for m in medians) + f" | {ratio:.1f}x |")
    return "\n".join(lines + matrix_lines(rows, "copy_ms")) + "\n"


if __name__ == "__main__":
    sys.exit(run(__doc__, "spmv-offsets-copy", select, measure, describe, markdown, budget_s=150, copy_ceiling=False))
