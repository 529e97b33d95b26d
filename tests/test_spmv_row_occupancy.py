"""benchmarks/spmv_row_occupancy.py on the CPU: every candidate tile and register cap computes y = A x."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import load_benchmark

from seer.kernels import spmv


@pytest.fixture(scope="module")
def occupancy():
    return load_benchmark("spmv_row_occupancy")


def test_candidates_cover_each_tile_and_cap(occupancy):
    configs = occupancy.configurations()
    assert len(configs) == len(occupancy.TILES) * (2 * len(occupancy.CAPS) - 1)
    assert configs["vector_g16_half_r32"] == (16, 16, 32) and configs["vector_g256_r40"] == (256, 4, 40)


def test_every_run_matches_scipy(occupancy):
    rng = np.random.default_rng(11)
    a = sp.random(150, 120, density=0.2, format="csr", random_state=11)
    a.data = rng.uniform(0.5, 1.5, a.nnz) * rng.choice([-1.0, 1.0], a.nnz)
    csr = spmv.problem((torch.from_numpy(a.indptr).int(), torch.from_numpy(a.indices).int(),
                        torch.from_numpy(a.data).float(), a.shape))
    x = torch.from_numpy(rng.uniform(-1, 1, 120)).float()
    expected = a @ x.double().numpy()
    runs = occupancy.timed_calls(csr, x)
    assert len(runs) == len(load_benchmark("spmv_vector_loads").SHIPPED) + len(occupancy.configurations())
    for name, fn in runs.items():
        assert np.allclose(fn().double().numpy(), expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max()), name
