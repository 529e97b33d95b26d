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
