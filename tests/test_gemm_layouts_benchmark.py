"""benchmarks/gemm_layouts.py on the CPU: its summary and table from rows of known times."""
import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("gemm_layouts")


def _row(layout, choice, chosen_ms, torch_ms, seer_ms, best_ms):
    from seer.kernels.gemm import VARIANTS

    times = {f"time_ms:{name}": 10.0 for name in VARIANTS}
    first_tile = next(name for name in VARIANTS if name != "torch_matmul")
    times |= {f"time_ms:{first_tile}": best_ms, "time_ms:torch_matmul": torch_ms, f"time_ms:{choice}": chosen_ms}
    return {"id": "llama/m8", "layout": layout, "m": 8, "n": 4096, "k": 4096, "choice": choice, "seer_error": 1e-3,
            "loop_us:seer": 1e3 * seer_ms, "loop_us:torch_matmul": 1e3 * torch_ms, **times}


def test_the_summary_scores_each_layout_against_torch_and_the_oracle(bench):
    rows = [_row("row-major", "tile_16x64x128_w4s4g1", 1.0, 2.0, 1.0, 1.0),
            _row("row-major", "tile_16x64x128_w4s4g1", 1.0, 0.5, 1.0, 0.5),
            _row("transposed", "tile_16x64x128_w4s4g1", 4.0, 1.0, 4.0, 1.0)]
    summary = bench.summarise(rows)
    assert summary["row-major"]["shapes"] == 2 and summary["row-major"]["slower_than_torch_by_5pct"] == 1
    assert summary["row-major"]["speedup_over_torch_matmul_dispatch_included"] == pytest.approx(1.0)
    assert summary["transposed"]["speedup_over_torch_matmul"] == pytest.approx(0.25)
    assert summary["transposed"]["fraction_of_oracle"] == pytest.approx(0.25)
    env = {"device": {"name": "NVIDIA H200"}, "command": "python benchmarks/gemm_layouts.py", "date": "today",
           "versions": {"torch": "2.11", "triton": "3.6"}}
    text = bench.markdown(summary, env, rows)
    assert "| transposed | 1 | 0.250x | 0.250x | 0.250 | 1 | 0 |" in text
    assert "| llama/m8 | transposed | tile_16x64x128_w4s4g1 | 4000.0 | 1000.0 | 4.0000 | 1.0000 |" in text
    wrong = _row("transposed", "torch_matmul", 1.0, 1.0, 1.0, 1.0) | {"id": "wrong", "seer_error": 0.3}
    assert bench.summarise([*rows, wrong])["transposed"]["left_out"] == ["wrong"]
