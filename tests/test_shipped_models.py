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
def test_the_rules_print_every_threshold_exactly_and_short(path):
    """A printed bound is the tree's threshold itself, so every input reads on the side the tree
    sends it (printed to 3 digits rounded to nearest, a mean row of 25 read "<= 25" where the tree's
    24.9974 sent it right; rounded down within 1e-5, one in the sliver still did); and training
    keeps thresholds short, so none needs more than 6 significant digits."""
    from seer.model import SelectorModel

    model = SelectorModel.load(path)
    described = model.feature_info()
    wrong = []
    for tree in (*model.stage1.values(), *(model.stage2 or {}).values()):
        for node, threshold in enumerate(tree.threshold):
            if tree.left[node] < 0:
                continue
            feature = described[tree.features[tree.feature[node]]]
            printed = feature.format_bound(threshold)
            number = printed.removesuffix(feature.unit).strip().replace(",", "")
            if float(number) != threshold or len(number.replace(".", "").strip("0")) > 6:
                wrong.append((feature.name, threshold, printed))
    assert not wrong, wrong[:5]
