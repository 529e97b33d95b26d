"""benchmarks/spmv_pass_registers.py: reading the loads in flight off SASS, and the shipped pass
compiled for sm_90 (ptxas and cuobjdump ship with triton; no GPU needed)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_benchmark

ROOT = Path(__file__).resolve().parents[1]

_SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/              @!P0 LDG.E R4, desc[UR4][R2.64] ;
        /*0020*/                   LDG.E R5, desc[UR4][R2.64+0x4] ;
        /*0030*/                   LDG.E R6, desc[UR4][R2.64+0x8] ;
        /*0040*/                   IADD3 R7, R4, R5, RZ ;
        /*0050*/                   LDG.E R8, desc[UR4][R2.64+0xc] ;
        /*0060*/                   IADD3 R9, R6, R8, RZ ;
        /*0070*/              @!P1 BRA 0x10 ;
        /*0080*/                   LDG.E R10, desc[UR4][R2.64] ;
        /*0090*/                   LDG.E R11, desc[UR4][R2.64] ;
        /*00a0*/                   EXIT ;
"""


def test_the_first_loop_and_its_loads_in_flight():
    script = load_benchmark("spmv_pass_registers")
    loop = script.first_loop(_SASS)
    assert loop[0].endswith("LDG.E R4, desc[UR4][R2.64]") and loop[-1] == "@!P1 BRA 0x10"
    # R4, R5, R6 in flight; the add reads R4 and R5; R8 joins R6: at most three at once.
    assert script.loads_in_flight(loop) == 3
    assert script.first_loop("        /*0000*/                   EXIT ;") == []


def test_the_shipped_pass_keeps_its_main_loop_loads_in_flight():
    """NOTES SpMV 34: left to pick its own register budget, ptxas kept 14-16 loads in flight in the
    statistics pass's main loop where nnz % 16 == 0 (24 with the pass's budget) and 48 elsewhere.
    A process of its own: the tests' interpreter (TRITON_INTERPRET=1) compiles nothing."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    if not load_benchmark("spmv_pass_registers").cuobjdump().exists():
        pytest.skip("this triton ships no cuobjdump to read SASS with")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    report = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "spmv_pass_registers.py")], env=env,
                            capture_output=True, text=True, check=True).stdout
    in_flight = dict(re.findall(r"this checkout, statistics, nnz (a|not a) multiple of 16: \d+ registers, "
                                r"main loop (\d+) loads in flight", report))
    assert set(in_flight) == {"a", "not a"}, report
    assert int(in_flight["a"]) >= 20 and int(in_flight["not a"]) >= 40, report
