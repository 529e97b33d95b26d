"""benchmarks/gemm_profile.py on the CPU: the shapes it sweeps."""
import pytest
import torch
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("gemm_profile")


def test_skinny_shapes_are_short_k_in_budget_and_seeded(bench):
    shapes = bench.skinny_shapes(200, seed=0, max_flops=bench.LLM_MAX_FLOPS)
    assert len({s.id for s in shapes}) == 200
    assert all(s.id == f"skinny/0/{i}/{s.m}x{s.n}x{s.k}" for i, s in enumerate(shapes))
    assert all(32 <= s.k <= 512 and 1 <= s.m <= 8192 and 256 <= s.n <= 16384 for s in shapes)
    assert all(s.flops <= bench.LLM_MAX_FLOPS and s.dtype in (torch.float16, torch.bfloat16) for s in shapes)
    multiples = sum(s.k % 64 == 0 for s in shapes)
    assert 70 <= multiples <= 150 and any(s.k % 2 for s in shapes)  # about half rounded to 64; odd K among the rest
    assert [(s.m, s.n, s.k) for s in bench.skinny_shapes(20, 0, bench.LLM_MAX_FLOPS)] == \
        [(s.m, s.n, s.k) for s in shapes[:20]]


def test_skinny_shapes_are_new_ids_beside_the_others(bench):
    """A sweep resumed with --skinny times only them: their ids are none of the earlier shapes'."""
    earlier = bench.random_shapes(40, 0, bench.LLM_MAX_FLOPS)
    skinny = bench.skinny_shapes(40, 0, bench.LLM_MAX_FLOPS)
    assert {s.id for s in earlier}.isdisjoint(s.id for s in skinny)
    assert sum(r.m == s.m for r, s in zip(earlier, skinny)) < 5  # drawn apart, not paired by index


def test_odd_k_shapes_are_short_and_odd(bench):
    shapes = bench.skinny_shapes(100, seed=0, max_flops=bench.LLM_MAX_FLOPS, odd_k=True)
    assert all(s.k % 2 == 1 and 33 <= s.k <= 513 and s.id.startswith("odd-k/0/") for s in shapes)
    assert {s.id for s in shapes}.isdisjoint(s.id for s in bench.skinny_shapes(100, 0, bench.LLM_MAX_FLOPS))


def test_the_skinny_table_keeps_the_first_generators_rows_apart_from_the_sweep_resumed_into_it(bench):
    """That table's first skinny rows came from an earlier generator; the sweep resumed into it
    (NOTES, GEMM "Odd K at scale") added today's 100 short-K and 200 odd-K shapes as rows of their
    own, the 211 earlier rows kept."""
    import pandas as pd
    from conftest import ROOT

    table = pd.read_csv(ROOT / "benchmarks" / "results" / "gemm-h100-skinny" / "gemm-candidates.csv")
    today = {s.id for s in bench.skinny_shapes(100, 0, bench.LLM_MAX_FLOPS)
             + bench.skinny_shapes(200, 0, bench.LLM_MAX_FLOPS, odd_k=True)}
    ids = set(table["id"])
    assert table["id"].is_unique and today <= ids and len(ids - today) == 211


def test_a_sweep_is_resumed_on_its_own_gpu_only(bench, tmp_path):
    """Resumed on an H200 into the H100's folder, the sweep appended H200 rows and its metadata named
    the H200 alone."""
    import json

    import pandas as pd

    names = ["torch_matmul", "tile_64x64x64_w4s4g8"]
    pd.DataFrame([{"id": "s0", **{f"time_ms:{n}": 1.0 for n in names}}]).to_csv(tmp_path / "gemm-candidates.csv",
                                                                               index=False)
    meta = {"device": {"name": "NVIDIA H100 80GB HBM3"}, "commands": ["first"]}
    (tmp_path / "gemm-candidates.meta.json").write_text(json.dumps(meta))
    rows, earlier = bench.earlier_rows(tmp_path, names, "NVIDIA H100 80GB HBM3")
    assert [r["id"] for r in rows] == ["s0"] and earlier["commands"] == ["first"]
    with pytest.raises(SystemExit, match="was swept on 'NVIDIA H100 80GB HBM3', this run is on 'NVIDIA H200'"):
        bench.earlier_rows(tmp_path, names, "NVIDIA H200")
    (tmp_path / "gemm-candidates.meta.json").unlink()
    with pytest.raises(SystemExit, match="was swept on 'an unrecorded GPU'"):
        bench.earlier_rows(tmp_path, names, "NVIDIA H200")
