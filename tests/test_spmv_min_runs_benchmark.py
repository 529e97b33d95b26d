"""benchmarks/spmv_min_runs.py: which of a table's cells were timed over fewer than 20 runs a round."""
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import spmv_min_runs  # noqa: E402


def test_runs_a_round_follow_do_bench_and_the_slow_rows_are_picked_with_their_fastest_variants():
    # 25 / 3 ms a round, each run 0.1 ms of flush on top of the kernel
    np.testing.assert_array_equal(spmv_min_runs.runs_per_round(np.array([0.01, 0.3, 0.5, 9.0]), 0.1), [75, 20, 13, 1])
    table = SimpleNamespace(ids=np.array(["fast", "slow", "slowest"]), variants=("a", "b", "c", "d"),
                            times=np.array([[0.2, 0.1, 0.3, 0.4], [0.9, 0.6, 0.5, 0.7], [np.nan, 2.0, 3.0, 1.0]]))
    assert spmv_min_runs.few_run_rows(table, 0.1) == [("slow", ["c", "b", "d"]), ("slowest", ["d", "b", "c"])]
