"""The profiling harness on the CPU: rows, resume, failures, and a table `seer train` accepts.

GPU timing is replaced by a host timer here; the GPU campaign itself runs through the device.
"""
import dataclasses
import json
import re

import pandas as pd
import pytest
import torch
import triton

from seer import profiling
from seer.datasets.cases import spmv_cases
from seer.errors import ProfileTableError, SeerError, SeerWarning
from seer.registry import Variant, get_op
from seer.table import read_table


@pytest.fixture
def host_timer(monkeypatch):
    monkeypatch.setattr(profiling, "time_ms", lambda fn, **_: profiling._median_wall_ms(fn, repeats=2))
    monkeypatch.setattr(profiling, "host_call_us", lambda fn, calls=0: 1.0)


@pytest.fixture
def few_variants(monkeypatch):
    variants = get_op("spmv").kernels.VARIANTS
    keep = {name: variants[name] for name in ("scalar_r128", "vector_g8", "merge_c512")}
    monkeypatch.setattr(get_op("spmv").kernels, "VARIANTS", keep)
    return keep


def _cases(suitesparse_dir, n):
    return spmv_cases([suitesparse_dir], max_nnz=2000, device="cpu")[:n]


def _as_rank(monkeypatch, rank, world):
    """This process as rank ``rank`` of ``world`` with no peers: the collectives stubbed (every rank
    gathers its own skips)."""
    monkeypatch.setattr(profiling, "_rank_and_world", lambda: (rank, world))
    monkeypatch.setattr(torch.distributed, "monitored_barrier", lambda **_: None)
    monkeypatch.setattr(torch.distributed, "barrier", lambda *args, **kwargs: None)
    monkeypatch.setattr(torch.distributed, "all_gather_object",
                        lambda each, obj: each.__setitem__(slice(None), [obj] * world))


def test_profile_writes_resumable_table(tmp_path, suitesparse_dir, host_timer, few_variants):
    out = tmp_path / "spmv-test.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 3), out, command="test", progress=False)
    profiling.profile("spmv", _cases(suitesparse_dir, 5), out, command="again", progress=False)
    frame = pd.read_csv(out)
    assert len(frame) == 5 and frame["id"].is_unique
    assert (frame[[f"time_ms:{v}" for v in few_variants]] > 0).all().all()
    assert (frame["gather_ms"] > 0).all() and (frame["source"] == "real").all()
    meta = json.loads((tmp_path / "spmv-test.meta.json").read_text())
    assert meta["op"] == "spmv" and meta["commands"] == ["test", "again"]
    assert meta["device"]["name"] == "cpu"
    table = read_table(out)
    assert list(table.variants) == list(few_variants) and "cusparse" in table.baselines
    # Every variant's one-time preparation on a fresh matrix: merge's brackets take work, and
    # the profiled rows' own plans (kept in their problems' caches) were not what was timed.
    assert (table.prepare_ms > 0).all()


def _edit_meta(path, **changes):
    meta_file = path.with_name(path.stem + ".meta.json")
    meta = json.loads(meta_file.read_text())
    for key, value in changes.items():
        if isinstance(value, dict):
            meta[key] = {**meta.get(key, {}), **value}
        else:
            meta[key] = value
    meta_file.write_text(json.dumps(meta))
    return meta_file


def test_resuming_keeps_the_tables_other_metadata(tmp_path, suitesparse_dir, host_timer, few_variants):
    out = tmp_path / "spmv-test.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 1), out, command="first", progress=False)
    meta_file = _edit_meta(out, notes="regrouped by hand", groups={"definition": "by kind"})
    profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)
    meta = json.loads(meta_file.read_text())
    assert meta["notes"] == "regrouped by hand" and meta["groups"] == {"definition": "by kind"}
    assert meta["commands"] == ["first", "resumed"] and meta["command"] == "resumed"
    assert len(pd.read_csv(out)) == 2


def test_a_run_that_adds_no_row_leaves_the_metadata_alone(tmp_path, suitesparse_dir, host_timer, few_variants):
    out = tmp_path / "spmv-test.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="first", progress=False)
    meta_file = out.with_name("spmv-test.meta.json")
    written = meta_file.read_bytes(), out.read_bytes()
    profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="nothing left", progress=False)
    assert (meta_file.read_bytes(), out.read_bytes()) == written


def test_resuming_a_table_of_another_gpu_is_refused(tmp_path, suitesparse_dir, host_timer, few_variants):
    out = tmp_path / "spmv-test.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 1), out, command="first", progress=False)
    _edit_meta(out, device={"name": "NVIDIA H200"})
    with pytest.raises(ProfileTableError, match="measured on 'NVIDIA H200', this run is on 'cpu'"):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)
    assert len(pd.read_csv(out)) == 1


@pytest.mark.parametrize("field, value, message", [
    ("op", "gemm", "profiles op 'gemm', not 'spmv'"),
    ("dtype", "float16", "was profiled in float16, this run in float32"),
])
def test_resuming_a_table_of_another_op_or_dtype_is_refused(tmp_path, suitesparse_dir, host_timer, few_variants,
                                                             field, value, message):
    out = tmp_path / "spmv-test.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 1), out, command="first", progress=False)
    assert json.loads(out.with_name("spmv-test.meta.json").read_text())["dtype"] == "float32"
    _edit_meta(out, **{field: value})
    with pytest.raises(ProfileTableError, match=message):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)
    assert len(pd.read_csv(out)) == 1


def test_a_run_killed_mid_way_leaves_metadata_a_resumed_run_checks(tmp_path, suitesparse_dir, host_timer, few_variants,
                                                                    monkeypatch):
    """The metadata is written before the first row: a run stopped by anything but its deadline
    (a crash, a kill) leaves rows whose GPU the next run can check; rows without it are refused."""
    out = tmp_path / "spmv-test.csv"
    cases = _cases(suitesparse_dir, 2)
    real_profile_case = profiling.profile_case

    def killed_on_the_second(op, case, **kwargs):
        if case.id == cases[1].id:
            raise KeyboardInterrupt
        return real_profile_case(op, case, **kwargs)

    monkeypatch.setattr(profiling, "profile_case", killed_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        profiling.profile("spmv", cases, out, command="first", progress=False)
    monkeypatch.setattr(profiling, "profile_case", real_profile_case)
    assert len(pd.read_csv(out)) == 1
    _edit_meta(out, device={"name": "NVIDIA H200"})
    with pytest.raises(ProfileTableError, match="measured on 'NVIDIA H200', this run is on 'cpu'"):
        profiling.profile("spmv", cases, out, command="resumed", progress=False)
    out.with_name("spmv-test.meta.json").unlink()
    with pytest.raises(ProfileTableError, match=r"has rows \(spmv-test\.csv\) but no spmv-test\.meta\.json"):
        profiling.profile("spmv", cases, out, command="resumed", progress=False)


def test_resuming_with_other_versions_warns(tmp_path, suitesparse_dir, host_timer, few_variants):
    out = tmp_path / "spmv-test.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 1), out, command="first", progress=False)
    meta_file = _edit_meta(out, versions={"triton": "0.0.1"})
    meta = json.loads(meta_file.read_text())
    meta["runs"][0]["versions"]["triton"] = "0.0.1"  # as if the first run had had it
    meta_file.write_text(json.dumps(meta))
    with pytest.warns(SeerWarning, match=r"triton 0\.0\.1 \(now "):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)
    assert len(pd.read_csv(out)) == 2
    # The metadata's versions are the last run's; the first run's stay on record (they were lost).
    runs = json.loads(meta_file.read_text())["runs"]
    assert [(r["command"], r["versions"]["triton"]) for r in runs] == [("first", "0.0.1"), ("resumed", triton.__version__)]
    # A table from before the field: its top level stands for its runs (found by a review).
    meta = json.loads(meta_file.read_text())
    del meta["runs"]
    meta_file.write_text(json.dumps(meta))
    profiling.profile("spmv", _cases(suitesparse_dir, 3), out, command="third", progress=False)
    runs = json.loads(meta_file.read_text())["runs"]
    assert [r["command"] for r in runs] == ["resumed", "third"]


def test_preparation_is_timed_on_problems_that_have_not_seen_the_variant(suitesparse_dir, host_timer, few_variants,
                                                                       monkeypatch):
    bound = []
    variant = few_variants["merge_c512"]
    monkeypatch.setitem(few_variants, "merge_c512",
                        Variant("merge_c512", variant.run, bind=lambda csr: bound.append(csr) or variant.bind(csr)))
    row = profiling.profile_case("spmv", _cases(suitesparse_dir, 1)[0], call_overhead=False)
    assert row["prepare_ms:merge_c512"] > 0
    assert len(bound) == profiling.PREPARE_TRIES and len({id(csr) for csr in bound}) == profiling.PREPARE_TRIES


def _profiled_with(suitesparse_dir, few_variants, monkeypatch, **runs) -> tuple[dict, list[str]]:
    """The first small matrix's row, with the variants named in ``runs`` running those functions, and
    what profiling logged."""
    for name, run in runs.items():
        monkeypatch.setitem(few_variants, name, Variant(name, run))
    logged = []
    row = profiling.profile_case("spmv", _cases(suitesparse_dir, 1)[0], call_overhead=False, log=logged.append)
    return row, logged


def test_wrong_and_failing_variants_are_recorded_not_timed(tmp_path, suitesparse_dir, host_timer, few_variants, monkeypatch):
    def wrong(csr, x, out=None):
        return few_variants["scalar_r128"].run(csr, x) * 1.01

    def broken(csr, x, out=None):
        raise RuntimeError("launch failed")

    row, logged = _profiled_with(suitesparse_dir, few_variants, monkeypatch, vector_g8=wrong, merge_c512=broken)
    assert row["time_ms:scalar_r128"] > 0
    assert pd.isna(row["time_ms:vector_g8"]) and pd.isna(row["time_ms:merge_c512"])
    assert any("WRONG vector_g8" in m for m in logged) and any("FAILED merge_c512" in m for m in logged)


def test_a_variant_is_checked_on_an_out_filled_with_nan(suitesparse_dir, host_timer, few_variants, monkeypatch):
    """A variant allocating its result may be handed the memory of the previous candidate's right one
    (the caching allocator reuses a freed block of the same size): one that writes nothing passed.
    The check runs each variant again into an out filled with NaN, which it must write and return."""
    kept = {}

    def stale(csr, x, out=None):  # the right values, from memory it did not write this call
        kept.setdefault("y", few_variants["scalar_r128"].run(csr, x))
        return kept["y"]

    def idle(csr, x, out=None):  # writes nothing: what out held is what it returns
        return out if out is not None else stale(csr, x)

    row, logged = _profiled_with(suitesparse_dir, few_variants, monkeypatch, vector_g8=stale, merge_c512=idle)
    assert row["time_ms:scalar_r128"] > 0
    assert pd.isna(row["time_ms:vector_g8"]) and pd.isna(row["time_ms:merge_c512"])
    assert any(m.startswith("  WRONG vector_g8") and "another tensor than the out=" in m for m in logged)
    assert any(m.startswith("  WRONG merge_c512") and "relative error inf" in m for m in logged)


def test_relative_error_flags_nan():
    ref = torch.ones(3, dtype=torch.float64)
    assert profiling.relative_error(torch.tensor([1.0, float("nan"), 1.0]), ref) == float("inf")
    assert profiling.relative_error(torch.ones(3), ref) == 0.0


def test_a_row_cut_short_is_dropped_and_profiled_again(tmp_path, suitesparse_dir, host_timer, few_variants):
    """A run killed while appending left the row without its newline: read as done, and the next
    row appended onto it, the table no longer parsed (found by a review)."""
    out = tmp_path / "spmv-test.csv"
    cases = _cases(suitesparse_dir, 3)
    profiling.profile("spmv", cases, out, command="first", progress=False)
    out.write_text(out.read_text()[:-40])
    with pytest.warns(SeerWarning, match="last line has no end"):
        profiling.profile("spmv", _cases(suitesparse_dir, 4), out, command="resumed", progress=False)
    table = read_table(out)
    assert sorted(table.ids) == sorted(c.id for c in _cases(suitesparse_dir, 4))


def test_a_new_table_in_a_new_folder_and_metadata_that_is_no_object(tmp_path, suitesparse_dir, host_timer,
                                                                    few_variants):
    out = tmp_path / "new" / "folder" / "spmv-test.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 1), out, command="first", progress=False)
    assert len(pd.read_csv(out)) == 1
    # Metadata of other shapes crashed the resume with AttributeError or UnicodeDecodeError (found by an audit).
    for text, problem in (("null", "must hold a JSON object"), ('{"device": ["H200"]}', '"device" must be an object'),
                          ('{"versions": ["2.11"]}', '"versions" must be an object'), (b"\xff{}", "is not JSON")):
        meta = out.with_name("spmv-test.meta.json")
        meta.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(ProfileTableError, match=f"{problem}.*; fix or remove it before resuming"):
            profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)
    meta.write_text('{"op": "spmv", "device": "cpu"}')  # a device by its name alone, as tables may say it
    profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)
    assert len(pd.read_csv(out)) == 2



def test_a_resumed_table_with_rows_wider_than_its_header_is_refused(tmp_path):
    """With a field more on every row pandas read the ids as an index and the groups as the ids, so a
    resume took every input for not profiled yet; a last line without its end is still no row."""
    out = tmp_path / "spmv-x.csv"
    out.write_text("id,group,time_ms:v\na,g,1.0,0.5\nb,g,2.0,0.5\n")
    with pytest.raises(ProfileTableError, match=r"spmv-x\.csv: line 2 has 4 fields, but the header names 3 columns"):
        profiling._ids(out)
    out.write_text("id,group,time_ms:v\na,g,1.0\nb,g")  # a rank writing its row b now
    assert profiling._ids(out) == ["a"]


def test_a_median_is_taken_over_at_least_twenty_runs(monkeypatch):
    """do_bench fits as many runs as its span holds by its estimate of one: a 1 ms kernel in 8.3 ms
    got a handful, and one slow on its first runs (a high estimate) fewer than the median implies."""
    import triton.testing

    spans = []

    def fake_do_bench(fn, warmup, rep, return_mode):
        assert return_mode == "all"
        spans.append(rep)
        runs = int(rep / (estimate_ms + 0.06))  # as do_bench: its estimate, the L2 flush included
        return [kernel_ms] * runs

    monkeypatch.setattr(triton.testing, "do_bench", fake_do_bench)
    for kernel_ms, estimate_ms, timings in ((0.01, 0.01, 1), (1.0, 1.0, 2), (0.25, 0.6, 2)):
        spans.clear()
        assert profiling.time_ms(lambda: None, rep_ms=25 / 3) == kernel_ms
        assert len(spans) == timings
        assert int(spans[-1] / (estimate_ms + 0.06)) >= profiling.MIN_RUNS


def test_rank_shards_merge_into_one_table(tmp_path):
    """Under torchrun each rank writes <stem>.rank<r>.csv; rank 0 merges them, later rows winning."""
    out = tmp_path / "spmv-x.csv"
    pd.DataFrame({"id": ["a", "b"], "time_ms:v": [1.0, 2.0]}).to_csv(out, index=False)
    pd.DataFrame({"id": ["c"], "time_ms:v": [3.0]}).to_csv(tmp_path / "spmv-x.rank0.csv", index=False)
    pd.DataFrame({"id": ["b", "d"], "time_ms:v": [2.5, 4.0]}).to_csv(tmp_path / "spmv-x.rank1.csv", index=False)
    profiling._merge_shards(out)
    merged = pd.read_csv(out).set_index("id")["time_ms:v"].to_dict()
    assert merged == {"a": 1.0, "b": 2.5, "c": 3.0, "d": 4.0}
    assert not list(tmp_path.glob("*.rank*.csv"))


def test_a_widened_table_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    """The rewrite with a new column went straight over the table: a kill during it left it cut."""
    out = tmp_path / "t.csv"
    profiling._append_row(out, {"id": "a", "time_ms:v": 1.0})
    before = out.read_bytes()

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(profiling.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        profiling._append_row(out, {"id": "b", "time_ms:v": 2.0, "baseline_ms:lib": 3.0})
    assert out.read_bytes() == before


def test_a_table_cut_inside_its_header_starts_anew(tmp_path, suitesparse_dir, host_timer, few_variants):
    out = tmp_path / "spmv-test.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 1), out, command="first", progress=False)
    out.write_text("id,group,sou")
    with pytest.warns(SeerWarning, match="holds no whole line"):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)
    assert len(read_table(out)) == 2


def test_an_empty_table_starts_anew_and_a_foreign_one_is_refused(tmp_path, suitesparse_dir, host_timer, few_variants):
    """A run killed before its header's first byte left an empty file, which pandas then failed to
    read (EmptyDataError); a CSV of other columns failed as a raw ValueError."""
    out = tmp_path / "spmv-test.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 1), out, command="first", progress=False)
    out.write_bytes(b"")
    with pytest.warns(SeerWarning, match="holds no whole line"):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)
    assert len(read_table(out)) == 2
    out.write_text("name,size\nfoo,3\n")
    with pytest.raises(ProfileTableError, match="spmv-test.csv is not a profile table to resume"):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="again", progress=False)
    assert out.read_text() == "name,size\nfoo,3\n"


def test_a_campaign_resumed_at_another_world_size_keeps_and_merges_the_shards_it_finds(
        tmp_path, suitesparse_dir, host_timer, few_variants, monkeypatch):
    """A torchrun run killed before its merge left rank files that a run of another world size
    neither counted (its inputs profiled again) nor merged (left to override later rows)."""
    cases = _cases(suitesparse_dir, 4)
    out = tmp_path / "spmv-x.csv"
    _as_rank(monkeypatch, 0, 2)
    profiling.profile("spmv", [], out, command="rank 0 of 2: its metadata, written before any rank's row",
                      progress=False)
    _as_rank(monkeypatch, 1, 2)
    profiling.profile("spmv", cases, out, command="rank 1 of 2, killed before the merge", progress=False)
    shard = tmp_path / "spmv-x.rank1.csv"
    left = pd.read_csv(shard)["id"].tolist()
    assert left == [cases[1].id, cases[3].id]
    shard.write_bytes(shard.read_bytes() + b"cut-short-row,")  # and killed while writing a third
    monkeypatch.setattr(profiling, "_rank_and_world", lambda: (0, 1))
    profiled = []
    real_profile_case = profiling.profile_case
    monkeypatch.setattr(profiling, "profile_case", lambda op, case, **kw: profiled.append(case.id) or
                        real_profile_case(op, case, **kw))
    with pytest.warns(SeerWarning, match="last line has no end"):
        profiling.profile("spmv", cases, out, command="alone", progress=False)
    assert profiled == [cases[0].id, cases[2].id]
    assert sorted(read_table(out).ids) == sorted(c.id for c in cases) and not shard.exists()


def test_a_killed_torchrun_campaign_is_checked_before_it_is_resumed(
        tmp_path, suitesparse_dir, host_timer, few_variants, monkeypatch):
    """With no merged table yet, only rank files and the metadata rank 0 wrote first, a resume checked
    nothing: a float16 campaign of another GPU was resumed as float32 here, its rows merged in and its
    metadata rewritten (found by an audit)."""
    out = tmp_path / "spmv-x.csv"
    _as_rank(monkeypatch, 0, 2)
    profiling.profile("spmv", _cases(suitesparse_dir, 1), out, command="rank 0 of 2, killed", progress=False)
    out.with_name("spmv-x.rank0.csv").write_bytes(out.read_bytes())  # its rows, not yet merged
    out.unlink()
    _edit_meta(out, device={"name": "NVIDIA H200"})
    monkeypatch.setattr(profiling, "_rank_and_world", lambda: (0, 1))
    with pytest.raises(ProfileTableError, match="measured on 'NVIDIA H200'"):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)
    profiling.meta_path(out).unlink()
    with pytest.raises(ProfileTableError, match=r"spmv-x\.csv has rows \(spmv-x\.rank0\.csv\) but no"):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)


def test_a_merged_table_or_one_of_other_variants_is_not_resumed(tmp_path, suitesparse_dir, host_timer, few_variants):
    """New rows in a merge were lost when it was merged again; new rows beside other variants' columns
    left the old rows without the new variants' times, dropped when read (found by an audit)."""
    out = tmp_path / "spmv-x.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 1), out, command="first", progress=False)
    _edit_meta(out, campaigns=[{"table": "a.csv"}, {"table": "b.csv"}])
    with pytest.raises(ProfileTableError, match="is a merge of campaigns"):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)
    meta = json.loads(profiling.meta_path(out).read_text())
    del meta["campaigns"]
    profiling.meta_path(out).write_text(json.dumps(meta))
    few_variants["vector_g16"] = few_variants["vector_g8"]  # a variant this seer gained since the table's rows
    with pytest.raises(ProfileTableError, match=r"spmv-x\.csv lacks \['vector_g16'\], which this seer's spmv has: "
                                                r"retire the first .* time the second into its rows"):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)
    out.rename(out.with_name("spmv-x.rank1.csv"))  # an interrupted torchrun run's rows: no tool adds to them
    with pytest.raises(ProfileTableError, match=r"spmv-x\.rank1\.csv lacks .*: an interrupted run's rank file"):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False)


def test_only_rank_files_are_taken_for_shards_and_a_cut_merge_is_mended(tmp_path):
    """A backup named like a shard was merged in (overriding the table's rows) and deleted; a cut
    row of the merged table was rewritten whole, its last number cut short (found by an audit)."""
    out = tmp_path / "spmv-x.csv"
    out.write_bytes(b"id,time_ms:v\na,1.0\nb,2.0")
    pd.DataFrame({"id": ["c"], "time_ms:v": [3.0]}).to_csv(tmp_path / "spmv-x.rank1.csv", index=False)
    backup = tmp_path / "spmv-x.rank0.old-backup.csv"
    pd.DataFrame({"id": ["a"], "time_ms:v": [9.0]}).to_csv(backup, index=False)
    assert profiling._shards(out) == [tmp_path / "spmv-x.rank1.csv"]
    with pytest.warns(SeerWarning, match="last line has no end"):
        profiling._merge_shards(out)
    assert pd.read_csv(out).set_index("id")["time_ms:v"].to_dict() == {"a": 1.0, "c": 3.0}
    assert backup.exists()


def test_names_spelled_like_missing_cells_stay_names(tmp_path):
    """An input named NA read back as 'nan' (never counted as done) and a group None as missing, in
    the harness's own reads (found by an audit): read_table takes them as names."""
    out = tmp_path / "spmv-x.csv"
    pd.DataFrame({"id": ["NA"], "group": ["None"], "time_ms:v": [1.0]}).to_csv(out, index=False)
    pd.DataFrame({"id": ["null"], "group": ["NA"], "time_ms:v": [2.0]}).to_csv(tmp_path / "spmv-x.rank1.csv",
                                                                                index=False)
    assert profiling._ids(out) == ["NA"]
    profiling._merge_shards(out)
    assert pd.read_csv(out, dtype=str, keep_default_na=False)[["id", "group"]].values.tolist() == [
        ["NA", "None"], ["null", "NA"]]


def test_an_input_too_large_for_memory_is_skipped(tmp_path, suitesparse_dir, host_timer, few_variants, monkeypatch):
    """Out of memory while loading an input or computing its reference ended the run, and every
    resumed run at the same input (found by an audit)."""
    cases = _cases(suitesparse_dir, 3)
    real_profile_case = profiling.profile_case

    def profile_case(op, case, **kw):
        if case.id == cases[1].id:
            raise torch.OutOfMemoryError("CUDA out of memory (as if)")
        return real_profile_case(op, case, **kw)

    monkeypatch.setattr(profiling, "profile_case", profile_case)
    out = tmp_path / "spmv-x.csv"
    profiling.profile("spmv", cases, out, command="test", progress=False)
    assert pd.read_csv(out)["id"].tolist() == [cases[0].id, cases[2].id]


def test_a_variant_out_of_memory_skips_the_input_for_a_retry(tmp_path, suitesparse_dir, host_timer, few_variants,
                                                             monkeypatch):
    """Out of memory in a variant's first (checked) call had been logged as that variant FAILED: the
    row lacked its time, was dropped when the table was read, and was never retried (a review)."""
    cases = _cases(suitesparse_dir, 3)
    real = few_variants["vector_g8"]

    def run(problem, *operands, **kwargs):
        if problem.nnz == cases[1].extra["size"]:
            raise torch.OutOfMemoryError("CUDA out of memory (as if)")
        return real.run(problem, *operands, **kwargs)

    monkeypatch.setitem(few_variants, "vector_g8", dataclasses.replace(real, run=run))
    out = tmp_path / "spmv-x.csv"
    profiling.profile("spmv", cases, out, command="test", progress=False)
    assert pd.read_csv(out)["id"].tolist() == [cases[0].id, cases[2].id]
    assert json.loads(profiling.meta_path(out).read_text())["skipped"] == {cases[1].id: "CUDA out of memory (as if)"}


def test_an_interrupted_resume_records_its_rows_as_its_own(tmp_path, suitesparse_dir, host_timer, few_variants,
                                                           monkeypatch):
    """The metadata was written only once a run ended: rows an interrupted resume added were left under
    the earlier run's command and versions (a review)."""
    cases = _cases(suitesparse_dir, 4)
    out = tmp_path / "spmv-x.csv"
    profiling.profile("spmv", cases[:1], out, command="first", progress=False)
    _failing(monkeypatch, {cases[1].id: torch.OutOfMemoryError("CUDA out of memory (as if)"),
                           cases[3].id: KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        profiling.profile("spmv", cases, out, command="resumed", progress=False)
    meta = json.loads(profiling.meta_path(out).read_text())
    assert pd.read_csv(out)["id"].tolist() == [cases[0].id, cases[2].id]
    assert meta["commands"] == ["first", "resumed"] and [run["command"] for run in meta["runs"]] == ["first", "resumed"]
    assert meta["skipped"] == {cases[1].id: "CUDA out of memory (as if)"}


def _failing(monkeypatch, errors, profiled=None):
    """``profile_case`` raising ``errors[id]`` on the inputs it names (a dict the test may change); the
    inputs it was called on appended to ``profiled``."""
    real_profile_case = profiling.profile_case

    def profile_case(op, case, **kw):
        if profiled is not None:
            profiled.append(case.id)
        if case.id in errors:
            raise errors[case.id]
        return real_profile_case(op, case, **kw)

    monkeypatch.setattr(profiling, "profile_case", profile_case)


@pytest.mark.parametrize("message", [
    "CUDA error: out of memory when calling `cusparseSpMV_bufferSize( handle, opA, &alpha, descA, ...)`",
    "CUDA error: insufficient resources when calling `cusparseSpMV( handle, opA, &alpha, descA, ...)`",
    "cuSPARSE failed: CUSPARSE_STATUS_ALLOC_FAILED",
    "cuSPARSE failed: CUSPARSE_STATUS_INSUFFICIENT_RESOURCES",
])
def test_cusparse_out_of_memory_skips_the_input(tmp_path, suitesparse_dir, host_timer, few_variants, monkeypatch,
                                                capsys, message):
    """cuSPARSE short of device memory raises a RuntimeError, not torch.OutOfMemoryError: it ended the
    run, and every resumed run at the same input. torch words the status as cusparseGetErrorString
    does (the first two)."""
    cases = _cases(suitesparse_dir, 3)
    _failing(monkeypatch, {cases[1].id: RuntimeError(message)})
    out = tmp_path / "spmv-x.csv"
    profiling.profile("spmv", cases, out, command="test")
    assert pd.read_csv(out)["id"].tolist() == [cases[0].id, cases[2].id]
    assert f"SKIPPED {cases[1].id}: {message}" in capsys.readouterr().out


@pytest.mark.parametrize("message", [
    "CUDA error: invalid value when calling `cusparseSpMV( handle, opA, &alpha, descA, ...)`",
    "CUDA error: an illegal memory access was encountered",
    "CUDA error: out of memory",  # not cuSPARSE's: not what the skip is for
])
def test_other_runtime_errors_stay_fatal(tmp_path, suitesparse_dir, host_timer, few_variants, monkeypatch, message):
    cases = _cases(suitesparse_dir, 2)
    _failing(monkeypatch, {cases[1].id: RuntimeError(message)})
    with pytest.raises(RuntimeError, match=re.escape(message)):
        profiling.profile("spmv", cases, tmp_path / "spmv-x.csv", command="test", progress=False)


def test_skipped_inputs_are_recorded_and_not_tried_again_unless_asked(tmp_path, suitesparse_dir, host_timer,
                                                                       few_variants, monkeypatch, capsys):
    """An input skipped for being out of memory was tried again by every resumed run, each paying its
    load, build and reference again."""
    cases = _cases(suitesparse_dir, 3)
    out, profiled = tmp_path / "spmv-x.csv", []
    errors = {cases[1].id: torch.OutOfMemoryError("CUDA out of memory (as if)")}
    _failing(monkeypatch, errors, profiled)
    profiling.profile("spmv", cases[:2], out, command="first", progress=False)
    meta_file = profiling.meta_path(out)
    assert json.loads(meta_file.read_text())["skipped"] == {cases[1].id: "CUDA out of memory (as if)"}
    profiled.clear()
    profiling.profile("spmv", cases, out, command="resumed")
    assert profiled == [cases[2].id]
    assert (f"SKIPPED {cases[1].id}, as recorded in spmv-x.meta.json (seer profile --retry-skipped tries it "
            "again): CUDA out of memory (as if)") in capsys.readouterr().out
    meta = json.loads(meta_file.read_text())
    assert meta["skipped"] == {cases[1].id: "CUDA out of memory (as if)"} and meta["command"] == "resumed"
    # Retried and still out of memory: its record stays, and a run that only skipped leaves the table's
    # last run as it was.
    profiled.clear()
    profiling.profile("spmv", cases, out, command="retried", progress=False, retry_skipped=True)
    assert profiled == [cases[1].id] and json.loads(meta_file.read_text()) == meta
    # Retried where it fits: profiled, and its record gone.
    errors.clear()
    profiling.profile("spmv", cases, out, command="fits", progress=False, retry_skipped=True)
    assert sorted(pd.read_csv(out)["id"]) == sorted(c.id for c in cases)
    assert json.loads(meta_file.read_text())["skipped"] == {}


def test_the_skips_of_a_run_that_wrote_no_table_are_kept(tmp_path, suitesparse_dir, host_timer, few_variants,
                                                          monkeypatch, capsys):
    """Every input skipped: no table is written, and its metadata had been taken for one left beside a
    deleted table, so the next run loaded, built and refused them all again (a review). Kept where
    they are of this op, dtype and GPU; --retry-skipped tries them."""
    cases = _cases(suitesparse_dir, 2)
    out, profiled = tmp_path / "spmv-x.csv", []
    errors = {case.id: torch.OutOfMemoryError("CUDA out of memory (as if)") for case in cases}
    _failing(monkeypatch, errors, profiled)
    profiling.profile("spmv", cases, out, command="first", progress=False)
    assert not out.exists() and set(json.loads(profiling.meta_path(out).read_text())["skipped"]) == set(errors)
    profiled.clear()
    profiling.profile("spmv", cases, out, command="again")
    assert profiled == [] and "as recorded in spmv-x.meta.json" in capsys.readouterr().out
    assert set(json.loads(profiling.meta_path(out).read_text())["skipped"]) == set(errors)
    errors.pop(cases[0].id)
    profiling.profile("spmv", cases, out, command="retried", progress=False, retry_skipped=True)
    assert profiled == [c.id for c in cases] and pd.read_csv(out)["id"].tolist() == [cases[0].id]
    assert json.loads(profiling.meta_path(out).read_text())["skipped"] == {cases[1].id: "CUDA out of memory (as if)"}


def test_every_ranks_skips_are_recorded(tmp_path, suitesparse_dir, host_timer, few_variants, monkeypatch):
    """Under torchrun a rank's skips reach rank 0, which writes the metadata."""
    cases = _cases(suitesparse_dir, 4)
    out = tmp_path / "spmv-x.csv"
    profiling.profile("spmv", cases[:1], out, command="first", progress=False)
    _as_rank(monkeypatch, 0, 2)
    monkeypatch.setattr(torch.distributed, "all_gather_object",
                        lambda each, obj: each.__setitem__(slice(None), [obj, {cases[3].id: "out of memory"}]))
    _failing(monkeypatch, {cases[2].id: SeerError("complex values are not supported")})
    profiling.profile("spmv", cases, out, command="rank 0 of 2", progress=False)
    assert json.loads(profiling.meta_path(out).read_text())["skipped"] == {
        cases[2].id: "complex values are not supported", cases[3].id: "out of memory"}


@pytest.mark.parametrize("first, resumed, refused", [
    ({"synthetic": "small", "seed": 0}, {"synthetic": "large", "seed": 0},
     "--synthetic small, this run asks for --synthetic large"),
    ({"synthetic": "large", "seed": 0}, {"synthetic": "large", "seed": 1}, "--seed 0, this run asks for --seed 1"),
    ({"synthetic": "none", "seed": 0}, {"synthetic": "none", "seed": 2}, "--seed 0, this run asks for --seed 2"),
])
def test_a_resume_with_another_suite_or_seed_is_refused(tmp_path, suitesparse_dir, host_timer, few_variants,
                                                        first, resumed, refused):
    """A resume with another --synthetic or --seed mixed two suites in one table without a word."""
    out = tmp_path / "spmv-x.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 1), out, command="first", progress=False, inputs=first)
    assert json.loads(profiling.meta_path(out).read_text())["inputs"] == first
    with pytest.raises(ProfileTableError, match=f"spmv-x.csv was profiled with {refused}: .* resume it with "
                                                f"{refused.split(',')[0]}, or profile into another table"):
        profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="resumed", progress=False, inputs=resumed)
    assert len(pd.read_csv(out)) == 1


def test_real_matrices_go_with_any_suite_and_old_tables_resume(tmp_path, suitesparse_dir, host_timer, few_variants):
    """--synthetic none adds no generated input: a table of real matrices may gain the suite (as
    device_run.sh's spmv-resume does), and a run of real matrices alone may add to a table with one."""
    out = tmp_path / "spmv-x.csv"
    profiling.profile("spmv", _cases(suitesparse_dir, 1), out, command="first", progress=False,
                      inputs={"synthetic": "none", "seed": 0})
    profiling.profile("spmv", _cases(suitesparse_dir, 2), out, command="suite", progress=False,
                      inputs={"synthetic": "large", "seed": 0})
    profiling.profile("spmv", _cases(suitesparse_dir, 3), out, command="real", progress=False,
                      inputs={"synthetic": "none", "seed": 0})
    assert json.loads(profiling.meta_path(out).read_text())["inputs"] == {"synthetic": "large", "seed": 0}
    # A table from before the field: nothing to check; this run's are recorded from now on.
    meta = json.loads(profiling.meta_path(out).read_text())
    del meta["inputs"]
    profiling.meta_path(out).write_text(json.dumps(meta))
    profiling.profile("spmv", _cases(suitesparse_dir, 4), out, command="old", progress=False,
                      inputs={"synthetic": "small", "seed": 3})
    assert len(pd.read_csv(out)) == 4
    assert json.loads(profiling.meta_path(out).read_text())["inputs"] == {"synthetic": "small", "seed": 3}


# A rank of two under torchrun, on the CPU: rank 1 alive but stuck before the first barrier.
_STUCK_PEER = """
import datetime as dt, os, sys, time
import torch
from seer import profiling
torch.cuda.set_device = lambda device: None  # a CPU build has no device to set
profiling.CHECK_TIMEOUT = dt.timedelta(seconds=2)
if os.environ["RANK"] == "1":
    profiling._resumed_meta = lambda *args: time.sleep(300)
profiling.profile("spmv", [], sys.argv[1], command="test", progress=False)
"""


def _free_port() -> int:
    """A port free now; another process may take it before rank 0 listens on it (tried again then)."""
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        return free.getsockname()[1]


def _two_ranks(script: str, *args: str, port: int) -> tuple[int, str]:
    """Run ``script`` as ranks 0 and 1 of a gloo world on ``port``; rank 0's exit status and stderr."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2"}
    ranks = [subprocess.Popen([sys.executable, "-c", script, *args],
                              env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}, text=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE if rank == 0 else subprocess.DEVNULL)
             for rank in (0, 1)]
    try:
        _, error = ranks[0].communicate(timeout=120)
    finally:
        for process in ranks:
            process.kill()
            process.wait()
    return ranks[0].returncode, error


def test_a_rank_stuck_before_the_first_barrier_ends_the_run_in_minutes(tmp_path):
    """Its peers waited for it in the barrier for gloo's default 30 minutes (a rank that fails exits,
    and gloo ends its peers' wait at once: the hang is a rank still alive)."""
    for _ in range(3):
        returncode, error = _two_ranks(_STUCK_PEER, str(tmp_path / "spmv-x.csv"), port=_free_port())
        if "address already in use" not in error.lower():
            break
    assert returncode != 0
    assert "SeerError: rank 0 of 2: not every rank checked the table within 2 s" in error
    assert "Rank 1 failed to pass monitoredBarrier" in error



def test_the_ranks_wait_for_the_slowest_shard_past_gloos_default_30_minutes(monkeypatch):
    """Shards finishing more than 30 minutes apart (no deadline, larger inputs on one rank) ran out
    gloo's default timeout in the ranks' last wait, and the merge was lost (found by a review)."""
    import datetime as dt

    made = []
    for name, value in (("WORLD_SIZE", "2"), ("RANK", "1"), ("LOCAL_RANK", "1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda *args, **kwargs: made.append((args, kwargs)))
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    assert profiling._rank_and_world() == (1, 2)
    assert made == [(("gloo",), {"timeout": profiling.SHARD_TIMEOUT})]
    assert profiling.SHARD_TIMEOUT >= dt.timedelta(hours=12) > profiling.CHECK_TIMEOUT

def test_new_columns_widen_the_table(tmp_path):
    out = tmp_path / "t.csv"
    profiling._append_row(out, {"id": "a", "time_ms:v": 1.0})
    profiling._append_row(out, {"id": "b", "time_ms:v": 2.0, "baseline_ms:lib": 3.0})
    frame = pd.read_csv(out)
    assert list(frame["id"]) == ["a", "b"] and frame["baseline_ms:lib"].isna().tolist() == [True, False]


def test_a_rank_resumes_past_the_merged_table(tmp_path, suitesparse_dir, host_timer, few_variants, monkeypatch):
    """A later torchrun run skips inputs merged by an earlier one (its shard files are gone by then)."""
    cases = _cases(suitesparse_dir, 4)
    out = tmp_path / "spmv-x.csv"
    profiling.profile("spmv", cases[:2], out, command="first", progress=False)
    _as_rank(monkeypatch, 1, 2)
    profiling.profile("spmv", cases, out, command="second", progress=False)
    shard = pd.read_csv(tmp_path / "spmv-x.rank1.csv")
    assert shard["id"].tolist() == [cases[3].id]  # rank 1's shard is cases 1 and 3; case 1 was merged


def test_each_candidate_keeps_its_least_median_over_interleaved_rounds(monkeypatch):
    """A stall inflates whatever is timed while it lasts; rounds interleave the candidates, so a
    stall costs each at most one of its rounds, and the least median is kept."""
    order = []
    stalled = {("a", 1), ("b", 0), ("b", 2)}  # (candidate, round) timed during a host stall

    def fake_time_ms(fn, rep_ms):
        name = fn()
        rounds_done = order.count(name)
        order.append(name)
        assert rep_ms == pytest.approx(25 / 3)
        return (100.0 if (name, rounds_done) in stalled else 1.0) + rounds_done

    monkeypatch.setattr(profiling, "time_ms", fake_time_ms)
    times = profiling._least_of_rounds({"time_ms:a": lambda: "a", "time_ms:b": lambda: "b"})
    assert order == ["a", "b"] * 3
    assert times == {"time_ms:a": 1.0, "time_ms:b": 2.0}


def test_measured_within_budget_stops_between_inputs(capsys):
    cases = [profiling.Case(f"m{i}", "g", "synthetic", load=lambda i=i: i, build=lambda loaded: loaded) for i in range(4)]
    rows = profiling.measured_within_budget(cases, lambda case, loaded: {"id": case.id, "loaded": loaded}, 60,
                                            lambda row: f"loaded {row['loaded']}")
    assert [r["loaded"] for r in rows] == [0, 1, 2, 3] and "m3: loaded 3" in capsys.readouterr().out
    assert profiling.measured_within_budget(cases, lambda case, loaded: {}, -1, str) == []
    assert "budget reached: 4 matrices left" in capsys.readouterr().out


def test_measured_within_budget_skips_unreadable_inputs(capsys):
    """A SeerError from an input's load skips that input, saying why; an error while measuring,
    SeerError or not, stops the run (seer failing on a readable input is a finding)."""
    def load(i):
        if i == 1:
            raise SeerError("complex values are not supported")
        return i

    cases = [profiling.Case(f"m{i}", "g", "real", load=lambda i=i: load(i), build=None) for i in range(3)]
    rows = profiling.measured_within_budget(cases, lambda case, loaded: {"loaded": loaded}, 60, str)
    assert [r["loaded"] for r in rows] == [0, 2]
    assert "skipped m1: complex values are not supported" in capsys.readouterr().out

    for error in (ValueError("a bug"), SeerError("seer refused a readable input")):
        def broken(case, loaded, error=error):
            raise error

        with pytest.raises(type(error), match=str(error)):
            profiling.measured_within_budget(cases[:1], broken, 60, str)


def test_measured_within_budget_measures_while_nothing_loads():
    import threading
    import time

    loading, lock = [0], threading.Lock()

    def slow_load(value):
        with lock:
            loading[0] += 1
        time.sleep(0.05)
        with lock:
            loading[0] -= 1
        return value

    cases = [profiling.Case(f"m{i}", "g", "synthetic", load=lambda i=i: slow_load(i), build=None) for i in range(5)]
    rows = profiling.measured_within_budget(cases, lambda case, loaded: {"loaded": loaded, "loading": loading[0]},
                                            60, str)
    assert [r["loaded"] for r in rows] == list(range(5)) and all(r["loading"] == 0 for r in rows)


def test_skewed_round_robin_alternates_families():
    from seer.datasets.cases import skewed_round_robin

    def case(case_id, size):
        return profiling.Case(case_id, "g", "synthetic", load=None, build=None, extra={"size": size})

    cases = [case("synthetic/rmat/a", 1), case("synthetic/rmat/b", 9), case("synthetic/banded/c", 5),
             case("derived/x/copies2-permute0", 3), case("derived/x/copies2-permute1", 4),
             case("synthetic/lognormal_rows/d", 2)]
    assert [c.id for c in skewed_round_robin(cases)] == [
        "synthetic/rmat/a", "synthetic/lognormal_rows/d", "derived/x/copies2-permute1", "synthetic/rmat/b"]
    assert [c.id for c in skewed_round_robin(cases, largest_first=True)][0] == "synthetic/rmat/b"


def test_synchronised_us_returns_the_result_and_a_duration():
    import time

    result, us = profiling.synchronised_us(lambda: time.sleep(0.002) or "done")
    assert result == "done" and 2000 <= us < 1e6


def test_prefetched_loads_in_order_and_settles_before_host_timings():
    import threading
    import time
    from contextlib import closing
    from types import SimpleNamespace

    loading = threading.Event()

    def slow(value):
        loading.set()
        time.sleep(0.2)
        return value

    cases = [SimpleNamespace(load=lambda v=v: slow(v)) for v in range(4)]
    with closing(profiling._Prefetched(cases, ahead=2)) as loads:
        assert next(loads).result() == 0
        loading.clear()
        future = next(loads)  # hands out case 1 and starts loading case 3
        assert loading.wait(1)
        loads.settle()
        assert future.done() and all(f is None or f.done() for f in loads._pending)
        assert [future.result(), *(f.result() for f in loads)] == [1, 2, 3]


@pytest.mark.parametrize("name, tag", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"), ("NVIDIA H100 PCIe", "h100_pcie"),
    ("NVIDIA H100 NVL", "h100_nvl"), ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA A100 80GB PCIe", "a100_pcie"),
    ("NVIDIA L40S", "l40s"), ("NVIDIA L40", "l40"), ("NVIDIA GH200 480GB", "nvidia_gh200_480gb")])
def test_a_gpu_s_tag_keeps_its_form(name, tag):
    """Result files are named by the tag: the PCIe and NVL H100s were all "h100", their results written over
    the SXM one's (a review), and an A100 was tagged two ways by its form."""
    assert profiling.device_tag(name) == tag


def test_no_rank_returns_before_rank_0_has_merged_the_shards(tmp_path, suitesparse_dir, host_timer, few_variants,
                                                             monkeypatch):
    """Every rank but 0 left as soon as the skips were gathered, found no table (rank 0 merges it) and exited
    2 saying nothing was profiled: torchrun then stopped the campaign, rank 0 in its merge (a review)."""
    out, cases = tmp_path / "spmv-x.csv", _cases(suitesparse_dir, 3)
    for rank, todo, merged in ((0, [], False), (1, cases, False), (0, cases, True)):  # rank 0's metadata first
        _as_rank(monkeypatch, rank, 2)
        waited = []
        monkeypatch.setattr(torch.distributed, "barrier", lambda *args, **kwargs: waited.append(out.exists()))
        profiling.profile("spmv", todo, out, command=f"rank {rank} of 2", progress=False)
        assert waited == [merged], rank  # every rank waits, rank 0 once the table is merged
    assert sorted(read_table(out).ids) == sorted(c.id for c in cases)


def test_a_torchrun_run_interrupted_on_a_resumed_table_is_recorded_and_not_claimed_by_the_next(
        tmp_path, suitesparse_dir, host_timer, few_variants, monkeypatch):
    """Its command never reached the metadata, and the next run, merging its shard, counted those rows as its
    own (a review)."""
    cases = _cases(suitesparse_dir, 6)  # rank 0 of 2 takes the 1st (done), 3rd and 5th
    out = tmp_path / "spmv-x.csv"
    profiling.profile("spmv", cases[:1], out, command="first", progress=False)
    _as_rank(monkeypatch, 0, 2)
    real_profile_case, calls = profiling.profile_case, []

    def interrupted_at_the_second(op, case, **kwargs):
        calls.append(case.id)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_profile_case(op, case, **kwargs)

    monkeypatch.setattr(profiling, "profile_case", interrupted_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        profiling.profile("spmv", cases, out, command="torchrun, interrupted", progress=False)
    assert json.loads(profiling.meta_path(out).read_text())["commands"] == ["first", "torchrun, interrupted"]
    monkeypatch.setattr(profiling, "profile_case", real_profile_case)
    monkeypatch.setattr(profiling, "_rank_and_world", lambda: (0, 1))
    profiling.profile("spmv", cases[:1], out, command="nothing new", progress=False)
    meta = json.loads(profiling.meta_path(out).read_text())
    assert meta["commands"] == ["first", "torchrun, interrupted"] and len(read_table(out).ids) == 2


def test_a_new_tables_first_metadata_keeps_the_skips_an_earlier_run_found(tmp_path, suitesparse_dir, host_timer,
                                                                         few_variants, monkeypatch):
    """The metadata a new table starts with said "skipped": {}: a run killed before its end (a time limit's
    SIGTERM) left it so, and the next run tried the skipped inputs again (a review)."""
    cases = _cases(suitesparse_dir, 3)
    out = tmp_path / "spmv-x.csv"
    real_profile_case, seen = profiling.profile_case, []

    def unsupported_first(op, case, **kwargs):
        if case.id == cases[0].id:
            raise SeerError("as if unsupported")
        seen.append(json.loads(profiling.meta_path(out).read_text())["skipped"])  # what a kill here would leave
        return real_profile_case(op, case, **kwargs)

    monkeypatch.setattr(profiling, "profile_case", unsupported_first)
    profiling.profile("spmv", cases[:1], out, command="skips the only input: no table", progress=False)
    assert not out.exists()
    profiling.profile("spmv", cases, out, command="a new table", progress=False)
    assert seen == [{cases[0].id: "as if unsupported"}] * 2
