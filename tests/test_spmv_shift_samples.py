"""benchmarks/spmv_shift_samples.py: which inputs it times (the GPU part runs on the device)."""
from conftest import load_benchmark


def test_picks_the_costliest_and_as_many_cheap_ones_of_their_size():
    script = load_benchmark("spmv_shift_samples")
    rows = [{"id": "small-cheap", "nnz": 10, "stats_us": -9.0}, {"id": "big-cheap", "nnz": 500, "stats_us": -1.0},
            {"id": "big-middle", "nnz": 600, "stats_us": 0.5}, {"id": "costly-a", "nnz": 400, "stats_us": 12.0},
            {"id": "costly-b", "nnz": 900, "stats_us": 20.0}]
    picked = script.picked_ids({"rows": rows}, top=2)
    assert picked == {"costly-a": "costly", "costly-b": "costly", "big-cheap": "cheap", "big-middle": "cheap"}
