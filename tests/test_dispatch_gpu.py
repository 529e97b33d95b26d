"""Dispatch on a real GPU: inside CUDA graphs, and from several threads."""
import sys
import threading

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import seer
from seer.datasets import generators

pytestmark = pytest.mark.gpu


def _matrix(rows, cols, density, seed):
    m = sp.random(rows, cols, density=density, format="csr", random_state=seed, dtype=np.float32)
    m.data = np.random.default_rng(seed).uniform(0.5, 1.5, m.nnz).astype(np.float32)
    parts = (torch.from_numpy(m.indptr).cuda(), torch.from_numpy(m.indices).cuda(), torch.from_numpy(m.data).cuda(), m.shape)
    return m, parts


def _rel_error(y, m, x):
    ref = m.astype(np.float64) @ x.double().cpu().numpy()
    return np.linalg.norm(y.double().cpu().numpy() - ref) / np.linalg.norm(ref)


@pytest.mark.parametrize("variant", [None, "scalar_r128", "vector_g32", "merge_c512", "adaptive"])
def test_dispatch_replays_in_a_cuda_graph(variant):
    seer.clear_cache()
    m, parts = _matrix(5000, 4000, 0.002, 0)
    x = torch.randn(m.shape[1], device="cuda")
    seer.dispatch("spmv", (parts, x), variant=variant)  # warm: decision and preprocessing cached
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = seer.dispatch("spmv", (parts, x), variant=variant)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert _rel_error(y, m, x) < 1e-5


@pytest.mark.filterwarnings("ignore:The CUDA Graph is empty")  # the refused call captured nothing
def test_first_call_inside_capture_is_refused():
    seer.clear_cache()
    _, parts = _matrix(100, 100, 0.05, 1)
    x = torch.randn(100, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(seer.InputError, match="before capturing"):
        with torch.cuda.graph(graph):
            seer.dispatch("spmv", (parts, x))


def test_deciding_again_waits_for_the_end_of_capture():
    """A matrix of 1.2M nonzeros called without a hint is decided again at the model's next call
    count. A capture of that call must not decide (deciding may read the device back, which capture
    forbids) and replays the first choice; the next call outside capture decides (to keep the
    variant or to bind another)."""
    cache = sys.modules["seer.dispatch"]._cache
    seer.clear_cache()
    band = generators.banded(400_000, 1, seed=3).astype(np.float32)
    parts = tuple(torch.from_numpy(a).cuda() for a in (band.indptr, band.indices, band.data)) + (band.shape,)
    x = torch.randn(band.shape[1], device="cuda")
    seer.dispatch("spmv", (parts, x))
    (first,) = cache._entries.values()
    due = first.recheck_at
    assert first.calls == 1 and due is not None
    for _ in range(due - 2):
        seer.dispatch("spmv", (parts, x))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = seer.dispatch("spmv", (parts, x))  # the call at recheck_at, captured
    (still,) = cache._entries.values()
    assert still is first and first.served == due and first.calls == 1
    x.copy_(torch.randn_like(x))
    y.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert _rel_error(y, band, x) < 1e-5
    again = seer.dispatch("spmv", (parts, x), out=torch.full_like(y, float("nan")))
    (decided,) = cache._entries.values()
    if decided is first:  # the trees for more calls did not agree on another variant: kept, rechecked later
        assert first.recheck_at is None or first.recheck_at > due
    else:
        assert decided.calls == due and "decided again" in decided.stage
    assert _rel_error(again, band, x) < 1e-5


def test_threads_share_the_cache_on_gpu():
    seer.clear_cache()
    mats = [_matrix(2000, 1500, 0.003, seed) for seed in range(4)]
    errors = []

    def worker(i):
        try:
            m, parts = mats[i % 4]
            for _ in range(20):
                x = torch.randn(m.shape[1], device="cuda")
                y = seer.dispatch("spmv", (parts, x))
                torch.cuda.synchronize()
                assert _rel_error(y, m, x) < 1e-5
        except Exception as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert seer.cache_info()["size"] == 4


@pytest.mark.multigpu
@pytest.mark.parametrize("variant", [None, "vector_g32", "merge_c512", "cusparse_prepared"])
@pytest.mark.parametrize("rows", [500, 5000])  # under and over the validating product's bounds
def test_inputs_on_a_gpu_that_is_not_the_current_one(variant, rows):
    """seer makes the inputs' GPU current around its launches, as torch's ops do. Needs two GPUs:
    ``python -m pytest -m multigpu tests/test_dispatch_gpu.py`` (no torchrun)."""
    seer.clear_cache()
    m, parts = _matrix(rows, 4000, 0.002, 2)
    on_second = tuple(t.to("cuda:1") for t in parts[:3]) + (parts[3],)
    with torch.cuda.device(0):
        for _ in range(2):  # the first call, then the cached decision's
            x = torch.randn(m.shape[1], device="cuda:1")
            y = seer.dispatch("spmv", (on_second, x), variant=variant)
            assert y.device == x.device and torch.cuda.current_device() == 0
            torch.cuda.synchronize(1)
            assert _rel_error(y, m, x) < 1e-5


@pytest.mark.multigpu
@pytest.mark.parametrize("rows", [500, 50_000])
def test_validating_a_matrix_on_a_gpu_that_is_not_the_current_one(rows):
    """seer.sparse.as_csr, called by itself, runs its pass on the matrix's GPU: right totals, a bad
    index refused (not a fault on the other GPU), the current device as it was."""
    from seer.errors import InputError
    from seer.sparse import as_csr, validated_rows

    m, parts = _matrix(rows, 4000, 0.002, 3)
    on_second = tuple(t.to("cuda:1") for t in parts[:3]) + (parts[3],)
    with torch.cuda.device(0):
        csr = as_csr(on_second)
        lengths = np.diff(m.indptr)
        assert validated_rows(csr)[:2] == (int((lengths ** 2).sum()), int(lengths.max()))
        bad = on_second[1].clone()
        bad[rows // 2] = 4000
        with pytest.raises(InputError, match="out of range|outside"):
            as_csr((on_second[0], bad, on_second[2], m.shape))
        assert torch.cuda.current_device() == 0
    torch.cuda.synchronize(1)


@pytest.mark.multigpu
def test_gemm_on_a_gpu_that_is_not_the_current_one():
    seer.clear_cache()
    a = torch.randn(256, 512, device="cuda:1", dtype=torch.bfloat16)
    b = torch.randn(512, 384, device="cuda:1", dtype=torch.bfloat16)
    with torch.cuda.device(0):
        for _ in range(2):
            c = seer.dispatch("gemm", (a, b))
            assert c.device == a.device
            error = ((c.double() - a.double() @ b.double()).norm() / (a.double() @ b.double()).norm()).item()
            assert error < 1e-2


@pytest.mark.parametrize("op", ["spmv", "gemm"])
def test_a_shipped_model_measured_on_this_gpu_is_taken_without_a_warning(op, monkeypatch):
    import json
    import warnings

    from seer.dispatch import clear_cache, model_files, resolve_model
    from seer.registry import get_op

    monkeypatch.delenv("SEER_MODELS", raising=False)
    name = torch.cuda.get_device_name()
    here = [path.name for path in model_files(op) if json.loads(path.read_text())["device"]["name"] == name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clear_cache()
        model, described = resolve_model(get_op(op), torch.device("cuda"))
    said = [str(w.message) for w in caught]
    if here:  # another GPU's model (or the hand rule) here would be a shipped model lost or refused
        assert described == here[0] and model.device["name"] == name and not said, (described, said)
    else:  # a GPU seer has not measured: the model of another (or the hand rule) is said
        assert any(repr(name) in text for text in said), said
