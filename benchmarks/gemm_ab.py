"""The shipped GEMM variants' kernel time under two versions of kernels/gemm.py, in one process.

A change to the shared tile loop reaches every Triton variant (and the overlap patterns, which
call the same loop). Here the version before the change is imported from a file as a module of
its own, so both versions' kernels run side by side on one GPU, alternated within each round:

    git show <commit>:kernels/gemm.py > .carry/gemm-before.py                     (this machine)
    python benchmarks/gemm_ab.py --before .carry/gemm-before.py --label "<change>" --out benchmarks/results

Shapes: LLM layers (``seer.kernels.gemm.llm_shapes``) at a few token counts, B row-major (a
weight stored K x N) and B a transposed view (``W.t()`` of an N x K weight, as ``F.linear`` reads
it). Every result is checked against torch.matmul first. Each time is the least over rounds of
``seer.profiling.time_ms`` (median of 20+ runs, L2 flushed). The TMA variants do not run the tile
loop: they are the control, whose ratio shows the run's noise. Writes ``gemm-ab-<device>.json``
and ``.md`` under ``--out``.

    python benchmarks/gemm_ab.py --before .carry/gemm-before.py --label "<change>" --out benchmarks/results --ptx

needs no GPU: it compiles both versions' ``_gemm_kernel`` for sm_90 (128x128x64 tiles, 8 warps, 3
stages; strides and sizes as a launch specialises them) and counts, in the PTX, the asynchronous
copies by width and the 64-bit adds, into ``gemm-ab-ptx.md``.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import inspect
import math
import re
import sys
from pathlib import Path

import torch
from scipy.stats import gmean

TOKENS = (8, 128, 2048)
LAYERS = ("llama-8b/qkv", "llama-8b/mlp_down", "llama-70b/o", "mixtral-8x7b/mlp_up")
TOLERANCE = 2e-2  # relative 2-norm difference from torch.matmul, as benchmarks/gemm_profile.py


def load_before(path: Path, name: str = "seer.kernels.gemm_before"):
    """``path`` imported as the module ``name``: its kernels are JIT functions of their own (spmv_ab.py
    loads kernels/spmv.py so)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def operands(m: int, n: int, k: int, transposed_b: bool, seed: int):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    if transposed_b:
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen).t()
    else:
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=gen)
    return a, b


def checked_call(module, name: str, a, b, expected):
    problem = module.problem((a, b))
    variant = module.CANDIDATES[name]
    got = variant.run(problem, a, b).float()
    error = (torch.linalg.vector_norm(got - expected) / torch.linalg.vector_norm(expected)).item()
    if not math.isfinite(error) or error > TOLERANCE:
        raise AssertionError(f"{module.__name__} {name}: relative error {error:.3g} on {tuple(a.shape)} @ {tuple(b.shape)}")
    return lambda: variant.run(problem, a, b)


def measure(before, after, rounds: int) -> list[dict]:
    from seer.kernels.gemm import llm_shapes
    from seer.profiling import time_ms

    names = [n for n in after.SHIPPED if n != "torch_matmul"]
    shapes = [s for s in llm_shapes(TOKENS) if s[0] in LAYERS]
    rows = []
    for index, (group, m, n, k) in enumerate(shapes):
        for transposed_b in (False, True):
            a, b = operands(m, n, k, transposed_b, seed=index)
            expected = torch.matmul(a, b).float()
            for name in names:
                sides = {"before": before, "after": after}
                if name.startswith("tma") and not after.tma_usable(after.problem((a, b))):
                    continue  # a transposed B has no row-major descriptor: the variant falls back
                calls = {side: checked_call(module, name, a, b, expected) for side, module in sides.items()}
                best = {side: math.inf for side in sides}
                for round_ in range(rounds):
                    order = list(sides) if round_ % 2 == 0 else list(sides)[::-1]
                    for side in order:
                        best[side] = min(best[side], time_ms(calls[side]))
                rows.append({"shape": f"{group}/m{m}", "m": m, "n": n, "k": k,
                             "b": "transposed" if transposed_b else "row-major", "variant": name,
                             "before_ms": best["before"], "after_ms": best["after"]})
                print(f"{rows[-1]['shape']:28s} {rows[-1]['b']:10s} {name:34s} "
                      f"{best['before'] * 1e3:9.2f} {best['after'] * 1e3:9.2f} us", flush=True)
    return rows


def markdown(result: dict) -> str:
    from seer.profiling import provenance

    rows = result["rows"]
    env = result["environment"]
    lines = [f"# GEMM variants before and after: {result['label']}, {env['device']['name']}", "",
             provenance(env, result["command"]) + f". Before: `{result['before']}`; after: the working tree. "
             f"Least over {result['rounds']} alternated rounds of each side's median (20+ runs, L2 flushed); "
             "every result checked against torch.matmul. after / before < 1: the change is faster.", "",
             "| variant | shapes | after / before, geometric mean | min | max |", "|---|---|---|---|---|"]
    for name in dict.fromkeys(r["variant"] for r in rows):
        ratios = [r["after_ms"] / r["before_ms"] for r in rows if r["variant"] == name]
        control = " (control: no tile loop)" if name.startswith("tma") else ""
        lines.append(f"| {name}{control} | {len(ratios)} | {gmean(ratios):.3f} | {min(ratios):.3f} | {max(ratios):.3f} |")
    loop = [r["after_ms"] / r["before_ms"] for r in rows if not r["variant"].startswith("tma")]
    tma = [r["after_ms"] / r["before_ms"] for r in rows if r["variant"].startswith("tma")]
    lines += ["", f"Tile-loop variants, every shape: **{gmean(loop):.3f}** ({len(loop)} cells); "
              f"TMA control: {gmean(tma):.3f} ({len(tma)} cells).", "",
              "| shape | B | variant | before µs | after µs | ratio |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['shape']} | {r['b']} | {r['variant']} | {r['before_ms'] * 1e3:.2f} | {r['after_ms'] * 1e3:.2f} | "
              f"{r['after_ms'] / r['before_ms']:.3f} |" for r in rows]
    return "\n".join(lines) + "\n"


LAYOUTS = {  # B's layout -> the strides a launch makes constants (1) and the ints it finds divisible by 16
    "row-major": ({"stride_ak": 1, "stride_bn": 1, "stride_cn": 1}, ("stride_am", "stride_bk", "stride_cm")),
    "transposed": ({"stride_ak": 1, "stride_bk": 1, "stride_cn": 1}, ("stride_am", "stride_bn", "stride_cm")),
}


def ptx_counts(module, layout: str) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = module._gemm_kernel
    names = list(inspect.signature(kernel.fn).parameters)
    constants, divisible = LAYOUTS[layout]
    constants = {**constants, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}
    divisible = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K") + divisible
    source = ASTSource(
        kernel, {n: "constexpr" if n in constants else "*bf16" if n.endswith("_ptr") else "i32" for n in names},
        constexprs={(names.index(n),): v for n, v in constants.items()},
        attrs={(names.index(n),): [["tt.divisibility", 16]] for n in divisible})
    ptx = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3}).asm["ptx"]
    widths = collections.Counter(re.findall(r"cp\.async\.c[ag]\.shared\.global \[[^]]+\], \[[^]]+\], (\w+)", ptx))
    return {"cp.async by bytes": {str(int(w, 0)): n for w, n in sorted(widths.items())},
            "add.s64": len(re.findall(r"\badd\.s64\b", ptx)), "lines": len(ptx.splitlines())}


def ptx_markdown(before, after, args) -> str:
    lines = [f"# GEMM tile kernel's sm_90 PTX before and after: {args.label}", "",
             f"Compiled on the CPU (triton {__import__('triton').__version__}); `python {' '.join(sys.argv)}`. "
             "`_gemm_kernel`, 128x128x64 tiles, 8 warps, 3 stages; sizes, pointers and non-unit strides "
             "divisible by 16, unit strides constants, as a launch specialises them.", "",
             "| B | version | cp.async copies by bytes | add.s64 | PTX lines |", "|---|---|---|---|---|"]
    for layout in LAYOUTS:
        for side, module in (("before", before), ("after", after)):
            c = ptx_counts(module, layout)
            lines.append(f"| {layout} | {side} | {c['cp.async by bytes']} | {c['add.s64']} | {c['lines']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="kernels/gemm.py before the change")
    parser.add_argument("--label", required=True, help="what changed, for the title")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ptx", action="store_true", help="compare the sm_90 PTX (no GPU needed)")
    args = parser.parse_args()
    if args.ptx:
        import seer.kernels.gemm as after

        text = ptx_markdown(load_before(args.before), after, args)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gemm-ab-ptx.md").write_text(text)
        print(text)
        return
    if not torch.cuda.is_available():
        raise SystemExit("gemm_ab.py times kernels on a GPU; none is visible")
    import seer.kernels.gemm as after
    from seer.profiling import device_tag, environment, write_result

    before = load_before(args.before)
    rows = measure(before, after, args.rounds)
    env = environment(torch.device("cuda"))
    result = {"label": args.label, "before": str(args.before), "rounds": args.rounds, "environment": env,
              "command": "python " + " ".join(sys.argv), "rows": rows}
    write_result(args.out, f"gemm-ab-{device_tag(env['device']['name'])}", result, markdown(result))


if __name__ == "__main__":
    main()
