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
    text = bench.markdown({"before": "b.json", "after": "a.json", "before_date": "d0", "after_date": "d1",
                           "command": "cmd", "groups": bench.compare(before, after, []), "choices": choices})
    assert "| real | 2 | 1 | 2.000x | 1.000x | 0.500 | 1.000 |" in text
