"""The cached call's host path before and after a change, alternated on one host (a host's drift
between two runs is larger than what a small change costs: NOTES, Dispatch host cost).

On this machine, the tree before the change into a git-ignored folder that travels to the GPU:
    rm -rf .carry/before && mkdir -p .carry/before && git archive <commit> seer kernels features models \\
        datasets/__init__.py datasets/cases.py datasets/generators.py datasets/suitesparse.py pyproject.toml \\
        README.md | tar -x -C .carry/before
On the GPU machine (carry .carry), installing each tree in turn, ``--rounds`` rounds of each, of the
SpMV layers (``benchmarks/host_path.py``) or with ``--op gemm`` the GEMM forms (``benchmarks/gemm_host.py``):
    python3 benchmarks/host_path_ab.py --run [--op gemm] --rounds 3 --out $OUT/ab
Then here, from the rounds' files:
    python3 benchmarks/host_path_ab.py --summarise benchmarks/results/<folder>
which writes <folder>/README.md: per round, each layer's µs, and the medians of the dispatch layer's
own cost (SpMV: ``dispatch_out`` less ``bound_call_out``; ``dispatch`` less ``bound_call``; GEMM, per
variant: ``dispatch`` less ``bound``, ``bound`` less ``torch_matmul``, ``dispatch_new`` less ``matmul_new``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

SIDES = {"before": ".carry/before", "after": "."}
PAIRS = (("dispatch_out", "bound_call_out"), ("dispatch", "bound_call"), ("dispatch_arrays_out", "bound_call_out"),
         ("dispatch_arrays", "bound_call"))
GEMM_PAIRS = (("dispatch", "bound"), ("bound", "torch_matmul"), ("dispatch_new", "matmul_new"))
SCRIPTS = {"spmv": ["benchmarks/host_path.py", "--matrices", ".carry/suitesparse"], "gemm": ["benchmarks/gemm_host.py"]}


def run(rounds: int, out: Path, op: str = "spmv") -> None:
    for round_ in range(1, rounds + 1):
        for side, tree in SIDES.items():
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                            "--no-index", "-e", tree], check=True, capture_output=True)
            folder = out / f"{side}{round_}"
            # A fresh interpreter: this one imported nothing of seer, the benchmark imports the tree just installed.
            subprocess.run([sys.executable, *SCRIPTS[op], "--out", str(folder)], check=True, capture_output=True)
            print(side, round_, next(folder.glob("*.md")).read_text())
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "-e", "."], check=True, capture_output=True)


def summarise(folder: Path) -> str:
    if any(folder.glob("*/gemm-host-*.json")):
        return _summarise_gemm(folder)
    rounds = {path.parent.name: json.loads(path.read_text()) for path in sorted(folder.glob("*/host-path-*.json"))}
    first = next(iter(rounds.values()))
    layers = list(first["host_us"])
    lines = [f"# The cached call's host path before and after, {first['environment']['device']['name']}", "",
             f"{first['environment']['date']}; torch {first['environment']['versions']['torch']}, triton "
             f"{first['environment']['versions']['triton']}; `python benchmarks/host_path_ab.py --run` (each round "
             f"`{first['command']}` into its folder), summarised by `python benchmarks/host_path_ab.py --summarise "
             f"{folder}`. Matrix {first['matrix']}, variant {first['variant']}; µs per call, least of "
             f"{first['rounds']} alternated loops of {first['calls']}.", "",
             "| round | " + " | ".join(layers) + " |", "|---|" + "---|" * len(layers)]
    lines += [f"| {name} | " + " | ".join(f"{data['host_us'][layer]:.2f}" for layer in layers) + " |"
              for name, data in rounds.items()]
    # The separate-array layers where every round timed them (host_path.py has since session 40).
    pairs = [(d, b) for d, b in PAIRS if all(d in data["host_us"] for data in rounds.values())]
    lines += ["", "The dispatch layer's own cost, median over the rounds (µs):", "",
              "| side | " + " | ".join(f"{d} - {b}" for d, b in pairs) + " |", "|---|" + "---|" * len(pairs)]
    for side in SIDES:
        mine = [data["host_us"] for name, data in rounds.items() if name.startswith(side)]
        lines.append(f"| {side} | " + " | ".join(f"{statistics.median(r[d] - r[b] for r in mine):.2f}"
                                                for d, b in pairs) + " |")
    text = "\n".join(lines) + "\n"
    (folder / "README.md").write_text(text)
    return text


def _summarise_gemm(folder: Path) -> str:
    """The GEMM rounds (``gemm_host.py``'s files): per variant and round each form's least µs, then per
    variant and side the medians over the rounds of :data:`GEMM_PAIRS`' differences."""
    rounds = {path.parent.name: json.loads(path.read_text()) for path in sorted(folder.glob("*/gemm-host-*.json"))}
    first = next(iter(rounds.values()))
    env = first["environment"]
    lines = [f"# The cached GEMM call's host path before and after, {env['device']['name']}", "",
             f"{env['date']}; torch {env['versions']['torch']}, triton {env['versions']['triton']}; `python "
             f"benchmarks/host_path_ab.py --run --op gemm` (each round `{first['command']}` into its folder), "
             f"summarised by `python benchmarks/host_path_ab.py --summarise {folder}`. bf16; µs per call, least of "
             f"{first['rounds']} alternated loops of {first['calls']}."]
    for variant, case in first["results"].items():
        forms = list(case["least_us"])
        lines += ["", f"## {variant} ({'x'.join(map(str, case['shape']))})", "",
                  "| round | " + " | ".join(forms) + " |", "|---|" + "---|" * len(forms)]
        lines += [f"| {name} | " + " | ".join(f"{data['results'][variant]['least_us'][f]:.2f}" for f in forms) + " |"
                  for name, data in rounds.items()]
        pairs = [(d, b) for d, b in GEMM_PAIRS if d in forms and b in forms]
        lines += ["", "| side | " + " | ".join(f"{d} - {b}" for d, b in pairs) + " |", "|---|" + "---|" * len(pairs)]
        for side in SIDES:
            mine = [data["results"][variant]["least_us"] for name, data in rounds.items() if name.startswith(side)]
            lines.append(f"| {side} | " + " | ".join(f"{statistics.median(r[d] - r[b] for r in mine):.2f}"
                                                    for d, b in pairs) + " |")
    text = "\n".join(lines) + "\n"
    (folder / "README.md").write_text(text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--run", action="store_true")
    action.add_argument("--summarise", type=Path)
    parser.add_argument("--op", choices=sorted(SCRIPTS), default="spmv", help="with --run: which host benchmark")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("out/ab"))
    args = parser.parse_args()
    if args.run:
        run(args.rounds, args.out, args.op)
    else:
        print(summarise(args.summarise))
    return 0


if __name__ == "__main__":
    sys.exit(main())
