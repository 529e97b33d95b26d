"""benchmarks/spmv_warm_l2.py (CPU): its summary, on planted times."""
import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def warm_l2():
    return load_benchmark("spmv_warm_l2")


ROWS = [  # a: cold and warm winners differ; b: the same; c: past the L2-sized band, one variant not captured
    {"id": "a", "nnz": 1_000_000, "time_ms": {"p": 0.010, "q": 0.012}, "warm_ms": {"p": 0.008, "q": 0.004},
     "capture_errors": {}},
    {"id": "b", "nnz": 2_000_000, "time_ms": {"p": 0.020, "q": 0.030}, "warm_ms": {"p": 0.010, "q": 0.020},
     "capture_errors": {}},
    {"id": "c", "nnz": 7_000_000, "time_ms": {"p": 0.090, "q": 0.050}, "warm_ms": {"p": 0.080},
     "capture_errors": {"q": "RuntimeError: not capturable"}},
]


def test_winners_compare_only_variants_timed_both_ways(warm_l2):
    assert warm_l2.winners(ROWS[0]) == ("p", "q")
    assert warm_l2.winners(ROWS[2]) == ("p", "p")  # q, faster cold, was not captured


def test_the_summary_counts_changed_winners_and_their_warm_loss(warm_l2):
    # loss: a 0.008 / 0.004 = 2, b 1 -> sqrt 2; gain: a 0.012 / 0.004 = 3, b 2 -> sqrt 6
    assert warm_l2.band_summary(ROWS[:2]) == ["2", "1", "1.414x", "2.45x"]
    result = {"device": {"name": "GPU"}, "date": "d", "versions": {"torch": "t", "triton": "r"}, "command": "c",
              "matrices": ROWS}
    text = warm_l2.markdown(result)
    assert "| 0M-3M | 2 | 1 | 1.414x | 2.45x |" in text and "| 6M+ | 1 | 1 | 1.000x | 1.12x |" in text
    assert "| a | 1,000,000 | p | 10.0 | q | 4.0 | 8.0 |" in text
    assert "Not captured: q: RuntimeError: not capturable" in text
