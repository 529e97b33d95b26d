"""GEMM with B as ``F.linear`` reads it (``W.t()`` of an N x K weight) beside row-major B.

    python benchmarks/gemm_layouts.py --out benchmarks/results [--limit N] [--budget-s S]

The shipped GEMM models were trained on row-major operands (``gemm_profile.py``'s
``random_operands``) and read shapes and dtype, not layout: a transposed B gets the choice made
for a row-major one, and a TMA variant falls back to pointer loads on it. For each held-out LLM
shape (``gemm.py``'s) and each layout of B: every shipped variant checked and timed (the oracle;
``gemm.py``'s ``variant_times``), and ``seer.dispatch`` on a cached decision against ``torch.matmul``
end to end (``gemm.py``'s ``end_to_end_us``: loops of calls over operand copies). Writes
``gemm-layouts-<gpu>.json`` and ``.md`` under ``--out``.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemm as results  # noqa: E402  (held-out shapes, geometric means)
import gemm_profile as sweep  # noqa: E402  (operands and timing)

LAYOUTS = ("row-major", "transposed")


def operands(shape: sweep.Shape, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A and B of ``shape``; a transposed B is the view ``W.t()`` of a contiguous N x K ``W``."""
    a, b = sweep.random_operands(shape.m, shape.n, shape.k, shape.dtype, seed=7)
    return (a, b) if layout == "row-major" else (a, b.t().contiguous().t())


def measure(shape: sweep.Shape, layout: str, timer: sweep.Timer, log=print) -> dict:
    import seer
    from seer.kernels import gemm

    a, b = operands(shape, layout)
    problem = gemm.problem((a, b))
    c = torch.empty(shape.m, shape.n, device="cuda", dtype=shape.dtype)
    ref = gemm.reference(problem, a, b)
    row = {"id": shape.id, "layout": layout, "m": shape.m, "n": shape.n, "k": shape.k,
           **results.variant_times(problem, a, b, c, ref, timer, log, f"{shape.id}, B {layout}")}
    row["choice"] = seer.explain("gemm", (a, b)).variant
    seer.dispatch("gemm", (a, b))  # decided and cached: the loops time the cached call, checked here
    row["seer_error"] = results.cached_call_error(a, b, c, ref, None)
    if not row["seer_error"] <= sweep.TOLERANCE:
        log(f"  WRONG seer.dispatch ({row['choice']}) on {shape.id}, B {layout}: {row['seer_error']:.2e}")
    copies = results.rotated_operands(a, b.contiguous(), seed=8)[1:]  # row-major: laid out as ``b`` below
    sets = [(a, b), *((x, w if layout == "row-major" else w.t().contiguous().t()) for x, w in copies)]
    return row | results.end_to_end_us(sets, None, results.fastest_ms(row))


def summarise(rows: list[dict]) -> dict:
    """Per layout: seer (dispatch included) and its choice against torch.matmul and the oracle, over
    the shapes whose every figure was checked right (the others named)."""
    from seer.kernels.gemm import VARIANTS

    summary = {}
    for layout in LAYOUTS:
        mine = [r for r in rows if r["layout"] == layout]
        left_out = [r["id"] for r in mine if not r["seer_error"] <= sweep.TOLERANCE
                    or not all(np.isfinite([r[f"time_ms:{n}"] for n in VARIANTS]))]
        mine = [r for r in mine if r["id"] not in left_out]
        if not mine:
            continue
        oracle = np.array([min(r[f"time_ms:{n}"] for n in VARIANTS) for r in mine])
        chosen = np.array([r[f"time_ms:{r['choice']}"] for r in mine])
        torch_ms = np.array([r["time_ms:torch_matmul"] for r in mine])
        torch_loop = np.array([r["loop_us:torch_matmul"] for r in mine])
        seer_loop = np.array([r["loop_us:seer"] for r in mine])
        summary[layout] = {
            "shapes": len(mine),
            "left_out": left_out,
            "speedup_over_torch_matmul_dispatch_included": results.geomean(torch_loop / seer_loop),
            "speedup_over_torch_matmul": results.geomean(torch_ms / chosen),
            "fraction_of_oracle": results.geomean(oracle / chosen),
            "slower_than_torch_by_5pct": int(np.sum(seer_loop > 1.05 * torch_loop)),
            "choices_of_torch_matmul": int(sum(r["choice"] == "torch_matmul" for r in mine)),
        }
    return summary


def markdown(summary: dict, env: dict, rows: list[dict]) -> str:
    lines = [f"# GEMM: B row-major and B = W.t() ({env['device']['name']})", "",
             f"Command: `{env['command']}`; {env['date']}; torch {env['versions'].get('torch')}, "
             f"triton {env['versions'].get('triton')}. Shapes: `gemm.py`'s held-out LLM shapes, bf16; times "
             "as `gemm.py` takes them: kernels checked, then the least of its interleaved do_bench medians with the "
             "L2 flushed; end to end, loops of calls on seer's cached decision and on torch.matmul over operand "
             "copies that make twice the L2.", "",
             "| B | shapes | torch.matmul / seer, loops of calls (dispatch included) | choice / torch.matmul | choice / oracle | "
             "seer > 1.05x torch | choices of torch_matmul |", "|---|---|---|---|---|---|---|"]
    for layout, s in summary.items():
        lines.append(f"| {layout} | {s['shapes']} | {s['speedup_over_torch_matmul_dispatch_included']:.3f}x | "
                     f"{s['speedup_over_torch_matmul']:.3f}x | {s['fraction_of_oracle']:.3f} | "
                     f"{s['slower_than_torch_by_5pct']} | {s['choices_of_torch_matmul']} |")
    lines += ["", "| shape | B | choice | seer loop µs | torch.matmul loop µs | choice ms | torch.matmul ms | oracle |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        oracle = min(((v, k.removeprefix("time_ms:")) for k, v in r.items() if k.startswith("time_ms:") and v == v),
                     default=(float("nan"), "none checked right"))
        chosen_ms = r["time_ms:" + r["choice"]]
        lines.append(f"| {r['id']} | {r['layout']} | {r['choice']} | {r['loop_us:seer']:.1f} | "
                     f"{r['loop_us:torch_matmul']:.1f} | {chosen_ms:.4f} | {r['time_ms:torch_matmul']:.4f} | "
                     f"{oracle[1]} {oracle[0]:.4f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=400)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("gemm_layouts.py times kernels on a CUDA GPU; none is visible")
    from seer.profiling import device_tag, environment, write_result

    started = time.monotonic()
    shapes = [s for s in results.held_out_shapes(0, seed=0) if s.source == "real"][: args.limit]
    env = {**environment(torch.device("cuda", torch.cuda.current_device())),
           "command": " ".join([sys.executable, *sys.argv])}
    timer, rows = sweep.Timer(), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TMA fallback on a transposed B, once per variant
        for shape in shapes:
            if time.monotonic() > started + args.budget_s:
                print(f"budget reached after {len(rows) // 2} of {len(shapes)} shapes")
                break
            rows += [measure(shape, layout, timer) for layout in LAYOUTS]
            torch.cuda.empty_cache()
    summary = summarise(rows)
    write_result(args.out, f"gemm-layouts-{device_tag(env['device']['name'])}",
                 {"env": env, "summary": summary, "rows": [results.json_row(r) for r in rows]},
                 markdown(summary, env, rows))
    return 1 if any(layout["left_out"] for layout in summary.values()) or len(summary) < len(LAYOUTS) else 0


if __name__ == "__main__":
    sys.exit(main())
