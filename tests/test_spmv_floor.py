"""benchmarks/spmv_floor.py on the CPU: the runs it times compute what they claim (every variant and
the free-gather control against scipy, the gather bound against indexing), and its ceilings follow
from the times."""
import numpy as np
import pytest
import torch
from conftest import load_benchmark, skewed_problem


@pytest.fixture(scope="module")
def floor():
    return load_benchmark("spmv_floor")


@pytest.fixture(scope="module")
def skewed():
    csr, x, _ = skewed_problem(5)
    return csr, x


@pytest.mark.parametrize("table_best", ["merge_c512", "scalar_r128", "vector_g16"])
def test_every_timed_run_computes_what_it_claims(floor, skewed, table_best):
    csr, x = skewed
    variants, controls = floor.timed_calls(csr, x, table_best)
    assert set(variants) == {"merge_c512", table_best, "free gathers"}
    a = csr.to_scipy().astype(np.float64)
    expected = {name: a @ x.double().numpy() for name in ("merge_c512", table_best)}
    # every column index 0: each row's values summed, times x[0]
    expected["free gathers"] = np.asarray(a.sum(axis=1)).ravel() * float(x[0])
    for name, (matrix, fn) in variants.items():
        y = fn().double().numpy()
        assert np.allclose(y, expected[name], rtol=1e-5, atol=1e-5 * np.abs(expected[name]).max()), name
    assert torch.equal(controls["gather bound"](), x[csr.indices.long()])
    copied = controls["same-size copy"]()
    assert copied.numel() * 8 == floor.minimum_bytes(csr.rows, csr.cols, csr.nnz) // 8 * 8


def test_families_and_round_robin(floor):
    ids = ["synthetic/rmat/scale20/seed0", "derived/HB/can_838/copies120-permute0-coupling0/seed0",
           "derived/HB/bcsstk08/copies985-permute1-coupling98/seed0", "synthetic/banded/n1/seed0",
           "synthetic/rmat/scale21/seed0"]
    assert [floor.family(i) for i in ids] == ["rmat", "replicas", "replicas, permuted", "banded", "rmat"]

    class Case:
        def __init__(self, id):
            self.id = id

    order = [c.id for c in floor.round_robin([Case(i) for i in ids])]
    assert order == [ids[0], ids[2], ids[3], ids[1], ids[4]]


def test_ceilings_follow_from_the_times(floor):
    def row(family, single, best, gather, copy):
        return {"family": family, "table_best": "scalar_r128", "time_ms": {
                "merge_c512": single, "scalar_r128": best, "free gathers": best / 2, "gather bound": gather,
                "same-size copy": copy}}

    # a skewed matrix whose gather bound is under its best time, a regular one whose gather bound is above
    s = floor.summary([row("rmat", 2.0, 1.0, 0.5, 0.25), row("banded", 1.0, 1.0, 2.0, 0.5)])
    assert s["matrices"] == 2
    assert s["oracle_over_single"] == pytest.approx(np.sqrt(2.0 * 1.0))
    assert s["gather_floor_over_single"] == pytest.approx(np.sqrt(4.0 * 1.0))
    assert s["copy_floor_over_single"] == pytest.approx(np.sqrt(8.0 * 2.0))
    # each at the floor that binds it: the R-MAT at its gather bound, the band at its copy
    assert s["binding_floor_over_single"] == pytest.approx(np.sqrt(4.0 * 2.0))
    assert s["gather_over_best"] == pytest.approx(np.sqrt(0.5 * 2.0))
    assert s["free_over_best"] == pytest.approx(0.5)
