"""Every registered op against the registry's contract (seer/registry.py), on the CPU.

A new op is one kernel module, one feature module and one entry in ``seer.registry.OPS``: these
tests loop over ``OPS``, so a new op is checked as soon as it is registered, on the small inputs
its kernel module's ``examples()`` gives. An op without them fails here, except a multi-GPU op (a
``world_size`` feature), whose inputs need a world of ranks (tests/test_overlap*.py check those).
"""
from __future__ import annotations

import inspect
import math
import numbers
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import seer
from seer.errors import InputError, SeerWarning
from seer.profiling import TOLERANCE
from seer.registry import OPS, Variant, get_op

OP_NAMES = sorted(OPS)


def examples(name: str) -> list[tuple]:
    """The op's example inputs; a skip for a multi-GPU op without them, a failure for any other."""
    op = get_op(name)
    make = getattr(op.kernels, "examples", None)
    if make is None:
        if "world_size" in op.feature_names:
            pytest.skip(f"{name} is a multi-GPU op (its features include world_size): its inputs need a world "
                        "of ranks, which tests/test_overlap*.py set up")
        pytest.fail(f"{name} has no example inputs: add examples() -> list[tuple] to its kernel module "
                    f"({OPS[name].kernels}): small CPU inputs as passed to seer.dispatch (seer/registry.py)")
    made = make()
    assert made, f"{name}: examples() gave no inputs"
    return made


def validated(name: str, inputs) -> tuple:
    """``(problem, operands)`` of ``inputs``, as dispatch makes them; the problem says its device,
    the CPU's (dispatch takes the model measured there, and runs there)."""
    kernels = get_op(name).kernels
    source, operands = kernels.split(inputs)
    problem = kernels.problem(source)
    assert hasattr(problem, "device"), f"{name}: problem(source) gives a {type(problem).__name__} with no device"
    assert torch.device(problem.device).type == "cpu", f"{name}: an example is on {problem.device}, not the CPU"
    kernels.check_operands(problem, operands)
    return problem, operands


def assert_matches(result: torch.Tensor, reference: torch.Tensor, problem, what: str) -> None:
    """``result`` is the float64 ``reference`` within the tolerance profiling accepts for the
    problem's dtype (``seer.profiling.TOLERANCE``), element by element relative to the largest
    value: one wrong or unwritten (NaN) element fails, which a relative norm over many would pass."""
    tolerance = TOLERANCE.get(getattr(problem, "dtype", torch.float32), 1e-2)
    got = result.detach().double().cpu()
    assert got.shape == reference.shape, f"{what}: shape {tuple(got.shape)}, the reference's {tuple(reference.shape)}"
    bad = ~((got - reference).abs() <= tolerance * reference.abs().max())
    if bad.any():
        at = tuple(torch.nonzero(bad)[0].tolist())
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.numel()} elements off by more than {tolerance:g} of the "
                    f"largest, e.g. at {at}: {got[at].item()} instead of {reference[at].item()}")


def scipy_spmv(a: torch.Tensor, x: torch.Tensor) -> np.ndarray:
    return sp.csr_matrix((a.values().double().numpy(), a.col_indices().numpy(), a.crow_indices().numpy()),
                         shape=tuple(a.shape)) @ x.double().numpy()


def numpy_gemm(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    return a.double().numpy() @ b.double().numpy()


# The result of an op's example inputs computed without seer, where this file knows how; another
# op's reference is checked for being finite and not all zero only.
INDEPENDENT = {"spmv": scipy_spmv, "gemm": numpy_gemm}


@pytest.mark.parametrize("name", OP_NAMES)
def test_variants_are_named_by_their_keys(name):
    """Models and tables name variants by their keys; dispatch and reports by ``Variant.name``."""
    for key, variant in get_op(name).variants.items():
        assert isinstance(variant, Variant) and variant.name == key, (
            f"{name}: VARIANTS[{key!r}] is a {type(variant).__name__} named {getattr(variant, 'name', None)!r}")


@pytest.mark.parametrize("name", OP_NAMES)
def test_examples_are_accepted_and_keyed_alike(name):
    """split, problem and check_operands take the examples; the cache key is None or a hashable
    pair, the same on the same inputs (else every call would miss the cache)."""
    kernels = get_op(name).kernels
    for i, inputs in enumerate(examples(name)):
        validated(name, inputs)
        key = kernels.cache_key(kernels.split(inputs)[0])
        if key is not None:
            assert isinstance(key, tuple) and len(key) == 2, f"{name} example {i}: cache key {key!r} is no pair"
            hash(key)
            assert key == kernels.cache_key(kernels.split(inputs)[0]), f"{name} example {i}: cache key differs"


@pytest.mark.parametrize("name", OP_NAMES)
def test_reference_is_float64_and_right(name):
    """Profiling and these tests judge every variant by the reference: it must be right itself."""
    kernels = get_op(name).kernels
    for i, inputs in enumerate(examples(name)):
        problem, operands = validated(name, inputs)
        reference = kernels.reference(problem, *operands)
        assert reference.dtype == torch.float64, f"{name} example {i}: reference is {reference.dtype}"
        assert torch.isfinite(reference).all() and reference.abs().max() > 0, (
            f"{name} example {i}: reference is not finite, or all zero")
        independent = INDEPENDENT.get(name)
        if independent is not None:
            expected = independent(*inputs)
            np.testing.assert_allclose(reference.cpu().numpy(), expected, rtol=1e-10,
                                       atol=1e-10 * np.abs(expected).max(), err_msg=f"{name} example {i}")


@pytest.mark.parametrize("name", OP_NAMES)
def test_every_variant_matches_the_reference(name):
    """Every variant runs on the CPU under the interpreter (vendor variants as torch's CPU product,
    TMA ones through the interpreter's descriptors or pointer loads), fresh and into an ``out``
    poisoned with NaN where it takes one, so that an element it leaves unwritten fails."""
    op = get_op(name)
    for i, inputs in enumerate(examples(name)):
        problem, operands = validated(name, inputs)
        reference = op.kernels.reference(problem, *operands)
        for variant in op.variants.values():
            what = f"{name} variant {variant.name} on example {i}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SeerWarning)  # a documented fallback (TMA on unaligned rows)
                fresh = variant.run(problem, *operands)
                assert_matches(fresh, reference, problem, what)
                if "out" in inspect.signature(variant.run).parameters:
                    out = torch.full_like(fresh, float("nan"))
                    assert variant.run(problem, *operands, out=out) is out, f"{what}: out= is not what it returns"
                    assert_matches(out, reference, problem, f"{what}, into out= poisoned with NaN")


@pytest.mark.parametrize("name", OP_NAMES)
def test_features_are_named_finite_and_ruled(name):
    """The trees read features by name: known and gathered give exactly KNOWN's and GATHERED's, as
    finite numbers; the hand rule picks a registered variant, on the known features alone (what
    dispatch hands it) and on all of them."""
    op = get_op(name)
    for i, inputs in enumerate(examples(name)):
        problem, _ = validated(name, inputs)
        known, gathered = op.features.known(problem), op.features.gathered(problem)
        for kind, gave, declared in (("known", known, op.features.KNOWN), ("gathered", gathered, op.features.GATHERED)):
            names = {f.name for f in declared}
            lacks, adds = sorted(names - set(gave)), sorted(set(gave) - names)
            assert not lacks and not adds, f"{name} example {i}: {kind}() lacks {lacks}, adds {adds}"
        for feature, value in {**known, **gathered}.items():
            assert isinstance(value, numbers.Real) and math.isfinite(value), f"{name} example {i}: {feature}={value!r}"
        free = op.features.gathered_if_free(problem)
        assert free is None or free == gathered, f"{name} example {i}: gathered_if_free {free} != gathered {gathered}"
        for features in (known, {**known, **gathered}):
            choice = op.features.hand_rule(features)
            assert choice in op.variants, f"{name} example {i}: the hand rule chose {choice!r}, no variant"


@pytest.mark.parametrize("name", OP_NAMES)
def test_dispatch_follows_the_hand_rule_and_forced_variants(name):
    """No model is measured on the CPU: dispatch says so and takes the hand rule's choice; its first
    call (SpMV's: the validating pass's product) and the next (the cached decision's bound call)
    match the reference, and so does a variant forced by name (one the hand rule did not choose)."""
    op = get_op(name)
    for i, inputs in enumerate(examples(name)):
        problem, operands = validated(name, inputs)
        reference = op.kernels.reference(problem, *operands)
        seer.clear_cache()  # dispatch warns once until cleared
        with pytest.warns(SeerWarning, match="hand rule"):
            assert_matches(seer.dispatch(name, inputs), reference, problem, f"{name} first dispatch, example {i}")
        assert_matches(seer.dispatch(name, inputs), reference, problem, f"{name} second dispatch, example {i}")
        chosen = seer.explain(name, inputs).variant
        assert chosen == op.features.hand_rule(op.features.known(problem)), f"{name} example {i}: chose {chosen}"
        forced = next((v for v in op.variants if v != chosen), chosen)
        assert_matches(seer.dispatch(name, inputs, variant=forced), reference, problem,
                       f"{name} dispatch forced to {forced}, example {i}")


def _altered(tensor: torch.Tensor, how: str) -> torch.Tensor | None:
    """``tensor`` as a negated view or requiring grad; None where it cannot be so (a sparse tensor
    has no negated view)."""
    if how == "a negated view":
        return torch._neg_view(tensor) if tensor.layout == torch.strided else None
    return tensor.detach().clone().requires_grad_(True) if tensor.is_floating_point() else None


@pytest.mark.parametrize("how", ["a negated view", "requiring grad"])
@pytest.mark.parametrize("name", OP_NAMES)
def test_operands_seer_cannot_honour_are_refused(name, how):
    """A negated view keeps its sign as a flag that kernels reading memory never see (the result
    would be negated wrong), and seer's kernels have no backward (gradients would stop silently):
    each op must refuse both with an InputError naming the input (seer.errors' check_not_negated and
    check_no_grad), which a new op's kernel module could forget."""
    for i, inputs in enumerate(examples(name)):
        for position, tensor in enumerate(inputs):
            altered = _altered(tensor, how) if isinstance(tensor, torch.Tensor) else None
            if altered is None:
                continue
            seer.clear_cache()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SeerWarning)
                with pytest.raises(InputError, match="negated view" if how == "a negated view" else "requires grad"):
                    seer.dispatch(name, (*inputs[:position], altered, *inputs[position + 1:]))
