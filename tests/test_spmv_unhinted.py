"""benchmarks/spmv_unhinted.py (CPU): the loops' costs, by hand on planted numbers."""
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import load_benchmark

from seer.features import spmv as spmv_features


@pytest.fixture(scope="module")
def unhinted():
    return load_benchmark("spmv_unhinted")


TIMES = np.array([[1.0, 0.5, 2.0], [3.0, 4.0, 1.0]])
PREPARE = np.array([[0.0, 40.0, 7.0], [5.0, 0.0, 30.0]])


def test_a_loop_pays_each_variant_s_preparation_once(unhinted):
    schedule = [(1, np.array([0, 0])), (10, np.array([1, 0])), (100, np.array([0, 2]))]
    expected = [9 * 1.0 + 90 * 0.5 + 40.0 + 51 * 1.0,  # back to variant 0 at call 100: its plan is kept
                99 * 3.0 + 5.0 + 51 * 1.0 + 30.0]
    np.testing.assert_allclose(unhinted.loop_ms(TIMES, PREPARE, schedule, 150), expected)
    np.testing.assert_allclose(unhinted.loop_ms(TIMES, PREPARE, schedule, 5), [5 * 1.0, 5 * 3.0 + 5.0])


def test_only_matrices_the_op_redecides_on_change_their_choice(unhinted, monkeypatch):
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 1000)  # the threshold redecides reads
    table = SimpleNamespace(times=TIMES, prepare_ms=PREPARE, frame=pd.DataFrame({"nnz": [999, 1000]}))
    choice = {1: np.array([0, 0]), 10: np.array([1, 2]), 100: np.array([1, 2]), 1000: np.array([1, 2])}
    free = np.array([0.25, 0.5])
    costs = unhinted.policies(table, choice, free, 50)
    np.testing.assert_allclose(costs["kept"], [50 * 1.0 + 0.25, 50 * 3.0 + 5.0 + 0.5])
    np.testing.assert_allclose(costs["again"], [50 * 1.0 + 0.25, 9 * 3.0 + 5.0 + 41 * 1.0 + 30.0 + 0.5])
    np.testing.assert_allclose(costs["hinted"], [50 * 0.5 + 40.0 + 0.25, 50 * 1.0 + 30.0 + 0.5])
    np.testing.assert_allclose(costs["switched"], costs["again"])  # row 0 is not redecided; row 1's counts agree
    np.testing.assert_allclose(costs["escaped"], costs["again"])


def test_the_choice_changes_only_to_what_every_larger_count_agrees_on(unhinted, monkeypatch):
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)  # the threshold redecides reads
    table = SimpleNamespace(times=TIMES, prepare_ms=PREPARE, frame=pd.DataFrame({"nnz": [5, 5]}))
    choice = {1: np.array([0, 0]), 10: np.array([1, 2]), 100: np.array([0, 2]), 1000: np.array([1, 2])}
    costs = unhinted.policies(table, choice, np.zeros(2), 2000)
    # row 0: 1 at 10, 0 at 100, 1 at 1000 disagree until call 1000; row 1: 2 from call 10 on
    np.testing.assert_allclose(costs["again"], [999 * 1.0 + 1001 * 0.5 + 40.0, 9 * 3.0 + 5.0 + 1991 * 1.0 + 30.0])
    # switched at each count whatever the larger ones say: row 0 pays variant 1's plan once, at call 10
    np.testing.assert_allclose(costs["switched"], [9 * 1.0 + 90 * 0.5 + 40.0 + 900 * 1.0 + 1001 * 0.5,
                                                   9 * 3.0 + 5.0 + 1991 * 1.0 + 30.0])


def test_escaping_leaves_a_variant_no_larger_count_keeps(unhinted, monkeypatch):
    """Row 0: variant 0 first; 10 and 100 calls choose 1, 1,000 calls 2: the agreement forms only
    at the last count, so the shipped rule keeps 0, which every later tree rejects, until call 1,000
    (NOTES SpMV 76); escaping, the choice moves to 1 at call 10, then to 2 at call 1,000. Row 1: 10
    calls choose 0, the variant in use, so neither rule moves before call 100."""
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)  # the threshold redecides reads
    table = SimpleNamespace(times=TIMES, prepare_ms=PREPARE, frame=pd.DataFrame({"nnz": [5, 5]}))
    choice = {1: np.array([0, 0]), 10: np.array([1, 0]), 100: np.array([1, 2]), 1000: np.array([2, 2])}
    costs = unhinted.policies(table, choice, np.zeros(2), 2000)
    np.testing.assert_allclose(costs["again"], [999 * 1.0 + 1001 * 2.0 + 7.0, 99 * 3.0 + 5.0 + 1901 * 1.0 + 30.0])
    np.testing.assert_allclose(costs["escaped"], [9 * 1.0 + 990 * 0.5 + 40.0 + 1001 * 2.0 + 7.0,
                                                  99 * 3.0 + 5.0 + 1901 * 1.0 + 30.0])


def test_escaping_compares_with_the_variant_in_use_not_the_first(unhinted, monkeypatch):
    """Choices 0, 1, 2, 1: escaped to 1 at call 10, the variant in use stays 1 at call 100, since
    the 1,000-call choice keeps it (against the first choice, 0, it would move to 2 there), and the
    agreement moves nothing before call 1,000, where 1 is already in use."""
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)  # the threshold redecides reads
    table = SimpleNamespace(times=TIMES[:1], prepare_ms=PREPARE[:1], frame=pd.DataFrame({"nnz": [5]}))
    choice = {1: np.array([0]), 10: np.array([1]), 100: np.array([2]), 1000: np.array([1])}
    costs = unhinted.policies(table, choice, np.zeros(1), 2000)
    np.testing.assert_allclose(costs["escaped"], [9 * 1.0 + 1991 * 0.5 + 40.0])
    np.testing.assert_allclose(costs["again"], [999 * 1.0 + 1001 * 0.5 + 40.0])

def test_the_loops_summary_compares_each_path_with_the_unhinted_one(unhinted):
    """Planted loop times: unhinted 1 s everywhere, the first rule 3 s, calls=1 2 s / 0.5 s, calls=N 1 s,
    torch 4 s."""
    rows = [{"id": "a", "nnz": 2_000_000, "first_choice": "x", "choice_for_n": "y",
             "unhinted_s": 1.0, "switched_s": 3.0, "kept_s": 2.0, "hinted_s": 1.0, "torch_s": 4.0},
            {"id": "b", "nnz": 3_000_000, "first_choice": "x", "choice_for_n": "x",
             "unhinted_s": 1.0, "switched_s": 3.0, "kept_s": 0.5, "hinted_s": 1.0, "torch_s": 4.0}]
    result = {"device": {"name": "GPU"}, "date": "d", "versions": {"torch": "t", "triton": "r"},
              "command": "c", "calls": 1000, "rounds": 2, "matrices": rows}
    text = unhinted.loops_markdown(result)
    assert "| 2 | 3.000x | 1.000x | 1.000x | 4.000x | 1 | 1 |" in text  # sqrt(2 * 0.5) = 1: kept and unhinted even
    assert "| a | 2,000,000 | x | y | 1000.00 | 3000.00 | 2000.00 | 1000.00 | 4000.00 |" in text


def test_each_loop_runs_its_calls_on_a_new_matrix_every_round(unhinted):
    made, calls = [], {"a": [], "b": []}
    seconds = unhinted.loop_seconds({name: seen.append for name, seen in calls.items()},
                                    lambda: made.append(len(made)) or made[-1], n=3, rounds=2)
    assert calls == {"a": [0, 0, 0, 3, 3, 3], "b": [1, 1, 1, 2, 2, 2]} and made == [0, 1, 2, 3]  # round 2: b first
    assert set(seconds) == {"a", "b"} and all(0 <= s < 1 for s in seconds.values())


def test_the_table_summary_names_its_table_versions_and_date(unhinted):
    cells = {"kept": 0.9, "again": 0.95, "escaped": 0.96, "switched": 0.93, "hinted": 0.97}
    result = {"device": {"name": "GPU"}, "date": "2026-11-26T08:00:00+00:00", "measured": "2026-11-25T23:44:49+00:00",
              "versions": {"torch": "2.11.0", "triton": "3.6.0"}, "table": "t.csv", "validation": "v.json",
              "command": "python benchmarks/spmv_unhinted.py t.csv --validation v.json",
              "subset_rows": {"real": 3, "large": 2}, "redeciding_rows": {"real": 0, "large": 2},
              "loops": [{"calls": 1000, "real": cells, "large": cells}], "notes": ["n"]}
    text = unhinted.table_markdown(result)
    assert ("Scored 2026-11-26T08:00:00+00:00; table `t.csv` measured 2026-11-25T23:44:49+00:00 (torch 2.11.0, "
            "triton 3.6.0)") in text
    assert "| 1,000 | 0.900 | 0.950 | 0.960 | 0.930 | 0.970 | 0.900 | 0.950 | 0.960 | 0.930 | 0.970 |" in text
    assert "Note: n" in text


@pytest.mark.filterwarnings("ignore")  # no model for the CPU: the hand rule decides (said once)
def test_loops_on_a_real_matrix_time_every_path(unhinted, suitesparse_dir):
    from seer.datasets.cases import spmv_cases

    case = spmv_cases([suitesparse_dir], max_nnz=2_000, device="cpu")[0]
    import seer

    row = unhinted.matrix_loops(case, case.load(), 3, 1)
    assert row["id"] == case.id and row["nnz"] > 0
    assert all(row[f"{path}_s"] > 0 for path in ("unhinted", "switched", "kept", "hinted", "torch"))
    # Its matrices' decisions and plans are not kept for the next matrix's loops to allocate around.
    assert seer.cache_info()["size"] == 0


def test_the_first_rule_path_restores_the_shipped_rule_after_each_call(unhinted):
    """The switched path turns the agreement off for its own call only, even when the call fails."""
    dispatch_module = sys.modules["seer.dispatch"]
    seen = []
    switched = unhinted.under_first_rule(lambda: seen.append(dispatch_module._REQUIRE_AGREEMENT))
    switched()
    assert seen == [False] and dispatch_module._REQUIRE_AGREEMENT is True
    with pytest.raises(ZeroDivisionError):
        unhinted.under_first_rule(lambda: 1 / 0)()
    assert dispatch_module._REQUIRE_AGREEMENT is True
