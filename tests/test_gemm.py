"""GEMM op on the CPU: Triton kernels under the interpreter against float64, contract, features."""
import functools
import math
import re
import sys
import warnings

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import seer
from seer.errors import InputError, SeerWarning
from seer.features import gemm as features
from seer.kernels import gemm
from seer.registry import get_op

DTYPES = (torch.float16, torch.bfloat16)
SHAPES = (
    (1, 72, 300),  # decode: one token
    (37, 50, 70),  # nothing a multiple of a block
    (130, 260, 24),  # K shorter than every BLOCK_K, several tiles each way
    (5, 40, 1000),  # skinny with a long K: split-K splits for real
)


def operands(m, n, k, dtype, seed=0, b_column_major=False, a_column_major=False):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen).to(dtype)
    b = torch.randn(k, n, generator=gen).to(dtype)
    if a_column_major:
        a = a.T.contiguous().T
    if b_column_major:
        b = b.T.contiguous().T
    return a, b


# A few times the rounding of the 16-bit output alone (2.1e-4 for float16, 3.4e-3 for bfloat16 on
# these shapes): a kernel that rounds its float32 sums to 16 bits along the way, or accumulates
# in 16 bits, passes the error of bfloat16 but not this.
TOLERANCE = {torch.float16: 1e-3, torch.bfloat16: 8e-3}


def relative_error(c, a, b):
    ref = a.double() @ b.double()
    return ((c.double() - ref).norm() / ref.norm()).item()


def run_poisoned(variant, a, b):
    p = gemm.problem((a, b))
    out = torch.full((p.M, p.N), float("nan"), dtype=a.dtype)
    c = variant.run(p, a, b, out=out)
    assert c.data_ptr() == out.data_ptr()
    return c


# ---------------------------------------------------------------- shared device helpers
@triton.jit
def _one_tile_per_program(a_ptr, b_ptr, c_ptr, M, N, K, k_start, k_end, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = gemm.tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = gemm.matmul_tile(a_ptr, b_ptr, M, N, K, K, 1, N, 1, pid_m, pid_n, k_start, k_end, BLOCK_M, BLOCK_N, BLOCK_K)
    gemm.store_tile(c_ptr, acc, M, N, N, 1, pid_m, pid_n, BLOCK_M, BLOCK_N)


@triton.jit
def _record_coords(out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    tile = tl.program_id(0)
    pid_m, pid_n = gemm.tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    tl.store(out_ptr + 2 * tile, pid_m)
    tl.store(out_ptr + 2 * tile + 1, pid_n)


def coords(m, n, block, group):
    tiles_m, tiles_n = triton.cdiv(m, block), triton.cdiv(n, block)
    out = torch.full((tiles_m * tiles_n, 2), -1, dtype=torch.int32)
    _record_coords[(tiles_m * tiles_n,)](out, m, n, BLOCK_M=block, BLOCK_N=block, GROUP_M=group)
    return [tuple(r) for r in out.tolist()]


def test_tile_coords_group_1_is_row_major():
    assert coords(48, 64, 16, 1) == [(i, j) for i in range(3) for j in range(4)]


def test_tile_coords_groups_rows_and_visits_every_tile_once():
    order = coords(80, 48, 16, 2)  # 5 x 3 tiles; the last group holds a single row
    assert order[:6] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    assert order[-3:] == [(4, 0), (4, 1), (4, 2)]
    assert sorted(order) == [(i, j) for i in range(5) for j in range(3)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n,k", [(1, 33, 17), (37, 50, 70), (64, 64, 64)], ids=str)
def test_matmul_tile_against_float64(m, n, k, dtype):
    a, b = operands(m, n, k, dtype)
    c = torch.full((m, n), float("nan"), dtype=dtype)
    grid = (triton.cdiv(m, 16) * triton.cdiv(n, 16),)
    _one_tile_per_program[grid](a, b, c, m, n, k, 0, k, BLOCK_M=16, BLOCK_N=16, BLOCK_K=32, GROUP_M=3)
    assert relative_error(c, a, b) < TOLERANCE[a.dtype]


def test_matmul_tile_k_range_and_zero_edges():
    """A K slice not on a block boundary, k_end past K, and zero rows/columns past M and N."""
    a, b = operands(20, 24, 50, torch.float16)
    c = torch.full((20, 24), float("nan"), dtype=torch.float32)
    grid = (triton.cdiv(20, 16) * triton.cdiv(24, 16),)
    _one_tile_per_program[grid](a, b, c, 20, 24, 50, 10, 999, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=1)
    ref = a[:, 10:].double() @ b[10:].double()
    assert torch.allclose(c.double(), ref, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- variants
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n,k", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(gemm.VARIANTS))
def test_shipped_variant_against_float64(name, m, n, k, dtype):
    a, b = operands(m, n, k, dtype, seed=m + n + k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)  # TMA falls back on unaligned shapes
        c = run_poisoned(gemm.VARIANTS[name], a, b)
    assert relative_error(c, a, b) < TOLERANCE[a.dtype]


def test_every_candidate_against_float64():
    a, b = operands(19, 136, 200, torch.bfloat16)
    for variant in gemm.CANDIDATES.values():
        assert relative_error(run_poisoned(variant, a, b), a, b) < TOLERANCE[a.dtype], variant.name


def sums_16_bits_would_lose(m, n, k, dtype, device="cpu", cancel=True):
    """(a, b) whose products add up to a large term at the start of K, its negative half-way
    (``cancel``), and many small ones, every BLOCK_K slice's share under half a 16-bit step at that
    size: a kernel that keeps its running sums in 16 bits loses the small ones added while the large
    term stands, and a split-K kernel whose partial sums are stored in 16 bits loses those of each
    half's slice (the slices of every split count here meet at K / 2), either way several percent
    of a result the two large terms cancel out of exactly: past TOLERANCE. One that keeps float32
    sums (IEEE's, as the interpreter does) and rounds once at the end does not. Without ``cancel``
    the large term stands to the end: a loss of 0.4% in float16, 3% in bfloat16. The GPU tests
    take that one: the tensor cores' float32 sums align each product to the running sum's exponent
    and drop the bits below, so small products added under a large term lose a little each, which
    a cancelled result shows though no sum is kept in 16 bits: on an H200 (session 53, float16 /
    bfloat16) cuBLAS reads 1.3% / 0.23% on it and a 128x256 tile 1.45% / 0.25%, float32 operands
    1.2e-4 / 1.5e-5; with the term standing, 2.9e-5 / 3.2e-4 for both. a is in [0.5, 1.5), never zero."""
    gen = torch.Generator().manual_seed(k)
    big = 2048.0 if dtype == torch.float16 else 256.0  # where the 16-bit step becomes 2
    a = (0.5 + torch.rand(m, k, generator=gen)).to(dtype)
    b = torch.rand(k, n, generator=gen) / 512  # a slice of 256 adds under 0.75: rounded away at `big`
    b[0] = big
    if cancel:
        b[k // 2] = -big
        a[:, k // 2] = a[:, 0]  # so that the large terms cancel exactly
    return a.to(device), b.to(dtype).to(device)


def seers_candidates(one_per_kernel: bool = False):
    """seer's own GEMM candidates; ``one_per_kernel``: the first of each kernel (the name before its
    tile, split count dropped), which is what the interpreter has time for (the GPU tests take all)."""
    mine = [variant for name, variant in gemm.CANDIDATES.items() if name != "torch_matmul"]
    if not one_per_kernel:
        return mine
    return list({re.sub(r"\d+", "", variant.name.rsplit("_", 2)[0]): variant for variant in reversed(mine)}.values())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_kernel_keeps_its_running_sums_in_float32(dtype):
    """The tolerances alone let a kernel accumulating in 16 bits pass on short K."""
    a, b = sums_16_bits_would_lose(16, 64, 8192, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)  # TMA falls back here
        for variant in seers_candidates(one_per_kernel=True):
            assert relative_error(run_poisoned(variant, a, b), a, b) < TOLERANCE[dtype], variant.name


@pytest.mark.parametrize("name", ["tile_64x64x64_w4s4g8", "splitk4_16x64x128_w4s4g1", "splitk4fix_16x64x128_w4s4g1",
                                  "torch_matmul"])
def test_column_major_b(name):
    a, b = operands(9, 40, 130, torch.float16, b_column_major=True)
    assert b.stride() == (1, 130)
    assert relative_error(run_poisoned(gemm.CANDIDATES[name], a, b), a, b) < TOLERANCE[a.dtype]


@pytest.mark.parametrize("name", [*sorted(gemm.VARIANTS), "splitk4_16x64x128_w4s4g1"])
@pytest.mark.parametrize("b_column_major", [False, True], ids=["b_rows", "b_columns"])
def test_column_major_a(name, b_column_major):
    """Every launch passes A's strides: a kernel reading A's row stride as K was right on the row-major
    A of every other test (a review's mutation passed them all)."""
    a, b = operands(37, 50, 70, torch.float16, a_column_major=True, b_column_major=b_column_major)
    assert a.stride() == (1, 37)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)  # TMA falls back on a column-major A
        assert relative_error(run_poisoned(gemm.CANDIDATES[name], a, b), a, b) < TOLERANCE[a.dtype]


def test_splitk_uses_fewer_slices_when_k_is_short():
    config = gemm.GemmConfig("splitk", 16, 64, 128, 4, 4, 1, split_k=16)
    p = gemm.problem(operands(4, 64, 300, torch.float16))
    assert config.splits(p) == (3, 128)  # 3 blocks of K: 3 slices of one block each
    p = gemm.problem(operands(4, 64, 5000, torch.float16))
    splits, per_split = config.splits(p)
    assert splits == 14 and per_split == 3 * 128 and (splits - 1) * per_split < 5000 <= splits * per_split


def test_splitk_without_room_for_partials_runs_unsplit(monkeypatch):
    monkeypatch.setattr(gemm, "SPLITK_WORKSPACE_BYTES", 4 * 40 * 5)  # one [5, 40] fp32 partial
    a, b = operands(5, 40, 1000, torch.bfloat16)
    variant = gemm.CANDIDATES["splitk8_16x64x128_w4s4g1"]
    assert variant.params["split_k"] == 8
    assert gemm.GemmConfig(**variant.params).splits(gemm.problem((a, b)))[0] == 1
    assert relative_error(run_poisoned(variant, a, b), a, b) < TOLERANCE[a.dtype]


@pytest.mark.parametrize("m,n,k", [(1, 72, 300), (37, 50, 700)], ids=str)
def test_one_launch_splitk_sums_partials_and_rearms_its_counters(m, n, k):
    config = gemm.GemmConfig("splitk_fixup", 16, 32, 64, 4, 3, 1, split_k=4)
    a, b = operands(m, n, k, torch.bfloat16)
    first = run_poisoned(gemm.as_variant(config), a, b)
    assert config.splits(gemm.problem((a, b)))[0] > 1
    assert relative_error(first, a, b) < TOLERANCE[a.dtype]
    assert not gemm._arrival_counters(torch.device("cpu"), 1).any()  # zeroed for the next launch
    assert torch.equal(run_poisoned(gemm.as_variant(config), a, b), first)


def test_persistent_programs_loop_over_tiles():
    a, b = operands(100, 300, 40, torch.float16)
    config = gemm.GemmConfig("tiles", 16, 32, 32, 4, 2, 4, persistent=True)
    p = gemm.problem((a, b))
    assert config.grid_size(p) == gemm.INTERPRETER_SMS < 7 * 10
    assert relative_error(run_poisoned(gemm.as_variant(config), a, b), a, b) < TOLERANCE[a.dtype]


def test_tma_runs_on_aligned_operands_and_falls_back_otherwise(monkeypatch):
    variant = gemm.CANDIDATES["tma_64x128x64_w4s4g8"]
    a, b = operands(33, 72, 40, torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeerWarning)  # seer's: triton 3.6's interpreter warns for numpy
        assert relative_error(run_poisoned(variant, a, b), a, b) < TOLERANCE[a.dtype]
    a, b = operands(33, 70, 40, torch.bfloat16)  # a row of B is 140 bytes: not 16-byte aligned
    monkeypatch.setattr(gemm, "_tma_fallbacks_told", set())
    with pytest.warns(SeerWarning, match="pointer loads"):
        assert relative_error(run_poisoned(variant, a, b), a, b) < TOLERANCE[a.dtype]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeerWarning)  # said once
        assert relative_error(run_poisoned(variant, a, b), a, b) < TOLERANCE[a.dtype]


@pytest.mark.parametrize("misalign", ["base", "row"])
def test_tma_falls_back_for_an_out_its_descriptor_cannot_store_to(monkeypatch, misalign):
    """C's descriptor stores at out's base with out's row stride: a base off 16 bytes (an H200 raised a
    sticky misaligned-address error) or a one-row out whose stride is not a multiple of 16 bytes runs
    with pointer loads instead."""
    variant = gemm.CANDIDATES["tma_64x128x64_w4s4g8"]
    m = 33 if misalign == "base" else 1
    a, b = operands(m, 72, 40, torch.bfloat16)
    if misalign == "base":
        out = torch.full((m * 72 + 8,), float("nan"), dtype=torch.bfloat16)[1:1 + m * 72].view(m, 72)
    else:
        out = torch.full((1, 81), float("nan"), dtype=torch.bfloat16)[:, :72]  # row stride 162 bytes
    assert out.is_contiguous()
    launched, pointer_loads = [], gemm._run_planned

    def spied(*args, **kwargs):
        launched.append(True)
        return pointer_loads(*args, **kwargs)

    monkeypatch.setattr(gemm, "_run_planned", spied)
    monkeypatch.setattr(gemm, "_tma_fallbacks_told", set())
    with pytest.warns(SeerWarning, match="pointer loads"):
        result = variant.run(gemm.problem((a, b)), a, b, out=out)
    assert launched and result is out and relative_error(out, a, b) < TOLERANCE[a.dtype]


@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
@pytest.mark.parametrize("m,n,k", [(3, 5, 0), (0, 5, 700), (3, 0, 700), (0, 0, 0)], ids=str)
@pytest.mark.parametrize("name", sorted(gemm.VARIANTS))
def test_empty_products(name, m, n, k):
    """K = 0 gives zeros (out filled with NaN first); M or N = 0 an empty C, with or without out.
    A split-K variant once sized its slices by C's tiles first and divided by none."""
    variant = gemm.VARIANTS[name]
    a, b = operands(m, n, k, torch.float16)
    assert torch.equal(run_poisoned(variant, a, b), torch.zeros(m, n, dtype=torch.float16))
    assert variant.run(gemm.problem((a, b)), a, b).shape == (m, n)


@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
def test_splitk_slices_of_an_empty_product():
    a, b = operands(0, 5, 700, torch.float16)
    assert gemm.GemmConfig("splitk", 16, 64, 128, 4, 4, split_k=4).splits(gemm.problem((a, b))) == (3, 256)


@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
def test_out_that_requires_grad_is_refused_while_autograd_is_on():
    """Every variant alike (torch.matmul's out= raised torch's own error, a Triton kernel wrote it
    silently), as for a and b; under torch.no_grad() it is written."""
    a, b = operands(4, 8, 16, torch.float16)
    p = gemm.problem((a, b))
    for variant in gemm.VARIANTS.values():
        out = torch.zeros(4, 8, dtype=torch.float16, requires_grad=True)
        with pytest.raises(InputError, match="gemm: out requires grad"):
            variant.run(p, a, b, out=out)
        with torch.no_grad():
            variant.run(p, a, b, out=out)
        assert relative_error(out.detach(), a, b) < TOLERANCE[a.dtype], variant.name


def test_out_must_match():
    a, b = operands(4, 8, 16, torch.float16)
    p = gemm.problem((a, b))
    run = gemm.VARIANTS["tile_64x64x64_w4s4g8"].run
    with pytest.raises(InputError, match="4x8"):
        run(p, a, b, out=torch.empty(8, 4, dtype=torch.float16))
    with pytest.raises(InputError, match="contiguous"):
        run(p, a, b, out=torch.empty(8, 4, dtype=torch.float16).T)



@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
def test_out_overlapping_an_operand_is_refused():
    """C written over a or b while they are read would be silently wrong: every variant refuses,
    the operands left as they were."""
    a, b = operands(8, 8, 8, torch.float16)
    p = gemm.problem((a, b))
    kept = (a.clone(), b.clone())
    for variant in gemm.VARIANTS.values():
        for out, name in ((a, "a"), (b, "b")):
            with pytest.raises(InputError, match=f"overlaps {name}"):
                variant.run(p, a, b, out=out)
    assert torch.equal(a, kept[0]) and torch.equal(b, kept[1])


def test_out_check_agrees_with_numpy_on_views_of_one_buffer():
    """The spans' arithmetic against numpy's bounds test (``may_share_memory``), on operands that are
    random strided views of the buffer C is cut from: adjacent, interleaved, empty and apart."""
    rng = np.random.default_rng(0)
    buffer = torch.randn(600, dtype=torch.float16)
    refused = 0
    for _ in range(400):
        m, n, k = (int(v) for v in rng.integers(0, 5, size=3))
        p = gemm.problem((torch.empty(m, k, dtype=torch.float16), torch.empty(k, n, dtype=torch.float16)))
        c = buffer[int(rng.integers(0, 60)):][:m * n].view(m, n)
        a, b = (torch.as_strided(buffer, shape, [int(v) for v in rng.integers(0, 20, size=2)],
                                 int(rng.integers(0, 60))) for shape in ((m, k), (k, n)))
        expected = next((name for name, operand in (("a", a), ("b", b))
                         if np.may_share_memory(operand.numpy(), c.numpy())), None)
        if expected is None:
            gemm._check_apart(p, c, a, b)
        else:
            refused += 1
            with pytest.raises(InputError, match=f"overlaps {expected}"):
                gemm._check_apart(p, c, a, b)
    assert 100 < refused < 300, refused  # both answers were tested


# ---------------------------------------------------------------- dispatch contract
def test_split_cache_key_problem_and_reference():
    a, b = operands(6, 10, 8, torch.bfloat16)
    source, ops = gemm.split((a, b))
    p = gemm.problem(source)
    assert (p.M, p.N, p.K, p.dtype, p.num_sms) == (6, 10, 8, torch.bfloat16, gemm.INTERPRETER_SMS)
    gemm.check_operands(p, ops)
    key = gemm.cache_key(source)
    assert key == gemm.cache_key(operands(6, 10, 8, torch.bfloat16, seed=1))  # values do not matter
    assert key != gemm.cache_key(operands(6, 10, 8, torch.float16))
    assert key != gemm.cache_key(operands(6, 10, 8, torch.bfloat16, b_column_major=True))
    assert gemm.cache_key((a.float().numpy(), b)) is None
    ref = gemm.reference(p, *ops)
    assert ref.dtype == torch.float64 and torch.allclose(ref, a.double() @ b.double())


@pytest.mark.parametrize("inputs,message", [
    (lambda: (torch.ones(2, 3, 4, dtype=torch.float16), torch.ones(4, 5, dtype=torch.float16)), "2-D"),
    (lambda: (torch.ones(2, 3, dtype=torch.float16), torch.ones(4, 5, dtype=torch.float16)), "inner dimensions"),
    (lambda: (torch.ones(2, 3), torch.ones(3, 5)), "float16 or torch.bfloat16"),
    (lambda: (torch.ones(2, 3, dtype=torch.float16), torch.ones(3, 5, dtype=torch.bfloat16)), "convert"),
    (lambda: (torch.ones(2, 3, dtype=torch.float16), torch.ones(3, 5, dtype=torch.float16, device="meta")), "meta"),
    (lambda: (np.ones((2, 3)), torch.ones(3, 5, dtype=torch.float16)), "torch.Tensor"),
    (lambda: (torch.ones(2, 3, dtype=torch.float16).to_sparse_csr(), torch.ones(3, 5, dtype=torch.float16)),
     "a is a torch.sparse_csr tensor; seer's GEMM takes dense tensors"),
    (lambda: (torch.ones(2, 3, dtype=torch.float16), torch.ones(3, 5, dtype=torch.float16).to_sparse()),
     "b is a torch.sparse_coo tensor"),
], ids=["3-D", "inner", "fp32", "mixed", "devices", "numpy", "sparse-csr", "sparse-coo"])
def test_bad_inputs_raise(inputs, message):
    with pytest.raises(InputError, match=message):
        gemm.problem(gemm.split(inputs())[0])
    with pytest.raises(InputError, match=message):  # through dispatch: no strides to key the cache on
        seer.dispatch("gemm", inputs())


@pytest.mark.parametrize("capability, refused", [((7, 5), True), ((8, 0), False), ((9, 0), False)])
def test_bfloat16_before_ampere_is_refused_by_seer_s_kernels_alone(monkeypatch, capability, refused):
    """Triton has no bfloat16 dot before compute capability 8.0: a compiler error that names neither.
    cuBLAS serves bfloat16 there, so the problem and ``torch_matmul`` take it. Fake CUDA tensors stand
    for a GPU's, the capability is the one asked of that GPU."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setattr(gemm, "_capability", lambda device: capability)
    monkeypatch.setattr(gemm, "sm_count", lambda device: 132)
    with FakeTensorMode():
        a, b = torch.empty(4, 8, dtype=torch.bfloat16, device="cuda"), torch.empty(8, 16, dtype=torch.bfloat16, device="cuda")
    problem = gemm.problem((a, b))
    assert problem.dtype == torch.bfloat16 and callable(gemm.VARIANTS["torch_matmul"].bind(problem))
    tile = next(name for name, v in gemm.VARIANTS.items() if v.params.get("kind") == "tiles")
    tma = next(name for name, v in gemm.VARIANTS.items() if v.params.get("kind") == "tma")
    message = (r"gemm: seer's Triton kernels need a GPU of compute capability 8\.0 or newer for bfloat16; cuda:0 "
               r"is 7\.5: pass torch\.float16 operands, or variant='torch_matmul'")
    if refused:
        for refusal in (lambda: gemm.VARIANTS[tile].bind(problem), lambda: gemm.VARIANTS[tile].run(problem, a, b),
                        lambda: gemm.VARIANTS[tma].run(problem, a, b)):
            with pytest.raises(InputError, match=message):
                refusal()
    else:
        gemm._check_triton_dot(problem)


def test_negated_views_are_refused_as_operands_and_as_out():
    """The kernels read and write memory, which holds the other sign of such a view (``z.conj().imag``;
    torch._neg_view makes one of any dtype)."""
    a, b = operands(8, 16, 32, torch.float16)
    seer.dispatch("gemm", (a, b))  # cached: the per-call check refuses too
    with pytest.raises(InputError, match=r"gemm: a is a negated view .* a.resolve_neg\(\)"):
        seer.dispatch("gemm", (torch._neg_view(a), b))
    with pytest.raises(InputError, match=r"gemm: b is a negated view"):
        seer.dispatch("gemm", (a, torch._neg_view(b)))
    with pytest.raises(InputError, match=r"gemm: out is a negated view"):
        seer.dispatch("gemm", (a, b), out=torch._neg_view(torch.zeros(8, 16, dtype=torch.float16)))


def test_split_needs_two_inputs():
    with pytest.raises(InputError, match=r"\(a, b\)"):
        gemm.split((torch.ones(2, 2),))


def test_problem_needs_two_inputs():
    """problem((a, b, b)) raised tuple unpacking's ValueError, and problem(a) read a's rows as (a, b)."""
    a = torch.ones(2, 2, dtype=torch.float16)
    with pytest.raises(InputError, match=r"gemm takes inputs \(a, b\).*got 3 inputs"):
        gemm.problem((a, a, a))
    with pytest.raises(InputError, match=r"gemm takes inputs \(a, b\).*got a Tensor"):
        gemm.problem(a)
    with pytest.raises(InputError, match=r"gemm takes inputs \(a, b\).*got 3 inputs"):
        seer.dispatch("gemm", (a, a, a))


def test_cpu_tensors_are_described_without_the_interpreter(monkeypatch):
    """A choice reads the problem alone (`seer explain` on a CPU shell); running on CPU tensors
    without the interpreter is refused by dispatch (test_dispatch's test_cpu_inputs_need_the_interpreter)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    a, b = operands(2, 3, 4, torch.float16)
    p = gemm.problem((a, b))
    assert (p.M, p.N, p.K, p.dtype) == (2, 3, 4, torch.float16) and not gemm.tma_usable(p)
    # A Triton variant run outside dispatch on them: refused by name, not "0 active drivers"
    monkeypatch.setattr(sys.modules["seer.launch"], "INTERPRETING", False)
    with pytest.raises(InputError, match=r"inputs are on the CPU; seer's Triton kernels run on CUDA GPUs, or on the CPU "
                                         r"only under the Triton interpreter: set TRITON_INTERPRET=1 before importing "
                                         r"seer \(it is not set\)"):
        gemm.VARIANTS["tile_16x64x128_w4s4g1"].run(p, a, b)


def test_check_operands_catches_changed_shapes():
    p = gemm.problem(operands(4, 8, 16, torch.float16))
    with pytest.raises(InputError, match="do not match"):
        gemm.check_operands(p, operands(4, 8, 32, torch.float16))


# The kinds with a plan (one per kind: tiles, persistent tiles, split-K in two launches and in one).
PLANNED = ("tile_16x64x128_w4s4g1", "tile_persistent_64x128x64_w4s4g8", "splitk2_64x64x64_w4s4g8",
           "splitk4fix_16x64x128_w4s4g1")


@pytest.mark.parametrize("name", PLANNED)
def test_a_bound_call_computes_what_run_does(name):
    """dispatch keeps ``bind``'s call with a cached decision; every later call on the same shapes
    goes through it, with a new out and, on the GPU, its direct launches."""
    variant = gemm.CANDIDATES[name]
    a, b = operands(5, 40, 1000, torch.bfloat16, seed=3)
    p = gemm.problem((a, b))
    assert not variant.params["kind"].startswith("splitk") or variant.run.args[0].splits(p)[0] > 1
    call = variant.bind(p)
    for seed in (4, 5):
        a, b = operands(5, 40, 1000, torch.bfloat16, seed=seed)
        out = torch.full((5, 40), float("nan"), dtype=torch.bfloat16)
        assert call(a, b, out=out) is out
        assert relative_error(out, a, b) < TOLERANCE[torch.bfloat16]
        assert relative_error(call(a, b), a, b) < TOLERANCE[torch.bfloat16]


@pytest.mark.parametrize("name,call_of", [("tile_16x64x128_w4s4g1", "bind"), ("tile_16x64x128_w4s4g1", "run"),
                                          ("tma_16x128x128_w4s4g1", "bind"), ("tma_16x128x128_w4s4g1", "run")])
def test_a_call_refuses_operands_the_problem_does_not_describe(name, call_of):
    """A plan's launches pass the problem's strides, and the launches it keeps are keyed by the
    problem's dtype: a B stored by columns would be read as by rows, and a kernel compiled for
    other operands kept under the problem's key. TMA's descriptors take the problem's shape and
    its row-major layout (K = 72: rows of 16-byte multiples, which TMA loads)."""
    a, b = operands(5, 40, 72, torch.bfloat16)
    p, variant = gemm.problem((a, b)), gemm.CANDIDATES[name]
    call = variant.bind(p) if call_of == "bind" else functools.partial(variant.run, p)
    with pytest.raises(InputError, match="strides"):
        call(a, b.T.contiguous().T)
    with pytest.raises(InputError, match="dtype"):
        call(a.half(), b.half())
    assert relative_error(call(a, b), a, b) < TOLERANCE[torch.bfloat16]


def test_every_variant_has_a_bound_call():
    """The variants without a plan (TMA: its descriptors' scratch comes from Triton's allocator through
    Triton's path; cuBLAS) bind their run to the problem: it checks the operands, once a call."""
    assert all(variant.bind is not None for variant in gemm.CANDIDATES.values())
    a, b = operands(5, 40, 72, torch.bfloat16)
    p = gemm.problem((a, b))
    for variant in gemm.CANDIDATES.values():
        if variant.params["kind"] in ("tma", "vendor"):
            call = variant.bind(p)  # functools.partial(run, p), a partial of run's own arguments and p
            assert isinstance(call, functools.partial) and call.args[-1] is p and not call.keywords


@pytest.mark.parametrize("call_of", ["bind", "run"])
def test_torch_matmul_refuses_operands_the_problem_does_not_describe(call_of):
    """torch resized an out of the problem's shape to other operands' (a deprecation warning alone)."""
    a, b = operands(13, 7, 29, torch.float16)
    p, variant = gemm.problem((a, b)), gemm.TORCH_MATMUL
    call = variant.bind(p) if call_of == "bind" else functools.partial(variant.run, p)
    out = torch.full((13, 7), float("nan"), dtype=torch.float16)
    with pytest.raises(InputError, match="do not match the problem"):
        call(a[:12], b, out=out)
    assert out.shape == (13, 7) and out.isnan().all()
    assert call(a, b, out=out) is out and relative_error(out, a, b) < TOLERANCE[torch.float16]


def test_registry_sees_the_op():
    op = get_op("gemm")
    assert all(name == v.name for name, v in op.variants.items())
    assert "torch_matmul" in op.variants and 8 <= len(op.variants) <= 16
    assert 30 <= len(gemm.CANDIDATES) <= 60 and set(op.variants) <= set(gemm.CANDIDATES)
    assert op.feature_names == tuple(features.known(gemm.problem(operands(2, 3, 4, torch.float16))))


def test_llm_shape_suite():
    shapes = gemm.llm_shapes()
    assert len(shapes) == len(set(shapes))
    assert ("llama-8b/qkv", 1, 6144, 4096) in shapes and ("llama-70b/mlp_down", 16384, 8192, 28672) in shapes
    assert ("mixtral-8x7b/mlp_up", 16384, 28672, 4096) not in shapes  # experts see a quarter of the tokens
    assert ("mixtral-8x7b/mlp_up", 4096, 28672, 4096) in shapes
    assert not any(g.startswith("mixtral-8x7b/qkv") for g, *_ in shapes)
    assert all(2 * m * n * k <= 1e12 for _, m, n, k in gemm.llm_shapes(max_flops=1e12))


# ---------------------------------------------------------------- features
def gpu_problem(m, n, k, dtype=torch.bfloat16, sms=132):
    """A problem as an H100 would see it, built without touching a GPU."""
    return gemm.GemmProblem(m, n, k, dtype, torch.device("cuda"), (k, 1), (n, 1), sms)


def test_features_of_a_decode_shape():
    f = features.known(gpu_problem(1, 4096, 4096))
    assert (f["m"], f["n"], f["k"], f["dtype"], f["align"]) == (1, 4096, 4096, 1, 16)
    assert f["waves"] == pytest.approx(32 / 132) and f["last_wave_fill"] == pytest.approx(32 / 132)
    assert f["intensity"] == pytest.approx(2 * 4096 * 4096 / (2 * (4096 + 4096 * 4096 + 4096)))
    assert f["k_per_output"] == 1.0 and f["log2_mn_over_k"] == 0.0
    assert features.hand_rule(f) == "torch_matmul"  # K is not long enough for split-K to pay
    assert features.hand_rule(features.known(gpu_problem(1, 4096, 14336))) == "splitk4fix_16x64x128_w4s4g1"


def test_features_of_a_prefill_shape():
    f = features.known(gpu_problem(4096, 6144, 4096, torch.float16))
    tiles = 32 * 48
    assert f["dtype"] == 0 and f["waves"] == pytest.approx(tiles / 132)
    assert f["last_wave_fill"] == pytest.approx((tiles % 132) / 132)
    assert f["log2_mn_over_k"] == pytest.approx(math.log2(6144))
    assert features.hand_rule(f) == "torch_matmul"


def test_full_last_wave_and_alignment():
    f = features.known(gpu_problem(128 * 12, 128 * 11, 4104))
    assert f["waves"] == 1.0 and f["last_wave_fill"] == 1.0
    assert f["align"] == 8
    assert features.known(gpu_problem(1, 4097, 4096))["align"] == 1
    assert features.known(gpu_problem(0, 0, 0))["waves"] == 0.0


def test_feature_labels_and_hand_rule_names():
    names = [f.name for f in features.KNOWN]
    assert len(names) == len(set(names)) and features.GATHERED == ()
    assert all(f.label for f in features.KNOWN)
    for shape in ((1, 4096, 4096), (16, 1024, 8192), (64, 4096, 4096), (8192, 8192, 8192)):
        assert features.hand_rule(features.known(gpu_problem(*shape))) in gemm.VARIANTS


# ---------------------------------------------------------------- shipped-set selection
def test_greedy_cover_on_synthetic_times():
    rng = np.random.default_rng(0)
    times = np.full((40, 4), 1.0)
    times[:20, 0] = 0.5  # specialist of the first half
    times[20:, 1] = 0.5  # specialist of the second half
    times[:, 2] = 0.6  # good everywhere, best nowhere
    times[:, 3] = rng.uniform(1.0, 2.0, 40)  # never useful
    assert gemm.greedy_cover(times, 1) == [2]
    assert gemm.oracle_fraction(times, [2]) == pytest.approx(0.5 / 0.6)
    chosen = gemm.greedy_cover(times, 3)
    assert set(chosen[:3]) == {0, 1, 2} and gemm.oracle_fraction(times, chosen) == pytest.approx(1.0)


def test_greedy_cover_treats_nan_as_unmeasured():
    times = np.array([[np.nan, 2.0], [1.0, 2.0]])
    assert gemm.oracle_fraction(times, [0]) == 0.0
    assert gemm.greedy_cover(times, 1) == [1]
    with pytest.raises(InputError, match="finite"):
        gemm.greedy_cover(np.array([[np.nan, np.nan]]), 1)
    for empty in (np.empty((3, 0)), np.empty((0, 3))):  # numpy's reduction error; [0, 1] of NaN means (a review)
        with pytest.raises(InputError, match=r"at least one of each.*got shape"):
            gemm.greedy_cover(empty, 2)


@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
@pytest.mark.parametrize("name", [None, "tile_64x64x64_w4s4g8", "tma_16x128x128_w4s4g1", "torch_matmul"])
@pytest.mark.parametrize("make_out, message", [
    (lambda: [0.0] * 128, "out must be a torch.Tensor, got list"),
    (lambda: torch.zeros(8, 16).to_sparse_csr(), "out must be a dense tensor"),
    # A strided nested tensor and a 0-d one: torch's internal error, an IndexError from TMA's stride (a review)
    (lambda: torch.nested.nested_tensor([torch.ones(8, 16, dtype=torch.float16)]), "out must be a dense tensor, got a nested one"),
    (lambda: torch.tensor(1.0, dtype=torch.float16), r"out must be a 2-D tensor, got shape \(\)"),
], ids=["list", "csr", "nested", "0-d"])
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage:UserWarning")
def test_an_out_that_is_no_dense_tensor_is_refused(make_out, message, name):
    """Every kind of variant, TMA's too: it reads out's pointer and stride before checking the rest
    (an AttributeError on a list, found by an audit)."""
    a, b = operands(8, 16, 32, torch.float16)
    with pytest.raises(InputError, match=message):
        seer.dispatch("gemm", (a, b), out=make_out(), variant=name)


@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
@pytest.mark.parametrize("name", ["tile_64x64x64_w4s4g8", "splitk4fix_16x64x128_w4s4g1", "tma_16x128x128_w4s4g1"])
@pytest.mark.parametrize("decided_before", [False, True])
def test_operands_inside_vmap_are_refused_by_the_kernels_that_read_their_memory(name, decided_before):
    """A tensor inside torch.vmap has no memory: torch's raw "Cannot access data pointer" came from
    each Triton variant, on a first call or one the cache had decided on the same shapes (a review)."""
    a, b = operands(3 * 8, 16, 32, torch.float16)
    batched, out = a.reshape(3, 8, 32), torch.full((8, 16), float("nan"), dtype=torch.float16)
    if decided_before:
        c = seer.dispatch("gemm", (batched[0].clone(), b), variant=name)
        assert relative_error(c, batched[0], b) < TOLERANCE[torch.float16]
    with pytest.raises(InputError, match="has no memory of its own .*inside torch.vmap"):
        torch.vmap(lambda x: seer.dispatch("gemm", (x, b), variant=name))(batched)
    with pytest.raises(InputError, match="has no memory of its own"):
        torch.vmap(lambda o: seer.dispatch("gemm", (batched[0], b), out=o, variant=name))(out[None])


@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
@pytest.mark.parametrize("name", ["tile_64x64x64_w4s4g8", "splitk2_64x64x64_w4s4g8", "splitk4fix_16x64x128_w4s4g1",
                                  "tma_16x128x128_w4s4g1", "torch_matmul"])
def test_an_out_that_autograd_saved_is_seen_written(name):
    """Triton kernels write out without the version bump torch's in-place ops make: a backward that
    had saved out used the new GEMM result as its gradient, silently (found by a review)."""
    a, b = operands(8, 32, 40, torch.float16)
    out = torch.rand(8, 32).to(torch.float16)
    weight = torch.ones(8, 32, dtype=torch.float16, requires_grad=True)
    saved = (weight * out).sum()  # autograd keeps out for weight's gradient
    seer.dispatch("gemm", (a, b), out=out, variant=name)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        saved.backward()


@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
@pytest.mark.parametrize("name", ["tile_64x64x64_w4s4g8", "splitk4fix_16x64x128_w4s4g1", "tma_16x128x128_w4s4g1",
                                  "torch_matmul"])
def test_an_inference_out_is_written_only_in_inference_mode(name):
    """As torch's out= refuses it (an inference tensor keeps no version); inside inference mode it is served."""
    a, b = operands(8, 32, 40, torch.float16)
    with torch.inference_mode():
        out = torch.full((8, 32), float("nan"), dtype=torch.float16)
    with pytest.raises(InputError, match="out is an inference tensor"):
        seer.dispatch("gemm", (a, b), out=out, variant=name)
    assert torch.isnan(out).all()
    with torch.inference_mode():
        assert seer.dispatch("gemm", (a, b), out=out, variant=name) is out
    torch.testing.assert_close(out.float(), (a.double() @ b.double()).float(), rtol=1e-2, atol=1e-2)


def test_tma_descriptors_get_an_allocator_in_every_thread_that_runs_them(monkeypatch):
    """triton.set_allocator is per thread; one flag for the process left every thread but the first
    with "no allocator was set" (found by a review on an H200)."""
    import threading

    calls = []
    monkeypatch.setattr(gemm.triton, "set_allocator", lambda allocator: calls.append(threading.get_ident()))
    monkeypatch.setattr(gemm, "_allocator_in_thread", threading.local())
    for _ in range(2):
        gemm._allocate_descriptors_in_this_thread()
    worker = threading.Thread(target=gemm._allocate_descriptors_in_this_thread)
    worker.start()
    worker.join()
    assert len(calls) == 2 and calls[0] == threading.get_ident() and calls[1] != calls[0]


def test_tma_launches_on_the_operands_device(monkeypatch):
    """A TMA variant's run called on another GPU's operands launched, and allocated its descriptors'
    scratch, on the current GPU (a review): it enters the operands' device as the planned tiles do."""
    import contextlib

    entered = []

    @contextlib.contextmanager
    def on_device(device):
        entered.append(device)
        yield

    monkeypatch.setattr(gemm, "on_device", on_device)
    a, b = operands(33, 72, 40, torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeerWarning)  # no fallback: the TMA launch itself
        c = gemm.CANDIDATES["tma_64x128x64_w4s4g8"].run(gemm.problem((a, b)), a, b)
    assert entered == [a.device] and relative_error(c, a, b) < TOLERANCE[a.dtype]


def check_k_step_past_2_to_31(device: str) -> None:
    """A column-major A of 2**24 rows: BLOCK_K 128 times its column stride is 2**31, which the tile
    loop's pointer step computed in int32 and wrapped, reading outside A (found by a review). Its
    4 GiB of storage is allocated, not touched: only row 0 is read."""
    stride, k = 1 << 24, 129
    a = torch.empty(stride * (k - 1) + 1, dtype=torch.float16, device=device).as_strided((1, k), (1, stride))
    a.fill_(1.0)
    b = torch.ones(k, 16, dtype=torch.float16, device=device)
    for variant in gemm.CANDIDATES.values():
        if variant.name != "torch_matmul" and variant.params["block_k"] >= 128 and variant.params["kind"] != "tma":
            c = variant.run(gemm.problem((a, b)), a, b)
            assert torch.equal(c.cpu(), torch.full((1, 16), float(k), dtype=torch.float16)), variant.name


def test_a_k_step_past_2_to_31_elements_stays_inside_the_operand():
    """Under the interpreter the wrapped step crashed the process (a segmentation fault)."""
    check_k_step_past_2_to_31("cpu")


def test_nested_and_meta_operands_are_refused_clearly():
    """A nested tensor raised torch's own error from the cache key; a meta tensor under the
    interpreter reached the kernels (found by a review)."""
    a, b = operands(4, 8, 16, torch.float16)
    nested = torch.nested.nested_tensor([a[0], a[1]])
    with pytest.raises(InputError, match="a is a nested tensor"):
        seer.dispatch("gemm", (nested, b))
    with pytest.raises(InputError, match="b is a meta tensor"):
        seer.dispatch("gemm", (a, b.to("meta")))
