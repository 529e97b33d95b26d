"""seer.cusparse off CUDA: the binding says it is unavailable and refuses to plan, clearly (the
variant built on it then runs torch's product; tests/test_spmv_kernels.py checks its results and
tests/test_spmv_gpu.py the library itself)."""
import pytest
import torch

from seer import cusparse
from seer.errors import SeerError

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CUDA-less path")


def test_unavailable_without_cuda():
    assert not cusparse.available()


def test_a_plan_names_what_is_missing():
    indptr, indices, values = torch.tensor([0, 1]), torch.tensor([0]), torch.ones(1)
    with pytest.raises(SeerError, match="cuSPARSE is not loaded"):
        cusparse.SpmvPlan(indptr, indices, values, (1, 1))
