"""cuSPARSE's SpMV through its generic API, prepared once per matrix.

torch's sparse CSR product builds cuSPARSE's descriptors and workspace afresh on every call, and
cuSPARSE's CSR algorithm then runs a partition kernel before its SpMV kernel, every time: ~9 us of
GPU time on an H200, more than the SpMV itself on a matrix of a million nonzeros
(``benchmarks/NOTES.md``, SpMV 26). ``cusparseSpMV_preprocess`` does that work once for a matrix
and keeps it in the workspace. :class:`SpmvPlan` holds one matrix's descriptors, workspace and
preprocessing; a call points the vector descriptors at x and y (where they moved since the last
one) and launches on torch's current stream. The library is the one torch has loaded (no second
copy, no new dependency).
"""
from __future__ import annotations

import ctypes
import threading

import torch

from seer.errors import SeerError, warn
from seer.native import loaded_library

_NON_TRANSPOSE = 0  # cusparseOperation_t
_INDEX_BASE_ZERO = 0  # cusparseIndexBase_t
_INDEX_TYPES = {torch.int32: 2, torch.int64: 3}  # cusparseIndexType_t: CUSPARSE_INDEX_32I, _64I
_VALUE_TYPES = {torch.float32: 0, torch.float16: 2, torch.bfloat16: 14}  # cudaDataType: CUDA_R_32F, _16F, _16BF
_COMPUTE_32F = 0  # every value type accumulates in float32, as seer's kernels do
ALGORITHMS = {"default": 0, "csr_alg1": 2, "csr_alg2": 3}  # cusparseSpMVAlg_t
# alpha and beta in host memory (the handle's default pointer mode), of the compute type.
_ONE, _ZERO = ctypes.c_float(1.0), ctypes.c_float(0.0)

_void, _int64, _size = ctypes.c_void_p, ctypes.c_int64, ctypes.c_size_t
_SIGNATURES = {
    "cusparseCreate": [_void],
    "cusparseDestroy": [_void],
    "cusparseSetStream": [_void, _void],
    "cusparseCreateCsr": [_void, _int64, _int64, _int64, _void, _void, _void, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int],
    "cusparseCsrSetPointers": [_void, _void, _void, _void],
    "cusparseDestroySpMat": [_void],
    "cusparseCreateDnVec": [_void, _int64, _void, ctypes.c_int],
    "cusparseDnVecSetValues": [_void, _void],
    "cusparseDestroyDnVec": [_void],
    "cusparseSpMV_bufferSize": [_void, ctypes.c_int, _void, _void, _void, _void, _void, ctypes.c_int, ctypes.c_int,
                                ctypes.POINTER(_size)],
    "cusparseSpMV_preprocess": [_void, ctypes.c_int, _void, _void, _void, _void, _void, ctypes.c_int, ctypes.c_int,
                                _void],
    "cusparseSpMV": [_void, ctypes.c_int, _void, _void, _void, _void, _void, ctypes.c_int, ctypes.c_int, _void],
}
_library = None  # the loaded library's functions, found on first use; False when it cannot be found
# A handle per thread and device (a handle must not be used by two threads at once), with the
# stream last bound to it: binding it again on every call cost a ctypes call each.
_handles = threading.local()


class _Handle:
    """One thread's cuSPARSE handle on one device. Destroyed with the thread's local storage when
    the thread ends: a server that starts threads would otherwise leak a handle (and the device
    memory it holds) with each."""

    __slots__ = ("address", "stream")

    def __init__(self, address: int):
        self.address, self.stream = address, None

    def __del__(self):
        if _library:
            _library.cusparseDestroy(self.address)


def available() -> bool:
    """Whether this process has cuSPARSE loaded (torch with CUDA)."""
    return _functions() is not None


def _functions():
    global _library
    if _library is None:
        path = loaded_library("libcusparse.so") if torch.cuda.is_available() else None
        try:
            _library = _bind(ctypes.CDLL(path)) if path else False
        except (OSError, AttributeError) as error:  # not a library, or one without the generic API
            warn(f"seer could not load the cuSPARSE library torch loaded ({path}: {error}); its cuSPARSE "
                 "variants are not offered")
            _library = False
    return _library or None


def _bind(library: ctypes.CDLL):
    for name, argtypes in _SIGNATURES.items():
        function = getattr(library, name)
        function.argtypes, function.restype = argtypes, ctypes.c_int
    library.cusparseGetErrorString.argtypes, library.cusparseGetErrorString.restype = [ctypes.c_int], ctypes.c_char_p
    return library


def _check(status: int, what: str) -> None:
    if status:
        message = _library.cusparseGetErrorString(status).decode()
        raise SeerError(f"cuSPARSE {what} failed: {message} (status {status})")


def _handle(device_index: int) -> _Handle:
    """This thread's handle on the device, bound to torch's current stream there."""
    handles = _handles.__dict__.setdefault("by_device", {})
    handle = handles.get(device_index)
    if handle is None:
        with torch.cuda.device(device_index):
            created = ctypes.c_void_p()
            _check(_library.cusparseCreate(ctypes.byref(created)), "cusparseCreate")
        handle = handles[device_index] = _Handle(created.value)
    stream = torch._C._cuda_getCurrentRawStream(device_index)
    if handle.stream != stream:
        _check(_library.cusparseSetStream(handle.address, stream), "cusparseSetStream")
        handle.stream = stream
    return handle


class SpmvPlan:
    """``y = A @ x`` by ``cusparseSpMV`` for one CSR matrix: descriptors and workspace made once,
    and the algorithm's preprocessing run once when ``preprocess``.

    The plan holds the arrays (the descriptors point at them); if they move, call
    :meth:`repoint`. Values written in place need nothing. x and y are contiguous vectors of the
    values' dtype on the matrix's device; the caller checks them.
    """

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, values: torch.Tensor, shape: tuple[int, int],
                 algorithm: str = "csr_alg1", preprocess: bool = True):
        self._matrix, self._x, self._y = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()  # for __del__
        if _functions() is None:
            raise SeerError("cuSPARSE is not loaded in this process (torch without CUDA?)")
        for what, key, known in (("algorithm", algorithm, ALGORITHMS), ("values' dtype", values.dtype, _VALUE_TYPES),
                                 ("index dtype", indptr.dtype, _INDEX_TYPES)):
            if key not in known:
                raise SeerError(f"a cuSPARSE plan takes an {what} of {sorted(map(str, known))}, got {key}")
        self._arrays = (indptr, indices, values)
        self._device = values.device.index
        self._lock = threading.Lock()
        self._algorithm = ALGORITHMS[algorithm]
        value_type, index_type = _VALUE_TYPES[values.dtype], _INDEX_TYPES[indptr.dtype]
        self._operands = (_NON_TRANSPOSE, ctypes.byref(_ONE), self._matrix, self._x, ctypes.byref(_ZERO), self._y,
                          _COMPUTE_32F, self._algorithm)
        _check(_library.cusparseCreateCsr(ctypes.byref(self._matrix), shape[0], shape[1], values.numel(),
                                          indptr.data_ptr(), indices.data_ptr(), values.data_ptr(), index_type,
                                          index_type, _INDEX_BASE_ZERO, value_type), "cusparseCreateCsr")
        # Placeholder vectors for the workspace query and the preprocessing; calls repoint them.
        x, y = values.new_empty(shape[1]), values.new_empty(shape[0])
        _check(_library.cusparseCreateDnVec(ctypes.byref(self._x), shape[1], x.data_ptr(), value_type),
               "cusparseCreateDnVec")
        _check(_library.cusparseCreateDnVec(ctypes.byref(self._y), shape[0], y.data_ptr(), value_type),
               "cusparseCreateDnVec")
        # Where each vector descriptor points: a call repoints one only when its vector moved (a
        # loop on one x into one out then costs one ctypes call, the product).
        self._pointed = [x.data_ptr(), y.data_ptr()]
        size = ctypes.c_size_t()
        handle = _handle(self._device)
        _check(_library.cusparseSpMV_bufferSize(handle.address, *self._operands, ctypes.byref(size)),
               "cusparseSpMV_bufferSize")
        self._workspace = torch.empty(max(size.value, 1), dtype=torch.uint8, device=values.device)
        self._workspace_at = self._workspace.data_ptr()
        # The streams the workspace was used on: the allocator reuses its memory once the plan goes
        # only after their work so far (record_stream), else a new tensor could overwrite it mid-product.
        self._streams = {handle.stream}
        if preprocess:
            _check(_library.cusparseSpMV_preprocess(handle.address, *self._operands, self._workspace_at),
                   "cusparseSpMV_preprocess")

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        handle, x_at, y_at = _handle(self._device), x.data_ptr(), y.data_ptr()
        # One pair of vector descriptors a plan: from pointing them to the launch no other thread
        # may repoint them (ctypes lets go of the GIL in between).
        with self._lock:
            pointed = self._pointed
            if pointed[0] != x_at:
                _check(_library.cusparseDnVecSetValues(self._x, x_at), "cusparseDnVecSetValues")
                pointed[0] = x_at
            if pointed[1] != y_at:
                _check(_library.cusparseDnVecSetValues(self._y, y_at), "cusparseDnVecSetValues")
                pointed[1] = y_at
            if handle.stream not in self._streams:
                self._workspace.record_stream(torch.cuda.current_stream(self._device))
                self._streams.add(handle.stream)
            _check(_library.cusparseSpMV(handle.address, *self._operands, self._workspace_at), "cusparseSpMV")
        return y

    def repoint(self, indptr: torch.Tensor, indices: torch.Tensor, values: torch.Tensor) -> None:
        """Point the matrix descriptor at moved arrays of the same structure."""
        with self._lock:
            self._arrays = (indptr, indices, values)
            _check(_library.cusparseCsrSetPointers(self._matrix, indptr.data_ptr(), indices.data_ptr(),
                                                   values.data_ptr()), "cusparseCsrSetPointers")

    def __del__(self):
        if _library:  # descriptors only: the workspace is a tensor and goes with the plan
            for descriptor, destroy in ((self._matrix, _library.cusparseDestroySpMat),
                                        (self._x, _library.cusparseDestroyDnVec),
                                        (self._y, _library.cusparseDestroyDnVec)):
                if descriptor.value:
                    destroy(descriptor)
