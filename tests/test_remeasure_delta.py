"""benchmarks/remeasure_delta.py (CPU): a variant measured again, on planted tables."""
import pandas as pd
import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def remeasure():
    return load_benchmark("remeasure_delta")


def frame(times_v, times_w, sources):
    ids = [f"m{i}" for i in range(len(times_v))]
    return pd.DataFrame({"id": ids, "source": sources, "time_ms:v": times_v, "time_ms:w": times_w}).set_index("id")


def test_named_inputs_get_the_ratio_the_oracle_and_the_winner_the_others_per_source(remeasure):
    old = frame([1.0, 1.0, 1.0, 2.0, 4.0], [0.8, 2.0, 2.0, 3.0, 3.0], ["s", "s", "s", "real", "real"])
    new = frame([0.5, 0.9, 0.98, 2.2, 3.6], [0.8, 2.0, 2.0, 3.0, 3.0], ["s", "s", "s", "real", "real"])
    result = remeasure.delta(old, new, "v", ["m0", "m1", "m2"])
    named = result["named"]
    assert named["inputs"] == 3 and named["median"] == pytest.approx(0.9)
    assert (named["min"], named["max"]) == (pytest.approx(0.5), pytest.approx(0.98))
    # oracle old/new: m0 0.8/0.5 = 1.6 (winner w -> v), m1 1/0.9 = 1.11, m2 1/0.98 within 5%
    assert named["oracle_faster_on"] == 2 and named["oracle_faster_range"] == [pytest.approx(1 / 0.9),
                                                                               pytest.approx(1.6)]
    assert named["winner_changed_on"] == 1
    assert result["others_median_by_source"] == {"real": pytest.approx((1.1 + 0.9) / 2)}
    text = remeasure.markdown({**result, "variant": "v", "device": "GPU", "table": "t.csv", "before": "abc~1",
                               "inputs": "i.json", "command": "c"})
    assert "| 3 named | 0.900x (0.500 - 0.980) | 2 | 1.11x - 1.60x | 1 |" in text and "real 1.000x" in text
