"""benchmarks/spmv_flush.py on the CPU: every timed variant computes y = A x, and the summary reads
the flushes' differences the right way round."""
import pytest
from conftest import assert_runs_match, load_benchmark, random_problem


@pytest.fixture(scope="module")
def flush():
    return load_benchmark("spmv_flush")


def test_every_run_matches_scipy(flush):
    csr, x, expected = random_problem(150, 120, 0.2, 12)
    runs = flush.runs_of(csr, x)
    assert list(runs) == list(flush.VARIANTS)
    for _ in range(2):  # a bound plan serves again
        assert_runs_match(runs, expected)


def _row(name: str, written_us: float, read_us: float, nnz: int = 10_000_000, rows: int = 1_000_000) -> dict:
    times = {f: {v: ms * 1e-3 for v in (*load_benchmark("spmv_flush").VARIANTS, "copy of its bytes")}
             for f, ms in (("written", written_us), ("read", read_us), ("written+read", read_us))}
    times["written"]["scalar_r128"] = written_us * 0.9e-3  # the best under each flush
    times["read"]["scalar_r128"] = times["written+read"]["scalar_r128"] = read_us * 0.9e-3
    return {"id": name, "rows": rows, "cols": rows, "nnz": nnz, "time_ms": times}


def test_the_summary_reads_written_less_read(flush):
    env = {"device": {"name": "Test GPU"}, "versions": {"torch": "t", "triton": "3.6"}, "date": "2026-11-29"}
    rows = [_row("synthetic/banded/a", 100.0, 90.0), _row("synthetic/stencil_2d/b", 50.0, 40.0)]
    text = flush.markdown({**env, "command": "python benchmarks/spmv_flush.py", "matrices": rows,
                           "copy_ceiling_gbps": {"written": 4000.0, "read": 4100.0, "written+read": 4100.0}})
    assert "| synthetic/banded/a | 10.0 | scalar_r128 | 90.0 | 81.0 | 81.0 | 9.0 |" in text
    assert "| vector_g4 | 1.179 | 10.0 | 1.000 |" in text  # (100/90 * 50/40) ** 0.5; the median of 10 and 10 us
    bytes_a = 8 * 10_000_000 + 4 * 1_000_001 + 8 * 1_000_000
    assert f"{bytes_a / 90e-6 / 1e9 / 4000:.0%} / {bytes_a / 81e-6 / 1e9 / 4100:.0%}" in text
