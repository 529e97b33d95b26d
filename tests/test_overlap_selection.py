"""benchmarks/overlap.py's selection step on the committed two-H200 tables (CPU only)."""
import json

import pytest
from conftest import ROOT, load_benchmark

TAG = "h200x2"


@pytest.fixture(scope="module")
def overlap_benchmark():
    return load_benchmark("overlap")


def test_selection_scores_every_shape_held_out(overlap_benchmark, tmp_path):
    machine = json.loads((ROOT / "benchmarks" / "results" / f"overlap-{TAG}.json").read_text())
    machine = {k: machine[k] for k in ("bandwidth_gbps", "gemm_tflops", "machine_constants")}
    result = overlap_benchmark.select(ROOT / "datasets" / "profiles", tmp_path, TAG, machine, "test")
    written = json.loads((tmp_path / f"overlap-{TAG}.json").read_text())
    assert written["ops"].keys() == {"all_gather_gemm", "gemm_all_scatter", "gemm_reduce_scatter"}
    assert len(written["shapes"]) == sum(s["shapes"] for s in written["ops"].values()) > 0
    for shape in result["shapes"]:
        assert shape["seer_ms"] == shape["times_ms"][shape["seer_choice"]] >= shape["oracle_ms"]
        assert shape["oracle_ms"] == min(shape["times_ms"].values())
    for summary in result["ops"].values():
        assert 0 < summary["fraction_of_oracle"] <= 1
    assert "speedup_vs_torch_fused" in result["ops"]["all_gather_gemm"]
    shapes = written["ops"]["all_gather_gemm"]["shapes"]
    assert f"| all_gather_gemm | {shapes} |" in (tmp_path / f"overlap-{TAG}.md").read_text()


def test_results_name_the_runs_behind_averaged_tables(overlap_benchmark):
    """A table merged from two runs is credited to both (their commands and dates), not to the merge."""
    runs = [{"commands": ["torchrun a"], "date": "d1"}, {"commands": ["torchrun b"], "date": "d2"}]
    merged = overlap_benchmark._provenance({"command": "seer merge x y", "runs": runs}, "python select")
    assert "`torchrun a` (d1)" in merged and "`torchrun b` (d2)" in merged and "seer merge x" not in merged
    assert merged.endswith("Selection: `python select`.")
    same = overlap_benchmark._provenance({"command": "torchrun a"}, "torchrun a")
    assert same == "Timing run and selection (in the same command): `torchrun a`."
    assert "selection: `python select`" in overlap_benchmark._provenance({"command": "torchrun a"}, "python select")


def test_the_selection_scores_the_ops_asked_and_credits_their_runs(overlap_benchmark, tmp_path):
    """--ops X timed X alone, but the selection read every op's table of the tag (stale ones too) and
    credited them all to the alphabetically last table's run."""
    import shutil

    machine = json.loads((ROOT / "benchmarks" / "results" / f"overlap-{TAG}.json").read_text())
    machine = {k: machine[k] for k in ("bandwidth_gbps", "gemm_tflops", "machine_constants")}
    tables = tmp_path / "tables"
    tables.mkdir()
    for path in (ROOT / "datasets" / "profiles").glob(f"*-{TAG}.*"):
        shutil.copy(path, tables)
    meta_file = tables / f"gemm_reduce_scatter-{TAG}.meta.json"
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({**meta, "command": "torchrun later --ops gemm_reduce_scatter", "date": "d2"}))
    result = overlap_benchmark.select(tables, tmp_path, TAG, machine, "test", ["all_gather_gemm"])
    assert result["ops"].keys() == {"all_gather_gemm"}
    assert "later" not in json.dumps(result["environment"])
    every = overlap_benchmark.select(tables, tmp_path, TAG, machine, "test")
    commands = [run["commands"] for run in every["environment"]["runs"]]
    assert ["torchrun later --ops gemm_reduce_scatter"] in commands and len(commands) == 2
    assert "`torchrun later --ops gemm_reduce_scatter` (d2)" in (tmp_path / f"overlap-{TAG}.md").read_text()
    meta_file.write_text(json.dumps({**meta, "world_size": 4}))
    with pytest.raises(ValueError, match=f"gemm_reduce_scatter-{TAG}.csv was timed on 4 x"):
        overlap_benchmark.select(tables, tmp_path, TAG, machine, "test")


def test_the_chunk_sweep_passes_over_ops_left_out(overlap_benchmark):
    """--ops X --chunk-sweep raised IndexError on the first op that had no shapes."""
    assert overlap_benchmark.chunk_sweep(None, []) == []


def test_the_command_line_s_ops_reach_the_selection(overlap_benchmark, tmp_path):
    """--ops was read from sys.argv, not from the arguments parsed: main(argv) and --ops=X scored every op."""
    import shutil

    shutil.copy(ROOT / "benchmarks" / "results" / f"overlap-{TAG}.json", tmp_path)
    overlap_benchmark.main(["--select", TAG, "--out", str(tmp_path), "--tables", str(ROOT / "datasets" / "profiles"),
                            "--ops=all_gather_gemm"])
    assert json.loads((tmp_path / f"overlap-{TAG}.json").read_text())["ops"].keys() == {"all_gather_gemm"}
