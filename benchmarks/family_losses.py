"""Where the held-out slowdown comes from: the nested CV's loss against the oracle, family by family.

    python benchmarks/family_losses.py datasets/profiles/spmv-<device>.csv \
        --validation benchmarks/results/spmv-validation-<device>.json [--calls 1 100] [--top 12]

A subset's fraction of the oracle is exp(-L / n) for n inputs, L the sum over them of
log(seer's time / the oracle's time), so each family's share of L says how much of the miss it
makes. For scikit-learn's assignment of groups to folds and the seeded ones ``selection.py``
scores (``--fold-seeds``), this runs the same nested CV (``TwoStageSelector.evaluate``) and sums
the held-out log-slowdown per family of the derived and synthetic inputs (``--subset real``: the
real ones), on the validated path (stage 2 on every input, charged the statistics as
``selection.py`` charges them; without ``--validation``: the unchecked path, gathering charged
where stage 1 gathers). Printed per call count: the families with the largest mean loss over the
assignments, then the inputs that lose most in scikit-learn's assignment, with seer's choice and
the oracle. Writes nothing: NOTES SpMV 43 and 44 quote it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from selection import validation_costs

from seer.table import read_table
from seer.train import TwoStageSelector


def held_out(table, free, seed: int | None, calls: tuple[int, ...]) -> pd.DataFrame:
    """The per-input held-out frame of one assignment of groups to folds (None: scikit-learn's)."""
    selector = TwoStageSelector() if seed is None else TwoStageSelector(fold_seed=seed)
    report = selector.evaluate(table, calls=calls, free_gather_ms=free)
    return report.held_out if free is None else report.validated_held_out


def family_losses(frames: dict[str, pd.DataFrame], calls: int) -> pd.DataFrame:
    """Summed log-slowdown per family (rows) and assignment (columns), with their mean, largest first."""
    losses = pd.DataFrame({name: np.log(f[f"ratio@{calls}"]).groupby(f["group"]).sum() for name, f in frames.items()})
    losses["mean"] = losses.mean(axis=1)
    return losses.sort_values("mean", ascending=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path)
    parser.add_argument("--validation", type=Path, default=None,
                        help="spmv-validation-<device>.json: the validated path (else the unchecked one)")
    parser.add_argument("--calls", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--subset", choices=["derived", "real"], default="derived",
                        help="derived: the derived and synthetic inputs (the large set); real: the real ones")
    parser.add_argument("--fold-seeds", type=int, default=3)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    table = read_table(args.table)
    free = validation_costs(table, args.validation)[0] if args.validation else None
    calls = tuple(args.calls)
    seeds = {"scikit-learn": None, **{f"seed {s}": s for s in range(args.fold_seeds)}}
    frames = {name: held_out(table, free, seed, calls) for name, seed in seeds.items()}
    keep = (lambda f: f["source"] == "real") if args.subset == "real" else (lambda f: f["source"] != "real")
    frames = {name: f[keep(f)] for name, f in frames.items()}
    path = "validated" if free is not None else "unchecked"
    with pd.option_context("display.width", 200, "display.max_colwidth", 70):
        for c in calls:
            losses = family_losses(frames, c)
            fractions = {name: float(np.exp(-np.log(f[f"ratio@{c}"]).mean())) for name, f in frames.items()}
            print(f"\n{args.subset} inputs, {path}, {c} call{'s' if c > 1 else ''}: fraction of oracle "
                  + ", ".join(f"{name} {v:.3f}" for name, v in fractions.items()))
            print(losses.head(args.top).round(2).to_string())
            worst = frames["scikit-learn"].assign(loss=lambda f: np.log(f[f"ratio@{c}"])).nlargest(args.top, "loss")
            print(worst[["id", "loss", f"choice@{c}", f"oracle@{c}"]].round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
