"""benchmarks/spmv_staged_loads.py on the CPU: every pipelined candidate computes y = A x (the
interpreter runs the loop unpipelined; the GPU run checks each result against float64 too)."""
import pytest
from conftest import assert_runs_match, load_benchmark, random_problem


@pytest.fixture(scope="module")
def staged():
    return load_benchmark("spmv_staged_loads")


def test_every_run_matches_scipy(staged):
    csr, x, expected = random_problem(170, 130, 0.15, 13)
    runs = staged.timed_calls(csr, x)
    assert len(runs) == len(load_benchmark("spmv_vector_loads").SHIPPED) + len(staged.CANDIDATES) * len(staged.STAGES)
    assert_runs_match(runs, expected)
