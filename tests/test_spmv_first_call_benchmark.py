"""benchmarks/spmv_first_call.py on the CPU: what it checks before it times, and how its inputs load."""
import time

import pytest
import torch
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("spmv_first_call")


def test_every_kernel_that_writes_y_is_checked_on_y_filled_with_nan(bench):
    """Only the validating product was checked: the other tiles, the variant and pass + variant were
    timed unchecked, on a y an earlier kernel had filled right."""
    reference = torch.arange(1.0, 6.0, dtype=torch.float64)
    y = torch.empty(5)
    ran = []
    fns = {"fused": lambda: y.copy_(reference),
           "tile_8x128w4": lambda: None,  # writes nothing: y keeps its NaN
           "variant": lambda: y.copy_(reference * 1.01),
           "pass": lambda: ran.append("pass")}
    errors = bench.checked_errors(fns, y, reference)
    assert errors.keys() == {"fused", "tile_8x128w4", "variant"} and ran == []
    assert errors["fused"] == 0.0 and errors["tile_8x128w4"] == float("inf")
    assert errors["variant"] == pytest.approx(0.01, rel=1e-5)  # y is float32


def test_inputs_are_handed_out_with_no_load_in_flight(monkeypatch):
    """Loader threads ran while the handed-out input was timed; one holding the GIL stalls the timing."""
    validation = load_benchmark("spmv_validation")
    loading = set()

    class Case:
        def __init__(self, i):
            self.id = f"m{i}"

        def load(self):
            loading.add(self.id)
            time.sleep(0.05)
            loading.discard(self.id)
            return self.id

    seen = []
    for case, loaded in validation.each_loaded([Case(i) for i in range(6)], None):
        seen.append((loaded, set(loading)))
    assert [s[0] for s in seen] == [f"m{i}" for i in range(6)]
    assert all(not in_flight for _, in_flight in seen), seen


def test_the_summary_leaves_out_matrices_with_a_wrong_kernel_and_names_them(bench):
    """A wrong kernel's time is NaN: its band's medians and means read NaN, and the .md was unreadable."""
    def row(name, nnz, wrong=()):
        times = {f"{k}_us": 2.0 for k in ("fused", "pass", "variant", "both", "tile_8x128w4")}
        if wrong:
            times["tile_8x128w4_us"] = float("nan")
        return {"id": name, "rows": 10, "nnz": nnz, "variant": "scalar_r128", "error": 0.0, "wrong": list(wrong),
                **times}

    rows = [row("a", 500), row("b", 600, wrong=["tile_8x128w4"])]
    (band,) = bench.summary(rows)
    assert band["matrices"] == 1 and band["both_over_tile"]["tile_8x128w4"] == 1.0
    assert bench.within_bounds(rows)["matrices"] == 1
    result = {"environment": {"device": {"name": "GPU"}, "date": "d", "versions": {"torch": "t", "triton": "3"}},
              "command": "c", "rows": rows,
              "correct": 1, "threshold": {"rows": 1, "nnz": 1}, "summary": bench.summary(rows)}
    assert "Left out, a kernel wrong there (untimed): b (tile_8x128w4)." in bench.markdown(result)
