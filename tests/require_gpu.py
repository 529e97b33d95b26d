"""A pytest plugin (imported by tests/conftest.py): with ``SEER_REQUIRE_GPU=1``, set by device runs
(benchmarks/device_run.sh), a GPU test that skips (no GPU seen, not under torchrun, a capability or
tool missing) fails instead, so that a misconfigured run cannot pass by running nothing."""
import os

import pytest

REQUIRE_GPU = os.environ.get("SEER_REQUIRE_GPU") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    marked = item.get_closest_marker("gpu") or item.get_closest_marker("multigpu")  # not a parameter id "gpu"
    if REQUIRE_GPU and report.skipped and marked and not hasattr(report, "wasxfail"):  # an xfail is no skip
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"SEER_REQUIRE_GPU=1, but this GPU test skipped: {reason}"
