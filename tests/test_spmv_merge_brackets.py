"""benchmarks/spmv_merge_brackets.py on the CPU: the merge kernel with every bracket width computes
y = A x on a skewed matrix."""
import numpy as np
from conftest import load_benchmark, skewed_problem


def test_every_bracket_width_matches_scipy():
    brackets = load_benchmark("spmv_merge_brackets")
    csr, x, expected = skewed_problem(4)
    runs = brackets.timed_calls(csr, x)
    assert len(runs) == len(brackets.CHUNKS) * len(brackets.BRACKETS) + 1
    for name, fn in runs.items():
        assert np.allclose(fn().double().numpy(), expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max()), name
