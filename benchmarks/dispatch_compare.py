"""Two runs of ``benchmarks/dispatch.py`` on the matrices both measured (CPU).

    python benchmarks/dispatch_compare.py BEFORE.json AFTER.json --family synthetic/rmat/ --out benchmarks/results

Runs cut short by their time budget cover different large matrices, so their headline speed-ups
are not like for like. This reads, on the large matrices both runs timed, each run's cached-call
speed-up over torch CSR (geometric mean), overall and on the ``--family`` prefixes, and how much
faster each side's own call got. Writes ``<after stem>-against-<before stem>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scipy.stats import gmean

from seer.profiling import write_result


def compare(before: dict, after: dict, families: list[str]) -> dict:
    old = {r["id"]: r for r in before["large_matrices"]["rows"]}
    new = {r["id"]: r for r in after["large_matrices"]["rows"]}
    common = [i for i in new if i in old]
    groups = {"all": common, **{f: [i for i in common if i.startswith(f)] for f in families}}

    def mean(ids: list[str], value) -> float:
        return float(gmean([value(i) for i in ids]))

    return {group: {"matrices": len(ids),
                    "speedup_before": mean(ids, lambda i: old[i]["torch_us"] / old[i]["seer_us"]),
                    "speedup_after": mean(ids, lambda i: new[i]["torch_us"] / new[i]["seer_us"]),
                    "seer_call_before_over_after": mean(ids, lambda i: old[i]["seer_us"] / new[i]["seer_us"]),
                    "torch_call_before_over_after": mean(ids, lambda i: old[i]["torch_us"] / new[i]["torch_us"])}
            for group, ids in groups.items() if ids}


def markdown(result: dict) -> str:
    lines = ["# Cached calls on the large matrices both dispatch runs measured", "",
             f"Before: `{result['before']}` ({result['before_date']}); after: `{result['after']}` "
             f"({result['after_date']}); `{result['command']}`. Geometric means over the same matrices.", "",
             "| matrices | count | speed-up over torch CSR, before | after | seer's call, before / after | "
             "torch's call, before / after |", "|---|---|---|---|---|---|"]
    for group, g in result["groups"].items():
        lines.append(f"| {group} | {g['matrices']} | {g['speedup_before']:.3f}x | {g['speedup_after']:.3f}x | "
                     f"{g['seer_call_before_over_after']:.3f} | {g['torch_call_before_over_after']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--family", action="append", default=[], help="an id prefix to report on its own")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    before, after = (json.loads(p.read_text()) for p in (args.before, args.after))
    result = {"command": " ".join(["python", *sys.argv]), "before": str(args.before), "after": str(args.after),
              "before_date": before.get("date"), "after_date": after.get("date"),
              "groups": compare(before, after, args.family)}
    write_result(args.out, f"{args.after.stem}-against-{args.before.stem}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
