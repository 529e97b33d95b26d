"""Two runs of ``benchmarks/dispatch.py`` on the matrices both measured (CPU).

    python benchmarks/dispatch_compare.py BEFORE.json AFTER.json --family synthetic/rmat/ --out benchmarks/results

Runs cut short by their time budget cover different large matrices, so their headline speed-ups
are not like for like. This reads, on the large matrices both runs timed, each run's cached-call
speed-up over torch CSR (geometric mean), overall and on the ``--family`` prefixes, and how much
faster each side's own call got; then, on the real and the large matrices both runs timed, how many
kept seer's first choice, and the same figures on those: what moved there is the host, not the model.
Writes ``<after stem>-against-<before stem>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scipy.stats import gmean

from seer.profiling import write_result


def compare(before: dict, after: dict, families: list[str]) -> dict:
    """The large matrices' figures ({} where either run timed none: ``dispatch.py`` without
    ``--large-budget-s``)."""
    if "large_matrices" not in before or "large_matrices" not in after:
        return {}
    old, new, common = _both(before, after, "large_matrices")
    groups = {"all": common, **{f: [i for i in common if i.startswith(f)] for f in families}}
    return {group: _speedups(old, new, ids) for group, ids in groups.items() if ids}


def same_choices(before: dict, after: dict) -> dict:
    """Per set (real, large): the matrices both runs timed, how many kept seer's first choice, and
    :func:`compare`'s figures on those."""
    result = {}
    for matrices in ("real_matrices", "large_matrices"):
        if matrices not in before or matrices not in after:
            continue
        old, new, common = _both(before, after, matrices)
        kept = [i for i in common if old[i].get("seer_choice") == new[i].get("seer_choice")]
        result[matrices] = {"both": len(common), "same_choice": len(kept), **(_speedups(old, new, kept) if kept else {})}
    return result


def _both(before: dict, after: dict, matrices: str) -> tuple[dict, dict, list[str]]:
    old = {r["id"]: r for r in before[matrices]["rows"]}
    new = {r["id"]: r for r in after[matrices]["rows"]}
    return old, new, [i for i in new if i in old]


def _speedups(old: dict, new: dict, ids: list[str]) -> dict:
    def mean(value) -> float:
        return float(gmean([value(i) for i in ids]))

    return {"matrices": len(ids),
            "speedup_before": mean(lambda i: old[i]["torch_us"] / old[i]["seer_us"]),
            "speedup_after": mean(lambda i: new[i]["torch_us"] / new[i]["seer_us"]),
            "seer_call_before_over_after": mean(lambda i: old[i]["seer_us"] / new[i]["seer_us"]),
            "torch_call_before_over_after": mean(lambda i: old[i]["torch_us"] / new[i]["torch_us"])}


def markdown(result: dict) -> str:
    lines = ["# Cached calls on the large matrices both dispatch runs measured", "",
             f"{result['device']}. Before: `{result['before']}` ({result['before_date']}); after: `{result['after']}` "
             f"({result['after_date']}); `{result['command']}`. Geometric means over the same matrices.", "",
             "| matrices | count | speed-up over torch CSR, before | after | seer's call, before / after | "
             "torch's call, before / after |", "|---|---|---|---|---|---|"]
    for group, g in result["groups"].items():
        lines.append(f"| {group} | {g['matrices']} | {_figures(g)}")
    if result.get("choices"):
        lines += ["", "## The matrices whose first choice both runs share", "",
                  "| matrices | both runs | same first choice | speed-up over torch CSR on them, before | after | "
                  "seer's call, before / after | torch's call, before / after |", "|---|---|---|---|---|---|---|"]
        for matrices, c in result["choices"].items():
            figures = _figures(c) if c["same_choice"] else "- | - | - | - |"
            lines.append(f"| {matrices.removesuffix('_matrices')} | {c['both']} | {c['same_choice']} | {figures}")
    return "\n".join(lines) + "\n"


def _figures(g: dict) -> str:
    return (f"{g['speedup_before']:.3f}x | {g['speedup_after']:.3f}x | {g['seer_call_before_over_after']:.3f} | "
            f"{g['torch_call_before_over_after']:.3f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--family", action="append", default=[], help="an id prefix to report on its own")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    before, after = (json.loads(p.read_text()) for p in (args.before, args.after))
    devices = [(run.get("device") or {}).get("name") for run in (before, after)]
    if devices[0] != devices[1]:  # what moved between them would be the GPU, not the host or the model
        parser.error(f"{args.before} was measured on {devices[0]!r}, {args.after} on {devices[1]!r}: "
                     "compare two runs of one GPU")
    result = {"command": " ".join(["python", *sys.argv]), "before": str(args.before), "after": str(args.after),
              "device": devices[0], "before_versions": before.get("versions"), "after_versions": after.get("versions"),
              "before_date": before.get("date"), "after_date": after.get("date"),
              "groups": compare(before, after, args.family), "choices": same_choices(before, after)}
    write_result(args.out, f"{args.after.stem}-against-{args.before.stem}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
