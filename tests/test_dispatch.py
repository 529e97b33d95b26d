"""seer.dispatch / seer.explain end to end on the CPU (Triton interpreter)."""
import dataclasses
import json
import os
import pathlib
import re
import sys
import threading
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

import seer
from seer.datasets import generators
from seer.dispatch import SHIPPED_MODELS
from seer.errors import InputError, SeerWarning
from seer.features import spmv as spmv_features
from seer.kernels import spmv as spmv_kernels
from seer.model import GATHER, SelectorModel
from seer.sparse import as_csr
from seer.table import ProfileTable
from seer.train import TwoStageSelector
from seer.tree import Tree

SMALL, BIG = "scalar_r128", "vector_g32"
_KNOWN = tuple(f.name for f in spmv_features.KNOWN)
_GATHERED = tuple(f.name for f in spmv_features.GATHERED)


def _matrix(rows=300, cols=200, density=0.05, seed=0):
    m = sp.random(rows, cols, density=density, format="csr", random_state=seed, dtype=np.float32)
    m.data = np.random.default_rng(seed).uniform(0.5, 1.5, m.nnz).astype(np.float32)
    return m


def _parts(m):
    return (torch.from_numpy(m.indptr.astype(np.int64)), torch.from_numpy(m.indices.astype(np.int64)),
            torch.from_numpy(m.data), m.shape)


def _check(y, m, x):
    ref = m.astype(np.float64) @ x.double().numpy()
    assert np.linalg.norm(y.double().numpy() - ref) <= 1e-5 * np.linalg.norm(ref)


@pytest.fixture(scope="module")
def spmv_model():
    """A model trained on a planted table: nnz < 3000 -> scalar, else vector (stage 1 only)."""
    rng = np.random.default_rng(0)
    n = 120
    nnz = np.rint(10 ** rng.uniform(2, 5, n))
    rows = np.rint(nnz / rng.uniform(2, 10, n))
    small = nnz < 3000
    frame = pd.DataFrame({
        "id": [f"m{i}" for i in range(n)], "group": [f"g{i // 3}" for i in range(n)],
        "rows": rows, "cols": rows, "nnz": nnz, "mean_row": nnz / rows,
        f"time_ms:{SMALL}": np.where(small, 1.0, 3.0), f"time_ms:{BIG}": np.where(small, 2.0, 1.0),
    })
    meta = {"op": "spmv", "device": {"name": "Test GPU", "capability": [9, 0]}, "versions": {}, "date": "", "command": "test"}
    table = ProfileTable.from_frame(frame, "spmv", meta=meta)
    return TwoStageSelector(folds=3).fit(table).to_model(table, command="test")


@pytest.fixture(autouse=True)
def fresh_cache():
    seer.clear_cache()
    yield
    seer.clear_cache()


def test_dispatch_matches_scipy_with_hand_rule_fallback():
    m = _matrix()
    x = torch.randn(m.shape[1])
    # Off a GPU, advice that can be followed there: profiling needs a GPU (found by a user's walkthrough);
    # the models' paths, which model= takes (a file name alone is looked for in the working folder).
    with pytest.warns(SeerWarning, match=r"no spmv model measured on 'cpu': seer's models are measured on GPUs \(to "
                                         r"see a GPU's choices here, pass model= one of \[.*'/\S+/models/spmv-h100.json'.*\]\)"
                                         r".*hand rule"):
        y = seer.dispatch("spmv", (_parts(m), x))
    _check(y, m, x)
    assert seer.explain("spmv", (_parts(m), x)).stage == "hand rule"


def test_a_model_of_an_unnamed_device_is_said_so(spmv_model):
    m = _matrix()
    unnamed = dataclasses.replace(spmv_model, device={"capability": [9, 0]})
    with pytest.warns(SeerWarning, match="model for spmv was measured on an unnamed device, running on 'cpu'"):
        seer.explain("spmv", (_parts(m), torch.randn(m.shape[1])), model=unnamed)


def test_model_choice_and_explanation(spmv_model):
    small, big = _matrix(100, 100, 0.05, 1), _matrix(400, 300, 0.1, 2)
    for m, expected in ((small, SMALL), (big, BIG)):
        x = torch.randn(m.shape[1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SeerWarning)  # the model was measured on "Test GPU"
            decision = seer.explain("spmv", (_parts(m), x), model=spmv_model)
            y = seer.dispatch("spmv", (_parts(m), x), model=spmv_model)
        assert decision.variant == expected
        assert any("nnz" in step for step in decision.path)
        assert expected in str(decision) and "nnz=" in str(decision)
        _check(y, m, x)


def _split(features, labels, feature, threshold, left, right):
    return Tree(features, labels, feature=(features.index(feature), -1, -1), threshold=(threshold, None, None),
                left=(1, -1, -1), right=(2, -1, -1), label=(-1, labels.index(left), labels.index(right)),
                n_samples=(10, 6, 4), mean_regret=(0.0, 0.0, 0.0))


def test_validated_matrices_skip_stage1(monkeypatch):
    """Stage 1 runs SMALL without gathering; stage 2 runs BIG on skewed rows. A validated matrix
    brings its row statistics, so stage 2 decides; an unchecked one is left to stage 1."""
    everything = _KNOWN + _GATHERED
    model = SelectorModel(
        op="spmv", variants=(SMALL, BIG), known_features=_KNOWN, gathered_features=_GATHERED,
        stage1={1: _split(_KNOWN, (SMALL, BIG, GATHER), "nnz", 1e12, SMALL, GATHER)},
        stage2={1: _split(everything, (SMALL, BIG), "row_cv", 0.5, SMALL, BIG)},
        device={"name": "cpu", "capability": None}, versions={}, training={})
    m = _matrix(400, 300, 0.02, 3)
    m[0, :] = 1.0  # one dense row: row-length CV far above 0.5
    m = m.tocsr()
    x = torch.randn(m.shape[1])
    monkeypatch.setattr(spmv_features, "gathered", lambda csr: pytest.fail("the validation pass had the features"))
    decision = seer.explain("spmv", (_parts(m), x), model=model)
    assert decision.variant == BIG and decision.features["row_cv"] > 0.5
    assert decision.path[0] == "gathered features came with the validation pass"
    _check(seer.dispatch("spmv", (_parts(m), x), model=model), m, x)
    unchecked = seer.explain("spmv", (as_csr(_parts(m), check=False), x), model=model)
    assert (unchecked.variant, unchecked.stage) == (SMALL, "stage 1 (known features)")


def test_cache_hit_and_in_place_change():
    m = _matrix()
    parts = _parts(m)
    x = torch.randn(m.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        seer.dispatch("spmv", (parts, x))
        seer.dispatch("spmv", (parts, torch.randn(m.shape[1])))
        assert seer.cache_info()["hits"] == 1
        parts[1][0] = parts[1][0]  # an in-place write bumps the version: re-examined
        seer.dispatch("spmv", (parts, x))
    info = seer.cache_info()
    assert info["hits"] == 1 and info["misses"] == 2


def test_an_input_cached_again_in_a_new_state_drops_its_entries_under_every_variant():
    """The entries of an input's old state (its structure written in place) under other variants
    and models cannot be reached any more: caching the new state drops them, releasing their plans."""
    m = _matrix()
    parts = _parts(m)
    x = torch.randn(m.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        for variant in (None, "vector_g8", "scalar_r128"):
            seer.dispatch("spmv", (parts, x), variant=variant)
        assert seer.cache_info()["size"] == 3
        parts[1][0] = parts[1][0]  # an in-place write bumps the version: a new state
        _check(seer.dispatch("spmv", (parts, x), variant="vector_g8"), m, x)
        assert seer.cache_info()["size"] == 1
        assert seer.cached_decision("spmv", (parts, x)) is None
        seer.dispatch("spmv", (parts, x))
        assert seer.cache_info()["size"] == 2


def test_values_written_in_place_keep_the_decision_of_a_tuple():
    """Separate arrays: new values in place are a cache hit, and the next call reads them."""
    m = _matrix()
    parts = _parts(m)
    x = torch.randn(m.shape[1])
    expected = -2 * m  # before the write: the values tensor shares m's memory
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        seer.dispatch("spmv", (parts, x))
        parts[2].mul_(-2)
        y = seer.dispatch("spmv", (parts, x))
    assert seer.cache_info()["hits"] == 1
    _check(y, expected, x)


@pytest.mark.parametrize("member", ["crow_indices", "col_indices"])
def test_torch_csr_in_place_change_is_seen(member):
    """The cache key of a torch CSR tensor reads only its own version: in-place writes to its
    structure must bump it (they share one version counter), or the cached plan would be stale."""
    m = _matrix()
    A = torch.sparse_csr_tensor(*(t.clone() for t in _parts(m)[:3]), m.shape)
    x = torch.randn(m.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        seer.dispatch("spmv", (A, x))
        seer.dispatch("spmv", (A, x))
        getattr(A, member)()[0] = getattr(A, member)()[0]
        seer.dispatch("spmv", (A, x))
    info = seer.cache_info()
    assert info["hits"] == 1 and info["misses"] == 2


def test_hot_path_still_validates_the_vector():
    m = _matrix()
    parts = _parts(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        seer.dispatch("spmv", (parts, torch.randn(m.shape[1])))
    with pytest.raises(InputError, match="columns"):
        seer.dispatch("spmv", (parts, torch.randn(m.shape[1] + 1)))


def test_out_receives_the_result_on_cold_and_cached_calls():
    m = _matrix()
    parts = _parts(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        for _ in range(2):  # the first call decides, the second hits the cache
            x = torch.randn(m.shape[1])
            out = torch.full((m.shape[0],), float("nan"))
            assert seer.dispatch("spmv", (parts, x), out=out) is out
            _check(out, m, x)
        with pytest.raises(InputError, match="shape"):
            seer.dispatch("spmv", (parts, x), out=torch.empty(m.shape[0] + 1))
        with pytest.raises(InputError, match="dtype"):
            seer.dispatch("spmv", (parts, x), out=torch.empty(m.shape[0], dtype=torch.float64))
    with pytest.raises(InputError, match="does not take out="):
        seer.dispatch("all_gather_gemm", (torch.ones(2, 2), torch.ones(2, 2)), out=torch.empty(2, 2))


def test_out_over_x_is_refused_on_first_and_cached_calls():
    """The first call (the validating product on a small matrix) and a cached one alike refuse an
    out that overlaps x, before anything is written; the matrix is decided and served after."""
    m = _matrix(rows=200, cols=200)
    parts = _parts(m)
    x = torch.randn(200)
    kept = x.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        with pytest.raises(InputError, match="overlaps x"):
            seer.dispatch("spmv", (parts, x), out=x)
        _check(seer.dispatch("spmv", (parts, x)), m, x)
        with pytest.raises(InputError, match="overlaps x"):
            seer.dispatch("spmv", (parts, x), out=x)
    assert torch.equal(x, kept)

def test_values_not_contiguous_are_examined_on_every_call():
    """Separate arrays whose values are a strided view: the kernels read a contiguous copy, which a
    cache hit after values written in place would leave stale; so no decision is cached (a warning
    says why, once: a serving loop would repeat it on every call) and every call reads the new values."""
    m = _matrix()
    indptr, indices, contiguous, shape = _parts(m)
    buffer = torch.full((2 * m.nnz,), float("nan"))
    buffer[::2] = contiguous
    parts = (indptr, indices, buffer[::2], shape)
    x = torch.randn(m.shape[1])
    sys.modules["seer.kernels.spmv"]._warned.discard("strided values")
    with pytest.warns(SeerWarning, match="not contiguous"):
        _check(seer.dispatch("spmv", (parts, x)), m, x)
    parts[2].mul_(-3.0)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*not contiguous.*")
        _check(seer.dispatch("spmv", (parts, x)), -3.0 * m, x)
    assert seer.cache_info()["size"] == 0

def test_writes_into_the_arrays_a_torch_csr_tensor_was_built_from_are_not_seen():
    """The limit the README states: torch gives a CSR tensor its own version counter, so new values
    written through ``A.values()`` are seen (a new decision, a new copy by diagonals) but values
    written into the tensor it was built from are not, until ``seer.clear_cache()``. If torch ever
    shares the counters, this fails: the README's caveat can go."""
    m = generators.banded(900, 4, seed=21).astype(np.float32)
    values = torch.from_numpy(m.data.copy())
    A = torch.sparse_csr_tensor(torch.from_numpy(m.indptr.astype(np.int32)),
                                torch.from_numpy(m.indices.astype(np.int32)), values, m.shape)
    x = torch.randn(900)

    def product():
        return seer.dispatch("spmv", (A, x), variant="diagonal_major_r512")

    def exact():
        return sp.csr_matrix((values.double().numpy(), m.indices, m.indptr), shape=m.shape)

    _check(product(), exact(), x)
    A.values().mul_(-2.0)
    _check(product(), exact(), x)
    values.mul_(3.0)
    with pytest.raises(AssertionError):  # the rows that follow the band read the old copy
        _check(product(), exact(), x)
    seer.clear_cache()
    _check(product(), exact(), x)

@pytest.mark.parametrize("variant", ["diagonal_r128", "diagonal_major_r512", "merge_c512_hot64k", "offsets_i16"])
def test_column_indices_written_into_the_tensor_a_csr_was_built_from_are_not_seen(variant):
    """The README's caveat for structure: a plan made from the column indices (the diagonal
    variants' pattern, the hot variant's renumbered copy, the offsets' copy) keeps the old ones after a write into the
    tensor the CSR tensor was built from, until ``seer.clear_cache()``; a write through
    ``A.col_indices()`` is seen (a new decision, a new plan). Row 10's first column moves 9 -> 8."""
    m = generators.banded(300, 1, seed=5).astype(np.float32)
    indices = torch.from_numpy(m.indices.astype(np.int32))
    A = torch.sparse_csr_tensor(torch.from_numpy(m.indptr.astype(np.int32)), indices, torch.from_numpy(m.data), m.shape)
    x = torch.randn(300)
    x[8] = x[9] + 1.0  # moving the nonzero changes the product by its value, far above _check's tolerance

    def product():
        return seer.dispatch("spmv", (A, x), variant=variant)

    def exact():
        return sp.csr_matrix((m.data, indices.numpy().copy(), m.indptr), shape=m.shape)

    _check(product(), exact(), x)
    first = int(m.indptr[10])
    assert int(indices[first]) == 9
    for column in (8, 9):  # seen: row 10 leaves the band's pattern, then joins it again
        A.col_indices()[first] = column
        _check(product(), exact(), x)
    indices[first] = 8
    with pytest.raises(AssertionError):  # the plan's structure is the one before the write
        _check(product(), exact(), x)
    seer.clear_cache()
    _check(product(), exact(), x)


@pytest.mark.parametrize("array", ["values", "col_indices"])
def test_writes_into_the_arrays_a_csr_was_built_from_are_not_seen_by_the_column_slices(array):
    """The README's caveat for ``cusparse_slices_16k``, whose stack copies a matrix's values and
    column indices (here four column slices): a write through ``A.values()`` or ``A.col_indices()``
    is seen, one into the tensor A was built from is not, until ``seer.clear_cache()``. The write
    moves one nonzero to another slice, or scales the values."""
    from test_spmv_kernels import sliced_matrix

    m = sliced_matrix(np.random.default_rng(9)).astype(np.float32)
    m.sort_indices()
    indices, values = torch.from_numpy(m.indices.astype(np.int32)), torch.from_numpy(m.data)
    A = torch.sparse_csr_tensor(torch.from_numpy(m.indptr.astype(np.int32)), indices, values, m.shape)
    x = torch.randn(m.shape[1])
    moved_from = int(indices[0])
    x[m.shape[1] - 1 - moved_from] = x[moved_from] + 1.0  # the move changes the product far above _check's tolerance

    def product():
        return seer.dispatch("spmv", (A, x), variant="cusparse_slices_16k")

    def exact():
        return sp.csr_matrix((values.double().numpy(), indices.numpy().copy(), m.indptr), shape=m.shape)

    def write(tensor):
        if array == "values":
            tensor.mul_(-2.0)
        else:
            tensor[0] = m.shape[1] - 1 - int(tensor[0])  # row 0's first column into the last slice and back

    _check(product(), exact(), x)
    write(A.values() if array == "values" else A.col_indices())
    _check(product(), exact(), x)
    write(values if array == "values" else indices)
    with pytest.raises(AssertionError):  # the stack holds the matrix before the write
        _check(product(), exact(), x)
    seer.clear_cache()
    _check(product(), exact(), x)


@pytest.mark.parametrize("calls", [0, -5, 2.5, 1.0, "ten", True])
def test_a_calls_hint_must_be_a_count(calls):
    """A hint that is not a whole number of calls, 1 or more, is refused by dispatch and explain
    alike (0 and 2.5 used to be taken as 1 and 2.5, a string failed inside the model)."""
    m = _matrix()
    for ask in (seer.dispatch, seer.explain):
        with pytest.raises(InputError, match="calls must be a whole number"):
            ask("spmv", (_parts(m), torch.randn(m.shape[1])), calls=calls)


@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
def test_a_calls_hint_may_be_a_numpy_integer():
    m = _matrix()
    x = torch.randn(m.shape[1])
    _check(seer.dispatch("spmv", (_parts(m), x), calls=np.int64(100)), m, x)

@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
def test_operands_that_require_grad_are_refused_while_autograd_is_on():
    """seer's kernels have no backward: a result cut off from autograd would drop gradients without
    a word. Refused on the first call and on a cached one; served under torch.no_grad()."""
    from types import SimpleNamespace

    from seer.kernels import overlap

    m = _matrix()
    parts, x = _parts(m), torch.randn(m.shape[1])
    wants_grad = x.clone().requires_grad_()
    with pytest.raises(InputError, match="x requires grad"):
        seer.dispatch("spmv", (parts, wants_grad))
    seer.dispatch("spmv", (parts, x))  # decided and cached
    with pytest.raises(InputError, match="x requires grad"):
        seer.dispatch("spmv", (parts, wants_grad))
    with torch.no_grad():
        _check(seer.dispatch("spmv", (parts, wants_grad)), m, x)
    with pytest.raises(InputError, match="values requires grad"):
        seer.dispatch("spmv", ((*parts[:2], parts[2].clone().requires_grad_(), parts[3]), x))
    a, b = torch.randn(8, 16, dtype=torch.float16), torch.randn(16, 4, dtype=torch.float16)
    for operands, name in (((a.clone().requires_grad_(), b), "a"), ((a, b.clone().requires_grad_()), "b")):
        with pytest.raises(InputError, match=f"gemm: {name} requires grad"):
            seer.dispatch("gemm", operands)
    spec = SimpleNamespace(op="all_gather_gemm", a_shape=(8, 16), b_shape=(16, 4), dtype=a.dtype, device=a.device)
    with pytest.raises(InputError, match="all_gather_gemm: b requires grad"):
        overlap.check_operands(spec, (a, b.clone().requires_grad_()))

@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
def test_operands_carrying_a_forward_mode_tangent_are_refused():
    """torch.autograd.forward_ad: a dual tensor has requires_grad False, so it passed the checks and
    the Triton variants returned a result without its tangent (a review). Refused on first and cached
    calls, out= too; plain operands inside a dual level are served."""
    from torch.autograd import forward_ad

    m = _matrix()
    parts, x = _parts(m), torch.randn(m.shape[1])
    a, b = torch.randn(8, 16, dtype=torch.float16), torch.randn(16, 4, dtype=torch.float16)
    seer.dispatch("spmv", (parts, x))  # decided and cached
    with forward_ad.dual_level():
        dual_x = forward_ad.make_dual(x, torch.ones_like(x))
        for attempt in range(2):  # the first call on a fresh matrix, then a cached one
            with pytest.raises(InputError, match="spmv: x carries a forward-mode tangent"):
                seer.dispatch("spmv", (_parts(m) if attempt == 0 else parts, dual_x))
        out = forward_ad.make_dual(torch.empty(m.shape[0]), torch.ones(m.shape[0]))
        with pytest.raises(InputError, match="spmv: out carries a forward-mode tangent"):
            seer.dispatch("spmv", (parts, x), out=out)
        dual_values = forward_ad.make_dual(parts[2], torch.ones_like(parts[2]))
        with pytest.raises(InputError, match="spmv: values carries a forward-mode tangent"):
            seer.dispatch("spmv", ((*parts[:2], dual_values, parts[3]), x))
        _check(seer.dispatch("spmv", (parts, x)), m, x)
        for variant in ("tile_16x64x128_w4s4g1", "torch_matmul"):
            with pytest.raises(InputError, match="gemm: a carries a forward-mode tangent"):
                seer.dispatch("gemm", (forward_ad.make_dual(a, torch.ones_like(a)), b), variant=variant)
            with pytest.raises(InputError, match="gemm: out carries a forward-mode tangent"):
                seer.dispatch("gemm", (a, b), variant=variant,
                              out=forward_ad.make_dual(torch.empty(8, 4, dtype=a.dtype), torch.ones(8, 4, dtype=a.dtype)))


@pytest.mark.filterwarnings("ignore::seer.errors.SeerWarning")
def test_explain_answers_for_operands_that_require_grad():
    """explain runs nothing gradients would flow through: what seer picks for a weight (an
    nn.Parameter) is asked as dispatch would be called with it, under torch.no_grad()."""
    m = _matrix()
    indptr, indices, values, shape = _parts(m)
    weights = (indptr, indices, values.clone().requires_grad_(), shape)
    x = torch.randn(m.shape[1], requires_grad=True)
    with torch.no_grad():
        expected = seer.explain("spmv", (_parts(m), x)).variant
    assert seer.explain("spmv", (weights, x)).variant == expected
    a = torch.nn.Parameter(torch.randn(8, 16, dtype=torch.float16))
    assert seer.explain("gemm", (a, torch.randn(16, 4, dtype=torch.float16))).variant
    with pytest.raises(InputError, match="values requires grad"):  # dispatch still refuses to run it
        seer.dispatch("spmv", (weights, x))


def test_cache_is_bounded():
    seer.set_cache_size(3)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SeerWarning)
            for seed in range(5):
                m = _matrix(50, 40, 0.1, seed)
                seer.dispatch("spmv", (_parts(m), torch.randn(40)))
        assert seer.cache_info()["size"] == 3
    finally:
        seer.set_cache_size(128)


def test_threads_dispatch_at_once():
    matrices = [_matrix(80, 60, 0.1, seed) for seed in range(4)]
    parts = [_parts(m) for m in matrices]
    errors = []

    def worker(i):
        try:
            for _ in range(3):
                x = torch.randn(60)
                _check(seer.dispatch("spmv", (parts[i % 4], x)), matrices[i % 4], x)
        except Exception as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    assert seer.cache_info()["size"] == 4


def _at_once(worker, threads: int) -> list:
    """``worker()`` in ``threads`` threads released together; the exceptions they raised."""
    start, errors = threading.Barrier(threads), []

    def run():
        try:
            start.wait()
            worker()
        except Exception as exc:  # collected and returned to the main thread
            errors.append(exc)

    running = [threading.Thread(target=run) for _ in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    return errors


def _slowed(monkeypatch, name: str, made: list, fail_first: bool = False, started: threading.Event | None = None,
            release: threading.Event | None = None):
    """seer.dispatch's ``name`` counted in ``made`` and slowed, so that other threads arrive meanwhile
    (``started`` set as it begins; held until ``release`` is set, where given, else for 0.2 s)."""
    import time

    dispatch_module = sys.modules["seer.dispatch"]  # ``seer.dispatch`` names the function
    step = getattr(dispatch_module, name)

    def slow(*args, **kwargs):
        made.append(name)
        if started is not None:
            started.set()
        if release is None:
            time.sleep(0.2)
        else:
            assert release.wait(60)
        if fail_first and len(made) == 1:
            raise RuntimeError("the first call failed")
        return step(*args, **kwargs)

    monkeypatch.setattr(dispatch_module, name, slow)


def test_threads_missing_one_input_at_once_make_one_first_call(monkeypatch):
    """Every thread that missed the cache made its own first call (validation, decision, preparation):
    on a large matrix, N threads' preparations at once. The others wait for the first one's decision."""
    m, made = _matrix(80, 60, 0.1), []
    parts = _parts(m)
    _slowed(monkeypatch, "_decide", made)

    def worker():
        x = torch.randn(60)
        _check(seer.dispatch("spmv", (parts, x)), m, x)

    assert _at_once(worker, 6) == []
    assert made == ["_decide"]
    assert seer.cache_info()["size"] == 1


def _reentering_decide(monkeypatch, inner) -> None:
    """seer.dispatch's next decision runs ``inner()`` first (as model code calling back would), once."""
    dispatch_module = sys.modules["seer.dispatch"]
    decide = dispatch_module._decide

    def decide_reentering(*args, **kwargs):
        monkeypatch.setattr(dispatch_module, "_decide", decide)
        inner()

    monkeypatch.setattr(dispatch_module, "_decide", decide_reentering)


def _refused_not_hung(call, refusal: str) -> None:
    """``call()`` raises an InputError matching ``refusal``, in a thread: a hang fails the test instead
    of the run."""
    raised = []

    def run():
        try:
            call()
        except InputError as exc:
            raised.append(exc)

    caller = threading.Thread(target=run, daemon=True)
    caller.start()
    caller.join(timeout=60)
    assert not caller.is_alive(), "the call waits on its own thread"
    assert len(raised) == 1 and refusal in str(raised[0])


def test_a_first_call_dispatching_on_its_own_input_is_refused_not_hung(monkeypatch):
    """A first call that reaches seer.dispatch on the same input (a model or callback it runs) would
    wait for its own first call to end: refused, and the input served afterwards."""
    m = _matrix(80, 60, 0.1)
    parts, x = _parts(m), torch.randn(60)
    _reentering_decide(monkeypatch, lambda: seer.dispatch("spmv", (parts, x)))
    _refused_not_hung(lambda: seer.dispatch("spmv", (parts, x)), "own first call")
    _check(seer.dispatch("spmv", (parts, x)), m, x)


def test_waiting_threads_try_again_when_the_first_call_fails(monkeypatch):
    m, made = _matrix(80, 60, 0.1), []
    parts = _parts(m)
    _slowed(monkeypatch, "_decide", made, fail_first=True)

    def worker():
        x = torch.randn(60)
        _check(seer.dispatch("spmv", (parts, x)), m, x)

    errors = _at_once(worker, 4)
    assert [str(e) for e in errors] == ["the first call failed"]
    assert made == ["_decide", "_decide"]  # the failed one, then one of the waiting threads'


def test_a_clear_during_a_first_call_keeps_neither_its_decision_nor_its_model(monkeypatch):
    """A call in flight across clear_cache() cached its decision and its model afterwards: after a
    new $SEER_MODELS and a clear, new inputs kept being decided by the old model."""
    dispatch_module = sys.modules["seer.dispatch"]
    m, made, resolving, cleared = _matrix(80, 60, 0.1), [], threading.Event(), threading.Event()
    _slowed(monkeypatch, "_resolve", made, started=resolving, release=cleared)
    worker = threading.Thread(target=seer.dispatch, args=("spmv", (_parts(m), torch.randn(60))))
    worker.start()
    assert resolving.wait(60)
    seer.clear_cache()
    cleared.set()  # not a sleep: a loaded machine's clear could come after the call had cached
    worker.join()
    assert made == ["_resolve"]
    assert seer.cache_info()["size"] == 0 and not dispatch_module._models


def test_corrupted_and_foreign_models_fall_back(tmp_path, spmv_model):
    m = _matrix()
    x = torch.randn(m.shape[1])
    path = tmp_path / "spmv-test.json"
    spmv_model.save(path)
    data = json.loads(path.read_text())
    data["variants"] = list(reversed(data["variants"]))  # an edit the checksum catches
    path.write_text(json.dumps(data))
    with pytest.warns(SeerWarning, match="unusable"):
        _check(seer.dispatch("spmv", (_parts(m), x), model=path), m, x)
    (tmp_path / "garbage.json").write_text("{not json")
    with pytest.warns(SeerWarning, match="unusable"):
        seer.dispatch("spmv", (_parts(m), x), model=tmp_path / "garbage.json")
    # The warning comes once; every explain says why the model given did not serve (a review: a later
    # explain, the "why" tool, read "model: hand rule" alone).
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SeerWarning)
            decision = seer.explain("spmv", (_parts(m), x), model=tmp_path / "garbage.json")
        assert decision.model.startswith(f"hand rule, as model {tmp_path / 'garbage.json'} is unusable: ")
        assert "is not JSON" in str(decision)


def test_a_model_file_this_process_may_not_read_is_skipped_with_a_warning(tmp_path, spmv_model, monkeypatch, unreadable):
    """A model file of mode 0600 in a shared $SEER_MODELS folder raised a raw PermissionError from
    every dispatch of the op, found or given as model= (found by a review); a folder that may not
    be listed was ignored without a word. (Opening is refused by hand: the tests may run as root.)"""
    from seer.dispatch import model_files

    m = _matrix()
    x = torch.randn(m.shape[1])
    folder = tmp_path / "shared"
    folder.mkdir()
    path = folder / "spmv-theirs.json"
    spmv_model.save(path)
    unreadable(path)
    with pytest.warns(SeerWarning, match=r"unusable.*cannot read model file .*spmv-theirs\.json: Permission denied"):
        _check(seer.dispatch("spmv", (_parts(m), x), model=path), m, x)
    monkeypatch.setenv("SEER_MODELS", str(folder))
    seer.clear_cache()
    with pytest.warns(SeerWarning, match=r"cannot read model file .*spmv-theirs\.json"):
        _check(seer.dispatch("spmv", (_parts(m), x)), m, x)
    monkeypatch.setattr("os.access", lambda where, mode: pathlib.Path(where) != folder)
    with pytest.warns(SeerWarning, match=r"SEER_MODELS lists .*shared, which this process may not list"):
        model_files("spmv")


def test_model_naming_unknown_variants_falls_back(spmv_model):
    import dataclasses

    foreign = dataclasses.replace(spmv_model, variants=[*spmv_model.variants, "from_the_future"])
    m = _matrix()
    with pytest.warns(SeerWarning, match="lacks"):
        decision = seer.explain("spmv", (_parts(m), torch.randn(m.shape[1])), model=foreign)
    assert decision.stage == "hand rule"


def test_warnings_name_the_callers_line(tmp_path, spmv_model):
    # Each fallback warns from another depth inside seer; every warning points at the caller.
    m = _matrix()
    x = torch.randn(m.shape[1])
    (tmp_path / "garbage.json").write_text("{not json")
    unnamed = dataclasses.replace(spmv_model, device={"capability": [9, 0]})
    calls = {"hand rule": lambda: seer.dispatch("spmv", (_parts(m), x)),
             "measured on an unnamed device": lambda: seer.dispatch("spmv", (_parts(m), x), model=unnamed),
             "unusable": lambda: seer.explain("spmv", (_parts(m), x), model=tmp_path / "garbage.json")}
    for message, call in calls.items():
        seer.clear_cache()
        with pytest.warns(SeerWarning, match=message) as record:
            call()
        # seer's own: triton 3.6's interpreter adds numpy's DeprecationWarnings from its own file
        assert {w.filename for w in record if issubclass(w.category, SeerWarning)} == {__file__}, message


def test_a_warning_while_seer_imports_its_own_modules_names_the_line_that_imported_seer(tmp_path, monkeypatch):
    """warnings.warn leaves importlib's frames out of its count and seer's count had kept them: a
    warning from a module seer imports (triton 3.6's interpreter under numpy 2.4, at import) named
    the seer line importing it (a review)."""
    (tmp_path / "_probe_inner.py").write_text("from seer.errors import warn\nwarn('probe at import')\n")
    (tmp_path / "_probe_outer.py").write_text("import seer._probe_inner\n")
    monkeypatch.setattr(seer, "__path__", [*seer.__path__, str(tmp_path)])
    for name in ("seer._probe_outer", "seer._probe_inner"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.warns(SeerWarning, match="probe at import") as record:
        __import__("seer._probe_outer")  # as an import statement does: no frame of importlib's own
    assert {w.filename for w in record if issubclass(w.category, SeerWarning)} == {__file__}


def test_forced_variant_and_bad_requests():
    m = _matrix()
    x = torch.randn(m.shape[1])
    _check(seer.dispatch("spmv", (_parts(m), x), variant="merge_c512"), m, x)
    with pytest.raises(InputError, match="no variant 'nope'"):
        seer.dispatch("spmv", (_parts(m), x), variant="nope")
    for variant in ("nope", 5, ["merge_c512"]):  # cached_decision said None: no decision held
        with pytest.raises(InputError, match=f"no variant {re.escape(repr(variant))}; choose from"):
            seer.cached_decision("spmv", (_parts(m), x), variant=variant)
    with pytest.raises(InputError, match="unknown op 'spmm'"):
        seer.dispatch("spmm", (_parts(m), x))
    with pytest.raises(InputError, match="inputs \\(A, x\\)"):
        seer.dispatch("spmv", _parts(m))


def _imported_without_the_interpreter(monkeypatch) -> None:
    """As seer is where TRITON_INTERPRET was unset at import: its kernels compiled ones."""
    for module in ("seer.dispatch", "seer.launch", "seer.kernels.spmv"):
        monkeypatch.setattr(sys.modules[module], "INTERPRETING", False)


def test_a_wrong_vector_for_a_cpu_matrix_is_named_before_the_interpreter(monkeypatch):
    """A CPU matrix (a scipy one, say) with x on a GPU, or of the wrong length, was told to set
    TRITON_INTERPRET=1: the first call checked where its pass could run before it checked x."""
    _imported_without_the_interpreter(monkeypatch)
    m = _matrix()
    with pytest.raises(InputError, match="x is on meta but the matrix is on cpu; put both on one device .*scipy"):
        seer.dispatch("spmv", (m, torch.ones(m.shape[1], device="meta")))
    with pytest.raises(InputError, match="x has 3 entries"):
        seer.dispatch("spmv", (_parts(m), torch.ones(3)))


@pytest.mark.parametrize("now,message", [("0", r"set TRITON_INTERPRET=1 before importing seer \(it is not set\)"),
                                         ("1", r"set TRITON_INTERPRET=1 before importing seer \(it was set after seer "
                                               r"was imported\)")])
def test_cpu_inputs_need_the_interpreter(monkeypatch, now, message):
    """Set only after import, a compiled kernel met CPU tensors ("Cannot call @triton.jit'd outside
    of the scope of a kernel"): Triton reads it when a kernel is defined."""
    _imported_without_the_interpreter(monkeypatch)
    monkeypatch.setenv("TRITON_INTERPRET", now)
    m = _matrix()
    with pytest.raises(InputError, match=f"CPU only under the Triton interpreter: {message}"):
        seer.dispatch("spmv", (_parts(m), torch.randn(m.shape[1])))
    a, b = torch.randn(8, 16, dtype=torch.bfloat16), torch.randn(16, 24, dtype=torch.bfloat16)
    with pytest.raises(InputError, match=f"CPU only under the Triton interpreter: {message}"):
        seer.dispatch("gemm", (a, b))
    assert seer.explain("gemm", (a, b)).variant  # a choice runs no kernel: explained without the interpreter


def test_empty_matrix():
    parts = (torch.zeros(4, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), torch.zeros(0), (3, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)
        y = seer.dispatch("spmv", (parts, torch.randn(5)))
    assert torch.equal(y, torch.zeros(3))


def test_bound_calls_make_their_gpu_current_only_when_another_is(monkeypatch):
    """The switch around a multi-GPU process's calls (the real one: test_dispatch_gpu.py, multigpu)."""
    import sys

    dispatch_module = sys.modules["seer.dispatch"]
    current, switched = [1], []

    class Switch:  # stands for torch.cuda.device: records the switch, makes the GPU current inside
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            switched.append(self.index)
            self.before, current[0] = current[0], self.index

        def __exit__(self, *exc):
            current[0] = self.before

    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: current[0], raising=False)
    monkeypatch.setattr(torch.cuda, "device", Switch)
    call = dispatch_module._on_device(lambda x, out=None: (x, current[0], out), 1)
    assert call(5) == (5, 1, None) and switched == []  # already current: no switch
    current[0] = 0
    assert call(6, out=7) == (6, 1, 7) and switched == [1] and current == [0]  # switched, then back


# ------------------------------------------------------------------ deciding again as calls add up


def _leaf(features, labels, label):
    return Tree(features, labels, feature=(-1,), threshold=(None,), left=(-1,), right=(-1,),
                label=(labels.index(label),), n_samples=(10,), mean_regret=(0.0,))


def _small_and_big():
    """One-leaf trees choosing SMALL and BIG."""
    return _leaf(_KNOWN, (SMALL, BIG), SMALL), _leaf(_KNOWN, (SMALL, BIG), BIG)


def _model_by_calls(stage1: dict, stage2: dict | None = None) -> SelectorModel:
    """Stage-1 (and stage-2) trees per call count from ``{calls: tree}``."""
    return SelectorModel(op="spmv", variants=(SMALL, BIG), known_features=_KNOWN, gathered_features=_GATHERED,
                         stage1=stage1, stage2=stage2, device={"name": "cpu", "capability": None},
                         versions={}, training={})


def test_models_trained_at_this_world_size_come_first(tmp_path, monkeypatch):
    """Models measured on this device at world sizes 2 and 4 (multi-GPU ops record them): each
    size resolves to its own model whatever the files' order; a size neither was trained at, to
    the first found (its choices extrapolated); no size (single-GPU ops), to the first found."""
    import sys

    from seer.registry import get_op

    resolve_model = sys.modules["seer.dispatch"].resolve_model  # seer.dispatch is also the function
    trees = {1: _split(_KNOWN, (SMALL, BIG), "nnz", 1e12, SMALL, BIG)}
    for stem, sizes in (("spmv-a", [4]), ("spmv-b", [2])):
        model = _model_by_calls(trees)
        dataclasses.replace(model, training={"world_sizes": sizes}).save(tmp_path / f"{stem}.json")
    monkeypatch.setenv("SEER_MODELS", str(tmp_path))
    cpu, entry = torch.device("cpu"), get_op("spmv")
    found = {size: resolve_model(entry, cpu, None, size)[1] for size in (2, 4, 8, None)}
    a, b = str(tmp_path / "spmv-a.json"), str(tmp_path / "spmv-b.json")  # a model of the user's: its path
    assert found == {2: b, 4: a, 8: a, None: a}

def test_two_models_of_this_gpu_in_one_folder_are_named_in_a_warning(tmp_path, monkeypatch):
    """`seer train` on a campaign table writes spmv-<device>-first.json beside spmv-<device>.json, and
    the first by name served in silence; a folder earlier in SEER_MODELS overriding one is not warned."""
    import sys

    from seer.registry import get_op

    resolve_model = sys.modules["seer.dispatch"].resolve_model  # seer.dispatch is also the function
    model = _model_by_calls({1: _split(_KNOWN, (SMALL, BIG), "nnz", 1e12, SMALL, BIG)})
    (tmp_path / "mine").mkdir()
    model.save(tmp_path / "mine" / "spmv-cpu.json")
    model.save(tmp_path / "mine" / "spmv-cpu-first.json")
    monkeypatch.setenv("SEER_MODELS", str(tmp_path / "mine"))
    with pytest.warns(SeerWarning, match=r"2 spmv models in .*mine were measured on 'cpu': "
                                         r"\['spmv-cpu-first\.json', 'spmv-cpu\.json'\]; using spmv-cpu-first\.json"):
        assert resolve_model(get_op("spmv"), torch.device("cpu"))[1] == str(tmp_path / "mine" / "spmv-cpu-first.json")
    (tmp_path / "mine" / "spmv-cpu-first.json").unlink()
    (tmp_path / "other").mkdir()
    model.save(tmp_path / "other" / "spmv-cpu.json")
    monkeypatch.setenv("SEER_MODELS", os.pathsep.join([str(tmp_path / "mine"), str(tmp_path / "other")]))
    seer.clear_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeerWarning)
        assert resolve_model(get_op("spmv"), torch.device("cpu"))[1] == str(tmp_path / "mine" / "spmv-cpu.json")


def test_a_found_model_naming_variants_this_install_lacks_is_skipped_for_the_next(tmp_path, monkeypatch):
    """One for a later seer in $SEER_MODELS does not send dispatch to the hand rule while another
    model for this GPU follows: it is skipped, with a warning."""
    import sys

    from seer.registry import get_op

    resolve_model = sys.modules["seer.dispatch"].resolve_model  # seer.dispatch is also the function
    trees = {1: _split(_KNOWN, (SMALL, BIG), "nnz", 1e12, SMALL, BIG)}
    model = _model_by_calls(trees)
    dataclasses.replace(model, variants=(SMALL, BIG, "from_the_future")).save(tmp_path / "spmv-a.json")
    model.save(tmp_path / "spmv-b.json")
    monkeypatch.setenv("SEER_MODELS", str(tmp_path))
    with pytest.warns(SeerWarning, match=r"skipping model .*spmv-a\.json: it names variants this install lacks"):
        assert resolve_model(get_op("spmv"), torch.device("cpu"))[1] == str(tmp_path / "spmv-b.json")


def test_models_found_in_two_folders_under_one_name_are_told_apart(tmp_path, monkeypatch):
    """A decision names a model found in $SEER_MODELS by its path (by its file name, the same in
    both folders, which one served could not be told); a shipped one by its file name."""
    import sys

    from seer.registry import get_op

    resolve_model = sys.modules["seer.dispatch"].resolve_model  # seer.dispatch is also the function
    model = _model_by_calls({1: _split(_KNOWN, (SMALL, BIG), "nnz", 1e12, SMALL, BIG)})
    for folder in ("first", "second"):
        (tmp_path / folder).mkdir()
        model.save(tmp_path / folder / "spmv-cpu.json")
    monkeypatch.setenv("SEER_MODELS", os.pathsep.join(str(tmp_path / folder) for folder in ("second", "first")))
    assert resolve_model(get_op("spmv"), torch.device("cpu"))[1] == str(tmp_path / "second" / "spmv-cpu.json")
    found_model_name = sys.modules["seer.dispatch"].found_model_name
    (tmp_path / "shipped").symlink_to(SHIPPED_MODELS)  # the shipped folder by another name
    (tmp_path / "first" / "spmv-linked.json").symlink_to(SHIPPED_MODELS / "spmv-h100.json")
    assert found_model_name(tmp_path / "shipped" / "spmv-h100.json") == "spmv-h100.json"
    assert found_model_name(tmp_path / "first" / "spmv-linked.json") == str(tmp_path / "first" / "spmv-linked.json")


@pytest.mark.parametrize("entry", ["missing", "file"])
def test_a_seer_models_entry_that_is_no_folder_is_named_in_a_warning(tmp_path, monkeypatch, entry):
    """A file listed in $SEER_MODELS (an easy slip for model=) or a folder not there: its models
    never served, in silence (found by a user's drill)."""
    from seer.dispatch import model_files

    listed = tmp_path / "spmv-mine.json"
    if entry == "file":
        _model_by_calls({1: _split(_KNOWN, (SMALL, BIG), "nnz", 1e12, SMALL, BIG)}).save(listed)
    monkeypatch.setenv("SEER_MODELS", str(listed))
    what = r"is a file \(pass one model file with model=\)" if entry == "file" else "does not exist"
    with pytest.warns(SeerWarning, match=rf"SEER_MODELS lists .*spmv-mine\.json, which {what}: it names folders"):
        found = model_files("spmv")
    assert listed not in found and all(path.parent == SHIPPED_MODELS for path in found)


def test_a_model_file_written_again_is_read_by_the_next_decision(tmp_path):
    """A model retrained in place under the same name, or a file named before it existed, kept the
    first read's model (or hand rule) for the process, new inputs too, until clear_cache() (found
    by a user's drill). Inputs already decided keep their choice until decided again."""
    path = tmp_path / "spmv-mine.json"

    def save(label, seconds_later):
        _model_by_calls({1: _leaf(_KNOWN, (SMALL, BIG), label)}).save(path)
        # A retrain takes seconds; two saves within one test may share the file system's clock tick.
        os.utime(path, ns=(path.stat().st_mtime_ns + seconds_later * 10**9,) * 2)

    decided, later = _matrix(), _matrix(60, 50, 0.2)
    with pytest.warns(SeerWarning, match="does not exist"):
        assert seer.explain("spmv", (_parts(decided), torch.randn(decided.shape[1])), model=path).stage == "hand rule"
    save(SMALL, 1)
    parts, x = _parts(decided), torch.randn(decided.shape[1])
    _check(seer.dispatch("spmv", (parts, x), model=path), decided, x)
    assert seer.cached_decision("spmv", (parts, x), model=path).variant == SMALL
    save(BIG, 2)
    assert seer.explain("spmv", (parts, x), model=path).variant == BIG
    assert seer.explain("spmv", (_parts(later), torch.randn(later.shape[1])), model=path).variant == BIG
    _check(seer.dispatch("spmv", (parts, x), model=path), decided, x)
    assert seer.cached_decision("spmv", (parts, x), model=path).variant == SMALL  # kept until decided again
    _check(seer.dispatch("spmv", (parts, x), model=path, calls=1000), decided, x)
    assert seer.cached_decision("spmv", (parts, x), model=path).variant == BIG  # decided again: the new file
    assert not list(tmp_path.glob(".*partial"))  # each save wrote beside the file and moved it in place
    # A new file of the same size and time (a copy kept with cp -p, a clock tick) is told by its inode
    size, modified = path.stat().st_size, path.stat().st_mtime_ns
    _model_by_calls({1: _leaf(_KNOWN, (SMALL, BIG), SMALL)}).save(path)
    os.utime(path, ns=(modified, modified))
    assert path.stat().st_size == size
    assert seer.explain("spmv", (_parts(later), torch.randn(later.shape[1])), model=path).variant == SMALL


@pytest.fixture
def binds(monkeypatch):
    """The call number (within the test) at which each variant was bound to a matrix."""
    found, calls = [], [0]
    for name in (SMALL, BIG):
        variant = spmv_kernels.VARIANTS[name]

        def bind(csr, name=name, bind=variant.bind):
            found.append((name, calls[0]))
            return bind(csr)

        monkeypatch.setitem(spmv_kernels.VARIANTS, name, dataclasses.replace(variant, bind=bind))
    return found, calls


def test_next_count_skips_counts_whose_trees_are_the_same():
    small, big = _small_and_big()
    model = _model_by_calls({1: small, 10: small, 100: big, 1000: big})
    assert (model.next_count(1), model.next_count(10), model.next_count(100), model.next_count(5000)) == (100, 100, None, None)


def test_the_choice_is_made_again_as_calls_add_up(monkeypatch, binds):
    """Without a hint the 1-call tree's SMALL runs until the 100th call, which binds the 100-call
    tree's BIG once and runs it (poisoned out= filled, y against scipy); a hint or a matrix below
    the op's threshold keeps the first choice."""
    found, calls = binds
    small, big = _small_and_big()
    model = _model_by_calls({1: small, 10: small, 100: big, 1000: big})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)
    m = _matrix(60, 50, 0.1, 4)
    x = torch.randn(50)
    parts = _parts(m)
    for calls[0] in range(1, 102):
        out = torch.full((60,), float("nan"))
        seer.dispatch("spmv", (parts, x), model=model, out=out)
        if calls[0] in (1, 99, 100, 101):
            _check(out, m, x)
    assert found == [(SMALL, 1), (BIG, 100)]
    found.clear()
    hinted = _parts(m)
    for calls[0] in range(1, 102):
        seer.dispatch("spmv", (hinted, x), model=model, calls=1)
    assert found == [(SMALL, 1)]
    found.clear()
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", m.nnz + 1)
    small_matrix = _parts(m)
    for calls[0] in range(1, 102):
        seer.dispatch("spmv", (small_matrix, x), model=model)
    assert found == [(SMALL, 1)]


def test_a_larger_hint_on_a_cached_input_decides_again_for_it(monkeypatch, binds):
    """README's example: a first call without a hint, then ``calls=1000`` on the same matrix. The
    hint had been read only on a first call, so the 1-call choice served on (found by a review)."""
    found, calls = binds
    small, big = _small_and_big()
    model = _model_by_calls({1: small, 1000: big})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 10**9)  # no recheck as calls add up
    m = _matrix(60, 50, 0.1, 8)
    x = torch.randn(50)
    parts = _parts(m)
    calls[0] = 1
    _check(seer.dispatch("spmv", (parts, x), model=model), m, x)
    [first] = sys.modules["seer.dispatch"]._cache._entries.values()
    for calls[0] in range(2, 5):
        out = torch.full((60,), float("nan"))
        seer.dispatch("spmv", (parts, x), model=model, calls=1000 if calls[0] < 4 else 10, out=out)
        _check(out, m, x)
    assert found == [(SMALL, 1), (BIG, 2)]  # bound once for the hint; a smaller hint after keeps it
    [decision] = sys.modules["seer.dispatch"]._cache._entries.values()
    assert decision.variant == BIG and decision.stage.endswith("decided again for calls=1,000")
    assert first.calls == 1000 and first.recheck_at is None  # the replaced one, held by calls mid-flight


@pytest.mark.parametrize("hinted", [False, True])
def test_a_choice_made_again_to_its_own_variant_says_how_it_was_made(monkeypatch, binds, hinted):
    """Made again (as calls added up, or for a larger hint) to the variant it had, the held decision
    kept the 1-call tree's rules, stage and count: cached_decision explained a choice no tree makes now."""
    found, calls = binds
    small, _ = _small_and_big()
    again = _split(_KNOWN, (SMALL, BIG), "nnz", 1e12, SMALL, BIG)
    model = _model_by_calls({1: small, 10: again, 1000: again})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 10**9 if hinted else 0)
    m = _matrix(60, 50, 0.1, 11)
    x = torch.randn(50)
    parts = _parts(m)
    for calls[0] in range(1, 12):
        seer.dispatch("spmv", (parts, x), model=model, calls=1000 if hinted and calls[0] > 1 else None)
    held = seer.cached_decision("spmv", (parts, x), model=model)
    why = "decided again for calls=1,000" if hinted else "decided again at call 10"
    assert found == [(SMALL, 1)] and held.variant == SMALL and held.stage.endswith(why)
    assert held.calls == (1000 if hinted else 10)
    assert held.path == seer.explain("spmv", (parts, x), model=model, calls=held.calls).path != \
        seer.explain("spmv", (parts, x), model=model, calls=1).path


def test_deciding_again_from_inside_a_decision_is_refused_not_hung(monkeypatch):
    """A hint decides the input again under one lock, running model code; code that reached
    seer.dispatch with a larger hint from there waited on its own thread's lock for ever."""
    m = _matrix(80, 60, 0.1)
    parts, x = _parts(m), torch.randn(60)
    seer.dispatch("spmv", (parts, x))
    _reentering_decide(monkeypatch, lambda: seer.dispatch("spmv", (parts, x), calls=10**6))
    _refused_not_hung(lambda: seer.dispatch("spmv", (parts, x), calls=1000), "decides an input again")
    _check(seer.dispatch("spmv", (parts, x), calls=1000), m, x)


def test_a_model_gone_before_its_recheck_leaves_the_choice_serving(monkeypatch, binds, tmp_path):
    """The recheck looks the model up again; a file rewritten meanwhile (or gone) resolves to the
    hand rule, and the call raised AttributeError from a cached input (found by a review)."""
    found, calls = binds
    small, big = _small_and_big()
    path = _model_by_calls({1: small, 10: big, 1000: big}).save(tmp_path / "spmv-gone.json")
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)
    m = _matrix(60, 50, 0.1, 9)
    x = torch.randn(50)
    parts = _parts(m)
    for calls[0] in range(1, 12):
        if calls[0] == 5:
            path.write_text("{ not a model")
            sys.modules["seer.dispatch"]._models.clear()  # as when its entry left the bounded cache
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SeerWarning)  # the unusable file is warned of
            _check(seer.dispatch("spmv", (parts, x), model=path), m, x)
    assert found == [(SMALL, 1)]


def test_a_model_retrained_without_trees_for_the_recheck_leaves_the_choice_serving(monkeypatch, binds, tmp_path):
    """A file retrained in place with fewer call counts left none at or above the recheck's, and every
    call from the recheck on raised IndexError on an input served from the cache (a review)."""
    found, calls = binds
    small, big = _small_and_big()
    path = _model_by_calls({1: small, 100: big}).save(tmp_path / "spmv-retrained.json")
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)
    m = _matrix(60, 50, 0.1, 10)
    x = torch.randn(50)
    parts = _parts(m)
    for calls[0] in range(1, 112):
        if calls[0] == 2:
            _model_by_calls({1: small, 10: big}).save(path)
            sys.modules["seer.dispatch"]._models.clear()  # read again, as when its entry left the bounded cache
        _check(seer.dispatch("spmv", (parts, x), model=path), m, x)
    assert found == [(SMALL, 1)]
    [decision] = sys.modules["seer.dispatch"]._cache._entries.values()
    assert decision.recheck_at is None


def test_a_recheck_that_fails_warns_once_and_leaves_the_choice_serving(monkeypatch, binds):
    """An error while deciding again (out of memory gathering features, say) was raised from every
    call from the recheck on: the recheck stayed due."""
    found, calls = binds
    small, big = _small_and_big()
    model = _model_by_calls({1: small, 10: big, 100: big})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)
    attempts = []

    def failing(*args, **kwargs):
        attempts.append(calls[0])
        raise RuntimeError("CUDA out of memory on purpose")

    monkeypatch.setattr(sys.modules["seer.dispatch"], "_settled_choice", failing)
    m = _matrix(60, 50, 0.1, 11)
    x = torch.randn(50)
    parts = _parts(m)
    with pytest.warns(SeerWarning, match="deciding again at call 10 failed .*out of memory on purpose.*keeping "
                                         + SMALL) as record:
        for calls[0] in range(1, 120):
            _check(seer.dispatch("spmv", (parts, x), model=model), m, x)
    assert found == [(SMALL, 1)] and attempts == [10]  # tried once: the trees for more calls say the same
    assert len([w for w in record if "deciding again" in str(w.message)]) == 1


def test_a_hint_on_an_input_first_called_without_one_fixes_its_choice(monkeypatch, binds):
    """Hints of no more calls than the choice was made for were ignored, and the recheck it had
    scheduled switched variants at call 100 though every call said calls=1 (a review)."""
    found, calls = binds
    small, big = _small_and_big()
    model = _model_by_calls({1: small, 10: small, 100: big, 1000: big})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)
    m = _matrix(60, 50, 0.1, 12)
    x = torch.randn(50)
    parts = _parts(m)
    calls[0] = 1
    seer.dispatch("spmv", (parts, x), model=model)
    for calls[0] in range(2, 120):
        _check(seer.dispatch("spmv", (parts, x), model=model, calls=1), m, x)
    assert found == [(SMALL, 1)]


def test_an_input_never_cached_is_refused_under_capture_saying_why(monkeypatch):
    """Told to call it once before capturing, which cannot help an input whose decision is never
    cached (strided values): the advice was wrong (a review)."""
    m = _matrix(60, 50, 0.1, 13)
    indptr, indices, values, shape = _parts(m)
    strided = torch.stack([values, values], dim=1)[:, 0]
    x = torch.randn(50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SeerWarning)  # "not contiguous", said once a process: maybe said already
        _check(seer.dispatch("spmv", ((indptr, indices, strided, shape), x)), m, x)  # called before capturing
    monkeypatch.setattr(sys.modules["seer.dispatch"], "capturing", lambda: True)
    with pytest.raises(InputError, match="does not cache its decision on this input .* CUDA graph capture forbids"):
        seer.dispatch("spmv", ((indptr, indices, strided, shape), x))


def test_a_first_call_that_ends_between_a_miss_and_the_claim_is_not_made_again(monkeypatch, binds):
    """A thread that missed the cache just before another thread's first call on the input was
    cached claimed the input afresh: it validated, prepared and bound again, and its decision
    replaced the other's, resetting the calls counted (a review)."""
    dispatch_module = sys.modules["seer.dispatch"]
    found, calls = binds
    m = _matrix(60, 50, 0.1, 14)
    parts, x = _parts(m), torch.randn(50)
    real_claim, raced = dispatch_module._first_calls.claim, []

    def claim_after_another_threads_first_call(key):
        if not raced:  # the first claim waits for another thread's whole first call on the input
            raced.append(key)
            other = threading.Thread(target=seer.dispatch, args=("spmv", (parts, x)))
            other.start()
            other.join()
        return real_claim(key)

    monkeypatch.setattr(dispatch_module._first_calls, "claim", claim_after_another_threads_first_call)
    calls[0] = 1
    _check(seer.dispatch("spmv", (parts, x)), m, x)
    assert len(found) == 1, found


@pytest.mark.parametrize("by_calls, switched_at", [
    ((SMALL, BIG, BIG), 2),
    ((SMALL, BIG, SMALL, BIG), 4),  # at calls 2 and 3 the trees for more calls disagree: kept
    ((SMALL, BIG, SMALL), None),
])
def test_the_choice_changes_only_to_what_more_calls_would_keep(monkeypatch, binds, by_calls, switched_at):
    found, calls = binds
    model = _model_by_calls({count: _leaf(_KNOWN, (SMALL, BIG), label) for count, label in enumerate(by_calls, 1)})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)
    m = _matrix(40, 30, 0.1, 6)
    x = torch.randn(30)
    parts = _parts(m)
    for calls[0] in range(1, 7):
        _check(seer.dispatch("spmv", (parts, x), model=model), m, x)
    assert found == [(SMALL, 1)] + ([(BIG, switched_at)] if switched_at else [])


@pytest.mark.parametrize("by_calls, switched_at", [
    ((SMALL, BIG, SMALL, BIG), [(BIG, 2), (SMALL, 3), (BIG, 4)]),  # each count's choice as it is reached
    ((SMALL, BIG, SMALL), [(BIG, 2), (SMALL, 3)]),
])
def test_the_first_rule_follows_the_tree_for_the_calls_reached(monkeypatch, binds, by_calls, switched_at):
    """Without ``_REQUIRE_AGREEMENT`` (dispatch's first rule, kept for benchmarks/spmv_unhinted.py's
    loops) the choice changes at every count whose tree picks another variant; a variant bound
    before is bound again on its return (a new decision; its plan is cached with the matrix)."""
    found, calls = binds
    model = _model_by_calls({count: _leaf(_KNOWN, (SMALL, BIG), label) for count, label in enumerate(by_calls, 1)})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)
    monkeypatch.setattr(sys.modules["seer.dispatch"], "_REQUIRE_AGREEMENT", False)
    m = _matrix(40, 30, 0.1, 6)
    x = torch.randn(30)
    parts = _parts(m)
    for calls[0] in range(1, 7):
        _check(seer.dispatch("spmv", (parts, x), model=model), m, x)
    assert found == [(SMALL, 1)] + switched_at


def test_deciding_again_reuses_the_gathered_features(monkeypatch, binds):
    """An unchecked matrix gathers on its first call (stage 1 says so at every count); deciding
    again at call 10 takes the 10-call stage-2 tree on the same features, gathered once."""
    found, calls = binds
    everything = _KNOWN + _GATHERED
    gather = _leaf(_KNOWN, (SMALL, BIG, GATHER), GATHER)
    model = _model_by_calls({1: gather, 10: gather},
                            {1: _leaf(everything, (SMALL, BIG), SMALL), 10: _leaf(everything, (SMALL, BIG), BIG)})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)
    gathered, measure = [], spmv_features.gathered
    monkeypatch.setattr(spmv_features, "gathered", lambda csr: gathered.append(1) or measure(csr))
    m = _matrix(60, 50, 0.1, 5)
    x = torch.randn(50)
    csr = as_csr(_parts(m), check=False)
    for calls[0] in range(1, 12):
        _check(seer.dispatch("spmv", (csr, x), model=model), m, x)
    assert found == [(SMALL, 1), (BIG, 10)] and len(gathered) == 1


@pytest.mark.parametrize("call", [seer.dispatch, seer.explain])
def test_a_model_object_of_another_op_falls_back_with_a_short_warning(spmv_model, call):
    """As a model file of another op does: the op's check, not a complaint about its variants, and
    a few words for the model rather than its repr (thousands of characters)."""
    a, b = torch.randn(8, 16, dtype=torch.float16), torch.randn(16, 4, dtype=torch.float16)
    with pytest.warns(SeerWarning, match="is for op 'spmv', expected 'gemm'") as record:
        result = call("gemm", (a, b), model=spmv_model)
    assert all(len(str(w.message)) < 300 for w in record)
    if call is seer.explain:
        assert result.stage == "hand rule"


@pytest.mark.filterwarnings("ignore:model for spmv was measured")
def test_a_model_asking_for_features_the_op_lacks_falls_back(tmp_path, spmv_model):
    """Such a model used to load, then fail every dispatch blaming the input ("needs feature")."""
    foreign = dataclasses.replace(spmv_model, known_features=(*spmv_model.known_features, "zzz"))
    m = _matrix()
    x = torch.randn(m.shape[1])
    for model in (foreign, foreign.save(tmp_path / "spmv-zzz.json")):
        seer.clear_cache()
        with pytest.warns(SeerWarning, match=r"known features \['zzz'\] are not among those op 'spmv' computes"):
            _check(seer.dispatch("spmv", (_parts(m), x), model=model), m, x)
        assert seer.explain("spmv", (_parts(m), x), model=model).stage == "hand rule"


def test_a_model_file_with_a_non_finite_number_falls_back(tmp_path, spmv_model):
    path = spmv_model.save(tmp_path / "spmv-nan.json")
    document = json.loads(path.read_text())
    document["stage1"]["1"]["threshold"][0] = "THRESHOLD"
    path.write_text(json.dumps(document).replace('"THRESHOLD"', "NaN"))
    m = _matrix()
    x = torch.randn(m.shape[1])
    with pytest.warns(SeerWarning, match="unusable: .*not a finite number"):
        _check(seer.dispatch("spmv", (_parts(m), x), model=path), m, x)


@pytest.mark.parametrize("size", [float("nan"), 2.5, "8", 0, -1, True, None])
def test_cache_size_must_be_a_count(size):
    """NaN was taken (no bound then holds, so the cache never evicted), a string failed in a comparison."""
    with pytest.raises(InputError, match="cache size must be a whole number of inputs, 1 or more"):
        seer.set_cache_size(size)
    assert seer.cache_info()["maxsize"] == 128


def test_cache_size_may_be_a_numpy_integer():
    try:
        seer.set_cache_size(np.int64(5))
        assert seer.cache_info()["maxsize"] == 5
    finally:
        seer.set_cache_size(128)


def test_a_misspelt_keyword_names_the_op_and_what_it_takes():
    m = _matrix()
    inputs = (_parts(m), torch.randn(m.shape[1]))
    with pytest.raises(InputError, match=r"seer.dispatch\('spmv', ...\) got unknown keyword argument\(s\) \['varaint'\]; "
                                         r"it takes out=, calls=, model=, variant=$"):
        seer.dispatch("spmv", inputs, varaint="merge_c512")
    with pytest.raises(InputError, match=r"seer.explain\('spmv', ...\) .* \['out', 'varaint'\]; it takes calls=, model=$"):
        seer.explain("spmv", inputs, varaint="merge_c512", out=None)
    a = torch.randn(8, 16, dtype=torch.float16)
    with pytest.raises(InputError, match=r"\['grop'\]; it takes out=, calls=, model=, variant=, group=, heap=$"):
        seer.dispatch("gemm_reduce_scatter", (a, a.T), grop=None)


def test_a_plan_is_made_under_the_interpreter_lock(monkeypatch):
    """Plans may launch kernels (preprocessing), and the interpreter runs one kernel at a time: a
    plan made outside the lock broke other threads' kernels (and left results unwritten)."""
    dispatch_module = sys.modules["seer.dispatch"]  # ``seer.dispatch`` names the function
    held = []
    variant = spmv_kernels.VARIANTS["diagonal_r128"]

    def bind(csr):
        held.append(dispatch_module._interpreter_lock.locked())
        return variant.bind(csr)

    monkeypatch.setitem(spmv_kernels.VARIANTS, "diagonal_r128", dataclasses.replace(variant, bind=bind))
    m = _matrix()
    x = torch.randn(m.shape[1])
    _check(seer.dispatch("spmv", (_parts(m), x), variant="diagonal_r128"), m, x)
    assert held == [True]


def test_an_unhashable_argument_is_refused_and_leaves_dispatch_working():
    """A list where a variant's name goes, or in a tuple input's shape, raised inside the cache's
    lock and left it held: every later call, in any thread, hung."""
    m = _matrix(30, 20, 0.2, 7)
    x = torch.randn(20)
    indptr, indices, values, shape = _parts(m)
    with pytest.raises(InputError, match="variant must be a variant's name"):
        seer.dispatch("spmv", ((indptr, indices, values, shape), x), variant=["scalar_r128"])
    with pytest.raises(InputError, match="CSR shape must be a pair of integers"):
        seer.dispatch("spmv", ((indptr, indices, values, (shape[0], [shape[1]])), x))
    done = []
    worker = threading.Thread(target=lambda: done.append(seer.dispatch("spmv", ((indptr, indices, values, shape), x))),
                              daemon=True)
    worker.start()
    worker.join(60)
    assert done, "dispatch hung after a refused argument"
    _check(done[0], m, x)


def test_a_shape_of_tensors_is_keyed_by_value():
    """``(rows, indices.max() + 1)``: a new 0-d tensor each call, whose hash is its id, made every
    call a miss and a new entry."""
    m = _matrix(30, 20, 0.2, 8)
    x = torch.randn(20)
    indptr, indices, values, shape = _parts(m)
    for _ in range(4):
        _check(seer.dispatch("spmv", ((indptr, indices, values, (shape[0], torch.tensor(shape[1]))), x)), m, x)
    assert (seer.cache_info()["size"], seer.cache_info()["hits"]) == (1, 3)


@pytest.mark.parametrize("write", ["values", "indices"])
def test_an_input_written_in_place_replaces_its_cached_entry(write):
    """Each write makes a new key; the entry under the old one, which no call can reach any more,
    is dropped rather than kept (with its plans) until the LRU pushes out live inputs."""
    seer.set_cache_size(3)
    try:
        m, other = _matrix(30, 20, 0.2, 9), _matrix(25, 20, 0.2, 10)
        x = torch.randn(20)
        a, b = torch.sparse_csr_tensor(*_parts(m)[:3], m.shape), torch.sparse_csr_tensor(*_parts(other)[:3], other.shape)
        seer.dispatch("spmv", (b, x))
        for step in range(5):
            if write == "values":
                a.values().mul_(1.5)
                m.data *= 1.5
            else:
                a.col_indices().copy_(a.col_indices())  # the same columns: a new version
            _check(seer.dispatch("spmv", (a, x)), m, x)
        assert seer.cache_info()["size"] == 2
        hits = seer.cache_info()["hits"]
        _check(seer.dispatch("spmv", (b, x)), other, x)  # still cached
        assert seer.cache_info()["hits"] == hits + 1
    finally:
        seer.set_cache_size(sys.modules["seer.dispatch"].DEFAULT_CACHE_SIZE)


@pytest.mark.parametrize("measured_on", ["gpu_with_sm_count", "gpu_without_sm_count", "cpu"])
def test_a_gpu_gemm_model_off_a_gpu_decides_on_its_gpus_waves(measured_on):
    """A GPU's GEMM model consulted on the CPU (as the fallback warning there suggests, to see the
    GPU's choices) read the interpreter's 4 SMs in its wave features, and chose otherwise than on its
    GPU for 44 of the 171 suite shapes under the shipped H100 model. With the SM count its table
    recorded it decides as there; a GPU's model without one says so; one measured here is silent."""
    from seer.features import gemm as gemm_features

    tile, cublas = "tile_64x64x64_w4s4g8", "torch_matmul"
    known = tuple(f.name for f in gemm_features.KNOWN)
    device = {"gpu_with_sm_count": {"name": "Test GPU", "capability": [9, 0], "sm_count": 132},
              "gpu_without_sm_count": {"name": "Test GPU", "capability": [9, 0]},
              "cpu": {"name": "cpu", "capability": None}}[measured_on]
    model = SelectorModel(op="gemm", variants=(tile, cublas), known_features=known, gathered_features=(),
                          stage1={1: _split(known, (tile, cublas), "waves", 2.0, tile, cublas)}, stage2=None,
                          device=device, versions={}, training={"dtype": "bfloat16"})
    a, b = torch.randn(512, 64, dtype=torch.bfloat16), torch.randn(64, 512, dtype=torch.bfloat16)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        decision = seer.explain("gemm", (a, b), model=model)  # 16 output tiles: 4 waves of 4 SMs, 0.12 of 132
    said = [str(w.message) for w in said]
    if measured_on == "gpu_with_sm_count":
        assert (decision.variant, decision.features["waves"]) == (tile, 16 / 132)
    else:
        assert (decision.variant, decision.features["waves"]) == (cublas, 16 / 4)
    warned = any("does not record its GPU's SM count" in message for message in said)
    assert warned == (measured_on == "gpu_without_sm_count"), said
    exact = a.double() @ b.double()
    assert (seer.dispatch("gemm", (a, b), model=model).double() - exact).norm() <= 1e-2 * exact.norm()


def test_a_gemm_decision_holds_none_of_its_operands():
    """GEMM is keyed by shapes and strides: a cached decision kept the first call's a and b alive
    (activations of every token count, weights of an unloaded model) until clear_cache."""
    import gc
    import weakref

    weight = torch.randn(64, 32, dtype=torch.float16)
    freed = []
    for rows in (1, 2, 3):
        activation = torch.randn(rows, 64, dtype=torch.float16)
        freed.append(weakref.ref(activation))
        expected = activation.double() @ weight.double()
        result = seer.dispatch("gemm", (activation, weight))
        assert torch.allclose(result.double(), expected, rtol=1e-2, atol=1e-2)
        del activation
    gc.collect()
    assert [ref() for ref in freed] == [None, None, None]
    assert seer.cache_info()["size"] == 3


def test_a_model_object_is_held_while_a_decision_names_it(spmv_model):
    """Keyed by id alone, a freed model's id could be reused by a new model object, which then
    inherited the freed one's decisions or its fallback to the hand rule (an unusable model, here,
    was not held at all)."""
    import gc
    import weakref

    m = _matrix(30, 20, 0.2, 11)
    x = torch.randn(20)
    model = dataclasses.replace(spmv_model, variants=spmv_model.variants + ("from_a_later_seer",))
    held = weakref.ref(model)
    with pytest.warns(SeerWarning, match="names variants this install lacks"):
        _check(seer.dispatch("spmv", (_parts(m), x), model=model), m, x)
    del model
    gc.collect()
    assert held() is not None
    seer.clear_cache()
    gc.collect()
    assert held() is None


@pytest.mark.parametrize("model", [{"op": "spmv"}, b"models/spmv-h100.json", 3])
def test_a_model_that_is_no_path_or_model_is_refused(model):
    m = _matrix(30, 20, 0.2, 12)
    with pytest.raises(InputError, match="model must be a path .* or a seer.model.SelectorModel"):
        seer.dispatch("spmv", (_parts(m), torch.randn(20)), model=model)


def test_a_failed_preparation_when_deciding_again_keeps_the_bound_variant(monkeypatch, binds):
    """The 2-call tree picks BIG, whose preparation fails (out of device memory, say): the bound
    SMALL keeps serving, with a warning, instead of every later call raising."""
    found, calls = binds
    model = _model_by_calls({1: _leaf(_KNOWN, (SMALL, BIG), SMALL), 2: _leaf(_KNOWN, (SMALL, BIG), BIG)})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)

    def no_memory(csr):
        raise torch.OutOfMemoryError("out of memory (made up by the test)")

    monkeypatch.setitem(spmv_kernels.VARIANTS, BIG, dataclasses.replace(spmv_kernels.VARIANTS[BIG], bind=no_memory))
    m = _matrix(40, 30, 0.1, 13)
    x = torch.randn(30)
    parts = _parts(m)
    _check(seer.dispatch("spmv", (parts, x), model=model), m, x)
    with pytest.warns(SeerWarning, match=f"chose {BIG}, whose preparation failed .*OutOfMemoryError.*keeping {SMALL}"):
        _check(seer.dispatch("spmv", (parts, x), model=model), m, x)
    for _ in range(3):
        _check(seer.dispatch("spmv", (parts, x), model=model), m, x)
    assert found == [(SMALL, 0)]


def test_a_recheck_cleared_by_another_thread_is_not_compared():
    """Dispatch reads ``recheck_at`` before counting; another thread may clear it in between (its
    last count reached, or the decision replaced): the count then compared an int with None."""
    from seer.registry import get_op

    counted = sys.modules["seer.dispatch"]._counted
    m = _matrix(30, 20, 0.2, 14)
    x = torch.randn(20)
    parts = _parts(m)
    seer.dispatch("spmv", (parts, x))
    (decision,) = sys.modules["seer.dispatch"]._cache._entries.values()
    decision.recheck_at = None
    assert counted(get_op("spmv"), None, decision, (x,), None) is decision


def test_scipy_input_warns_that_it_is_not_cached():
    m = _matrix(30, 20, 0.2, 15)
    x = torch.randn(20)
    sys.modules["seer.kernels.spmv"]._warned.discard("scipy")
    with pytest.warns(SeerWarning, match="scipy sparse matrix is copied .* on every seer.dispatch call"):
        _check(seer.dispatch("spmv", (m, x)), m, x)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*scipy sparse matrix.*")
        _check(seer.dispatch("spmv", (m, x)), m, x)


@pytest.mark.filterwarnings("ignore:model for spmv was measured")
def test_a_model_trained_in_another_dtype_is_warned_of(spmv_model):
    """A campaign profiles one dtype and the SpMV trees do not read it: a float32-trained model
    picked for half-precision matrices silently (found by a review). Models record it now; those
    made before the field, like every campaign then, are float32."""
    assert spmv_model.training["dtype"] == "float32"
    m = _matrix()
    indptr, indices, values, shape = _parts(m)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeerWarning)
        warnings.filterwarnings("ignore", "model for spmv was measured")
        seer.dispatch("spmv", ((indptr, indices, values, shape), torch.randn(m.shape[1])), model=spmv_model)
    half = (indptr, indices, values.half(), shape)
    with pytest.warns(SeerWarning, match="was trained on float32 timings, this input is torch.float16"):
        seer.dispatch("spmv", (half, torch.randn(m.shape[1]).half()), model=spmv_model)
    older = dataclasses.replace(spmv_model, training={k: v for k, v in spmv_model.training.items() if k != "dtype"})
    seer.clear_cache()  # the same words again: warned once a cache
    with pytest.warns(SeerWarning, match="was trained on float32 timings"):
        seer.explain("spmv", (half, torch.randn(m.shape[1]).half()), model=older)
    matching = dataclasses.replace(spmv_model, training={**spmv_model.training, "dtype": "float16"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeerWarning)
        warnings.filterwarnings("ignore", "model for spmv was measured")
        seer.explain("spmv", (half, torch.randn(m.shape[1]).half()), model=matching)


def test_a_hint_on_a_cached_multi_gpu_call_decides_nothing_again(monkeypatch):
    """A rank deciding again alone (a hint given on one rank) would switch patterns without its peers,
    which would then wait in the new pattern's agreement: the multi-GPU ops read a hint on a call
    shape's first call only."""
    module = sys.modules["seer.dispatch"]
    monkeypatch.setattr(module, "_decide", lambda *a, **k: pytest.fail("decided again"))
    decision = module.Decision("all_gather_gemm", "bulk_torch", "stage 1", [], {"world_size": 2}, "m", None, None, None)
    assert module._hinted(None, ("k",), decision, (), 1000, None) is decision and decision.calls == 1


def test_the_multi_gpu_models_read_the_dtype_and_are_not_warned_of_it():
    """The overlap ops' trees read dtype_bytes: a bfloat16 call with the shipped model gave a false
    "trained on float32 timings" warning (found by a review)."""
    from test_overlap import aligned_heap

    heap = aligned_heap(world_size=2)
    a, b = torch.ones(8, 16, dtype=torch.bfloat16), torch.ones(16, 24, dtype=torch.bfloat16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seer.explain("all_gather_gemm", (a, b), heap=heap, model=str(sys.modules["seer.dispatch"].SHIPPED_MODELS
                                                                  / "all_gather_gemm-h200x2.json"))
    assert not [w for w in caught if "timings, this input is" in str(w.message)]


@pytest.mark.parametrize("model_name, dtype, warned", [
    ("all_gather_gemm-h200x2", torch.float32, [r"trained on elements of \[2\] bytes, this input is torch\.float32"]),
    ("all_gather_gemm-h200x2", torch.float16, []),
    ("all_gather_gemm-h100x4", torch.bfloat16, [r"trained at world sizes \[4\], running at 2: its choices are extrapolated"]),
])
def test_a_multi_gpu_input_outside_the_sizes_its_model_was_trained_on_is_warned_of(model_name, dtype, warned):
    """The overlap campaigns profiled 16-bit elements at one world size each: a tree never splits on a
    value it saw alone, so a float32 input (which the kernels take) or another world size is decided by
    extrapolation, which is said; a 16-bit input at the trained size is not warned of."""
    from test_overlap import aligned_heap

    heap = aligned_heap(world_size=2)
    a, b = torch.ones(8, 16, dtype=dtype), torch.ones(16, 24, dtype=dtype)
    seer.clear_cache()  # warnings are given once per model and message
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        seer.explain("all_gather_gemm", (a, b), heap=heap,
                     model=str(sys.modules["seer.dispatch"].SHIPPED_MODELS / f"{model_name}.json"))
    messages = [str(w.message) for w in caught if "extrapolated" in str(w.message)]
    assert len(messages) == len(warned) and all(re.search(p, m) for p, m in zip(warned, messages)), messages


def test_the_cached_decision_is_what_the_next_call_runs(monkeypatch, binds):
    """explain decides afresh; after a recheck bound another variant, cached_decision says which one the
    next call runs, and why, without moving the cache."""
    found, calls = binds
    small, big = _small_and_big()
    model = _model_by_calls({1: small, 10: big, 1000: big})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)
    m = _matrix(60, 50, 0.1, 10)
    x = torch.randn(50)
    parts = _parts(m)
    assert seer.cached_decision("spmv", (parts, x), model=model) is None
    for calls[0] in range(1, 12):
        seer.dispatch("spmv", (parts, x), model=model)
    info = seer.cache_info()
    held = seer.cached_decision("spmv", (parts, x), model=model)
    assert held.variant == BIG and held.stage.endswith("decided again at call 10")
    assert seer.explain("spmv", (parts, x), model=model).variant == SMALL
    assert seer.cache_info() == info
    assert seer.cached_decision("spmv", (parts, x)) is None  # another model: another entry
    assert seer.cached_decision("spmv", (m, x)) is None  # scipy: examined on every call, never held


def test_an_op_whose_modules_miss_part_of_the_contract_is_refused_by_name(monkeypatch):
    """A new op's module without, say, ``problem`` failed as an AttributeError deep in its first call."""
    from seer import registry

    monkeypatch.setitem(registry.OPS, "half/op", registry.OpEntry("half/op", "synthetic_profiles", "synthetic_profiles", ""))
    with pytest.raises(TypeError, match=r"op 'half/op': synthetic_profiles lacks split, cache_key, problem, "
                                        r"check_operands, reference \(see the module contracts"):
        registry.get_op("half/op")
    assert "half/op" not in registry._loaded
    assert registry.variant_names("half/op") == ["a", "b", "c"]  # what training needs of it


def test_a_problem_without_a_device_is_refused_not_taken_for_the_cpu():
    """Taken for the CPU, a GPU's input would have been decided by the CPU's hand rule, silently."""
    from seer.dispatch import _device_of

    class NoDevice:
        pass

    with pytest.raises(TypeError, match="NoDevice, an op's problem, has no device"):
        _device_of(NoDevice())
    assert _device_of(dataclasses.make_dataclass("OnCpu", [("device", str)])("cpu")) == torch.device("cpu")


def test_no_model_for_a_gpu_says_how_that_op_is_profiled(monkeypatch):
    """Every op was sent to `seer profile`, which profiles SpMV alone (found by a new-op drill)."""
    from seer.dispatch import clear_cache, resolve_model
    from seer.registry import get_op

    # seer.dispatch is the function; its module is sys.modules'
    monkeypatch.setattr(sys.modules["seer.dispatch"], "device_identity", lambda device: ("Imaginary GPU", (7, 0)))
    for op, how in (("spmv", r"profile it with `seer profile spmv`, then `seer train`"),
                    ("gemm", r"profile it with `python benchmarks/gemm_profile.py`, then `seer train`")):
        clear_cache()
        with pytest.warns(SeerWarning, match=rf"no {op} model measured on 'Imaginary GPU' \({how}"):
            assert resolve_model(get_op(op), torch.device("cuda", 0)) == (None, "hand rule")
    clear_cache()


def test_a_matrix_given_as_a_list_is_held_as_its_arrays():
    """The key names the arrays by id; the decision held the caller's list, so an array put in its place
    freed the one keyed (kept only as a contiguous copy where strided), whose id a new array could take,
    with version 0 too: its cached decision then multiplied by the old pattern (a review)."""
    import gc
    import weakref

    m = _matrix(40, 30, 0.2, 21)
    indptr, indices, values, shape = _parts(m)
    strided = torch.stack([indices, indices], 1)[:, 0]  # the same columns, strided: seer copies them
    matrix = [indptr, strided, values, shape]
    x = torch.randn(30)
    _check(seer.dispatch("spmv", (matrix, x)), m, x)
    held = weakref.ref(strided)
    matrix[1] = indices.clone()
    del strided
    gc.collect()
    assert held() is not None  # the cached decision keeps what its key names
    _check(seer.dispatch("spmv", (matrix, x)), m, x)


def test_a_hint_during_a_recheck_waits_for_it(monkeypatch, binds):
    """A hint's "keep the choice" cleared recheck_at while another thread's recheck read it: the recheck
    compared an int with None (a raw TypeError from the call, or a warning, and the hint undone; a review)."""
    found, calls = binds
    small, big = _small_and_big()
    model = _model_by_calls({1: small, 10: big, 100: big})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)
    dispatch_module = sys.modules["seer.dispatch"]
    deciding, go, warned = threading.Event(), threading.Event(), []
    settled = dispatch_module._settled_choice

    def held_open(*args, **kwargs):
        deciding.set()
        assert go.wait(30)
        return settled(*args, **kwargs)

    monkeypatch.setattr(dispatch_module, "_settled_choice", held_open)
    monkeypatch.setattr(dispatch_module, "_warn_once", warned.append)
    m = _matrix(60, 50, 0.1, 22)
    x = torch.randn(50)
    parts = _parts(m)
    for calls[0] in range(1, 10):
        seer.dispatch("spmv", (parts, x), model=model)
    results = {}

    def call(name, **hint):
        try:
            results[name] = seer.dispatch("spmv", (parts, x), model=model, **hint)
        except Exception as error:  # noqa: BLE001 (reported below)
            results[name] = error

    tenth = threading.Thread(target=call, args=("tenth",))
    tenth.start()
    assert deciding.wait(30)
    hinted = threading.Thread(target=call, args=("hinted",), kwargs={"calls": 1})
    hinted.start()
    hinted.join(0.5)  # it waits for the recheck now: before, it cleared recheck_at under it at once
    go.set()
    tenth.join(30)
    hinted.join(30)
    for name in ("tenth", "hinted"):
        assert isinstance(results[name], torch.Tensor), results[name]
        _check(results[name], m, x)
    assert warned == [] and found == [(SMALL, 1), (BIG, 9)]


def test_a_refused_call_decides_nothing_again(monkeypatch, binds):
    """Operands were checked by the bound call only, after a hint or a due recheck had decided again and
    bound another variant for them: a call refused for its x still changed the cached choice (a review)."""
    found, calls = binds
    small, big = _small_and_big()
    model = _model_by_calls({1: small, 10: big, 100: big})
    monkeypatch.setattr(spmv_features, "HOST_BOUND_BELOW", 0)
    m = _matrix(60, 50, 0.1, 23)
    x, wrong = torch.randn(50), torch.randn(49)
    for hint in ({"calls": 10}, {}):
        parts = _parts(m)
        seer.dispatch("spmv", (parts, x), model=model)
        for calls[0] in range(2, 10):  # the recheck due from the 10th call on; the hint decides again at once
            seer.dispatch("spmv", (parts, x), model=model)
        with pytest.raises(InputError, match="x has 49 entries; the matrix has 50 columns"):
            seer.dispatch("spmv", (parts, wrong), model=model, **hint)
        held = seer.cached_decision("spmv", (parts, x), model=model)
        assert held.variant == SMALL and held.calls == 1 and found[-1][0] == SMALL, (hint, found)
        _check(seer.dispatch("spmv", (parts, x), model=model, **hint), m, x)  # then it decides again
        assert seer.cached_decision("spmv", (parts, x), model=model).variant == BIG
        found.clear()


def test_a_csr_matrix_first_called_with_a_bad_x_plans_nothing():
    """A CsrMatrix's first call returned it unchecked, and the chosen variant planned its work (a copy of
    the values, renumbered columns on a large matrix) before its bound call refused x (a review)."""
    m = _matrix(80, 60, 0.1, 24)
    csr = as_csr(_parts(m))
    before = set(csr.scratch)
    with pytest.raises(InputError, match="x has 59 entries; the matrix has 60 columns"):
        seer.dispatch("spmv", (csr, torch.randn(59)), variant=None)
    assert set(csr.scratch) == before


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage:UserWarning")
def test_nested_spmv_operands_are_refused_by_name():
    """A strided nested tensor has no sizes: reading them raised torch's "Internal error", and nested values
    were first warned of as inference tensors (a review)."""
    m = _matrix(20, 16, 0.2, 25)
    indptr, indices, values, shape = _parts(m)
    x = torch.randn(16)
    nested = torch.nested.nested_tensor
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeerWarning)
        for inputs, out, told in (((indptr, indices, values, shape), nested([torch.randn(20)]), "out"),
                                  (((indptr, indices, values, shape)), None, "x"),
                                  ((indptr, indices, nested([values]), shape), None, "CSR values")):
            operand = nested([x]) if told == "x" else x
            with pytest.raises(InputError, match=f"{told} must be a dense tensor, got a nested one"):
                seer.dispatch("spmv", (inputs, operand), out=out)
        with pytest.raises(InputError, match="CSR values must be a dense tensor, got a nested one"):
            seer.explain("spmv", ((indptr, indices, nested([values]), shape), x))
        assert seer.cached_decision("spmv", ((indptr, indices, nested([values]), shape), x)) is None


def test_spmv_inside_vmap_is_refused_by_name():
    """Inside torch.vmap a vector has no memory of its own: torch's "Cannot access data pointer" named no
    cause (a review); GEMM's refusal names the transform."""
    parts = _parts(_matrix(20, 16, 0.2, 26))
    xs = torch.randn(3, 16)
    told = r"spmv: an operand or out has no memory of its own \(a tensor inside torch.vmap"
    with pytest.raises(InputError, match=told):  # a first call
        torch.vmap(lambda x: seer.dispatch("spmv", (parts, x)))(xs)
    seer.dispatch("spmv", (parts, xs[0]))
    with pytest.raises(InputError, match=told):  # a cached one
        torch.vmap(lambda x: seer.dispatch("spmv", (parts, x)))(xs)
    with pytest.raises(InputError, match=told):
        torch.vmap(lambda out: seer.dispatch("spmv", (parts, xs[0]), out=out))(torch.empty(3, 20))
