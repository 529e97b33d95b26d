"""benchmarks/spmv_validation.py on the CPU: its baseline checks what validation checks, and its
summary bands every input once."""
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import load_benchmark

from seer.sparse import as_csr


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("spmv_validation")


def test_previous_check_reads_what_the_pass_checks(bench):
    m = sp.random(300, 200, density=0.05, format="csr", random_state=1, dtype=np.float32)
    csr = as_csr(m)
    first, last, monotone, lo, hi = bench.previous_check(csr)
    assert (first, last, monotone) == (0, m.nnz, 1)
    assert (lo, hi) == (m.indices.min(), m.indices.max())


def test_summary_bands(bench):
    rows = [{"source": "real", "nnz": 500}, {"source": "synthetic", "nnz": 2_000_000},
            {"source": "derived", "nnz": 30_000_000}, {"source": "synthetic", "nnz": 3_000_000}]
    for i, r in enumerate(rows):
        r.update({k: float(i) for k in ("before_us", "validate_us", "plain_us", "gather_us", "kernel_us", "stats_us")})
    bands = {s["subset"]: s for s in bench.summary(rows)}
    assert sum(s["inputs"] for s in bands.values()) == len(rows)
    assert bands["real"]["inputs"] == 1
    assert bands["generated, nnz 1e6-1e7"]["inputs"] == 2 and bands["generated, nnz 1e6-1e7"]["stats_us"] == 2.0
    assert bands["generated, nnz 1e7+"]["inputs"] == 1
    assert "| real | 1 |" in bench.markdown({"environment": {"device": {"name": "cpu"}, "date": "today",
                                                                "versions": {"torch": "t", "triton": "t"}},
                                               "command": "c", "summary": bench.summary(rows), "rows": rows})


def test_first_launch_follows_the_validating_products_bounds(bench, monkeypatch):
    """Within the bounds a first call validates through the validating product, whose statistics
    are then the ones charged; past either bound, through the pass."""
    from seer.kernels import spmv
    monkeypatch.setattr(spmv, "VALIDATING_PRODUCT_MAX_ROWS", 50)
    monkeypatch.setattr(spmv, "VALIDATING_PRODUCT_MAX_NNZ", 400)
    inside = as_csr(sp.random(50, 60, density=0.1, format="csr", random_state=2, dtype=np.float32))
    assert bench.first_launch(inside) == "validating product"
    assert bench.first_launch(as_csr(sp.random(51, 60, density=0.1, format="csr", random_state=2, dtype=np.float32))) == "pass"
    assert bench.first_launch(as_csr(sp.random(50, 60, density=0.2, format="csr", random_state=2, dtype=np.float32))) == "pass"
