"""Dispatch on a real GPU: inside CUDA graphs, and from several threads."""
import threading

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import seer

pytestmark = pytest.mark.gpu


def _matrix(rows, cols, density, seed):
    m = sp.random(rows, cols, density=density, format="csr", random_state=seed, dtype=np.float32)
    m.data = np.random.default_rng(seed).uniform(0.5, 1.5, m.nnz).astype(np.float32)
    parts = (torch.from_numpy(m.indptr).cuda(), torch.from_numpy(m.indices).cuda(), torch.from_numpy(m.data).cuda(), m.shape)
    return m, parts


def _rel_error(y, m, x):
    ref = m.astype(np.float64) @ x.double().cpu().numpy()
    return np.linalg.norm(y.double().cpu().numpy() - ref) / np.linalg.norm(ref)


@pytest.mark.parametrize("variant", [None, "scalar_r128", "vector_g32", "merge_c1024", "adaptive"])
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


def test_first_call_inside_capture_is_refused():
    seer.clear_cache()
    _, parts = _matrix(100, 100, 0.05, 1)
    x = torch.randn(100, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(seer.InputError, match="before capturing"):
        with torch.cuda.graph(graph):
            seer.dispatch("spmv", (parts, x))


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
