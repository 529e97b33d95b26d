"""GEMM with multi-GPU communication, overlapped in several patterns (after Iris), on a symmetric heap.

Three ops; every rank calls them together with the same shapes (W ranks, this one is rank r):

* ``all_gather_gemm``, inputs ``(a_shard [m, K], b [K, N])``: ``C = all_gather_rows(A) @ b``, ``[W m, N]``.
* ``gemm_all_scatter``, inputs ``(a [M, K], b_shard [K, n])``: rank r computes column block r of
  ``C = a @ [b_0 ... b_W-1]`` and sends it to every rank; each returns all of C, ``[M, W n]``.
* ``gemm_reduce_scatter``, inputs ``(a_part [M, k], b_part [k, N])`` (K split across ranks):
  ``C = sum_r a_part_r @ b_part_r``; rank r returns row block r, ``[M / W, N]``.

Patterns, one :class:`seer.registry.Variant` each:

* ``bulk_torch``: torch.matmul, then the torch collective (NCCL; gloo in the simulated world).
* ``bulk_triton``: a Triton GEMM, then a Triton kernel moving the data with remote loads/stores.
* ``fused_sequential``: communication inside the GEMM kernel, tile by tile: A tiles loaded from the
  peers' heaps (all-gather), or each C tile stored to its destinations in the epilogue.
* ``producer_consumer``: a GEMM kernel and a communication kernel on two streams, synchronised by
  per-tile flags; communication runs on ``comm_programs`` programs (SMs), the GEMM on the rest.
* ``workgroup_specialised``: one persistent kernel whose programs split into the two roles.
* ``pipelined_torch``: producer-consumer at chunk granularity with vendor parts: torch.matmul
  (cuBLAS) computes C (or gathers A) in row chunks while the copy engines move the previous chunk
  between the heaps on a side stream, so communication takes no SMs from the GEMM. All-scatter
  pulls each chunk straight into the column block of C it belongs to (2-D copies,
  :mod:`seer.copy_engine`); reduce-scatter adds the peers' partials in its own rows' GEMM epilogue
  (``addmm``) where it has several chunks.
* ``fused_torch`` (gemm_reduce_scatter): fused sequential with cuBLAS: torch.matmul writes each
  peer's partial straight into that peer's heap (the GEMM's stores cross the links), then its own
  rows' GEMM adds the partials it received.
* ``pipelined_graph`` (gemm_reduce_scatter): ``pipelined_torch`` in one chunk, replayed from a CUDA
  graph captured on first use per shape and weight (:class:`_GraphedCall`): small shapes are bound by
  the host's launches, and a replay is one. Off the GPU it runs the same steps eagerly.
* ``torch_fused`` (all_gather_gemm, GPU only): ``torch.ops.symm_mem.fused_all_gather_matmul``.

Every Triton pattern builds C tiles with the one tile loop of :mod:`seer.kernels.gemm`
(``matmul_tile``, ``tile_coords``) and moves data with :mod:`seer.kernels.remote`. Each op has a
single kernel whose low program ids take the producing role and the rest the consuming role; the
patterns differ in how they launch it. Producers take the low ids because the CPU interpreter runs
programs (and kernels) one after another: whatever is waited for must come first.

Per call, a Triton pattern stages its inputs in the heap, passes a barrier, works, passes a barrier
(nobody reuses a buffer a peer still reads) and checks the bounded flag waits. The all-scatter and
reduce-scatter torch patterns pass one barrier (at the start: the last call's readers are done) and
announce each finished chunk with a flag instead: a one-program kernel sets it in stream order, and
the stream that needs the chunk polls it across the link (bounded, like every wait); the all-gather
one passes one barrier too, staging its shard in two heap buffers by turns. ``pipelined_graph``
passes none: each rank announces that it has read the last call's partials, and a peer waits for
that just before pushing into them. Flags carry a per-call epoch, so they never need resetting.
Inside CUDA graph capture only the patterns without per-call host state run (:data:`CAPTURABLE`:
``bulk_torch``, ``bulk_triton``, ``fused_sequential``), on a call shape run once before, with
``heap.check_waits`` off; their graphs replay the heap's buffers, so they hold until ``free_all``.

Dispatch: ``seer.dispatch(op, inputs, heap=...)`` with a :class:`seer.symmetric_heap.Heap` (real
or simulated), or ``group=`` a NCCL process group whose heap is made on first use; neither means
the default process group. Each op has a registry entry, ``seer.kernels.overlap:<op>``.
"""
from __future__ import annotations

import contextlib
import functools
import types
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from seer.copy_engine import copy_rows
from seer.errors import InputError, RanksRefused, SeerError, check_no_grad, check_not_negated, warn, warn_once
from seer.kernels import remote
from seer.kernels.gemm import matmul_tile, tile_coords
from seer.launch import LaunchCache, capturing, specialisation, through_triton
from seer.registry import Variant
from seer.symmetric_heap import MAX_EPOCH, Heap, heap_for_group

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DEFAULT_COMM_PROGRAMS = 16
# Row chunks of pipelined_torch per row block. The all-gather GEMM already forms a pipeline over the
# ranks' row blocks (own block computed while the peers' move), so thinner chunks only make cuBLAS
# slower there; the all-scatter GEMM has nothing to hide its first transfer behind; reduce-scatter
# needs two chunks to add the peers' partials in its own rows' GEMM epilogue without waiting for
# them. Measured: benchmarks/results/overlap-chunks-h200x2.md.
DEFAULT_CHUNKS = {"ag": 1, "as": 4, "rs": 2}
# A chunk is worth its cost only above both minimums: thinner chunks make cuBLAS slower, and each
# chunk costs 60-90 us of host time (a GEMM, copies, flag kernels, stream switches; 0.18-0.39 ms per
# call on small shapes in benchmarks/results/overlap-costs-h200x2.md), which a chunk's GEMM must
# outlast (~100 GFLOP at ~800 TFLOP/s) or the host, not the GPU, sets the pace.
MIN_CHUNK_ROWS = 256
MIN_CHUNK_FLOP = 100e9
CPU_PROGRAMS = 4  # "SMs" of the simulated GPU: enough for both roles to stride over several tiles

# Where the all-gather GEMM reads A tiles from.
A_GATHERED = tl.constexpr(0)  # the local gathered copy, complete before the GEMM starts
A_PEER_HEAP = tl.constexpr(1)  # straight from the owning rank's heap (remote loads)
A_FLAGGED = tl.constexpr(2)  # the local gathered copy, waiting for each chunk's flag


# ================================================================ device code
@triton.jit
def _tile_offsets(pid_m, pid_n, rows, cols, stride_m, stride_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Element offsets and in-bounds mask of tile (pid_m, pid_n) of a rows x cols matrix."""
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    mask = (offs_m < rows)[:, None] & (offs_n < cols)[None, :]
    return offs_m[:, None] * stride_m + offs_n[None, :] * stride_n, mask


@triton.jit
def _block_tile(tile, rank, world_size, rows, cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                GROUP_M: tl.constexpr, FIRST: tl.constexpr):
    """Tile ``tile`` of W row blocks (rows x cols each), blocks visited from rank + FIRST on.

    Returns (the block's rank, pid_m, pid_n, the tile's index within its block).
    """
    per_block = tl.cdiv(rows, BLOCK_M) * tl.cdiv(cols, BLOCK_N)
    peer = (rank + FIRST + tile // per_block) % world_size
    within = tile % per_block
    pid_m, pid_n = tile_coords(within, rows, cols, BLOCK_M, BLOCK_N, GROUP_M)
    return peer, pid_m, pid_n, within


# ---------------------------------------------------------------- all_gather_gemm
@triton.jit
def _ag_copy(worker, workers, shard_ptr, gathered_ptr, flags_ptr, epoch, rank, world_size, heap_bases, m_loc, K,
             BLOCK_M: tl.constexpr, COPY_K: tl.constexpr, SIGNAL: tl.constexpr):
    """Pull every rank's A shard into the gathered A, BLOCK_M rows at a time, own shard first."""
    chunks = tl.cdiv(m_loc, BLOCK_M)
    for chunk in range(worker, world_size * chunks, workers):
        src = (rank + chunk // chunks) % world_size
        pid_m = chunk % chunks
        dst_ptr = gathered_ptr + src.to(tl.int64) * m_loc * K
        for k0 in range(0, K, COPY_K):
            offs, mask = _tile_offsets(pid_m, 0, m_loc, K - k0, K, 1, BLOCK_M, COPY_K)
            remote.get(shard_ptr + k0 + offs, dst_ptr + k0 + offs, rank, src, heap_bases, mask)
        if SIGNAL:
            remote.signal(flags_ptr + src * chunks + pid_m, epoch, rank, rank, heap_bases)


@triton.jit
def _ag_gemm(worker, workers, shard_ptr, gathered_ptr, b_ptr, c_ptr, flags_ptr, epoch, errors_ptr, max_spins,
             rank, world_size, heap_bases, m_loc, N, K, stride_bk, stride_bn, stride_cm, stride_cn,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
             A_FROM: tl.constexpr):
    """C tiles of gathered A @ B, shard by shard from this rank's own on."""
    per_shard = tl.cdiv(m_loc, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in range(worker, world_size * per_shard, workers):
        src, pid_m, pid_n, _ = _block_tile(tile, rank, world_size, m_loc, N, BLOCK_M, BLOCK_N, GROUP_M, 0)
        first_row = src.to(tl.int64) * m_loc
        if A_FROM == A_PEER_HEAP:
            a_ptr = remote.translate(shard_ptr, rank, src, heap_bases)
        else:
            a_ptr = gathered_ptr + first_row * K
        if A_FROM == A_FLAGGED:
            flag = src * tl.cdiv(m_loc, BLOCK_M) + pid_m
            remote.wait(flags_ptr + flag, epoch, rank, rank, heap_bases, errors_ptr, flag, max_spins)
        acc = matmul_tile(a_ptr, b_ptr, m_loc, N, K, K, 1, stride_bk, stride_bn, pid_m, pid_n, 0, K,
                          BLOCK_M, BLOCK_N, BLOCK_K)
        offs, mask = _tile_offsets(pid_m, pid_n, m_loc, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)
        tl.store(c_ptr + first_row * stride_cm + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _ag_kernel(shard_ptr, gathered_ptr, b_ptr, c_ptr, flags_ptr, epoch, errors_ptr, max_spins, rank, world_size,
               heap_bases, m_loc, N, K, stride_bk, stride_bn, stride_cm, stride_cn, producers,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
               COPY_K: tl.constexpr, SIGNAL: tl.constexpr, A_FROM: tl.constexpr):
    """Programs below ``producers`` gather A; the others compute C."""
    pid = tl.program_id(0)
    if pid < producers:
        _ag_copy(pid, producers, shard_ptr, gathered_ptr, flags_ptr, epoch, rank, world_size, heap_bases, m_loc, K,
                 BLOCK_M, COPY_K, SIGNAL)
    else:
        _ag_gemm(pid - producers, tl.num_programs(0) - producers, shard_ptr, gathered_ptr, b_ptr, c_ptr, flags_ptr,
                 epoch, errors_ptr, max_spins, rank, world_size, heap_bases, m_loc, N, K, stride_bk, stride_bn,
                 stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, A_FROM)


# ---------------------------------------------------------------- gemm_all_scatter
@triton.jit
def _as_gemm(worker, workers, a_ptr, b_ptr, c_ptr, flags_ptr, epoch, rank, world_size, heap_bases, M, N, K,
             stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
             PUSH: tl.constexpr, SIGNAL: tl.constexpr):
    """This rank's column block of C; PUSH stores each tile on every rank, else only here."""
    for tile in range(worker, tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N), workers):
        pid_m, pid_n = tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = matmul_tile(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n, 0, K,
                          BLOCK_M, BLOCK_N, BLOCK_K)
        value = acc.to(c_ptr.dtype.element_ty)
        offs, mask = _tile_offsets(pid_m, pid_n, M, N, stride_cm, 1, BLOCK_M, BLOCK_N)
        if PUSH:
            for step in range(world_size):
                remote.store(c_ptr + offs, value, rank, (rank + step) % world_size, heap_bases, mask)
        else:
            tl.store(c_ptr + offs, value, mask=mask)
        if SIGNAL:
            remote.signal(flags_ptr + tile, epoch, rank, rank, heap_bases)


@triton.jit
def _as_send(worker, workers, c_ptr, flags_ptr, epoch, errors_ptr, max_spins, rank, world_size, heap_bases, M, N,
             stride_cm, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr, WAIT: tl.constexpr):
    """Copy this rank's C tiles into every peer's C (waiting for each tile's flag when WAIT)."""
    for tile in range(worker, tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N), workers):
        if WAIT:
            remote.wait(flags_ptr + tile, epoch, rank, rank, heap_bases, errors_ptr, tile, max_spins)
        pid_m, pid_n = tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        offs, mask = _tile_offsets(pid_m, pid_n, M, N, stride_cm, 1, BLOCK_M, BLOCK_N)
        value = tl.load(c_ptr + offs, mask=mask)
        for step in range(1, world_size):
            remote.store(c_ptr + offs, value, rank, (rank + step) % world_size, heap_bases, mask)


@triton.jit
def _as_kernel(a_ptr, b_ptr, c_ptr, flags_ptr, epoch, errors_ptr, max_spins, rank, world_size, heap_bases, M, N, K,
               stride_am, stride_ak, stride_bk, stride_bn, stride_cm, producers,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
               PUSH: tl.constexpr, SIGNAL: tl.constexpr, WAIT: tl.constexpr):
    """Programs below ``producers`` compute C tiles; the others send them to the peers."""
    pid = tl.program_id(0)
    if pid < producers:
        _as_gemm(pid, producers, a_ptr, b_ptr, c_ptr, flags_ptr, epoch, rank, world_size, heap_bases, M, N, K,
                 stride_am, stride_ak, stride_bk, stride_bn, stride_cm, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
                 PUSH, SIGNAL)
    else:
        _as_send(pid - producers, tl.num_programs(0) - producers, c_ptr, flags_ptr, epoch, errors_ptr, max_spins,
                 rank, world_size, heap_bases, M, N, stride_cm, BLOCK_M, BLOCK_N, GROUP_M, WAIT)


# ---------------------------------------------------------------- gemm_reduce_scatter
# ``parts`` is [W, m_loc, N] in the heap. Kept here (PUSH false) block b is this rank's partial of
# rank b's rows, which rank b pulls; pushed (PUSH true) block b is rank b's partial of this rank's rows.
@triton.jit
def _rs_gemm(worker, workers, a_ptr, b_ptr, parts_ptr, flags_ptr, epoch, rank, world_size, heap_bases, m_loc, N, K,
             stride_am, stride_ak, stride_bk, stride_bn,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
             PUSH: tl.constexpr, SIGNAL: tl.constexpr):
    """This rank's partial products, row block by row block, the next rank's block first."""
    per_block = tl.cdiv(m_loc, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in range(worker, world_size * per_block, workers):
        owner, pid_m, pid_n, within = _block_tile(tile, rank, world_size, m_loc, N, BLOCK_M, BLOCK_N, GROUP_M, 1)
        acc = matmul_tile(a_ptr + owner.to(tl.int64) * m_loc * stride_am, b_ptr, m_loc, N, K, stride_am, stride_ak,
                          stride_bk, stride_bn, pid_m, pid_n, 0, K, BLOCK_M, BLOCK_N, BLOCK_K)
        value = acc.to(parts_ptr.dtype.element_ty)
        offs, mask = _tile_offsets(pid_m, pid_n, m_loc, N, N, 1, BLOCK_M, BLOCK_N)
        if PUSH:
            slot_ptr = parts_ptr + tl.cast(rank, tl.int64) * m_loc * N
            remote.store(slot_ptr + offs, value, rank, owner, heap_bases, mask)
        else:
            tl.store(parts_ptr + owner.to(tl.int64) * m_loc * N + offs, value, mask=mask)
            if SIGNAL:
                remote.signal(flags_ptr + owner * per_block + within, epoch, rank, rank, heap_bases)


@triton.jit
def _rs_reduce(worker, workers, parts_ptr, out_ptr, flags_ptr, epoch, errors_ptr, max_spins, rank, world_size,
               heap_bases, m_loc, N, stride_om, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
               FROM_PEERS: tl.constexpr, WAIT: tl.constexpr):
    """Sum the W partials of this rank's row block in fp32: pulled from the peers, or from local slots."""
    per_block = tl.cdiv(m_loc, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in range(worker, per_block, workers):
        pid_m, pid_n = tile_coords(tile, m_loc, N, BLOCK_M, BLOCK_N, GROUP_M)
        offs, mask = _tile_offsets(pid_m, pid_n, m_loc, N, N, 1, BLOCK_M, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for step in range(world_size):
            src = (rank + 1 + step) % world_size
            if FROM_PEERS:
                if WAIT:
                    flag = rank * per_block + tile
                    remote.wait(flags_ptr + flag, epoch, rank, src, heap_bases, errors_ptr, flag, max_spins)
                mine_ptr = parts_ptr + tl.cast(rank, tl.int64) * m_loc * N
                part = remote.load(mine_ptr + offs, rank, src, heap_bases, mask, 0.0)
            else:
                part = tl.load(parts_ptr + src.to(tl.int64) * m_loc * N + offs, mask=mask, other=0.0)
            acc += part.to(tl.float32)
        out_offs, _ = _tile_offsets(pid_m, pid_n, m_loc, N, stride_om, 1, BLOCK_M, BLOCK_N)
        tl.store(out_ptr + out_offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rs_kernel(a_ptr, b_ptr, parts_ptr, out_ptr, flags_ptr, epoch, errors_ptr, max_spins, rank, world_size,
               heap_bases, m_loc, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_om, producers,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
               PUSH: tl.constexpr, SIGNAL: tl.constexpr, FROM_PEERS: tl.constexpr, WAIT: tl.constexpr):
    """Programs below ``producers`` compute partial products; the others reduce this rank's rows."""
    pid = tl.program_id(0)
    if pid < producers:
        _rs_gemm(pid, producers, a_ptr, b_ptr, parts_ptr, flags_ptr, epoch, rank, world_size, heap_bases, m_loc, N, K,
                 stride_am, stride_ak, stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, PUSH, SIGNAL)
    else:
        _rs_reduce(pid - producers, tl.num_programs(0) - producers, parts_ptr, out_ptr, flags_ptr, epoch, errors_ptr,
                   max_spins, rank, world_size, heap_bases, m_loc, N, stride_om, BLOCK_M, BLOCK_N, GROUP_M,
                   FROM_PEERS, WAIT)


# ---------------------------------------------------------------- stream-ordered flags (the torch patterns)
# A call's epoch reaches these kernels as an int, or, in a CUDA graph (whose arguments are frozen at
# capture), as a one-element device counter that the graph advances at the start of every replay.
@triton.jit
def _epoch_value(epoch, EPOCH_IN_MEMORY: tl.constexpr):
    if EPOCH_IN_MEMORY:
        return tl.load(epoch)
    else:
        return epoch


@triton.jit
def _notify_kernel(flags_ptr, index, epoch, rank, heap_bases, EPOCH_IN_MEMORY: tl.constexpr):
    """Set this rank's flag ``index`` to the epoch (release): the stream's earlier work is done."""
    remote.signal(flags_ptr + index, _epoch_value(epoch, EPOCH_IN_MEMORY), rank, rank, heap_bases)


@triton.jit
def _await_kernel(flags_ptr, index, epoch, errors_ptr, max_spins, rank, owner, heap_bases,
                  EPOCH_IN_MEMORY: tl.constexpr):
    """Poll ``owner``'s flag ``index`` across the link until it reads the epoch (acquire), boundedly."""
    remote.wait(flags_ptr + index, _epoch_value(epoch, EPOCH_IN_MEMORY), rank, owner, heap_bases, errors_ptr, index,
                max_spins)


@triton.jit
def _advance_kernel(counter_ptr, max_epoch):
    """The next epoch, as Heap.next_epoch counts."""
    tl.store(counter_ptr, tl.load(counter_ptr) % max_epoch + 1)


_notify_launch = LaunchCache(_notify_kernel)
_await_launch = LaunchCache(_await_kernel)
_advance_launch = LaunchCache(_advance_kernel)


# ================================================================ problems
@dataclass(frozen=True)
class Tiles:
    """Tile shape of every pattern's GEMM and copies, and the launch settings of its kernels."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int
    copy_k: int  # columns an all-gather copy program moves per step
    num_warps: int
    num_stages: int


CPU_TILES = Tiles(16, 16, 16, 2, 16, 1, 1)  # tiny: the interpreter's cost grows with every element


def gpu_tiles(dtype: torch.dtype) -> Tiles:
    return Tiles(128, 128, 64 if dtype.itemsize <= 2 else 32, 8, 128, 8, 3)


@dataclass(frozen=True, eq=False)
class OverlapSpec:
    """What a choice depends on: the op, the local input shapes and dtype, and where the heap comes from."""

    op: str
    a_shape: tuple
    b_shape: tuple
    dtype: torch.dtype
    device: torch.device
    heap: Heap | None
    group: object | None


@dataclass(frozen=True, eq=False)
class OverlapProblem:
    """A validated call: the whole GEMM ``C[m, n] = A[m, k] B[k, n]`` and this rank's share of it."""

    op: str
    heap: Heap
    m: int
    n: int
    k: int
    a_shape: tuple
    b_shape: tuple
    dtype: torch.dtype
    device: torch.device
    tiles: Tiles
    programs: int  # programs a persistent kernel launches: the SMs of a GPU

    @property
    def rank(self) -> int:
        return self.heap.rank

    @property
    def world_size(self) -> int:
        return self.heap.world_size


# The input names of each op, for messages.
INPUTS = {
    "all_gather_gemm": ("a_shard", "b"),
    "gemm_all_scatter": ("a", "b_shard"),
    "gemm_reduce_scatter": ("a_part", "b_part"),
}
_OPS = tuple(INPUTS)  # numbered in the ranks' agreement


def split(op: str, inputs, *, heap: Heap | None = None, group=None):
    """``(a, b)`` -> ``(OverlapSpec, (a, b))``; ``heap`` or ``group`` says which ranks take part."""
    names = INPUTS[op]
    if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
        raise InputError(f"{op} takes inputs ({', '.join(names)}): two matrices")
    for name, tensor in zip(names, inputs):
        _check_dense(op, name, tensor)
        if tensor.dim() != 2:
            raise InputError(f"{op}: {name} must be a 2-D torch.Tensor, got {_describe(tensor)}")
    if heap is not None and not isinstance(heap, Heap):
        raise InputError(f"{op}: heap must be a seer.symmetric_heap.Heap, got {type(heap).__name__}")
    _check_group(op, group, heap)
    a, b = inputs
    return OverlapSpec(op, tuple(a.shape), tuple(b.shape), a.dtype, a.device, heap, group), (a, b)


def _check_dense(op: str, name: str, tensor) -> None:
    """``tensor`` is a dense (strided) torch.Tensor: the patterns copy the inputs into the heap and hand
    their pointers and strides to the kernels, which a sparse layout has not (a nested one has no shape)."""
    if not isinstance(tensor, torch.Tensor):
        raise InputError(f"{op}: {name} must be a 2-D torch.Tensor, got {type(tensor).__name__}")
    if tensor.is_nested:
        raise InputError(f"{op}: {name} is a nested tensor; {op} takes dense 2-D tensors")
    if tensor.layout != torch.strided:
        raise InputError(f"{op}: {name} is a {tensor.layout} tensor; {op} takes dense tensors ({name}.to_dense())")


def _check_group(op: str, group, heap: Heap | None) -> None:
    """``group`` is None (the world) or a torch.distributed process group, and says nothing a
    ``heap`` given too contradicts: anything else would be keyed, and run, as the world."""
    if group is None:
        return
    if not isinstance(group, torch.distributed.ProcessGroup):
        raise InputError(f"{op}: group must be a torch.distributed process group (or None for the world), got "
                         f"{type(group).__name__}; for a DeviceMesh pass mesh.get_group()")
    if heap is not None:
        raise InputError(f"{op}: pass heap= or group=, not both: the heap already names its ranks")


def cache_key(spec: OverlapSpec):
    # The group itself, the world's resolved: torch names groups afresh after destroy_process_group, so a
    # new world's group takes the old one's name, and a decision bound to the old heap would be found.
    where = id(spec.heap) if spec.heap is not None else ("group", spec.group if spec.group is not None else _world())
    return (spec.op, spec.a_shape, spec.b_shape, spec.dtype, str(spec.device), where), ()


def _world():
    """The default process group, None before torch.distributed is initialised."""
    return torch.distributed.group.WORLD if torch.distributed.is_available() else None


def _heap_of(spec: OverlapSpec) -> Heap:
    """The heap given, else the group's (made on its first use)."""
    return spec.heap if spec.heap is not None else heap_for_group(spec.group)


def problem(spec: OverlapSpec) -> OverlapProblem:
    heap = _heap_of(spec)
    if spec.dtype not in DTYPES:
        raise InputError(f"{spec.op} supports {[str(d) for d in DTYPES]}, got {spec.dtype}")
    if spec.device != heap.device:
        raise InputError(f"{spec.op}: inputs are on {spec.device} but the symmetric heap is on {heap.device}")
    m, n, k = _global_dims(spec.op, spec.a_shape, spec.b_shape, heap.world_size)
    if spec.device.type == "cuda":
        tiles, programs = gpu_tiles(spec.dtype), torch.cuda.get_device_properties(spec.device).multi_processor_count
    else:
        tiles, programs = CPU_TILES, CPU_PROGRAMS
    return OverlapProblem(spec.op, heap, m, n, k, spec.a_shape, spec.b_shape, spec.dtype, spec.device, tiles, programs)


def check_operands(p: OverlapProblem, operands) -> None:
    for name, tensor, shape in zip(INPUTS[p.op], operands, (p.a_shape, p.b_shape)):
        if tuple(tensor.shape) != shape or tensor.dtype != p.dtype or tensor.device != p.device:
            raise InputError(f"{p.op}: {name} is {_describe(tensor)}, expected {list(shape)} {p.dtype} on {p.device}")
    named = dict(zip(INPUTS[p.op], operands))
    check_not_negated(p.op, **named)
    check_no_grad(p.op, **named)


def share_refusal(op: str, refusal: SeerError, op_kwargs: dict) -> None:
    """seer.dispatch's hook for a call it refuses on this rank. On the op's first call on the heap,
    the rank joins the ranks' agreement flagged (:func:`_gather_agreement`), so that every rank raises
    naming each refusing rank's reason instead of its peers waiting there for it until the
    collective's timeout: a refusal of the inputs, a keyword, ``calls=``, ``variant=`` or ``model=``
    alike. Only then: once a call shape of the op has been agreed (on every rank at once), a peer may
    be running a cached shape, which starts no collective, and a refusing rank raises alone; so does
    one whose heap or group is itself what was refused, and one inside CUDA graph capture."""
    if isinstance(refusal, RanksRefused) or capturing():
        return
    heap = _heap_named(op, op_kwargs)
    if heap is None or heap.world_size == 1 or heap.group is None or any(key[0] == op for key in heap.agreed_calls):
        return
    _gather_agreement(heap, op, _NO_SHAPE, _NO_SHAPE, _REFUSED_ROW, str(refusal))  # raises


def _heap_named(op: str, op_kwargs: dict) -> Heap | None:
    """The heap a call's keywords name (``heap=``, else ``group=``'s or the world's, made on its first use
    as on the peers), or None where they name none for sure: a keyword ``split`` does not take may be a
    misspelt ``heap=``, whose peers wait on that heap, not the world's."""
    heap, group = op_kwargs.get("heap"), op_kwargs.get("group")
    if heap is not None:
        return heap if isinstance(heap, Heap) else None
    if set(op_kwargs) - {"heap", "group"}:
        return None
    try:
        _check_group(op, group, None)
        return heap_for_group(group)
    except Exception:  # noqa: BLE001 (the heap could not be had here: the refusal is raised alone, unchanged)
        return None


def reference(p: OverlapProblem, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """This rank's result in float64 on the CPU, from the whole A and B (collective: gathers the inputs)."""
    group = _group(p)
    if p.op == "all_gather_gemm":
        whole_a, whole_b = _all_gather(a, group).flatten(0, 1), b
    elif p.op == "gemm_all_scatter":
        whole_a, whole_b = a, _join_columns(_all_gather(b, group))
    else:
        whole_a, whole_b = _join_columns(_all_gather(a, group)), _all_gather(b, group).flatten(0, 1)
    c = whole_a.detach().double().cpu() @ whole_b.detach().double().cpu()
    if p.op == "gemm_reduce_scatter":
        return c.chunk(p.world_size)[p.rank]
    return c


def _global_dims(op: str, a_shape, b_shape, world_size: int) -> tuple[int, int, int]:
    (a_rows, a_cols), (b_rows, b_cols) = a_shape, b_shape
    names = INPUTS[op]
    if a_cols != b_rows:
        raise InputError(f"{op}: {names[0]} {list(a_shape)} and {names[1]} {list(b_shape)} do not chain "
                         f"(inner sizes differ)")
    if min(a_rows, a_cols, b_cols) == 0:
        raise InputError(f"{op}: empty input {list(a_shape)} x {list(b_shape)}")
    if op == "all_gather_gemm":
        return world_size * a_rows, b_cols, a_cols
    if op == "gemm_all_scatter":
        return a_rows, world_size * b_cols, a_cols
    if a_rows % world_size:
        raise InputError(f"{op}: the {a_rows} rows of C must split evenly over {world_size} ranks")
    return a_rows, b_cols, world_size * a_cols


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{list(value.shape)} {value.dtype} on {value.device}"
    return type(value).__name__


# ================================================================ host side of the patterns
def _group(p: OverlapProblem):
    if p.heap.group is None:
        raise InputError(f"{p.op}: this heap has no process group for torch collectives")
    return p.heap.group


def _all_gather(tensor: torch.Tensor, group) -> torch.Tensor:
    """[W, *shape]: every rank's ``tensor``."""
    import torch.distributed as dist

    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # renamed in torch 2.13
    world_size = dist.get_world_size(group)
    out = tensor.new_empty((world_size * tensor.shape[0], *tensor.shape[1:]))  # gloo wants the ranks stacked on dim 0
    gather(out, tensor.contiguous(), group=group)
    return out.view(world_size, *tensor.shape)


def _join_columns(blocks: torch.Tensor) -> torch.Tensor:
    """[W, rows, cols] -> [rows, W cols]."""
    return blocks.permute(1, 0, 2).reshape(blocks.shape[1], -1)


def _begin(p: OverlapProblem) -> int:
    """Every rank's inputs are staged and nobody still reads the last call's buffers; the call's epoch."""
    p.heap.barrier()
    return p.heap.next_epoch()


def _end(p: OverlapProblem, pattern: str) -> None:
    p.heap.barrier()
    _check_waits(p, pattern)


def _check_waits(p: OverlapProblem, pattern: str) -> None:
    if p.heap.check_waits:
        p.heap.raise_wait_errors(f"{p.op} {pattern}")


def _notify(p: OverlapProblem, flags: torch.Tensor, index: int, epoch) -> None:
    """In stream order: this rank's flag ``index`` becomes the epoch (an int, or the device counter of
    :func:`_advance`) once the stream's earlier work is done."""
    args = (flags, index, epoch, p.heap.rank, p.heap.heap_bases, isinstance(epoch, torch.Tensor))
    _notify_launch.launch(specialisation(*args), (1,), args, num_warps=1)


def _await(p: OverlapProblem, flags: torch.Tensor, index: int, epoch, owner: int) -> None:
    """In stream order: the stream goes on once rank ``owner`` has set its flag ``index`` to the epoch."""
    h = p.heap
    args = (flags, index, epoch, h.wait_errors, h.max_spins, h.rank, owner, h.heap_bases,
            isinstance(epoch, torch.Tensor))
    _await_launch.launch(specialisation(*args), (1,), args, num_warps=1)


def _advance(counter: torch.Tensor) -> torch.Tensor:
    """In stream order: the device epoch ``counter`` moves to the next call's value; returns it."""
    args = (counter, MAX_EPOCH)
    _advance_launch.launch(specialisation(*args), (1,), args, num_warps=1)
    return counter


def _plan(p: OverlapProblem, key: tuple, make):
    """The plan (CUDA graphs and the views around them) of call shape ``key``: ``make()``'s, kept on the heap
    (``heap.max_plans`` of them, least recently used dropped) and made again once the heap's scratch buffers
    have moved, since graphs replay the addresses they captured."""
    heap = p.heap
    entry = heap.graphs.get(key)
    if entry is None or entry[0] != heap.scratch_version:
        plan = make()
        entry = heap.graphs[key] = (heap.scratch_version, plan)  # after make(): it may allocate scratch
        if len(heap.graphs) > heap.max_plans:
            heap.graphs.popitem(last=False)
            warn_once(_warned, f"{p.op}: more call shapes and weights than heap.max_plans ({heap.max_plans}) were graphed "
                       f"on one heap, so the least recently used plan was dropped and is captured again when next "
                       f"called (on a GPU a capture instead of a replay; with more weights than that used in turns, on "
                       f"every call); raise heap.max_plans to keep them all (each holds a CUDA graph's memory)")
    else:
        heap.graphs.move_to_end(key)
    return entry[1]


_warned: set = set()  # the notices given (once a process each)


class _GraphedCall:
    """``body(a)`` for one call shape; on a GPU replayed from a CUDA graph captured when made.

    A replay costs the host one launch instead of one per kernel of ``body``, and small shapes are
    host-bound. The graph reads ``a`` from a staged copy that each call refreshes (callers' inputs move
    between calls); all else it touches is fixed at capture, so callers key plans by it. ``body`` takes
    its epoch from a device counter, so replays and eager runs speak one protocol, and capturing runs
    nothing: a rank may capture while its peers replay. Off the GPU, or if capture fails (with a
    warning), ``body`` runs eagerly.
    """

    def __init__(self, body, a: torch.Tensor):
        self._body, self._staged, self.graph = body, None, None
        if a.device.type == "cuda":
            self._staged = torch.empty(a.shape, dtype=a.dtype, device=a.device)  # any layout of a copies in
            self.graph = _capture(body, self._staged)

    def __call__(self, a: torch.Tensor) -> None:
        if self.graph is None:
            self._body(a)
            return
        self._staged.copy_(a)
        self.graph.replay()


def _capture(body, a: torch.Tensor):
    """A CUDA graph of ``body(a)``, or None with a warning if capturing fails."""
    graph = torch.cuda.CUDAGraph()
    stream = _capture_streams.get(a.device)
    if stream is None:
        stream = _capture_streams[a.device] = torch.cuda.Stream(a.device)
    try:
        # Not torch.cuda.graph, which collects garbage and empties the allocator's cache first. Relaxed:
        # a kernel's first launch may load its module while capturing.
        with torch.cuda.stream(stream):
            graph.capture_begin(capture_error_mode="relaxed")
            try:
                body(a)
            finally:
                graph.capture_end()
    except RuntimeError as exc:
        warn(f"CUDA graph capture failed ({exc}); this call shape runs eagerly")
        return None
    return graph


_capture_streams: dict = {}


def _flags(p: OverlapProblem, count: int) -> torch.Tensor:
    return p.heap.scratch(f"{p.op}.flags", (count,), torch.int32, zero_new=True)


def _roles(p: OverlapProblem, comm_programs: int, comm_units: int, gemm_units: int) -> tuple[int, int]:
    """(communication programs, GEMM programs), together at most the GPU's SMs, so all run at once."""
    comm = max(1, min(comm_programs, p.programs // 2, comm_units))
    return comm, max(1, min(p.programs - comm, gemm_units))


_side_streams: dict = {}
_handoff_events: dict = {}


def _pair(device: torch.device, producer, consumer, comm_is_producer: bool) -> None:
    """Launch ``producer`` then ``consumer``; on a GPU the communication one goes on a side stream.

    The interpreter runs them one after the other, which the producer-first order makes safe.
    """
    if device.type != "cuda":
        producer()
        consumer()
        return
    main, side = torch.cuda.current_stream(device), _side_stream(device)
    _handoff(main, side)
    for launch, is_comm in ((producer, comm_is_producer), (consumer, not comm_is_producer)):
        if is_comm:
            _on(side, main, launch)
        else:
            launch()
    _handoff(side, main)


def _side_stream(device: torch.device):
    side = _side_streams.get(device)
    if side is None:
        side = _side_streams[device] = torch.cuda.Stream(device)
    return side


def _handoff(earlier, later) -> None:
    """``later`` waits for the work queued on ``earlier`` so far.

    One reused event per pair of streams (a wait binds to the record before it, so re-recording is
    safe), not the fresh event per wait of ``Stream.wait_stream``: host time counts on small shapes.
    """
    event = _handoff_events.get((earlier, later))
    if event is None:
        event = _handoff_events[(earlier, later)] = torch.cuda.Event()
    event.record(earlier)
    later.wait_event(event)


def _pipeline(device: torch.device, steps, *, produce_on_side: bool) -> None:
    """Run ``(produce, consume)`` steps so step i is consumed while step i+1 is produced.

    The copies run on the side stream, the GEMMs on the current one; consume i waits only for
    produce i. ``None`` skips a role for a step. Off the GPU the steps run one after the other.
    """
    if device.type != "cuda":
        for produce, consume in steps:
            for work in (produce, consume):
                if work is not None:
                    work()
        return
    main, side = torch.cuda.current_stream(device), _side_stream(device)
    _handoff(main, side)
    producer, consumer = (side, main) if produce_on_side else (main, side)
    for produce, consume in steps:
        if produce is not None:
            _on(producer, main, produce)
        if consume is not None:
            _handoff(producer, consumer)
            _on(consumer, main, consume)
    _handoff(side, main)


def _on(stream, main, work) -> None:
    """``work()`` with ``stream`` current (set directly: the context manager costs more host time)."""
    if stream is main:
        work()
        return
    torch.cuda.set_stream(stream)
    try:
        work()
    finally:
        torch.cuda.set_stream(main)


def _row_chunks(rows: int, chunks: int, row_flop: int) -> list[slice]:
    """Up to ``chunks`` slices splitting ``rows`` rows (``row_flop`` GEMM flops each), none under
    MIN_CHUNK_ROWS or MIN_CHUNK_FLOP but the last."""
    count = max(1, min(chunks, rows // MIN_CHUNK_ROWS, int(rows * row_flop // MIN_CHUNK_FLOP)))
    step = _cdiv(rows, count)
    return [slice(start, min(start + step, rows)) for start in range(0, rows, step)]


def _row_block(rank: int, rows: int) -> slice:
    """The rows of ``rank``'s block when every rank owns ``rows`` consecutive rows."""
    return slice(rank * rows, (rank + 1) * rows)


def _peers(p: OverlapProblem) -> list[int]:
    """The other ranks, from the next one on (so the ranks' traffic spreads over the links)."""
    return [(p.rank + step) % p.world_size for step in range(1, p.world_size)]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------- all_gather_gemm
def _ag_launch(p, programs, producers, shard, gathered, b, c, flags, epoch, *, signal=False, a_from=A_GATHERED):
    t, h = p.tiles, p.heap
    through_triton(_ag_kernel, (programs,),
        shard, gathered, b, c, flags, epoch, h.wait_errors, h.max_spins, h.rank, h.world_size, h.heap_bases,
        shard.shape[0], p.n, p.k, b.stride(0), b.stride(1), c.stride(0), c.stride(1), producers,
        BLOCK_M=t.block_m, BLOCK_N=t.block_n, BLOCK_K=t.block_k, GROUP_M=t.group_m, COPY_K=t.copy_k,
        SIGNAL=signal, A_FROM=a_from.value, num_warps=t.num_warps, num_stages=t.num_stages)


def _ag_buffers(p, a_shard, staging: str = "a"):
    """(the shard staged in the heap for the peers to read, gathered A, C)."""
    shard = p.heap.scratch(f"all_gather_gemm.{staging}", a_shard.shape, p.dtype)
    shard.copy_(a_shard)
    return shard, a_shard.new_empty((p.m, p.k)), a_shard.new_empty((p.m, p.n))


def _ag_setup(p, a_shard):
    """(heap copy of the shard, gathered A, C, flags, units of copy work, GEMM tiles)."""
    shard, gathered, c = _ag_buffers(p, a_shard)
    chunks = p.world_size * _cdiv(shard.shape[0], p.tiles.block_m)
    tiles = chunks * _cdiv(p.n, p.tiles.block_n)
    return shard, gathered, c, _flags(p, chunks), chunks, tiles


def _ag_bulk_triton(p, a_shard, b):
    shard, gathered, c, flags, chunks, tiles = _ag_setup(p, a_shard)
    epoch = _begin(p)
    copiers = min(chunks, p.programs)
    _ag_launch(p, copiers, copiers, shard, gathered, b, c, flags, epoch)
    _ag_launch(p, min(tiles, p.programs), 0, shard, gathered, b, c, flags, epoch, a_from=A_GATHERED)
    _end(p, "bulk_triton")
    return c


def _ag_fused_sequential(p, a_shard, b):
    shard, gathered, c, flags, chunks, tiles = _ag_setup(p, a_shard)
    epoch = _begin(p)
    _ag_launch(p, min(tiles, p.programs), 0, shard, gathered, b, c, flags, epoch, a_from=A_PEER_HEAP)
    _end(p, "fused_sequential")
    return c


def _ag_producer_consumer(p, a_shard, b, *, comm_programs):
    shard, gathered, c, flags, chunks, tiles = _ag_setup(p, a_shard)
    copiers, computers = _roles(p, comm_programs, chunks, tiles)
    epoch = _begin(p)
    _pair(p.device,
          lambda: _ag_launch(p, copiers, copiers, shard, gathered, b, c, flags, epoch, signal=True),
          lambda: _ag_launch(p, computers, 0, shard, gathered, b, c, flags, epoch, a_from=A_FLAGGED),
          comm_is_producer=True)
    _end(p, "producer_consumer")
    return c


def _ag_workgroup_specialised(p, a_shard, b, *, comm_programs):
    shard, gathered, c, flags, chunks, tiles = _ag_setup(p, a_shard)
    copiers, computers = _roles(p, comm_programs, chunks, tiles)
    epoch = _begin(p)
    _ag_launch(p, copiers + computers, copiers, shard, gathered, b, c, flags, epoch, signal=True, a_from=A_FLAGGED)
    _end(p, "workgroup_specialised")
    return c


def _ag_pipelined_torch(p, a_shard, b, *, chunks):
    """Own shard's rows first; meanwhile the copy engines pull the peers' shards chunk by chunk.

    Calls stage their shard in two heap buffers by turns, so one barrier per call suffices: a rank
    restages a buffer two calls later, after a barrier its peers pass only once done pulling it.
    """
    shard, gathered, c = _ag_buffers(p, a_shard, staging=f"a{p.heap.upcoming_epoch() % 2}")
    m_loc = a_shard.shape[0]
    steps = [(None, functools.partial(torch.matmul, a_shard, b, out=c[_row_block(p.rank, m_loc)]))]
    for src in _peers(p):
        peer_shard, gathered_block, c_block = (p.heap.peer_view(shard, src), gathered[_row_block(src, m_loc)],
                                               c[_row_block(src, m_loc)])
        for rows in _row_chunks(m_loc, chunks, 2 * p.n * p.k):
            steps.append((functools.partial(gathered_block[rows].copy_, peer_shard[rows]),
                          functools.partial(torch.matmul, gathered_block[rows], b, out=c_block[rows])))
    _begin(p)  # every rank's shard is staged
    _pipeline(p.device, steps, produce_on_side=True)
    return c


def _ag_bulk_torch(p, a_shard, b):
    return torch.matmul(_all_gather(a_shard, _group(p)).flatten(0, 1), b)


def _ag_torch_fused(p, a_shard, b):
    if p.device.type != "cuda":
        raise InputError("torch_fused runs PyTorch's fused_all_gather_matmul, which needs CUDA symmetric memory")
    # return_A=True: without it PyTorch may take its NVLink-multicast path, which must stay off.
    _, (c,) = torch.ops.symm_mem.fused_all_gather_matmul(a_shard, [b], 0, _group(p).group_name, return_A=True)
    return c


# ---------------------------------------------------------------- gemm_all_scatter
def _as_launch(p, programs, producers, a, b, mine, flags, epoch, *, push=False, signal=False, wait=False):
    t, h = p.tiles, p.heap
    through_triton(_as_kernel, (programs,),
        a, b, mine, flags, epoch, h.wait_errors, h.max_spins, h.rank, h.world_size, h.heap_bases,
        p.m, mine.shape[1], p.k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), mine.stride(0), producers,
        BLOCK_M=t.block_m, BLOCK_N=t.block_n, BLOCK_K=t.block_k, GROUP_M=t.group_m,
        PUSH=push, SIGNAL=signal, WAIT=wait, num_warps=t.num_warps, num_stages=t.num_stages)


def _as_setup(p, b_shard):
    """(whole C in the heap, this rank's column block of it, flags, C tiles of the block)."""
    c = p.heap.scratch("gemm_all_scatter.c", (p.m, p.n), p.dtype)
    width = b_shard.shape[1]
    mine = c[:, p.rank * width:(p.rank + 1) * width]
    tiles = _cdiv(p.m, p.tiles.block_m) * _cdiv(width, p.tiles.block_n)
    return c, mine, _flags(p, tiles), tiles


def _as_finish(p, c, pattern):
    _end(p, pattern)
    return c.clone()  # the heap buffer is overwritten by the next call


def _as_bulk_triton(p, a, b_shard):
    c, mine, flags, tiles = _as_setup(p, b_shard)
    epoch = _begin(p)
    programs = min(tiles, p.programs)
    _as_launch(p, programs, programs, a, b_shard, mine, flags, epoch)
    _as_launch(p, programs, 0, a, b_shard, mine, flags, epoch)
    return _as_finish(p, c, "bulk_triton")


def _as_fused_sequential(p, a, b_shard):
    c, mine, flags, tiles = _as_setup(p, b_shard)
    epoch = _begin(p)
    programs = min(tiles, p.programs)
    _as_launch(p, programs, programs, a, b_shard, mine, flags, epoch, push=True)
    return _as_finish(p, c, "fused_sequential")


def _as_producer_consumer(p, a, b_shard, *, comm_programs):
    c, mine, flags, tiles = _as_setup(p, b_shard)
    senders, computers = _roles(p, comm_programs, tiles, tiles)
    epoch = _begin(p)
    _pair(p.device,
          lambda: _as_launch(p, computers, computers, a, b_shard, mine, flags, epoch, signal=True),
          lambda: _as_launch(p, senders, 0, a, b_shard, mine, flags, epoch, wait=True),
          comm_is_producer=False)
    return _as_finish(p, c, "producer_consumer")


def _as_workgroup_specialised(p, a, b_shard, *, comm_programs):
    c, mine, flags, tiles = _as_setup(p, b_shard)
    senders, computers = _roles(p, comm_programs, tiles, tiles)
    epoch = _begin(p)
    _as_launch(p, computers + senders, computers, a, b_shard, mine, flags, epoch, signal=True, wait=True)
    return _as_finish(p, c, "workgroup_specialised")


def _as_pipelined_torch(p, a, b_shard, *, chunks):
    """Row chunks of this rank's column block into the heap, each announced by a flag; on a side stream every
    rank copies each announced chunk of every block straight into its C with the copy engines (pulls)."""
    width = b_shard.shape[1]
    block = p.heap.scratch("gemm_all_scatter.block", (p.m, width), p.dtype)
    row_chunks = _row_chunks(p.m, chunks, 2 * width * p.k)
    flags = _flags(p, len(row_chunks))
    c = a.new_empty((p.m, p.n))
    epoch = _begin(p)  # after it, nobody still pulls the last call's block
    steps = [(functools.partial(_as_compute_chunk, p, a[rows], b_shard, block[rows], flags, index, epoch),
              functools.partial(_as_collect_chunk, p, block, c, flags, index, epoch, rows))
             for index, rows in enumerate(row_chunks)]
    _pipeline(p.device, steps, produce_on_side=False)  # C is complete when the side stream is done
    _check_waits(p, "pipelined_torch")
    return c


def _as_compute_chunk(p, a_rows, b_shard, block_rows, flags, index, epoch):
    torch.matmul(a_rows, b_shard, out=block_rows)
    _notify(p, flags, index, epoch)


def _as_collect_chunk(p, block, c, flags, index, epoch, rows):
    """Chunk ``index`` of every rank's column block into C, each peer's once that peer has announced it."""
    width = block.shape[1]
    copy_rows(c[rows, p.rank * width:(p.rank + 1) * width], block[rows])
    for owner in _peers(p):
        _await(p, flags, index, epoch, owner)
        copy_rows(c[rows, owner * width:(owner + 1) * width], p.heap.peer_view(block, owner)[rows])


def _as_bulk_torch(p, a, b_shard):
    return _join_columns(_all_gather(torch.matmul(a, b_shard), _group(p)))


# ---------------------------------------------------------------- gemm_reduce_scatter
def _rs_launch(p, programs, producers, a, b, parts, out, flags, epoch, *, push=False, signal=False,
               from_peers=False, wait=False):
    t, h = p.tiles, p.heap
    through_triton(_rs_kernel, (programs,),
        a, b, parts, out, flags, epoch, h.wait_errors, h.max_spins, h.rank, h.world_size, h.heap_bases,
        out.shape[0], p.n, a.shape[1], a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), producers,
        BLOCK_M=t.block_m, BLOCK_N=t.block_n, BLOCK_K=t.block_k, GROUP_M=t.group_m,
        PUSH=push, SIGNAL=signal, FROM_PEERS=from_peers, WAIT=wait,
        num_warps=t.num_warps, num_stages=t.num_stages)


def _rs_buffers(p, a_part):
    """(the partials of this rank's rows, [W, rows, N] in the heap; this rank's output rows)."""
    return _rs_parts(p), a_part.new_empty((p.m // p.world_size, p.n))


def _rs_parts(p) -> torch.Tensor:
    return p.heap.scratch("gemm_reduce_scatter.parts", (p.world_size, p.m // p.world_size, p.n), p.dtype)


def _rs_setup(p, a_part):
    """(partials in the heap, this rank's output rows, flags, output tiles per row block)."""
    parts, out = _rs_buffers(p, a_part)
    per_block = _cdiv(out.shape[0], p.tiles.block_m) * _cdiv(p.n, p.tiles.block_n)
    return parts, out, _flags(p, p.world_size * per_block), per_block


def _rs_bulk_triton(p, a_part, b_part):
    parts, out, flags, per_block = _rs_setup(p, a_part)
    epoch = _begin(p)
    computers = min(p.world_size * per_block, p.programs)
    _rs_launch(p, computers, computers, a_part, b_part, parts, out, flags, epoch)
    p.heap.barrier()  # every partial is complete before anyone pulls
    _rs_launch(p, min(per_block, p.programs), 0, a_part, b_part, parts, out, flags, epoch, from_peers=True)
    _end(p, "bulk_triton")
    return out


def _rs_fused_sequential(p, a_part, b_part):
    parts, out, flags, per_block = _rs_setup(p, a_part)
    epoch = _begin(p)
    computers = min(p.world_size * per_block, p.programs)
    _rs_launch(p, computers, computers, a_part, b_part, parts, out, flags, epoch, push=True)
    p.heap.barrier()  # every peer's partial has landed here
    _rs_launch(p, min(per_block, p.programs), 0, a_part, b_part, parts, out, flags, epoch)
    _end(p, "fused_sequential")
    return out


def _rs_producer_consumer(p, a_part, b_part, *, comm_programs):
    parts, out, flags, per_block = _rs_setup(p, a_part)
    reducers, computers = _roles(p, comm_programs, per_block, p.world_size * per_block)
    epoch = _begin(p)
    _pair(p.device,
          lambda: _rs_launch(p, computers, computers, a_part, b_part, parts, out, flags, epoch, signal=True),
          lambda: _rs_launch(p, reducers, 0, a_part, b_part, parts, out, flags, epoch, from_peers=True, wait=True),
          comm_is_producer=False)
    _end(p, "producer_consumer")
    return out


def _rs_workgroup_specialised(p, a_part, b_part, *, comm_programs):
    parts, out, flags, per_block = _rs_setup(p, a_part)
    reducers, computers = _roles(p, comm_programs, per_block, p.world_size * per_block)
    epoch = _begin(p)
    _rs_launch(p, computers + reducers, computers, a_part, b_part, parts, out, flags, epoch,
               signal=True, from_peers=True, wait=True)
    _end(p, "workgroup_specialised")
    return out


def _rs_pipelined_torch(p, a_part, b_part, *, chunks):
    """The peers' rows first, chunk by chunk: the copy engines push each partial into its owner's heap and a
    flag announces it. Then this rank's rows, adding the peers' partials (in the GEMM's epilogue if chunked)."""
    parts, out = _rs_buffers(p, a_part)
    m_loc = out.shape[0]
    row_chunks = _row_chunks(m_loc, chunks, 2 * p.n * a_part.shape[1])
    flags = _flags(p, len(row_chunks) * p.world_size)  # [chunk, owner]: this rank's partial is in owner's heap
    outgoing = a_part.new_empty((p.m, p.n))  # partials of the peers' rows, before they are pushed
    own = a_part[_row_block(p.rank, m_loc)]
    epoch = _begin(p)  # after it, nobody still reads the last call's partials
    steps = _rs_peer_steps(p, a_part, b_part, parts, outgoing, row_chunks, functools.partial(_rs_push_chunk, p),
                           flags, epoch)
    if len(row_chunks) == 1:  # only the own GEMM can hide the pushes: add the partials after it
        steps.append((functools.partial(torch.matmul, own, b_part, out=parts[p.rank]), None))
        steps.append((functools.partial(_rs_sum_partials, p, parts, out, flags, epoch), None))
    else:  # chunk i of the peers' partials landed while this rank computed later chunks of theirs
        steps += [(functools.partial(_rs_add_in_epilogue, p, parts, flags, index, epoch, own[rows], b_part,
                                     out[rows], rows), None)
                  for index, rows in enumerate(row_chunks)]
    _pipeline(p.device, steps, produce_on_side=False)
    _check_waits(p, "pipelined_torch")
    return out


def _rs_peer_steps(p, a_part, b_part, parts, outgoing, row_chunks, push, flags, epoch) -> list:
    """The pipeline steps of the peers' rows: each chunk's partial computed into ``outgoing``, then
    ``push(destination in the owner's heap, partial, flags, flag index, epoch)``."""
    m_loc = parts.shape[1]
    steps = []
    for owner in _peers(p):
        slot, a_block, outgoing_block = (p.heap.peer_view(parts, owner)[p.rank], a_part[_row_block(owner, m_loc)],
                                         outgoing[_row_block(owner, m_loc)])
        for index, rows in enumerate(row_chunks):
            steps.append((functools.partial(torch.matmul, a_block[rows], b_part, out=outgoing_block[rows]),
                          functools.partial(push, slot[rows], outgoing_block[rows], flags,
                                            index * p.world_size + owner, epoch)))
    return steps


def _rs_push_chunk(p, destination, partial, flags, index, epoch):
    destination.copy_(partial)
    _notify(p, flags, index, epoch)


def _rs_await_partials(p, flags, index, epoch):
    """In stream order: every peer's partial of chunk ``index`` of this rank's rows has landed here."""
    for owner in _peers(p):
        _await(p, flags, index * p.world_size + p.rank, epoch, owner)


def _rs_sum_partials(p, parts, out, flags, epoch):
    """out = the sum of every rank's partial of this rank's rows (one chunk), once the peers' are in."""
    _rs_await_partials(p, flags, 0, epoch)
    torch.sum(parts, dim=0, out=out)  # one launch; 16-bit sums accumulate in fp32


def _rs_add_in_epilogue(p, parts, flags, index, epoch, own_rows, b_part, out_rows, rows):
    """out rows = own rows' partial + the peers' partials, the first added by cuBLAS (beta = 1).

    Each further peer's partial is added in the output's dtype: a 16-bit sum rounds once per peer
    past the first (W - 1 roundings, against one for torch.sum's float32 accumulation in the other
    torch patterns); at W = 8 in bfloat16, about 1.4x the error of one rounding (a review's emulation:
    4.6e-3 against 3.3e-3 relative), inside the tests' tolerance. Adding in float32 would take a
    buffer and a pass more on the path this pattern exists to keep short."""
    _rs_await_partials(p, flags, index, epoch)
    peers = _peers(p)
    if not peers:  # one rank: its own partial is the whole sum
        torch.matmul(own_rows, b_part, out=out_rows)
        return
    torch.addmm(parts[peers[0]][rows], own_rows, b_part, out=out_rows)
    for owner in peers[1:]:
        out_rows.add_(parts[owner][rows])


def _rs_fused_torch(p, a_part, b_part):
    """Each peer's partial computed straight into its heap (cuBLAS stores across the links) and announced by a
    flag; then this rank's rows with the peers' partials added in the GEMM's epilogue."""
    parts, out = _rs_buffers(p, a_part)
    m_loc = out.shape[0]
    flags = _flags(p, p.world_size)
    epoch = _begin(p)  # after it, nobody still reads the last call's partials
    for owner in _peers(p):
        torch.matmul(a_part[_row_block(owner, m_loc)], b_part, out=p.heap.peer_view(parts, owner)[p.rank])
    for owner in _peers(p):
        _notify(p, flags, owner, epoch)
    _rs_add_in_epilogue(p, parts, flags, 0, epoch, a_part[_row_block(p.rank, m_loc)], b_part, out, slice(None))
    _check_waits(p, "fused_torch")
    return out


def _rs_pipelined_graph(p, a_part, b_part):
    """pipelined_torch in one chunk, replayed from a CUDA graph (one launch of host time instead of about ten):
    each peer's partial computed locally and pushed into its heap by the copy engines while the next GEMM runs;
    the partials summed into a fresh output after the graph."""
    plan = _plan(p, _graph_key("gemm_reduce_scatter.pipelined_graph", a_part, b_part),
                 lambda: _RsGraphPlan(p, a_part, b_part))
    plan.send(a_part)
    out = a_part.new_empty(plan.parts.shape[1:])
    torch.sum(plan.parts, dim=0, out=out)  # one launch; 16-bit sums accumulate in fp32
    _check_waits(p, "pipelined_graph")
    return out


def _graph_key(pattern: str, a: torch.Tensor, b: torch.Tensor) -> tuple:
    """A graphed call shape: the input's shape (it is staged, so its strides do not matter) and the weight
    itself (the graph reads it in place). Rank-local: a rank may pass its weight as another tensor."""
    return pattern, tuple(a.shape), a.dtype, b.data_ptr(), tuple(b.shape), b.stride(), b.dtype


class _RsGraphPlan:
    """pipelined_graph's call shape: the graphed part and the partials that the sum after it reads.

    No barrier per call: a rank announces at the start of each replay that it has finished reading the last
    call's partials (``ready``), and a peer waits for that only before pushing into them, on the side stream,
    while its GEMM of the next peer's rows runs. Every other pattern starts with a barrier, so whatever ran
    before is covered too. One barrier when the flags and the epoch counter, which every plan of the op
    shares, are made: a rank's flags are zeroed, and its epochs restart, only then, so without it a fast peer
    could read the flags before they are zeroed, still holding an earlier plan's epochs (after ``free_all``,
    the same offsets), and sum partials of the call before. That happens in the same call on every rank (the
    heap's allocations are), whereas a plan itself may be made on one rank only (its key holds the weight's
    address, and a rank may pass its weight as a new tensor): a barrier there would wait forever.
    """

    def __init__(self, p, a_part, b_part):
        heap, m_loc = p.heap, p.m // p.world_size
        parts = _rs_parts(p)
        version = heap.scratch_version
        flags = heap.scratch(f"{p.op}.graph_flags", (2 * p.world_size,), torch.int32, zero_new=True)
        counter = heap.scratch(f"{p.op}.graph_epoch", (1,), torch.int32, zero_new=True)
        made_flags = heap.scratch_version != version
        ready = p.world_size  # the index of this rank's "done reading the last partials" flag

        def push(destination, partial, flags, owner, epoch):  # in one chunk, a partial's flag index is its owner
            _await(p, flags, ready, epoch, owner)
            _rs_push_chunk(p, destination, partial, flags, owner, epoch)

        def send(a):
            epoch = _advance(counter)
            _notify(p, flags, ready, epoch)
            steps = _rs_peer_steps(p, a, b_part, parts, a.new_empty((p.m, p.n)), [slice(None)], push, flags, epoch)
            steps.append((functools.partial(torch.matmul, a[_row_block(p.rank, m_loc)], b_part, out=parts[p.rank]),
                          None))
            _pipeline(p.device, steps, produce_on_side=False)
            _rs_await_partials(p, flags, 0, epoch)

        if made_flags:
            heap.barrier()  # after this rank's flags and epoch are zeroed: see the class doc
        self.parts = parts
        self.send = _GraphedCall(send, a_part)


def _rs_bulk_torch(p, a_part, b_part):
    import torch.distributed as dist

    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor  # renamed in torch 2.13
    partial = torch.matmul(a_part, b_part)
    out = partial.new_empty((p.m // p.world_size, p.n))
    scatter(out, partial, group=_group(p))
    return out


# ================================================================ variants and registry views
PATTERNS = ("bulk_torch", "bulk_triton", "fused_sequential", "producer_consumer", "workgroup_specialised",
            "pipelined_torch")
_PATTERN_DOCS = {
    "bulk_torch": "torch.matmul, then the torch collective (NCCL)",
    "bulk_triton": "Triton GEMM, then a Triton kernel moving the data through the symmetric heap",
    "fused_sequential": "communication inside the GEMM kernel, tile by tile",
    "producer_consumer": "GEMM and communication kernels on two streams, synchronised by per-tile flags",
    "workgroup_specialised": "one persistent kernel, programs split between GEMM and communication",
    "pipelined_torch": "torch.matmul in row chunks; the copy engines move finished chunks on a side stream",
    "fused_torch": "torch.matmul writing each peer's partial straight into its heap (cuBLAS stores cross the links)",
    "pipelined_graph": "pipelined_torch in one chunk, replayed from a CUDA graph (one launch of host time)",
    "torch_fused": "PyTorch's torch.ops.symm_mem.fused_all_gather_matmul (GPU only)",
}


def _default_params(prefix: str, pattern: str) -> dict:
    if pattern in ("producer_consumer", "workgroup_specialised"):
        return {"comm_programs": DEFAULT_COMM_PROGRAMS}
    if pattern == "pipelined_torch":
        return {"chunks": DEFAULT_CHUNKS[prefix]}
    return {}


# Every parameter any pattern takes, in the order the ranks' agreement sends them.
_PARAM_NAMES = tuple(sorted({name for prefix in DEFAULT_CHUNKS for pattern in PATTERNS
                             for name in _default_params(prefix, pattern)}))


# The row a rank that refused the call sends in the agreement, after its shapes: no dtype, pattern or parameters.
_REFUSED_ROW = (-1, -1, *(0 for _ in _PARAM_NAMES))
_NO_SHAPE = (-1, -1)  # the shapes of a rank that refused before reading its inputs
# Patterns that can be captured in a CUDA graph and replayed: their host side passes their kernels nothing that
# changes from call to call (they signal and await no flags, so their epoch goes unused), and the heap's barriers
# reset themselves. The others pass the call's epoch to their flag kernels (or pick a staging buffer by it) on the
# host, so that every replay would repeat the captured call's and take stale flags for fresh ones; pipelined_graph
# captures and replays graphs of its own, and torch_fused is PyTorch's (neither is checked under capture).
CAPTURABLE = ("bulk_torch", "bulk_triton", "fused_sequential")
_UNWAITED = ("bulk_torch",)  # no bounded waits to check (by reading the device back) after the call


def _after_ranks_agree(run, pattern: str):
    """``run`` once the ranks are known to call with the same shapes, dtype and pattern: the patterns
    address their peers' memory by offsets worked out from their own shapes, and lay their buffers
    and flags out each its own way, so a rank that disagrees would read and write the wrong places
    without an error (a ``variant=``, ``calls=`` or model given on one rank only picks another
    pattern there). Checked by one all-gather the first time a rank runs a call shape of an op with
    a pattern on a heap, which every rank does in the same call (a decision cache evicted differently
    on each rank, or ``explain``, must not start a collective on some ranks). A peer silent on that
    first call leaves it to the collective's own timeout, not the bounded waits. Ranks that each ran
    two call shapes (or patterns) before and now mix them are not caught: that would take a
    collective on every call. Inside CUDA graph capture, only the :data:`CAPTURABLE` patterns run,
    on a call shape agreed before."""

    @functools.wraps(run)
    def agreed(p, a, b, **params):
        key = (p.op, p.a_shape, p.b_shape, p.dtype, pattern, tuple(sorted(params.items())))
        known = key in p.heap.agreed_calls
        if capturing():
            _check_capturable(p, pattern, known)
        if not known:
            _check_ranks_agree(p, pattern, params)
            p.heap.agreed_calls.add(key)
        return run(p, a, b, **params)

    return agreed


def _check_capturable(p: OverlapProblem, pattern: str, agreed: bool) -> None:
    """InputError unless ``pattern`` can run inside CUDA graph capture (seer.dispatch refuses only a
    first call there; a cached call goes straight to the pattern)."""
    if pattern not in CAPTURABLE:
        raise InputError(f"{p.op}: pattern {pattern!r} cannot be captured in a CUDA graph: it hands its kernels "
                         f"per-call state from the host (flag epochs, staging buffers taken in turns, graphs of its "
                         f"own), which every replay would repeat, reading stale flags as fresh; capture one of "
                         f"{list(CAPTURABLE)} (variant=), or call {p.op} outside the graph")
    if p.heap.check_waits and pattern not in _UNWAITED:
        raise InputError(f"{p.op}: {pattern} checks its bounded waits after every call by reading the device back, "
                         f"which CUDA graph capture forbids; set heap.check_waits = False while capturing and call "
                         f"heap.raise_wait_errors() after the replays")
    if not agreed:
        raise InputError(f"{p.op}: the first {pattern} call of these shapes on this heap is inside CUDA graph "
                         f"capture, and the ranks' agreement on it reads the device back; call it once before "
                         f"capturing")


def _check_ranks_agree(p, pattern: str, params: dict) -> None:
    if p.world_size == 1 or p.heap.group is None:  # a heap without a group has no collective to ask with
        return
    # A parameter the row cannot carry would go unchecked: refused in the row, so that every rank
    # refuses (one rank raising alone would leave the others waiting in the all-gather).
    undeclared = sorted(set(params) - set(_PARAM_NAMES))
    refusal = (f"pattern {pattern!r} got parameters that no pattern declares in _default_params "
               f"({list(_PARAM_NAMES)}): {undeclared}; declare them there so that the ranks can agree on them"
               if undeclared else None)
    named = sorted(_PATTERN_DOCS)
    mine = (DTYPES.index(p.dtype), named.index(pattern), *(int(params.get(name, 0)) for name in _PARAM_NAMES))
    every = _gather_agreement(p.heap, p.op, p.a_shape, p.b_shape, mine, refusal)
    if any(row != every[0] for row in every):
        calls = "; ".join(f"rank {rank}: {INPUTS[p.op][0]} {row[:2]}, {INPUTS[p.op][1]} {row[2:4]}, {DTYPES[row[4]]}, "
                          f"{named[row[5]]}" + "".join(f" {name}={value}" for name, value in zip(_PARAM_NAMES, row[6:])
                                                      if value)
                          for rank, row in enumerate(every))
        raise RanksRefused(f"{p.op}: the ranks called with different shapes, dtypes or patterns ({calls}); every rank "
                           f"must pass its share of the same GEMM and run the same pattern (the same variant=, calls= "
                           f"and model on every rank)")


def _gather_agreement(heap: Heap, op: str, a_shape, b_shape, row, refusal: str | None) -> list[list[int]]:
    """Every rank's ``[*a_shape, *b_shape, *row]``, by one all-gather that each rank joins, ``refusal`` or
    not. Where any rank refused, a second gathers the reasons, and every rank raises naming them all.
    Every rank raises too where the ranks called different ops, or their heaps hold different
    allocations (a rank allocated alone): either way the twins a pattern addresses on its peers
    would hold something else."""
    in_use = heap.size_bytes - heap.free_bytes
    mine = torch.tensor([_OPS.index(op), in_use, *a_shape, *b_shape, *row, refusal is not None], dtype=torch.int64,
                        device=heap.device)
    every = _all_gather(mine, heap.group).tolist()
    refusing = [rank for rank, sent in enumerate(every) if sent[-1]]
    if refusing:
        import torch.distributed as dist

        reasons = [None] * heap.world_size
        # On the heap's GPU: it serialises through the current device, which a refused operand's may be.
        with torch.cuda.device(heap.device) if heap.device.type == "cuda" else contextlib.nullcontext():
            dist.all_gather_object(reasons, refusal, group=heap.group)
        named = "; ".join(f"rank {rank}: {reasons[rank]}" for rank in refusing)
        raise RanksRefused(f"{op}: refused on rank(s) {refusing}, so no rank runs the call ({named})")
    if any(sent[0] != every[0][0] for sent in every):
        called = "; ".join(f"rank {rank}: {_OPS[sent[0]]}" for rank, sent in enumerate(every))
        raise RanksRefused(f"{op}: the ranks called different ops ({called}); every rank must call the same op "
                           "together")
    if any(sent[1] != every[0][1] for sent in every):
        held = "; ".join(f"rank {rank}: {sent[1]:,}" for rank, sent in enumerate(every))
        raise RanksRefused(f"{op}: the ranks' symmetric heaps hold different allocations (bytes in use: {held}); "
                           "every rank must allocate the same sizes in the same order, or a tensor's twins are not "
                           "where its peers look for them (call free_all() on every rank to start again)")
    return [sent[2:-1] for sent in every]


def _variants(prefix: str, patterns) -> dict[str, Variant]:
    variants = {}
    for pattern in patterns:
        run = _after_ranks_agree(globals()[f"_{prefix}_{pattern}"], pattern)
        params = _default_params(prefix, pattern)
        variants[pattern] = Variant(pattern, functools.partial(run, **params) if params else run, params,
                                    _PATTERN_DOCS[pattern])
    return variants


def _op_module(op: str, variants: dict[str, Variant], summary: str) -> types.SimpleNamespace:
    """The registry's kernel-module contract for one op (registered as ``seer.kernels.overlap:<op>``)."""
    return types.SimpleNamespace(__doc__=summary, VARIANTS=variants, split=functools.partial(split, op),
                                 cache_key=cache_key, problem=problem, check_operands=check_operands,
                                 share_refusal=functools.partial(share_refusal, op), reference=reference)


all_gather_gemm = _op_module(
    "all_gather_gemm", _variants("ag", (*PATTERNS, "torch_fused")),
    "C = all_gather(A shards by rows) @ B on every rank.")
gemm_all_scatter = _op_module(
    "gemm_all_scatter", _variants("as", PATTERNS),
    "Each rank computes a column block of C = A B; every rank ends with all of C.")
gemm_reduce_scatter = _op_module(
    "gemm_reduce_scatter", _variants("rs", (*PATTERNS, "fused_torch", "pipelined_graph")),
    "K split across ranks: C = sum of partial products, reduced and scattered by rows.")
