"""Rules export: readable thresholds, provenance header, and a generated module that agrees with the trees."""
import dataclasses
import re

import numpy as np
import pandas as pd
import pytest
from synthetic_profiles import deep_model, planted_frame, planted_meta, toy_op, write_planted  # noqa: F401 (toy_op is a fixture)

from seer import rules
from seer.errors import InputError
from seer.model import GATHER, SelectorModel
from seer.table import ProfileTable, read_table, table_sha256
from seer.train import TwoStageSelector
from seer.tree import Tree

pytestmark = pytest.mark.usefixtures("toy_op")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, toy_op):
    path = write_planted(tmp_path_factory.mktemp("rules") / "planted.csv")
    table = read_table(path)
    model = TwoStageSelector(calls=(1, 100)).fit(table).to_model(table, command="seer train planted.csv")
    return path, model


def test_text_rules_read_in_natural_units(trained):
    path, model = trained
    text = rules.to_text(model, source="models/toy.json")
    assert "seer selection rules for op 'toy' (model models/toy.json)" in text
    assert "device: Synthetic GPU, compute capability 9.0\n" in text
    counted = dataclasses.replace(model, device={**model.device, "sm_count": 132})  # as the profiling harness records
    assert "device: Synthetic GPU, compute capability 9.0, 132 SMs\n" in rules.to_text(counted)
    assert f"sha256 {table_sha256(path)}" in text and "300 rows in 60 groups" in text
    assert "command: seer train planted.csv" in text and "regenerate: rerun the command above, in the folder it ran in" in text
    assert "Stage 1, fewer than 100 calls (known features only):" in text
    assert "Stage 1, 100 or more calls" in text and "Stage 2, after gathering" in text
    # integer feature with separators; label, not column name; the planted bounds come back whole
    # (the shortest decimals between the values each split parts)
    assert "    nnz <= 5,000 -> a" in text and "    nnz > 5,000" in text
    assert "row-length CV <= 2 -> b" in text and "row-length CV > 2 -> c" in text
    assert "-> gather features, then stage 2" in text
    assert "training inputs, mean regret" in text


def test_markdown_rules(trained):
    _, model = trained
    markdown = rules.to_markdown(model, level=2)
    assert markdown.startswith("## Seer selection rules for op 'toy'")
    assert "### Stage 2, after gathering" in markdown
    assert "- nnz ≤ 5,000" in markdown and "  - row-length CV > 2" in markdown
    assert "→ **c**" in markdown


def test_single_leaf_trees_say_always():
    tree = Tree(("nnz",), ("a", "b"), (-1,), (None,), (-1,), (-1,), (1,), (5,), (0.25,))
    model = SelectorModel("mystery", ("a", "b"), ("nnz",), (), {10: tree}, None)
    text = rules.to_text(model)
    assert "Stage 1, any number of calls" in text
    assert "always -> b  (5 training inputs, mean regret 25.0%)" in text
    assert "command: not recorded" in text
    assert rules.to_python(model).count("def choose_") == 1


def test_a_leaf_no_training_input_reaches_under_a_gate_says_so():
    X = np.array([[1.0], [2.0], [500.0], [600.0]])
    costs = np.array([[1.0, 2.0, 9.0], [1.0, 3.0, 9.0], [2.0, 1.0, 1.1], [3.0, 1.0, 1.2]])
    below = Tree(("nnz",), ("a", "b", GATHER), (0, -1, -1), (100.0, None, None), (1, -1, -1), (2, -1, -1),
                 (-1, 0, 1), (4, 2, 2), (0.0, 0.0, 0.0))
    stage2 = Tree(("nnz", "row_cv"), ("a", "b"), (-1,), (None,), (-1,), (-1,), (0,), (4,), (0.0,))
    model = SelectorModel("mystery", ("a", "b"), ("nnz",), ("row_cv",),
                          {1: below.gated("nnz", 300.0, GATHER, X, costs)}, {1: stage2})
    text = rules.to_text(model)
    assert "-> b  (no training input below the gate reaches it; its choice is the ungated tree's)" in text
    assert "-> a  (2 training inputs, mean regret 0.0%)" in text
    assert "0 training inputs" not in text and "mean regret 0.0%)" in text


def test_equal_neighbouring_stage1_trees_are_written_once():
    a = Tree(("nnz",), ("a", "b"), (-1,), (None,), (-1,), (-1,), (0,), (5,), (0.1,))
    b = Tree(("nnz",), ("a", "b"), (-1,), (None,), (-1,), (-1,), (1,), (5,), (0.1,))
    model = SelectorModel("mystery", ("a", "b"), ("nnz",), (), {1: a, 10: a, 100: b, 1000: a}, None)
    text = rules.to_text(model)
    assert "Stage 1, fewer than 100 calls" in text and "Stage 1, 100 to 999 calls" in text
    assert "Stage 1, 1,000 or more calls" in text and text.count("Stage 1,") == 3
    namespace = {}
    exec(compile(rules.to_python(model), "generated_rules.py", "exec"), namespace)
    assert set(namespace["STAGE1"]) == {1, 10, 100, 1000}
    assert [namespace["STAGE1"][c]({"nnz": 5}) for c in (1, 10, 100, 1000)] == ["a", "a", "b", "a"]
    assert namespace["STAGE1"][1] is namespace["STAGE1"][10] is namespace["choose_stage1_calls_1"]


def random_inputs(model, n, rng):
    """Feature dicts around every threshold, including values exactly on them."""
    trees = [*model.stage1.values(), *(model.stage2 or {}).values()]
    names = trees[-1].features
    cut = {name: [] for name in names}
    for tree in trees:
        for f, t in zip(tree.feature, tree.threshold):
            if f >= 0:
                cut[tree.features[f]].append(t)
    inputs = []
    for _ in range(n):
        point = {}
        for name in names:
            if cut[name] and rng.random() < 0.7:
                point[name] = float(rng.choice(cut[name])) * rng.choice([1.0, 1.0, 0.999, 1.001])
            else:
                point[name] = float(rng.uniform(0, 40_000 if name in ("nnz", "rows", "cols", "row_max") else 5))
        inputs.append(point)
    return inputs


def test_generated_module_agrees_with_the_trees(trained):
    _, model = trained
    source = rules.to_python(model)
    assert source.startswith("# seer selection rules for op 'toy'")
    namespace = {}
    exec(compile(source, "generated_rules.py", "exec"), namespace)
    assert namespace["GATHER"] == GATHER and namespace["VARIANTS"] == model.variants
    assert set(namespace["STAGE1"]) == set(model.stage1) and set(namespace["STAGE2"]) == set(model.stage2)
    # Without preparation costs one stage-2 tree serves every count: written once.
    assert len({id(f) for f in namespace["STAGE2"].values()}) == 1 and "choose_stage2_calls_1" in namespace
    assert_module_agrees(namespace, model, np.random.default_rng(0))


def assert_module_agrees(namespace, model, rng):
    on_threshold = 0
    for f in random_inputs(model, 500, rng):
        for stage, trees in ((1, model.stage1), (2, model.stage2)):
            for calls, tree in trees.items():
                assert namespace[f"STAGE{stage}"][calls](f) == tree.predict([f[n] for n in tree.features])
        on_threshold += any(f["nnz"] in tree.threshold for tree in model.stage2.values())
    assert on_threshold > 10  # the "<=" edge really was exercised


def test_different_stage2_trees_per_call_count(trained):
    """Two stage-2 trees (one for fewer than 100 calls, one from 100 on): a section and a function each."""
    _, trained_model = trained
    few = trained_model.stage2[1]
    many = Tree(few.features, few.labels, (-1,), (None,), (-1,), (-1,), (0,), (300,), (0.4,))
    model = SelectorModel(trained_model.op, trained_model.variants, trained_model.known_features,
                          trained_model.gathered_features, trained_model.stage1, {1: few, 10: few, 100: many, 1000: many})
    text = rules.to_text(model)
    assert "Stage 2, after gathering or on features a validation pass measured, fewer than 100 calls" in text
    assert "Stage 2, after gathering or on features a validation pass measured, 100 or more calls" in text
    assert text.count("Stage 2,") == 2
    assert "### Stage 2, after gathering or on features a validation pass measured, 100 or more calls" in rules.to_markdown(model, level=2)
    namespace = {}
    exec(compile(rules.to_python(model), "generated_rules.py", "exec"), namespace)
    assert namespace["STAGE2"][1] is namespace["STAGE2"][10] is namespace["choose_stage2_calls_1"]
    assert namespace["STAGE2"][100] is namespace["STAGE2"][1000] is namespace["choose_stage2_calls_100"]
    assert_module_agrees(namespace, model, np.random.default_rng(1))
    skewed = {name: 0.0 for name in few.features} | {"row_cv": 3.0, "nnz": 20_000.0}
    assert namespace["STAGE2"][1](skewed) == few.predict([skewed[n] for n in few.features]) != "a"
    assert namespace["STAGE2"][1000](skewed) == "a"


def test_generated_module_is_plain_python(trained):
    source = rules.to_python(trained[1])
    imports = [line for line in source.splitlines() if "import" in line and not line.startswith("#")]
    assert imports == ["import numbers"]  # stands alone: the standard library only
    assert "if _number(f, 'nnz') <= " in source and "# nnz <= 5,000" in source


def test_rules_of_a_model_without_stage2():
    frame = planted_frame(groups=10, per_group=3).drop(columns=["row_cv", "row_max", "gather_ms"])
    table = ProfileTable.from_frame(frame, "toy", planted_meta())
    model = TwoStageSelector(folds=3).fit(table).to_model(table)
    text = rules.to_text(model)
    assert "Stage 2" not in text and "gather" not in text.split("regenerate")[1]
    namespace = {}
    exec(rules.to_python(model), namespace)
    assert "STAGE2" not in namespace and not any(name.startswith("choose_stage2") for name in namespace)
    assert "training table: in memory" in text


@pytest.mark.parametrize("scores", [{"scores": {"all": {"1": 3}}}, {"scores": ["a list"]},
                                    {"scores": {"all": {"one": {"fraction_of_oracle_with_gather": 0.9}}}}])
def test_malformed_scores_in_a_model_still_print_its_rules(trained, scores):
    """A checksummed but hand-edited model's training.scores crashed the export (AttributeError,
    TypeError, ValueError) after seer report's minutes of scoring."""
    from dataclasses import replace

    _, model = trained
    edited = replace(model, training={**model.training, "scores": scores})
    text = rules.to_text(edited)
    assert "held-out scores: unreadable in this model file" in text and "Stage 1" in text


def test_generated_module_compares_float32_inputs_as_the_trees_do(trained):
    """np.float32(0.96276593) rounds onto the float64 bound 0.9627659022808075 when the comparison
    is made in float32: the generated module went left where the trees (in float64) go right."""
    import dataclasses

    _, model = trained
    bound, value = 0.9627659022808075, np.float32(0.96276593)
    assert float(value) > bound and not value > np.float32(bound)
    split = Tree(("row_cv",), ("b", "c"), (0, -1, -1), (bound, None, None), (1, -1, -1), (2, -1, -1), (-1, 0, 1),
                 (10, 5, 5), (0.0, 0.0, 0.0))
    model = dataclasses.replace(model, stage2={1: split}, training={**model.training, "command": "seer train\nimport os"})
    source = rules.to_python(model)
    assert "\n# import os\n" in source  # a newline in the provenance stays inside the comment
    namespace = {}
    exec(compile(source, "generated_rules.py", "exec"), namespace)
    assert namespace["STAGE2"][1]({"row_cv": value}) == split.predict([float(value)]) == "c"


def test_names_from_a_table_stay_inert_in_the_generated_module(tmp_path):
    """An op's features may come from its table's metadata: a line break in a feature's name ended the
    comment after a condition and left the rest as code, run by the chosen function; quotes in the
    op's name ended the module's docstring."""
    feature = 'size\n        open("pwned", "w").write("x")  #'
    rng = np.random.default_rng(0)
    size = rng.uniform(1, 100, 60)
    frame = pd.DataFrame({"id": [f"r{i}" for i in range(60)], "group": [f"g{i % 6}" for i in range(60)],
                          feature: size, "time_ms:a": 0.01 * size, "time_ms:b": np.full(60, 0.5)})
    meta = {"op": 'odd"""op', "device": {"name": "X", "capability": [9, 0]},
            "features": {"known": [feature], "gathered": []}}
    table = ProfileTable.from_frame(frame, 'odd"""op', meta)
    model = TwoStageSelector(folds=3).fit(table).to_model(table)
    source = rules.to_python(model)
    namespace = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        exec(compile(source, "generated_rules.py", "exec"), namespace)
        assert {namespace["STAGE1"][1]({feature: value}) for value in (1.0, 99.0)} == {"a", "b"}
    assert not (tmp_path / "pwned").exists()
    assert namespace["__doc__"].startswith('Selection rules for op \'odd"""op\'')


def test_an_explained_step_prints_its_value_on_its_side_of_the_bound():
    """"mean row length = 8.65 nnz/row > 8.6515 nnz/row" read as a contradiction."""
    from seer.features_base import Feature
    from seer.tree import Step

    feature = Feature("mean_row", "mean row length", unit="nnz/row")
    assert Step("mean_row", 8.65154, False, 8.6516).describe(feature) == "mean row length = 8.652 nnz/row > 8.65154 nnz/row"
    assert Step("mean_row", 8.65154, True, 8.2).describe(feature) == "mean row length = 8.2 nnz/row <= 8.65154 nnz/row"
    # a value a hair below a long bound (a model trained before bounds were short) prints as many
    # digits as it takes to read below it
    assert Step("mean_row", 72.9655446429944, True, 72.96552707743234).describe(feature) == (
        "mean row length = 72.9655 nnz/row <= 72.9655446429944 nnz/row")
    assert Step("nnz", 10240.5, False, 12000).describe(Feature("nnz", "nnz", integer=True)) == "nnz = 12,000 > 10,240"


@pytest.mark.parametrize("name", ["spmv-h100", "spmv-h200", "gemm-h100"])
def test_a_rule_path_names_its_tree_as_the_rules_head_its_section(name):
    """explain said "tree for 10+ calls" of a tree the rules head "10 to 99 calls", and named a call
    count where one tree serves every count (found by a review)."""
    from pathlib import Path

    import seer

    model = SelectorModel.load(Path(seer.__file__).parent.parent / "models" / f"{name}.json")
    text = rules.to_text(model)
    rng = np.random.default_rng(7)
    for calls in (1, 9, 10, 50, 100, 999, 5000, 10**6):
        features = {f: float(rng.uniform(1, 1e5)) for f in (*model.known_features, *model.gathered_features)}
        known = {f: features[f] for f in model.known_features}
        choice = model.choose(known, lambda: {f: features[f] for f in model.gathered_features}, calls=calls)
        stage, served = re.fullmatch(r"stage (\d) \(tree for (.+)\) -> \S+", choice.path[-1]).groups()
        headings = re.findall(rf"^Stage {stage}, (?:.* measured, )?(.+) \(known", text, flags=re.MULTILINE)
        assert served in headings, (calls, choice.path, headings)


def test_the_generated_module_chooses_as_the_model_does(trained):
    """The module's choose() is the model's choice for any call count, untrained ones too (its
    STAGE1[5] was a KeyError), gathering only where stage 1 says so; NaN, which its comparisons
    send right where the model refuses it, is refused by name."""
    _, model = trained
    namespace = {}
    exec(compile(rules.to_python(model), "generated_rules.py", "exec"), namespace)
    choose = namespace["choose"]
    rng = np.random.default_rng(2)
    gathered_calls = 0
    for f in random_inputs(model, 300, rng):
        known = {name: f[name] for name in model.known_features}
        extra = {name: f[name] for name in model.gathered_features}
        for calls in (1, 5, 10, 99, 100, 5000):
            asked = []

            def gather():
                asked.append(True)
                return extra

            expected = model.choose(known, lambda: extra, calls)
            assert choose(known, gather, calls) == expected.variant
            assert bool(asked) == expected.gathered
            gathered_calls += bool(asked)
            assert choose(known, calls=calls, free=extra) == model.choose(known, lambda: extra, calls, free=extra).variant
    assert gathered_calls > 100
    big = {"rows": 4000.0, "cols": 4000.0, "nnz": 40_000.0, "mean_row": 10.0}
    assert model.choose(big, lambda: {"row_cv": 1.0, "row_max": 30.0}, 1).gathered  # choose needs gather= here
    with pytest.raises(ValueError, match="pass gather="):
        choose(big)
    with pytest.raises(ValueError, match="'nnz' is NaN"):
        choose({**big, "nnz": float("nan")})
    with pytest.raises(ValueError, match="calls must be >= 1"):
        choose(big, lambda: {}, 0)
    with pytest.raises(ValueError, match="calls must be >= 1, got nan"):  # had taken the smallest count's trees
        choose(big, lambda: {}, float("nan"))
    # A string or a bool had been read as a number, numpy's bool and a one-element array too (a review).
    for not_a_number in ("40000", True, None, np.True_, np.array([40_000.0])):
        with pytest.raises(ValueError, match="'nnz' must be a number"):
            choose({**big, "nnz": not_a_number})
        with pytest.raises(InputError, match="'nnz' must be a number"):
            model.choose({**big, "nnz": not_a_number}, lambda: {"row_cv": 1.0, "row_max": 30.0}, 1)
    huge = {**big, "nnz": 10**400}  # past float's range: beyond every bound, in both (it raised OverflowError)
    assert choose(huge, lambda: {"row_cv": 1.0, "row_max": 30.0}) == model.choose(
        huge, lambda: {"row_cv": 1.0, "row_max": 30.0}, 1).variant


def test_the_generated_module_of_a_one_stage_model_chooses_as_it_does():
    frame = planted_frame(groups=10, per_group=3).drop(columns=["row_cv", "row_max", "gather_ms"])
    table = ProfileTable.from_frame(frame, "toy", planted_meta())
    model = TwoStageSelector(folds=3).fit(table).to_model(table)
    namespace = {}
    exec(rules.to_python(model), namespace)
    for f in random_inputs(model, 200, np.random.default_rng(3)):
        for calls in (1, 7, 1000, 10**6):
            assert namespace["choose"](f, calls) == model.choose(f, dict, calls).variant


def test_the_rules_header_names_the_model_s_checksum_scope_and_versions(trained, tmp_path):
    import dataclasses
    import json

    _, model = trained
    saved = json.loads(model.save(tmp_path / "toy.json").read_text())
    text = rules.to_text(model)
    assert f"model: sha256 {saved['checksum']['sha256']} (the checksum its .json records)" in text
    assert f"trained with: seer {model.versions['seer']}, scikit-learn {model.versions['scikit-learn']}" in text
    scoped = dataclasses.replace(model, training={**model.training, "dtype": "float32", "world_sizes": [2, 4],
                                                  "element_sizes": [2, 4]},
                                 versions={**model.versions, "profiled_with": {"torch": "2.11.0", "triton": "3.6.0"}})
    text = rules.to_text(scoped)
    assert "profiled in: float32 (the trees do not read the dtype)" in text and "world sizes profiled: 2, 4" in text
    assert "element sizes profiled: 2 B, 4 B" in text
    assert "profiled with: torch 2.11.0, triton 3.6.0" in text


@pytest.mark.parametrize("depth", [150, 1500])
def test_the_generated_module_of_a_very_deep_tree_chooses_as_the_model_does(depth):
    """One function of nested if/else per tree did not compile from 99 splits deep (too many levels
    of indentation), and a tree 1,500 deep, past Python's recursion limit, could be neither
    converted from scikit-learn, gated nor exported (found by a review). Each generated function now
    nests at most MAX_NESTED_SPLITS splits, and the module chooses as the model does at every leaf."""
    model = deep_model(depth)
    source = rules.to_python(model)
    namespace = {}
    exec(compile(source, "generated_rules.py", "exec"), namespace)
    assert max(len(line) - len(line.lstrip(" ")) for line in source.splitlines()) <= 4 * (rules.MAX_NESTED_SPLITS + 1)
    choose, measured = namespace["choose"], {"row_cv": 1.0}
    gathered = 0
    for nnz in (-1.0, *np.arange(0.0, depth + 2, 0.5).tolist()):  # each side of every bound, and the gate's
        expected = model.choose({"nnz": nnz}, lambda: measured)
        assert choose({"nnz": nnz}, lambda: measured) == expected.variant, nnz
        assert choose({"nnz": nnz}, free=measured) == model.choose({"nnz": nnz}, dict, free=measured).variant, nnz
        gathered += expected.gathered
    assert gathered == 3  # depth + 0.5, + 1 and + 1.5 pass the gate
    # the planted choices, the deepest leaves of both stages included
    assert [choose({"nnz": float(k)}) for k in range(depth + 1)] == ["ab"[k % 2] for k in range(depth + 1)]
    assert choose({"nnz": depth + 1.0}, lambda: measured) == "ba"[depth % 2]


def test_the_rules_of_a_tree_deeper_than_the_recursion_limit_print():
    """Text and Markdown listed a tree by recursion: 1,500 splits deep, a RecursionError."""
    depth = 1500
    model = deep_model(depth)
    text, markdown = rules.to_text(model), rules.to_markdown(model)
    leaves = (depth + 2) + (depth + 1)  # stage 1's chain and its gate, stage 2's chain
    assert text.count(" -> ") == markdown.count(" → ") == leaves
    # stage 1's deepest leaf, one level below its gate and a level per split above it
    assert f"\n{'    ' * (depth + 1)}nnz > {depth - 1:,} -> {'ab'[depth % 2]}  (1 training input" in text
    assert f"\n{'  ' * depth}- nnz > {depth - 1:,} → **{'ab'[depth % 2]}** (1 training input" in markdown


def test_no_feature_label_reads_as_a_comparison_in_a_rule():
    """A rule prints ``<label> <= <bound>``: a label holding a comparison made the shipped rules read
    ``nnz fraction in rows > 256 > 0.04``, a chained comparison (a review)."""
    import importlib

    from seer.registry import OPS

    labels = {}
    for entry in OPS.values():
        module = importlib.import_module(entry.features)
        labels.update({f.name: f.label for f in (*module.KNOWN, *module.GATHERED)})
    assert not {name: label for name, label in labels.items() if re.search(r"[<>=]", label)}
