"""How many rows of partial results the last program of a first call's launch adds up at a step.

Both launches that validate a matrix on a first call (the validating product on small matrices,
the pass on the rest) end the same way: every program stores its row of counts, and the last to
arrive adds all the rows up (``seer.sparse.add_up_found``), ``ROWS_AT_ONCE`` rows a step. With up
to 264 programs that is five dependent loads from L2 at 64 rows a step. Scratch probes found the
validating product's statistics costing +0.58 µs in median only in a kernel with that add-up, and
at 128 rows a step the same time with and without them (NOTES SpMV 53); a first run of this
benchmark (``results/spmv-add-up-h100-earlier-runs/``) had 64 rows a step best on few programs,
wider steps on many, and seer now picks the step by the programs (``seer.sparse.add_up_step``).
This times each input's first launch at every step of STEPS, with and without statistics, in alternation (CUDA events,
L2 flushed, least of three medians), after checking every step's totals against the host's twin
of the pass and the validating product's y against a float64 reference.

    python benchmarks/spmv_add_up.py --matrices .carry/suitesparse --out benchmarks/results
    python benchmarks/spmv_add_up.py --render benchmarks/results/spmv-add-up-h100.json
"""
from __future__ import annotations

import sys

import numpy as np
import torch
from spmv_pass_tiles import host_twin, sampled_main  # sibling scripts: benchmarks/ is on the path when run
from spmv_validation import first_launch, subsets

from seer import sparse
from seer.kernels import spmv
from seer.profiling import TIMING_ROUNDS, _least_of_rounds, provenance, relative_error
from seer.sparse import as_csr

STEPS = (0, 32, 64, 128, 256)  # 0: every program adds its row up with atomics (an experiment)
BASELINE = 64  # the step both launches took for every input before this benchmark
SHIPPED = "by programs"  # the row of the step seer.sparse.add_up_step picked for each input when measured
TOLERANCE = 1e-4


def launches(csr, launch: str) -> tuple[dict, torch.Tensor | None, torch.Tensor | None]:
    """``{(step, stats): launch}``, the input's first launch at every add-up step with and without
    statistics (each returns its totals buffer); for the validating product also the y it writes
    and y's float64 reference (else None, None)."""
    if launch == "pass":
        return {(step, stats): (lambda t=step, s=stats: sparse.launch_structure(csr, True, s, step=t))
                for step in STEPS for stats in (True, False)}, None, None
    x = torch.rand(csr.cols, dtype=csr.dtype, device=csr.device) + 0.5
    y = torch.empty(csr.rows, dtype=csr.dtype, device=csr.device)
    fns = {(step, stats): (lambda t=step, s=stats: spmv._launch_validating_product(csr, x, y, stats=s, step=t))
           for step in STEPS for stats in (True, False)}
    return fns, y, torch.from_numpy(csr.to_scipy() @ x.double().cpu().numpy())


def check(case_id: str, csr, fns: dict, y: torch.Tensor | None, reference: torch.Tensor | None) -> None:
    """Every launch's totals (with statistics) against the host's twin of the pass, and every
    validating product's y, computed into a poisoned y, against the float64 reference."""
    expected = host_twin(csr)
    for (step, stats), fn in fns.items():
        if y is not None:
            y.fill_(float("nan"))
        found = sparse.read_totals(fn(), csr.device)
        if stats and found != expected:
            raise AssertionError(f"{case_id}: {step} rows a step adds up other totals than the host's twin")
        if y is not None and not relative_error(y, reference) <= TOLERANCE:
            raise AssertionError(f"{case_id}: the validating product at {step} rows a step computes a wrong y")


def measure(case, loaded) -> dict:
    source, _ = case.build(loaded)
    csr = as_csr(source, check=False)
    launch = first_launch(csr)
    fns, y, reference = launches(csr, launch)
    check(case.id, csr, fns, y, reference)
    least = _least_of_rounds(fns, rep_ms=TIMING_ROUNDS * 25)
    blocks = spmv.validating_blocks(csr) if launch == "validating product" else sparse.pass_blocks(csr, True)
    programs = min(blocks, len(sparse.totals_buffers(csr.device)[0]))
    return {"id": case.id, "source": case.source, "rows": csr.rows, "nnz": csr.nnz, "first_launch": launch,
            "programs": programs, "shipped_step": sparse.add_up_step(programs), "steps": {str(step): {"stats_us": least[(step, True)] * 1e3, "plain_us": least[(step, False)] * 1e3}
                      for step in STEPS}}


PROGRAMS = ((1, 64), (65, 128), (129, 10**9))


def groups(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """:func:`spmv_validation.subsets`, the real matrices split by their first launch and their
    programs (PROGRAMS: the widths of the add-up steps)."""
    out = []
    for name, group in subsets(rows):
        for launch in ("validating product", "pass"):
            for lo, hi in PROGRAMS if name == "real" else ((1, 10**9),):
                part = [r for r in group if r["first_launch"] == launch and lo <= r["programs"] <= hi]
                label = f"{name}, {launch}, {lo}-{hi} programs" if hi < 10**9 else f"{name}, {launch}, {lo}+ programs"
                label = label if name == "real" else name
                if part:
                    out.append((label, part))
    return out


def summary(rows: list[dict]) -> list[dict]:
    """Per group and step, and at the step seer picks (SHIPPED): the median launch with
    statistics (what a first call waits for) and without, the median of with over BASELINE's with, and the statistics' charge as
    ``selection.py`` takes it (10%-trimmed mean), against the same step's plain launch and
    against the fastest plain launch of any step."""
    from scipy.stats import trim_mean

    out = []
    for name, group in groups(rows):
        fastest_plain = np.array([min(s["plain_us"] for s in r["steps"].values()) for r in group])
        baseline = np.array([r["steps"][str(BASELINE)]["stats_us"] for r in group])
        for step in [*group[0]["steps"], SHIPPED]:
            picked = [r["steps"][str(r["shipped_step"]) if step == SHIPPED else step] for r in group]
            with_stats = np.array([p["stats_us"] for p in picked])
            plain = np.array([p["plain_us"] for p in picked])
            out.append({"subset": name, "step": step, "inputs": len(group),
                        "stats_us": float(np.median(with_stats)), "plain_us": float(np.median(plain)),
                        "over_baseline": float(np.median(with_stats / baseline)),
                        "added_us": float(trim_mean(with_stats - plain, 0.1)),
                        "added_over_fastest_us": float(trim_mean(with_stats - fastest_plain, 0.1))})
    return out


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"# SpMV first launch: rows added up a step, {env['device']['name']}", "",
             provenance(env, result["command"]) + f"; {len(result['rows'])} inputs.", "",
             "Device time of each input's first launch (the validating product within its bounds, else the pass), "
             "µs (CUDA events, L2 flushed, least of three medians in alternation). with / plain: with and without "
             f"statistics, medians; over {result['baseline']}: median over inputs of with / with at {result['baseline']} "
             "rows a step (both launches' step before this benchmark); added: with minus plain at the same step, "
             "and with minus the fastest plain launch of any step (the charge), 10%-trimmed means. Rows a step "
             f"'{SHIPPED}': each input at the step `seer.sparse.add_up_step` picked for its programs "
             f"(of {', '.join(map(str, result['shipped_steps']))}).", "",
             f"| inputs | count | rows a step | with | plain | over {result['baseline']} | added | added over fastest plain |",
             "|---|---|---|---|---|---|---|---|"]
    for s in result["summary"]:
        lines.append(f"| {s['subset']} | {s['inputs']} | {s['step']} | {s['stats_us']:.2f} | {s['plain_us']:.2f} | "
                     f"{s['over_baseline']:.3f} | {s['added_us']:+.2f} | {s['added_over_fastest_us']:+.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    return sampled_main(__doc__, "spmv-add-up", "spmv first launch add-up steps", measure, summary, markdown,
                        real_every=1, steps=STEPS, baseline=BASELINE, shipped_steps=sparse.ADD_UP_STEPS)


if __name__ == "__main__":
    sys.exit(main())
