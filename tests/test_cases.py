"""SpMV profiling inputs: their cross-validation groups, and rewriting a table's groups."""
import gzip
import json
import shutil

import pandas as pd
import pytest
from conftest import shipped_spmv_rows

from seer.datasets import cases
from seer.datasets.suitesparse import list_matrices
from seer.errors import InputError
from seer.sparse import SHIFT_SAMPLE_DEFINITION
from seer.table import meta_path, read_table

SHIPPED = cases.Path(cases.__file__).parent / "profiles" / "spmv-h100.csv"


@pytest.fixture(scope="module")
def families(suitesparse_dir):
    return {info.id: info.family for info in list_matrices(suitesparse_dir)}


def test_each_input_is_grouped_with_its_family(suitesparse_dir, families):
    """Real matrices by group and problem kind, a replica with the matrix it copies, a generated
    matrix by its generator's structure parameters."""
    made = cases.spmv_cases([suitesparse_dir], synthetic="large", device="cpu")
    sources = {case.source for case in made}
    assert sources == {"real", "derived", "synthetic"}
    for case in made:
        if case.source == "real":
            assert case.group == families[case.id]
        elif case.source == "derived":
            original = "/".join(case.id.split("/")[1:3])
            assert case.group == families[original] != original.split("/")[0]
        else:
            assert case.group == cases.structure_family(case.id) and case.group.startswith("synthetic/")


def _old_style_table(tmp_path, rows):
    """A few rows of the shipped H100 table with the groups it had before families had kinds."""
    frame = pd.read_csv(SHIPPED, dtype=str, keep_default_na=False)
    frame = frame[frame["id"].isin(rows)].copy()
    frame.loc[frame["source"] != "synthetic", "group"] = frame["id"].str.removeprefix("derived/").str.split("/").str[0]
    path = tmp_path / "spmv-old.csv"
    frame.to_csv(path, index=False)
    shutil.copy(meta_path(SHIPPED), meta_path(path))
    return path, frame


ROWS = ["HB/bp_0", "HB/bp_200", "HB/bcsstk04", "derived/HB/bcsstk08/copies120-permute0-coupling0/seed0",
        "synthetic/stencil_3d/n59-points27/seed0"]


def test_regroup_rewrites_the_groups_alone(tmp_path, suitesparse_dir):
    path, before = _old_style_table(tmp_path, ROWS)
    assert set(before["group"]) == {"HB", "synthetic/stencil_3d/points27"}
    changes = cases.regroup_spmv_table(path, [suitesparse_dir], "the command")
    after = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert after.drop(columns="group").equals(before.drop(columns="group").reset_index(drop=True))
    assert dict(zip(after["id"], after["group"])) == {
        "HB/bp_0": "HB/optimization problem", "HB/bp_200": "HB/optimization problem",
        "HB/bcsstk04": "HB/structural problem", ROWS[3]: "HB/structural problem",
        ROWS[4]: "synthetic/stencil_3d/points27"}
    assert changes == ["HB -> HB/optimization problem", "HB -> HB/structural problem"]
    meta = json.loads(meta_path(path).read_text())
    assert meta["groups"]["rewritten_by"] == "the command" and "problem kind" in meta["groups"]["definition"]
    assert read_table(path).groups.tolist() == after["group"].tolist()
    written = path.read_bytes()
    assert cases.regroup_spmv_table(path, [suitesparse_dir], "again") == []
    assert path.read_bytes() == written and json.loads(meta_path(path).read_text()) == meta


def test_regroup_groups_rows_with_a_failed_timing_too(tmp_path, suitesparse_dir):
    """read_table drops a row with a failed variant, but the file keeps it: its group had been
    written empty (the row then grouped alone once the variant was retired)."""
    path, before = _old_style_table(tmp_path, ROWS)
    variant = next(c for c in before.columns if c.startswith("time_ms:"))
    before.loc[before["id"] == "HB/bp_0", variant] = ""
    before.to_csv(path, index=False)
    with pytest.warns(UserWarning, match="dropped 1 of 5 rows"):
        cases.regroup_spmv_table(path, [suitesparse_dir], "the command")
    after = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert dict(zip(after["id"], after["group"]))["HB/bp_0"] == "HB/optimization problem"


def test_regroup_refuses_inputs_it_cannot_place(tmp_path, suitesparse_dir):
    path, _ = _old_style_table(tmp_path, ROWS)
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[0, "id"] = "Elsewhere/unknown"
    frame.to_csv(path, index=False)
    before = path.read_bytes()
    with pytest.raises(InputError, match=r"--synthetic large --seed 0 \(what the table records.*Elsewhere/unknown.*--matrices"):
        cases.regroup_spmv_table(path, [suitesparse_dir], "cmd")
    assert path.read_bytes() == before


def _with_seed(path, seed):
    """The table ``path`` as a campaign of ``--seed seed`` would have written it: its generated inputs'
    ids end in that seed, and its metadata records it."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame["id"] = frame["id"].str.replace(r"/seed0$", f"/seed{seed}", regex=True)
    frame.to_csv(path, index=False)
    meta = json.loads(meta_path(path).read_text())
    meta_path(path).write_text(json.dumps({**meta, "inputs": {"synthetic": "large", "seed": seed}}))
    return frame


def test_regroup_rebuilds_the_suite_and_seed_the_table_records(tmp_path, suitesparse_dir):
    """A --seed 3 table was refused: its inputs were looked for in the large suite of seed 0."""
    path, _ = _old_style_table(tmp_path, ROWS)
    _with_seed(path, 3)
    cases.regroup_spmv_table(path, [suitesparse_dir], "the command")
    groups = dict(zip(*pd.read_csv(path, dtype=str, keep_default_na=False)[["id", "group"]].T.values))
    assert groups[ROWS[3].replace("seed0", "seed3")] == "HB/structural problem"
    assert groups[ROWS[4].replace("seed0", "seed3")] == "synthetic/stencil_3d/points27"


def test_recount_rebuilds_the_suite_and_seed_the_table_records(tmp_path, suitesparse_dir):
    path = shipped_spmv_rows(tmp_path, [STENCIL])
    _with_seed(path, 3)
    (seeded,) = cases.structure_features([path], [suitesparse_dir])
    assert seeded == STENCIL.replace("seed0", "seed3")


def test_regroup_command_line(tmp_path, suitesparse_dir, capsys):
    path, _ = _old_style_table(tmp_path, ROWS)
    cases.main(["regroup", str(path), "--matrices", str(suitesparse_dir)])
    assert "2 groups renamed" in capsys.readouterr().out
    assert json.loads(meta_path(path).read_text())["groups"]["rewritten_by"].startswith(
        f"python -m seer.datasets.cases regroup {path}")


def test_the_command_line_takes_every_matrices_folder(monkeypatch, capsys):
    """A table profiled from two folders (`seer profile --matrices A --matrices B`) could not be
    regrouped or recounted: a repeated --matrices kept the last folder alone (a review)."""
    seen = []
    monkeypatch.setattr(cases, "regroup_spmv_table", lambda table, folders, command: seen.append(folders) or [])
    monkeypatch.setattr(cases, "structure_features", lambda tables, folders: seen.append(folders) or {})
    monkeypatch.setattr(cases, "recount_shifted_rows", lambda tables, features, command: {})
    for action in ("regroup", "recount-shifted-rows"):
        cases.main([action, "t.csv", "--matrices", "A", "--matrices", "B"])
    assert seen == [[cases.Path("A"), cases.Path("B")]] * 2


def test_the_first_nnz_band_is_named_by_its_bound():
    assert [cases.nnz_band_label(*band) for band in cases.NNZ_BANDS] == [
        "nnz <1e5", "nnz 1e5-1e6", "nnz 1e6-1e7", "nnz 1e7+"]  # the first had read "nnz 0e0-1e5"


@pytest.mark.parametrize("action", ["regroup", "recount-shifted-rows"])
def test_command_line_mistakes_are_one_line_errors(tmp_path, suitesparse_dir, capsys, action):
    """A missing table, a missing or empty --matrices folder and a GEMM table had each printed a
    traceback where seer's other commands print ``prog: error: message``."""
    spmv, _ = _old_style_table(tmp_path, ROWS)
    gemm = SHIPPED.with_name("gemm-h100.csv")
    (tmp_path / "empty").mkdir()
    mistakes = {"missing.csv does not exist": [tmp_path / "missing.csv", suitesparse_dir],
                "does not exist or is not a folder": [spmv, tmp_path / "absent"],
                "no matrices in": [spmv, tmp_path / "empty"],
                "profiled for op 'gemm', not 'spmv'": [gemm, suitesparse_dir]}
    for message, (table, matrices) in mistakes.items():
        with pytest.raises(SystemExit) as exit_:
            cases.main([action, str(table), "--matrices", str(matrices)])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err.startswith("python -m seer.datasets.cases: error: ") and message in err


# A 27-point stencil of side 42 (74,088 rows): over every row 0.9286 of its rows shift the one before.
STENCIL = "synthetic/stencil_3d/n42-points27/seed0"


def test_recount_rewrites_the_shifted_rows_alone(tmp_path, suitesparse_dir):
    path = shipped_spmv_rows(tmp_path, ["HB/bcsstk04", STENCIL])
    stale = pd.read_csv(path, dtype=str, keep_default_na=False)
    stale.loc[stale["id"] == STENCIL, "shifted_row_frac"] = "0.5"
    stale.to_csv(path, index=False)
    structure = cases.structure_features([path], [suitesparse_dir])
    assert cases.recount_shifted_rows([path], structure, "the command") == {path: 1}
    after = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert after.drop(columns="shifted_row_frac").equals(stale.drop(columns="shifted_row_frac"))
    recounted = dict(zip(after["id"], after["shifted_row_frac"].astype(float)))
    assert recounted["HB/bcsstk04"] == 0.0  # 132 rows: too small to be sampled
    assert recounted[STENCIL] == pytest.approx(0.9286, abs=0.01)
    meta = json.loads(meta_path(path).read_text())
    assert meta["shifted_row_frac"] == {"sample": SHIFT_SAMPLE_DEFINITION, "rewritten_by": "the command"}


def test_recount_refuses_a_row_that_is_not_its_input_and_writes_no_table(tmp_path, suitesparse_dir):
    good = shipped_spmv_rows(tmp_path, ["HB/bcsstk04", STENCIL], "spmv-good.csv")
    bad = shipped_spmv_rows(tmp_path, ["HB/bcsstk04", "HB/bp_0"], "spmv-bad.csv")
    frame = pd.read_csv(bad, dtype=str, keep_default_na=False)
    frame.loc[frame["id"] == "HB/bp_0", "row_std"] = "123.0"
    frame.to_csv(bad, index=False)
    before = {p: p.read_bytes() for p in (good, bad)}
    structure = cases.structure_features([good, bad], [suitesparse_dir])
    with pytest.raises(InputError, match=r"HB/bp_0's features .*'row_std': \('123.0', .*No table was rewritten"):
        cases.recount_shifted_rows([good, bad], structure, "cmd")
    assert {p: p.read_bytes() for p in (good, bad)} == before


def test_recount_names_a_table_without_the_column(tmp_path, suitesparse_dir):
    path = shipped_spmv_rows(tmp_path, ["HB/bcsstk04"])
    pd.read_csv(path, dtype=str, keep_default_na=False).drop(columns="shifted_row_frac").to_csv(path, index=False)
    structure = cases.structure_features([path], [suitesparse_dir])
    with pytest.raises(InputError, match="no shifted_row_frac column.*--gather"):
        cases.recount_shifted_rows([path], structure, "cmd")


def test_recount_compares_only_the_gathered_features_the_table_has(tmp_path, suitesparse_dir):
    """Each gathered feature is optional: a table without row_std failed with KeyError 'row_std'."""
    path = shipped_spmv_rows(tmp_path, ["HB/bcsstk04"])
    pd.read_csv(path, dtype=str, keep_default_na=False).drop(columns="row_std").to_csv(path, index=False)
    structure = cases.structure_features([path], [suitesparse_dir])
    assert cases.recount_shifted_rows([path], structure, "cmd") == {path: 0}
    assert "row_std" not in pd.read_csv(path).columns


def test_a_folder_without_a_launch_bound_matrix_is_named(tmp_path, suitesparse_dir):
    """It raised a bare StopIteration."""
    shutil.copy(next(suitesparse_dir.rglob("HB__bcsstk01.mtx.gz")), tmp_path)  # 400 nonzeros
    with pytest.raises(InputError, match="has no real matrix of 10,000 to 50,000 nonzeros"):
        cases.launch_bound_case(tmp_path)


def test_a_case_of_a_manifest_row_that_does_not_describe_its_file_is_refused_when_loaded(tmp_path, suitesparse_dir):
    """The manifest's sizes were taken on trust: a row saying 7 x 7 named a 48 x 48 file."""
    table = pd.read_csv(suitesparse_dir / "manifest.csv", dtype=str, keep_default_na=False)
    row = table[table.name == "bcsstk01"].assign(rows="7", cols="7")
    shutil.copy(suitesparse_dir / row.file.iloc[0], tmp_path)
    row.to_csv(tmp_path / "manifest.csv", index=False)
    (case,) = cases.spmv_cases([tmp_path], device="cpu")
    with pytest.raises(InputError, match=r"row 1 says HB/bcsstk01 is 7 x 7 .* holds a 48 x 48 matrix"):
        case.load()


def test_a_matrix_listed_twice_is_refused_before_it_is_profiled_twice(tmp_path, suitesparse_dir):
    """Profiled twice, the table was refused only when read, after the whole campaign."""
    folder = tmp_path / "matrices"
    folder.mkdir()
    source = next(suitesparse_dir.rglob("*bcsstk01*.mtx.gz"))
    shutil.copy(source, folder / "HB__bcsstk01.mtx.gz")
    (folder / "HB__bcsstk01.mtx").write_bytes(gzip.decompress(source.read_bytes()))
    with pytest.raises(InputError, match=r"listed more than once, e\.g\. \['HB/bcsstk01'\]"):
        cases.spmv_cases([folder], device="cpu")
    (folder / "HB__bcsstk01.mtx").unlink()
    with pytest.raises(InputError, match="listed more than once"):
        cases.spmv_cases([folder, folder], device="cpu")
    assert len(cases.spmv_cases([folder], device="cpu")) == 1


@pytest.mark.parametrize("name", ["JGD_Relat/relat4", "HB/zenios"])  # small integer values; explicit zeros
def test_a_case_loads_fresh_signed_values_and_x_whatever_the_file_holds(suitesparse_dir, name):
    """Profiling checks every variant against float64 on these: pattern or constant values (or x) would
    hide a kernel reading the wrong columns or rows, and a zero would hide its product."""
    import numpy as np
    import torch

    from seer.datasets.suitesparse import read_matrix

    stem = name.replace("/", "__")
    case = next(c for c in cases.spmv_cases([suitesparse_dir], device="cpu") if c.id.endswith(name) or stem in c.id)
    matrix, values, x = case.load()
    on_file = read_matrix(next(suitesparse_dir.glob(f"{stem}.mtx*")))
    assert matrix.nnz == on_file.nnz and (matrix.indices == on_file.indices).all()
    assert np.all(np.abs(values) >= 0.5) and (values > 0).any() and (values < 0).any()
    assert len(np.unique(values)) > matrix.nnz // 2 and not np.array_equal(values, on_file.data)
    assert len(np.unique(x)) == len(x) > 1 and np.all(np.abs(x) <= 1)
    again = case.load()  # the same seed: the same values, so a table's row can be timed again alike
    assert np.array_equal(again[1], values) and np.array_equal(again[2], x)
    parts, (vector,) = case.build((matrix, values, x))
    assert parts[0].dtype == parts[1].dtype == torch.int32 and parts[2].dtype == vector.dtype == torch.float32
    assert torch.equal(parts[2], torch.from_numpy(values).float())


def test_a_case_takes_int64_indices_where_seer_refuses_int32_ones(suitesparse_dir, monkeypatch):
    """Cases chose int32 up to 2**31 - 1 nonzeros, which seer refuses from 2**31 - 2**20 on (its kernels'
    positions pass the last nonzero by a block): a case in between was built only to be refused (a review).
    The bound lowered to this matrix's nonzeros stands in for a matrix of 2**31 of them."""
    import torch

    from seer.sparse import as_csr

    case = next(c for c in cases.spmv_cases([suitesparse_dir], device="cpu") if c.id.endswith("HB/bcsstk01"))
    loaded = case.load()
    monkeypatch.setattr(cases, "POSITIONS_FIT_INT32_BELOW", loaded[0].nnz)
    parts, _ = case.build(loaded)
    assert parts[0].dtype == parts[1].dtype == torch.int64
    monkeypatch.setattr(cases, "POSITIONS_FIT_INT32_BELOW", loaded[0].nnz + 1)
    parts, _ = case.build(loaded)
    assert parts[0].dtype == parts[1].dtype == torch.int32
    as_csr(parts)  # taken
