"""benchmarks/spmv_merge_brackets.py on the CPU: the merge kernel with every bracket width computes
y = A x on a skewed matrix."""
from conftest import assert_runs_match, load_benchmark, skewed_problem


def test_every_bracket_width_matches_scipy():
    brackets = load_benchmark("spmv_merge_brackets")
    csr, x, expected = skewed_problem(4)
    runs = brackets.timed_calls(csr, x)
    assert len(runs) == len(brackets.CHUNKS) * len(brackets.BRACKETS) + 1
    assert_runs_match(runs, expected)
