"""The remote-memory device API and the symmetric heap, across ranks of the simulated world.

Each test runs a rank function in every process of a shared simulated world (seer.simworld):
the same Triton kernels as on GPUs, under the interpreter, on heaps in shared memory. The rank
functions and checks work on any heap: tests/test_overlap_gpu.py runs them on GPUs.
"""
import functools
import importlib.machinery
import sys
import time

import pytest
import torch
import triton
import triton.language as tl

from seer.errors import InputError, SeerError
from seer.kernels import remote
from seer import simworld
from seer.simworld import SimWorld, run_world, shared_world
from seer.symmetric_heap import ALIGNMENT

WORLD_SIZES = [2, 4, 8]
N = 8


# ---------------------------------------------------------------- kernels
@triton.jit
def _exchange_kernel(x_ptr, got_ptr, sent_ptr, stored_ptr, rank, world_size, heap_bases, N: tl.constexpr):
    offs = tl.arange(0, N)
    not_last = offs < N - 1
    for peer in range(world_size):
        remote.get(x_ptr + offs, got_ptr + peer * N + offs, rank, peer, heap_bases)
        remote.put(x_ptr + offs, sent_ptr + rank * N + offs, rank, peer, heap_bases)
        doubled = remote.load(x_ptr + offs, rank, peer, heap_bases, not_last, -1.0) * 2
        remote.store(stored_ptr + rank * N + offs, doubled, rank, peer, heap_bases, not_last)


@triton.jit
def _atomics_kernel(counter_ptr, ticket_ptr, chain_ptr, olds_ptr, rank, world_size, heap_bases, ROUNDS: tl.constexpr):
    for _ in range(ROUNDS):
        for peer in range(world_size):
            remote.atomic_add(counter_ptr, rank + 1, rank, peer, heap_bases, sem="relaxed")
            remote.atomic_add(counter_ptr + 1, 1, rank, peer, heap_bases, sem="acq_rel", scope="sys")
    last = world_size - 1
    tl.store(olds_ptr, remote.atomic_cas(ticket_ptr, 0, rank + 1, rank, 0, heap_bases, sem="acq_rel"))
    tl.store(olds_ptr + 1, remote.atomic_xchg(chain_ptr, rank + 1, rank, last, heap_bases, sem="acq_rel"))


@triton.jit
def _ring_kernel(token_ptr, flag_ptr, errors_ptr, rank, world_size, heap_bases, max_spins, LAPS: tl.constexpr):
    """Pass a token LAPS times round the ring; each rank adds rank + 1 and signals the next."""
    following = (rank + 1) % world_size
    for lap in range(LAPS):
        hops = lap * world_size + rank  # hops the token has made when it reaches this rank
        if hops > 0:
            remote.wait(flag_ptr, hops, rank, rank, heap_bases, errors_ptr, 0, max_spins)
        token = tl.load(token_ptr)
        remote.store(token_ptr, token + rank + 1, rank, following, heap_bases)
        remote.signal(flag_ptr, hops + 1, rank, following, heap_bases)
    if rank == 0:
        remote.wait(flag_ptr, LAPS * world_size, rank, rank, heap_bases, errors_ptr, 0, max_spins)


@triton.jit
def _wait_kernel(flags_ptr, ok_ptr, errors_ptr, rank, peer, heap_bases, max_spins, FLAG: tl.constexpr):
    arrived = remote.wait(flags_ptr + FLAG, 12345, rank, peer, heap_bases, errors_ptr, FLAG, max_spins)
    tl.store(ok_ptr, arrived.to(tl.int32))


# ---------------------------------------------------------------- rank functions
def _values(rank: int, device="cpu") -> torch.Tensor:
    return torch.arange(N, dtype=torch.float32, device=device) + 100 * (rank + 1)


def _exchange(heap):
    heap.free_all()
    world = heap.world_size
    x = heap.empty((N,), torch.float32).copy_(_values(heap.rank, heap.device))
    got, sent, stored = (heap.empty((world, N), torch.float32).fill_(float("nan")) for _ in range(3))
    heap.barrier()
    _exchange_kernel[(1,)](x, got, sent, stored, heap.rank, world, heap.heap_bases, N=N)
    heap.barrier()
    return got.cpu(), sent.cpu(), stored.cpu()


def _atomics(heap, rounds):
    heap.free_all()
    counter, ticket, chain = heap.zeros((2,), torch.int32), heap.zeros((1,), torch.int32), heap.zeros((1,), torch.int32)
    olds = torch.full((2,), -1, dtype=torch.int32, device=heap.device)
    heap.barrier()
    _atomics_kernel[(1,)](counter, ticket, chain, olds, heap.rank, heap.world_size, heap.heap_bases, ROUNDS=rounds)
    heap.barrier()
    return counter.tolist(), ticket.item(), chain.item(), olds.tolist()


def _ring(heap, laps):
    heap.free_all()
    token, flag = heap.zeros((1,), torch.int64), heap.zeros((1,), torch.int32)
    heap.barrier()
    _ring_kernel[(1,)](token, flag, heap.wait_errors, heap.rank, heap.world_size, heap.heap_bases, heap.max_spins,
                       LAPS=laps)
    heap.raise_wait_errors()
    heap.barrier()
    return token.item(), flag.item()


def _wait_for_silent_peer(heap, max_spins):
    """Rank 0 waits for a flag rank 1 never sets; rank 0 raises after the final barrier."""
    heap.free_all()
    flags = heap.zeros((4,), torch.int32)
    ok = torch.full((1,), -1, dtype=torch.int32, device=heap.device)
    heap.barrier()
    if heap.rank == 0:
        _wait_kernel[(1,)](flags, ok, heap.wait_errors, 0, 1, heap.heap_bases, max_spins, FLAG=3)
    heap.barrier()
    if heap.rank == 0:
        assert ok.item() == 0, "a wait that timed out must return False"
        heap.raise_wait_errors("test flags")


def _wait_after_a_timeout(heap, max_spins):
    """Rank 0 waits twice for a flag rank 1 never sets: the second wait, of ``max_spins`` polls,
    comes after the first gave up."""
    heap.free_all()
    flags = heap.zeros((4,), torch.int32)
    ok = torch.full((1,), -1, dtype=torch.int32, device=heap.device)
    heap.barrier()
    if heap.rank == 0:
        _wait_kernel[(1,)](flags, ok, heap.wait_errors, 0, 1, heap.heap_bases, 300, FLAG=3)
        _wait_kernel[(1,)](flags, ok, heap.wait_errors, 0, 1, heap.heap_bases, max_spins, FLAG=3)
    heap.barrier()
    if heap.rank == 0:
        assert ok.item() == 0
        heap.raise_wait_errors("test flags")


def _heap_layout(heap):
    heap.free_all()
    first = heap.empty((3,), torch.float16)
    second = heap.empty((5, 7), torch.float32).fill_(heap.rank)
    scratch = heap.scratch("s", (4,), torch.int32, zero_new=True)
    again = heap.scratch("s", (2, 2), torch.int32)
    grown = heap.scratch("s", (64,), torch.int32, zero_new=True)
    heap.barrier()
    peer_second = heap.peer_view(second, (heap.rank + 1) % heap.world_size).clone()
    try:
        heap.empty((heap.free_bytes + 1,), torch.uint8)
        full_error = None
    except InputError as error:
        full_error = str(error)
    heap.barrier()
    offsets = [t.data_ptr() - heap.heap_bases[heap.rank].item() for t in (first, second, scratch, grown)]
    return offsets, again.data_ptr() == scratch.data_ptr(), int(grown.abs().sum()), peer_second, full_error


def _peer_views_of_tensors_without_twins(heap):
    """peer_view of what has no twin in the peer's heap: a twin got from peer_view (the peer's own memory,
    mapped here), a transposed heap tensor and an ordinary tensor. The message each call raised, or None."""
    heap.free_all()
    tensor = heap.empty((4, 8), torch.float32)
    peer = (heap.rank + 1) % heap.world_size
    messages = []
    for other in (heap.peer_view(tensor, peer), tensor.t(), torch.zeros(4, 8, device=heap.device)):
        try:
            heap.peer_view(other, peer)
            messages.append(None)
        except InputError as error:
            messages.append(str(error))
    heap.barrier()
    return messages


def _fail_on_rank(heap, rank):
    if heap.rank == rank:
        raise InputError("bad input on purpose")
    heap.barrier()  # the other ranks block here until the failing rank's error aborts the barrier


def _allocate_on_one_rank_then_fail(heap, rank):
    if heap.rank == rank:
        heap.scratch("lopsided", (1000,), torch.float32)
    raise InputError("failed after an allocation on one rank")


def _sleep(heap, seconds):
    time.sleep(seconds)


# ---------------------------------------------------------------- checks of every rank's results
ROUNDS, LAPS = 40, 3


def check_exchange(results) -> None:
    world_size = len(results)
    for rank, (got, sent, stored) in enumerate(results):
        for peer in range(world_size):
            torch.testing.assert_close(got[peer], _values(peer), msg=f"rank {rank} got from {peer}")
            torch.testing.assert_close(sent[peer], _values(peer), msg=f"rank {rank} was sent by {peer}")
            torch.testing.assert_close(stored[peer, :-1], 2 * _values(rank)[:-1], msg=f"rank {rank} stored by {peer}")
            assert torch.isnan(stored[peer, -1]), "a masked remote store must not write"


def check_atomics(results) -> None:
    world_size = len(results)
    for counter, _, _, _ in results:
        assert counter == [ROUNDS * world_size * (world_size + 1) // 2, ROUNDS * world_size]
    winners = [rank for rank, (_, _, _, olds) in enumerate(results) if olds[0] == 0]
    assert len(winners) == 1, "exactly one compare-and-swap must win"
    assert results[0][1] == winners[0] + 1
    assert all(olds[0] in (0, winners[0] + 1) for _, _, _, olds in results)
    # The exchanges form one chain: the old values and the final one are 0, 1, ..., W, each once.
    chain = sorted([olds[1] for _, _, _, olds in results] + [results[-1][2]])
    assert chain == list(range(world_size + 1))


def check_ring(results) -> None:
    world_size = len(results)
    token, flag = results[0]
    assert token == LAPS * world_size * (world_size + 1) // 2
    assert flag == LAPS * world_size


# ---------------------------------------------------------------- tests
@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_get_put_load_store_reach_every_peer(world_size):
    check_exchange(shared_world(world_size).run(_exchange))


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_atomics_are_atomic_across_processes(world_size):
    check_atomics(shared_world(world_size).run(_atomics, ROUNDS))


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_flags_order_a_token_round_the_ring(world_size):
    check_ring(shared_world(world_size).run(_ring, LAPS))


def test_bounded_wait_names_rank_and_flag_and_returns():
    world = shared_world(2)  # started off the clock: on a loaded machine a start alone takes up to 23 s
    start = time.monotonic()
    with pytest.raises(SeerError, match=r"rank 0 gave up waiting on flag 3 of rank 1 \(test flags\)"):
        world.run(_wait_for_silent_peer, 300)
    assert time.monotonic() - start < 60
    assert world.run(_ring, 1)[0][0] == 3, "the world stays usable after a timed-out wait"


def test_a_wait_after_one_gave_up_gives_up_at_once():
    """Each wait had spun its own max_spins: with a dead peer a call of many waits stalled for their
    sum (a reduce-scatter's reducers, an hour; a review). Here the second wait's 10**9 polls would
    outlast the run's 60 s limit."""
    world = shared_world(2)
    with pytest.raises(SeerError, match=r"gave up waiting on flag 3 of rank 1 \(test flags\) .*\(2 wait\(s\) timed out\)"):
        world.run(_wait_after_a_timeout, 10**9, timeout_s=60)


def test_heap_allocates_aligned_symmetric_tensors():
    results = shared_world(2).run(_heap_layout)
    assert results[0][0] == results[1][0], "the same allocations land at the same offsets on every rank"
    offsets, reused, grown_sum, peer_second, full_error = results[0]
    assert all(offset % ALIGNMENT == 0 for offset in offsets)
    assert reused and grown_sum == 0
    torch.testing.assert_close(peer_second, torch.ones(5, 7))
    assert "symmetric heap full" in full_error


def test_peer_view_refuses_a_tensor_without_a_twin():
    """A twin passed back to peer_view (an easy slip: it is a tensor of this device) has no offset in this
    rank's heap; nor has an ordinary tensor. Taken, they would slice the peer's heap at an address
    difference, out of bounds or over another tensor; a transposed view's twin would hold other elements."""
    for messages in shared_world(2).run(_peer_views_of_tensors_without_twins):
        assert messages == ["peer_view takes a contiguous tensor allocated from this heap"] * 3


def test_rank_exception_is_raised_with_the_rank_named():
    with pytest.raises(InputError, match="rank 1: bad input on purpose"):
        shared_world(2).run(_fail_on_rank, 1)
    assert shared_world(2).run(_ring, 1)[0][0] == 3, "the world stays usable after a rank's exception"


def test_a_failure_that_leaves_the_heaps_out_of_step_shuts_the_world_down():
    """The world stayed up with rank 1 holding an allocation rank 0 did not: the next run's tensors
    sat at different offsets on the two ranks, and twins pointed at other memory (found by a review)."""
    world = shared_world(2)
    with pytest.raises(InputError, match="rank [01]: failed after an allocation on one rank; the world was shut "
                                         "down: the failure left the ranks' heaps out of step"):  # the first to reply
        world.run(_allocate_on_one_rank_then_fail, 1)
    assert not world.alive
    assert shared_world(2).run(_ring, 1)[0][0] == 3, "shared_world makes a new world in its place"


def test_an_interrupted_run_shuts_the_world_down(monkeypatch):
    """Interrupted while waiting, the world stayed up and read the ranks' late replies as the next run's."""
    world = shared_world(2)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(simworld.mp.connection, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        world.run(_ring, 1)
    monkeypatch.undo()
    assert not world.alive


@pytest.mark.parametrize("arguments, problem", [
    ({"world_size": 2.0}, "world_size must be a whole number of at least 1, got 2.0"),
    ({"world_size": 0}, "world_size must be a whole number of at least 1, got 0"),
    ({"world_size": 2, "heap_bytes": -1}, "heap_bytes must be a positive whole number of bytes, got -1"),
    ({"world_size": 2, "heap_bytes": 1.5}, "heap_bytes must be a positive whole number of bytes, got 1.5")])
def test_world_arguments_are_checked_before_anything_is_made(arguments, problem, tmp_path, monkeypatch):
    """A negative or fractional heap size or a float world size raised from inside the start and left
    its folder of heap files behind."""
    monkeypatch.setattr(simworld, "_SHARED_MEMORY", tmp_path)
    with pytest.raises(InputError, match=problem):
        SimWorld(**arguments)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_start_leaves_no_folder_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(simworld, "_SHARED_MEMORY", tmp_path)

    def failing_start(*args):
        raise OSError("no room for the heap files")

    monkeypatch.setattr(SimWorld, "_start", failing_start)
    with pytest.raises(OSError, match="no room"):
        SimWorld(2)
    assert list(tmp_path.iterdir()) == []


def test_a_rank_function_the_ranks_cannot_import_is_named(monkeypatch):
    """From stdin, a REPL or a notebook the ranks died with "the process died (exit code 1)", the
    cause (their own AttributeError) only further up (found by a user's walkthrough)."""
    import types

    world = shared_world(2)  # spawned before __main__ is replaced below

    def rank_fn(heap):
        return heap.rank

    rank_fn.__module__ = "__main__"
    main = types.ModuleType("__main__")  # a REPL's or a notebook's: no __file__
    monkeypatch.setitem(sys.modules, "__main__", main)
    with pytest.raises(InputError, match="'rank_fn' is defined in a __main__ that the ranks' processes cannot import"):
        world.run(rank_fn)
    with pytest.raises(InputError, match="'rank_fn' is defined in a __main__"):
        world.run(functools.partial(rank_fn))  # a partial names functools as its module
    main.__file__ = "<stdin>"  # python - < script.py: the ranks could not even start
    with pytest.raises(InputError, match="run __main__ again from '<stdin>', no file"):
        run_world(2, rank_fn)
    # A module run by name (python -m, a zipapp: __file__ inside the archive) is imported by name, not run
    # from its file; nor is a frozen application's: neither is refused (found by a review).
    main.__spec__ = importlib.machinery.ModuleSpec("app", None)
    assert not simworld._spawn_runs_main_file()
    main.__spec__ = None
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert not simworld._spawn_runs_main_file()


def test_hung_rank_times_out():
    # The world starts under the default timeout, off the clock: a world's timeout also bounds its
    # ranks' gloo rendezvous, which 3 s did not always cover on a loaded machine (a gloo "Wait timeout").
    with SimWorld(2) as world:
        start = time.monotonic()
        with pytest.raises(SeerError, match=r"rank\(s\) \[0, 1\] did not finish _sleep within 3 s"):
            world.run(_sleep, 60, timeout_s=3)
        assert time.monotonic() - start < 50
