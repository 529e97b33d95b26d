"""The direct launch path gives the same results as Triton's own, on streams and in graphs."""
import pytest
import torch
import triton
import triton.language as tl
from triton.backends.nvidia.driver import CudaLauncher

from seer.launch import LAUNCHER_LAYOUT, LaunchCache, specialisation

pytestmark = pytest.mark.gpu


@triton.jit
def _axpy(x, y, out, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, alpha * tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def _launch(cache, x, y, out, alpha=2.0, block=256):
    n = x.numel()
    args = (x, y, out, alpha, n, block)
    cache.launch(specialisation(x, y, out, n) + (block,), (triton.cdiv(n, block),), args, num_warps=4)


def test_direct_launch_matches_on_fresh_tensors_and_odd_offsets():
    cache = LaunchCache(_axpy)
    for n in (1000, 1000, 4096, 4096, 1001):
        base = torch.randn(n + 1, device="cuda")
        for x in (base[:n], base[1:]):  # aligned and misaligned pointers specialise differently
            y = torch.randn(n, device="cuda")
            out = torch.full((n,), float("nan"), device="cuda")
            _launch(cache, x, y, out)
            torch.testing.assert_close(out, 2.0 * x + y)
    assert len(cache._ready) >= 3


def test_direct_launch_follows_the_current_stream_and_graph_capture():
    cache = LaunchCache(_axpy)
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    _launch(cache, x, y, out)  # compile and cache
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            _launch(cache, x, y, out)
    torch.cuda.current_stream().wait_stream(side)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 2.0 * x + y)


@pytest.mark.skipif(LAUNCHER_LAYOUT is None, reason="this Triton's launcher layout is not known: compiled.run is used")
def test_direct_launch_calls_the_launchers_c_entry_not_its_python_wrapper(monkeypatch):
    cache = LaunchCache(_axpy)
    x, y = torch.randn(3000, device="cuda"), torch.randn(3000, device="cuda")
    out = torch.empty_like(x)
    _launch(cache, x, y, out)  # compile; later launches go the direct way
    assert len(cache._ready) == 1

    def wrapper_called(*args, **kwargs):
        raise AssertionError("the direct launch went through the launcher's Python wrapper")

    monkeypatch.setattr(CudaLauncher, "__call__", wrapper_called)
    out.fill_(float("nan"))
    _launch(cache, x, y, out, alpha=-1.5)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, -1.5 * x + y)
