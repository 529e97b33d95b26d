"""SpMV features: the Triton reduction over indptr agrees with the numpy one and with scipy."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from seer.features import spmv as features
from seer.sparse import as_csr


def _skewed(rows, cols, seed):
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.lognormal(1.5, 1.2, rows).astype(int), cols)
    lengths[rng.random(rows) < 0.1] = 0
    lengths[0] = cols  # one long row
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([rng.choice(cols, n, replace=False) for n in lengths])
    values = rng.uniform(0.5, 1.5, indptr[-1]).astype(np.float32)
    return sp.csr_matrix((values, indices, indptr), shape=(rows, cols))


def _expected(m):
    lengths = np.diff(m.indptr)
    mean = lengths.mean()
    return {
        "row_std": lengths.std(), "row_cv": lengths.std() / mean, "row_max": lengths.max(),
        "empty_frac": (lengths == 0).mean(), "skew": lengths.max() / mean,
        "long_nnz_frac": lengths[lengths > features.LONG_ROW].sum() / lengths.sum(),
    }


@pytest.mark.parametrize("seed, index_dtype", [(0, np.int32), (1, np.int64)])
def test_triton_and_numpy_statistics_match_reference(seed, index_dtype):
    m = _skewed(3000, 700, seed)
    m.indptr = m.indptr.astype(index_dtype)
    m.indices = m.indices.astype(index_dtype)
    csr = as_csr(m)
    triton_sums = features._row_length_sums_triton(csr.indptr, csr.rows)  # runs under the interpreter
    numpy_sums = features._row_length_sums_numpy(csr.indptr)
    assert triton_sums == numpy_sums
    got = features.gathered(csr)
    for name, value in _expected(m).items():
        assert got[name] == pytest.approx(value, rel=1e-12), name
    assert set(got) == {f.name for f in features.GATHERED}


def test_known_features_need_no_pass():
    m = _skewed(100, 50, 2)
    assert features.known(as_csr(m)) == {"rows": 100, "cols": 50, "nnz": m.nnz, "mean_row": m.nnz / 100}
    assert {f.name for f in features.KNOWN} == set(features.known(as_csr(m)))


def test_empty_matrices():
    empty = as_csr((torch.zeros(1, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), torch.zeros(0), (0, 3)))
    assert features.gathered(empty)["row_max"] == 0
    no_values = as_csr((torch.zeros(4, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), torch.zeros(0), (3, 3)))
    got = features.gathered(no_values)
    assert got["empty_frac"] == 1.0 and got["row_cv"] == 0.0
    assert features.known(no_values)["mean_row"] == 0.0


def test_hand_rule_names_registered_variants():
    from seer.kernels.spmv import VARIANTS

    for nnz in (10, 10**6):
        assert features.hand_rule({"nnz": nnz, "rows": 10, "cols": 10, "mean_row": 1.0}) in VARIANTS
