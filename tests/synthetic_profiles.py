"""A toy op and synthetic profile tables with a planted rule, for the selection-core tests.

The module is itself the toy op's feature module (KNOWN, GATHERED, hand_rule) and kernel
stand-in (VARIANTS); the ``toy_op`` fixture adds op ``toy`` to the registry for one test
module (import it into the module and mark the module ``usefixtures("toy_op")``).

Planted rule (times in units of a size-dependent base time, +-3 % noise):
    nnz < 5000                  -> a   (a 1.0, b 1.5, c 2.0)
    nnz >= 5000, row_cv <= 2    -> b   (a 2.0, b 1.0, c 2.0)
    nnz >= 5000, row_cv > 2     -> c   (a 2.0, b 2.5, c 1.0)
row_cv is a gathered feature independent of the known ones, so for big inputs only
gathering tells b from c. ``gather_ms = gather_cost * base``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.tree import DecisionTreeClassifier

from seer import registry
from seer.features_base import Feature
from seer.model import GATHER, SelectorModel
from seer.table import write_table
from seer.tree import Tree

OP = "toy"
KNOWN = (
    Feature("rows", "rows", integer=True),
    Feature("cols", "columns", integer=True),
    Feature("nnz", "nnz", integer=True),
    Feature("mean_row", "mean row length", unit="nnz/row"),
)
GATHERED = (
    Feature("row_cv", "row-length CV"),
    Feature("row_max", "longest row", unit="nnz", integer=True),
)
VARIANTS = {"a": None, "b": None, "c": None}
THRESHOLD_NNZ = 5000
THRESHOLD_CV = 2.0


def hand_rule(features: dict) -> str:
    return "a" if features["nnz"] < 10_000 else "b"


@pytest.fixture(scope="module")
def toy_op():
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(registry.OPS, OP, registry.OpEntry(OP, __name__, __name__, "toy op for tests"))
        yield OP


def planted_times(nnz: np.ndarray, cv: np.ndarray) -> np.ndarray:
    """[n, 3] relative times of a, b, c under the planted rule (no noise, no base)."""
    small = nnz < THRESHOLD_NNZ
    skewed = cv > THRESHOLD_CV
    a = np.where(small, 1.0, 2.0)
    b = np.where(small, 1.5, np.where(skewed, 2.5, 1.0))
    c = np.where(small | ~skewed, 2.0, 1.0)
    return np.column_stack([a, b, c])


def base_ms(nnz: np.ndarray) -> np.ndarray:
    return 0.005 + 2e-6 * nnz


def planted_frame(groups: int = 60, per_group: int = 5, gather_cost: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """A profile table frame: ``groups`` families of ``per_group`` similar inputs."""
    rng = np.random.default_rng(seed)
    n = groups * per_group
    group = np.repeat(np.arange(groups), per_group)
    nnz = np.rint(10 ** rng.uniform(2.5, 4.5, groups)[group] * np.exp(rng.normal(0, 0.1, n)))
    cv = rng.uniform(0.2, 4.0, groups)[group] * np.exp(rng.normal(0, 0.1, n))
    rows = np.maximum(1, np.rint(nnz / rng.uniform(2, 20, n)))
    mean_row = nnz / rows
    base = base_ms(nnz)
    times = planted_times(nnz, cv) * base[:, None] * np.exp(rng.normal(0, 0.03, (n, 3)))
    frame = pd.DataFrame({
        "id": [f"m{g}_{i}" for g, i in zip(group, np.tile(np.arange(per_group), groups))],
        "group": [f"g{g}" for g in group],
        "source": np.where(group < 2 * groups // 3, "real", "synthetic"),
        "rows": rows, "cols": rows, "nnz": nnz, "mean_row": mean_row,
        "row_cv": cv, "row_max": np.rint(mean_row * (1 + 3 * cv)),
        "gather_ms": gather_cost * base,
    })
    for j, variant in enumerate("abc"):
        frame[f"time_ms:{variant}"] = times[:, j]
    frame["baseline_ms:vendor"] = 1.3 * base
    frame["call_us:a"] = 20.0
    return frame


def planted_meta() -> dict:
    return {
        "op": OP,
        "device": {"name": "Synthetic GPU", "capability": [9, 0]},
        "versions": {"torch": "2.11.0", "triton": "3.6.0", "seer": "0.1.0", "cuda": "12.8"},
        "date": "2025-01-01T00:00:00+00:00",
        "command": "synthetic_profiles.planted_frame()",
        "notes": "planted rule",
    }


def write_planted(path, **kwargs):
    """Write a planted table and its metadata; returns the CSV path."""
    return write_table(planted_frame(**kwargs), path, planted_meta())


def grown_chain(depth, labels):
    """A tree ``depth`` splits deep, grown as training grows one (scikit-learn, then
    Tree.from_sklearn), with its rows and costs: on nnz = 0, 1, ..., depth, whose best labels
    take turns, each split parts the smallest value from the rest, so nnz <= k chooses
    labels[k % 2] and larger values go on down; the last leaf, nnz > depth - 1, labels[depth % 2]."""
    nnz = np.arange(depth + 1.0)[:, None]
    best = np.arange(depth + 1) % 2
    costs = np.where(np.arange(len(labels)) == best[:, None], 1.0, 2.0)
    estimator = DecisionTreeClassifier(random_state=0).fit(nnz, best)
    return Tree.from_sklearn(estimator, ("nnz",), labels, nnz, costs), nnz, costs


def deep_model(depth):
    """A two-stage model of chains ``depth`` splits deep: stage 1 gathers above them all (nnz > depth,
    gated as training gates it), stage 2 chooses at each step the label stage 1 does not."""
    chain, nnz, costs = grown_chain(depth, ("a", "b", GATHER))
    stage2, _, _ = grown_chain(depth, ("b", "a"))
    return SelectorModel("mystery", ("a", "b"), ("nnz",), ("row_cv",),
                         {1: chain.gated("nnz", float(depth), GATHER, nnz, costs)}, {1: stage2})
