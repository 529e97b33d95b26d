"""Dense GEMM C = A B (bf16/fp16 in, fp32 accumulate) as a parametrised family of Triton kernels.

Every Triton variant builds its output tiles with the same two device helpers, so the tile loop
exists once:

* :func:`tile_coords` maps a linear tile id to ``(pid_m, pid_n)`` in grouped order. Launching
  ``GROUP_M`` row-tiles next to each other makes consecutive programs share columns of B and rows
  of A in L2 (the SwizzlePerf idea, as a parameter); ``GROUP_M=1`` is plain row-major order.
* :func:`matmul_tile` accumulates one ``[BLOCK_M, BLOCK_N]`` tile over a K range in fp32.

On top of them: a data-parallel kernel (one program per tile), split-K for skinny products with
a long K (programs also split K; fp32 partials summed in a fixed order, so results are
deterministic, by a second kernel or, in one launch, by the last program of each tile), a
persistent kernel (one program per SM striding over the tiles: no mostly-empty last wave) and, on
Hopper, a TMA kernel loading through tensor descriptors. ``torch_matmul`` (cuBLAS) is a candidate
like any other, so dispatch never has to lose to the vendor library.

``CANDIDATES`` is the whole family the profile sweep measures; ``VARIANTS`` the shipped subset,
cut by :func:`greedy_cover` from a sweep (``benchmarks/gemm_profile.py``).
"""
from __future__ import annotations

import functools
import os
import threading
from dataclasses import asdict, dataclass, replace
from typing import Callable

import numpy as np
import torch
from torch.autograd.graph import increment_version
import triton
import triton.language as tl

from seer.errors import (InputError, check_no_grad, check_not_negated, check_writable, dual_level_open, no_memory_error,
                         overlap_error, warn_once)
from seer.launch import (INTERPRETER_SMS, InputLaunches, LaunchCache, capturing, check_runnable, on_device,  # noqa: F401 (INTERPRETER_SMS: gemm's tests size grids by it)
                         several_gpus, sm_count, specialisation, through_triton)
from seer.registry import Variant, example_values


# ---------------------------------------------------------------- shared device helpers
# Triton's CPU interpreter (3.6 to 3.9) multiplies bf16 ``tl.dot`` operands as raw integers. Widening
# them to fp32 first is exact (a bf16 product fits fp32), so CPU tests still check the GPU numbers, to
# the last place: the interpreter truncates the fp32 result to bf16 where a GPU rounds it (tests allow 1 ulp).
_WIDEN_BF16_DOT = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") == "1")


@triton.jit
def tile_coords(tile_id, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of tile_id in grouped (swizzled) order; GROUP_M=1 is row-major."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * tiles_n
    first_m = (tile_id // tiles_per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)  # the last group may be short
    within = tile_id % tiles_per_group
    return first_m + within % rows_in_group, within // rows_in_group


@triton.jit
def matmul_tile(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n, k_start, k_end,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """fp32 accumulator [BLOCK_M, BLOCK_N] of A[pid_m tile, k_start:k_end] @ B[k_start:k_end, pid_n tile] (masked at edges).

    ``k_end`` is clipped to K; rows past M and columns past N of the result are zero.
    """
    # int64 offsets: M*K, K*N or M*N may pass 2**31 elements (LM heads, long prompts), and so may a
    # split-K slice's first row of B times B's row stride (k_start * N).
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    rows_k = (k_start + offs_k).to(tl.int64)
    in_m = offs_m < M
    in_n = offs_n < N
    k_end = tl.minimum(k_end, K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + rows_k[None, :] * stride_ak
    b_ptrs = b_ptr + rows_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    # The steps in int64 too: BLOCK_K times a column-major A's or a long-rowed B's stride passes 2**31
    # from a stride of 2**24 (BLOCK_K 128), and wrapped, the loads left the operands.
    a_step = tl.full([], BLOCK_K, tl.int64) * stride_ak
    b_step = tl.full([], BLOCK_K, tl.int64) * stride_bk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_start, k_end, BLOCK_K):
        in_k = (k + offs_k) < k_end
        a = tl.load(a_ptrs, mask=in_m[:, None] & in_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=in_k[:, None] & in_n[None, :], other=0.0)
        if _WIDEN_BF16_DOT and a.dtype == tl.bfloat16:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptrs += a_step
        b_ptrs += b_step
    return acc


@triton.jit
def store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write one accumulator tile into C (cast to C's element type), masked at the edges."""
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# ---------------------------------------------------------------- kernels
@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Programs stride over the output tiles: one program per tile is the data-parallel kernel, one
    per SM the persistent one (no empty last wave, no per-tile launch cost)."""
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
        pid_m, pid_n = tile_coords(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = matmul_tile(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n, 0, K,
                          BLOCK_M, BLOCK_N, BLOCK_K)
        store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N)


@triton.jit
def _gemm_splitk_kernel(a_ptr, b_ptr, partial_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, k_per_split,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Program (tile, s) writes its fp32 partial sum over K slice s into ``partial[s]`` ([splits, M, N])."""
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    split = tl.program_id(1)
    k_start = split * k_per_split
    acc = matmul_tile(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
                      k_start, k_start + k_per_split, BLOCK_M, BLOCK_N, BLOCK_K)
    store_tile(partial_ptr + split.to(tl.int64) * M * N, acc, M, N, N, 1, pid_m, pid_n, BLOCK_M, BLOCK_N)


@triton.jit
def _sum_splits_kernel(partial_ptr, c_ptr, numel, splits, BLOCK: tl.constexpr):
    """C = sum over s of partial[s], added in order s = 0, 1, ... so results are deterministic."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < numel
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(splits):
        total += tl.load(partial_ptr + s * numel + offs, mask=inside, other=0.0)
    tl.store(c_ptr + offs, total.to(c_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _gemm_splitk_fixup_kernel(a_ptr, b_ptr, c_ptr, partial_ptr, arrivals_ptr, M, N, K, stride_am, stride_ak,
                              stride_bk, stride_bn, stride_cm, stride_cn, k_per_split, splits,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                              GROUP_M: tl.constexpr):
    """Split-K in one launch: program (tile, s) stores its fp32 partial, and the last of the tile's
    programs to arrive adds the partials in the order s = 0, 1, ... (deterministic) and writes C.

    Saves the second launch of :func:`_gemm_splitk_kernel` + :func:`_sum_splits_kernel`, which is
    a good part of the time of a decode-sized product. ``arrivals`` holds one zeroed counter per
    tile; the reducing program sets it back to zero for the next launch.
    """
    tile = tl.program_id(0)
    split = tl.program_id(1)
    pid_m, pid_n = tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    k_start = split * k_per_split
    acc = matmul_tile(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
                      k_start, k_start + k_per_split, BLOCK_M, BLOCK_N, BLOCK_K)
    # Partials of a tile are whole [BLOCK_M, BLOCK_N] blocks side by side: no masks, one address each.
    in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tile_partials = partial_ptr + tile.to(tl.int64) * splits * BLOCK_M * BLOCK_N
    tl.store(tile_partials + split * BLOCK_M * BLOCK_N + in_tile, acc)
    # Release orders the partial before the count; acquire lets the last program read every partial.
    arrived = tl.atomic_add(arrivals_ptr + tile, 1, sem="acq_rel")
    if arrived == splits - 1:
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in range(splits):
            total += tl.load(tile_partials + s * BLOCK_M * BLOCK_N + in_tile, cache_modifier=".cg")
        store_tile(c_ptr, total, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N)
        tl.atomic_xchg(arrivals_ptr + tile, 0)


@triton.jit
def _gemm_tma_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Tiles loaded and stored through Hopper TMA tensor descriptors.

    What TMA buys over :func:`matmul_tile`: the copy engine computes addresses, bounds-checks
    (zero-filling boxes that cross the edge, so no masks) and moves whole tiles into shared memory
    asynchronously. Warps issue no per-element loads, which frees registers and issue slots for the
    tensor cores and lets deep pipelines run on large tiles. It needs row-major operands with
    16-byte aligned bases and row strides, which :func:`_run_tma` checks. Like :func:`_gemm_kernel`
    it is data-parallel or persistent depending on the grid.
    """
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile_id in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
        pid_m, pid_n = tile_coords(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            a = a_desc.load([pid_m * BLOCK_M, k])
            b = b_desc.load([k, pid_n * BLOCK_N])
            if _WIDEN_BF16_DOT and a.dtype == tl.bfloat16:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))


# ---------------------------------------------------------------- problem
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class GemmProblem:
    """What a GEMM choice depends on: C[M, N] = A[M, K] @ B[K, N]."""

    M: int
    N: int
    K: int
    dtype: torch.dtype
    device: torch.device
    a_strides: tuple[int, int]
    b_strides: tuple[int, int]
    num_sms: int


@functools.lru_cache(maxsize=None)
def _capability(device: torch.device) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


# ---------------------------------------------------------------- configurations and launchers
SPLITK_WORKSPACE_BYTES = 1 << 30  # split-K partials beyond this are pointless (M x N is large) and wasteful
_SUM_BLOCK = 1024


@dataclass(frozen=True)
class GemmConfig:
    """One point of the Triton GEMM family.

    ``kind``: ``"tiles"`` (pointer loads, :func:`_gemm_kernel`), ``"splitk"`` (two launches),
    ``"splitk_fixup"`` (one launch) or ``"tma"``.
    ``persistent``: launch ``occupancy`` programs per SM that stride over the tiles instead of one
    program per tile. ``split_k``: most K slices (fewer when K is short or partials would not fit
    :data:`SPLITK_WORKSPACE_BYTES`).
    """

    kind: str
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    group_m: int = 8
    split_k: int = 1
    persistent: bool = False
    occupancy: int = 1

    @property
    def name(self) -> str:
        prefix = {"tiles": "tile", "splitk": f"splitk{self.split_k}", "splitk_fixup": f"splitk{self.split_k}fix",
                  "tma": "tma"}[self.kind]
        if self.persistent:
            prefix += "_persistent"
        shape = f"{self.block_m}x{self.block_n}x{self.block_k}"
        return f"{prefix}_{shape}_w{self.num_warps}s{self.num_stages}g{self.group_m}"

    def constexprs(self) -> tuple:
        """The kernels' compile-time arguments, in their order (last in every signature)."""
        return self.block_m, self.block_n, self.block_k, self.group_m

    def options(self) -> dict:
        """Triton's launch options (compiled in, but no kernel arguments)."""
        return {"num_warps": self.num_warps, "num_stages": self.num_stages}

    def meta(self) -> dict:
        """The compile-time arguments by name, with the launch options: a launch through Triton's path."""
        return dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"), self.constexprs()), **self.options())

    def tiles(self, problem: GemmProblem) -> int:
        """Output tiles of ``problem``: one program each, but for the persistent kernels."""
        return triton.cdiv(problem.M, self.block_m) * triton.cdiv(problem.N, self.block_n)

    def grid_size(self, problem: GemmProblem) -> int:
        tiles = self.tiles(problem)
        return min(tiles, problem.num_sms * self.occupancy) if self.persistent else tiles

    def splits(self, problem: GemmProblem) -> tuple[int, int]:
        """(number of K slices, K per slice, a multiple of BLOCK_K) actually used for ``problem``."""
        k_blocks = max(1, triton.cdiv(problem.K, self.block_k))
        # At least one tile: an empty C (M or N of 0) has none, and its partials would fit any split.
        tiles = max(1, self.tiles(problem))
        fit = max(1, SPLITK_WORKSPACE_BYTES // (4 * tiles * self.block_m * self.block_n))
        blocks_per_split = triton.cdiv(k_blocks, min(self.split_k, k_blocks, fit))
        return triton.cdiv(k_blocks, blocks_per_split), blocks_per_split * self.block_k


def _output(problem: GemmProblem, out: torch.Tensor | None, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C: a new tensor, or ``out`` checked (shape, dtype, device, contiguous, apart from a and b)."""
    if out is None:
        return torch.empty((problem.M, problem.N), dtype=problem.dtype, device=problem.device)
    # Every cached call given an out passes here: the common case is decided in one expression.
    if not (isinstance(out, torch.Tensor) and out.layout is torch.strided and not out.is_nested
            and out.shape == (problem.M, problem.N) and out.dtype == problem.dtype and out.device == problem.device
            and out.is_contiguous() and not (out.requires_grad or out.is_neg() or out.is_inference()
                                             or dual_level_open())):
        _check_out(problem, out)  # raises naming what is wrong (or passes: e.g. under no_grad or inference mode)
    _check_apart(problem, out, a, b)
    increment_version(out)  # written in place by a kernel: autograd must see it, as torch's out= shows it
    return out


def _check_out(problem: GemmProblem, out) -> None:
    """Raise the error that says what is wrong with ``out`` as C, if anything."""
    _check_dense(out)
    if out.shape != (problem.M, problem.N) or out.dtype != problem.dtype or out.device != problem.device:
        raise InputError(f"out must be a {problem.M}x{problem.N} {problem.dtype} tensor on {problem.device}, "
                         f"got {tuple(out.shape)} {out.dtype} on {out.device}")
    if not out.is_contiguous():
        raise InputError("out must be contiguous")
    check_not_negated("gemm", out=out)
    check_no_grad("gemm", out=out)  # as for a and b: no variant (torch.matmul's out= neither) writes it for autograd
    check_writable("gemm", out)


def _check_dense(out) -> None:
    """Refuse an ``out`` that is not a dense 2-D tensor in memory, before its pointer or strides are read."""
    if not isinstance(out, torch.Tensor):
        raise InputError(f"out must be a torch.Tensor, got {type(out).__name__}")
    if out.layout != torch.strided or out.is_nested:
        raise InputError(f"out must be a dense tensor, got a {'nested' if out.is_nested else out.layout} one")
    if out.dim() != 2:
        raise InputError(f"out must be a 2-D tensor, got shape {tuple(out.shape)}")


def _address(t: torch.Tensor) -> int:
    try:
        return t.data_ptr()
    except RuntimeError:
        raise no_memory_error("gemm", "torch.matmul") from None


def _check_apart(problem: GemmProblem, c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """Raise unless C (contiguous, ``problem``'s M x N) shares no memory with a or b: the spans the
    operands' elements can occupy, so strided views interleaving in one buffer count as overlapping.
    Written out for the two operands, whose shapes every caller has checked against the problem: every
    call given an out pays it."""
    M, N, K, size = problem.M, problem.N, problem.K, problem.dtype.itemsize
    try:
        low, a_at, b_at = c.data_ptr(), a.data_ptr(), b.data_ptr()
    except RuntimeError:
        raise no_memory_error("gemm", "torch.matmul") from None
    high = low + M * N * size
    (a_row, a_col), (b_row, b_col) = a.stride(), b.stride()
    if M and K and a_at < high and low < a_at + ((M - 1) * a_row + (K - 1) * a_col + 1) * size:
        raise overlap_error("a")
    if K and N and b_at < high and low < b_at + ((K - 1) * b_row + (N - 1) * b_col + 1) * size:
        raise overlap_error("b")


def _degenerate(problem: GemmProblem, c: torch.Tensor) -> bool:
    """Handle empty products (no kernel launch); True when there is nothing left to compute."""
    if problem.K == 0:
        c.zero_()
    return problem.M == 0 or problem.N == 0 or problem.K == 0


# Each kernel's launches: the first of each specialisation through Triton's path, the rest direct
# (no Triton binder, no lock): 2-2.7x less host time a call (results/gemm-host-<device>.md).
_tiles_launch = LaunchCache(_gemm_kernel)
_splitk_launch = LaunchCache(_gemm_splitk_kernel)
_sum_splits_launch = LaunchCache(_sum_splits_kernel)
_fixup_launch = LaunchCache(_gemm_splitk_fixup_kernel)


def _launches(cache: LaunchCache, config: GemmConfig | None, problem: GemmProblem, fixed: tuple) -> InputLaunches:
    """``cache``'s launches for one config and problem, found by the pointers' alignment alone: every
    other argument is ``fixed`` by the two. C's strides too, as (N, 1): a contiguous C has other
    strides only along a dimension of size 1, whose one index multiplies its stride by 0."""
    check_runnable(problem.device)  # dispatch checks before deciding; a variant run outside it, here once a plan
    options, name = ({}, None) if config is None else (config.options(), config.name)
    return InputLaunches(cache, (problem.device, problem.dtype, name, specialisation(*fixed)), options)


def _pointers(*tensors: torch.Tensor) -> tuple[tuple, tuple]:
    """``(alignment key, addresses)`` of a launch's tensors: whether each is 16-byte aligned, which
    Triton specialises on, and where each is."""
    try:
        addresses = tuple([t.data_ptr() for t in tensors])
    except RuntimeError:
        raise no_memory_error("gemm", "torch.matmul") from None
    return tuple([at % 16 == 0 for at in addresses]), addresses


def _tiles_plan(config: GemmConfig, problem: GemmProblem) -> Callable:
    """``launch(a, b, c)``: one program per output tile (or per SM, persistent)."""
    grid = config.grid_size(problem)
    fixed = (problem.M, problem.N, problem.K, *problem.a_strides, *problem.b_strides, problem.N, 1,
             *config.constexprs())
    launches = _launches(_tiles_launch, config, problem, fixed)

    def launch(a, b, c) -> None:
        key, addresses = _pointers(a, b, c)
        launches.launch(key, grid, (a, b, c, *fixed), (*addresses, *fixed))

    return launch


def _splitk_plan(config: GemmConfig, problem: GemmProblem) -> Callable:
    """Programs (tile, slice) write fp32 partials, a second kernel sums them; one slice: tiles."""
    splits, k_per_split = config.splits(problem)
    if splits == 1:
        return _tiles_plan(config, problem)
    M, N, tiles = problem.M, problem.N, config.tiles(problem)
    fixed = (M, N, problem.K, *problem.a_strides, *problem.b_strides, k_per_split, *config.constexprs())
    sums_fixed, sums_grid = (M * N, splits, _SUM_BLOCK), triton.cdiv(M * N, _SUM_BLOCK)
    products = _launches(_splitk_launch, config, problem, fixed)
    sums = _launches(_sum_splits_launch, None, problem, sums_fixed)

    def launch(a, b, c) -> None:
        partial = torch.empty((splits, M, N), dtype=torch.float32, device=problem.device)
        key, (a_at, b_at, partial_at, c_at) = _pointers(a, b, partial, c)
        products.launch(key[:3], tiles, (a, b, partial, *fixed), (a_at, b_at, partial_at, *fixed), splits)
        sums.launch(key[2:], sums_grid, (partial, c, *sums_fixed), (partial_at, c_at, *sums_fixed))

    return launch


_arrivals: dict[tuple, torch.Tensor] = {}


def _arrival_counters(device: torch.device, count: int) -> torch.Tensor:
    """Zeroed per-tile counters for :func:`_gemm_splitk_fixup_kernel`, one buffer per device and
    stream (kernels on one stream run in order, so they can share it; kernels leave it zeroed).
    Under CUDA graph capture, a buffer of the graph's own that the graph zeroes: graphs may be
    captured on one stream (torch's own, unless given another) and replayed beside each other, or
    outlive the graph whose memory a kept buffer came from."""
    if capturing():
        return torch.zeros(count, dtype=torch.int32, device=device)
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device, stream)
    counters = _arrivals.get(key)
    if counters is None or counters.numel() < count:
        counters = torch.zeros(max(count, 4096), dtype=torch.int32, device=device)
        _arrivals[key] = counters
    return counters


def _splitk_fixup_plan(config: GemmConfig, problem: GemmProblem) -> Callable:
    """Split-K in one launch: the last program of a tile to arrive sums its partials; one slice: tiles."""
    splits, k_per_split = config.splits(problem)
    if splits == 1:
        return _tiles_plan(config, problem)
    tiles = config.tiles(problem)
    fixed = (problem.M, problem.N, problem.K, *problem.a_strides, *problem.b_strides, problem.N, 1, k_per_split,
             splits, *config.constexprs())
    partial_size = tiles * splits * config.block_m * config.block_n
    launches = _launches(_fixup_launch, config, problem, fixed)

    def launch(a, b, c) -> None:
        partial = torch.empty(partial_size, dtype=torch.float32, device=problem.device)
        arrivals = _arrival_counters(problem.device, tiles)
        key, addresses = _pointers(a, b, c, partial, arrivals)
        launches.launch(key, tiles, (a, b, c, partial, arrivals, *fixed), (*addresses, *fixed), splits)

    return launch


_PLANS = {"tiles": _tiles_plan, "splitk": _splitk_plan, "splitk_fixup": _splitk_fixup_plan}


@functools.lru_cache(maxsize=1024)
def _plan(config: GemmConfig, problem: GemmProblem) -> Callable:
    """The call of ``config`` on ``problem`` for :func:`_run_planned` (a bound call keeps its own)."""
    return _planned(_PLANS[config.kind](config, problem), problem)


def _check_described(problem: GemmProblem, a, b) -> None:
    """Refuse operands ``problem`` does not describe: the launches take its shapes and strides."""
    check_operands(problem, (a, b))
    if a.stride() != problem.a_strides or b.stride() != problem.b_strides:
        raise InputError(f"gemm: operand strides {a.stride()}, {b.stride()} differ from the problem's "
                         f"{problem.a_strides}, {problem.b_strides}")


def _check_triton_dot(problem: GemmProblem) -> None:
    """Triton has no bfloat16 dot before compute capability 8.0, and the compiler's own error would
    not say so; ``torch_matmul`` (cuBLAS) serves bfloat16 there, so only seer's kernels refuse it."""
    if problem.dtype == torch.bfloat16 and problem.device.type == "cuda" and _capability(problem.device) < (8, 0):
        raise InputError(f"gemm: seer's Triton kernels need a GPU of compute capability 8.0 or newer for bfloat16; "
                         f"{problem.device} is {'.'.join(map(str, _capability(problem.device)))}: pass "
                         "torch.float16 operands, or variant='torch_matmul'")


def _planned(launch: Callable, problem: GemmProblem) -> Callable:
    """``call(a, b, out=None)``: C by ``launch``, a plan of ``problem``, whose launches pass the problem's
    strides and are keyed by its dtype and device: operands that differ in any of them are refused, not
    misread. Triton compiles, loads and launches on the current GPU, and the launch kept is keyed by the
    operands': where the process sees several GPUs, theirs is made current around the launch (decided
    here once, not on every call)."""
    switch_to = problem.device.index if problem.device.type == "cuda" and several_gpus() else None
    empty = problem.M == 0 or problem.N == 0 or problem.K == 0

    def call(a, b, out=None) -> torch.Tensor:
        _check_described(problem, a, b)
        c = _output(problem, out, a, b)
        if empty:
            _degenerate(problem, c)
        elif switch_to is None or torch._C._cuda_getDevice() == switch_to:
            launch(a, b, c)
        else:
            with torch.cuda.device(switch_to):
                launch(a, b, c)
        return c

    return call


def _run_planned(config: GemmConfig, problem: GemmProblem, a, b, out=None) -> torch.Tensor:
    _check_triton_dot(problem)
    return _plan(config, problem)(a, b, out)


def _bind_planned(config: GemmConfig, problem: GemmProblem) -> Callable:
    """``call(a, b, out=None)`` for dispatch to keep with a cached decision: the plan made once."""
    _check_triton_dot(problem)
    return _planned(_PLANS[config.kind](config, problem), problem)


# triton.set_allocator holds its allocator per thread (a context variable): set in each thread once.
_allocator_in_thread = threading.local()
_tma_fallbacks_told: set[str] = set()


def _allocate_descriptors_in_this_thread() -> None:
    if not getattr(_allocator_in_thread, "set", False):
        triton.set_allocator(_tma_scratch)
        _allocator_in_thread.set = True


def _tma_scratch(size: int, alignment: int, stream):
    """Global memory Triton asks for when a kernel builds tensor descriptors on the device."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def tma_usable(problem: GemmProblem) -> bool:
    """TMA runs on Hopper or newer (or the interpreter) with row-major, 16-byte aligned operands."""
    if problem.device.type == "cuda":
        if _capability(problem.device)[0] < 9:
            return False
    elif not _interpreting():
        return False
    item = problem.dtype.itemsize
    row_major = problem.a_strides[1] == 1 and problem.b_strides[1] == 1
    aligned_rows = all((s * item) % 16 == 0 for s in (problem.a_strides[0], problem.b_strides[0], problem.N))
    return row_major and aligned_rows


def _run_tma(config: GemmConfig, fallback: GemmConfig, problem: GemmProblem, a, b, out=None) -> torch.Tensor:
    """``fallback``: the same tiles with pointer loads, for operands TMA cannot load."""
    _check_triton_dot(problem)
    _check_described(problem, a, b)  # its descriptors take the problem's shape and row-major operands
    if out is not None:
        _check_dense(out)  # its pointer and stride are read below, before _output checks the rest
    # C's base and rows too (``out``'s; a new C is aligned): its descriptor stores there, and a
    # misaligned one faults the CUDA context. One row is contiguous whatever its stride says.
    aligned = all(_address(t) % 16 == 0 for t in (a, b) + (() if out is None else (out,))) and (
        out is None or (out.stride(0) * out.element_size()) % 16 == 0)
    if not (tma_usable(problem) and aligned):
        warn_once(_tma_fallbacks_told, f"{config.name}: TMA needs a Hopper GPU and row-major 16-byte aligned "
                  "operands; running the same tiles with pointer loads (said once per variant)", config.name)
        return _run_planned(fallback, problem, a, b, out)
    c = _output(problem, out, a, b)
    if _degenerate(problem, c):
        return c
    if problem.device.type == "cuda":  # a worker thread of a server too: "no allocator was set" there
        _allocate_descriptors_in_this_thread()
    # On the operands' GPU, as planned calls launch: Triton launches on the current one, and the
    # descriptors' scratch (_tma_scratch) is allocated there.
    with on_device(problem.device):
        through_triton(_gemm_tma_kernel, (config.grid_size(problem),),
                       a, b, c, problem.M, problem.N, problem.K, a.stride(0), b.stride(0), c.stride(0), **config.meta())
    return c


def run_torch_matmul(problem: GemmProblem, a, b, out=None) -> torch.Tensor:
    """The vendor library (cuBLAS on CUDA) through ``torch.matmul``."""
    check_operands(problem, (a, b))  # else torch would resize an out of the problem's shape to other operands'
    if out is None:
        return torch.matmul(a, b)
    return torch.matmul(a, b, out=_output(problem, out, a, b))


_KIND_DOCS = {
    "tiles": "output tiles with pointer loads",
    "splitk": "split-K, partials summed by a second kernel",
    "splitk_fixup": "split-K in one launch, the last program of a tile sums it",
    "tma": "output tiles loaded through TMA tensor descriptors (Hopper)",
}


def _problem_fixed(run: Callable) -> Callable:
    """``bind`` for a variant without a plan whose ``run`` checks the operands itself: that ``run``
    for the problem (dispatch's default call would check them twice)."""
    return lambda problem: functools.partial(run, problem)


def as_variant(config: GemmConfig) -> Variant:
    doc = _KIND_DOCS[config.kind] + (", persistent" if config.persistent else "")
    if config.kind == "tma":  # launched through Triton's path: the descriptors' scratch comes from its allocator
        run = functools.partial(_run_tma, config, replace(config, kind="tiles"))
        return Variant(config.name, run, asdict(config), doc=doc, bind=_problem_fixed(run))
    return Variant(config.name, functools.partial(_run_planned, config), asdict(config), doc=doc,
                   bind=functools.partial(_bind_planned, config))


def _family() -> list[GemmConfig]:
    """The candidate configurations the profile sweep measures (the space the shipped set is cut from)."""
    tiles = [  # (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, GROUP_M)
        (128, 256, 64, 8, 3, 8), (256, 128, 64, 8, 3, 8), (128, 128, 64, 8, 3, 8), (128, 128, 64, 4, 4, 8),
        (128, 128, 32, 4, 4, 8), (128, 128, 64, 8, 3, 1), (128, 128, 64, 8, 3, 16), (128, 64, 64, 4, 4, 8),
        (64, 128, 64, 4, 4, 8), (64, 64, 64, 4, 4, 8), (64, 64, 128, 4, 3, 8), (64, 256, 64, 8, 3, 8),
        (32, 64, 128, 4, 4, 1), (32, 128, 64, 4, 4, 1), (16, 64, 128, 4, 4, 1), (16, 128, 128, 4, 4, 1),
        (16, 256, 64, 4, 4, 1),
    ]
    persistent = [(128, 256, 64, 8, 3, 8, 1), (128, 128, 64, 8, 3, 8, 1), (128, 128, 64, 4, 4, 8, 2),
                  (128, 64, 64, 4, 4, 8, 2), (64, 128, 64, 4, 4, 8, 2), (64, 64, 64, 4, 4, 8, 2)]
    splitk = [  # (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, GROUP_M, split_k)
        (16, 64, 128, 4, 4, 1, 4), (16, 64, 128, 4, 4, 1, 8), (16, 64, 128, 4, 4, 1, 16),
        (16, 128, 128, 4, 4, 1, 4), (16, 128, 128, 4, 4, 1, 8), (32, 64, 128, 4, 4, 1, 4),
        (32, 64, 128, 4, 4, 1, 8), (64, 64, 64, 4, 4, 8, 2), (64, 64, 64, 4, 4, 8, 4), (64, 64, 64, 4, 4, 8, 8),
        (64, 128, 64, 4, 4, 8, 2), (64, 128, 64, 4, 4, 8, 4), (128, 128, 64, 8, 3, 8, 2), (128, 128, 64, 8, 3, 8, 4),
    ]
    splitk_fixup = [  # as splitk; one launch (the last program of a tile sums it)
        (16, 64, 128, 4, 4, 1, 4), (16, 64, 128, 4, 4, 1, 8), (16, 64, 128, 4, 4, 1, 16), (16, 128, 128, 4, 4, 1, 4),
        (16, 128, 128, 4, 4, 1, 8), (16, 64, 256, 4, 3, 1, 8), (32, 64, 128, 4, 4, 1, 8), (64, 64, 64, 4, 4, 8, 4),
    ]
    tma = [(128, 256, 64, 8, 3, 8, False), (128, 128, 64, 8, 3, 8, False), (128, 128, 64, 4, 4, 8, False),
           (64, 128, 64, 4, 4, 8, False), (16, 128, 128, 4, 4, 1, False), (128, 256, 64, 8, 3, 8, True),
           (128, 128, 64, 8, 3, 8, True)]
    return ([GemmConfig("tiles", *t) for t in tiles]
            + [GemmConfig("tiles", *p[:6], persistent=True, occupancy=p[6]) for p in persistent]
            + [GemmConfig("splitk", *s) for s in splitk]
            + [GemmConfig("splitk_fixup", *s) for s in splitk_fixup]
            + [GemmConfig("tma", *t[:6], persistent=t[6]) for t in tma])


TORCH_MATMUL = Variant("torch_matmul", run_torch_matmul, {"kind": "vendor"}, doc=run_torch_matmul.__doc__,
                       bind=_problem_fixed(run_torch_matmul))
CANDIDATES: dict[str, Variant] = {"torch_matmul": TORCH_MATMUL, **{c.name: as_variant(c) for c in _family()}}

# Shipped subset: the greedy cover (greedy_cover, k=12) of a sweep on an H100 (torch 2.11, triton
# 3.6; 140 shapes, benchmarks/gemm_profile.py); it reaches 0.9998 of the oracle over every
# candidate, torch_matmul alone 0.981. Re-cut it from a new sweep with the same function.
SHIPPED = (
    "torch_matmul", "splitk4fix_16x64x128_w4s4g1", "tile_16x128x128_w4s4g1", "tile_64x256x64_w8s3g8",
    "tile_64x64x64_w4s4g8", "tma_persistent_128x256x64_w8s3g8", "splitk16fix_16x64x128_w4s4g1",
    "tile_16x64x128_w4s4g1", "splitk2_64x64x64_w4s4g8", "tile_persistent_64x128x64_w4s4g8",
    "splitk4fix_16x128x128_w4s4g1", "tma_16x128x128_w4s4g1",
)
VARIANTS: dict[str, Variant] = {name: CANDIDATES[name] for name in SHIPPED}


# ---------------------------------------------------------------- choosing the shipped set
def _unmeasured_as_inf(times) -> np.ndarray:
    times = np.asarray(times, dtype=float)
    return np.where(np.isnan(times), np.inf, times)


def oracle_fraction(times: np.ndarray, chosen: list[int]) -> float:
    """Geometric mean over shapes of (best time over all configs) / (best time over ``chosen``).

    ``times`` is [n_shapes, n_configs]; NaN (failed or not measured) counts as never best.
    """
    times = _unmeasured_as_inf(times)
    with np.errstate(divide="ignore"):  # a shape no chosen config ran on scores 0
        return float(np.exp(np.mean(np.log(times.min(axis=1) / times[:, chosen].min(axis=1)))))


def greedy_cover(times: np.ndarray, k: int) -> list[int]:
    """Up to ``k`` config columns picked one at a time, each raising :func:`oracle_fraction` the most."""
    times = _unmeasured_as_inf(times)
    if times.ndim != 2 or 0 in times.shape or not np.isfinite(times.min(axis=1)).all():
        raise InputError("greedy_cover needs a [shapes, configs] table, with at least one of each, and a finite "
                         f"time on every shape; got shape {times.shape}")
    chosen: list[int] = []
    for _ in range(min(k, times.shape[1])):
        rest = [j for j in range(times.shape[1]) if j not in chosen]
        chosen.append(max(rest, key=lambda j: oracle_fraction(times, chosen + [j])))
    return chosen


# ---------------------------------------------------------------- dispatch contract
def split(inputs):
    """``(a, b)`` -> ``((a, b), (a, b))``: the choice depends on shapes, dtypes and strides only."""
    operands = _operand_pair(inputs)
    return operands, operands


def _operand_pair(inputs) -> tuple:
    """``inputs`` as the tuple ``(a, b)``; anything else (three tensors, one) an InputError saying so."""
    if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
        got = f"{len(inputs)} inputs" if isinstance(inputs, (tuple, list)) else f"a {type(inputs).__name__}"
        raise InputError(f"gemm takes inputs (a, b): a [M, K] and b [K, N] tensor, got {got}")
    return tuple(inputs)


# A cached decision need not hold the operands it was made for: its key names none of them by id.
KEYS_BY_VALUE = True


def cache_key(source):
    """Shapes, strides, dtypes and devices: everything :func:`problem` reads, as the identity of a
    problem with no further state. None for non-tensors and tensors without strides."""
    a, b = source
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.layout is not torch.strided or (
            b.layout is not torch.strided):
        return None  # no strides to key on: problem() refuses them
    try:
        return (a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, a.device, b.device), ()
    except RuntimeError:  # a nested tensor of strided layout has neither sizes nor strides: problem() refuses it
        return None


def problem(source) -> GemmProblem:
    """Validate ``(a, b)`` and describe the product."""
    a, b = _operand_pair(source)
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise InputError(f"gemm: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.layout != torch.strided:
            raise InputError(f"gemm: {name} is a {t.layout} tensor; seer's GEMM takes dense tensors (.to_dense())")
        if t.is_nested:
            raise InputError(f"gemm: {name} is a nested tensor; seer's GEMM takes dense 2-D tensors")
        if t.is_meta:
            raise InputError(f"gemm: {name} is a meta tensor, which holds no values for the kernels to read")
        if t.dim() != 2:
            raise InputError(f"gemm: {name} must be 2-D, got shape {tuple(t.shape)}")
        if t.dtype not in SUPPORTED_DTYPES:
            raise InputError(f"gemm: {name} has dtype {t.dtype}; seer's GEMM takes torch.float16 or torch.bfloat16")
    if a.shape[1] != b.shape[0]:
        raise InputError(f"gemm: inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise InputError(f"gemm: a is {a.dtype} but b is {b.dtype}; convert one so they match")
    if a.device != b.device:
        raise InputError(f"gemm: a is on {a.device} but b is on {b.device}")
    # CPU tensors without the interpreter are refused when a variant is to run (seer.launch's
    # check_runnable); a choice is explained on them alone.
    return GemmProblem(a.shape[0], b.shape[1], a.shape[1], a.dtype, a.device, tuple(a.stride()), tuple(b.stride()),
                       sm_count(a.device))


def check_operands(problem: GemmProblem, operands) -> None:
    """Cheap check that ``(a, b)`` still match the cached problem: every cached call passes here, so the
    common case is decided in one expression."""
    a, b = operands
    dtype, device = problem.dtype, problem.device
    if (a.shape == (problem.M, problem.K) and b.shape == (problem.K, problem.N) and a.dtype == dtype
            and b.dtype == dtype and a.device == device and b.device == device
            and not (a.requires_grad or b.requires_grad or a.is_neg() or b.is_neg() or dual_level_open())):
        return
    if (tuple(a.shape), tuple(b.shape)) != ((problem.M, problem.K), (problem.K, problem.N)):
        raise InputError(f"gemm: operands {tuple(a.shape)} @ {tuple(b.shape)} do not match the problem "
                         f"{problem.M}x{problem.K} @ {problem.K}x{problem.N}")
    if a.dtype != dtype or b.dtype != dtype or a.device != device or b.device != device:
        raise InputError("gemm: operand dtype or device changed since the problem was examined")
    check_not_negated("gemm", a=a, b=b)
    check_no_grad("gemm", a=a, b=b)  # passes under torch.no_grad() outside forward mode


def reference(problem: GemmProblem, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A B in float64 on the operands' device."""
    return torch.matmul(a.double(), b.double())


def examples() -> list[tuple]:
    """Small inputs ``(a, b)`` as ``seer.dispatch("gemm", ...)`` takes them, for the registry's
    contract test (tests/test_contract.py), sized against the shipped blocks (BLOCK_M 16-128,
    BLOCK_N 64-256, BLOCK_K 64-128) and the interpreter's :data:`INTERPRETER_SMS` (4):

    * bf16 and fp16 33x47 @ 47x29: no size a multiple of a block or of 16 bytes (the TMA variants
      fall back to pointer loads), every edge masked;
    * bf16 20x296 @ 296x264, of 16-byte rows (the TMA variants load through descriptors): the K
      loop runs 3 to 5 times, its last step part past K; 2 to 5 output tiles along N, and 2 along M
      for BLOCK_M 16; the split-K variants take 3 slices of one step (``splitk2``: 2, of 3 and 2);
    * bf16 3x64 @ 64x1032, skinny, of 16-byte rows: 5 to 17 tiles along N, more than the persistent
      variants launch programs (4 SMs x occupancy), so that a program loops to a second tile
      (``tma_persistent_128x256``: 5 tiles on 4 programs, through descriptors;
      ``tile_persistent_64x128``: 9 on 8).

    Values of either sign and away from 0, so that a term left out cannot match the reference by
    chance. Seeded: the same inputs every call."""
    gen = torch.Generator().manual_seed(0)
    return [(example_values(m, k, generator=gen).to(dtype), example_values(k, n, generator=gen).to(dtype))
            for m, k, n, dtype in ((33, 47, 29, torch.bfloat16), (33, 47, 29, torch.float16),
                                   (20, 296, 264, torch.bfloat16), (3, 64, 1032, torch.bfloat16))]


# ---------------------------------------------------------------- LLM shape suite
@dataclass(frozen=True)
class LinearLayer:
    """A weight GEMM of a transformer: tokens x ``k`` activations times a ``k`` x ``n`` weight."""

    model: str
    layer: str
    n: int
    k: int
    tokens_per_token: float = 1.0  # Mixture-of-experts: share of the tokens one expert sees


LLM_LAYERS = tuple(
    LinearLayer(model, layer, n, k, share)
    for model, hidden, qkv, ffn, vocab, share in (
        # model, hidden size, fused QKV width (grouped-query attention), MLP width, vocabulary, expert share
        ("llama-8b", 4096, 6144, 14336, 128256, 1.0),
        ("qwen-14b", 5120, 7168, 13824, 152064, 1.0),
        ("llama-70b", 8192, 10240, 28672, 128256, 1.0),
        ("mixtral-8x7b", 4096, 6144, 14336, 32000, 0.25),  # 8 experts, top-2 routing
    )
    for layer, n, k in (("qkv", qkv, hidden), ("o", hidden, hidden), ("mlp_up", 2 * ffn, hidden),
                        ("mlp_down", hidden, ffn), ("lm_head", vocab, hidden))
    if share == 1.0 or layer.startswith("mlp")  # experts only replace the MLP
)
LLM_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384)


def llm_shapes(tokens=LLM_TOKENS, max_flops: float = float("inf")) -> list[tuple[str, int, int, int]]:
    """(group, M, N, K) for every layer of :data:`LLM_LAYERS` at every token count.

    ``group`` is ``model/layer``, the family a cross-validation split keeps together. Shapes over
    ``max_flops`` (2 M N K) are left out.
    """
    shapes = []
    for layer in LLM_LAYERS:
        for t in tokens:
            m = max(1, round(t * layer.tokens_per_token))
            if 2.0 * m * layer.n * layer.k <= max_flops:
                shapes.append((f"{layer.model}/{layer.layer}", m, layer.n, layer.k))
    return sorted(set(shapes), key=shapes.index)
