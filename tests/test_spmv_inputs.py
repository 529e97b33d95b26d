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
from seer.sparse import as_csr

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
    spmv._warned_inference.clear()
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
