"""Remote memory from Triton kernels: loads, stores, copies, atomics and flags on peers' heaps.

Every function takes ``from_rank`` (the rank running the code; the pointers are addresses in its
symmetric heap), ``to_rank`` (the rank whose memory is touched) and ``heap_bases`` (the heap's
int64 tensor of every rank's base address). A pointer into the local heap names the same element
on every rank, and :func:`translate` moves it into ``to_rank``'s heap. With ``to_rank ==
from_rank`` each function is its plain local counterpart, so one code path serves local and
remote data and a multi-GPU kernel reads like a single-GPU one::

    x = remote.load(x_ptr + offs, rank, peer, heap_bases, mask)
    remote.store(y_ptr + offs, x, rank, peer, heap_bases, mask)

Atomics take Triton's memory ordering (``sem``) and ``scope``; flags default to the ``"sys"``
scope that peers' GPUs need. :func:`wait` is bounded: after ``max_spins`` polls it records the
timeout in the heap's ``wait_errors`` and returns False, and ``Heap.raise_wait_errors`` turns the
record into a :class:`seer.errors.SeerError` on the host, so a peer that never signals cannot hang
the program. The same functions run on GPUs and, with :mod:`seer.simworld`, under the interpreter.
"""
from __future__ import annotations

import triton
import triton.language as tl

# Defaults of constexpr parameters are constexpr objects, not bare strings: triton 3.6 passes a bare
# default through unwrapped, and tl.atomic_* then fail to compile ("'str' object has no attribute 'type'").
ACQ_REL = tl.constexpr("acq_rel")
SYSTEM = tl.constexpr("sys")


@triton.jit
def translate(ptr, from_rank, to_rank, heap_bases):
    """``ptr`` (an address, or a block of them, in ``from_rank``'s heap) moved to the same offset in ``to_rank``'s."""
    from_base = tl.load(heap_bases + from_rank)
    to_base = tl.load(heap_bases + to_rank)
    # In bytes, so any element type works whatever the distance between the two heaps.
    byte_ptr = tl.cast(ptr, tl.pointer_type(tl.int8))
    return tl.cast(byte_ptr + (to_base - from_base), ptr.dtype)


@triton.jit
def load(ptr, from_rank, to_rank, heap_bases, mask=None, other=None):
    """``tl.load`` from ``to_rank``'s heap."""
    return tl.load(translate(ptr, from_rank, to_rank, heap_bases), mask=mask, other=other)


@triton.jit
def store(ptr, value, from_rank, to_rank, heap_bases, mask=None):
    """``tl.store`` into ``to_rank``'s heap."""
    tl.store(translate(ptr, from_rank, to_rank, heap_bases), value, mask=mask)


@triton.jit
def get(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None):
    """Copy ``to_rank``'s data at ``from_ptr`` into local memory at ``to_ptr`` (pull)."""
    tl.store(to_ptr, load(from_ptr, from_rank, to_rank, heap_bases, mask), mask=mask)


@triton.jit
def put(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None):
    """Copy local data at ``from_ptr`` into ``to_rank``'s heap at ``to_ptr`` (push)."""
    store(to_ptr, tl.load(from_ptr, mask=mask), from_rank, to_rank, heap_bases, mask)


@triton.jit
def atomic_add(ptr, value, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = ACQ_REL,
               scope: tl.constexpr = SYSTEM):
    """``tl.atomic_add`` on ``to_rank``'s heap; returns the old value."""
    return tl.atomic_add(translate(ptr, from_rank, to_rank, heap_bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_cas(ptr, compare, value, from_rank, to_rank, heap_bases, sem: tl.constexpr = ACQ_REL,
               scope: tl.constexpr = SYSTEM):
    """``tl.atomic_cas`` on ``to_rank``'s heap; returns the old value."""
    return tl.atomic_cas(translate(ptr, from_rank, to_rank, heap_bases), compare, value, sem=sem, scope=scope)


@triton.jit
def atomic_xchg(ptr, value, from_rank, to_rank, heap_bases, mask=None, sem: tl.constexpr = ACQ_REL,
                scope: tl.constexpr = SYSTEM):
    """``tl.atomic_xchg`` on ``to_rank``'s heap; returns the old value."""
    return tl.atomic_xchg(translate(ptr, from_rank, to_rank, heap_bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def signal(flag_ptr, value, from_rank, to_rank, heap_bases, scope: tl.constexpr = SYSTEM):
    """Set the int32 flag to ``value`` with release ordering: the program's earlier stores land first."""
    tl.debug_barrier()  # every thread of the program has issued its stores before the release
    tl.atomic_xchg(translate(flag_ptr, from_rank, to_rank, heap_bases), value, sem="release", scope=scope)


@triton.jit
def wait(flag_ptr, expected, from_rank, to_rank, heap_bases, errors_ptr, flag_index, max_spins,
         scope: tl.constexpr = SYSTEM):
    """Spin (acquire) until the int32 flag equals ``expected``; True once it does.

    After ``max_spins`` polls it gives up: the first timeout since the host's last check writes
    ``[count, from_rank, to_rank, flag_index]`` into ``errors_ptr`` (the heap's ``wait_errors``)
    and it returns False. Once a wait has given up (the count not 0), a wait gives up without
    spinning: the ranks are out of step, and a dead peer would cost each of a call's many waits
    its own ``max_spins`` (an hour on a large reduce-scatter).
    """
    ptr = translate(flag_ptr, from_rank, to_rank, heap_bases)
    seen = tl.atomic_cas(ptr, expected, expected, sem="acquire", scope=scope)
    spins = tl.where(tl.load(errors_ptr, volatile=True) == 0, 0, max_spins)
    while (seen != expected) & (spins < max_spins):
        seen = tl.atomic_cas(ptr, expected, expected, sem="acquire", scope=scope)
        spins += 1
    if seen != expected:
        if tl.atomic_add(errors_ptr, 1) == 0:
            tl.store(errors_ptr + 1, from_rank)
            tl.store(errors_ptr + 2, to_rank)
            tl.store(errors_ptr + 3, flag_index)
    tl.debug_barrier()  # the other threads read the guarded data only after the acquire
    return seen == expected
