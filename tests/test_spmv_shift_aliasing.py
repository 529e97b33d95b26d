"""benchmarks/spmv_shift_aliasing.py: the strided sample it compares against, and its output."""
import json

import numpy as np
import pytest
from conftest import load_benchmark, shipped_spmv_rows

from seer import sparse

STENCIL = "synthetic/stencil_3d/n42-points27/seed0"  # 74,088 rows, sampled every 4th before: that read 0.952


def test_the_strided_sample_is_every_stride_th_row():
    script = load_benchmark("spmv_shift_aliasing")
    rows = sparse.SHIFT_MIN_ROWS + 5
    stride = sparse.shift_stride(rows)
    strided = script.strided_rows(rows)
    assert strided.tolist() == list(range(stride, rows, stride))[: sparse.shift_samples(rows)]
    shipped = sparse.sampled_rows(rows)
    assert len(shipped) == len(strided) and np.all((shipped > strided - stride) & (shipped <= strided))


def test_reports_a_stencil_the_strided_sample_misreads(tmp_path, suitesparse_dir):
    script = load_benchmark("spmv_shift_aliasing")
    table = shipped_spmv_rows(tmp_path, ["HB/bcsstk04", STENCIL])
    script.main(["--matrices", str(suitesparse_dir), "--table", str(table), "--out", str(tmp_path)])
    (row,) = json.loads((tmp_path / "spmv-shift-aliasing-cpu.json").read_text())["rows"]  # bcsstk04: too small
    assert row["id"] == STENCIL and row["every_row"] == pytest.approx(0.9286, abs=0.001)
    assert abs(row["shipped"] - row["every_row"]) < 0.01 < abs(row["strided"] - row["every_row"])
    assert row["table"] == row["shipped"]  # the shipped table holds the count as the pass samples it now
    assert STENCIL in (tmp_path / "spmv-shift-aliasing-cpu.md").read_text()
