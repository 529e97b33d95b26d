"""How far two timings of one cuBLAS call apart in a ``gemm.py`` run differ: its noise floor.

Where seer keeps ``torch_matmul``, ``gemm.py`` timed the same call twice, as the variant's own column
and as seer's choice. Their ratio has nothing to do with the choice, so its spread bounds what the
run can tell apart (its headline gain over torch.matmul included):

    python benchmarks/gemm_repeat_noise.py benchmarks/results/gemm-h100/gemm-results.json

writes ``gemm-repeat-noise.md`` / ``.json`` beside it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

APART = 1.05  # "differs by more than 5%"


def noise(result: dict) -> dict:
    """Since session 53 the variant's column is the least of two medians and seer's one median, so
    the ratio leans above 1 by what the second median saves; shapes whose timing was not checked
    right (null) are left out."""
    same = [r for r in result["rows"] if r["choice"] == "torch_matmul"
            and r.get("time_ms:torch_matmul") is not None and r.get("seer_ms") is not None]
    ratios = np.array([r["seer_ms"] / r["time_ms:torch_matmul"] for r in same])
    return {"shapes": len(same), "apart_by_more_than_5_percent": int((np.abs(np.log(ratios)) > np.log(APART)).sum()),
            "geomean_second_over_first": float(np.exp(np.log(ratios).mean())),
            "least": float(ratios.min()), "most": float(ratios.max())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    args = parser.parse_args()
    result = json.loads(args.results.read_text())
    figures = {"source": str(args.results), "run": result["env"], "command": "python " + " ".join(sys.argv),
               **noise(result)}
    env = result["env"]
    text = "\n".join([
        f"# One cuBLAS call timed twice in a gemm.py run, {env['device']['name']}", "",
        f"Run of {env['date']} ({env['versions']}): `{env['command']}`; this summary: `{figures['command']}`.", "",
        f"On the {figures['shapes']} shapes where seer keeps `torch_matmul`, seer's time over the variant's own column "
        f"(the same call): geometric mean {figures['geomean_second_over_first']:.3f}, from {figures['least']:.3f} to "
        f"{figures['most']:.2f}; apart by more than 5% on {figures['apart_by_more_than_5_percent']}.", ""])
    out = args.results.with_name("gemm-repeat-noise")
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(figures, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
