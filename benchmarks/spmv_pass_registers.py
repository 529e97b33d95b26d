"""Registers of the validation pass's kernel, compiled for Hopper (sm_90) without a GPU.

NOTES SpMV 33: the kernel that carries the shifted-row count lost 15 µs on some large matrices
against the one before it, with the count off. Registers are a first look at what the compiler
made of each (more registers in a loop of loads usually means more loads in flight). Compiles
``_structure_kernel`` of this checkout's ``seer.sparse`` and of any older ``sparse.py`` given,
with and without statistics, and prints ptxas's count.

    git show 0c193dd:seer/sparse.py > /tmp/sparse_before_count.py
    python benchmarks/spmv_pass_registers.py /tmp/sparse_before_count.py
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


def registers(module, stats: bool) -> int:
    """ptxas's register count for the pass with CHECK, 32-bit lanes and ``stats``."""
    kernel = module._structure_kernel
    names = list(inspect.signature(kernel.fn).parameters)
    constants = {"CHECK": True, "STATS": stats, "NARROW": True, "LONG_ROW": module.LONG_ROW,
                 "ROW_BLOCK": module._ROW_BLOCK, "INDEX_BLOCK": module._INDEX_BLOCK}
    if "SAMPLE_BLOCK" in names:
        constants["SAMPLE_BLOCK"] = module._SAMPLE_BLOCK
    signature = {n: "constexpr" if n in constants else "*i32" if n in ("indptr", "indices")
                 else "*i64" if n == "found" else "i32" for n in names}
    source = ASTSource(fn=kernel, signature=signature, constexprs={(names.index(k),): v for k, v in constants.items()})
    ptx = triton.compile(source, target=HOPPER, options={"num_warps": 4}).asm["ptx"]
    ptxas = get_ptxas(HOPPER.arch)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "pass.ptx").write_text(ptx)
        report = subprocess.run([getattr(ptxas, "path", ptxas), "-v", "--gpu-name", "sm_90a", f"{folder}/pass.ptx",
                                 "-o", f"{folder}/pass.cubin"], capture_output=True, text=True, check=True).stderr
    return int(re.search(r"Used (\d+) registers", report).group(1))


def main() -> int:
    modules = {"this checkout": sparse, **{str(p): loaded(Path(p)) for p in sys.argv[1:]}}
    print(f"triton {triton.__version__}, sm_90, 4 warps")
    for label, module in modules.items():
        print(f"{label}: statistics {registers(module, True)} registers, plain {registers(module, False)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
