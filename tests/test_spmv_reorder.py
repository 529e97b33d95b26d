"""benchmarks/spmv_reorder.py on the CPU: both column layouts renumber A and x consistently, so every
variant on them matches scipy on the matrix's own columns."""
import numpy as np
import pytest
import torch
from conftest import load_benchmark, skewed_problem


@pytest.fixture(scope="module")
def reorder():
    return load_benchmark("spmv_reorder")


@pytest.fixture(scope="module")
def skewed():
    return skewed_problem(3)  # scrambled power-law columns: the layouts move most of them


def test_by_use_puts_the_most_used_columns_first(reorder, skewed):
    csr, _, _ = skewed
    order, renumbered = reorder.by_use(csr.indices, csr.cols)
    uses = torch.bincount(renumbered, minlength=csr.cols)
    assert torch.equal(order.sort().values, torch.arange(csr.cols))  # a permutation
    assert bool((uses[:-1] >= uses[1:]).all()) and uses[0] > uses[-1]
    assert torch.equal(order.index_select(0, renumbered.long()), csr.indices.long())


def test_hot_first_packs_the_hot_columns_and_shifts_the_rest(reorder, skewed):
    csr, _, _ = skewed
    hot_columns, renumbered = reorder.hot_first(csr.indices, csr.cols, 50)
    original = torch.where(renumbered < 50, hot_columns.index_select(0, renumbered.clamp(max=49).long()),
                           renumbered.long() - 50)
    assert torch.equal(original, csr.indices.long())
    uses = torch.bincount(csr.indices, minlength=csr.cols)
    assert uses[hot_columns].min() >= uses.sort(descending=True).values[49]


def test_every_layout_matches_scipy(reorder, skewed, monkeypatch):
    csr, x, expected = skewed
    monkeypatch.setattr(reorder, "HOT", 64)
    runs, extras = reorder.timed_calls(csr, x)
    assert len(runs) == len(reorder.VARIANTS) * len(reorder.LAYOUTS)
    for name, fn in runs.items():
        y = fn().double().numpy()
        assert np.allclose(y, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max()), name
    assert torch.equal(extras["gather bound"](), x[csr.indices.long()])
