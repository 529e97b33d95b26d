"""Validated CSR matrices: the input every sparse op in seer works on.

`as_csr` accepts a torch sparse CSR tensor, a scipy CSR matrix or an
``(indptr, indices, values, shape)`` tuple and checks it once; kernels then trust it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from seer.errors import InputError

VALUE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
INDEX_DTYPES = (torch.int32, torch.int64)


@dataclass(eq=False)
class CsrMatrix:
    """A CSR matrix whose structure has been checked.

    ``scratch`` holds per-matrix preprocessing that kernels compute once and reuse
    (row bins, chunk boundaries); it is dropped with the matrix.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    values: torch.Tensor
    shape: tuple[int, int]
    scratch: dict = field(default_factory=dict, repr=False)

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[1]

    @property
    def nnz(self) -> int:
        return self.values.numel()

    @property
    def device(self) -> torch.device:
        return self.values.device

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    def to_scipy(self):
        """The same matrix as a float64 scipy CSR matrix (for references and features)."""
        import scipy.sparse as sp

        return sp.csr_matrix(
            (
                self.values.detach().float().cpu().numpy().astype(np.float64),
                self.indices.cpu().numpy(),
                self.indptr.cpu().numpy(),
            ),
            shape=self.shape,
        )


def as_csr(matrix, *, check: bool = True) -> CsrMatrix:
    """Validate ``matrix`` and return it as a :class:`CsrMatrix`.

    ``check=False`` skips the one pass over the index arrays (monotone ``indptr``,
    in-range column indices); the cheap metadata checks always run.
    """
    if isinstance(matrix, CsrMatrix):
        return matrix
    indptr, indices, values, shape = _unpack(matrix)
    csr = CsrMatrix(indptr, indices, values, shape)
    _check_metadata(csr)
    if check:
        _check_structure(csr)
    return csr


def _unpack(matrix):
    if isinstance(matrix, torch.Tensor):
        if matrix.layout != torch.sparse_csr:
            raise InputError(
                f"expected a sparse CSR tensor, got layout {matrix.layout}; "
                "convert with tensor.to_sparse_csr()"
            )
        if matrix.dim() != 2:
            raise InputError(f"expected a 2-D CSR matrix, got {matrix.dim()} dimensions (batched CSR is not supported)")
        return (matrix.crow_indices(), matrix.col_indices(), matrix.values(), tuple(matrix.shape))
    if _is_scipy_sparse(matrix):
        m = matrix.tocsr()
        return (torch.from_numpy(m.indptr), torch.from_numpy(m.indices), torch.from_numpy(m.data), m.shape)
    if isinstance(matrix, (tuple, list)) and len(matrix) == 4:
        indptr, indices, values, shape = matrix
        for name, t in (("indptr", indptr), ("indices", indices), ("values", values)):
            if not isinstance(t, torch.Tensor):
                raise InputError(f"CSR {name} must be a torch.Tensor, got {type(t).__name__}")
        try:
            shape = (int(shape[0]), int(shape[1]))
        except (TypeError, ValueError, IndexError):
            raise InputError(f"CSR shape must be a pair of integers (rows, cols), got {shape!r}") from None
        return indptr, indices, values, shape
    raise InputError(
        "a sparse matrix must be a torch sparse CSR tensor, a scipy CSR matrix or an "
        f"(indptr, indices, values, shape) tuple; got {type(matrix).__name__}"
    )


def _is_scipy_sparse(obj) -> bool:
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a dependency
        return False
    return sp.issparse(obj)


def _check_metadata(csr: CsrMatrix) -> None:
    rows, cols = csr.shape
    if rows < 0 or cols < 0:
        raise InputError(f"CSR shape must be non-negative, got {csr.shape}")
    for name in ("indptr", "indices", "values"):
        t = getattr(csr, name)
        if t.dim() != 1:
            raise InputError(f"CSR {name} must be 1-D, got shape {tuple(t.shape)}")
        if not t.is_contiguous():
            setattr(csr, name, t.contiguous())
    if csr.values.dtype not in VALUE_DTYPES:
        raise InputError(
            f"CSR values have dtype {csr.values.dtype}; seer supports float32, float16 and bfloat16 "
            "(convert with values.to(torch.float32))"
        )
    if csr.indptr.dtype not in INDEX_DTYPES or csr.indices.dtype not in INDEX_DTYPES:
        raise InputError(
            f"CSR index arrays must be int32 or int64, got indptr {csr.indptr.dtype} and indices {csr.indices.dtype}"
        )
    if csr.indptr.dtype != csr.indices.dtype:
        raise InputError(
            f"CSR indptr ({csr.indptr.dtype}) and indices ({csr.indices.dtype}) must share one dtype"
        )
    devices = {csr.indptr.device, csr.indices.device, csr.values.device}
    if len(devices) != 1:
        raise InputError(f"CSR arrays live on different devices: {sorted(map(str, devices))}")
    if csr.indptr.numel() != rows + 1:
        raise InputError(f"CSR indptr has {csr.indptr.numel()} entries; a matrix with {rows} rows needs {rows + 1}")
    if csr.indices.numel() != csr.values.numel():
        raise InputError(
            f"CSR indices ({csr.indices.numel()}) and values ({csr.values.numel()}) differ in length"
        )
    if csr.indices.dtype == torch.int32 and csr.nnz >= 2**31:
        raise InputError(f"{csr.nnz} nonzeros overflow int32 indices; use int64 index arrays")


def _check_structure(csr: CsrMatrix) -> None:
    """One pass over the index arrays; a single host read-back for all checks."""
    p = csr.indptr  # rows + 1 >= 1 entries: the metadata checks ran first
    lo, hi = torch.aminmax(csr.indices) if csr.nnz else (p.new_zeros(()), p.new_zeros(()))
    first, last, monotone, lo, hi = torch.stack(
        [p[0].long(), p[-1].long(), (p[1:] >= p[:-1]).all().long(), lo.long(), hi.long()]
    ).tolist()
    if first != 0:
        raise InputError(f"CSR indptr must start at 0, starts at {first}")
    if last != csr.nnz:
        raise InputError(f"CSR indptr ends at {last} but there are {csr.nnz} stored values")
    if not monotone:
        raise InputError("CSR indptr is not non-decreasing: row pointers must be sorted")
    if csr.nnz and (lo < 0 or hi >= csr.cols):
        raise InputError(
            f"CSR column indices must lie in [0, {csr.cols}); found values in [{lo}, {hi}]"
        )


def check_dense_vector(csr: CsrMatrix, x: torch.Tensor, name: str = "x") -> None:
    """Cheap per-call checks of the dense operand of a sparse matrix-vector op."""
    if not isinstance(x, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 1:
        raise InputError(f"{name} must be 1-D, got shape {tuple(x.shape)}")
    if x.numel() != csr.cols:
        raise InputError(f"{name} has {x.numel()} entries; the matrix has {csr.cols} columns")
    if x.device != csr.device:
        raise InputError(f"{name} is on {x.device} but the matrix is on {csr.device}")
    if x.dtype != csr.dtype:
        raise InputError(f"{name} has dtype {x.dtype} but the matrix values have {csr.dtype}; cast one to match")
