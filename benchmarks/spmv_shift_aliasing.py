"""Does the shifted-row sample alias with the matrix's own period? (host only)

    python benchmarks/spmv_shift_aliasing.py --matrices ../shared/suitesparse \
        --table datasets/profiles/spmv-h200.csv [--out benchmarks/results] [--budget-s 3000]

``shifted_row_frac`` (the share of rows that repeat the row before one column to the right: the
diagonal variants' ground) is counted by the validation pass on 16,384 sampled rows. It sampled
rows stride, 2 stride, ... (stride = rows // 16,384), and a grid stencil's rows repeat with the
grid's side n: where stride and n share a large factor every sample lands on the same few places
of a grid line, so the count reads the share of those places instead of the whole matrix's (a
27-point stencil of side 84 has stride 36 = 3 * 84 / 7: a seventh of the samples fall on a line's
first point, which never shifts, and the sample reads 0.857 against 0.964 over every row).
For every input of the table with a sample (rows >= SHIFT_MIN_ROWS), this computes the fraction
from the shipped sample (``seer.sparse.sampled_rows``), from the strided sample it replaced, and
from every row, and the table's column beside them. Writes ``spmv-shift-aliasing-cpu.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from seer import sparse
from seer.datasets.cases import spmv_cases
from seer.profiling import environment, measured_within_budget, provenance, write_result
from seer.table import read_frame


def strided_rows(rows: int) -> np.ndarray:
    """The sample before: rows stride, 2 stride, ... below ``rows``."""
    stride = sparse.shift_stride(rows)
    return np.arange(stride, rows, stride)[: sparse.shift_samples(rows)]


def shifted_share(indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray) -> float:
    return sparse.shifted_rows_among(indptr, indices, rows) / len(rows)


def fractions(case, loaded, table_value: dict) -> dict:
    matrix = loaded[0]
    indptr, indices, count = matrix.indptr.astype(np.int64), matrix.indices, matrix.shape[0]
    return {"id": case.id, "group": case.group, "rows": count, "nnz": int(matrix.nnz),
            "table": table_value.get(case.id),
            "strided": shifted_share(indptr, indices, strided_rows(count)),
            "shipped": shifted_share(indptr, indices, sparse.sampled_rows(count)),
            "every_row": shifted_share(indptr, indices, np.arange(1, count))}


def render(result: dict) -> str:
    rows = result["rows"]
    lines = [f"# The shifted-row sample against every row (host: {result['host']})", "",
             provenance(result, result["command"]), "", result["method"], ""]
    if not rows:
        return "\n".join([*lines, "No input with a sample was measured."]) + "\n"
    errors = {k: np.abs([r[k] - r["every_row"] for r in rows]) for k in ("strided", "shipped")}
    lines += [f"{len(rows)} inputs with a sample. Error against every row, strided / shipped sample: "
              f"median {np.median(errors['strided']):.4f} / {np.median(errors['shipped']):.4f}, "
              f"largest {errors['strided'].max():.4f} / {errors['shipped'].max():.4f}; "
              f"off by more than 0.01: {int((errors['strided'] > 0.01).sum())} / {int((errors['shipped'] > 0.01).sum())}.",
              "", "Inputs whose strided sample is off by more than 0.01:", "",
              "| matrix | rows | table | strided | shipped | every row |", "|---|---|---|---|---|---|"]
    for r, error in zip(rows, errors["strided"]):
        if error > 0.01:
            table = "-" if r["table"] is None else f"{r['table']:.4f}"
            lines.append(f"| {r['id']} | {r['rows']:,} | {table} | {r['strided']:.4f} | {r['shipped']:.4f} | "
                         f"{r['every_row']:.4f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=Path, required=True)
    parser.add_argument("--table", type=Path, required=True, help="a profile table whose inputs and column to check")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=3000)
    args = parser.parse_args(argv)
    frame = read_frame(args.table)
    sampled = frame[frame["rows"] >= sparse.SHIFT_MIN_ROWS]
    table_value = dict(zip(sampled["id"], sampled["shifted_row_frac"]))
    cases = [c for c in spmv_cases([args.matrices], synthetic="large", device="cpu") if c.id in table_value]
    rows = measured_within_budget(cases, lambda case, loaded: fractions(case, loaded, table_value), args.budget_s,
                                  lambda r: f"strided {r['strided']:.4f}, shipped {r['shipped']:.4f}, "
                                            f"every row {r['every_row']:.4f}")
    command = " ".join(["python benchmarks/spmv_shift_aliasing.py", *(sys.argv[1:] if argv is None else argv)])
    result = {**environment(torch.device("cpu")), "host": f"{sys.platform}, CPU", "command": command,
              "method": "Fractions of the sampled rows (and of every row but the first) that shift the row before "
                        "them (seer.sparse.shifted_rows_among); `table`: the table's shifted_row_frac column.",
              "rows": rows}
    write_result(args.out, "spmv-shift-aliasing-cpu", result, render(result))


if __name__ == "__main__":
    main()
