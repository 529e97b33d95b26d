"""Would timing seer's choice against cuSPARSE once, mid-loop, pay? Scored from a profile table.

A held-out tree can send a matrix of a kind it never saw to a variant several times slower than
cuSPARSE (with one family per generator, a log-normal matrix of 9,375 rows went to `vector_g64` at
5.2x the oracle, NOTES SpMV 71). A *guard* would bound such losses by measurement: at call ``g`` of
a loop on one matrix of 1M+ nonzeros (where dispatch already decides again), prepare
`cusparse_prepared`, time it and the bound variant ``RUNS`` times each, and keep the faster for the
calls left. This prices that design on the table's cold-L2 kernel times before building it:

    loop of c calls, unguarded:  c t_v + p_v + s
    guarded (c > g):             g t_v + p_v + s + [p_r + RUNS (t_v + t_r) + SYNC_MS] + (c - g) min(t_v, t_r)

with t and p a variant's time and preparation, v the held-out choice for c calls (validated path,
``selection.py --validation``), r `cusparse_prepared`, s the statistics' cost. Scored on the large
set under the shipped families and with one family per generator, four fold assignments each:

    python benchmarks/selection_guard.py datasets/profiles/spmv-h200.csv \\
        --validation benchmarks/results/spmv-validation-h200.json --out benchmarks/results

writes ``selection-guard-<device>.md`` and ``.json``.
"""
from __future__ import annotations

import sys

import numpy as np

from seer.train import TwoStageSelector
from selection_by_generator import FOLD_SEEDS, by_generator, fold_label, study_arguments, write_study

REFERENCE = "cusparse_prepared"
GUARD_FROM_NNZ = 1_000_000  # dispatch decides again from here (features/spmv.py, redecides)
RUNS = 3  # timed runs of each of the two variants
SYNC_MS = 0.05  # the host's wait for the timings and the events' read-back
PLANS = ((10, 100), (10, 1000), (100, 1000), (100, 10_000))  # (guard call g, loop length c)


def loop_costs(table, choice: np.ndarray, statistics_ms: np.ndarray, guard_at: int | None, calls: int) -> np.ndarray:
    """ms per row for a loop of ``calls`` calls on ``choice`` (variant indices), guarded at call
    ``guard_at`` (None: never)."""
    rows, ref = np.arange(len(choice)), table.variants.index(REFERENCE)
    t, p = table.times, table.prepare_ms
    t_v, p_v, t_r, p_r = t[rows, choice], p[rows, choice], t[:, ref], p[:, ref]
    cost = calls * t_v + p_v + statistics_ms
    if guard_at is None or guard_at >= calls:
        return cost
    guarded = (guard_at * t_v + p_v + statistics_ms + p_r + RUNS * (t_v + t_r) + SYNC_MS
               + (calls - guard_at) * np.minimum(t_v, t_r))
    applies = (table.frame["nnz"].to_numpy() >= GUARD_FROM_NNZ) & (choice != ref)
    return np.where(applies, guarded, cost)


def scores(table, statistics_ms) -> list[dict]:
    large = (table.frame["source"] != "real").to_numpy()
    oracle = {c: (c * table.times + table.prepare_ms).min(axis=1) for _, c in PLANS}
    counts = sorted({c for _, c in PLANS if c in TwoStageSelector().calls} | {1000})
    rows = []
    for seed in FOLD_SEEDS:
        report = TwoStageSelector(fold_seed=seed).evaluate(table, calls=counts, free_gather_ms=statistics_ms)
        held_out = report.validated_held_out
        row = {"fold_seed": seed}
        for g, c in PLANS:
            # The trees stop at 1,000 calls: longer loops run the 1,000-call choice.
            choice = np.array([table.variants.index(v) for v in held_out[f"choice@{min(c, 1000)}"]])
            ratio = {name: loop_costs(table, choice, statistics_ms, at, c)[large] / oracle[c][large]
                     for name, at in (("unguarded", None), ("guarded", g))}
            row[f"{g}/{c}"] = {name: {"fraction_of_oracle": float(np.exp(-np.log(r).mean())), "worst": float(r.max())}
                               for name, r in ratio.items()}
        rows.append(row)
    return rows


def main() -> int:
    args, table, statistics_ms, header = study_arguments(__doc__)
    result = {**header, "reference": REFERENCE, "runs": RUNS, "sync_ms": SYNC_MS,
              "groupings": {name: scores(t, statistics_ms)
                            for name, t in (("shipped", table), ("by generator", by_generator(table)))}}
    lines = [f"# A guard against cuSPARSE, priced from the table, {table.meta['device']['name']}", "",
             f"Table `{args.table}` (measured {table.meta.get('date')}); command: `{result['command']}`. Large set, "
             f"held out, validated path; each cell: fraction of the oracle unguarded -> guarded (worst row's "
             f"multiple of the oracle, unguarded -> guarded); guard at call g of a loop of c calls, {RUNS} timed "
             f"runs of each variant, {SYNC_MS} ms of host wait.", "",
             "| grouping | fold assignment | " + " | ".join(f"g {g}, c {c:,}" for g, c in PLANS) + " |",
             "|---|---|" + "---|" * len(PLANS)]
    for name, rows in result["groupings"].items():
        for row in rows:
            cells = [f"{row[k]['unguarded']['fraction_of_oracle']:.3f} -> {row[k]['guarded']['fraction_of_oracle']:.3f} "
                     f"({row[k]['unguarded']['worst']:.2f}x -> {row[k]['guarded']['worst']:.2f}x)"
                     for k in (f"{g}/{c}" for g, c in PLANS)]
            lines.append(f"| {name} | {fold_label(row['fold_seed'])} | " + " | ".join(cells) + " |")
    write_study(args, "selection-guard", result, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
