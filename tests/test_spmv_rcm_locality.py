"""benchmarks/spmv_rcm_locality.py on a small permuted replica: the order brings the nonzeros
back near the diagonal, keeps them all, and the repayment bound is the cost over half a call."""
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import load_benchmark

from seer.datasets.generators import banded, block_replicate


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("spmv_rcm_locality")


def test_near_diagonal_counts_by_row(bench):
    matrix = sp.csr_matrix(np.array([[1, 0, 0, 1], [0, 1, 0, 0], [1, 0, 0, 1]], dtype=np.float32))
    assert bench.near_diagonal(matrix, 1) == pytest.approx(2 / 5)  # (0, 0) and (1, 1)
    assert bench.near_diagonal(matrix, 2) == pytest.approx(3 / 5)  # and (2, 3)
    assert bench.near_diagonal(matrix, 4) == 1.0


def test_reordering_a_permuted_replica(bench):
    replica = block_replicate(banded(200, 2), copies=400, coupling=40, seed=1)  # 80,000 rows

    class Case:
        id = "derived/replica"

    row = bench.reordered(Case, (replica,), {"derived/replica": 0.2})
    assert row["nnz"] == replica.nnz and row["near_1024_before"] < 0.3 and row["near_1024_after"] > 0.9
    assert row["calls_to_repay_if_halved"] == pytest.approx((row["order_s"] + row["apply_s"]) * 1e3 / 0.1)
