"""Would today's model choose as a dispatch run's model did, on the matrices the run timed? (CPU)

    python benchmarks/dispatch_model_choices.py benchmarks/results/dispatch-h100.json \\
        datasets/profiles/spmv-h100.csv --run-model 1378649:models/spmv-h100.json \\
        --model models/spmv-h100.json --out benchmarks/results

A ``benchmarks/dispatch.py`` run times the SpMV model shipped on its day; a model retrained since
may choose otherwise, and its figures then describe the earlier model. Each matrix's features come
from the profile table (the run's matrices are its inputs), all of them at once, as a validated
matrix's pass hands them to dispatch. For each set (real, large) and each call count the models
were trained for, this counts the matrices both models send to the same variant; at one call also
how many of the run's recorded first choices the run's model gives again from the table's
features, which says whether those stand for what the run computed. The run's cached-call loops
pass 100 calls on every matrix, so its timed choice is mostly the 100-call one.
``--run-model`` takes a file or ``REV:PATH`` (the model as committed at git revision REV).
Writes ``<run stem>-model-choices.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from scipy.stats import gmean

from seer.model import SelectorModel
from seer.profiling import write_result
from seer.table import PREPARE, TIME, read_table

REPO = Path(__file__).resolve().parents[1]


def load_model(spec: str) -> SelectorModel:
    """A model file, or ``REV:PATH`` read from git at revision REV (PATH from the repository's root)."""
    if Path(spec).is_file() or ":" not in spec:
        return SelectorModel.load(spec, "spmv")
    text = subprocess.run(["git", "show", spec], check=True, capture_output=True, text=True, cwd=REPO).stdout
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.json"
        path.write_text(text)
        return SelectorModel.load(path, "spmv")


def choices(model: SelectorModel, features: dict[str, dict[str, float]], calls: int) -> dict[str, str]:
    """Each matrix's variant at ``calls`` calls with every feature at hand (a validated matrix)."""
    picked = {}
    for matrix, values in features.items():
        known = {name: values[name] for name in model.known_features}
        free = {name: values[name] for name in model.gathered_features}
        picked[matrix] = model.choose(known, lambda: free, calls, free=free).variant
    return picked


def compare(run: dict, table_path: Path, run_model: SelectorModel, model: SelectorModel) -> dict:
    frame = read_table(table_path, "spmv").frame.set_index("id")
    names = sorted({*model.known_features, *model.gathered_features, *run_model.known_features,
                    *run_model.gathered_features})
    counts = sorted({*run_model.call_counts, *model.call_counts})
    result = {}
    for matrices in ("real_matrices", "large_matrices"):
        if matrices not in run:
            continue
        rows = run[matrices]["rows"]
        missing = [r["id"] for r in rows if r["id"] not in frame.index]
        if missing:
            sys.exit(f"{len(missing)} of the run's matrices are not in {table_path}, e.g. {missing[0]}: "
                     "name the table the run's models were trained on")
        features = {r["id"]: {n: float(frame.at[r["id"], n]) for n in names} for r in rows}
        recorded = choices(run_model, features, 1)
        by_count = {}
        for calls in counts:
            before, after = choices(run_model, features, calls), choices(model, features, calls)
            by_count[calls] = {"same": sum(before[m] == after[m] for m in features),
                               "table_time_run_over_today": _time_ratio(frame, before, after, calls),
                               "moved": _moves(before, after)}
        result[matrices] = {"matrices": len(rows),
                            "recorded_first_choice_given_again": sum(recorded[r["id"]] == r["seer_choice"] for r in rows),
                            "by_calls": by_count}
    return result


def _time_ratio(frame, before: dict[str, str], after: dict[str, str], calls: int) -> float:
    """Geometric mean over the matrices of the table's time per call of ``before``'s variant over
    ``after``'s, each variant's preparation shared over ``calls``."""
    def per_call(matrix: str, variant: str) -> float:
        prepare = frame.at[matrix, PREPARE + variant] if PREPARE + variant in frame else 0.0
        return frame.at[matrix, TIME + variant] + prepare / calls

    return float(gmean([per_call(m, before[m]) / per_call(m, after[m]) for m in before]))


def _moves(before: dict[str, str], after: dict[str, str]) -> dict[str, int]:
    """How many matrices moved from one variant to another, "a -> b", most first."""
    moves: dict[str, int] = {}
    for matrix in before:
        if before[matrix] != after[matrix]:
            key = f"{before[matrix]} -> {after[matrix]}"
            moves[key] = moves.get(key, 0) + 1
    return dict(sorted(moves.items(), key=lambda item: -item[1]))


def markdown(result: dict) -> str:
    lines = ["# A dispatch run's model against today's, on the run's matrices", "",
             f"Run: `{result['run']}` ({result['run_date']}), its model `{result['run_model']}` (trained "
             f"{result['run_model_date']}); today's `{result['model']}` (trained {result['model_date']}); features "
             f"from `{result['table']}`. `{result['command']}`", ""]
    for matrices, r in result["sets"].items():
        name = matrices.removesuffix("_matrices")
        lines += [f"## {name} ({r['matrices']} matrices)", "",
                  f"The run's model gives its recorded first choice again on {r['recorded_first_choice_given_again']} "
                  f"of {r['matrices']} from the table's features.", "",
                  "| calls | same variant | table time, run's model's choices over today's | "
                  "moved (run's model -> today's) |", "|---|---|---|---|"]
        for calls, c in r["by_calls"].items():
            moved = "; ".join(f"{k}: {n}" for k, n in c["moved"].items()) or "-"
            lines.append(f"| {calls} | {c['same']} | {c['table_time_run_over_today']:.3f} | {moved} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a benchmarks/dispatch.py result (.json)")
    parser.add_argument("table", type=Path, help="the profile table holding the run's matrices' features")
    parser.add_argument("--run-model", required=True, help="the model the run used: a file or REV:PATH")
    parser.add_argument("--model", required=True, help="the model to compare: a file or REV:PATH")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    run = json.loads(args.run.read_text())
    run_model, model = load_model(args.run_model), load_model(args.model)
    result = {"run": str(args.run), "run_date": run.get("date"), "table": str(args.table),
              "run_model": args.run_model, "run_model_date": run_model.training.get("date"),
              "model": args.model, "model_date": model.training.get("date"),
              "command": "python " + " ".join(sys.argv),
              "sets": compare(run, args.table, run_model, model)}
    write_result(args.out, f"{args.run.stem}-model-choices", result, markdown(result))


if __name__ == "__main__":
    main()
