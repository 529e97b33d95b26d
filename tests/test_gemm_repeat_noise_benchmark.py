"""benchmarks/gemm_repeat_noise.py: only the shapes where seer keeps cuBLAS, both timings of one call."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gemm_repeat_noise  # noqa: E402


def test_counts_the_shapes_whose_two_timings_of_one_call_differ():
    rows = [{"choice": "torch_matmul", "seer_ms": 1.0, "time_ms:torch_matmul": 1.0},
            {"choice": "torch_matmul", "seer_ms": 1.2, "time_ms:torch_matmul": 1.0},
            {"choice": "torch_matmul", "seer_ms": 1.0, "time_ms:torch_matmul": 1.1},
            {"choice": "tile_64x64", "seer_ms": 9.0, "time_ms:torch_matmul": 1.0}]  # another call: left out
    figures = gemm_repeat_noise.noise({"rows": rows})
    assert figures["shapes"] == 3 and figures["apart_by_more_than_5_percent"] == 2
    assert figures["geomean_second_over_first"] == pytest.approx((1.2 / 1.1) ** (1 / 3))


def test_shapes_without_a_checked_time_are_left_out():
    """gemm.py writes a wrong variant's time as null since session 53: the ratio raised a TypeError."""
    from conftest import load_benchmark

    bench = load_benchmark("gemm_repeat_noise")
    rows = [{"choice": "torch_matmul", "seer_ms": 1.0, "time_ms:torch_matmul": 1.0},
            {"choice": "torch_matmul", "seer_ms": 1.0, "time_ms:torch_matmul": None}]
    assert bench.noise({"rows": rows})["shapes"] == 1
