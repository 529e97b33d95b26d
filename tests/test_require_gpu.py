"""``SEER_REQUIRE_GPU=1`` (set by device runs) turns a GPU test's skip into a failure."""
import os
import subprocess
import sys

from conftest import ROOT


def _pytest_on_the_overlap_gpu_tests(require: bool) -> subprocess.CompletedProcess:
    """Outside torchrun every one of them skips, on a machine with GPUs or without."""
    env = {k: v for k, v in os.environ.items() if k != "SEER_REQUIRE_GPU"}
    if require:
        env["SEER_REQUIRE_GPU"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "tests/test_overlap_gpu.py"], cwd=ROOT, env=env, capture_output=True, text=True)


def test_a_device_run_fails_where_its_gpu_tests_skip():
    """A device run that ran pytest without torchrun (or saw no GPU) had printed only skips and
    exited 0, which read as a pass."""
    required = _pytest_on_the_overlap_gpu_tests(require=True)
    assert required.returncode != 0, required.stdout
    assert "SEER_REQUIRE_GPU=1, but this GPU test skipped" in required.stdout
    assert " passed" not in required.stdout.splitlines()[-1]


def test_elsewhere_gpu_tests_still_skip():
    plain = _pytest_on_the_overlap_gpu_tests(require=False)
    assert plain.returncode == 0, plain.stdout
    assert "skipped" in plain.stdout.splitlines()[-1] and "error" not in plain.stdout.splitlines()[-1]
