"""The written report: Markdown sections and valid PNG figures."""
from dataclasses import replace

import matplotlib.image
import numpy as np
import pytest
from synthetic_profiles import deep_model, planted_frame, planted_meta, toy_op  # noqa: F401 (toy_op is a fixture)

from seer.report import MAX_DRAWN_DEPTH, _layout, _save, _tree_figure, _tree_to_draw, write_report
from seer.table import ProfileTable
from seer.train import TwoStageSelector
from seer.tree import Tree

pytestmark = pytest.mark.usefixtures("toy_op")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def train(frame):
    table = ProfileTable.from_frame(frame, "toy", planted_meta())
    selector = TwoStageSelector(calls=(1, 100), folds=3)
    report = selector.evaluate(table)
    return selector.fit(table).to_model(table, command="pytest", scores=report.to_dict()), report


def check_pngs(paths):
    for path in paths:
        assert path.read_bytes()[:8] == PNG_SIGNATURE
        image = matplotlib.image.imread(path)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
        assert image.std() > 0  # something was drawn


def test_report_files(tmp_path):
    model, report = train(planted_frame(groups=20, per_group=4))
    paths = write_report(model, report, tmp_path / "out")
    assert [p.name for p in paths] == ["report.md", "tree.png", "wins.png", "regret.png"]
    assert all(p.parent == tmp_path / "out" and p.stat().st_size > 0 for p in paths)
    check_pngs(paths[1:])
    markdown = paths[0].read_text()
    for heading in ("# seer training report: op 'toy' on Synthetic GPU", "## Scores", "## Wins per variant",
                    "## Regret (chosen / oracle time, gathering included)", "## Figures",
                    "## Seer selection rules for op 'toy'", "### Stage 2, after gathering"):
        assert heading in markdown
    assert "| fraction of oracle |" in markdown and "**real** (" in markdown
    assert "![tree](tree.png)" in markdown
    oracle_wins = report.held_out["oracle"].value_counts()
    assert f"| a | {oracle_wins['a']} |" in markdown  # win counts are the held-out oracle's
    assert "| 1 call |" in markdown and "within 5%" in markdown


def test_report_without_stage2_draws_stage1(tmp_path):
    frame = planted_frame(groups=9, per_group=3).drop(columns=["row_cv", "row_max", "gather_ms", "source"])
    model, report = train(frame)
    paths = write_report(model, report, tmp_path)
    check_pngs(paths[1:])
    markdown = paths[0].read_text()
    assert "Stage 2" not in markdown and "**all** (27 inputs)" in markdown


def test_a_tree_deeper_than_the_figure_draws_folds_its_deep_subtrees(tmp_path):
    """A valid model 1,200 splits deep made `seer report --model` raise a RecursionError after its
    minutes of scoring, and would have asked for a figure ~168,000 pixels tall (found by a review):
    the figure draws MAX_DRAWN_DEPTH levels, a split there standing for its subtree."""
    tree = deep_model(1200).stage2[1]
    x, depth = _layout(tree)
    assert max(depth.values()) == MAX_DRAWN_DEPTH and len(x) == 2 * MAX_DRAWN_DEPTH + 1
    boxes = sorted(x[n] for n in x if tree.is_leaf(n) or depth[n] == MAX_DRAWN_DEPTH)
    assert boxes == list(range(MAX_DRAWN_DEPTH + 1))  # a chain: a leaf per level, then the folded rest
    figure = _tree_figure(tree, deep_model(1200), "deep")
    assert "1,193 leaves below\n(in the rules)" in [text.get_text() for text in figure.axes[0].texts]
    path = _save(figure, tmp_path / "tree.png")
    check_pngs([path])
    assert matplotlib.image.imread(path).shape[0] < 2000


def test_a_tree_within_the_drawn_depth_is_drawn_whole():
    model, _ = train(planted_frame(groups=20, per_group=4))
    tree = model.stage2[min(model.stage2)]
    x, depth = _layout(tree)
    assert tree.depth <= MAX_DRAWN_DEPTH and sorted(x) == list(range(len(tree.feature)))
    leaves = sorted((x[n], n) for n in x if tree.is_leaf(n))
    assert [position for position, _ in leaves] == list(range(len(leaves)))
    assert [n for _, n in leaves] == sorted(n for _, n in leaves)  # left to right: a Tree stores them in order


def test_the_drawn_stage2_tree_is_the_one_for_the_fewest_calls():
    model, _ = train(planted_frame(groups=9, per_group=3))
    trained = model.stage2[1]
    single_leaf = Tree(trained.features, trained.labels, (-1,), (None,), (-1,), (-1,), (0,), (27,), (0.3,))
    assert _tree_to_draw(replace(model, stage2={1: trained, 100: single_leaf})) == (
        "toy: stage 2 (after gathering), 1 call", trained)
    assert _tree_to_draw(replace(model, stage2={10: single_leaf, 100: trained})) == (
        "toy: stage 2 (after gathering), 10 calls", single_leaf)


def test_wins_per_call_count_charge_each_variants_preparation(tmp_path):
    """Variant ``a`` made fastest everywhere in steady state but given a preparation of 100 times its
    call: it wins every input in steady state and none at one call, where seer's picks are scored.
    The wins table had put only the steady-state count beside the picks at each call count."""
    frame = planted_frame(groups=9, per_group=3)
    times = frame[[c for c in frame.columns if c.startswith("time_ms:")]]
    frame["time_ms:a"] = times.min(axis=1) / 2
    frame["prepare_ms:a"] = 100 * frame["time_ms:a"]
    model, report = train(frame)
    markdown = write_report(model, report, tmp_path)[0].read_text()
    assert "| variant | fastest, steady state | fastest, 1 call | seer picks, 1 call | fastest, 100 calls |" in markdown
    assert f"| a | {len(frame)} | 0 |" in markdown


# Planted held-out ratios (chosen / oracle time) of 27 inputs; at 1 call two sit exactly on "within 5%", and at
# each call count one exactly on 2x (not "> 2x").
PLANTED_RATIOS = {
    1: [1.0] * 12 + [1.02, 1.05, 1.05, 1.1, 1.2, 1.3, 1.5, 1.7, 1.9, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0],
    100: [1.0] * 20 + [1.01, 1.04, 1.06, 1.2, 1.8, 2.0, 2.2],
}


def _quantile(values, q):
    """The q-quantile, interpolated linearly between the two nearest ranks of the sorted values."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (position - below) * (ordered[above] - ordered[below])


def test_regret_and_wins_tables_count_the_held_out_rows(tmp_path):
    """Only the tables' headings were checked: quantiles in reverse order, the least ratio as the max, the
    inputs far from the oracle counted as near it, or seer's picks counted as the oracle's would all have
    passed. A trained report's held-out ratios and picks are planted (seer's pick differing from the
    oracle's on one input) and every cell of the two tables recomputed here."""
    model, report = train(planted_frame(groups=9, per_group=3))
    held_out = report.held_out.copy()
    assert len(held_out) == 27
    order = np.random.default_rng(1).permutation(len(held_out))  # rows in no particular order
    for calls, ratios in PLANTED_RATIOS.items():
        held_out[f"ratio@{calls}"] = np.asarray(ratios)[order]
        held_out[f"choice@{calls}"] = held_out[f"oracle@{calls}"]
    missed = held_out["oracle@1"].iloc[5]
    picked = next(v for v in report.variants if v != missed)
    held_out.loc[held_out.index[5], "choice@1"] = picked
    lines = write_report(model, replace(report, held_out=held_out), tmp_path)[0].read_text().splitlines()

    assert "| calls | p50 | p90 | p99 | max | within 5% | > 2x |" in lines
    for calls, ratios in PLANTED_RATIOS.items():
        label = "1 call" if calls == 1 else f"{calls} calls"
        quantiles = " | ".join(f"{_quantile(ratios, q):.3f}" for q in (0.5, 0.9, 0.99))
        near = sum(r <= 1.05 for r in ratios) / len(ratios)
        far = sum(r > 2 for r in ratios) / len(ratios)
        assert f"| {label} | {quantiles} | {max(ratios):.3f} | {100 * near:.1f}% | {100 * far:.1f}% |" in lines
    assert "| 1 call | 1.050 | 3.400 | 8.960 | 10.000 | 55.6% | 18.5% |" in lines  # the same, worked by hand
    assert "| 100 calls | 1.000 | 1.440 | 2.148 | 2.200 | 81.5% | 3.7% |" in lines

    columns = ["oracle", "oracle@1", "choice@1", "oracle@100", "choice@100"]
    counts = {v: [list(held_out[column]).count(v) for column in columns] for v in report.variants}
    for variant, row in counts.items():
        assert f"| {variant} | {' | '.join(map(str, row))} |" in lines
    assert counts[missed][2] == counts[missed][1] - 1 and counts[picked][2] == counts[picked][1] + 1


def test_a_report_names_the_table_it_scored_and_its_gpu(tmp_path):
    """seer report --model: the scores are the table's, the heading had named the model's GPU and the
    report no table at all (a review)."""
    from synthetic_profiles import write_planted

    from seer.table import read_table

    table = read_table(write_planted(tmp_path / "t.csv", groups=6, per_group=3))
    table.meta["device"] = {"name": "Table GPU", "capability": [9, 0]}
    model, report = train(planted_frame(groups=6, per_group=3))
    markdown = write_report(model, report, tmp_path / "out", table)[0].read_text()
    assert markdown.startswith("# seer training report: op 'toy' on Table GPU\n")
    assert f"Scores of {tmp_path / 't.csv'}: " in markdown
    assert "device: Synthetic GPU" in markdown  # the rules' header: the model's own GPU
