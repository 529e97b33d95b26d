"""benchmarks/spmv_ties_equal.py: which cells it overwrites, and only those (CPU)."""
import math

import pandas as pd

from conftest import load_benchmark

ties_equal = load_benchmark("spmv_ties_equal")


def test_only_rows_within_the_tolerance_take_the_other_variants_times():
    frame = pd.DataFrame({
        "id": ["tie", "edge", "apart", "faster"],
        "time_ms:a": [1.01, 1.03, 1.2, 0.5],
        "time_ms:b": [1.0, 1.0, 1.0, 1.0],
        "call_us:a": [11.0, 12.0, 13.0, float("nan")],
        "call_us:b": [21.0, 22.0, 23.0, 24.0],
        "prepare_ms:a": [0.3, 0.3, 0.3, 0.3],
    })
    out, count = ties_equal.equalise(frame, "a", "b", 0.03 + 1e-12)
    assert count == 2
    assert out["time_ms:a"].tolist() == [1.0, 1.0, 1.2, 0.5]
    assert out["call_us:a"].tolist()[:3] == [21.0, 22.0, 13.0] and math.isnan(out["call_us:a"].iloc[3])
    assert out["prepare_ms:a"].tolist() == [0.3] * 4  # preparation is the variant's own
    assert frame["time_ms:a"].tolist() == [1.01, 1.03, 1.2, 0.5]  # the input is left as it was
