"""Training finds a planted rule, gathers only where it pays and never leaks groups across folds."""
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError
from synthetic_profiles import (  # noqa: F401 (toy_op is a fixture)
    THRESHOLD_NNZ, base_ms, planted_frame, planted_meta, planted_times, toy_op, write_planted,
)

import seer.train
from seer.errors import ProfileTableError, SeerWarning
from seer.model import GATHER, SelectorModel
from seer.table import ProfileTable, read_table, table_sha256
from seer.tree import Tree
from seer.train import TwoStageSelector, grouped_folds, train_table

pytestmark = pytest.mark.usefixtures("toy_op")


@pytest.fixture(scope="module")
def cheap(tmp_path_factory, toy_op):
    """Gathering costs 5 % of a call: it pays wherever the known features leave doubt."""
    path = write_planted(tmp_path_factory.mktemp("cheap") / "planted.csv", gather_cost=0.05)
    model, report = train_table(path, out=path.with_name("model.json"), command="pytest cheap")
    return path, model, report


@pytest.fixture(scope="module")
def costly(tmp_path_factory, toy_op):
    """Gathering costs 20 calls: it pays only when the input is used many times."""
    table = ProfileTable.from_frame(planted_frame(gather_cost=20.0, seed=1), "toy", planted_meta())
    selector = TwoStageSelector()
    return selector.fit(table).to_model(table), selector.evaluate(table, calls=(1, 1000))


def grid(nnz, cv):
    """Feature dicts far from the planted thresholds."""
    rows = 100.0
    known = [{"rows": rows, "cols": rows, "nnz": n, "mean_row": n / rows} for n in nnz]
    gathered = [{"row_cv": c, "row_max": 10.0} for c in cv]
    return known, gathered


def far_points(n=400, seed=3):
    rng = np.random.default_rng(seed)
    nnz = np.rint(np.where(rng.random(n) < 0.5, rng.uniform(350, 4000, n), rng.uniform(6500, 30000, n)))
    cv = np.where(rng.random(n) < 0.5, rng.uniform(0.3, 1.7, n), rng.uniform(2.4, 3.9, n))
    return nnz, cv


def test_planted_rule_is_recovered_on_held_out_groups(cheap):
    _, model, report = cheap
    for calls in (1, 100):
        scores = report.scores["all"][calls]
        assert scores["fraction_of_oracle"] > 0.97
        assert scores["accuracy"] > 0.95
        assert scores["speedup_vs_best_single"] > 1.2
    assert report.scores["all"][100]["fraction_of_oracle_with_gather"] > 0.97
    # The fitted stage 2 is the planted rule.
    nnz, cv = far_points()
    known, gathered = grid(nnz, cv)
    names = np.array(["a", "b", "c"])[planted_times(nnz, cv).argmin(axis=1)]
    predicted = [model.choose(k, lambda g=g: g, calls=100).variant for k, g in zip(known, gathered)]
    assert np.mean(np.array(predicted) == names) > 0.99


def test_scores_agree_with_the_held_out_rows(cheap):
    path, _, report = cheap
    table = read_table(path)
    rows = report.held_out
    assert list(rows["id"]) == list(table.ids)
    for calls in report.calls:
        chosen = np.array([table.variants.index(v) for v in rows[f"choice@{calls}"]])
        t_chosen = table.times[np.arange(len(table)), chosen]
        total = calls * t_chosen + rows[f"gathered@{calls}"].to_numpy() * table.gather_ms
        ratio = total / (calls * table.times.min(axis=1))
        np.testing.assert_allclose(rows[f"ratio@{calls}"], ratio)
        scores = report.scores["all"][calls]
        assert scores["fraction_of_oracle_with_gather"] == pytest.approx(np.exp(-np.log(ratio).mean()), abs=1e-6)
        vendor = calls * table.baseline_times[:, 0] / total
        assert scores["speedup_vs_vendor"] == pytest.approx(np.exp(np.log(vendor).mean()), abs=1e-6)
        assert "speedup_vs_hand_rule" in scores
    assert set(report.scores) == {"all", "real", "other"}
    assert report.subset_rows == {"all": 300, "real": 200, "other": 100}
    assert json.loads(json.dumps(report.to_dict(rows=True)))["rows"] == 300
    text = report.to_text()
    assert "fraction of oracle" in text and "speedup vs vendor" in text and "real rows (200)" in text


def test_stage1_gathers_only_where_it_pays(cheap, costly):
    nnz, cv = far_points()
    known, gathered = grid(nnz, cv)
    big = nnz >= THRESHOLD_NNZ

    def gather_flags(model, calls):
        return np.array([model.choose(k, lambda g=g: g, calls=calls).gathered for k, g in zip(known, gathered)])

    cheap_model = cheap[1]
    assert not gather_flags(cheap_model, 1)[~big].any()  # small inputs: a is certain, gathering is waste
    assert gather_flags(cheap_model, 1)[big].all()  # big inputs: b or c depends on row_cv
    costly_model, costly_report = costly
    assert not gather_flags(costly_model, 1).any()  # 20 calls' worth of gathering never pays once
    assert gather_flags(costly_model, 1000)[big].all() and not gather_flags(costly_model, 1000)[~big].any()
    assert costly_report.scores["all"][1]["gather_rate"] == 0
    assert costly_report.scores["all"][1000]["gather_rate"] > 0.3
    assert costly_report.scores["all"][1000]["fraction_of_oracle_with_gather"] > 0.97


def test_validated_path_scores_stage2_with_its_own_cost():
    """Where gathering costs 20 calls, one call never gathers; a validation pass that measures the
    features for 1 % of a call lets stage 2 decide every row, and the report charges that 1 %."""
    table = ProfileTable.from_frame(planted_frame(gather_cost=20.0, seed=1), "toy", planted_meta())
    free = 0.01 * table.times.min(axis=1)
    report = TwoStageSelector().evaluate(table, calls=(1, 100), free_gather_ms=free)
    assert report.scores["all"][1]["gather_rate"] == 0 and report.scores["all"][1]["fraction_of_oracle"] < 0.9
    validated = report.validated_scores["all"]
    assert validated[1]["gather_rate"] == 1 and validated[1]["fraction_of_oracle"] > 0.97
    assert validated[1]["fraction_of_oracle_with_gather"] == pytest.approx(validated[1]["fraction_of_oracle"] / 1.01,
                                                                           rel=0.01)
    assert json.loads(json.dumps(report.to_dict()))["validated_scores"]["real"]["100"]["accuracy"] > 0.95
    with pytest.raises(ValueError, match="one per row"):
        TwoStageSelector().evaluate(table, calls=(1,), free_gather_ms=free[:-1])


def test_grouped_folds_never_split_a_group(cheap):
    rng = np.random.default_rng(0)
    groups = rng.choice([f"g{i}" for i in range(23)], size=500, p=rng.dirichlet(np.ones(23)))
    assignments = []
    for seed in (None, 0, 1):
        tested = []
        for train, test in grouped_folds(groups, 5, seed):
            assert set(groups[train]).isdisjoint(groups[test]) and len(test)
            tested.extend(test)
        assert sorted(tested) == list(range(500))  # every row held out exactly once
        assignments.append([sorted(set(groups[test])) for _, test in grouped_folds(groups, 5, seed)])
    assert assignments[1] != assignments[2] and assignments[1] == [sorted(set(groups[t])) for _, t in grouped_folds(groups, 5, 0)]
    folds_per_group = cheap[2].held_out.groupby("group")["fold"].nunique()
    assert (folds_per_group == 1).all()


def test_train_table_saves_a_model_with_provenance(cheap):
    path, model, report = cheap
    loaded = SelectorModel.load(path.with_name("model.json"), op="toy")
    assert loaded == model
    training = loaded.training
    assert training["sha256"] == table_sha256(path) and training["table"] == str(path)
    assert training["command"] == "pytest cheap" and training["rows"] == 300 and training["groups"] == 60
    assert training["scores"] == report.to_dict()
    assert set(training["hyperparameters"]["stage1"]) == {"1", "10", "100", "1000"}
    assert loaded.device == {"name": "Synthetic GPU", "capability": [9, 0]}
    assert loaded.versions["profiled_with"]["triton"] == "3.6.0"
    assert set(loaded.stage1) == {1, 10, 100, 1000} and loaded.stage2 is not None


def test_predict_agrees_with_the_model(cheap):
    table = read_table(cheap[0])
    selector = TwoStageSelector(max_depth=(2, 3), min_samples_leaf=4).fit(table)
    model = selector.to_model(table)
    assert set(selector.hyperparameters_["stage2"]) == {"1", "10", "100", "1000"}
    assert all(params["min_samples_leaf"] == 4 for params in selector.hyperparameters_["stage2"].values())
    assert all(tree.depth <= 3 for tree in model.stage2.values())
    features = table.frame[list(table.known_features) + list(table.gathered_features)].to_dict(orient="records")
    for calls in (1, 1000):
        expected = [model.choose(f, lambda f=f: f, calls=calls).variant for f in features]
        assert list(selector.predict(table, calls=calls)) == expected
    with pytest.raises(NotFittedError):
        TwoStageSelector().predict(table)


def test_regret_cap_is_tuned_from_its_candidates_or_fixed(cheap):
    table = read_table(cheap[0])
    tuned = TwoStageSelector(max_depth=(2, 3), min_samples_leaf=4, calls=(1,), regret_cap=(0.1, 1.0)).fit(table)
    chosen = [tuned.hyperparameters_["stage2"]["1"], tuned.hyperparameters_["stage1"]["1"]]
    assert all(params["regret_cap"] in (0.1, 1.0) for params in chosen)
    fixed = TwoStageSelector(max_depth=3, min_samples_leaf=4, calls=(1,), regret_cap=0.25).fit(table)
    assert fixed.hyperparameters_["stage2"]["1"]["regret_cap"] == 0.25


def test_without_gathered_features_there_is_no_stage2():
    frame = planted_frame(groups=12, per_group=3).drop(columns=["row_cv", "row_max", "gather_ms"])
    table = ProfileTable.from_frame(frame, "toy", planted_meta())
    selector = TwoStageSelector(folds=3)
    model = selector.fit(table).to_model(table)
    assert model.stage2 is None and model.gathered_features == ()
    trees = list(model.stage1.values())
    assert all(tree is trees[0] for tree in trees)
    assert GATHER not in trees[0].labels
    assert model.choose({"rows": 10, "cols": 10, "nnz": 100, "mean_row": 10}, lambda: 1 / 0).variant == "a"
    assert selector.evaluate(table).scores["all"][1]["gather_rate"] == 0


def test_a_table_naming_no_gpu_trains_with_a_warning_and_only_known_features_record_world_sizes():
    """Dispatch picks a model by the GPU it was measured on: without one in the metadata the model is
    usable only when passed by hand, which is said. A column world_size that is no feature of the op
    is ignored, as other columns are, and records no world sizes."""
    frame = planted_frame(groups=12, per_group=3).assign(world_size=4)
    meta = {key: value for key, value in planted_meta().items() if key != "device"}
    table = ProfileTable.from_frame(frame, "toy", meta)
    selector = TwoStageSelector(folds=3).fit(table)
    with pytest.warns(SeerWarning, match=r"the table names no GPU .* only when passed as model=\.\.\."):
        model = selector.to_model(table)
    assert model.device == {"name": None, "capability": None} and "world_sizes" not in model.training


def test_small_tables_use_fewer_folds_or_refuse(tmp_path):
    table = ProfileTable.from_frame(planted_frame(groups=3, per_group=4), "toy", planted_meta())
    with pytest.warns(SeerWarning, match="only 3 groups: using 3-fold instead of 5-fold"):
        report = TwoStageSelector().evaluate(table)
    assert report.folds == 3
    two = ProfileTable.from_frame(planted_frame(groups=2, per_group=4), "toy", planted_meta())
    with pytest.raises(ProfileTableError, match="has 2 group.*needs at least 3"):
        TwoStageSelector().evaluate(two)
    with pytest.warns(SeerWarning, match="using 2-fold"):
        TwoStageSelector().fit(two)
    one = ProfileTable.from_frame(planted_frame(groups=1, per_group=4), "toy", planted_meta())
    with pytest.raises(ProfileTableError, match="has 1 group.*needs at least 2"):
        TwoStageSelector().fit(one)


def test_fewer_folds_are_said_once_per_command(tmp_path):
    """seer train and seer report score a table, then fit it, and each step had said it again."""
    path = write_planted(tmp_path / "small.csv", groups=3, per_group=4)
    with pytest.warns(SeerWarning, match="only 3 groups") as train:
        train_table(path)
    table = read_table(path)
    selector = TwoStageSelector()
    with pytest.warns(SeerWarning, match="only 3 groups") as report:
        selector.evaluate(table)
        selector.fit(table)
    assert [len([w for w in told if "only 3 groups" in str(w.message)]) for told in (train, report)] == [1, 1]


def test_unknown_op_trains_without_hand_rule(tmp_path):
    frame = planted_frame(groups=30, per_group=3)
    meta = {"op": "mystery", "features": {"known": ["nnz"], "gathered": ["row_cv"]}}
    table = ProfileTable.from_frame(frame, "mystery", meta)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # enough groups for 5 folds: no warning expected
        report = TwoStageSelector().evaluate(table)
    assert "speedup_vs_hand_rule" not in report.scores["all"][1]
    assert any("no hand rule" in note for note in report.notes)
    assert report.scores["all"][100]["fraction_of_oracle"] > 0.9


# ---------------------------------------------------------------------- preparation costs


def prepared_frame(groups=30, per_group=3, seed=2, prepare=20.0):
    """Two variants on the planted inputs: "fast" takes half of "plain"'s time per call but
    ``prepare`` of plain's calls to prepare, so plain is cheaper below 40 calls, fast above."""
    frame = planted_frame(groups, per_group, seed=seed).drop(columns=["time_ms:a", "time_ms:b", "time_ms:c", "call_us:a"])
    base = base_ms(frame["nnz"].to_numpy())
    noise = np.exp(np.random.default_rng(seed).normal(0, 0.03, (len(frame), 2)))
    frame["time_ms:plain"] = base * noise[:, 0]
    frame["time_ms:fast"] = 0.5 * base * noise[:, 1]
    frame["prepare_ms:fast"] = prepare * base
    return frame


QUICK = {"max_depth": (1, 2, 3), "min_samples_leaf": (1, 4), "regret_cap": 0.5}


@pytest.fixture(scope="module")
def prepared(toy_op):
    table = ProfileTable.from_frame(prepared_frame(), "toy", planted_meta())
    selector = TwoStageSelector(**QUICK)
    model = selector.fit(table).to_model(table)
    free = np.zeros(len(table))  # the validated path: stage 2 decides every row
    return table, selector, model, TwoStageSelector(**QUICK).evaluate(table, calls=(1, 10, 100, 1000), free_gather_ms=free)


def test_preparation_decides_between_few_and_many_calls(prepared):
    """Fast per call but costly to prepare: plain for a few calls, fast for many, in both stages."""
    table, selector, model, _ = prepared
    rows = table.frame[[*table.known_features, *table.gathered_features]].to_dict(orient="records")
    for calls, expected in ((1, "plain"), (10, "plain"), (100, "fast"), (1000, "fast")):
        unchecked = [model.choose(f, lambda: pytest.fail("gathering cannot change the pick"), calls=calls) for f in rows]
        assert {(c.variant, c.stage) for c in unchecked} == {(expected, 1)}
        validated = [model.choose(f, lambda: {}, calls=calls, free=f) for f in rows]
        assert {(c.variant, c.stage) for c in validated} == {(expected, 2)}
        assert set(selector.predict(table, calls=calls)) == {expected}
    assert model.stage2_tree(1) != model.stage2_tree(1000)
    assert set(selector.hyperparameters_["stage2"]) == set(selector.hyperparameters_["stage1"]) == {"1", "10", "100", "1000"}


def test_scores_charge_preparation(prepared):
    table, _, _, report = prepared
    held_out = report.held_out
    assert set(held_out["oracle"]) == {"fast"}  # per call, preparation aside
    assert set(held_out["oracle@1"]) == set(held_out["oracle@10"]) == {"plain"}
    assert set(held_out["oracle@100"]) == set(held_out["oracle@1000"]) == {"fast"}
    assert report.best_single == "fast"
    for calls in report.calls:
        for scores in (report.scores["all"][calls], report.validated_scores["all"][calls]):
            assert scores["accuracy"] == 1 and scores["fraction_of_oracle"] == pytest.approx(1)
    # The best single variant is chosen per call count, its preparation charged: plain for one call
    # (fast would pay 20.5 plain calls), fast for many; seer matches both.
    assert report.scores["all"][1]["speedup_vs_best_single"] == pytest.approx(1)
    assert report.scores["all"][1000]["speedup_vs_best_single"] == pytest.approx(1)
    # A selector always choosing fast, scored at 1 and 1000 calls.
    data = seer.train._Data.of(table, table.known_features, table.gathered_features)
    n, fast = len(table), table.variants.index("fast")
    always_fast = seer.train._Outcome({c: np.full(n, fast) for c in (1, 1000)}, {c: np.zeros(n, dtype=bool) for c in (1, 1000)},
                                      {c: np.full(n, fast) for c in (1, 1000)}, np.zeros(n, dtype=int))
    one, many = (seer.train._scores(table, data, np.ones(n, dtype=bool), c, always_fast, None) for c in (1, 1000))
    assert one["fraction_of_oracle"] == pytest.approx(1 / 20.5, rel=0.05) and one["accuracy"] == 0
    assert one["speedup_vs_best_single"] == pytest.approx(1)  # charged alike
    assert many["fraction_of_oracle"] == pytest.approx(1) and many["accuracy"] == 1


def test_gathered_rows_go_to_the_stage2_tree_of_their_call_count():
    """Planted rule, but c must first prepare for 5 base times: on big skewed inputs a (2 per
    call) beats c (1 per call + 5) for one call, c wins for many. Both counts gather on big inputs."""
    frame = planted_frame(groups=40, per_group=3, seed=5)
    frame["prepare_ms:c"] = 5 * base_ms(frame["nnz"].to_numpy())
    table = ProfileTable.from_frame(frame, "toy", planted_meta())
    selector = TwoStageSelector(**QUICK, calls=(1, 1000)).fit(table)
    model = selector.to_model(table)
    rows = table.frame[[*table.known_features, *table.gathered_features]].to_dict(orient="records")
    skewed_big = (table.frame["nnz"] >= THRESHOLD_NNZ).to_numpy() & (table.frame["row_cv"] > 2).to_numpy()
    for calls, expected in ((1, "a"), (1000, "c")):
        choices = [model.choose(f, lambda f=f: f, calls=calls) for f in rows]
        assert all(c.gathered for c, big in zip(choices, skewed_big) if big)
        assert np.mean([c.variant == expected for c, big in zip(choices, skewed_big) if big]) > 0.9
        assert list(selector.predict(table, calls=calls)) == [c.variant for c in choices]


def test_stage1_costs_charge_each_choice_its_preparation():
    """Running a variant c times costs c * t + its preparation; gathering adds stage 2's pick's."""
    data = seer.train._Data(
        known=np.zeros((2, 1)), full=np.zeros((2, 2)), times=np.array([[1.0, 0.5], [2.0, 0.25]]),
        prepare=np.array([[0.0, 30.0], [0.0, 30.0]]), gather_ms=np.array([3.0, 5.0]), groups=np.array(["g", "h"]),
    )
    np.testing.assert_allclose(data.cost(10), [[1.0, 3.5], [2.0, 3.25]])
    costs = seer.train._stage1_costs(data, np.array([1, 0]), calls=10)
    np.testing.assert_allclose(costs, [[10.0, 35.0, 3.0 + 35.0], [20.0, 32.5, 5.0 + 20.0]])


def count_tuned_trees(monkeypatch) -> list:
    tuned = []
    tune = seer.train._tune_tree
    monkeypatch.setattr(seer.train, "_tune_tree", lambda *args: tuned.append(args[2]) or tune(*args))
    return tuned


def test_without_preparation_one_stage2_tree_serves_every_count(monkeypatch, cheap):
    table = read_table(cheap[0])
    tuned = count_tuned_trees(monkeypatch)
    selector = TwoStageSelector(**QUICK).fit(table)
    assert len(tuned) == 1 + 4  # stage 2 once, stage 1 per count (its gathering cost depends on the count)
    trees = list(selector.stage2_.values())
    assert set(selector.stage2_) == {1, 10, 100, 1000} and all(tree is trees[0] for tree in trees)
    params = list(selector.hyperparameters_["stage2"].values())
    assert all(p is params[0] for p in params)
    model = selector.to_model(table)
    features = dict(table.frame.iloc[0])
    assert model.choose(features, lambda: features, calls=1000, free=features).path[-1].startswith("stage 2 (tree for any number of calls) ->")
    # Zero preparation columns change nothing.
    zero = ProfileTable.from_frame(read_table(cheap[0]).frame.assign(**{"prepare_ms:b": 0.0}), "toy", planted_meta())
    again = TwoStageSelector(**QUICK).fit(zero)
    assert again.stage1_ == selector.stage1_ and again.stage2_ == selector.stage2_


def test_stage1_shortcut_only_without_gathering_and_preparation(monkeypatch):
    frame = prepared_frame(groups=12).drop(columns=["row_cv", "row_max", "gather_ms"])
    table = ProfileTable.from_frame(frame.drop(columns=["prepare_ms:fast"]), "toy", planted_meta())
    tuned = count_tuned_trees(monkeypatch)
    plain = TwoStageSelector(**QUICK, folds=3).fit(table)
    assert len(tuned) == 1 and plain.stage2_ is None
    assert len({id(tree) for tree in plain.stage1_.values()}) == 1
    tuned.clear()
    prepared = TwoStageSelector(**QUICK, folds=3).fit(ProfileTable.from_frame(frame, "toy", planted_meta()))
    assert len(tuned) == 4 and prepared.stage2_ is None and prepared.hyperparameters_["stage2"] is None
    assert [prepared.stage1_[c].predict([10, 10, 100, 10]) for c in (1, 10, 100, 1000)] == ["plain", "plain", "fast", "fast"]


def _stage1_case(n=200, seed=0):
    """Known feature: size. Labels a, b and GATHER. Held out, the tree answers "a" everywhere,
    but inputs above size 100 are 30x slower on "a" than on "b" and gathering costs them 1%."""
    rng = np.random.default_rng(seed)
    size = rng.uniform(1, 200, n)
    costs = np.ones((n, 3))
    big = size > 100
    costs[big, 0] = 30.0
    costs[~big, 1] = 2.0
    costs[:, 2] = np.where(big, 1.01, 1.5)
    return size[:, None], costs


def test_gate_sends_inputs_above_a_threshold_to_gathering_where_the_tree_fails_held_out():
    X, costs = _stage1_case()
    labels = ("a", "b", GATHER)
    tree = Tree(["size"], labels, [-1], [None], [-1], [-1], [0], [len(X)], [0.0])  # "a" for every input
    fitted = seer.train._Fitted(tree, {"max_depth": 0}, np.zeros(len(X), dtype=int))
    gated = seer.train._gated(fitted, X, costs, ["size"], labels)
    gate = gated.params["gate"]
    assert gate["feature"] == "size" and 80 <= gate["gather_above"] <= 100  # the last quantile below 100
    # the quantile (88.57...) moved to the shortest decimal that gates the same rows, as rules print it
    assert gate["gather_above"] == 89.0 and gated.tree.threshold[0] == 89.0
    assert gated.tree.predict([150.0]) == GATHER and gated.tree.predict([20.0]) == "a"
    assert (gated.out_of_fold == np.where(X[:, 0] > gate["gather_above"], 2, 0)).all()
    assert gated.tree.n_samples[0] == len(X) and sum(gated.tree.n_samples[1:3]) == len(X)


def test_gate_is_left_out_where_the_tree_does_well():
    X, costs = _stage1_case()
    labels = ("a", "b", GATHER)
    right = np.where(X[:, 0] > 100, 1, 0)  # the tree's held-out choices are already the best
    tree = Tree(["size"], labels, [0, -1, -1], [100.0, None, None], [1, -1, -1], [2, -1, -1], [-1, 0, 1],
                [len(X), 0, 0], [0.0, 0.0, 0.0])
    fitted = seer.train._Fitted(tree, {"max_depth": 1}, right)
    assert seer.train._gated(fitted, X, costs, ["size"], labels) is fitted


@pytest.mark.parametrize("out", ["planted.csv", "planted.meta.json", "model.txt", "model"])
def test_a_model_path_over_the_table_or_not_json_is_refused(tmp_path, out):
    """Training wrote the model over the table it read (or its metadata); a model path of another
    suffix was then overwritten by the rules written beside it."""
    from seer.errors import ModelError

    path = write_planted(tmp_path / "planted.csv", groups=4, per_group=2)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ModelError, match="must end in .json|would write .* over the profile table"):
        train_table(path, out=tmp_path / out)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_sub_nanosecond_time_trains_a_model_that_saves(tmp_path):
    """1e-320 ms made every regret of its row overflow, and saving the model ended in json's ValueError."""
    frame = planted_frame(groups=8, per_group=3)
    frame.loc[4, "time_ms:a"] = 1e-320
    path = write_planted(tmp_path / "planted.csv", groups=8, per_group=3)
    path.write_text(frame.to_csv(index=False))
    with pytest.warns(SeerWarning, match="dropped 1 of 24 rows"):
        model, _ = train_table(path, out=tmp_path / "model.json", selector=TwoStageSelector(folds=3))
    assert SelectorModel.load(tmp_path / "model.json") == model


def test_a_table_without_gathered_features_is_shown_no_gathering_scores(tmp_path):
    """GEMM's tables gather nothing: "fraction of oracle with gather" (equal to the fraction of
    oracle) and "gather rate" (0) printed beside the others said nothing; the scores keep them for
    the scripts that read them."""
    frame = planted_frame().drop(columns=["row_cv", "row_max", "gather_ms"], errors="ignore")
    meta = {**planted_meta(), "op": "flat", "features": {"known": ["rows", "cols", "nnz", "mean_row"], "gathered": []}}
    table = ProfileTable.from_frame(frame, "flat", meta)
    report = TwoStageSelector(**QUICK).evaluate(table, calls=(1, 100))
    text = report.to_text()
    assert "fraction of oracle" in text and "accuracy" in text
    assert "with gather" not in text and "gather rate" not in text
    assert report.scores["all"][1]["gather_rate"] == 0 and not report.gathers
    assert "gather rate" in TwoStageSelector(**QUICK).evaluate(read_table(write_planted(tmp_path / "t.csv")),
                                                                calls=(1,)).to_text()


@pytest.mark.parametrize("parameters, message", [
    # A cap of 0 clipped every regret to 0 and trained a constant tree; a negative one likewise.
    ({"regret_cap": 0}, (r"regret_cap must be one candidate or a non-empty list of them, each a positive, finite "
                         r"log-slowdown such as 0\.5; got 0")),
    ({"regret_cap": [0.5, -1.0]}, r"regret_cap .*; got \[0\.5, -1\.0\]"),
    ({"regret_cap": float("nan")}, r"regret_cap .*; got nan"),
    ({"calls": (1.5,)}, r"calls must be whole numbers of calls >= 1, e\.g\. \(1, 100\), got \(1\.5,\)"),
    ({"calls": (float("inf"),)}, r"calls must be whole numbers .*, got \(inf,\)"),
    ({"calls": ()}, r"calls must be whole numbers"),
    ({"folds": 1}, r"folds must be a whole number >= 2 \(grouped cross-validation\), got 1"),
    # A string was searched as its letters: "34" as depths "3" and "4".
    ({"max_depth": "34"}, r"max_depth must be one candidate .* a whole number >= 1, or None for no limit; got '34'"),
    ({"max_depth": []}, r"max_depth must be one candidate or a non-empty list"),
    ({"min_samples_leaf": 0.5}, r"min_samples_leaf .* a whole number >= 1; got 0\.5"),
])
def test_hyper_parameters_that_cannot_be_used_are_refused_saying_what_to_pass(parameters, message):
    table = ProfileTable.from_frame(planted_frame(groups=6, per_group=3), "toy", planted_meta())
    for run in (lambda s: s.fit(table), lambda s: s.evaluate(table)):
        with pytest.raises(ValueError, match=message):
            run(TwoStageSelector(**parameters))


def test_hyper_parameters_of_numpy_types_and_single_values_are_taken():
    table = ProfileTable.from_frame(planted_frame(groups=6, per_group=3), "toy", planted_meta())
    selector = TwoStageSelector(max_depth=np.int64(2), min_samples_leaf=[1, 2], regret_cap=0.5, calls=(np.int64(1),))
    params = selector.fit(table).hyperparameters_["stage1"]["1"]
    assert params["max_depth"] == 2 and params["regret_cap"] == 0.5


def test_a_choice_tying_the_fastest_variant_is_a_right_one():
    """Variants timed exactly alike (benchmarks/spmv_ties_equal.py makes them so): the oracle is the
    first of them, and a tree choosing the other had been scored inaccurate on every tie (a review)."""
    n = 40
    frame = pd.DataFrame({"id": [f"m{i}" for i in range(n)], "group": [f"g{i % 8}" for i in range(n)], "rows": 100,
                          "cols": 100, "nnz": 1000, "mean_row": 10.0})
    frame["time_ms:a"] = np.where(np.arange(n) % 2 == 0, 1.0, 1.5)  # ties b on even rows, 1.5x slower on odd
    frame["time_ms:b"] = 1.0
    report = TwoStageSelector(calls=(1,)).evaluate(ProfileTable.from_frame(frame, "toy", planted_meta()), calls=(1,))
    assert report.scores["all"][1]["fraction_of_oracle"] == 1.0 and report.scores["all"][1]["accuracy"] == 1.0
    assert set(report.held_out["choice@1"]) == set(report.held_out["oracle@1"]) == {"b"}


def test_a_multi_gpu_table_records_the_world_and_element_sizes_the_trees_saw():
    """A feature profiled at one value alone is never split on, so the model says which values the
    trees saw (dispatch warns outside them); the shipped models record what their tables hold."""
    for name in ("all_gather_gemm-h200x2", "gemm_reduce_scatter-h100x4"):
        table = read_table(Path(__file__).parent.parent / "datasets" / "profiles" / f"{name}.csv")
        model = TwoStageSelector().fit(table).to_model(table)
        shipped = SelectorModel.load(Path(__file__).parent.parent / "models" / f"{name}.json")
        sizes = {field: model.training[field] for field in ("world_sizes", "element_sizes")}
        assert sizes == {"world_sizes": [int(name[-1])], "element_sizes": [2]}
        assert sizes == {field: shipped.training[field] for field in sizes}


def test_a_time_column_close_to_a_variant_of_the_op_is_named_as_a_likely_misspelling(tmp_path):
    """'time_ms:Scalar_r128' read as a variant this seer lacks, and the advice was to retire it (deleting
    its measurements); the column close to a registered variant is now named with a rename hint."""
    frame = planted_frame(groups=4, per_group=2).rename(columns={"time_ms:c": "time_ms:Scalar_r128"})
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    (tmp_path / "t.meta.json").write_text(json.dumps({**planted_meta(), "op": "spmv"}))
    with pytest.raises(ProfileTableError, match=r"lacks: \['a', 'b', 'Scalar_r128'\] \('time_ms:Scalar_r128' is close "
                                                r"to 'scalar_r128': a misspelling\? rename it\); .*retire them"):
        seer.train._check_variants_known(read_table(path))


def test_a_baseline_timed_on_some_inputs_is_said_to_cover_those_alone():
    """A vendor timed on some rows: its speed-up is a mean over those, which a subset's caption ("all
    (N inputs)") overstated without a word (a review); a note says how many it covers."""
    frame = planted_frame(groups=6, per_group=3)
    frame.loc[frame.index[:7], "baseline_ms:vendor"] = np.nan
    table = ProfileTable.from_frame(frame, "toy", planted_meta())
    report = TwoStageSelector(folds=3).evaluate(table)
    assert "speedup vs vendor is over the inputs vendor was timed on alone, 11 of 18" in report.notes
    full = ProfileTable.from_frame(planted_frame(groups=6, per_group=3), "toy", planted_meta())
    assert not [note for note in TwoStageSelector(folds=3).evaluate(full).notes if "timed on alone" in note]
