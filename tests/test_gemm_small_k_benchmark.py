"""benchmarks/gemm_small_k.py on the CPU: the shallow tiles are real variants of seer's GEMM kernel,
and the summary's gains are computed against what seer can run today."""
import numpy as np
import pytest
import torch
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("gemm_small_k")


def test_shallow_tiles_multiply_like_float64(bench):
    from seer.kernels import gemm

    gen = torch.Generator().manual_seed(3)
    a = torch.randn(40, 70, generator=gen).to(torch.bfloat16)  # K of 70: three 32-deep steps, the last masked
    b = torch.randn(70, 90, generator=gen).to(torch.bfloat16)
    exact = a.double() @ b.double()
    variant = bench.shallow_variants()["tile_64x128x32_w4s3g8"]
    c = torch.full((40, 90), float("nan"), dtype=torch.bfloat16)
    variant.run(gemm.problem((a, b)), a, b, out=c)
    np.testing.assert_allclose(c.double().numpy(), exact.numpy(), rtol=2e-2, atol=5e-2)


def test_summary_compares_the_best_shallow_tile_with_what_seer_runs_today(bench):
    from seer.kernels.gemm import VARIANTS

    shallow = list(bench.shallow_variants())
    times = {name: 2.0 for name in VARIANTS} | {"torch_matmul": 1.0} | {name: 4.0 for name in shallow}
    slow = bench.summarise_row(128, 4096, 64, times, shallow)
    times |= {shallow[0]: 0.5, "torch_matmul": 2.0, next(n for n in VARIANTS if n != "torch_matmul"): 1.0}
    fast = bench.summarise_row(382, 5344, 133, times, shallow)
    assert fast["shallow_choice"] == shallow[0] and fast["shipped_ms"] == 1.0
    s = bench.summary([slow, fast])
    assert s["by_k"]["64"] == {"shapes": 1, "shallow_over_torch": 0.25, "shallow_over_shipped": 0.5,
                               "shallow_over_best_known": 0.25, "shallow_fastest_on": 0}
    assert s["by_k"]["133"]["shallow_over_best_known"] == 2.0 and s["by_k"]["133"]["shallow_fastest_on"] == 1
    assert s["all"]["shallow_over_torch"] == pytest.approx((0.25 * 4.0) ** 0.5)
    text = bench.markdown({"device": {"name": "H100"}, "date": "d", "versions": {"torch": "t", "triton": "r"},
                           "command": "c", "method": "m", "rows": [slow, fast], "summary": s})
    assert "| 133 | 1 | 4.000 | 2.000 | 2.000 | 1 |" in text
    assert "| 382 x 5344 x 133 | 2.0000 | 1.0000 (" in text and f"| 0.5000 ({shallow[0]}) |" in text
