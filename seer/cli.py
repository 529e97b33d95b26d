"""The seer command: profile, merge, train, report, explain."""
from __future__ import annotations

import argparse
import importlib
import math
import os
import re
import shlex
import sys
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from seer.errors import SeerError, SeerWarning, warn

# The installed subpackages, wherever pip put them (editable or not).
PROFILES = Path(importlib.import_module("seer.datasets").__file__).parent / "profiles"
DEFAULT_TABLE = PROFILES / "spmv-h100.csv"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    command = "seer " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # started by torchrun: say so, or the command does not reproduce
        command = f"torchrun --nproc-per-node {os.environ.get('LOCAL_WORLD_SIZE', os.environ['WORLD_SIZE'])} -m seer.cli" \
                  + command.removeprefix("seer")
    with warnings.catch_warnings():
        warnings.showwarning = _plain_warnings(args.command)
        try:
            return args.run(args, command) or 0
        except SeerError as error:
            return _error(args.command, error)
        except BrokenPipeError:  # stdout's reader went away (`seer train ... | head`): nothing left to say
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit would raise
            return 1
        except OSError as error:  # a file that cannot be read or written (or a full disk), where no check caught it
            where = f" {error.filename}" if error.filename is not None else ""
            return _error(args.command, f"cannot read or write{where}: {error.strerror or error}")


def _error(command: str, message) -> int:
    """A user's mistake, said as argparse says a usage error: ``seer <cmd>: error: <message>``, status 2."""
    print(f"seer {command}: error: {message}", file=sys.stderr)
    return 2


def _plain_warnings(command: str):
    """seer's own warnings as one line each on stderr, as its errors are: the source line a
    library warning names is the console script's, which tells a user of the command nothing."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, SeerWarning):
            print(f"seer {command}: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    return show


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seer", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("profile", help="time every variant of an op over many inputs (on a GPU) into a profile table",
                       description="Profile SpMV variants and cuSPARSE on real and synthetic matrices. "
                                   "Resumes an existing table (with the --synthetic suite and --seed it was "
                                   "profiled with; --synthetic none goes with any); under torchrun each rank "
                                   "takes a shard. An input that is not supported or does not fit in memory is "
                                   "skipped and recorded in the table's .meta.json (\"skipped\"); a resume "
                                   "does not try it again unless given --retry-skipped.")
    p.add_argument("op", choices=["spmv"], help="the op to profile (GEMM and multi-GPU ops: see benchmarks/)")
    p.add_argument("--out", type=Path, required=True, help="profile table to write (CSV; .meta.json beside it)")
    p.add_argument("--matrices", type=Path, action="append", default=[],
                   help="folder of .mtx/.mtx.gz/.tar.gz matrices (SuiteSparse layout); repeatable")
    p.add_argument("--max-nnz", type=_positive, default=None, help="skip real matrices with more nonzeros")
    p.add_argument("--synthetic", choices=["none", "small", "large"], default="none",
                   help="add the generated suite (large: 1M-50M nnz, incl. block-replicated real matrices)")
    p.add_argument("--limit", type=_positive, default=None,
                   help="take the first this many inputs of the list (real matrices first, then the generated "
                        "ones), those already in the table among them")
    p.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32",
                   help="the matrices' values and x (default: float32, the shipped models' campaigns)")
    p.add_argument("--deadline", type=_seconds, default=None,
                   help="start no input after this many seconds (the one being measured then, and the loads "
                        "in flight, finish first: leave room for the largest input)")
    p.add_argument("--seed", type=_seed, default=0, help="seed of the synthetic matrices and the random values")
    p.add_argument("--retry-skipped", action="store_true",
                   help="try again the inputs earlier runs skipped (listed under \"skipped\" in the table's "
                        ".meta.json): after a fix to seer, or with more device memory free")
    p.set_defaults(run=_profile)

    p = sub.add_parser("merge", help="average several profiling campaigns of one op on one GPU into one table",
                       description="Rows measured in several campaigns get the mean of each measured column "
                                   "(times, baselines, host calls, preparations, gather_ms); features must agree.")
    p.add_argument("tables", type=Path, nargs="+", help="the campaigns' profile tables (CSV, .meta.json beside)")
    p.add_argument("--out", type=Path, required=True, help="merged table to write (a new file, or an earlier merge to replace)")
    p.add_argument("--op", default=None, help="op of the campaigns (default: from their .meta.json)")
    p.set_defaults(run=_merge)

    p = sub.add_parser("train", help="train a two-stage selector on a profile table; print rules and held-out scores",
                       description="Cross-validate (grouped by family), fit, and write the model JSON with its "
                                   "rules (.txt, .md, .py) beside it.")
    p.add_argument("table", type=Path, nargs="?", default=DEFAULT_TABLE,
                   help=f"profile table (default: the shipped {DEFAULT_TABLE.name})")
    p.add_argument("--op", default=None, help="op of the table (default: from its .meta.json)")
    p.add_argument("--out", type=Path, default=None,
                   help="model file (default: models/<table name>.json, under the working folder; seer.dispatch "
                        "finds it where that is seer's own models folder or one in $SEER_MODELS)")
    p.set_defaults(run=_train)

    p = sub.add_parser("report", help="write a Markdown + PNG report of a table's held-out selection quality",
                       description="Score the training procedure on the table by grouped nested cross-validation "
                                   "(as seer train does; minutes on a large table) and write report.md with the "
                                   "model's rules and figures of its regret, wins and tree.")
    p.add_argument("table", type=Path, nargs="?", default=DEFAULT_TABLE,
                   help=f"profile table (default: the shipped {DEFAULT_TABLE.name})")
    p.add_argument("--op", default=None, help="op of the table (default: from its .meta.json)")
    p.add_argument("--model", type=Path, default=None, help="model to describe (default: train one on the table)")
    p.add_argument("--out", type=Path, default=Path("report"),
                   help="folder for report.md and the figures (default: ./report)")
    p.set_defaults(run=_report)

    p = sub.add_parser("explain", help="show which variant seer picks for an input (SpMV: a matrix file; GEMM: "
                                       "a shape), and why",
                       description="Print each model's choice for the input, with its rule path and features: "
                                   "every shipped model of the op, or --model's. Explained on this machine's GPU "
                                   "where it has one; off a GPU a GPU's model decides on features as its GPU "
                                   "computes them (GEMM's waves from its SM count).")
    p.add_argument("input", help="SpMV: a .mtx, .mtx.gz or SuiteSparse .tar.gz file; GEMM: its shape MxNxK, "
                                 "C[M, N] = A[M, K] B[K, N] (e.g. 16x4096x14336)")
    p.add_argument("--op", choices=sorted(_EXPLAINED_INPUTS), default="spmv", help="the op (default: spmv)")
    p.add_argument("--dtype", choices=["bfloat16", "float16"], default=None, help="GEMM's operands (default: bfloat16)")
    p.add_argument("--model", type=Path, default=None, help="model file (default: every shipped model of the op)")
    p.add_argument("--calls", type=_positive, default=1, help="how many calls on this input to plan for")
    p.set_defaults(run=_explain)
    return parser


def _whole(least: int):
    """An argparse type: a whole number of ``least`` or more (its own message: argparse's would name
    this function)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"must be a whole number of {least} or more, got {text!r}")
        return value

    return parse


_positive = _whole(1)
_seed = _whole(0)  # numpy's generators take no negative seed


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:  # NaN was never reached, and 0 profiled nothing
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("seer-kernels")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def _profile(args, command: str) -> int:
    import torch

    from seer.datasets.cases import spmv_cases
    from seer.profiling import SPMV_CALL_OVERHEAD_BELOW, profile
    from seer.table import check_table_path, meta_path

    if not torch.cuda.is_available():
        raise SeerError("profiling times kernels on a CUDA GPU and none is visible; interpreter timings "
                        "are not GPU timings")
    if not args.matrices and args.synthetic == "none":
        raise SeerError("nothing to profile: give --matrices FOLDER and/or --synthetic small|large")
    check_table_path(args.out)  # before the inputs are listed (reading every matrix's header)
    if args.max_nnz is not None and not args.matrices:
        raise SeerError("--max-nnz filters the real matrices of --matrices, and none are given; the generated "
                        "suites (--synthetic) have sizes of their own")
    cases = spmv_cases(args.matrices, synthetic=args.synthetic, max_nnz=args.max_nnz,
                       dtype=getattr(torch, args.dtype), seed=args.seed)
    if not cases:  # only --max-nnz can leave none: a folder without matrices is refused as such
        raise SeerError(f"nothing to profile: no matrix of {', '.join(map(str, args.matrices))} has at most --max-nnz "
                        f"{args.max_nnz} nonzeros; raise --max-nnz, or add --synthetic small|large")
    if args.limit is not None:
        cases = cases[: args.limit]
    with _folder_for(args.out.parent, "--out's folder"):  # before the timing: it takes hours
        _check_writable(args.out)
        profile("spmv", cases, args.out, command=command, call_overhead_below=SPMV_CALL_OVERHEAD_BELOW,
                deadline_s=args.deadline, dtype=args.dtype, inputs={"synthetic": args.synthetic, "seed": args.seed},
                retry_skipped=args.retry_skipped)
    if not args.out.exists():  # every input skipped (each said why above), or the deadline came first
        raise SeerError(f"no input was profiled, so {args.out} was not written (any skips are recorded in "
                        f"{meta_path(args.out).name})")
    print(f"wrote {args.out}")
    return 0


def _merge(args, command: str) -> int:
    from seer.table import merge_tables, read_table

    path = merge_tables(args.tables, args.out, command=command, op=args.op)
    counts = read_table(path).frame["campaigns"].value_counts().sort_index()
    print(f"wrote {path}: " + ", ".join(f"{n} rows from {k} campaign{'s' if k > 1 else ''}" for k, n in counts.items()))
    return 0


def _train(args, command: str) -> int:
    from seer import rules
    from seer.table import check_table_path
    from seer.train import check_model_path, train_table

    check_table_path(args.table)  # before --out's folder is made
    out = args.out or Path("models") / f"{args.table.stem}.json"
    exports = {".txt": rules.to_text, ".md": rules.to_markdown, ".py": rules.to_python}
    check_model_path(args.table, out, beside=tuple(exports))  # before training: it takes minutes
    with _folder_for(out.parent, "--out's folder"):
        _check_writable(out)
        model, report = train_table(_relative(args.table), op=args.op, command=command)
        model.save_with(out, {suffix: export(model) for suffix, export in exports.items()})  # never out of step
    if not out.name.startswith(f"{model.op}-"):
        warn(f"{out.name}: seer.dispatch finds {model.op} models in models/ and $SEER_MODELS by their names, "
             f"{model.op}-*.json; this one serves only where passed as model= (e.g. --out "
             f"{out.parent / f'{model.op}-{out.name}'})")
    elif not _searched_by_dispatch(out.parent):
        warn(f"seer.dispatch looks for models in seer's own models folder and those of $SEER_MODELS, not in "
             f"{out.parent}: export SEER_MODELS={out.parent.resolve()} for this model to serve there (or pass it "
             "as model=)")
    print(rules.to_text(model))
    print(report.to_text())
    print(f"wrote {out} and its rules ({out.with_suffix('.txt').name}, .md, .py)")
    return 0


def _searched_by_dispatch(folder: Path) -> bool:
    """Whether seer.dispatch looks for models in ``folder`` (:func:`seer.dispatch.model_files`)."""
    from seer.dispatch import SHIPPED_MODELS, listed_model_folders

    return folder.resolve() in {p.resolve() for p in (SHIPPED_MODELS, *listed_model_folders())}


def _report(args, command: str) -> int:
    from seer.model import SelectorModel
    from seer.report import write_report
    from seer.table import read_table
    from seer.train import TwoStageSelector

    if args.out.exists() and not args.out.is_dir():
        raise SeerError(f"--out {args.out} is a file; the report is a folder (report.md and its figures)")
    table = read_table(args.table, op=args.op)
    # Loaded first, refused before the scoring: a model of another op would describe variants and
    # features the table does not have.
    given = SelectorModel.load(args.model, op=table.op) if args.model else None
    if given is not None:
        _check_model_of(given, args.model, table)
    with _folder_for(args.out, "--out"):  # before the scoring: it takes minutes
        selector = TwoStageSelector()
        training = selector.evaluate(table)
        model = given or selector.fit(table).to_model(table, command=command)
        written = write_report(model, training, args.out, table, saved=given is not None)
    for path in written:
        print(f"wrote {path}")
    return 0


def _check_model_of(model, path: Path, table) -> None:
    """A warning where ``model`` was not trained on ``table``, or chooses among or reads other variants
    or features than it has: the report puts the table's held-out scores beside the model's rules,
    which then describe other measurements."""
    from seer.table import table_sha256

    trained_on = model.training.get("sha256")
    if trained_on is not None and trained_on != table_sha256(table.path):
        warn(f"model {path} was trained on {model.training.get('table')!r} (measured on "
             f"{model.device.get('name')!r}), not on {table.path}: the report's scores are this table's, its rules "
             "the model's")
    # Said apart: a model without a training record (written by hand, or older) may differ too.
    model_features = {*model.known_features, *model.gathered_features}
    differing = {"variants the table lacks": set(model.variants) - set(table.variants),
                 "features the table lacks": model_features - {*table.known_features, *table.gathered_features},
                 "variants only the table times": set(table.variants) - set(model.variants)}
    said = [f"{what} {sorted(names)}" for what, names in differing.items() if names]
    if said:
        warn(f"model {path} does not match {table.path} ({'; '.join(said)}): the report's scores are of the table's "
             "variants and features, its rules of the model's")


def _explain(args, command: str) -> int:
    import seer
    from seer.dispatch import found_model_name, model_files

    import torch

    if args.dtype is not None and args.op != "gemm":
        raise SeerError(f"--dtype sets GEMM's operands; {args.op} is explained in float32")
    if args.model is not None:
        from seer.model import SelectorModel
        from seer.registry import get_op

        named = SelectorModel.load(args.model, op=args.op)  # named by the user: refused, not replaced by the hand rule
        lacking = sorted(set(named.variants) - set(get_op(args.op).variants))
        if lacking:
            raise SeerError(f"model {args.model} names variants this install lacks: {lacking}; train it anew on a "
                            "table this seer profiled")
    # On this machine's GPU where it has one: the models say which GPU they were measured on.
    device = "cuda" if torch.cuda.is_available() else "cpu"
    inputs = _EXPLAINED_INPUTS[args.op](args, device)
    if args.model is not None:
        print(f"== {args.model}")
        print(seer.explain(args.op, inputs, calls=args.calls, model=args.model))
        return 0
    used = _dispatch_model_here(args.op) if device == "cuda" else None
    if used is None and device == "cuda":  # no model serves this GPU: what dispatch runs comes first
        print(f"== hand rule (seer.dispatch on this {torch.cuda.get_device_name()}: no model for it)")
        print(seer.explain(args.op, inputs, calls=args.calls))
    for path in model_files(args.op) or [None]:
        if path is not None:
            name = found_model_name(path)
            print(f"== {name}" + (" (seer.dispatch's model on this GPU)" if name == used else ""))
        print(seer.explain(args.op, inputs, calls=args.calls, model=path))
    return 0


def _dispatch_model_here(op: str) -> str | None:
    """The name of the model ``seer.dispatch`` decides ``op`` by on this GPU (as decisions name it),
    or None where it uses the hand rule."""
    import torch

    from seer.dispatch import resolve_model
    from seer.registry import get_op

    selector, description = resolve_model(get_op(op), torch.device("cuda", torch.cuda.current_device()))
    return None if selector is None else description


def _matrix_inputs(args, device: str) -> tuple:
    """The matrix file's ``(A, x)``, x of ones."""
    import torch

    from seer.datasets.suitesparse import read_matrix

    if _gemm_shape(args.input) is not None and not Path(args.input).exists():
        raise SeerError(f"{args.input!r} reads as a GEMM's shape: pass --op gemm (an SpMV is explained from a "
                        "matrix file)")
    matrix = read_matrix(Path(args.input)).astype("float32").tocsr()
    # Its arrays as a tuple: a torch sparse CSR tensor would print torch's notes on every build.
    A = (*(torch.from_numpy(part).to(device) for part in (matrix.indptr, matrix.indices, matrix.data)), matrix.shape)
    return A, torch.ones(matrix.shape[1], device=device)


def _gemm_inputs(args, device: str) -> tuple:
    """``(a, b)`` of the shape, one element each seen through every index: a GEMM's choice reads
    sizes and dtype alone, and a real operand of a large shape would take GPU memory for nothing."""
    import torch

    sizes = _gemm_shape(args.input)
    if sizes is None or 0 in sizes or max(sizes) >= 2**63:
        raise SeerError(f"a GEMM is given by its shape MxNxK, three whole numbers of 1 or more (e.g. "
                        f"16x4096x14336), got {args.input!r}")
    m, n, k = sizes
    too_large = [name for name, count in (("A (MxK)", m * k), ("B (KxN)", k * n), ("C (MxN)", m * n)) if count >= 2**63]
    if too_large:  # torch counts a tensor's elements in int64
        raise SeerError(f"GEMM {args.input.strip()}: {', '.join(too_large)} would hold 2**63 elements or more, "
                        "past what a tensor can hold")
    one = torch.ones((), dtype=getattr(torch, args.dtype or "bfloat16"), device=device)
    return one.expand(m, k), one.expand(k, n)


def _gemm_shape(text: str) -> tuple[int, int, int] | None:
    shape = re.fullmatch(r"([0-9]+)x([0-9]+)x([0-9]+)", text.strip().lower())
    return None if shape is None else tuple(int(size) for size in shape.groups())


# What `seer explain` builds an op's inputs from; the multi-GPU ops need a world of ranks (seer.explain).
_EXPLAINED_INPUTS = {"spmv": _matrix_inputs, "gemm": _gemm_inputs}


@contextmanager
def _folder_for(path: Path, what: str) -> Iterator[None]:
    """Make ``path`` (and its missing parents) for the body to write into; where the body raises,
    remove the folders made here that are still empty, so that a refusal leaves nothing behind."""
    made = [folder for folder in (path, *path.parents) if not folder.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SeerError(f"cannot make {what} {path}: {error.strerror or error}") from None
    try:
        yield
    except BaseException:
        for folder in made:  # deepest first
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise


def _check_writable(out: Path) -> None:
    """A SeerError now, not a traceback after minutes of training or profiling, where ``out`` (not a
    folder: each command refuses that first, naming what it writes) cannot be written."""
    if out.exists() and not os.access(out, os.W_OK):
        raise SeerError(f"cannot write --out {out}: the file is read-only")
    try:
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.stem}-", suffix=".tmp"):
            pass
    except OSError as error:
        raise SeerError(f"cannot write --out {out}: {error.strerror or error}") from None


def _relative(path: Path) -> Path:
    """``path`` relative to the working directory where it lies below it: models record it."""
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path


if __name__ == "__main__":
    sys.exit(main())
