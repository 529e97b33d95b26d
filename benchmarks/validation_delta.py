"""What a change to the validation pass adds to it, per input, against the pass before the change.

``spmv_validation.py`` charges the row statistics what they add to the pass without them
(``stats_us``: with minus without, in one run). A change that puts more work into the statistics
(the shifted-row count, NOTES SpMV 33) is judged against the pass before it instead: this writes
a copy of the new run whose ``stats_us`` is the new run's minus the old run's on the same input,
which cancels what the two runs' hosts and devices share. ``benchmarks/selection.py --validation``
then charges that difference to every validated first call.

That control holds only while the pass without statistics is the same kernel in both runs. A change
that moves it too (the pass's register budget, NOTES SpMV 34) is judged with ``--charge kernel``:
the new run's kernel with statistics minus the old run's, the time a validated first call pays.

    python benchmarks/validation_delta.py benchmarks/results/spmv-validation-h100.json \
        benchmarks/results/spmv-validation-h100-without-count.json --out benchmarks/results/spmv-validation-h100-count.json

``--paired`` writes instead, for a change to how the pass is read back (NOTES SpMV 39), each
column's median over the shared inputs in either run and the median of their differences.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from spmv_validation import markdown, summary  # a sibling script: benchmarks/ is on the path when run


CHARGES = {"stats": "stats_us", "kernel": "kernel_us"}
PAIRED_COLUMNS = ("before_us", "validate_us", "plain_us", "gather_us", "kernel_us", "plain_kernel_us", "stats_us")


def _shared(new: dict, old: dict) -> list[tuple[dict, dict]]:
    """(new row, old row) of each input both runs measured, in ``new``'s order."""
    before = {row["id"]: row for row in old["rows"]}
    shared = [(row, before[row["id"]]) for row in new["rows"] if row["id"] in before]
    if not shared:
        raise SystemExit("the two runs share no input: compare runs of the same campaign")
    return shared


def paired(new: dict, old: dict) -> dict:
    """Per column: the median over the inputs both runs measured in ``old`` and in ``new``, and the
    median of the differences input by input (new minus old)."""
    shared = _shared(new, old)
    columns = {c: {"old": float(np.median([o[c] for _, o in shared])), "new": float(np.median([n[c] for n, _ in shared])),
                   "difference": float(np.median([n[c] - o[c] for n, o in shared]))} for c in PAIRED_COLUMNS}
    return {"inputs": len(shared), "columns": columns, "command": " ".join(["python", *sys.argv]),
            "runs": {"new": new["command"], "old": old["command"]}}


def paired_markdown(result: dict, new: Path, old: Path) -> str:
    lines = [f"# The validation pass, {new.name} against {old.name}", "", f"`{result['command']}`; "
             f"{result['inputs']} inputs measured by both runs; medians, µs (columns: spmv_validation.py).", "",
             "| column | old | new | median difference |", "|---|---|---|---|"]
    lines += [f"| {c} | {v['old']:.2f} | {v['new']:.2f} | {v['difference']:+.2f} |" for c, v in result["columns"].items()]
    return "\n".join(lines) + "\n"


def delta(new: dict, old: dict, charge: str = "stats") -> dict:
    """``new`` restricted to the inputs ``old`` measured too, its ``stats_us`` replaced by the
    difference of the two runs' ``stats_us`` (``charge="stats"``) or ``kernel_us`` ("kernel")."""
    column = CHARGES[charge]
    rows = [{**row, "stats_us": row[column] - earlier[column]} for row, earlier in _shared(new, old)]
    return {**new, "summary": summary(rows), "rows": rows,
            "command": " ".join(["python", *sys.argv]), "runs": {"new": new["command"], "old": old["command"]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("new", type=Path, help="spmv_validation.py result with the change")
    parser.add_argument("old", type=Path, help="spmv_validation.py result without it, same GPU kind")
    parser.add_argument("--charge", choices=sorted(CHARGES), default="stats",
                        help="stats: difference of with-minus-without; kernel: of the kernel with statistics")
    parser.add_argument("--paired", action="store_true", help="medians of every column and of their differences")
    parser.add_argument("--out", type=Path, required=True, help="the result's .json (a .md goes beside it)")
    args = parser.parse_args()
    new, old = (json.loads(path.read_text()) for path in (args.new, args.old))
    if new["environment"]["device"]["name"] != old["environment"]["device"]["name"]:
        raise SystemExit(f"{args.new} and {args.old} were measured on different GPUs")
    if args.paired:
        result = paired(new, old)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(text := paired_markdown(result, args.new, args.old))
        print(text)
        return 0
    result = delta(new, old, args.charge)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    charged = {"stats": "this run's with-minus-without less that of",
               "kernel": "this run's kernel with statistics less that of"}[args.charge]
    text = markdown(result).replace("stats: what the statistics add to it (with minus without)",
                                    f"stats: {charged} {args.old.name} on the same input")
    args.out.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
