"""Untrusted artifacts: every malformed calibrator document, calibrator file or MLmodel entry is
rejected with a CalibratorFormatError (CLI exit 2) that names the problem; paths stay inside the
model directory; loading stays JSON-only."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from mlcal import Isotonic, get_calibrator
from mlcal._safe_json import MAX_DEPTH
from mlcal.calibrators._params import (Boolean, Integer, InvalidParameterError, IsNone, ListOf,
                                       Options, Real, validate_params)
from mlcal.calibrators.base import CalibratorFormatError, load_calibrator, save_calibrator
from mlcal.cli import main
from support.tamper import reseal

SECRET = "top-secret-contents-42"


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(3)
    s = rng.random(300)
    y = (rng.random(300) < s).astype(float)
    return Isotonic().fit(s, y)


def _doc(cal):
    return json.loads(cal.to_json())


# -- calibrator documents ----------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ('{"format": "mlcal-calibrator", "format_version": 1e400}', "out of the range"),
    ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nested deeper"),
    ('{"a": ' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1), "nested deeper"),
    ('{"format": "mlcal-\x00calibrator"}', "not valid JSON"),
    ("\x00", "neither a JSON object nor a file path"),
    ('{"format": NaN}', "non-finite"),
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ('{"n": ' + "9" * 5000 + "}", "more than 400 digits"),
])
def test_hostile_json_text_gives_a_named_format_error(text, message):
    with pytest.raises(CalibratorFormatError, match=message):
        load_calibrator(text)


def test_byte_order_mark_is_a_format_error_not_a_path(fitted, tmp_path):
    text = "\ufeff" + fitted.to_json()
    with pytest.raises(CalibratorFormatError, match="byte-order mark"):
        load_calibrator(text)
    path = tmp_path / "bom.json"
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(CalibratorFormatError, match="byte-order mark"):
        load_calibrator(path)


def test_a_file_holding_a_path_is_not_followed(fitted, tmp_path):
    real = tmp_path / "real.json"
    save_calibrator(fitted, str(real))
    pointer = tmp_path / "pointer.json"
    pointer.write_text(str(real))   # before the fix this loaded real.json
    with pytest.raises(CalibratorFormatError, match="not valid JSON"):
        load_calibrator(pointer)
    with pytest.raises(CalibratorFormatError, match="not valid JSON"):
        load_calibrator(str(pointer))


def test_size_cap(fitted, tmp_path):
    text = fitted.to_json()
    with pytest.raises(CalibratorFormatError, match="over the 100"):
        load_calibrator(text, max_bytes=100)
    path = tmp_path / "cal.json"
    path.write_text(text)
    with pytest.raises(CalibratorFormatError, match="larger than the 100-byte limit"):
        load_calibrator(path, max_bytes=100)
    assert load_calibrator(path).map_ == fitted.map_


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(format_version=True), "format_version True"),
    (lambda d: d["map"].update(format_version=True), "map: unsupported format_version True"),
    (lambda d: d.update(params={"interpolate": "x"}), "'interpolate' must be True or False"),
    (lambda d: d.update(params={"nope": 1}), "no parameter"),
    (lambda d: d.update(method=["isotonic"]), "'method' must be a string"),
    (lambda d: d["map"].update(type=["linear"]), "unknown map type"),
    (lambda d: d["map"].update(values=[10 ** 400] * len(d["map"]["values"])), "non-finite"),
])
def test_invalid_fields_are_named(fitted, edit, message):
    doc = _doc(fitted)
    edit(doc)
    with pytest.raises(CalibratorFormatError, match=message):
        load_calibrator(doc)


@pytest.mark.parametrize("method, params, name", [
    ("histogram", {"n_bins": "x"}, "n_bins"),
    ("histogram", {"n_bins": 0}, "n_bins"),
    ("histogram", {"n_bins": 2.0}, "n_bins"),
    ("bbq", {"alpha": -1}, "alpha"),
    ("kde", {"bandwidth": 0}, "bandwidth"),
    ("elite", {"lambda_min_ratio": 1.5}, "lambda_min_ratio"),
    ("sbb", {"lam_grid": [1.0, -2.0]}, "lam_grid"),
    ("abb", {"max_unique": 1}, "max_unique"),
    ("enir", {"input_transform": "logit"}, "input_transform"),
    ("platt", {"smooth_targets": 1}, "smooth_targets"),
])
def test_parameters_are_checked_on_load_and_at_fit(method, params, name):
    rng = np.random.default_rng(0)
    s = rng.random(200)
    y = (rng.random(200) < s).astype(float)
    doc = _doc(get_calibrator(method).fit(s, y))
    doc["params"].update(params)
    with pytest.raises(CalibratorFormatError, match=f"parameter '{name}' must be"):
        load_calibrator(doc)
    with pytest.raises(ValueError, match=f"parameter '{name}' must be"):
        get_calibrator(method, **params).fit(s, y)


def test_constraints_accept_and_reject_as_documented():
    rules = {"a": [Integer(2)], "b": [IsNone(), Real(0.0, 1.0, closed="right")],
             "c": [Options(("x", "y"))], "d": [Boolean()], "e": [ListOf(Real(0.0))]}
    validate_params("T", {"a": 2, "b": None, "c": "y", "d": False, "e": [0, 1.5]}, rules)
    validate_params("T", {"a": np.int64(5), "b": 1, "d": np.bool_(True), "e": np.ones(3)}, rules)
    for bad in ({"a": 1}, {"a": True}, {"a": 2.0}, {"b": 0.0}, {"b": float("nan")},
                {"b": 10 ** 400}, {"c": "z"}, {"c": ["x"]}, {"d": 0}, {"e": []}, {"e": [-1]},
                {"e": "abc"}, {"e": np.ones((2, 2))}):
        with pytest.raises(InvalidParameterError, match=f"T: parameter '{next(iter(bad))}'"):
            validate_params("T", bad, rules)


# -- the CLI -----------------------------------------------------------------------------------
def test_cli_exits_2_on_a_hostile_calibrator_file(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("score,y\n0.1,0\n0.9,1\n")
    bad = tmp_path / "cal.json"
    bad.write_text('{"format": "mlcal-calibrator", "format_version": 1, "x": ' + "[" * 50_000)
    code = main(["evaluate", "--calibrator", str(bad), "--data", str(data)])
    assert code == 2
    assert "nested deeper" in capsys.readouterr().err


# -- the MLflow flavour -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    pytest.importorskip("mlflow")
    from sklearn.linear_model import LogisticRegression

    from mlcal import CalibratedModel
    from mlcal.mlflow import save_model

    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] + rng.normal(size=400) > 0).astype(int)
    model = CalibratedModel(LogisticRegression().fit(X[:200], y[:200]), "isotonic")
    model.fit(X[200:], y[200:])
    path = tmp_path_factory.mktemp("flavour") / "model"
    save_model(model, str(path), pip_requirements=["scikit-learn", "numpy"])
    return path


def _with_conf(src: Path, dst: Path, **changes) -> Path:
    import shutil

    shutil.copytree(src, dst)
    mlmodel = yaml.safe_load((dst / "MLmodel").read_text())
    mlmodel["flavors"]["mlcal"].update(changes)
    (dst / "MLmodel").write_text(yaml.safe_dump(mlmodel))
    reseal(dst)   # digests recomputed: the field checks behind them are what is tested
    return dst


def test_calibrator_entry_outside_the_model_dir_is_refused(saved_model, tmp_path, fitted):
    from mlcal.mlflow import load_model

    outside = tmp_path / "secret.json"
    outside.write_text(SECRET)
    decoy = tmp_path / "decoy.json"     # a valid calibrator outside: still refused
    save_calibrator(fitted, str(decoy))
    for i, entry in enumerate(["../secret.json", str(outside), "../decoy.json", "", "\x00a",
                               ["calibrator.json"], 7]):
        model = _with_conf(saved_model, tmp_path / f"m{i}", calibrator=entry)
        with pytest.raises(CalibratorFormatError, match="'calibrator'") as err:
            load_model(str(model))
        assert SECRET not in str(err.value)


def test_calibrator_json_holding_a_path_is_not_followed(saved_model, tmp_path):
    from mlcal.mlflow import load_model

    (tmp_path / "secret.json").write_text(SECRET)
    model = _with_conf(saved_model, tmp_path / "m")
    # a valid calibrator elsewhere (before the fix it was loaded), then a file whose content
    # is not JSON (before the fix its content was echoed in the error)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text((model / "calibrator.json").read_text())
    for target in (elsewhere, tmp_path / "secret.json"):
        (model / "calibrator.json").write_text(str(target))
        reseal(model)
        with pytest.raises(CalibratorFormatError, match="not valid JSON") as err:
            load_model(str(model))
        assert SECRET not in str(err.value)


def test_symlinked_calibrator_leading_out_is_refused(saved_model, tmp_path):
    from mlcal.mlflow import ModelIntegrityError, load_model

    (tmp_path / "secret.json").write_text(SECRET)
    model = _with_conf(saved_model, tmp_path / "m")
    (model / "calibrator.json").unlink()
    (model / "calibrator.json").symlink_to(tmp_path / "secret.json")
    # no symlink at all is accepted in a model directory, resealed or not
    with pytest.raises(ModelIntegrityError, match="calibrator.json is a symlink") as err:
        load_model(str(model))
    assert SECRET not in str(err.value)


@pytest.mark.parametrize("field, value", [
    ("threshold", "x"), ("threshold", 2.0), ("threshold", True), ("threshold", None),
    ("classes", [0]), ("classes", [1, 1]), ("classes", ["a", 1]), ("classes", "01"),
    ("classes", [[0], [1]]), ("score_source", "evil"), ("score_source", None),
    ("base_model", "../elsewhere"),
])
def test_mlmodel_fields_are_validated(saved_model, tmp_path, field, value):
    from mlcal.mlflow import load_model

    model = _with_conf(saved_model, tmp_path / "m", **{field: value})
    with pytest.raises(CalibratorFormatError, match=f"'{field}'"):
        load_model(str(model))


def test_valid_model_still_loads(saved_model):
    from mlcal.mlflow import load_model

    model = load_model(str(saved_model))
    assert model.classes_.tolist() == [0, 1] and model.threshold == 0.5
