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
    r = {"id": f"s{len(times)}{choice}", "choice": choice, "model": "mine.json", "seer_ms": 1.0,
         "seer_first_call_ms": 1.0, **{f"time_ms:{n}": times.get(n, 1.0) for n in VARIANTS}}
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
