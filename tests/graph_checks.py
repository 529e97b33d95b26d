"""Scratch that kernels keep between calls, under CUDA graphs: the check the GEMM and SpMV GPU
tests share."""
from __future__ import annotations

from typing import Callable, Sequence

import torch


def assert_graphs_keep_their_own_scratch(calls: Sequence[Callable[[], None]], poison: Callable[[int], None],
                                         check: Callable[[int], None]) -> None:
    """``calls``: two products, each on its own operands into its own output. Each runs once (compiling
    and making the scratch its stream keeps), then each is captured in a graph of its own, both on
    torch's one capture stream; the second graph is replayed first, then both 20 times at once on
    two streams. ``poison(i)`` fills output i with NaN, ``check(i)`` compares it with a reference.
    Scratch kept per stream was shared by both graphs, and their replays at once mixed their sums."""
    for call in calls:
        call()
    torch.cuda.synchronize()
    graphs = []
    for call in calls:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        graphs.append(graph)
    poison(1)
    graphs[1].replay()
    torch.cuda.synchronize()
    check(1)
    streams = [torch.cuda.Stream() for _ in graphs]
    for i in range(len(graphs)):
        poison(i)
    torch.cuda.synchronize()
    for _ in range(20):
        for stream, graph in zip(streams, graphs):
            with torch.cuda.stream(stream):
                graph.replay()
    torch.cuda.synchronize()
    for i in range(len(graphs)):
        check(i)
