"""benchmarks/selection_guard.py: a loop's cost with and without a guard against cuSPARSE."""
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import selection_guard  # noqa: E402


def _table():
    """Three inputs: big and mis-chosen, big and well chosen, small and mis-chosen (ms)."""
    return SimpleNamespace(variants=("slow_rows", "cusparse_prepared"),
                           times=np.array([[5.0, 1.0], [1.0, 2.0], [5.0, 1.0]]),
                           prepare_ms=np.array([[0.0, 0.5], [0.0, 0.5], [0.0, 0.5]]),
                           frame=pd.DataFrame({"nnz": [2_000_000, 2_000_000, 10_000]}))


def test_the_guard_keeps_the_faster_of_the_two_for_the_calls_left_and_pays_its_timings():
    table, statistics = _table(), np.array([0.1, 0.1, 0.1])
    choice = np.array([0, 0, 0])
    unguarded = selection_guard.loop_costs(table, choice, statistics, None, 100)
    guarded = selection_guard.loop_costs(table, choice, statistics, 10, 100)
    np.testing.assert_allclose(unguarded, [500.1, 100.1, 500.1])
    runs, sync = selection_guard.RUNS, selection_guard.SYNC_MS
    np.testing.assert_allclose(guarded[:2], [10 * 5 + 0.1 + 0.5 + runs * 6 + sync + 90 * 1,
                                             10 * 1 + 0.1 + 0.5 + runs * 3 + sync + 90 * 1])
    assert guarded[2] == unguarded[2]  # under a million nonzeros dispatch never decides again


def test_no_guard_where_cusparse_is_the_choice_or_the_loop_ends_first():
    table, statistics = _table(), np.zeros(3)
    on_reference = np.array([1, 1, 1])
    np.testing.assert_allclose(selection_guard.loop_costs(table, on_reference, statistics, 10, 100),
                               selection_guard.loop_costs(table, on_reference, statistics, None, 100))
    choice = np.array([0, 0, 0])
    assert selection_guard.loop_costs(table, choice, statistics, 100, 100) == pytest.approx(
        selection_guard.loop_costs(table, choice, statistics, None, 100))
