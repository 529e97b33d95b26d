"""benchmarks/out_check.py on the CPU (Triton interpreter): its paths compute y against float64,
the bare ones run without the overlap check and put it back after their loop."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import load_benchmark

import seer.kernels.spmv as spmv


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("out_check")


def test_paths_and_their_bare_loops(bench, monkeypatch):
    m = sp.random(300, 300, density=0.02, format="csr", random_state=4, dtype=np.float32)
    m.data = np.random.default_rng(4).uniform(0.5, 1.5, m.nnz).astype(np.float32)
    A = torch.sparse_csr_tensor(torch.from_numpy(m.indptr), torch.from_numpy(m.indices), torch.from_numpy(m.data),
                                m.shape)
    found = bench.paths(A, torch.rand(300))  # checks every path's y and the refusal of an out over x
    assert sorted(found) == ["bound_call_out", "bound_call_out_bare", "dispatch_out", "dispatch_out_bare"]
    monkeypatch.setattr(bench, "CALLS", 2)
    seen = []
    checked = spmv._check_apart
    loops = bench.loops({"probe": lambda: seen.append(spmv._check_apart is checked),
                         "probe_bare": lambda: seen.append(spmv._check_apart is bench._always_apart)})
    for loop in loops.values():
        loop()
    assert seen == [True, True, True, True] and spmv._check_apart is checked
