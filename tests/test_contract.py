"""Every registered op against the registry's contract (seer/registry.py), on the CPU.

A new op is one kernel module, one feature module and one entry in ``seer.registry.OPS``: these
tests loop over ``OPS``, so a new op is checked as soon as it is registered, on the small inputs
its kernel module's ``examples()`` gives. An op without them fails here, except a multi-GPU op (a
``world_size`` feature), whose inputs need a world of ranks (tests/test_overlap*.py check those).
"""
from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import numbers
import re
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import seer
from seer.errors import InputError, SeerError, SeerWarning
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


def run_takes_out(variant: Variant) -> bool:
    return "out" in inspect.signature(variant.run).parameters


def takes_out(op) -> bool:
    """Whether seer.dispatch takes ``out=`` for ``op`` and hands it on to the chosen variant: its
    own answer (every variant's ``run`` takes one)."""
    return sys.modules["seer.dispatch"]._takes_out(op)  # ``seer.dispatch`` names the function


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


def assert_written_into(out: torch.Tensor, result, reference: torch.Tensor, problem, what: str) -> None:
    """``result``, what a call given ``out=`` returned, is ``out`` itself, which now holds the reference."""
    if result is not out:  # not an assert: pytest would print both tensors
        pytest.fail(f"{what}: given out=, it returned "
                    f"{'another tensor' if isinstance(result, torch.Tensor) else type(result).__name__}, not out")
    assert_matches(out, reference, problem, f"{what}, into out= poisoned with NaN")


def poisoned(like: torch.Tensor) -> torch.Tensor:
    """An ``out`` for a result like ``like``, filled with NaN: an element left unwritten fails."""
    return torch.full_like(like, float("nan"))


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
def test_variants_take_out_all_or_none(name):
    """dispatch takes ``out=`` for an op only where every variant's ``run`` takes one: a variant
    without it makes dispatch refuse ``out=`` for the whole op (its other variants' ``out`` unused),
    and one with it, among variants without, is an ``out`` no dispatch call reaches."""
    variants = get_op(name).variants.values()
    taking = sorted(v.name for v in variants if run_takes_out(v))
    if taking and len(taking) != len(variants):
        lacking = sorted(v.name for v in variants if v.name not in taking)
        pytest.fail(f"{name}: variants {taking} take out=, variants {lacking} do not: seer.dispatch passes out= only "
                    "where every variant of the op takes it (seer/dispatch.py, _takes_out), and refuses it otherwise: "
                    "give every variant's run an out parameter, or none")


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
                if run_takes_out(variant):
                    out = poisoned(fresh)
                    assert_written_into(out, variant.run(problem, *operands, out=out), reference, problem, what)


@pytest.mark.parametrize("name", OP_NAMES)
def test_every_bound_call_matches_the_reference(name):
    """A variant with ``bind(problem) -> call`` is run by that call on every cached dispatch call
    (and on the first, but where the op's ``first_call`` computed the result), never by ``run``:
    each call must match the reference, made twice (a call is kept and reused, its scratch and
    counters with it), fresh and, where the op takes ``out=`` (which dispatch then hands the
    call), into an ``out`` poisoned with NaN."""
    op = get_op(name)
    bound, out_too = [v for v in op.variants.values() if v.bind is not None], takes_out(op)
    for i, inputs in enumerate(examples(name)):
        problem, operands = validated(name, inputs)
        reference = op.kernels.reference(problem, *operands)
        for variant in bound:
            what = f"{name} variant {variant.name}'s bound call (bind(problem)) on example {i}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SeerWarning)  # a documented fallback (TMA on unaligned rows)
                call = variant.bind(problem)
                assert callable(call), f"{what}: bind gave a {type(call).__name__}, not a call"
                fresh = call(*operands)
                assert_matches(fresh, reference, problem, what)
                if out_too:
                    out = poisoned(fresh)
                    assert_written_into(out, call(*operands, out=out), reference, problem, f"{what}, called again")
                else:
                    assert_matches(call(*operands), reference, problem, f"{what}, called again")


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
        known_on = getattr(op.features, "known_on", None)
        if known_on is not None:  # a GPU's model decides on these off a GPU: the same names, finite
            gpu = {"name": "A GPU", "capability": [9, 0], "sm_count": 132}
            on_gpu = known_on(problem, gpu)
            assert on_gpu is None or set(on_gpu) == set(known), f"{name} example {i}: known_on gives {sorted(on_gpu)}"
            assert on_gpu is None or all(math.isfinite(v) for v in on_gpu.values()), f"{name} example {i}: {on_gpu}"


@pytest.mark.parametrize("name", OP_NAMES)
def test_dispatch_follows_the_hand_rule_and_forced_variants(name):
    """No model is measured on the CPU: dispatch says so and takes the hand rule's choice; its first
    call (SpMV's: the validating pass's product) and the next (the cached decision's bound call)
    match the reference, and so does a variant forced by name (one the hand rule did not choose).
    Where the op takes ``out=``, the first call and a cached one also write into an ``out`` poisoned
    with NaN and return it, as does the forced variant's cached call."""
    op = get_op(name)
    out_too = takes_out(op)
    for i, inputs in enumerate(examples(name)):
        problem, operands = validated(name, inputs)
        reference = op.kernels.reference(problem, *operands)
        seer.clear_cache()  # dispatch warns once until cleared
        with pytest.warns(SeerWarning, match="hand rule"):
            first = seer.dispatch(name, inputs)
        assert_matches(first, reference, problem, f"{name} first dispatch, example {i}")
        assert_matches(seer.dispatch(name, inputs), reference, problem, f"{name} second dispatch, example {i}")
        chosen = seer.explain(name, inputs).variant
        assert chosen == op.features.hand_rule(op.features.known(problem)), f"{name} example {i}: chose {chosen}"
        if out_too:
            out = poisoned(first)
            assert_written_into(out, seer.dispatch(name, inputs, out=out), reference, problem,
                                f"{name} cached dispatch, example {i}")
            seer.clear_cache()
            out = poisoned(first)
            with pytest.warns(SeerWarning, match="hand rule"):
                result = seer.dispatch(name, inputs, out=out)
            assert_written_into(out, result, reference, problem, f"{name} first dispatch, example {i}")
        forced = next((v for v in op.variants if v != chosen), chosen)
        assert_matches(seer.dispatch(name, inputs, variant=forced), reference, problem,
                       f"{name} dispatch forced to {forced}, example {i}")
        if out_too:
            out = poisoned(first)
            assert_written_into(out, seer.dispatch(name, inputs, variant=forced, out=out), reference, problem,
                                f"{name} cached dispatch forced to {forced}, example {i}")


def dispatched(what: str, name: str, inputs, **kwargs):
    """``seer.dispatch(name, inputs, **kwargs)``; a refusal fails as ``what`` (the decision cached
    for another input, say, refusing this one's operands)."""
    try:
        return seer.dispatch(name, inputs, **kwargs)
    except SeerError as error:
        pytest.fail(f"{what}: dispatch refused it: {type(error).__name__}: {error}")


def _first_floating(source, where: str = "source") -> tuple[str, torch.Tensor] | None:
    """``(where it is, tensor)``: the first floating tensor reachable from an op's ``source`` (a
    sparse tensor's values, a sequence's items in turn), to write in place; None if none."""
    if isinstance(source, torch.Tensor):
        if source.layout == torch.sparse_coo:
            return f"{where}._values()", source._values()  # values() refuses an uncoalesced one
        if source.layout != torch.strided:
            return f"{where}.values()", source.values()
        return (where, source) if source.is_floating_point() else None
    if isinstance(source, (tuple, list)):
        for position, item in enumerate(source):
            found = _first_floating(item, f"{where}[{position}]")
            if found is not None:
                return found
    return None


@pytest.mark.parametrize("name", OP_NAMES)
def test_dispatch_keys_examples_apart_and_follows_writes(name):
    """The cache keeps one decision per input: the examples have different keys, and dispatched in
    turn without clearing the cache, first and then again from the cache, each matches its own
    reference. Then one example's source is written in place (its first floating tensor, scaled by
    -1.5; a sparse matrix's values) and dispatched again, unforced and forced to each variant, all
    decided before the write: each must match the new reference. A decision that kept a copy of the
    old data (a plan's: SpMV's diagonal-major copy of the values) would serve the old result where
    neither the key's state nor the bound call saw the write."""
    op = get_op(name)
    kernels, made = op.kernels, examples(name)
    keys = [kernels.cache_key(kernels.split(inputs)[0]) for inputs in made]
    for (i, key), (j, other) in itertools.combinations(enumerate(keys), 2):
        if key is not None and key == other:
            pytest.fail(f"{name}: examples {i} and {j} have one cache key {key!r}: the decision cached for one would "
                        "serve the other")
    checked = [validated(name, inputs) for inputs in made]
    references = [kernels.reference(problem, *operands) for problem, operands in checked]
    seer.clear_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        for when in ("first", "cached"):
            for i, inputs in enumerate(made):
                what = f"{name} {when} dispatch of example {i}, the examples dispatched in turn (the cache not cleared)"
                assert_matches(dispatched(what, name, inputs), references[i], checked[i][0], what)
        first = next(((i, found) for i, inputs in enumerate(made)
                      if (found := _first_floating(kernels.split(inputs)[0])) is not None), None)
        if first is None:
            return  # no floating data in any source: no write to miss
        i, (where, written) = first
        inputs, (problem, _) = made[i], checked[i]
        for variant in op.variants:
            what = f"{name} dispatch forced to {variant}, example {i}"
            assert_matches(dispatched(what, name, inputs, variant=variant), references[i], problem, what)
        with torch.no_grad():
            written.mul_(-1.5)
        problem, operands = validated(name, inputs)
        reference = kernels.reference(problem, *operands)
        for variant in (None, *op.variants):
            what = (f"{name} {'dispatch' if variant is None else f'dispatch forced to {variant}'}, example {i} after "
                    f"its {where} was written in place (scaled by -1.5; its decision cached before)")
            assert_matches(dispatched(what, name, inputs, variant=variant), reference, problem, what)


@contextlib.contextmanager
def _altered(tensor: torch.Tensor, how: str):
    """``tensor`` as a negated view (a new tensor over its memory), or itself made to require grad
    in place (as it was again on leaving: a cached key of the same object must tell); None where it
    cannot be so (a sparse tensor has no negated view; an integer one or a non-leaf cannot be set
    to require grad)."""
    if how == "a negated view":
        yield torch._neg_view(tensor) if tensor.layout == torch.strided else None
    elif not (tensor.is_floating_point() and tensor.is_leaf) or tensor.requires_grad:
        yield None
    else:
        tensor.requires_grad_(True)
        try:
            yield tensor
        finally:
            tensor.requires_grad_(False)


def _assert_refused(name: str, inputs, how: str, what: str) -> None:
    """seer.dispatch refuses ``inputs`` with an InputError saying why (``how``)."""
    said = "negated view" if how == "a negated view" else "requires grad"
    try:
        seer.dispatch(name, inputs)
    except InputError as error:
        assert re.search(said, str(error)), f"{what}: refused, but not for {how} ({said!r}): {error}"
    else:
        pytest.fail(f"{what}: dispatch took it, where it must raise an InputError saying {said!r}")


@pytest.mark.parametrize("how", ["a negated view", "requiring grad"])
@pytest.mark.parametrize("name", OP_NAMES)
def test_operands_seer_cannot_honour_are_refused(name, how):
    """A negated view keeps its sign as a flag that kernels reading memory never see (the result
    would be negated wrong), and seer's kernels have no backward (gradients would stop silently):
    each op must refuse both with an InputError naming the input (seer.errors' check_not_negated and
    check_no_grad), which a new op's kernel module could forget: on a first call, and on a call
    whose unaltered inputs' decision is cached (its key the same, where the altered tensor is an
    operand or keyed by value; else its key's state must change, and the input be examined anew)."""
    for i, inputs in enumerate(examples(name)):
        for position, tensor in enumerate(inputs):
            if not isinstance(tensor, torch.Tensor):
                continue
            what = f"{name} example {i} with input {position} as {how}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SeerWarning)
                seer.clear_cache()
                with _altered(tensor, how) as altered:
                    if altered is None:
                        continue
                    _assert_refused(name, (*inputs[:position], altered, *inputs[position + 1:]), how,
                                    f"{what}, on its first call")
                seer.dispatch(name, inputs)  # unaltered: its decision cached
                with _altered(tensor, how) as altered:
                    _assert_refused(name, (*inputs[:position], altered, *inputs[position + 1:]), how,
                                    f"{what}, its unaltered inputs' decision cached")
