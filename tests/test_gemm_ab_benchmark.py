"""benchmarks/gemm_ab.py: the version before a change runs as a module of its own beside the
working tree's, each result checked; the summary's geometric means; the PTX comparison."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gemm_ab  # noqa: E402
from seer.errors import InputError  # noqa: E402


def _before_with_a_wrong_sum(tmp_path) -> Path:
    """kernels/gemm.py with its tile loop doubling what it accumulates: a version the check must refuse."""
    text = (ROOT / "kernels" / "gemm.py").read_text()
    assert "acc = tl.dot(a, b, acc)\n        a_ptrs" in text
    path = tmp_path / "gemm-before.py"
    path.write_text(text.replace("acc = tl.dot(a, b, acc)\n        a_ptrs", "acc = tl.dot(a, b, acc) * 2\n        a_ptrs"))
    return path


def test_both_versions_run_side_by_side_and_a_wrong_one_is_caught(tmp_path):
    import seer.kernels.gemm as after

    before = gemm_ab.load_before(_before_with_a_wrong_sum(tmp_path))
    assert before._gemm_kernel is not after._gemm_kernel
    a, b = torch.randn(24, 96).to(torch.bfloat16), torch.randn(40, 96).to(torch.bfloat16).t()
    expected = torch.matmul(a, b).float()
    call = gemm_ab.checked_call(after, "tile_16x64x128_w4s4g1", a, b, expected)
    assert torch.allclose(call().float(), expected, rtol=2e-2, atol=2e-2)
    with pytest.raises(AssertionError, match="seer.kernels.gemm_before tile_16x64x128_w4s4g1: relative error"):
        gemm_ab.checked_call(before, "tile_16x64x128_w4s4g1", a, b, expected)
    with pytest.raises(InputError):  # the module is the real one: its checks hold
        gemm_ab.checked_call(before, "tile_16x64x128_w4s4g1", a, b[:5], expected)


def test_the_summary_splits_the_control_from_the_tile_loop():
    rows = [{"shape": "l/m8", "b": "row-major", "variant": "tile_x", "before_ms": 1.0, "after_ms": ratio}
            for ratio in (1.21, 1.0)]
    rows.append({"shape": "l/m8", "b": "row-major", "variant": "tma_y", "before_ms": 2.0, "after_ms": 1.0})
    env = {"date": "2026-11-29", "versions": {"torch": "t", "triton": "3.6"}, "device": {"name": "Test GPU"}}
    text = gemm_ab.markdown({"label": "a change", "before": "old.py", "rounds": 2, "environment": env,
                             "command": "python benchmarks/gemm_ab.py", "rows": rows})
    assert "| tile_x | 2 | 1.100 | 1.000 | 1.210 |" in text
    assert "| tma_y (control: no tile loop) | 1 | 0.500 |" in text
    assert "Tile-loop variants, every shape: **1.100** (2 cells); TMA control: 0.500 (1 cells)." in text


def test_the_ptx_comparison_compiles_both_versions_for_hopper(tmp_path):
    """In a process without the interpreter (its JIT functions cannot compile)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gemm_ab.py"), "--before", str(ROOT / "kernels" / "gemm.py"),
                    "--label", "none", "--out", str(tmp_path), "--ptx"], check=True, env=env, capture_output=True)
    lines = [line for line in (tmp_path / "gemm-ab-ptx.md").read_text().splitlines() if line.startswith("| row-major")]
    assert len(lines) == 2 and lines[0].split("|")[3:] == lines[1].split("|")[3:]  # the same file: the same PTX
    assert "{'16': 24}" in lines[0]
