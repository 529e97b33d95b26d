"""CSR validation: every malformed input is refused with a message that names the problem."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from seer.errors import InputError
from seer.sparse import as_csr, check_dense_vector


def _parts(rows=5, cols=4, seed=0):
    m = sp.random(rows, cols, density=0.5, format="csr", random_state=seed, dtype=np.float32)
    return torch.from_numpy(m.indptr.astype(np.int64)), torch.from_numpy(m.indices.astype(np.int64)), torch.from_numpy(m.data), (rows, cols)


def test_accepts_torch_scipy_and_tuple():
    indptr, indices, values, shape = _parts()
    torch_csr = torch.sparse_csr_tensor(indptr, indices, values, shape)
    scipy_csr = sp.csr_matrix((values.numpy(), indices.numpy(), indptr.numpy()), shape=shape)
    for matrix in (torch_csr, scipy_csr, (indptr, indices, values, shape)):
        csr = as_csr(matrix)
        assert csr.shape == shape and csr.nnz == values.numel()
        np.testing.assert_allclose(csr.to_scipy().toarray(), scipy_csr.toarray())


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda p: (p[0][:-1], p[1], p[2], p[3]), "indptr has 5 entries; a matrix with 5 rows needs 6"),
        (lambda p: (p[0], p[1][:-1], p[2], p[3]), "differ in length"),
        (lambda p: (p[0], p[1], p[2].double(), p[3]), "dtype torch.float64"),
        (lambda p: (p[0], p[1], p[2].to(torch.int32), p[3]), "dtype torch.int32"),
        (lambda p: (p[0].float(), p[1], p[2], p[3]), "int32 or int64"),
        (lambda p: (p[0].int(), p[1], p[2], p[3]), "share one dtype"),
        (lambda p: (p[0] + 1, p[1], p[2], p[3]), "must start at 0"),
        (lambda p: (p[0], p[1] + 10, p[2], p[3]), r"column indices must lie in \[0, 4\)"),
        (lambda p: (p[0], p[1] - 10, p[2], p[3]), r"column indices must lie in \[0, 4\)"),
        (lambda p: (p[0], p[1], p[2], (5,)), "pair of integers"),
        (lambda p: (p[0], p[1], p[2], (5, -4)), "non-negative"),
        (lambda p: (p[0].view(2, 3), p[1], p[2], p[3]), "must be 1-D"),
        (lambda p: (p[0].numpy(), p[1], p[2], p[3]), "must be a torch.Tensor"),
        # Documented refusals no test had reached (a review):
        (lambda p: (p[0], p[1], p[2].to("meta"), p[3]), r"CSR arrays live on different devices: \['cpu', 'meta'\]"),
        (lambda p: torch.stack([torch.eye(3), torch.eye(3)]).to_sparse_csr(),
         r"expected a 2-D CSR matrix, got 3 dimensions \(batched CSR is not supported\)"),
    ],
)
def test_rejects_malformed(mutate, message):
    with pytest.raises(InputError, match=message):
        as_csr(mutate(_parts()))


def test_rejects_unsorted_row_pointers():
    indptr, indices, values, shape = _parts()
    indptr = indptr.clone()
    indptr[2], indptr[3] = indptr[3].item() + 1, indptr[2].item()
    with pytest.raises(InputError, match="non-decreasing"):
        as_csr((indptr, indices, values, shape))


def test_rejects_wrong_containers():
    with pytest.raises(InputError, match="sparse CSR tensor"):
        as_csr(torch.ones(3, 3))
    with pytest.raises(InputError, match="got str"):
        as_csr("matrix.mtx")


def test_empty_matrices_are_valid():
    for rows, cols in ((0, 0), (0, 5), (5, 0), (3, 3)):
        csr = as_csr((torch.zeros(rows + 1, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), torch.zeros(0), (rows, cols)))
        assert csr.nnz == 0 and csr.shape == (rows, cols)


def test_dense_vector_checks():
    csr = as_csr(_parts())
    check_dense_vector(csr, torch.randn(4))
    for x, message in (
        (torch.randn(5), "has 5 entries; the matrix has 4 columns"),
        (torch.randn(4, 1), "must be 1-D"),
        (torch.randn(4).double(), r"pass x.to\(torch.float32\)"),
        ([1.0] * 4, "must be a torch.Tensor"),
    ):
        with pytest.raises(InputError, match=message):
            check_dense_vector(csr, x)


def test_addresses_follow_arrays_that_move():
    indptr, indices, values, shape = _parts()
    csr = as_csr((indptr, indices, values, shape))
    assert csr.addresses() == tuple(t.data_ptr() for t in (csr.indptr, csr.indices, csr.values))
    csr.values.set_(csr.values.clone())  # same values, new memory: the kept address is stale
    assert csr.addresses()[2] == csr.values.data_ptr()
    csr.indices.set_(torch.cat([csr.indices, csr.indices])[: csr.nnz])
    assert csr.addresses()[1] == csr.indices.data_ptr()
    with torch.inference_mode():
        parts = tuple(t.clone() for t in _parts()[:3])
    inference = as_csr((*parts, (5, 4)))
    first = inference.addresses()
    with torch.inference_mode():
        inference.values.set_(inference.values.clone())  # no version to see it by: read every call
    assert inference.addresses() == (first[0], first[1], inference.values.data_ptr()) != first


def _sorted_by_scipy(matrix):
    matrix.sum_duplicates()  # scipy sorts each row's columns in place
    return matrix


def test_scipy_rewriting_its_arrays_in_place_changes_no_seer_matrix():
    """as_csr(S) shared S's memory, and to_scipy() a matrix's index arrays: scipy's own in-place
    sorting then rewrote the seer matrix behind its version counters (12 for 21, silently)."""
    S = sp.csr_matrix((np.float32([1, 2, 5]), np.int32([1, 0, 1]), np.int32([0, 2, 3])), shape=(2, 2))
    S.has_sorted_indices = False
    made = as_csr(S)
    _sorted_by_scipy(S)
    assert made.indices.tolist() == [1, 0, 1]
    A = as_csr((torch.tensor([0, 2, 3], dtype=torch.int32), torch.tensor([1, 0, 1], dtype=torch.int32),
                torch.tensor([1.0, 2.0, 5.0]), (2, 2)))
    _sorted_by_scipy(A.to_scipy())
    assert A.indices.tolist() == [1, 0, 1]


def test_scipy_inputs_of_other_layouts_are_read_or_refused_clearly():
    indptr, indices, data = np.array([0, 2, 3], dtype=np.int64), np.int32([1, 0, 1]), np.float32([1, 2, 5])
    mixed = sp.csr_matrix((data, indices, indptr), shape=(2, 2))
    mixed.indptr = indptr  # scipy keeps int64 row pointers beside int32 columns
    assert as_csr(mixed).indptr.dtype == as_csr(mixed).indices.dtype
    swapped = sp.csr_matrix((data.astype(">f4"), indices.astype(">i4"), indptr.astype(">i4")), shape=(2, 2))
    assert torch.equal(as_csr(swapped).values, torch.tensor([1.0, 2.0, 5.0]))
    with pytest.raises(InputError, match=r"convert with A\.astype\(numpy\.float32\)"):
        as_csr(sp.csr_matrix(data.astype(np.float64).reshape(1, 3)))
    with pytest.raises(InputError, match="expected a 2-D sparse matrix, got a scipy array of shape"):
        as_csr(sp.csr_array(np.float32([1, 0, 2])))
    hybrid = torch.tensor([[[1.0, 2.0]], [[0.0, 0.0]]]).to_sparse_csr(dense_dim=1)
    with pytest.raises(InputError, match="hybrid CSR is not supported"):
        as_csr(hybrid)


def test_the_advice_for_a_scipy_matrix_of_other_values_is_one_scipy_can_follow():
    """It said seer takes "float32 or float16 values", but scipy's astype refuses float16: such a
    matrix can only be built from float16 arrays (which seer takes)."""
    with pytest.raises(ValueError, match="does not support dtype float16"):
        sp.eye(3, format="csr").astype(np.float16)
    built = sp.csr_matrix((np.float16([1, 2]), np.int32([0, 1]), np.int32([0, 1, 2])), shape=(2, 2))
    assert as_csr(built).values.dtype == torch.float16
    with pytest.raises(InputError, match=r"float16 ones, which scipy\.sparse holds only in a matrix built from .*arrays "
                                         r"of them: A\.astype\(numpy\.float16\) is refused by scipy\)"):
        as_csr(sp.eye(3, format="csr"))


def test_int32_indices_near_their_limit_are_refused_before_any_copy():
    """The kernels step up to a block past the last nonzero: within 2**20 of 2**31 nonzeros int32
    positions wrapped negative (a merge bracket's row read -1, an adaptive piece's end went negative
    and dropped its nonzeros: a review). Refused before the strided arrays' 8 GiB copies."""
    nnz = 2**31 - 2**20
    parts = (torch.tensor([0, nnz], dtype=torch.int32), torch.zeros(1, dtype=torch.int32).expand(nnz),
             torch.ones(1).expand(nnz), (1, 4))
    with pytest.raises(InputError, match="within 2\\*\\*20 of int32's limit.*use int64 index arrays"):
        as_csr(parts, check=False)
    small = (torch.tensor([0, 3], dtype=torch.int32), torch.tensor([0, 1, 2], dtype=torch.int32), torch.ones(3), (1, 4))
    assert as_csr(small).nnz == 3


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_a_matrix_of_rows_near_2_31_is_refused_before_any_copy(index_dtype):
    """The kernels number rows in 32 bits: past 2**31 a program's rows wrapped negative, passed the
    mask row < rows, and read and wrote y before its start (a review), whatever the index dtype."""
    rows = 2**31 - 2**20
    parts = (torch.zeros(1, dtype=index_dtype).expand(rows + 1), torch.zeros(0, dtype=index_dtype), torch.ones(0),
             (rows, 4))
    with pytest.raises(InputError, match=r"2,146,435,072 rows come within 2\*\*20 of 2\*\*31: seer's SpMV kernels "
                                         r"number rows in 32 bits; multiply by blocks of fewer rows"):
        as_csr(parts, check=False)
    fewer = (torch.zeros(1, dtype=index_dtype), torch.zeros(0, dtype=index_dtype), torch.ones(0), (rows - 1, 4))
    with pytest.raises(InputError, match=r"indptr has 1 entries; a matrix with 2146435071 rows needs"):  # rows pass
        as_csr(fewer, check=False)
