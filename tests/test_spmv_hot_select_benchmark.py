"""benchmarks/spmv_hot_select.py on the CPU: the per-call launches it times alone do what the
merge call does before its kernel (the accumulator zeroed, the hot values packed), and the report
renders from a result."""
import numpy as np
import pytest
import torch
from conftest import load_benchmark
from test_spmv_kernels import random_csr, skewed_lengths, to_seer

from seer.kernels import spmv


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("spmv_hot_select")


def test_per_call_preparations_zero_and_pack(bench):
    rng = np.random.default_rng(8)
    csr, _ = to_seer(random_csr(rng, 120, 90, skewed_lengths(rng, 120, 90, 6)))
    x = torch.from_numpy(rng.uniform(0.5, 1.5, size=90)).float()
    hot_columns, _ = spmv._hot_columns(csr, min(bench.GATHERED, csr.cols))
    fns = bench.per_call_preparations(csr, x)
    assert set(fns) == {"zero", "zero and gather", "torch gather"}
    assert torch.equal(fns["torch gather"](), x[hot_columns.long()])
    assert torch.equal(fns["zero and gather"](), x[hot_columns.long()])
    assert fns["zero"]() is x  # plain merge: nothing packed, the kernel's unused hot_x is x


def test_report_renders_from_a_result(bench):
    times = {name: 0.2 for name in (*bench.OWN, *bench.HOT_VARIANTS)}
    times.update({"merge_c512+hot64k": 0.1, "zero": 0.004, "zero and gather": 0.007, "torch gather": 0.014})
    rows = [{"id": f"synthetic/rmat/m{i}", "rows": 10**6, "cols": 10**6, "nnz": 2 * 10**7, "hot_share": 0.9,
             "renumbering_ms": 1.0, "time_ms": times} for i in range(2)]
    result = {"matrices": rows, "copy_gbps": 3000.0, "device": {"name": "GPU"}, "versions": {"torch": "t"},
              "date": "d", "command": "c"}
    report = bench.markdown(result)
    assert "| synthetic/rmat | 2 | 0.90 | 2.00x | 2.00x | 2 |" in report
    assert "merge_c512+hot64k 0.1000" in report
