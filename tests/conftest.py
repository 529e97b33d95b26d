"""Run Triton kernels under the interpreter when no GPU is present (CI and laptops)."""
import builtins
import importlib.util
import io
import os
import sys
from pathlib import Path

import pytest
import torch
from require_gpu import pytest_runtest_makereport  # noqa: F401 (a hook: GPU skips fail where SEER_REQUIRE_GPU=1)

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
# Every kernel module imported now, under that setting: triton.jit reads it when a kernel is defined,
# so a test that changes it (the refusals without the interpreter) must not be the first in its
# worker to import one; the kernels would be compiled ones for every later test there.
for _kernels in ("seer.kernels.spmv", "seer.kernels.gemm", "seer.kernels.overlap"):
    importlib.import_module(_kernels)

ROOT = Path(__file__).resolve().parents[1]


def _suitesparse() -> Path:
    """``$SEER_SUITESPARSE``; else ``../shared/suitesparse`` beside the checkout; else the copy that
    device runs carry, ``.carry/suitesparse`` (so GPU tests there need no variable to find it)."""
    if "SEER_SUITESPARSE" in os.environ:
        return Path(os.environ["SEER_SUITESPARSE"])
    shared = ROOT.parent / "shared" / "suitesparse"
    return shared if shared.is_dir() else ROOT / ".carry" / "suitesparse"


SUITESPARSE = _suitesparse()


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    skip_multi = pytest.mark.skip(reason="needs several CUDA GPUs")
    for item in items:  # by marker, not keyword: a test case's id "gpu" is a keyword too
        if item.get_closest_marker("gpu") and not HAS_CUDA:
            item.add_marker(skip_gpu)
        if item.get_closest_marker("multigpu") and torch.cuda.device_count() < 2:
            item.add_marker(skip_multi)


@pytest.fixture(scope="session")
def suitesparse_dir():
    """The real matrices' folder. Missing, the tests that read it skip, unless ``SEER_REQUIRE_SUITESPARSE=1``
    (CI and device runs set it): then they fail, since a run without them checks no kernel on a real input."""
    if not SUITESPARSE.is_dir():
        missing = f"real SuiteSparse matrices not found at {SUITESPARSE} (set SEER_SUITESPARSE)"
        if os.environ.get("SEER_REQUIRE_SUITESPARSE") == "1":
            pytest.fail(f"SEER_REQUIRE_SUITESPARSE=1, but {missing}")
        pytest.skip(missing)
    return SUITESPARSE


@pytest.fixture
def unreadable(monkeypatch):
    """``unreadable(path)``: opening ``path`` raises PermissionError, as for a file of mode 000 (the
    tests may run as root, whom modes do not stop); through open() and through pathlib (io.open)."""
    refused = set()
    opened = builtins.open

    def open_(file, *args, **kwargs):
        if str(file) in refused:
            raise PermissionError(13, "Permission denied", str(file))
        return opened(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(io, "open", open_)
    return lambda path: refused.add(str(path))


@pytest.fixture
def device():
    return torch.device("cuda" if HAS_CUDA else "cpu")


def _problem(matrix, seed: int):
    """``(csr, x, y)`` on the sparsity pattern of the scipy ``matrix``: float32 values of either
    sign away from 0, a float32 x and the float64 y = A x of scipy."""
    import numpy as np

    from seer.kernels import spmv

    rng = np.random.default_rng(seed)
    values = rng.uniform(0.5, 1.5, matrix.nnz) * rng.choice([-1.0, 1.0], matrix.nnz)
    csr = spmv.problem((torch.from_numpy(matrix.indptr).int(), torch.from_numpy(matrix.indices).int(),
                        torch.from_numpy(values).float(), matrix.shape))
    x = rng.uniform(-1, 1, matrix.shape[1])
    return csr, torch.from_numpy(x).float(), csr.to_scipy().astype(np.float64) @ x


def skewed_problem(seed: int):
    """:func:`_problem` on a scrambled R-MAT (512 rows, power-law rows and columns)."""
    from seer.datasets.generators import rmat

    return _problem(rmat(9, 8, seed=seed), seed)


def random_problem(rows: int, cols: int, density: float, seed: int):
    """:func:`_problem` on uniformly random positions (some rows empty at low density)."""
    import scipy.sparse as sp

    return _problem(sp.random(rows, cols, density=density, format="csr", random_state=seed), seed)


def assert_runs_match(runs: dict, expected) -> None:
    """Every run (name -> function returning y) matches the float64 ``expected`` y."""
    import numpy as np

    scale = np.abs(expected).max()
    for name, fn in runs.items():
        assert np.allclose(fn().double().numpy(), expected, rtol=1e-5, atol=1e-5 * scale), name


def load_benchmark(name: str):
    """A script of ``benchmarks/`` imported as a module (the scripts are not a package; they import
    each other's helpers as they do when run, with ``benchmarks/`` on the path)."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def shipped_spmv_rows(tmp_path, ids, name="spmv-some.csv"):
    """A table of the shipped H100 SpMV table's rows ``ids`` (cells as written, its metadata
    beside it) in ``tmp_path``."""
    import shutil

    import pandas as pd

    from seer.table import meta_path

    shipped = ROOT / "datasets" / "profiles" / "spmv-h100.csv"
    frame = pd.read_csv(shipped, dtype=str, keep_default_na=False)
    path = tmp_path / name
    frame[frame["id"].isin(ids)].to_csv(path, index=False)
    shutil.copy(meta_path(shipped), meta_path(path))
    return path
