"""benchmarks/spmv_follows_pattern.py: its matrix with one long row, and its summary."""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import spmv_follows_pattern  # noqa: E402


def test_one_long_row_is_a_valid_matrix_with_that_row():
    from seer.sparse import as_csr

    import torch

    matrix = spmv_follows_pattern.one_long_row(1000, 4, 100)
    assert np.diff(matrix.indptr).tolist() == [4] * 500 + [100] + [4] * 499
    assert matrix.indices[matrix.indptr[500]:matrix.indptr[501]].tolist() == list(range(0, 1000, 10))
    parts = tuple(torch.from_numpy(a.astype(np.int32)) for a in (matrix.indptr, matrix.indices))
    assert as_csr((*parts, torch.from_numpy(matrix.data), matrix.shape)).nnz == 999 * 4 + 100  # sorted, in range


def test_the_summary_gives_each_inputs_ratio():
    row = {"rows": 10, "nnz": 100, "longest": 50, "following": 1, "before_ms": 2.0, "after_ms": 0.5}
    result = {"device": {"name": "Test GPU"}, "date": "2026-12-02", "versions": {"torch": "t", "triton": "3.6"},
              "command": "python benchmarks/spmv_follows_pattern.py", "before": "old.py", "inputs": {"m": row}}
    assert "| m | 10 | 100 | 50 | 1 | 2.000 | 0.500 | 0.250 |" in spmv_follows_pattern.markdown(result)
