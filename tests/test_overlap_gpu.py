"""The remote API and every GEMM + communication pattern on GPUs, over PyTorch symmetric memory.

One process per GPU, every rank running every test in the same order (the tests are collective):

    torchrun --nproc-per-node 2 -m pytest -q tests/test_overlap_gpu.py

The rank functions and checks are the simulated world's (tests/test_remote.py, tests/test_overlap.py).
Each test runs them on every rank, gathers every rank's outcome, and only then asserts, so a
failure on one rank cannot leave the others waiting in a collective.
"""
import os

import pytest
import torch

import test_overlap as overlap_checks
import test_remote as remote_checks
from seer.registry import get_op
from seer.symmetric_heap import SymmetricHeap

pytestmark = [pytest.mark.gpu, pytest.mark.multigpu]

HEAP_BYTES = 256 << 20
MAX_SPINS = 1 << 22  # a few seconds: a broken pattern fails fast instead of spinning for long
SCALE = 24  # input sizes x24 (hundreds of rows and columns): many tiles, ragged edges, all programs busy
TOLERANCE = {"bfloat16": 1e-2, "float32": 1e-2}  # fp32 runs as TF32 in tl.dot and cuBLAS


@pytest.fixture(scope="module")
def heap():
    if "LOCAL_RANK" not in os.environ:
        pytest.skip("multi-GPU test: run under torchrun --nproc-per-node 2 (one process per GPU)")
    import torch.distributed as dist

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    heap = SymmetricHeap(HEAP_BYTES)
    heap.max_spins = MAX_SPINS
    yield heap
    dist.barrier()


def _on_every_rank(heap, fn, *args, **kwargs) -> list[tuple[str, object]]:
    """``fn(heap, *args, **kwargs)`` here, then every rank's ("ok", result) or ("error", exception text)."""
    import torch.distributed as dist

    try:
        outcome = ("ok", fn(heap, *args, **kwargs))
    except Exception as exc:  # reported after the gather, so no rank is left in a collective
        outcome = ("error", f"{type(exc).__name__}: {exc}")
    torch.cuda.synchronize()
    outcomes = [None] * dist.get_world_size()
    dist.all_gather_object(outcomes, outcome)
    return outcomes


def _results(outcomes) -> list:
    failed = {rank: text for rank, (status, text) in enumerate(outcomes) if status == "error"}
    assert not failed, f"ranks failed: {failed}"
    return [result for _, result in outcomes]


def test_remote_load_store_get_put_atomics_flags(heap):
    remote_checks.check_exchange(_results(_on_every_rank(heap, remote_checks._exchange)))
    remote_checks.check_atomics(_results(_on_every_rank(heap, remote_checks._atomics, remote_checks.ROUNDS)))
    remote_checks.check_ring(_results(_on_every_rank(heap, remote_checks._ring, remote_checks.LAPS)))


def test_bounded_wait_raises_naming_rank_and_flag(heap):
    outcomes = _on_every_rank(heap, remote_checks._wait_for_silent_peer, 10_000)
    assert outcomes[0][0] == "error" and "rank 0 gave up waiting on flag 3 of rank 1" in outcomes[0][1]
    assert all(status == "ok" for status, _ in outcomes[1:])


@pytest.mark.parametrize("dtype_name, scale", [("bfloat16", SCALE), ("float32", 3)])
@pytest.mark.parametrize("op", overlap_checks.OPS)
def test_every_pattern_matches_float64(heap, op, dtype_name, scale):
    patterns = list(get_op(op).variants)  # torch_fused too
    errors = _results(_on_every_rank(heap, overlap_checks._pattern_errors, op, patterns, dtype_name, scale))
    overlap_checks._assert_small(errors, TOLERANCE[dtype_name])


@pytest.mark.parametrize("op", overlap_checks.OPS)
def test_pipelined_pattern_in_several_chunks_on_two_streams(heap, op):
    errors = _results(_on_every_rank(heap, overlap_checks._pipelined_errors_in_thin_chunks, op, "bfloat16", SCALE))
    overlap_checks._assert_small(errors, TOLERANCE["bfloat16"])


@pytest.mark.parametrize("op", overlap_checks.OPS)
def test_consecutive_calls_of_every_pattern(heap, op):
    patterns = list(get_op(op).variants)
    errors = _results(_on_every_rank(heap, overlap_checks._consecutive_call_errors, op, patterns, "bfloat16", SCALE))
    overlap_checks._assert_small(errors, TOLERANCE["bfloat16"])


@pytest.mark.parametrize("pattern", overlap_checks.GRAPHED)
def test_graphed_patterns_capture_once_per_weight(heap, pattern):
    outcomes = _on_every_rank(heap, overlap_checks._graphs_of_a_graphed_pattern, pattern, SCALE)
    for counts, error in _results(outcomes):
        assert counts == [1, 2, 0] and error <= TOLERANCE["bfloat16"]


@pytest.mark.parametrize("op", overlap_checks.OPS)
def test_dispatch_with_a_process_group(heap, op):
    import torch.distributed as dist

    results = _results(_on_every_rank(heap, overlap_checks._features_and_dispatch, op, group=dist.group.WORLD))
    features, variant, _ = results[0]
    for rank_features, rank_variant, error in results:
        assert rank_features == features and rank_variant == variant
        assert error <= TOLERANCE["float32"]


def test_silent_peer_raises_instead_of_hanging(heap):
    fresh = SymmetricHeap(16 << 20)  # the scenario leaves the ranks' heaps out of step: not the shared one
    fresh.empty((fresh.free_bytes,), torch.uint8).zero_()  # no stale byte may look like a signalled flag
    fresh.free_all()
    outcomes = _on_every_rank(fresh, overlap_checks._reduce_scatter_with_silent_peer)
    assert outcomes[0][0] == "error"
    assert "rank 0 gave up waiting on flag" in outcomes[0][1] and "of rank 1" in outcomes[0][1]


@pytest.mark.parametrize("op, pattern", [("gemm_all_scatter", "pipelined_torch"), ("gemm_reduce_scatter", "fused_torch"),
                                         *[("gemm_reduce_scatter", p) for p in overlap_checks.GRAPHED]])
def test_silent_peer_of_a_torch_pattern_raises_instead_of_hanging(heap, op, pattern):
    fresh = SymmetricHeap(16 << 20)
    fresh.empty((fresh.free_bytes,), torch.uint8).zero_()
    fresh.free_all()
    outcomes = _on_every_rank(fresh, overlap_checks._torch_pattern_with_silent_peer, op, pattern)
    assert outcomes[0][0] == "error"
    assert "rank 0 gave up waiting on flag" in outcomes[0][1] and f"of rank 1 ({op} {pattern})" in outcomes[0][1]


@pytest.mark.parametrize("op", overlap_checks.OPS)
def test_ranks_that_call_with_different_shapes_are_refused(heap, op):
    for messages in _results(_on_every_rank(heap, overlap_checks._refusals_of_mismatched_ranks, op)):
        for pattern, message in messages.items():
            assert message is not None and "the ranks called with different shapes" in message, pattern


def test_a_graphed_plan_made_again_after_free_all_waits_for_every_ranks_new_flags(heap):
    fresh = SymmetricHeap(64 << 20)  # free_all would invalidate the shared heap's tensors
    for errors in _results(_on_every_rank(fresh, overlap_checks._graphed_sums_across_free_all)):
        assert max(errors) <= TOLERANCE["float32"], errors


def test_ranks_that_run_different_patterns_are_refused(heap):
    for message in _results(_on_every_rank(heap, overlap_checks._forced_patterns_differing_by_rank)):
        assert message is not None and "different shapes, dtypes or patterns" in message


def test_ranks_that_run_one_pattern_with_different_parameters_are_refused(heap):
    outcomes = _on_every_rank(heap, overlap_checks._one_pattern_with_parameters_differing_by_rank,
                              [{"chunks": 2}, {"chunks": 4}])
    for message in _results(outcomes):
        assert message is not None and "chunks=2" in message and "chunks=4" in message


def test_a_group_must_be_a_process_group_and_not_given_with_a_heap(heap):
    for messages in _results(_on_every_rank(heap, overlap_checks._group_refusals, "all_gather_gemm")):
        assert ["must be a torch.distributed process group" in m for m in messages[:2]] == [True, True]
        assert "pass heap= or group=, not both" in messages[2]


@pytest.mark.parametrize("op", overlap_checks.OPS)
@pytest.mark.filterwarnings("ignore:The CUDA Graph is empty")  # pipelined_torch's refused capture launched nothing
def test_capturable_patterns_replay_in_a_cuda_graph_and_the_others_are_refused(heap, op):
    for errors, refusal in _results(_on_every_rank(heap, overlap_checks._replays_of_captured_calls, op, 3)):
        overlap_checks._assert_small([errors], TOLERANCE["float32"])
        assert refusal is not None and "'pipelined_torch' cannot be captured in a CUDA graph" in refusal


def test_a_graphed_plan_made_on_one_rank_only_passes_no_barrier(heap):
    results = _results(_on_every_rank(heap, overlap_checks._graphed_calls_with_a_new_weight_tensor_on_one_rank))
    for errors, _ in results:
        assert max(errors) <= TOLERANCE["float32"], errors
    assert results[0][1] == 1  # the input is staged: its layout takes no plan of its own


def test_a_first_call_refused_on_one_rank_is_refused_on_every_rank(heap):
    for messages in _results(_on_every_rank(heap, overlap_checks._first_calls_refused_on_one_rank)):
        overlap_checks._check_refused_on_rank_1(messages)


def test_ranks_that_call_different_ops_are_refused(heap):
    fresh = SymmetricHeap(16 << 20)  # nothing agreed on it yet, whatever the tests before ran
    for message in _results(_on_every_rank(fresh, overlap_checks._first_calls_of_two_ops)):
        assert message is not None and "the ranks called different ops (rank 0: all_gather_gemm; rank 1: " \
            "gemm_all_scatter)" in message, message


def test_ranks_whose_heaps_hold_different_allocations_are_refused(heap):
    fresh = SymmetricHeap(16 << 20)  # left out of step by the test: not the shared one
    for message in _results(_on_every_rank(fresh, overlap_checks._first_calls_of_two_ops, 100)):
        assert message is not None and "hold different allocations (bytes in use: rank 0: 256; rank 1: 0)" \
            in message, message
