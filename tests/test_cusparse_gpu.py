"""seer.cusparse on a GPU: a plan used on a stream other than the one its workspace was made on."""
import pytest
import torch

from seer import cusparse

pytestmark = pytest.mark.gpu


def test_a_plan_run_on_another_stream_and_dropped_at_once_gives_the_right_product():
    """A plan made on one stream, run on another behind a long wait and dropped at once, while new
    tensors of its workspace's size are written on the first: the product is right, and the
    workspace's record_stream takes a real CUDA stream. (A review found the workspace was never
    recorded on the streams it ran on, so the allocator could hand its memory on mid-product; this
    H200 did not show that hazard even without the record, 3 runs of 3, so the test that fails
    without the fix is the CPU one, tests/test_cusparse.py, which counts the records.)"""
    if not torch.cuda.is_available() or not cusparse.available():
        pytest.skip("needs a GPU with cuSPARSE")
    g = torch.Generator().manual_seed(11)
    rows = 4096
    dense = torch.rand(rows, rows, generator=g) * (torch.rand(rows, rows, generator=g) < 0.01)
    csr = dense.to_sparse_csr()
    indptr, indices, values = (t.cuda() for t in (csr.crow_indices().int(), csr.col_indices().int(), csr.values()))
    x = torch.randn(rows, generator=g).cuda()
    plan = cusparse.SpmvPlan(indptr, indices, values, (rows, rows))
    workspace_bytes = plan._workspace.numel()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    y = torch.full((rows,), float("nan"), device="cuda")
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # about 0.1 s: the product waits behind this on the side stream
        plan(x, y)
    del plan
    # Tensors of the workspace's size made and overwritten on the first stream meanwhile: one of them
    # takes the workspace's memory if the allocator does not wait for the side stream's work.
    clobbered = [torch.full((workspace_bytes,), 255, dtype=torch.uint8, device="cuda") for _ in range(16)]
    torch.cuda.synchronize()
    expected = (dense.double() @ x.cpu().double())
    assert torch.allclose(y.cpu().double(), expected, rtol=1e-4, atol=1e-4), "the product read a clobbered workspace"
    del clobbered
