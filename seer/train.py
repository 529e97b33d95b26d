"""Training two-stage selectors from profile tables, scored by grouped cross-validation.

Costs are per expected number of calls ``c`` on the same input: variant ``v`` costs
``t_v + p_v / c`` per call, its time per call plus its one-time preparation ``p_v`` (the
table's ``prepare_ms:<v>``, 0 where absent) spread over the calls. Both stages have one tree
per call count. Stage 2 (when the table has gathered features) learns known + gathered
features -> the variant of least cost per call. Stage 1 learns known features -> the cheapest
of ``c * t_v + p_v`` for every variant ``v`` and ``gather_ms + c * t_s + p_s`` for gathering,
``s`` being stage 2's pick for ``c`` calls; the stage-2 picks there are out-of-fold, so stage 1
sees how good stage 2 really is on inputs it was not trained on. Without preparation costs
every call count has the same stage-2 costs, so one stage-2 tree serves them all (and without
gathering, one stage-1 tree too). Seer's own split (per call count, a gate between a tree on
known features and gathering) was tried and scored the same (``benchmarks/NOTES.md``, SpMV 12).
What stage 1 keeps instead (:func:`_gated`) is narrower: after its tree is tuned, a threshold on
one known feature above which it gathers, where that beats the tree's out-of-fold choices; held
out, it kept the tree from sending unseen families to kernels many times slower (SpMV 29).

Both stages are regret trees: scikit-learn grows a multi-output regression tree on each row's
log-slowdown of every choice (log(t_v / t_best)), clipped at ``regret_cap``, and each leaf takes
the choice of least total log-regret (see :mod:`seer.tree`). Splits thus separate inputs by which
choices are near-best for them, which is what the fraction-of-oracle score measures; a
classifier of the single fastest variant (the first design) splits on which variant wins by
however little, and scored 0.65-0.70 of the oracle on large SpMV inputs at one call against
0.77-0.79 for regret trees (``benchmarks/NOTES.md``). The cap keeps inputs where a choice is
hopeless from dominating the squared error: beyond it, how slow a wrong choice is does not
change which choices a split should group.

Tree size (``max_depth``, ``min_samples_leaf``) and the cap are chosen per tree by grouped K-fold
CV on the table's ``group`` column: a family of inputs is never on both sides of a split. Among
candidates within ``SIMPLER_WITHIN`` of the best held-out fraction of oracle the simplest
wins, which keeps the exported rules short. :meth:`TwoStageSelector.evaluate` repeats the
whole procedure inside an outer grouped CV (nested CV), so its scores are on groups that
neither the trees nor their size were chosen on.

Small tables: with fewer groups than ``folds``, as many folds as groups are used (with a
``SeerWarning``). ``fit`` needs at least 2 groups and ``evaluate`` at least 3 (each outer
training part must itself be split); fewer raise ``ProfileTableError``.
"""
from __future__ import annotations

import json
import math
import numbers
import platform
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import sklearn
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GroupKFold
from sklearn.tree import DecisionTreeRegressor

from seer.errors import ModelError, ProfileTableError, warn, warn_once
from seer.features_base import reads_dtype
from seer.model import GATHER, SelectorModel, nearest_calls, op_feature_module
from seer.table import TIME, ProfileTable, device_of, meta_path, misspelt_hint, read_meta, read_table, table_sha256
from seer.tree import Tree, log_regret, node_choices, readable_split

DEFAULT_DEPTHS = (1, 2, 3, 4, 5, 6, 8, None)
DEFAULT_LEAVES = (1, 2, 4, 8)
DEFAULT_REGRET_CAPS = (0.1, 0.25, 0.5, 1.0)  # log-slowdowns: 10%, 28%, 65%, 2.7x
DEFAULT_CALLS = (1, 10, 100, 1000)
_told_free_gathering: set = set()  # the tables (by path, else frame) warned of for lacking gather_ms
# Prefer a simpler tree when it is this close (in fraction of oracle) to the best one.
SIMPLER_WITHIN = 0.002


def grouped_folds(groups: np.ndarray, folds: int, seed: int | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train rows, test rows) per fold of grouped K-fold CV: no group on both sides.

    ``seed`` None: scikit-learn's assignment, which balances fold sizes and is the same on every
    run. An int: groups dealt to folds in a seeded random order instead, so that repeating the
    scoring over seeds shows how much the scores owe to one assignment of groups to folds.
    """
    if seed is None:
        return list(GroupKFold(n_splits=folds).split(np.zeros(len(groups)), groups=groups))
    names = np.unique(groups)
    fold_of_group = dict(zip(np.random.default_rng(seed).permutation(names), np.arange(len(names)) % folds))
    fold = np.array([fold_of_group[g] for g in groups])
    return [(np.flatnonzero(fold != k), np.flatnonzero(fold == k)) for k in range(folds)]


@dataclass(frozen=True)
class _Data:
    """The numbers training uses, as arrays (rows in table order)."""

    known: np.ndarray  # [n, known features]
    full: np.ndarray | None  # [n, known + gathered features]; None without stage 2
    times: np.ndarray  # [n, variants] ms per call
    prepare: np.ndarray  # [n, variants] one-time ms per input, 0 where a variant needs none
    gather_ms: np.ndarray  # [n]
    groups: np.ndarray  # [n]

    @classmethod
    def of(cls, table: ProfileTable, known: Sequence[str], gathered: Sequence[str]) -> _Data:
        missing = [name for name in (*known, *gathered) if name not in table.frame.columns]
        if missing:
            raise ProfileTableError(f"the table lacks feature column(s) {missing} that the selector was fitted on")
        gather_ms = table.gather_ms
        if gathered and gather_ms is None:  # said once a table: training reads it in several passes
            warn_once(_told_free_gathering, "the table has gathered features but no 'gather_ms' column: training and "
                      "its scores treat gathering as free", key=table.path or id(table.frame))
        return cls(
            known=table.features(known),
            full=table.features([*known, *gathered]) if gathered else None,
            times=table.times,
            prepare=table.prepare_ms,
            gather_ms=np.zeros(len(table)) if gather_ms is None else gather_ms,
            groups=table.groups,
        )

    def take(self, rows: np.ndarray) -> _Data:
        return _Data(
            self.known[rows], None if self.full is None else self.full[rows],
            self.times[rows], self.prepare[rows], self.gather_ms[rows], self.groups[rows],
        )

    @property
    def has_preparation(self) -> bool:
        """Whether any variant has a preparation cost (else every call count costs the same per call)."""
        return bool(self.prepare.any())

    def cost(self, calls: int) -> np.ndarray:
        """[n, variants] ms per call over ``calls`` calls: the time per call plus the preparation spread over them."""
        return self.times + self.prepare / calls


@dataclass(frozen=True)
class _Fitted:
    """One tuned tree, its chosen hyper-parameters and its out-of-fold label indices."""

    tree: Tree
    params: dict
    out_of_fold: np.ndarray


class TwoStageSelector:
    """Trains stage-1 and stage-2 trees (one per call count each) from a profile table.

    ``max_depth``, ``min_samples_leaf`` and ``regret_cap`` are each a value, a list of candidates,
    or None for the defaults (``DEFAULT_DEPTHS``, ``DEFAULT_LEAVES``, ``DEFAULT_REGRET_CAPS``);
    candidates are compared by grouped CV. ``(None,)`` as ``max_depth`` means "unlimited depth,
    no search". ``fold_seed`` deals groups to folds at random (see :func:`grouped_folds`).
    """

    def __init__(self, max_depth=None, min_samples_leaf=None, calls: Sequence[int] = DEFAULT_CALLS, folds: int = 5,
                 random_state: int = 0, regret_cap=None, fold_seed: int | None = None):
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.regret_cap = regret_cap
        self.calls = tuple(calls)
        self.folds = folds
        self.random_state = random_state
        self.fold_seed = fold_seed
        # The too-few-groups notices said: a command scores a table, then fits it, and each counts its
        # folds; the notice is said once.
        self._told_fewer_folds: set = set()

    # ------------------------------------------------------------------ fitting

    def fit(self, table: ProfileTable) -> TwoStageSelector:
        self._search_space()  # its hyper-parameters checked before the table's folds are counted
        data = _Data.of(table, table.known_features, table.gathered_features)
        self._fit(data, table, self._folds_of(table, data, minimum=2))
        return self

    def _fit(self, data: _Data, table: ProfileTable, folds: int) -> None:
        depths, leaves, caps = self._search_space()
        self.variants_ = table.variants
        self.known_ = table.known_features
        self.gathered_ = table.gathered_features
        splits = grouped_folds(data.groups, folds, self.fold_seed)

        def tune(X: np.ndarray, costs: np.ndarray, features: Sequence[str], labels: Sequence[str]) -> _Fitted:
            return _tune_tree(X, costs, features, labels, splits, depths, leaves, caps, self.random_state)

        counts = sorted(set(self.calls))
        stage2 = self._fit_stage2(data, counts, tune) if data.full is not None else {}
        stage1 = self._fit_stage1(data, counts, tune, stage2)
        self.stage1_ = {calls: fitted.tree for calls, fitted in stage1.items()}
        self.stage2_ = {calls: fitted.tree for calls, fitted in stage2.items()} or None
        self.hyperparameters_ = {
            "folds": folds,
            "stage1": {str(calls): fitted.params for calls, fitted in stage1.items()},
            "stage2": {str(calls): fitted.params for calls, fitted in stage2.items()} or None,
        }

    def _fit_stage2(self, data: _Data, counts: list[int], tune: Callable[..., _Fitted]) -> dict[int, _Fitted]:
        """A tuned stage-2 tree per call count, on known + gathered features."""
        def fit(calls: int) -> _Fitted:
            return tune(data.full, data.cost(calls), (*self.known_, *self.gathered_), self.variants_)

        # Without preparation every count costs data.times per call: one tree serves them all.
        return _per_count(counts, fit, one_serves_all=not data.has_preparation)

    def _fit_stage1(self, data: _Data, counts: list[int], tune: Callable[..., _Fitted],
                    stage2: dict[int, _Fitted]) -> dict[int, _Fitted]:
        """A tuned stage-1 tree per call count, on known features; it may answer GATHER when there is a stage 2."""
        labels = (*self.variants_, GATHER) if stage2 else self.variants_

        def fit(calls: int) -> _Fitted:
            costs = _stage1_costs(data, stage2[calls].out_of_fold if stage2 else None, calls)
            fitted = tune(data.known, costs, self.known_, labels)
            return _gated(fitted, data.known, costs, self.known_, labels) if stage2 else fitted

        # Without gathering or preparation, c * t_v has the same argmin for every c: one tree serves all.
        return _per_count(counts, fit, one_serves_all=not stage2 and not data.has_preparation)

    def _search_space(self) -> tuple[tuple, tuple, tuple]:
        """The candidates of max_depth, min_samples_leaf and regret_cap; a ValueError that says what to
        pass where a hyper-parameter cannot be used (checked when fitting, as scikit-learn's estimators
        do): a cap of 0 clips every regret to 0 and trains a constant tree, and scikit-learn's own
        messages name its parameters, not these."""
        if not (self.calls and all(_is_whole(c, least=1) for c in self.calls)):
            raise ValueError(f"calls must be whole numbers of calls >= 1, e.g. (1, 100), got {self.calls}")
        if not _is_whole(self.folds, least=2):
            raise ValueError(f"folds must be a whole number >= 2 (grouped cross-validation), got {self.folds!r}")
        return (_candidates("max_depth", self.max_depth, DEFAULT_DEPTHS,
                            lambda v: v is None or _is_whole(v, least=1), "a whole number >= 1, or None for no limit"),
                _candidates("min_samples_leaf", self.min_samples_leaf, DEFAULT_LEAVES,
                            lambda v: _is_whole(v, least=1), "a whole number >= 1"),
                _candidates("regret_cap", self.regret_cap, DEFAULT_REGRET_CAPS, _is_cap,
                            "a positive, finite log-slowdown such as 0.5"))

    # ------------------------------------------------------------------ predicting

    def predict(self, table: ProfileTable, calls: int = 1) -> np.ndarray:
        """The variant chosen for each row of ``table`` (gathering where stage 1 says so)."""
        self._check_fitted()
        choice, _ = self._choose(_Data.of(table, self.known_, self.gathered_), calls)
        return np.asarray(self.variants_, dtype=object)[choice]

    def _choose(self, data: _Data, calls: int) -> tuple[np.ndarray, np.ndarray]:
        """(variant index, gathered?) per row."""
        index = {name: i for i, name in enumerate(self.variants_)}
        stage1 = self.stage1_[nearest_calls(self.stage1_, calls)]
        labels = [stage1.predict(row) for row in data.known.tolist()]
        gathered = np.array([label == GATHER for label in labels], dtype=bool)
        if gathered.any():
            full = data.full.tolist()
            stage2 = self._stage2_tree(calls)
            labels = [stage2.predict(full[i]) if g else label for i, (label, g) in enumerate(zip(labels, gathered))]
        return np.array([index[label] for label in labels], dtype=int), gathered

    def _stage2_choice(self, data: _Data, calls: int) -> np.ndarray:
        """Stage 2's variant index per row for ``calls`` calls, as if every row had been gathered."""
        index = {name: i for i, name in enumerate(self.variants_)}
        stage2 = self._stage2_tree(calls)
        return np.array([index[stage2.predict(row)] for row in data.full.tolist()], dtype=int)

    def _stage2_tree(self, calls: int) -> Tree:
        return self.stage2_[nearest_calls(self.stage2_, calls)]

    def _check_fitted(self) -> None:
        if not hasattr(self, "stage1_"):
            raise NotFittedError("this TwoStageSelector is not fitted yet; call fit(table) first")

    # ------------------------------------------------------------------ evaluating

    def evaluate(self, table: ProfileTable, calls: Sequence[int] = (1, 100),
                 free_gather_ms: np.ndarray | None = None) -> TrainingReport:
        """Held-out scores by nested grouped CV (the fitted state of ``self`` is not used).

        ``free_gather_ms`` (per row, in table order): what the gathered features cost when the
        input's validation pass measures them on its way; given, the report also scores that
        path (stage 2 decides every row, charged this cost) as ``validated_scores``."""
        calls = tuple(calls)
        self._search_space()  # checked before the outer folds are dealt
        data = _Data.of(table, table.known_features, table.gathered_features)
        folds = self._folds_of(table, data, minimum=3)
        n = len(table)
        choice = {c: np.zeros(n, dtype=int) for c in calls}
        gathered = {c: np.zeros(n, dtype=bool) for c in calls}
        stage2 = {c: np.zeros(n, dtype=int) for c in calls} if data.full is not None else None
        single = {c: np.zeros(n, dtype=int) for c in calls}
        fold_of = np.zeros(n, dtype=int)
        for k, (train, test) in enumerate(grouped_folds(data.groups, folds, self.fold_seed)):
            inner = TwoStageSelector(self.max_depth, self.min_samples_leaf, self.calls, self.folds, self.random_state,
                                     self.regret_cap, self.fold_seed)
            part = data.take(train)
            inner._fit(part, table, _fold_count(part.groups, self.folds, minimum=2, where=f"outer fold {k}"))
            held_out = data.take(test)
            for c in calls:
                choice[c][test], gathered[c][test] = inner._choose(held_out, c)
            if stage2 is not None:
                for c in calls:
                    stage2[c][test] = inner._stage2_choice(held_out, c)
            for c in calls:
                single[c][test] = _best_single(data.cost(c)[train])
            fold_of[test] = k
        report = _report(table, data, calls, folds, _Outcome(choice, gathered, single, fold_of))
        if free_gather_ms is not None and stage2 is not None:
            free_gather_ms = np.asarray(free_gather_ms, dtype=float)
            if free_gather_ms.shape != (n,) or not np.isfinite(free_gather_ms).all() or (free_gather_ms < 0).any():
                raise ValueError(f"free_gather_ms must hold {n} finite, non-negative costs (one per row)")
            validated = _Outcome(stage2, {c: np.ones(n, dtype=bool) for c in calls}, single, fold_of)
            charged = replace(data, gather_ms=free_gather_ms)
            report.validated_scores = _subset_scores(table, charged, calls, validated, _hand_rule(table)[0])
            report.validated_held_out = _held_out_frame(table, charged, calls, validated)
        return report

    def _folds_of(self, table: ProfileTable, data: _Data, minimum: int) -> int:
        """:func:`_fold_count` of ``table``, with a notice where it is fewer than asked (once per
        selector: a command scores and then fits one table)."""
        folds = _fold_count(data.groups, self.folds, minimum)
        if folds < self.folds:
            warn_once(self._told_fewer_folds, f"the table has only {folds} groups: using {folds}-fold instead of "
                      f"{self.folds}-fold grouped CV")
        return folds

    # ------------------------------------------------------------------ exporting

    def to_model(self, table: ProfileTable, command: str | None = None, scores: dict | None = None) -> SelectorModel:
        """The fitted trees as a :class:`SelectorModel` with provenance from ``table``."""
        self._check_fitted()
        training = {
            "table": None if table.path is None else str(table.path),
            "sha256": None if table.path is None else table_sha256(table.path),
            "rows": len(table),
            "groups": int(len(np.unique(table.groups))),
            "sources": _source_counts(table),
            "command": command,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "calls": sorted(self.stage1_),
            "random_state": self.random_state,
            "hyperparameters": self.hyperparameters_,
            "scores": scores,
        }
        if not reads_dtype(self.known_):  # a campaign profiles one dtype: float32 before the field was recorded
            training["dtype"] = table.meta.get("dtype", "float32")
        if "world_size" in self.known_:  # multi-GPU ops: the world sizes the trees have seen
            training["world_sizes"] = sorted(int(w) for w in table.frame["world_size"].dropna().unique())
        if "dtype_bytes" in self.known_:  # and their element sizes: a tree never split on one profiled alone
            training["element_sizes"] = sorted(int(b) for b in table.frame["dtype_bytes"].dropna().unique())
        return SelectorModel(
            op=table.op,
            variants=self.variants_,
            known_features=self.known_,
            gathered_features=self.gathered_ if self.stage2_ is not None else (),
            stage1=dict(self.stage1_),
            stage2=None if self.stage2_ is None else dict(self.stage2_),
            device=_device(table),
            versions=_versions(table.meta),
            training=training,
        )


def train_table(
    path: str | Path, op: str | None = None, out: str | Path | None = None, command: str | None = None,
    selector: TwoStageSelector | None = None,
) -> tuple[SelectorModel, TrainingReport]:
    """Read a profile table, score the procedure by nested CV, fit on all rows, save to ``out``."""
    if out is not None:
        check_model_path(path, out)
    table = read_table(path, op)
    _check_variants_known(table)
    selector = selector or TwoStageSelector()
    report = selector.evaluate(table)
    model = selector.fit(table).to_model(table, command=command, scores=report.to_dict())
    if out is not None:
        model.save(out)
    return model, report


def _check_variants_known(table: ProfileTable) -> None:
    """ProfileTableError where ``table`` times variants of a registered op that this install lacks:
    seer.dispatch refuses a model naming them, so it would be trained for nothing."""
    from seer.registry import OPS, variant_names

    if table.op not in OPS:  # an op seer has no kernels for: its variants are the table's own
        return
    registered = variant_names(table.op)
    missing = [name for name in table.variants if name not in registered]
    if missing:
        near = misspelt_hint(registered, missing, TIME)  # a column whose name is close to a variant's
        raise ProfileTableError(f"{table.path} times {table.op} variants this install of seer lacks: {missing}{near}; "
                                "seer.dispatch would refuse a model choosing among them: retire them (python -m "
                                f"seer.table retire {table.path} --variant NAME) or train with the seer that profiled them")


def check_model_path(table: str | Path, out: str | Path, beside: Sequence[str] = ()) -> None:
    """ModelError unless ``out`` is a ``.json`` path that, with the files of suffixes ``beside``
    written next to it (the rules), is neither the table nor its metadata nor any other file that
    training did not write: training must not write over what it reads, the rules must not write
    over the model, and neither over a file of the user's that shares the model's name."""
    table, out = Path(table), Path(out)
    if out.suffix != ".json":
        raise ModelError(f"the model path {out} must end in .json (models are JSON; their rules are written "
                         f"beside them as .txt, .md and .py); e.g. --out models/{table.stem}.json")
    inputs = {table.resolve(): "the profile table", meta_path(table).resolve(): "the profile table's metadata"}
    for written in (out, *(out.with_suffix(suffix) for suffix in beside)):
        if written.resolve() in inputs:
            raise ModelError(f"training would write {written} over {inputs[written.resolve()]}; "
                             f"write the model to a new file, e.g. --out models/{table.stem}.json")
        if written.is_dir():  # found only when they are written, after the training
            raise ModelError(f"{out} is a folder; name the model file, e.g. {out / 'spmv-mine.json'}" if written == out
                             else f"{written} is a folder, where training would write the model's rules: choose "
                                  "another --out, or move it away")
        if written.is_file() and not _written_by_training(written):
            raise ModelError(f"{written} exists and is not a seer model or its rules: training would write over it; "
                             "choose another --out, or move that file away")
    if out.is_file():
        _check_same_op_and_device(table, out)


def _check_same_op_and_device(table: Path, out: Path) -> None:
    """ModelError where the model at ``out`` is of another op, or measured on another GPU, than the table
    (where both say): retraining replaces a model, but a mistyped --out would destroy another one, and
    dispatch would then skip the file for the op it names, warning, far from the cause."""
    document, meta = json.loads(out.read_bytes()), read_meta(meta_path(table))
    model_device = (document.get("device") or {}).get("name") if isinstance(document.get("device"), dict) else None
    for what, theirs, ours in (("op", document.get("op"), meta.get("op")),
                               ("GPU", model_device, device_of(meta)["name"])):
        if theirs and ours and theirs != ours:
            raise ModelError(f"{out} holds a model of {what} {theirs!r}, and {table} was measured for {what} "
                             f"{ours!r}: training would write over another model; choose another --out "
                             f"(e.g. models/{table.stem}.json), or delete that model first")


def _written_by_training(path: Path) -> bool:
    """Whether ``path`` is a model (a JSON object whose schema is ``seer.model/...``) or begins as
    its rules do."""
    try:
        if path.suffix == ".json":
            document = json.loads(path.read_bytes())
            return isinstance(document, dict) and str(document.get("schema", "")).startswith("seer.model/")
        with open(path, "rb") as file:
            first_line = file.readline(512).decode("utf-8", errors="replace")
    except (OSError, ValueError):  # unreadable, or no JSON (UnicodeDecodeError is a ValueError)
        return False
    return "selection rules for op" in first_line.lower()


def _per_count(counts: list[int], fit: Callable[[int], _Fitted], one_serves_all: bool) -> dict[int, _Fitted]:
    """``fit(calls)`` for each call count, or the first count's fit for all of them."""
    if one_serves_all:
        return dict.fromkeys(counts, fit(counts[0]))
    return {calls: fit(calls) for calls in counts}


# ---------------------------------------------------------------------- tree search


def _tune_tree(
    X: np.ndarray, costs: np.ndarray, features: Sequence[str], labels: Sequence[str],
    splits: list[tuple[np.ndarray, np.ndarray]], depths: tuple, leaves: tuple, caps: tuple, random_state: int,
) -> _Fitted:
    """Pick (max_depth, min_samples_leaf, regret_cap) by grouped CV, then fit on all rows.

    scikit-learn grows trees depth first and a node's split does not depend on max_depth, so a
    depth-d tree is the unlimited tree cut at depth d (up to random tie-breaks): one fit per
    fold, leaf size and cap scores every depth, reading each held-out row's node at depth d.
    """
    regret = log_regret(costs)
    deepest = None if None in depths else max(depths)
    predicted = {(d, m, c): np.zeros(len(X), dtype=int) for d in depths for m in leaves for c in caps}
    for train, test in splits:
        for m in leaves:
            for c in caps:
                estimator = _regret_tree(deepest, m, random_state).fit(X[train], np.minimum(regret[train], c))
                node_label, _, _ = node_choices(estimator, X[train], costs[train])
                path = estimator.decision_path(X[test])
                path.sort_indices()  # node ids grow with depth along a path
                last = np.diff(path.indptr) - 1
                for d in depths:
                    step = last if d is None else np.minimum(d, last)
                    predicted[(d, m, c)][test] = node_label[path.indices[path.indptr[:-1] + step]]
    scores = {key: _fraction_of_oracle(regret, labels_) for key, labels_ in predicted.items()}
    depth, leaf, cap = _simplest_near_best(scores)
    estimator = _regret_tree(depth, leaf, random_state).fit(X, np.minimum(regret, cap))
    params = {"max_depth": depth, "min_samples_leaf": leaf, "regret_cap": cap,
              "cv_fraction_of_oracle": round(scores[(depth, leaf, cap)], 6)}
    return _Fitted(Tree.from_sklearn(estimator, features, labels, X, costs), params, predicted[(depth, leaf, cap)])


GATE_QUANTILES = np.linspace(0.05, 0.95, 19)


def _gated(fitted: _Fitted, X: np.ndarray, costs: np.ndarray, features: Sequence[str], labels: Sequence[str]) -> _Fitted:
    """The stage-1 tree, or the tree below a threshold on one known feature and GATHER above it,
    whichever scores better on the tree's out-of-fold choices (by more than SIMPLER_WITHIN).

    Why: a tree on known features alone groups inputs of one size whatever their structure, and
    on a family it never saw it may pick a variant many times slower than the best; gathering
    costs a bounded, measured amount. Held out, the trees sent unseen R-MAT families to row-mapped
    kernels 12-40x slower than their best at 100 calls, where gathering costs ~1% of the calls
    (benchmarks/NOTES.md, SpMV 28-29). Candidates: each known feature at the training rows'
    quantiles ``GATE_QUANTILES``, the one kept moved to the shortest decimal that gates the same rows."""
    regret = log_regret(costs)
    gather = labels.index(GATHER)
    best, choice = _fraction_of_oracle(regret, fitted.out_of_fold) + SIMPLER_WITHIN, None
    for j, name in enumerate(features):
        for threshold in np.unique(np.quantile(X[:, j], GATE_QUANTILES)):
            gated = np.where(X[:, j] > threshold, gather, fitted.out_of_fold)
            score = _fraction_of_oracle(regret, gated)
            if score > best:
                best, choice = score, (name, float(threshold), gated)
    if choice is None:
        return fitted
    name, threshold, out_of_fold = choice
    values = X[:, features.index(name)]
    threshold = readable_split(values, values <= threshold, threshold)
    params = {**fitted.params, "gate": {"feature": name, "gather_above": threshold,
                                         "cv_fraction_of_oracle": round(best, 6)}}
    return _Fitted(fitted.tree.gated(name, threshold, GATHER, X, costs), params, out_of_fold)


def _regret_tree(max_depth: int | None, min_samples_leaf: int, random_state: int) -> DecisionTreeRegressor:
    return DecisionTreeRegressor(max_depth=max_depth, min_samples_leaf=min_samples_leaf, random_state=random_state)


def _candidates(name: str, setting, default: tuple, valid: Callable[[object], bool], expected: str) -> tuple:
    """The candidates ``setting`` gives (None: ``default``; a value: itself; a list: its values; a
    string is one value, not its letters); a ValueError naming ``name`` unless each is ``valid``."""
    if setting is None:
        return default
    values = tuple(setting) if isinstance(setting, Iterable) and not isinstance(setting, str) else (setting,)
    if not values or not all(valid(value) for value in values):
        raise ValueError(f"{name} must be one candidate or a non-empty list of them, each {expected}; got {setting!r}")
    return values


def _is_whole(value, least: int) -> bool:
    """A whole number (numpy's too; not a bool) of at least ``least``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= least


def _is_cap(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _simplest_near_best(scores: dict[tuple, float]) -> tuple:
    best = max(scores.values())
    near = [key for key, score in scores.items() if score >= best - SIMPLER_WITHIN]
    return min(near, key=lambda key: (math.inf if key[0] is None else key[0], -key[1]))


def _fraction_of_oracle(regret: np.ndarray, labels: np.ndarray) -> float:
    return float(np.exp(-regret[np.arange(len(labels)), labels].mean()))


def _stage1_costs(data: _Data, stage2_pick: np.ndarray | None, calls: int) -> np.ndarray:
    """[n, variants (+ gather)] total ms of ``calls`` calls for each stage-1 choice, preparation included."""
    run = calls * data.cost(calls)
    if stage2_pick is None:
        return run
    after_gathering = data.gather_ms + run[np.arange(len(run)), stage2_pick]
    return np.column_stack([run, after_gathering])


def _best_single(times: np.ndarray) -> int:
    """The variant with the best geometric-mean time (or cost) per call: what one would ship without
    seer, for that many calls on an input."""
    return int(np.log(times).sum(axis=0).argmin())


def _fold_count(groups: np.ndarray, wanted: int, minimum: int, where: str = "the table") -> int:
    """min(``wanted``, the number of groups); a ProfileTableError below ``minimum``."""
    n_groups = len(np.unique(groups))
    if n_groups < minimum:
        raise ProfileTableError(
            f"{where} has {n_groups} group(s); grouped cross-validation needs at least {minimum} "
            "(fit needs 2, evaluate 3): profile more input families"
        )
    return min(wanted, n_groups)


# ---------------------------------------------------------------------- provenance


def _device(table: ProfileTable) -> dict:
    device = device_of(table.meta)
    if device["name"] is None:
        where = "its metadata" if table.path is None else meta_path(table.path)
        warn(f"the table names no GPU ({where} has no \"device\"): dispatch picks a model by the GPU it was measured "
             "on, so this one will serve only when passed as model=...; add \"device\": {\"name\": ..., "
             "\"capability\": [major, minor]} to the metadata and train again")
    return device


def _versions(meta: dict) -> dict:
    try:
        seer_version = metadata.version("seer-kernels")
    except metadata.PackageNotFoundError:
        seer_version = "unknown"
    return {
        "seer": seer_version,
        "scikit-learn": sklearn.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "profiled_with": dict(meta.get("versions") or {}),
    }


def _source_counts(table: ProfileTable) -> dict[str, int]:
    return {} if table.sources is None else dict(Counter(table.sources.tolist()))


# ---------------------------------------------------------------------- the report


@dataclass(frozen=True)
class _Outcome:
    """Held-out results of nested CV, per row."""

    choice: dict[int, np.ndarray]  # calls -> variant index
    gathered: dict[int, np.ndarray]  # calls -> bool
    single: dict[int, np.ndarray]  # calls -> the variant of best geometric-mean cost of the row's training folds
    fold: np.ndarray


@dataclass
class TrainingReport:
    """Held-out scores of a training procedure on one table.

    ``scores[subset][calls][metric]`` with subset ``all`` (and ``real`` / ``other`` when the
    table has a ``source`` column). A variant's time at ``calls`` calls is its cost per call: time
    per call plus its preparation spread over the calls. Metrics are geometric means over rows:
    ``fraction_of_oracle`` (oracle time / chosen time, per call), ``fraction_of_oracle_with_gather``
    (the same with the gathering cost spread over ``calls`` calls), ``speedup_vs_best_single``,
    ``speedup_vs_<baseline>``, ``speedup_vs_hand_rule`` (others' time / seer's time including
    gathering; baselines as measured, the best single variant and the hand rule's pick charged
    their preparation), plus ``accuracy`` (the choice is as fast as the oracle's) and ``gather_rate``
    (shares of rows).
    ``held_out`` has one row per input with its fold, its fastest variant per call ignoring
    preparation (``oracle``, ``oracle_ms``), and per call count the oracle (``oracle@<calls>``),
    the choice, whether it gathered and chosen / oracle cost with gathering (``ratio@<calls>``).
    """

    op: str
    variants: tuple[str, ...]
    calls: tuple[int, ...]
    folds: int
    rows: int
    groups: int
    sources: dict[str, int]
    best_single: str
    scores: dict[str, dict[int, dict[str, float]]]
    subset_rows: dict[str, int]
    notes: list[str] = field(default_factory=list)
    held_out: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    validated_scores: dict | None = None  # the same, stage 2 on every row (see evaluate)
    validated_held_out: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)  # its per-row choices
    gathers: bool = True  # the table has gathered features; without, the gathering metrics say nothing

    def shown_metrics(self, per_calls: dict) -> list[str]:
        """The metrics a reader is shown: without gathered features, those of gathering (equal to
        ``fraction_of_oracle``, and 0) left out; ``scores`` keeps them for the scripts that read it."""
        hidden = () if self.gathers else ("fraction_of_oracle_with_gather", "gather_rate")
        return [metric for metric in next(iter(per_calls.values())) if metric not in hidden]

    def to_dict(self, rows: bool = False) -> dict:
        """JSON-ready; ``rows=True`` adds the per-row held-out choices."""
        result = {
            "op": self.op,
            "variants": list(self.variants),
            "calls": list(self.calls),
            "folds": self.folds,
            "rows": self.rows,
            "groups": self.groups,
            "sources": self.sources,
            "best_single": self.best_single,
            "scores": {s: {str(c): m for c, m in per_calls.items()} for s, per_calls in self.scores.items()},
            "subset_rows": self.subset_rows,
            "notes": list(self.notes),
        }
        if self.validated_scores is not None:
            result["validated_scores"] = {s: {str(c): m for c, m in per_calls.items()}
                                          for s, per_calls in self.validated_scores.items()}
        if rows:
            result["held_out"] = self.held_out.to_dict(orient="records")
        return result

    def to_text(self) -> str:
        """A short table for the command line."""
        sources = ", ".join(f"{name or 'unlabelled'} {count}" for name, count in self.sources.items())
        lines = [
            f"op {self.op}: {self.rows} rows in {self.groups} groups" + (f" ({sources})" if sources else ""),
            f"held-out scores, {self.folds}-fold grouped nested CV; best single variant in steady state: "
            f"{self.best_single}",
        ]
        for subset, per_calls in self.scores.items():
            lines.append("")
            lines.append(f"{subset} rows ({self.subset_rows[subset]})".ljust(34) + "".join(f"{c:>8,} call" + ("s" if c != 1 else " ") for c in per_calls))
            for metric in self.shown_metrics(per_calls):
                cells = "".join(f"{per_calls[c].get(metric, math.nan):>14.3f}" for c in per_calls)
                lines.append(f"  {metric.replace('_', ' ')}".ljust(34) + cells)
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)


def _report(table: ProfileTable, data: _Data, calls: tuple[int, ...], folds: int, outcome: _Outcome) -> TrainingReport:
    hand, notes = _hand_rule(table)
    if hand is not None:
        notes.append("the hand rule is charged no gathering cost")
    if table.gathered_features:
        notes.append("the scores are of inputs passed unchecked, where stage 1 decides whether gathering pays; a "
                     "validated input (seer.dispatch's default) goes straight to stage 2, which benchmarks/selection.py "
                     "--validation scores")
    for j, name in enumerate(table.baselines):  # its speed-up is a mean over the rows that time it alone
        timed = int(np.isfinite(table.baseline_times[:, j]).sum())
        if timed < len(table):
            notes.append(f"speedup vs {name} is over the inputs {name} was timed on alone, {timed:,} of {len(table):,}")
    subsets = subset_masks(table)
    return TrainingReport(
        op=table.op,
        variants=table.variants,
        calls=calls,
        folds=folds,
        rows=len(table),
        groups=int(len(np.unique(data.groups))),
        sources=_source_counts(table),
        best_single=table.variants[_best_single(data.times)],
        scores=_subset_scores(table, data, calls, outcome, hand, subsets),
        subset_rows={name: int(mask.sum()) for name, mask in subsets.items()},
        notes=notes,
        held_out=_held_out_frame(table, data, calls, outcome),
        gathers=bool(table.gathered_features),
    )


def subset_masks(table: ProfileTable) -> dict[str, np.ndarray]:
    """Row masks of the subsets scores are reported on: ``all``, and ``real`` / ``other`` when the
    table has a ``source`` column."""
    subsets = {"all": np.ones(len(table), dtype=bool)}
    if table.sources is not None:
        real = table.sources == "real"
        subsets.update({name: mask for name, mask in (("real", real), ("other", ~real)) if mask.any()})
    return subsets


def _subset_scores(table, data: _Data, calls, outcome: _Outcome, hand, subsets=None) -> dict:
    """``scores[subset][calls][metric]`` (see :class:`TrainingReport`)."""
    subsets = subset_masks(table) if subsets is None else subsets
    return {name: {c: _scores(table, data, mask, c, outcome, hand) for c in calls} for name, mask in subsets.items()}


def _scores(table: ProfileTable, data: _Data, mask: np.ndarray, calls: int, outcome: _Outcome, hand: np.ndarray | None) -> dict[str, float]:
    rows = np.flatnonzero(mask)
    cost = data.cost(calls)[rows]
    best = cost.min(axis=1)
    chosen = cost[np.arange(len(rows)), outcome.choice[calls][rows]]
    gathered = outcome.gathered[calls][rows]
    total = calls * chosen + gathered * data.gather_ms[rows]

    def speedup_over(other_ms: np.ndarray) -> float:
        present = np.isfinite(other_ms)
        return _geomean(calls * other_ms[present] / total[present])

    scores = {
        "fraction_of_oracle": _geomean(best / chosen),
        "fraction_of_oracle_with_gather": _geomean(calls * best / total),
        "speedup_vs_best_single": speedup_over(cost[np.arange(len(rows)), outcome.single[calls][rows]]),
    }
    for j, name in enumerate(table.baselines):
        baseline = table.baseline_times[rows, j]
        if np.isfinite(baseline).any():
            scores[f"speedup_vs_{name}"] = speedup_over(baseline)
    if hand is not None:
        scores["speedup_vs_hand_rule"] = speedup_over(cost[np.arange(len(rows)), hand[rows]])
    scores["accuracy"] = float(np.mean(chosen == best))  # a variant tying the fastest is a right choice
    scores["gather_rate"] = float(gathered.mean())
    return {key: round(value, 6) for key, value in scores.items()}


def _geomean(ratios: np.ndarray) -> float:
    return float(np.exp(np.log(ratios).mean()))


def _hand_rule(table: ProfileTable) -> tuple[np.ndarray | None, list[str]]:
    """The op's hand rule per row, or None with a note saying why it is left out."""
    module = op_feature_module(table.op)
    if module is None or not hasattr(module, "hand_rule"):
        return None, [f"no hand rule to compare with: seer has no feature module with hand_rule for op {table.op!r}"]
    records = table.frame[[*table.known_features, *table.gathered_features]].to_dict(orient="records")
    try:
        picks = [module.hand_rule(record) for record in records]
    except KeyError as error:
        return None, [f"hand rule left out: it needs feature {error.args[0]!r}, which the table lacks"]
    foreign = sorted(set(picks) - set(table.variants))
    if foreign:
        return None, [f"hand rule left out: it picks {foreign}, which the table has no times for"]
    index = {name: i for i, name in enumerate(table.variants)}
    return np.array([index[p] for p in picks], dtype=int), []


def _held_out_frame(table: ProfileTable, data: _Data, calls: tuple[int, ...], outcome: _Outcome) -> pd.DataFrame:
    variants = np.asarray(table.variants, dtype=object)
    rows = np.arange(len(table))
    columns = {"id": table.ids, "group": table.groups}
    if table.sources is not None:
        columns["source"] = table.sources
    columns.update({"fold": outcome.fold, "oracle": variants[data.times.argmin(axis=1)], "oracle_ms": data.times.min(axis=1)})
    for c in calls:
        cost = data.cost(c)
        chosen, best = cost[rows, outcome.choice[c]], cost.min(axis=1)
        total = c * chosen + outcome.gathered[c] * data.gather_ms
        # The oracle named as the choice where the choice ties it.
        columns[f"oracle@{c}"] = variants[np.where(chosen == best, outcome.choice[c], cost.argmin(axis=1))]
        columns[f"choice@{c}"] = variants[outcome.choice[c]]
        columns[f"gathered@{c}"] = outcome.gathered[c]
        columns[f"ratio@{c}"] = total / (c * best)
    return pd.DataFrame(columns)
