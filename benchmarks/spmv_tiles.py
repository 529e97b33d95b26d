"""Tile shapes of the row-mapped SpMV kernel on large regular matrices: which [ROWS, G] tile and
warp count moves the most bytes on this GPU, and whether prefetching the next step helps.

    python benchmarks/spmv_tiles.py [--out benchmarks/results] [--budget-s 150] [--no-tile-grid]

Matrices: the banded and 3-D stencil matrices of 10M+ nonzeros of the large synthetic suite, where
the shipped vector variants reach the least of the copy ceiling (``spmv-bandwidth-<device>.md``).
Each gets the shipped row-mapped variants, a grid of tiles (G lanes per row, ROWS rows per
program, warps; ``--no-tile-grid`` skips it), the shipped tiles with prefetching
(``prefetch_g<G>``: the next step's indices and values are loaded before this step's x gather, so
two loads are in flight instead of a dependent chain), the shipped tiles with Triton's software
pipeline over the row loop (``staged<S>_g<G>``: ``tl.range(..., num_stages=S)``, which turns the
three loads of a step into asynchronous copies to shared memory, S - 1 steps ahead) and cuSPARSE,
every result checked against the float64 reference; throughput is
the minimum bytes of ``spmv_bandwidth.py`` over the copy ceiling measured in the same run. Writes
``spmv-tiles-<device>.json`` / ``.md`` (``spmv-pipelining-<device>`` without the tile grid).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl
from spmv_bandwidth import minimum_bytes

from seer.datasets.cases import spmv_cases
from seer.kernels import spmv
from seer.profiling import device_tag, environment, relative_error, time_ms, write_result

FAMILIES = ("synthetic/banded/", "synthetic/stencil_3d/")
MIN_NNZ = 10_000_000
GROUPS = (4, 8, 16, 32)
TILE_ELEMENTS = (512, 1024, 2048)  # ROWS * G
WARPS = (4, 8)
SHIPPED = ("scalar_r128", "vector_g4", "vector_g8", "vector_g16", "vector_g32")
SHIPPED_ROWS = {4: 128, 8: 64, 16: 32, 32: 16}  # rows per program of the shipped vector variants
STAGES = (2, 3, 4)
KINDS = ("shipped", "tile", "prefetch", "staged")


@triton.jit
def _prefetch_rows_kernel(indptr, indices, values, x, x_stride, y, y_stride, rows,
                          ROWS: tl.constexpr, G: tl.constexpr):
    """The vector kernel with step i + 1's indices and values loaded before step i's x gather."""
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = row < rows
    start = tl.load(indptr + row, mask=ok, other=0)
    end = tl.load(indptr + row + 1, mask=ok, other=0)
    k = start[:, None] + tl.arange(0, G)[None, :]
    stop = end[:, None]
    inside = k < stop
    col = tl.load(indices + k, mask=inside, other=0)
    a = tl.load(values + k, mask=inside, other=0.0)
    acc = tl.zeros(k.shape, dtype=tl.float32)
    for _ in range(0, tl.max(end - start, axis=0), G):
        k_next = k + G
        inside_next = k_next < stop
        col_next = tl.load(indices + k_next, mask=inside_next, other=0)
        a_next = tl.load(values + k_next, mask=inside_next, other=0.0)
        xv = tl.load(x + col * x_stride, mask=inside, other=0.0)
        acc += a.to(tl.float32) * xv.to(tl.float32)
        k, inside, col, a = k_next, inside_next, col_next, a_next
    tl.store(y + row * y_stride, tl.sum(acc, axis=1).to(y.dtype.element_ty), mask=ok)


@triton.jit
def _staged_rows_kernel(indptr, indices, values, x, x_stride, y, y_stride, rows,
                        ROWS: tl.constexpr, G: tl.constexpr, STAGES: tl.constexpr):
    """The vector kernel with its row loop software-pipelined by Triton over STAGES stages."""
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = row < rows
    start = tl.load(indptr + row, mask=ok, other=0)
    end = tl.load(indptr + row + 1, mask=ok, other=0)
    first = start[:, None] + tl.arange(0, G)[None, :]
    stop = end[:, None]
    acc = tl.zeros(first.shape, dtype=tl.float32)
    for step in tl.range(0, tl.max(end - start, axis=0), G, num_stages=STAGES):
        k = first + step
        inside = k < stop
        col = tl.load(indices + k, mask=inside, other=0)
        a = tl.load(values + k, mask=inside, other=0.0)
        xv = tl.load(x + col * x_stride, mask=inside, other=0.0)
        acc += a.to(tl.float32) * xv.to(tl.float32)
    tl.store(y + row * y_stride, tl.sum(acc, axis=1).to(y.dtype.element_ty), mask=ok)


def staged_spmv(csr, x: torch.Tensor, group: int, stages: int) -> torch.Tensor:
    y = torch.empty(csr.rows, dtype=csr.values.dtype, device=x.device)
    rows = SHIPPED_ROWS[group]
    _staged_rows_kernel[(triton.cdiv(csr.rows, rows),)](
        csr.indptr, csr.indices, csr.values, x, x.stride(0), y, y.stride(0), csr.rows, ROWS=rows, G=group,
        STAGES=stages, num_warps=4)
    return y


def prefetch_spmv(csr, x: torch.Tensor, group: int) -> torch.Tensor:
    y = torch.empty(csr.rows, dtype=csr.values.dtype, device=x.device)
    rows = SHIPPED_ROWS[group]
    _prefetch_rows_kernel[(triton.cdiv(csr.rows, rows),)](
        csr.indptr, csr.indices, csr.values, x, x.stride(0), y, y.stride(0), csr.rows, ROWS=rows, G=group, num_warps=4)
    return y


def copy_gbps() -> float:
    """Device-to-device copy of 1 GiB, bytes read + written."""
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / time_ms(lambda: dst.copy_(src)) / 1e6


def tiles() -> list[tuple[int, int, int]]:
    return [(g, elements // g, warps) for g in GROUPS for elements in TILE_ELEMENTS for warps in WARPS]


def measure(case, ceiling: float, tile_grid: bool = True) -> dict:
    parts, (x,) = case.build(case.load())
    csr = spmv.problem(parts)
    reference = spmv.reference(csr, x)
    nbytes = minimum_bytes(csr.rows, csr.cols, csr.nnz)
    runs = {name: (lambda v=spmv.VARIANTS[name]: v.run(csr, x)) for name in SHIPPED}
    for g, rows, warps in tiles() if tile_grid else ():
        runs[f"g{g}_r{rows}_w{warps}"] = (lambda run=spmv._rows_variant(rows, g, warps)[0]: run(csr, x))
    for g in SHIPPED_ROWS:
        runs[f"prefetch_g{g}"] = (lambda g=g: prefetch_spmv(csr, x, g))
        for stages in STAGES:
            runs[f"staged{stages}_g{g}"] = (lambda g=g, stages=stages: staged_spmv(csr, x, g, stages))
    runs["cusparse"] = lambda: case.baselines["cusparse"](csr, x)
    fractions = {}
    for name, fn in runs.items():
        if relative_error(fn(), reference) > 1e-4:
            raise AssertionError(f"{name} is wrong on {case.id}")
        fractions[name] = nbytes / time_ms(fn) / 1e6 / ceiling
    return {"id": case.id, "nnz": csr.nnz, "mean_row": csr.nnz / csr.rows, "fraction_of_copy": fractions}


def _kind(name: str) -> str:
    if name in SHIPPED:
        return "shipped"
    return next((k for k in ("prefetch", "staged") if name.startswith(k)), "tile")


def _best(fractions: dict, kind: str) -> tuple[str, float]:
    """The best configuration of one of KINDS, or ("-", nan) if none was measured."""
    found = [(n, v) for n, v in fractions.items() if n != "cusparse" and _kind(n) == kind]
    return max(found, key=lambda i: i[1]) if found else ("-", float("nan"))


def markdown(result: dict) -> str:
    rows = result["matrices"]
    names = list(rows[0]["fraction_of_copy"])
    median = {n: float(np.median([r["fraction_of_copy"][n] for r in rows])) for n in names}
    best = {kind: [_best(r["fraction_of_copy"], kind) for r in rows] for kind in KINDS}
    lines = [f"# SpMV tile shapes on large regular matrices, {result['device']['name']}", "",
             f"torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}, measured "
             f"{result['date']}; `{result['command']}`. Copy ceiling {result['copy_gbps']:.0f} GB/s (same run). "
             "Fractions of it from the minimum bytes; do_bench medians, L2 flushed.", "",
             f"Median over {len(rows)} matrices of the best configuration per matrix: shipped variants "
             f"{np.median([v for _, v in best['shipped']]):.0%}, other tiles {np.median([v for _, v in best['tile']]):.0%}, "
             f"prefetching {np.median([v for _, v in best['prefetch']]):.0%}, software-pipelined "
             f"{np.median([v for _, v in best['staged']]):.0%}; cuSPARSE {median['cusparse']:.0%}.", "",
             "| matrix | mean row | best shipped | best other tile | best prefetching | best pipelined | cuSPARSE |",
             "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows):
        cells = [f"{name} {value:.0%}" for name, value in (best[k][i] for k in KINDS)]
        lines.append(f"| {r['id']} | {r['mean_row']:.0f} | " + " | ".join(cells) +
                     f" | {r['fraction_of_copy']['cusparse']:.0%} |")
    lines += ["", "Median fraction of copy per configuration:", "", "| configuration | median |", "|---|---|"]
    lines += [f"| {n} | {median[n]:.0%} |" for n in sorted(names, key=median.get, reverse=True)]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=150)
    parser.add_argument("--no-tile-grid", action="store_true", help="skip the grid of other tiles")
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
        rows.append(measure(case, ceiling, tile_grid=not args.no_tile_grid))
        best = max(rows[-1]["fraction_of_copy"].items(), key=lambda item: item[1])
        print(f"{case.id}: best {best[0]} {best[1]:.0%} ({time.monotonic() - started:.0f} s)", flush=True)
        torch.cuda.empty_cache()
    device = torch.device("cuda")
    result = {**environment(device), "command": " ".join(["python", *sys.argv]), "copy_gbps": ceiling,
              "matrices": rows}
    # Without the grid the run compares the loop's schedules only: a file of its own.
    name = "spmv-tiles" if not args.no_tile_grid else "spmv-pipelining"
    write_result(args.out, f"{name}-{device_tag(torch.cuda.get_device_name())}", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
