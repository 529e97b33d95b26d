"""``SEER_REQUIRE_GPU=1`` (set by device runs) turns a GPU test's skip into a failure."""
import os
import subprocess
import sys

from conftest import ROOT

CASES = '''
import pytest

@pytest.mark.gpu
def test_marked_and_skipped():
    pytest.skip("no GPU here")

@pytest.mark.gpu
@pytest.mark.xfail(reason="known")
def test_marked_and_expected_to_fail():
    assert False

@pytest.mark.parametrize("where", ["gpu"])
def test_unmarked_with_a_gpu_id(where):
    pytest.skip("a CPU test whose parameter reads gpu")
'''


def _pytest(tmp_path, require: bool) -> str:
    (tmp_path / "test_cases.py").write_text(CASES)
    env = {k: v for k, v in os.environ.items() if k != "SEER_REQUIRE_GPU"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    if require:
        env["SEER_REQUIRE_GPU"] = "1"
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist",
                             "-p", "require_gpu", "test_cases.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    return result.stdout


def test_a_device_run_fails_a_gpu_test_that_skips_and_nothing_else(tmp_path):
    """A device run that ran pytest without torchrun (or saw no GPU) had printed only skips and
    exited 0, which read as a pass; an xfail and a CPU test whose id reads "gpu" stay as they are."""
    report = _pytest(tmp_path, require=True)
    assert "FAILED test_cases.py::test_marked_and_skipped - SEER_REQUIRE_GPU=1, but this" in report
    assert report.splitlines()[-1].startswith("1 failed, 1 skipped, 1 xfailed"), report


def test_elsewhere_gpu_tests_still_skip(tmp_path):
    assert _pytest(tmp_path, require=False).splitlines()[-1].startswith("2 skipped, 1 xfailed")
