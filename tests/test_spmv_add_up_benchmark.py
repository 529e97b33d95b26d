"""benchmarks/spmv_add_up.py on the CPU: every add-up step's launch is checked before it is timed,
and the summary's shipped row takes each input at the step seer picked for it."""
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import load_benchmark

from seer.sparse import as_csr


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("spmv_add_up")


def test_every_step_of_the_validating_product_is_checked(bench):
    csr = as_csr(sp.random(300, 200, density=0.05, format="csr", random_state=4, dtype=np.float32), check=False)
    assert bench.first_launch(csr) == "validating product"
    fns, y, reference = bench.launches(csr, "validating product")
    assert len(fns) == 2 * len(bench.STEPS)
    bench.check("random", csr, fns, y, reference)
    with pytest.raises(AssertionError, match="wrong y"):
        bench.check("random", csr, fns, y, reference * 1.01)


def test_the_shipped_row_takes_each_inputs_step(bench):
    def row(programs, step, fast_us):
        steps = {str(s): {"stats_us": fast_us if s == step else 9.0, "plain_us": 8.0} for s in bench.STEPS}
        return {"source": "real", "nnz": 500, "first_launch": "pass", "programs": programs, "shipped_step": step,
                "steps": steps}

    rows = [row(10, 64, 5.0), row(20, 64, 6.0), row(30, 64, 7.0)]
    shipped = [s for s in bench.summary(rows) if s["step"] == bench.SHIPPED]
    assert len(shipped) == 1 and shipped[0]["stats_us"] == 6.0 and shipped[0]["over_baseline"] == 1.0
    rows[1] = row(200, 256, 4.0)  # another group: 129+ programs
    groups = {s["subset"]: s for s in bench.summary(rows) if s["step"] == bench.SHIPPED}
    assert groups["real, pass, 129+ programs"]["stats_us"] == 4.0
    assert groups["real, pass, 1-64 programs"]["stats_us"] == 6.0
