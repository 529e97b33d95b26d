"""benchmarks/spmv_pass_tiles.py: its summary and its Markdown, for this run's cuts and the earlier
runs' (the GPU part runs on the device)."""
import json
import sys

import pytest
from conftest import load_benchmark


def _row(source, nnz, cuts):
    return {"id": f"{source}-{nnz}", "source": source, "rows": nnz // 4, "nnz": nnz,
            "cuts": {name: {"stats_us": w, "plain_us": p} for name, (w, p) in cuts.items()}}


def test_summary_compares_each_cut_with_four_warps_on_the_same_inputs():
    script = load_benchmark("spmv_pass_tiles")
    rows = [_row("real", 5_000, {"warps4": (5.0, 4.9), "warps8": (5.5, 5.2), "shipped": (5.0, 4.9)}),
            _row("real", 9_000, {"warps4": (6.0, 5.7), "warps8": (6.0, 5.9), "shipped": (6.0, 5.7)}),
            _row("synthetic", 2_000_000, {"warps4": (20.0, 19.0), "warps8": (19.0, 18.5), "shipped": (19.0, 18.5)})]
    summary = {(s["subset"], s["cut"]): s for s in script.summary(rows)}
    real8 = summary[("real", "warps8")]
    assert real8["inputs"] == 2 and real8["over_baseline"] == pytest.approx((1.1 + 1.0) / 2)
    assert real8["added_mean_us"] == pytest.approx((0.3 + 0.1) / 2)
    large = summary[("generated, nnz 1e6-1e7", "shipped")]
    assert large["over_baseline"] == pytest.approx(0.95) and large["plain_us"] == 18.5


def test_renders_an_earlier_run_whose_cuts_had_more_knobs(tmp_path, monkeypatch):
    """The first runs compared every cut with the then shipped one (``over_shipped``) and named
    cuts by six knobs; their JSON renders again."""
    script = load_benchmark("spmv_pass_tiles")
    rows = [_row("real", 5_000, {"shipped": (5.0, 4.9), "stages2": (5.6, 5.4)})]
    result = {"environment": {"device": {"name": "GPU"}, "date": "2026-11-26", "versions": {"torch": "t", "triton": "3.6"}},
              "command": "python x", "cuts": {"shipped": [1024, 4096, 4, 1, False, 2], "stages2": [1024, 4096, 4, 2, False, 2]},
              "rows": rows,
              "summary": [{**s, "over_shipped": s.pop("over_baseline")} for s in script.summary(rows)]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(result))
    monkeypatch.setattr(sys, "argv", ["spmv_pass_tiles.py", "--render", str(path)])
    assert script.main() == 0
    text = path.with_suffix(".md").read_text()
    assert "`stages2` [1024, 4096, 4, 2, False, 2]" in text
    assert "| real | 1 | stages2 | 5.60 | 5.40 | 1.120 | +0.20 | +0.20 |" in text
