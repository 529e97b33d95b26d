"""benchmarks/spmv_loop_host.py (CPU): loops joined to warm kernel times, on planted results."""
import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def loop_host():
    return load_benchmark("spmv_loop_host")


LOOPS = {"calls": 1000, "matrices": [
    # a: two variants; b: both paths ran one variant (one row); c: no warm timing
    {"id": "a", "nnz": 2, "first_choice": "p", "choice_for_n": "q", "kept_s": 0.020, "hinted_s": 0.012},
    {"id": "b", "nnz": 1, "first_choice": "p", "choice_for_n": "p", "kept_s": 0.010, "hinted_s": 0.011},
    {"id": "c", "nnz": 3, "first_choice": "p", "choice_for_n": "p", "kept_s": 0.010, "hinted_s": 0.010}]}
WARM = {"matrices": [{"id": "a", "warm_ms": {"p": 0.005, "q": 0.010}}, {"id": "b", "warm_ms": {"p": 0.010}}]}


def test_each_matrix_and_variant_is_joined_once(loop_host):
    rows = loop_host.joined(LOOPS, WARM)
    assert [(r["id"], r["variant"]) for r in rows] == [("b", "p"), ("a", "p"), ("a", "q")]
    assert [r["loop_us"] for r in rows] == pytest.approx([10.0, 20.0, 12.0])
    assert [r["ratio"] for r in rows] == pytest.approx([1.0, 4.0, 1.2])


def test_the_summary_counts_host_bound_loops_per_variant(loop_host):
    summary = loop_host.variant_summary(loop_host.joined(LOOPS, WARM))
    assert summary[0] == {"variant": "p", "rows": 2, "median_loop_us": pytest.approx(15.0),
                          "median_warm_us": pytest.approx(7.5), "median_ratio": pytest.approx(2.5), "host_bound": 1}
    assert summary[1]["variant"] == "q" and summary[1]["host_bound"] == 0
