"""Every shipped model is what its shipped table trains to: the table it names is the committed
one (same SHA-256), and training it again gives the same trees. A model left behind by a
re-measured table or a change to training fails here, not in a user's `seer train`."""
import json
from pathlib import Path

import pytest

from seer.table import read_table, table_sha256
from seer.train import TwoStageSelector

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "models").glob("*.json"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.stem)
def test_a_shipped_model_is_what_its_table_trains_to(path, tmp_path):
    shipped = json.loads(path.read_text())
    table_path = ROOT / shipped["training"]["table"]
    assert table_sha256(table_path) == shipped["training"]["sha256"], f"{table_path} changed since {path.name}"
    table = read_table(table_path)
    TwoStageSelector().fit(table).to_model(table).save(tmp_path / path.name)
    fresh = json.loads((tmp_path / path.name).read_text())
    for stage in ("stage1", "stage2"):
        assert fresh[stage] == shipped[stage], f"{path.name}: {stage} differs from a fresh training"
    # The GPU as the table records it, its SM count too: off a GPU, GEMM's waves are computed with it
    assert fresh["device"] == shipped["device"], f"{path.name}: its device differs from its table's"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.stem)
def test_a_shipped_model_s_rules_are_its_export(path):
    """The .txt, .md and .py beside a model are what seer train writes for it (the exporter changed
    under them once: the .py's docstring)."""
    from seer import rules
    from seer.model import SelectorModel

    model = SelectorModel.load(path)
    for suffix, export in ((".txt", rules.to_text), (".md", rules.to_markdown), (".py", rules.to_python)):
        assert path.with_suffix(suffix).read_text() == export(model), f"{path.with_suffix(suffix).name}: export again"


MERGED = sorted(path for path in (ROOT / "datasets" / "profiles").glob("*.meta.json")
                if "campaigns" in json.loads(path.read_text()))


@pytest.mark.parametrize("meta", MERGED, ids=lambda path: path.name.removesuffix(".meta.json"))
def test_a_merged_table_is_the_merge_of_its_campaigns(meta, tmp_path):
    """The committed campaigns, merged again, give the committed table byte for byte."""
    from seer.table import merge_tables

    recorded = json.loads(meta.read_text())["campaigns"]
    campaigns = [ROOT / c["table"] for c in recorded]
    assert [table_sha256(p) for p in campaigns] == [c["sha256"] for c in recorded]
    merged = merge_tables(campaigns, tmp_path / "merged.csv")
    assert merged.read_bytes() == meta.with_name(meta.name.replace(".meta.json", ".csv")).read_bytes()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.stem)
def test_the_printed_rules_send_every_training_input_where_the_tree_does(path):
    """Every bound the rules print, read as printed, agrees with the tree at every node each of the
    table's inputs passes (thresholds printed to 3 digits, rounded to nearest, had sent a mean row
    of 25 down "<= 25" while the tree's 24.9974 sent it right)."""
    from seer.model import SelectorModel
    from seer.registry import get_op

    model = SelectorModel.load(path)
    table = read_table(ROOT / json.loads(path.read_text())["training"]["table"])
    features = get_op(model.op).features
    described = {f.name: f for f in (*features.KNOWN, *features.GATHERED)}
    trees = [*model.stage1.values(), *(model.stage2 or {}).values()]
    misread = []
    for tree in trees:
        values = table.frame[list(tree.features)].to_numpy(dtype=float)
        for row, sample in enumerate(values):
            node = 0
            while tree.left[node] >= 0:
                feature, threshold = tree.features[tree.feature[node]], tree.threshold[node]
                value = sample[tree.feature[node]]
                printed = described[feature].format_bound(threshold)
                bound = float(printed.removesuffix(described[feature].unit).strip().replace(",", ""))
                if (value <= bound) != (value <= threshold):
                    misread.append((table.frame.id.iloc[row], feature, value, threshold, printed))
                node = tree.left[node] if value <= threshold else tree.right[node]
    assert not misread, misread[:5]
