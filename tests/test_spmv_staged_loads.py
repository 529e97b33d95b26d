"""benchmarks/spmv_staged_loads.py on the CPU: every pipelined candidate computes y = A x (the
interpreter runs the loop unpipelined; the GPU run checks each result against float64 too)."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import load_benchmark

from seer.kernels import spmv


@pytest.fixture(scope="module")
def staged():
    return load_benchmark("spmv_staged_loads")


def test_every_run_matches_scipy(staged):
    rng = np.random.default_rng(13)
    a = sp.random(170, 130, density=0.15, format="csr", random_state=13)
    a.data = rng.uniform(0.5, 1.5, a.nnz) * rng.choice([-1.0, 1.0], a.nnz)
    csr = spmv.problem((torch.from_numpy(a.indptr).int(), torch.from_numpy(a.indices).int(),
                        torch.from_numpy(a.data).float(), a.shape))
    x = torch.from_numpy(rng.uniform(-1, 1, 130)).float()
    expected = a @ x.double().numpy()
    runs = staged.timed_calls(csr, x)
    assert len(runs) == len(load_benchmark("spmv_vector_loads").SHIPPED) + len(staged.CANDIDATES) * len(staged.STAGES)
    for name, fn in runs.items():
        assert np.allclose(fn().double().numpy(), expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max()), name
