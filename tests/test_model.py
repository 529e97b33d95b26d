"""SelectorModel: two-stage choice, call-count trees and the checked JSON file format."""
import json
import re

import numpy as np
import pytest
from synthetic_profiles import GATHERED, KNOWN, toy_op  # noqa: F401 (toy_op is a fixture)

from seer.errors import InputError, ModelError
from seer.model import GATHER, SCHEMA, SelectorModel, checksum, nearest_calls
from seer.tree import Tree

pytestmark = pytest.mark.usefixtures("toy_op")

KNOWN_NAMES = tuple(f.name for f in KNOWN)
ALL_NAMES = KNOWN_NAMES + tuple(f.name for f in GATHERED)
VARIANTS = ("a", "b", "c")


def split_tree(features, labels, feature, threshold, left_label, right_label):
    """Root split ``features[feature] <= threshold`` with two leaves."""
    return Tree(
        features, labels, feature=(feature, -1, -1), threshold=(threshold, None, None), left=(1, -1, -1),
        right=(2, -1, -1), label=(-1, labels.index(left_label), labels.index(right_label)),
        n_samples=(10, 6, 4), mean_regret=(0.2, 0.0, 0.05),
    )


def make_model(op="toy", variants=VARIANTS, known=KNOWN_NAMES, stage2=True, stage1=None):
    """``stage2``: True for one tree serving every call count, False for none, or a ``{calls: tree}``."""
    labels = (*VARIANTS, GATHER)
    if stage1 is None:
        stage1 = {
            1: split_tree(KNOWN_NAMES, labels, 2, 4999.5, "a", GATHER),  # gather for big nnz
            100: split_tree(KNOWN_NAMES, labels, 2, 99.5, "a", GATHER),
        }
    if stage2 is True:
        stage2 = {1: split_tree(ALL_NAMES, VARIANTS, 4, 2.0, "b", "c")}
    return SelectorModel(
        op=op, variants=variants, known_features=known, gathered_features=ALL_NAMES[4:] if stage2 else (),
        stage1=stage1, stage2=stage2 or None, device={"name": "Synthetic GPU", "capability": [9, 0]},
        versions={"seer": "0.1.0"}, training={"table": "t.csv", "sha256": "0" * 64, "command": "test"},
    )


def two_stage2_trees():
    """Stage 2 splits on row_cv at 2 below 100 calls and runs "a" from 100 calls on."""
    return {1: split_tree(ALL_NAMES, VARIANTS, 4, 2.0, "b", "c"), 100: split_tree(ALL_NAMES, VARIANTS, 4, 2.0, "a", "a")}


def known(nnz):
    return {"rows": 100, "cols": 100, "nnz": nnz, "mean_row": nnz / 100}


def never_gather():
    raise AssertionError("stage 1 did not ask for gathering; gather() must not run")


def test_choose_skips_gathering_when_stage1_names_a_variant():
    choice = make_model().choose(known(1000), never_gather)
    assert (choice.variant, choice.gathered, choice.stage) == ("a", False, 1)
    assert choice.path == ["nnz = 1,000 <= 4,999", "stage 1 (tree for fewer than 100 calls) -> a"]


def test_choose_words_its_path_only_when_read(monkeypatch):
    """A first dispatch call should not format rules nobody reads; reading them still works."""
    from seer.tree import Step

    worded = []
    describe = Step.describe
    monkeypatch.setattr(Step, "describe", lambda step, feature: worded.append(step) or describe(step, feature))
    choice = make_model().choose(known(20_000), lambda: {"row_cv": 3.0, "row_max": 40})
    assert choice.variant == "c" and worded == []
    assert choice.path[-1] == "stage 2 (tree for any number of calls) -> c" and len(worded) == 2
    assert list(choice.path) == choice.path and len(worded) == 2  # worded once, then kept


def test_choose_gathers_once_and_asks_stage2():
    calls = []

    def gather():
        calls.append(1)
        return {"row_cv": 3.0, "row_max": 40}

    choice = make_model().choose(known(20_000), gather)
    assert (choice.variant, choice.gathered, choice.stage) == ("c", True, 2)
    assert calls == [1]
    assert choice.path == [
        "nnz = 20,000 > 4,999",
        "stage 1 (tree for fewer than 100 calls) -> gather",
        "row-length CV = 3 > 2",
        "stage 2 (tree for any number of calls) -> c",
    ]
    assert make_model().choose(known(20_000), lambda: {"row_cv": 1.5, "row_max": 4}).variant == "b"


def test_free_features_go_straight_to_stage2():
    # Stage 1 would run "a" on this small input without gathering; free features outrank it.
    choice = make_model().choose(known(1000), never_gather, free={"row_cv": 3.0, "row_max": 40})
    assert (choice.variant, choice.gathered, choice.stage) == ("c", True, 2)
    assert choice.path == ["gathered features came with the validation pass", "row-length CV = 3 > 2",
                           "stage 2 (tree for any number of calls) -> c"]
    without_stage2 = make_model(stage2=False, stage1={1: split_tree(KNOWN_NAMES, VARIANTS, 2, 4999.5, "a", "b")})
    assert without_stage2.choose(known(1000), never_gather, free={"row_cv": 3.0}).variant == "a"


def test_more_calls_use_their_own_tree():
    model = make_model()
    assert model.stage1_tree(1) is model.stage1[1]
    assert model.stage1_tree(99) is model.stage1[1]
    assert model.stage1_tree(100) is model.stage1[100]
    assert model.stage1_tree(10**9) is model.stage1[100]
    assert model.choose(known(1000), never_gather, calls=50).variant == "a"
    assert model.choose(known(1000), lambda: {"row_cv": 0.5, "row_max": 2}, calls=500).variant == "b"
    assert nearest_calls([10, 1000], 3) == 10  # below every count: the smallest
    with pytest.raises(InputError, match="calls must be a number of calls >= 1, got 0"):
        model.stage1_tree(0)


def test_stage2_has_a_tree_per_call_count_too():
    model = make_model(stage2=two_stage2_trees())
    assert model.stage2_tree(1) is model.stage2[1] and model.stage2_tree(99) is model.stage2[1]
    assert model.stage2_tree(100) is model.stage2[100] and model.stage2_tree(10**6) is model.stage2[100]
    skewed = {"row_cv": 3.0, "row_max": 40}
    few = model.choose(known(20_000), lambda: skewed, calls=1)
    assert few.variant == "c" and few.path[-1] == "stage 2 (tree for fewer than 100 calls) -> c"
    many = model.choose(known(20_000), lambda: skewed, calls=500)
    assert many.variant == "a" and many.path[-1] == "stage 2 (tree for 100 or more calls) -> a"
    # The validation pass's features go to the stage-2 tree of the call count as well.
    assert model.choose(known(1000), never_gather, calls=1, free=skewed).variant == "c"
    validated = model.choose(known(1000), never_gather, calls=100, free=skewed)
    assert validated.variant == "a" and validated.path[-1] == "stage 2 (tree for 100 or more calls) -> a"
    loaded = SelectorModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert loaded == model and set(loaded.stage2) == {1, 100}
    with pytest.raises(ModelError, match="has no stage 2"):
        make_model(stage2=False, stage1={1: split_tree(KNOWN_NAMES, VARIANTS, 2, 4999.5, "a", "b")}).stage2_tree(1)
    with pytest.raises(ModelError, match="stage2 must map call counts to trees"):
        make_model(stage2=split_tree(ALL_NAMES, VARIANTS, 4, 2.0, "b", "c"))


def test_version1_files_load_with_one_stage2_tree_for_every_count(tmp_path):
    """A file written before stage 2 had a tree per call count: its single tree serves them all."""
    model = make_model()
    content = {**model.to_dict(), "schema": "seer.model/1", "stage2": model.stage2[1].to_dict()}
    path = tmp_path / "old.json"
    path.write_text(json.dumps({**content, "checksum": {"sha256": checksum(content)}}))
    loaded = SelectorModel.load(path, op="toy")
    assert loaded.stage2 == {1: model.stage2[1]}
    assert all(loaded.stage2_tree(calls) is loaded.stage2[1] for calls in (1, 10, 1000, 10**9))
    choice = loaded.choose(known(20_000), lambda: {"row_cv": 3.0, "row_max": 40}, calls=1000)
    assert choice.variant == "c" and choice.path[-1] == "stage 2 (tree for any number of calls) -> c"
    resaved = SelectorModel.load(loaded.save(tmp_path / "new.json"))
    assert json.loads((tmp_path / "new.json").read_text())["schema"] == SCHEMA == "seer.model/2"
    assert resaved == loaded
    # The rules of the /1 file must not claim its checksum is the one the file records.
    from seer.rules import header_lines

    line = next(line for line in header_lines(loaded) if line.startswith("model: sha256"))
    assert checksum(content) not in line and "the seer.model/1 file it was read from records" in line
    assert "(the checksum its .json records)" in next(
        line for line in header_lines(resaved) if line.startswith("model: sha256"))
    content["schema"] = "seer.model/0"
    path.write_text(json.dumps({**content, "checksum": {"sha256": checksum(content)}}))
    with pytest.raises(ModelError, match="unknown schema 'seer.model/0'"):
        SelectorModel.load(path)


def test_choose_refuses_missing_or_nan_features():
    model = make_model()
    with pytest.raises(InputError, match="needs feature 'mean_row'"):
        model.choose({"rows": 1, "cols": 1, "nnz": 5}, never_gather)
    with pytest.raises(InputError, match=r"features \['nnz', 'mean_row'\] are NaN"):
        model.choose(known(float("nan")), never_gather)
    with pytest.raises(InputError, match="needs feature 'row_cv'"):
        model.choose(known(20_000), lambda: {"row_max": 4})



@pytest.mark.parametrize("value", ["20000", True, None, np.array([1.0, 2.0]), 1j])
def test_choose_refuses_a_feature_that_is_no_number_by_name(value):
    """A string or a bool had been read as the number float() makes of it, None or an array had
    raised a TypeError naming no feature (a review)."""
    with pytest.raises(InputError, match=r"feature 'nnz' must be a number, got"):
        make_model().choose({**known(1), "nnz": value}, never_gather)


def test_choose_takes_numbers_of_any_kind_and_size():
    model = make_model()
    assert model.choose({**known(1), "nnz": np.int64(6000)}, lambda: {"row_cv": 3.0, "row_max": 4}).gathered
    assert model.choose({**known(1), "nnz": 10**400}, lambda: {"row_cv": 3.0, "row_max": 4}).gathered  # past float


@pytest.mark.parametrize("calls", [float("nan"), "10", None, True])
def test_a_call_count_that_is_no_number_is_refused(calls):
    with pytest.raises(InputError, match="calls must be a number of calls >= 1"):  # NaN took the smallest count's trees
        nearest_calls({1, 100}, calls)


def test_a_model_holding_numpy_numbers_saves_and_loads(tmp_path):
    """Hyper-parameters and call counts given as numpy numbers are taken by training; its model then
    failed to save (TypeError: not JSON serializable), and integer keys (scores by call count)
    saved a checksum that load refused as damage (a review)."""
    model = make_model()
    model.training.update(calls=np.array([1, 100]), random_state=np.int64(0),
                          scores={"all": {2: {"accuracy": np.float32(0.5)}, 10: {"accuracy": 1.0}}})
    loaded = SelectorModel.load(model.save(tmp_path / "m.json"))
    assert loaded.training["calls"] == [1, 100] and loaded.training["scores"]["all"]["10"] == {"accuracy": 1.0}
    assert loaded.to_dict() == model.to_dict()
    model.training["when"] = object()
    with pytest.raises(ModelError, match="holds a object"):
        model.save(tmp_path / "m.json")


def test_paths_use_plain_names_without_feature_metadata():
    choice = make_model(op="mystery").choose(known(20_000), lambda: {"row_cv": 3.0, "row_max": 4})
    assert "row_cv = 3 > 2" in choice.path


def test_save_load_round_trip(tmp_path):
    model = make_model()
    path = model.save(tmp_path / "m.json")
    document = json.loads(path.read_text())
    assert list(document)[0] == "schema" and document["schema"] == SCHEMA
    assert document["checksum"]["sha256"] == checksum({k: v for k, v in document.items() if k != "checksum"})
    loaded = SelectorModel.load(path, op="toy")
    assert loaded == model
    assert loaded.device == {"name": "Synthetic GPU", "capability": [9, 0]}
    assert SelectorModel.from_dict(model.to_dict()) == model


def test_model_without_stage2_round_trips(tmp_path):
    labels = VARIANTS
    model = make_model(stage2=False, stage1={1: split_tree(KNOWN_NAMES, labels, 2, 4999.5, "a", "b")})
    loaded = SelectorModel.load(model.save(tmp_path / "m.json"))
    assert loaded.stage2 is None and loaded == model
    assert loaded.choose(known(10**6), never_gather).variant == "b"


def rewrite(path, change, fix_checksum=True):
    document = json.loads(path.read_text())
    change(document)
    if fix_checksum:
        document["checksum"] = {"sha256": checksum({k: v for k, v in document.items() if k != "checksum"})}
    path.write_text(json.dumps(document))


@pytest.mark.parametrize(
    "change, fix_checksum, message",
    [
        (lambda d: d["stage2"]["1"]["threshold"].__setitem__(0, 2.5), False, "checksum mismatch: the file was corrupted or edited by hand"),
        (lambda d: d.pop("checksum"), False, "no checksum"),
        (lambda d: d.update(checksum="abc"), False, r"the checksum field must be \{'sha256': '<hex digest>'\}, got 'abc'"),
        (lambda d: d.update(schema="seer.model/99"), True,
         r"unknown schema 'seer.model/99'; this seer reads \['seer.model/1', 'seer.model/2'\]"),
        (lambda d: d.pop("schema"), True, "unknown schema None"),
        (lambda d: d.pop("training"), True, r"missing field\(s\) \['training'\]"),
        (lambda d: d.update(variants="abc"), True, "'variants' must be a list of strings"),
        (lambda d: d.update(op=["toy"]), True, r"model field 'op' must be an op's name \(a string\), got \['toy'\]"),
        (lambda d: d.update(stage1={}), True, "stage1 must be a non-empty object"),
        (lambda d: d["stage1"].update({"0": d["stage1"]["1"]}), True, "stage1 keys are call counts >= 1"),
        (lambda d: d["stage2"]["1"]["left"].__setitem__(0, 7), True, r"stage2\[1\]: node 0: children \(7, 2\) out of range"),
        (lambda d: d.update(variants=["a", "b"]), True, r"stage2\[1\] chooses \['c'\], which are not among \['a', 'b'\]"),
        (lambda d: d.update(stage2={}), True, "stage2 must be a non-empty object mapping call counts to trees"),
        (lambda d: d["stage2"].update({"x": d["stage2"]["1"]}), True, "stage2 keys are call counts >= 1 written in decimal digits, got 'x'"),
        (lambda d: d.update(stage2=d["stage2"]["1"]), True, "stage2 keys are call counts >= 1 written in decimal digits, got 'features'"),
        (lambda d: d.update(known_features=["rows", "nnz"]), True, r"stage1\[1\] uses features \['cols', 'mean_row'\]"),
        (lambda d: d.update(stage2=None), True, r"stage1\[1\] chooses \['gather'\]"),
        (lambda d: d.update(variants=["a", "b", "c", "gather"]), True, "'gather' is reserved"),
        (lambda d: d["stage1"].update({"²": d["stage1"]["1"]}), True, "stage1 keys are call counts >= 1 written in decimal digits, got '²'"),
        (lambda d: d["stage1"].update({"01": d["stage1"]["1"]}), True, "got '01'"),
        # what dispatch compares to the GPU and the world size: a wrong type would fail every call
        (lambda d: d["device"].update(name=7), True, "device name must be a string or null, got 7"),
        (lambda d: d["device"].update(capability=9), True, r"device capability must be \[major, minor\] or null, got 9"),
        (lambda d: d["device"].update(capability=[9, "0"]), True, r"device capability .* got \[9, '0'\]"),
        # what dispatch reads off a GPU to compute a GEMM's waves as on the model's GPU
        (lambda d: d["device"].update(sm_count=0), True, "device sm_count must be a whole number >= 1 or null, got 0"),
        (lambda d: d["device"].update(sm_count=132.0), True, "device sm_count .* got 132.0"),
        (lambda d: d["training"].update(world_sizes=4), True, "training world_sizes must be a list of world sizes .* got 4"),
        (lambda d: d["training"].update(world_sizes=[0]), True, r"training world_sizes .* got \[0\]"),
        (lambda d: d["training"].update(element_sizes=[2.5]), True, r"training element_sizes must be a list of element "
                                                                    r"sizes in bytes .* got \[2\.5\]"),
        # what dispatch names in its warning of a model trained on another dtype
        (lambda d: d["training"].update(dtype=32), True, "training dtype must be a dtype's name .* got 32"),
        # fields no schema defines: dropped in silence, and the rules header then printed another checksum
        (lambda d: d.update(comment="mine"), True, r"model has field\(s\) \['comment'\] that seer\.model/2 does not "
                                                   "define: written by another seer, or edited by hand"),
        (lambda d: d["stage1"]["1"].update(weights=[1]), True, r"stage1\[1\]: field\(s\) \['weights'\] that no tree has"),
    ],
)
def test_damaged_or_inconsistent_files_are_refused(tmp_path, change, fix_checksum, message):
    path = make_model().save(tmp_path / "m.json")
    rewrite(path, change, fix_checksum)
    with pytest.raises(ModelError, match=message) as error:
        SelectorModel.load(path)
    assert str(path) in str(error.value)


def test_a_save_replaces_the_file_whole_keeping_its_link_and_permissions(tmp_path, monkeypatch):
    """dispatch reads a model file again once it changes: a save writes beside it and moves it in
    place, so no reader finds it half written. A save that fails leaves the old file and no partial
    one; a link is followed, not replaced by a file; permissions stay; a read-only file is refused."""
    import os
    import stat

    import dataclasses

    model = make_model()
    other = dataclasses.replace(model, training={"table": "another.csv"})
    target = model.save(tmp_path / "target.json")
    target.chmod(0o664)
    (tmp_path / "link.json").symlink_to(target)
    other.save(tmp_path / "link.json")
    assert (tmp_path / "link.json").is_symlink() and SelectorModel.load(target).training == {"table": "another.csv"}
    assert stat.S_IMODE(target.stat().st_mode) == 0o664
    before = target.read_bytes()

    def fail(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(ModelError, match=f"cannot save the model to {re.escape(str(target))}: disk full"):
        model.save(target)
    monkeypatch.undo()
    assert target.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "target.json"]
    target.chmod(0o444)
    if not os.access(target, os.W_OK):  # root may write anyway
        with pytest.raises(PermissionError, match="read-only"):
            model.save(target)


def test_a_save_to_a_folder_or_into_no_folder_names_the_path_given(tmp_path):
    """Both raised the OSError of the partial file written beside it, whose name the caller never gave (a
    review); load refuses a folder by name."""
    model = make_model()
    with pytest.raises(ModelError, match=f"cannot save the model to {re.escape(str(tmp_path))}: it is a folder"):
        model.save(tmp_path)
    missing = tmp_path / "nowhere" / "m.json"
    with pytest.raises(ModelError, match=f"cannot save the model to {re.escape(str(missing))}: there is no folder "):
        model.save(missing)
    assert list(tmp_path.iterdir()) == []


def test_missing_non_json_and_foreign_files(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        SelectorModel.load(tmp_path / "none.json")
    with pytest.raises(ModelError, match=f"{re.escape(str(tmp_path))} is a folder, not a model file"):
        SelectorModel.load(tmp_path)  # had said "does not exist" of a folder that does
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x89PNG not json")
    with pytest.raises(ModelError, match="is not JSON"):
        SelectorModel.load(garbage)
    garbage.write_text("[1, 2]")
    with pytest.raises(ModelError, match="holds a JSON list, not an object"):
        SelectorModel.load(garbage)
    garbage.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ModelError, match="nests deeper than any model does"):
        SelectorModel.load(garbage)
    path = make_model().save(tmp_path / "m.json")
    with pytest.raises(ModelError, match="model is for op 'toy', expected 'spmv'"):
        SelectorModel.load(path, op="spmv")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_numbers_json_cannot_carry_are_refused_as_corrupted(tmp_path, literal):
    """NaN, an infinity or a literal out of float range (1e400 reads as inf) as a stage-1 threshold:
    the checksum cannot be taken, which is a ModelError (dispatch then warns and uses the hand rule),
    not json's ValueError."""
    path = make_model().save(tmp_path / "m.json")
    document = json.loads(path.read_text())
    document["stage1"]["1"]["threshold"][0] = "THRESHOLD"
    path.write_text(json.dumps(document).replace('"THRESHOLD"', literal))
    with pytest.raises(ModelError, match=r"\['stage1'\]\['1'\]\['threshold'\]\[0\] is .*not a finite number") as error:
        SelectorModel.load(path)
    assert str(path) in str(error.value)


def test_numbers_python_cannot_read_or_hold_are_refused_as_corrupted(tmp_path):
    """An integer of 5,000 digits is json's ValueError and, read, no float holds 10**400: both crashed
    every dispatch (only ModelError falls back to the hand rule)."""
    path = make_model().save(tmp_path / "m.json")
    huge = "1" * 5000
    path.write_text(path.read_text().replace('"schema"', f'"x": {huge}, "schema"', 1))
    with pytest.raises(ModelError, match="holds a value no model has"):
        SelectorModel.load(path)
    document = make_model().to_dict()
    document["stage1"]["1"]["threshold"][0] = 10 ** 400
    with pytest.raises(ModelError, match="numbers a float holds"):
        SelectorModel.from_dict(document)


def test_non_finite_tree_numbers_are_refused_even_with_a_checksum():
    """A document whose checksum could not be written still fails on its trees' own checks."""
    for change, message in (
        (lambda d: d["stage1"]["1"]["threshold"].__setitem__(0, float("inf")), "threshold must be a finite number"),
        (lambda d: d["stage1"]["1"]["mean_regret"].__setitem__(1, float("nan")), "mean_regret must be finite"),
    ):
        document = make_model().to_dict()
        change(document)
        with pytest.raises(ModelError, match=message):
            SelectorModel.from_dict(document)


def test_saving_a_non_finite_number_is_a_model_error(tmp_path):
    model = make_model()
    model.training["scores"] = {"all": {"1": {"fraction_of_oracle": float("nan")}}}
    with pytest.raises(ModelError, match=r"\['training'\]\['scores'\]\['all'\]\['1'\]\['fraction_of_oracle'\] is nan"):
        model.save(tmp_path / "m.json")


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(known_features=[*d["known_features"], "zzz"]), r"known features \['zzz'\] are not among"),
    (lambda d: [d.update(gathered_features=["row_cv", "zzz"]), d["stage2"]["1"]["features"].__setitem__(5, "zzz")],
     r"gathered features \['zzz'\] are not among those op 'toy' computes \(\['row_cv', 'row_max'\]\)"),
    (lambda d: d.update(known_features=[*d["known_features"], "row_max"], gathered_features=["row_cv"]),
     r"known features \['row_max'\]"),  # gathered, not known: stage 1 would never have it
])
def test_features_the_op_does_not_compute_are_refused(tmp_path, change, message):
    """Else the model loads and every dispatch fails, blaming the input for a feature it cannot have."""
    path = make_model().save(tmp_path / "m.json")
    rewrite(path, change)
    with pytest.raises(ModelError, match=message):
        SelectorModel.load(path, op="toy")


def test_check_for_an_op_is_what_load_checks():
    model = make_model()
    model.check_for("toy")
    with pytest.raises(ModelError, match="model is for op 'toy', expected 'spmv'"):
        model.check_for("spmv")
    foreign = make_model(known=(*KNOWN_NAMES, "zzz"))
    with pytest.raises(ModelError, match=r"known features \['zzz'\]"):
        foreign.check_for("toy")
    make_model(op="mystery", known=(*KNOWN_NAMES, "zzz")).check_for("mystery")  # no feature module: unchecked


def test_no_new_decision_is_scheduled_where_the_next_trees_differ_in_their_statistics_alone():
    model = make_model()
    recounted = {calls: Tree.from_dict({**tree.to_dict(), "n_samples": [n + calls for n in tree.n_samples]})
                 for calls, tree in model.stage1.items()}
    first = model.stage1_tree(1)
    same_splits = {1: first, 100: Tree.from_dict({**first.to_dict(), "n_samples": [n + 1 for n in first.n_samples]})}
    assert make_model(stage1=same_splits).next_count(1) is None
    assert make_model(stage1=recounted).next_count(1) == 100  # make_model's trees for 100 calls split elsewhere


def test_trees_that_differ_in_their_statistics_alone_decide_alike():
    """next_count compared whole trees: one whose leaves only counted other inputs scheduled a new
    decision that could not change anything."""
    tree = make_model().stage1_tree(1)
    recounted = Tree.from_dict({**tree.to_dict(), "n_samples": [n + 1 for n in tree.n_samples]})
    assert recounted != tree and recounted.decides_as(tree) and not tree.decides_as(None)
    moved = tree.to_dict()
    moved["threshold"] = [t if t is None else t * 2 for t in moved["threshold"]]
    assert not Tree.from_dict(moved).decides_as(tree)
