"""benchmarks/spmv_ab.py: the version before a change runs as a module of its own beside the
working tree's, on a matrix object of its own, each result checked; the summary's geometric means."""
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import spmv_ab  # noqa: E402


def _before(tmp_path, wrong: bool) -> Path:
    """kernels/spmv.py as it is, or with the row-mapped kernels' products doubled: a version the check
    must refuse."""
    text = (ROOT / "kernels" / "spmv.py").read_text()
    line = "        acc += a.to(tl.float32) * xv.to(tl.float32)\n    return tl.sum(acc, axis=1)"
    assert line in text
    path = tmp_path / "spmv-before.py"
    path.write_text(text.replace(line, line.replace("xv.to(tl.float32)", "xv.to(tl.float32) * 2")) if wrong else text)
    return path


def _parts():
    matrix = sp.random(300, 200, density=0.05, format="csr", random_state=np.random.default_rng(0), dtype=np.float32)
    matrix.data += 0.5  # no zero values
    parts = (torch.from_numpy(matrix.indptr).to(torch.int32), torch.from_numpy(matrix.indices).to(torch.int32),
             torch.from_numpy(matrix.data), matrix.shape)
    return parts, torch.from_numpy(np.random.default_rng(1).standard_normal(200).astype(np.float32))


def test_both_versions_run_on_matrices_of_their_own_and_a_wrong_one_is_caught(tmp_path):
    parts, x = _parts()
    before = spmv_ab.load_before(_before(tmp_path, wrong=False))
    assert before._segment_sums is not spmv_ab.after._segment_sums
    runs, csr = spmv_ab.checked_runs(before, parts, x, "random")
    assert set(runs) == {f"{n}@{side}" for n in spmv_ab.VARIANTS for side in ("before", "after")}
    assert (csr.rows, csr.nnz) == (300, parts[1].numel())
    wrong = spmv_ab.load_before(_before(tmp_path, wrong=True))
    with pytest.raises(AssertionError, match=r"scalar_r128@before is wrong on random: relative error"):
        spmv_ab.checked_runs(wrong, parts, x, "random")


def test_the_summary_gives_each_variants_ratios():
    rows = [{"id": f"m{i}", "group": "g", "rows": 10, "nnz": 1000,
             "time_ms": {f"{n}@{side}": (ratio if side == "after" and n == "scalar_r128" else 1.0)
                         for n in spmv_ab.VARIANTS for side in ("before", "after")}}
            for i, ratio in enumerate((1.21, 1.0))]
    result = {"label": "a change", "before": "old.py", "date": "2026-12-01", "device": {"name": "Test GPU"},
              "versions": {"torch": "t", "triton": "3.6"}, "command": "python benchmarks/spmv_ab.py", "matrices": rows}
    text = spmv_ab.markdown(result)
    assert "| scalar_r128 | 2 | 1.100 | 1.000 | 1.210 |" in text
    assert "| merge_c512 (control: unchanged) | 2 | 1.000 |" in text
    assert "| m0 | 1,000 | 1.210 | 1.000 |" in text
