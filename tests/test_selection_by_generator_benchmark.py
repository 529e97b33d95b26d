"""benchmarks/selection_by_generator.py: synthetic rows regrouped by generator, others as they were."""
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import selection_by_generator  # noqa: E402


class _Table:
    def __init__(self, frame):
        self.frame = frame


def test_synthetic_groups_are_cut_to_their_generator(monkeypatch):
    monkeypatch.setattr(selection_by_generator, "replace", lambda table, frame: _Table(frame))
    frame = pd.DataFrame({
        "source": ["synthetic", "synthetic", "derived", "real"],
        "group": ["synthetic/stencil_2d/points5", "synthetic/stencil_2d/points9", "derived/HB/bcsstk", "HB/bcsstk"],
    })
    regrouped = selection_by_generator.by_generator(_Table(frame)).frame
    assert list(regrouped.group) == ["synthetic/stencil_2d", "synthetic/stencil_2d", "derived/HB/bcsstk", "HB/bcsstk"]
    assert list(frame.group)[0] == "synthetic/stencil_2d/points5"  # the table's own frame untouched
