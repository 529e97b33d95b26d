"""seer.copy_engine.copy_rows: column blocks copied by the copy engines (GPU) or Tensor.copy_ (CPU)."""
import pytest
import torch

from seer.copy_engine import copy_rows
from seer.errors import InputError, SeerWarning


def _blocks(device):
    """(a poisoned column block of a wide matrix, a column block of another, the source's values)."""
    g = torch.Generator().manual_seed(3)
    source = torch.randn(300, 1000, generator=g).to(torch.bfloat16).to(device)
    target = torch.full((300, 700), float("nan"), dtype=torch.bfloat16, device=device)
    return target[:, 200:450], source[:, 500:750], target


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_copy_rows_moves_a_column_block_and_nothing_else(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    dst, src, whole = _blocks(device)
    copy_rows(dst, src)
    torch.cuda.synchronize() if device == "cuda" else None
    assert torch.equal(dst.cpu(), src.cpu())
    outside = torch.cat([whole[:, :200], whole[:, 450:]], dim=1)
    assert torch.isnan(outside.float()).all()  # the copy kept to its block


@pytest.mark.parametrize("dst, src, message", [
    (torch.empty(4, 6), torch.empty(4, 5), "one shape and dtype"),
    (torch.empty(4, 6), torch.empty(4, 6, dtype=torch.float16), "one shape and dtype"),
    (torch.empty(4), torch.empty(4), "2-D"),
])
def test_copy_rows_names_mismatched_blocks(dst, src, message):
    with pytest.raises(InputError, match=message):
        copy_rows(dst, src)


@pytest.mark.gpu
def test_copy_rows_names_strided_rows():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    wide = torch.zeros(8, 8, device="cuda")
    with pytest.raises(InputError, match="stride"):
        copy_rows(wide[:, ::2], torch.zeros(8, 4, device="cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["one row of stride 1", "broadcast rows", "overlapping rows", "conjugated",
                                    "negated"])
def test_copy_rows_copies_layouts_a_2d_copy_cannot_express(layout):
    """cudaMemcpy2DAsync refuses a pitch under the row's width, which these valid views have (a
    review: they raised on the GPU and copied on the CPU), and a raw copy drops a lazy conjugation
    or negation; the failure also stayed the runtime's last error, raised at torch's next launch."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    g = torch.Generator().manual_seed(5)
    line = torch.randn(64, generator=g).cuda()
    complex_block = torch.randn(4, 8, dtype=torch.complex64, generator=g).cuda()
    src = {"one row of stride 1": line[:5].reshape(5, 1).t(),  # shape (1, 5), strides (1, 1)
           "broadcast rows": line[:16].expand(4, 16),
           "overlapping rows": line.unfold(0, 8, 1)[:10],
           "conjugated": complex_block.conj(),
           "negated": torch._neg_view(complex_block)}[layout]
    dst = torch.full(src.shape, float("nan"), dtype=src.dtype, device="cuda")
    copy_rows(dst, src)
    torch.cuda.synchronize()
    assert torch.equal(dst.cpu(), src.resolve_conj().resolve_neg().cpu())
    torch.ones(8, device="cuda").add_(1)  # a launch after the copy: no error left behind
    torch.cuda.synchronize()


@pytest.mark.gpu
def test_copy_rows_falls_back_to_copy_with_a_warning_where_the_runtime_is_not_found(monkeypatch):
    """Without the CUDA runtime's 2-D copy the block is still copied, on the SMs, and the user told once."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from seer import copy_engine

    monkeypatch.setattr(copy_engine, "_memcpy_2d", None)  # looked up afresh, and restored after the test
    monkeypatch.setattr(copy_engine, "loaded_library", lambda name: None)
    dst, src, whole = _blocks("cuda")
    with pytest.warns(SeerWarning, match=r"could not use the CUDA runtime library torch loaded \(not found"):
        copy_rows(dst, src)
    torch.cuda.synchronize()
    assert torch.equal(dst.cpu(), src.cpu()) and torch.isnan(whole[:, :200].float()).all()
    assert copy_engine._memcpy_2d is False  # not looked up again on the next copy


@pytest.mark.gpu
def test_copy_rows_raises_a_failed_copy_and_clears_the_runtime_error(monkeypatch):
    """A status from cudaMemcpy2DAsync is raised by name, and cleared: left as the runtime's last error,
    torch would raise it at its next launch, from an unrelated op. The pitches passed are the rows'."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from seer import copy_engine

    copy_engine._runtime_copy()
    calls, cleared = [], []
    monkeypatch.setattr(copy_engine, "_memcpy_2d", lambda *args: calls.append(args) or 11)  # cudaErrorInvalidValue
    monkeypatch.setattr(copy_engine, "_clear_last_error", lambda: cleared.append(True) or 0)
    dst, src, _ = _blocks("cuda")
    with pytest.raises(copy_engine.SeerError, match=r"cudaMemcpy2DAsync of a \[300, 250\] torch.bfloat16 block failed "
                                                    r"with CUDA error 11"):
        copy_rows(dst, src)
    assert cleared == [True]
    (dst_at, dst_pitch, src_at, src_pitch, width, rows, kind, _stream), = calls
    assert (dst_at, src_at) == (dst.data_ptr(), src.data_ptr())
    assert (dst_pitch, src_pitch, width, rows, kind) == (700 * 2, 1000 * 2, 250 * 2, 300, 3)


@pytest.mark.gpu
def test_copy_rows_falls_back_where_the_runtime_will_not_load(monkeypatch):
    """A runtime found but not loadable raised OSError from every copy instead of the warned fallback
    (a review)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from seer import copy_engine

    monkeypatch.setattr(copy_engine, "_memcpy_2d", None)
    monkeypatch.setattr(copy_engine, "loaded_library", lambda name: "/nonexistent/libcudart.so.13")
    dst, src, _ = _blocks("cuda")
    with pytest.warns(SeerWarning, match=r"could not use the CUDA runtime library torch loaded \(.*nonexistent"):
        copy_rows(dst, src)
    torch.cuda.synchronize()
    assert torch.equal(dst.cpu(), src.cpu()) and copy_engine._memcpy_2d is False


@pytest.mark.gpu
@pytest.mark.parametrize("view", ["conjugated", "negated"])
def test_copy_rows_into_a_lazily_conjugated_or_negated_destination(view):
    """A raw copy into ``dst.conj()`` stored the source's bytes, which then read back conjugated; torch's
    copy stores conj(src) there (a review)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    src = torch.randn(4, 8, dtype=torch.complex64, generator=torch.Generator().manual_seed(7)).cuda()
    base = torch.full((4, 8), complex(float("nan"), float("nan")), dtype=torch.complex64, device="cuda")
    dst = base.conj() if view == "conjugated" else torch._neg_view(base)
    copy_rows(dst, src)
    torch.cuda.synchronize()
    assert torch.equal(dst.resolve_conj().resolve_neg().cpu(), src.cpu())
