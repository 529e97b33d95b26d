"""How ``diagonal_major_r512`` adds up its split diagonals: versions of ``kernels/spmv.py`` timed
on one machine, in loops of calls, warm from a CUDA graph and cold.

    python benchmarks/spmv_split_sum.py --matrices .carry/suitesparse --version in-kernel --round 1 \\
        [--out benchmarks/results/spmv-split-sum-<device>] [--budget-s 40]
    python benchmarks/spmv_split_sum.py --join benchmarks/results/spmv-split-sum-<device>/*.json \\
        [--out benchmarks/results]

Why: on matrices of few blocks of rows (2-D boxes of 49+ points, full bands of 49+ diagonals, up to
~270k rows on 132 SMs) ``diagonal_major_r512`` splits each block's diagonals over several
programs, whose sums must then be added up. Those matrices fit in L2, and their loops are
host-bound: such a loop took 3.07x the variant's warm kernel time (NOTES SpMV 48). The versions
(``--version`` names the one in place; ``device_run.sh``'s stage ``spmv-split-sum`` puts each in
place in turn, in interleaved rounds):

    copy       a torch sum of the splits into a temporary, then a copy into y: three launches a call
               (``git show a08ef30~1:kernels/spmv.py > .carry/spmv-versions/copy.py``)
    sum-out    the torch sum straight into a float32 y: two launches
               (``git show a08ef30:kernels/spmv.py > .carry/spmv-versions/sum-out.py``)
    in-kernel  the last split of each block to arrive adds them up: one launch (the working tree)

Per matrix that splits on this GPU (smallest first), the variant and two anchors that never split
(``cusparse_prepared``, ``vector_g32``; their times show how far the host drifted between
versions), each checked against float64, timed three ways: a loop of 1,000 back-to-back calls of
the bound call (host wall time a call: what a solver's loop sees; least of 3 alternated loops),
warm device time (calls replayed from one CUDA graph, as ``spmv_warm_l2.py``) and cold
``do_bench`` (L2 flushed, as the profile tables). ``--join`` keeps each version's least over its
rounds, on the matrices every version measured, and writes ``spmv-split-sum-<device>.json`` /
``.md``.
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

import torch
from large_set import checked_times
from scipy.stats import gmean
from spmv_warm_l2 import warm_times

from seer.datasets.cases import spmv_cases
from seer.kernels import spmv
from seer.launch import cdiv, sm_count
from seer.profiling import alternated_host_us, device_tag, environment, measured_within_budget, write_result

VARIANT, ANCHORS = "diagonal_major_r512", ("cusparse_prepared", "vector_g32")
VERSIONS = ("copy", "sum-out", "in-kernel")
LOOP_CALLS, LOOP_ROUNDS = 1000, 3
ROWS, DIAGONALS = (spmv.VARIANTS[VARIANT].params[k] for k in ("rows", "diagonals"))
# The large suite's generated patterns with 49+ diagonals: "stencil_2d/n<side>-points<p>" (side**2
# rows) and "banded/n<rows>-bandwidth<b>-fill1" (2 b + 1 diagonals); the rest never split.
_BOX = re.compile(r"stencil_2d/n(\d+)-points(\d+)/")
_BAND = re.compile(r"banded/n(\d+)-bandwidth(\d+)-fill1/")


def wide_pattern_rows(case_id: str) -> int | None:
    """Rows of a generated pattern of 49+ diagonals, else None."""
    if box := _BOX.search(case_id):
        return int(box[1]) ** 2 if int(box[2]) >= 49 else None
    if band := _BAND.search(case_id):
        return int(band[1]) if 2 * int(band[2]) + 1 >= 49 else None
    return None


def candidates(matrices: Path) -> list:
    """The large suite's wide patterns on few enough blocks of rows to split here, smallest first."""
    blocks = spmv._PROGRAMS_PER_SM * sm_count(torch.device("cuda"))  # fewer row blocks than this split
    cases = [c for c in spmv_cases([matrices], synthetic="large") if c.source != "real"]
    split = [c for c in cases if (rows := wide_pattern_rows(c.id)) is not None and cdiv(rows, ROWS) < blocks]
    return sorted(split, key=lambda c: c.extra["size"])


def splits(csr) -> int:
    layout = spmv._diagonal_major_layout(csr, *spmv._rows_following_pattern(csr))
    return 1 if layout is None else spmv._split_diagonals(csr.device, cdiv(csr.rows, ROWS), layout.length, DIAGONALS)[0]


def measure(case, loaded) -> dict:
    runs, bound, matrix = {}, {}, []

    def timed_calls(csr, x):
        matrix.append(csr)
        for name in (VARIANT, *ANCHORS):
            variant = spmv.VARIANTS[name]
            runs[name] = lambda v=variant: v.run(csr, x)
            bound[name] = lambda call=variant.bind(csr): call(x)
        return runs

    row = checked_times(case, loaded, timed_calls)  # checked (so planned), then timed cold
    row["splits"] = splits(matrix[0])
    row["warm_ms"], row["capture_errors"] = warm_times(runs)
    row["loop_us"] = {name: min(samples) for name, samples in
                      alternated_host_us(bound, LOOP_CALLS, LOOP_ROUNDS).items()}
    return row


def describe(row: dict) -> str:
    return f"{row['splits']} splits, loop {row['loop_us'][VARIANT]:.1f} us, warm {row['warm_ms'][VARIANT] * 1e3:.1f} us"


def measure_version(args) -> None:
    name = torch.cuda.get_device_name()
    rows = measured_within_budget(candidates(args.matrices), measure, args.budget_s, describe)
    result = {**environment(torch.device("cuda")), "command": " ".join(["python", *sys.argv]),
              "version": args.version, "round": args.round, "matrices": rows}
    stem = f"spmv-split-sum-{device_tag(name)}-{args.version}-{args.round}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")


def least_per_version(results: list[dict]) -> dict:
    """{version: {matrix id: row}}: each measure the least over the version's rounds."""
    joined: dict = {}
    for result in results:
        for row in result["matrices"]:
            kept = joined.setdefault(result["version"], {}).setdefault(row["id"], copy.deepcopy(row))
            for measure_name in ("time_ms", "warm_ms", "loop_us"):
                for variant, value in row[measure_name].items():
                    kept[measure_name][variant] = min(kept[measure_name][variant], value)
    return joined


def markdown(result: dict) -> str:
    versions, ids = result["versions_compared"], result["matrix_ids"]
    per = result["per_version"]
    base = versions[0]

    def ratio(measure_name: str, variant: str, version: str) -> float:
        return gmean([per[base][i][measure_name][variant] / per[version][i][measure_name][variant] for i in ids])

    lines = [f"# Split diagonals added up three ways, {result['device']['name']}", "",
             f"Rounds measured {', '.join(result['dates'])}; torch {result['versions']['torch']}, "
             f"triton {result['versions']['triton']}; `{result['command']}` over the rounds of `bash "
             f"benchmarks/device_run.sh spmv-split-sum`.", "",
             f"{len(ids)} matrices whose `{VARIANT}` splits its diagonals on this GPU, measured by every "
             f"version ({', '.join(f'`{v}`' for v in versions)}), each version's least over its rounds. "
             f"Loop: {LOOP_CALLS:,} back-to-back bound calls, wall time a call. Warm: calls replayed from "
             f"one CUDA graph. Cold: `do_bench`, L2 flushed. Every result checked against float64.", "",
             f"Speed-up over `{base}` (geometric mean; the anchors never split, so theirs is the host's drift):", "",
             "| variant | version | loop | warm | cold |", "|---|---|---|---|---|"]
    for variant in (VARIANT, *ANCHORS):
        for version in versions[1:]:
            lines.append(f"| {variant} | {version} | " + " | ".join(
                f"{ratio(m, variant, version):.3f}x" for m in ("loop_us", "warm_ms", "time_ms")) + " |")
    lines += ["", "Per matrix, µs a call (loop / warm / cold) for each version, and the anchors' loops:", "",
              "| matrix | nnz | splits | " + " | ".join(versions) + " | " +
              " | ".join(f"{a} loop ({versions[-1]})" for a in ANCHORS) + " |",
              "|---|---|---|" + "---|" * (len(versions) + len(ANCHORS))]
    for i in ids:
        latest = per[versions[-1]][i]
        cells = [f"{per[v][i]['loop_us'][VARIANT]:.1f} / {per[v][i]['warm_ms'][VARIANT] * 1e3:.1f} / "
                 f"{per[v][i]['time_ms'][VARIANT] * 1e3:.1f}" for v in versions]
        lines.append(f"| {i} | {latest['nnz']:,} | {latest['splits']} | " + " | ".join(cells) + " | " +
                     " | ".join(f"{latest['loop_us'][a]:.1f}" for a in ANCHORS) + " |")
    return "\n".join(lines) + "\n"


def join(args) -> None:
    results = [json.loads(Path(p).read_text()) for p in args.join]
    devices = {r["device"]["name"] for r in results}
    if len(devices) != 1:
        raise SystemExit(f"--join takes one device's rounds; these files hold {sorted(devices)}")
    per = least_per_version(results)
    versions = [v for v in VERSIONS if v in per]
    ids = [i for i in per[versions[0]] if all(i in per[v] for v in versions)]
    result = {**{k: results[0][k] for k in ("device", "versions")}, "command": " ".join(["python", *sys.argv]),
              "dates": sorted({r["date"] for r in results}), "versions_compared": versions, "matrix_ids": ids,
              "per_version": {v: {i: per[v][i] for i in ids} for v in versions}}
    write_result(args.out, f"spmv-split-sum-{device_tag(results[0]['device']['name'])}", result, markdown(result))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=Path, help="real matrices (the large suite's replicas are built from them)")
    parser.add_argument("--version", choices=VERSIONS, help="which version of kernels/spmv.py is in place")
    parser.add_argument("--round", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=40)
    parser.add_argument("--join", nargs="+", help="the rounds' JSON files, joined into one comparison")
    args = parser.parse_args()
    if args.join:
        join(args)
    elif args.matrices and args.version:
        measure_version(args)
    else:
        parser.error("give --matrices and --version to measure, or --join to compare")
    return 0


if __name__ == "__main__":
    sys.exit(main())
