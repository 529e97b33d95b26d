"""SpMV features and the validation pass they come from: the Triton pass (interpreted here)
agrees with numpy, and both with scipy's row lengths, on random, skewed and real matrices."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from seer import sparse
from seer.datasets.generators import stencil_3d
from seer.errors import InputError
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


def _shifted_row_frac(m) -> float:
    """Row by row over the rows the pass samples: the share as long as the row before, starting
    one column to its right (0 on a matrix below the sampled size)."""
    rows = m.shape[0]
    if rows < sparse.SHIFT_MIN_ROWS:
        return 0.0
    stride = rows // sparse.SHIFT_SAMPLES
    # One row in each stretch of `stride` rows, placed by the golden-ratio sequence in 32-bit fixed point.
    sampled = [(k + 1) * stride - (k * 2654435769 % 2**32) * stride // 2**32 for k in range((rows - 1) // stride)]
    return sum(_shifts(m, r) for r in sampled) / len(sampled)


@pytest.fixture
def small_samples(monkeypatch):
    """Shifted rows counted from 400 rows on, about 100 of them: the interpreter's sizes."""
    monkeypatch.setattr(sparse, "SHIFT_MIN_ROWS", 400)
    monkeypatch.setattr(sparse, "SHIFT_SAMPLES", 100)


def _expected(m):
    lengths = np.diff(m.indptr)
    mean = lengths.mean()
    return {
        "row_std": lengths.std(), "row_cv": lengths.std() / mean, "row_max": lengths.max(),
        "empty_frac": (lengths == 0).mean(), "skew": lengths.max() / mean,
        "long_nnz_frac": lengths[lengths > features.LONG_ROW].sum() / lengths.sum(),
        "shifted_row_frac": _shifted_row_frac(m),
    }


def _banded(rows, offsets, seed, broken=()):
    """A band of the given diagonals (cut at the edges), values fresh; rows in ``broken`` get their
    first column moved one to the left, so that they and the row after stop shifting."""
    m = sp.diags([np.ones(rows)] * len(offsets), offsets, shape=(rows, rows), format="csr")
    m.data = np.random.default_rng(seed).uniform(0.5, 1.5, m.nnz).astype(np.float32)
    for r in broken:
        start = m.indptr[r]
        if m.indices[start] > 0:
            m.indices[start] -= 1
    return m


def _with_index_dtype(m, index_dtype):
    m.indptr = m.indptr.astype(index_dtype)
    m.indices = m.indices.astype(index_dtype)
    return m


def _real_matrices(folder, count=4):
    from seer.datasets.suitesparse import list_matrices, read_matrix

    small = [info for info in list_matrices(folder) if 1_000 <= info.nnz <= 60_000]
    matrices = []
    for info in small[:: max(len(small) // count, 1)]:
        try:
            matrices.append(read_matrix(info.path).tocsr().astype(np.float32))
        except InputError:  # a complex matrix: seer reads real ones only
            continue
    return matrices[:count]


def _assert_pass_matches_numpy(m):
    csr = as_csr(m, check=False)
    for check in (True, False):
        interpreted = sparse._structure_triton(csr, check=check, stats=True)
        reference = sparse._structure_numpy(csr, check)
        assert interpreted.sums == reference.sums
        if check:
            assert interpreted == reference


@pytest.mark.parametrize("seed, index_dtype", [(0, np.int32), (1, np.int64)])
def test_statistics_match_reference(seed, index_dtype, small_samples):
    m = _with_index_dtype(_skewed(3000, 700, seed), index_dtype)
    _assert_pass_matches_numpy(m)
    validated = as_csr(m)
    got = features.gathered(validated)
    for name, value in _expected(m).items():
        assert got[name] == pytest.approx(value, rel=1e-12), name
    assert set(got) == {f.name for f in features.GATHERED}
    assert features.gathered_if_free(validated) == got


@pytest.mark.parametrize("offsets, index_dtype", [((-1, 0, 1), np.int32), ((-40, -1, 0, 1, 40), np.int64),
                                                  (tuple(range(-8, 9)), np.int32)])
def test_shifted_rows_of_bands_and_stencils(offsets, index_dtype, small_samples):
    rows = 600
    broken_rows = range(100, rows, 7)
    whole = _with_index_dtype(_banded(rows, offsets, 0), index_dtype)
    broken = _with_index_dtype(_banded(rows, offsets, 1, broken=broken_rows), index_dtype)
    stencil = _with_index_dtype(sp.kronsum(_banded(25, (-1, 0, 1), 2), _banded(25, (-1, 0, 1), 3), format="csr"),
                                index_dtype)
    fracs = []
    for m in (whole, broken, stencil):
        _assert_pass_matches_numpy(m)
        fracs.append(features.gathered(as_csr(m))["shifted_row_frac"])
        assert fracs[-1] == pytest.approx(_shifted_row_frac(m), rel=1e-12)
    # Away from the edges every row of a band shifts the one before; a broken row and the row
    # after it do not.
    edge_rows = 2 * max(abs(o) for o in offsets)
    whole_frac, broken_frac, _ = fracs
    assert whole_frac >= 1 - (edge_rows + 2 * sparse.SHIFT_MIN_ROWS // sparse.SHIFT_SAMPLES) / rows
    assert broken_frac < whole_frac - 0.1


def test_the_sample_does_not_alias_with_a_period(small_samples):
    # A band of 2,500 rows broken every 25 rows (as a grid's side breaks a stencil), sampled one
    # in each stretch of 25: rows 25, 50, 75, ... would all be broken ones and read no shift at all.
    rows, period = 2500, 25
    band = _banded(rows, (-1, 0, 1), 0, broken=range(period, rows, period))
    _assert_pass_matches_numpy(band)
    every_row = np.mean([_shifts(band, r) for r in range(1, rows)])
    assert every_row == pytest.approx(1 - 2 / period, abs=0.01)
    assert features.gathered(as_csr(band))["shifted_row_frac"] == pytest.approx(every_row, abs=0.02)


def _shifts(m, r) -> bool:
    row, before = m.indices[m.indptr[r]:m.indptr[r + 1]], m.indices[m.indptr[r - 1]:m.indptr[r]]
    return bool(len(row) and len(row) == len(before) and row[0] == before[0] + 1)


def test_rows_of_equal_length_need_not_shift(small_samples):
    # Every row as long as the one before, columns scattered: nothing shifts.
    rng = np.random.default_rng(4)
    rows, cols, length = 1500, 900, 7
    indices = np.concatenate([np.sort(rng.choice(cols, length, replace=False)) for _ in range(rows)])
    m = sp.csr_matrix((rng.uniform(0.5, 1.5, rows * length).astype(np.float32), indices,
                       np.arange(rows + 1) * length), shape=(rows, cols))
    _assert_pass_matches_numpy(m)
    got = features.gathered(as_csr(m))["shifted_row_frac"]
    assert got == pytest.approx(_shifted_row_frac(m)) and got < 0.02


def test_small_matrices_count_no_shifted_rows():
    # Below SHIFT_MIN_ROWS the pass checks no row: the feature reads 0 even on a band (of two
    # programs' blocks).
    m = _banded(2000, (-1, 0, 1), 0)
    _assert_pass_matches_numpy(m)
    assert features.gathered(as_csr(m))["shifted_row_frac"] == 0.0
    assert sparse.shift_stride(sparse.SHIFT_MIN_ROWS) == sparse.SHIFT_MIN_ROWS // sparse.SHIFT_SAMPLES > 1


def test_the_validating_product_runs_below_the_shifted_row_count():
    # The first call's validating product counts no shifted rows: its matrices must be too small to.
    from seer.kernels import spmv

    assert spmv.VALIDATING_PRODUCT_MAX_ROWS < sparse.SHIFT_MIN_ROWS


def test_statistics_of_real_matrices(suitesparse_dir):
    for m in _real_matrices(suitesparse_dir):
        _assert_pass_matches_numpy(m)
        got = features.gathered_if_free(as_csr(m))
        for name, value in _expected(m).items():
            assert got[name] == pytest.approx(value, rel=1e-12), name


@pytest.mark.parametrize("shape, density", [((3000, 50), 0.2), ((9000, 400), 0.0005)])
def test_more_rows_than_the_programs_cover(shape, density):
    # Past the program cap, every program loops over several blocks; a loop step loads a block of
    # rows and a block of indices, and either runs out first (more index blocks, more row blocks).
    m = sp.random(*shape, density=density, format="csr", random_state=3, dtype=np.float32)
    csr = as_csr(m, check=False)
    sparse._programs_cap[csr.device] = 2
    try:
        _assert_pass_matches_numpy(m)
    finally:
        del sparse._programs_cap[csr.device]


def test_sample_blocks_past_the_programs(monkeypatch):
    # Each program loads its first sample block before the main loop and takes the rest after it;
    # 4 sample blocks on 2 programs exercise both, on a band whose every third row stops shifting.
    monkeypatch.setattr(sparse, "SHIFT_MIN_ROWS", 400)
    monkeypatch.setattr(sparse, "SHIFT_SAMPLES", 400)
    m = _banded(4000, (-2, 0, 3), 8, broken=range(5, 4000, 3))
    assert sparse.cdiv(sparse.shift_samples(4000), sparse._SAMPLE_BLOCK) == 4
    monkeypatch.setitem(sparse._programs_cap, torch.device("cpu"), 2)
    _assert_pass_matches_numpy(m)
    assert 0 < sparse._structure_numpy(as_csr(m, check=False), True).sums.shifted_rows < 400


def test_pass_warps_follow_the_steps_a_program_takes():
    # 4 warps while a program takes one block (the small matrices), 8 once the blocks pass half
    # the programs the pass runs (NOTES SpMV 53).
    assert sparse.pass_warps(1, 264) == sparse.pass_warps(132, 264) == 4
    assert sparse.pass_warps(133, 264) == sparse.pass_warps(10_000, 264) == 8


def test_each_pass_adds_up_its_own_counts(monkeypatch):
    # 2 programs, one or both taking two blocks, add their counts into the sums; the last one
    # copies them out and zeroes them, so a pass on another matrix starts from nothing.
    monkeypatch.setitem(sparse._programs_cap, torch.device("cpu"), 2)
    first, second = _skewed(3600, 700, 8), _skewed(2200, 300, 3)
    assert sparse.cdiv(2200, sparse._ROW_BLOCK) > 2
    for m in (first, second, first):
        _assert_pass_matches_numpy(m)
        assert not sparse.totals_buffers(torch.device("cpu"))[0].any()


def test_wide_lanes_match_narrow_ones(monkeypatch):
    # Past 2**31 nonzeros the statistics keep 64-bit lanes; the same sums on a small matrix (of two
    # programs' blocks).
    m = _skewed(2000, 700, 8)
    narrow = sparse._structure_triton(as_csr(m, check=False), check=True, stats=True)
    monkeypatch.setattr(sparse, "NARROW_BELOW", 0)
    assert sparse._structure_triton(as_csr(m, check=False), check=True, stats=True) == narrow
    _assert_pass_matches_numpy(m)


def test_pass_counts_what_validation_refuses(small_samples):
    m = _skewed(500, 300, 4)
    bad = m.copy()
    bad.indices[[3, 50, 400]] = [-2, 300, 10_000]
    bad.indptr[[10, 20]] += 5_000  # rows 10 and 20 now end before they start
    for index_dtype in (np.int32, np.int64):
        csr = as_csr(_with_index_dtype(bad.copy(), index_dtype), check=False)
        found = sparse._structure_triton(csr, check=True, stats=True)
        assert found == sparse._structure_numpy(csr, True)
        assert (found.out_of_range, found.decreasing) == (3, 2)
    with pytest.raises(InputError, match="2 rows end before they start"):
        as_csr(bad)
    bad.indptr = m.indptr
    with pytest.raises(InputError, match=r"3 lie outside, in \[-2, 10000\]"):
        as_csr(bad)


def test_free_statistics_need_a_validated_unchanged_matrix():
    m = _skewed(400, 200, 5)
    assert features.gathered_if_free(as_csr(m, check=False)) is None
    parts = tuple(torch.from_numpy(a.astype(np.int64)) for a in (m.indptr, m.indices)) + (torch.from_numpy(m.data), m.shape)
    csr = as_csr(parts)
    assert features.gathered_if_free(csr) == features.gathered(csr)
    csr.indptr[1:] = csr.indptr[1:]  # an in-place write: the validated sums may be stale
    assert features.gathered_if_free(csr) is None


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


@pytest.mark.gpu
def test_pass_on_gpu_matches_numpy(suitesparse_dir, monkeypatch):
    """Large and real matrices, int32 and int64, each twice (Triton's launch path, then seer's
    direct one), and a matrix with every kind of fault."""
    rng = np.random.default_rng(6)
    lengths = np.minimum(rng.lognormal(1.5, 1.5, 2_000_000).astype(np.int64), 50_000)
    lengths[7] = 3_000_000
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    huge = sp.csr_matrix((np.ones(indptr[-1], np.float32), rng.integers(0, 2_000_000, indptr[-1]), indptr),
                         shape=(2_000_000, 2_000_000))
    bad = _skewed(5000, 3000, 7)
    bad.indices[[1, 2]] = [-1, 3000]
    bad.indptr[[100, 200, 300]] += 10_000
    band = _banded(3_000_000, (-1000, -1, 0, 1, 1000), 5, broken=range(7, 3_000_000, 1001))
    stencil = stencil_3d(84, 27)  # its side shares a factor with the sample's stride (NOTES SpMV 67)
    for m in (huge, bad, band, stencil, *_real_matrices(suitesparse_dir, count=8)):
        for index_dtype in (np.int32, np.int64):
            m = _with_index_dtype(m, index_dtype)
            host = as_csr(m, check=False)
            csr = as_csr((host.indptr.cuda(), host.indices.cuda(), host.values.cuda(), host.shape), check=False)
            for check in (True, False, True):
                found = sparse._structure_triton(csr, check=check, stats=True)
                assert found.sums == sparse._structure_numpy(host, check).sums
                if check:
                    assert found == sparse._structure_numpy(host, True)
            for warps in (4, 8):  # both cuts, whichever the matrix's size picks (sparse.pass_warps)
                launched = sparse.launch_structure(csr, True, True, warps)
                assert sparse.read_totals(launched, csr.device) == sparse._structure_numpy(host, True)
            assert sparse._structure_triton(csr, check=True, stats=False).sums == (0, 0, 0, 0, 0)
    host = as_csr(stencil)
    on_device = as_csr((host.indptr.cuda(), host.indices.cuda(), host.values.cuda(), host.shape))
    assert features.gathered(on_device)["shifted_row_frac"] == pytest.approx(0.9643, abs=0.005)  # every row's share
    monkeypatch.setattr(sparse, "NARROW_BELOW", 0)  # the 64-bit lanes of a matrix past 2**31 nonzeros
    host = as_csr(huge, check=False)
    csr = as_csr((host.indptr.cuda(), host.indices.cuda(), host.values.cuda(), host.shape), check=False)
    assert sparse._structure_triton(csr, check=True, stats=True) == sparse._structure_numpy(host, True)
