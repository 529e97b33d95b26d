"""Registers and loads in flight of the validation pass's kernel, compiled for Hopper (sm_90)
without a GPU.

NOTES SpMV 33-34: the kernel that carries the shifted-row count lost up to 25 µs on the largest
stencils and bands against the one before it, with the count off. The pass is bound by the
latency of its loads, so what matters is how many of them the main loop issues before it waits
on the first: ptxas had shrunk the kernel to 96 registers where nnz % 16 == 0, and the pass's
launch now gives it a register budget. Compiles ``_structure_kernel`` of this checkout's
``seer.sparse`` and of any older ``sparse.py`` given, as the GPU compiles it, with and without
statistics, and prints ptxas's register count and, from the SASS of the main loop (the kernel's
first loop), the most global loads issued and not yet consumed. Run it under the GPU image's
triton too (3.6: ``pip install triton==3.6.0`` in a venv): the compilers differ.

    git show 0c193dd:seer/sparse.py > /tmp/sparse_before_count.py
    git show 929c714:seer/sparse.py > /tmp/sparse_count_inlined.py
    python benchmarks/spmv_pass_registers.py /tmp/sparse_before_count.py /tmp/sparse_count_inlined.py
"""
from __future__ import annotations

import importlib.util
import inspect
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.compiler import ASTSource

from seer import sparse

HOPPER = GPUTarget("cuda", 90, 32)


def loaded(path: Path):
    """An older ``seer/sparse.py`` as a module of its own (it imports the rest of seer as is)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def compiled(module, stats: bool, divisible: tuple[str, ...] = ()):
    """The pass with CHECK, 32-bit lanes and ``stats``, compiled for sm_90 as a launch on the GPU
    compiles it: pointers 16-byte aligned (as torch allocates), and the int arguments named in
    ``divisible`` multiples of 16 (Triton specialises on it: ``nnz % 16 == 0`` lets the index loads
    go 16 bytes at a time, and it decides which matrices the count slowed down, NOTES SpMV 34)."""
    kernel = module._structure_kernel
    names = list(inspect.signature(kernel.fn).parameters)
    constants = {"CHECK": True, "STATS": stats, "NARROW": True, "LONG_ROW": module.LONG_ROW,
                 "ROW_BLOCK": module._ROW_BLOCK, "INDEX_BLOCK": module._INDEX_BLOCK}
    if "SAMPLE_BLOCK" in names:
        constants["SAMPLE_BLOCK"] = module._SAMPLE_BLOCK
    if "COUNT" in names:  # the count compiled in only for matrices it samples (NOTES SpMV 53): a large one here
        constants["COUNT"] = stats
    if "ROWS_AT_ONCE" in names:  # versions whose last program added up the programs' rows (NOTES SpMV 39-54)
        constants["ROWS_AT_ONCE"] = module.ADDED_UP_AT_ONCE
    pointers = {"indptr": "*i32", "indices": "*i32", "found": "*i64", "totals": "*i64", "arrived": "*i32",
                "counters": "*i64"}
    signature = {n: "constexpr" if n in constants else pointers.get(n, "i32") for n in names}
    aligned = [n for n in names if signature[n].startswith("*") or n in divisible]
    source = ASTSource(fn=kernel, signature=signature, constexprs={(names.index(k),): v for k, v in constants.items()},
                       attrs={(names.index(n),): [["tt.divisibility", 16]] for n in aligned})
    budget = getattr(module, "_PASS_REGISTERS", None)  # the launch's maxnreg, where the module sets one
    return triton.compile(source, target=HOPPER, options={"num_warps": 4, **({"maxnreg": budget} if budget else {})})


def registers(kernel) -> int:
    """ptxas's register count for the compiled kernel."""
    ptx = kernel.asm["ptx"]
    ptxas = get_ptxas(HOPPER.arch)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "pass.ptx").write_text(ptx)
        report = subprocess.run([getattr(ptxas, "path", ptxas), "-v", "--gpu-name", "sm_90a", f"{folder}/pass.ptx",
                                 "-o", f"{folder}/pass.cubin"], capture_output=True, text=True, check=True).stderr
    return int(re.search(r"Used (\d+) registers", report).group(1))


def cuobjdump() -> Path:
    """The SASS disassembler that ships with triton's ptxas."""
    return Path(getattr(get_ptxas(HOPPER.arch), "path", "")).with_name("cuobjdump")


def sass(kernel) -> str:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "pass.cubin").write_bytes(kernel.asm["cubin"])
        return subprocess.run([str(cuobjdump()), "-sass", f"{folder}/pass.cubin"], capture_output=True, text=True,
                              check=True).stdout


_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_LOAD = re.compile(r"(?:@!?P\d+\s+)?LDG\S*\s+(R\d+),")


def first_loop(sass_text: str) -> list[str]:
    """The instructions of the first loop in the SASS: up to the first branch backwards."""
    code = [(int(m.group(1), 16), m.group(2)) for m in _INSTRUCTION.finditer(sass_text)]
    for address, text in code:
        branch = re.search(r"BRA\s+(0x[0-9a-f]+)", text)
        if branch and int(branch.group(1), 16) < address:
            return [t for a, t in code if int(branch.group(1), 16) <= a <= address]
    return []


def loads_in_flight(loop: list[str]) -> int:
    """The most loads issued and not yet read (or overwritten) at any point of ``loop``."""
    pending: set[str] = set()
    most = 0
    for text in loop:
        load = _LOAD.match(text)
        if load:
            pending.add(load.group(1))
            most = max(most, len(pending))
            continue
        registers_named = re.findall(r"\bR\d+\b", text)
        pending -= set(registers_named)
    return most


def main() -> int:
    modules = {"this checkout": sparse, **{str(p): loaded(Path(p)) for p in sys.argv[1:]}}
    print(f"triton {triton.__version__}, sm_90, 4 warps")
    for label, module in modules.items():
        for stats, divisible in ((True, ("nnz",)), (True, ()), (False, ("nnz",)), (False, ())):
            kernel = compiled(module, stats, divisible)
            loop = first_loop(sass(kernel))
            print(f"{label}, {'statistics' if stats else 'plain'}, nnz {'' if divisible else 'not '}a multiple of 16: "
                  f"{registers(kernel)} registers, main loop {loads_in_flight(loop)} loads in flight, "
                  f"{len(loop)} instructions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
