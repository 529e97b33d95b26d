"""Launching a compiled Triton kernel again without Triton's per-call binding.

``kernel[grid](*args)`` binds every argument, computes a specialisation key, looks the compiled
kernel up and only then launches: about 20 us of host time on an H100 host with triton 3.6,
more than the GPU time of a small SpMV. Once seer has decided what to run on an input, most
arguments are fixed, so :class:`LaunchCache` keeps the compiled kernel per *specialisation*
(Triton compiles separate code for 16-byte-aligned pointers, for integers equal to 1 or
divisible by 16, and for integers past 32 bits) and calls its launcher directly. The first
launch of each specialisation, and every launch under the interpreter, goes through Triton's
normal path.
"""
from __future__ import annotations

import os

import torch

_INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"


def specialisation(*values) -> tuple:
    """What Triton specialises on for these arguments: pointer alignment; for ints, == 1, % 16 and
    whether they fit 32 bits (past 2**31 the parameter becomes 64-bit: nnz of a large matrix)."""
    key = []
    for v in values:
        if isinstance(v, torch.Tensor):
            key.append((v.dtype, v.data_ptr() % 16 == 0))
        elif isinstance(v, int) and not isinstance(v, bool):
            key.append((v == 1, v % 16 == 0, -2**31 <= v < 2**31))
        else:
            key.append(v)
    return tuple(key)


def operand(tensor: torch.Tensor, stride: int) -> tuple[tuple, int]:
    """A per-call vector operand's share of the launch key, and its address (read once for both).

    The key is :func:`specialisation` of the operand and its stride at a fraction of the host
    time: the exact stride is a finer key than Triton's (== 1, % 16), so never a wrong one."""
    address = tensor.data_ptr()
    return (tensor.dtype, address % 16 == 0, stride), address


def addresses(args: tuple) -> tuple:
    """``args`` with every tensor replaced by its device address (for ``direct_args`` of arguments
    fixed per matrix: worked out once, with the plan that holds the tensors)."""
    return tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args)


def cdiv(a: int, b: int) -> int:
    """Ceiling division on host ints (``triton.cdiv`` is a constexpr function in newer Tritons,
    ~3 us a call: more than a small kernel's launch budget)."""
    return -(-a // b)


class LaunchCache:
    """Compiled launchers of one jit kernel, keyed by the caller's specialisation key.

    ``args`` are every kernel parameter in order, constexprs included (the launcher skips them);
    ``options`` are Triton launch options (``num_warps``, ...), which must not change for a key.
    ``direct_args``, if given, are ``args`` with every tensor replaced by its address, and the
    direct path passes them instead: Triton's launcher takes an int pointer as is, where a tensor
    costs a ``data_ptr()`` call and a driver query of the address, ~0.45 us of host time each
    (``benchmarks/results/launch-pointers-h100.md``). The caller has checked the devices.
    """

    def __init__(self, kernel):
        self.kernel = kernel
        self._compiled: dict = {}

    def launch(self, key, grid: tuple, args: tuple, direct_args: tuple | None = None, **options) -> None:
        compiled = None if _INTERPRETING else self._compiled.get(key)
        if compiled is None:
            compiled = self.kernel[grid](*args, **options)
            if not _INTERPRETING and _launchable(compiled):
                self._compiled[key] = compiled
            return
        stream = torch._C._cuda_getCurrentRawStream(torch.cuda.current_device())
        compiled.run(grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1, stream,
                     compiled.function, compiled.packed_metadata, None, None, None,
                     *(args if direct_args is None else direct_args))


def _launchable(compiled) -> bool:
    """The compiled-kernel attributes the direct path needs (triton 3.2 to 3.9 have them)."""
    return all(hasattr(compiled, name) for name in ("run", "function", "packed_metadata"))
