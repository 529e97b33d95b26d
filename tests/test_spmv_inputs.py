"""SpMV inputs through seer.dispatch that change between calls or come in unusual forms: each is
either served correctly or refused with an error naming the problem (CPU, the interpreter)."""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import seer
from seer.errors import InputError, SeerWarning
from seer.kernels import spmv
from seer.sparse import CsrMatrix, as_csr

pytestmark = pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")


@pytest.fixture(autouse=True)
def empty_cache():
    seer.clear_cache()
    yield
    seer.clear_cache()


def _matrix(seed: int = 0) -> sp.csr_matrix:
    m = sp.random(40, 30, density=0.2, format="csr", random_state=seed, dtype=np.float32)
    m.data = np.random.default_rng(seed).uniform(0.5, 1.5, m.nnz).astype(np.float32)
    return m


def _parts(m: sp.csr_matrix) -> tuple:
    return (torch.from_numpy(m.indptr.astype(np.int32)), torch.from_numpy(m.indices.astype(np.int32)),
            torch.from_numpy(m.data.copy()), m.shape)


def _check(y: torch.Tensor, m: sp.csr_matrix, x: torch.Tensor) -> None:
    ref = m.astype(np.float64) @ x.double().numpy()
    assert np.abs(y.detach().double().numpy() - ref).max() <= 1e-5 * np.abs(ref).max()


def test_inference_tensors_are_served_inside_and_outside_inference_mode():
    """They keep no version counter: keyed by identity, with one warning saying what goes unseen."""
    m = _matrix()
    spmv._warned.discard("inference tensors")
    with torch.inference_mode():
        parts, x = _parts(m), torch.randn(m.shape[1])
        torch_csr = torch.sparse_csr_tensor(*parts[:3], m.shape)
        checked = as_csr(_parts(m))
        with pytest.warns(SeerWarning, match="inference tensors"):
            _check(seer.dispatch("spmv", (parts, x)), m, x)
        for matrix in (parts, torch_csr, checked):
            for _ in range(2):
                _check(seer.dispatch("spmv", (matrix, x)), m, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeerWarning)  # warned once a process
        for matrix in (parts, torch_csr, checked):
            _check(seer.dispatch("spmv", (matrix, x)), m, x)


def test_values_that_come_to_require_grad_are_refused_on_a_cached_call():
    """A decision cached under no_grad, or before the values required grad, is not reused while
    autograd is on: the result would silently leave the graph."""
    m = _matrix()
    x = torch.randn(m.shape[1])
    indptr, indices, values, shape = _parts(m)
    values.requires_grad_()
    with torch.no_grad():
        _check(seer.dispatch("spmv", ((indptr, indices, values, shape), x)), m, x)
    with pytest.raises(InputError, match="values requires grad"):
        seer.dispatch("spmv", ((indptr, indices, values, shape), x))
    torch_csr = torch.sparse_csr_tensor(*_parts(m)[:3], m.shape)
    seer.dispatch("spmv", (torch_csr, x))
    torch_csr.requires_grad_()
    with pytest.raises(InputError, match="values requires grad"):
        seer.dispatch("spmv", (torch_csr, x))
    with torch.no_grad():
        _check(seer.dispatch("spmv", (torch_csr, x)), m, x)


def test_an_out_that_requires_grad_is_refused_while_autograd_is_on():
    m = _matrix()
    x, weight = torch.randn(m.shape[1]), torch.randn(m.shape[0], requires_grad=True)
    for out in (weight * 2, torch.zeros(m.shape[0], requires_grad=True)):
        with pytest.raises(InputError, match="out requires grad"):
            seer.dispatch("spmv", (_parts(m), x), out=out)
    assert weight.grad is None


def test_a_checked_matrix_written_in_place_is_validated_again():
    """A CsrMatrix checked once is trusted until its index arrays change in place; then its next
    call validates it again (an out-of-range column would otherwise be read out of bounds). One
    made unchecked on purpose stays unchecked."""
    m = _matrix()
    x = torch.randn(m.shape[1])
    checked = as_csr(_parts(m))
    _check(seer.dispatch("spmv", (checked, x)), m, x)
    checked.indices[0] = 1000
    with pytest.raises(InputError, match=r"column indices must lie in \[0, 30\)"):
        seer.dispatch("spmv", (checked, x))
    checked.indices[0] = int(m.indices[0])
    _check(seer.dispatch("spmv", (checked, x)), m, x)
    unchecked = as_csr(_parts(m), check=False)
    seer.dispatch("spmv", (unchecked, x))
    assert not unchecked.checked


@pytest.mark.parametrize("made", ["unchecked", "written_since"])
def test_as_csr_validates_a_matrix_not_known_valid(made):
    """as_csr(A) returned a CsrMatrix made with check=False, or one whose indices were written since
    its check, without validating it: a user checking their matrix was told nothing, and dispatch
    (which trusts a matrix made unchecked) read x past its end."""
    m = _matrix()
    A = as_csr(_parts(m), check=made == "written_since")
    A.indices[0] = 1000
    with pytest.raises(InputError, match=r"column indices must lie in \[0, 30\)"):
        as_csr(A)
    assert as_csr(A, check=False) is A  # trusted where asked to be
    A.indices[0] = int(m.indices[0])
    assert as_csr(A) is A and A.checked is True


def test_a_matrix_cannot_have_its_arrays_replaced():
    """Plans made from a CsrMatrix's arrays would go stale unseen: the fields are read-only."""
    checked = as_csr(_parts(_matrix()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        checked.values = checked.values * 2


def test_values_resized_after_a_cached_call_are_examined_again():
    m = _matrix()
    parts, x = _parts(m), torch.randn(m.shape[1])
    seer.dispatch("spmv", (parts, x))
    parts[2].resize_(1)
    with pytest.raises(InputError, match=r"indices \(\d+\) and values \(1\) differ in length"):
        seer.dispatch("spmv", (parts, x))


@pytest.mark.parametrize("shape", [(40, 30, 7), (40.9, 30.9), ("40", "30"), 40])
def test_a_shape_must_be_two_whole_numbers(shape):
    indptr, indices, values, _ = _parts(_matrix())
    with pytest.raises(InputError, match="shape must be a pair of integers"):
        seer.dispatch("spmv", ((indptr, indices, values, shape), torch.randn(30)))


def test_a_shape_of_numpy_integers_is_accepted():
    m = _matrix()
    x = torch.randn(m.shape[1])
    _check(seer.dispatch("spmv", ((*_parts(m)[:3], np.array(m.shape)), x)), m, x)


def test_a_bad_shape_of_inference_tensors_is_named_too():
    with torch.inference_mode():
        indptr, indices, values, _ = _parts(_matrix())
        with pytest.raises(InputError, match="shape must be a pair of integers"):
            seer.dispatch("spmv", ((indptr, indices, values, 40), torch.randn(30)))


def test_a_checked_matrix_written_in_place_is_validated_again_under_a_forced_variant():
    """variant= skips the first call's pass, not the check of a matrix whose index arrays changed."""
    m = _matrix()
    checked, x = as_csr(_parts(m)), torch.randn(m.shape[1])
    checked.indices[1] = 1_000_000
    for variant in ("scalar_r128", "merge_c512_hot64k"):
        with pytest.raises(InputError, match=r"column indices must lie in \[0, 30\)"):
            seer.dispatch("spmv", (checked, x), variant=variant)


def test_a_made_matrix_whose_values_require_grad_or_were_resized_is_refused():
    """As a tuple or torch CSR input is: its values are checked on every call that examines it."""
    m = _matrix()
    x = torch.randn(m.shape[1])
    with torch.no_grad():
        made = as_csr(_parts(m))
    made.values.requires_grad_()
    with pytest.raises(InputError, match="values requires grad"):
        seer.dispatch("spmv", (made, x))
    with torch.no_grad():
        _check(seer.dispatch("spmv", (made, x)), m, x)
    made.values.requires_grad_(False)
    with torch.no_grad():
        made.values.resize_(3)
    for variant in (None, "merge_c512"):  # fresh, forced, and (the first) after a cached call
        with pytest.raises(InputError, match=r"indices \(\d+\) and values \(3\) differ in length"):
            seer.dispatch("spmv", (made, x), variant=variant)


def _negated(values: torch.Tensor) -> torch.Tensor:
    """A float view of ``values`` whose sign torch keeps as a flag: its memory holds -values."""
    view = torch.complex(torch.zeros_like(values), -values).conj().imag
    assert view.is_neg() and torch.equal(view, values)
    return view


def test_negated_views_are_refused_as_x_and_as_out():
    """The kernels read and write memory, which holds the other sign: served, y came back negated."""
    m = _matrix()
    parts, x = _parts(m), torch.randn(m.shape[1])
    with pytest.raises(InputError, match=r"x is a negated view .* x.resolve_neg\(\)"):
        seer.dispatch("spmv", (parts, _negated(x)))
    _check(seer.dispatch("spmv", (parts, x)), m, x)  # cached now: the per-call check refuses too
    with pytest.raises(InputError, match="x is a negated view"):
        seer.dispatch("spmv", (parts, _negated(x)))
    with pytest.raises(InputError, match="out is a negated view"):
        seer.dispatch("spmv", (parts, x), out=_negated(torch.zeros(m.shape[0])))
    _check(seer.dispatch("spmv", (parts, _negated(x).resolve_neg())), m, x)
    indptr, indices, values, shape = _parts(m)
    with pytest.raises(InputError, match="values is a negated view"):  # contiguous, so not copied on the way
        seer.dispatch("spmv", ((indptr, indices, torch._neg_view(values), shape), x))


def test_a_refused_first_call_leaves_out_as_it_was():
    """A small matrix is validated by the launch that multiplies it: its product must not reach out
    before the matrix is accepted."""
    indptr, indices, values, shape = _parts(_matrix())
    indices[-1] = 1000
    out = torch.full((shape[0],), -7.0)
    with pytest.raises(InputError, match=r"column indices must lie in \[0, 30\)"):
        seer.dispatch("spmv", ((indptr, indices, values, shape), torch.randn(shape[1])), out=out)
    assert torch.equal(out, torch.full((shape[0],), -7.0))


def test_a_bad_model_is_refused_before_out_is_written():
    """An uncacheable input (scipy) had its first call's validating product written to out before
    the model= argument was looked at (found by a review)."""
    m = _matrix()
    out = torch.full((m.shape[0],), -7.0)
    with pytest.raises(InputError, match="model must be a path"):
        seer.dispatch("spmv", (m, torch.randn(m.shape[1])), out=out, model=123)
    assert torch.equal(out, torch.full((m.shape[0],), -7.0))


@pytest.mark.parametrize("member, bad, message", [
    (2, [1.0] * 5, "CSR values must be a torch.Tensor, got list"),
    (1, np.zeros(5, dtype=np.int32), "CSR indices must be a torch.Tensor, got ndarray"),
    (2, torch.ones(5).to_sparse(), "CSR values must be a dense tensor, got layout torch.sparse_coo"),
])
def test_tuple_members_that_are_no_dense_tensors_are_named(member, bad, message):
    parts = list(_parts(sp.random(5, 5, density=0.2, format="csr", random_state=0, dtype=np.float32)))
    parts[member] = bad
    with pytest.raises(InputError, match=message):
        seer.dispatch("spmv", (tuple(parts), torch.randn(5)))


def test_a_complex_scipy_matrix_is_refused_without_advice_to_cast_it():
    """The advice had been A.astype(numpy.float32), which drops the imaginary parts in silence; taking
    the real parts is offered as such, in a form seer then takes (A.real of complex128 is float64)."""
    m = sp.eye(3, dtype=np.complex128, format="csr")
    with pytest.raises(InputError, match=r"complex values \(complex128\); seer's SpMV is real .*"
                                         r"A\.real\.astype\(numpy\.float32\) takes the real parts") as error:
        as_csr(m)
    assert "A.astype" not in str(error.value)
    as_csr(m.real.astype(np.float32))


def test_inputs_in_the_wrong_order_are_named():
    """(x, A) said only "expected a sparse CSR tensor, got layout torch.strided" (found by a user's walkthrough)."""
    m = _matrix()
    A = torch.sparse_csr_tensor(*_parts(m)[:3], size=m.shape)
    with pytest.raises(InputError, match=r"got a torch.strided tensor of shape \[30\]; convert it with "
                                         r"\.to_sparse_csr\(\) \(spmv's inputs are \(A, x\), the matrix first\)"):
        seer.dispatch("spmv", (torch.randn(m.shape[1]), A))


def test_a_shape_of_booleans_or_tensors():
    """A bool is no size; a shape of 0-d tensors is one, and keyed by value so that calls hit the cache."""
    m = _matrix()
    indptr, indices, values, _ = _parts(m)
    with pytest.raises(InputError, match="shape must be a pair of integers"):
        seer.dispatch("spmv", ((indptr, indices, values, (40, True)), torch.randn(30)))
    x, shape = torch.randn(30), torch.tensor(m.shape)
    for _ in range(3):
        _check(seer.dispatch("spmv", ((indptr, indices, values, shape), x)), m, x)
    assert seer.cache_info()["hits"] == 2


@pytest.mark.parametrize("variant", ["scalar_r128", "offsets_i16", "merge_c512_hot64k", "adaptive", "diagonal_major_r512"])
def test_values_moved_are_examined_again(variant):
    """Values written in place keep the decision; moved (set_, here 4 bytes past an aligned start,
    where a kernel compiled for 16-byte aligned values would fault on a GPU) they get a new one:
    their address is keyed. The move here keeps the values, so y stays A x."""
    m = _matrix()
    parts, x = _parts(m), torch.randn(m.shape[1])
    for _ in range(2):  # the plan, then its bound call
        _check(seer.dispatch("spmv", (parts, x), variant=variant), m, x)
    moved = torch.empty(parts[2].numel() + 1)
    moved[1:] = parts[2]
    parts[2].set_(moved.untyped_storage(), 1, parts[2].shape)
    misses = seer.cache_info()["misses"]
    _check(seer.dispatch("spmv", (parts, x), variant=variant), m, x)
    assert seer.cache_info()["misses"] == misses + 1


@pytest.mark.parametrize("variant", [None, "scalar_r128", "merge_c512", "diagonal_major_r512", "torch_csr"])
def test_values_converted_through_data_are_examined_again(variant):
    """module.half() converts a parameter through .data: the same tensor object, the same version,
    another dtype and storage. The cached plan had been compiled for float32 values (on a GPU it
    would read float16 memory as float32) and refused the float16 x the matrix now takes (found by
    a review)."""
    m = _matrix()
    indptr, indices, values, shape = _parts(m)
    module = torch.nn.Module()
    module.values = torch.nn.Parameter(values, requires_grad=False)
    x = torch.randn(m.shape[1])
    for _ in range(2):
        _check(seer.dispatch("spmv", ((indptr, indices, module.values, shape), x), variant=variant), m, x)
    module.half()
    y = seer.dispatch("spmv", ((indptr, indices, module.values, shape), x.half()), variant=variant)
    assert y.dtype == torch.float16
    halved = m.copy()
    halved.data = halved.data.astype(np.float16).astype(np.float64)
    reference = halved @ x.half().double().numpy()
    assert np.abs(y.double().numpy() - reference).max() <= 2e-2 * np.abs(reference).max()


def _tridiagonal() -> sp.csr_matrix:
    """Rows that follow their diagonals: diagonal_major_r512 multiplies them from a copy of the values."""
    return sp.diags([np.full(49, 1.0), np.full(50, 2.0), np.full(49, 3.0)], [-1, 0, 1], format="csr",
                    dtype=np.float32)


def _wide() -> sp.csr_matrix:
    """Columns past 16k: cusparse_slices_16k multiplies a stack of column slices copied from the values."""
    return sp.random(4, 40_000, density=1e-3, format="csr", random_state=3, dtype=np.float32)


@pytest.mark.parametrize("variant,matrix", [("diagonal_major_r512", _tridiagonal), ("cusparse_slices_16k", _wide),
                                            ("scalar_r128", _matrix), (None, _tridiagonal)])
def test_a_made_matrix_whose_values_are_replaced_through_data_is_planned_again(variant, matrix):
    """``.data =`` (as module.to() converts a parameter) moves no version: the diagonal copy and the
    column slices were kept, and y read the old values, after seer.clear_cache() too (found by a review)."""
    m = matrix()
    A, x = as_csr(_parts(m)), torch.randn(m.shape[1])
    for _ in range(2):  # the plan, then its bound call
        _check(seer.dispatch("spmv", (A, x), variant=variant), m, x)
    A.values.data = A.values.detach() * 2
    _check(seer.dispatch("spmv", (A, x), variant=variant), m * 2, x)


@pytest.mark.parametrize("form", ["made", "arrays"])
def test_values_replaced_through_data_again_and_again_are_planned_again(form):
    """A block freed by one replacement can hold the next: the address the key and the plans'
    record compare would read as unmoved, and the diagonal copy serve the values before last."""
    m = _tridiagonal()
    parts = _parts(m)
    A = as_csr(parts) if form == "made" else parts
    values, x = (A.values if form == "made" else parts[2]), torch.randn(m.shape[1])
    _check(seer.dispatch("spmv", (A, x), variant="diagonal_major_r512"), m, x)
    for round in range(1, 5):
        for _ in range(2):  # the second array allocated while the first lives: where the planned one was
            values.data = values.detach() * 2
        _check(seer.dispatch("spmv", (A, x), variant="diagonal_major_r512"), m * 4 ** round, x)


@pytest.mark.parametrize("variant", [None, "scalar_r128", "diagonal_major_r512"])
def test_a_made_matrix_whose_values_change_dtype_takes_the_new_dtype(variant):
    """module.half() on the values of a CsrMatrix: its plans had been kept for float32, a float16 x
    refused and a float32 one served; float64 values (no dtype of seer's) went through."""
    m = _tridiagonal()
    indptr, indices, values, shape = _parts(m)
    module = torch.nn.Module()
    module.values = torch.nn.Parameter(values, requires_grad=False)
    A, x = as_csr((indptr, indices, module.values, shape)), torch.randn(m.shape[1])
    _check(seer.dispatch("spmv", (A, x), variant=variant), m, x)
    module.half()
    with pytest.raises(InputError, match="x has dtype torch.float32"):
        seer.dispatch("spmv", (A, x), variant=variant)
    y = seer.dispatch("spmv", (A, x.half()), variant=variant)
    assert y.dtype == torch.float16
    reference = m.astype(np.float64) @ x.half().double().numpy()
    assert np.abs(y.double().numpy() - reference).max() <= 2e-2 * np.abs(reference).max()
    module.double()
    with pytest.raises(InputError, match="CSR values have dtype torch.float64"):
        seer.dispatch("spmv", (A, x.double()), variant=variant)


def test_a_made_matrix_whose_values_move_off_16_bytes_is_planned_again():
    """Its plan, compiled for aligned values, refused them for good: seer.clear_cache() kept the plan."""
    m = _matrix()
    A, x = as_csr(_parts(m)), torch.randn(m.shape[1])
    _check(seer.dispatch("spmv", (A, x), variant="scalar_r128"), m, x)
    moved = torch.empty(A.nnz + 1)
    moved[1:] = A.values
    A.values.set_(moved.untyped_storage(), 1, A.values.shape)
    _check(seer.dispatch("spmv", (A, x), variant="scalar_r128"), m, x)


@pytest.mark.parametrize("arrays,message", [
    ((torch.tensor([0, 1, 2]), torch.tensor([0, 7]), torch.tensor([1.0, 2.0])), r"column indices must lie in \[0, 2\)"),
    ((torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.tensor([1.0, 2.0], dtype=torch.float64)),
     "CSR values have dtype torch.float64"),
    ((torch.tensor([0, 2]), torch.tensor([0, 1]), torch.tensor([1.0, 2.0])), "indptr has 2 entries"),
])
def test_a_matrix_made_by_hand_is_checked(arrays, message):
    """CsrMatrix(...) without as_csr skipped every check: column 7 of a 2 x 2 matrix was read past x."""
    A = CsrMatrix(*arrays, (2, 2))
    for variant in (None, "scalar_r128"):
        with pytest.raises(InputError, match=message):
            seer.dispatch("spmv", (A, torch.ones(2)), variant=variant)


@pytest.mark.parametrize("name", ["scalar_r128", "merge_c512", "torch_csr"])
def test_a_variant_run_on_a_matrix_made_by_hand_checks_it(name):
    """``run`` and ``bind`` took a hand-made matrix as validated: its strided values were read as if
    contiguous (a review: [1, 0] for [1, 2]) and column 7 of a 2 x 2 matrix past x."""
    variant, x = spmv.VARIANTS[name], torch.ones(2)
    strided = CsrMatrix(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.tensor([1.0, -7.0, 2.0, -7.0])[::2], (2, 2))
    assert torch.equal(variant.run(strided, x), torch.tensor([1.0, 2.0]))
    strided = CsrMatrix(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.tensor([1.0, -7.0, 2.0, -7.0])[::2], (2, 2))
    assert torch.equal(variant.bind(strided)(x), torch.tensor([1.0, 2.0]))
    outside = CsrMatrix(torch.tensor([0, 1, 2]), torch.tensor([0, 7]), torch.tensor([1.0, 2.0]), (2, 2))
    with pytest.raises(InputError, match=r"column indices must lie in \[0, 2\)"):
        variant.run(outside, x)


def test_a_matrix_made_by_hand_on_strided_values_is_multiplied_not_refused_as_moved():
    """Its first examination takes contiguous copies, as as_csr does; it had been refused as
    "moved onto non-contiguous memory since the matrix was made", which it had not."""
    A = CsrMatrix(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.tensor([1.0, -7.0, 2.0, -7.0])[::2], (2, 2))
    assert torch.equal(seer.dispatch("spmv", (A, torch.ones(2))), torch.tensor([1.0, 2.0]))


def test_meta_arrays_are_refused_by_name():
    A = tuple(t.to("meta") for t in _parts(_matrix())[:3]) + ((30, 20),)
    with pytest.raises(InputError, match="meta tensors"):
        seer.dispatch("spmv", (A, torch.ones(20, device="meta")))


def test_a_variant_run_on_a_made_matrix_follows_values_replaced_through_data():
    """``run`` looks its plan up in the matrix's scratch, which kept the diagonal copy of the old values."""
    m = _tridiagonal()
    A, x = as_csr(_parts(m)), torch.randn(m.shape[1])
    run = spmv.VARIANTS["diagonal_major_r512"].run
    _check(run(A, x), m, x)
    A.values.data = A.values.detach() * 10
    _check(run(A, x), m * 10, x)


def test_a_matrix_made_by_hand_takes_only_tensors_and_a_shape_of_integers():
    arrays = (torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.tensor([1.0, 2.0]))
    with pytest.raises(InputError, match="CSR shape must be a pair of integers"):
        CsrMatrix(*arrays, (2.0, 2))
    with pytest.raises(InputError, match="CSR indptr must be a torch.Tensor, got ndarray"):
        CsrMatrix(np.array([0, 1, 2]), *arrays[1:], (2, 2))
    made = CsrMatrix(*arrays, (np.int64(2), 2))
    assert made.shape == (2, 2) and as_csr(made).checked is True


@pytest.mark.parametrize("moved", ["values", "indices"])
def test_a_made_matrix_whose_arrays_move_onto_strided_memory_is_refused(moved):
    """set_ with a stride kept the cached decision (values) or passed the re-validation, which
    numpy reads with its strides (indices), and the kernels read every other element as the next:
    wrong sums, and past the array's end."""
    m = _matrix()
    A, x = as_csr(_parts(m)), torch.randn(m.shape[1])
    _check(seer.dispatch("spmv", (A, x)), m, x)
    array = getattr(A, moved)
    spread = torch.zeros(2 * array.numel(), dtype=array.dtype)
    spread[::2] = array
    array.set_(spread.untyped_storage(), 0, array.shape, (2,))
    with pytest.raises(InputError, match=f"CSR {moved} moved onto non-contiguous memory"):
        seer.dispatch("spmv", (A, x))


@pytest.mark.parametrize("variant", ["scalar_r128", "merge_c512", "diagonal_major_r512", "torch_csr"])
def test_an_out_that_autograd_saved_is_seen_written(variant):
    """As torch's own out= does, so that a backward that saved out fails instead of using y."""
    m = _matrix()
    x, out = torch.randn(m.shape[1]), torch.rand(m.shape[0])
    weight = torch.ones(m.shape[0], requires_grad=True)
    saved = (weight * out).sum()
    for _ in range(2):  # the first call, then the bound call
        seer.dispatch("spmv", (as_csr(_parts(m)), x), out=out, variant=variant)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        saved.backward()


@pytest.mark.parametrize("variant", ["scalar_r128", "merge_c512", "diagonal_major_r512", "torch_csr"])
def test_an_inference_out_is_written_only_in_inference_mode(variant):
    """As torch's out= refuses it: an inference tensor keeps no version, so what was made from it
    outside inference mode could not see the write. Inside inference mode it is served."""
    m = _matrix()
    x = torch.randn(m.shape[1])
    with torch.inference_mode():
        out = torch.full((m.shape[0],), float("nan"))
    for _ in range(2):  # the first call, then the bound call
        with pytest.raises(InputError, match="out is an inference tensor"):
            seer.dispatch("spmv", (as_csr(_parts(m)), x), out=out, variant=variant)
        assert torch.isnan(out).all()
    with torch.inference_mode():
        for _ in range(2):
            assert seer.dispatch("spmv", (as_csr(_parts(m)), x), out=out, variant=variant) is out
            _check(out, m, x)
