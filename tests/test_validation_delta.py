"""benchmarks/validation_delta.py: a change's cost to the validation pass, input by input."""
import json
import sys

import pytest
from conftest import load_benchmark


def _run(stats: dict, device: str = "GPU A") -> dict:
    rows = [{"id": i, "source": "real" if i.startswith("r") else "synthetic", "nnz": nnz, "before_us": 9.0,
             "validate_us": 5.0, "plain_us": 4.0, "gather_us": 3.0, "kernel_us": 2.0, "stats_us": s}
            for i, (nnz, s) in stats.items()]
    return {"benchmark": "spmv validation pass", "command": "python benchmarks/spmv_validation.py",
            "environment": {"device": {"name": device}, "versions": {"torch": "t", "triton": "x"}, "date": "d"},
            "summary": [], "rows": rows}


def test_stats_become_the_difference_on_shared_inputs(tmp_path, monkeypatch):
    script = load_benchmark("validation_delta")
    new = _run({"r1": (10, 0.75), "g1": (2_000_000, -3.0), "g2": (3_000_000, 1.5)})
    old = _run({"r1": (10, 0.25), "g1": (2_000_000, -5.5)})
    paths = [tmp_path / "new.json", tmp_path / "old.json"]
    for path, result in zip(paths, (new, old)):
        path.write_text(json.dumps(result))
    out = tmp_path / "delta.json"
    monkeypatch.setattr(sys, "argv", ["validation_delta.py", *map(str, paths), "--out", str(out)])
    assert script.main() == 0
    written = json.loads(out.read_text())
    assert {r["id"]: r["stats_us"] for r in written["rows"]} == {"r1": 0.5, "g1": 2.5}
    assert written["runs"] == {"new": new["command"], "old": old["command"]}
    assert "less that of old.json" in out.with_suffix(".md").read_text()


def test_runs_on_different_gpus_are_refused(tmp_path, monkeypatch):
    script = load_benchmark("validation_delta")
    paths = [tmp_path / "new.json", tmp_path / "old.json"]
    for path, device in zip(paths, ("GPU A", "GPU B")):
        path.write_text(json.dumps(_run({"r1": (10, 1.0)}, device)))
    monkeypatch.setattr(sys, "argv", ["validation_delta.py", *map(str, paths), "--out", str(tmp_path / "d.json")])
    with pytest.raises(SystemExit, match="different GPUs"):
        script.main()


def test_kernel_charge_is_the_difference_of_the_kernels_with_statistics():
    script = load_benchmark("validation_delta")
    new, old = _run({"r1": (10, 0.75), "g1": (2_000_000, 4.0)}), _run({"r1": (10, 0.25), "g1": (2_000_000, -5.5)})
    new["rows"][0]["kernel_us"], new["rows"][1]["kernel_us"] = 2.5, 1.25  # old's kernels took 2.0
    charged = {r["id"]: r["stats_us"] for r in script.delta(new, old, charge="kernel")["rows"]}
    assert charged == {"r1": 0.5, "g1": -0.75}


def test_paired_medians_of_a_read_back_change(tmp_path, monkeypatch):
    script = load_benchmark("validation_delta")
    new, old = _run({"g1": (2_000_000, 1.0), "g2": (3_000_000, 1.0), "g3": (4_000_000, 1.0)}), \
        _run({"g1": (2_000_000, 0.5), "g2": (3_000_000, 0.7), "g9": (5_000_000, 9.0)})
    for row, plain in zip(new["rows"], (7.0, 8.0, 9.0)):
        row.update(validate_us=row["validate_us"] - 3.0, plain_kernel_us=plain)
    for row, plain in zip(old["rows"], (5.0, 6.0, 1.0)):
        row["plain_kernel_us"] = plain
    paths = [tmp_path / "new.json", tmp_path / "old.json"]
    for path, result in zip(paths, (new, old)):
        path.write_text(json.dumps(result))
    out = tmp_path / "paired.json"
    monkeypatch.setattr(sys, "argv", ["validation_delta.py", *map(str, paths), "--paired", "--out", str(out)])
    assert script.main() == 0
    written = json.loads(out.read_text())
    assert written["inputs"] == 2  # g1 and g2: g3 and g9 are in one run only
    assert written["columns"]["validate_us"] == {"old": 5.0, "new": 2.0, "difference": -3.0}
    assert written["columns"]["plain_kernel_us"] == {"old": 5.5, "new": 7.5, "difference": 2.0}
    assert written["columns"]["stats_us"]["difference"] == pytest.approx(0.4)
    assert "| validate_us | 5.00 | 2.00 | -3.00 |" in out.with_suffix(".md").read_text()
