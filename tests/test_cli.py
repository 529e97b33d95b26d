"""The seer command: help everywhere, the main job on the shipped table, report and explain."""
import json
import re

import pytest
from synthetic_profiles import planted_frame, planted_meta, toy_op, write_planted  # noqa: F401 (toy_op is a fixture)

from seer import registry
from seer.cli import DEFAULT_TABLE, main
from seer.table import meta_path, read_table, write_table


@pytest.mark.parametrize("command", [[], ["profile"], ["train"], ["report"], ["explain"]])
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    assert "usage: seer" in capsys.readouterr().out


def test_version_and_plain_help(capsys):
    """Help printed reST markup (``seer``), and a bad count named argparse's type function (found by a
    user's walkthrough)."""
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.startswith("seer ")
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "``" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["explain", "m.mtx", "--calls", "abc"])
    assert "argument --calls: must be a whole number of 1 or more, got 'abc'" in capsys.readouterr().err


@pytest.mark.parametrize("option, value, rule", [("--deadline", "nan", "a positive number of seconds"),
                                                 ("--deadline", "0", "a positive number of seconds"),
                                                 ("--seed", "-1", "a whole number of 0 or more"),
                                                 ("--max-nnz", "-5", "a whole number of 1 or more")])
def test_profile_options_are_checked(option, value, rule, capsys):
    """NaN was never reached, 0 profiled nothing and said it wrote the table, -5 selected no matrix, a
    negative seed failed inside a loader thread (found by an audit)."""
    with pytest.raises(SystemExit):
        main(["profile", "spmv", "--synthetic", "small", "--out", "x.csv", option, value])
    assert f"argument {option}: must be {rule}, got '{value}'" in capsys.readouterr().err


def test_train_on_the_shipped_table(tmp_path, capsys):
    out = tmp_path / "spmv.json"
    assert main(["train", str(DEFAULT_TABLE), "--out", str(out)]) == 0
    printed, said = capsys.readouterr()
    # dispatch finds models by name: this one it would never load on its own
    assert "spmv.json: seer.dispatch finds spmv models" in said and "spmv-spmv.json" in said
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
    # The shipped models were measured on GPUs: off one, each shows its GPU's choice, nothing to warn
    # of (each had warned that its choices "may not be the fastest here", on a CPU).
    assert printed.err == ""


def test_explain_a_gemm_shape_off_a_gpu(capsys, monkeypatch):
    """`seer explain` took SpMV matrix files alone. A GEMM is given by its shape; on a CPU, without
    the interpreter (a user's shell), each shipped GPU model decides on its GPU's waves: 16x4096
    outputs make 32 tiles of 128x128, 32/132 of a wave on an H100 or H200. The dtype reads by name
    (it read as its code, dtype=1)."""
    from seer.dispatch import SHIPPED_MODELS

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)  # a GPU host would read its own SM count
    assert main(["explain", " 16X4096x14336 ", "--op", "gemm"]) == 0
    out = capsys.readouterr().out
    assert "== gemm-h100.json" in out and "== gemm-h200.json" in out
    assert out.count("m=16, n=4096, k=14336, dtype=bf16,") == 2 and out.count("waves=0.2424") == 2
    assert main(["explain", "64x64x64", "--op", "gemm", "--dtype", "float16",
                 "--model", str(SHIPPED_MODELS / "gemm-h200.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("== ") and "gemm-h200.json" in out.splitlines()[0] and "dtype=fp16," in out


@pytest.mark.parametrize("argv,message", [
    (["16x4096", "--op", "gemm"], "a GEMM is given by its shape MxNxK, three whole numbers of 1 or more"),
    (["0x4096x4096", "--op", "gemm"], r"got '0x4096x4096'"),
    (["m.mtx", "--dtype", "float16"], "--dtype sets GEMM's operands; spmv is explained in float32"),
    (["16 x 4096 x 14336", "--op", "gemm"], "three whole numbers"),
    (["99999999999999999999x1x1", "--op", "gemm"], "three whole numbers"),
    # Each size fits, a product does not: torch's raw RuntimeError before (found by a review).
    (["4000000000x1x4000000000", "--op", "gemm"], r"A \(MxK\) would hold 2\*\*63 elements or more"),
    (["4000000000x4000000000x1", "--op", "gemm"], r"C \(MxN\) would hold"),
    (["16x4096x14336"], "'16x4096x14336' reads as a GEMM's shape: pass --op gemm"),
])
def test_explain_refuses_what_it_cannot_build(argv, message, capsys):
    assert main(["explain", *argv]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_explain_refuses_a_model_of_another_op(capsys):
    from seer.dispatch import SHIPPED_MODELS

    assert main(["explain", "16x16x16", "--op", "gemm", "--model", str(SHIPPED_MODELS / "spmv-h100.json")]) == 2
    assert "is for op 'spmv', expected 'gemm'" in capsys.readouterr().err


def test_profile_needs_a_gpu(capsys, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["profile", "spmv", "--synthetic", "small", "--out", "x.csv"]) == 2
    assert "CUDA GPU and none is visible" in capsys.readouterr().err


def test_profile_records_what_chose_its_inputs_and_may_retry_skipped_ones(tmp_path, monkeypatch):
    """The suite and seed reach the table's metadata (a resume with others is refused there), and
    --retry-skipped tries again the inputs earlier runs skipped."""
    calls = []
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("seer.datasets.cases.spmv_cases", lambda *args, **kwargs: ["a case"])
    monkeypatch.setattr("seer.profiling.profile", lambda op, cases, out, **kwargs: [calls.append(kwargs),
                                                                                  out.write_text("id\n")])
    out = str(tmp_path / "x.csv")
    assert main(["profile", "spmv", "--synthetic", "small", "--seed", "3", "--out", out]) == 0
    assert main(["profile", "spmv", "--synthetic", "large", "--out", out, "--retry-skipped"]) == 0
    assert [(c["inputs"], c["retry_skipped"]) for c in calls] == [({"synthetic": "small", "seed": 3}, False),
                                                                 ({"synthetic": "large", "seed": 0}, True)]


def test_profile_that_wrote_no_table_says_so(tmp_path, monkeypatch, capsys):
    """Every input skipped (or the deadline before the first): "wrote x.csv" and status 0 had been said
    of a table that was not there (a review)."""
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("seer.datasets.cases.spmv_cases", lambda *args, **kwargs: ["a case"])
    monkeypatch.setattr("seer.profiling.profile", lambda *args, **kwargs: None)
    assert main(["profile", "spmv", "--synthetic", "small", "--out", str(tmp_path / "x.csv")]) == 2
    captured = capsys.readouterr()
    assert "no input was profiled, so" in captured.err and "x.csv was not written" in captured.err
    assert "wrote" not in captured.out


def test_bad_table_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,rows\na,1\n")
    assert main(["train", str(bad), "--op", "spmv"]) == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.usefixtures("toy_op")
@pytest.mark.parametrize("out", ["t.csv", "t.meta.json", "t.json.txt", "m.txt", "m.md", "m.py", "m"])
def test_train_refuses_a_model_path_it_would_write_over(tmp_path, capsys, monkeypatch, out):
    """Over the table, its metadata, or a model the rules beside it overwrite; refused before training,
    every file left as it was."""
    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    if out == "t.json.txt":  # a table whose name a rules file takes: t.json's .txt is t.txt
        table = write_planted(tmp_path / "t.txt", groups=4, per_group=2)
        out = "t.json"
    monkeypatch.chdir(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main(["train", str(table), "--out", str(tmp_path / out)]) == 2
    error = capsys.readouterr().err
    assert ("error: the model path" in error and "must end in .json" in error) or "over the profile table" in error
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.usefixtures("toy_op")
def test_train_refuses_a_table_timing_variants_this_install_lacks(tmp_path, capsys):
    """It trained a model that seer.dispatch then refused (a warning and the hand rule)."""
    frame = planted_frame(groups=4, per_group=2).rename(columns={"time_ms:c": "time_ms:z"})
    table = write_table(frame, tmp_path / "t.csv", planted_meta())
    assert main(["train", str(table), "--out", str(tmp_path / "toy-m.json")]) == 2
    assert "times toy variants this install of seer lacks: ['z']" in capsys.readouterr().err
    assert not (tmp_path / "toy-m.json").exists()


@pytest.mark.usefixtures("toy_op")
@pytest.mark.parametrize("theirs", ["toy-m.py", "toy-m.md", "toy-m.json"])
def test_train_refuses_to_write_over_a_file_it_did_not_write(tmp_path, capsys, theirs):
    """A module of the user's named as a rules file was replaced without a word; training's own
    outputs are written over again."""
    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    (tmp_path / theirs).write_text("def important():\n    return 42\n")
    assert main(["train", str(table), "--out", str(tmp_path / "toy-m.json")]) == 2
    assert f"toy-m.{theirs.split('.')[-1]} exists and is not a seer model or its rules" in capsys.readouterr().err
    assert (tmp_path / theirs).read_text() == "def important():\n    return 42\n"
    (tmp_path / theirs).unlink()
    for _ in range(2):
        assert main(["train", str(table), "--out", str(tmp_path / "toy-m.json")]) == 0


@pytest.mark.usefixtures("toy_op")
def test_train_without_gather_costs_says_so_once(tmp_path, capsys):
    """Scoring and fitting each read the costs: the warning was printed twice (found by an audit)."""
    table = write_table(planted_frame(groups=4, per_group=2).drop(columns="gather_ms"), tmp_path / "t.csv",
                        planted_meta())
    assert main(["train", str(table), "--out", str(tmp_path / "toy-m.json")]) == 0
    said = capsys.readouterr().err
    assert said.count("no 'gather_ms' column") == 1, said


@pytest.mark.usefixtures("toy_op")
def test_train_writes_over_its_own_outputs_whatever_their_key_order_or_bytes(tmp_path, capsys):
    """A model saved with sorted keys begins with its checksum, and a rules file may hold bytes that
    are no UTF-8 past its first line: both are training's, and were refused."""
    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    out = tmp_path / "toy-m.json"
    assert main(["train", str(table), "--out", str(out)]) == 0
    out.write_text(json.dumps(json.loads(out.read_text()), sort_keys=True))
    md = out.with_suffix(".md")
    md.write_bytes(md.read_bytes() + b"\n\xb5 (latin-1)\n")
    assert main(["train", str(table), "--out", str(out)]) == 0, capsys.readouterr().err


def test_train_names_a_model_of_an_op_with_a_slash(tmp_path, capsys, monkeypatch):
    """Its naming advice built a file name of the op and crashed after training (ValueError)."""
    monkeypatch.setitem(registry.OPS, "my/op", registry.OpEntry("my/op", "synthetic_profiles", "synthetic_profiles", ""))
    table = write_table(planted_frame(groups=4, per_group=2), tmp_path / "t.csv", {**planted_meta(), "op": "my/op"})
    assert main(["train", str(table), "--out", str(tmp_path / "m.json")]) == 0
    assert f"--out {tmp_path / 'my/op-m.json'}" in capsys.readouterr().err
    assert (tmp_path / "m.py").is_file()


@pytest.mark.usefixtures("toy_op")
def test_report_refuses_a_model_of_another_op(tmp_path, capsys):
    from seer.dispatch import SHIPPED_MODELS

    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    assert main(["report", str(table), "--model", str(SHIPPED_MODELS / "spmv-h100.json"), "--out", str(tmp_path / "r")]) == 2
    assert "model is for op 'spmv', expected 'toy'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.mark.usefixtures("toy_op")
def test_report_warns_of_a_model_trained_on_another_table(tmp_path, capsys):
    """The report puts the table's held-out scores beside the model's rules: said when they differ."""
    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    other = write_planted(tmp_path / "other.csv", groups=4, per_group=2, seed=1)
    assert main(["train", str(other), "--out", str(tmp_path / "m.json")]) == 0
    capsys.readouterr()
    assert main(["report", str(table), "--model", str(tmp_path / "m.json"), "--out", str(tmp_path / "r")]) == 0
    error = capsys.readouterr().err
    assert "warning: model" in error and "was trained on" in error and f"not on {table}" in error
    assert main(["report", str(other), "--model", str(tmp_path / "m.json"), "--out", str(tmp_path / "r2")]) == 0
    assert "was trained on" not in capsys.readouterr().err


@pytest.mark.usefixtures("toy_op")
def test_a_reports_rules_claim_the_checksum_of_a_saved_model_only(tmp_path):
    """Without --model the report trains a model in memory: its rules claimed the checksum "its .json
    records" and re-export "from the saved model", of a file nobody has (found by a review)."""
    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    assert main(["train", str(table), "--out", str(tmp_path / "m.json")]) == 0
    recorded = json.loads((tmp_path / "m.json").read_text())["checksum"]["sha256"]
    assert main(["report", str(table), "--model", str(tmp_path / "m.json"), "--out", str(tmp_path / "given")]) == 0
    given = (tmp_path / "given" / "report.md").read_text()
    assert f"model: sha256 {recorded} (the checksum its .json records)" in given and "from the saved model" in given
    assert main(["report", str(table), "--out", str(tmp_path / "fresh")]) == 0
    fresh = (tmp_path / "fresh" / "report.md").read_text()
    assert f"- model: not saved (`seer train {table}` trains and saves one)" in fresh
    assert "model: sha256" not in fresh and "saved model" not in fresh


@pytest.mark.usefixtures("toy_op")
def test_report_refuses_an_out_path_that_is_a_file_before_scoring(tmp_path, capsys):
    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    (tmp_path / "r").write_text("not a folder")
    assert main(["report", str(table), "--out", str(tmp_path / "r")]) == 2
    assert "--out" in capsys.readouterr().err and (tmp_path / "r").read_text() == "not a folder"


def test_explain_with_a_model_file_that_is_not_there_is_an_error(suitesparse_dir, tmp_path, capsys):
    """The library falls back to its hand rule with a warning; a model named on the command line is refused."""
    matrix = next(suitesparse_dir.glob("HB__bcsstk*.mtx.gz"))
    assert main(["explain", str(matrix), "--model", str(tmp_path / "none.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_explain_with_a_model_naming_variants_this_install_lacks_is_an_error(suitesparse_dir, tmp_path, capsys):
    """It printed the hand rule's choice under the model's name, with a warning only."""
    from seer.model import SelectorModel

    from seer.dispatch import SHIPPED_MODELS

    document = SelectorModel.load(SHIPPED_MODELS / "spmv-h100.json").to_dict()
    renamed = json.loads(json.dumps(document).replace('"scalar_r128"', '"scalar_from_the_future"'))
    SelectorModel.from_dict(renamed).save(tmp_path / "spmv-foreign.json")
    matrix = next(suitesparse_dir.glob("HB__bcsstk*.mtx.gz"))
    assert main(["explain", str(matrix), "--model", str(tmp_path / "spmv-foreign.json")]) == 2
    assert "names variants this install lacks: ['scalar_from_the_future']" in capsys.readouterr().err


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_profile_limit_must_be_positive(limit, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["profile", "spmv", "--synthetic", "small", "--out", "x.csv", "--limit", limit])
    assert exit_.value.code == 2 and "--limit: must be a whole number of 1 or more" in capsys.readouterr().err


@pytest.mark.usefixtures("toy_op")
@pytest.mark.parametrize("command", ["report", "train"])
def test_an_out_that_cannot_be_made_is_refused_before_the_work(tmp_path, capsys, command):
    """Under a file: the report made its folder after minutes of scoring, and both raised a raw OSError."""
    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    out = tmp_path / "t.csv" / ("report" if command == "report" else "m.json")
    assert main([command, str(table), "--out", str(out)]) == 2
    assert "cannot make --out" in capsys.readouterr().err


@pytest.mark.usefixtures("toy_op")
@pytest.mark.parametrize("command", ["train", "report", "profile"])
def test_a_refusal_after_the_out_folder_is_made_leaves_no_empty_folder(tmp_path, capsys, monkeypatch, command):
    """A table refused by training, a scoring or a profiling run that fails: each had left the
    folders it made for --out behind, empty. A folder that was there stays."""
    from seer.errors import SeerError

    def refuse(*args, **kwargs):
        raise SeerError("refused late")

    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    (tmp_path / "there").mkdir()
    if command == "train":  # a real refusal: the table is only read once the folder is made
        table.write_text("id,rows\na,1\n")
        argv = ["train", str(table), "--op", "spmv", "--out", str(tmp_path / "there/new/deeper/spmv-m.json")]
    elif command == "report":
        monkeypatch.setattr("seer.train.TwoStageSelector.evaluate", refuse)
        argv = ["report", str(table), "--out", str(tmp_path / "there/new/deeper")]
    else:
        monkeypatch.setattr("torch.cuda.is_available", lambda: True)
        monkeypatch.setattr("seer.datasets.cases.spmv_cases", lambda *args, **kwargs: ["a case"])
        monkeypatch.setattr("seer.profiling.profile", refuse)
        argv = ["profile", "spmv", "--synthetic", "small", "--out", str(tmp_path / "there/new/deeper/x.csv")]
    assert main(argv) == 2
    assert "error" in capsys.readouterr().err
    assert (tmp_path / "there").is_dir() and not (tmp_path / "there/new").exists()


def test_train_refuses_a_folder_as_its_table(tmp_path, capsys):
    assert main(["train", str(tmp_path)]) == 2
    assert "is a folder; give the profile table" in capsys.readouterr().err


@pytest.mark.usefixtures("toy_op")
def test_retiring_from_several_tables_checks_them_all_before_rewriting_any(tmp_path, capsys):
    from seer.table import main as table_main

    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    before = table.read_bytes()
    with pytest.raises(SystemExit) as exit_:
        table_main(["retire", str(table), str(tmp_path / "none.csv"), "--variant", "a"])
    assert exit_.value.code == 2 and "none.csv does not exist" in capsys.readouterr().err
    assert table.read_bytes() == before


@pytest.mark.usefixtures("toy_op")
def test_train_refuses_an_out_it_cannot_write_before_training(tmp_path, capsys, monkeypatch):
    """A folder named like a model, or a folder that takes no files, had raised a traceback after
    the training (minutes on the SpMV table; found by a review)."""
    import seer.train

    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    monkeypatch.setattr(seer.train, "train_table", lambda *a, **k: pytest.fail("trained before the check"))
    (tmp_path / "toy-m.json").mkdir()
    assert main(["train", str(table), "--out", str(tmp_path / "toy-m.json")]) == 2
    assert "is a folder; name the model file" in capsys.readouterr().err
    monkeypatch.setattr("tempfile.NamedTemporaryFile", lambda **k: (_ for _ in ()).throw(PermissionError(13, "Permission denied")))
    assert main(["train", str(table), "--out", str(tmp_path / "toy-n.json")]) == 2
    error = capsys.readouterr().err
    assert "cannot write --out" in error and "Permission denied" in error


def test_explain_takes_a_whole_number_of_calls(suitesparse_dir, capsys):
    matrix = next(suitesparse_dir.glob("HB__bcsstk*.mtx.gz"))
    with pytest.raises(SystemExit) as exit_:
        main(["explain", str(matrix), "--calls", "0"])
    printed = capsys.readouterr()
    assert exit_.value.code == 2 and "must be a whole number of 1 or more" in printed.err and "==" not in printed.out


@pytest.mark.gpu
def test_explain_runs_on_this_gpu(suitesparse_dir, capsys):
    """On a GPU host the matrix is explained on the GPU, so the model measured on it serves without
    a warning (the CLI had built CPU tensors, and every model was 'measured on ..., running on cpu')."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    matrix = next(suitesparse_dir.glob("HB__bcsstk*.mtx.gz"))
    assert main(["explain", str(matrix)]) == 0
    printed = capsys.readouterr()
    assert "running on 'cpu'" not in printed.err and "features:" in printed.out
    assert f"measured on {torch.cuda.get_device_name()!r}" not in printed.err  # its own model: no warning


@pytest.mark.gpu
def test_explain_on_a_gpu_says_which_model_dispatch_uses_there(suitesparse_dir, capsys):
    """Each model's choice is printed; the one seer.dispatch decides by on this GPU is marked (the
    output did not say which), and on a GPU no model serves, the hand rule's choice comes first."""
    import torch

    from seer.dispatch import SHIPPED_MODELS
    from seer.model import SelectorModel

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    matrix = next(suitesparse_dir.glob("HB__bcsstk*.mtx.gz"))
    assert main(["explain", str(matrix)]) == 0
    headers = [line for line in capsys.readouterr().out.splitlines() if line.startswith("== ")]
    own = [path.name for path in sorted(SHIPPED_MODELS.glob("spmv-*.json"))
           if SelectorModel.load(path).device.get("name") == torch.cuda.get_device_name()]
    marked = [line.split()[1] for line in headers if line.endswith("(seer.dispatch's model on this GPU)")]
    if own:
        assert marked == own[:1] and len(headers) == len(list(SHIPPED_MODELS.glob("spmv-*.json")))
    else:
        assert not marked and headers[0].startswith("== hand rule (seer.dispatch on this ")


def _campaigns(tmp_path):
    """Two campaigns of one planted table, ``t.csv`` and ``u.csv`` (its times 10 % longer)."""
    frame = planted_frame(groups=4, per_group=2)
    times = [c for c in frame.columns if c.startswith("time_ms:")]
    remeasured = frame.assign(**{c: frame[c] * 1.1 for c in times})
    return [write_table(f, tmp_path / name, planted_meta()) for name, f in (("t.csv", frame), ("u.csv", remeasured))]


@pytest.mark.usefixtures("toy_op")
@pytest.mark.parametrize("command", ["train", "report", "merge"])
@pytest.mark.parametrize("name", ["t.csv", "t.meta.json"])
def test_a_table_that_cannot_be_read_is_named(tmp_path, capsys, unreadable, command, name):
    """An unreadable table or metadata raised a raw PermissionError (found by a review)."""
    table, other = _campaigns(tmp_path)
    unreadable(tmp_path / name)
    out = {"train": "toy-m.json", "report": "report", "merge": "m.csv"}[command]
    assert main([command, str(table), *([str(other)] if command == "merge" else []), "--out", str(tmp_path / out)]) == 2
    assert f"seer {command}: error: cannot read {tmp_path / name}: Permission denied" in capsys.readouterr().err


@pytest.mark.usefixtures("toy_op")
def test_merge_takes_the_op_of_campaigns_whose_metadata_names_none(tmp_path, capsys):
    """Its error for such campaigns said to pass --op, which seer merge did not take (found by a review)."""
    tables = _campaigns(tmp_path)
    for table in tables:
        meta = json.loads(meta_path(table).read_text())
        meta.pop("op")
        meta_path(table).write_text(json.dumps(meta))
    out = tmp_path / "m.csv"
    assert main(["merge", *map(str, tables), "--out", str(out)]) == 2
    assert "name it (op=, or --op on the command line)" in capsys.readouterr().err
    assert main(["merge", *map(str, tables), "--out", str(out), "--op", "toy"]) == 0
    assert "8 rows from 2 campaigns" in capsys.readouterr().out
    assert read_table(out).op == "toy"  # the merged table names the op it was merged as


@pytest.mark.usefixtures("toy_op")
def test_a_file_error_no_check_caught_is_named_not_traced(tmp_path, capsys, monkeypatch):
    """The backstop: a file the user named that cannot be read or written, wherever it is found."""
    def fails(*args, **kwargs):
        raise IsADirectoryError(21, "Is a directory", "some/where.csv")

    monkeypatch.setattr("seer.table.merge_tables", fails)
    assert main(["merge", "a.csv", "b.csv", "--out", str(tmp_path / "m.csv")]) == 2
    assert "seer merge: error: cannot read or write some/where.csv: Is a directory" in capsys.readouterr().err


@pytest.mark.usefixtures("toy_op")
@pytest.mark.parametrize("out, message", [("m.json", "m.json is JSON"), ("t.csv/m.csv", "cannot write .*t.csv/m.csv"),
                                          ("folder", "folder is a folder")])
def test_merge_refuses_an_out_it_cannot_write_before_writing_anything(tmp_path, capsys, out, message):
    """A .json out was written, table and metadata, then refused when read back; a folder or a path
    under a file raised a traceback (found by a review)."""
    tables = _campaigns(tmp_path)
    (tmp_path / "folder").mkdir()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert main(["merge", *map(str, tables), "--out", str(tmp_path / out)]) == 2
    assert re.search(f"seer merge: error: .*{message}", capsys.readouterr().err)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("out, max_nnz, message", [
    ("folder", "100000", "folder is a folder; give the profile table"),
    ("p.json", "100000", "p.json is JSON"),
    ("afile/t.csv", "100000", "cannot make --out's folder"),
    ("t.csv", "1", r"nothing to profile: no matrix of .* has at most --max-nnz 1 nonzeros"),
])
def test_profile_refuses_an_out_or_filters_that_leave_nothing_before_writing(suitesparse_dir, tmp_path, capsys,
                                                                              monkeypatch, out, max_nnz, message):
    """A folder or a path under a file raised a traceback, a .json table was accepted, and filters that
    left no input wrote a table of metadata alone and said "wrote" (found by a review)."""
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("seer.profiling.profile", lambda *args, **kwargs: pytest.fail("profiled"))
    (tmp_path / "folder").mkdir()
    (tmp_path / "afile").write_text("")
    before = sorted(tmp_path.rglob("*"))
    argv = ["profile", "spmv", "--matrices", str(suitesparse_dir), "--max-nnz", max_nnz, "--out", str(tmp_path / out)]
    assert main(argv) == 2
    assert re.search(f"seer profile: error: .*{message}", capsys.readouterr().err)
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.usefixtures("toy_op")
def test_train_refuses_a_folder_where_it_would_write_the_rules_before_training(tmp_path, capsys, monkeypatch):
    """The rules' .txt a folder: found when writing them, after the training (found by a review)."""
    import seer.train

    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    monkeypatch.setattr(seer.train, "train_table", lambda *a, **k: pytest.fail("trained before the check"))
    (tmp_path / "toy-m.txt").mkdir()
    assert main(["train", str(table), "--out", str(tmp_path / "toy-m.json")]) == 2
    assert "toy-m.txt is a folder, where training would write the model's rules" in capsys.readouterr().err


def test_report_names_a_folder_given_as_its_table(tmp_path, capsys):
    """It said the table did not exist."""
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert "is a folder; give the profile table" in capsys.readouterr().err


@pytest.mark.usefixtures("toy_op")
def test_report_names_the_variants_and_features_a_model_does_not_share_with_the_table(tmp_path, capsys):
    """A model of the op trained on other columns was described beside the table's scores silently
    where it had no training record to compare (found by a review)."""
    assert main(["train", str(write_planted(tmp_path / "t.csv", groups=4, per_group=2)),
                 "--out", str(tmp_path / "m.json")]) == 0
    from seer.model import SelectorModel

    document = SelectorModel.load(tmp_path / "m.json").to_dict()
    document["training"].pop("sha256")  # a model from before the record, or written by other tools
    SelectorModel.from_dict(document).save(tmp_path / "m.json")
    frame = planted_frame(groups=4, per_group=2).drop(columns=["time_ms:c", "row_max"])
    other = write_table(frame.assign(**{"time_ms:d": frame["time_ms:a"]}), tmp_path / "other.csv", planted_meta())
    capsys.readouterr()
    assert main(["report", str(other), "--model", str(tmp_path / "m.json"), "--out", str(tmp_path / "r")]) == 0
    error = capsys.readouterr().err
    assert (f"warning: model {tmp_path / 'm.json'} does not match {other} (variants the table lacks ['c']; features "
            "the table lacks ['row_max']; variants only the table times ['d'])") in error


@pytest.mark.usefixtures("toy_op")
def test_train_writes_the_model_and_its_rules_together_or_not_at_all(tmp_path, capsys, monkeypatch):
    """A full disk while writing the rules ended in a traceback after the model was replaced: the new model
    sat beside the old one's rules (a review). Now a write that fails replaces none of the four files, and
    the error is one line."""
    import errno
    import pathlib

    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    out = tmp_path / "toy-m.json"
    assert main(["train", str(table), "--out", str(out)]) == 0
    files = [out.with_suffix(suffix) for suffix in (".json", ".txt", ".md", ".py")]
    before = [path.read_bytes() for path in files]
    other = write_planted(tmp_path / "u.csv", groups=4, per_group=3, seed=5)
    write_bytes = pathlib.Path.write_bytes

    def full_at_the_rules(path, data):
        if path.name.startswith(".toy-m.py"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_bytes(path, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", full_at_the_rules)
    capsys.readouterr()
    assert main(["train", str(other), "--out", str(out)]) == 2
    assert "seer train: error: cannot save the model to " in capsys.readouterr().err
    assert [path.read_bytes() for path in files] == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["t.csv", "t.meta.json", "u.csv", "u.meta.json",
                                                                 *(p.name for p in files)])  # no partial file left


def test_an_error_without_a_file_name_is_one_line(monkeypatch, capsys):
    """An OSError naming no file (a full disk, EIO) was re-raised as a traceback, status 1 (a review)."""
    import errno

    from seer import cli

    def fails(args, command):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(cli, "_explain", fails)  # the parser is built per call, naming the module's function
    assert main(["explain", "64x64x64", "--op", "gemm"]) == 2
    assert capsys.readouterr().err == "seer explain: error: cannot read or write: Input/output error\n"


@pytest.mark.usefixtures("toy_op")
def test_train_refuses_to_replace_a_model_of_another_op_or_gpu(tmp_path, capsys):
    """A mistyped --out replaced a GEMM model with an SpMV one (or an H100 model with an H200 table's),
    without a word (a review). Retraining the same op on the same GPU still replaces its model."""
    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    out = tmp_path / "toy-m.json"
    assert main(["train", str(table), "--out", str(out)]) == 0
    original = json.loads(out.read_text())
    for field, value, what in (("op", "gemm", "op"), ("device", {"name": "Another GPU"}, "GPU")):
        out.write_text(json.dumps({**original, field: value}))
        written = out.read_bytes()
        assert main(["train", str(table), "--out", str(out)]) == 2
        assert f"holds a model of {what} " in capsys.readouterr().err
        assert out.read_bytes() == written
    out.unlink()
    assert main(["train", str(table), "--out", str(out)]) == 0
    assert main(["train", str(table), "--out", str(out)]) == 0


def test_a_closed_stdout_ends_the_command_quietly(monkeypatch, capfd):
    """`seer train ... | head -1` ended in BrokenPipeError's traceback, status 1 (a review): now status 1
    alone, stdout pointed at /dev/null so that Python's flush at exit raises nothing more."""
    import os
    import sys

    from seer import cli

    def closed(args, command):
        raise BrokenPipeError(32, "Broken pipe")

    pointed = []
    monkeypatch.setattr(cli, "_explain", closed)
    monkeypatch.setattr(os, "dup2", lambda source, target: pointed.append(target))
    assert main(["explain", "64x64x64", "--op", "gemm"]) == 1
    assert pointed == [sys.stdout.fileno()] and capfd.readouterr().err == ""


def test_max_nnz_without_matrices_is_refused(capsys, monkeypatch, tmp_path):
    """It filters the real matrices alone: with only a generated suite it did nothing, without a word (a review)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # refused before any GPU work
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "spmv", "--synthetic", "small", "--max-nnz", "10", "--out", "x.csv"]) == 2
    assert "--max-nnz filters the real matrices of --matrices, and none are given" in capsys.readouterr().err


@pytest.mark.usefixtures("toy_op")
def test_train_into_a_folder_dispatch_does_not_search_says_how_to_make_it_serve(tmp_path, capsys, monkeypatch):
    """The README's `seer train --out models/spmv-mine.json` run outside a checkout wrote a model that
    dispatch never found, in silence (a review); where $SEER_MODELS lists the folder, nothing to say."""
    table = write_planted(tmp_path / "t.csv", groups=4, per_group=2)
    monkeypatch.delenv("SEER_MODELS", raising=False)
    assert main(["train", str(table), "--out", str(tmp_path / "mine" / "toy-m.json")]) == 0
    error = capsys.readouterr().err
    assert (f"seer.dispatch looks for models in seer's own models folder and those of $SEER_MODELS, not in "
            f"{tmp_path / 'mine'}: export SEER_MODELS={(tmp_path / 'mine').resolve()}") in error
    monkeypatch.setenv("SEER_MODELS", str(tmp_path / "mine"))
    assert main(["train", str(table), "--out", str(tmp_path / "mine" / "toy-m.json")]) == 0
    assert "looks for models" not in capsys.readouterr().err
