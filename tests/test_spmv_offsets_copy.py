"""benchmarks/spmv_offsets_copy.py: the one pass now shipped makes the copy of the columns as offsets
that torch's ops made, and refuses where they did (Triton interpreter, CPU)."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from conftest import load_benchmark
from test_spmv_kernels import BEYOND_16_BITS, offsets_matrix, random_csr, skewed_lengths, to_seer

copy = load_benchmark("spmv_offsets_copy")


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("reach", BEYOND_16_BITS.values(), ids=BEYOND_16_BITS.keys())
def test_one_pass_at_the_16_bit_edges(reach, index_dtype):
    csr, _ = to_seer(offsets_matrix(np.random.default_rng(3), *reach), index_dtype=index_dtype)
    before, shipped = copy.torch_ops_offsets(csr), copy.spmv.column_offsets(csr)
    assert (shipped is None) == any(reach) and copy.same(before, shipped)


@pytest.mark.parametrize("rows,cols,mean", [(300, 200, 6), (40, 3000, 60), (600, 900, 1)])
def test_one_pass_on_skewed_rows_with_empty_ones(rows, cols, mean):
    """Every tile (one lane a row to 16 lanes), rows of very different lengths, empty rows."""
    rng = np.random.default_rng(rows + cols)
    csr, _ = to_seer(random_csr(rng, rows, cols, skewed_lengths(rng, rows, cols, mean), sort_columns=True))
    shipped = copy.spmv.column_offsets(csr)
    assert shipped is not None and copy.same(copy.torch_ops_offsets(csr), shipped)
    assert not copy.same(shipped, None) and not copy.same(shipped, shipped + 1)


def test_selection_takes_the_fitting_families_by_turns():
    def case(case_id, size):
        return SimpleNamespace(id=case_id, extra={"size": size})

    cases = [case("synthetic/banded/a", 1), case("synthetic/banded/b", 3), case("synthetic/banded/c", 2),
             case("derived/x/permute1", 9), case("derived/y/permute0", 5), case("synthetic/rmat/r", 4),
             case("synthetic/stencil_2d/s", 7)]
    assert [c.id for c in copy.select(cases)] == [
        "synthetic/banded/a", "synthetic/stencil_2d/s", "derived/y/permute0", "synthetic/banded/b", "synthetic/banded/c"]


def test_markdown_groups_by_size():
    rows = [{"id": f"m{i}", "rows": 10, "nnz": nnz, "fits": True,
             "copy_ms": {"torch ops": shipped, "one pass": one}}
            for i, (nnz, shipped, one) in enumerate([(2e6, 0.2, 0.05), (3e7, 1.0, 0.2), (4e7, 2.0, 0.25)])]
    result = {"device": {"name": "GPU"}, "versions": {"torch": "t", "triton": "r"}, "date": "d", "command": "c",
              "matrices": rows}
    text = copy.markdown(result)
    assert "| nnz 1e6-1e7 | 1 | 0.200 | 0.050 | 4.0x |" in text and "| nnz 1e7+ | 2 | 1.500 | 0.225 | 6.5x |" in text
    assert "nnz 1e5-1e6" not in text  # bands without inputs are left out
    assert "| all | 3 | 1.000 | 0.200 | 5.0x |" in text
