"""benchmarks/spmv_column_slices.py on the CPU: the stacked slices hold every nonzero once, in
slice-major rows, and multiplied then summed they give A x; the report renders from a result."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import load_benchmark
from test_spmv_kernels import random_csr, skewed_lengths, to_seer

from seer.kernels import spmv
from seer.profiling import relative_error


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("spmv_column_slices")


@pytest.mark.parametrize("width", [7, 32, 89])
def test_stacked_slices_sum_to_the_product(bench, width):
    rng = np.random.default_rng(width)
    matrix = random_csr(rng, 70, 90, skewed_lengths(rng, 70, 90, 9))
    csr, _ = to_seer(matrix)
    slices, tall = bench.stacked(csr, width)
    assert slices == -(-90 // width) and tall.shape == (slices * 70, 90) and tall.nnz == csr.nnz
    stacked = sp.csr_matrix((tall.values.numpy(), tall.indices.numpy(), tall.indptr.numpy()), shape=tall.shape)
    dense = csr.to_scipy().toarray()
    for s in range(slices):  # slice s's rows hold exactly the matrix's columns [s * width, (s + 1) * width)
        part = stacked[s * 70:(s + 1) * 70].toarray()
        expected = dense * ((np.arange(90) // width) == s)
        np.testing.assert_allclose(part, expected, rtol=1e-6)  # duplicates add up in float32 here
    x = torch.from_numpy(rng.uniform(0.5, 1.5, size=90)).float()
    y = spmv.VARIANTS["merge_c512"].run(tall, x).view(slices, 70).sum(0)
    assert relative_error(y, spmv.reference(csr, x)) < 1e-6


def test_extra_share_counts_the_added_row_pointers_and_partial_sums(bench):
    rng = np.random.default_rng(3)
    csr, _ = to_seer(random_csr(rng, 50, 40, skewed_lengths(rng, 50, 40, 5)))
    assert spmv.stacking_extra(csr, 1) == 0
    assert spmv.stacking_extra(csr, 3) == pytest.approx(2 * 50 * 12 / (csr.nnz * 8 + 50 * 8 + 40 * 4))


def test_report_renders_from_a_result(bench):
    times = {name: 0.2 for name in bench.OWN}
    times.update({"merge_c512 on 64k slices": 0.1, "cusparse_prepared on 64k slices": 0.25})
    rows = [{"id": f"synthetic/lognormal_rows/m{i}", "rows": 10**6, "cols": 10**6, "nnz": 2 * 10**7,
             "extra_share": {"16384": 0.9, "65536": 0.2, "262144": 0.05}, "stacking_ms": {"65536": 1.5},
             "time_ms": times} for i in range(2)]
    rows.append({**rows[0], "id": "synthetic/lognormal_rows/short", "stacking_ms": {}, "time_ms": None})
    result = {"matrices": rows, "copy_gbps": 3000.0, "device": {"name": "GPU"}, "versions": {"torch": "t"},
              "date": "d", "command": "c"}
    report = bench.markdown(result)
    assert "| synthetic/lognormal_rows | 2 | 2.00x | 2 |" in report
    assert "merge_c512 on 64k slices 0.1000" in report
    assert "| 0.90 / 0.20 / 0.05 | 1.50 |" in report
    assert "bytes (1): synthetic/lognormal_rows/short." in report


def test_measure_checks_every_run_and_skips_widths_that_add_too_much(bench, monkeypatch):
    rng = np.random.default_rng(5)
    matrix = random_csr(rng, 60, 80, skewed_lengths(rng, 60, 80, 20))
    x = torch.from_numpy(rng.uniform(0.5, 1.5, size=80)).float()

    class Case:
        id = "synthetic/lognormal_rows/tiny"

        def build(self, loaded):
            return to_seer(matrix)[0], (x,)

    monkeypatch.setattr(bench, "WIDTHS", (8, 40, 200))  # 10 slices add too much; 200 >= cols: one slice
    monkeypatch.setattr(bench, "ON_SLICES", ("merge_c512",))  # cuSPARSE needs a GPU
    monkeypatch.setattr(bench, "OWN", ("merge_c512",))
    monkeypatch.setattr(bench, "events_ms", lambda fn: 0.0)
    timed = {}
    monkeypatch.setattr(bench, "_least_of_rounds", lambda runs: timed.update(runs) or dict.fromkeys(runs, 1.0))
    row = bench.measure(Case(), None)
    assert set(timed) == {"merge_c512", "merge_c512 on 0k slices"}  # only W = 40 timed (its name rounds to 0k)
    assert row["extra_share"]["8"] > bench.MAX_EXTRA >= row["extra_share"]["40"]
    assert list(row["stacking_ms"]) == ["40"]
