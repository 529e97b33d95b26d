"""Features of a GEMM C[M, N] = A[M, K] B[K, N]: all known from the shapes, nothing gathered.

Besides the sizes, the features say how the work meets the GPU: how many waves of output tiles
it launches and how full the last one is (wave quantisation), how compute- or memory-bound it is
(arithmetic intensity) and how long the reduction is per output (K / (M N), where split-K pays).
"""
from __future__ import annotations

import dataclasses
import math

import torch

from seer.features_base import Feature

REFERENCE_TILE = (128, 128)  # output tile of a typical large-tile kernel, for the wave features
DTYPE_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16"}  # in the order of their codes
DTYPE_CODES = {dtype: code for code, dtype in enumerate(DTYPE_NAMES)}
_DTYPE_KEY = ", ".join(f"{code} {name}" for code, name in enumerate(DTYPE_NAMES.values()))

KNOWN = (
    Feature("m", "M (rows of A, tokens)", integer=True),
    Feature("n", "N (columns of B)", integer=True),
    Feature("k", "K (inner dimension)", integer=True),
    Feature("dtype", f"dtype ({_DTYPE_KEY})", integer=True, codes=tuple(DTYPE_NAMES.values())),
    Feature("log2_mn_over_k", "log2(M N / K)"),
    Feature("waves", "waves of 128x128 output tiles"),
    Feature("last_wave_fill", "last-wave fill (share of SMs busy)"),
    Feature("intensity", "arithmetic intensity", unit="flop/byte"),
    Feature("k_per_output", "K / (M N)"),
    Feature("align", "alignment of N and K", unit="elements", integer=True),
)
GATHERED: tuple[Feature, ...] = ()


def _wave_features(problem) -> tuple[float, float]:
    """(waves, fill of the last wave) of 128x128 output tiles over the SMs."""
    tiles = math.ceil(problem.M / REFERENCE_TILE[0]) * math.ceil(problem.N / REFERENCE_TILE[1])
    waves = tiles / problem.num_sms
    partial = tiles % problem.num_sms
    return waves, (partial / problem.num_sms if partial else float(tiles > 0))


def _alignment(*sizes: int, most: int = 16) -> int:
    """Largest power of two up to ``most`` dividing every size (vector width, TMA eligibility)."""
    align = most
    while align > 1 and any(s % align for s in sizes):
        align //= 2
    return align


def known(problem) -> dict:
    """Features from the problem's metadata alone (a GemmProblem: M, N, K, dtype, num_sms)."""
    m, n, k = problem.M, problem.N, problem.K
    waves, fill = _wave_features(problem)
    flops = 2.0 * m * n * k
    min_bytes = problem.dtype.itemsize * (m * k + k * n + m * n)
    return {
        "m": m,
        "n": n,
        "k": k,
        "dtype": DTYPE_CODES[problem.dtype],
        "log2_mn_over_k": math.log2(max(m * n, 1) / max(k, 1)),
        "waves": waves,
        "last_wave_fill": fill,
        "intensity": flops / max(min_bytes, 1),
        "k_per_output": k / max(m * n, 1),
        "align": _alignment(n, k),
    }


def known_on(problem, device: dict) -> dict | None:
    """:func:`known` as the GPU ``device`` (a model's provenance) computes it, its SM count in the
    wave features; None where ``device`` records no SM count."""
    sm_count = device.get("sm_count")
    return None if sm_count is None else known(dataclasses.replace(problem, num_sms=sm_count))


def gathered(problem) -> dict:
    return {}


def gathered_if_free(problem) -> None:
    return None  # nothing to gather


def hand_rule(features: dict) -> str:
    """cuBLAS, except decode-like products (M <= 16) with a long reduction (K >= 3 N) whose 128x128
    output tiles would keep under a quarter of the SMs busy: there split-K puts the idle SMs to work."""
    if features["m"] <= 16 and features["k"] >= 3 * features["n"] and features["waves"] < 0.25:
        return "splitk4fix_16x64x128_w4s4g1"
    return "torch_matmul"
