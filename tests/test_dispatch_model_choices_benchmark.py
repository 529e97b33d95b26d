"""benchmarks/dispatch_model_choices.py on the CPU: a dispatch run's model against another, on the
run's matrices, their features from the shipped H100 table."""
import json
import math
import subprocess

import pandas as pd
import pytest
from conftest import ROOT, load_benchmark, shipped_spmv_rows

from seer.model import SelectorModel

IDS = ("HB/bcsstm01", "HB/jgl009", "HB/can_24", "HB/bcspwr01")


def _one_choice(model, row, calls):
    known = {name: float(row[name]) for name in model.known_features}
    free = {name: float(row[name]) for name in model.gathered_features}
    return model.choose(known, lambda: free, calls, free=free).variant


def _per_call(row, variant, calls):
    prepare = row.get(f"prepare_ms:{variant}", 0.0)
    return row[f"time_ms:{variant}"] + (0.0 if pd.isna(prepare) else prepare) / calls


def test_choices_are_counted_per_call_count_and_the_recorded_first_choices_checked(tmp_path):
    bench = load_benchmark("dispatch_model_choices")
    table = shipped_spmv_rows(tmp_path, IDS)
    frame = pd.read_csv(table).set_index("id")
    h100, h200 = (SelectorModel.load(ROOT / "models" / f"spmv-{d}.json") for d in ("h100", "h200"))
    recorded = {i: _one_choice(h100, frame.loc[i], 1) for i in IDS}
    recorded[IDS[0]] = "a variant the run's model would not give"
    run = {"real_matrices": {"rows": [{"id": i, "seer_choice": recorded[i]} for i in IDS]}}

    result = bench.compare(run, table, h100, h200)["real_matrices"]

    assert result["matrices"] == 4 and result["recorded_first_choice_given_again"] == 3
    assert set(result["by_calls"]) == {1, 10, 100, 1000}
    for calls, counted in result["by_calls"].items():
        before = {i: _one_choice(h100, frame.loc[i], calls) for i in IDS}
        after = {i: _one_choice(h200, frame.loc[i], calls) for i in IDS}
        assert counted["same"] == sum(before[i] == after[i] for i in IDS), calls
        assert sum(counted["moved"].values()) == 4 - counted["same"]
        ratios = [_per_call(frame.loc[i], before[i], calls) / _per_call(frame.loc[i], after[i], calls) for i in IDS]
        assert counted["table_time_run_over_today"] == pytest.approx(math.prod(ratios) ** 0.25)
    assert result["by_calls"][1]["same"] < 4  # the two GPUs' models part on these matrices


def test_preparation_is_shared_over_the_calls_and_moves_are_counted_most_first():
    bench = load_benchmark("dispatch_model_choices")
    frame = pd.DataFrame({"time_ms:v1": [2.0, 1.0, 1.0], "time_ms:v2": [1.0, 1.0, 1.0],
                          "prepare_ms:v2": [10.0, 0.0, 0.0]}, index=["a", "b", "c"])
    before, after = {"a": "v1", "b": "v1", "c": "v1"}, {"a": "v2", "b": "v2", "c": "v1"}
    assert bench._time_ratio(frame, before, after, 10) == pytest.approx(1.0)  # 2 against 1 + 10 / 10
    assert bench._time_ratio(frame, before, after, 100) == pytest.approx((2.0 / 1.1) ** (1 / 3))
    assert bench._moves({"a": "v1", "b": "v1", "c": "v3", "d": "v2"}, {"a": "v2", "b": "v2", "c": "v1", "d": "v2"}) \
        == {"v1 -> v2": 2, "v3 -> v1": 1}


def test_a_run_whose_matrices_the_table_lacks_is_refused_by_name(tmp_path):
    bench = load_benchmark("dispatch_model_choices")
    table = shipped_spmv_rows(tmp_path, IDS[:2])
    model = SelectorModel.load(ROOT / "models" / "spmv-h100.json")
    run = {"large_matrices": {"rows": [{"id": i, "seer_choice": "vector_g64"} for i in (*IDS[:2], "synthetic/none")]}}
    with pytest.raises(SystemExit, match="1 of the run's matrices are not in .*synthetic/none"):
        bench.compare(run, table, model, model)


def test_a_model_is_read_from_a_file_or_from_git_at_a_revision():
    bench = load_benchmark("dispatch_model_choices")
    path = ROOT / "models" / "spmv-h100.json"
    tracked = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", str(path)], capture_output=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout, or the shipped model differs from HEAD's")
    from_file = bench.load_model(str(path))
    from_git = bench.load_model("HEAD:models/spmv-h100.json")
    assert json.dumps(from_git.to_dict(), sort_keys=True) == json.dumps(from_file.to_dict(), sort_keys=True)
