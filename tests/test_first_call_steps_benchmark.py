"""benchmarks/first_call_steps.py on the CPU (Triton interpreter): every step of a first call is
stamped once per try, and the steps add up to the whole call."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import load_benchmark


@pytest.fixture
def bench(monkeypatch):
    module = load_benchmark("first_call_steps")
    dispatch_module = __import__("sys").modules["seer.dispatch"]
    for name in module.STEPS:  # put back after the test what stamped() wraps
        monkeypatch.setattr(dispatch_module, name, getattr(dispatch_module, name))
    monkeypatch.setattr(dispatch_module._cache, "put", dispatch_module._cache.put)
    monkeypatch.setattr(module, "TRIES", 4)
    monkeypatch.setattr(module, "WARMUP", 1)
    return module


@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
def test_steps_add_up_to_the_whole_call(bench):
    m = sp.random(120, 120, density=0.05, format="csr", random_state=5, dtype=np.float32)
    m.data = np.random.default_rng(5).uniform(0.5, 1.5, m.nnz).astype(np.float32)
    parts = (torch.from_numpy(m.indptr), torch.from_numpy(m.indices), torch.from_numpy(m.data), m.shape)
    marks = []
    bench.stamped(marks)
    found = bench.steps(parts, torch.rand(120), lambda: None, marks)
    assert list(found)[:5] == ["_first_call", "_decide", "_bound", "_schedule_recheck", "put"]
    parts_sum = sum(v for k, v in found.items() if k != "whole")
    assert min(found.values()) >= 0 and parts_sum == pytest.approx(found["whole"], rel=0.2)
