"""A profile table with one variant's cells set to another's wherever the two time within a tolerance.

    python benchmarks/spmv_ties_equal.py datasets/profiles/spmv-h100.csv --variant offsets_i16 \
        --like cusparse_prepared --out benchmarks/results/spmv-h100-offsets-ties-equal
    python benchmarks/selection.py benchmarks/results/spmv-h100-offsets-ties-equal/spmv-h100.csv \
        --validation benchmarks/results/spmv-validation-h100.json --dispatch benchmarks/results/dispatch-h100.json \
        --out benchmarks/results/spmv-h100-offsets-ties-equal

A variant that runs another's call where its own layout does not fit (``offsets_i16`` as
``cusparse_prepared``) has two timings of one call on those inputs, and the oracle takes the lesser,
so the held-out fraction of oracle falls by the noise between them, not by a worse choice. This
writes the table with such cells (kernel time and host call time) set to the other variant's, so
that ``selection.py`` scores it without that noise. A check of the scores, not a table to train on:
the rows that merely tie are overwritten too, and nothing is measured.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from seer.table import meta_path, read_frame, write_table

COLUMNS = ("time_ms", "call_us")


def equalise(frame: pd.DataFrame, variant: str, like: str, within: float) -> tuple[pd.DataFrame, int]:
    """``frame`` with ``variant``'s kernel and call times set to ``like``'s on the rows whose kernel
    times differ by at most ``within`` (relative), and how many rows that was."""
    ties = ((frame[f"time_ms:{variant}"] / frame[f"time_ms:{like}"]) - 1).abs() <= within
    out = frame.copy()
    for column in COLUMNS:
        out.loc[ties, f"{column}:{variant}"] = out.loc[ties, f"{column}:{like}"]
    return out, int(ties.sum())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table")
    parser.add_argument("--variant", required=True)
    parser.add_argument("--like", required=True)
    parser.add_argument("--within", type=float, default=0.03)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    table = Path(args.table)
    frame, count = equalise(read_frame(table), args.variant, args.like, args.within)
    meta = json.loads(meta_path(table).read_text())
    meta["notes"] = (f"{meta.get('notes', '')} {args.variant}'s kernel and call times set to {args.like}'s on the "
                     f"{count} rows within {args.within:.0%} of it: python {' '.join(sys.argv)}").strip()
    written = write_table(frame, args.out / table.name, meta)
    print(f"{count} rows of {len(frame)}: {args.variant} set to {args.like}; wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
