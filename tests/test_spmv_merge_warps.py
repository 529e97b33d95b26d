"""benchmarks/spmv_merge_warps.py on the CPU: the merge kernel on every chunk and warp count
computes y = A x on a skewed matrix."""
from conftest import assert_runs_match, load_benchmark, skewed_problem


def test_every_chunk_and_warp_count_matches_scipy():
    warps = load_benchmark("spmv_merge_warps")
    csr, x, expected = skewed_problem(6)
    runs = warps.timed_calls(csr, x)
    assert len(runs) == len(warps.CHUNKS) * len(warps.WARPS) + 1
    assert_runs_match(runs, expected)
