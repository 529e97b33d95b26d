"""Features of the GEMM + communication ops (all_gather_gemm, gemm_all_scatter, gemm_reduce_scatter).

Every feature follows from the shapes, the dtype and the world size, so every rank computes the
same values and picks the same variant (ranks that picked differently would wait on each other
forever). Nothing is worth gathering, so ``GATHERED`` is empty.

``compute_comm_ratio`` estimates one rank's GEMM time over its transfer time from two machine
constants: the dense GEMM rate and the rate one rank sends to its peers over the links. The
defaults were measured by ``benchmarks/overlap.py`` on two H200s joined by NVLink
(``benchmarks/results/overlap-h200x2.json``): torch.matmul bf16 at 8192^3, 783 TFLOP/s, and
Triton remote stores from every SM, 337 GB/s. Override them with :func:`set_machine` or
``$SEER_GEMM_TFLOPS`` / ``$SEER_LINK_GBPS``, identically on every rank.
"""
from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass

from seer.errors import InputError
from seer.features_base import Feature


@dataclass(frozen=True)
class Machine:
    """``gemm_tflops``: dense 16-bit GEMM rate of one GPU (fp32 runs as TF32 at half of it).
    ``link_gbps``: GB/s one rank's Triton remote stores move to its peers together."""

    gemm_tflops: float
    link_gbps: float


DEFAULT_MACHINE = Machine(gemm_tflops=783.0, link_gbps=337.0)
RATIO_CAP = 1e6  # a single rank sends nothing: keep the ratio finite for the trees

_override: Machine | None = None

KNOWN = (
    Feature("m", "M (rows of C)", integer=True),
    Feature("n", "N (columns of C)", integer=True),
    Feature("k", "K (inner size)", integer=True),
    Feature("dtype_bytes", "element size", unit="B", integer=True),
    Feature("world_size", "ranks", integer=True),
    Feature("send_mb", "data each rank sends", unit="MB"),
    Feature("rank_gflop", "GEMM work per rank", unit="GFLOP"),
    Feature("compute_comm_ratio", "GEMM time / transfer time"),
)
GATHERED: tuple[Feature, ...] = ()


def set_machine(gemm_tflops: float | None = None, link_gbps: float | None = None) -> Machine:
    """Replace machine constants, on every rank alike (a constant given as None keeps its value in
    force); ``set_machine()`` drops the replacement, so that the environment's constants, else the
    defaults, hold again. Each must be a positive, finite number: a zero, negative or NaN rate makes
    every ratio meaningless, and every choice with it.

    Cached decisions are forgotten (``seer.clear_cache()``): shapes decided before would keep the
    old constants' choice, and a rank whose cache had dropped one would decide anew alone, its
    choice and its collectives apart from its peers'."""
    import seer

    global _override
    if gemm_tflops is None and link_gbps is None:
        _override = None
    else:
        current = machine()
        gemm = current.gemm_tflops if gemm_tflops is None else _rate("set_machine's gemm_tflops", gemm_tflops)
        link = current.link_gbps if link_gbps is None else _rate("set_machine's link_gbps", link_gbps)
        _override = Machine(gemm, link)
    seer.clear_cache()
    return machine()


def machine() -> Machine:
    """The constants in force: :func:`set_machine`'s, else the environment's, else the defaults."""
    if _override is not None:
        return _override
    return Machine(_env_rate("SEER_GEMM_TFLOPS", DEFAULT_MACHINE.gemm_tflops),
                   _env_rate("SEER_LINK_GBPS", DEFAULT_MACHINE.link_gbps))


def _env_rate(name: str, default: float) -> float:
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        rate = float(text)
    except ValueError:
        rate = 0.0
    return _rate(f"${name}", rate, text)


def _rate(name: str, value, given=None) -> float:
    """``value`` as a float, if a positive, finite number; else an InputError naming ``name`` and ``given``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
        raise InputError(f"{name} must be a positive number (and finite), got {value if given is None else given!r}")
    return float(value)


def traffic(problem) -> tuple[int, int]:
    """(bytes one rank sends, GEMM flops one rank does) for ``problem`` (an OverlapProblem)."""
    m, n, k, w, size = problem.m, problem.n, problem.k, problem.world_size, problem.dtype.itemsize
    if problem.op == "all_gather_gemm":  # my A shard to every peer; the whole C for my B
        return (w - 1) * (m // w) * k * size, 2 * m * n * k
    if problem.op == "gemm_all_scatter":  # my column block of C to every peer
        return (w - 1) * m * (n // w) * size, 2 * m * (n // w) * k
    # gemm_reduce_scatter: my partial of every peer's rows
    return (w - 1) * (m // w) * n * size, 2 * m * n * (k // w)


def known(problem) -> dict[str, float]:
    sent, flop = traffic(problem)
    constants = machine()
    rate = constants.gemm_tflops * 1e12 * (1.0 if problem.dtype.itemsize <= 2 else 0.5)
    compute_s = flop / rate
    comm_s = sent / (constants.link_gbps * 1e9)
    return {
        "m": problem.m,
        "n": problem.n,
        "k": problem.k,
        "dtype_bytes": problem.dtype.itemsize,
        "world_size": problem.world_size,
        "send_mb": sent / 1e6,
        "rank_gflop": flop / 1e9,
        "compute_comm_ratio": min(compute_s / comm_s, RATIO_CAP) if comm_s else RATIO_CAP,
    }


def gathered(problem) -> dict[str, float]:
    return {}


def gathered_if_free(problem) -> None:
    return None  # nothing to gather


# Where pipelined_torch overtakes torch.matmul + NCCL on 2 x H200 (benchmarks/results/overlap-h200x2.md):
# about 0.2 ms of GEMM per rank, enough to hide the transfers and the pattern's ~0.15 ms of host time.
PIPELINE_GFLOP = 150


def hand_rule(features: dict) -> str:
    """pipelined_torch when a rank's GEMM is >= 150 GFLOP (long enough to hide transfers and host cost), else bulk_torch"""
    return "pipelined_torch" if features["rank_gflop"] >= PIPELINE_GFLOP else "bulk_torch"
