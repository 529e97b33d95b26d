"""Symmetric heap: one buffer per rank, every tensor at the same offset in every rank's buffer.

A tensor taken from the heap has a twin at the same byte offset in each peer's heap, so a Triton
kernel reaches the twin by moving the pointer by the difference of the two heap bases
(:func:`seer.kernels.remote.translate`; the idea of Iris). :class:`SymmetricHeap` builds the heap
on PyTorch symmetric memory (one GPU per rank, processes started by torchrun with NCCL);
:class:`seer.simworld.SimHeap` offers the same interface (:class:`Heap`) on shared memory between
CPU processes, so the very same ops and kernels run on both.

Allocation is a bump pointer: every rank must allocate the same sizes in the same order (as ops
called collectively with the same shapes do), or the offsets of twins stop matching.
"""
from __future__ import annotations

import math
import operator
import os
from collections import OrderedDict

import torch

from seer.errors import InputError, SeerError

# NVLink multicast can take a shared host's GPUs out of service: keep it off everywhere, and before
# symmetric memory or NCCL first read their settings (hence at import, and again on every heap).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

ALIGNMENT = 256  # bytes; every heap tensor starts on this boundary (wide vector loads, TMA)
DEFAULT_HEAP_BYTES = 1 << 30  # per rank, unless SEER_HEAP_BYTES says otherwise
# A bounded wait gives up after this many polls of its flag: about half a minute on a GPU.
DEFAULT_MAX_SPINS = 1 << 25
MAX_CACHED_TWINS = 4096  # peer views kept for reuse (a few per op and shape)
# Plans of graphed call shapes kept (one per op, shape and weight: a model's layers each have theirs), each
# holding a CUDA graph and its memory.
DEFAULT_MAX_PLANS = 128
BARRIER_TIMEOUT_MS = 30_000  # as long as DEFAULT_MAX_SPINS polls, roughly
# Wait-error record: [timed-out waits, waiting rank, rank owning the flag, flag index].
WAIT_RECORD = 4
MAX_EPOCH = 2**31 - 2  # epochs (flag values) run 1, 2, ..., MAX_EPOCH, then 1 again: never 0 nor an int32 overflow


def disable_multicast() -> None:
    os.environ.update(MULTICAST_OFF)


disable_multicast()


class Heap:
    """What ops need from a symmetric heap, real or simulated.

    ``heap_bases`` is an int64 tensor (on the heap's device) of every rank's base address, as seen
    from this process. ``max_spins`` bounds every flag wait (a plan captured into a CUDA graph keeps
    the bound in force at its capture); a wait that gives up records itself in ``wait_errors``,
    later waits give up at once, and :meth:`raise_wait_errors` turns the record into a :class:`SeerError`.

    Ops call it after each run while ``check_waits`` is true (one device synchronisation); set it
    false to batch the check, e.g. around a timing loop or in a serving loop that must not stall
    the host, or while capturing a CUDA graph, and call :meth:`raise_wait_errors` later.

    ``max_plans`` bounds the plans of ops replayed from CUDA graphs kept in ``graphs``, least
    recently used dropped (with a warning): raise it where a model graphs more weights than that.
    """

    SIZE_HINT = "SymmetricHeap(size_bytes, group), or SEER_HEAP_BYTES"  # where a full heap's message points

    def __init__(self, local: torch.Tensor, heap_bases: torch.Tensor, rank: int, world_size: int,
                 group=None, *, max_spins: int = DEFAULT_MAX_SPINS):
        spins = _spins(max_spins)
        bases, given, rank = heap_bases.tolist(), rank, _rank(rank, world_size)
        if len(bases) != world_size or rank is None:
            raise SeerError(f"a heap of world size {world_size} needs a base per rank and a rank in "
                            f"[0, {world_size}), got {len(bases)} bases and rank {given!r}")
        misaligned = [r for r, base in enumerate(bases) if base % ALIGNMENT]
        if misaligned:
            raise SeerError(f"heap bases of ranks {misaligned} are not {ALIGNMENT}-byte aligned: {bases}")
        if bases[rank] != local.data_ptr():  # every translation takes a pointer's offset from this rank's base
            raise SeerError(f"heap_bases[{rank}] is {bases[rank]:#x}, but this rank's heap starts at {local.data_ptr():#x}: "
                            "each rank's base is the address, in this process, of that rank's heap")
        self._local = local  # this rank's heap as uint8
        self.heap_bases = heap_bases
        self.rank = rank
        self.world_size = world_size
        self.group = group  # the process group of the torch collectives (bulk_torch, references)
        self.max_spins = spins
        self.check_waits = True
        self.wait_errors = torch.zeros(WAIT_RECORD, dtype=torch.int32, device=local.device)
        self._used = 0
        self._scratch: dict[str, torch.Tensor] = {}
        self._twins: dict[tuple, torch.Tensor] = {}
        self._epoch = 0
        # Plans of ops replayed from CUDA graphs (kernels.overlap._plan), which hold the addresses of
        # scratch buffers: scratch_version moves whenever a scratch buffer is made, so they know when.
        self.graphs: OrderedDict = OrderedDict()
        self.max_plans = DEFAULT_MAX_PLANS
        self.scratch_version = 0
        # The (op, shapes, dtype, pattern) every rank was seen to call with (kernels.overlap._after_ranks_agree):
        # kept here, it goes with the heap, and a new heap is checked afresh.
        self.agreed_calls: set = set()

    @property
    def device(self) -> torch.device:
        return self._local.device

    @property
    def size_bytes(self) -> int:
        return self._local.numel()

    @property
    def free_bytes(self) -> int:
        return max(self.size_bytes - _align(self._used), 0)  # a size not a multiple of ALIGNMENT leaves a sliver

    def empty(self, shape, dtype: torch.dtype, *, what: str = "") -> torch.Tensor:
        """A new tensor in this rank's heap (its twins on the peers sit at the same offset); ``what``
        names it in the error where the heap is full."""
        shape, dtype = _sizes(shape), _dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        start = _align(self._used)
        if start + nbytes > self.size_bytes:
            held = f", or call free_all() (other tensors hold {start:,})" if start else ""
            raise InputError(
                f"symmetric heap full: {what or f'a {list(shape)} {dtype} tensor'} needs {nbytes:,} bytes, "
                f"{self.free_bytes:,} of {self.size_bytes:,} are left; make a larger heap "
                f"({self.SIZE_HINT}){held}")
        self._used = start + nbytes
        return self._local[start:start + nbytes].view(dtype).view(shape)

    def zeros(self, shape, dtype: torch.dtype) -> torch.Tensor:
        return self.empty(shape, dtype).zero_()

    def scratch(self, name: str, shape, dtype: torch.dtype, *, zero_new: bool = False) -> torch.Tensor:
        """A reusable heap buffer called ``name``, grown (re-allocated) when ``shape`` needs more room.

        ``zero_new`` zeroes the region's new bytes (flags: stale memory must not look signalled): all of
        it when it is newly allocated, its room past ``shape`` too, which a later call of a larger shape
        takes as it is; only the added bytes when it is extended in place, whose old flags hold past
        epochs (never a future one) and may still be polled by a peer finishing the previous call.
        """
        shape, dtype = _sizes(shape), _dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        region = self._scratch.get(name)
        fresh = region is None or region.numel() < nbytes
        if fresh:
            what = f"scratch buffer {name!r} ({list(shape)} {dtype})"
            old = region
            region = self._scratch[name] = self._grown(region, max(nbytes, 1), what)
            self.scratch_version += 1
            if zero_new:
                kept = old.numel() if old is not None and old.data_ptr() == region.data_ptr() else 0
                region[kept:].zero_()
        return region[:nbytes].view(dtype).view(shape)

    def _grown(self, region: torch.Tensor | None, nbytes: int, what: str) -> torch.Tensor:
        """A scratch region of at least ``nbytes`` in place of ``region``: extended where it is the
        heap's last allocation, else made anew at twice its size or more, so that calls of growing
        shapes use a small multiple of their largest need, not the sum of every size they passed
        through (``nbytes`` alone where twice would not fit). The same on every rank, as every
        allocation must be."""
        if region is not None:
            start = region.data_ptr() - self._local.data_ptr()
            if start + region.numel() == self._used and start + nbytes <= self.size_bytes:
                self._used = start + nbytes
                return self._local[start:start + nbytes]
            doubled = max(nbytes, 2 * region.numel())
            if _align(self._used) + doubled <= self.size_bytes:
                nbytes = doubled
        return self.empty((nbytes,), torch.uint8, what=what)

    def free_all(self) -> None:
        """Forget every allocation (collective: all ranks together). Earlier heap tensors become invalid."""
        self.barrier()
        self._used = 0
        self._scratch.clear()
        self.graphs.clear()
        self.scratch_version += 1

    def next_epoch(self) -> int:
        """A fresh flag value for the next op call (the same on every rank: ops are called in step)."""
        self._epoch = self.upcoming_epoch()
        return self._epoch

    def upcoming_epoch(self) -> int:
        """The value the next :meth:`next_epoch` returns."""
        return self._epoch % MAX_EPOCH + 1

    def peer_view(self, tensor: torch.Tensor, rank: int) -> torch.Tensor:
        """``tensor``'s twin in ``rank``'s heap, as a tensor of this device (copies to and from it cross the links)."""
        given, rank = rank, _rank(rank, self.world_size)  # an int: a numpy one or a 0-d tensor keys twins by value
        if rank is None:  # -1 would be the last rank's, by Python's indexing
            raise InputError(f"peer_view takes a rank in [0, {self.world_size}), got {given!r}")
        if not isinstance(tensor, torch.Tensor):
            raise InputError(f"peer_view takes a contiguous tensor allocated from this heap, got a {type(tensor).__name__}")
        offset = tensor.data_ptr() - self._local.data_ptr()
        key = (offset, tensor.shape, tensor.dtype, rank)
        twin = self._twins.get(key) if tensor.is_contiguous() else None
        if twin is None:  # cached: the slicing costs host time on every call, and a twin never moves
            nbytes = tensor.numel() * tensor.element_size()
            if not tensor.is_contiguous() or offset < 0 or offset + nbytes > self.size_bytes:
                raise InputError("peer_view takes a contiguous tensor allocated from this heap")
            if len(self._twins) >= MAX_CACHED_TWINS:
                self._twins.clear()
            twin = self._twins[key] = self._peer_bytes(rank)[offset:offset + nbytes].view(tensor.dtype).view(tensor.shape)
        return twin

    def raise_wait_errors(self, context: str = "") -> None:
        """Raise a :class:`SeerError` naming the rank and flag if a bounded wait gave up since the last check."""
        count, waiter, owner, flag = self.wait_errors.tolist()
        if not count:
            return
        self.wait_errors.zero_()
        where = f" ({context})" if context else ""
        raise SeerError(
            f"rank {waiter} gave up waiting on flag {flag} of rank {owner}{where} after {self.max_spins:,} "
            f"polls ({count} wait(s) timed out): rank {owner} never signalled it; it crashed, fell out of "
            f"step or ran another op or shape")

    def barrier(self) -> None:
        raise NotImplementedError

    def _peer_bytes(self, rank: int) -> torch.Tensor:
        raise NotImplementedError


class SymmetricHeap(Heap):
    """A symmetric heap on PyTorch symmetric memory: ``size_bytes`` on each rank of ``group``.

    Collective: every rank of ``group`` constructs it together, after
    ``torch.distributed.init_process_group("nccl")`` and ``torch.cuda.set_device``.
    """

    def __init__(self, size_bytes: int, group=None, *, max_spins: int = DEFAULT_MAX_SPINS):
        disable_multicast()
        import torch.distributed as dist
        from torch.distributed import _symmetric_memory as symm_mem

        if not dist.is_available() or not dist.is_initialized():
            raise InputError("SymmetricHeap needs torch.distributed: start with torchrun and call "
                             "torch.distributed.init_process_group('nccl') first")
        if not torch.cuda.is_available():
            raise InputError("SymmetricHeap needs CUDA GPUs; on the CPU use seer.simworld")
        size_bytes = _heap_bytes(size_bytes, "size_bytes")
        group = group if group is not None else dist.group.WORLD
        device = torch.device("cuda", torch.cuda.current_device())
        buffer = symm_mem.empty(size_bytes, dtype=torch.uint8, device=device)
        handle = symm_mem.rendezvous(buffer, group.group_name)
        rank, world_size = handle.rank, handle.world_size
        # The buffer may sit inside a larger symmetric allocation (PyTorch's memory pool); its
        # twins sit at the same offset only if every rank got the same one, so check that.
        offset = buffer.data_ptr() - handle.buffer_ptrs[rank]
        offsets = [None] * world_size
        dist.all_gather_object(offsets, offset, group=group)
        if len(set(offsets)) != 1:
            raise SeerError(f"symmetric buffers sit at different offsets on the ranks: {offsets}")
        bases = torch.tensor([ptr + offset for ptr in handle.buffer_ptrs], dtype=torch.int64, device=device)
        super().__init__(buffer, bases, rank, world_size, group, max_spins=max_spins)
        self._handle = handle
        self._offset = offset
        self._peers: dict[int, torch.Tensor] = {}

    def barrier(self) -> None:
        """Device-side barrier of all ranks, in stream order (no host synchronisation).

        Bounded like every wait: after ``BARRIER_TIMEOUT_MS`` PyTorch's barrier kernel prints the rank
        and channel that timed out and traps, which fails this process's CUDA work instead of hanging it.
        """
        self._handle.barrier(channel=0, timeout_ms=BARRIER_TIMEOUT_MS)

    def _peer_bytes(self, rank: int) -> torch.Tensor:
        heap = self._peers.get(rank)
        if heap is None:  # made once: get_buffer costs host time on every call
            heap = self._peers[rank] = self._handle.get_buffer(rank, (self.size_bytes,), torch.uint8, self._offset)
        return heap


# Keyed by the group itself, not its name: torch numbers groups afresh after destroy_process_group,
# so a new world's group takes the old one's name, and the old heap (its handle of the old group) with it.
_heaps: dict[object, SymmetricHeap] = {}


def heap_for_group(group=None, size_bytes: int | None = None) -> SymmetricHeap:
    """The :class:`SymmetricHeap` of ``group`` (default: the world), made on first use (collective).

    Its size is ``size_bytes``, else ``$SEER_HEAP_BYTES``, else 1 GiB per rank.
    """
    import torch.distributed as dist

    if size_bytes is not None:  # 0 was taken for "not given"
        size_bytes = _heap_bytes(size_bytes, "size_bytes")
    if not dist.is_available() or not dist.is_initialized():
        raise InputError("seer's multi-GPU ops need torch.distributed: start with torchrun and call "
                         "torch.distributed.init_process_group('nccl') first (or pass heap=)")
    group = group if group is not None else dist.group.WORLD
    heap = _heaps.get(group)
    if heap is None:
        heap = SymmetricHeap(default_heap_bytes() if size_bytes is None else size_bytes, group)
        _heaps[group] = heap
    elif size_bytes is not None and size_bytes != heap.size_bytes:
        raise InputError(f"the symmetric heap of this group exists already, of {heap.size_bytes:,} bytes a rank; "
                         f"asked for {size_bytes:,}: pass size_bytes on the first use only (or make a "
                         f"SymmetricHeap yourself and pass heap=)")
    return heap


def default_heap_bytes() -> int:
    text = os.environ.get("SEER_HEAP_BYTES", "")
    if not text:
        return DEFAULT_HEAP_BYTES
    try:
        size = float(text)
    except ValueError:
        raise InputError(f"SEER_HEAP_BYTES must be a number of bytes, got {text!r}") from None
    return _heap_bytes(size, "SEER_HEAP_BYTES", text)


def _heap_bytes(size, name: str, given=None) -> int:
    """``size`` as a positive whole number of bytes (a float such as 1e9 counts where it is whole)."""
    whole = _whole(size) if not isinstance(size, float) else (size if math.isfinite(size) and size.is_integer() else None)
    if whole is None or whole <= 0:
        raise InputError(f"{name} must be a positive whole number of bytes, got {size if given is None else given!r}")
    return int(whole)


def _spins(max_spins) -> int:
    """``max_spins`` as an int, or an InputError: 0 would give every flag wait up at once (consumers reading
    before the data lands), and None failed inside a kernel."""
    spins = _whole(max_spins)
    if spins is None or spins < 1:
        raise InputError(f"max_spins must be a whole number of at least 1, got {max_spins!r}")
    return spins


def _whole(value) -> int | None:
    """``value`` as an int where it is one (numpy's and 0-d tensors' too, as torch takes them), not a bool."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _sizes(shape) -> tuple[int, ...]:
    """``shape`` (or one size) as whole numbers, none negative: a negative size would move the bump
    pointer back over live tensors (and two of them multiply to a positive byte count)."""
    try:
        sizes = (operator.index(shape),) if not isinstance(shape, (tuple, list, torch.Size)) else \
            tuple(operator.index(s) for s in shape)
    except TypeError:
        raise InputError(f"a heap tensor's shape must be whole numbers, got {shape!r}") from None
    if any(s < 0 for s in sizes):
        raise InputError(f"a heap tensor's sizes must be non-negative, got {list(sizes)}")
    return sizes


def _dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype):
        raise InputError(f"a heap tensor's dtype must be a torch.dtype, got {dtype!r}")
    return dtype


def _rank(rank, world_size: int) -> int | None:
    """``rank`` as an int where it is one of ``world_size``'s ranks, else None."""
    whole = _whole(rank)
    return whole if whole is not None and 0 <= whole < world_size else None


def _align(offset: int) -> int:
    return -(-offset // ALIGNMENT) * ALIGNMENT
