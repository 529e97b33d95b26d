"""The command line, loop and checked timing shared by the benchmarks that time SpMV kernels matrix
by matrix over the large generated suite: select the inputs, measure the copy ceiling, measure each
input until the time budget is spent, write ``<stem>-<device>.json`` / ``.md``."""
from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from pathlib import Path
from typing import Callable

import torch

from seer.datasets.cases import spmv_cases
from seer.kernels import spmv
from seer.profiling import (Case, _least_of_rounds, device_tag, environment, measured_within_budget, relative_error,
                            write_result)


def checked_times(case, loaded, timed_calls) -> dict:
    """The row of one matrix: every run of ``timed_calls(csr, x)`` checked against float64, then
    timed in interleaved rounds."""
    parts, (x,) = case.build(loaded)
    csr = spmv.problem(parts)
    reference = spmv.reference(csr, x)
    runs = timed_calls(csr, x)
    check_all(runs, reference, case.id)
    return {"id": case.id, "rows": csr.rows, "cols": csr.cols, "nnz": csr.nnz, "time_ms": _least_of_rounds(runs)}


def check_all(runs: dict, reference: torch.Tensor, case_id: str) -> None:
    """Raise unless every run's result matches the float64 reference."""
    for name, fn in runs.items():
        error = relative_error(fn(), reference)
        if not error <= 1e-4:
            raise AssertionError(f"{name} is wrong on {case_id}: relative error {error:.1e}")


def by_turns(groups: list[list[Case]]) -> list[Case]:
    """Each group's smallest and largest input by turns, the groups by turns: a run cut short by its
    budget still spans every group and size."""
    def alternate(members):
        ordered = sorted(members, key=lambda c: c.extra.get("size", 0))
        return [c for pair in itertools.zip_longest(ordered, reversed(ordered)) for c in pair if c is not None][
            :len(ordered)]

    return [c for turn in itertools.zip_longest(*map(alternate, groups)) for c in turn if c is not None]


def run(doc: str, stem: str, select: Callable[[list[Case]], list[Case]], measure: Callable, describe: Callable,
        markdown: Callable[[dict], str], *, budget_s: float, copy_ceiling: bool = True) -> int:
    """The script's main: ``measure(case, loaded)`` for each input ``select`` keeps of the large
    suite (a run cut short by ``--budget-s`` keeps the rows measured), then ``markdown(result)``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--matrices", type=Path, required=True, help="real matrices the replicas are built from")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--budget-s", type=float, default=budget_s)
    args = parser.parse_args()
    from spmv_bandwidth import measure_copy_gbps

    name = torch.cuda.get_device_name()
    ceiling = {"copy_gbps": measure_copy_gbps(name)} if copy_ceiling else {}
    cases = select([c for c in spmv_cases([args.matrices], synthetic="large") if c.source != "real"])
    rows = measured_within_budget(cases, measure, args.budget_s, describe)
    result = {**environment(torch.device("cuda")), "command": " ".join(["python", *sys.argv]), **ceiling,
              "matrices": rows}
    write_result(args.out, f"{stem}-{device_tag(name)}", result, markdown(result))
    return 0


def events_ms(fn: Callable[[], object], tries: int = 5) -> float:
    """Median ms of ``fn`` on the device over ``tries`` runs (CUDA events around each): for one-time
    work such as a matrix's renumbering, which do_bench's repeated calls would not time alone."""
    times = []
    for _ in range(tries):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def method(result: dict, title: str) -> list[str]:
    """A results file's title and how it was measured (the copy ceiling measured in the same run)."""
    return [f"# {title}, {result['device']['name']}", "",
            f"torch {result['versions'].get('torch')}, triton {result['versions'].get('triton')}, measured "
            f"{result['date']}; `{result['command']}`. do_bench medians (L2 flushed), least of three "
            f"interleaved rounds; every result checked against float64. Copy ceiling {result['copy_gbps']:.0f} "
            "GB/s measured in the same run; shares of it under the byte model of `spmv_bandwidth.py`."]
