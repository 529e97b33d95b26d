"""benchmarks/dispatch_compare.py on the CPU: two runs compared on the large matrices both timed."""
import pytest
from conftest import load_benchmark


def _run(rows):
    return {"large_matrices": {"rows": [{"id": i, "seer_us": s, "torch_us": t} for i, s, t in rows]}}


def test_only_the_matrices_both_runs_timed_are_compared():
    bench = load_benchmark("dispatch_compare")
    before = _run([("rmat/a", 20.0, 40.0), ("band/b", 10.0, 10.0), ("band/only-before", 1.0, 100.0)])
    after = _run([("rmat/a", 10.0, 40.0), ("band/b", 10.0, 20.0), ("rmat/only-after", 1.0, 100.0)])
    groups = bench.compare(before, after, ["rmat/"])
    assert groups["all"]["matrices"] == 2 and groups["rmat/"]["matrices"] == 1
    assert groups["rmat/"]["speedup_before"] == pytest.approx(2.0)
    assert groups["rmat/"]["speedup_after"] == pytest.approx(4.0)
    assert groups["rmat/"]["seer_call_before_over_after"] == pytest.approx(2.0)
    assert groups["all"]["speedup_before"] == pytest.approx(2.0 ** 0.5)  # sqrt(2 * 1)
    assert groups["all"]["torch_call_before_over_after"] == pytest.approx(0.5 ** 0.5)  # sqrt(1 * 0.5)


def test_matrices_that_kept_their_first_choice_are_counted_and_compared_apart():
    """What moved on them is the host, not the model: the same figures on them alone, per set."""
    bench = load_benchmark("dispatch_compare")

    def run(rows):
        return {set_: {"rows": [{"id": i, "seer_choice": c, "seer_us": s, "torch_us": t} for i, c, s, t in rows]}
                for set_ in ("real_matrices", "large_matrices")}

    before = run([("a", "v1", 10.0, 20.0), ("b", "v1", 10.0, 10.0), ("c", "v2", 5.0, 5.0)])
    after = run([("a", "v1", 20.0, 20.0), ("b", "v2", 1.0, 10.0)])
    choices = bench.same_choices(before, after)
    for set_ in ("real_matrices", "large_matrices"):
        kept = choices[set_]
        assert (kept["both"], kept["same_choice"], kept["matrices"]) == (2, 1, 1)
        assert kept["speedup_before"] == pytest.approx(2.0) and kept["speedup_after"] == pytest.approx(1.0)
        assert kept["seer_call_before_over_after"] == pytest.approx(0.5)
    text = bench.markdown({"device": "GPU", "before": "b.json", "after": "a.json", "before_date": "d0", "after_date": "d1",
                           "command": "cmd", "groups": bench.compare(before, after, []), "choices": choices})
    assert "| real | 2 | 1 | 2.000x | 1.000x | 0.500 | 1.000 |" in text


def test_runs_without_large_matrices_compare_their_real_ones(tmp_path, monkeypatch):
    """dispatch.py writes large_matrices only with --large-budget-s: the comparison crashed (KeyError)."""
    import json
    import sys

    bench = load_benchmark("dispatch_compare")
    run = {"device": {"name": "NVIDIA H200"}, "real_matrices": {
        "rows": [{"id": "a", "seer_choice": "v1", "seer_us": 10.0, "torch_us": 20.0}]}}
    assert bench.compare(run, run, ["rmat/"]) == {}
    files = []
    for name, device in (("before", "NVIDIA H200"), ("after", "NVIDIA H200")):
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(json.dumps({**run, "device": {"name": device}}))
    monkeypatch.setattr(sys, "argv", ["dispatch_compare.py", *map(str, files), "--out", str(tmp_path)])
    assert bench.main() == 0
    text = (tmp_path / "after-against-before.md").read_text()
    assert text.count("| real | 1 | 1 | 2.000x | 2.000x |") == 1 and "NVIDIA H200" in text


def test_runs_of_two_gpus_are_refused(tmp_path, monkeypatch, capsys):
    import json
    import sys

    bench = load_benchmark("dispatch_compare")
    files = []
    for name, device in (("before", "NVIDIA H100 80GB HBM3"), ("after", "NVIDIA H200")):
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(json.dumps({"device": {"name": device}, "large_matrices": {"rows": []}}))
    monkeypatch.setattr(sys, "argv", ["dispatch_compare.py", *map(str, files), "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        bench.main()
    assert "on 'NVIDIA H100 80GB HBM3'" in capsys.readouterr().err and not (tmp_path / "after-against-before.md").exists()
