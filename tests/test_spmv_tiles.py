"""benchmarks/spmv_tiles.py on the CPU: its prefetching kernel against scipy, and its report from the
committed H200 results."""
import json
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import ROOT, load_benchmark

from seer.kernels import spmv


@pytest.fixture(scope="module")
def tiles_benchmark():
    return load_benchmark("spmv_tiles")


@pytest.mark.parametrize("group", [4, 8, 16, 32])
def test_prefetching_kernel_matches_scipy(tiles_benchmark, group):
    rng = np.random.default_rng(group)
    lengths = rng.integers(0, min(3 * group, 90), 150)  # empty rows, rows shorter and longer than the group
    lengths[7] = 0
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(90, n, replace=False)) for n in lengths]).astype(np.int32)
    values = rng.uniform(0.5, 1.5, indptr[-1]) * rng.choice([-1.0, 1.0], indptr[-1])
    matrix = sp.csr_matrix((values, indices, indptr), shape=(150, 90))
    x = rng.uniform(-1, 1, 90)
    csr = spmv.problem((torch.from_numpy(indptr).int(), torch.from_numpy(indices),
                        torch.from_numpy(values).float(), matrix.shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        torch.use_deterministic_algorithms(True, warn_only=True)  # torch.empty fills with NaN: every row must be written
        try:
            y = tiles_benchmark.prefetch_spmv(csr, torch.from_numpy(x).float(), group)
        finally:
            torch.use_deterministic_algorithms(False)
    expected = matrix @ x
    assert np.allclose(y.double().numpy(), expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_report_from_committed_results(tiles_benchmark):
    result = json.loads((ROOT / "benchmarks" / "results" / "spmv-tiles-h200.json").read_text())
    text = tiles_benchmark.markdown(result)
    assert f"Median over {len(result['matrices'])} matrices" in text
    assert all(m["id"] in text for m in result["matrices"])
    assert "| prefetch_g8 |" in text and "| cusparse |" in text
