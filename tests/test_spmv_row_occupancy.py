"""benchmarks/spmv_row_occupancy.py on the CPU: every candidate tile and register cap computes y = A x."""
import pytest
from conftest import assert_runs_match, load_benchmark, random_problem


@pytest.fixture(scope="module")
def occupancy():
    return load_benchmark("spmv_row_occupancy")


def test_candidates_cover_each_tile_and_cap(occupancy):
    configs = occupancy.configurations()
    assert len(configs) == len(occupancy.TILES) * (2 * len(occupancy.CAPS) - 1)
    assert configs["vector_g16_half_r32"] == (16, 16, 32) and configs["vector_g256_r40"] == (256, 4, 40)


def test_every_run_matches_scipy(occupancy):
    csr, x, expected = random_problem(150, 120, 0.2, 11)
    runs = occupancy.timed_calls(csr, x)
    assert len(runs) == len(load_benchmark("spmv_vector_loads").SHIPPED) + len(occupancy.configurations())
    assert_runs_match(runs, expected)
