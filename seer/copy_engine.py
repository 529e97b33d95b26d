"""Copies of row-strided 2-D blocks by the GPU's copy engines (``cudaMemcpy2DAsync``).

``Tensor.copy_`` moves a contiguous tensor with ``cudaMemcpyAsync`` (the copy engines), but a
block of columns, whose rows sit a pitch apart, with an SM kernel. The pipelined overlap patterns
copy column blocks across the links while cuBLAS keeps every SM busy, so they need the engines for
those too; torch does not expose the 2-D copy, so :func:`copy_rows` calls the CUDA runtime that
torch has already loaded. Off CUDA it is ``Tensor.copy_``; if that runtime cannot be found it warns
once and falls back to ``Tensor.copy_`` (right, but on the SMs).
"""
from __future__ import annotations

import ctypes

import torch

from seer.errors import InputError, SeerError, warn
from seer.native import loaded_library

_DEVICE_TO_DEVICE = 3  # cudaMemcpyKind
_memcpy_2d = None  # the runtime's cudaMemcpy2DAsync, found on first use; False when it cannot be found
_clear_last_error = None  # the same runtime's cudaGetLastError, which also resets the error it returns


def copy_rows(dst: torch.Tensor, src: torch.Tensor) -> None:
    """``dst[:] = src`` on the current stream, by the copy engines on CUDA.

    Both are 2-D, of one shape and dtype, with contiguous rows (``stride(1) == 1``); either may be a
    view of a peer's symmetric heap. Layouts a 2-D copy cannot express (rows that overlap or repeat,
    as a broadcast source's do) and tensors torch conjugates or negates lazily go to ``Tensor.copy_``.
    """
    if dst.shape != src.shape or dst.dtype != src.dtype or dst.dim() != 2:
        raise InputError(f"copy_rows copies between 2-D tensors of one shape and dtype, got "
                         f"{list(dst.shape)} {dst.dtype} and {list(src.shape)} {src.dtype}")
    if dst.device.type != "cuda" or dst.numel() == 0 or _runtime_copy() is None:
        dst.copy_(src)
        return
    if dst.stride(1) != 1 or src.stride(1) != 1 or src.device != dst.device:
        raise InputError("copy_rows needs rows that are contiguous (stride(1) == 1) on one device, got strides "
                         f"{dst.stride()} and {src.stride()}")
    size, rows = dst.element_size(), dst.shape[0]
    width = dst.shape[1] * size
    # One row's pitch is never used, but CUDA refuses any pitch under the width.
    pitches = [t.stride(0) * size if rows > 1 else width for t in (dst, src)]
    # Lazy conjugation or negation, of either side, is a flag on the view that only torch's copy honours.
    if min(pitches) < width or src.is_conj() or src.is_neg() or dst.is_conj() or dst.is_neg():
        dst.copy_(src)
        return
    stream = torch._C._cuda_getCurrentRawStream(dst.device.index)
    status = _memcpy_2d(dst.data_ptr(), pitches[0], src.data_ptr(), pitches[1], width, rows, _DEVICE_TO_DEVICE, stream)
    if status:
        _clear_last_error()  # else torch's next launch check would raise it, at some other op
        raise SeerError(f"cudaMemcpy2DAsync of a {list(dst.shape)} {dst.dtype} block failed with CUDA error {status}")


def _runtime_copy():
    """cudaMemcpy2DAsync of the CUDA runtime library this process has loaded (torch's), or None."""
    global _memcpy_2d, _clear_last_error
    if _memcpy_2d is None:
        torch.cuda.init()  # loads the runtime
        functions, why_not = _runtime_functions(loaded_library("libcudart.so"))
        if functions is None:
            warn(f"seer could not use the CUDA runtime library torch loaded ({why_not}): column-block copies "
                 "run on the SMs (Tensor.copy_) instead of the copy engines")
            _memcpy_2d = False
        else:
            _memcpy_2d, _clear_last_error = functions
    return _memcpy_2d or None


def _runtime_functions(path: str | None):
    """``((cudaMemcpy2DAsync, cudaGetLastError), "")`` of the runtime library at ``path``, or ``(None, why
    not)``: a library that will not load or lacks them is a fallback, as a missing one is."""
    if path is None:
        return None, "not found among the libraries this process mapped"
    try:
        runtime = ctypes.CDLL(path)
        copy, last_error = runtime.cudaMemcpy2DAsync, runtime.cudaGetLastError
    except (OSError, AttributeError) as error:
        return None, str(error)
    copy.restype, last_error.restype = ctypes.c_int, ctypes.c_int
    copy.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                     ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    return (copy, last_error), ""

