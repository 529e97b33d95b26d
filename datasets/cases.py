"""Profiling inputs for SpMV: real matrices from folders and the generated suites, as Cases."""
from __future__ import annotations

import argparse
import itertools
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from seer.errors import InputError, exit_on_seer_error
from seer.profiling import Case
from seer.sparse import POSITIONS_FIT_INT32_BELOW


def spmv_cases(folders: list[Path], *, synthetic: str = "none", max_nnz: int | None = None,
               dtype: torch.dtype = torch.float32, seed: int = 0, device: str = "cuda") -> list[Case]:
    """Real matrices of ``folders`` (source "real", group = the matrix's family: its SuiteSparse
    group and problem kind) then, if asked, the generated suite (source "derived" for
    block-replicated real matrices, in their original's family, else "synthetic")."""
    from seer.datasets.generators import build, synthetic_suite
    from seer.datasets.suitesparse import list_matrices, read_listed_matrix

    cases = []
    for folder in folders:
        for info in list_matrices(folder, max_nnz=max_nnz):
            cases.append(_case(info.id, info.family, "real", info.nnz,
                               lambda i=info: read_listed_matrix(i), dtype, seed, device))
    if synthetic != "none":
        real_folder = folders[0] if folders else None
        specs = synthetic_suite(synthetic, seed=seed, real_folder=real_folder)
        # Seeded shuffle: a campaign cut short by its deadline still covers every family.
        specs = [specs[i] for i in np.random.default_rng(seed).permutation(len(specs))]
        originals = spmv_families([real_folder]) if real_folder is not None else {}
        for spec in specs:
            derived = spec.family.startswith("derived/")
            # A replica shares its original's family, so CV never splits the two.
            group = originals[spec.kwargs["matrix"]] if derived else structure_family(spec.id)
            cases.append(_case(spec.id, group, "derived" if derived else "synthetic", spec.expected_nnz,
                               lambda s=spec: build(s, real_folder=real_folder), dtype, seed, device))
    _check_unique(cases)
    return cases


def _check_unique(cases: list[Case]) -> None:
    """A matrix listed twice would be profiled twice and its table refused only when read."""
    twice = sorted(i for i, count in Counter(case.id for case in cases).items() if count > 1)
    if twice:
        raise InputError(f"{len(twice)} input(s) listed more than once, e.g. {twice[:3]}: a matrix in two files of a "
                         "folder (.mtx beside .mtx.gz), a folder given twice, or folders that overlap; list each once")


def spmv_families(folders: list[Path]) -> dict[str, str]:
    """Real matrix id -> its cross-validation family, for the matrices of ``folders``."""
    from seer.datasets.suitesparse import list_matrices

    return {info.id: info.family for folder in folders for info in list_matrices(folder)}


# What the group column of an SpMV table means (written into a regrouped table's metadata).
GROUPS = ("real: SuiteSparse group/problem kind, a sequence and its duplicates with its first matrix "
          "(seer.datasets.suitesparse.problem_family); derived: their original's; "
          "synthetic: synthetic/<generator>/<structure parameters>")


def regroup_spmv_table(path: Path, folders: list[Path], command: str) -> list[str]:
    """Rewrite the ``group`` column of the SpMV profile table ``path`` with the families
    :func:`spmv_cases` gives its inputs today, leaving every measured column as it is, and say so
    in the metadata (``command``: how it was run); a table already grouped so is left alone.
    Returns the groups that changed, as "old -> new" lines. Raises InputError if an input of the
    table is not among those cases."""
    from seer.table import read_cells, read_table, write_table

    table = read_table(path, "spmv")
    frame = read_cells(path)
    # Every row's input, those read_table drops for a failed timing too: each keeps its family.
    cases = _cases_of(frame["id"].tolist(), str(path), folders, **recorded_inputs(table))
    group_of = {i: case.group for i, case in cases.items()}
    new = frame["id"].map(group_of)
    changes = sorted({f"{old} -> {to}" for old, to in zip(frame["group"], new) if old != to})
    if not changes and table.meta.get("groups", {}).get("definition") == GROUPS:
        return []  # already grouped so: the file, and the command that grouped it, stay
    frame["group"] = new
    meta = {**table.meta, "groups": {"definition": GROUPS, "rewritten_by": command}}
    write_table(frame, path, meta)
    return changes


def structure_features(paths: list[Path], folders: list[Path]) -> dict[str, dict]:
    """Input id -> the gathered features of its structure, computed on the host (whose twin of
    the validation pass counts as the pass does), for every input of the SpMV tables ``paths``,
    each built once. Raises InputError if an input is not among the cases of ``folders``."""
    from seer.features import spmv as features
    from seer.sparse import as_csr
    from seer.table import read_cells, read_table

    # A missing or malformed table named before any matrix is built.
    tables = {path: read_table(path, "spmv") for path in paths}
    structure = {}
    for path, table in tables.items():
        # Every row's input, those that read_table drops for failed timings too: recount rewrites them all.
        ids = [i for i in dict.fromkeys(read_cells(path)["id"]) if i not in structure]
        for i, case in _cases_of(ids, str(path), folders, device="cpu", **recorded_inputs(table)).items():
            structure[i] = features.gathered(as_csr(case.load()[0].astype(np.float32)))
    return structure


# What chose the inputs of a table whose metadata records none (profiled before the record): the
# large suite of seed 0, that of every campaign then.
_UNRECORDED_INPUTS = {"synthetic": "large", "seed": 0}


def recorded_inputs(table) -> dict:
    """``{"synthetic": suite, "seed": seed}`` that chose the inputs of the profile ``table``, as its
    metadata records them (``inputs``, see :func:`seer.profiling.profile`): its generated inputs are
    those of that suite and seed alone."""
    recorded = table.meta.get("inputs") or {}
    return {name: recorded.get(name, default) for name, default in _UNRECORDED_INPUTS.items()}


def _cases_of(ids, tables: str, folders: list[Path], *, synthetic: str = _UNRECORDED_INPUTS["synthetic"],
              seed: int = _UNRECORDED_INPUTS["seed"], **options) -> dict:
    """Input id -> its case (:func:`spmv_cases` of ``folders`` with the suite ``synthetic`` of
    ``seed``: pass the table's :func:`recorded_inputs`; ``options`` passed on) for each of ``ids``,
    the inputs of ``tables``; InputError if one is not among them."""
    cases = {case.id: case for case in spmv_cases(folders, synthetic=synthetic, seed=seed, **options)}
    unknown = [i for i in ids if i not in cases]
    if unknown:
        raise InputError(f"{tables}: {len(unknown)} inputs are not among the cases of {[str(f) for f in folders]} "
                         f"with --synthetic {synthetic} --seed {seed} (what the table records; large and 0 where it "
                         f"records nothing) (first: {unknown[:3]}); point --matrices at the folder the table was "
                         "profiled from")
    return {i: cases[i] for i in ids}


def recount_shifted_rows(paths: list[Path], structure: dict[str, dict], command: str) -> dict[Path, int]:
    """Rewrite the ``shifted_row_frac`` column of the SpMV profile tables ``paths`` from
    ``structure`` (:func:`structure_features`: the count as the validation pass samples today),
    leaving every measured column as it is, and say so in their metadata (``command``: how it was
    run). Every table is checked before any is written: an InputError names a table without the
    column, or an input whose other gathered features (those the table has) differ from the table's
    (then it is not the input the row measured). Returns how many values changed in each table."""
    from seer.sparse import SHIFT_SAMPLE_DEFINITION
    from seer.table import read_cells, read_table, write_table

    checked = []
    for path in paths:
        table, frame = read_table(path, "spmv"), read_cells(path)  # cells as written: the others stay so
        if "shifted_row_frac" not in frame.columns:
            raise InputError(f"{path} has no shifted_row_frac column to recount (profiled before the feature); "
                             f"measure it with benchmarks/spmv_preparation.py --gather")
        # The other gathered features the table has (each is optional): an input whose own differ
        # is not the one its row measured.
        compared = [n for n in frame.columns if n != "shifted_row_frac" and n in table.gathered_features]
        for _, row in frame.iterrows():
            got = structure[row["id"]]
            differing = {n: (row[n], got[n]) for n in compared
                         if not np.isclose(got[n], float(row[n]), rtol=1e-9, atol=0)}
            if differing:
                raise InputError(f"{path}: {row['id']}'s features (table, structure) {differing} differ; is it the "
                                 f"same input? No table was rewritten")
        checked.append((path, table, frame))
    changed = {}
    for path, table, frame in checked:
        recounted = frame["id"].map(lambda i: repr(float(structure[i]["shifted_row_frac"])))
        changed[path] = int((recounted.astype(float) != frame["shifted_row_frac"].astype(float)).sum())
        frame["shifted_row_frac"] = recounted
        meta = {**table.meta, "shifted_row_frac": {"sample": SHIFT_SAMPLE_DEFINITION, "rewritten_by": command}}
        write_table(frame, path, meta)
    return changed


# nnz bands over which the SpMV benchmarks summarise per-input measurements
NNZ_BANDS = ((0, 1e5), (1e5, 1e6), (1e6, 1e7), (1e7, float("inf")))


def nnz_band_label(lo: float, hi: float) -> str:
    """A band's name: "nnz <1e5", "nnz 1e5-1e6", "nnz 1e7+"."""
    if lo <= 0:
        return f"nnz <{hi:.0e}".replace("e+0", "e")
    return f"nnz {lo:.0e}-{hi:.0e}".replace("e+0", "e").replace("-inf", "+")


# The large suite's families bound by scattered x gathers, for the benchmarks of that bound
SKEWED_FAMILIES = ("synthetic/rmat/", "synthetic/lognormal_rows/", "derived/")


def skewed_round_robin(cases: list[Case], largest_first: bool = False) -> list[Case]:
    """R-MAT, log-normal rows and permuted replicas among ``cases``, one family after another so
    that a run cut short by its budget still covers all three (each family's largest first if
    asked: the bandwidth goals are read on 10M+ nnz)."""
    families = {family: [] for family in SKEWED_FAMILIES}
    for case in cases:
        family = next((f for f in SKEWED_FAMILIES if case.id.startswith(f)), None)
        if family is not None and (family != "derived/" or "permute1" in case.id):
            families[family].append(case)
    if largest_first:
        for members in families.values():
            members.sort(key=lambda c: -c.extra["size"])
    return [c for group in itertools.zip_longest(*families.values()) for c in group if c is not None]


def launch_bound_case(folder: Path) -> Case:
    """The first real matrix of ``folder`` with 10k-50k nonzeros: typical of the real set, where a
    call's host time exceeds its kernel's, for benchmarks of the launch path."""
    case = next((c for c in spmv_cases([folder]) if 10_000 <= c.extra["size"] <= 50_000), None)
    if case is None:
        raise InputError(f"{folder} has no real matrix of 10,000 to 50,000 nonzeros, which benchmarks of the launch "
                         "path measure")
    return case


def launch_bound_arguments(doc: str) -> tuple[argparse.Namespace, Case, tuple, torch.Tensor]:
    """The command line of a benchmark of the launch path (``--matrices``, ``--out``, its help
    ``doc``) and its matrix: ``(arguments, case, CSR parts, x)`` of :func:`launch_bound_case`."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrices", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    case = launch_bound_case(args.matrices)
    parts, (x,) = case.build(case.load())
    return args, case, parts, x


# Parameters that only scale a generated matrix; the others (R-MAT skew, log-normal sigma,
# stencil points, band fill) set its structure and so its family.
_SIZE_PARAMETERS = ("n", "scale", "edge_factor", "rows", "cols", "mean_row", "bandwidth")


def structure_family(spec_id: str) -> str:
    """``synthetic/<generator>/<structure parameters>``: the cross-validation group of a generated
    matrix, so that held-out scores ask how a tree does on a structure it never saw."""
    _, generator, params, _seed = spec_id.split("/")
    kept = [p for p in params.split("-") if not p.startswith(_SIZE_PARAMETERS)]
    return "/".join(["synthetic", generator, "-".join(kept)]).rstrip("/")


def _case(case_id, group, source, size, read, dtype, seed, device) -> Case:
    def load():
        """The matrix with fresh values and x, on the host."""
        matrix = read().tocsr()
        rng = np.random.default_rng(seed)
        # Fresh non-zero values: files with pattern or constant values would hide wrong indexing.
        values = rng.uniform(0.5, 1.5, matrix.nnz) * rng.choice([-1.0, 1.0], matrix.nnz)
        return matrix, values, rng.uniform(-1, 1, matrix.shape[1])

    def build_inputs(loaded):
        matrix, values, x = loaded
        # int32 where seer takes it: its kernels' positions pass the last nonzero by a block (seer.sparse).
        index_dtype = torch.int32 if max(matrix.nnz, *matrix.shape) < POSITIONS_FIT_INT32_BELOW else torch.int64
        parts = (
            torch.from_numpy(matrix.indptr).to(device=device, dtype=index_dtype),
            torch.from_numpy(matrix.indices).to(device=device, dtype=index_dtype),
            torch.from_numpy(values).to(device=device, dtype=dtype),
            matrix.shape,
        )
        return parts, (torch.from_numpy(x).to(device=device, dtype=dtype),)

    baselines = {"cusparse": _cusparse} if dtype == torch.float32 else {}
    return Case(case_id, group, source, load, build_inputs, baselines, extra={"size": size})


def _cusparse(csr, x):
    """torch sparse CSR @ x, as a user would write it: cuSPARSE on CUDA. The tensor is the one the
    ``torch_csr`` variant keeps with the matrix."""
    from seer.kernels.spmv import torch_csr_tensor

    return torch_csr_tensor(csr) @ x


def main(argv: list[str] | None = None) -> None:
    """``python -m seer.datasets.cases regroup|recount-shifted-rows TABLE... --matrices DIR...``: see
    :func:`regroup_spmv_table` and :func:`recount_shifted_rows`."""
    parser = argparse.ArgumentParser(prog="python -m seer.datasets.cases")
    parser.add_argument("action", choices=["regroup", "recount-shifted-rows"])
    parser.add_argument("tables", nargs="+", type=Path, help="SpMV profile tables (CSV) to rewrite in place")
    parser.add_argument("--matrices", type=Path, required=True, action="append",
                        help="a folder of the real matrices the tables were profiled from (repeat it as `seer profile "
                             "--matrices` was; the first one's matrices are the replicas')")
    args = parser.parse_args(argv)
    command = " ".join(["python -m seer.datasets.cases", *(sys.argv[1:] if argv is None else argv)])
    with exit_on_seer_error(parser):
        if args.action == "recount-shifted-rows":
            _recount_command(args, command)
        else:
            _regroup_command(args, command)


def _recount_command(args: argparse.Namespace, command: str) -> None:
    changed = recount_shifted_rows(args.tables, structure_features(args.tables, args.matrices), command)
    for table, count in changed.items():
        print(f"{table}: {count} shifted_row_frac values changed")


def _regroup_command(args: argparse.Namespace, command: str) -> None:
    for table in args.tables:
        changes = regroup_spmv_table(table, args.matrices, command)
        print(f"{table}: {len(changes)} groups renamed" + "".join(f"\n  {c}" for c in changes))


if __name__ == "__main__":
    main()
