"""benchmarks/spmv_merge_brackets.py on the CPU: the merge kernel with every bracket width computes
y = A x on a skewed matrix."""
import numpy as np
import torch
from conftest import load_benchmark

from seer.datasets.generators import rmat
from seer.kernels import spmv


def test_every_bracket_width_matches_scipy():
    brackets = load_benchmark("spmv_merge_brackets")
    matrix = rmat(9, 8, seed=4)
    rng = np.random.default_rng(4)
    values = rng.uniform(0.5, 1.5, matrix.nnz) * rng.choice([-1.0, 1.0], matrix.nnz)
    csr = spmv.problem((torch.from_numpy(matrix.indptr).int(), torch.from_numpy(matrix.indices).int(),
                        torch.from_numpy(values).float(), matrix.shape))
    x = rng.uniform(-1, 1, matrix.shape[1])
    expected = csr.to_scipy().astype(np.float64) @ x
    runs = brackets.timed_calls(csr, torch.from_numpy(x).float())
    assert len(runs) == len(brackets.CHUNKS) * len(brackets.BRACKETS) + 1
    for name, fn in runs.items():
        assert np.allclose(fn().double().numpy(), expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max()), name
