"""benchmarks/dispatch_compare.py on the CPU: two runs compared on the large matrices both timed."""
import pytest
from conftest import load_benchmark


def _run(rows):
    return {"large_matrices": {"rows": [{"id": i, "seer_us": s, "torch_us": t} for i, s, t in rows]}}


def test_only_the_matrices_both_runs_timed_are_compared():
    bench = load_benchmark("dispatch_compare")
    before = _run([("rmat/a", 20.0, 40.0), ("band/b", 10.0, 10.0), ("band/only-before", 1.0, 100.0)])
    after = _run([("rmat/a", 10.0, 40.0), ("band/b", 10.0, 20.0), ("rmat/only-after", 1.0, 100.0)])
    groups = bench.compare(before, after, ["rmat/"])
    assert groups["all"]["matrices"] == 2 and groups["rmat/"]["matrices"] == 1
    assert groups["rmat/"]["speedup_before"] == pytest.approx(2.0)
    assert groups["rmat/"]["speedup_after"] == pytest.approx(4.0)
    assert groups["rmat/"]["seer_call_before_over_after"] == pytest.approx(2.0)
    assert groups["all"]["speedup_before"] == pytest.approx(2.0 ** 0.5)  # sqrt(2 * 1)
    assert groups["all"]["torch_call_before_over_after"] == pytest.approx(0.5 ** 0.5)  # sqrt(1 * 0.5)
