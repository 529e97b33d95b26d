"""Does this machine's pandas read a profile table's floats back to the bit? (NOTES SpMV 42)

Reads one cell of the H100's campaign tables through ``seer.table.read_table`` (which asks for
round-trip parsing before pandas 3.1) and through pandas' default parser, and prints both with
their mean, as ``seer merge`` computes it, and that mean as ``to_csv`` writes it.

    python benchmarks/pandas_float_parse.py
"""
import io
from pathlib import Path

import numpy as np
import pandas as pd

from seer.table import _EXACT_FLOATS, read_table

ROW, COLUMN = "JGD_Kocay/Trec4", "time_ms:scalar_r128"
PROFILES = Path(__file__).resolve().parents[1] / "datasets" / "profiles"
FIRST, REPEAT = PROFILES / "spmv-h100-first.csv", PROFILES / "spmv-h100-repeat.csv"


def main() -> None:
    print("pandas", pd.__version__, "numpy", np.__version__, "read_frame options", _EXACT_FLOATS)
    a = read_table(FIRST).frame.set_index("id").loc[ROW, COLUMN]
    b = read_table(REPEAT).frame.set_index("id").loc[ROW, COLUMN]
    print("read_table", repr(a), repr(b), "mean", repr((a + b) / 2))
    written = io.StringIO()
    pd.DataFrame({"v": [(a + b) / 2]}).to_csv(written, index=False)
    print("to_csv", written.getvalue().split()[1])
    print("default parser", repr(pd.read_csv(FIRST, dtype={"id": str}).set_index("id").loc[ROW, COLUMN]))


if __name__ == "__main__":
    main()
