"""Scratch that kernels keep between calls, under CUDA graphs: the check the GEMM and SpMV GPU
tests share."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

BURSTS, REPLAYS = 5, 20


def assert_graphs_keep_their_own_scratch(calls: Sequence[Callable[[], None]], outs: Sequence[torch.Tensor],
                                         check: Callable[[int, torch.Tensor], None]) -> None:
    """``calls``: two products, each on its own operands into its own output ``outs[i]``. Each runs
    once (compiling and making the scratch its stream keeps), then each is captured in a graph of its
    own, both on torch's one capture stream; the second graph is replayed first, then both at once on
    two streams, in :data:`BURSTS` bursts of :data:`REPLAYS`, each replay's output poisoned before it
    and copied aside after it on its stream (a replay that left tiles unwritten would otherwise pass
    on the last one's values).
    ``check(i, y)`` compares a result of product i with its reference. Scratch kept per stream was
    shared by both graphs, and their replays at once mixed their sums."""
    for call in calls:
        call()
    torch.cuda.synchronize()
    graphs = []
    for call in calls:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        graphs.append(graph)
    outs[1].fill_(float("nan"))
    graphs[1].replay()
    torch.cuda.synchronize()
    check(1, outs[1])
    streams = [torch.cuda.Stream() for _ in graphs]
    kept = [torch.full((BURSTS * REPLAYS, *out.shape), float("nan"), dtype=out.dtype, device=out.device)
            for out in outs]
    for out in outs:
        out.fill_(float("nan"))
    torch.cuda.synchronize()
    for burst in range(BURSTS):
        for stream in streams:
            with torch.cuda.stream(stream):
                # Replays are shorter on the device than on the host: queued behind a sleep, both
                # streams' replays are all waiting when the sleeps end, and run side by side.
                torch.cuda._sleep(5_000_000)
        for replay in range(burst * REPLAYS, (burst + 1) * REPLAYS):
            for i, (stream, graph) in enumerate(zip(streams, graphs)):
                with torch.cuda.stream(stream):
                    outs[i].fill_(float("nan"))
                    graph.replay()
                    kept[i][replay].copy_(outs[i])
        torch.cuda.synchronize()
    for i in range(len(graphs)):
        for y in kept[i]:
            check(i, y)
