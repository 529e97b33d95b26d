"""benchmarks/spmv_prefetch_registers.py on the CPU: every candidate (prefetching, capped, both) computes y = A x."""
import pytest
from conftest import assert_runs_match, load_benchmark, random_problem


@pytest.fixture(scope="module")
def prefetching():
    return load_benchmark("spmv_prefetch_registers")


def test_candidates_cover_each_tile(prefetching):
    configs = prefetching.configurations()
    assert len(configs) == 3 * len(prefetching.TILES)
    assert configs["vector_g16_prefetch_r40"] == (16, 32, 40, True) and configs["vector_g256_r40"] == (256, 4, 40, False)


def test_every_run_matches_scipy(prefetching):
    csr, x, expected = random_problem(150, 120, 0.2, 11)
    runs = prefetching.timed_calls(csr, x)
    assert len(runs) == len(load_benchmark("spmv_vector_loads").SHIPPED) + len(prefetching.configurations())
    assert_runs_match(runs, expected)
