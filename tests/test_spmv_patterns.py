"""benchmarks/spmv_patterns.py on the CPU: the pattern it finds, and every candidate (each tile,
packed row starts or not) against scipy on stencils, bands and matrices whose rows follow no
pattern; the report renders from a result."""
import numpy as np
import pytest
import torch
from conftest import load_benchmark

from seer.datasets import generators
from seer.kernels import spmv


@pytest.fixture(scope="module")
def patterns():
    return load_benchmark("spmv_patterns")


MATRICES = {
    "stencil 2-D": (lambda: generators.stencil_2d(11, 5, seed=1), 5, 9 * 9),
    "stencil 3-D, 27 points": (lambda: generators.stencil_3d(6, 27, seed=2), 27, 4**3),
    "band of 19": (lambda: generators.banded(300, 9, seed=3), 19, 300 - 18),
    "half-filled band": (lambda: generators.banded(200, 5, fill=0.5, seed=4), None, None),
}


@pytest.mark.parametrize("name", MATRICES)
def test_candidates_match_scipy(patterns, name):
    build, length, following = MATRICES[name]
    a = build()
    csr = spmv.problem((torch.from_numpy(a.indptr).int(), torch.from_numpy(a.indices).int(),
                        torch.from_numpy(a.data).float(), a.shape))
    prepared = patterns.diagonal_pattern(csr)
    if length is not None:
        assert prepared[1] == length and int(prepared[2].sum()) == following
    x = np.random.default_rng(5).uniform(-1, 1, a.shape[1])
    expected = a.astype(np.float64) @ x
    for config in patterns.configurations().values():
        y = patterns.diagonal_spmv(csr, torch.from_numpy(x).float(), prepared, *config).double().numpy()
        assert np.allclose(y, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max()), config


def test_report_renders(patterns):
    names = list(patterns.configurations())
    times = {**{n: 2.0 for n in patterns.SHIPPED}, **{n: 1.5 for n in names}, names[0]: 1.0}
    row = {"id": "synthetic/banded/x", "rows": 1000, "cols": 1000, "nnz": 3000, "time_ms": times,
           "preparation_ms": 0.5, "length": 3, "flagged_rows": 998, "flagged_nnz": 2994, "pattern": [-1, 0, 1]}
    result = {"device": {"name": "GPU"}, "versions": {}, "date": "d", "command": "c", "copy_gbps": 1000.0,
              "matrices": [row]}
    text = patterns.markdown(result)
    assert f"| {names[0]} | 2.000x | 1 |" in text and "| 2.00x | 0.50 | 0 |" in text
