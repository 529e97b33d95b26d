"""benchmarks/dispatch.py's real-matrix section on the CPU (Triton interpreter): it times seer's
cached call and torch CSR on real files, and refuses to time results that disagree."""
import shutil

import pytest
from conftest import load_benchmark

from seer.kernels.spmv import VARIANTS

SMALL_FILES = ("HB__bcsstk01.mtx.gz", "HB__west0156.mtx.gz", "JGD_Homology__n3c5-b2.mtx.gz")


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("dispatch")


@pytest.fixture
def small_folder(suitesparse_dir, tmp_path):
    for name in SMALL_FILES:
        shutil.copy(suitesparse_dir / name, tmp_path / name)
    return tmp_path


def test_real_matrix_calls_time_both_paths(bench, small_folder):
    rows = bench.real_matrix_calls(small_folder, calls=2, device="cpu")
    assert sorted(r["id"].replace("/", "__") + ".mtx.gz" for r in rows) == sorted(SMALL_FILES)
    assert all(r["seer_choice"] in VARIANTS and min(r["seer_us"], r["torch_us"], r["nnz"]) > 0 for r in rows)
    assert all(min(r["seer_first_us"], r["torch_first_us"]) > 0 for r in rows)
    summary = bench.real_summary(rows)
    assert summary["matrices"] == 3 and 0 <= summary["seer_faster_on"] <= 3
    assert 0 <= summary["seer_first_faster_on"] <= 3 and summary["median_seer_first_us"] > 0
    real = {"folder": str(small_folder), "calls_per_loop": 2, "rounds": 5, "summary": summary, "rows": rows}
    text = bench.render_real(real)
    assert "| 3 |" in text and "speed-up over torch CSR" in text and "first call on a new matrix" in text
    large = bench.render_real(real, "Large matrices")
    assert large.startswith("\n## Large matrices: one cached call") and "| 3 |" in large


def test_first_calls_decide_afresh(bench, small_folder):
    """Each try gets a new matrix object, so seer's decision cache misses every time."""
    import seer

    bench.real_matrix_calls(small_folder, calls=2, device="cpu")  # warm: compiled kernels, model loaded
    misses = seer.cache_info()["misses"]
    case = bench.spmv_cases([small_folder], device="cpu")[0]
    parts, (x,) = case.build(case.load())
    firsts = bench.first_calls({"seer": lambda B: seer.dispatch("spmv", (B, x))},
                               lambda: bench.torch.sparse_csr_tensor(*parts[:3], parts[3]), 3)
    assert seer.cache_info()["misses"] == misses + 3 and firsts["seer"] > 0


def test_first_calls_rotate_which_path_runs_first(bench):
    order = []
    paths = {name: (lambda B, name=name: order.append(name)) for name in "abc"}
    bench.first_calls(paths, lambda: None, 3)
    assert order == list("abcbcacab")


def test_real_matrix_calls_refuse_disagreeing_results(bench, small_folder, monkeypatch):
    real_dispatch = bench.seer.dispatch
    monkeypatch.setattr(bench.seer, "dispatch", lambda op, inputs, **kw: real_dispatch(op, inputs, **kw) * 1.01)
    with pytest.raises(AssertionError, match="disagree on .* on the first call"):
        bench.real_matrix_calls(small_folder, calls=2, device="cpu")


def test_the_variant_the_loops_end_on_is_checked_too(bench, small_folder, monkeypatch):
    """Deciding again as calls add up, seer could end the loops on a variant never checked."""
    real_dispatch, made = bench.seer.dispatch, []

    def wrong_after_the_first(op, inputs, **kw):  # right on the first call, wrong once the loops run
        made.append(1)
        return real_dispatch(op, inputs, **kw) * (1.0 if len(made) == 1 else 1.01)

    monkeypatch.setattr(bench.seer, "dispatch", wrong_after_the_first)
    with pytest.raises(AssertionError, match="disagree on .* after the timed loops"):
        bench.real_matrix_calls(small_folder, calls=2, device="cpu")


def test_a_summary_of_no_matrix_is_refused(bench):
    """Its means were NaN, written as a bare NaN (not JSON) that the selection results would quote."""
    with pytest.raises(ValueError, match="no matrix was measured"):
        bench.real_summary([])


@pytest.mark.parametrize("given", [["--large-budget-s", "60"], ["--real-calls", "100"], ["--large-calls", "20"]])
def test_the_matrices_options_without_matrices_are_refused(bench, monkeypatch, capsys, given):
    """They were ignored without a word: a run asked to time the large suite timed nothing of it."""
    import sys

    monkeypatch.setattr(sys, "argv", ["dispatch.py", *given])
    with pytest.raises(SystemExit):
        bench.main()
    assert "time the matrices of --matrices: give it too" in capsys.readouterr().err


@pytest.mark.parametrize("given", [["--real-calls=100"], ["--real-c", "100"]])
def test_the_matrices_options_are_refused_in_any_spelling(bench, monkeypatch, capsys, given):
    import sys

    monkeypatch.setattr(sys, "argv", ["dispatch.py", *given])
    with pytest.raises(SystemExit):
        bench.main()
    assert "give it too" in capsys.readouterr().err
