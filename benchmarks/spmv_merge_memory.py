"""The merge SpMV kernel's atomics and loads: what each costs it on large inputs.

    python benchmarks/spmv_merge_memory.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 200]

Why: Nsight Compute (``spmv-ncu-h100.md``) shows the merge kernel and cuSPARSE both bound by the
L2's tag lookups (requests, not sectors), the merge kernel making ~1.25x more of them for
1.07x the sectors, and 16-byte loads or L2-only caching did not change that
(``spmv-merge-loads-h100.md``). The SASS of the kernel shows why L1 was no help: its atomic add
(a row cut by a chunk edge) had Triton's default semantics, acquire-release, which compiles to
a memory barrier before the atomic and an invalidation of the SM's whole L1 (``CCTL.IVALL``)
after it, up to two per program, so every program on the SM lost the row pointers and x values
it had cached. The sums only need the addition to be atomic; nothing reads them before the
kernel ends. Configurations of the merge kernel (``_merge_kernel``'s constexprs): as it was
(acquire-release atomics, 4-byte loads), relaxed atomics, and relaxed atomics with 16-byte
index/value loads. Each large input (every family, round-robin) gets every shipped variant,
each merge variant in every configuration and cuSPARSE; every result checked against float64,
timed in interleaved rounds (least median). Writes ``spmv-merge-memory-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import defaultdict
from contextlib import closing
from pathlib import Path

import torch
import triton
from scipy.stats import gmean

from seer.datasets.cases import spmv_cases
from seer.kernels import spmv
from seer.profiling import (_least_of_rounds, _loaded_ahead, device_tag, environment, relative_error,
                            write_result)

MERGES = [name for name, v in spmv.VARIANTS.items() if v.params["kind"] == "merge"]
CONFIGS = {  # _merge_kernel constexprs; the first is the kernel as it was before these experiments
    "before": {"VECTOR_LOADS": False, "ATOMIC_SEM": "acq_rel"},
    "relaxed": {"VECTOR_LOADS": False, "ATOMIC_SEM": "relaxed"},
    "relaxed+16-byte": {"VECTOR_LOADS": True, "ATOMIC_SEM": "relaxed"},
}


def family(case_id: str) -> str:
    return "/".join(case_id.split("/")[:2])


def round_robin(cases: list) -> list:
    by_family = defaultdict(list)
    for case in cases:
        by_family[family(case.id)].append(case)
    return [c for group in itertools.zip_longest(*by_family.values()) for c in group if c is not None]


def configured_merge(csr, x, sub_rows, params: dict, config: str) -> torch.Tensor:
    """A merge variant's kernel in one of CONFIGS, through Triton's own launch."""
    y = torch.zeros(csr.rows, dtype=torch.float32, device=x.device)
    spmv._merge_kernel[(triton.cdiv(csr.nnz, params["chunk"]),)](
        csr.indptr, csr.indices, csr.values, x, x.stride(0), y, y.stride(0), sub_rows, csr.nnz, params["chunk"],
        params["bracket"], **CONFIGS[config], num_warps=params["num_warps"])
    return y


def measure(case, loaded) -> dict:
    parts, (x,) = case.build(loaded)
    csr = spmv.problem(parts)
    reference = spmv.reference(csr, x)
    runs = {name: (lambda v=v: v.run(csr, x)) for name, v in spmv.VARIANTS.items() if name not in MERGES}
    for name in MERGES:
        params = spmv.VARIANTS[name].params
        sub_rows = spmv._bracket_rows(csr, params["bracket"])
        for config in CONFIGS:
            runs[f"{name}@{config}"] = lambda p=params, s=sub_rows, c=config: configured_merge(csr, x, s, p, c)
    runs["cusparse"] = lambda: case.baselines["cusparse"](csr, x)
    for name, fn in runs.items():
        error = relative_error(fn(), reference)
        if not error <= 1e-4:
            raise AssertionError(f"{name} is wrong on {case.id}: relative error {error:.1e}")
    return {"id": case.id, "nnz": csr.nnz, "time_ms": _least_of_rounds(runs)}


def markdown(result: dict) -> str:
    rows = result["matrices"]
    others = [n for n in spmv.VARIANTS if n not in MERGES]
    lines = [f"# The merge SpMV kernel's atomics and loads, {result['device']['name']}", "",
             f"torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}, measured "
             f"{result['date']}; `{result['command']}`. do_bench medians (L2 flushed), least of three "
             "interleaved rounds; every result checked against float64.", "",
             "Geometric means per family of the merge kernel's speed-up in each configuration over the "
             f"kernel as it was ({next(iter(CONFIGS))}), best of the merge variants per matrix; then the best "
             "variant per matrix over cuSPARSE with the merge variants in each configuration, and how "
             "often a merge variant is the fastest:", "",
             "| family | matrices | " + " | ".join(CONFIGS) + " | " +
             " | ".join(f"best / cuSPARSE, {c}" for c in CONFIGS) + " | merge fastest |",
             "|" + "---|" * (3 + 2 * len(CONFIGS))]

    def merge_best(r, config):
        return min(r["time_ms"][f"{n}@{config}"] for n in MERGES)

    def overall_best(r, config):
        return min(merge_best(r, config), *(r["time_ms"][n] for n in others))

    first = next(iter(CONFIGS))
    for fam in sorted({family(r["id"]) for r in rows}) + ["all"]:
        group = [r for r in rows if fam == "all" or family(r["id"]) == fam]
        gains = [gmean([merge_best(r, first) / merge_best(r, c) for r in group]) for c in CONFIGS]
        over = [gmean([r["time_ms"]["cusparse"] / overall_best(r, c) for r in group]) for c in CONFIGS]
        best_config = max(CONFIGS, key=lambda c: gmean([merge_best(r, first) / merge_best(r, c) for r in rows]))
        wins = sum(merge_best(r, best_config) <= overall_best(r, best_config) for r in group)
        lines.append(f"| {fam} | {len(group)} | " + " | ".join(f"{g:.2f}x" for g in gains) + " | " +
                     " | ".join(f"{o:.2f}x" for o in over) + f" | {wins} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=200)
    args = parser.parse_args()
    started = time.monotonic()
    cases = round_robin([c for c in spmv_cases([args.matrices], synthetic="large") if c.source != "real"])
    rows = []
    with closing(_loaded_ahead(cases)) as loads:
        for case in cases:
            if time.monotonic() - started > args.budget_s:
                print(f"budget reached: {len(cases) - len(rows)} matrices left", flush=True)
                break
            rows.append(measure(case, next(loads).result()))
            t = rows[-1]["time_ms"]
            best = min(t, key=t.get)
            print(f"{case.id}: " + ", ".join(f"{c} {min(t[f'{n}@{c}'] for n in MERGES) * 1e3:.1f}" for c in CONFIGS) +
                  f" us (best merge); fastest {best} {t[best] * 1e3:.1f} us ({time.monotonic() - started:.0f} s)",
                  flush=True)
            torch.cuda.empty_cache()
    device = torch.device("cuda")
    result = {**environment(device), "command": " ".join(["python", *sys.argv]), "configs": CONFIGS,
              "matrices": rows}
    write_result(args.out, f"spmv-merge-memory-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
