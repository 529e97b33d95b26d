"""A training report on disk: Markdown (scores, wins, regret, rules) plus PNG figures.

Figures are drawn with matplotlib's object API on Agg canvases, so writing a report
never touches the global pyplot state or needs a display.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.ticker import FuncFormatter
from matplotlib.figure import Figure

from seer import rules
from seer.model import GATHER, SelectorModel
from seer.table import ProfileTable, device_of
from seer.train import TrainingReport
from seer.tree import Tree, condition_text, preorder

WITHIN = 1.05  # "near the oracle": at most 5 % slower
REGRET_QUANTILES = (0.5, 0.9, 0.99)


def write_report(model: SelectorModel, report: TrainingReport, out_dir: str | Path,
                 table: ProfileTable | None = None, saved: bool = True) -> list[Path]:
    """Write ``report.md`` and its figures into ``out_dir``; returns the paths written. ``table``: the
    table ``report`` scored, named in the report with the GPU that measured it (a model given to
    ``seer report --model`` may have been trained on another, which its rules' header names).
    ``saved=False``: ``model`` was trained for the report and no file holds it (its rules say so)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    title, tree = _tree_to_draw(model)
    figures = [
        _save(_tree_figure(tree, model, title), out / "tree.png"),
        _save(_wins_figure(report), out / "wins.png"),
        _save(_regret_figure(report), out / "regret.png"),
    ]
    markdown = out / "report.md"
    markdown.write_text(_markdown(model, report, figures, table, saved), encoding="utf-8")  # its rules hold ≤ and →
    return [markdown, *figures]


# ---------------------------------------------------------------------- Markdown


def _markdown(model: SelectorModel, report: TrainingReport, figures: list[Path], table: ProfileTable | None,
              saved: bool) -> str:
    sources = ", ".join(f"{name or 'unlabelled'}: {count}" for name, count in report.sources.items())
    device = (model.device if table is None else device_of(table.meta)).get("name") or "unknown device"
    scored = "" if table is None or table.path is None else f"Scores of {table.path}: "
    sections = [
        f"# seer training report: op {model.op!r} on {device}",
        f"{scored}{report.rows} inputs in {report.groups} groups" + (f" ({sources})" if sources else "")
        + f"; held-out scores from {report.folds}-fold grouped nested cross-validation; "
        f"best single variant in steady state: {report.best_single} (the speed-ups over the best single variant "
        f"take each fold's own at each call count, its preparation charged).",
        "## Scores\n\n" + "\n\n".join(_scores_table(report, subset) for subset in report.scores),
        "## Wins per variant\n\n" + _wins_table(report),
        "## Regret (chosen / oracle time, gathering included)\n\n" + _regret_table(report),
        "## Figures\n\n" + "\n".join(f"![{path.stem}]({path.name})" for path in figures),
    ]
    if report.notes:
        sections.append("## Notes\n\n" + "\n".join(f"- {note}" for note in report.notes))
    sections.append(rules.to_markdown(model, level=2, saved=saved))
    return "\n\n".join(sections).rstrip() + "\n"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _calls_label(calls: int) -> str:
    return f"{calls:,} call" + ("" if calls == 1 else "s")


def _scores_table(report: TrainingReport, subset: str) -> str:
    per_calls = report.scores[subset]
    rows = [[metric.replace("_", " ")] + [f"{per_calls[c][metric]:.3f}" for c in per_calls]
            for metric in report.shown_metrics(per_calls)]
    caption = f"**{subset}** ({report.subset_rows[subset]} inputs)"
    return caption + "\n\n" + _table(["metric", *map(_calls_label, per_calls)], rows)


def _win_counts(report: TrainingReport) -> dict[str, list[int]]:
    """Per variant: [steady-state wins, then per call count its wins with its preparation charged
    over those calls and seer's picks]: the picks are scored against the second, and a variant
    that must prepare (a copy of the matrix) can be fastest in steady state and never at 1 call."""
    frame = report.held_out
    columns = [frame["oracle"]]
    for c in report.calls:
        columns += [frame[f"oracle@{c}"], frame[f"choice@{c}"]]
    return {v: [int((column == v).sum()) for column in columns] for v in report.variants}


def _wins_table(report: TrainingReport) -> str:
    header = ["variant", "fastest, steady state"]
    for c in report.calls:
        header += [f"fastest, {_calls_label(c)}", f"seer picks, {_calls_label(c)}"]
    rows = [[name, *map(str, counts)] for name, counts in _win_counts(report).items()]
    return _table(header, rows)


def _regret_table(report: TrainingReport) -> str:
    header = ["calls", *(f"p{round(q * 100)}" for q in REGRET_QUANTILES), "max", f"within {WITHIN - 1:.0%}", "> 2x"]
    rows = []
    for c in report.calls:
        ratio = report.held_out[f"ratio@{c}"].to_numpy()
        rows.append([
            _calls_label(c),
            *(f"{q:.3f}" for q in np.quantile(ratio, REGRET_QUANTILES)),
            f"{ratio.max():.3f}",
            f"{np.mean(ratio <= WITHIN):.1%}",
            f"{np.mean(ratio > 2):.1%}",
        ])
    return _table(header, rows)


# ---------------------------------------------------------------------- figures


def _save(figure: Figure, path: Path) -> Path:
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    return path


def _tree_to_draw(model: SelectorModel) -> tuple[str, Tree]:
    """The stage-2 tree (else the stage-1 one) for the fewest calls the model was trained for."""
    if model.stage2 is not None:
        calls = min(model.stage2)
        return f"{model.op}: stage 2 (after gathering), {_calls_label(calls)}", model.stage2[calls]
    calls = min(model.stage1)
    return f"{model.op}: stage 1, {_calls_label(calls)}", model.stage1[calls]


# Levels a tree figure draws; a split further down is drawn as one box standing for its subtree.
# Deeper figures are unreadable (the rules list every split) and grow without bound; trees seer
# trains from its tables are shallower.
MAX_DRAWN_DEPTH = 8


def _layout(tree: Tree) -> tuple[dict[int, float], dict[int, int]]:
    """x and depth of each drawn node: leaves and folded subtrees at 0, 1, 2, ... left to right,
    parents centred above their children."""
    depth = {0: 0}

    def drawn_children(node: int) -> tuple[int, ...]:  # a box's subtree is not drawn
        if _drawn_as_box(tree, node, depth[node]):
            return ()
        depth[tree.left[node]] = depth[tree.right[node]] = depth[node] + 1
        return tree.left[node], tree.right[node]

    drawn = preorder(0, drawn_children)
    boxes = [node for node in drawn if _drawn_as_box(tree, node, depth[node])]  # left to right
    x: dict[int, float] = {node: i for i, node in enumerate(boxes)}
    for node in reversed(drawn):  # children before parents
        if node not in x:
            x[node] = (x[tree.left[node]] + x[tree.right[node]]) / 2
    return x, depth


def _drawn_as_box(tree: Tree, node: int, depth: int) -> bool:
    """A leaf, or a split at the deepest drawn level, which stands for its subtree."""
    return tree.is_leaf(node) or depth == MAX_DRAWN_DEPTH


def _leaves_below(tree: Tree, node: int) -> int:
    below = preorder(node, lambda n: () if tree.is_leaf(n) else (tree.left[n], tree.right[n]))
    return sum(map(tree.is_leaf, below))


def _tree_figure(tree: Tree, model: SelectorModel, title: str) -> Figure:
    x, depth = _layout(tree)
    boxes = sum(_drawn_as_box(tree, n, depth[n]) for n in x)
    levels = max(depth.values())
    figure = Figure(figsize=(min(2.2 * boxes + 1, 60), 1.4 * (levels + 1) + 0.8))
    ax = figure.add_subplot()
    colours = _colours(tree.labels)
    info = model.feature_info()
    for node in x:
        if tree.is_leaf(node):
            name = tree.labels[tree.label[node]]
            text = f"{name}\n{tree.n_samples[node]:,} inputs\nregret {tree.mean_regret[node]:.1%}"
            colour = colours[name]
        elif depth[node] == MAX_DRAWN_DEPTH:
            text = f"{_leaves_below(tree, node):,} leaves below\n(in the rules)"
            colour = "whitesmoke"
        else:
            feature = info[tree.features[tree.feature[node]]]
            text = condition_text(feature, tree.threshold[node], True) + "?"
            colour = "white"
            for child, answer in ((tree.left[node], "yes"), (tree.right[node], "no")):
                ax.plot([x[node], x[child]], [-depth[node], -depth[child]], color="grey", zorder=1)
                ax.text((x[node] + x[child]) / 2, -(depth[node] + depth[child]) / 2, answer, fontsize=7, color="grey", ha="center")
        ax.text(x[node], -depth[node], text, ha="center", va="center", fontsize=8, zorder=2,
                bbox={"boxstyle": "round", "facecolor": colour, "edgecolor": "black"})
    ax.set_xlim(-0.7, boxes - 0.3)
    ax.set_ylim(-levels - 0.6, 0.6)
    ax.set_axis_off()
    ax.set_title(title)
    return figure


def _colours(labels: tuple[str, ...]) -> dict[str, str]:
    palette = [f"C{i}" for i in range(10)]
    named = {label: palette[i % len(palette)] for i, label in enumerate(l for l in labels if l != GATHER)}
    named[GATHER] = "grey"
    # Pale opaque fills: black text stays readable and edges do not show through the boxes.
    return {label: tuple(0.35 * c + 0.65 for c in to_rgb(colour)) for label, colour in named.items()}


def _wins_figure(report: TrainingReport) -> Figure:
    counts = _win_counts(report)
    series = ["fastest, steady state"]
    for c in report.calls:
        series += [f"fastest, {_calls_label(c)}", f"seer, {_calls_label(c)}"]
    figure = Figure(figsize=(max(5, 1.2 * len(counts) + 2), 3.5))
    ax = figure.add_subplot()
    width = 0.8 / len(series)
    positions = np.arange(len(counts))
    for j, label in enumerate(series):
        ax.bar(positions + j * width, [c[j] for c in counts.values()], width, label=label)
    ax.set_xticks(positions + 0.4 - width / 2, list(counts), rotation=30, ha="right")
    ax.set_ylabel("inputs")
    ax.set_title(f"{report.op}: fastest variant vs held-out seer pick")
    ax.legend(fontsize=8)
    return figure


def _regret_figure(report: TrainingReport) -> Figure:
    figure = Figure(figsize=(6, 3.5))
    ax = figure.add_subplot()
    ratios = {c: report.held_out[f"ratio@{c}"].to_numpy() for c in report.calls}
    top = max(float(r.max()) for r in ratios.values())
    bins = np.geomspace(1.0, max(top, 1.01) * 1.001, 30)
    for c, ratio in ratios.items():
        ax.hist(ratio, bins=bins, histtype="step", linewidth=1.5, label=_calls_label(c))
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.set_xlabel("chosen / oracle time (gathering included)")
    ax.set_ylabel("inputs")
    ax.set_title(f"{report.op}: held-out regret")
    ax.legend(fontsize=8)
    return figure
