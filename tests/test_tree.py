"""The pure-Python tree: conversion from scikit-learn, prediction, paths and strict JSON checks."""
import copy
import math
import timeit

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from seer.errors import ModelError
from seer.features_base import Feature
from seer.tree import Step, Tree, condition_text, log_regret

FEATURES = ("x0", "x1", "x2")


def one_hot_costs(y, labels):
    """Cost 1 for the right label, 2 for any other: least regret = majority vote."""
    costs = np.full((len(y), labels), 2.0)
    costs[np.arange(len(y)), y] = 1.0
    return costs


def random_tree(seed=0, n=400, labels=3, max_depth=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(FEATURES)))
    y = rng.integers(0, labels, n)
    estimator = DecisionTreeClassifier(max_depth=max_depth, random_state=0).fit(X, y)
    names = [f"v{i}" for i in range(labels)]
    return estimator, Tree.from_sklearn(estimator, FEATURES, names, X, one_hot_costs(y, labels)), names


def test_training_rows_route_as_scikit_learn_routed_them_above_float32_precision():
    """scikit-learn splits float32 copies of the features: above 2**24 float32 merges whole
    numbers, so its threshold can equal a value it sent right. The exported tree splits the
    training rows, in float64, as the fit did, on integers as large as the tables' nnz."""
    rng = np.random.default_rng(0)
    X = np.column_stack([16_777_216 + rng.integers(0, 64, 300), 45_000_000 + rng.integers(0, 64, 300),
                         rng.normal(size=300)]).astype(np.float64)
    y = (X[:, 0] % 2 == 1) ^ (X[:, 1] % 4 == 3)
    estimator = DecisionTreeClassifier(random_state=0).fit(X, y)
    tree = Tree.from_sklearn(estimator, FEATURES, ["even", "odd"], X, one_hot_costs(y.astype(int), 2))
    leaf_of = estimator.apply(X)  # where scikit-learn's float32 routing put each row
    for leaf in np.unique(leaf_of):
        rows = X[leaf_of == leaf]
        assert len({tree.predict(row) for row in rows.tolist()}) == 1
    two = np.array([[16_777_218.0, 0, 0], [16_777_219.0, 0, 0]])
    costs = np.array([[1.0, 2.0], [2.0, 1.0]])
    fitted = DecisionTreeRegressor().fit(two, log_regret(costs))
    assert fitted.tree_.threshold[0] == 16_777_219.0  # float32 reads both rows as 16,777,218 and 16,777,220
    assert [Tree.from_sklearn(fitted, FEATURES, ["a", "b"], two, costs).predict(r) for r in two.tolist()] == ["a", "b"]


def test_predictions_match_scikit_learn_on_new_points():
    estimator, tree, names = random_tree()
    X = np.random.default_rng(1).normal(size=(2000, 3))
    expected = [names[i] for i in estimator.predict(X)]
    assert [tree.predict(row) for row in X.tolist()] == expected
    assert tree.depth == estimator.get_depth()


def test_leaf_label_minimises_regret_not_votes():
    # No split is possible (one constant feature): the root is the only leaf. Two rows prefer
    # "fast" by 1 %, one row is 10x slower with it: "safe" has the least total log-regret.
    X = np.zeros((3, 1))
    costs = np.array([[1.0, 1.01], [1.0, 1.01], [10.0, 1.0]])
    estimator = DecisionTreeClassifier().fit(X, costs.argmin(axis=1))
    tree = Tree.from_sklearn(estimator, ["x"], ["fast", "safe"], X, costs)
    assert tree.predict([0.0]) == "safe"
    assert tree.n_samples == (3,)
    assert tree.mean_regret[0] == pytest.approx((0.01 + 0.01 + 0.0) / 3)


def test_splits_whose_sides_choose_the_same_label_are_merged():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 1))
    y = (X[:, 0] > 0).astype(int)  # sklearn splits at 0 ...
    costs = np.column_stack([np.where(y == 1, 1.02, 1.0), np.where(y == 1, 1.0, 5.0)])  # ... but "a" costs little
    estimator = DecisionTreeClassifier(max_depth=3).fit(X, y)
    assert estimator.tree_.node_count > 1
    tree = Tree.from_sklearn(estimator, ["x"], ["a", "b"], X, np.column_stack([np.ones(200), np.full(200, 1.5)]))
    assert len(tree.left) == 1 and tree.predict([1.0]) == "a" and tree.mean_regret == (0.0,)
    # With the real costs the right side prefers "b": the split stays.
    tree = Tree.from_sklearn(estimator, ["x"], ["a", "b"], X, costs)
    assert tree.depth == 1 and tree.predict([-1.0]) == "a" and tree.predict([1.0]) == "b"


def test_decision_path_follows_the_thresholds():
    _, tree, _ = random_tree(max_depth=3)
    values = [0.3, -1.2, 0.7]
    path = tree.decision_path(values)
    assert path
    node = 0
    for step in path:
        f = tree.feature[node]
        assert step == Step(FEATURES[f], tree.threshold[node], values[f] <= tree.threshold[node], values[f])
        node = tree.left[node] if step.goes_left else tree.right[node]
    assert tree.is_leaf(node) and tree.labels[tree.label[node]] == tree.predict(values)


def test_thresholds_print_in_natural_units():
    nnz = Feature("nnz", "nnz", integer=True)
    cv = Feature("row_cv", "row-length CV")
    assert condition_text(nnz, 10240.5, True) == "nnz <= 10,240"
    assert condition_text(nnz, 10241.5, False) == "nnz > 10,241"  # floor, not round-half-even
    assert condition_text(cv, 1.2537, False) == "row-length CV > 1.2537"  # short enough: exact
    assert condition_text(cv, 1.2537, True, ascii_only=False) == "row-length CV ≤ 1.2537"
    assert Feature("t", "time", unit="ms").format_bound(1234.56) == "1,234.56 ms"
    assert Step("nnz", 10240.5, False, 12000.0).describe(nnz) == "nnz = 12,000 > 10,240"


def test_a_long_threshold_prints_rounded_down_close_enough_to_read_its_neighbours_right():
    """A midpoint between float32 values (the shipped H200 model's 24.99744415283203) printed as
    "<= 25" sent a mean row of 25, which the tree sends right, left in the reader's eyes; rounded
    down within 1e-5 it prints as 24.9974, so 25 and the training input at 24.99675 read as the
    tree sends them."""
    mean_row = Feature("mean_row", "mean row length", unit="nnz/row")
    threshold = 24.99744415283203
    assert mean_row.format_bound(threshold) == "24.9974 nnz/row"
    assert 25.0 > 24.9974 and 24.99675 <= 24.9974
    assert Step("mean_row", threshold, False, 25.0).describe(mean_row) == \
        "mean row length = 25 nnz/row > 24.9974 nnz/row"
    assert Feature("shift", "shifted rows").format_bound(0.9735795855522156) == "0.97357"


def test_predict_takes_microseconds():
    _, tree, _ = random_tree(n=4000, max_depth=8)
    assert tree.depth == 8
    values = [0.1, -0.2, 0.3]
    seconds = min(timeit.repeat(lambda: tree.predict(values), number=2000, repeat=5)) / 2000
    assert seconds < 20e-6, f"predict took {seconds * 1e6:.1f} us"  # about 0.3 us on one core


def test_dict_round_trip():
    _, tree, _ = random_tree(max_depth=4)
    data = tree.to_dict()
    assert data["threshold"][tree.left.index(-1)] is None  # leaves have no threshold
    again = Tree.from_dict(copy.deepcopy(data))
    assert again == tree and again.to_dict() == data


def edited(change):
    _, tree, _ = random_tree(max_depth=3)
    data = tree.to_dict()
    change(data)
    return data


def inner_below_root(data):
    return next(i for i, left in enumerate(data["left"]) if left >= 0 and i > 0)


def first_leaf(data):
    return data["left"].index(-1)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.pop("label"), r"missing field\(s\) \['label'\]"),
        (lambda d: d.update(left=tuple(d["left"])), "left: expected a list"),
        (lambda d: d["right"].pop(), "equal length"),
        (lambda d: d["left"].__setitem__(0, 999), "children .* out of range"),
        (lambda d: d["left"].__setitem__(inner_below_root(d), 1), "does not come after its parent"),  # a cycle
        (lambda d: d["right"].__setitem__(0, d["left"][0]), "do not have exactly one parent"),
        (lambda d: d["label"].__setitem__(first_leaf(d), 7), "a leaf needs feature -1 and a label"),
        (lambda d: d["label"].__setitem__(0, 0), "an inner node has label -1"),
        (lambda d: d["feature"].__setitem__(0, 5), "feature index 5 out of range"),
        (lambda d: d["threshold"].__setitem__(0, None), "threshold must be a finite number"),
        (lambda d: d["threshold"].__setitem__(0, math.inf), "threshold must be a finite number"),
        (lambda d: d["threshold"].__setitem__(0, "1.5"), "threshold entries must be numbers"),
        (lambda d: d["threshold"].__setitem__(first_leaf(d), 1.0), "a leaf has no threshold"),
        (lambda d: d["n_samples"].__setitem__(0, 2.5), "must be integers"),
        (lambda d: d["mean_regret"].__setitem__(0, -0.1), "mean_regret must be finite and >= 0"),
        (lambda d: d.update(features=["x0", "x0", "x2"]), "features contain duplicates"),
        (lambda d: d.update(labels=[]), "at least one label"),
    ],
)
def test_malformed_trees_are_refused(change, message):
    with pytest.raises(ModelError, match=message):
        Tree.from_dict(edited(change), where="stage2")


def test_error_names_where_the_tree_is():
    with pytest.raises(ModelError, match=r"^stage1\[10\]: node 0"):
        Tree.from_dict(edited(lambda d: d["label"].__setitem__(0, 0)), where="stage1[10]")
    with pytest.raises(ModelError, match="tree: expected an object"):
        Tree.from_dict([1, 2])


def test_a_gate_above_a_threshold_keeps_the_tree_below_it_and_recounts():
    X = np.array([[1.0, 5.0], [2.0, 50.0], [3.0, 500.0], [4.0, 5000.0]])
    costs = np.array([[1.0, 2.0, 9.0], [2.0, 1.0, 9.0], [1.0, 3.0, 1.1], [3.0, 1.0, 1.2]])
    below = Tree(["a", "b"], ["x", "y", "g"], [0, -1, -1], [2.5, None, None], [1, -1, -1], [2, -1, -1],
                 [-1, 0, 1], [4, 2, 2], [0.0, 0.0, 0.0])
    gated = below.gated("b", 100.0, "g", X, costs)
    assert [gated.predict(row) for row in X.tolist()] == ["x", "x", "g", "g"]  # row 2 no longer reaches "y"
    assert gated.predict([3.0, 50.0]) == "y"
    assert gated.n_samples == (4, 2, 2, 0, 2)
    assert gated.mean_regret[4] == pytest.approx(np.mean([0.1, 0.2]))  # the gate's leaf: g costs 1.1 and 1.2
    assert Tree.from_dict(gated.to_dict()) == gated


def test_a_gate_prunes_the_branches_below_it_that_no_input_can_reach():
    """Under "b <= 100" a split "b <= 200" sends every input left: its right side was printed in the
    shipped rules all the same (a "columns > 5,410,008" branch under "columns <= 479"). Pruned, and
    the split above it, left with one label on both sides, becomes a leaf."""
    X = np.array([[1.0, 5.0], [2.0, 50.0], [3.0, 500.0], [4.0, 5000.0]])
    costs = np.array([[1.0, 2.0, 9.0], [1.0, 3.0, 9.0], [1.0, 3.0, 1.1], [3.0, 1.0, 1.2]])
    below = Tree(["a", "b"], ["x", "y", "g"], [0, -1, 1, -1, -1], [2.5, None, 200.0, None, None],
                 [1, -1, 3, -1, -1], [2, -1, 4, -1, -1], [-1, 0, -1, 0, 1], [4, 2, 2, 1, 1], [0.0] * 5)
    gated = below.gated("b", 100.0, "g", X, costs)
    assert (gated.feature, gated.threshold[0], gated.left, gated.right) == ((1, -1, -1), 100.0, (1, -1, -1),
                                                                           (2, -1, -1))
    assert [gated.labels[label] for label in gated.label[1:]] == ["x", "g"]
    for row in ([1.0, 5.0], [3.0, 50.0], [3.0, 150.0], [3.0, 500.0]):
        assert gated.predict(row) == ("g" if row[1] > 100 else below.predict(row))


def test_regrets_do_not_depend_on_the_last_bits_of_the_times():
    """numpy's log differs in its last bits between builds and CPUs; those bits used to flip
    near-tied splits, so the same table trained to other trees on the GPU host (NOTES SpMV 35)."""
    costs = np.random.default_rng(7).uniform(1.0, 50.0, size=(300, 6))
    nudged = np.nextafter(costs, np.inf)  # one unit in the last place, as another log would differ
    assert not np.array_equal(np.log(costs), np.log(nudged))
    assert np.array_equal(log_regret(costs), log_regret(nudged))
