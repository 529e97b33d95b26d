"""benchmarks/gemm.py on the CPU: its summary of seer's choices, and of a compared model's."""
import math

import pytest
from conftest import load_benchmark

from seer.kernels.gemm import VARIANTS


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("gemm")


def row(times: dict, choice: str, compared_choice: str | None = None) -> dict:
    """A measured shape: every shipped variant at 1 ms but those in ``times``."""
    r = {"id": f"s{len(times)}{choice}", "choice": choice, "model": "mine.json", "seer_ms": 1.0, "seer_error": 1e-3,
         "seer_first_call_ms": 1.0, "loop_us:seer": 10.0, "loop_us:torch_matmul": 10.0,
         **{f"time_ms:{n}": times.get(n, 1.0) for n in VARIANTS}}
    if compared_choice is not None:
        r |= {"compared_choice": compared_choice, "compared_model": "theirs.json"}
    return r


def test_a_compared_model_is_scored_on_the_same_timings(bench):
    tile = next(n for n in VARIANTS if n != "torch_matmul")
    rows = [row({tile: 0.5}, choice=tile, compared_choice="torch_matmul"),  # theirs 2x slower
            row({tile: 2.0}, choice="torch_matmul", compared_choice="torch_matmul")]
    summary = bench.summarise(rows)
    theirs = summary["compared_model"]
    assert theirs["model"] == "theirs.json"
    assert math.isclose(theirs["fraction_of_oracle"], math.sqrt(0.5))
    assert math.isclose(theirs["speedup_over_torch_matmul"], 1.0)
    assert math.isclose(theirs["model_over_compared"], math.sqrt(2.0))
    assert theirs["same_choice"] == 0.5
    assert math.isclose(summary["fraction_of_oracle"], 1.0)
    text = bench.markdown(summary, {"device": {"name": "GPU", "capability": [9, 0]}, "date": "today",
                                    "command": "gemm.py", "versions": dict.fromkeys(
                                        ("torch", "triton", "seer", "cuda"), "v")}, rows)
    assert "compared model theirs.json: fraction of the oracle / speed-up over torch.matmul" in text
    assert "1.414x / 50%" in text


def test_without_a_compared_model_the_summary_has_none(bench):
    summary = bench.summarise([row({}, choice="torch_matmul")])
    assert "compared_model" not in summary


def test_dispatch_included_is_the_loops_ratio_and_wrong_shapes_are_left_out_by_name(bench):
    """"Dispatch included" was do_bench of a dispatch call, whose flush let the host run ahead: device
    time, under the kernel's own on 71-83 of 138 shapes. It is now the loops' ratio; and a shape with a
    wrong variant or a wrong seer result is left out of every mean, named."""
    tile = next(n for n in VARIANTS if n != "torch_matmul")
    fast = row({tile: 0.5}, choice=tile) | {"loop_us:seer": 5.0, "loop_us:torch_matmul": 20.0}
    slow = row({}, choice="torch_matmul") | {"id": "host-bound", "loop_us:seer": 25.0, "loop_us:torch_matmul": 20.0}
    wrong_variant = row({tile: math.nan}, choice="torch_matmul") | {"id": "wrong-variant"}
    wrong_seer = row({}, choice="torch_matmul") | {"id": "wrong-seer", "seer_error": 0.5}
    summary = bench.summarise([fast, slow, wrong_variant, wrong_seer])
    assert summary["shapes"] == 2 and summary["left_out"] == ["wrong-variant", "wrong-seer"]
    assert math.isclose(summary["speedup_over_torch_matmul_dispatch_included"], math.sqrt(4.0 * 0.8))
    assert math.isclose(summary["speedup_over_torch_matmul"], math.sqrt(2.0))
    with pytest.raises(ValueError, match=r"no shape has every figure checked right \(2 left out"):
        bench.summarise([wrong_variant, wrong_seer])
    assert bench.json_row(wrong_variant)[f"time_ms:{tile}"] is None


@pytest.mark.parametrize("count, wanted, picked", [(138, 12, 12), (47, 12, 12), (5, 12, 5), (138, 0, 0), (0, 3, 0)])
def test_autotune_runs_on_as_many_shapes_as_asked(bench, count, wanted, picked):
    """--autotune-shapes 12 gave 13 of 138 shapes, 16 of 47, and 1 for 0."""
    chosen = bench.autotuned_shapes(count, wanted)
    assert len(chosen) == picked and all(0 <= i < count for i in chosen)
    if picked > 1:
        assert min(chosen) == 0 and max(chosen) == count - 1


def test_every_variant_is_checked_on_a_poisoned_output_before_it_is_timed(bench, monkeypatch):
    """gemm.py timed the shipped variants unchecked, on an output the previous variant had filled
    right: a variant writing nothing passed. Each now runs on NaN first; a wrong one is not timed."""
    import torch

    from seer.kernels import gemm

    a = torch.randn(8, 16, dtype=torch.float16)
    b = torch.randn(16, 24, dtype=torch.float16)
    p = gemm.problem((a, b))
    broken = next(n for n in VARIANTS if n != "torch_matmul")
    monkeypatch.setitem(gemm.VARIANTS, broken, type("Idle", (), {"run": staticmethod(lambda *args, **kwargs: None)}))
    timed = []

    class Timer:
        def screened_ms(self, fn, hopeless_ms):
            timed.append(fn)
            return 1.0

        def median_ms(self, fn):
            timed.append(fn)
            return 2.0

    logged = []
    c = torch.empty(8, 24, dtype=torch.float16)
    times = bench.variant_times(p, a, b, c, gemm.reference(p, a, b), Timer(), logged.append, "toy")
    assert math.isnan(times[f"time_ms:{broken}"]) and logged == [f"  WRONG {broken} on toy: relative difference inf"]
    assert all(ms == 1.0 for name, ms in times.items() if name != f"time_ms:{broken}")
    assert len(timed) == 2 * (len(VARIANTS) - 1)  # two rounds of every right variant, none of the wrong one


def test_seer_s_cached_call_is_checked_on_an_out_filled_with_nan(bench, monkeypatch):
    """A cached call that wrote nothing passed on the memory of the first call's freed right result;
    one that writes non-finite values had its inf error crash the results' JSON."""
    import warnings

    import torch

    import seer
    from seer.kernels import gemm

    a, b = torch.randn(8, 16, dtype=torch.float16), torch.randn(16, 24, dtype=torch.float16)
    ref, c = gemm.reference(gemm.problem((a, b)), a, b), torch.empty(8, 24, dtype=torch.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no model for the CPU: the hand rule decides
        assert bench.cached_call_error(a, b, c, ref, None) < 1e-2
        monkeypatch.setattr(seer, "dispatch", lambda op, inputs, **kw: (a @ b))  # right, but not into out
        assert bench.cached_call_error(a, b, c, ref, None) == math.inf
        monkeypatch.setattr(seer, "dispatch", lambda op, inputs, out=None, **kw: out)  # writes nothing
        assert bench.cached_call_error(a, b, c, ref, None) == math.inf
    assert bench.json_row({"seer_error": math.inf, "t": math.nan, "ok": 1.0}) == {"seer_error": None, "t": None,
                                                                                     "ok": 1.0}


def test_end_to_end_is_given_by_band_of_kernel_time_and_rendered_again(bench, tmp_path):
    """The bands README quotes come from the results file: each band's loops' ratio and seer's extra µs."""
    import json

    small = row({}, choice="torch_matmul") | {"id": "small", "time_ms:torch_matmul": 0.005,
                                              "loop_us:seer": 20.0, "loop_us:torch_matmul": 14.0}
    large = row({}, choice="torch_matmul") | {"id": "large", "time_ms:torch_matmul": 0.5,
                                              "loop_us:seer": 500.0, "loop_us:torch_matmul": 500.0}
    bands = bench.end_to_end_by_kernel_time([small, large])
    assert [(b["kernel_us"], b["shapes"]) for b in bands] == [([0, 20], 1), ([200, None], 1)]
    assert math.isclose(bands[0]["speedup"], 0.7) and bands[0]["seer_extra_us_median"] == 6.0
    env = {"device": {"name": "GPU", "capability": [9, 0]}, "date": "today", "command": "gemm.py",
           "versions": dict.fromkeys(("torch", "triton", "seer", "cuda"), "v")}
    path = tmp_path / "gemm-results.json"
    path.write_text(json.dumps({"env": env, "summary": {}, "rows": [bench.json_row(r) for r in (small, large)]}))
    assert bench.main(["--render", str(path)]) == 0
    assert json.loads(path.read_text())["summary"]["end_to_end_by_kernel_time"] == bands
    assert "| 0-20 | 1 | 0.700x | 6.0 |" in path.with_suffix(".md").read_text()
