"""benchmarks/spmv_split_sum.py on the CPU: which generated matrices it takes, and how --join keeps
each version's least over its rounds on the matrices every version measured."""
import json
import sys

import pytest
from conftest import load_benchmark

DEVICE = {"name": "NVIDIA H100 80GB HBM3"}


@pytest.mark.parametrize("case_id, rows", [
    ("synthetic/stencil_2d/n263-points49/seed0", 263 ** 2),
    ("synthetic/stencil_2d/n1332-points9/seed0", None),  # 9 diagonals never split
    ("synthetic/banded/n9302-bandwidth64-fill1/seed0", 9302),
    ("synthetic/banded/n48000-bandwidth12-fill1/seed0", None),  # 25 diagonals
    ("synthetic/banded/n19983-bandwidth200-fill0.5/seed0", None),  # half-filled: no pattern
    ("synthetic/stencil_3d/n50-points27/seed0", None),
])
def test_wide_patterns_are_found_by_their_ids(case_id, rows):
    assert load_benchmark("spmv_split_sum").wide_pattern_rows(case_id) == rows


def _round(script, version, round_, loops: dict) -> dict:
    """A planted round: matrix id -> the variant's loop time; the other measures follow it."""
    def row(case_id, loop_us):
        per_variant = {v: loop_us for v in (script.VARIANT, *script.ANCHORS)}
        return {"id": case_id, "nnz": 1_000_000, "splits": 3, "loop_us": per_variant,
                "warm_ms": {v: t / 2e3 for v, t in per_variant.items()},
                "time_ms": {v: t / 1e3 for v, t in per_variant.items()}, "capture_errors": {}}

    return {"device": DEVICE, "versions": {"torch": "2.11", "triton": "3.6"}, "date": f"2026-11-26T10:0{round_}:00",
            "version": version, "round": round_, "matrices": [row(i, t) for i, t in loops.items()]}


def test_join_keeps_each_versions_least_on_the_matrices_all_measured(tmp_path, monkeypatch):
    script = load_benchmark("spmv_split_sum")
    rounds = [_round(script, "copy", 1, {"a": 30.0, "b": 32.0}), _round(script, "copy", 2, {"a": 31.0, "b": 29.0}),
              _round(script, "in-kernel", 1, {"a": 12.0, "b": 9.0, "c": 8.0}),
              _round(script, "in-kernel", 2, {"a": 10.0})]
    paths = []
    for n, result in enumerate(rounds):
        paths.append(tmp_path / f"round{n}.json")
        paths[-1].write_text(json.dumps(result))
    monkeypatch.setattr(sys, "argv", ["spmv_split_sum.py", "--join", *map(str, paths), "--out", str(tmp_path)])
    assert script.main() == 0
    joined = json.loads((tmp_path / "spmv-split-sum-h100.json").read_text())
    assert joined["versions_compared"] == ["copy", "in-kernel"] and joined["matrix_ids"] == ["a", "b"]
    loops = {v: {i: joined["per_version"][v][i]["loop_us"][script.VARIANT] for i in "ab"} for v in ("copy", "in-kernel")}
    assert loops == {"copy": {"a": 30.0, "b": 29.0}, "in-kernel": {"a": 10.0, "b": 9.0}}
    # geometric mean of 30/10 and 29/9
    assert f"| {script.VARIANT} | in-kernel | {((30 / 10) * (29 / 9)) ** 0.5:.3f}x |" in (
        tmp_path / "spmv-split-sum-h100.md").read_text()


def test_join_refuses_rounds_of_two_devices(tmp_path, monkeypatch):
    script = load_benchmark("spmv_split_sum")
    first, second = _round(script, "copy", 1, {"a": 30.0}), _round(script, "in-kernel", 1, {"a": 10.0})
    second["device"] = {"name": "NVIDIA H200"}
    paths = [tmp_path / "one.json", tmp_path / "two.json"]
    for path, result in zip(paths, (first, second)):
        path.write_text(json.dumps(result))
    monkeypatch.setattr(sys, "argv", ["spmv_split_sum.py", "--join", *map(str, paths), "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="one device"):
        script.main()
