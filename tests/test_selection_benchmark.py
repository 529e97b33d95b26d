"""benchmarks/selection.py on a planted table (CPU): the validated path's charges and columns."""
import json

import numpy as np
import pytest
from conftest import load_benchmark
from synthetic_profiles import planted_frame, planted_meta, toy_op  # noqa: F401 (toy_op is a fixture)

from seer.table import ProfileTable
from seer.train import TwoStageSelector

pytestmark = pytest.mark.usefixtures("toy_op")


@pytest.fixture(scope="module")
def selection():
    return load_benchmark("selection")


def test_validation_costs_charge_band_means_and_whole_gathers_for_the_rest(selection, tmp_path):
    """Each input is charged its nnz band's mean difference, negative means as 0 (the per-input
    differences are timer noise of either sign), whether the file measured it or not; an input
    of a band the file has not measured, its whole gather."""
    frame = planted_frame(gather_cost=20.0, seed=1)
    frame.loc[0, "nnz"], frame.loc[1, "nnz"] = 5_000_000, 500_000_000  # absent from the file
    table = ProfileTable.from_frame(frame, "toy", planted_meta())
    ids = list(table.ids)
    small, large = ids[2:6], ids[6:]
    rows = ([{"id": i, "nnz": 1_000, "stats_us": s} for i, s in zip(small, (0.3, -0.5, 0.4, -0.6))]
            + [{"id": i, "nnz": 5_000_000, "stats_us": 2.0 + 2.0 * (k % 2)} for k, i in enumerate(large)])
    path = tmp_path / "validation.json"
    path.write_text(json.dumps({"rows": rows}))
    costs, notes = selection.validation_costs(table, path)
    assert np.all(costs[2:6] == 0.0)
    large_mean_ms = np.mean([r["stats_us"] for r in rows[4:]]) / 1e3
    np.testing.assert_allclose(costs[6:], large_mean_ms)
    np.testing.assert_allclose(costs[0], large_mean_ms)
    assert costs[1] == table.gather_ms[1]
    assert notes[-2:] == [f"validated path: 1 inputs absent from {path} are charged their band's mean too",
                          f"validated path: 1 inputs absent from {path}, in bands it has not measured, are charged "
                          "their whole gather_ms"]

    report = TwoStageSelector().evaluate(table, calls=(1, 100), free_gather_ms=costs)
    columns = selection.columns(report)
    assert list(columns) == ["1", "100", "1 validated", "100 validated"]
    assert columns["1 validated"]["real"] == report.validated_scores["real"][1]
    spread = selection.fold_spread([columns, columns])
    assert spread["metrics"]["all"]["1 validated"]["speedup_vs_best_single"]["min"] == pytest.approx(
        report.validated_scores["all"][1]["speedup_vs_best_single"])


def test_one_stalled_timing_does_not_cancel_a_bands_charge(selection, tmp_path):
    """NOTES SpMV 53: one input's pass without statistics stalled (111 us against 14) and took a
    1M-10M band's plain mean (160 inputs) from ~+0.5 us to below 0, which charged the band
    nothing; the mean trimmed of its ends keeps the band's charge."""
    table = ProfileTable.from_frame(planted_frame(gather_cost=20.0, seed=2), "toy", planted_meta())
    ids = list(table.ids)
    added = [0.5 + 0.01 * (k % 10) for k in range(len(ids))]
    added[3:8] = [-96.7] * 5  # a stall in 5 of the band's 300 inputs
    rows = [{"id": i, "nnz": 5_000_000, "stats_us": a} for i, a in zip(ids, added)]
    path = tmp_path / "validation.json"
    path.write_text(json.dumps({"rows": rows}))
    assert np.mean(added) < 0
    costs, notes = selection.validation_costs(table, path)
    assert 0.5e-3 < costs[0] < 0.6e-3 and np.all(costs == costs[0])
    assert "10% trimmed at each end" in notes[0]


def test_end_to_end_quotes_the_dispatch_benchmark(selection, tmp_path):
    path, model = tmp_path / "dispatch.json", tmp_path / "spmv-h100.json"
    summary = {"matrices": 3, "speedup_vs_torch_call": 0.9}
    path.write_text(json.dumps({"date": "2026-11-25T19:17:27+00:00", "real_matrices": {"summary": summary}}))
    model.write_text(json.dumps({"training": {"date": "2026-11-25T19:15:08+00:00"}}))
    quoted = selection.end_to_end(path, model)
    assert quoted == {**summary, "source": str(path), "measured": "2026-11-25T19:17:27+00:00", "model_date": None}
    assert "the shipped model's choice" in selection.end_to_end_lines(summary, quoted, 4)[0]
    # Measured before the shipped model was trained: the row says which model the calls ran.
    model.write_text(json.dumps({"training": {"date": "2026-11-25T20:00:00+00:00"}}))
    quoted = selection.end_to_end(path, model)
    assert quoted["model_date"] == "2026-11-25T20:00:00+00:00"
    line = selection.end_to_end_lines(summary, quoted, 4)[0]
    assert "measured 2026-11-25 19:17 UTC with the model shipped before the one trained 2026-11-25 20:00 UTC" in line
    assert "shipped model's choice" not in line and line.endswith("| 0.900 | | | |")
    path.write_text(json.dumps({"rows": []}))  # a result from before --matrices
    with pytest.raises(SystemExit, match="no real-matrix section"):
        selection.end_to_end(path, model)


def test_each_variant_alone_reports_its_median_preparation(selection):
    frame = planted_frame(seed=2)
    variants = [c.split(":", 1)[1] for c in frame.columns if c.startswith("time_ms:")]
    frame[f"prepare_ms:{variants[0]}"] = np.arange(len(frame), dtype=float)  # the others need none
    table = ProfileTable.from_frame(frame, "toy", planted_meta())
    alone = selection.single_variants(table)["all"]
    assert alone[variants[0]]["median_prepare_ms"] == pytest.approx(np.median(np.arange(len(frame))))
    assert all(alone[v]["median_prepare_ms"] == 0 for v in variants[1:])


def test_a_variant_alone_is_scored_against_the_oracle_of_each_call_count(selection):
    """Seer's fraction at c calls is taken against the oracle with every preparation charged over c;
    the variant alone it is divided by must be too (its steady-state fraction, against an oracle
    charged nothing, made seer's 1-call lead over it look larger than it is)."""
    frame = planted_frame(seed=3)
    variants = [c.split(":", 1)[1] for c in frame.columns if c.startswith("time_ms:")]
    frame[f"time_ms:{variants[0]}"] = frame[[f"time_ms:{v}" for v in variants]].min(axis=1) / 2
    frame[f"prepare_ms:{variants[0]}"] = 10 * frame[f"time_ms:{variants[0]}"]  # fastest, but dear to prepare
    table = ProfileTable.from_frame(frame, "toy", planted_meta())
    alone = selection.single_variants(table, (1, 1000))["all"]
    assert alone[variants[0]]["fraction_of_oracle"] == pytest.approx(1.0)
    assert alone[variants[0]]["fraction_of_oracle_at"]["1"] < 0.5
    assert alone[variants[0]]["fraction_of_oracle_at"]["1000"] == pytest.approx(1.0)


def test_column_titles_for_any_call_count(selection):
    assert [selection.column_title(c) for c in ("1", "100", "1 validated", "1000 validated")] == [
        "1 call", "100 calls", "1 call, validated matrix", "1000 calls, validated matrix"]


def test_a_table_whose_device_is_a_name_alone_is_scored(selection, tmp_path, monkeypatch):
    """Table metadata may give the device by its name (read_meta accepts it): the script failed on it
    with a TypeError, after the whole cross-validation."""
    import sys

    from synthetic_profiles import write_table

    table = write_table(planted_frame(groups=8, per_group=3), tmp_path / "toy-some.csv",
                        {**planted_meta(), "device": "Synthetic GPU"})
    monkeypatch.setattr(sys, "argv", ["selection.py", str(table), "--out", str(tmp_path), "--fold-seeds", "0"])
    assert selection.main() == 0
    result = json.loads((tmp_path / "toy-synthetic_gpu.json").read_text())
    assert result["device"]["name"] == "Synthetic GPU"
