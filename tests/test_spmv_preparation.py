"""benchmarks/spmv_preparation.py on the CPU: it rewrites only the columns it re-measures, resumes
past rows already done, and drops its marker once every row is."""
import json
import shutil
import sys

import pandas as pd
import torch
import pytest
from conftest import load_benchmark

from seer import profiling
from seer.datasets.cases import spmv_cases
from seer.registry import get_op
from seer.table import meta_path, read_frame

STALE_MS = 1e6  # no pass over a small matrix takes a thousand seconds


def _kept_variants(monkeypatch, kept):
    """Profiling and the script see only ``kept``, each timed by two wall-clock runs."""
    variants = get_op("spmv").kernels.VARIANTS
    monkeypatch.setattr(get_op("spmv").kernels, "VARIANTS", {n: variants[n] for n in kept})
    monkeypatch.setattr(profiling, "time_ms", lambda fn, **_: profiling._median_wall_ms(fn, repeats=2))


def _profiled_once(folder, suitesparse_dir, kept, count, **options):
    """The first ``count`` small matrices profiled with ``kept`` into ``folder``: once a module (tens
    of seconds under the interpreter), each test working on its own copy."""
    with pytest.MonkeyPatch.context() as patch:
        _kept_variants(patch, kept)
        out = folder / "spmv-test.csv"
        cases = spmv_cases([suitesparse_dir], max_nnz=2000, device="cpu")[:count]
        profiling.profile("spmv", cases, out, command="test", progress=False, **options)
    return out


def _copy(profiled, tmp_path):
    out = tmp_path / profiled.name
    shutil.copy(profiled, out)
    shutil.copy(meta_path(profiled), meta_path(out))
    return out


TABLE_VARIANTS = ("scalar_r128", "merge_c512")


@pytest.fixture(scope="module")
def profiled_table(tmp_path_factory, suitesparse_dir):
    out = _profiled_once(tmp_path_factory.mktemp("table"), suitesparse_dir, TABLE_VARIANTS, 3)
    frame = pd.read_csv(out)
    frame["gather_ms"] = STALE_MS
    frame.to_csv(out, index=False)
    return out


@pytest.fixture
def table(profiled_table, tmp_path, monkeypatch):
    _kept_variants(monkeypatch, TABLE_VARIANTS)
    return _copy(profiled_table, tmp_path)


def _run(script, table, suitesparse_dir, monkeypatch, *extra):
    monkeypatch.setattr(script, "spmv_cases", lambda folders, **_: spmv_cases(folders, max_nnz=2000, device="cpu"))
    monkeypatch.setattr(sys, "argv", ["spmv_preparation.py", str(table), "--matrices", str(suitesparse_dir), *extra])
    assert script.main() == 0
    return pd.read_csv(table)


def test_gather_is_remeasured_and_nothing_else(table, suitesparse_dir, monkeypatch):
    script = load_benchmark("spmv_preparation")
    before = read_frame(table)
    after = _run(script, table, suitesparse_dir, monkeypatch, "--gather")
    assert ((after["gather_ms"] > 0) & (after["gather_ms"] < STALE_MS)).all()
    assert "remeasured_gather" not in after  # every row done: the marker is dropped
    after = read_frame(table)  # to the last bit: trees break ties on them
    pd.testing.assert_frame_equal(after.drop(columns="gather_ms"), before.drop(columns="gather_ms"), check_exact=True)


def test_rows_already_remeasured_are_left_alone(table, suitesparse_dir, monkeypatch):
    script = load_benchmark("spmv_preparation")
    frame = pd.read_csv(table)
    frame["remeasured_gather"] = [True, False, False]
    frame.to_csv(table, index=False)
    after = _run(script, table, suitesparse_dir, monkeypatch, "--gather")
    assert after["gather_ms"].tolist()[0] == STALE_MS and (after["gather_ms"][1:] < STALE_MS).all()


def test_a_run_past_its_deadline_keeps_the_marker_for_the_next(table, suitesparse_dir, monkeypatch):
    script = load_benchmark("spmv_preparation")
    after = _run(script, table, suitesparse_dir, monkeypatch, "--gather", "--deadline", "-1")
    assert (after["gather_ms"] == STALE_MS).all() and not after["remeasured_gather"].any()
    after = _run(script, table, suitesparse_dir, monkeypatch, "--gather")
    assert (after["gather_ms"] < STALE_MS).all() and "remeasured_gather" not in after


def test_gather_adds_a_feature_column_the_table_lacks(table, suitesparse_dir, monkeypatch):
    # A table profiled before a gathered feature existed gets its column, as profiling writes it.
    script = load_benchmark("spmv_preparation")
    profiled = read_frame(table)
    profiled.drop(columns="shifted_row_frac").to_csv(table, index=False)
    _run(script, table, suitesparse_dir, monkeypatch, "--gather")
    after = read_frame(table)
    assert after["shifted_row_frac"].tolist() == profiled["shifted_row_frac"].tolist()
    assert profiled["shifted_row_frac"].notna().all()


def test_only_the_named_variants_preparation_is_remeasured(table, suitesparse_dir, monkeypatch):
    """--only: one variant's prepare_ms measured again (its copy changed), every other cell kept."""
    script = load_benchmark("spmv_preparation")
    frame = read_frame(table)
    frame[["prepare_ms:scalar_r128", "prepare_ms:merge_c512"]] = STALE_MS
    frame.to_csv(table, index=False)
    before = read_frame(table)
    after = _run(script, table, suitesparse_dir, monkeypatch, "--only", "merge_c512")
    assert ((after["prepare_ms:merge_c512"] > 0) & (after["prepare_ms:merge_c512"] < STALE_MS)).all()
    assert "remeasured_preparation_merge_c512" not in after
    kept = before.drop(columns="prepare_ms:merge_c512")
    pd.testing.assert_frame_equal(read_frame(table).drop(columns="prepare_ms:merge_c512"), kept, check_exact=True)
    assert json.loads(meta_path(table).read_text())["commands"][-1].endswith("--only merge_c512")


def test_a_table_measured_on_another_gpu_is_refused(table, suitesparse_dir, monkeypatch, capsys):
    """Run on an H200 against the H100's table, the script wrote the H200's times into it."""
    script = load_benchmark("spmv_preparation")
    meta = json.loads(meta_path(table).read_text())
    meta["device"] = {**meta["device"], "name": "NVIDIA H100 80GB HBM3"}
    meta_path(table).write_text(json.dumps(meta))
    before = table.read_bytes()
    monkeypatch.setattr(sys, "argv", ["spmv_preparation.py", str(table), "--matrices", str(suitesparse_dir), "--gather"])
    with pytest.raises(SystemExit):
        script.main()
    assert "was measured on 'NVIDIA H100 80GB HBM3', this run is on 'cpu'" in capsys.readouterr().err
    assert table.read_bytes() == before


def test_each_run_is_recorded_with_its_date_and_versions(table, suitesparse_dir, monkeypatch):
    script = load_benchmark("spmv_preparation")
    runs = json.loads(meta_path(table).read_text())["runs"]
    _run(script, table, suitesparse_dir, monkeypatch, "--gather")
    after = json.loads(meta_path(table).read_text())["runs"]
    assert after[:-1] == runs and after[-1]["command"].endswith("--gather")
    assert after[-1]["versions"]["torch"] == torch.__version__ and after[-1]["date"]


@pytest.mark.parametrize("extra,message", [(["--only", "no_such"], "no spmv variant no_such"),
                                           (["--only", "merge_c512", "--gather"], "without --gather")])
def test_only_refuses_unknown_variants_and_other_measures(table, suitesparse_dir, monkeypatch, capsys, extra, message):
    script = load_benchmark("spmv_preparation")
    monkeypatch.setattr(sys, "argv", ["spmv_preparation.py", str(table), "--matrices", str(suitesparse_dir), *extra])
    with pytest.raises(SystemExit):
        script.main()
    assert message in capsys.readouterr().err


ANCHORED_VARIANTS = ("scalar_r128", "vector_g4", "diagonal_r128", "diagonal_major_r512", "cusparse_prepared")


@pytest.fixture(scope="module")
def profiled_anchored_table(tmp_path_factory, suitesparse_dir):
    return _profiled_once(tmp_path_factory.mktemp("anchored"), suitesparse_dir, ANCHORED_VARIANTS, 2,
                          call_overhead_below=profiling.SPMV_CALL_OVERHEAD_BELOW)


@pytest.fixture
def anchored_table(profiled_anchored_table, tmp_path, monkeypatch):
    """A table of two small matrices profiled with diagonal_major_r512 and both anchors, call times
    recorded (as ``seer profile`` records them under its size bound)."""
    _kept_variants(monkeypatch, ANCHORED_VARIANTS)
    return _copy(profiled_anchored_table, tmp_path)


def test_an_added_variant_gets_its_columns_where_profiling_puts_them(anchored_table, suitesparse_dir, monkeypatch):
    """A table profiled before a variant existed gets its time, call and preparation columns,
    measured and checked as profiling does, in profiling's column order; every other cell stays to
    the bit and the metadata records the anchors' ratios to the table."""
    script, out = load_benchmark("spmv_preparation"), anchored_table
    profiled = read_frame(out)
    added = [c for c in profiled.columns if c.endswith(":diagonal_major_r512")]
    assert len(added) == 3
    profiled.drop(columns=added).to_csv(out, index=False)
    _run(script, out, suitesparse_dir, monkeypatch, "--add-variant", "diagonal_major_r512")
    after = read_frame(out)
    assert list(after.columns) == list(profiled.columns)
    assert (after[added] > 0).all().all()
    pd.testing.assert_frame_equal(after.drop(columns=added), profiled.drop(columns=added), check_exact=True)
    meta = json.loads(meta_path(out).read_text())
    assert meta["added_variants"][0]["variant"] == "diagonal_major_r512"
    assert set(meta["added_variants"][0]["anchor_ratio_median"]) == set(script.ANCHORS)


def test_two_variants_added_in_one_pass(anchored_table, suitesparse_dir, monkeypatch):
    """Two variants the table lacks, given in either order, get their columns in one pass (each input
    built once), in profiling's column order, one metadata entry each with the same anchors; a
    table that has one of them already is refused unless both are measured again."""
    script, out = load_benchmark("spmv_preparation"), anchored_table
    profiled = read_frame(out)
    added = [c for c in profiled.columns if c.endswith((":vector_g4", ":diagonal_major_r512"))]
    assert len(added) == 6
    profiled.drop(columns=added).to_csv(out, index=False)
    _run(script, out, suitesparse_dir, monkeypatch, "--add-variant", "diagonal_major_r512", "vector_g4")
    after = read_frame(out)
    assert list(after.columns) == list(profiled.columns)
    assert (after[added] > 0).all().all()
    pd.testing.assert_frame_equal(after.drop(columns=added), profiled.drop(columns=added), check_exact=True)
    entries = json.loads(meta_path(out).read_text())["added_variants"]
    assert [e["variant"] for e in entries] == ["diagonal_major_r512", "vector_g4"]
    assert entries[0]["anchor_ratio_median"] == entries[1]["anchor_ratio_median"]

    after.drop(columns=[c for c in added if c.endswith(":vector_g4")]).to_csv(out, index=False)
    with pytest.raises(SystemExit):
        _run(script, out, suitesparse_dir, monkeypatch, "--add-variant", "diagonal_major_r512", "vector_g4")


def test_kernel_time_only_leaves_the_host_columns_as_they_were(anchored_table, suitesparse_dir, monkeypatch):
    """``--again --kernel-time-only`` re-measures a variant's kernel time and nothing else: its
    call and preparation cells keep their bits (here planted, so a re-measure would change them)."""
    script, out = load_benchmark("spmv_preparation"), anchored_table
    planted = read_frame(out)
    host = ["call_us:diagonal_major_r512", "prepare_ms:diagonal_major_r512"]
    planted[host] = STALE_MS
    planted["time_ms:diagonal_major_r512"] = STALE_MS
    planted.to_csv(out, index=False)
    _run(script, out, suitesparse_dir, monkeypatch, "--add-variant", "diagonal_major_r512", "--again",
         "--kernel-time-only")
    after = read_frame(out)
    assert (after["time_ms:diagonal_major_r512"] < STALE_MS).all()
    pd.testing.assert_frame_equal(after.drop(columns="time_ms:diagonal_major_r512"),
                                  planted.drop(columns="time_ms:diagonal_major_r512"), check_exact=True)


def test_kernel_time_only_needs_a_variant_measured_again(table, suitesparse_dir, monkeypatch):
    script = load_benchmark("spmv_preparation")
    monkeypatch.setattr(sys, "argv", ["spmv_preparation.py", str(table), "--matrices", str(suitesparse_dir),
                                      "--add-variant", "scalar_r128", "--kernel-time-only"])
    with pytest.raises(SystemExit):
        script.main()


def test_under_torchrun_each_rank_measures_a_shard_and_rank_0_writes_them_all(table, suitesparse_dir, monkeypatch):
    """Two ranks: rank 1 measures every second input left and writes nothing; rank 0 measures the
    others and writes both shards' cells into the table, whose command says how it was started."""
    script = load_benchmark("spmv_preparation")
    shards = {}

    def gathered_on(rank):
        def gathered(measured, world):
            shards[rank] = measured
            return {case_id: values for r in sorted(shards) for case_id, values in shards[r].items()} if rank == 0 else {}
        return gathered

    before = read_frame(table)
    monkeypatch.setattr(script, "_rank_and_world", lambda: (1, 2))
    monkeypatch.setattr(script, "gathered", gathered_on(1))
    _run(script, table, suitesparse_dir, monkeypatch, "--gather")
    pd.testing.assert_frame_equal(read_frame(table), before, check_exact=True)  # rank 1 writes nothing
    monkeypatch.setattr(script, "_rank_and_world", lambda: (0, 2))
    monkeypatch.setattr(script, "gathered", gathered_on(0))
    after = _run(script, table, suitesparse_dir, monkeypatch, "--gather")
    assert [sorted(shards[r]) for r in (0, 1)] == [sorted(before["id"][0::2]), sorted(before["id"][1::2])]
    assert (after["gather_ms"] < STALE_MS).all() and "remeasured_gather" not in after
    assert json.loads(meta_path(table).read_text())["commands"][-1].startswith("torchrun --nproc-per-node 2 ")


def _gather_two_shards(rank, init_file, out):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        merged = load_benchmark("spmv_preparation").gathered({f"m{rank}": {"time_ms:v": rank + 0.5}}, 2)
        (out / f"rank{rank}.json").write_text(json.dumps(merged))
    finally:
        dist.destroy_process_group()


def test_gathered_brings_every_ranks_shard_to_rank_0_through_a_real_process_group(tmp_path):
    import torch.multiprocessing as mp
    mp.spawn(_gather_two_shards, args=(tmp_path / "init", tmp_path), nprocs=2)
    assert json.loads((tmp_path / "rank0.json").read_text()) == {"m0": {"time_ms:v": 0.5}, "m1": {"time_ms:v": 1.5}}
    assert json.loads((tmp_path / "rank1.json").read_text()) == {}
