"""benchmarks/spmv_offsets_refusal.py on the CPU: its steps run on a matrix that fits and one that
does not (Triton interpreter), it selects the permuted replicas only, and its report groups by fit."""
from types import SimpleNamespace

import numpy as np

from conftest import load_benchmark
from test_spmv_kernels import offsets_matrix, to_seer

refusal = load_benchmark("spmv_offsets_refusal")


def test_every_step_runs_where_the_offsets_fit_and_where_they_do_not():
    for reach, fits in (((0, 0), True), ((1, 0), False)):
        csr, _ = to_seer(offsets_matrix(np.random.default_rng(5), *reach))
        made = {name: step(csr) for name, step in refusal.STEPS.items()}
        assert (made["offsets (sample, pass, read back)"] is not None) == fits
        assert callable(made["cuSPARSE plan"])
        assert callable(made["offsets, then cuSPARSE plan if refused"]) != fits


def test_selection_keeps_permuted_replicas_and_takes_families_by_turns():
    def case(case_id, size):
        return SimpleNamespace(id=case_id, extra={"size": size})

    cases = [case("synthetic/rmat/a", 1), case("synthetic/rmat/b", 3), case("derived/x/permute0", 9),
             case("derived/y/permute1", 5), case("synthetic/stencil_2d/s", 7), case("synthetic/banded/c", 2)]
    assert [c.id for c in refusal.select(cases)] == [
        "synthetic/rmat/a", "derived/y/permute1", "synthetic/banded/c", "synthetic/rmat/b"]


def test_markdown_groups_by_fit():
    names = list(refusal.STEPS)
    rows = [{"id": f"m{i}", "rows": 10, "nnz": 10**6, "fits": fits, "step_ms": dict(zip(names, [ms] * len(names)))}
            for i, (fits, ms) in enumerate([(False, 0.5), (False, 0.3), (True, 0.1)])]
    result = {"device": {"name": "GPU"}, "versions": {"torch": "t", "triton": "r"}, "date": "d", "command": "c",
              "matrices": rows}
    text = refusal.markdown(result)
    assert "| offsets do not fit | 2 | " + " | ".join(["0.400"] * len(names)) + " |" in text
    assert "| offsets fit | 1 | " + " | ".join(["0.100"] * len(names)) + " |" in text
