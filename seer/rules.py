"""A model's trees as rules a person can read: text, Markdown, or a Python module.

Thresholds print exactly, in the features' own words and units (``nnz <= 10,000``,
``mean row length > 25 nnz/row``): training puts each at the shortest decimal between the values
it splits (:func:`seer.tree.readable_bound`), so a rule read by a person sends every input where
the tree does (:meth:`seer.features_base.Feature.format_bound`). The generated Python module
agrees with :meth:`seer.tree.Tree.predict` everywhere.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from seer.features_base import Feature
from seer.model import GATHER, SCHEMA, SelectorModel, checksum
from seer.tree import Tree, condition_text

RETRAIN = ("rerun the command above, in the folder it ran in (a seer checkout's root for the shipped models), on "
           "the table with this sha256 to retrain")
REGENERATE = f"{RETRAIN}; seer.rules.to_text / to_markdown / to_python re-export the rules from the saved model"


def header_lines(model: SelectorModel, source: str | Path | None = None, saved: bool = True) -> list[str]:
    """Provenance: op, device, training table and hash, date, command, the model's checksum, the
    dtype or world sizes it was profiled at, the versions that trained and profiled it, its
    held-out scores, how to regenerate. ``saved=False``: a model trained in memory (``seer report``
    without ``--model``), which no file holds, so no checksum of one is claimed."""
    training = model.training
    device = model.device or {}
    capability = device.get("capability")
    lines = [
        f"seer selection rules for op {model.op!r}" + (f" (model {source})" if source else ""),
        f"device: {device.get('name') or 'unknown'}" + (f", compute capability {_capability(capability)}" if capability else "")
        + (f", {device['sm_count']} SMs" if device.get("sm_count") else ""),
        f"variants: {', '.join(model.variants)}",
        f"training table: {training.get('table') or 'in memory'} (sha256 {training.get('sha256') or 'n/a'}), "
        f"{training.get('rows', '?')} rows in {training.get('groups', '?')} groups",
        f"trained: {training.get('date') or 'unknown date'}",
        f"command: {training.get('command') or 'not recorded'}",
        _checksum_line(model) if saved else f"model: not saved (`seer train {training.get('table') or '<table>'}` "
                                            "trains and saves one)",
        *_scope_lines(training),
        *_version_lines(model.versions),
    ]
    lines.extend(_score_lines(training.get("scores"), gathers=model.stage2 is not None))
    lines.append(f"regenerate: {REGENERATE if saved else RETRAIN}")
    return lines


def _checksum_line(model: SelectorModel) -> str:
    digest = checksum(model.to_dict())
    if model.read_as == SCHEMA:
        return f"model: sha256 {digest} (the checksum its .json records)"
    return (f"model: sha256 {digest} (its content as {SCHEMA}, which saving it writes; "
            f"the {model.read_as} file it was read from records the checksum of that layout)")


def to_text(model: SelectorModel, source: str | Path | None = None) -> str:
    """Plain-text rules, both stages, indented by depth."""
    lines = [*header_lines(model, source), ""]
    for title, tree in _sections(model):
        lines.append(f"{title}:")
        lines.extend(_tree_lines(tree, model.feature_info(), _TEXT))
        lines.append("")
    return "\n".join(lines)


def to_markdown(model: SelectorModel, source: str | Path | None = None, level: int = 1, saved: bool = True) -> str:
    """Markdown rules; ``level`` is the heading level of the title (sections go one deeper); ``saved``
    as :func:`header_lines` takes it."""
    title, *rest = header_lines(model, source, saved)
    lines = [f"{'#' * level} {title[0].upper()}{title[1:]}", ""]
    lines.extend(f"- {line}" for line in rest)
    for section, tree in _sections(model):
        lines.extend(["", f"{'#' * (level + 1)} {section}", ""])
        lines.extend(_tree_lines(tree, model.feature_info(), _MARKDOWN))
    return "\n".join(lines) + "\n"


def to_python(model: SelectorModel, source: str | Path | None = None) -> str:
    """A standalone module: ``choose_stage1_calls_<c>(f)`` per stage-1 tree and
    ``choose_stage2_calls_<c>(f)`` per stage-2 tree (each named after the first call count it
    serves; a tree deeper than ``MAX_NESTED_SPLITS`` goes on in ``_choose_..._node_<n>(f)``),
    ``STAGE1`` / ``STAGE2``: every call count -> its function (no stage-2 functions and no
    ``STAGE2`` for a model without stage 2), and ``choose``: the model's choice for an input and a
    call count, as :meth:`seer.model.SelectorModel.choose` makes it."""
    info = model.feature_info()
    # A newline in a recorded command or path must not end a comment line and leave code.
    lines = [f"# {part}" for line in header_lines(model, source) for part in line.splitlines() or [""]]
    lines += [
        repr(f"Selection rules for op {model.op!r}, generated by seer.rules.to_python: retrain, do not edit."),
        "import numbers",
        "",
        f"GATHER = {GATHER!r}",
        f"VARIANTS = {tuple(model.variants)!r}",
    ]
    lines += _python_stage(1, model.stage1, info)
    if model.stage2 is not None:
        lines += _python_stage(2, model.stage2, info)
    lines += ["", ""] + (_CHOOSE_TWO_STAGES if model.stage2 is not None else _CHOOSE_ONE_STAGE).splitlines()
    return "\n".join(lines) + "\n"


# The generated module's entry and helpers: the model's choice (seer.model.SelectorModel.choose)
# without seer installed, each stage's tree picked for a call count as seer.model.nearest_calls does.
_HELPERS = '''

def _tree_for(trees: dict, calls: int):
    """The function of the largest trained call count <= calls (the smallest one when calls is below all)."""
    if not calls >= 1:  # NaN too
        raise ValueError(f"calls must be >= 1, got {calls!r}")
    return trees[max((count for count in trees if count <= calls), default=min(trees))]


def _number(f: dict, name: str) -> float:
    """f[name] as a Python float (a numpy float32 would be compared in float32 against a float64
    bound); NaN, on neither side of any bound, and anything but a real number refused as seer.dispatch
    refuses them (a string, a bool, numpy's bool or an array would read as a number it is not); an
    integer past float's range lies beyond every bound, as there."""
    given = f[name]
    if not isinstance(given, numbers.Real) or isinstance(given, bool):  # numpy's bool_ is no Real
        raise ValueError(f"feature {name!r} must be a number, got {given!r}")
    try:
        value = float(given)
    except OverflowError:
        return float("inf") if given > 0 else float("-inf")
    if value != value:
        raise ValueError(f"feature {name!r} is NaN")
    return value
'''

_CHOOSE_ONE_STAGE = '''def choose(known: dict, calls: int = 1) -> str:
    """The variant the model picks for an input of features known (a dict by feature name) run
    calls times."""
    return _tree_for(STAGE1, calls)(known)
''' + _HELPERS

_CHOOSE_TWO_STAGES = '''def choose(known: dict, gather=None, calls: int = 1, free: dict | None = None) -> str:
    """The variant the model picks for an input of features known (a dict by feature name) run
    calls times: stage 1 on them, and where it says gathering pays, stage 2 on them and gather()'s
    (a function returning the gathered features, called only then). free: gathered features at
    hand at no cost (a validation pass measured them): stage 2 decides at once."""
    if free is not None:
        return _tree_for(STAGE2, calls)({**known, **free})
    label = _tree_for(STAGE1, calls)(known)
    if label != GATHER:
        return label
    if gather is None:
        raise ValueError("stage 1 says gathering pays for this input: pass gather=, a function returning its gathered features")
    return _tree_for(STAGE2, calls)({**known, **gather()})
''' + _HELPERS


# ---------------------------------------------------------------------- rendering


def _grouped_trees(trees: dict[int, Tree]) -> list[tuple[list[int], Tree]]:
    """One stage's trees with the call counts each serves; neighbouring counts with equal trees share one."""
    merged: list[tuple[list[int], Tree]] = []
    for calls in sorted(trees):
        tree = trees[calls]
        if merged and merged[-1][1] == tree:
            merged[-1][0].append(calls)
        else:
            merged.append(([calls], tree))
    return merged


def _ranged_groups(trees: dict[int, Tree]) -> Iterator[tuple[list[int], str, Tree]]:
    """(its call counts, the calls it serves in words, tree) per group of :func:`_grouped_trees`."""
    groups = _grouped_trees(trees)
    for i, (counts, tree) in enumerate(groups):
        following = groups[i + 1][0][0] if i + 1 < len(groups) else None
        yield counts, _calls_range(counts[0] if i else None, following), tree


def _ranged_trees(trees: dict[int, Tree]) -> Iterator[tuple[str, Tree]]:
    for _, served, tree in _ranged_groups(trees):
        yield served, tree


def served_calls(trees: dict[int, Tree], count: int) -> str:
    """The calls the tree of the trained call ``count`` serves, in words, as the rules head its section
    (a rule path of ``seer.explain`` names its tree so)."""
    return next(served for counts, served, _ in _ranged_groups(trees) if count in counts)


def _sections(model: SelectorModel) -> Iterator[tuple[str, Tree]]:
    for calls, tree in _ranged_trees(model.stage1):
        yield f"Stage 1, {calls} (known features only)", tree
    for calls, tree in _ranged_trees(model.stage2 or {}):
        yield f"Stage 2, after gathering or on features a validation pass measured, {calls} (known and gathered features)", tree


def _calls_range(first: int | None, following: int | None) -> str:
    """The calls a tree serves: from ``first`` (None: from one call) up to before ``following`` (None: no end)."""
    if first is None and following is None:
        return "any number of calls"
    if first is None:
        return f"fewer than {following:,} calls"
    if following is None:
        return f"{first:,} or more calls"
    return f"{first:,} to {following - 1:,} calls"


def _leaf_text(tree: Tree, node: int) -> tuple[str, str]:
    """(what the leaf chooses, its training inputs and mean regret). Under a stage-1 gate, a leaf
    of the tree below it may hold no training input: its choice was learned from inputs the gate
    now sends to stage 2, and its mean regret is not known."""
    name = tree.labels[tree.label[node]]
    choice = f"{GATHER} features, then stage 2" if name == GATHER else name
    if tree.n_samples[node] == 0:
        return choice, "no training input below the gate reaches it; its choice is the ungated tree's"
    inputs = f"{tree.n_samples[node]:,} training input" + ("s" if tree.n_samples[node] != 1 else "")
    return choice, f"{inputs}, mean regret {tree.mean_regret[node]:.1%}"


def _branches(tree: Tree, info: dict[str, Feature], ascii_only: bool) -> Iterator[tuple[int, str, int]]:
    """(depth, condition, child) for each branch, depth first, left before right. An explicit stack
    rather than recursion: a tree may be deeper than Python's recursion limit."""
    def both_branches(depth: int, node: int) -> list[tuple[int, int, bool]]:
        return [] if tree.is_leaf(node) else [(depth, node, False), (depth, node, True)]  # the left pops first

    stack = both_branches(0, 0)
    while stack:
        depth, node, goes_left = stack.pop()
        child = tree.left[node] if goes_left else tree.right[node]
        feature = info[tree.features[tree.feature[node]]]
        yield depth, condition_text(feature, tree.threshold[node], goes_left, ascii_only), child
        stack += both_branches(depth + 1, child)


@dataclass(frozen=True)
class _Style:
    """How a rules listing prints: indentation, a leaf line, a branch line, ASCII operators or not."""

    indent: str
    first_depth: int
    leaf: str
    branch: str
    ascii_only: bool


_TEXT = _Style("    ", 1, "{pad}{condition} -> {choice}  ({detail})", "{pad}{condition}:", True)
_MARKDOWN = _Style("  ", 0, "{pad}- {condition} → **{choice}** ({detail})", "{pad}- {condition}", False)


def _tree_lines(tree: Tree, info: dict[str, Feature], style: _Style) -> list[str]:
    if tree.is_leaf(0):
        choice, detail = _leaf_text(tree, 0)
        return [style.leaf.format(pad=style.indent * style.first_depth, condition="always", choice=choice, detail=detail)]
    lines: list[str] = []
    for depth, condition, child in _branches(tree, info, style.ascii_only):
        pad = style.indent * (depth + style.first_depth)
        if tree.is_leaf(child):
            choice, detail = _leaf_text(tree, child)
            lines.append(style.leaf.format(pad=pad, condition=condition, choice=choice, detail=detail))
        else:
            lines.append(style.branch.format(pad=pad, condition=condition))
    return lines


def _python_stage(stage: int, trees: dict[int, Tree], info: dict[str, Feature]) -> list[str]:
    """A function per group of equal trees, then ``STAGE<stage>``: every call count -> its function."""
    lines, served = [], {}
    for counts, tree in _grouped_trees(trees):
        name = f"choose_stage{stage}_calls_{counts[0]}"
        for function in _python_functions(name, tree, info):
            lines += ["", ""] + function
        served.update({calls: name for calls in counts})
    table = ", ".join(f"{calls}: {name}" for calls, name in served.items())
    return lines + ["", "", f"STAGE{stage} = {{{table}}}"]


# The most if blocks nested in one generated function. Python refuses more than 100 levels of
# indentation, so a tree written as one function of nested if/else cannot compile from 99 splits
# deep: a split this far down starts a function of its own, which the one above calls. The shipped
# trees (7 deep at most) stay one function each. Choosing takes one more call per this many levels,
# within Python's recursion limit for trees up to about 30,000 deep.
MAX_NESTED_SPLITS = 32


def _python_functions(name: str, tree: Tree, info: dict[str, Feature]) -> list[list[str]]:
    """The lines of each function choosing by ``tree``: ``name``, then one per subtree that starts
    ``MAX_NESTED_SPLITS`` splits below the top of a function (named after ``name`` and its first node)."""
    functions = []
    pending = deque([(name, 0)])  # (a function to write, the node it starts at)

    def split_off(node: int) -> str:
        function = f"_{name}_node_{node}"
        pending.append((function, node))
        return function

    while pending:
        function, start = pending.popleft()
        lines = [f"def {function}(f: dict) -> str:"]
        if start:
            lines.append(f'    """{name} from node {start} down, split off because Python limits how deep blocks nest."""')
        functions.append(lines + _python_body(tree, info, start, split_off))
    return functions


def _python_body(tree: Tree, info: dict[str, Feature], start: int, split_off: Callable[[int], str]) -> list[str]:
    """Nested if/else choosing from node ``start`` down; where that would nest deeper than
    ``MAX_NESTED_SPLITS``, a call of the function ``split_off(node)`` names to go on from ``node``."""
    lines: list[str] = []

    def emit(node: int, nesting: int) -> None:
        pad = "    " * (nesting + 1)
        if tree.is_leaf(node):
            _, detail = _leaf_text(tree, node)
            lines.append(f"{pad}return {tree.labels[tree.label[node]]!r}  # {_one_line(detail)}")
            return
        if nesting == MAX_NESTED_SPLITS:
            lines.append(f"{pad}return {split_off(node)}(f)")
            return
        feature_name = tree.features[tree.feature[node]]
        threshold = tree.threshold[node]
        readable = condition_text(info[feature_name], threshold, True)
        lines.append(f"{pad}if _number(f, {feature_name!r}) <= {threshold!r}:  # {_one_line(readable)}")
        emit(tree.left[node], nesting + 1)
        lines.append(f"{pad}else:")
        emit(tree.right[node], nesting + 1)

    emit(start, 0)  # recursion no deeper than MAX_NESTED_SPLITS
    return lines


def _one_line(text: str) -> str:
    """``text`` fit for a comment: a line break in a name (a feature's, from a table) would end the
    comment and leave the rest as code."""
    return " ".join(text.splitlines())


def _capability(capability) -> str:
    if isinstance(capability, (list, tuple)):
        return ".".join(str(part) for part in capability)
    return str(capability)


def _scope_lines(training: dict) -> list[str]:
    """What the profile covered beyond the device: the one dtype of a model whose trees do not read
    it (SpMV), the world sizes and element sizes of a multi-GPU op's."""
    lines = []
    if training.get("dtype"):
        lines.append(f"profiled in: {training['dtype']} (the trees do not read the dtype)")
    if training.get("world_sizes"):
        lines.append(f"world sizes profiled: {', '.join(str(size) for size in training['world_sizes'])}")
    if training.get("element_sizes"):
        lines.append(f"element sizes profiled: {', '.join(f'{size} B' for size in training['element_sizes'])}")
    return lines


def _version_lines(versions: dict | None) -> list[str]:
    """``trained with: seer 0.1.0, scikit-learn 1.9.1, ...`` and ``profiled with: torch ...``."""
    if not isinstance(versions, dict):
        return []

    def listed(parts: dict) -> str:
        return ", ".join(f"{name} {version}" for name, version in parts.items() if not isinstance(version, dict))

    profiled = versions.get("profiled_with")
    named = [("trained with", listed(versions)), ("profiled with", listed(profiled) if isinstance(profiled, dict) else "")]
    return [f"{what}: {parts}" for what, parts in named if parts]


def _score_lines(scores: dict | None, gathers: bool) -> list[str]:
    """One line of held-out fractions of oracle, when the model carries its training report; for a
    model that may gather (``gathers``), said to be the unchecked inputs' path."""
    if not scores:
        return []
    try:
        per_calls = scores.get("scores", {}).get("all", {})
        parts = [
            f"{metrics['fraction_of_oracle_with_gather']:.3f} at {int(calls):,} call{'s' if int(calls) != 1 else ''}"
            for calls, metrics in per_calls.items() if "fraction_of_oracle_with_gather" in metrics
        ]
    except (AttributeError, TypeError, ValueError, KeyError):  # a hand-edited file: the rules still print
        return ["held-out scores: unreadable in this model file (its training.scores is malformed)"]
    if not parts:
        return []
    scored = f"held-out fraction of oracle ({scores.get('folds', '?')}-fold grouped CV)"
    if not gathers:
        return [f"{scored}: {', '.join(parts)}"]
    return [f"{scored} of inputs passed unchecked, stage 1 deciding whether gathering pays, its cost included: "
            f"{', '.join(parts)} (validated inputs, dispatch's default, go straight to stage 2: scored by "
            f"benchmarks/selection.py --validation)"]
