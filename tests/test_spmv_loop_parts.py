"""benchmarks/spmv_loop_parts.py (CPU): the parts of a loop, on a real matrix and on planted rows."""
import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def loop_parts():
    return load_benchmark("spmv_loop_parts")


def test_the_first_call_is_timed_apart_from_the_rest(loop_parts):
    calls = []
    first, rest = loop_parts.first_and_rest_us(calls.append, "matrix", 5)
    assert calls == ["matrix"] * 5
    assert first > 0 and rest > 0


@pytest.mark.filterwarnings("ignore")  # no model for the CPU: the hand rule decides (said once)
def test_a_real_matrix_gets_both_paths_and_their_loops(loop_parts, suitesparse_dir):
    from seer.datasets.cases import spmv_cases

    case = spmv_cases([suitesparse_dir], max_nnz=2_000, device="cpu")[0]
    row = loop_parts.matrix_parts(case, case.load(), 3, 2)
    assert row["id"] == case.id and row["nnz"] > 0
    for path in ("kept", "hinted"):
        assert isinstance(row[f"{path}_variant"], str)
        assert row[f"{path}_loop_us"] == pytest.approx((row[f"{path}_first_us"] + 2 * row[f"{path}_rest_us"]) / 3)


def test_the_summary_quotes_first_call_gaps_and_later_call_ratios(loop_parts):
    rows = [{"id": "a", "nnz": 1_000, "kept_variant": "p", "kept_first_us": 100.0, "kept_rest_us": 10.0,
             "kept_loop_us": 10.09, "hinted_variant": "q", "hinted_first_us": 400.0, "hinted_rest_us": 5.0,
             "hinted_loop_us": 5.395},
            {"id": "b", "nnz": 2_000, "kept_variant": "p", "kept_first_us": 200.0, "kept_rest_us": 10.0,
             "kept_loop_us": 10.19, "hinted_variant": "r", "hinted_first_us": 300.0, "hinted_rest_us": 15.0,
             "hinted_loop_us": 15.285}]
    result = {"device": {"name": "GPU"}, "date": "d", "versions": {"torch": "t", "triton": "r"}, "command": "c",
              "loops": "l.json", "calls": 1000, "rounds": 3, "matrices": rows}
    text = loop_parts.markdown(result)
    # first-call gaps +300 and +100 -> median +200; later-call ratios 0.5 and 1.5 -> median 1.00
    assert "the hinted first call +200 µs against the kept one's; the hinted later calls 1.00x" in text
    assert "| a | 1,000 | p | 100 | 10.0 | 10.1 | q | 400 | 5.0 | 5.4 |" in text
    # loops kept / hinted 10.09 / 5.395 and 10.19 / 15.285 -> geomean 1.12; b slower, under 6M nonzeros
    assert "The hinted loops 1.12x faster than the kept ones (geometric mean); 1 slower by more than 3%, 1 of" in text
    assert "| q | 1 | 0.50x | 0 | - |" in text and "| r | 1 | 1.50x | 0 | - |" in text


def test_later_calls_are_summarised_per_hinted_variant_on_both_sides_of_the_bound(loop_parts):
    bound = loop_parts.L2_SIZED_BELOW
    rows = [{"nnz": bound - 1, "hinted_variant": "q", "hinted_rest_us": 12.0, "kept_rest_us": 10.0},
            {"nnz": bound - 1, "hinted_variant": "q", "hinted_rest_us": 14.0, "kept_rest_us": 10.0},
            {"nnz": bound, "hinted_variant": "q", "hinted_rest_us": 5.0, "kept_rest_us": 10.0}]
    assert loop_parts.by_hinted_variant(rows) == [("q", 2, pytest.approx(1.3), 1, pytest.approx(0.5))]


def test_a_result_is_rendered_again_from_its_json(loop_parts, tmp_path, monkeypatch):
    import json
    import sys

    row = {"id": "a", "nnz": 1_000, "kept_variant": "p", "kept_first_us": 100.0, "kept_rest_us": 10.0,
           "kept_loop_us": 10.09, "hinted_variant": "q", "hinted_first_us": 400.0, "hinted_rest_us": 5.0,
           "hinted_loop_us": 5.395}
    result = {"device": {"name": "GPU"}, "date": "d", "versions": {"torch": "t", "triton": "r"}, "command": "c",
              "loops": "l.json", "calls": 1000, "rounds": 3, "matrices": [row]}
    path = tmp_path / "spmv-loop-parts-gpu.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    monkeypatch.setattr(sys, "argv", ["spmv_loop_parts.py", "--render", str(path)])
    assert loop_parts.main() == 0
    assert path.with_suffix(".md").read_text() == loop_parts.markdown(result)
    assert json.loads(path.read_text()) == result
