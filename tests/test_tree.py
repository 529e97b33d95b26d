"""The pure-Python tree: conversion from scikit-learn, prediction, paths and strict JSON checks."""
import copy
import math
import timeit

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from seer.errors import ModelError
from seer.features_base import Feature
from seer.tree import Step, Tree, condition_text, log_regret, readable_bound

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


def test_predictions_match_scikit_learn_on_new_points_with_each_split_moved_to_its_readable_bound():
    """scikit-learn's tree, each threshold moved to the shortest decimal between the training
    values it splits, walked here by hand, predicts as the converted tree on new points."""
    estimator, tree, names = random_tree()
    rng = np.random.default_rng(0)
    X_train = rng.normal(size=(400, 3))  # random_tree's
    raw, reached = estimator.tree_, estimator.decision_path(X_train).toarray().astype(bool)

    def moved(node):
        values = X_train[reached[:, node], raw.feature[node]]
        left = values.astype(np.float32) <= raw.threshold[node]
        return readable_bound(values[left].max(), values[~left].min())

    def walk(row):
        node = 0
        while raw.children_left[node] >= 0:
            node = raw.children_left[node] if row[raw.feature[node]] <= moved(node) else raw.children_right[node]
        return names[int(raw.value[node][0].argmax())]

    X = np.random.default_rng(1).normal(size=(2000, 3))
    assert [tree.predict(row) for row in X.tolist()] == [walk(row) for row in X]
    assert [tree.predict(row) for row in X_train.tolist()] == [names[i] for i in estimator.predict(X_train)]
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


def test_a_threshold_prints_exactly():
    """Rounded down within 1e-5, the shipped H200 model's 24.99744415283203 printed as 24.9974, so a
    mean row in the sliver between read on the wrong side; any threshold now prints whole (a model
    trained by seer holds short ones, below)."""
    mean_row = Feature("mean_row", "mean row length", unit="nnz/row")
    assert mean_row.format_bound(24.99744415283203) == "24.99744415283203 nnz/row"
    assert mean_row.format_bound(17.15) == "17.15 nnz/row"  # the float below 17.15, read back as 17.15
    assert Feature("shift", "shifted rows").format_bound(0.9735795855522156) == "0.9735795855522156"
    assert Feature("x", "x").format_bound(2e-7) == "0.0000002"
    assert Feature("x", "x").format_bound(-0.0) == "0"
    assert Feature("x", "x").format_bound(1234.5678) == "1,234.5678"


def test_a_decision_lists_a_code_by_its_name_and_other_values_as_they_are():
    """GEMM's dtype listed as its code (dtype=1) in `seer explain`'s features line."""
    from seer.features.gemm import KNOWN

    dtype = {f.name: f for f in KNOWN}["dtype"]
    assert (dtype.show(0), dtype.show(1), dtype.show(1.0)) == ("fp16", "bf16", "bf16")
    assert dtype.show(7) == "7"  # a code with no name (a newer table) still prints
    assert Feature("waves", "waves").show(27.151515) == "27.15" and Feature("n", "n").show(4096) == "4096"


@pytest.mark.parametrize("low, high, bound", [
    (10.2, 97.0, 50.0),  # one digit: 20 to 90 fit, 50 is nearest the midpoint
    (17.1, 17.2, 17.1),  # the float 17.1 lies a hair above the decimal 17.1: still fits
    (17.11963, 17.11964, 17.11963),
    (24.99, 25.01, 25.0),
    (10240.0, 10241.0, 10240.0),
    (1000.0, 100000.0, 50000.0),
    (-5.3, -5.1, -5.2),
    (-5.0, 3.0, 0.0),
    (0.3, 0.30000000000000004, 0.3),  # neighbouring floats
])
def test_readable_bound_is_the_shortest_decimal_from_low_up_to_high(low, high, bound):
    assert readable_bound(low, high) == bound


def test_readable_bound_splits_and_no_shorter_decimal_does():
    rng = np.random.default_rng(1)
    for _ in range(3000):
        low = float(rng.uniform(-1e3, 1e3) * 10.0 ** rng.integers(-9, 9))
        high = low + abs(low) * 10.0 ** rng.uniform(-15, 0.5) if rng.random() < 0.9 else math.nextafter(low, math.inf)
        if not low < high:
            continue
        bound = readable_bound(low, high)
        assert low <= bound < high, (low, high, bound)
        digits = len(repr(abs(bound)).replace("e", "E").split("E")[0].replace(".", "").strip("0"))
        shorter = [float(f"{low:.{d}e}") for d in range(max(digits - 1, 1))] + \
                  [float(f"{math.nextafter(low, math.inf):.{d}e}") for d in range(max(digits - 1, 1))]
        assert not any(low <= s < high and len(repr(abs(s)).split("e")[0].replace(".", "").strip("0")) < digits
                       for s in shorter), (low, high, bound)


def test_readable_bound_refuses_an_empty_or_infinite_range():
    for low, high in ((1.0, 1.0), (2.0, 1.0), (1.0, math.inf), (math.nan, 1.0)):
        with pytest.raises(ValueError, match="finite low < high"):
            readable_bound(low, high)


def test_training_puts_each_threshold_at_the_shortest_decimal_between_the_values_it_splits():
    """scikit-learn splits at midpoints (6.505 between 3.14 and 9.87; 1.125 between 1 and 1.25):
    seer keeps the shortest decimal between the two, which the rules print whole."""
    X = np.array([[1.23], [2.71], [3.14], [9.87], [11.5], [12.0]])
    y = np.array([0, 0, 0, 1, 1, 1])
    estimator = DecisionTreeClassifier().fit(X, y)
    assert estimator.tree_.threshold[0] == pytest.approx(6.505)
    tree = Tree.from_sklearn(estimator, ["x"], ["a", "b"], X, one_hot_costs(y, 2))
    assert tree.threshold[0] == 7.0 and condition_text(Feature("x", "x"), tree.threshold[0], True) == "x <= 7"
    assert [tree.predict(row) for row in X.tolist()] == ["a", "a", "a", "b", "b", "b"]
    X = np.array([[0.5], [1.0], [1.25], [2.0]])
    tree = Tree.from_sklearn(DecisionTreeClassifier().fit(X, y[1:5]), ["x"], ["a", "b"], X, one_hot_costs(y[1:5], 2))
    assert tree.threshold[0] == 1.0  # [1, 1.25): 1 is the one one-digit decimal, not 1.1
    _, random, _ = random_tree(max_depth=4)
    inner = [t for t in random.threshold if t is not None]
    assert inner and all(len(repr(abs(t)).replace(".", "").strip("0")) <= 6 for t in inner)


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


def test_a_gate_over_a_tree_of_its_own_label_is_that_leaf():
    """Below the gate the tree came down to the gate's label: the gate had split with that label on
    both sides, a dead branch printed in the rules (a review)."""
    X = np.array([[1.0, 5.0], [2.0, 50.0], [3.0, 500.0]])
    costs = np.array([[2.0, 2.0, 1.0]] * 3)
    below = Tree(["a", "b"], ["x", "y", "g"], [1, -1, -1], [200.0, None, None], [1, -1, -1], [2, -1, -1],
                 [-1, 2, 0], [3, 2, 1], [0.0] * 3)
    gated = below.gated("b", 100.0, "g", X, costs)
    assert gated.feature == (-1,) and gated.labels[gated.label[0]] == "g" and gated.n_samples == (3,)


def test_regrets_do_not_depend_on_the_last_bits_of_the_times():
    """numpy's log differs in its last bits between builds and CPUs; those bits used to flip
    near-tied splits, so the same table trained to other trees on the GPU host (NOTES SpMV 35)."""
    costs = np.random.default_rng(7).uniform(1.0, 50.0, size=(300, 6))
    nudged = np.nextafter(costs, np.inf)  # one unit in the last place, as another log would differ
    assert not np.array_equal(np.log(costs), np.log(nudged))
    assert np.array_equal(log_regret(costs), log_regret(nudged))
