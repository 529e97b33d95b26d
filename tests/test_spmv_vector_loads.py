"""benchmarks/spmv_vector_loads.py on the CPU: the aligned candidates match scipy, whatever the
rows' alignment, with empty rows and with the arrays' last partial group of four in any row."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import assert_runs_match, load_benchmark

from seer.kernels import spmv


@pytest.fixture(scope="module")
def loads():
    return load_benchmark("spmv_vector_loads")


def matrix(rows: int, cols: int, density: float, seed: int, last_row_nnz: int):
    """Random rows (some empty), the last row holding ``last_row_nnz`` nonzeros so that the
    arrays' final partial group falls in one row or across several."""
    rng = np.random.default_rng(seed)
    a = sp.random(rows, cols, density=density, format="lil", random_state=seed)
    a[rows - 1, :] = 0
    a[rows - 1, rng.choice(cols, last_row_nnz, replace=False)] = rng.uniform(0.5, 1.5, last_row_nnz)
    a = a.tocsr()
    a.data = rng.uniform(0.5, 1.5, a.nnz) * rng.choice([-1.0, 1.0], a.nnz)
    a.sort_indices()
    return a


@pytest.mark.parametrize("seed,last_row_nnz", [(0, 1), (1, 2), (2, 3), (3, 5), (4, 0)])
@pytest.mark.parametrize("width,rows_per_program", [(4, 128), (16, 32), (64, 8)])
def test_aligned_candidates_match_scipy(loads, seed, last_row_nnz, width, rows_per_program):
    a = matrix(300, 170, 0.06, seed, last_row_nnz)
    csr = spmv.problem((torch.from_numpy(a.indptr).int(), torch.from_numpy(a.indices).int(),
                        torch.from_numpy(a.data).float(), a.shape))
    x = np.random.default_rng(seed + 10).uniform(-1, 1, a.shape[1])
    expected = a @ x
    y = loads.aligned_spmv(csr, torch.from_numpy(x).float(), width, rows_per_program).double().numpy()
    assert np.allclose(y, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_every_timed_run_is_named_and_correct(loads):
    a = matrix(200, 200, 0.05, 7, 3)
    csr = spmv.problem((torch.from_numpy(a.indptr).int(), torch.from_numpy(a.indices).int(),
                        torch.from_numpy(a.data).float(), a.shape))
    x = torch.from_numpy(np.random.default_rng(8).uniform(-1, 1, 200)).float()
    runs = loads.timed_calls(csr, x)
    assert len(runs) == len(loads.SHIPPED) + len(loads.CANDIDATES)
    assert_runs_match(runs, a @ x.double().numpy())
