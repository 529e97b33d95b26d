"""The ops seer knows, and the contract their modules follow.

A new op is one kernel module (``kernels/<op>.py``; a family of ops may share one file and
name each op's namespace as ``"module:attribute"``), one feature module
(``features/<op>.py``) and one entry in ``OPS`` below; nothing else changes.

Kernel module contract
    ``VARIANTS``: ``dict[str, Variant]``, every launchable choice with its fixed parameters.
    ``VARIANTS``' keys are the variants' ``Variant.name`` (tables and models name them so).
    ``split(inputs, **op_kwargs) -> (source, operands)``: ``source`` is what the choice depends on
        (the sparse matrix, the GEMM shapes), ``operands`` what changes from call to call;
        ``op_kwargs`` are the keywords ``seer.dispatch`` passes on (``group=`` of the multi-GPU
        ops), checked against this signature.
    ``cache_key(source) -> (identity, state) or None``: cheap and hashable; together they change
        whenever ``source`` does. ``identity`` names the input (ids of its objects, or its shapes),
        ``state`` what may change in place (versions): a new state replaces the input's cached
        decision. None: not cached.
    ``KEYS_BY_VALUE`` (optional, default False): True where no key names an object by id, so a
        cached decision need not hold its source alive to keep such ids unique.
    ``problem(source) -> object``: validate ``source`` once (may be costly); the result is
        cached with the decision and handed to every variant. It has a ``device`` (where the op
        runs: dispatch takes the model measured on that GPU and launches there) and may have a
        ``dtype`` (checked against a model trained on one dtype; the tolerance profiling checks
        results with).
    ``check_operands(problem, operands)``: cheap per-call validation.
    ``share_refusal(refusal, op_kwargs)`` (optional): called by dispatch with a ``SeerError`` it is
        about to raise, where more is owed than raising (the multi-GPU ops tell every rank).
    ``first_call(source, operands, out) -> (problem, result or None)`` (optional): what
        ``problem`` returns, with the operands checked, and the result where the validating pass
        computed it too (SpMV on small matrices: one launch instead of two); dispatch uses it on
        the first call unless a variant is forced.
    ``reference(problem, *operands) -> Tensor``: float64 result, for tests and profiling.
    ``examples() -> list[tuple]`` (optional for multi-GPU ops, which need a world): small inputs as
        passed to ``seer.dispatch``, on the CPU, on which ``tests/test_contract.py`` checks every
        op against this contract and its reference; their values from :func:`example_values`.
    A variant runs as ``VARIANTS[name].run(problem, *operands) -> Tensor``. It may also have
        ``bind(problem) -> call``, ``call(*operands) -> Tensor``, checking the operands itself:
        dispatch then keeps the call with its cached decision, sparing every later call the
        lookups that ``run`` makes (a small SpMV's host time is most of its time). Dispatch makes
        the problem's GPU current around every call; it also re-keys each call on what the call
        assumes of its operands' arrays (addresses, dtypes), which the call itself does not check
        again.
    ``out=``: where every variant's ``run`` takes an ``out`` keyword (and its ``call`` too), the op
        takes ``seer.dispatch(..., out=)`` and each writes its result there and returns it;
        ``first_call`` gets it as its third argument. Where any variant does not, the op refuses
        ``out=``.

Feature module contract
    ``KNOWN`` and ``GATHERED``: tuples of :class:`seer.features_base.Feature`.
    ``known(problem) -> dict``: O(1) from metadata, no device synchronisation.
    ``gathered(problem) -> dict``: one cheap pass over the data (may synchronise).
    ``gathered_if_free(problem) -> dict | None``: the gathered features when ``problem()``'s
        validation already measured them (no device work), else None.
    ``hand_rule(features: dict) -> str``: the documented fallback choice, from the known
        features alone (dispatch does not gather for it).
    ``known_on(problem, device: dict) -> dict | None`` (optional, for ops whose known features
        depend on the GPU): ``known(problem)`` as the GPU of a model's provenance ``device``
        computes it (GEMM: its SM count in the wave features), None where ``device`` does not say
        enough. Off a GPU, dispatch decides on these with a model measured on a GPU, so that it gives
        that GPU's choice.
    ``redecides(features: dict) -> bool`` (optional, given the decision's features: the known
        ones, and the gathered ones where they were): whether dispatch decides again, for more
        calls, as calls on one input add up without a ``calls`` hint; absent, it never does.
    Two feature names mean something to seer: ``world_size`` marks a multi-GPU op (a model records
    the world sizes it was trained at, and dispatch prefers one trained at the caller's), and a
    name starting with ``dtype`` encodes the input's dtype (:func:`seer.features_base.reads_dtype`:
    a model that reads it serves every dtype; one without holds for its campaign's dtype alone).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Callable, Mapping

import torch

from seer.errors import InputError


def example_values(*shape: int, generator: torch.Generator) -> torch.Tensor:
    """float32 values for an op's ``examples()``: of either sign, 0.5 to 1.5 in magnitude, so that a
    term left out or an element left unwritten cannot match the reference by chance."""
    magnitude = torch.rand(shape, generator=generator) + 0.5
    return magnitude * (torch.randint(0, 2, shape, generator=generator) * 2 - 1)


@dataclass(frozen=True)
class Variant:
    """One launchable choice: a kernel plus the parameters it is always run with."""

    name: str
    run: Callable
    params: Mapping = field(default_factory=dict)
    doc: str = ""
    bind: Callable | None = None  # see the kernel module contract above


@dataclass(frozen=True)
class OpEntry:
    name: str
    kernels: str
    features: str
    summary: str
    profiled_by: str = ""  # the command whose table `seer train` fits this op's models on


_OVERLAP_PROFILE = "torchrun --nproc-per-node <world size> benchmarks/overlap.py"
OPS: dict[str, OpEntry] = {
    "spmv": OpEntry("spmv", "seer.kernels.spmv", "seer.features.spmv", "y = A x, A sparse CSR",
                    "seer profile spmv"),
    "gemm": OpEntry("gemm", "seer.kernels.gemm", "seer.features.gemm", "C = A B, dense bf16/fp16",
                    "python benchmarks/gemm_profile.py"),
    "all_gather_gemm": OpEntry("all_gather_gemm", "seer.kernels.overlap:all_gather_gemm", "seer.features.overlap",
                               "C = all_gather(A row shards) B, on every rank", _OVERLAP_PROFILE),
    "gemm_all_scatter": OpEntry("gemm_all_scatter", "seer.kernels.overlap:gemm_all_scatter", "seer.features.overlap",
                                "C = A B by column blocks, every rank ends with all of C", _OVERLAP_PROFILE),
    "gemm_reduce_scatter": OpEntry("gemm_reduce_scatter", "seer.kernels.overlap:gemm_reduce_scatter",
                                   "seer.features.overlap", "C = sum of rank partials A_r B_r, scattered by rows",
                                   _OVERLAP_PROFILE),
}


def how_to_profile(op: str) -> str:
    """The command that makes a profile table of ``op``, for messages that send a user to make one."""
    entry = OPS.get(op)
    if entry is None or not entry.profiled_by:
        return f"a profiling run of your own (seer registers no command for {op!r})"
    return f"`{entry.profiled_by}`"


@dataclass(frozen=True)
class Op:
    """An op with its modules imported."""

    entry: OpEntry
    kernels: ModuleType | SimpleNamespace
    features: ModuleType

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def variants(self) -> Mapping[str, Variant]:
        return self.kernels.VARIANTS

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in (*self.features.KNOWN, *self.features.GATHERED))


_loaded: dict[str, Op] = {}

# What every op's modules must have (``reference`` for profiling and the contract tests); the
# rest of the contract above is optional.
KERNEL_MODULE_NEEDS = ("VARIANTS", "split", "cache_key", "problem", "check_operands", "reference")
FEATURE_MODULE_NEEDS = ("KNOWN", "GATHERED", "known", "gathered", "gathered_if_free", "hand_rule")


def _load(where: str):
    """A module (``"pkg.mod"``), or an object in one (``"pkg.mod:name"``) when a module file
    serves several ops of one family."""
    module, _, attribute = where.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


def variant_names(name: str) -> list[str]:
    """The names of registered op ``name``'s variants, its kernel module imported but not checked
    against the contract: training checks a table's columns against them and needs nothing else."""
    return list(_load(OPS[name].kernels).VARIANTS)


def get_op(name: str) -> Op:
    """The op called ``name``, its kernel and feature modules imported on first use."""
    op = _loaded.get(name)
    if op is not None:
        return op
    entry = OPS.get(name)
    if entry is None:
        raise InputError(f"unknown op {name!r}; seer knows {sorted(OPS)}")
    op = Op(entry, _load(entry.kernels), _load(entry.features))
    for where, module, needs in ((entry.kernels, op.kernels, KERNEL_MODULE_NEEDS),
                                 (entry.features, op.features, FEATURE_MODULE_NEEDS)):
        missing = [attribute for attribute in needs if not hasattr(module, attribute)]
        if missing:  # said now, not as an AttributeError deep in a first call
            raise TypeError(f"op {name!r}: {where} lacks {', '.join(missing)} (see the module contracts in "
                            "seer/registry.py)")
    _loaded[name] = op
    return op
