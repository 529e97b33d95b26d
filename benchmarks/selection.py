"""Selection quality on held-out inputs, from a GPU profile table of any op.

Every number is out-of-fold: the table's rows are split by family (grouped K-fold: for SpMV a
matrix, its replicas and the matrices of its SuiteSparse group and problem kind never sit on both
sides; for GEMM a model's layer family) and each row is scored with a model trained without its
family. Kernel times come from
the table (CUDA events through ``do_bench``, median, L2 flushed). Host time of a whole call against
torch CSR is measured directly, side by side, by ``benchmarks/dispatch.py --matrices``; given its
result (``--dispatch``), this file quotes it beside the kernel times.

Two ways a first SpMV call can decide: a matrix seer validates (the default) brings its row
statistics from the validation pass, so stage 2 decides every input, charged what the statistics
add to that pass (``--validation``: measured per input by ``benchmarks/spmv_validation.py`` on the
same GPU, averaged over inputs of similar size); a matrix passed unchecked is decided by stage 1,
which gathers only where it says the table's ``gather_ms`` pays.

    python benchmarks/selection.py datasets/profiles/spmv-h100.csv \
        --validation benchmarks/results/spmv-validation-h100.json --dispatch benchmarks/results/dispatch-h100.json
    python benchmarks/selection.py datasets/profiles/gemm-h100.csv
write benchmarks/results/<op>-<device>.json and .md.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy.stats import trim_mean

from seer.datasets.cases import NNZ_BANDS, nnz_band_label
from seer.dispatch import SHIPPED_MODELS
from seer.profiling import device_tag, write_result
from seer.table import device_of, read_table
from seer.train import TwoStageSelector, subset_masks

SUBSET_NAMES = {"all": "all", "real": "real inputs (SuiteSparse matrices, LLM layer shapes)",
                "other": "derived and synthetic inputs"}


def column_title(column: str) -> str:
    """"1" -> "1 call", "100 validated" -> "100 calls, validated matrix"."""
    calls, _, validated = column.partition(" ")
    return f"{calls} call{'' if calls == '1' else 's'}" + (", validated matrix" if validated else "")


def end_to_end(path: Path, model: Path) -> dict:
    """The real-matrix summary of a ``benchmarks/dispatch.py --matrices`` result: one cached
    seer.dispatch call against one torch CSR call, host time included, measured side by side.
    ``model_date``: the training date of the model seer.dispatch ships for this table (``model``)
    when the result was measured before it, so a reader sees which model those calls ran."""
    result = json.loads(path.read_text())
    real, large = result.get("real_matrices"), result.get("large_matrices")
    if not real:
        raise SystemExit(f"{path} has no real-matrix section: run benchmarks/dispatch.py with --matrices")
    trained = json.loads(model.read_text())["training"]["date"] if model.is_file() else None
    earlier = trained is not None and str(result.get("date", "")) < trained
    return {**real["summary"], "source": str(path), "measured": result.get("date"),
            "model_date": trained if earlier else None, **({"large": large["summary"]} if large else {})}


TRIMMED = 0.1  # share of a band's measured differences cut at each end before their mean

SPREAD_METRICS = ("fraction_of_oracle_with_gather", "speedup_vs_best_single", "speedup_vs_cusparse")


def validation_costs(table, path: Path) -> tuple[np.ndarray, list[str]]:
    """Per table row, ms the row statistics add to the validation pass: the mean of the measured
    differences over the inputs of its nnz band, the TRIMMED share of them cut at each end, or 0
    where that mean is negative. Each input's own difference (with statistics minus without, ~5 us
    kernels at small sizes) is mostly timer noise of either sign: charging its positive part alone
    (this file's earlier rule) charged the noise, not the statistics; and one stalled timing moves
    a plain mean by more than the statistics cost (a 1M-10M band's mean read -0.13 us for a median
    of +0.47 when one input's pass without statistics stalled at 111 us against 14, NOTES SpMV 53).
    An input the file lacks (profiled after it) is charged its band's mean all the same, from the
    table's nnz; one whose band the file has not measured, the table's whole gather_ms."""
    def bands(nnz) -> np.ndarray:
        return np.digitize(np.asarray(nnz, dtype=float), [lo for lo, _ in NNZ_BANDS[1:]])

    rows = json.loads(path.read_text())["rows"]
    added_us = np.array([r["stats_us"] for r in rows])
    band_of = bands([r["nnz"] for r in rows])
    band_us = {b: max(float(trim_mean(added_us[band_of == b], TRIMMED)), 0.0) for b in set(band_of.tolist())}
    charged = {r["id"]: band_us[b] for r, b in zip(rows, band_of.tolist())}
    costs = np.array([charged.get(i, np.nan) for i in table.ids]) / 1e3
    absent = np.isnan(costs)
    costs[absent] = [band_us.get(b, np.nan) / 1e3 for b in bands(table.frame["nnz"])[absent]]
    unmeasured = np.isnan(costs)
    costs[unmeasured] = table.gather_ms[unmeasured]
    labels = [nnz_band_label(lo, hi) for lo, hi in NNZ_BANDS]
    notes = [f"validated path: the statistics are charged their nnz band's mean added time ({TRIMMED:.0%} trimmed at "
             "each end; a negative mean as 0), "
             f"from {path}: " + ", ".join(f"{labels[b]}: {band_us[b]:.3f} us" for b in sorted(band_us))]
    if (absent & ~unmeasured).any():
        notes.append(f"validated path: {int((absent & ~unmeasured).sum())} inputs absent from {path} are charged "
                     "their band's mean too")
    if unmeasured.any():
        notes.append(f"validated path: {int(unmeasured.sum())} inputs absent from {path}, in bands it has not "
                     "measured, are charged their whole gather_ms")
    return costs, notes


def fold_spread(scores: list[dict]) -> dict:
    """Mean, min and max of the headline metrics over assignments of groups to folds (the first:
    scikit-learn's, the one the headline tables report; the others seeded at random). ``scores``
    holds one ``{column: scores}`` per assignment (columns: "1", "100", "1 validated", ...)."""
    metrics = {}
    for column, per_subset in scores[0].items():
        for subset in per_subset:
            for metric in SPREAD_METRICS:
                values = [s[column][subset][metric] for s in scores if metric in s[column][subset]]
                if values:
                    metrics.setdefault(subset, {}).setdefault(column, {})[metric] = {
                        "mean": float(np.mean(values)), "min": min(values), "max": max(values)}
    return {"assignments": len(scores), "metrics": metrics}


def columns(report) -> dict:
    """``{column: {subset: metrics}}``: per call count, and per call count for validated matrices."""
    result = {str(c): {s: per_calls[c] for s, per_calls in report.scores.items()} for c in report.calls}
    for c in report.calls if report.validated_scores else ():
        result[f"{c} validated"] = {s: per_calls[c] for s, per_calls in report.validated_scores.items()}
    return result


def single_variants(table, calls: tuple[int, ...] = ()) -> dict:
    """Per subset, each variant run on every input: geometric-mean oracle time / its time, the
    inputs where it is the fastest (what a variant adds to the oracle; no model involved), the
    median of its one-time preparation (the table's ``prepare_ms``, 0 where absent), and per call
    count of ``calls`` the same fraction with every variant's preparation charged over the calls
    (``fraction_of_oracle_at``: the oracle seer's scores at that count are taken against)."""
    times, prepare = table.times, table.prepare_ms
    fastest = times.argmin(axis=1)

    def fraction_of_oracle(cost: np.ndarray) -> np.ndarray:
        return np.exp(np.log(cost.min(axis=1, keepdims=True) / cost).mean(axis=0))

    result = {}
    for subset, mask in subset_masks(table).items():
        fraction = fraction_of_oracle(times[mask])
        at = {c: fraction_of_oracle(times[mask] + prepare[mask] / c) for c in calls}
        median_prepare = np.median(prepare[mask], axis=0)
        result[subset] = {v: {"fraction_of_oracle": float(fraction[i]), "fastest_on": int((fastest[mask] == i).sum()),
                              "median_prepare_ms": float(median_prepare[i]),
                              "fraction_of_oracle_at": {str(c): float(at[c][i]) for c in calls}}
                          for i, v in enumerate(table.variants)}
    return result


def _minute(iso: str) -> str:
    return iso[:16].replace("T", " ") + " UTC"


def end_to_end_lines(summary: dict, e2e: dict, columns: int) -> list[str]:
    """Table rows quoting a dispatch.py summary: the cached call, and the first call if measured."""
    pad = " |" * (columns - 1)
    model = ("the shipped model's choice" if not e2e.get("model_date") else
             f"measured {_minute(e2e['measured'])} with the model shipped before the one trained {_minute(e2e['model_date'])}")
    lines = [f"| speedup_vs_cusparse, end-to-end cached call (a loop of calls on one matrix, its L2 warm where it "
             f"fits: not a 1-call figure; {summary['matrices']} matrices, `{e2e['source']}`; {model}) "
             f"| {summary['speedup_vs_torch_call']:.3f} |" + pad]
    if "first_call_speedup_vs_torch" in summary:
        lines.append("| speedup_vs_cusparse, first call on a new matrix (validation, decision and launch against "
                     f"torch's one call) | {summary['first_call_speedup_vs_torch']:.3f} |" + pad)
    return lines


def markdown(result: dict) -> str:
    lines = [f"# {result['op']} selection on {result['device']['name']}", "",
             f"Table `{result['table']}` ({result['rows']} inputs: {result['sources']}), measured "
             f"{result['measured']}; torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}.",
             f"Held-out: {result['folds']}-fold cross-validation grouped by family. Command: `{result['command']}`", ""]
    names = list(result["columns"])
    header = ["| metric | " + " | ".join(map(column_title, names)) + " |", "|---|" + "---|" * len(names)]
    for subset in result["scores"]:
        lines += [f"## {SUBSET_NAMES.get(subset, subset)} ({result['subset_rows'][subset]} inputs)", "", *header]
        for metric in result["columns"][names[0]][subset]:
            cells = [result["columns"][c][subset].get(metric) for c in names]
            lines.append(f"| {metric} | " + " | ".join("" if v is None else f"{v:.3f}" for v in cells) + " |")
        e2e = result.get("end_to_end") or {}
        measured = e2e if subset == "real" else e2e.get("large") if subset == "other" else None
        if measured:
            lines += end_to_end_lines(measured, e2e, len(names))
        lines.append("")
    lines += [f"Best single variant (chosen on training folds): {result['best_single']}.", "",
              "## Each variant alone (every input, no model)", "",
              "Per subset: fraction of oracle (time per call, preparation aside), the inputs it is fastest on, and "
              "the median of its one-time preparation on a new input in µs (the device timeline; `prepare_ms`).", "",
              "| variant | " + " | ".join(f"{SUBSET_NAMES.get(s, s)}: fraction of oracle, fastest on, preparation µs"
                                       for s in result["single_variants"]) + " |",
              "|---|" + "---|" * len(result["single_variants"])]
    for variant in result["variants"]:
        cells = [f"{per[variant]['fraction_of_oracle']:.3f}, {per[variant]['fastest_on']}, "
                 f"{per[variant]['median_prepare_ms'] * 1e3:.1f}"
                 for per in result["single_variants"].values()]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    lines += ["", "Over each subset's best variant alone (picked in-sample, on every input of the subset, at each "
              "call count with its preparation charged over the calls): seer's held-out fraction of oracle "
              "(gathering included) over that variant's, both against the oracle of that call count.", "",
              "| subset | " + " | ".join(map(column_title, names)) + " |", "|---|" + "---|" * len(names)]
    for subset, per in result["single_variants"].items():
        cells = []
        for c in names:
            calls = c.split()[0]
            best = max(per, key=lambda v: per[v]["fraction_of_oracle_at"][calls])
            ratio = result["columns"][c][subset]["fraction_of_oracle_with_gather"] / per[best]["fraction_of_oracle_at"][calls]
            cells.append(f"{ratio:.3f}x ({best})")
        lines.append(f"| {SUBSET_NAMES.get(subset, subset)} | " + " | ".join(cells) + " |")
    lines.append("")
    spread = result["fold_spread"]
    if spread["assignments"] > 1:
        runs = spread["assignments"]
        lines += ["## Spread over assignments of groups to folds", "",
                  f"The same nested CV with {runs} assignments of groups to folds (scikit-learn's, as above, and "
                  f"{runs - 1} seeded at random): mean (min - max). How far the figures above owe to one assignment.", "",
                  "| subset | metric | " + " | ".join(map(column_title, names)) + " |",
                  "|---|---|" + "---|" * len(names)]
        for subset, per_column in spread["metrics"].items():
            for metric in SPREAD_METRICS:
                cells = [per_column[c].get(metric) for c in names]
                if all(cells):
                    lines.append(f"| {subset} | {metric} | " + " | ".join(
                        f"{m['mean']:.3f} ({m['min']:.3f} - {m['max']:.3f})" for m in cells) + " |")
        lines.append("")
    lines += [f"Note: {n}" for n in result["notes"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", type=Path)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--validation", type=Path, default=None,
                        help="spmv-validation-<device>.json: also score matrices that seer validated")
    parser.add_argument("--dispatch", type=Path, default=None,
                        help="dispatch-<device>.json with a real-matrix section: quote its end-to-end speed-up")
    parser.add_argument("--fold-seeds", type=int, default=3,
                        help="also score with this many random assignments of groups to folds (the spread)")
    parser.add_argument("--calls", type=int, nargs="+", default=[1, 100],
                        help="the call counts scored (each input's preparation charged over them)")
    args = parser.parse_args()
    table = read_table(args.table)
    device = device_of(table.meta)  # a device given by its name alone too; before the cross-validation's minutes
    free, notes = validation_costs(table, args.validation) if args.validation else (None, [])
    calls = tuple(args.calls)
    report = TwoStageSelector().evaluate(table, calls=calls, free_gather_ms=free)
    report.notes.extend(notes)
    repeats = [columns(TwoStageSelector(fold_seed=seed).evaluate(table, calls=calls, free_gather_ms=free))
               for seed in range(args.fold_seeds)]
    meta = table.meta
    result = {
        "benchmark": f"{table.op} selection, held-out",
        "device": device, "versions": meta.get("versions", {}), "measured": meta.get("date"),
        "table": str(args.table), "command": " ".join(["python", *sys.argv]),
        **report.to_dict(),
        "single_variants": single_variants(table, calls),
        "validation": None if args.validation is None else str(args.validation),
        "columns": columns(report),
        "fold_spread": fold_spread([columns(report), *repeats]),
        "end_to_end": end_to_end(args.dispatch, SHIPPED_MODELS / f"{table.op}-{device_tag(device['name'])}.json")
        if args.dispatch else None,
    }
    write_result(args.out, f"{table.op}-{device_tag(device['name'])}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
