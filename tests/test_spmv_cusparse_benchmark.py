"""benchmarks/spmv_cusparse.py on the CPU: its summary reads the rows the GPU run writes the way the
results file says (plans against the shipped best and against torch's call, the oracle with and
without the prepared plan)."""
import pytest
from conftest import load_benchmark


def row(family, merge, best, torch_ms, pre, plain, alg2, table_best="vector_g16"):
    times = {"merge_c512": merge, table_best: best, "torch_csr": torch_ms, "cusparse_alg1_pre": pre,
             "cusparse_alg1": plain, "cusparse_alg2_pre": alg2}
    return {"id": f"synthetic/{family}/x", "family": family, "rows": 10, "cols": 10, "nnz": 100,
            "table_best": table_best, "time_ms": times, "plan_us": {n: 40.0 for n in ("cusparse_alg1_pre", "cusparse_alg1", "cusparse_alg2_pre")}}


def test_summary_compares_each_plan_with_the_shipped_best_and_torch():
    bench = load_benchmark("spmv_cusparse")
    rows = [row("rmat", 2.0, 2.0, 2.4, 1.6, 2.4, 2.0), row("banded", 2.0, 1.0, 1.5, 1.25, 1.5, 1.5)]
    cells = bench.summary(rows)
    assert cells[0] == "2"
    # alg1_pre over shipped best: sqrt(2.0/1.6 * 1.0/1.25) = 1.0; over torch: sqrt(1.5 * 1.2)
    assert cells[1] == "1.00x" and cells[4] == f"{(1.5 * 1.2) ** 0.5:.2f}x"
    # oracle over merge_c512: sqrt(1 * 2); with the plan: sqrt(2/1.6 * 2/1)
    assert cells[7] == f"{2 ** 0.5:.2f}x" and cells[8] == f"{(2 / 1.6 * 2) ** 0.5:.2f}x"
    assert cells[9] == "1"  # the plan beats the shipped best on the R-MAT only
    text = bench.markdown({"device": {"name": "GPU"}, "versions": {}, "date": "d", "command": "c", "matrices": rows})
    assert "| all | 2 |" in text and "| rmat | 1 |" in text and "synthetic/banded/x" in text


@pytest.mark.parametrize("name", ["cusparse_alg1_pre", "cusparse_alg1", "cusparse_alg2_pre"])
def test_every_plan_is_a_cusparse_algorithm(name):
    bench = load_benchmark("spmv_cusparse")
    from seer.cusparse import ALGORITHMS

    algorithm, _ = bench.PLANS[name]
    assert algorithm in ALGORITHMS


def test_the_shipped_best_is_among_seers_kernels(monkeypatch):
    """Since `cusparse_prepared` became a variant it wins inputs of the H200's table: "the shipped best"
    would be the prepared plan itself, and the plans' gain over it a tautology."""
    from conftest import ROOT

    bench = load_benchmark("spmv_cusparse")
    monkeypatch.chdir(ROOT)
    every = bench.table_winners("NVIDIA H200")
    seers = bench.table_winners("NVIDIA H200", bench.calls_cusparse)
    assert set(every) == set(seers) and any(bench.calls_cusparse(v) for v in every.values())
    assert not any(bench.calls_cusparse(v) for v in seers.values())
    assert all(seers[i] == v for i, v in every.items() if not bench.calls_cusparse(v))
