"""``seer.dispatch``: choose a kernel variant for these inputs, run it, remember the choice.

The first call on an input validates it, reads its features, asks the op's model and runs the
chosen variant, which also warms the variant's per-input preprocessing. Stage 2 (all features)
decides at once when the validation pass measured the gathered features on its way (SpMV's
row statistics); otherwise stage 1 decides on known features, gathering first only where it
says gathering pays (inputs passed unchecked, e.g. ``as_csr(A, check=False)``). The decision
is cached, keyed by the input's identity and in-place version, so later calls on the same input
go straight to the launch.

Without a ``calls`` hint the first choice is made for one call. As calls on the input add up, it
is made again at each call count the model has other trees for (10, 100, 1,000 for SpMV), for
that many calls: the calls so far stand for the calls ahead, so a variant whose one-time
preparation only repays over many calls is bound once it is likely to. The choice changes only
to a variant the trees for every larger count choose too: the trees are trained per count, and a
variant that more calls would switch away from is not worth its preparation. Only where the op's
feature module says it may pay (``redecides``: SpMV from a million nonzeros), and never inside
CUDA graph capture (deciding may read the device back: the next call outside capture does). A
``calls`` hint larger than the count the cached choice was made for makes it again for the hint
(the validated input and its features reused) and fixes it there, and any other hint fixes the
cached choice as it is; the multi-GPU ops read a hint on a call shape's first call only (every rank
must switch patterns together).
"""
from __future__ import annotations

import contextlib
import importlib
import inspect
import numbers
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch

from seer.errors import InputError, ModelError, SeerError, warn_once
from seer.features_base import reads_dtype
from seer.launch import INTERPRETING, capturing, check_runnable, on_device, several_gpus
from seer.registry import Op, get_op, how_to_profile

DEFAULT_CACHE_SIZE = 128
SHIPPED_MODELS = Path(importlib.import_module("seer.models").__file__).parent


@dataclass
class Decision:
    """What dispatch chose for one input, and why."""

    op: str
    variant: str
    stage: str
    path: Sequence[str]  # the rules that led to the variant (worded when read)
    features: dict
    model: str
    run: Callable = field(repr=False)
    problem: object = field(repr=False)
    source: object = field(repr=False)  # held so the cached input's id cannot be reused
    call: Callable | None = field(default=None, repr=False)  # run bound to problem, operands checked: bind()
    calls: int = 1  # how many calls on the input the choice was made for
    served: int = field(default=1, repr=False)  # calls on the input so far, counted while recheck_at is set
    recheck_at: int | None = field(default=None, repr=False)  # the call at which dispatch decides again

    def __str__(self) -> str:
        lines = [f"{self.op}: {self.variant}  ({self.stage}; model: {self.model})"]
        lines += [f"  {step}" for step in self.path]
        from seer.model import feature_info  # here, not above: printing is rare, dispatch is not

        info = feature_info(self.op, self.features)
        shown = ", ".join(f"{name}={info[name].show(value)}" for name, value in self.features.items())
        lines.append(f"  features: {shown}")
        return "\n".join(lines)


class DecisionCache:
    """A thread-safe LRU map from input keys to decisions.

    A key is ``(op, (identity, state), model, variant)``, the middle pair the op's ``cache_key``:
    an input cached again in a new state (its arrays written in place) replaces its entries at the
    old state, under every model and variant, which no call could reach any more and which would
    keep the input's old plans alive meanwhile. The
    cache holds references to the cached inputs (so their ids stay unique while cached); its size
    bounds how many inputs it keeps alive. ``seer.clear_cache()`` releases them all.
    """

    def __init__(self, maxsize: int = DEFAULT_CACHE_SIZE):
        self.maxsize = maxsize
        self._entries: OrderedDict = OrderedDict()
        self._states: dict = {}  # (op, an input's identity) -> (its cached state, the keys cached at it)
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        self.generation = 0  # clears so far: a decision made across a clear is not cached

    def get(self, key):
        # acquire/try/finally, not `with`, on the path every cached call takes; hashing the key
        # may raise (an unhashable value a caller passed), which must not leave the lock held.
        self._lock.acquire()
        try:
            decision = self._entries.get(key)
            if decision is None:
                self.misses += 1
            else:
                self._entries.move_to_end(key)
                self.hits += 1
        finally:
            self._lock.release()
        return decision

    def peek(self, key) -> Decision | None:
        """The decision cached under ``key``, leaving the order and the counts as they were."""
        with self._lock:
            return self._entries.get(key)

    def put(self, key, decision: Decision, generation: int) -> None:
        """Cache ``decision`` unless the cache was cleared since ``generation`` (:attr:`generation`
        read before the decision was made): a call in flight across ``clear_cache()`` must not bring
        back what the clear released."""
        op, (identity, state), _, _ = key
        with self._lock:
            if generation != self.generation:
                return
            held = self._states.get((op, identity))
            if held is None or held[0] != state:
                for stale in held[1] if held else ():
                    del self._entries[stale]
                held = self._states[op, identity] = (state, set())
            held[1].add(key)
            self._entries[key] = decision
            self._entries.move_to_end(key)
            self._trim()

    def resize(self, maxsize: int) -> None:
        with self._lock:
            self.maxsize = maxsize
            self._trim()

    def _trim(self) -> None:
        while len(self._entries) > self.maxsize:
            key, _ = self._entries.popitem(last=False)
            op, (identity, _), _, _ = key
            keys = self._states[op, identity][1]
            keys.discard(key)
            if not keys:
                del self._states[op, identity]

    def replace(self, key, decision: Decision, fresh: Decision) -> None:
        """``fresh`` in place of ``decision`` where ``key`` still holds it (not cleared or evicted
        meanwhile)."""
        with self._lock:
            if self._entries.get(key) is decision:
                self._entries[key] = fresh

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._states.clear()
            self.hits = self.misses = 0
            self.generation += 1

    def __len__(self) -> int:
        return len(self._entries)


_cache = DecisionCache()


def clear_cache() -> None:
    """Forget every cached decision (releasing the inputs the cache kept alive) and every
    resolved model, so that new files in ``$SEER_MODELS`` are seen and the models' warnings repeat
    (the kernels' notices, such as a scipy input's, are given once a process). A call in flight
    meanwhile caches neither its decision nor its model."""
    global _models_generation
    with _models_lock:  # the models first: a call missing the cleared cache must not find an old model
        _models.clear()
        _models_generation += 1
    _cache.clear()
    _warned.clear()


def set_cache_size(maxsize: int) -> None:
    """Keep at most ``maxsize`` inputs' decisions (a whole number, 1 or more)."""
    _check_count(maxsize, "the cache size must be a whole number of inputs, 1 or more")
    _cache.resize(maxsize)


def cache_info() -> dict:
    """The decision cache: inputs held (``size``, of ``maxsize``), and calls that found their input's
    decision there (``hits``) or did not (``misses``)."""
    return {"size": len(_cache), "maxsize": _cache.maxsize, "hits": _cache.hits, "misses": _cache.misses}


def dispatch(op: str, inputs, *, out=None, calls: int | None = None, model=None, variant: str | None = None,
             **op_kwargs):
    """Run ``op`` on ``inputs`` with the variant seer's model picks for them.

    ``out`` receives the result (SpMV, GEMM), sparing an allocation per call: checked for shape,
    dtype and device, and refused where it overlaps an operand in memory. ``calls`` hints how many
    times (a whole number, 1 or more) the same input will be used (repeated calls reuse the cached
    decision; the hint tells stage 1 whether gathering more features will pay and fixes the
    choice: without it, the choice is made again as calls add up, see the README's "Choices follow
    the calls" or ``sys.modules["seer.dispatch"].__doc__`` (``seer.dispatch`` is this function); a
    hint of more calls than the cached choice was made for makes it again, for the hint, once).
    ``model`` is a path or a loaded model, overriding the shipped one; ``variant`` forces a
    variant by name. Extra keyword arguments go to the op (e.g. ``group=`` for multi-GPU ops).
    """
    entry = get_op(op)
    told = None  # a refusal already offered to the op's share_refusal
    try:
        if calls is not None:
            _check_calls(calls)
        if variant is not None and not isinstance(variant, str):
            raise InputError(f"variant must be a variant's name (a str) or None, got {type(variant).__name__}")
        if op_kwargs:
            _check_op_keywords(entry, op_kwargs, "seer.dispatch", ("out", "calls", "model", "variant"))
        source, operands = entry.kernels.split(inputs, **op_kwargs)
        if out is not None and not _takes_out(entry):
            raise InputError(f"{op} does not take out=: its result is allocated by the op")
        # Checked before anything runs: an uncacheable input's first call may write out.
        token = model if model is None else _model_token(model)
        # The cached path runs on every call after the first: keep it short (benchmarks/host_path.py).
        key = entry.kernels.cache_key(source)
        if key is None:
            _refuse_capture(cached=False)
        if key is not None:
            key = (op, key, token, variant)
            decision = _cache.get(key)
            if decision is not None:
                if calls is not None and variant is None and (calls > decision.calls or decision.recheck_at is not None):
                    decision = _hinted(entry, key, decision, operands, calls, model)
                elif decision.recheck_at is not None:
                    decision = _counted(entry, key, decision, operands, model)
                return decision.call(*operands) if out is None else decision.call(*operands, out=out)
            generation = _cache.generation
            making = _first_calls.claim(key)
            if making is None and _cache.peek(key) is not None:  # another thread's first call ended since the miss
                _first_calls.done(key)
                return dispatch(op, inputs, out=out, calls=calls, model=model, variant=variant, **op_kwargs)
            if making is not None:  # another thread is deciding for this input: its decision will be cached
                _refuse_capture()  # as a first call would, rather than wait with the capture open
                making.wait()
                return dispatch(op, inputs, out=out, calls=calls, model=model, variant=variant, **op_kwargs)
        try:
            with _on_device_of(operands):
                problem, result = _first_call(entry, source, operands, out, variant)
                decision = _bound(entry, _decide(entry, source, operands, calls=calls, model=model, variant=variant,
                                                 problem=problem))
                if calls is None and variant is None:
                    _schedule_recheck(entry, decision, model)
                if result is None:
                    result = decision.call(*operands) if out is None else decision.call(*operands, out=out)
            if key is not None:
                if getattr(entry.kernels, "KEYS_BY_VALUE", False):
                    decision.source = None  # no id in its key to keep unique: the caller's tensors are not held
                _cache.put(key, decision, generation)
        except SeerError as refusal:  # told before threads waiting for this input go on (to refuse and tell too)
            told = refusal
            _share_refusal(entry, refusal, op_kwargs)
            raise
        finally:
            if key is not None:
                _first_calls.done(key)
        return result
    except SeerError as refusal:
        if refusal is not told:
            _share_refusal(entry, refusal, op_kwargs)
        raise


def _share_refusal(entry: Op, refusal: SeerError, op_kwargs: dict) -> None:
    """A refusal raised on this rank: where its peers wait for it (a multi-GPU op's first call), they
    hear of it too, through the op's hook."""
    share = getattr(entry.kernels, "share_refusal", None)
    if share is not None:
        share(refusal, op_kwargs)


class FirstCalls:
    """The inputs whose first call a thread is making. Threads that miss the cache on one of them
    wait for that call's decision instead of making their own: each would validate, decide and
    prepare again, and on a large matrix N threads' preparations (a copy of the values, a sorted
    stack of column slices) held at once can exhaust the device's memory."""

    def __init__(self):
        self._lock = threading.Lock()
        self._making: dict = {}  # key -> (event set when its first call is over, the thread making it)

    def claim(self, key) -> threading.Event | None:
        """None if the calling thread is to make ``key``'s first call (it must call :meth:`done`),
        else the event the thread making it sets once that call is over (its decision cached, or
        not: failed, or made across a clear; a waiter that then misses makes its own). Raises if
        the calling thread is the one making it: it would wait on itself for ever."""
        with self._lock:
            making = self._making.get(key)
            if making is None:
                self._making[key] = (threading.Event(), threading.get_ident())
                return None
        event, maker = making
        if maker == threading.get_ident():
            raise InputError("seer.dispatch was called on an input during that input's own first call on this "
                             "thread (from a model or callback the first call runs); call it once before, or "
                             "pass another tensor")
        return event

    def done(self, key) -> None:
        with self._lock:
            making = self._making.pop(key, None)
        if making is not None:
            making[0].set()


_first_calls = FirstCalls()


def _check_calls(calls) -> None:
    _check_count(calls, "calls must be a whole number of calls, 1 or more (or None for no hint)")


def _check_count(value, rule: str) -> None:
    """InputError saying ``rule`` unless ``value`` is a whole number, at least one: a numpy integer
    counts, a bool does not, and neither does a float (NaN compares false with everything, so a
    bound checked against it never holds)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(f"{rule}; got {value!r}")


def _first_call(entry: Op, source, operands, out, variant):
    """``(problem, result or None)``: the op's ``first_call`` where it has one (validating and, on
    small inputs, computing the result in the same pass) and no variant was forced, else
    ``(None, None)``, and :func:`_decide` validates."""
    first_call = getattr(entry.kernels, "first_call", None)
    if first_call is None or variant is not None:
        return None, None
    _refuse_capture()
    # It may run a kernel: one at a time under the interpreter (see _serialised).
    return (_serialised(first_call) if INTERPRETING else first_call)(source, operands, out)


def _refuse_capture(cached: bool = True) -> None:
    """Validation and feature gathering read the device back, which capture forbids: refused on an
    input's first call (``cached``), and on every call of an input whose decision is never cached."""
    if not capturing():
        return
    if cached:
        raise InputError("the first seer.dispatch call on this input is inside CUDA graph capture; call it once "
                         "before capturing so that the choice and the kernel's preprocessing are cached")
    raise InputError("seer.dispatch does not cache its decision on this input (the warning on its first call says "
                     "why; an input seer cannot take is refused outside capture), so every call examines it, reading "
                     "the device back, which CUDA graph capture forbids; capture an input seer caches (e.g. a torch "
                     "sparse CSR tensor, or contiguous arrays)")


def _schedule_recheck(entry: Op, decision: Decision, model) -> None:
    """Where the op says deciding again may pay, the call at which to do it: the model's next call
    count whose trees differ from those the choice was made with."""
    redecides = getattr(entry.features, "redecides", None)
    if redecides is None or not redecides(decision.features):
        return
    selector, _ = resolve_model(entry, _device_of(decision.problem), model, decision.features.get("world_size"))
    if selector is not None:
        decision.recheck_at = selector.next_count(decision.calls)


class _DecidingAgain:
    """The one lock under which inputs are decided again (a hint, or a recheck as calls add up),
    refusing the thread that holds it: deciding runs model code, and a model that called
    ``seer.dispatch`` into another re-decision would wait on its own thread for ever."""

    def __init__(self):
        self._lock = threading.Lock()
        self._holder: int | None = None

    def __enter__(self):
        if self._holder == threading.get_ident():  # only this thread could have stored its own id
            raise InputError("seer.dispatch was called while this thread decides an input again (from a model "
                             "or callback the decision runs); call it outside the model")
        self._lock.acquire()
        self._holder = threading.get_ident()

    def __exit__(self, *exc) -> None:
        self._holder = None
        self._lock.release()


_recheck_lock = _DecidingAgain()

# Deciding again changes only to a variant the trees for every larger count choose too (NOTES SpMV
# 46). False: the first rule, the tree for the calls reached alone. Which of the two loses less
# moves with the variants the tables hold (SpMV 65), so benchmarks/spmv_unhinted.py times both.
_REQUIRE_AGREEMENT = True


def _counted(entry: Op, key, decision: Decision, operands, model) -> Decision:
    """The decision for one more call on an input decided without a ``calls`` hint: the cached one
    until its ``recheck_at``-th call; then, where the trees for that many calls and for every
    larger count agree on another variant, a new decision bound to it (its preparation paid once)
    and cached; either way the next recheck scheduled."""
    decision.served += 1  # unlocked: a count lost to a race delays the recheck by a call
    recheck_at = decision.recheck_at  # read once: another thread may clear it meanwhile
    if recheck_at is None or decision.served < recheck_at or capturing():
        return decision
    with _recheck_lock:
        if decision.recheck_at is None:  # another thread replaced it meanwhile
            return _cache.get(key) or decision
        if decision.served < decision.recheck_at:
            return decision
        entry.kernels.check_operands(decision.problem, operands)  # a refused call decides nothing
        selector, _ = resolve_model(entry, _device_of(decision.problem), model, decision.features.get("world_size"))
        if selector is None:  # the model became unusable since (its file rewritten or gone): keep serving
            decision.recheck_at = None
            return decision
        later = selector.next_count(decision.recheck_at)  # the same whether the choice changes or not
        with _on_device_of(operands):
            try:
                fresh = _settled_choice(entry, decision, operands, model, selector.call_counts)
            except Exception as error:  # e.g. out of memory gathering: the bound variant serves on
                _warn_once(f"{entry.name}: deciding again at call {decision.served:,} failed ({type(error).__name__}: "
                           f"{error}); keeping {decision.variant}")
                fresh = None
            if fresh is not None and fresh.variant == decision.variant:
                _restated(decision, fresh, f"decided again at call {decision.served:,}")
            if fresh is None or fresh.variant == decision.variant:
                decision.recheck_at = later
                return decision
            fresh.recheck_at = later
            if not _replaced(entry, key, decision, fresh, f"decided again at call {decision.served:,}"):
                decision.recheck_at = later
                return decision
        decision.recheck_at = None
    return fresh


def _replaced(entry: Op, key, decision: Decision, fresh: Decision, why: str) -> bool:
    """Whether ``fresh``, the choice made again (``why``), was bound (its preparation paid once); it is
    cached in place of ``decision`` where the cache still holds that (not cleared or evicted meanwhile).
    Where its preparation fails (e.g. out of device memory) the bound variant keeps serving, with a
    warning."""
    fresh.stage += f", {why}"
    try:
        _bound(entry, fresh)
    except Exception as error:
        _warn_once(f"{entry.name}: {why}, seer chose {fresh.variant}, whose preparation failed "
                   f"({type(error).__name__}: {error}); keeping {decision.variant}")
        return False
    fresh.served = decision.served
    _cache.replace(key, decision, fresh)
    return True


def _restated(decision: Decision, fresh: Decision, why: str) -> None:
    """``decision`` explained as ``fresh``, the choice made again (``why``) that kept its variant: the
    rules, features and call count that chose it now, for :func:`cached_decision` to show."""
    decision.stage, decision.path, decision.features = f"{fresh.stage}, {why}", fresh.path, fresh.features
    decision.calls = fresh.calls


def _hinted(entry: Op, key, decision: Decision, operands, calls: int, model) -> Decision:
    """The decision for an input cached for fewer calls than ``calls`` now hints: made again for the
    hint (on the validated problem and the features at hand), bound if its variant changed, and
    cached with the hint's count; a hint fixes the choice, so no later recheck (a hint of no more
    calls than the cached choice was made for keeps it, fixed). Not on the multi-GPU
    ops: a rank deciding again alone (a hint on one rank) would switch patterns without its peers."""
    if capturing() or "world_size" in decision.features:  # capture: deciding may read the device back
        return decision
    if calls <= decision.calls:  # the first call had no hint: no more calls than it was made for, so kept, fixed
        with _recheck_lock:  # not while a recheck reads recheck_at
            decision.recheck_at = None
        return decision
    with _recheck_lock, _on_device_of(operands):
        if decision.calls >= calls:  # another thread decided for the hint meanwhile
            return _cache.get(key) or decision
        entry.kernels.check_operands(decision.problem, operands)  # a refused call decides nothing
        fresh = _decide(entry, decision.source, operands, calls=calls, model=model, variant=None,
                        problem=decision.problem, gathered=_gathered(entry, decision.features))
        if fresh.variant == decision.variant:
            _restated(decision, fresh, f"decided again for calls={calls:,}")
            decision.recheck_at = None
            return decision
        fresh.recheck_at = None
        replaced = _replaced(entry, key, decision, fresh, f"decided again for calls={calls:,}")
        # Replaced or not (then still held by threads mid-call): made for the hint, no recheck to run.
        decision.calls, decision.recheck_at = calls, None
    return fresh if replaced else decision


def _settled_choice(entry: Op, decision: Decision, operands, model, counts: list[int]) -> Decision | None:
    """The decision for ``decision.recheck_at`` calls if the trees for every larger count of
    ``counts`` choose its variant too (or, without ``_REQUIRE_AGREEMENT``, whatever they choose),
    else None (None too where ``counts`` has none so large); on the features at hand (gathered at most once)."""
    gathered, choices = _gathered(entry, decision.features), []
    counts = [c for c in counts if c >= decision.recheck_at]
    if not counts:  # the model was trained again, without trees for this many calls
        return None
    for calls in counts:
        choices.append(_decide(entry, decision.source, operands, calls=calls, model=model, variant=None,
                               problem=decision.problem, gathered=gathered))
        gathered = gathered or _gathered(entry, choices[-1].features)
        if not _REQUIRE_AGREEMENT:
            break
    return choices[0] if all(c.variant == choices[0].variant for c in choices) else None


def _gathered(entry: Op, features: dict) -> dict | None:
    """The gathered features among ``features`` (a decision's), or None unless all are there."""
    names = [f.name for f in entry.features.GATHERED]
    return {name: features[name] for name in names} if names and all(n in features for n in names) else None


def _bound(entry: Op, decision: Decision) -> Decision:
    """``decision`` with its ``call``: the variant's own ``bind`` if it has one, else a check of
    the operands then ``run``. On the CPU the call holds the interpreter lock."""
    variant = entry.variants[decision.variant]
    device = _device_of(decision.problem)
    if variant.bind is not None:
        # A plan may launch kernels (preprocessing): one at a time under the interpreter.
        call = (_serialised(variant.bind) if device.type == "cpu" else variant.bind)(decision.problem)
    else:
        check, run, problem = entry.kernels.check_operands, decision.run, decision.problem

        def call(*operands, **out):
            check(problem, operands)
            return run(problem, *operands, **out)
    if device.type == "cpu":
        call = _serialised(call)
    elif several_gpus():
        call = _on_device(call, device.index)
    decision.call = call
    return decision


_takes_out_by_op: dict[str, bool] = {}


def _takes_out(entry: Op) -> bool:
    """Whether every variant of ``entry`` writes into an ``out=`` tensor (checked once per op)."""
    takes = _takes_out_by_op.get(entry.name)
    if takes is None:
        takes = all("out" in inspect.signature(v.run).parameters for v in entry.variants.values())
        _takes_out_by_op[entry.name] = takes
    return takes


_op_keywords: dict[str, frozenset | None] = {}


def _check_op_keywords(entry: Op, op_kwargs: dict, caller: str, own: tuple[str, ...]) -> None:
    """InputError naming the keywords neither ``caller`` (its ``own``) nor the op's ``split`` takes:
    a misspelt one would otherwise surface as a TypeError from inside seer."""
    accepted = _split_keywords(entry)
    unknown = [] if accepted is None else sorted(set(op_kwargs) - accepted)
    if unknown:
        takes = ", ".join(f"{name}=" for name in (*own, *sorted(accepted)))
        raise InputError(f"{caller}({entry.name!r}, ...) got unknown keyword argument(s) {unknown}; it takes {takes}")


def _split_keywords(entry: Op) -> frozenset | None:
    """The keywords ``entry``'s ``split`` takes after its inputs (None: any; read once per op)."""
    if entry.name not in _op_keywords:
        parameters = list(inspect.signature(entry.kernels.split).parameters.values())[1:]  # [0]: the inputs
        any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
        named = frozenset(p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        _op_keywords[entry.name] = None if any_keyword else named
    return _op_keywords[entry.name]


def explain(op: str, inputs, *, calls: int | None = None, model=None, **op_kwargs) -> Decision:
    """The decision :func:`dispatch` would make for ``inputs``, with the rule path behind it.

    No variant is run and nothing is cached (a new input's validation runs, which for SpMV is a
    launch over the matrix). ``str(decision)`` reads as a short explanation.
    """
    entry = get_op(op)
    if calls is not None:
        _check_calls(calls)
    if op_kwargs:
        _check_op_keywords(entry, op_kwargs, "seer.explain", ("calls", "model"))
    source, operands = entry.kernels.split(inputs, **op_kwargs)
    # Gathering features may launch a pass. Nothing runs that gradients would flow through, so an
    # operand that requires grad (a weight) is explained as under no_grad, where dispatch takes it.
    with _on_device_of(operands), torch.no_grad():
        return _decide(entry, source, operands, calls=calls, model=model, variant=None, will_run=False)


def cached_decision(op: str, inputs, *, model=None, variant: str | None = None, **op_kwargs) -> Decision | None:
    """The decision :func:`dispatch` holds for ``inputs`` (with these ``model`` and ``variant``), which
    its next call runs, or None if it holds none. It may differ from :func:`explain`'s, which decides
    afresh: a choice made again as calls added up, or for a larger ``calls`` hint, says so in its
    ``stage``. Nothing is run, decided or moved in the cache."""
    entry = get_op(op)
    if op_kwargs:
        _check_op_keywords(entry, op_kwargs, "seer.cached_decision", ("model", "variant"))
    if variant is not None:  # else a misspelt one would read as "no decision held"
        _check_variant(entry, variant)
    source, _ = entry.kernels.split(inputs, **op_kwargs)
    key = entry.kernels.cache_key(source)
    if key is None:  # an input dispatch examines on every call (a scipy matrix, strided values)
        return None
    return _cache.peek((op, key, model if model is None else _model_token(model), variant))


def _decide(entry: Op, source, operands, *, calls, model, variant, will_run=True, problem=None,
            gathered: dict | None = None) -> Decision:
    """The decision for ``source``; ``problem``, if given, is ``source`` already validated by the
    op's ``first_call``, which checked the operands too; ``gathered``: the gathered features, if
    an earlier decision on ``problem`` has them."""
    if problem is None:
        if will_run:
            _refuse_capture()
        problem = entry.kernels.problem(source)
        entry.kernels.check_operands(problem, operands)
    device = _device_of(problem)
    if will_run:
        check_runnable(device)
    known = entry.features.known(problem)
    if variant is not None:
        _check_variant(entry, variant)
        return _decision(entry, variant, "forced", [f"variant={variant!r} was asked for"], known, "none", problem, source)
    selector, description = resolve_model(entry, device, model, known.get("world_size"))
    if selector is None:
        name = entry.features.hand_rule(known)
        path = [f"hand rule ({entry.features.hand_rule.__doc__ or 'documented fallback'}".rstrip() + ")"]
        return _decision(entry, name, "hand rule", path, known, description, problem, source)
    if device.type != "cuda" and selector.device.get("name") != device.type:  # a GPU's model, off a GPU
        known = _known_on_models_gpu(entry, problem, known, selector, description)
    _check_sizes_trained(selector, description, known, problem)
    if not reads_dtype(known):
        _check_dtype_trained(selector, description, problem)
    free = gathered or entry.features.gathered_if_free(problem)
    features = {**known, **(free or {})}

    def gather():
        extra = entry.features.gathered(problem)
        features.update(extra)
        return extra

    choice = selector.choose(known, gather, calls=calls or 1, free=free)
    stage = "stage 2 (features gathered)" if choice.gathered else "stage 1 (known features)"
    decision = _decision(entry, choice.variant, stage, choice.path, features, description, problem, source)
    decision.calls = calls or 1
    return decision


def _known_on_models_gpu(entry: Op, problem, known: dict, selector, description: str) -> dict:
    """Off a GPU, the known features as the model's GPU computes them, where they depend on the GPU
    (GEMM's waves of its SMs): a GPU's model consulted here (to see its choices, the one reason to)
    then gives that GPU's choice, not one for the interpreter's few SMs. A warning where the model
    does not record what they need."""
    known_on = getattr(entry.features, "known_on", None)
    if known_on is None:
        return known
    on_gpu = known_on(problem, selector.device)
    if on_gpu is None:
        _warn_once(f"{description} does not record its GPU's SM count (train it again on its table to add it): "
                   f"its {entry.name} choices here read this device's wave features, not its GPU's")
        return known
    return on_gpu


def _check_variant(entry: Op, variant) -> None:
    if not isinstance(variant, str) or variant not in entry.variants:
        raise InputError(f"{entry.name} has no variant {variant!r}; choose from {sorted(entry.variants)}")


def _check_sizes_trained(selector, description: str, known: dict, problem) -> None:
    """A warning where a multi-GPU op's input lies outside the world sizes or element sizes its model's
    trees were trained on: a feature profiled at one value alone is never split on, so the trees
    cannot tell it matters."""
    sizes = selector.training.get("world_sizes")
    if sizes and known.get("world_size") not in sizes:
        _warn_once(f"{description} was trained at world sizes {sizes}, running at {known.get('world_size')}: "
                   f"its choices are extrapolated; profile at this size ({how_to_profile(selector.op)}) and train")
    sizes = selector.training.get("element_sizes")
    if sizes and known.get("dtype_bytes") not in sizes:
        _warn_once(f"{description} was trained on elements of {sizes} bytes, this input is {problem.dtype} "
                   f"({known.get('dtype_bytes')} bytes): its choices are extrapolated (where it matters, time the "
                   "patterns on this dtype and pass the fastest as variant=)")


def _check_dtype_trained(selector, description: str, problem) -> None:
    """A warning where the trees were trained on timings in another dtype than ``problem``'s and do
    not read the dtype as a feature (SpMV: a campaign profiles one dtype; models from before the
    field was recorded were all profiled in float32)."""
    dtype = getattr(problem, "dtype", None)
    trained = selector.training.get("dtype", "float32")
    if isinstance(dtype, torch.dtype) and str(dtype).removeprefix("torch.") != trained:
        _warn_once(f"{description} was trained on {trained} timings, this input is {dtype}: its choices may not be "
                   f"the fastest; profile it in that dtype with {how_to_profile(selector.op)} and train")


def _decision(entry, variant, stage, path, features, model, problem, source) -> Decision:
    return Decision(entry.name, variant, stage, path, features, model, entry.variants[variant].run, problem, source)


# The Triton interpreter patches triton.language globally while a kernel runs, so two threads
# interpreting at once break each other; on the CPU, seer runs one kernel at a time.
_interpreter_lock = threading.Lock()


def _serialised(run: Callable) -> Callable:
    def locked(*args, **kwargs):
        with _interpreter_lock:
            return run(*args, **kwargs)

    return locked


# ------------------------------------------------------------------------------ models
# Resolved models, least recently used first: bounded, since a caller passing a new model object
# per call would otherwise keep every one alive.
_models: OrderedDict = OrderedDict()
_MODELS_HELD = 32
_models_lock = threading.Lock()
_models_generation = 0  # clears so far: a model resolved across a clear is not kept
_warned: set = set()


def resolve_model(entry: Op, device: torch.device, model=None, world_size: int | None = None):
    """(model or None, description) for ``entry`` on ``device`` (multi-GPU ops: at ``world_size``).

    Order: an explicit ``model``; else the models in ``$SEER_MODELS`` then the shipped ones,
    taking one measured on this very GPU, else one measured on a GPU of the same compute
    capability (with a warning); for a multi-GPU op, first among those trained at this world size,
    then any (its choices extrapolated, with a warning). A found model that is unusable (corrupted,
    another op, variants this install lacks) is skipped with a warning; an explicit one that is,
    or no model for this GPU, falls back to the op's hand rule with a warning.
    """
    token, state = (entry.name, device, _model_token(model), world_size), _file_state(model)
    with _models_lock:
        held = _models.get(token)
        if held is not None and held[0] == state:
            _models.move_to_end(token)
            return held[1]
        generation = _models_generation
    resolved = _resolve(entry, device, model, world_size)
    with _models_lock:
        if generation != _models_generation:  # cleared meanwhile: $SEER_MODELS may name others now
            return resolved
        _models[token] = state, resolved  # a file's earlier state replaced, not kept beside it
        _models.move_to_end(token)
        while len(_models) > _MODELS_HELD:
            _models.popitem(last=False)
    return resolved


def _file_state(model) -> tuple[int, ...] | None:
    """A model file's identity and (modification time, size), kept with its resolved model: a file
    written since it was read (a model retrained in place, which ``SelectorModel.save`` replaces
    whole, a file missing then) is read again by the next decision. None for a model object or a
    missing file."""
    if not isinstance(model, (str, os.PathLike)):
        return None
    try:
        stat = os.stat(model)
    except (OSError, ValueError):  # missing, unreadable, or a path no file can have: load says which
        return None
    return stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size


def _trained_at(selector, world_size: int | None) -> bool:
    """Whether ``selector`` was trained at ``world_size`` (always, for a single-GPU op or model)."""
    sizes = selector.training.get("world_sizes")
    return world_size is None or not sizes or world_size in sizes


def _resolve(entry: Op, device, model, world_size):
    from seer.model import SelectorModel

    name, capability = device_identity(device)
    if model is not None:
        described = _described(model)
        try:
            if isinstance(model, SelectorModel):
                model.check_for(entry.name)  # what load checks of a file
                selector = model
            else:
                selector = SelectorModel.load(model, op=entry.name)
        except ModelError as error:
            return _fallback(entry, f"model {described} is unusable: {error}", in_description=True)
        # Off a GPU no choice is faster than another: a GPU's model there shows that GPU's choices
        # (what the CPU fallback's warning invites), which is nothing to warn of.
        if selector.device.get("name") != name and (device.type == "cuda" or not selector.device.get("name")):
            measured = repr(selector.device["name"]) if selector.device.get("name") else "an unnamed device"
            _warn_once(f"model for {entry.name} was measured on {measured}, running on {name!r}: its choices may "
                       "not be the fastest here")
        return _checked(entry, selector, described)
    candidates = []
    for path in model_files(entry.name):
        try:
            candidates.append((path, SelectorModel.load(path, op=entry.name)))
        except ModelError as error:
            _warn_once(f"skipping model {path}: {error}")
    usable = []
    for path, selector in candidates:
        missing = _missing_variants(entry, selector)
        if missing:  # one for another seer: the next candidate may serve
            _warn_once(f"skipping model {path}: it names variants this install lacks: {missing}")
        else:
            usable.append((path, selector))
    for sized in (True, False):
        fitting = [(path, selector) for path, selector in usable if not sized or _trained_at(selector, world_size)]
        here = [(path, selector) for path, selector in fitting if selector.device.get("name") == name]
        if here:
            if sized:  # past it, a model of another world size serves anyway
                _warn_of_twins(entry, name, [path for path, _ in here])
            return here[0][1], found_model_name(here[0][0])
        for path, selector in fitting:
            if capability is not None and tuple(selector.device.get("capability") or ()) == capability:
                _warn_once(f"no {entry.name} model measured on {name!r}; using {found_model_name(path)} "
                           f"(measured on {selector.device.get('name')!r}, same compute capability)")
                return selector, found_model_name(path)
    shipped = sorted(str(path) for path in SHIPPED_MODELS.glob(f"{entry.name}-*.json"))
    if device.type != "cuda" and shipped:  # profiling needs a GPU: say what can be done here
        return _fallback(entry, f"no {entry.name} model measured on {name!r}: seer's models are measured on GPUs "
                                f"(to see a GPU's choices here, pass model= one of {shipped})")
    return _fallback(entry, f"no {entry.name} model measured on {name!r} (profile it with {how_to_profile(entry.name)}, "
                            "then `seer train` the table)")


def _warn_of_twins(entry: Op, device_name: str, paths: list[Path]) -> None:
    """Several models of one folder measured on this GPU (a campaign's model trained beside the
    device's, say): the first by name serves, which is not necessarily the one meant. A folder
    earlier in ``$SEER_MODELS`` overriding a later one is what that variable is for: not warned."""
    twins = [p for p in paths if p.parent == paths[0].parent]
    if len(twins) > 1:
        _warn_once(f"{len(twins)} {entry.name} models in {paths[0].parent} were measured on {device_name!r}: "
                   f"{[p.name for p in twins]}; using {paths[0].name}. Keep one there, or name the one to use with "
                   "model= or a folder of its own first in SEER_MODELS")


def found_model_name(path: Path) -> str:
    """A model found in the folders, as decisions name it: a shipped one by its file name, another
    by its path (the same name may be in several folders of $SEER_MODELS)."""
    return path.name if path.parent.resolve() == SHIPPED_MODELS.resolve() else str(path)


def _described(model) -> str:
    """A path as given; a model object in a few words (its repr runs to thousands of characters)."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    return f"<{model.op} model measured on {model.device.get('name')!r}>"


def _checked(entry: Op, selector, description: str):
    missing = _missing_variants(entry, selector)
    if missing:
        return _fallback(entry, f"model {description} names variants this install lacks: {missing}",
                         in_description=True)
    return selector, description


def _missing_variants(entry: Op, selector) -> list[str]:
    return sorted(set(selector.variants) - set(entry.variants))


def _fallback(entry: Op, reason: str, in_description: bool = False):
    """(None, description): the hand rule, with a warning (given once). ``in_description``: the reason
    is also the decision's description, so that every explain says why a model given did not serve
    (the warning is not repeated)."""
    _warn_once(f"{reason}; {entry.name} uses its hand rule")
    return None, f"hand rule, as {reason}" if in_description else "hand rule"


def listed_model_folders() -> list[Path]:
    """The folders ``$SEER_MODELS`` lists, in order (dispatch looks in them before the shipped folder)."""
    return [Path(p) for p in os.environ.get("SEER_MODELS", "").split(os.pathsep) if p]


def model_files(op: str) -> list[Path]:
    """``op``'s model files in the folders of ``$SEER_MODELS``, then in the shipped folder."""
    folders = listed_model_folders()
    for folder in folders:
        if not folder.is_dir():  # else its models would never serve, in silence
            what = "is a file (pass one model file with model=)" if folder.is_file() else "does not exist"
            _warn_once(f"SEER_MODELS lists {folder}, which {what}: it names folders of models, separated by "
                       f"{os.pathsep!r}; ignored")
        elif not os.access(folder, os.R_OK | os.X_OK):  # glob would find nothing there, in silence
            _warn_once(f"SEER_MODELS lists {folder}, which this process may not list (its permissions); ignored")
    folders.append(SHIPPED_MODELS)
    found = {}  # resolved -> as found: a folder listed twice (or the shipped one in $SEER_MODELS) counts once
    for path in (path for folder in folders if folder.is_dir() for path in sorted(folder.glob(f"{op}-*.json"))):
        found.setdefault(path.resolve(), path)
    return list(found.values())


def device_identity(device: torch.device) -> tuple[str, tuple | None]:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device), tuple(torch.cuda.get_device_capability(device))
    return device.type, None


def _model_token(model):
    """``model`` as part of a cache key: None, a path as text, or a loaded model held by identity."""
    if model is None or isinstance(model, str):
        return model
    if isinstance(model, os.PathLike) and isinstance(os.fspath(model), str):
        return os.fspath(model)
    from seer.model import SelectorModel  # here, not above: a path given on every cached call skips it

    if isinstance(model, SelectorModel):
        return _HeldModel(model)
    raise InputError(f"model must be a path (str or pathlib.Path) or a seer.model.SelectorModel, got "
                     f"{type(model).__name__} (load a file with seer.model.SelectorModel.load)")


class _HeldModel:
    """A loaded model in a key, compared by identity and held, so that its id cannot be reused by
    another model while a key names it (an id alone would let a new model inherit the decisions,
    or the hand rule, resolved for a freed one)."""

    __slots__ = ("model",)

    def __init__(self, model):
        self.model = model

    def __hash__(self) -> int:
        return id(self.model)

    def __eq__(self, other) -> bool:
        return isinstance(other, _HeldModel) and other.model is self.model


def _warn_once(message: str) -> None:
    warn_once(_warned, message)


# ------------------------------------------------------------------------------ devices
def _device_of(problem) -> torch.device:
    device = getattr(problem, "device", None)
    if device is None:  # taken for the CPU, a GPU's input would be decided by the CPU's hand rule
        raise TypeError(f"{type(problem).__name__}, an op's problem, has no device: the kernel module contract "
                        "(seer/registry.py) asks problem(source) for one")
    return torch.device(device)


def _on_device_of(operands):
    """A context in which the first CUDA operand's GPU is the current device (see
    :func:`seer.launch.on_device`)."""
    for operand in operands:
        if isinstance(operand, torch.Tensor) and operand.is_cuda:
            return on_device(operand.device)
    return contextlib.nullcontext()


def _on_device(call: Callable, index: int) -> Callable:
    """``call`` made with GPU ``index`` current (switching only when another one is)."""
    def on_its_device(*operands, **out):
        if torch._C._cuda_getDevice() == index:
            return call(*operands, **out)
        with torch.cuda.device(index):
            return call(*operands, **out)

    return on_its_device

