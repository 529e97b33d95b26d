"""benchmarks/merge_zero_host.py (CPU): both ways timed on a real matrix, the module put back, the summary."""
import pytest
from conftest import load_benchmark

import seer.kernels.spmv as spmv
from seer.launch import zero_


@pytest.fixture(scope="module")
def zero_host():
    return load_benchmark("merge_zero_host")


def test_a_real_matrix_is_timed_both_ways_and_the_module_put_back(zero_host, suitesparse_dir):
    info = zero_host.spread(suitesparse_dir, 3)[0]
    row = zero_host.matrix_row(info, 3, 1, device="cpu")
    assert spmv.zero_ is zero_
    assert row["id"] == info.id and row["nnz"] == info.nnz
    assert all(row[f"{way}:{p}_us"] > 0 for way in ("torch", "memset") for p in ("out", "new_y"))


def test_each_pattern_is_summarised_torch_against_memset(zero_host):
    rows = [{"id": "a", "nnz": 10, "torch:out_us": 12.0, "memset:out_us": 6.0, "torch:new_y_us": 9.0,
             "memset:new_y_us": 9.0},
            {"id": "b", "nnz": 20, "torch:out_us": 16.0, "memset:out_us": 2.0, "torch:new_y_us": 10.0,
             "memset:new_y_us": 20.0}]
    summary = zero_host.summary(rows)
    assert summary["out"] == {"torch_us": 14.0, "memset_us": 4.0, "speedup": pytest.approx(4.0)}
    assert summary["new_y"]["speedup"] == pytest.approx(0.5 ** 0.5)
    text = zero_host.markdown({"device": {"name": "GPU"}, "date": "d", "versions": {"torch": "t", "triton": "r"},
                               "command": "c", "calls": 2000, "rounds": 5, "summary": summary, "matrices": rows})
    assert "| out | 14.0 | 4.0 | 4.00x |" in text and "| b | 20 | 16.0 / 2.0 | 10.0 / 20.0 |" in text
