"""benchmarks/gemm_first_call_topk.py on a made-up table whose answer is known: the ranking comes from
the training folds only, a first call pays every timed tile and cuBLAS once, a failed tile is skipped."""
import json

import numpy as np
import pandas as pd
import pytest

from conftest import load_benchmark

topk = load_benchmark("gemm_first_call_topk")


def table(rng, groups=6, per_group=4) -> pd.DataFrame:
    """Tile ``fast`` runs in half cuBLAS's time everywhere, ``slow`` in twice it; ``broken`` fails on one shape."""
    cublas = rng.uniform(0.01, 0.2, groups * per_group)
    frame = pd.DataFrame({"id": [f"g{i // per_group}/{i}" for i in range(len(cublas))],
                          "group": [f"fam{i // per_group}/x" for i in range(len(cublas))],
                          "m": rng.integers(1, 128, len(cublas)), "dtype": 1,
                          "time_ms:torch_matmul": cublas, "time_ms:slow": 2 * cublas,
                          "time_ms:broken": 3 * cublas, "time_ms:fast": 0.5 * cublas})
    frame.loc[0, "time_ms:broken"] = np.nan
    return frame


def test_the_top_tile_is_learned_and_its_first_call_pays_every_timed_run():
    frame = table(np.random.default_rng(3))
    kept, first = topk.replay(frame, top=1)
    np.testing.assert_allclose(kept, frame["time_ms:fast"])
    np.testing.assert_allclose(first, frame["time_ms:fast"] + frame["time_ms:torch_matmul"])
    kept, first = topk.replay(frame, top=3)  # the broken tile's NaN is skipped, not summed as NaN
    np.testing.assert_allclose(kept, frame["time_ms:fast"])
    expected = frame[["time_ms:fast", "time_ms:slow", "time_ms:broken", "time_ms:torch_matmul"]].sum(axis=1, skipna=True)
    np.testing.assert_allclose(first, expected)


def test_a_held_out_family_is_ranked_by_the_other_families_alone():
    """Tile ``x`` wins family 0 and is a little slow elsewhere; ``y`` wins elsewhere and is dire on
    family 0. Ranked with family 0 in, ``x`` comes first; held out, family 0 gets ``y`` and so keeps
    cuBLAS, while the others get ``x`` where family 0 was in their training folds (all but the one
    family that shares family 0's fold, which gets ``y`` as family 0 does)."""
    frame = table(np.random.default_rng(6)).drop(columns=["time_ms:slow", "time_ms:broken", "time_ms:fast"])
    cublas = frame["time_ms:torch_matmul"]
    home = frame["group"] == "fam0/x"
    frame["time_ms:x"] = np.where(home, 0.5, 0.6) * cublas
    frame["time_ms:y"] = np.where(home, 10.0, 0.5) * cublas
    assert topk.tiles_of(frame)[topk.ranking(frame[topk.tiles_of(frame)].to_numpy(), cublas.to_numpy())[0]] == "time_ms:x"
    kept, _ = topk.replay(frame, top=1)
    np.testing.assert_allclose(kept[home], cublas[home])
    elsewhere = np.round((kept / cublas)[~home], 6)
    assert set(elsewhere) == {0.5, 0.6}
    assert (elsewhere == 0.6).sum() == 4 * 4   # four families of four shapes took x


def test_speedups_over_calls_and_the_ceiling():
    study = topk.study(table(np.random.default_rng(4)))
    assert study["oracle"] == pytest.approx(2.0)
    top1 = study["tops"][0]
    assert top1["steady"] == pytest.approx(2.0)
    assert top1["calls"][1] == pytest.approx(1 / 1.5)        # fast + cuBLAS on the first call
    assert top1["calls"][1000] == pytest.approx(1000 / (1.5 + 999 * 0.5))


def test_the_command_writes_its_report_and_refuses_other_tables(tmp_path):
    source = tmp_path / "gemm-h100-test" / "gemm.csv"
    source.parent.mkdir()
    table(np.random.default_rng(5)).to_csv(source, index=False)
    source.with_suffix(".meta.json").write_text(json.dumps(
        {"device": {"name": "NVIDIA H100 80GB HBM3"}, "date": "today", "versions": {"torch": "x"}}))
    assert topk.main([str(source), "--out", str(tmp_path)]) == 0
    assert "| 1 | 2.000x |" in (tmp_path / "gemm-first-call-topk-h100.md").read_text()
    pd.DataFrame({"id": ["a"], "nnz": [3]}).to_csv(tmp_path / "spmv.csv", index=False)
    with pytest.raises(SystemExit):
        topk.main([str(tmp_path / "spmv.csv")])
