"""``SEER_REQUIRE_GPU=1`` (set by device runs) turns a GPU test's skip into a failure, and
``SEER_REQUIRE_SUITESPARSE=1`` (CI and device runs) a real-matrix test's."""
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


REAL_MATRIX_CASE = '''
def test_reads_the_real_matrices(suitesparse_dir):
    assert suitesparse_dir.is_dir()
'''


def test_a_run_that_requires_the_real_matrices_fails_without_them(tmp_path):
    """Without the folder every real-matrix test skipped, and a run checking no kernel on a real input
    read as a pass."""
    (tmp_path / "test_real.py").write_text(REAL_MATRIX_CASE)
    (tmp_path / "conftest.py").write_text(  # the suite's fixture, its module loaded under another name
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        f"spec = importlib.util.spec_from_file_location('suite_conftest', {str(ROOT / 'tests' / 'conftest.py')!r})\n"
        "suite = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(suite)\n"
        "suitesparse_dir = suite.suitesparse_dir\n")
    outcomes = {}
    for require in ("0", "1"):
        env = {**os.environ, "SEER_SUITESPARSE": str(tmp_path / "absent"), "SEER_REQUIRE_SUITESPARSE": require}
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p",
                                 "no:xdist", "test_real.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
        outcomes[require] = (result.returncode, result.stdout.splitlines()[-1], result.stdout)
    assert outcomes["0"][:2] == (0, outcomes["0"][1]) and outcomes["0"][1].startswith("1 skipped"), outcomes["0"][2]
    code, last, report = outcomes["1"]
    assert code == 1 and last.startswith("1 error"), report  # the fixture fails the test at its setup
    assert "SEER_REQUIRE_SUITESPARSE=1, but real SuiteSparse matrices not found at" in report
