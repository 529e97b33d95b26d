"""seer.cusparse on a GPU: a plan used on a stream other than the one its workspace was made on."""
import pytest
import torch

from seer import cusparse

pytestmark = pytest.mark.gpu


def test_a_plans_workspace_outlives_a_product_still_running_on_another_stream():
    """The workspace was made on the stream of the plan's making and used on another; dropped while
    a product there had yet to run, its memory went at once to the next tensor of its size on the
    first stream, whose writes the product could read (a review). The allocator must hold it back
    until the other stream's work is done."""
    if not torch.cuda.is_available() or not cusparse.available():
        pytest.skip("needs a GPU with cuSPARSE")
    g = torch.Generator().manual_seed(11)
    rows = 4096
    dense = torch.rand(rows, rows, generator=g) * (torch.rand(rows, rows, generator=g) < 0.01)
    csr = dense.to_sparse_csr()
    indptr, indices, values = (t.cuda() for t in (csr.crow_indices().int(), csr.col_indices().int(), csr.values()))
    x = torch.randn(rows, generator=g).cuda()
    plan = cusparse.SpmvPlan(indptr, indices, values, (rows, rows))
    workspace_at, workspace_bytes = plan._workspace.data_ptr(), plan._workspace.numel()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    y = torch.full((rows,), float("nan"), device="cuda")
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # the product waits behind this on the side stream
        plan(x, y)
    del plan
    reused = torch.empty(workspace_bytes, dtype=torch.uint8, device="cuda")
    assert reused.data_ptr() != workspace_at, "the workspace went to a new tensor while the side stream used it"
    torch.cuda.synchronize()
    expected = (dense.double() @ x.cpu().double())
    assert torch.allclose(y.cpu().double(), expected, rtol=1e-4, atol=1e-4)
