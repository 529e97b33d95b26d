"""benchmarks/cusparse_call_host.py (CPU): matrices spread over sizes, each version checked then timed (a
torch-backed plan standing in for cuSPARSE), the summary on planted rows."""
import pytest
import torch
from conftest import load_benchmark


@pytest.fixture(scope="module")
def call_host():
    return load_benchmark("cusparse_call_host")


def test_matrices_spread_from_smallest_to_largest(call_host, suitesparse_dir):
    from seer.datasets.suitesparse import list_matrices

    infos = list_matrices(suitesparse_dir)
    chosen = call_host.spread(suitesparse_dir, 5)
    assert [i.id for i in chosen][0] == infos[0].id and chosen[-1].id == infos[-1].id
    sizes = [case.extra["size"] for case in chosen]
    assert sizes == sorted(sizes) and len({i.id for i in chosen}) == 5


def test_each_pattern_is_summarised_before_against_now(call_host):
    rows = [{"id": "a", "nnz": 10, "before:same_us": 12.0, "now:same_us": 6.0, "before:new_out_us": 14.0,
             "now:new_out_us": 10.0, "before:alternating_us": 13.0, "now:alternating_us": 13.0},
            {"id": "b", "nnz": 20, "before:same_us": 16.0, "now:same_us": 2.0, "before:new_out_us": 18.0,
             "now:new_out_us": 18.0, "before:alternating_us": 13.0, "now:alternating_us": 26.0}]
    summary = call_host.summary(rows)
    assert summary["same"] == {"before_us": 14.0, "now_us": 4.0, "speedup": pytest.approx(4.0)}  # sqrt(2 * 8)
    assert summary["alternating"]["speedup"] == pytest.approx(0.5 ** 0.5)
    text = call_host.markdown({"device": {"name": "GPU"}, "date": "d", "versions": {"torch": "t", "triton": "r"},
                               "command": "c", "calls": 2000, "rounds": 5, "summary": summary, "matrices": rows})
    assert "| same | 14.0 | 4.0 | 4.00x |" in text and "| b | 20 | 16.0 / 2.0 | 18.0 / 18.0 | 13.0 / 26.0 |" in text


class _TorchPlan:
    """SpmvPlan's interface over torch's product, for the benchmark's plumbing off CUDA."""

    def __init__(self, indptr, indices, values, shape, scale=1.0):
        self.matrix, self.scale = torch.sparse_csr_tensor(indptr, indices, values, shape), scale

    def __call__(self, x, y):
        return y.copy_(self.scale * (self.matrix @ x))


def test_each_version_is_checked_against_float64_then_timed_in_every_pattern(call_host, suitesparse_dir):
    from types import SimpleNamespace

    case = call_host.spmv_cases([suitesparse_dir], max_nnz=2_000, device="cpu")[3]
    right = SimpleNamespace(SpmvPlan=_TorchPlan)
    row = call_host.matrix_row(case, {"before": right, "now": right}, 3, 1)
    assert row["id"] == case.id and all(row[f"{v}:{p}_us"] > 0 for v in ("before", "now") for p in call_host.PATTERNS)
    wrong = SimpleNamespace(SpmvPlan=lambda *args: _TorchPlan(*args, scale=1.01))
    with pytest.raises(AssertionError, match="now plan disagrees with float64"):
        call_host.matrix_row(case, {"before": right, "now": wrong}, 3, 1)
