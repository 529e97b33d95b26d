"""benchmarks/spmv_ncu.py on the CPU: an ncu text report parses into per-launch metrics, and the
tables (per-nonzero counters, stall shares) come out of them."""
import pytest
from conftest import load_benchmark

REPORT = """nnz 1000
  _merge_kernel (10, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    Duration                                      us        12.50
    DRAM Throughput                                %        40.20
    smsp__inst_executed.sum                                  4,000
    lts__t_sectors_srcunit_tex_op_read.sum                   1,100
    l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum            300
    l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum           2,400
    smsp__average_warps_active_per_issue_active.ratio                 20.0
    smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio    5.0
    smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio       4.0
    smsp__average_warps_issue_stalled_wait_per_issue_active.ratio               0.2
"""


@pytest.fixture(scope="module")
def ncu():
    return load_benchmark("spmv_ncu")


def test_a_report_parses_into_launch_metrics(ncu):
    (launch,) = ncu.parse(REPORT)
    assert launch["kernel"] == "_merge_kernel" and launch["nnz"] == 1000
    assert launch["Duration"] == pytest.approx(12.5) and launch["DRAM Throughput"] == pytest.approx(40.2)
    assert launch["smsp__inst_executed.sum"] == 4000
    assert launch[ncu.ISSUE] == pytest.approx(20.0)


def test_tables_per_nonzero_and_stall_shares(ncu):
    launches = [{**launch, "matrix": "m", "variant": "merge_c512"} for launch in ncu.parse(REPORT)]
    about = {"device": {"name": "GPU"}, "versions": {"torch": "2.x", "triton": "3.x", "cuda": "13"},
             "date": "2026-11-24", "ncu": "ncu 2025"}
    text = ncu.markdown(launches, about, "cmd")
    assert "torch 2.x, triton 3.x, CUDA 13, ncu 2025; measured 2026-11-24; `cmd`" in text
    assert "| m | merge_c512 | _merge_kernel | 1.100 | 0.300 | 2.400 | 4.000 |" in text
    # shares of the 20 cycles between issues; reasons under 3% everywhere (wait: 1%) left out
    header = next(line for line in text.splitlines() if line.startswith("| matrix | variant | kernel | cycles"))
    assert "long_scoreboard" in header and "mio_throttle" in header and "wait" not in header
    assert "| m | merge_c512 | _merge_kernel | 20.0 | 25% | 20% |" in text


def test_every_matrix_set_names_known_generators(ncu):
    from seer.datasets import generators

    for name, (generator, args) in ncu.ALL_MATRICES.items():
        assert callable(getattr(generators, generator)), name
    assert set(ncu.MATRICES) == {"irregular", "regular", "small"}
