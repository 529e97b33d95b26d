"""GEMM variants on a CUDA GPU: every shipped variant on the LLM suite, every candidate on edge shapes."""
import warnings

import pytest
import torch

from graph_checks import assert_graphs_keep_their_own_scratch
from seer.kernels import gemm
from test_gemm import TOLERANCE, check_k_step_past_2_to_31, seers_candidates, sums_16_bits_would_lose

pytestmark = pytest.mark.gpu

DTYPES = (torch.bfloat16, torch.float16)
# The suite without its largest token counts keeps the file to about a minute (mostly compilation).
SUITE = gemm.llm_shapes(tokens=(1, 4, 16, 256, 1024))
EDGE_SHAPES = ((1, 4096, 4096), (7, 1000, 3000), (16, 8, 8192), (300, 515, 77), (2048, 2048, 40), (129, 4104, 8))


def relative_error(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> float:
    ref = torch.matmul(a.float(), b.float())  # fp32 on the GPU; TF32 is off by default for matmul
    return ((c.float() - ref).norm() / ref.norm()).item()


def operands(m, n, k, dtype, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, dtype=dtype, device="cuda", generator=gen)
    b = torch.randn(k, n, dtype=dtype, device="cuda", generator=gen) / k ** 0.5
    return a, b


def check_variant(variant, a, b):
    p = gemm.problem((a, b))
    out = torch.full((p.M, p.N), float("nan"), dtype=a.dtype, device="cuda")
    c = variant.run(p, a, b, out=out)
    assert c.data_ptr() == out.data_ptr()
    assert torch.isfinite(c).all(), f"{variant.name}: non-finite output"
    err = relative_error(c, a, b)
    assert err < TOLERANCE[a.dtype], f"{variant.name} on {tuple(a.shape)}x{tuple(b.shape)} {a.dtype}: relative error {err:.3g}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("group,m,n,k", SUITE, ids=[f"{g}-{m}" for g, m, _, _ in SUITE])
def test_shipped_variants_on_llm_suite(group, m, n, k, dtype):
    a, b = operands(m, n, k, dtype)
    for variant in gemm.VARIANTS.values():
        check_variant(variant, a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_candidate_keeps_its_running_sums_in_float32(dtype):
    """On the GPU the TMA kernels run too (on the CPU they fall back to pointer loads). The large term
    stands to the end here (see sums_16_bits_would_lose: the tensor cores' sums)."""
    a, b = sums_16_bits_would_lose(256, 256, 8192, dtype, device="cuda", cancel=False)
    for variant in seers_candidates():
        check_variant(variant, a, b)


@pytest.mark.filterwarnings("ignore:.*TMA needs a Hopper GPU")  # 300x515x77: rows not 16-byte aligned, which TMA cannot address
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n,k", EDGE_SHAPES, ids=str)
def test_every_candidate_on_edge_shapes(m, n, k, dtype):
    a, b = operands(m, n, k, dtype, seed=m + n + k)
    for variant in gemm.CANDIDATES.values():
        check_variant(variant, a, b)


def test_transposed_weight_layout():
    """nn.Linear keeps W as [N, K]; x @ W.T reaches the kernels with a column-major b."""
    a, w = operands(64, 4096, 1024, torch.bfloat16)
    b = w.T.contiguous().T  # same values, strides (1, K)
    for variant in gemm.VARIANTS.values():
        check_variant(variant, a, b)


def test_tma_runs_without_fallback_on_hopper():
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA needs compute capability 9 or newer")
    a, b = operands(256, 512, 256, torch.float16)
    p = gemm.problem((a, b))
    assert gemm.tma_usable(p)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_variant(gemm.CANDIDATES["tma_128x128x64_w8s3g8"], a, b)


@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
def test_tma_with_an_out_off_16_bytes_runs_with_pointer_loads():
    """Its descriptor would store at out's base: off 16 bytes, an H200 raised a misaligned-address
    error that broke the CUDA context for the rest of the process. The result is checked after."""
    a, b = operands(64, 256, 128, torch.bfloat16)
    buffer = torch.full((64 * 256 + 8,), float("nan"), dtype=torch.bfloat16, device="cuda")
    out = buffer[1:1 + 64 * 256].view(64, 256)
    c = gemm.CANDIDATES["tma_16x128x128_w4s4g1"].run(gemm.problem((a, b)), a, b, out=out)
    torch.cuda.synchronize()
    assert c.data_ptr() == out.data_ptr() and relative_error(c, a, b) < TOLERANCE[a.dtype]


@pytest.mark.parametrize("name", ["splitk16_16x64x128_w4s4g1", "splitk16fix_16x64x128_w4s4g1"])
def test_splitk_is_deterministic(name):
    a, b = operands(8, 4096, 8192, torch.bfloat16)
    variant = gemm.CANDIDATES[name]
    p = gemm.problem((a, b))
    first = variant.run(p, a, b)
    assert all(torch.equal(first, variant.run(p, a, b)) for _ in range(20))
    check_variant(variant, a, b)


def test_splitk_arrival_counters_of_two_graphs_stay_apart():
    """The fixup variant's per-tile arrival counters were kept per stream, so every graph (all captured
    on torch's one capture stream) shared one buffer, made in the first graph's memory and zeroed only
    by its replays: two graphs replayed at once counted each other's slices."""
    variant = gemm.CANDIDATES["splitk16fix_16x64x128_w4s4g1"]
    pairs = [operands(16, 4096, 4096, torch.bfloat16, seed=seed) for seed in (1, 2)]
    p = gemm.problem(pairs[0])
    outs = [torch.empty(16, 4096, dtype=torch.bfloat16, device="cuda") for _ in pairs]

    def check(i, c):
        err = relative_error(c, *pairs[i])
        assert err < TOLERANCE[torch.bfloat16], f"graph {i}: relative error {err:.3g}"

    assert_graphs_keep_their_own_scratch([lambda i=i: variant.run(p, *pairs[i], out=outs[i]) for i in (0, 1)],
                                         outs, check)


def off_16_bytes(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with the same strides, 2 bytes past a 16-byte boundary."""
    storage = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    moved = storage[1:].view(t.shape)
    moved.copy_(t)
    return moved


@pytest.mark.parametrize("name", sorted(n for n, v in gemm.VARIANTS.items() if v.bind is not None))
def test_direct_launches_follow_the_pointers_alignment(name):
    """A plan's launches after the first of a specialisation are direct, keyed by the pointers'
    16-byte alignment: operands and out aligned, then each 2 bytes off (Triton compiles those
    without the alignment hint), then aligned again, each twice, out poisoned each time."""
    variant = gemm.CANDIDATES[name]
    m, n, k = 40, 264, 1032  # K long enough for every split-K variant to split
    p = gemm.problem(operands(m, n, k, torch.bfloat16))
    call = variant.bind(p)
    for round_, misaligned in enumerate((set(), set(), {"a"}, {"a"}, {"b", "out"}, {"b", "out"}, set(), set())):
        a, b = operands(m, n, k, torch.bfloat16, seed=round_)
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        a, b, out = (off_16_bytes(t) if label in misaligned else t for label, t in (("a", a), ("b", b), ("out", out)))
        out.fill_(float("nan"))
        assert call(a, b, out=out) is out
        err = relative_error(out, a, b)
        assert err < TOLERANCE[torch.bfloat16], f"round {round_}, {sorted(misaligned)} off 16 bytes: error {err:.3g}"
    assert variant.run(p, a, b, out=out) is out and relative_error(out, a, b) < TOLERANCE[torch.bfloat16]


@pytest.mark.multigpu
@pytest.mark.parametrize("name", ["tile_16x64x128_w4s4g1", "splitk2_64x64x64_w4s4g8"])
def test_planned_calls_on_a_gpu_that_is_not_the_current_one(name):
    """A plan's first launch compiles and loads on the current GPU, and the launch kept is keyed by the
    operands' GPU: the operands' GPU is made current around it. Then the kept launch runs with
    either GPU current. Needs two GPUs: ``python -m pytest -m multigpu tests/test_gemm_gpu.py``."""
    variant = gemm.CANDIDATES[name]
    a, b = (t.to("cuda:1") for t in operands(64, 264, 1032, torch.bfloat16, seed=5))
    p = gemm.problem((a, b))
    for current in (0, 1, 0):
        with torch.cuda.device(current):
            out = torch.full((64, 264), float("nan"), dtype=torch.bfloat16, device="cuda:1")
            assert variant.run(p, a, b, out=out) is out and torch.cuda.current_device() == current
        torch.cuda.synchronize(1)
        assert relative_error(out, a, b) < TOLERANCE[torch.bfloat16], f"{current} current"


@pytest.mark.parametrize("name", ["splitk16_16x64x128_w4s4g1", "splitk16fix_16x64x128_w4s4g1"])
def test_splitk_slices_past_2_to_the_31_elements_of_b(name):
    """The last slices start at rows of B whose offset, k_start * N, passes 2**31 elements (an LM
    head's vocabulary with a long K): computed in 32 bits, it wrapped."""
    m, n, k = 4, 147_456, 16_384  # B is 4.8 GB of bf16
    a, b = operands(m, n, k, torch.bfloat16)
    p = gemm.problem((a, b))
    slices, per_slice = gemm.CANDIDATES[name].run.args[0].splits(p)
    assert (k - per_slice) * n > 2**31
    check_variant(gemm.CANDIDATES[name], a, b)
    del a, b
    torch.cuda.empty_cache()


def test_a_k_step_past_2_to_31_elements_stays_inside_the_operand():
    """On the GPU the wrapped step read an illegal address, which broke the CUDA context."""
    check_k_step_past_2_to_31("cuda")


def test_tma_runs_in_a_thread_after_another_thread_ran_it():
    """Triton keeps its allocator per thread: set once per process, a second thread's TMA call
    failed with "no allocator was set" (found by a review on an H200)."""
    import threading

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA needs compute capability 9 or newer")
    a, b = operands(256, 512, 256, torch.float16)
    variant = gemm.CANDIDATES["tma_16x128x128_w4s4g1"]
    check_variant(variant, a, b)
    failures = []

    def in_a_worker():
        try:
            check_variant(variant, a, b)
        except Exception as error:  # reported in the main thread
            failures.append(error)

    worker = threading.Thread(target=in_a_worker)
    worker.start()
    worker.join()
    assert not failures, failures
