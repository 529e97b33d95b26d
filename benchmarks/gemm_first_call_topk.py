"""Would timing a few GEMM tiles on a shape's first call beat cuBLAS on few-row shapes? (CPU)

    python benchmarks/gemm_first_call_topk.py benchmarks/results/gemm-h100-skinny/gemm-candidates.csv \
        --out benchmarks/results [--max-m 128]

Why: benchmarks/NOTES.md, GEMM "Odd K at scale". On odd K under 128 rows the per-shape best Triton
tile beats cuBLAS, but the wins are spread over many tiles and no feature tells which, so the
tree is one leaf (`torch_matmul`). What Inductor's autotuning would do instead: time a few tiles on
the first call of a shape and keep the fastest. This replays that on a measured table, held out:
for each of 5 folds grouped by the table's `group`, the training folds rank the tiles by their
geometric-mean slowdown against each shape's best (cuBLAS included); a held-out shape then runs its
top k tiles and cuBLAS once each and keeps the fastest. Its time over n calls is
(sum of those first runs + (n - 1) x the kept one's time) / n, kernel times only. Not charged: the
tiles' compiling, the synchronisations a real first call needs to read its timings, and the noise
of picking on one timing (the replay picks on the table's medians): every figure here is an upper
bound. Against cuBLAS alone (`torch_matmul`, the table's baseline).

Writes ``gemm-first-call-topk-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm import geomean  # noqa: E402
from seer.features.gemm import DTYPE_NAMES  # noqa: E402
from seer.profiling import device_tag, write_result  # noqa: E402

CUBLAS = "time_ms:torch_matmul"
TOPS = (1, 2, 3, 4, 6)
CALLS = (1, 10, 100, 1000)
FOLDS = 5


def tiles_of(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c.startswith("time_ms:") and c != CUBLAS]


def ranking(times: np.ndarray, cublas: np.ndarray) -> np.ndarray:
    """Tiles best first by mean log slowdown against each shape's best; a failed tile (NaN) counts e^5."""
    best = np.minimum(np.nanmin(times, axis=1), cublas)
    slowdown = np.log(times / best[:, None])
    return np.argsort(np.where(np.isnan(slowdown), 5.0, slowdown).mean(axis=0), kind="stable")


def replay(frame: pd.DataFrame, top: int) -> tuple[np.ndarray, np.ndarray]:
    """Held out: each shape's kept time and its first call's time (its top tiles and cuBLAS once each)."""
    times, cublas = frame[tiles_of(frame)].to_numpy(), frame[CUBLAS].to_numpy()
    kept, first = np.empty(len(frame)), np.empty(len(frame))
    for train, test in GroupKFold(FOLDS).split(frame, groups=frame["group"]):
        chosen = times[test][:, ranking(times[train], cublas[train])[:top]]
        kept[test] = np.fmin(np.nanmin(chosen, axis=1), cublas[test])
        # A tile that failed on a shape (NaN) is charged nothing there: its failed compile or launch
        # has no time in the table. The skinny sweep has no such cell under 128 rows.
        first[test] = np.nansum(chosen, axis=1) + cublas[test]
    return kept, first


DTYPES = dict(enumerate(DTYPE_NAMES.values()))  # code -> name


def family(frame: pd.DataFrame) -> pd.Series:
    return frame["group"].str.split("/").str[0] + " " + frame["dtype"].map(DTYPES)


def study(frame: pd.DataFrame) -> dict:
    cublas = frame[CUBLAS].to_numpy()
    oracle = cublas / np.fmin(np.nanmin(frame[tiles_of(frame)].to_numpy(), axis=1), cublas)
    rows, families = [], family(frame)
    for top in TOPS:
        kept, first = replay(frame, top)
        steady = cublas / kept
        rows.append({
            "top": top,
            "steady": geomean(steady),
            "calls": {n: geomean(cublas / ((first + (n - 1) * kept) / n)) for n in CALLS},
            "by_family": {name: geomean(steady[families == name]) for name in sorted(set(families))},
        })
    return {
        "shapes": len(frame),
        "oracle": geomean(oracle),
        "oracle_by_family": {name: geomean(oracle[families == name]) for name in sorted(set(families))},
        "shapes_by_family": families.value_counts().sort_index().to_dict(),
        "cublas_median_us_by_family": {name: 1e3 * float(np.median(cublas[families == name]))
                                       for name in sorted(set(families))},
        "tops": rows,
    }


def markdown(result: dict) -> str:
    s = result["study"]
    lines = [f"# Timing the top tiles on a GEMM shape's first call, {result['device']} (replayed on CPU)", "",
             f"Table `{result['table']}` ({result['measured']}; {result['versions']}), shapes of fewer than "
             f"{result['max_m']} rows: {s['shapes']}. `{result['command']}`", "",
             "Held out (5 folds grouped by the table's `group`): the training folds rank the tiles; a held-out "
             "shape runs its top k and cuBLAS once each, then keeps the fastest. Speed-up over cuBLAS alone, "
             "geometric mean; kernel times only (the synchronisations that reading the timings needs are not "
             "charged: upper bounds).", "",
             f"Per-shape best of every tile and cuBLAS (the ceiling): {s['oracle']:.3f}x.", "",
             "| top k tiles | steady state | " + " | ".join(f"{n} calls" for n in CALLS) + " |",
             "|---|---|" + "---|" * len(CALLS)]
    for row in s["tops"]:
        lines.append(f"| {row['top']} | {row['steady']:.3f}x | "
                     + " | ".join(f"{row['calls'][n]:.3f}x" for n in CALLS) + " |")
    names = list(s["oracle_by_family"])
    lines += ["", "Steady state by shape family (`group`'s first part, dtype):", "",
              "| family | shapes | cuBLAS median µs | ceiling | " + " | ".join(f"top {r['top']}" for r in s["tops"]) + " |",
              "|---|---|---|---|" + "---|" * len(s["tops"])]
    for name in names:
        lines.append(f"| {name} | {s['shapes_by_family'][name]} | {s['cublas_median_us_by_family'][name]:.1f} | "
                     f"{s['oracle_by_family'][name]:.3f}x | "
                     + " | ".join(f"{r['by_family'][name]:.3f}x" for r in s["tops"]) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path, help="a GEMM profile table with every tile's time_ms column")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--max-m", type=int, default=128, help="shapes of fewer rows than this (default 128)")
    args = parser.parse_args(argv)
    frame = pd.read_csv(args.table)
    missing = {"group", "m", "dtype", CUBLAS} - set(frame.columns)
    if missing or not tiles_of(frame):
        parser.error(f"{args.table} is not a GEMM profile table: it lacks {sorted(missing) or 'tile columns'}")
    if not frame["dtype"].isin(list(DTYPES)).all():
        parser.error(f"{args.table}: dtype codes other than {DTYPES} ({sorted(set(frame['dtype']) - set(DTYPES))})")
    frame = frame[frame["m"] < args.max_m].reset_index(drop=True)
    if frame["group"].nunique() < FOLDS:
        parser.error(f"{frame['group'].nunique()} groups of shapes under {args.max_m} rows: {FOLDS} folds need {FOLDS}")
    meta = json.loads(args.table.with_suffix(".meta.json").read_text())
    command = "python benchmarks/gemm_first_call_topk.py " + " ".join(sys.argv[1:] if argv is None else argv)
    result = {"device": meta["device"]["name"], "table": str(args.table), "measured": meta["date"],
              "versions": ", ".join(f"{k} {v}" for k, v in meta["versions"].items()), "max_m": args.max_m,
              "command": command, "study": study(frame)}
    name = "gemm-first-call-topk-" + device_tag(meta["device"]["name"])
    write_result(args.out, name, result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
