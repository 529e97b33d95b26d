"""Tile shapes of the row-mapped SpMV kernel on large regular matrices: which [ROWS, G] tile and
warp count moves the most bytes on this GPU.

    python benchmarks/spmv_tiles.py [--out benchmarks/results] [--budget-s 150]

Matrices: the banded and 3-D stencil matrices of 10M+ nonzeros of the large synthetic suite, where
the shipped vector variants reach the least of the copy ceiling (``spmv-bandwidth-<device>.md``).
Each gets the shipped row-mapped variants, a grid of tiles (G lanes per row, ROWS rows per
program, warps) and cuSPARSE, every result checked against the float64 reference; throughput is
the minimum bytes of ``spmv_bandwidth.py`` over the copy ceiling measured in the same run. Writes
``spmv-tiles-<device>.json`` / ``.md``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from seer.datasets.cases import spmv_cases
from seer.kernels import spmv
from seer.profiling import device_tag, environment, relative_error, time_ms, write_result

FAMILIES = ("synthetic/banded/", "synthetic/stencil_3d/")
MIN_NNZ = 10_000_000
GROUPS = (4, 8, 16, 32)
TILE_ELEMENTS = (512, 1024, 2048)  # ROWS * G
WARPS = (4, 8)
SHIPPED = ("scalar_r128", "vector_g4", "vector_g8", "vector_g16", "vector_g32")


def copy_gbps() -> float:
    """Device-to-device copy of 1 GiB, bytes read + written."""
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / time_ms(lambda: dst.copy_(src)) / 1e6


def tiles() -> list[tuple[int, int, int]]:
    return [(g, elements // g, warps) for g in GROUPS for elements in TILE_ELEMENTS for warps in WARPS]


def measure(case, ceiling: float) -> dict:
    parts, (x,) = case.build()
    csr = spmv.problem(parts)
    reference = spmv.reference(csr, x)
    nbytes = 8 * csr.nnz + 4 * (csr.rows + 1) + 4 * csr.cols + 4 * csr.rows
    runs = {name: (lambda v=spmv.VARIANTS[name]: v.run(csr, x)) for name in SHIPPED}
    for g, rows, warps in tiles():
        runs[f"g{g}_r{rows}_w{warps}"] = (lambda run=spmv._rows_run(rows, g, warps): run(csr, x))
    runs["cusparse"] = lambda: case.baselines["cusparse"](csr, x)
    fractions = {}
    for name, fn in runs.items():
        if relative_error(fn(), reference) > 1e-4:
            raise AssertionError(f"{name} is wrong on {case.id}")
        fractions[name] = nbytes / time_ms(fn) / 1e6 / ceiling
    return {"id": case.id, "nnz": csr.nnz, "mean_row": csr.nnz / csr.rows, "fraction_of_copy": fractions}


def markdown(result: dict) -> str:
    rows = result["matrices"]
    names = list(rows[0]["fraction_of_copy"])
    median = {n: float(np.median([r["fraction_of_copy"][n] for r in rows])) for n in names}
    best_tile = max((n for n in names if n not in SHIPPED and n != "cusparse"), key=median.get)
    shipped_best = [max(r["fraction_of_copy"][n] for n in SHIPPED) for r in rows]
    lines = [f"# SpMV tile shapes on large regular matrices, {result['device']['name']}", "",
             f"torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}, measured "
             f"{result['date']}; `{result['command']}`. Copy ceiling {result['copy_gbps']:.0f} GB/s (same run). "
             "Fractions of it from the minimum bytes; do_bench medians, L2 flushed.", "",
             f"Median over {len(rows)} matrices: best shipped variant per matrix "
             f"{np.median(shipped_best):.0%}; best single tile {best_tile} {median[best_tile]:.0%}; "
             f"best tile per matrix {np.median([max(r['fraction_of_copy'].values()) for r in rows]):.0%}; "
             f"cuSPARSE {median['cusparse']:.0%}.", "",
             "| matrix | mean row | best shipped | best tile | cuSPARSE |", "|---|---|---|---|---|"]
    for r, shipped in zip(rows, shipped_best):
        tiles_only = {n: v for n, v in r["fraction_of_copy"].items() if n not in SHIPPED and n != "cusparse"}
        tile = max(tiles_only, key=tiles_only.get)
        lines.append(f"| {r['id']} | {r['mean_row']:.0f} | {shipped:.0%} | {tile} {tiles_only[tile]:.0%} "
                     f"| {r['fraction_of_copy']['cusparse']:.0%} |")
    lines += ["", "Median fraction of copy per configuration:", "", "| configuration | median |", "|---|---|"]
    lines += [f"| {n} | {median[n]:.0%} |" for n in sorted(names, key=median.get, reverse=True)]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=150)
    args = parser.parse_args()
    started = time.monotonic()
    ceiling = copy_gbps()
    cases = [c for c in spmv_cases([], synthetic="large")
             if c.id.startswith(FAMILIES) and c.extra["size"] >= MIN_NNZ]
    rows = []
    for case in cases:
        if time.monotonic() - started > args.budget_s:
            print(f"budget reached: {len(cases) - len(rows)} matrices left", flush=True)
            break
        rows.append(measure(case, ceiling))
        best = max(rows[-1]["fraction_of_copy"].items(), key=lambda item: item[1])
        print(f"{case.id}: best {best[0]} {best[1]:.0%} ({time.monotonic() - started:.0f} s)", flush=True)
        torch.cuda.empty_cache()
    device = torch.device("cuda")
    result = {**environment(device), "command": " ".join(["python", *sys.argv]), "copy_gbps": ceiling,
              "matrices": rows}
    write_result(args.out, f"spmv-tiles-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
