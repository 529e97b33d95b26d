"""The seer command: help everywhere, the main job on the shipped table, report and explain."""
import json

import pytest

from seer.cli import DEFAULT_TABLE, main


@pytest.mark.parametrize("command", [[], ["profile"], ["train"], ["report"], ["explain"]])
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    assert "usage: seer" in capsys.readouterr().out


def test_train_on_the_shipped_table(tmp_path, capsys):
    out = tmp_path / "spmv.json"
    assert main(["train", str(DEFAULT_TABLE), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Stage 1" in printed and "fraction of oracle" in printed and "real rows" in printed
    model = json.loads(out.read_text())
    assert model["device"]["name"] == "NVIDIA H100 80GB HBM3"
    for suffix in (".txt", ".md", ".py"):
        assert out.with_suffix(suffix).read_text().strip()


def test_report_writes_markdown_and_figures(tmp_path):
    assert main(["report", str(DEFAULT_TABLE), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").read_text().startswith("#")
    for png in tmp_path.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(list(tmp_path.glob("*.png"))) >= 2


def test_explain_a_real_matrix(suitesparse_dir, capsys):
    matrix = next(suitesparse_dir.glob("HB__bcsstk*.mtx.gz"))
    assert main(["explain", str(matrix)]) == 0
    printed = capsys.readouterr()
    assert "spmv-h100.json" in printed.out and "features:" in printed.out
    # The shipped models were measured on GPUs, not this CPU: said once per model, on one line each.
    assert printed.err.splitlines() == [
        f"seer explain: warning: model for spmv was measured on {gpu!r}, running on 'cpu': its choices may not be the "
        "fastest here" for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA H200")]


def test_profile_needs_a_gpu(capsys, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["profile", "spmv", "--synthetic", "small", "--out", "x.csv"]) == 2
    assert "CUDA GPU and none is visible" in capsys.readouterr().err


def test_bad_table_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,rows\na,1\n")
    assert main(["train", str(bad), "--op", "spmv"]) == 2
    assert "error" in capsys.readouterr().err
