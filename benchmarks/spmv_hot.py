"""Hot-column packing on large irregular matrices: does packing the most used x entries together
lift the SpMV kernels where x gathers miss at sector granularity?

    python benchmarks/spmv_hot.py --matrices .carry/suitesparse [--out benchmarks/results] [--budget-s 300]

Why: on scrambled power-law matrices (R-MAT) every nonzero gathers its x value from a random
32-byte sector, and the few thousand most used columns are spread over as many sectors, more
than L1 holds (NOTES SpMV 3, 11). ``hot`` variants renumber the ``H`` most used columns into a
packed copy of x (gathered once per call, H values) so that eight of them share a sector and the
whole set stays in L1. Matrices: the large suite's R-MAT, log-normal and permuted derived
matrices, and a few stencils and bands as controls, taken round-robin by family until the budget
ends. Each gets the shipped variants of the kinds the hot kernels extend, the hot variants for
several H and cuSPARSE, every result checked against float64, timed in interleaved rounds (least
median). Writes ``spmv-hot-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import defaultdict
from contextlib import closing
from pathlib import Path

import numpy as np
import torch

from seer.datasets.cases import spmv_cases
from seer.kernels import spmv
from seer.profiling import (_least_of_rounds, _loaded_ahead, device_tag, environment, relative_error,
                            write_result)

FAMILIES = ("synthetic/rmat/", "synthetic/lognormal_rows/", "derived/", "synthetic/stencil_3d/",
            "synthetic/banded/")
SHIPPED = ("scalar_r128", "vector_g16", "vector_g64", "merge_c256", "merge_c512", "merge_c1024", "adaptive")
HOT = {  # name -> run(csr, x); H packed columns at most
    **{f"hot{h // 1024}k_merge_c{c}": spmv._merge_run(c, 32, 4, hot=h) for c in (256, 512, 1024) for h in (16384, 65536)},
    **{f"hot{h // 1024}k_merge_c512": spmv._merge_run(512, 32, 4, hot=h) for h in (4096, 262144)},
    "hot64k_vector_g16": spmv._rows_run(32, 16, 4, hot=65536),
    "hot64k_vector_g64": spmv._rows_run(8, 64, 4, hot=65536),
    "hot64k_scalar_r128": spmv._rows_run(128, 1, 4, hot=65536),
}


def round_robin(cases: list) -> list:
    """Cases of each family in turn, so a run cut short by its budget still covers every family."""
    by_family = defaultdict(list)
    for case in cases:
        family = next((f for f in FAMILIES if case.id.startswith(f)), None)
        if family is not None and (family != "derived/" or "permute1" in case.id):
            by_family[family].append(case)
    return [c for group in itertools.zip_longest(*by_family.values()) for c in group if c is not None]


def packed_share(csr, limit: int) -> tuple[int, float]:
    """Columns packed and the share of nonzeros that read them, for ``limit`` packed columns."""
    plan = spmv._hot_plan(csr, limit)
    return plan.count, float((plan.indices < plan.count).float().mean())


def measure(case, loaded) -> dict:
    parts, (x,) = case.build(loaded)
    csr = spmv.problem(parts)
    reference = spmv.reference(csr, x)
    runs = {name: (lambda v=spmv.VARIANTS[name]: v.run(csr, x)) for name in SHIPPED}
    runs.update({name: (lambda run=run: run(csr, x)) for name, run in HOT.items()})
    runs["cusparse"] = lambda: case.baselines["cusparse"](csr, x)
    for name, fn in runs.items():
        error = relative_error(fn(), reference)
        if not error <= 1e-4:
            raise AssertionError(f"{name} is wrong on {case.id}: relative error {error:.1e}")
    times = _least_of_rounds(runs)
    count, share = packed_share(csr, 65536)
    return {"id": case.id, "rows": csr.rows, "cols": csr.cols, "nnz": csr.nnz,
            "packed_64k": count, "packed_64k_nnz_share": share, "time_ms": times}


def _geomean(values) -> float:
    return float(np.exp(np.mean(np.log(values))))


def markdown(result: dict) -> str:
    rows = result["matrices"]
    hot_names = list(HOT)
    lines = [f"# Hot-column packing on large irregular matrices, {result['device']['name']}", "",
             f"torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}, measured "
             f"{result['date']}; `{result['command']}`. do_bench medians (L2 flushed), least of "
             "three interleaved rounds; every result checked against float64.", "",
             "Speed-up of the best hot variant over the best shipped variant of the same kinds, and of each "
             "hot variant over the plain variant it extends (geometric means per family):", ""]
    families = sorted({next(f for f in FAMILIES if r["id"].startswith(f)) for r in rows})
    header = "| family | matrices | nnz share of the 64k most used columns | best hot / best shipped | " + \
        " | ".join(hot_names) + " |"
    lines += [header, "|" + "---|" * (4 + len(hot_names))]
    for family in families:
        group = [r for r in rows if r["id"].startswith(family)]
        best_ratio = _geomean([min(r["time_ms"][n] for n in SHIPPED) / min(r["time_ms"][n] for n in hot_names)
                               for r in group])
        per_variant = [_geomean([r["time_ms"][_plain(n)] / r["time_ms"][n] for r in group]) for n in hot_names]
        share = np.median([r["packed_64k_nnz_share"] for r in group])
        lines.append(f"| {family.rstrip('/')} | {len(group)} | {share:.2f} | {best_ratio:.2f}x | "
                     + " | ".join(f"{v:.2f}x" for v in per_variant) + " |")
    lines += ["", "Per matrix: best shipped and best hot variant (ms), cuSPARSE (ms):", "",
              "| matrix | nnz | nnz share, 64k packed | best shipped | best hot | cuSPARSE |", "|---|---|---|---|---|---|"]
    for r in rows:
        shipped = min(SHIPPED, key=r["time_ms"].get)
        hot = min(hot_names, key=r["time_ms"].get)
        lines.append(f"| {r['id']} | {r['nnz']:,} | {r['packed_64k_nnz_share']:.2f} | {shipped} {r['time_ms'][shipped]:.4f} | "
                     f"{hot} {r['time_ms'][hot]:.4f} | {r['time_ms']['cusparse']:.4f} |")
    return "\n".join(lines) + "\n"


def _plain(hot_name: str) -> str:
    """The shipped variant a hot variant extends: "hot16k_merge_c512" -> "merge_c512"."""
    return hot_name.split("_", 1)[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=Path, required=True, help="folder of the real matrices (derived inputs)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=300)
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
            shipped, hot = min(SHIPPED, key=t.get), min(HOT, key=t.get)
            print(f"{case.id}: {shipped} {t[shipped]:.4f} ms, {hot} {t[hot]:.4f} ms "
                  f"({time.monotonic() - started:.0f} s)", flush=True)
            torch.cuda.empty_cache()
    device = torch.device("cuda")
    result = {**environment(device), "command": " ".join(["python", *sys.argv]), "matrices": rows}
    write_result(args.out, f"spmv-hot-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
