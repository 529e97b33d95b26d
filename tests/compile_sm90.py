"""Compile every multi-GPU kernel, the GEMM tile kernel and the SpMV merge kernel, for Hopper (sm_90) without a GPU; run by
tests/test_compile_sm90.py.

Run as a script, in a process without TRITON_INTERPRET (under the interpreter ``triton.jit`` makes
functions that cannot be compiled). Prints one line per kernel, ``ok <name>`` or ``FAIL <name>:
<error>``, and exits 1 if any failed.
"""
import functools
import inspect
import itertools
import re
import sys
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).parent))
import test_remote as remote_kernels  # noqa: E402
from seer.kernels import gemm, overlap, spmv  # noqa: E402

HOPPER = GPUTarget("cuda", 90, 32)
TILES = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}
INT32_POINTERS = {"flags_ptr", "errors_ptr", "counter_ptr", "ticket_ptr", "chain_ptr", "olds_ptr", "token_ptr",
                  "flag_ptr", "ok_ptr"}
# Flags must be released and polled with acquire at system scope (peers are other GPUs).
FLAG_INSTRUCTIONS = ("atom.global.sys.release.exch", "atom.global.acquire.sys.cas")


def compile_for_hopper(kernel, constants: dict, num_warps: int):
    """Pointers are bf16 (int32 for flags and counters, int64 for heap bases); other arguments int32."""
    names = list(inspect.signature(kernel.fn).parameters)

    def kind(name):
        if name in constants:
            return "constexpr"
        if name == "heap_bases":
            return "*i64"
        if name == "epoch" and constants.get("EPOCH_IN_MEMORY"):
            return "*i32"  # the device epoch counter of graph replays
        if name.endswith("_ptr"):
            return "*i32" if name in INT32_POINTERS else "*bf16"
        return "i32"

    source = ASTSource(kernel, {n: kind(n) for n in names},
                       constexprs={(names.index(k),): v for k, v in constants.items()})
    return triton.compile(source, target=HOPPER, options={"num_warps": num_warps, "num_stages": 3})


def _flag_sets(*names):
    return [dict(zip(names, values)) for values in itertools.product((False, True), repeat=len(names))]


def kernels():
    """(name, kernel, constexpr values, warps, whether it both signals and waits: the one-kernel patterns)."""
    found = [(f"_ag_kernel SIGNAL={s} A_FROM={a.value}", overlap._ag_kernel,
              {**TILES, "COPY_K": 128, "SIGNAL": s, "A_FROM": a.value}, 8, s and a is overlap.A_FLAGGED)
             for s in (False, True) for a in (overlap.A_GATHERED, overlap.A_PEER_HEAP, overlap.A_FLAGGED)]
    found += [(f"_as_kernel {f}", overlap._as_kernel, {**TILES, **f}, 8, f["SIGNAL"] and f["WAIT"])
              for f in _flag_sets("PUSH", "SIGNAL", "WAIT")]
    found += [(f"_rs_kernel {f}", overlap._rs_kernel, {**TILES, **f}, 8, f["SIGNAL"] and f["FROM_PEERS"] and f["WAIT"])
              for f in _flag_sets("PUSH", "SIGNAL", "FROM_PEERS", "WAIT") if not (f["PUSH"] and f["SIGNAL"])]
    found += [(k.fn.__name__, k, c, 4, k is remote_kernels._ring_kernel) for k, c in (
        (remote_kernels._exchange_kernel, {"N": 8}), (remote_kernels._atomics_kernel, {"ROUNDS": 2}),
        (remote_kernels._ring_kernel, {"LAPS": 2}), (remote_kernels._wait_kernel, {"FLAG": 3}))]
    found += [(f"{k.fn.__name__} EPOCH_IN_MEMORY={m}", k, {"EPOCH_IN_MEMORY": m}, 1, False)
              for k in (overlap._notify_kernel, overlap._await_kernel) for m in (False, True)]
    found.append(("_advance_kernel", overlap._advance_kernel, {}, 1, False))
    # The single-GPU GEMM's tile loop, as launched: Triton makes a stride of 1 a constant.
    found += [(f"_gemm_kernel {label}", gemm._gemm_kernel, {**TILES, **strides}, 8, False)
              for label, strides in (("", {}), ("unit strides", {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1}))]
    return found


def check_merge_atomics() -> None:
    """The merge SpMV kernel adds the sums of rows cut by a chunk edge with relaxed atomics: an
    acquire-release one compiles to a memory barrier and an invalidation of the SM's whole L1,
    which cost the kernel 13% (benchmarks/NOTES.md, SpMV 19)."""
    names = list(inspect.signature(spmv._merge_kernel.fn).parameters)
    types = {"indptr": "*i32", "indices": "*i32", "values": "*fp32", "x": "*fp32", "hot_x": "*fp32", "acc": "*fp32",
             "sub_rows": "*i32", "x_stride": "i32", "acc_stride": "i32", "nnz": "i32", "CHUNK": "constexpr",
             "SUB": "constexpr", "HOT": "constexpr"}
    for hot in (0, 65536):  # plain merge, and merge on hot columns
        source = ASTSource(spmv._merge_kernel, {n: types[n] for n in names},
                           constexprs={(names.index("CHUNK"),): 512, (names.index("SUB"),): 32,
                                       (names.index("HOT"),): hot})
        ptx = triton.compile(source, target=HOPPER, options={"num_warps": 4}).asm["ptx"]
        atomics = re.findall(r"\b(?:atom|red)\.global[\w.]*", ptx)
        if not atomics or not all(".relaxed." in a for a in atomics):
            raise AssertionError(f"the merge kernel's atomics should be relaxed (HOT={hot}), got {sorted(set(atomics))}")


def check_flags_compile(kernel, constants: dict, warps: int, has_flags: bool) -> None:
    compiled = compile_for_hopper(kernel, constants, warps)
    missing = [i for i in FLAG_INSTRUCTIONS if has_flags and i not in compiled.asm["ptx"]]
    if missing or not compiled.asm["cubin"]:
        raise AssertionError(f"no cubin, or flag instructions missing from the PTX: {missing}")


def checks():
    """(name, check) for every kernel: a check raises on failure."""
    yield "_merge_kernel atomics relaxed", check_merge_atomics
    for name, kernel, constants, warps, has_flags in kernels():
        yield name, functools.partial(check_flags_compile, kernel, constants, warps, has_flags)


def main() -> int:
    failed = 0
    for name, check in checks():
        try:
            check()
            print(f"ok {name}", flush=True)
        except Exception as exc:  # every kernel is tried; the report lists each failure
            failed += 1
            print(f"FAIL {name}: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
