"""Two stage-1 designs scored side by side on the same tables and the same fold assignments.

    python benchmarks/selection_designs.py datasets/profiles/spmv-h100.csv datasets/profiles/spmv-h200.csv \
        --before d4f4adc [--fold-seeds 3]

``before``: seer's training module as of a git commit (read with ``git show``), here the design
with one stage-1 tree per call count over every variant plus gathering; ``now``: the working
tree's, a gate per call count over the known-feature tree and gathering. Each design is scored by
the nested grouped CV of ``TwoStageSelector.evaluate`` under scikit-learn's assignment of groups to
folds and ``--fold-seeds`` random ones, so the comparison is not one assignment's luck. Writes
``selection-designs.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import seer.train
from seer.profiling import write_result
from seer.table import read_table

METRIC = "fraction_of_oracle_with_gather"
CELLS = [(subset, calls) for subset in ("real", "other") for calls in (1, 100)]
FOLDS = seer.train.grouped_folds  # seeded assignments of groups to folds, kept before any patching


def training_module_at(commit: str):
    """seer/train.py as of ``commit``, imported as a module of its own."""
    source = subprocess.run(["git", "show", f"{commit}:seer/train.py"], check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / f"train_{commit}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def scores(module, table, seed: int | None) -> dict:
    """The design's held-out METRIC per (subset, calls) under one assignment of groups to folds."""
    module.grouped_folds = lambda groups, folds, *_: FOLDS(groups, folds, seed)
    report = module.TwoStageSelector().evaluate(table, calls=(1, 100))
    return {f"{subset}@{calls}": report.scores[subset][calls][METRIC] for subset, calls in CELLS}


def markdown(result: dict) -> str:
    lines = ["# Stage-1 designs on the same tables and fold assignments", "",
             f"`{result['command']}`. Held-out {METRIC} (nested grouped CV) at 1 and 100 calls; "
             f"`before` = seer/train.py at commit {result['before']}, `now` = the working tree. Assignments: "
             "scikit-learn's (seed none) and seeded random ones.", "",
             "| table | seed | design | " + " | ".join(f"{s} @ {c}" for s, c in CELLS) + " | mean |",
             "|---|---|---|" + "---|" * (len(CELLS) + 1)]
    for row in result["rows"]:
        values = [row["scores"][f"{s}@{c}"] for s, c in CELLS]
        lines.append(f"| {row['table']} | {row['seed']} | {row['design']} | " +
                     " | ".join(f"{v:.3f}" for v in values) + f" | {np.mean(values):.3f} |")
    lines += ["", "| design | mean over every table, seed and cell | cells where it is ahead |", "|---|---|---|"]
    for design in ("before", "now"):
        own = [v for r in result["rows"] if r["design"] == design for v in r["scores"].values()]
        other = [v for r in result["rows"] if r["design"] != design for v in r["scores"].values()]
        lines.append(f"| {design} | {np.mean(own):.3f} | {sum(a > b for a, b in zip(own, other))} of {len(own)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", type=Path, nargs="+")
    parser.add_argument("--before", required=True, help="git commit of the earlier design")
    parser.add_argument("--fold-seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    designs = {"before": training_module_at(args.before), "now": seer.train}
    rows = []
    for path in args.tables:
        table = read_table(path)
        for seed in [None, *range(args.fold_seeds)]:
            for name, module in designs.items():
                rows.append({"table": path.name, "seed": seed, "design": name, "scores": scores(module, table, seed)})
                print(rows[-1], flush=True)
    seer.train.grouped_folds = FOLDS
    result = {"command": " ".join(["python", *sys.argv]), "before": args.before, "metric": METRIC, "rows": rows}
    write_result(args.out, "selection-designs", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
