"""A decision tree that predicts in pure Python: no scikit-learn at run time.

Nodes are stored as parallel arrays (``feature``, ``threshold``, ``left``, ``right``,
``label``, ``n_samples``, ``mean_regret``); node 0 is the root. A sample goes left when
``value <= threshold``. Leaves have ``left == right == feature == -1`` and a ``label`` index
into ``labels``; inner nodes have ``label == -1``.

Trees are grown by scikit-learn and converted with :meth:`Tree.from_sklearn`, which labels
every node with the choice of least total log-regret over its training samples (the quantity
the fraction-of-oracle score measures) rather than the estimator's own prediction, and merges
splits whose two sides end up choosing the same label, so exported rules have no dead branches.

Children always come after their parent (pre-order), which rules out cycles.

``predict`` is a plain list-indexing loop: about 0.3 microseconds for a depth-8 tree on one
CPU core (timeit, tests/test_tree.py::test_predict_takes_microseconds).
"""
from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from seer.errors import ModelError
from seer.features_base import Feature

FIELDS = ("feature", "threshold", "left", "right", "label", "n_samples", "mean_regret")
KEYS = ("features", "labels", *FIELDS)  # a tree's whole JSON object


class Step(NamedTuple):
    """One decision on the way from the root to a leaf."""

    feature: str
    threshold: float
    goes_left: bool
    value: float

    def describe(self, feature: Feature) -> str:
        """``"nnz = 12,000 > 10,240"`` in the feature's own words and units; the value printed with
        as many more digits as it takes to read on its side of the printed bound, and both exactly
        where the value lies between the printed bound and the threshold itself."""
        bound, value = feature.format_bound(self.threshold), feature.format(self.value)
        for digits in range(4, 18):
            if feature.integer or _reads_on_its_side(value, bound, self.goes_left):
                return f"{feature.label} = {value} {_op(self.goes_left)} {bound}"
            value = f"{self.value:,.{digits}g} {feature.unit}".rstrip()
        exact = f"{self.value!r} {feature.unit}".rstrip(), f"{self.threshold!r} {feature.unit}".rstrip()
        return f"{feature.label} = {exact[0]} {_op(self.goes_left)} {exact[1]}"


def _reads_on_its_side(value: str, bound: str, goes_left: bool) -> bool:
    def number(text: str) -> float:
        return float(text.split()[0].replace(",", ""))

    return number(value) <= number(bound) if goes_left else number(value) > number(bound)


def condition_text(feature: Feature, threshold: float, goes_left: bool, ascii_only: bool = True) -> str:
    """``"nnz <= 10,240"`` (left branch) or ``"nnz > 10,240"`` (right branch)."""
    return f"{feature.label} {_op(goes_left, ascii_only)} {feature.format_bound(threshold)}"


def _op(goes_left: bool, ascii_only: bool = True) -> str:
    if goes_left:
        return "<=" if ascii_only else "≤"
    return ">"


# Regrets are rounded to this many decimals (1e-10 of a log ratio): numpy's log differs in the last
# bits between builds and CPUs, and those bits flipped near-tied splits (rows against columns on
# square matrices), so a model trained here differed from the same table's trained on the GPU host
# (python 3.11, numpy 2.4.6 here; 3.12, 2.5.2 there; rounded, both give the same trees).
REGRET_DECIMALS = 10


def log_regret(costs: np.ndarray) -> np.ndarray:
    """log(cost / best cost) per sample and label: 0 for the best label, > 0 otherwise."""
    return np.round(np.log(costs / costs.min(axis=1, keepdims=True)), REGRET_DECIMALS)


def node_choices(estimator: Any, X: np.ndarray, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node of a fitted scikit-learn tree: (label of least log-regret, samples, mean regret).

    ``costs[i, l]`` is what choosing label ``l`` costs sample ``i``; regret is a ratio
    (0.07 = 7 % slower than the best label). Nodes that no sample of ``X`` reaches get label 0.
    """
    return _choices(estimator.decision_path(X), costs)


def _choices(reached, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`node_choices` from the samples' decision paths (``reached``: [samples, nodes])."""
    summed_log, summed_ratio, n_samples = _node_sums(reached, costs)
    best = summed_log.argmin(axis=1)
    return best, n_samples, _mean_regret(summed_ratio, n_samples, best)


def _node_sums(reached, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node and label, over the samples that reach the node (``reached``: [samples, nodes],
    sparse or dense): summed log-regret, summed regret ratio (0.07 = 7 % slower), and per node the
    sample count."""
    summed_log = np.asarray(reached.T @ log_regret(costs))
    summed_ratio = np.asarray(reached.T @ (costs / costs.min(axis=1, keepdims=True) - 1.0))
    n_samples = np.asarray(reached.sum(axis=0)).ravel().astype(int)
    return summed_log, summed_ratio, n_samples


def _mean_regret(summed_ratio: np.ndarray, n_samples: np.ndarray, label: np.ndarray) -> np.ndarray:
    """Each node's mean regret ratio for its ``label``; 0 where no sample reaches it (rounded as
    the regrets are: the model file is then the same wherever the table is trained)."""
    chosen = summed_ratio[np.arange(len(label)), label]
    return np.round(np.divide(chosen, n_samples, out=np.zeros_like(chosen), where=n_samples > 0), REGRET_DECIMALS)


class Tree:
    """A validated decision tree; see the module docstring for the layout."""

    def __init__(
        self,
        features: Sequence[str],
        labels: Sequence[str],
        feature: Sequence[int],
        threshold: Sequence[float | None],
        left: Sequence[int],
        right: Sequence[int],
        label: Sequence[int],
        n_samples: Sequence[int],
        mean_regret: Sequence[float],
    ):
        self.features = tuple(features)
        self.labels = tuple(labels)
        self.feature = tuple(feature)
        self.threshold = tuple(_number(t, "threshold", none_ok=True) for t in threshold)
        self.left = tuple(left)
        self.right = tuple(right)
        self.label = tuple(label)
        self.n_samples = tuple(n_samples)
        self.mean_regret = tuple(_number(r, "mean_regret") for r in mean_regret)
        _validate(self)
        self._leaf_name = tuple(self.labels[i] if i >= 0 else None for i in self.label)

    # ------------------------------------------------------------------ building

    @classmethod
    def from_sklearn(
        cls, estimator: Any, features: Sequence[str], labels: Sequence[str], X: np.ndarray, costs: np.ndarray
    ) -> Tree:
        """Convert a fitted scikit-learn decision tree grown on ``X`` (columns = ``features``).

        ``costs[i, l]`` is the cost (time) of choosing ``labels[l]`` for row ``i`` of ``X``;
        it decides each node's label and its mean regret.
        """
        raw = estimator.tree_
        reached = estimator.decision_path(X).tocsc()  # read once: the labels, then each node's values
        best, n_samples, mean_regret = _choices(reached, costs)
        uniform = _uniform_labels(raw.children_left, raw.children_right, best)

        def children(node: int) -> tuple[int, ...]:
            return () if uniform[node] >= 0 else (int(raw.children_left[node]), int(raw.children_right[node]))

        order = preorder(0, children)
        index = {node: i for i, node in enumerate(order)}
        nodes = []
        for node in order:
            counted = (int(n_samples[node]), float(mean_regret[node]))
            if uniform[node] >= 0:
                nodes.append((-1, None, -1, -1, int(uniform[node]), *counted))
                continue
            left, right = children(node)
            values = X[reached[:, node].nonzero()[0], raw.feature[node]]
            threshold = float(raw.threshold[node])
            nodes.append((int(raw.feature[node]), readable_split(values, _sklearn_left(values, threshold), threshold),
                          index[left], index[right], -1, *counted))
        return cls(features, labels, *zip(*nodes))

    def gated(self, feature: str, threshold: float, label: str, X: np.ndarray, costs: np.ndarray) -> Tree:
        """A new root: ``label`` where ``feature > threshold``, this tree below it, less the branches
        the gate leaves no input (rules would print them); a leaf of ``label`` where that tree comes
        down to it too. Every node's statistics are recounted on
        the rows of ``X`` (columns = ``features``) that reach it."""
        below = self._at_most(self.features.index(feature), threshold)
        if below.is_leaf(0) and below.labels[below.label[0]] == label:  # the gate's label on both sides
            return below._recounted(X, costs)
        shift = [child + 1 if child >= 0 else -1 for child in (*below.left, *below.right)]
        n = len(below.left)
        tree = Tree(
            self.features, self.labels,
            [self.features.index(feature), *below.feature, -1],
            [threshold, *below.threshold, None],
            [1, *shift[:n], -1],
            [n + 1, *shift[n:], -1],
            [-1, *below.label, self.labels.index(label)],
            [0] * (n + 2), [0.0] * (n + 2),
        )
        return tree._recounted(X, costs)

    def _at_most(self, feature: int, bound: float) -> Tree:
        """This tree for inputs whose ``feature`` is at most ``bound``: a split on it at ``bound`` or
        above sends them all left, so its left subtree takes its place, and a split left with one
        label on both sides becomes a leaf of it. Statistics are left for the caller to recount."""
        def kept(node: int) -> int:
            """The node that takes ``node``'s place: the first below it that is no such split."""
            while self.left[node] >= 0 and self.feature[node] == feature and self.threshold[node] >= bound:
                node = self.left[node]
            return node

        def kept_children(node: int) -> tuple[int, ...]:
            return () if self.is_leaf(node) else (kept(self.left[node]), kept(self.right[node]))

        # The one label a kept subtree comes down to, or -1 where a split in it still parts two labels.
        single = {}
        for node in reversed(preorder(kept(0), kept_children)):  # children first
            if self.is_leaf(node):
                single[node] = self.label[node]
            else:
                left, right = (single[child] for child in kept_children(node))
                single[node] = left if left == right else -1
        order = preorder(kept(0), lambda node: () if single[node] >= 0 else kept_children(node))
        index = {node: i for i, node in enumerate(order)}
        nodes = []
        for node in order:
            if single[node] >= 0:
                nodes.append((-1, None, -1, -1, single[node], 0, 0.0))
            else:
                left, right = kept_children(node)
                nodes.append((self.feature[node], self.threshold[node], index[left], index[right], -1, 0, 0.0))
        return Tree(self.features, self.labels, *zip(*nodes))

    def _recounted(self, X: np.ndarray, costs: np.ndarray) -> Tree:
        """This tree with ``n_samples`` and ``mean_regret`` counted on ``X`` as in :func:`node_choices`:
        a leaf's regret is its label's, an inner node's that of its best label."""
        summed_log, summed_ratio, n_samples = _node_sums(self._reach(X), costs)
        label = np.where(np.array(self.label) >= 0, self.label, summed_log.argmin(axis=1))
        return Tree(self.features, self.labels, self.feature, self.threshold, self.left, self.right,
                    self.label, n_samples.tolist(), _mean_regret(summed_ratio, n_samples, label).tolist())

    def _reach(self, X: np.ndarray) -> np.ndarray:
        """[rows, nodes]: whether each row of ``X`` passes through each node."""
        reach = np.zeros((len(X), len(self.left)), dtype=bool)
        reach[:, 0] = True
        for node in range(len(self.left)):  # parents precede children
            if self.left[node] >= 0:
                goes_left = X[:, self.feature[node]] <= self.threshold[node]
                reach[:, self.left[node]] = reach[:, node] & goes_left
                reach[:, self.right[node]] = reach[:, node] & ~goes_left
        return reach

    # ------------------------------------------------------------------ prediction

    def predict(self, values: Sequence[float]) -> str:
        """The label for one sample; ``values`` in the order of ``features``."""
        left, right, feature, threshold = self.left, self.right, self.feature, self.threshold
        node = 0
        while (child := left[node]) >= 0:
            node = child if values[feature[node]] <= threshold[node] else right[node]
        return self._leaf_name[node]

    def decision_path(self, values: Sequence[float]) -> list[Step]:
        """The decisions taken for ``values``, root first (empty for a single-leaf tree)."""
        steps = []
        node = 0
        while self.left[node] >= 0:
            f = self.feature[node]
            goes_left = values[f] <= self.threshold[node]
            steps.append(Step(self.features[f], self.threshold[node], goes_left, values[f]))
            node = self.left[node] if goes_left else self.right[node]
        return steps

    # ------------------------------------------------------------------ shape

    def is_leaf(self, node: int) -> bool:
        return self.left[node] < 0

    @property
    def depth(self) -> int:
        depths = [0] * len(self.left)
        for node in range(len(self.left)):  # parents precede children (checked by _validate)
            if self.left[node] >= 0:
                depths[self.left[node]] = depths[self.right[node]] = depths[node] + 1
        return max(depths)

    # ------------------------------------------------------------------ serialisation

    def to_dict(self) -> dict:
        return {
            "features": list(self.features),
            "labels": list(self.labels),
            "feature": list(self.feature),
            "threshold": [None if math.isnan(t) else t for t in self.threshold],
            "left": list(self.left),
            "right": list(self.right),
            "label": list(self.label),
            "n_samples": list(self.n_samples),
            "mean_regret": list(self.mean_regret),
        }

    @classmethod
    def from_dict(cls, data: Mapping, where: str = "tree") -> Tree:
        """Rebuild a tree from :meth:`to_dict` output, raising ModelError on anything malformed."""
        if not isinstance(data, Mapping):
            raise ModelError(f"{where}: expected an object, got {type(data).__name__}")
        missing = [key for key in KEYS if key not in data]
        if missing:
            raise ModelError(f"{where}: missing field(s) {missing}")
        unknown = sorted(str(key) for key in data if key not in KEYS)
        if unknown:
            raise ModelError(f"{where}: field(s) {unknown} that no tree has: written by another seer, or edited "
                             "by hand")
        for key in KEYS:
            if not isinstance(data[key], list):
                raise ModelError(f"{where}.{key}: expected a list, got {type(data[key]).__name__}")
        try:
            return cls(data["features"], data["labels"], *(data[key] for key in FIELDS))
        except ModelError as error:
            raise ModelError(f"{where}: {error}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tree) and self.to_dict() == other.to_dict()

    def decides_as(self, other: Tree | None) -> bool:
        """Whether ``other`` sends every input where this tree does: the same splits and leaves,
        whatever the training statistics the two hold."""
        def splits(tree: Tree) -> dict:
            return {k: v for k, v in tree.to_dict().items() if k not in ("n_samples", "mean_regret")}

        return isinstance(other, Tree) and splits(self) == splits(other)

    def __repr__(self) -> str:
        return f"Tree({len(self.left)} nodes, depth {self.depth}, labels {list(self.labels)})"


def readable_split(values: np.ndarray, goes_left: np.ndarray, threshold: float) -> float:
    """The threshold to keep for a split of ``values`` (float64) that sends ``goes_left`` left,
    made at ``threshold``: :func:`readable_bound` of the largest value sent left and the smallest
    sent right, which splits them alike and prints whole in the rules (``<= 17 flop/byte`` for
    17.1196...), so that the rules a person reads send every value where the tree does.
    ``threshold`` itself where one side is empty."""
    if goes_left.all() or not goes_left.any():
        return threshold
    return readable_bound(float(values[goes_left].max()), float(values[~goes_left].min()))


def _sklearn_left(values: np.ndarray, threshold: float) -> np.ndarray:
    """Which ``values`` scikit-learn sent left: it compares in float32, where above 2**24
    neighbouring whole numbers merge, so its threshold can equal a value it sent right. Float32
    rounding keeps order, so the left values still all lie below the right ones."""
    return values.astype(np.float32).astype(np.float64) <= threshold


def readable_bound(low: float, high: float) -> float:
    """The number of fewest significant digits from ``low`` up to, not including, ``high``
    (nearest their midpoint among equals): a split ``value <= bound`` sends ``low`` left and
    ``high`` right, and ``repr`` prints it whole. ``low < high``, both finite."""
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"readable_bound needs finite low < high, got {low!r} and {high!r}")
    if low <= 0.0 < high:
        return 0.0
    low_, high_ = Decimal(low), Decimal(high)
    middle = (low_ + high_) / 2
    top = math.floor(math.log10(max(abs(low), abs(high))))
    for digits in range(1, 18):
        step = Decimal(10) ** (top + 1 - digits)

        def value(n: Decimal) -> float:
            return float(n * step)

        # Compared as floats: a float's own decimal (17.1) may lie a hair off the float (17.1000...01).
        first = (low_ / step).to_integral_value(rounding=ROUND_FLOOR)
        first += value(first) < low
        last = (high_ / step).to_integral_value(rounding=ROUND_CEILING)
        while last >= first and value(last) >= high:
            last -= 1
        if first <= last:
            return value(min(max((middle / step).to_integral_value(rounding=ROUND_HALF_EVEN), first), last))
    return low  # 17 significant digits name every float


def _uniform_labels(left: np.ndarray, right: np.ndarray, best: np.ndarray) -> np.ndarray:
    """Per node: its label if every leaf below it chooses that same label, else -1."""
    uniform = np.full(len(left), -1)
    for node in reversed(preorder(0, lambda node: () if left[node] < 0 else (int(left[node]), int(right[node])))):
        if left[node] < 0:
            uniform[node] = best[node]
        else:  # its children come after it in the order: done already
            a, b = uniform[left[node]], uniform[right[node]]
            uniform[node] = a if a == b and a >= 0 else -1
    return uniform


def preorder(root: int, children: Callable[[int], tuple[int, ...]]) -> list[int]:
    """The nodes from ``root`` down in the order a Tree stores them: each before its children, a
    left subtree before the right; ``children(node)`` is (left, right), or () where to go no further.
    An explicit stack rather than recursion: a tree may be deeper than Python's recursion limit."""
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(reversed(children(node)))
    return order


def _number(value: Any, what: str, none_ok: bool = False) -> float:
    """``value`` as a float (None -> NaN where allowed); ModelError for anything else."""
    if value is None and none_ok:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ModelError(f"{what} entries must be numbers, got {value!r}")
    try:
        return float(value)
    except OverflowError:  # an integer beyond any float: no tree is trained on such a bound
        raise ModelError(f"{what} entries must be numbers a float holds, got one of {int(value).bit_length()} bits") from None


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _names(values: tuple, what: str) -> None:
    if not all(isinstance(v, str) and v for v in values):
        raise ModelError(f"{what} must be non-empty strings, got {list(values)}")
    if len(set(values)) != len(values):
        raise ModelError(f"{what} contain duplicates: {list(values)}")


def _validate(tree: Tree) -> None:
    """Check that the arrays describe one tree rooted at node 0 with valid features and labels."""
    _names(tree.features, "features")
    _names(tree.labels, "labels")
    if not tree.labels:
        raise ModelError("a tree needs at least one label")
    n = len(tree.left)
    lengths = {name: len(getattr(tree, name)) for name in FIELDS}
    if n == 0 or len(set(lengths.values())) != 1:
        raise ModelError(f"node arrays must be non-empty and of equal length, got {lengths}")
    parents = [0] * n
    for node in range(n):
        _validate_node(tree, node, n)
        if tree.left[node] >= 0:
            for child in (tree.left[node], tree.right[node]):
                if child <= node:
                    # Children after parents rules out cycles and keeps depth() one pass.
                    raise ModelError(f"node {node}: child {child} does not come after its parent")
                parents[child] += 1
    if any(count != 1 for count in parents[1:]):
        bad = [node for node in range(1, n) if parents[node] != 1]
        raise ModelError(f"nodes {bad} do not have exactly one parent: the arrays do not form a tree")


def _validate_node(tree: Tree, node: int, n: int) -> None:
    left, right, feature, label = tree.left[node], tree.right[node], tree.feature[node], tree.label[node]
    if not all(_is_int(v) for v in (left, right, feature, label, tree.n_samples[node])):
        raise ModelError(f"node {node}: feature, left, right, label and n_samples must be integers")
    if tree.n_samples[node] < 0:
        raise ModelError(f"node {node}: n_samples is negative")
    regret = tree.mean_regret[node]
    if not (math.isfinite(regret) and regret >= 0):
        raise ModelError(f"node {node}: mean_regret must be finite and >= 0, got {regret}")
    if left == -1 and right == -1:
        if feature != -1 or not 0 <= label < len(tree.labels):
            raise ModelError(f"node {node}: a leaf needs feature -1 and a label in [0, {len(tree.labels)}), got {feature}, {label}")
        if not math.isnan(tree.threshold[node]):
            raise ModelError(f"node {node}: a leaf has no threshold (null), got {tree.threshold[node]}")
        return
    if not (0 < left < n and 0 < right < n):
        raise ModelError(f"node {node}: children ({left}, {right}) out of range 1..{n - 1}")
    if not 0 <= feature < len(tree.features):
        raise ModelError(f"node {node}: feature index {feature} out of range for {len(tree.features)} features")
    if label != -1:
        raise ModelError(f"node {node}: an inner node has label -1, got {label}")
    if not math.isfinite(tree.threshold[node]):
        raise ModelError(f"node {node}: threshold must be a finite number, got {tree.threshold[node]}")
