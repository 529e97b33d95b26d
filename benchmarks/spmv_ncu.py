"""Nsight Compute counters of SpMV kernels on large matrices: where their time goes.

    python benchmarks/spmv_ncu.py [--out benchmarks/results] [--variants merge_c512 adaptive ...]
                                  [--matrices irregular|regular|small] [--stem spmv-ncu]

Runs itself under ``ncu --clock-control none`` (the card's clocks are left alone), each variant,
cuSPARSE and the gather bound (``x.index_select(0, indices)``) twice (one ncu run each) on one of
three pairs of matrices:
- ``irregular``: an R-MAT (scale 20, edge factor 16, a = 0.57: power-law rows and columns) and a
  log-normal matrix (918,559 rows of mean length 8, sigma 1, uniform columns);
- ``regular``: bands of half-width 24, full (49 nonzeros a row) and half full, where the H200's
  row-mapped kernels stream slowest (``spmv-floor-h200.md``);
- ``small``: two R-MATs of scale 18 (2-3M nonzeros), the size at which the kernels sit furthest
  above their gather bound (``spmv-floor-*.md``).
Tabulates per kernel: duration, DRAM, L2 and L1 throughput (% of peak), hit rates, occupancy and
registers; per nonzero the L2 sectors read for the L1, the L1's load requests and sectors, and the
instructions; and the warp cycles between two issued instructions, by stall reason. Writes
``<stem>-<device>.md`` and the raw report ``<stem>-<device>.txt``.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

METRICS = ("Duration", "DRAM Throughput", "L2 Cache Throughput", "L1/TEX Cache Throughput", "L1/TEX Hit Rate",
           "L2 Hit Rate", "Achieved Occupancy", "Registers Per Thread")
# Which unit of the L2 and of the L1 is the busiest (printed in the raw report only).
BREAKDOWNS = ("breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed",
              "breakdown:l1tex__throughput.avg.pct_of_peak_sustained_elapsed")
# Per-nonzero traffic: sectors the L1 asked of the L2, load requests and sectors at the L1,
# instructions; divided by the matrix's nonzeros in the table.
COUNTERS = ("lts__t_sectors_srcunit_tex_op_read.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "smsp__inst_executed.sum")
# Warp cycles between two issued instructions (all reasons) and the share of them per stall reason.
ISSUE = "smsp__average_warps_active_per_issue_active.ratio"
STALLS = ("long_scoreboard", "lg_throttle", "wait", "not_selected", "selected", "short_scoreboard", "mio_throttle",
          "math_pipe_throttle", "drain", "barrier", "branch_resolving", "dispatch_stall", "no_instruction", "membar")
STALL_METRICS = tuple(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALLS)
# seer's kernels, cuSPARSE's, the gather bound's (index_select's gather kernel) and the zeroing of y before
# merge's atomics
KERNELS = r"merge_kernel|rows_kernel|adaptive_kernel|csrmv|partition_kernel|scatter_gather|vectorized_elementwise"
MATRICES = {"irregular": {"rmat scale 20, ef 16, a 0.57": ("rmat", (20, 16, 0.57, 0.19, 0.19)),
                          "log-normal rows 918559, mean 8, sigma 1": ("lognormal_rows", (918559, 918559, 8, 1.0))},
            "regular": {"banded 274372, half-width 24, full": ("banded", (274372, 24, 1.0)),
                        "banded 1800000, half-width 24, half full": ("banded", (1800000, 24, 0.5))},
            "small": {"rmat scale 18, ef 16, a 0.57": ("rmat", (18, 16, 0.57, 0.19, 0.19)),
                      "rmat scale 18, ef 16, a 0.75": ("rmat", (18, 16, 0.75, 0.1, 0.1))}}
ALL_MATRICES = {name: spec for group in MATRICES.values() for name, spec in group.items()}


def workload(matrix: str, variant: str) -> None:
    """What ncu profiles: one variant (or cuSPARSE) twice on one matrix."""
    import numpy as np
    import torch

    from seer.datasets import generators
    from seer.kernels import spmv
    from seer.sparse import as_csr

    generator, args = ALL_MATRICES[matrix]
    A = getattr(generators, generator)(*args, seed=1)
    parts = (torch.from_numpy(A.indptr.astype(np.int32)).cuda(), torch.from_numpy(A.indices.astype(np.int32)).cuda(),
             torch.from_numpy(A.data).cuda(), A.shape)
    # x made on the host, so that no kernel but the workload's own matches KERNELS
    csr, x = as_csr(parts), (torch.rand(A.shape[1]) - 0.5).cuda()
    print(f"nnz {csr.nnz}", flush=True)
    if variant == "gather":  # the gather bound: the matrix's x requests and nothing else
        run = lambda: x.index_select(0, csr.indices)  # noqa: E731
    elif variant == "cusparse":
        tensor = torch.sparse_csr_tensor(*parts[:3], A.shape)
        run = lambda: tensor @ x  # noqa: E731
    else:
        run = lambda: spmv.VARIANTS[variant].run(csr, x)  # noqa: E731
    for _ in range(2):
        run()
    torch.cuda.synchronize()


def parse(report: str) -> list[dict]:
    """One dict per profiled kernel launch: its name and the metrics of METRICS it reports."""
    launches, nnz = [], None
    for line in report.splitlines():
        if line.startswith("nnz "):
            nnz = int(line.split()[1])
        elif re.match(r"^  \S.*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line):
            launches.append({"kernel": line.strip().split("(")[0].split("<")[0].split()[-1], "nnz": nnz})
        elif launches:
            for metric in METRICS + COUNTERS + (ISSUE,) + STALL_METRICS:
                found = re.match(rf"^\s+{re.escape(metric)}\s+(?:(\S+)\s+)?([\d.,]+)$", line)
                if found:
                    unit, value = found.groups()
                    launches[-1][metric] = float(value.replace(",", "")) * (1e3 if unit == "ms" else 1)
    return launches


def markdown(launches: list[dict], about: dict, command: str) -> str:
    """``about``: :func:`seer.profiling.environment` of the run, plus the ncu version."""
    versions = about["versions"]
    lines = [f"# Nsight Compute counters of SpMV kernels, {about['device']['name']}", "",
             f"torch {versions.get('torch')}, triton {versions.get('triton')}, CUDA {versions.get('cuda')}, "
             f"{about.get('ncu', 'ncu')}; measured {about['date']}; `{command}` (ncu --clock-control none; "
             "each kernel's second launch; durations in us, throughputs in % of peak).", "",
             "| matrix | variant | kernel | " + " | ".join(METRICS) + " |", "|" + "---|" * (3 + len(METRICS))]
    seen = {}
    for launch in launches:  # the second launch of each (matrix, variant, kernel) replaces the first
        seen[(launch["matrix"], launch["variant"], launch["kernel"])] = launch
    for (matrix, variant, kernel), launch in seen.items():
        lines.append(f"| {matrix} | {variant} | {kernel} | " +
                     " | ".join(f"{launch.get(m, float('nan')):.1f}" for m in METRICS) + " |")
    lines += ["", "Per nonzero of the matrix (each kernel's second launch):", "",
              "| matrix | variant | kernel | " + " | ".join(f"`{c}`" for c in COUNTERS) + " |",
              "|" + "---|" * (3 + len(COUNTERS))]
    for (matrix, variant, kernel), launch in seen.items():
        if all(c in launch for c in COUNTERS) and launch.get("nnz"):
            lines.append(f"| {matrix} | {variant} | {kernel} | " +
                         " | ".join(f"{launch[c] / launch['nnz']:.3f}" for c in COUNTERS) + " |")
    lines += ["", "Warp cycles between two issued instructions, and the share of them each stall reason takes "
              "(reasons under 3% everywhere left out):", ""]
    shown = [r for r, m in zip(STALLS, STALL_METRICS)
             if any(run.get(m, 0) >= 0.03 * run[ISSUE] for run in seen.values() if run.get(ISSUE))]
    lines += ["| matrix | variant | kernel | cycles per issue | " + " | ".join(shown) + " |",
              "|" + "---|" * (4 + len(shown))]
    for (matrix, variant, kernel), launch in seen.items():
        if launch.get(ISSUE):
            shares = [launch.get(STALL_METRICS[STALLS.index(r)], float("nan")) / launch[ISSUE] for r in shown]
            lines.append(f"| {matrix} | {variant} | {kernel} | {launch[ISSUE]:.1f} | "
                         + " | ".join(f"{v:.0%}" for v in shares) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--variants", nargs="+", default=["merge_c512", "adaptive"])
    parser.add_argument("--matrices", choices=sorted(MATRICES), default="irregular")
    parser.add_argument("--stem", default="spmv-ncu", help="file names: <stem>-<device>.md / .txt")
    parser.add_argument("--workload", nargs=2, metavar=("MATRIX", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.workload:
        workload(*args.workload)
        return 0
    import torch

    from seer.profiling import device_tag, environment

    reports, launches = [], []
    for matrix in MATRICES[args.matrices]:
        for variant in [*args.variants, "cusparse", "gather"]:
            command = ["ncu", "--clock-control", "none", "--section", "SpeedOfLight", "--section",
                       "MemoryWorkloadAnalysis", "--section", "Occupancy", "--section", "LaunchStats",
                       "--section", "WarpStateStats", "--metrics", ",".join(COUNTERS + BREAKDOWNS + (ISSUE,) + STALL_METRICS),
                       "--kernel-name", f"regex:{KERNELS}", sys.executable, __file__, "--workload", matrix, variant]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"ncu failed on {matrix} / {variant}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            report = done.stdout
            reports.append(f"##### {matrix} | {variant}\n{report}")
            launches += [{**launch, "matrix": matrix, "variant": variant} for launch in parse(report)]
    device = torch.cuda.get_device_name()
    stem = f"{args.stem}-{device_tag(device)}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.txt").write_text("\n".join(reports))
    ncu_version = subprocess.run(["ncu", "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    about = {**environment(torch.device("cuda")), "ncu": ncu_version[-1] if ncu_version else "ncu"}
    text = markdown(launches, about, " ".join(["python", *sys.argv]))
    (args.out / f"{stem}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
