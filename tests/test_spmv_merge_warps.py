"""benchmarks/spmv_merge_warps.py on the CPU: the merge kernel on every chunk and warp count
computes y = A x on a skewed matrix."""
import numpy as np
from conftest import load_benchmark, skewed_problem


def test_every_chunk_and_warp_count_matches_scipy():
    warps = load_benchmark("spmv_merge_warps")
    csr, x, expected = skewed_problem(6)
    runs = warps.timed_calls(csr, x)
    assert len(runs) == len(warps.CHUNKS) * len(warps.WARPS) + 1
    for name, fn in runs.items():
        assert np.allclose(fn().double().numpy(), expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max()), name
