"""Profile tables: the documented CSV + meta format, its errors and its dropped-row warning."""
import csv
import json
import os
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import load_benchmark
from synthetic_profiles import planted_frame, planted_meta, toy_op, write_planted  # noqa: F401 (toy_op is a fixture)

from seer.errors import ProfileTableError, SeerWarning
from seer.table import ProfileTable, merge_tables, meta_path, read_table, retire_variants, table_sha256, write_table

pytestmark = pytest.mark.usefixtures("toy_op")


def write(tmp_path, frame, meta=None, name="t.csv"):
    return write_table(frame, tmp_path / name, planted_meta() if meta is None else meta)


def test_round_trip_keeps_values_and_metadata(tmp_path):
    frame = planted_frame(groups=6, per_group=3)
    table = read_table(write(tmp_path, frame))
    assert table.op == "toy"
    assert table.variants == ("a", "b", "c")
    assert table.baselines == ("vendor",)
    assert table.known_features == ("rows", "cols", "nnz", "mean_row")
    assert table.gathered_features == ("row_cv", "row_max")
    assert table.has_stage2
    assert len(table) == 18
    assert list(table.ids) == list(frame["id"])
    assert list(table.groups) == list(frame["group"])
    np.testing.assert_array_equal(table.times, frame[["time_ms:a", "time_ms:b", "time_ms:c"]].to_numpy())
    np.testing.assert_array_equal(table.gather_ms, frame["gather_ms"].to_numpy())
    np.testing.assert_array_equal(table.features(["nnz", "row_cv"]), frame[["nnz", "row_cv"]].to_numpy())
    assert table.call_us.shape == (18, 3) and np.isnan(table.call_us[:, 1:]).all() and (table.call_us[:, 0] == 20).all()
    assert table.meta == planted_meta()
    assert meta_path(tmp_path / "t.csv") == tmp_path / "t.meta.json"


def test_floats_read_back_to_the_bit_without_warnings(tmp_path):
    """A merge or a rewrite keeps what it reads: a parse off by an ulp (pandas 2's default parser)
    would change cells it never measured."""
    frame = planted_frame(groups=6, per_group=50)
    rng = np.random.default_rng(3)
    frame["time_ms:a"] = (0.5 + rng.random(len(frame))) * np.logspace(-4, 2, len(frame))  # every one >= 1 ns
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas 3 deprecates the argument pandas 2 needs
        table = read_table(write(tmp_path, frame))
    assert table.times[:, 0].tobytes() == frame["time_ms:a"].to_numpy().tobytes()


def test_a_committed_cell_reads_back_as_written(capsys):
    """benchmarks/pandas_float_parse.py: the cell it reads is written 0.004800000227987766."""
    load_benchmark("pandas_float_parse").main()
    assert "read_table np.float64(0.004800000227987766)" in capsys.readouterr().out


@pytest.mark.parametrize("text, version", [("3.0.6", (3, 0)), ("3.1.0rc1", (3, 1)), ("3.1rc1", (3, 1)), ("2.2.3+dev", (2, 2))])
def test_pandas_versions_are_read_from_any_release_string(text, version):
    from seer.table import _version

    assert _version(text) == version


def test_optional_columns_default(tmp_path):
    frame = planted_frame(groups=4, per_group=2).drop(columns=["group", "source", "gather_ms", "row_cv", "row_max"])
    frame["notes"] = "kept"
    table = read_table(write(tmp_path, frame))
    assert list(table.groups) == list(table.ids)
    assert table.sources is None and table.gather_ms is None
    assert not table.has_stage2
    assert "notes" in table.frame


def test_empty_group_cells_fall_back_to_id(tmp_path):
    frame = planted_frame(groups=3, per_group=2)
    frame.loc[1, "group"] = None
    table = read_table(write(tmp_path, frame))
    assert table.groups[1] == table.ids[1]
    assert table.groups[0] == "g0"


def test_op_argument_and_metadata(tmp_path):
    path = write(tmp_path, planted_frame(groups=2, per_group=2))
    assert read_table(path, op="toy").op == "toy"
    with pytest.raises(ProfileTableError, match="profiled for op 'toy', not 'spmv'"):
        read_table(path, op="spmv")
    meta_path(path).unlink()
    with pytest.raises(ProfileTableError, match=r"no op for .*name it \(op=, or --op on the command line\)"):
        read_table(path)
    assert read_table(path, op="toy").meta == {}


def test_unregistered_op_may_list_its_features_in_meta(tmp_path):
    meta = {"op": "mystery", "features": {"known": ["nnz"], "gathered": ["row_cv", "absent"]}}
    table = read_table(write(tmp_path, planted_frame(groups=2, per_group=2), meta))
    assert table.known_features == ("nnz",)
    assert table.gathered_features == ("row_cv",)
    with pytest.raises(ProfileTableError, match="no feature module for op 'other'"):
        read_table(write(tmp_path, planted_frame(groups=2, per_group=2), {"op": "other"}))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda f: f.drop(columns=["time_ms:a", "time_ms:b", "time_ms:c"]), "need at least two 'time_ms:<variant>' columns"),
        (lambda f: f.drop(columns=["time_ms:a", "time_ms:b"]), r"at least two .*found \['time_ms:c'\]"),
        (lambda f: f.drop(columns=["nnz", "rows"]), r"missing required feature column\(s\) \['rows', 'nnz'\]"),
        (lambda f: f.drop(columns=["id"]), "missing the 'id' column"),
        (lambda f: f.assign(id=["x"] * len(f)), r"duplicate id\(s\) \['x'\]"),
        (lambda f: f.assign(nnz=["12", "many"] + list(f["nnz"][2:])), r"non-numeric cell\(s\) in column 'nnz' \(m0_1: 'many'\)"),
        (lambda f: f.assign(**{"time_ms:b": ["fast"] + list(f["time_ms:b"][1:])}), "non-numeric cell.*'time_ms:b'"),
        (lambda f: f.assign(row_cv=[np.nan] + list(f["row_cv"][1:])), r"column 'row_cv' must be finite.*row\(s\) \['1'\]"),
        (lambda f: f.assign(gather_ms=-f["gather_ms"]), "'gather_ms' must hold times from 0 to .* negative or longer"),
        (lambda f: f.rename(columns={"time_ms:c": "time_ms:gather"}), "'gather' is reserved"),
        (lambda f: f.assign(**{"call_us:zz": 1.0}), r"'call_us:' columns \['zz'\] have no matching"),
        (lambda f: f.assign(**{"prepare_ms:a": [0.1, -0.2, 0.1, 0.1]}), r"column 'prepare_ms:a' must hold times from 0 to 8.64e\+07 ms; negative or longer in row\(s\) \['2'\]"),
        (lambda f: f.assign(**{"prepare_ms:b": [0.1, 0.1, np.nan, 0.1]}), r"column 'prepare_ms:b' must be finite.*row\(s\) \['3'\]"),
        (lambda f: f.assign(**{"prepare_ms:c": [0.1, np.inf, 0.1, 0.1]}), r"column 'prepare_ms:c' must be finite.*row\(s\) \['2'\]"),
        (lambda f: f.assign(**{"prepare_ms:a": ["0.1", "slow", "0.1", "0.1"]}), r"non-numeric cell.*'prepare_ms:a'"),
        (lambda f: f.assign(**{"prepare_ms:x": 0.1}), r"'prepare_ms:' columns \['x'\] have no matching 'time_ms:' column"),
        (lambda f: f.assign(**{"time_ms:": 1.0}), r"column\(s\) \['time_ms:'\] name no variant"),
        (lambda f: f.assign(**{"call_us:a": [20.0, -1.0, 20.0, np.inf]}), r"column 'call_us:a' must hold host times in µs above 0 and at most a day .* row\(s\) \['2', '4'\]"),
        (lambda f: f.assign(nnz=[1e39] + list(f["nnz"][1:])), r"column 'nnz' has values beyond float32's range .* row\(s\) \['1'\]"),
        # An integer feature is a size, count or code: a negative one had been trained on as an input.
        (lambda f: f.assign(nnz=[f["nnz"][0], -3, f["nnz"][2], -1]), r"column 'nnz' \(a size, count or code\) cannot be negative, but is in row\(s\) \['2', '4'\]"),
        (lambda f: f.assign(row_max=[-1] + list(f["row_max"][1:])), r"column 'row_max' \(a size, count or code\) cannot be negative, but is in row\(s\) \['1'\]"),
        # A fraction had been trained on too, and a misspelt source scored with the synthetic rows.
        (lambda f: f.assign(nnz=[f["nnz"][0], 2.5, f["nnz"][2], f["nnz"][3]]), r"column 'nnz' \(a size, count or code\) must be a whole number, but is fractional in row\(s\) \['2'\]"),
        (lambda f: f.assign(source=["real", "Real", "derived", "synthetic"]), r"column 'source' must be one of \['real', 'derived', 'synthetic'\] \(or empty\); 'Real' in row\(s\) \['2'\]"),
        # A column close to one seer reads, kept and ignored, changed what was trained in silence (a review):
        # every row its own family (held-out scores up), a variant or a stage-2 feature dropped.
        (lambda f: f.rename(columns={"group": "groop"}), r"column 'groop' is none that seer reads, and close to 'group': "
                                                         r"rename it"),
        (lambda f: f.rename(columns={"time_ms:c": "time_ms_c"}), r"column 'time_ms_c' .* close to 'time_ms:c'"),
        (lambda f: f.rename(columns={"row_max": "row_mx"}), r"column 'row_mx' .* close to 'row_max'"),
        (lambda f: f.rename(columns={"baseline_ms:vendor": "basline_ms:vendor"}), r"'basline_ms:vendor' .* close to "
                                                                                   r"'baseline_ms:\.\.\.'"),
        (lambda f: f.assign(**{"time_ms:scalar_r12": f["time_ms:a"], "call_us:scalar_r128": 20.0}),
         r"'call_us:' columns \['scalar_r128'\] have no matching .* \('time_ms:scalar_r12' is close to 'scalar_r128': a "
         r"misspelling\? rename it\)"),
    ],
)
def test_bad_tables_are_refused_with_the_reason(tmp_path, edit, message):
    path = write(tmp_path, edit(planted_frame(groups=2, per_group=2)))
    with pytest.raises(ProfileTableError, match=message):
        read_table(path)


def test_columns_seer_does_not_read_are_kept_and_ignored_unless_close_to_one_it_does(tmp_path):
    """seer profile writes each input's size; a user's notes or annotations are theirs to keep."""
    frame = planted_frame(groups=2, per_group=2).assign(size=7, notes="mine", kind="band")
    table = read_table(write(tmp_path, frame))
    assert list(table.frame["notes"]) == ["mine"] * 4 and table.known_features == ("rows", "cols", "nnz", "mean_row")


def test_negative_values_are_refused_only_in_integer_features(tmp_path):
    """A feature not marked integer may be negative, as may any feature of an op whose table lists
    its own: nothing says what their values mean."""
    frame = planted_frame(groups=2, per_group=2)
    read_table(write(tmp_path, frame.assign(mean_row=-frame["mean_row"]), name="fractional.csv"))
    meta = {"op": "listed", "features": {"known": ["nnz"], "gathered": []}}
    read_table(write(tmp_path, frame.assign(nnz=-frame["nnz"]), meta, name="listed.csv"))


def test_a_table_is_rewritten_whole_or_not_at_all(tmp_path, monkeypatch):
    """Tables are rewritten in place (retired variants, regrouped rows): a kill while writing left
    fewer rows, read back under the old metadata (found by an audit)."""
    path = write(tmp_path, planted_frame(groups=2, per_group=2))
    before = path.read_bytes(), meta_path(path).read_bytes()

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        write_table(planted_frame(groups=3, per_group=2), path, planted_meta())
    assert (path.read_bytes(), meta_path(path).read_bytes()) == before


# Names a CSV field must quote: a lone carriage return, both line breaks, a quote, a comma.
ODD_NAMES = ["cr\rx", "crlf\r\ny", "lf\nz", 'q"uote', "a,b"]


def _quoted_by_hand(path, frame):
    """``frame`` as a tool other than seer may write it (every text cell quoted), read as seer reads it."""
    path.write_text(frame.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC), newline="")
    meta_path(path).write_text(json.dumps(planted_meta()))
    assert list(read_table(path).ids) == list(frame["id"])
    return path


def test_names_that_csv_must_quote_read_back_after_a_write_a_retire_and_a_merge(tmp_path):
    """A lone carriage return in a name was written bare (pandas quotes only its line ending's
    characters): a retire made a readable table unreadable in place, and a merge wrote one that
    did not read (found by a review)."""
    frame = planted_frame(groups=4, per_group=2)
    frame.loc[: len(ODD_NAMES) - 1, "id"] = ODD_NAMES
    frame.loc[:1, "group"] = "family\r0"
    assert list(read_table(write(tmp_path, frame)).ids) == list(frame["id"])
    a = _quoted_by_hand(tmp_path / "a.csv", frame)
    retire_variants(a, ["c"], "cmd")
    assert list(read_table(a).ids) == list(frame["id"])
    b = _quoted_by_hand(tmp_path / "b.csv", _remeasured(frame.drop(columns="time_ms:c")))
    merged = read_table(merge_tables([a, b], tmp_path / "merged.csv"))
    assert list(merged.ids) == list(frame["id"]) and list(merged.groups[:2]) == ["family\r0"] * 2


def test_a_table_whose_csv_would_not_read_back_is_not_written(tmp_path, monkeypatch):
    """The write checks its text before it replaces the file: a table rewritten in place is lost
    for good if its rows do not read back."""
    path = write(tmp_path, planted_frame(groups=4, per_group=2))
    before = path.read_bytes(), meta_path(path).read_bytes()
    frame = planted_frame(groups=4, per_group=2)
    frame.loc[0, "id"] = "cr\rx"
    monkeypatch.setattr("seer.table._csv_field", lambda text: text)  # every field bare, as pandas left a "\r"
    with pytest.raises(ProfileTableError, match=r"cannot write .*t\.csv: its CSV would read back as 9 rows of "
                                                r"\[1, 15\] fields, not 8 rows of 15; nothing was written"):
        write(tmp_path, frame)
    assert (path.read_bytes(), meta_path(path).read_bytes()) == before


def test_missing_file_and_bad_meta(tmp_path):
    with pytest.raises(ProfileTableError, match="does not exist"):
        read_table(tmp_path / "nope.csv")
    path = write(tmp_path, planted_frame(groups=2, per_group=2))
    meta_path(path).write_text("{not json")
    with pytest.raises(ProfileTableError, match="t.meta.json is not JSON"):
        read_table(path)
    # A model given as the table said only that every feature column was missing.
    with pytest.raises(ProfileTableError, match=r"t\.meta\.json is JSON \(a model, or a table's metadata\); a "
                                                r"profile table is the CSV"):
        read_table(meta_path(path))
    meta_path(path).write_bytes(b"\xff\xfe{}")
    with pytest.raises(ProfileTableError, match="t.meta.json is not JSON"):
        read_table(path)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"op": ["toy"]}, r"\"op\" must be an op's name, got \['toy'\]"),
        ({"versions": "1.0"}, r"\"versions\" must be an object"),
        ({"device": ["H100"]}, r"\"device\" must be an object"),
        ({"device": {"name": 7}}, r"the device's \"name\" must be a string, got 7"),
        ({"device": {"name": "X", "capability": 9}}, r"the device's \"capability\" must be \[major, minor\], got 9"),
        ({"device": {"name": "X", "sm_count": "132"}}, r"the device's \"sm_count\" must be a whole number >= 1, got '132'"),
        ({"features": {"known": ["rows", "rows"], "gathered": []}}, r"feature\(s\) \['rows'\] are listed more than once"),
        # read as its letters, it was refused as "feature(s) ['n'] listed more than once"
        ({"features": {"known": "nnz", "gathered": []}}, r"features\.known must be a list of column names, got 'nnz'"),
        # seer profile's, read when it resumes the table
        ({"skipped": ["m0_0"]}, r"\"skipped\" must be an object such as \{\"<id>\": \"<reason>\"\}, got \['m0_0'\]"),
        ({"inputs": "large"}, r"\"inputs\" must be an object such as .*, got 'large'"),
        # retire extended it (TypeError), a regroup read it (AttributeError), training copied dtype into the model
        ({"retired_variants": 5}, r"\"retired_variants\" must be a list such as \[\{\"variants\": .*, got 5"),
        ({"retired_variants": ["a"]}, r"\"retired_variants\" must be a list such as .*, got \['a'\]"),
        ({"groups": ["x"]}, r"\"groups\" must be an object such as \{\"definition\": .*, got \['x'\]"),
        ({"dtype": 7}, r"\"dtype\" must name the values' dtype, one of \['float32', 'float16', 'bfloat16'\], got 7"),
        ({"dtype": "fp32"}, r"\"dtype\" must name the values' dtype, one of .*, got 'fp32'"),
        ({"commands": "seer profile"}, r"\"commands\" must be a list such as .*, got 'seer profile'"),
        ({"commands": [3]}, r"\"commands\" must be a list such as .*, got \[3\]"),
        ({"runs": {"command": "x"}}, r"\"runs\" must be a list such as .*, got \{'command': 'x'\}"),
    ],
)
def test_metadata_fields_of_the_wrong_shape_are_refused_on_reading(tmp_path, change, message):
    """A field seer reads later (training, merging, dispatch matching a model to a GPU) is checked
    where the table is read, naming the metadata file."""
    meta = {**planted_meta(), **change}
    path = write(tmp_path, planted_frame(groups=2, per_group=2), {**meta, "op": meta["op"]})
    if "features" in change:  # an op without a feature module lists its features
        meta_path(path).write_text(json.dumps({**meta, "op": "unregistered"}))
    with pytest.raises(ProfileTableError, match=message):
        read_table(path)


def test_metadata_of_the_types_seer_writes_is_read(tmp_path):
    meta = {**planted_meta(), "dtype": "bfloat16", "commands": ["a", "b"], "runs": [{"command": "b"}],
            "retired_variants": [{"variants": ["d"], "by": "c"}], "groups": {"definition": "g"}}
    assert read_table(write(tmp_path, planted_frame(groups=2, per_group=2), meta)).meta == meta


def test_a_device_named_by_a_string_is_its_name(tmp_path):
    from seer.table import device_of

    table = read_table(write(tmp_path, planted_frame(groups=2, per_group=2), {**planted_meta(), "device": "Some GPU"}))
    assert device_of(table.meta) == {"name": "Some GPU", "capability": None}
    assert device_of({}) == {"name": None, "capability": None}
    # The SM count the profiling harness records: a model trained on the table keeps it
    measured = {"name": "G", "capability": [9, 0], "sm_count": 132, "memory_gib": 79.2}
    assert device_of({"device": measured}) == {"name": "G", "capability": [9, 0], "sm_count": 132}


@pytest.mark.parametrize("name", ["NA", "None", "null", "nan", "N/A"])
def test_groups_and_ids_spelled_like_missing_cells_are_names(tmp_path, name):
    """pandas reads such cells as missing by default: a family named "NA" would become one group
    per row, and grouped CV would train and test on it."""
    frame = planted_frame(groups=3, per_group=2)
    frame.loc[:1, "group"] = name
    frame.loc[0, "id"] = name
    frame["time_ms:a"] = frame["time_ms:a"].astype(object)
    frame.loc[2, "time_ms:a"] = "NaN"  # a measured column keeps pandas's missing cells
    with pytest.warns(SeerWarning, match="dropped 1 of 6 rows"):
        table = read_table(write(tmp_path, frame))
    assert list(table.groups[:2]) == [name, name] and table.ids[0] == name


def test_rows_with_failed_times_are_dropped_with_one_counting_warning(tmp_path):
    frame = planted_frame(groups=5, per_group=4)
    frame.loc[0, "time_ms:a"] = np.nan
    frame.loc[3, "time_ms:a"] = 0.0
    frame.loc[3, "time_ms:b"] = -1.0
    frame.loc[7, "time_ms:c"] = np.inf
    frame.loc[9, "baseline_ms:vendor"] = np.nan  # a missing baseline is not a failed row
    path = write(tmp_path, frame)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = read_table(path)
    seer_warnings = [w for w in caught if issubclass(w.category, SeerWarning)]
    assert len(seer_warnings) == 1
    text = str(seer_warnings[0].message)
    assert "dropped 3 of 20 rows" in text
    assert "time_ms:a: 2" in text and "time_ms:b: 1" in text and "time_ms:c: 1" in text
    assert len(table) == 17
    assert set(frame["id"][[0, 3, 7]]).isdisjoint(table.ids)
    assert np.isnan(table.baseline_times).sum() == 1
    assert (table.times > 0).all()


def test_a_repeated_column_name_is_refused_before_pandas_renames_it(tmp_path):
    """pandas reads a second 'time_ms:a' as variant 'a.1', a second feature column as 'nnz.1'."""
    frame = planted_frame(groups=2, per_group=2)
    for name in ("time_ms:a", "nnz"):
        path = write(tmp_path, frame)
        header, rest = path.read_text().split("\n", 1)
        path.write_text(f"{header},{name}\n" + "".join(f"{line},1.0\n" for line in rest.splitlines()))
        with pytest.raises(ProfileTableError, match=rf"t\.csv: column\(s\) \['{name}'\] appear more than once in the header"):
            read_table(path)


def test_a_table_of_only_a_header_says_so(tmp_path):
    path = write(tmp_path, planted_frame(groups=2, per_group=2).iloc[:0])
    with pytest.raises(ProfileTableError, match="the table has no rows, only a header"):
        read_table(path)


@pytest.mark.parametrize("cell", [-5.0, 0.0, np.inf, -np.inf, 1e-320, 1e-9])
def test_baseline_times_must_be_times(tmp_path, cell):
    """A negative baseline gave a NaN speed-up and a model that could not be saved, a zero a speed-up
    of 0 in silence; an empty cell (not measured there) is fine."""
    frame = planted_frame(groups=2, per_group=2)
    frame.loc[2, "baseline_ms:vendor"] = cell
    frame.loc[0, "baseline_ms:vendor"] = np.nan
    with pytest.raises(ProfileTableError, match=r"column 'baseline_ms:vendor' must hold times .* row\(s\) \['3'\]"):
        read_table(write(tmp_path, frame))


def test_sub_nanosecond_times_are_failed_measurements(tmp_path):
    """1e-320 ms is no GPU time: its ratios to the others overflow, and training ended in a traceback."""
    frame = planted_frame(groups=5, per_group=4)
    frame.loc[[1, 6], "time_ms:b"] = [1e-320, 1e-7]
    with pytest.warns(SeerWarning, match=r"dropped 2 of 20 rows .*sub-nanosecond or over-a-day time \(time_ms:b: 2\)"):
        table = read_table(write(tmp_path, frame))
    assert len(table) == 18 and (table.times >= 1e-6).all()


def test_over_a_day_is_a_failed_measurement(tmp_path):
    """1e307 ms passed the checks and training ended on "mean_regret must be finite" (an overflow),
    naming no cell; a preparation as long is refused by its row."""
    frame = planted_frame(groups=5, per_group=4)
    frame.loc[3, "time_ms:a"] = 1e307
    with pytest.warns(SeerWarning, match=r"dropped 1 of 20 rows .*over-a-day time \(time_ms:a: 1\)"):
        table = read_table(write(tmp_path, frame))
    assert len(table) == 19
    frame.loc[3, "time_ms:a"] = 1.0
    frame["prepare_ms:b"] = 0.1
    frame.loc[5, "prepare_ms:b"] = 1e308
    with pytest.raises(ProfileTableError, match=r"'prepare_ms:b' must hold times from 0 to .* row\(s\) \['6'\]"):
        read_table(write(tmp_path, frame))


@pytest.mark.parametrize("cell", [1e308, 86_400_000_000.0 * 1.001])
def test_host_times_over_a_day_are_refused_naming_the_file_and_row(tmp_path, cell):
    """call_us had no upper bound: two campaigns of 1e308 µs read, and their merge's mean overflowed
    to an infinity that the merge blamed on cells no file held (found by a review)."""
    frame = planted_frame(groups=2, per_group=2)
    frame.loc[2, "call_us:a"] = cell
    with pytest.raises(ProfileTableError, match=r"t\.csv: column 'call_us:a' must hold host times in µs above 0 and "
                                                r"at most a day \(8\.64e\+10\), .* row\(s\) \['3'\]"):
        read_table(write(tmp_path, frame))
    frame.loc[2, "call_us:a"] = 86_400_000_000.0  # a day, to the µs: the longest host time
    assert read_table(write(tmp_path, frame)).call_us[2, 0] == 86_400_000_000.0


def test_errors_after_dropped_rows_name_the_file_s_rows(tmp_path):
    """Rows dropped for failed times renumbered the rest: a bad cell in the file's row 10 was named row 8."""
    frame = planted_frame(groups=5, per_group=4)
    frame.loc[[0, 1], "time_ms:a"] = np.nan
    frame["prepare_ms:b"] = 0.1
    frame.loc[9, "prepare_ms:b"] = -1.0
    frame.loc[12, "baseline_ms:vendor"] = -1.0
    with pytest.warns(SeerWarning), pytest.raises(ProfileTableError, match=r"row\(s\) \['10'\]"):
        read_table(write(tmp_path, frame))
    frame.loc[9, "prepare_ms:b"] = 0.1
    with pytest.warns(SeerWarning), pytest.raises(ProfileTableError, match=r"vendor' must hold .* row\(s\) \['13'\]"):
        read_table(write(tmp_path, frame))


def test_a_frame_of_any_index_is_checked_by_its_rows():
    """from_frame named rows by index label + 1: a string index raised a TypeError instead."""
    frame = planted_frame(groups=2, per_group=2)
    frame.loc[2, "baseline_ms:vendor"] = -1.0
    frame.index = [f"r{i}" for i in range(len(frame))]
    with pytest.raises(ProfileTableError, match=r"row\(s\) \['3'\]"):
        ProfileTable.from_frame(frame, "toy", planted_meta())


def test_all_rows_failed_is_an_error(tmp_path):
    frame = planted_frame(groups=2, per_group=2)
    frame["time_ms:a"] = 0.0
    with pytest.warns(SeerWarning), pytest.raises(ProfileTableError, match="no rows left"):
        read_table(write(tmp_path, frame))


def test_from_frame_validates_in_memory_tables():
    frame = planted_frame(groups=2, per_group=2)
    frame["id"] = range(4)  # numbers become string ids
    table = ProfileTable.from_frame(frame, "toy")
    assert list(table.ids) == ["0", "1", "2", "3"]
    assert table.path is None


def test_sha256_follows_the_bytes(tmp_path):
    path = write_planted(tmp_path / "p.csv", groups=2, per_group=2)
    first = table_sha256(path)
    assert len(first) == 64 and first == table_sha256(path)
    path.write_text(path.read_text().replace("m0_0", "m0_9"))
    assert table_sha256(path) != first


def test_preparation_columns_are_optional_per_variant(tmp_path):
    frame = planted_frame(groups=3, per_group=2).assign(**{"prepare_ms:b": [0.5, 0.0, 0.25, 1.0, 2.0, 0.125]})
    assert (read_table(write(tmp_path, planted_frame(groups=3, per_group=2))).prepare_ms == 0).all()
    table = read_table(write(tmp_path, frame))
    expected = np.zeros((6, 3))
    expected[:, 1] = frame["prepare_ms:b"]
    np.testing.assert_array_equal(table.prepare_ms, expected)


def test_a_row_dropped_for_a_failed_time_may_lack_its_preparation(tmp_path):
    """A variant that failed on an input has no preparation either: an empty cell there is no error."""
    frame = planted_frame(groups=3, per_group=2).assign(**{"prepare_ms:b": 0.5})
    frame.loc[4, ["time_ms:b", "prepare_ms:b"]] = np.nan
    with pytest.warns(SeerWarning, match="dropped 1 of 6 rows"):
        table = read_table(write(tmp_path, frame))
    assert len(table) == 5 and (table.prepare_ms[:, 1] == 0.5).all()


def _campaign(tmp_path, name, frame, **meta):
    return write_table(frame, tmp_path / f"{name}.csv", {**planted_meta(), **meta})


def test_merge_averages_measured_columns_of_shared_rows(tmp_path):
    first = planted_frame(groups=6, per_group=2)
    second = first.iloc[2:].copy()  # the first two inputs measured once only
    second[[c for c in second.columns if c.startswith(("time_ms:", "baseline_ms:", "call_us:"))]] *= 1.5
    second["gather_ms"] *= 3.0
    extra = planted_frame(groups=1, per_group=1, seed=7).assign(id="only_in_second")
    second = pd.concat([second, extra], ignore_index=True)
    a = _campaign(tmp_path, "a", first, date="2025-01-01T00:00:00+00:00")
    b = _campaign(tmp_path, "b", second, date="2025-02-01T00:00:00+00:00", command="seer profile again")
    merged = read_table(merge_tables([a, b], tmp_path / "merged.csv")).frame.set_index("id")
    assert list(merged.index) == [*first["id"], "only_in_second"]
    ids = first["id"]
    once, twice = ids.iloc[:2], ids.iloc[2:]
    original = first.set_index("id")
    np.testing.assert_allclose(merged.loc[once, "time_ms:a"], original.loc[once, "time_ms:a"])
    np.testing.assert_allclose(merged.loc[twice, "time_ms:b"], 1.25 * original.loc[twice, "time_ms:b"])
    np.testing.assert_allclose(merged.loc[twice, "call_us:a"], 1.25 * original.loc[twice, "call_us:a"])
    np.testing.assert_allclose(merged.loc[twice, "gather_ms"], 2.0 * original.loc[twice, "gather_ms"])
    np.testing.assert_allclose(merged.loc[twice, "row_cv"], original.loc[twice, "row_cv"])  # features as measured
    assert merged.loc["only_in_second", "time_ms:c"] == extra["time_ms:c"].iloc[0]
    assert merged["campaigns"].to_dict() == {**dict.fromkeys(once, 1), **dict.fromkeys(twice, 2), "only_in_second": 1}
    meta = json.loads((tmp_path / "merged.meta.json").read_text())
    assert meta["date"] == "2025-02-01T00:00:00+00:00" and meta["command"].startswith("seer merge")
    assert [c["sha256"] for c in meta["campaigns"]] == [table_sha256(a), table_sha256(b)]
    assert [c["rows"] for c in meta["campaigns"]] == [12, 11]
    assert meta["campaigns"][1]["commands"] == ["seer profile again"]


def _other_gpu(frame, meta):
    meta["device"] = {"name": "Other GPU", "capability": [9, 0]}


def _other_matrix(frame, meta):
    frame.loc[3, "nnz"] += 1


def _other_dtype(frame, meta):
    meta["dtype"] = "float16"


def _other_group(frame, meta):
    frame.loc[3, "group"] = "g9"


def _other_source(frame, meta):
    frame.loc[3, "source"] = "derived"


@pytest.mark.parametrize("change, message", [
    (_other_gpu, "measured on 'Synthetic GPU', .* on 'Other GPU'"),
    # Plain numbers: the values had printed as np.float64(...) (found by a review).
    (_other_matrix, r"input 'm1_1' has nnz = [0-9.]+ in campaign 2 but [0-9.]+ in an earlier one: not the same input"),
    (_other_dtype, r"profiled in float32, .*b\.csv in float16"),
    # The first campaign's were kept without a word (found by a review).
    (_other_group, (r"input 'm1_1' has group 'g1' in .*a\.csv but 'g9' in .*b\.csv: the campaigns profiled "
                    r"different suites \(or grouped .* seer\.datasets\.cases regroup")),
    (_other_source, (r"input 'm1_1' has source 'real' in .*a\.csv but 'derived' in .*b\.csv: the campaigns "
                     r"profiled different suites; merge campaigns of one suite")),
])
def test_merge_refuses_campaigns_of_other_inputs_or_gpus(tmp_path, change, message):
    frame, meta = planted_frame(groups=4, per_group=2), planted_meta()
    a = write_table(frame, tmp_path / "a.csv", meta)
    change(frame, meta)
    b = write_table(frame, tmp_path / "b.csv", meta)
    with pytest.raises(ProfileTableError, match=message):
        merge_tables([a, b], tmp_path / "merged.csv")
    assert not (tmp_path / "merged.csv").exists()


def test_merge_names_the_campaign_without_a_feature_of_the_first(tmp_path):
    """Campaigns of a custom op with other feature sets: the error had been "y = nan in campaign 2 ...
    not the same input"."""
    frame = planted_frame(groups=2, per_group=2)
    a = write_table(frame, tmp_path / "a.csv", {**planted_meta(), "op": "mine",
                                                "features": {"known": ["nnz", "rows"], "gathered": []}})
    b = write_table(frame.drop(columns="rows"), tmp_path / "b.csv", {**planted_meta(), "op": "mine",
                                                                      "features": {"known": ["nnz"], "gathered": []}})
    with pytest.raises(ProfileTableError, match=r"campaign 2 \(.*b\.csv\) has no column 'rows', a feature of campaign 1 "
                                                r"\(.*a\.csv\): merge campaigns of one feature set"):
        merge_tables([a, b], tmp_path / "merged.csv")


def test_merge_compares_each_feature_among_the_campaigns_that_have_it(tmp_path):
    """Only the first campaign's features were compared: with a first campaign without row_cv, two
    others that disagreed on it merged, keeping the earlier one's value (found by a review)."""
    frame = planted_frame(groups=4, per_group=2)
    a = _campaign(tmp_path, "a", frame.drop(columns=["row_cv", "row_max"]))
    b = _campaign(tmp_path, "b", _remeasured(frame))
    c = _campaign(tmp_path, "c", _remeasured(frame.assign(row_cv=frame["row_cv"] * 10), factor=1.2))
    with pytest.raises(ProfileTableError, match=r"input 'm0_0' has row_cv = [0-9.]+ in campaign 3 but [0-9.]+ in an "
                                                r"earlier one: not the same input"):
        merge_tables([a, b, c], tmp_path / "merged.csv")
    for campaigns in ([a, b], [b, a]):  # a, without the column, says nothing of it, first or not
        merged = read_table(merge_tables(campaigns, tmp_path / "merged.csv"))
        np.testing.assert_array_equal(merged.features(["row_cv", "row_max"]), frame[["row_cv", "row_max"]])


def test_merge_takes_an_empty_source_for_no_claim(tmp_path):
    frame = planted_frame(groups=4, per_group=2)
    a = _campaign(tmp_path, "a", frame)
    b = _campaign(tmp_path, "b", _remeasured(frame.assign(source="")))
    assert (read_table(merge_tables([a, b], tmp_path / "merged.csv")).frame["source"] == frame["source"]).all()


def test_a_table_without_its_final_newline_warns_that_its_last_row_may_be_cut(tmp_path):
    """seer writes every table ending with a newline: a file without it was cut (or edited by hand,
    which is why this only warns) and was read without a word."""
    path = write(tmp_path, planted_frame(groups=4, per_group=2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_table(path)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    with pytest.warns(UserWarning, match=r"t\.csv does not end with a newline, .* its last row may be cut short"):
        assert len(read_table(path)) == 8


@pytest.mark.parametrize("dates, latest", [
    (["2025-06-01T00:00:00+00:00", None], "2025-06-01T00:00:00+00:00"),
    ([None, None], None),
    # 09:00 at +10:00 is 23:00 UTC the day before: earlier than 23:30 UTC, though its text sorts later.
    (["2025-06-01T09:00:00+10:00", "2025-05-31T23:30:00+00:00"], "2025-05-31T23:30:00+00:00"),
])
def test_the_merged_date_is_the_latest_campaign_date(tmp_path, dates, latest):
    """A campaign whose date was null made the merged table's date the text "None" (found by a review)."""
    frame = planted_frame(groups=4, per_group=2)
    a, b = (_campaign(tmp_path, name, _remeasured(frame, factor), date=date)
            for name, factor, date in zip("ab", (1.0, 1.1), dates))
    assert json.loads(meta_path(merge_tables([a, b], tmp_path / "merged.csv")).read_text()).get("date") == latest


def test_merge_warns_of_campaigns_measured_with_other_versions(tmp_path):
    """A resumed campaign warned of them; a merge averaged them without a word (found by an audit)."""
    frame = planted_frame(groups=4, per_group=2)
    a = _campaign(tmp_path, "a", frame)
    b = _campaign(tmp_path, "b", frame.assign(**{"time_ms:a": frame["time_ms:a"] * 1.1}),
                  versions={**planted_meta()["versions"], "triton": "3.1.0"})
    with pytest.warns(SeerWarning, match=r"other triton versions \(.*a\.csv: 3\.6\.0, .*b\.csv: 3\.1\.0\)"):
        merge_tables([a, b], tmp_path / "merged.csv")


def test_merge_lists_each_campaigns_runs_and_inputs_with_it(tmp_path):
    """The merged metadata took the first campaign's runs (and later its inputs: real matrices
    only, say) as its own and lost the second's (found by reviews)."""
    frame = planted_frame(groups=4, per_group=2)
    a = _campaign(tmp_path, "a", frame, runs=[{"command": "run a"}], inputs={"synthetic": "none", "seed": 0})
    b = _campaign(tmp_path, "b", frame.assign(**{"time_ms:a": frame["time_ms:a"] * 1.1}), runs=[{"command": "run b"}],
                  inputs={"synthetic": "large", "seed": 0})
    meta = json.loads(meta_path(merge_tables([a, b], tmp_path / "merged.csv")).read_text())
    assert "runs" not in meta and [c["runs"] for c in meta["campaigns"]] == [[{"command": "run a"}], [{"command": "run b"}]]
    assert "inputs" not in meta and [c["inputs"]["synthetic"] for c in meta["campaigns"]] == ["none", "large"]


def test_merge_refuses_a_merged_table_as_a_campaign(tmp_path):
    """Its rows are already means of several campaigns: averaged again as one, they would be weighted
    wrong and its campaign count overwritten."""
    frame = planted_frame(groups=4, per_group=2)
    a, b, c = (write_table(frame.assign(**{"time_ms:a": frame["time_ms:a"] * (1 + k / 10)}), tmp_path / f"{name}.csv",
                           planted_meta()) for k, name in enumerate("abc"))
    ab = merge_tables([a, b], tmp_path / "ab.csv")
    with pytest.raises(ProfileTableError, match=r"ab\.csv is already a merged table .* merge the campaign tables it was made of"):
        merge_tables([ab, c], tmp_path / "abc.csv")


def test_merge_never_overwrites_a_campaign_and_needs_two(tmp_path):
    a = write_planted(tmp_path / "a.csv", groups=4, per_group=2)
    b = write_planted(tmp_path / "b.csv", groups=4, per_group=2)
    with pytest.raises(ProfileTableError, match="is one of the campaigns"):
        merge_tables([a, b], a)
    with pytest.raises(ProfileTableError, match="at least two campaigns"):
        merge_tables([a], tmp_path / "merged.csv")


def test_merge_replaces_an_earlier_merge_but_no_other_file(tmp_path):
    """device_run.sh merges its campaigns into the device's table again as they grow; any other file
    at --out (another campaign, a table of one's own) was overwritten without a word, and an --out of
    another suffix wrote its metadata over a campaign's (a.tsv beside a.csv: a.meta.json)."""
    frame = planted_frame(groups=4, per_group=2)
    a, b = (write_table(frame.assign(**{"time_ms:a": frame["time_ms:a"] * (1 + k / 10)}), tmp_path / f"{name}.csv",
                        planted_meta()) for k, name in enumerate("ab"))
    merged = merge_tables([a, b], tmp_path / "merged.csv")
    assert merge_tables([a, b], merged) == merged  # an earlier merge: replaced
    other = write_planted(tmp_path / "other.csv", groups=4, per_group=2, seed=2)
    before = other.read_bytes(), meta_path(other).read_bytes()
    with pytest.raises(ProfileTableError, match="exists and is no merged table"):
        merge_tables([a, b], other)
    assert (other.read_bytes(), meta_path(other).read_bytes()) == before
    meta_before = meta_path(a).read_bytes()
    with pytest.raises(ProfileTableError, match="would be .*a.meta.json, a campaign's"):
        merge_tables([a, b], tmp_path / "a.tsv")
    assert meta_path(a).read_bytes() == meta_before and not (tmp_path / "a.tsv").exists()


def test_merge_command_line(tmp_path, capsys):
    from seer.cli import main

    a = write_planted(tmp_path / "a.csv", groups=4, per_group=2)
    b = write_planted(tmp_path / "b.csv", groups=4, per_group=2)
    b = _campaign(tmp_path, "b", _remeasured(planted_frame(groups=4, per_group=2)))
    assert main(["merge", str(a), str(b), "--out", str(tmp_path / "m.csv")]) == 0
    assert "8 rows from 2 campaigns" in capsys.readouterr().out
    assert main(["merge", str(a), "--out", str(tmp_path / "m2.csv")]) == 2  # the error, said, not raised


def _remeasured(frame: pd.DataFrame, factor: float = 1.1) -> pd.DataFrame:
    """``frame`` as another campaign measures it: the same inputs, other times."""
    times = [c for c in frame.columns if c.startswith("time_ms:")]
    return frame.assign(**{c: frame[c] * factor for c in times})


def test_merging_a_table_with_itself_is_refused(tmp_path):
    """Its mean is the table, but every row would count as measured in two campaigns."""
    a = write_planted(tmp_path / "a.csv", groups=4, per_group=2)
    copy = tmp_path / "copy.csv"
    copy.write_bytes(a.read_bytes())
    meta_path(copy).write_bytes(meta_path(a).read_bytes())
    for campaigns in ([a, a], [a, copy]):
        with pytest.raises(ProfileTableError, match=r"a\.csv and .*\.csv are the same table \(sha256"):
            merge_tables(campaigns, tmp_path / "merged.csv")
    assert not (tmp_path / "merged.csv").exists()


@pytest.mark.parametrize("column", ["gather_ms", "prepare_ms:b", "row_cv"])
def test_merge_names_the_campaign_missing_a_column_its_rows_need(tmp_path, column):
    """A column every row must fill, absent from the campaign that alone measured some rows: the
    merged table could not read back, and its error named neither campaign."""
    frame = planted_frame(groups=4, per_group=2).assign(**{"prepare_ms:b": 0.5})
    a = _campaign(tmp_path, "a", frame)
    b = _campaign(tmp_path, "b", _remeasured(pd.concat([frame, frame.iloc[:1].assign(id="new")])).drop(columns=[column]))
    with pytest.raises(ProfileTableError, match=rf"b\.csv has no column '{column}', which .*a\.csv has, and its rows \['new'\]"):
        merge_tables([a, b], tmp_path / "merged.csv")
    shared = _campaign(tmp_path, "c", _remeasured(frame).drop(columns=[column]))  # every row also in a: fine
    assert len(read_table(merge_tables([a, shared], tmp_path / "merged.csv"))) == 8


def test_merge_names_the_campaign_that_never_timed_a_variant_its_rows_need(tmp_path):
    """Its rows were dropped as failed in the merged table, which read back with fewer rows."""
    frame = planted_frame(groups=4, per_group=2)
    a = _campaign(tmp_path, "a", frame)
    b = _campaign(tmp_path, "b", _remeasured(pd.concat([frame, frame.iloc[:1].assign(id="new")])).drop(columns=["time_ms:b"]))
    with pytest.raises(ProfileTableError, match=r"b\.csv has no column 'time_ms:b', which .*a\.csv has, and its rows \['new'\]"):
        merge_tables([a, b], tmp_path / "merged.csv")


def test_retiring_a_variant_removes_its_columns_alone(tmp_path):
    path = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    before = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert retire_variants(path, ["a"], "the command") == ["time_ms:a", "call_us:a"]
    after = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert after.equals(before.drop(columns=["time_ms:a", "call_us:a"]))  # every other cell as written
    table = read_table(path)
    assert table.variants == ("b", "c")
    assert table.meta["retired_variants"] == [{"variants": ["a"], "by": "the command"}]


@pytest.mark.parametrize("variants, message", [(["z"], r"has no variant\(s\) \['z'\]"),
                                               (["a", "b"], "at least two")])
def test_retiring_refuses_unknown_variants_and_the_last_two(tmp_path, variants, message):
    path = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    written = path.read_bytes(), meta_path(path).read_bytes()
    with pytest.raises(ProfileTableError, match=message):
        retire_variants(path, variants, "cmd")
    assert (path.read_bytes(), meta_path(path).read_bytes()) == written


@pytest.mark.parametrize("name", ["NA", "None", "nan", "null"])
def test_retire_reads_ids_spelled_like_missing_cells_as_names(tmp_path, name):
    """read_table took such an id for a name, but retire's check read it as missing and refused the
    table for an "empty id" (found by a review)."""
    frame = planted_frame(groups=3, per_group=2)
    frame.loc[0, "id"] = name
    path = write(tmp_path, frame)
    assert retire_variants(path, ["c"], "cmd") == ["time_ms:c"]
    assert read_table(path).ids[0] == name


def test_retire_command_line(tmp_path, capsys):
    from seer.table import main

    path = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    main(["retire", str(path), "--variant", "c"])
    assert "removed time_ms:c" in capsys.readouterr().out
    assert read_table(path).meta["retired_variants"][0]["by"] == f"python -m seer.table retire {path} --variant c"


def test_retire_command_line_takes_the_op_of_a_table_whose_metadata_names_none(tmp_path, capsys):
    """Its error for such a table said to pass --op, which it did not take (found by a review)."""
    from seer.table import main

    meta = planted_meta()
    meta.pop("op")
    path = write(tmp_path, planted_frame(groups=4, per_group=2), meta)
    with pytest.raises(SystemExit):
        main(["retire", str(path), "--variant", "c"])
    assert "name it (op=, or --op on the command line)" in capsys.readouterr().err
    main(["retire", str(path), "--variant", "c", "--op", "toy"])
    assert "removed time_ms:c" in capsys.readouterr().out
    assert read_table(path, "toy").variants == ("a", "b")


def test_a_variant_named_twice_is_retired_once(tmp_path):
    path = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    assert retire_variants(path, ["a", "a"], "cmd") == ["time_ms:a", "call_us:a"]
    assert read_table(path).meta["retired_variants"] == [{"variants": ["a"], "by": "cmd"}]



def _with_lines(path, numbers, edit):
    """``path`` with its lines ``numbers`` (1: the header) passed through ``edit``."""
    lines = path.read_text().splitlines()
    for number in numbers:
        lines[number - 1] = edit(lines[number - 1])
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("edit, fields", [(lambda line: line + ",0.5", "has 16 fields"),
                                          (lambda line: line.rsplit(",", 1)[0], "has 14 fields")])
def test_a_row_of_more_or_fewer_fields_than_the_header_is_refused(tmp_path, edit, fields):
    """With one field more on every row pandas took the ids for an index and read every column under
    the next one's name (a retire rewrote the table without its ids); fewer were padded with NaN."""
    every = _with_lines(write_planted(tmp_path / "every.csv", groups=4, per_group=2), range(2, 10), edit)
    written = every.read_bytes()
    message = rf"every\.csv: line 2 {fields}, but the header names 15 columns"
    with pytest.raises(ProfileTableError, match=message):
        read_table(every)
    with pytest.raises(ProfileTableError, match=message):
        retire_variants(every, ["c"], "cmd")
    assert every.read_bytes() == written
    one = _with_lines(write_planted(tmp_path / "one.csv", groups=4, per_group=2), [4], edit)
    with pytest.raises(ProfileTableError, match=rf"one\.csv: line 4 {fields}"):
        read_table(one)


def test_a_frame_with_a_column_twice_is_refused_by_name():
    """A file's header is checked for repeated names; a frame built in memory had raised pandas'
    TypeError instead (a review)."""
    frame = planted_frame(groups=4, per_group=2)
    for column in ("time_ms:a", "nnz"):
        with pytest.raises(ProfileTableError, match=rf"column\(s\) \['{column}'\] appear more than once"):
            ProfileTable.from_frame(pd.concat([frame, frame[[column]]], axis=1), "toy", planted_meta())


def test_ids_that_read_alike_are_one_id():
    """0 and "0" both become "0" in the table: two rows of one id had been accepted (a review)."""
    frame = planted_frame(groups=4, per_group=2)
    frame["id"] = pd.Series([0, "0", *(f"m{i}" for i in range(2, len(frame)))], dtype=object)
    with pytest.raises(ProfileTableError, match=r"duplicate id\(s\) \['0'\]"):
        ProfileTable.from_frame(frame, "toy", planted_meta())


def test_retire_checks_every_table_reads_without_the_variant_before_rewriting_any(tmp_path, capsys):
    """A's columns were removed, then B (two variants left) was refused: the command stopped half done,
    and its error named no table (a review)."""
    from seer.table import main

    first, second = (write_planted(tmp_path / f"{name}.csv", groups=4, per_group=2) for name in ("a", "b"))
    retire_variants(second, ["b"], "cmd")  # variants a and c left
    written = first.read_bytes(), meta_path(first).read_bytes()
    with pytest.raises(SystemExit):
        main(["retire", str(first), str(second), "--variant", "a"])
    err = capsys.readouterr().err
    assert f"{second} without ['a']: " in err and "at least two" in err
    assert (first.read_bytes(), meta_path(first).read_bytes()) == written


def test_a_column_of_booleans_is_no_number(tmp_path):
    """pandas reads a column of True/False as booleans, which converted to 1 and 0 without a word, even for
    a size feature (one True among numbers was refused; a review)."""
    frame = planted_frame(groups=3, per_group=2)
    for column in ("nnz", "time_ms:b"):
        changed = frame.assign(**{column: [True, False] * (len(frame) // 2)})
        path = write(tmp_path, changed)
        with pytest.raises(ProfileTableError, match=rf"column '{column}' holds True/False, not numbers"):
            read_table(path)
