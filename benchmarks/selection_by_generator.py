"""Held-out SpMV scores with coarser families: every synthetic matrix of one generator in one group.

The shipped grouping (``datasets/cases.py``) makes a family of a generator *with its structure
parameters* (2-D stencils of 5 and of 9 points are two families), so a held-out family may have a
sibling of other parameters in training. This scores the validated path (as ``selection.py
--validation``) under both groupings, each with scikit-learn's fold assignment and three random
ones (``fold_seed`` 0-2), real and derived groups left as they are:

    python benchmarks/selection_by_generator.py datasets/profiles/spmv-h100.csv \\
        --validation benchmarks/results/spmv-validation-h100.json --out benchmarks/results

writes ``selection-by-generator-<device>.md`` and ``.json``.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from seer.table import read_table
from seer.train import TwoStageSelector
from selection import validation_costs

CALLS = (1, 100)
FOLD_SEEDS = (None, 0, 1, 2)  # None: scikit-learn's GroupKFold


def by_generator(table):
    """``table`` with each synthetic row's group cut to its generator (``synthetic/<generator>``)."""
    frame = table.frame.copy()
    synthetic = frame.source == "synthetic"
    frame.loc[synthetic, "group"] = frame.loc[synthetic, "group"].str.split("/").str[:2].str.join("/")
    return replace(table, frame=frame)


def scores(table, free_gather_ms) -> list[dict]:
    rows = []
    for seed in FOLD_SEEDS:
        report = TwoStageSelector(fold_seed=seed).evaluate(table, calls=CALLS, free_gather_ms=free_gather_ms)
        validated = report.validated_scores
        rows.append({"fold_seed": seed, **{f"{subset}@{c}": {k: validated[subset][c][k] for k in
                                                                ("fraction_of_oracle_with_gather", "speedup_vs_cusparse")}
                                            for subset in ("real", "other") for c in CALLS}})
    return rows


def study_arguments(doc: str):
    """``(args, table, statistics_ms, result)`` of a study of a table's held-out scores: its command
    line (a table, ``--validation``, ``--out``), the table, what the validated path charges each
    row (``selection.validation_costs``) and the result's header fields."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", type=Path)
    parser.add_argument("--validation", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    table = read_table(args.table)
    statistics_ms, _ = validation_costs(table, args.validation)
    header = {"table": str(args.table), "meta": {k: table.meta.get(k) for k in ("device", "versions", "date")},
              "command": "python " + " ".join(sys.argv)}
    return args, table, statistics_ms, header


def fold_label(seed) -> str:
    return "scikit-learn's" if seed is None else f"random, seed {seed}"


def write_study(args, stem: str, result: dict, lines: list[str]) -> None:
    """``<stem>-<device>.json`` (``result``) and ``.md`` (``lines``) under ``--out``; the lines printed."""
    device = args.table.stem.removeprefix("spmv-")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}-{device}.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / f"{stem}-{device}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> int:
    args, table, free, header = study_arguments(__doc__)
    groupings = {"shipped (generator and parameters)": table, "by generator": by_generator(table)}
    result = {**header,
              "groupings": {name: {"groups": int(t.frame.group.nunique()), "scores": scores(t, free)}
                            for name, t in groupings.items()}}
    lines = [f"# Held-out SpMV scores by family grouping, {table.meta['device']['name']}", "",
             f"Table `{args.table}` (measured {table.meta.get('date')}; {table.meta.get('versions')}); validated "
             f"path; command: `{result['command']}`. Fraction of the oracle, 1 / 100 calls, and the speed-up over "
             "cuSPARSE (torch CSR) on the large (derived and synthetic) set.", "",
             "| grouping | groups | fold assignment | large | real | large vs cuSPARSE |", "|---|---|---|---|---|---|"]
    for name, grouping in result["groupings"].items():
        for row in grouping["scores"]:
            cells = [" / ".join(f"{row[f'{subset}@{c}'][metric]:.3f}" for c in CALLS)
                     for subset, metric in (("other", "fraction_of_oracle_with_gather"),
                                            ("real", "fraction_of_oracle_with_gather"),
                                            ("other", "speedup_vs_cusparse"))]
            lines.append(f"| {name} | {grouping['groups']} | {fold_label(row['fold_seed'])} | " + " | ".join(cells) + " |")
    write_study(args, "selection-by-generator", result, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
