"""benchmarks/host_path_ab.py's summary: the dispatch layer's own cost per side, median over rounds."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import host_path_ab  # noqa: E402


def _round(folder: Path, dispatch_out: float, bound_call_out: float, arrays: bool = False) -> None:
    folder.mkdir(parents=True)
    host_us = {"dispatch": dispatch_out + 1, "dispatch_out": dispatch_out, "bound_call": bound_call_out + 0.5,
               "bound_call_out": bound_call_out}
    if arrays:
        host_us |= {"dispatch_arrays": dispatch_out + 3, "dispatch_arrays_out": dispatch_out + 2}
    data = {"environment": {"device": {"name": "Test GPU"}, "date": "2026-11-29", "versions": {"torch": "t",
            "triton": "3.6"}}, "command": "python benchmarks/host_path.py", "matrix": "HB/can_838",
            "variant": "vector_g16", "rounds": 5, "calls": 2000, "host_us": host_us}
    (folder / "host-path-test.json").write_text(json.dumps(data))


def test_the_summary_takes_each_sides_median_of_the_layer(tmp_path):
    for name, out, bound in (("before1", 11.0, 9.0), ("before2", 10.5, 9.0), ("before3", 12.0, 9.0),
                             ("after1", 11.0, 8.0), ("after2", 13.0, 8.0), ("after3", 12.0, 8.0)):
        _round(tmp_path / name, out, bound)
    text = host_path_ab.summarise(tmp_path)
    assert "| before | 2.00 | 2.50 |" in text and "| after | 4.00 | 4.50 |" in text
    assert (tmp_path / "README.md").read_text() == text


def test_the_separate_arrays_layers_are_summarised_where_every_round_has_them(tmp_path):
    for name, out, bound in (("before1", 11.0, 9.0), ("after1", 12.0, 9.0)):
        _round(tmp_path / name, out, bound, arrays=True)
    text = host_path_ab.summarise(tmp_path)
    assert "| side | dispatch_out - bound_call_out | dispatch - bound_call | dispatch_arrays_out - bound_call_out | " \
           "dispatch_arrays - bound_call |" in text
    assert "| before | 2.00 | 2.50 | 4.00 | 4.50 |" in text and "| after | 3.00 | 3.50 | 5.00 | 5.50 |" in text


def _gemm_round(folder: Path, dispatch: float, bound: float, matmul: float) -> None:
    folder.mkdir(parents=True)
    forms = {"torch_matmul": matmul, "run": bound + 1, "bound": bound, "dispatch": dispatch,
             "matmul_new": matmul + 2, "dispatch_new": dispatch + 3}
    results = {"torch_matmul": {"shape": [128, 128, 128], "least_us": forms},
               "tile_64x64x64_w4s4g8": {"shape": [128, 128, 128], "least_us": forms | {"triton_path": 26.0}}}
    data = {"environment": {"device": {"name": "Test GPU"}, "date": "2026-12-01", "versions": {"torch": "t",
            "triton": "3.6"}}, "command": "python benchmarks/gemm_host.py", "rounds": 9, "calls": 2000,
            "results": results}
    (folder / "gemm-host-test.json").write_text(json.dumps(data))


def test_the_gemm_summary_takes_each_sides_median_per_variant(tmp_path):
    for name, dispatch, bound, matmul in (("before1", 17.0, 13.0, 11.0), ("before2", 18.0, 13.0, 11.5),
                                          ("before3", 16.0, 12.0, 11.0), ("after1", 15.0, 12.0, 11.0),
                                          ("after2", 14.0, 12.5, 11.0), ("after3", 15.5, 12.0, 11.2)):
        _gemm_round(tmp_path / name, dispatch, bound, matmul)
    text = host_path_ab.summarise(tmp_path)
    assert text.count("| side | dispatch - bound | bound - torch_matmul | dispatch_new - matmul_new |") == 2
    # before: dispatch - bound 4, 5, 4 -> 4; bound - matmul 2, 1.5, 1 -> 1.5; new: dispatch - matmul + 1: 7, 7.5, 6 -> 7
    assert text.count("| before | 4.00 | 1.50 | 7.00 |") == 2
    assert text.count("| after | 3.00 | 1.00 | 5.00 |") == 2  # 3, 1.5, 3.5; 1, 1.5, 0.8; 5, 4, 5.3
    assert "## tile_64x64x64_w4s4g8 (128x128x128)" in text and "26.00" in text
    assert (tmp_path / "README.md").read_text() == text
