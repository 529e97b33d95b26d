"""benchmarks/family_losses.py on a planted table (CPU): the validated path's per-row frame agrees
with its scores, and the per-family sums add up to the subset's fraction of the oracle."""
import numpy as np
import pytest
from conftest import load_benchmark
from synthetic_profiles import planted_frame, planted_meta, toy_op  # noqa: F401 (toy_op is a fixture)

from seer.table import ProfileTable

pytestmark = pytest.mark.usefixtures("toy_op")


@pytest.fixture(scope="module")
def losses():
    return load_benchmark("family_losses")


def test_family_sums_add_up_to_the_fraction_of_oracle(losses):
    table = ProfileTable.from_frame(planted_frame(gather_cost=20.0, seed=2), "toy", planted_meta())
    free = np.full(len(table), 1e-3)
    frame = losses.held_out(table, free, None, (1, 100))
    assert len(frame) == len(table) and (frame["ratio@1"] >= 1).all()
    report_fraction = losses.TwoStageSelector().evaluate(table, calls=(1, 100), free_gather_ms=free)
    fraction = report_fraction.validated_scores["all"][100]["fraction_of_oracle_with_gather"]
    per_family = losses.family_losses({"a": frame, "b": frame}, 100)
    assert list(per_family.columns) == ["a", "b", "mean"]
    assert per_family["mean"].is_monotonic_decreasing
    np.testing.assert_allclose(np.exp(-per_family["a"].sum() / len(frame)), fraction, rtol=1e-6)  # scores are rounded
