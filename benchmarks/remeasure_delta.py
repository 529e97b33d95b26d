"""What measuring one variant's kernel time again changed in a profile table (CPU).

After ``spmv-add-variant`` with ``AGAIN=1`` (a variant's code changed; NOTES SpMV 49-50) the
table at the commit before holds the old times and the working tree the new ones. For the named
inputs (those the change is about, e.g. a comparison's ``matrix_ids``), this reports the
variant's new time over its old one, and where the oracle (the least time over every variant)
got faster by more than 5% and by how much, and on how many its winner changed; for the other
inputs, the variant's median ratio per source (what re-measuring unchanged code moves).

    python benchmarks/remeasure_delta.py datasets/profiles/spmv-h200.csv --before 485afe0~1 \
        --variant diagonal_major_r512 --inputs benchmarks/results/spmv-split-sum-h200.json

Writes ``remeasure-delta-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from seer.profiling import device_tag, write_result
from seer.table import TIME, read_table

FASTER = 1.05  # the oracle counts as faster past this ratio


def table_at(path: Path, commit: str) -> pd.DataFrame:
    """The table's cells as committed at ``commit``, by input id."""
    text = subprocess.run(["git", "show", f"{commit}:{path}"], capture_output=True, text=True, check=True).stdout
    return pd.read_csv(io.StringIO(text)).set_index("id")


def delta(old: pd.DataFrame, new: pd.DataFrame, variant: str, inputs: list[str]) -> dict:
    times = [c for c in new.columns if c.startswith(TIME)]
    old, new = old.loc[new.index], new
    ratio = new[TIME + variant] / old[TIME + variant]
    named = new.index.isin(inputs)
    oracle = old[times].min(axis=1) / new[times].min(axis=1)
    faster = oracle[named & (oracle > FASTER)]
    changed = named & (old[times].idxmin(axis=1) != new[times].idxmin(axis=1))
    return {"named": {"inputs": int(named.sum()), "median": float(ratio[named].median()),
                      "min": float(ratio[named].min()), "max": float(ratio[named].max()),
                      "oracle_faster_on": len(faster),
                      "oracle_faster_range": [float(faster.min()), float(faster.max())] if len(faster) else None,
                      "winner_changed_on": int(changed.sum())},
            "others_median_by_source": {str(source): float(r.median())
                                        for source, r in ratio[~named].groupby(new.loc[~named, "source"])}}


def markdown(result: dict) -> str:
    named, variant = result["named"], result["variant"]
    span = result["named"]["oracle_faster_range"]
    lines = [f"# `{variant}` measured again, {result['device']}", "",
             f"Table `{result['table']}` against `{result['before']}`; inputs named by `{result['inputs']}`. "
             f"Command: `{result['command']}`", "",
             "| inputs | the variant's new time over its old (median, min - max) | oracle faster by over 5% on "
             "| by | fastest variant changed on |", "|---|---|---|---|---|",
             f"| {named['inputs']} named | {named['median']:.3f}x ({named['min']:.3f} - {named['max']:.3f}) | "
             f"{named['oracle_faster_on']} | {'-' if span is None else f'{span[0]:.2f}x - {span[1]:.2f}x'} | "
             f"{named['winner_changed_on']} |", "",
             "The other inputs, the variant's new time over its old (median): " +
             ", ".join(f"{s} {r:.3f}x" for s, r in result["others_median_by_source"].items()) + "."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path, help="the profile table as it is now")
    parser.add_argument("--before", required=True, help="a commit holding the table before the re-measure")
    parser.add_argument("--variant", required=True)
    parser.add_argument("--inputs", type=Path, required=True, help="a result whose matrix_ids name the inputs")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    table = read_table(args.table)
    inputs = json.loads(args.inputs.read_text())["matrix_ids"]
    new = table.frame.set_index("id")
    result = {"benchmark": "variant measured again", "device": table.meta["device"]["name"],
              "table": str(args.table), "before": args.before, "variant": args.variant, "inputs": str(args.inputs),
              "command": " ".join(["python", *sys.argv]),
              **delta(table_at(args.table, args.before), new, args.variant, inputs)}
    write_result(args.out, f"remeasure-delta-{device_tag(result['device'])}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
