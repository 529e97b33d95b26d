"""Reading real SuiteSparse matrices, listing folders and the collection index."""
import bz2
import collections
import gzip
import io
import re
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse as sp

from seer.datasets.suitesparse import (
    MANIFEST,
    SSSTATS,
    MatrixInfo,
    attach_ssstats,
    list_matrices,
    problem_family,
    read_header,
    read_listed_matrix,
    read_matrix,
    read_ssstats,
)
from seer.errors import InputError, SeerWarning

# Symmetric storage, integer values, a rectangular integer matrix, explicit zeros, a symmetrised
# copy, and the largest file of the set.
REAL_IDS = ["HB/bcsstk01", "JGD_Kocay/Trec4", "LPnetlib/lpi_galenet", "HB/zenios", "Pajek/EVA", "HB/bcsstk33"]


@pytest.fixture(scope="module")
def manifest(suitesparse_dir):
    table = pd.read_csv(suitesparse_dir / "manifest.csv")
    table["id"] = table["group"] + "/" + table["name"]
    return table.set_index("id")


def real_path(folder, matrix_id):
    return folder / (matrix_id.replace("/", "__") + ".mtx.gz")


def dense_reference(path):
    """Independent parse of a coordinate real/integer file (general or symmetric) with numpy."""
    with gzip.open(path, "rt") as text:
        banner = text.readline().split()
        lines = [line for line in text if not line.startswith("%")]
    rows, cols, _ = (int(v) for v in lines[0].split())
    entries = np.loadtxt(io.StringIO("".join(lines[1:])), ndmin=2)
    dense = np.zeros((rows, cols))
    i, j = entries[:, 0].astype(int) - 1, entries[:, 1].astype(int) - 1
    np.add.at(dense, (i, j), entries[:, 2])
    if banner[4] == "symmetric":
        off = i != j
        np.add.at(dense, (j[off], i[off]), entries[off, 2])
    return dense


def assert_canonical(csr):
    assert isinstance(csr, sp.csr_matrix)
    assert csr.dtype == np.float64 and csr.indices.dtype == np.int32 and csr.indptr.dtype == np.int32
    steps = np.diff(csr.indices.astype(np.int64))
    row_starts = csr.indptr[1:-1]
    within_row = np.ones_like(steps, dtype=bool)
    within_row[row_starts[(row_starts > 0) & (row_starts < csr.nnz)] - 1] = False
    assert (steps[within_row] > 0).all(), "column indices must be strictly increasing within rows"


def write_mtx(path, text):
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------------
# read_matrix on real files


@pytest.mark.parametrize("matrix_id", REAL_IDS)
def test_real_matrix_matches_manifest(suitesparse_dir, manifest, matrix_id):
    csr = read_matrix(real_path(suitesparse_dir, matrix_id))
    row = manifest.loc[matrix_id]
    assert csr.shape == (row.rows, row.cols)
    assert csr.nnz == row.nnz_file
    assert_canonical(csr)
    assert np.isfinite(csr.data).all()


@pytest.mark.parametrize("matrix_id", ["HB/bcsstk01", "JGD_Kocay/Trec4", "LPnetlib/lpi_galenet", "HB/can_24"])
def test_real_matrix_values_match_independent_parse(suitesparse_dir, matrix_id):
    path = real_path(suitesparse_dir, matrix_id)
    np.testing.assert_array_equal(read_matrix(path).toarray(), dense_reference(path))


def test_symmetric_storage_is_expanded(suitesparse_dir, manifest):
    path = real_path(suitesparse_dir, "HB/bcsstk01")
    header = read_header(path)
    assert (header.symmetry, header.entries) == ("symmetric", 224)
    csr = read_matrix(path)
    assert csr.nnz == manifest.loc["HB/bcsstk01"].nnz_file > header.entries
    assert abs(csr - csr.T).max() == 0


def test_explicit_zeros_are_kept(suitesparse_dir):
    csr = read_matrix(real_path(suitesparse_dir, "HB/zenios"))
    assert csr.nnz == 27191 and (csr.data == 0).sum() > 0


def test_complex_real_file_is_refused(suitesparse_dir):
    path = real_path(suitesparse_dir, "HB/young1c")
    with pytest.raises(InputError, match="young1c.*complex"):
        read_matrix(path)


# ---------------------------------------------------------------------------------------------
# read_matrix on written files


def test_plain_mtx_equals_gzip(tmp_path, suitesparse_dir):
    source = real_path(suitesparse_dir, "DIMACS10/chesapeake")
    plain = tmp_path / "chesapeake.mtx"
    plain.write_bytes(gzip.decompress(source.read_bytes()))
    a, b = read_matrix(plain), read_matrix(source)
    assert (a != b).nnz == 0 and a.nnz == b.nnz


def test_small_general_file_sums_duplicates(tmp_path):
    path = write_mtx(
        tmp_path / "dup.mtx",
        "%%MatrixMarket matrix coordinate real general\n% a comment\n3 4 4\n"
        "1 1 1.5\n3 4 -2\n1 1 2.25\n2 2 7e-3\n",
    )
    expected = np.zeros((3, 4))
    expected[0, 0], expected[2, 3], expected[1, 1] = 3.75, -2.0, 7e-3
    csr = read_matrix(path)
    assert_canonical(csr)
    np.testing.assert_array_equal(csr.toarray(), expected)
    assert csr.nnz == 3


def test_pattern_symmetric_file_gets_ones(tmp_path):
    text = "%%MatrixMarket matrix coordinate pattern symmetric\n4 4 3\n1 1\n3 1\n4 2\n"
    path = write_mtx(tmp_path / "pattern.mtx", text)
    csr = read_matrix(path)
    expected = np.zeros((4, 4))
    expected[0, 0] = expected[2, 0] = expected[0, 2] = expected[3, 1] = expected[1, 3] = 1.0
    np.testing.assert_array_equal(csr.toarray(), expected)


def test_skew_symmetric_file_is_mirrored_negated(tmp_path):
    text = "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 4\n3 2 -1.5\n"
    path = write_mtx(tmp_path / "skew.mtx", text)
    dense = read_matrix(path).toarray()
    np.testing.assert_array_equal(dense, -dense.T)
    assert dense[1, 0] == 4 and dense[0, 1] == -4


@pytest.mark.parametrize("symmetry", ["symmetric", "skew-symmetric", "hermitian"])
def test_a_symmetric_file_that_is_not_square_is_refused(tmp_path, symmetry):
    path = write_mtx(tmp_path / "wide.mtx", f"%%MatrixMarket matrix coordinate real {symmetry}\n3 4 2\n2 1 1\n2 2 2\n")
    with pytest.raises(InputError, match=rf"wide\.mtx is marked {symmetry} but is 3 x 4"):
        read_matrix(path)


@pytest.mark.parametrize("banner", ["coordinate real hermitian", "coordinate pattern hermitian",
                                    "coordinate integer hermitian", "array real hermitian"])
def test_a_hermitian_file_of_real_values_is_refused(tmp_path, banner):
    """The format allows hermitian for complex values only; scipy read these as symmetric, without a word (a
    review): such a file is mislabelled, and may be a complex matrix written without its imaginary parts."""
    body = "2 2\n1\n3\n3\n4\n" if banner.startswith("array") else ("2 2 2\n1 1\n2 1\n" if "pattern" in banner
                                                                      else "2 2 2\n1 1 1\n2 1 3\n")
    path = write_mtx(tmp_path / "h.mtx", f"%%MatrixMarket matrix {banner}\n{body}")
    field = banner.split()[1]
    with pytest.raises(InputError, match=rf"h\.mtx is marked '{field} hermitian', which Matrix Market allows for "
                                         r"complex values only"):
        read_matrix(path)


@pytest.mark.parametrize("name", ["v.mtx", "v.mtx.gz"])
def test_a_matrix_market_vector_is_refused_by_name(tmp_path, name):
    """scipy's header reader takes a vector file for a matrix of one column, and the entry check then
    blamed its field ("line 3 holds 2 tokens ...": a review)."""
    text = "%%MatrixMarket vector coordinate real general\n3 1\n1 1.5\n"
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    with pytest.raises(InputError, match=r"v\.mtx(\.gz)? holds a Matrix Market vector, not a matrix"):
        read_matrix(path)


def test_a_skew_symmetric_file_with_a_nonzero_diagonal_is_refused(tmp_path):
    text = "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 3\n2 1 1\n2 2 5\n3 3 0\n"
    path = write_mtx(tmp_path / "skew.mtx", text)
    with pytest.raises(InputError, match=r"skew\.mtx is marked skew-symmetric but stores 1 nonzero diagonal"):
        read_matrix(path)


def test_a_symmetric_file_storing_both_triangles_is_refused(tmp_path):
    """scipy added each entry's mirror to the other: 1 + 5 in both places, a matrix nobody wrote."""
    text = "%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n2 1 1\n1 2 5\n3 1 2\n3 3 1\n"
    path = write_mtx(tmp_path / "both.mtx", text)
    with pytest.raises(InputError, match=r"both\.mtx is marked symmetric but stores both \(i, j\) and \(j, i\) for 1 "):
        read_matrix(path)
    # Entries of either triangle whose mirror is not stored are one triangle, spelt out of order.
    mixed = write_mtx(tmp_path / "mixed.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 1\n1 3 5\n")
    expected = np.array([[0, 1, 5], [1, 0, 0], [5, 0, 0]])
    np.testing.assert_array_equal(read_matrix(mixed).toarray(), expected)


@pytest.mark.parametrize("name", ["X.MTX.GZ", "X.Mtx.Gz", "X.MTX.BZ2"])
def test_upper_case_suffixes_are_read_and_listed(tmp_path, suitesparse_dir, name):
    """X.MTX.GZ was read as plain text ("Missing banner") and left out of folder listings."""
    source = real_path(suitesparse_dir, "HB/bcsstk01")
    data = gzip.decompress(source.read_bytes())
    (tmp_path / name).write_bytes(bz2.compress(data) if name.lower().endswith(".bz2") else gzip.compress(data))
    assert (read_matrix(tmp_path / name) != read_matrix(source)).nnz == 0
    (info,) = list_matrices(tmp_path)
    assert (info.id, info.rows) == (f"{tmp_path.name}/X", 48)


def test_complex_written_file_is_refused(tmp_path):
    path = write_mtx(tmp_path / "c.mtx", "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 2\n")
    with pytest.raises(InputError, match=r"c\.mtx.*complex"):
        read_matrix(path)


def test_non_finite_values_are_read_with_a_warning(tmp_path):
    path = write_mtx(tmp_path / "n.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 nan\n2 2 inf\n1 2 1\n")
    with pytest.warns(SeerWarning, match=r"n\.mtx holds 2 NaN or infinite values"):
        assert read_matrix(path).nnz == 3


@pytest.mark.parametrize("inner", ["bcsstk01", "HB/bcsstk01"])
def test_suitesparse_archive(tmp_path, suitesparse_dir, inner):
    """A SuiteSparse archive holds Name/Name.mtx (or Group/Name/Name.mtx) next to _b/_x extras."""
    source = real_path(suitesparse_dir, "HB/bcsstk01")
    archive = tmp_path / "bcsstk01.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in [
            (f"{inner}/bcsstk01_b.mtx", b"%%MatrixMarket matrix array real general\n48 1\n" + b"1\n" * 48),
            (f"{inner}/bcsstk01.mtx", gzip.decompress(source.read_bytes())),
            (f"{inner}/bcsstk01_x.mtx", b"%%MatrixMarket matrix array real general\n1 1\n2\n"),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    from_archive, direct = read_matrix(archive), read_matrix(source)
    assert from_archive.shape == direct.shape and (from_archive != direct).nnz == 0
    assert read_header(archive).entries == 224


def test_archive_without_main_matrix(tmp_path):
    archive = tmp_path / "thing.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("thing/a_b.mtx", "thing/a_x.mtx"):
            info = tarfile.TarInfo(name)
            info.size = 0
            tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(InputError, match=r"thing\.tar\.gz.*a_b\.mtx"):
        read_matrix(archive)


def test_archive_of_a_right_hand_side_alone(tmp_path):
    """Name_b.mtx is the matrix's right-hand side: read as the matrix, it had come back as one."""
    archive = tmp_path / "foo.tar.gz"
    data = b"%%MatrixMarket matrix array real general\n3 1\n1\n2\n3\n"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("foo/foo_b.mtx")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(InputError, match=r"expected one Name/Name\.mtx inside the archive \(Name 'foo', as the archive's\), found \['foo/foo_b\.mtx'\]"):
        read_matrix(archive)


GOOD_HEADER = "%%MatrixMarket matrix coordinate real general\n"
MALFORMED = {
    "bad_header": ("%%MatrixMurket matrix coordinate real general\n3 3 1\n1 1 1\n", "banner"),
    "no_header": ("3 3 1\n1 1 1\n", "banner"),
    "empty": ("", "banner"),
    "truncated": (GOOD_HEADER + "3 3 3\n1 1 1\n2 2 2\n", "runcated"),
    "truncated_line": (GOOD_HEADER + "3 3 2\n1 1 1\n2 2\n", "Line 4"),
    "index_out_of_range": (GOOD_HEADER + "3 3 2\n1 1 1\n4 2 2\n", "out of bounds"),
    "zero_index": (GOOD_HEADER + "3 3 1\n0 1 1\n", "out of bounds"),
    "non_numeric_value": (GOOD_HEADER + "3 3 2\n1 1 abc\n2 2 2\n", "Invalid floating-point"),
    "non_numeric_index": (GOOD_HEADER + "3 3 1\nx 1 1\n", "Invalid integer"),
    "too_many_entries": (GOOD_HEADER + "3 3 1\n1 1 1\n2 2 2\n", "Too many lines"),
    "bad_size_line": (GOOD_HEADER + "3 3\n1 1 1\n", "Invalid integer"),
    "negative_size": (GOOD_HEADER + "-3 3 1\n1 1 1\n", "negative"),
    "integer_beyond_int64": ("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 99999999999999999999\n",
                             "Integer out of range"),
    # Its CSR's row pointers would take 745 GiB: a raw MemoryError before, fatal to a campaign.
    "impossible_sizes": (GOOD_HEADER + "100000000000 100000000000 1\n1 1 1\n", "memory"),
    # Past numpy's largest array: a raw ValueError before, which no campaign skips.
    "sizes_past_numpy": (GOOD_HEADER + "2305843009213693952 3 0\n", "memory"),
    # A dense file's array, allocated by scipy before it reads an entry: a raw MemoryError before.
    # scipy drops a token too many without a word: values lost (read as ones, or their imaginary parts).
    "values_marked_pattern": ("%%MatrixMarket matrix coordinate pattern general\n% c\n3 3 2\n1 1 5.5\n2 2 -2\n",
                              "line 4 holds 3 tokens where its banner's 'coordinate pattern' gives 2"),
    "complex_marked_real": (GOOD_HEADER + "3 3 1\n1 1 1.5 2.5\n", "line 3 holds 4 tokens where its banner's 'coordinate real' gives 3"),
    "two_values_a_line_in_array": ("%%MatrixMarket matrix array real general\n2 2\n1 2\n3 4\n",
                                   "line 3 holds 2 tokens where its banner's 'array real' gives 1"),
    "impossible_dense_sizes": ("%%MatrixMarket matrix array real general\n100000000 100000000\n1.0\n", "memory"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("compress", [False, True])
def test_malformed_file_names_file_and_problem(tmp_path, case, compress):
    text, problem = MALFORMED[case]
    path = tmp_path / f"{case}.mtx{'.gz' if compress else ''}"
    path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
    with pytest.raises(InputError, match=problem) as raised:
        read_matrix(path)
    assert path.name in str(raised.value)


@pytest.mark.parametrize("size_line, needs", [
    ("array real general\n20000 20000", "20,000 x 20,000) needs at least 3.0 GiB"),
    ("coordinate real general\n100000 100000 100000000", "100,000,000 entries) needs at least 1.5 GiB"),
    # A symmetric file's stored entries alone: its mirrors are not counted before reading.
    ("coordinate real symmetric\n100000 100000 100000000", "100,000,000 entries) needs at least 1.5 GiB"),
])
def test_a_size_line_asking_for_more_memory_than_is_available_is_refused_before_reading(
        tmp_path, monkeypatch, size_line, needs):
    """On Linux an allocation past free memory may succeed (overcommit) and filling it then got the
    process killed, without a word: sizes under a MemoryError's reach but over the memory available."""
    path = write_mtx(tmp_path / "big.mtx", f"%%MatrixMarket matrix {size_line}\n1 1 1.0\n")
    monkeypatch.setattr("seer.datasets.suitesparse._available_bytes", lambda: 2**30)
    monkeypatch.setattr(scipy.io, "mmread", lambda *args, **kwargs: pytest.fail("scipy was asked to read it"))
    with pytest.raises(InputError, match=re.escape(needs) + r" to read and 1.0 GiB are available") as raised:
        read_matrix(path)
    assert "big.mtx" in str(raised.value) and "check the size line" in str(raised.value)


def test_a_matrix_that_fits_is_read_whatever_memory_is_reported(tmp_path, monkeypatch):
    path = write_mtx(tmp_path / "small.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n1 1 2.5\n3 1 -1\n")
    for available in (None, 2**30):
        monkeypatch.setattr("seer.datasets.suitesparse._available_bytes", lambda: available)
        assert read_matrix(path).toarray().tolist() == [[2.5, 0, -1], [0, 0, 0], [-1, 0, 0]]


def _bad_block_type(gzipped: bytes) -> bytes:
    """The same gzip file with its first deflate block saying type 3, which does not exist: zlib's own
    error (recompressed without a file name, so that the block starts at byte 10)."""
    fresh = gzip.compress(gzip.decompress(gzipped), mtime=0)
    return fresh[:10] + bytes([0x07]) + fresh[11:]


@pytest.mark.parametrize("damage", ["cut_gzip", "not_gzip", "cut_archive", "bad_block_type"])
def test_damaged_compression_names_file(tmp_path, suitesparse_dir, damage):
    raw = real_path(suitesparse_dir, "HB/bcsstk01").read_bytes()
    path = tmp_path / ("m.tar.gz" if damage == "cut_archive" else "m.mtx.gz")
    path.write_bytes({"cut_gzip": raw[: len(raw) // 2], "not_gzip": b"plain text", "cut_archive": raw[:40],
                      "bad_block_type": _bad_block_type(raw)}[damage])
    with pytest.raises(InputError, match=r"m\.(mtx|tar)\.gz"):
        read_matrix(path)


@pytest.mark.parametrize("compress", [False, True])
def test_a_last_line_with_a_token_too_many_and_no_newline_does_not_crash(tmp_path, compress):
    """scipy 1.17's reader ends the process (SIGSEGV) on it: read in a child process, so that a
    regression fails this test instead of the run."""
    text = GOOD_HEADER + "3 3 2\n1 1 1\n2 2 4 5"  # past the first entry (the one checked), scipy ignores extra tokens
    path = tmp_path / f"m.mtx{'.gz' if compress else ''}"
    path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
    child = subprocess.run([sys.executable, "-c", "import sys; from seer.datasets.suitesparse import read_matrix; "
                            "print(read_matrix(sys.argv[1]).toarray().tolist())", str(path)],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == "[[1.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 0.0]]"


def _archive_bytes(members: dict) -> bytes:
    """An uncompressed tar of ``members`` (name -> bytes)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_an_archive_whose_gzip_check_fails_is_refused(tmp_path):
    """The main matrix is streamed out of the archive and ends before gzip's trailer, whose CRC
    was never read: a damaged archive came back as a matrix with wrong values."""
    data = (GOOD_HEADER + "3 3 2\n1 1 1\n2 2 2\n").encode()
    compressed = bytearray(gzip.compress(_archive_bytes({"m/m.mtx": data}), mtime=0))
    compressed[-8] ^= 0xFF  # the CRC32 of the trailer: the data itself decompresses as written
    path = tmp_path / "m.tar.gz"
    path.write_bytes(bytes(compressed))
    with pytest.raises(InputError, match=r"m\.tar\.gz: CRC check failed"):
        read_matrix(path)
    assert read_header(path).entries == 2  # a header alone does not read the archive to its end


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="nothere.mtx"):
        read_matrix(tmp_path / "nothere.mtx")


# ---------------------------------------------------------------------------------------------
# list_matrices


def test_list_real_folder(suitesparse_dir, manifest):
    infos = list_matrices(suitesparse_dir)
    assert len(infos) == 201 == len({info.id for info in infos})
    assert [(i.nnz, i.id) for i in infos] == sorted((i.nnz, i.id) for i in infos)
    for info in infos:
        row = manifest.loc[info.id]
        assert (info.rows, info.cols, info.nnz, info.kind) == (row.rows, row.cols, row.nnz_file, row.kind)
        assert info.family == problem_family(row.group, row.kind) and info.group == row.group and info.path.is_file()
        assert info.stats is not None and info.stats["nnz"] == row.nnz_ss
    assert infos[-1].id == "HB/bcsstk33"


@pytest.mark.parametrize("kind, family", [
    ("structural problem", "HB/structural problem"),
    ("optimization problem sequence", "HB/optimization problem"),
    ("subsequent optimization problem", "HB/optimization problem"),
    ("duplicate structural problem", "HB/structural problem"),
    ("subsequent 2D/3D problem", "HB/2D/3D problem"),
    ("", "HB"),
])
def test_problem_family(kind, family):
    assert problem_family("HB", kind) == family


def test_families_of_the_real_folder(suitesparse_dir):
    """A sequence sits in one family, the big HB collection splits by problem, no family spans two
    groups, and every matrix of the set has a kind (so no family falls back to a whole group)."""
    infos = {info.id: info for info in list_matrices(suitesparse_dir)}
    assert {infos[f"HB/bp_{n}"].family for n in (0, 200, 1600)} == {"HB/optimization problem"}
    assert infos["HB/fs_183_1"].family == infos["HB/fs_183_3"].family == "HB/2D/3D problem"
    assert {infos[i].family for i in ("DIMACS10/vt2010", "DIMACS10/nh2010", "DIMACS10/ct2010")} == {
        "DIMACS10/undirected weighted graph"}
    hb = [info for info in infos.values() if info.group == "HB"]
    sizes = collections.Counter(info.family for info in hb)
    assert len(hb) == 108 and len(sizes) == 13 and sizes.most_common(1) == [("HB/structural problem", 56)]
    assert all(info.family.startswith(info.group + "/") for info in infos.values())


def test_list_filters(suitesparse_dir):
    small = list_matrices(suitesparse_dir, max_nnz=1000)
    assert small and all(info.nnz <= 1000 for info in small)
    assert len(small) == sum(info.nnz <= 1000 for info in list_matrices(suitesparse_dir))
    assert list_matrices(suitesparse_dir, limit=5) == list_matrices(suitesparse_dir)[:5]
    for limit in (-1, 2.5, True):  # -1 had listed all but the largest
        with pytest.raises(InputError, match=f"limit must be a whole number >= 0 or None, got {limit!r}"):
            list_matrices(suitesparse_dir, limit=limit)
    for max_nnz in (-1, "1000", True):  # an empty list, a raw TypeError, an empty list (a review)
        with pytest.raises(InputError, match=f"max_nnz must be a whole number >= 0 or None, got {max_nnz!r}"):
            list_matrices(suitesparse_dir, max_nnz=max_nnz)


def test_list_folder_without_manifest(tmp_path, suitesparse_dir):
    folder = tmp_path / "matrices"
    (folder / "MyGroup").mkdir(parents=True)
    for matrix_id in ("HB/bcsstk01", "Pajek/EVA", "JGD_Kocay/Trec4"):
        shutil.copy(real_path(suitesparse_dir, matrix_id), folder)
    (folder / "Mine__tiny.mtx").write_text(GOOD_HEADER + "2 5 2\n1 1 1\n2 5 3\n")
    with tarfile.open(folder / "MyGroup" / "bcsstk02.tar.gz", "w:gz") as tar:
        tar.add(_unzipped(real_path(suitesparse_dir, "HB/bcsstk02"), tmp_path), arcname="bcsstk02/bcsstk02.mtx")
    (folder / "notes.txt").write_text("not a matrix")

    infos = {info.id: info for info in list_matrices(folder)}
    assert sorted(infos) == ["HB/bcsstk01", "JGD_Kocay/Trec4", "Mine/tiny", "MyGroup/bcsstk02", "Pajek/EVA"]
    assert (infos["Mine/tiny"].rows, infos["Mine/tiny"].cols, infos["Mine/tiny"].nnz) == (2, 5, 2)
    assert infos["Pajek/EVA"].nnz == read_matrix(infos["Pajek/EVA"].path).nnz
    symmetric = infos["HB/bcsstk01"]
    assert symmetric.nnz == 2 * 224 >= read_matrix(symmetric.path).nnz  # header-only upper bound
    assert infos["MyGroup/bcsstk02"].family == "MyGroup"
    assert all(info.kind == "" and info.stats is None for info in infos.values())
    ordered = list_matrices(folder)
    assert [i.nnz for i in ordered] == sorted(i.nnz for i in ordered)


def test_a_folder_given_as_dot_names_its_matrices_as_its_path_does(tmp_path, monkeypatch):
    """Listed as ".", files without a group took the group "" and ids "/name": a table profiled so
    could not be resumed from the folder's path, and the matrices lost their shared family (a review)."""
    folder = tmp_path / "mine"
    folder.mkdir()
    write_mtx(folder / "tiny.mtx", GOOD_HEADER + "2 2 1\n1 1 1\n")
    monkeypatch.chdir(folder)
    assert [(info.id, info.group) for info in list_matrices(".")] == [("mine/tiny", "mine")]
    assert [info.id for info in list_matrices(folder)] == ["mine/tiny"]


@pytest.mark.parametrize("symmetry", ["symmetric", "skew-symmetric"])
def test_a_dense_symmetric_file_is_listed_with_at_most_its_cells(tmp_path, symmetry):
    """A dense file's size line counts every cell: doubled as a coordinate file's stored triangle
    is, a 3 x 3 listed 18 entries (a review), and --max-nnz and the order read that."""
    cells = "1\n2\n3\n4\n5\n6\n" if symmetry == "symmetric" else "2\n3\n5\n"
    write_mtx(tmp_path / "Mine__dense.mtx", f"%%MatrixMarket matrix array real {symmetry}\n3 3\n{cells}")
    [info] = list_matrices(tmp_path)
    assert info.nnz <= 9 and info.nnz >= read_matrix(info.path).nnz


def _archive(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members:
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return path


def test_an_archive_is_read_as_the_matrix_it_is_named_after(tmp_path):
    """Another Name/Name.mtx packed first (bar/bar.mtx in foo's archive) was read as foo, silently,
    and a top-level foo.mtx beside foo_b.mtx was refused (a review)."""
    bar, foo = GOOD_HEADER + "2 2 1\n1 1 7\n", GOOD_HEADER + "5 5 3\n1 1 1\n2 2 2\n5 5 3\n"
    packed = _archive(tmp_path / "Grp__foo.tar.gz", [("bar/bar.mtx", bar), ("foo/foo.mtx", foo)])
    assert read_matrix(packed).shape == (5, 5) and read_header(packed).entries == 3
    top = _archive(tmp_path / "foo.tar.gz", [("foo.mtx", foo), ("foo_b.mtx", GOOD_HEADER + "5 1 1\n1 1 1\n")])
    assert read_matrix(top).shape == (5, 5)
    two = _archive(tmp_path / "baz.tar.gz", [("bar/bar.mtx", bar), ("foo/foo.mtx", foo)])
    with pytest.raises(InputError, match=r"baz\.tar\.gz: expected one Name/Name\.mtx inside the archive \(Name 'baz'"):
        read_matrix(two)


def test_one_unreadable_file_is_left_out_of_a_folder_with_a_warning(tmp_path, suitesparse_dir):
    """It stopped the listing of the whole folder, and every campaign over it."""
    folder = tmp_path / "matrices"
    folder.mkdir()
    shutil.copy(real_path(suitesparse_dir, "HB/bcsstk01"), folder)
    (folder / "Bad__broken.mtx.gz").write_bytes(b"plain text, not gzip")
    (folder / "Bad__inflate.mtx.gz").write_bytes(_bad_block_type(real_path(suitesparse_dir, "HB/bcsstk01").read_bytes()))
    with pytest.warns(SeerWarning, match=r"left out: .*Bad__broken\.mtx\.gz") as told:
        assert [info.id for info in list_matrices(folder)] == ["HB/bcsstk01"]
    assert any("Bad__inflate.mtx.gz" in str(warning.message) for warning in told)


def _unzipped(path, folder):
    plain = folder / path.name.removesuffix(".gz")
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    return plain


def test_list_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        list_matrices(tmp_path / "missing")
    with pytest.raises(InputError, match="no matrices"):
        list_matrices(tmp_path)
    (tmp_path / "manifest.csv").write_text("group,name\nHB,x\n")
    with pytest.raises(InputError, match="lacks the columns"):
        list_matrices(tmp_path)


@pytest.mark.parametrize("column, cell, message", [
    ("group", "", r"row 1: empty \['group'\]"),
    ("file", "", r"row 1: empty \['file'\]"),
    ("rows", "many", r"row 1: rows, cols and nnz_file must be whole numbers >= 0, got \['many'"),
    ("nnz_file", "-5", r"row 1: .* got \['48', '48', '-5'\]"),
])
def test_manifest_cells_that_name_nothing_are_refused(tmp_path, suitesparse_dir, column, cell, message):
    shutil.copy(real_path(suitesparse_dir, "HB/bcsstk01"), tmp_path)
    table = pd.read_csv(suitesparse_dir / "manifest.csv", dtype=str, keep_default_na=False)
    table = table[table.name == "bcsstk01"].assign(**{column: cell})
    table.to_csv(tmp_path / "manifest.csv", index=False)
    with pytest.raises(InputError, match=message):
        list_matrices(tmp_path)


def test_an_empty_kind_in_the_manifest_is_an_unknown_one(tmp_path, suitesparse_dir):
    """Left for ssstats to fill in (it had read as NaN, and the family as 'HB/nan')."""
    shutil.copy(real_path(suitesparse_dir, "HB/bcsstk01"), tmp_path)
    table = pd.read_csv(suitesparse_dir / "manifest.csv", dtype=str, keep_default_na=False)
    table[table.name == "bcsstk01"].assign(kind="").to_csv(tmp_path / "manifest.csv", index=False)
    (info,) = list_matrices(tmp_path)
    assert info.kind == ""


def test_manifest_row_without_file_warns(tmp_path, suitesparse_dir):
    shutil.copy(real_path(suitesparse_dir, "HB/bcsstk01"), tmp_path)
    table = pd.read_csv(suitesparse_dir / "manifest.csv")
    table[table.name.isin(["bcsstk01", "bcsstk02"])].to_csv(tmp_path / "manifest.csv", index=False)
    with pytest.warns(SeerWarning, match="bcsstk02") as record:
        infos = list_matrices(tmp_path)
    assert [info.id for info in infos] == ["HB/bcsstk01"]
    assert {w.filename for w in record} == {__file__}  # the caller's line, not seer.datasets'


def _manifest_of(folder, suitesparse_dir, names, **cells):
    """A manifest of the real matrices ``names`` (copied into ``folder``), ``cells`` overriding columns."""
    table = pd.read_csv(suitesparse_dir / "manifest.csv", dtype=str, keep_default_na=False)
    table = table[table.name.isin(names)].assign(**cells)
    for file in table.file:
        if (suitesparse_dir / file).is_file():
            shutil.copy(suitesparse_dir / file, folder)
    table.to_csv(folder / "manifest.csv", index=False)


@pytest.mark.parametrize("cells, told", [
    ({"rows": "7", "cols": "7"}, (r"row 1 says HB/bcsstk01 is 7 x 7 with nnz_file 400, but its file .*bcsstk01\.mtx\.gz "
                                  r"holds a 48 x 48 matrix of 400 entries")),
    ({"nnz_file": "3"}, r"row 1 says HB/bcsstk01 is 48 x 48 with nnz_file 3, .* of 400 entries"),
])
def test_a_manifest_row_that_does_not_describe_its_file_is_refused_when_read(tmp_path, suitesparse_dir, cells, told):
    """Its nnz drove --max-nnz filtering and the order of the cases, unchecked."""
    _manifest_of(tmp_path, suitesparse_dir, ["bcsstk01"], **cells)
    (info,) = list_matrices(tmp_path)
    with pytest.raises(InputError, match=told):
        read_listed_matrix(info)


def test_a_listed_matrix_that_matches_its_row_is_read(suitesparse_dir):
    info = next(info for info in list_matrices(suitesparse_dir) if info.id == "HB/bcsstk01")
    assert (read_listed_matrix(info) != read_matrix(info.path)).nnz == 0


def test_manifest_cells_with_spaces_around_them_are_refused(tmp_path, suitesparse_dir):
    """" HB/bcsstk01" was another input than the tables' HB/bcsstk01."""
    _manifest_of(tmp_path, suitesparse_dir, ["bcsstk01"], group=" HB")
    with pytest.raises(InputError, match=r"row 1: spaces around the cells \['group'\] \[' HB'\]"):
        list_matrices(tmp_path)


def test_two_manifest_rows_naming_one_file_are_refused(tmp_path, suitesparse_dir):
    _manifest_of(tmp_path, suitesparse_dir, ["bcsstk01", "bcsstk02"], file="HB__bcsstk01.mtx.gz")
    with pytest.raises(InputError, match=r"row 1 \(HB/bcsstk01\) and .*row 2 \(HB/bcsstk02\) name the same file"):
        list_matrices(tmp_path)


def test_two_manifest_rows_of_one_id_are_refused(tmp_path, suitesparse_dir):
    """Both were listed, as two inputs the tables and the families could not tell apart (a review)."""
    _manifest_of(tmp_path, suitesparse_dir, ["bcsstk01", "bcsstk02"], name="bcsstk01")
    with pytest.raises(InputError, match=r"row 1 \(HB__bcsstk01\.mtx\.gz\) and .*row 2 \(HB__bcsstk02\.mtx\.gz\) "
                                         r"both list HB/bcsstk01"):
        list_matrices(tmp_path)


def test_a_manifest_whose_rows_end_in_a_comma_is_read_as_written(tmp_path, suitesparse_dir):
    """pandas took the first column for an index and shifted every cell by one: 'row 1: empty
    ['file']' of a row whose file was there (a review)."""
    _manifest_of(tmp_path, suitesparse_dir, ["bcsstk01", "bcsstk02"])
    manifest = tmp_path / "manifest.csv"
    header, *rows = manifest.read_text().splitlines()
    manifest.write_text("\n".join([header, *(row + "," for row in rows)]) + "\n")
    assert [info.id for info in list_matrices(tmp_path)] == ["HB/bcsstk01", "HB/bcsstk02"]


def test_an_unpacked_archives_extras_are_no_matrices(tmp_path, suitesparse_dir):
    """SuiteSparse archives unpacked into Group/Name/: Name_b.mtx (a right-hand side) beside Name.mtx
    had been listed, and profiled, as a matrix of its own (a review); alone in its folder it is one.
    The group of Group/Name/Name.mtx is Group (it had been Name: each matrix a family of its own)."""
    folder = tmp_path / "HB" / "bcsstk01"
    folder.mkdir(parents=True)
    shutil.copy(real_path(suitesparse_dir, "HB/bcsstk01"), folder / "bcsstk01.mtx.gz")
    (folder / "bcsstk01_b.mtx").write_text("%%MatrixMarket matrix array real general\n48 1\n" + "1.5\n" * 48)
    assert [info.id for info in list_matrices(tmp_path)] == ["HB/bcsstk01"]  # the group: the folder above
    (folder / "bcsstk01.mtx.gz").unlink()
    assert [info.id for info in list_matrices(tmp_path)] == ["bcsstk01/bcsstk01_b"]


def test_a_folder_whose_matrix_files_are_all_unreadable_says_so(tmp_path):
    """It said there were no files ending in .mtx, beside the .mtx files it had warned of."""
    (tmp_path / "broken.mtx").write_text("not a matrix market file\n")
    with pytest.warns(SeerWarning, match="left out"):
        with pytest.raises(InputError, match=r"none of the 1 matrix files in .* could be read"):
            list_matrices(tmp_path)


def test_a_missing_collection_index_is_named_as_such(tmp_path):
    with pytest.raises(InputError, match=r"collection index .*ssstats\.csv does not exist"):
        read_ssstats(tmp_path / "ssstats.csv")


def test_a_manifest_without_rows_or_files_is_named_as_such(tmp_path, suitesparse_dir):
    """Both were "no matrices in D: expected manifest.csv or files ending in .mtx", beside the manifest."""
    _manifest_of(tmp_path, suitesparse_dir, [])
    with pytest.raises(InputError, match=r"manifest\.csv lists no matrices: it has a header and no rows"):
        list_matrices(tmp_path)
    _manifest_of(tmp_path, suitesparse_dir, ["bcsstk01"], file="gone.mtx.gz")
    with pytest.raises(InputError, match=r"none of the 1 files that .*manifest\.csv lists exists \(first: \[.*gone"):
        list_matrices(tmp_path)


# ---------------------------------------------------------------------------------------------
# ssstats


def test_read_ssstats(suitesparse_dir):
    stats = read_ssstats(suitesparse_dir / "ssstats.csv")
    assert len(stats) == 2893 and stats.attrs["date"].startswith("08-Oct-2020")
    assert list(stats.columns[:5]) == ["group", "name", "rows", "cols", "nnz"]
    row = stats[(stats.group == "HB") & (stats.name == "bcsstk01")].iloc[0]
    assert (row.rows, row.nnz, row.posdef, row.kind) == (48, 400, 1, "structural problem")
    assert stats.psym.between(0, 1).all()


def test_attach_ssstats_fills_kind(tmp_path, suitesparse_dir):
    stats = read_ssstats(suitesparse_dir / "ssstats.csv")
    info = MatrixInfo("HB/bcsstk01", "HB", "bcsstk01", 48, 48, 400, "", tmp_path)
    unknown = MatrixInfo("Mine/x", "Mine", "x", 1, 1, 1, "", tmp_path)
    known, other = attach_ssstats([info, unknown], stats)
    assert known.kind == "structural problem" and known.stats["isReal"] == 1
    assert other.stats is None and other.kind == ""


@pytest.mark.parametrize(
    "text, problem",
    [
        ("x\ndate\nHB,a,1,1,1,1,0,0,0,1,1,k,1\n", "not a SuiteSparse index"),
        ("2\ndate\nHB,a,1,1,1,1,0,0,0,1,1,k,1\n", "announces 2"),
        ("1\ndate\nHB,a,1,1,1,1,0,0,0,1,1\n", "columns"),
        ("1\ndate\nHB,a,1,one,1,1,0,0,0,1,1,k,1\n", "non-numeric"),
        # two rows for one matrix: attach_ssstats took the last one without a word
        ("3\ndate\nHB,a,1,1,1,1,0,0,0,1,1,k,1\nHB,b,1,1,1,1,0,0,0,1,1,k,1\nHB,a,2,2,2,1,0,0,0,1,1,k,1\n",
         r"2 rows share a matrix's group and name, e.g. HB/a \(lines 3, 5\); keep one row per matrix"),
    ],
)
def test_bad_ssstats(tmp_path, text, problem):
    path = tmp_path / "ssstats.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=problem):
        read_ssstats(path)


@pytest.mark.parametrize("index, content", [
    (MANIFEST, "group,name,rows,cols,nnz_file,kind,file\nBai,olm500,500,500,1996,,Bai__olm500.mtx.gz\n"),
    (SSSTATS, "1\n2024-01-01\nBai,olm500,500,500,1996,1,0,0,0,0,0,kind,1996\n"),
])
def test_an_index_that_cannot_be_read_is_named(suitesparse_dir, tmp_path, unreadable, index, content):
    """An unreadable manifest.csv or ssstats.csv raised a raw PermissionError (found by a review)."""
    shutil.copy(suitesparse_dir / "Bai__olm500.mtx.gz", tmp_path)
    (tmp_path / index).write_text(content)
    unreadable(tmp_path / index)
    with pytest.raises(InputError, match=f"cannot read {tmp_path / index}: Permission denied"):
        list_matrices(tmp_path)


def test_a_manifest_row_with_a_field_too_many_or_too_few_is_refused_by_line(tmp_path, suitesparse_dir):
    """pandas dropped one row's last field and shifted the cells between (a comma in a kind), with a
    warning of its own only; seer then skipped the matrix as "file missing" (a review)."""
    _manifest_of(tmp_path, suitesparse_dir, ["bcsstk01", "bcsstk02"])
    manifest = tmp_path / "manifest.csv"
    header, first, second = manifest.read_text().splitlines()
    columns, cells = len(header.split(",")), first.split(",")
    for row, fields in ((",".join([*cells[:2], "x", *cells[2:]]), columns + 1), (",".join(cells[:-1]), columns - 1)):
        manifest.write_text("\n".join([header, row, second]) + "\n")
        with pytest.raises(InputError, match=rf"manifest\.csv: line 2 has {fields} fields, but the header names "
                                             rf"{columns} columns: a cell too many or too few"):
            list_matrices(tmp_path)
