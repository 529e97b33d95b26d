"""benchmarks/spmv_diagonal_major.py on the CPU: every candidate tile against scipy where the copy is
made and where it is not, the bytes a candidate moves, and the report from a result."""
import numpy as np
import pytest
import torch
from conftest import load_benchmark
from test_spmv_kernels import assert_spmv_close, random_vector, to_seer

from seer.datasets import generators


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("spmv_diagonal_major")


@pytest.mark.parametrize("matrix", [generators.stencil_2d(40, 9, seed=1), generators.banded(400, 6, fill=0.5, seed=2)],
                         ids=["stencil, copied", "half-filled band, not copied"])
def test_candidates_match_scipy(bench, matrix):
    csr, exact = to_seer(matrix)
    x = random_vector(np.random.default_rng(3), csr.cols, torch.float32)
    runs = bench.candidate_runs(csr, x)
    assert set(runs) == set(bench.configurations())
    for run in runs.values():
        assert_spmv_close(run(), exact, x, torch.float32)


def test_own_bytes_count_the_copy_and_the_rows_left_in_csr(bench):
    row = {"rows": 1000, "cols": 1000, "nnz": 2998, "length": 3, "flagged_rows": 998}
    padded = 1024
    # the copy (zeros too), 2 end rows of 2 nonzeros in CSR (8 bytes each, 8 of row pointers), flags, x, y
    assert bench.own_bytes(row) == 4 * 3 * padded + 8 * 4 + 8 * 2 + 1000 + 4 * 1000 + 4 * 1000


def test_report_renders(bench):
    names = list(bench.configurations())
    times = {**{n: 2.0 for n in bench.SHIPPED}, **{n: 1.5 for n in names}, names[0]: 1.0}
    row = {"id": "synthetic/banded/x", "rows": 1000, "cols": 1000, "nnz": 2998, "time_ms": times,
           "preparation_ms": 0.5, "length": 3, "flagged_rows": 998, "stored": True}
    result = {"device": {"name": "GPU"}, "versions": {}, "date": "d", "command": "c", "copy_gbps": 1000.0,
              "matrices": [row, {**row, "stored": False, "length": 0, "flagged_rows": 0}]}
    text = bench.markdown(result)
    assert "| 2.00x | 0.50 | 0 |" in text and "(1 of 2 matrices)" in text and f"| {names[0]} | 2.000x | 2 |" not in text
    assert f"| {names[0]} | 2.000x | 1 |" in text
