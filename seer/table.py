"""Profile tables: what was measured on a GPU, one CSV row per input.

Format
------
A profile table is a CSV file with one row per input (a matrix, a GEMM shape, ...) and a
metadata file beside it. Columns:

``id``                  required, unique: names the input (e.g. ``HB/bcsstk17``).
``group``               optional: the family the input belongs to (a matrix and the matrices
                        derived from it share a group). Cross-validation never puts one group on
                        both sides of a split. Empty or absent: the row's ``id``.
``source``              optional: ``real``, ``derived`` or ``synthetic`` (or empty); reports score
                        ``real`` rows separately from the others.
*feature columns*       named as the op's features (``seer.features.<op>``): every KNOWN feature
                        is required; GATHERED features are optional, and when present the
                        model gets a second stage that uses them. Cells must be finite numbers,
                        those of integer features (sizes, counts, codes) whole and not negative.
``gather_ms``           optional: measured time to compute the gathered features for that
                        input, in ms. Absent: gathering is treated as free (with a warning).
``time_ms:<variant>``   one per variant, at least two: median time of one call, in ms. Rows
                        with a missing, NaN, infinite, zero, negative, sub-nanosecond or
                        over-a-day time (:data:`MIN_TIME_MS`, :data:`MAX_TIME_MS`) are dropped with
                        one ``SeerWarning`` that counts them per column.
``baseline_ms:<name>``  optional: a vendor library (``baseline_ms:cusparse``) for comparison;
                        reported, never chosen. Empty cells leave that row out of the comparison;
                        any other cell must be a time from a nanosecond to a day.
``call_us:<name>``      optional: host wall time of one call of a variant or baseline, in µs:
                        empty, or above 0 and at most a day (:data:`MAX_TIME_MS`, in µs).
``prepare_ms:<variant>`` optional: the variant's one-time work on a new input (its first call's
                        plan: preprocessing, descriptors), in ms: what it adds to the device's
                        timeline (its kernels and host synchronisations, not the host's planning;
                        ``seer.profiling.preparation_columns``); from 0 to a day. Absent:
                        the variant needs none. Training and scores charge it once over the
                        expected number of calls.
Any other column is kept in ``ProfileTable.frame`` and ignored, unless its name is close to one seer
reads (``groop``, ``time_ms_x``, ``row_mx``): refused as a likely misspelling, which would otherwise
change what is trained in silence. Every column is named once, and every line has as many fields as
the header.

Metadata, ``<stem>.meta.json`` next to ``<stem>.csv``::

    {"op": "spmv",
     "device": {"name": "NVIDIA H100 80GB HBM3", "capability": [9, 0]},
     "versions": {"torch": "2.11.0", "triton": "3.6.0", "seer": "0.1.0", "cuda": "12.8"},
     "date": "2025-06-01T12:00:00+00:00",
     "command": "python benchmarks/profile_spmv.py --out ...",
     "notes": "free text"}

``op`` is required unless passed to :func:`read_table`. An op that seer has no feature module
for may list its features instead: ``"features": {"known": [...], "gathered": [...]}``. A table
``seer profile`` wrote also lists every run that added rows to it (``"commands"``, and ``"runs"``:
each one's command, date and versions; the top-level ones are the last run's), the options that
chose its inputs (``"inputs": {"synthetic": "large", "seed": 0}``: a resume with others is refused)
and the inputs it skipped, with why (``"skipped": {"<id>": "<reason>"}``: unsupported, or out of
memory; a resume does not try them again unless given ``--retry-skipped``).

Campaigns
---------
:func:`merge_tables` (``seer merge``) makes one table of several profiling campaigns of one op on
one GPU: a row measured in several holds the mean of each measured column (``time_ms``,
``baseline_ms``, ``call_us``, ``prepare_ms``, ``gather_ms``) over the campaigns that measured it,
a ``campaigns`` column says how many did, and the metadata lists each campaign (file, sha256,
date, rows, versions); its own ``date`` is the latest campaign's. Why: a ~5 µs kernel's median
moves by ~3 % between campaigns (the tail of the timer and the machine instance), as much as the
gaps between the fastest variants of a small matrix; the mean of two halves that noise in the
table's labels and in its oracle.
"""
from __future__ import annotations

import contextlib
import csv
import difflib
import hashlib
import io
import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from seer.errors import ProfileTableError, exit_on_seer_error, warn
from seer.files import replace_atomically
from seer.model import GATHER, is_capability, is_count, op_feature_module

TIME = "time_ms:"
BASELINE = "baseline_ms:"
CALL = "call_us:"
PREPARE = "prepare_ms:"
GATHER_MS = "gather_ms"
CAMPAIGNS = "campaigns"
# No GPU call takes under a nanosecond (a launch alone takes microseconds): a smaller time is a unit
# or recording error, and its ratios to the other times (regrets, speed-ups) overflow to infinity.
MIN_TIME_MS = 1e-6
# Nor does one take a day; a longer time is a recording error whose sums overflow in training
# (regrets of 1e307 ms are infinite): treated as a failed measurement.
MAX_TIME_MS = 86_400_000.0
# The values' dtypes a table may be profiled in (seer.sparse.VALUE_DTYPES, by torch's names; the
# first is that of tables from before the metadata recorded it).
DTYPES = ("float32", "float16", "bfloat16")
# What a row's ``source`` may say (reports score "real" rows apart from the others).
SOURCES = ("real", "derived", "synthetic")
# Names, read as written: a family called "NA" or "None" is a family, not a missing cell (pandas's
# default would make each of its rows a group of its own, and grouped CV would train on its members).
TEXT_COLUMNS = ("id", "group", "source")
# What pandas reads as missing by default, for every other column.
NA_CELLS = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
            "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]


@dataclass(frozen=True)
class ProfileTable:
    """A validated profile table; ``frame`` holds the kept rows with a fresh 0..n-1 index."""

    frame: pd.DataFrame
    op: str
    variants: tuple[str, ...]
    baselines: tuple[str, ...]
    known_features: tuple[str, ...]
    gathered_features: tuple[str, ...]
    meta: dict
    path: Path | None = None

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, op: str, meta: Mapping | None = None, path: Path | None = None) -> ProfileTable:
        """Validate ``frame`` (as read from the CSV) against the format in the module docstring."""
        meta = dict(meta or {})
        frame = frame.reset_index(drop=True)  # a copy, numbered as the file's rows from 0 (errors name them)
        repeated = sorted({str(name) for name in frame.columns[frame.columns.duplicated()]})
        if repeated:  # a frame built in memory; read_header refuses them in a file
            raise ProfileTableError(f"column(s) {repeated} appear more than once; name each column once")
        known, gathered, every_gathered = _feature_names(op, meta, frame.columns)
        variants = _suffixes(frame.columns, TIME)
        _check_names(frame.columns)
        _check_misspelt(frame.columns, op, [*known, *every_gathered], variants)
        if len(variants) < 2:
            raise ProfileTableError(f"need at least two '{TIME}<variant>' columns, found {[TIME + v for v in variants]}")
        if GATHER in variants:
            raise ProfileTableError(f"'{TIME}{GATHER}': {GATHER!r} is reserved for the model's gather choice")
        extra_calls = sorted(set(_suffixes(frame.columns, CALL)) - set(variants) - set(_suffixes(frame.columns, BASELINE)))
        if extra_calls:
            raise ProfileTableError(f"'{CALL}' columns {extra_calls} have no matching '{TIME}' or '{BASELINE}' column"
                                    + misspelt_hint(extra_calls, variants, TIME))
        extra_prepare = sorted(set(_suffixes(frame.columns, PREPARE)) - set(variants))
        if extra_prepare:
            raise ProfileTableError(f"'{PREPARE}' columns {extra_prepare} have no matching '{TIME}' column"
                                    + misspelt_hint(extra_prepare, variants, TIME))
        _check_ids(frame)
        if frame.empty:
            raise ProfileTableError("the table has no rows, only a header: profile some inputs into it first")
        numeric = [*known, *gathered, *_present(frame, GATHER_MS), *_prefixed(frame, TIME, BASELINE, CALL, PREPARE)]
        for column in numeric:
            frame[column] = _numeric(frame, column)
        for column in [*known, *gathered, *_present(frame, GATHER_MS)]:
            _check_finite(frame, column)
        for column in [*known, *gathered]:
            _check_float32_range(frame, column)
        for column in _integer_features(op, [*known, *gathered]):
            _check_whole_numbers(frame, column)
        _check_sources(frame)
        frame = _drop_failed_rows(frame, [TIME + v for v in variants])
        for column in _prefixed(frame, PREPARE):  # after the drop: a failed variant has no preparation either
            _check_finite(frame, column)
        for column in _prefixed(frame, BASELINE):
            _check_baseline(frame, column)
        for column in _prefixed(frame, CALL):
            _check_host_time(frame, column)
        frame = frame.reset_index(drop=True)
        frame["group"] = _groups(frame)
        frame["id"] = frame["id"].astype(str)
        return cls(frame, op, variants, _suffixes(frame.columns, BASELINE), known, gathered, meta, path)

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def ids(self) -> np.ndarray:
        return self.frame["id"].to_numpy(dtype=object)

    @property
    def groups(self) -> np.ndarray:
        return self.frame["group"].to_numpy(dtype=object)

    @property
    def sources(self) -> np.ndarray | None:
        if "source" not in self.frame:
            return None
        return self.frame["source"].fillna("").astype(str).to_numpy(dtype=object)

    @property
    def times(self) -> np.ndarray:
        """[rows, variants] median ms per call."""
        return self.frame[[TIME + v for v in self.variants]].to_numpy(dtype=float)

    @property
    def baseline_times(self) -> np.ndarray:
        """[rows, baselines] ms per call; NaN where the library has no measurement."""
        return self.frame[[BASELINE + b for b in self.baselines]].to_numpy(dtype=float)

    @property
    def gather_ms(self) -> np.ndarray | None:
        return self.frame[GATHER_MS].to_numpy(dtype=float) if GATHER_MS in self.frame else None

    @property
    def prepare_ms(self) -> np.ndarray:
        """[rows, variants] one-time preparation per input in ms; 0 where the table has no column."""
        return self.frame.reindex(columns=[PREPARE + v for v in self.variants]).fillna(0.0).to_numpy(dtype=float)

    @property
    def call_us(self) -> np.ndarray | None:
        """[rows, variants] host µs per full call, NaN where not measured; None without such columns."""
        if not _prefixed(self.frame, CALL):
            return None
        return self.frame.reindex(columns=[CALL + v for v in self.variants]).to_numpy(dtype=float)

    @property
    def has_stage2(self) -> bool:
        return bool(self.gathered_features)

    def features(self, names: Sequence[str]) -> np.ndarray:
        """[rows, len(names)] feature values as float64."""
        return self.frame[list(names)].to_numpy(dtype=float)


def read_table(path: str | Path, op: str | None = None) -> ProfileTable:
    """Read ``path`` and its ``<stem>.meta.json``; ``op`` defaults to the one in the metadata."""
    path = Path(path)
    check_table_path(path)
    if not path.is_file():
        raise ProfileTableError(f"profile table {path} does not exist")
    with _read_errors():
        return _read_table(path, op)


def _read_table(path: Path, op: str | None) -> ProfileTable:
    """:func:`read_table` of a file that exists."""
    meta = read_meta(meta_path(path))
    if op is None:
        op = meta.get("op")
        if not op:
            raise ProfileTableError(f"no op for {path}: name it (op=, or --op on the command line) or put \"op\" in "
                                    f"{meta_path(path)}")
    elif meta.get("op", op) != op:
        raise ProfileTableError(f"{path} was profiled for op {meta['op']!r}, not {op!r}")
    _warn_if_cut(path)
    try:
        frame = read_rows(path, read_header(path))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, csv.Error) as error:
        raise ProfileTableError(f"{path} is not a readable CSV: {error}") from None
    try:
        return ProfileTable.from_frame(frame, op, meta, path)
    except ProfileTableError as error:
        raise ProfileTableError(f"{path}: {error}") from None


def check_table_path(path: Path) -> None:
    """A ProfileTableError where ``path`` cannot be a profile table, to read or to write: a folder,
    or a JSON file (read as CSV it would only lack every column, and a table named so would be
    refused when read)."""
    if path.is_dir():
        raise ProfileTableError(f"{path} is a folder; give the profile table (a CSV with its .meta.json beside)")
    if path.suffix.lower() == ".json":
        raise ProfileTableError(f"{path} is JSON (a model, or a table's metadata); a profile table is the CSV beside "
                                "its .meta.json")


@contextlib.contextmanager
def _read_errors():
    """Within it, a file that cannot be read (no permission, a folder where a file should be) is a
    ProfileTableError naming it, not a traceback."""
    try:
        yield
    except OSError as error:
        raise ProfileTableError(f"cannot read {error.filename}: {error.strerror or error}") from None


def _warn_if_cut(path: Path) -> None:
    """seer ends every table it writes with a newline: a last line without one was cut (a copy or a
    write that stopped) or edited by hand, which is legitimate, so its row is read as it stands."""
    with path.open("rb") as file:
        if file.seek(0, os.SEEK_END) == 0:
            return  # empty: refused as such when read
        file.seek(-1, os.SEEK_END)
        if file.read(1) == b"\n":
            return
    warn(f"{path} does not end with a newline, as every table seer writes does: its last row may be cut short "
         "(a copy or a write that stopped); check that row, and end the file with a newline")


def write_table(frame: pd.DataFrame, path: str | Path, meta: Mapping) -> Path:
    """Write ``frame`` as CSV and ``meta`` as ``<stem>.meta.json`` beside it; returns the CSV path. Each
    file is replaced whole or not at all: tables are rewritten in place (retired variants, regrouped
    rows), and one cut short would read back as fewer rows."""
    path = Path(path)
    data = _csv_text(frame)
    _check_reads_back(path, data, frame)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(path, data.encode())
        replace_atomically(meta_path(path), (json.dumps(dict(meta), indent=2, sort_keys=True) + "\n").encode())
    except OSError as error:  # its file name may be the partial file's, which the user never named
        raise ProfileTableError(f"cannot write {path}: {error.strerror or error}") from None
    return path


# What makes a CSV field need quotes: in it unquoted, a comma or a quote would split or end it, and a
# line break (a lone carriage return too) would end the row.
_NEEDS_QUOTES = re.compile(r'[,"\r\n]')


def _csv_text(frame: pd.DataFrame) -> str:
    """``frame`` as pandas formats its cells, one line a row ended by a newline, each field that holds
    a comma, a quote or a line break quoted. ``to_csv`` alone does not do that: Python's csv writer,
    which it uses, quotes a line break only where it is a character of the line ending, so with "\n"
    a lone carriage return in a name is written bare, and every reader ends the row there."""
    # With "\r\n" line endings every cell holding either character is quoted, so the rows parse back
    # whole; they are then joined again with "\n", the line ending of every table seer writes.
    rendered = frame.to_csv(index=False, lineterminator="\r\n")
    rows = csv.reader(io.StringIO(rendered, newline=""))
    return "".join(",".join(map(_csv_field, row)) + "\n" for row in rows)


def _csv_field(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if _NEEDS_QUOTES.search(text) else text


def _check_reads_back(path: Path, data: str, frame: pd.DataFrame) -> None:
    """A ProfileTableError, before anything is written, where ``data`` would not read back as a header
    and ``frame``'s rows, each with a field a column: a table rewritten in place would be lost."""
    counts = [len(fields) for fields in csv.reader(io.StringIO(data, newline=""))]
    if counts != [len(frame.columns)] * (len(frame) + 1):
        raise ProfileTableError(f"cannot write {path}: its CSV would read back as {len(counts) - 1} rows of "
                                f"{sorted(set(counts))} fields, not {len(frame)} rows of {len(frame.columns)}; "
                                "nothing was written: report this as a bug in seer, with the table's unusual "
                                "names (ids, groups, sources)")


def _check_replaceable(out: Path) -> None:
    """A merge may replace an earlier merge (re-merged as a campaign grows), never a file that is not
    one: a campaign's measurements, or anything else, would be lost."""
    if not out.exists():
        return
    try:
        merged_before = CAMPAIGNS in read_meta(meta_path(out))
    except ProfileTableError:  # metadata that is no table's: not a merge either
        merged_before = False
    if not merged_before:
        raise ProfileTableError(f"{out} exists and is no merged table (its metadata lists no campaigns): write the "
                                "merged table to a new file, or remove this one first")


def merge_tables(paths: Sequence[str | Path], out: str | Path, command: str | None = None,
                 op: str | None = None) -> Path:
    """Write to ``out`` one table of the campaigns ``paths`` (see the module doc, Campaigns); ``op``:
    as for :func:`read_table`, for campaigns whose metadata names none.

    Rows keep the first campaign's order, then rows only later campaigns measured. Every
    campaign must be of one op and one GPU, and a row's features must agree in every campaign
    that measured it (else it is not the same input): a ProfileTableError names what differs."""
    paths, out = [Path(p) for p in paths], Path(out)
    check_table_path(out)  # before anything is written: the merged table must read back
    if len(paths) < 2:
        raise ProfileTableError(f"merging needs at least two campaigns, got {len(paths)}")
    if any(out.resolve() == p.resolve() for p in paths):
        raise ProfileTableError(f"{out} is one of the campaigns: write the merged table to a new file")
    if any(meta_path(out).resolve() == meta_path(p).resolve() for p in paths):
        raise ProfileTableError(f"{out}'s metadata file would be {meta_path(out)}, a campaign's: name the merged "
                                "table apart from the campaigns")
    _check_replaceable(out)
    tables = [read_table(p, op) for p in paths]
    for path, table in zip(paths, tables):
        if CAMPAIGNS in table.frame.columns:
            raise ProfileTableError(f"{path} is already a merged table (it has a {CAMPAIGNS!r} column): merge the "
                                    "campaign tables it was made of, listed in its metadata, with the new one")
    _check_same_op_and_device(tables)
    _warn_of_other_versions(paths, tables)
    digests = [table_sha256(p) for p in paths]  # read once: checked here, recorded in the metadata
    _check_distinct_campaigns(paths, digests)
    _check_columns_cover(paths, tables)
    frames = [t.frame.set_index("id") for t in tables]
    ids = list(dict.fromkeys(i for f in frames for i in f.index))
    merged = pd.concat(frames, keys=range(len(frames)), names=["campaign", "id"])
    first = merged.groupby(level="id", sort=False).first().loc[ids]
    _check_features_agree(merged, first, paths, tables)
    _check_names_agree(merged, paths)
    measured = [c for c in merged.columns if str(c).startswith((TIME, BASELINE, CALL, PREPARE)) or c == GATHER_MS]
    result = first.copy()
    result[measured] = merged[measured].groupby(level="id", sort=False).mean().loc[ids]
    result[CAMPAIGNS] = merged.groupby(level="id", sort=False).size().loc[ids]
    meta = dict(tables[0].meta)
    meta.update(
        op=tables[0].op,  # as the campaigns were read (perhaps given as op=): the merged table reads without it
        command=command or f"seer merge {' '.join(map(str, paths))} --out {out}",
        campaigns=[{"table": str(p), "sha256": digest, "date": t.meta.get("date"), "rows": len(t),
                    "versions": t.meta.get("versions"), "commands": t.meta.get("commands", [t.meta.get("command")]),
                    **{key: t.meta[key] for key in ("runs", "skipped", "inputs") if key in t.meta}}
                   for p, t, digest in zip(paths, tables, digests)],
    )
    meta.pop("date", None)  # the first campaign's; the merged table's is the latest, where a campaign has one
    if latest := _latest_date(tables):
        meta["date"] = latest
    meta.pop("commands", None)
    meta.pop("runs", None)  # the first campaign's: each campaign's are listed with it
    meta.pop("skipped", None)  # likewise (another campaign may have measured them)
    meta.pop("inputs", None)  # likewise (one campaign's real matrices, another's with the generated suite)
    ProfileTable.from_frame(result.reset_index(), tables[0].op, meta)  # the merged table must read back
    return write_table(result.reset_index(), out, meta)


def _latest_date(tables: Sequence[ProfileTable]) -> str | None:
    """The latest of the campaigns' dates, as written, by the moment each names (their UTC offsets may
    differ, so their text does not sort; one without an offset is read as UTC, as seer writes them). A
    date that is no ISO 8601 text (null, say) names no moment and is passed over; None where none does."""
    moments = {}
    for date in (table.meta.get("date") for table in tables):
        with contextlib.suppress(TypeError, ValueError):
            moment = datetime.fromisoformat(date)
            moments[date] = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
    return max(moments, key=moments.get, default=None)


def _warn_of_other_versions(paths: list[Path], tables: list[ProfileTable]) -> None:
    """A warning where the campaigns were measured with other torch, Triton or seer versions, as a
    resumed campaign warns: rows averaged across them may not be comparable."""
    for name in ("torch", "triton", "seer"):
        seen = {str(path): (table.meta.get("versions") or {}).get(name) for path, table in zip(paths, tables)}
        if len(set(seen.values())) > 1:
            warn(f"the campaigns were measured with other {name} versions ({', '.join(f'{p}: {v}' for p, v in seen.items())}): "
                 "their rows, averaged, may not be comparable")


def _version(text: str) -> tuple[int, int]:
    """(major, minor) of a version string such as 3.0.6, 3.1.0rc1 or 3.1rc1."""
    major, minor = re.match(r"(\d+)\.(\d+)", text).groups()
    return int(major), int(minor)


# pandas before 3.1 (3.0.6 on the GPU image) parses a float to within an ulp of what was written
# unless asked for a round trip, and a merge or a rewrite then keeps the error; 3.1 parses exactly
# and deprecates the argument.
_EXACT_FLOATS = {"float_precision": "round_trip"} if _version(pd.__version__) < (3, 1) else {}


def read_frame(path: str | Path, *, data: bytes | None = None, **options) -> pd.DataFrame:
    """A table's CSV with every float as written, to the bit, on any pandas this package supports;
    ``data``: the file's bytes where the caller has read them (a resume reads its whole lines alone).
    Every reader of a table comes here: each line's fields are counted against the header's first."""
    data = Path(path).read_bytes() if data is None else data
    _check_field_counts(path, data)
    # index_col=False: pandas would otherwise take the first field for an index where every row has
    # one more than the header (the field counts are checked, but an empty table has no rows to check).
    return pd.read_csv(io.BytesIO(data), index_col=False, **_EXACT_FLOATS, **options)


def _check_field_counts(path: str | Path, data: bytes) -> None:
    """A ProfileTableError naming the first line with more or fewer fields than the header: pandas
    would shift such a table's columns (the first field read as an index where every row has one
    more) or pad it with empty cells, silently."""
    miscounted = miscounted_line(data)
    if miscounted is not None:
        number, fields, columns = miscounted
        raise ProfileTableError(f"{path}: line {number} has {fields} fields, but the header names {columns} columns: "
                                "a cell too many or too few (a comma in a name, or a row cut short); fix that line")


def miscounted_line(data: bytes, *, spare_empty: bool = False) -> tuple[int, int, int] | None:
    """``(line number, its fields, the header's)`` of a CSV's first line whose field count is not the
    header's, or None; a blank line is no row (pandas skips it too). ``spare_empty``: empty fields past
    the header's count do not count (rows written with a comma at the end)."""
    lines = csv.reader(io.StringIO(data.decode("utf-8"), newline=""))
    header = next(lines, [])
    for fields in lines:
        while spare_empty and len(fields) > len(header) and fields[-1] == "":
            fields = fields[:-1]
        if fields and len(fields) != len(header):
            return lines.line_num, len(fields), len(header)
    return None


def read_rows(path: str | Path, header: Sequence[str] | None = None) -> pd.DataFrame:
    """A table's CSV as :func:`read_table` reads it: floats to the bit, and names (``id``, ``group``,
    ``source``) as text, where only an empty cell is missing (an input may be named ``NA``)."""
    header = read_header(path) if header is None else header
    return read_frame(path, dtype=dict.fromkeys(TEXT_COLUMNS, str), keep_default_na=False,
                      na_values={c: [""] if c in TEXT_COLUMNS else NA_CELLS for c in header})


def read_cells(path: str | Path) -> pd.DataFrame:
    """The table's cells as written (strings, empty cells kept empty), for a rewrite in place that
    changes some columns and re-formats none of the others."""
    return read_frame(path, dtype=str, keep_default_na=False)


def retire_variants(path: str | Path, variants: Sequence[str], command: str, op: str | None = None) -> list[str]:
    """Remove the columns of ``variants`` (``time_ms``, ``call_us``, ``prepare_ms``) from the table
    ``path`` in place, every other cell kept as written, and record it in the metadata under
    ``retired_variants`` (``command``: how it was run; ``op``: as for :func:`read_table`). For a
    variant dropped from the op: a table that still names it trains a model that names it, which
    dispatch sets aside for the hand rule (with a warning). Returns the columns removed; raises
    ProfileTableError, leaving the file alone, if a variant is not in it."""
    path, variants = Path(path), list(dict.fromkeys(variants))
    table, columns = _retirable(path, variants, op)
    kept = read_cells(path).drop(columns=columns)
    retired = [*table.meta.get("retired_variants", []), {"variants": variants, "by": command}]
    write_table(kept, path, {**table.meta, "retired_variants": retired})
    return columns


def _retirable(path: Path, variants: Sequence[str], op: str | None) -> tuple[ProfileTable, list[str]]:
    """The table ``path``, read, and the columns retiring ``variants`` removes, once it is known to have every
    one of them and to read as a table without them (the command checks every table before rewriting any)."""
    table = read_table(path, op)
    missing = [v for v in variants if v not in table.variants]
    if missing:
        raise ProfileTableError(f"{path} has no variant(s) {missing}; its variants: {list(table.variants)}")
    rows = read_rows(path)
    columns = [c for v in variants for c in (TIME + v, CALL + v, PREPARE + v) if c in rows.columns]
    try:
        ProfileTable.from_frame(rows.drop(columns=columns), table.op, table.meta)
    except ProfileTableError as error:
        raise ProfileTableError(f"{path} without {variants}: {error}") from None
    return table, columns


def _check_distinct_campaigns(paths: Sequence[Path], digests: Sequence[str]) -> None:
    """Two campaigns with the same bytes (``digests``: their sha256) are one campaign twice: their
    mean is that campaign, but the merged table would count every row as measured twice."""
    seen: dict[str, Path] = {}
    for path, digest in zip(paths, digests):
        if digest in seen:
            raise ProfileTableError(f"{seen[digest]} and {path} are the same table (sha256 {digest[:12]}...): "
                                    "merge campaigns measured separately, each once")
        seen[digest] = path


def _check_columns_cover(paths: Sequence[Path], tables: Sequence[ProfileTable]) -> None:
    """A column that must be filled on every row (a gathered feature, ``gather_ms``, a variant's time
    or preparation) but that only some campaigns have is left empty on the rows only the others
    measured: name the campaign that lacks it, rather than let the merged table fail to read back
    naming none."""
    columns = dict.fromkeys(c for t in tables for c in t.frame.columns
                            if c in t.gathered_features or c == GATHER_MS or str(c).startswith((PREPARE, TIME)))
    for column in columns:
        having = [(p, t) for p, t in zip(paths, tables) if column in t.frame.columns]
        covered = {i for _, t in having for i in t.ids}
        for path, table in zip(paths, tables):
            uncovered = [i for i in table.ids if i not in covered]
            if uncovered:
                raise ProfileTableError(
                    f"{path} has no column {column!r}, which {having[0][0]} has, and its rows {uncovered[:3]} are "
                    f"in no campaign that measured it: add the column to {path}, or merge without it")


def _check_same_op_and_device(tables: Sequence[ProfileTable]) -> None:
    for table in tables[1:]:
        if table.op != tables[0].op:
            raise ProfileTableError(f"{table.path} profiles op {table.op!r}, {tables[0].path} op {tables[0].op!r}")
        names = [device_of(t.meta)["name"] for t in (tables[0], table)]
        if names[0] != names[1]:
            raise ProfileTableError(f"{tables[0].path} was measured on {names[0]!r}, {table.path} on {names[1]!r}: "
                                    "only campaigns on one GPU can be averaged")
        # Tables before the field was recorded are float32 (as seer profile reads them).
        dtypes = [t.meta.get("dtype", "float32") for t in (tables[0], table)]
        if dtypes[0] != dtypes[1]:
            raise ProfileTableError(f"{tables[0].path} was profiled in {dtypes[0]}, {table.path} in {dtypes[1]}: "
                                    "only campaigns of one dtype can be averaged")


def _check_features_agree(merged: pd.DataFrame, first: pd.DataFrame, paths: Sequence[Path],
                          tables: Sequence[ProfileTable]) -> None:
    """Every campaign has every campaign's known features, and each row's features agree in every
    campaign that measured the row and has the feature: one campaign without a gathered feature (its
    rows covered by others, :func:`_check_columns_cover`) says nothing of it, and the others are
    still compared."""
    known = list(dict.fromkeys(name for table in tables for name in table.known_features))
    gathered = dict.fromkeys(name for table in tables for name in table.gathered_features)
    for name in known:
        # Without it a campaign's rows would reach the merged table without a feature its metadata calls
        # required, or campaigns of other feature sets would be averaged: name the campaign instead.
        lacking = next((k for k, table in enumerate(tables) if name not in table.frame.columns), None)
        if lacking is not None:
            having = next(k for k, table in enumerate(tables) if name in table.frame.columns)
            raise ProfileTableError(f"campaign {lacking + 1} ({paths[lacking]}) has no column {name!r}, a feature of "
                                    f"campaign {having + 1} ({paths[having]}): merge campaigns of one feature set")
    for name in [*known, *gathered]:
        values = merged[name].to_numpy(dtype=float)  # empty only in campaigns without the column: features are finite
        reference = first[name].reindex(merged.index.get_level_values("id")).to_numpy(dtype=float)
        differs = ~np.isnan(values) & ~np.isclose(values, reference, rtol=1e-9, atol=0.0)
        if differs.any():
            campaign, row = merged.index[np.flatnonzero(differs)[0]]
            # float(): a numpy scalar's repr would print as np.float64(7.36)
            raise ProfileTableError(f"input {row!r} has {name} = {float(values[differs][0])!r} in campaign "
                                    f"{campaign + 1} but {float(reference[differs][0])!r} in an earlier one: not "
                                    "the same input")


def _check_names_agree(merged: pd.DataFrame, paths: Sequence[Path]) -> None:
    """An input's group and source are its suite's (its family; real, derived or synthetic): campaigns
    that disagree on them profiled different suites, and the merge would keep the first's silently."""
    for column in ("group", "source"):
        if column not in merged.columns:
            continue
        cells = merged[column].dropna()  # an empty source says nothing
        distinct = cells.groupby(level="id", sort=False).nunique()
        if (distinct > 1).any():
            row = distinct.index[distinct > 1][0]
            values = cells.xs(row, level="id")  # by campaign
            first, other = values.index[0], values.index[values != values.iloc[0]][0]
            regroup = (" (or grouped their inputs by other definitions: python -m seer.datasets.cases regroup "
                       "rewrites an SpMV table's groups as seer defines them today)") if column == "group" else ""
            raise ProfileTableError(f"input {row!r} has {column} {values[first]!r} in {paths[first]} but "
                                    f"{values[other]!r} in {paths[other]}: the campaigns profiled different "
                                    f"suites{regroup}; merge campaigns of one suite")


def meta_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.stem + ".meta.json")


def table_sha256(path: str | Path) -> str:
    """Hex sha256 of the CSV file's bytes: which table a model was trained on."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------------- validation helpers


def read_meta(path: Path) -> dict:
    """A table's metadata, its fields' types checked ({} where the file does not exist)."""
    if not path.is_file():
        return {}
    try:
        with _read_errors():
            meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ProfileTableError(f"{path} is not JSON: {error}") from None
    if not isinstance(meta, dict):
        raise ProfileTableError(f"{path} must hold a JSON object")
    try:
        _check_meta_fields(meta)
    except ProfileTableError as error:
        raise ProfileTableError(f"{path}: {error}") from None
    return meta


def _check_meta_fields(meta: Mapping) -> None:
    """The fields seer reads must have the types the format gives them: a wrong one would pass
    here and fail far away (training, merging, a model dispatch cannot match to a GPU)."""
    if "op" in meta and not (isinstance(meta["op"], str) and meta["op"]):
        raise ProfileTableError(f"\"op\" must be an op's name, got {meta['op']!r}")
    if not isinstance(meta.get("versions", {}), Mapping):
        raise ProfileTableError(f"\"versions\" must be an object such as {{\"torch\": \"2.11.0\"}}, got {meta['versions']!r}")
    for name, example in (("inputs", '{"synthetic": "large", "seed": 0}'), ("skipped", '{"<id>": "<reason>"}'),
                          ("groups", '{"definition": "...", "rewritten_by": "<command>"}')):
        if not isinstance(meta.get(name, {}), Mapping):  # seer profile reads them to resume, a regroup the last
            raise ProfileTableError(f"\"{name}\" must be an object such as {example}, got {meta[name]!r}")
    # Lists that seer profile, retire and merge extend and copy: each entry of the type they write.
    for name, kind, example in (("commands", str, '["seer profile spmv ..."]'),
                                ("runs", Mapping, '[{"command": ..., "date": ..., "versions": {...}}]'),
                                ("retired_variants", Mapping, '[{"variants": ["<variant>"], "by": "<command>"}]')):
        entries = meta.get(name, [])
        if not (isinstance(entries, list) and all(isinstance(entry, kind) for entry in entries)):
            raise ProfileTableError(f"\"{name}\" must be a list such as {example}, got {entries!r}")
    if meta.get("dtype", DTYPES[0]) not in DTYPES:  # a model trained on the table records it, dispatch compares it
        raise ProfileTableError(f"\"dtype\" must name the values' dtype, one of {list(DTYPES)}, got {meta['dtype']!r}")
    device_of(meta)


def device_of(meta: Mapping) -> dict:
    """``{"name", "capability"}`` of the metadata's ``device``, with its ``sm_count`` where it has one:
    an object, or the GPU's name alone; both None where the metadata names no device.
    ProfileTableError for any other shape."""
    device = meta.get("device")
    if device is None or isinstance(device, str):
        device = {"name": device}
    if not isinstance(device, Mapping):
        raise ProfileTableError(f"\"device\" must be an object {{\"name\": ..., \"capability\": [major, minor]}}, "
                                f"got {device!r}")
    name, capability = device.get("name"), device.get("capability")
    if name is not None and not isinstance(name, str):
        raise ProfileTableError(f"the device's \"name\" must be a string, got {name!r}")
    if capability is not None and not is_capability(capability):
        raise ProfileTableError(f"the device's \"capability\" must be [major, minor], got {capability!r}")
    found = {"name": name, "capability": None if capability is None else list(capability)}
    if device.get("sm_count") is not None:  # what features counting the GPU's SMs (GEMM's waves) read
        if not is_count(device["sm_count"], least=1):
            raise ProfileTableError(f"the device's \"sm_count\" must be a whole number >= 1, got {device['sm_count']!r}")
        found["sm_count"] = device["sm_count"]
    return found


def _feature_names(op: str, meta: Mapping, columns: pd.Index) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(known, gathered present in the table, every gathered), from the op's feature module or the metadata."""
    module = op_feature_module(op)
    if module is not None:
        known = [f.name for f in module.KNOWN]
        gathered = [f.name for f in module.GATHERED]
    elif isinstance(meta.get("features"), Mapping):
        known, gathered = (meta["features"].get(kind, []) for kind in ("known", "gathered"))
        for kind, names in (("known", known), ("gathered", gathered)):
            if not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
                raise ProfileTableError(f"the metadata's features.{kind} must be a list of column names, got "
                                        f"{names!r}")
        known, gathered = list(known), list(gathered)
    else:
        raise ProfileTableError(
            f"seer has no feature module for op {op!r} and the metadata lists no "
            "\"features\": {\"known\": [...], \"gathered\": [...]}"
        )
    if not known:
        raise ProfileTableError(f"op {op!r} has no known features")
    names = [*known, *gathered]
    if not all(isinstance(name, str) and name for name in names):
        raise ProfileTableError(f"feature names must be non-empty strings, got {names}")
    repeated = sorted(name for name, count in Counter(names).items() if count > 1)
    if repeated:
        raise ProfileTableError(f"feature(s) {repeated} are listed more than once among the known and gathered "
                                "features: list each once, as known or as gathered")
    missing = [name for name in known if name not in columns]
    if missing:
        raise ProfileTableError(f"missing required feature column(s) {missing} (known features of {op!r})")
    return tuple(known), tuple(name for name in gathered if name in columns), tuple(gathered)


def _suffixes(columns: pd.Index, prefix: str) -> tuple[str, ...]:
    return tuple(str(c)[len(prefix):] for c in columns if str(c).startswith(prefix))


def _prefixed(frame: pd.DataFrame, *prefixes: str) -> list[str]:
    return [c for c in frame.columns if str(c).startswith(prefixes)]


def _present(frame: pd.DataFrame, column: str) -> list[str]:
    return [column] if column in frame.columns else []


def _check_ids(frame: pd.DataFrame) -> None:
    if "id" not in frame.columns:
        raise ProfileTableError("missing the 'id' column")
    ids = frame["id"]
    empty = ids.isna() | (ids.astype(str).str.strip() == "")
    if empty.any():
        raise ProfileTableError(f"empty id in row(s) {_rows(frame, empty)}")
    ids = ids.astype(str)  # as the table keeps them: 0 and "0" are one id
    duplicated = ids[ids.duplicated()].unique().tolist()
    if duplicated:
        raise ProfileTableError(f"duplicate id(s) {duplicated[:5]}: every row needs its own id")


def _numeric(frame: pd.DataFrame, column: str) -> pd.Series:
    """The column as float64; ProfileTableError naming the first non-numeric cells. A column pandas read
    as booleans (every cell True or False) is no number either, though it would convert to 1 and 0."""
    raw = frame[column]
    if len(raw) and pd.api.types.is_bool_dtype(raw):
        raise ProfileTableError(f"column {column!r} holds True/False, not numbers (first: "
                                f"{frame['id'].iloc[0]!s}: {raw.iloc[0]!r})")
    values = pd.to_numeric(raw, errors="coerce").astype(float)
    bad = values.isna() & raw.notna()
    if bad.any():
        examples = [f"{frame['id'].iloc[i]!s}: {raw.iloc[i]!r}" for i in np.flatnonzero(bad)[:3]]
        raise ProfileTableError(f"non-numeric cell(s) in column {column!r} ({', '.join(examples)})")
    return values


def read_header(path: str | Path) -> list[str]:
    """The header, every column named once: read before pandas renames a repeated name
    (``time_ms:a`` twice reads as variants ``a`` and ``a.1``)."""
    with Path(path).open(newline="", encoding="utf-8") as file:
        header = next(csv.reader(file), [])
    repeated = sorted(name for name, count in Counter(header).items() if count > 1)
    if repeated:
        raise ProfileTableError(f"{path}: column(s) {repeated} appear more than once in the header; name each column "
                                "once (merge repeated measurements with `seer merge`)")
    return header


def _are_times(values: np.ndarray) -> np.ndarray:
    """Which of ``values`` (ms) are measured times: from :data:`MIN_TIME_MS` to :data:`MAX_TIME_MS`."""
    return (values >= MIN_TIME_MS) & (values <= MAX_TIME_MS)  # NaN compares False


def _check_baseline(frame: pd.DataFrame, column: str) -> None:
    """Empty cells are rows the library was not measured on; any other cell is a time (see
    :data:`MIN_TIME_MS`), which speed-ups divide by."""
    values = frame[column].to_numpy(dtype=float)
    bad = ~np.isnan(values) & ~_are_times(values)
    if bad.any():
        raise ProfileTableError(f"column {column!r} must hold times from {MIN_TIME_MS} to {MAX_TIME_MS:g} ms (or be "
                                f"empty); outside, or infinite, in row(s) {_rows(frame, bad)}")


def _check_misspelt(columns: pd.Index, op: str, features: Sequence[str], variants: Sequence[str]) -> None:
    """ProfileTableError for a column seer does not read whose name is close to one it does: kept and
    ignored, a misspelt ``group`` made every row a family of its own (grouped CV then scored members of
    the training families: higher held-out scores), a misspelt time column dropped a variant, a
    misspelt feature a second stage's splits, all in silence. Other columns are kept and ignored."""
    read = [*TEXT_COLUMNS, GATHER_MS, CAMPAIGNS, *features]
    prefixes = (TIME, BASELINE, CALL, PREPARE)
    timed = sorted({*variants, *_registered_variants(op)})  # the table's and, for an op seer registers, its own
    names = [*read, *(prefix + variant for variant in timed for prefix in (TIME, PREPARE, CALL))]
    for column in map(str, columns):
        if column in read or column.startswith(prefixes):
            continue
        near = difflib.get_close_matches(column, names, n=1, cutoff=0.8) or [
            prefix + "..." for prefix in prefixes if difflib.SequenceMatcher(None, column[:len(prefix)], prefix).ratio() >= 0.8]
        if near:
            raise ProfileTableError(f"column {column!r} is none that seer reads, and close to {near[0]!r}: rename it "
                                    "if it is that one (a column seer does not read is kept and ignored; one so "
                                    "close reads as a misspelling)")


def misspelt_hint(names: Sequence[str], candidates: Sequence[str], prefix: str) -> str:
    """``" ('<prefix>b' is close to 'a': a misspelling? rename it)"`` for each name of ``candidates``
    close to one of ``names``, else ``""``: for errors whose column may be the misspelt one."""
    pairs = [(candidate, name) for name in names for candidate in difflib.get_close_matches(name, candidates, 1, 0.8)]
    said = "; ".join(f"'{prefix}{candidate}' is close to {name!r}" for candidate, name in pairs)
    return f" ({said}: a misspelling? rename it)" if pairs else ""


def _registered_variants(op: str) -> list[str]:
    """The variants of ``op`` where seer registers it, else none (an op of the user's: its table's own)."""
    from seer.registry import OPS, variant_names

    return variant_names(op) if op in OPS else []


def _check_names(columns: pd.Index) -> None:
    """Every ``<prefix>:<name>`` column names something: an empty name would train a model with a
    nameless variant, refused only after the whole cross-validation."""
    empty = [str(c) for c in columns if str(c) in (TIME, BASELINE, CALL, PREPARE)]
    if empty:
        raise ProfileTableError(f"column(s) {empty} name no variant: write the variant after the colon")


def _check_float32_range(frame: pd.DataFrame, column: str) -> None:
    """scikit-learn's trees hold features as float32: a finite value beyond its range would reach
    training as an infinity and fail there, far from the table."""
    limit = float(np.finfo(np.float32).max)
    bad = np.abs(frame[column].to_numpy(dtype=float)) > limit
    if bad.any():
        raise ProfileTableError(f"column {column!r} has values beyond float32's range (|x| > {limit:.3g}), which "
                                f"the trees cannot hold, in row(s) {_rows(frame, bad)}")


def _integer_features(op: str, names: Sequence[str]) -> list[str]:
    """Those of ``names`` that ``op``'s feature module marks ``integer`` (none for an op whose
    table lists its own features: nothing says what their values mean)."""
    module = op_feature_module(op)
    integer = {f.name for f in (*module.KNOWN, *module.GATHERED) if f.integer} if module is not None else set()
    return [name for name in names if name in integer]


def _check_whole_numbers(frame: pd.DataFrame, column: str) -> None:
    """An integer feature is a size, a count or a code: a negative or fractional one is a broken
    measurement, which the trees would otherwise learn from as if it were an input."""
    values = frame[column].to_numpy(dtype=float)
    for bad, what in ((values < 0, "cannot be negative, but is"),
                      (values != np.floor(values), "must be a whole number, but is fractional")):
        if bad.any():
            raise ProfileTableError(f"column {column!r} (a size, count or code) {what} in row(s) {_rows(frame, bad)}: "
                                    "profile those inputs again or drop their rows")


def _check_sources(frame: pd.DataFrame) -> None:
    """A source other than :data:`SOURCES` (a misspelt ``Real``) would be scored with the others,
    not with the real inputs, silently; an empty one claims nothing."""
    if "source" not in frame.columns:
        return
    sources = frame["source"]
    bad = sources.notna() & ~sources.isin(SOURCES)
    if bad.any():
        raise ProfileTableError(f"column 'source' must be one of {list(SOURCES)} (or empty); "
                                f"{sources[bad].iloc[0]!r} in row(s) {_rows(frame, bad)}")


def _check_host_time(frame: pd.DataFrame, column: str) -> None:
    """Empty cells were not measured; any other is a host call's wall time, positive and at most a day
    (:data:`MAX_TIME_MS`): a longer one is a recording error, and a merge's mean of two such overflows
    to an infinity that no campaign holds."""
    values = frame[column].to_numpy(dtype=float)
    longest_us = MAX_TIME_MS * 1e3
    bad = ~np.isnan(values) & ~((values > 0) & (values <= longest_us))
    if bad.any():
        raise ProfileTableError(f"column {column!r} must hold host times in µs above 0 and at most a day "
                                f"({longest_us:g}), or be empty; zero, negative, longer or infinite in row(s) "
                                f"{_rows(frame, bad)}: measure those calls again or empty those cells")


def _check_finite(frame: pd.DataFrame, column: str) -> None:
    bad = ~np.isfinite(frame[column].to_numpy(dtype=float))
    if bad.any():
        raise ProfileTableError(f"column {column!r} must be finite numbers; empty or infinite in row(s) {_rows(frame, bad)}")
    if column == GATHER_MS or column.startswith(PREPARE):
        bad = (frame[column] < 0) | (frame[column] > MAX_TIME_MS)
        if bad.any():
            raise ProfileTableError(f"column {column!r} must hold times from 0 to {MAX_TIME_MS:g} ms; negative or "
                                    f"longer in row(s) {_rows(frame, bad)}")


def _rows(frame: pd.DataFrame, mask) -> list[str]:
    """A few row numbers of ``frame`` where ``mask`` holds (1-based data rows of the file, as a
    spreadsheet shows them after the header: ``frame``'s index, kept through dropped rows)."""
    return [str(i + 1) for i in frame.index[np.asarray(mask, dtype=bool)][:5]]


def _drop_failed_rows(frame: pd.DataFrame, time_columns: list[str]) -> pd.DataFrame:
    times = frame[time_columns].to_numpy(dtype=float)
    failed = ~_are_times(times)
    dropped = failed.any(axis=1)
    if dropped.any():
        per_column = ", ".join(f"{c}: {n}" for c, n in zip(time_columns, failed.sum(axis=0)) if n)
        warn(f"dropped {int(dropped.sum())} of {len(frame)} rows with a missing, NaN, infinite, zero, "
             f"negative, sub-nanosecond or over-a-day time ({per_column})")
    kept = frame[~dropped]  # its index still numbers the file's rows, for errors that name them
    if kept.empty:
        raise ProfileTableError("no rows left after dropping rows with failed time measurements")
    return kept


def _groups(frame: pd.DataFrame) -> pd.Series:
    ids = frame["id"].astype(str)
    if "group" not in frame.columns:
        return ids
    groups = frame["group"].astype(object)
    empty = groups.isna() | (groups.astype(str).str.strip() == "")
    return groups.where(~empty, ids).astype(str)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m seer.table retire TABLE... --variant NAME... [--op OP]``: see :func:`retire_variants`."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m seer.table")
    parser.add_argument("action", choices=["retire"])
    parser.add_argument("tables", nargs="+", type=Path, help="profile tables (CSV) to rewrite in place")
    parser.add_argument("--variant", action="append", required=True, help="a variant to remove (repeatable)")
    parser.add_argument("--op", default=None, help="op of the tables (default: from their .meta.json)")
    args = parser.parse_args(argv)
    command = " ".join(["python -m seer.table", *(sys.argv[1:] if argv is None else argv)])
    with exit_on_seer_error(parser):
        for table in args.tables:  # every table checked before any is rewritten
            _retirable(table, args.variant, args.op)
        for table in args.tables:
            print(f"{table}: removed {', '.join(retire_variants(table, args.variant, command, args.op))}")


if __name__ == "__main__":
    main()
