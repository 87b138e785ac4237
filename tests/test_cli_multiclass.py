"""The real ``mlcal`` CLI on multiclass data: fit (--score-columns), evaluate, export-onnx."""

import json
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pandas as pd
import pytest

from mlcal import load_calibrator
from mlcal.calibrators.multiclass import MatrixScaling, OneVsRest, TemperatureScaling
from mlcal.cli import main
from mlcal.metrics.multiclass import classwise_ece, multiclass_brier, top_label_ece
from mlcal.onnx import error_bound
from support.synthetic import multiclass_set

K = 3
COLS = ["p_ant", "p_bee", "p_cat"]
NAMES = ["ant", "bee", "cat"]


@pytest.fixture()
def csv(tmp_path):
    z, p, y = multiclass_set(900, K, seed=11)
    frame = pd.DataFrame(p, columns=COLS)
    frame[["z_ant", "z_bee", "z_cat"]] = z
    frame["y"] = y
    frame["name"] = np.array(NAMES)[y]
    frame["w"] = np.random.default_rng(1).integers(1, 4, y.size).astype(float)
    path = tmp_path / "cal.csv"
    frame.to_csv(path, index=False)
    return path, pd.read_csv(path)   # what the CLI sees, after the CSV round trip


def _fit(path, out, method, *extra):
    return main(["fit", "--method", method, "--data", str(path), "--score-columns",
                 ",".join(COLS), "--out", str(out), *extra])


@pytest.mark.parametrize("method, expected", [("temperature", TemperatureScaling),
                                              ("matrix", MatrixScaling),
                                              ("isotonic", OneVsRest), ("platt", OneVsRest)])
def test_fit_equals_the_python_api(csv, tmp_path, method, expected, capsys):
    path, frame = csv
    out = tmp_path / f"{method}.json"
    assert _fit(path, out, method, "--weight-column", "w") == 0
    assert f"{K} classes" in capsys.readouterr().out
    cal = load_calibrator(str(out))
    assert isinstance(cal, expected)
    ref = (expected() if expected is not OneVsRest else OneVsRest(method))
    ref.fit(frame[COLS].to_numpy(), frame["y"].to_numpy(), sample_weight=frame["w"].to_numpy())
    assert out.read_text(encoding="utf-8").strip() == ref.to_json(indent=1).strip()


def test_class_names_match_indices(csv, tmp_path):
    path, _ = csv
    by_index, by_name = tmp_path / "i.json", tmp_path / "n.json"
    assert _fit(path, by_index, "vector") == 0
    assert _fit(path, by_name, "vector", "--label-column", "name", "--classes",
                ",".join(NAMES)) == 0
    assert by_index.read_bytes() == by_name.read_bytes()


def test_logit_columns_and_params(csv, tmp_path):
    path, frame = csv
    out = tmp_path / "m.json"
    assert main(["fit", "--method", "matrix", "--data", str(path), "--score-columns",
                 "z_ant,z_bee,z_cat", "--param", "off_diagonal_penalty=0.5",
                 "--out", str(out)]) == 0
    cal = load_calibrator(str(out))
    assert cal.map_.input == "logits" and cal.off_diagonal_penalty == 0.5


def test_evaluate_reports_multiclass_metrics(csv, tmp_path, capsys):
    path, frame = csv
    out = tmp_path / "t.json"
    assert _fit(path, out, "temperature") == 0
    capsys.readouterr()
    assert main(["evaluate", "--calibrator", str(out), "--data", str(path), "--score-columns",
                 ",".join(COLS), "--n-bins", "12", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    p, y = frame[COLS].to_numpy(), frame["y"].to_numpy()
    after = load_calibrator(str(out)).predict_proba(p)
    assert report["before"]["top_label_ece"] == top_label_ece(y, p, 12)
    assert report["after"]["classwise_ece"] == classwise_ece(y, after, 12)
    assert report["after"]["multiclass_brier"] == multiclass_brier(y, after)
    # the labels were drawn at temperature 2: calibration must help
    assert report["after"]["top_label_ece"] < report["before"]["top_label_ece"]
    assert report["improvement"]["log_loss"] > 0
    assert main(["evaluate", "--calibrator", str(out), "--data", str(path), "--score-columns",
                 ",".join(COLS)]) == 0
    table = capsys.readouterr().out
    assert "top_label_ece" in table and "classwise_ece" in table


def test_evaluate_on_logits_starts_from_their_softmax(csv, tmp_path, capsys):
    from scipy.special import softmax

    path, frame = csv
    out = tmp_path / "v.json"
    cols = "z_ant,z_bee,z_cat"
    assert main(["fit", "--method", "vector", "--data", str(path), "--score-columns", cols,
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--calibrator", str(out), "--data", str(path), "--score-columns",
                 cols, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    z = frame[["z_ant", "z_bee", "z_cat"]].to_numpy()
    assert report["before"]["multiclass_brier"] == multiclass_brier(frame["y"], softmax(z, axis=1))


def test_export_onnx_infers_k_and_matches_predict_proba(csv, tmp_path, capsys):
    path, frame = csv
    cal_path, onnx_path = tmp_path / "iso.json", tmp_path / "iso.onnx"
    assert _fit(path, cal_path, "isotonic") == 0
    capsys.readouterr()
    assert main(["export-onnx", "--calibrator", str(cal_path), "--out", str(onnx_path)]) == 0
    msg = capsys.readouterr().out
    assert f"'scores' [N, {K}]" in msg and "bit-identical" in msg
    cal = load_calibrator(str(cal_path))
    assert error_bound(cal.map_, "float64") == 0.0
    p = frame[COLS].to_numpy()
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(sess.run(None, {"scores": p})[0], cal.predict_proba(p))
    # never overwritten without --force
    assert main(["export-onnx", "--calibrator", str(cal_path), "--out", str(onnx_path)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_bad_input_gets_named_errors_and_exit_code_2(csv, tmp_path, capsys):
    path, frame = csv
    bad = frame.copy()
    bad["p_bee"] = bad["p_bee"] * 0.5       # rows no longer sum to 1
    bad["y_two"] = bad["y"] % 2              # class 2 never occurs
    bad_path = tmp_path / "bad.csv"
    bad.to_csv(bad_path, index=False)
    out = str(tmp_path / "x.json")
    cases = [
        (["--data", str(bad_path), "--score-columns", ",".join(COLS), "--method", "temperature"],
         "do not sum to 1"),
        (["--data", str(bad_path), "--score-columns", "z_ant,z_bee,z_cat", "--method", "vector",
          "--label-column", "y_two"], "never occur"),
        (["--data", str(path), "--score-columns", "p_ant", "--method", "temperature"],
         "at least 2 columns"),
        (["--data", str(path), "--score-columns", ",".join(COLS), "--method", "vector",
          "--label-column", "name"], "pass --classes"),
        (["--data", str(path), "--score-columns", ",".join(COLS), "--method", "vector",
          "--label-column", "name", "--classes", "ant,bee"], "one name per score column"),
        (["--data", str(path), "--score-columns", ",".join(COLS), "--method", "vector",
          "--label-column", "name", "--classes", "ant,bee,dog"], "not among"),
        (["--data", str(path), "--score-columns", "p_ant,p_zzz", "--method", "vector"],
         "no column"),
        (["--data", str(path), "--score-columns", ",".join(COLS), "--method", "magic"],
         "multiclass methods"),
    ]
    for argv, needle in cases:
        assert main(["fit", *argv, "--out", out]) == 2, argv
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, (argv, err)
    assert not (tmp_path / "x.json").exists()
    # a multiclass calibrator evaluated without its columns, and a binary one with them
    cal = tmp_path / "t.json"
    assert _fit(path, cal, "temperature") == 0
    assert main(["evaluate", "--calibrator", str(cal), "--data", str(path)]) == 2
    assert "--score-columns" in capsys.readouterr().err
    assert main(["evaluate", "--calibrator", str(cal), "--data", str(path), "--score-columns",
                 "p_ant,p_bee"]) == 2
    assert "fitted on 3 classes" in capsys.readouterr().err


def test_console_script_help_documents_the_label_convention():
    out = subprocess.run([sys.executable, "-m", "mlcal", "fit", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--score-columns" in out and "--classes" in out and "0..K-1" in out
