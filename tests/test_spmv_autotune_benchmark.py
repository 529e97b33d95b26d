"""benchmarks/spmv_autotune.py on the CPU (Triton interpreter): the triton.autotune peer launches
seer's row kernel correctly in each of its configs, a matrix's row times the three paths and
refuses results that disagree, and the summary's sums over N calls are right."""
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import load_benchmark

from seer.kernels.spmv import VARIANTS


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("spmv_autotune")


def test_configs_are_the_row_variants_tiles(bench):
    tiles = [(c.kwargs["ROWS"], c.kwargs["G"], c.num_warps) for c in bench.row_kernel_configs()]
    assert sorted(tiles) == sorted([(128, 1, 4), (128, 4, 4), (64, 8, 4), (32, 16, 4), (16, 32, 4), (8, 64, 4),
                                    (4, 256, 4)])
    assert {f"vector_g{g}" for _, g, _ in tiles if g > 1} | {"scalar_r128"} <= set(VARIANTS)


def test_each_config_matches_float64(bench):
    """One config at a time (with more, the autotuner times them on a GPU): rows of 0 to 300
    nonzeros, so a tile's lanes wrap rows longer than its group."""
    rng = np.random.default_rng(5)
    lengths = rng.integers(0, 300, size=157)
    lengths[::9] = 0
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(400, size=n, replace=False)) for n in lengths])
    matrix = sp.csr_matrix((rng.standard_normal(indptr[-1]).astype(np.float32), indices, indptr), shape=(157, 400))
    x = rng.standard_normal(400).astype(np.float32)
    exact = matrix.astype(np.float64) @ x.astype(np.float64)
    parts = [torch.from_numpy(a.astype(np.int32)) for a in (matrix.indptr, matrix.indices)]
    for config in bench.row_kernel_configs():
        call, tuned = bench.autotuned_spmv(*parts, torch.from_numpy(matrix.data), 157, [config])
        y = call(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(y, exact, rtol=1e-4, atol=1e-3 * np.abs(exact).max())
        assert tuned.best_config is config


@pytest.fixture
def one_config(bench, monkeypatch):
    vector = next(c for c in bench.row_kernel_configs() if c.kwargs["G"] == 16)
    monkeypatch.setattr(bench, "row_kernel_configs", lambda: [vector])
    return vector


@pytest.fixture
def real_case(bench, suitesparse_dir, tmp_path):
    shutil.copy(suitesparse_dir / "HB__bcsstk01.mtx.gz", tmp_path)
    return bench.spmv_cases([tmp_path], device="cpu")[0]


def test_matrix_row_times_every_path(bench, one_config, real_case):
    import seer

    row = bench.matrix_row(real_case, real_case.load(), calls=2, rounds=2)
    assert row["id"] == "HB/bcsstk01" and row["seer_choice"] in VARIANTS
    assert row["seer_settled_choice"] == row["seer_choice"]  # 48 rows: seer never decides again
    assert min(row[f"{p}_us"] for p in ("seer", "autotune", "torch")) > 0
    assert row["seer_hundred_us"] > row["seer_first_us"] > 0 and row["autotune_first_us"] > 0
    assert row["autotune_choice"] == str(one_config) and seer.cache_info()["size"] == 0


def test_matrix_row_refuses_seer_results_that_disagree(bench, one_config, real_case, monkeypatch):
    real_dispatch = bench.seer.dispatch
    monkeypatch.setattr(bench.seer, "dispatch", lambda op, inputs, **kw: real_dispatch(op, inputs, **kw) * 1.01)
    with pytest.raises(AssertionError, match="seer's first decision and torch CSR disagree on HB/bcsstk01"):
        bench.matrix_row(real_case, real_case.load(), calls=2, rounds=2)


def test_matrix_row_refuses_a_timed_first_call_that_was_cached(bench, one_config, real_case, monkeypatch):
    monkeypatch.setattr(bench.seer, "cache_info", lambda: {"misses": 0})  # as if every call had hit
    with pytest.raises(AssertionError, match="timed first call on HB/bcsstk01 was not its first"):
        bench.matrix_row(real_case, real_case.load(), calls=2, rounds=2)


def test_matrix_row_refuses_disagreeing_results(bench, one_config, real_case, monkeypatch):
    real_run = bench.spmv._csr_rows_kernel.run

    def off_by_a_bit(*args, **kwargs):
        real_run(*args, **kwargs)
        args[5].mul_(1.01)  # y

    monkeypatch.setattr(bench.spmv._csr_rows_kernel, "run", off_by_a_bit)
    with pytest.raises(AssertionError, match="autotune and torch CSR disagree on HB/bcsstk01"):
        bench.matrix_row(real_case, real_case.load(), calls=2, rounds=2)


def test_totals_charge_seers_first_hundred_calls(bench):
    row = {"seer_first_us": 100.0, "seer_us": 10.0, "seer_hundred_us": 5000.0, "autotune_first_us": 1e5,
           "autotune_us": 20.0}
    assert bench.total_us(row, "seer", 1) == 100.0
    assert bench.total_us(row, "seer", 100) == 5000.0 and bench.total_us(row, "seer", 10_000) == 5000.0 + 9_900 * 10
    assert bench.total_us(row, "autotune", 100) == 1e5 + 99 * 20
    del row["seer_hundred_us"]  # a row from before the hundred were timed
    assert bench.total_us(row, "seer", 100) == 100.0 + 99 * 10


def test_summary_sums_first_and_cached_calls(bench):
    rows = [  # seer faster when cached on the first; the tuned kernel on the second, by 2 µs a call
        {"seer_us": 10.0, "autotune_us": 20.0, "torch_us": 15.0, "seer_first_us": 100.0, "autotune_first_us": 1e5,
         "nnz": 12_000_000},
        {"seer_us": 12.0, "autotune_us": 10.0, "torch_us": 15.0, "seer_first_us": 200.0, "autotune_first_us": 2e5,
         "nnz": 2_000_000},
    ]
    s = bench.summary(rows)
    assert s["matrices"] == 2 and s["seer_cached_faster_on"] == 1
    assert s["cached_speedup"] == pytest.approx((2.0 * 10 / 12) ** 0.5)
    assert s["first_speedup"] == pytest.approx(1000.0)
    at_100 = ((1e5 + 99 * 20) / (100 + 99 * 10) * (2e5 + 99 * 10) / (200 + 99 * 12)) ** 0.5
    assert s["speedup_over_calls"]["100"] == pytest.approx(at_100)
    assert s["speedup_over_calls"]["1"] == pytest.approx(1000.0)
    assert s["autotune_cached_faster_on"] == 1 and s["median_calls_to_catch_up"] == pytest.approx((2e5 - 200) / 2)
    text = bench.render_set("Real matrices", s)
    assert "| cached call, median | 11.0 µs | 15.0 µs | 1.29x | 1 |" in text and "pays after 99,900 calls" in text
    assert s["cached_speedup_10m"] == {"matrices": 1, "speedup": pytest.approx(2.0)}
    assert "N = 1, 100, 10,000: 1,000x, " in text and "On the 1 of 10M+ nonzeros" in text and "2.00x faster" in text


def test_render_recomputes_summaries_from_rows(bench, tmp_path):
    rows = [{"seer_us": 10.0, "autotune_us": 30.0, "torch_us": 15.0, "seer_first_us": 100.0,
             "autotune_first_us": 8e5, "nnz": 100}]
    path = tmp_path / "spmv-autotune-h100.json"
    path.write_text(bench.json.dumps({"device": {"name": "H100"}, "date": "d", "versions": {"torch": "t", "triton": "r"},
                                      "command": "c", "method": "m", "real": {"summary": {}, "rows": rows}}))
    bench.rerender(path)
    assert bench.json.loads(path.read_text())["real"]["summary"]["cached_speedup"] == pytest.approx(3.0)
    assert "| cached call, median | 10.0 µs | 30.0 µs | 3.00x | 1 |" in path.with_suffix(".md").read_text()


def test_summary_of_rows_with_seers_first_hundred(bench):
    rows = [{"seer_us": 10.0, "autotune_us": 20.0, "torch_us": 15.0, "seer_first_us": 100.0, "autotune_first_us": 1e5,
             "seer_hundred_us": 3000.0, "nnz": 2_000_000, "seer_choice": "vector_g16", "seer_settled_choice": choice}
            for choice in ("vector_g16", "cusparse_prepared")]
    s = bench.summary(rows)
    assert s["seer_hundred_measured"] and s["seer_decided_again_on"] == 1
    assert s["speedup_over_calls"]["100"] == pytest.approx((1e5 + 99 * 20) / 3000.0)
    text = bench.render_set("Large", s)
    assert "seer's first 100 calls as measured" in text and "another variant, on 1 of these" in text
    assert "not charged" not in text
