"""Real SuiteSparse matrices: Matrix Market files, the folder that holds them and the collection index.

Parsing is scipy's (``scipy.io.mmread``, the fast_matrix_market reader since scipy 1.12); this module
adds the archive handling, a canonical CSR result and errors that name the file.
"""
from __future__ import annotations

import bz2
import gzip
import inspect
import io
import re
import tarfile
import zlib
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator, NamedTuple

import numpy as np
import pandas as pd
import scipy.io
import scipy.sparse as sp

from seer.errors import InputError, warn
from seer.table import miscounted_line

MANIFEST = "manifest.csv"
SSSTATS = "ssstats.csv"
MATRIX_SUFFIXES = (".mtx", ".mtx.gz", ".mtx.bz2")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
SSSTATS_COLUMNS = (
    "group", "name", "rows", "cols", "nnz", "isReal", "isBinary", "is2D3D",
    "posdef", "psym", "nsym", "kind", "nentries",
)
_MANIFEST_COLUMNS = ("group", "name", "rows", "cols", "nnz_file", "kind", "file")
# What scipy, gzip, zlib and tarfile raise on a damaged file; all become an InputError naming it.
# (OverflowError: scipy's reader on an integer entry beyond int64.)
_PARSE_ERRORS = (ValueError, OverflowError, OSError, EOFError, zlib.error, tarfile.TarError)
# scipy 1.18 deprecates mmread's sparse-matrix default (arrays from 1.20) with a warning on every read;
# the result becomes a CSR matrix here either way, so ask for the array where the keyword exists.
_MMREAD_OPTIONS = {"spmatrix": False} if "spmatrix" in inspect.signature(scipy.io.mmread).parameters else {}


class MatrixHeader(NamedTuple):
    """The Matrix Market banner and size line (``entries`` as stored: one triangle if symmetric)."""

    rows: int
    cols: int
    entries: int
    format: str
    field: str
    symmetry: str


@dataclass(frozen=True)
class MatrixInfo:
    """One real matrix of a folder, described without reading its entries.

    ``nnz`` is the entry count of the CSR that :func:`read_matrix` returns (manifest ``nnz_file``).
    Folders without a manifest only give headers: there a symmetric file's ``nnz`` is the upper
    bound ``2 * entries`` (the diagonal counted twice), and a dense (``array``) file's counts every
    stored entry (mirrored too if symmetric), of which :func:`read_matrix` keeps the nonzeros.
    ``stats`` is the matching row of the collection index (``ssstats.csv``) when the folder has one;
    ``manifest_row`` names the manifest row the info comes from (None: from a header), which
    :func:`read_listed_matrix` checks against the file.
    """

    id: str
    group: str
    name: str
    rows: int
    cols: int
    nnz: int
    kind: str
    path: Path
    stats: dict | None = field(default=None, compare=False, repr=False)
    manifest_row: str | None = field(default=None, compare=False, repr=False)

    @property
    def family(self) -> str:
        """Group for grouped cross-validation: see :func:`problem_family`."""
        return problem_family(self.group, self.kind)


# SuiteSparse marks a sequence's first matrix "<kind> sequence", its later ones "subsequent <kind>"
# and a copy of another matrix "duplicate <kind>": all belong with the first.
_KIND_MARKS = re.compile(r"^(subsequent|duplicate) | sequence$")


def problem_family(group: str, kind: str) -> str:
    """``<group>/<problem kind>``: the matrices of one SuiteSparse group that model one kind of
    problem (HB's structural problems, DIMACS10's weighted census graphs), a sequence and its
    duplicates together; the group alone where the kind is unknown.

    Why not the group alone: a group is a contributor's collection, HB holds 107 of the 201 real
    matrices from a dozen kinds of problem, so holding it out as one family trained the trees of
    its fold on the other 93 and tested them on the majority of the set (benchmarks/NOTES.md,
    SpMV 38); the synthetic families are a generator's structure setting, as fine as this."""
    kind = _KIND_MARKS.sub("", str(kind or "").strip())
    return f"{group}/{kind}" if kind else group


def read_matrix(path) -> sp.csr_matrix:
    """Read a ``.mtx``, ``.mtx.gz`` or SuiteSparse ``.tar.gz`` file as a canonical float64 CSR matrix.

    Pattern entries become 1.0, symmetric, skew and hermitian storage is expanded, duplicates are
    summed and explicit zeros kept (they are stored entries). Index arrays are int32 when they fit.
    The entries are checked against the banner's field by the first entry line alone: scipy drops a
    token too many on any line, so a later line holding more than the field gives loses it unseen.
    """
    path = _existing_file(path)
    header = read_header(path)
    _check_symmetric_shape(path, header)
    _check_fits_in_memory(path, header)
    _check_first_entry(path, header)
    matrix = _parse(path, lambda source: scipy.io.mmread(source, **_MMREAD_OPTIONS), whole=True)
    if np.iscomplexobj(matrix):
        raise InputError(f"{path} holds a complex matrix; seer reads real matrices only")
    if header.format == "coordinate" and header.symmetry != "general":
        _check_stored_triangle(path, header, matrix)
    try:
        csr = sp.csr_matrix(matrix, dtype=np.float64)
    except (MemoryError, ValueError) as err:  # the row pointers of a size line's rows: too many for memory or numpy
        raise InputError(f"cannot read Matrix Market file {path}: its {matrix.shape[0]:,} rows do not fit in "
                         f"memory ({err})") from err
    csr.sum_duplicates()
    non_finite = int(np.count_nonzero(~np.isfinite(csr.data)))
    if non_finite:  # legal in the format, but every product with them is NaN or infinite
        warn(f"{path} holds {non_finite} NaN or infinite values")
    return csr


def read_listed_matrix(info: MatrixInfo) -> sp.csr_matrix:
    """:func:`read_matrix` of ``info.path``, checked against the manifest row it was listed from: that
    row's sizes drive --max-nnz filtering, the order of the cases and the sizes of replicas, so a row
    that does not describe its file is an InputError naming both. (``nnz_file`` is the entry count
    of the CSR read here, mirrored entries included, as in the SuiteSparse manifest.)"""
    matrix = read_matrix(info.path)
    if info.manifest_row is not None and (matrix.shape, matrix.nnz) != ((info.rows, info.cols), info.nnz):
        rows, cols = matrix.shape
        raise InputError(f"{info.manifest_row} says {info.id} is {info.rows} x {info.cols} with nnz_file {info.nnz:,}, "
                         f"but its file {info.path} holds a {rows} x {cols} matrix of {matrix.nnz:,} entries")
    return matrix


def _check_symmetric_shape(path: Path, header: MatrixHeader) -> None:
    """Symmetric, skew and hermitian storage mirror one triangle: only a square matrix has one. Hermitian
    storage is the format's for complex values only: a real or pattern file marked so is read as
    symmetric by scipy, without a word, and may be a complex matrix whose imaginary parts were lost."""
    if header.symmetry != "general" and header.rows != header.cols:
        raise InputError(f"{path} is marked {header.symmetry} but is {header.rows} x {header.cols}; only a square "
                         "matrix can be symmetric")
    if header.symmetry == "hermitian" and header.field != "complex":
        raise InputError(f"{path} is marked '{header.field} hermitian', which Matrix Market allows for complex "
                         "values only: a real matrix equal to its transpose is 'symmetric' (fix the banner)")


def _bytes_to_read(header: MatrixHeader) -> int:
    """The least memory reading a file takes, from its size line: scipy's dense array, or its
    coordinate arrays (row, column, value) of the stored entries, which the CSR's row pointers then
    join. (A symmetric file's mirrors add up to as much again; how many is not known before reading.)"""
    if header.format == "array":
        return 8 * header.rows * header.cols
    index = 4 if max(header.rows, header.cols) < 2**31 else 8  # scipy's, by the largest dimension
    pointer = 4 if max(header.rows, header.cols, header.entries) < 2**31 else 8
    return header.entries * (2 * index + 8) + (header.rows + 1) * pointer


def _available_bytes() -> int | None:
    """Memory the system can give without swapping (Linux's MemAvailable); None where unknown."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _check_fits_in_memory(path: Path, header: MatrixHeader) -> None:
    """Refuse a file whose size line asks for more memory than there is, before scipy allocates it:
    the allocation may succeed (Linux overcommits) and filling it then gets the process killed,
    without a word on which file or why."""
    needed, available = _bytes_to_read(header), _available_bytes()
    if available is not None and needed > available:
        size = f"{header.rows:,} x {header.cols:,}" + (f", {header.entries:,} entries" if header.format == "coordinate" else "")
        raise InputError(f"cannot read Matrix Market file {path}: its size line ({size}) needs at least "
                         f"{needed / 2**30:,.1f} GiB to read and {available / 2**30:,.1f} GiB are available; "
                         "check the size line, or read it on a machine with more memory")


# Tokens on one entry line, by format and field (symmetry does not change them).
_ENTRY_TOKENS = {
    "coordinate": {"pattern": 2, "real": 3, "integer": 3, "complex": 4},
    "array": {"real": 1, "integer": 1, "complex": 2},
}


def _check_first_entry(path: Path, header: MatrixHeader) -> None:
    """Refuse a file whose banner names no matrix (a Matrix Market vector, which scipy's header reader
    takes for a matrix of one column), or whose first entry line has more or fewer tokens than its
    banner's field gives. scipy's reader drops a token too many without a word, so a file labelled
    pattern whose lines hold values read as all ones, and one labelled real whose lines hold complex
    values lost their imaginary parts. (Only the first entry is checked: a file written by one
    program is one format.)"""
    expected = _ENTRY_TOKENS.get(header.format, {}).get(header.field)
    with _matrix_source(path, whole=False) as source, ExitStack() as stack:
        lines = stack.enter_context(open(source, "rb")) if isinstance(source, str) else source
        banner = next(lines, b"").split()
        if len(banner) > 1 and banner[0].lower() == b"%%matrixmarket" and banner[1].lower() != b"matrix":
            raise InputError(f"{path} holds a Matrix Market {banner[1].decode(errors='replace')}, not a matrix "
                             "(its banner's object)")
        if expected is None or (header.entries if header.format == "coordinate" else header.rows * header.cols) == 0:
            return
        past_size_line = False
        for number, line in enumerate(lines, start=2):
            tokens = line.split()
            if not tokens or tokens[0].startswith(b"%"):
                continue
            if not past_size_line:
                past_size_line = True
                continue
            if len(tokens) != expected:
                raise InputError(f"cannot read Matrix Market file {path}: line {number} holds {len(tokens)} "
                                 f"tokens where its banner's '{header.format} {header.field}' gives {expected}: the "
                                 "banner does not describe the entries (fix its field, or the lines)")
            return


def _check_stored_triangle(path: Path, header: MatrixHeader, expanded) -> None:
    """Refuse a symmetric-type file whose stored entries break its storage: a skew-symmetric one with a
    nonzero diagonal entry, or one storing both (i, j) and (j, i). The mirror of each would be added
    to the other, doubling both values (or, if they differ, mixing them): the file is a general
    matrix labelled symmetric, and no reading of it is the one its writer meant.

    scipy's reader lists the file's entries first, then the mirrors of the off-diagonal ones; the
    checks read that first part (one pass over it, a second only when both triangles are present)."""
    rows, cols = expanded.row[:header.entries], expanded.col[:header.entries]
    off_diagonal = rows != cols
    if len(expanded.row) != header.entries + np.count_nonzero(off_diagonal):
        warn(f"{path}: scipy's reader no longer lists the stored entries first; its {header.symmetry} storage is "
             "read unchecked")
        return
    if header.symmetry == "skew-symmetric":
        nonzero_diagonal = np.count_nonzero(expanded.data[:header.entries][~off_diagonal])
        if nonzero_diagonal:
            raise InputError(f"{path} is marked skew-symmetric but stores {nonzero_diagonal} nonzero diagonal "
                             "entries; a skew-symmetric matrix has a zero diagonal")
    below = rows > cols
    above = off_diagonal & ~below
    if below.any() and above.any():
        width = np.int64(header.cols)
        stored_below = rows[below].astype(np.int64) * width + cols[below]
        mirrored_above = cols[above].astype(np.int64) * width + rows[above]
        both = np.intersect1d(stored_below, mirrored_above).size
        if both:
            raise InputError(f"{path} is marked {header.symmetry} but stores both (i, j) and (j, i) for {both:,} "
                             "pairs; symmetric storage holds one triangle (mirroring would add each pair's "
                             "values together): write it as general, or keep one triangle")


def read_header(path) -> MatrixHeader:
    """Read only the banner and size line of a matrix file (or of an archive's main matrix)."""
    path = _existing_file(path)
    return MatrixHeader(*_parse(path, scipy.io.mminfo))


def list_matrices(folder, *, max_nnz: int | None = None, limit: int | None = None) -> list[MatrixInfo]:
    """The matrices of ``folder``, smallest first (by nnz, then id).

    Uses ``manifest.csv`` when the folder has one (rows whose file is missing are skipped with a
    SeerWarning); otherwise scans the folder and its subfolders for ``Group__Name.mtx[.gz]`` and
    ``.tar.gz`` files and reads their headers (group: the part of the file name before ``__``, else
    the name of the folder holding the file, or of the one above for an unpacked archive's
    ``Group/Name/Name.mtx``; an unpacked archive's ``Name/Name_b.mtx``-style extras
    beside its ``Name/Name.mtx`` are no matrices). ``ssstats.csv`` in the folder is attached as ``stats``.
    """
    for name, count in (("max_nnz", max_nnz), ("limit", limit)):
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            raise InputError(f"{name} must be a whole number >= 0 or None, got {count!r}")
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"matrix folder {folder} does not exist or is not a folder")
    infos = _from_manifest(folder) if (folder / MANIFEST).is_file() else _from_headers(folder)
    if not infos:
        raise InputError(
            f"no matrices in {folder}: expected {MANIFEST} or files ending in "
            f"{', '.join(MATRIX_SUFFIXES + ARCHIVE_SUFFIXES)}"
        )
    if (folder / SSSTATS).is_file():
        infos = attach_ssstats(infos, read_ssstats(folder / SSSTATS))
    if max_nnz is not None:
        infos = [info for info in infos if info.nnz <= max_nnz]
    infos.sort(key=lambda info: (info.nnz, info.id))
    return infos[:limit]


def read_ssstats(path) -> pd.DataFrame:
    """Read the collection index: a count line, a date line, then one CSV row per matrix.

    Columns are :data:`SSSTATS_COLUMNS`; the date is kept in ``table.attrs["date"]``.
    """
    path = _existing_file(path, "collection index")
    try:
        with open(path) as lines:
            count_line, date_line = lines.readline(), lines.readline()
        count = int(count_line)
        table = pd.read_csv(path, skiprows=2, header=None)
    except OSError as err:  # no permission: a user's mistake, named as such
        raise InputError(f"cannot read {path}: {err.strerror or err}") from None
    except ValueError as err:
        raise InputError(f"{path} is not a SuiteSparse index (count line, date line, CSV rows): {err}") from err
    _check_ssstats(path, table, count)
    table.columns = list(SSSTATS_COLUMNS)
    table.attrs["date"] = date_line.strip()
    return table


def attach_ssstats(infos: list[MatrixInfo], stats: pd.DataFrame) -> list[MatrixInfo]:
    """Copies of ``infos`` carrying their ssstats row (a dict) as ``stats``; unknown kinds filled in."""
    by_id = {f"{row['group']}/{row['name']}": row for row in stats.to_dict("records")}
    attached = []
    for info in infos:
        row = by_id.get(info.id)
        kind = info.kind or (row["kind"] if row else "")
        attached.append(replace(info, stats=row, kind=kind))
    return attached


def _existing_file(path, what: str = "matrix file") -> Path:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{what} {path} does not exist or is not a file")
    return path


def _parse(path: Path, parser, whole: bool = False):
    """Run a scipy Matrix Market parser on ``path``; any parse failure names the file. ``whole``: the
    parser reads every entry, and a compressed file is then read to its end (see :func:`_matrix_source`)."""
    try:
        with _matrix_source(path, whole) as source:
            return parser(source)
    except InputError:
        raise
    except _PARSE_ERRORS as err:
        raise InputError(f"cannot read Matrix Market file {path}: {err}") from err
    except MemoryError as err:  # a dense file's array is allocated from its size line before any entry is read
        raise InputError(f"cannot read Matrix Market file {path}: out of memory ({err}); its size line asks for "
                         "more than there is, or this machine is short of memory") from err


_DECOMPRESSED = {".gz": gzip.open, ".bz2": bz2.open}  # by suffix, as scipy's reader tells them


@contextmanager
def _matrix_source(path: Path, whole: bool) -> Iterator:
    """What scipy reads: the path itself, or a stream of the file (or of an archive's main matrix)
    that ends in a newline, because scipy 1.17's reader crashes the process on a last entry line
    with a token too many and no newline. With ``whole``, a compressed file is read to its end after
    the parser is done: gzip checks its CRC there, which a member of an archive ends before."""
    in_archive = _has_suffix(path, ARCHIVE_SUFFIXES)
    compression = path.suffix.lower()
    if not in_archive and compression not in _DECOMPRESSED and _ends_in_newline(path):
        yield str(path)  # scipy's reader reads the file itself, in parallel
        return
    with ExitStack() as stack:
        if in_archive:
            archive = stack.enter_context(tarfile.open(path, "r:*"))
            compressed = archive.fileobj
            stream = stack.enter_context(archive.extractfile(_main_member(archive, path)))
        else:
            compressed = stream = stack.enter_context(_DECOMPRESSED.get(compression, open)(path, "rb"))
        yield io.BufferedReader(_EndingInNewline(stream), 1 << 20)
        if whole:
            while compressed.read(1 << 20):
                pass


def _ends_in_newline(path: Path) -> bool:
    with open(path, "rb") as file:
        if not file.seek(0, io.SEEK_END):
            return True  # empty: scipy says so
        file.seek(-1, io.SEEK_END)
        return file.read(1) == b"\n"


class _EndingInNewline(io.RawIOBase):
    """``stream``'s bytes, then a newline if they did not end in one."""

    def __init__(self, stream):
        self._stream, self._last = stream, b"\n"

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not len(buffer):
            return 0
        data = self._stream.read(len(buffer))
        if data:
            self._last = data[-1:]
        elif self._last != b"\n":
            data = self._last = b"\n"
        buffer[:len(data)] = data
        return len(data)


def _main_member(archive: tarfile.TarFile, path: Path) -> tarfile.TarInfo:
    """The archive's main matrix: ``Name.mtx`` (in a folder ``Name`` or at the top) where ``Name`` is
    the archive's own (its file name after any ``Group__``); else its one ``X/X.mtx``; else its one
    ``.mtx`` that is no ``X_b.mtx``-style extra (right-hand sides etc.). Another archive's matrix
    packed beside it is not taken for it, and two candidates are refused, naming them."""
    name = _file_stem(path).rpartition("__")[2]
    folder_named, others, seen = [], [], []
    for member in archive:  # streams: SuiteSparse archives list the main matrix first
        if not (member.isfile() and member.name.endswith(".mtx")):
            continue
        member_path = PurePosixPath(member.name)
        if member_path.stem == name and member_path.parent.name in (name, ""):
            return member
        seen.append(member.name)
        if member_path.stem == member_path.parent.name:
            folder_named.append(member)
        elif not member_path.stem.startswith(f"{member_path.parent.name or name}_"):  # Name_b.mtx is no matrix to read
            others.append(member)
    candidates = folder_named or others
    if len(candidates) == 1:
        return candidates[0]
    found = seen or "no .mtx file"
    raise InputError(f"{path}: expected one Name/Name.mtx inside the archive (Name {name!r}, as the archive's), "
                     f"found {found}")


def _from_manifest(folder: Path) -> list[MatrixInfo]:
    manifest = folder / MANIFEST
    try:
        data = manifest.read_bytes()
        # A row with a field too many: pandas drops its last and shifts the cells between, with a warning
        # of its own only. Rows written with a comma at the end (an empty field more) are read as written.
        miscounted = miscounted_line(data, spare_empty=True)
        # Every cell as written; index_col=False: with a field more than the header on every row, pandas
        # would take the first column for an index and shift every cell by one, silently.
        table = None if miscounted else pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False,
                                                     index_col=False)
    except OSError as err:  # no permission
        raise InputError(f"cannot read {manifest}: {err.strerror or err}") from None
    except ValueError as err:  # not UTF-8, or no CSV pandas can read
        raise InputError(f"cannot read {manifest}: {err}") from err
    if miscounted:
        number, fields, columns = miscounted
        raise InputError(f"{manifest}: line {number} has {fields} fields, but the header names {columns} columns: "
                         "a cell too many or too few (a comma in a name?); fix that line")
    missing = [column for column in _MANIFEST_COLUMNS if column not in table.columns]
    if missing:
        raise InputError(f"{manifest} lacks the columns {missing}")
    infos = [_manifest_row(manifest, number, row) for number, row in enumerate(table.to_dict("records"), start=1)]
    if not infos:
        raise InputError(f"{manifest} lists no matrices: it has a header and no rows")
    _check_one_row_per_file(infos)
    present = [info for info in infos if info.path.is_file()]
    absent = [info.id for info in infos if not info.path.is_file()]
    if not present:
        raise InputError(f"none of the {len(infos)} files that {manifest} lists exists (first: "
                         f"{[str(info.path) for info in infos[:3]]})")
    if absent:
        warn(f"{manifest}: skipping {len(absent)} matrices whose file is missing (first: {absent[:3]})")
    return present


def _check_one_row_per_file(infos: list[MatrixInfo]) -> None:
    """Two rows naming one file would profile it twice, under two ids or one; two rows of one id
    (group and name) would be two inputs the tables, the families and the loaders cannot tell apart."""
    first_row_of, first_row_named = {}, {}
    for info in infos:
        earlier = first_row_of.setdefault(info.path.resolve(), info)
        if earlier is not info:
            raise InputError(f"{earlier.manifest_row} ({earlier.id}) and {info.manifest_row} ({info.id}) name the "
                             f"same file {info.path}; list each matrix once")
        earlier = first_row_named.setdefault(info.id, info)
        if earlier is not info:
            raise InputError(f"{earlier.manifest_row} ({earlier.path.name}) and {info.manifest_row} ({info.path.name}) "
                             f"both list {info.id}; give each matrix its own group and name")


def _manifest_row(manifest: Path, number: int, row: dict) -> MatrixInfo:
    """Row ``number`` (1-based, after the header) of the manifest; an empty kind is an unknown one
    (ssstats fills it in), any other empty or malformed cell an InputError naming the row."""
    empty = [column for column in ("group", "name", "file") if not row[column].strip()]
    if empty:
        raise InputError(f"{manifest}, row {number}: empty {empty}")
    # A space kept in an id would make it another input than the tables' (and a file that is not there).
    padded = [column for column in ("group", "name", "file") if row[column] != row[column].strip()]
    if padded:
        raise InputError(f"{manifest}, row {number}: spaces around the cells {padded} "
                         f"{[row[column] for column in padded]}; remove them")
    try:
        sizes = {column: int(row[column]) for column in ("rows", "cols", "nnz_file")}
    except ValueError:
        sizes = {}
    if len(sizes) < 3 or min(sizes.values()) < 0:
        raise InputError(f"{manifest}, row {number}: rows, cols and nnz_file must be whole numbers >= 0, got "
                         f"{[row[column] for column in ('rows', 'cols', 'nnz_file')]}")
    return MatrixInfo(id=f"{row['group']}/{row['name']}", group=row["group"], name=row["name"], rows=sizes["rows"],
                      cols=sizes["cols"], nnz=sizes["nnz_file"], kind=row["kind"], path=manifest.parent / row["file"],
                      manifest_row=f"{manifest}, row {number}")


def _from_headers(folder: Path) -> list[MatrixInfo]:
    suffixes = MATRIX_SUFFIXES + ARCHIVE_SUFFIXES
    files = sorted(path for path in folder.rglob("*")
                   if _has_suffix(path, suffixes) and path.is_file() and not _unpacked_extra(path))
    infos = readable(files, _info_from_header)
    if files and not infos:
        raise InputError(f"none of the {len(files)} matrix files in {folder} could be read (each is named in a "
                         "warning above)")
    return infos


def _unpacked_extra(path: Path) -> bool:
    """Whether ``path`` is an unpacked archive's extra, ``Name/Name_b.mtx`` beside ``Name/Name.mtx``
    (right-hand sides, coordinates, ...): no matrix of its own, as :func:`_main_member` reads archives."""
    name = path.parent.name
    return _file_stem(path).startswith(f"{name}_") and any(
        (path.parent / f"{name}{suffix}").is_file() for suffix in MATRIX_SUFFIXES)


def _has_suffix(path: Path, suffixes: tuple[str, ...]) -> bool:
    """Whether the file name ends in one of ``suffixes``, in any case (``X.MTX.GZ`` is gzipped too)."""
    return path.name.lower().endswith(suffixes)


def readable(items, read: Callable) -> list:
    """``read(item)`` of each item; one that raises InputError (a damaged file) is left out with a
    SeerWarning naming it, so that one bad file does not hide the folder's others."""
    results = []
    for item in items:
        try:
            results.append(read(item))
        except InputError as error:
            warn(f"left out: {error}")
    return results


def _file_stem(path: Path) -> str:
    """A matrix file's name without its suffix (``.mtx.gz``, ``.tar.gz``, ...)."""
    longest_first = sorted(MATRIX_SUFFIXES + ARCHIVE_SUFFIXES, key=len, reverse=True)
    suffix = next((suffix for suffix in longest_first if _has_suffix(path, (suffix,))), "")
    return path.name[:len(path.name) - len(suffix)]


def _info_from_header(path: Path) -> MatrixInfo:
    group, _, name = _file_stem(path).rpartition("__")
    folder = path.resolve().parent  # resolved: a folder given as "." has no name
    group = group or (folder.parent.name if folder.name == name else folder.name)  # Group/Name/Name.mtx unpacked
    header = read_header(path)
    # One triangle stored, which read_matrix mirrors (a dense file's size line counts every cell).
    stored_once = header.format == "coordinate" and header.symmetry != "general"
    nnz = 2 * header.entries if stored_once else header.entries
    return MatrixInfo(
        id=f"{group}/{name}", group=group, name=name, rows=header.rows, cols=header.cols,
        nnz=nnz, kind="", path=path,
    )


def _line_numbers(index) -> str:
    """The file's line numbers of table rows read past the index's two header lines."""
    return ", ".join(str(i + 3) for i in list(index)[:5]) + (", ..." if len(index) > 5 else "")


def _check_ssstats(path: Path, table: pd.DataFrame, count: int) -> None:
    if table.shape[1] != len(SSSTATS_COLUMNS):
        raise InputError(f"{path}: expected {len(SSSTATS_COLUMNS)} columns, found {table.shape[1]}")
    if len(table) != count:
        raise InputError(f"{path}: the first line announces {count} matrices but {len(table)} rows follow")
    if table.isna().any(axis=None):
        raise InputError(f"{path}: some rows have empty fields")
    textual = {SSSTATS_COLUMNS.index(name) for name in ("group", "name", "kind")}
    not_numeric = [
        SSSTATS_COLUMNS[i] for i in range(len(SSSTATS_COLUMNS))
        if i not in textual and not pd.api.types.is_numeric_dtype(table[i])
    ]
    if not_numeric:
        raise InputError(f"{path}: columns {not_numeric} hold non-numeric values")
    named = SSSTATS_COLUMNS.index("group"), SSSTATS_COLUMNS.index("name")
    repeated = table[table.duplicated(list(named), keep=False)]
    if len(repeated):  # which row describes the matrix? attach_ssstats would take the last one silently
        first = repeated.iloc[0]
        raise InputError(f"{path}: {len(repeated)} rows share a matrix's group and name, e.g. "
                         f"{first[named[0]]}/{first[named[1]]} (lines {_line_numbers(repeated.index)}); "
                         "keep one row per matrix")
