"""benchmarks/gemm_inductor.py on the CPU: the compiled peers start from nothing and put the
environment back, and the summary's ratios, first calls and catch-up counts are right."""
import os

import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("gemm_inductor")


@pytest.mark.parametrize("autoheuristic, ranking", [(True, "mixed_mm,mm"), (False, "mixed_mm")])
def test_compiled_mm_sets_its_settings_and_restores_them(bench, tmp_path, monkeypatch, autoheuristic, ranking):
    import torch._inductor.config as inductor_config
    from torch._inductor.kernel import mm as mm_lowering

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere")
    monkeypatch.delenv(bench.AUTOHEURISTIC_ENV, raising=False)
    inductors, caches_off = mm_lowering.mm_autoheuristic, inductor_config.force_disable_caches
    mm, restore, ranked = bench.compiled_mm(autoheuristic, tmp_path)
    assert callable(mm) and ranked == [] and mm_lowering.mm_autoheuristic is not inductors
    assert os.environ[bench.AUTOHEURISTIC_ENV] == ranking and inductor_config.force_disable_caches
    cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    assert cache.startswith(str(tmp_path)) and os.path.isdir(cache)
    _, restore_again, _ = bench.compiled_mm(autoheuristic, tmp_path)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] != cache  # a new folder each time
    restore_again()
    restore()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/somewhere" and bench.AUTOHEURISTIC_ENV not in os.environ
    assert mm_lowering.mm_autoheuristic is inductors and inductor_config.force_disable_caches == caches_off


def test_compiled_mm_undoes_its_settings_when_one_fails(bench, tmp_path, monkeypatch):
    monkeypatch.delenv(bench.AUTOHEURISTIC_ENV, raising=False)

    def failing(config, use):
        raise RuntimeError("no such setting")

    monkeypatch.setattr(bench, "ranking_patch", failing)
    with pytest.raises(RuntimeError, match="no such setting"):
        bench.compiled_mm(True, tmp_path)
    assert bench.AUTOHEURISTIC_ENV not in os.environ


def test_recording_ranking_counts_what_it_kept(bench, monkeypatch):
    from torch._inductor.kernel import mm as mm_lowering

    monkeypatch.setattr(mm_lowering, "mm_autoheuristic", lambda *a, **k: None if a else ["x", "y"])
    ranked = []
    with bench.recording_ranking(ranked):
        mm_lowering.mm_autoheuristic()
        mm_lowering.mm_autoheuristic("declined")
    assert ranked == [2, None]


def row(seer, torch_ms, inductor, ah, order, seer_first=1.0, inductor_first=20e3, ah_first=10e3, seer_profiled=None):
    """A shape's row; its profiled times are the graphs', seer's ``seer_profiled`` if given."""
    times = {"seer": seer, "torch": torch_ms, "inductor": inductor, "ah": ah}
    return {"id": "s", "m": 1, "n": 2, "k": 3, "dtype": "float16", "seer_choice": "torch_matmul",
            "seer_first_ms": seer_first, "inductor_first_ms": inductor_first, "ah_first_ms": ah_first,
            "order": list(order), "ah_ranked": [11],
            **{f"{who}_ms": t for who, t in times.items()},
            **{f"{who}_profiled_ms": t for who, t in times.items()},
            **({} if seer_profiled is None else {"seer_profiled_ms": seer_profiled})}


def test_summary(bench):
    rows = [row(1.0, 1.1, 0.9, 1.2, ("inductor", "ah")),  # inductor faster by 0.1 ms a call here
            # faster by the graphs, slower by the profiler: the repayment count goes by the profiler
            row(2.0, 2.2, 1.5, 2.5, ("ah", "inductor"), inductor_first=30e3, ah_first=12e3, seer_profiled=1.0)]
    s = bench.summarise(rows)
    assert s["shapes"] == 2
    assert s["steady_peer_over_seer"]["torch"] == pytest.approx(1.1)
    assert s["steady_peer_over_seer"]["inductor"] == pytest.approx((0.9 * 0.75) ** 0.5)
    assert s["seer_faster_on"] == {"torch": 2, "inductor": 0, "ah": 2}
    assert s["profiled_peer_over_seer"]["inductor"] == pytest.approx((0.9 * 1.5) ** 0.5)
    assert s["seer_faster_on_profiled"] == {"torch": 2, "inductor": 1, "ah": 2}
    assert s["first_call_ms_median"] == {"seer": 1.0, "inductor": 25e3, "ah": 11e3}
    assert s["first_call_ms_median_compiled_first"] == {"inductor": 20e3, "ah": 12e3}
    assert s["calls_to_catch_up_median"]["inductor"] == pytest.approx((20e3 - 1.0) / 0.1)
    assert s["calls_to_catch_up_median"]["ah"] is None
    text = bench.markdown({"summary": s, "rows": rows, "device": {"name": "H100"}, "date": "d",
                           "versions": {"torch": "t", "triton": "r"}, "command": "c", "method": "m"})
    assert "| Inductor max-autotune | 1.162, 0.822 | 1, 0 | 25.0 s (20.0 s) | 199,990 |" in text
    assert "| Inductor max-autotune + AutoHeuristic | 1.732, 1.225 | 2, 2 | 11.0 s (12.0 s) | never |" in text
    assert "| s | 1 x 2 x 3 float16 | 2.2000 / 2.2000 | 1.0000 / 2.0000 (torch_matmul) | 1.5000 / 1.5000 (30.0) | " \
        "2.5000 / 2.5000 (12.0) | [11] |" in text


class Work:
    """A stand-in for one piece of the profiler's device trace."""

    def __init__(self, name: str, start: int, end: int):
        self._name, self._start, self._end = name, start, end

    def name(self) -> str:
        return self._name

    def start_ns(self) -> int:
        return self._start

    def end_ns(self) -> int:
        return self._end


def test_spans_run_from_a_calls_first_kernel_to_its_last(bench):
    trace = [Work("fill", 0, 80), Work("gemm", 90, 95), Work("reduce", 97, 99),  # the gap between counts
             Work("fill", 100, 180), Work("gemm", 185, 190)]
    assert bench.spans_after_flushes(trace, {"fill"}, calls=2) == [9, 5]


@pytest.mark.parametrize("trace", [
    [Work("fill", 0, 80), Work("gemm", 90, 95)],  # one call where two were made
    [Work("fill", 0, 80), Work("fill", 90, 95), Work("gemm", 100, 110)],  # a call launched the flush's kernel
])
def test_spans_refuse_a_trace_that_does_not_split_into_the_calls(bench, trace):
    with pytest.raises(RuntimeError, match="the trace split into"):
        bench.spans_after_flushes(trace, {"fill"}, calls=2)


def test_render_refuses_a_result_from_before_the_profilers_timing(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    result = tmp_path / "old.json"
    result.write_text(json.dumps({"rows": [{"seer_ms": 1.0}]}))
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gemm_inductor.py"
    done = subprocess.run([sys.executable, str(script), "--render", str(result)], capture_output=True, text=True)
    assert done.returncode == 2 and "predates the profiler's timing" in done.stderr


def test_ranking_patch_sets_a_config_read_at_import(bench):
    """torch 2.11 reads TORCHINDUCTOR_AUTOHEURISTIC_USE once, into a config string: that string is
    patched; torch 2.13 reads the environment at each lowering: nothing to patch."""
    import contextlib

    class StringConfig:
        autoheuristic_use = "mixed_mm"

        @contextlib.contextmanager
        def patch(self, **changes):
            saved = {name: getattr(self, name) for name in changes}
            for name, value in changes.items():
                setattr(self, name, value)
            yield
            for name, value in saved.items():
                setattr(self, name, value)

    config = StringConfig()
    with bench.ranking_patch(config, "mixed_mm,mm"):
        assert config.autoheuristic_use == "mixed_mm,mm"
    assert config.autoheuristic_use == "mixed_mm"
    import torch._inductor.config as inductor_config

    read_at_import = isinstance(getattr(inductor_config, "autoheuristic_use", None), str)
    assert isinstance(bench.ranking_patch(inductor_config, "mm"), contextlib.nullcontext) != read_at_import
