"""The written report: Markdown sections and valid PNG figures."""
from dataclasses import replace

import matplotlib.image
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
