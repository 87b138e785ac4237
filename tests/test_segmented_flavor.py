"""CalibratedModel(segment_columns=...) and its MLflow flavour (#30): the segment columns are
read from the input frame, the base model gets its own columns, the saved model's signature
holds the segment columns, and a real `mlflow models serve` on 127.0.0.1 scores requests with
segment columns bit for bit as local predict (unseen segments fall back to the shared map)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

import mlcal
from mlcal.model import SegmentedMulticlassError
from mlcal.maps.segment_keys import SegmentKeyError

mlflow = pytest.importorskip("mlflow")

from mlcal.mlflow import ModelIntegrityError, load_model, save_model  # noqa: E402

REQS = ["scikit-learn", "numpy", "pandas"]


def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    country = rng.choice(["FR", "DE", "IT", "ES"], n, p=[0.4, 0.3, 0.2, 0.1])
    tier = rng.integers(0, 2, n)
    X = rng.normal(size=(n, 2))
    shift = pd.Series(country).map({"FR": 0.7, "DE": -0.5, "IT": 0.0, "ES": 0.4}).to_numpy()
    y = (rng.random(n) < expit(X @ [1.2, -0.8] + shift + 0.3 * tier)).astype(int)
    df = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "country": country, "tier": tier})
    return df, y


@pytest.fixture(scope="module")
def fitted():
    df, y = _data()
    base = LogisticRegression().fit(df[["a", "b"]][:1000], y[:1000])
    model = mlcal.CalibratedModel(base, "platt", segment_columns=["country", "tier"]).fit(
        df[1000:2000], y[1000:2000])
    return model, df, y


def test_segment_columns_are_read_from_the_frame(fitted):
    model, df, y = fitted
    cal = model.calibrator_
    assert isinstance(cal, mlcal.SegmentedCalibrator)
    assert cal.map_.columns == (("country", "string"), ("tier", "integer"))
    # the same as composing the parts by hand
    base = model.base_estimator
    direct = mlcal.SegmentedCalibrator("platt").fit(
        base.predict_proba(df[["a", "b"]][1000:2000])[:, 1], y[1000:2000],
        df[["country", "tier"]][1000:2000])
    test = df[2000:]
    expected = direct.predict(base.predict_proba(test[["a", "b"]])[:, 1],
                              test[["country", "tier"]])
    assert np.array_equal(model.predict_proba(test)[:, 1], expected)
    assert direct.to_json() == cal.to_json()
    # column order of the frame does not matter; a missing segment column is named
    assert np.array_equal(model.predict_proba(test[test.columns[::-1]])[:, 1], expected)
    with pytest.raises(SegmentKeyError, match=r"X has no segment column\(s\) \['tier'\]"):
        model.predict_proba(test.drop(columns="tier"))


def test_a_segment_column_the_base_model_uses_is_passed_to_it_too():
    df, y = _data(seed=1)
    base = LogisticRegression().fit(df[["a", "tier", "b"]][:1000], y[:1000])
    model = mlcal.CalibratedModel(base, "platt", segment_columns=["tier"]).fit(
        df[1000:2000], y[1000:2000])
    test = df[2000:]
    scores = base.predict_proba(test[["a", "tier", "b"]])[:, 1]
    assert np.array_equal(model.predict_uncalibrated(test), scores)
    assert np.array_equal(model.predict_proba(test)[:, 1],
                          model.calibrator_.predict(scores, test["tier"]))


def test_a_base_model_without_column_names_gets_the_other_columns_as_an_array():
    df, y = _data(seed=2)
    base = LogisticRegression().fit(df[["a", "b"]].to_numpy()[:1000], y[:1000])
    model = mlcal.CalibratedModel(base, "platt", segment_columns=["country"]).fit(
        df[["a", "b", "country"]][1000:2000], y[1000:2000])
    test = df[["a", "b", "country"]][2000:]   # the non-segment columns in the fitted order
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no "X has feature names" warning from sklearn
        got = model.predict_uncalibrated(test)
    assert np.array_equal(got, base.predict_proba(test[["a", "b"]].to_numpy())[:, 1])


def test_segmented_calibration_is_binary_only_and_needs_a_frame(fitted):
    rng = np.random.default_rng(3)
    X = pd.DataFrame({"a": rng.normal(size=300), "g": rng.choice(["x", "y"], 300)})
    y3 = rng.integers(0, 3, 300)
    base = LogisticRegression().fit(X[["a"]], y3)
    with pytest.raises(SegmentedMulticlassError, match="binary models only; this base model "
                                                       "has 3 classes"):
        mlcal.CalibratedModel(base, segment_columns=["g"]).fit(X, y3)
    model, df, _ = fitted
    with pytest.raises(SegmentKeyError, match="X must be a pandas DataFrame"):
        model.predict_proba(df.to_numpy())
    with pytest.raises(ValueError, match="needs segment_columns"):
        mlcal.CalibratedModel(model.base_estimator, mlcal.SegmentedCalibrator("platt")).fit(
            df[:500], _data()[1][:500])


def test_mlflow_round_trip_keeps_the_segment_columns(fitted, tmp_path):
    model, df, _ = fitted
    path = tmp_path / "saved"
    save_model(model, str(path), input_example=df[:5], pip_requirements=REQS)
    mlmodel = mlflow.models.Model.load(str(path))
    sig = {spec.name: spec.type.name for spec in mlmodel.signature.inputs.inputs}
    assert sig["country"] == "string" and sig["tier"] == "long"
    conf = mlmodel.flavors["mlcal"]
    assert conf["segment_columns"] == ["country", "tier"]
    assert conf["calibration_method"] == "segmented" and conf["map_type"] == "segmented"
    loaded = load_model(str(path))
    test = df[2000:]
    assert np.array_equal(loaded.predict_proba(test), model.predict_proba(test))
    pyfunc = mlflow.pyfunc.load_model(str(path))
    out = pyfunc.predict(test)
    assert np.array_equal(out["p_calibrated"].to_numpy(), model.predict_proba(test)[:, 1])
    # an edited calibrator (say, one segment's offset) is refused by the integrity check
    doc = json.loads((path / "calibrator.json").read_text())
    doc["map"]["offsets"][0] += 1.0
    (path / "calibrator.json").write_text(json.dumps(doc))
    with pytest.raises(ModelIntegrityError, match="calibrator.json was changed"):
        load_model(str(path))


def test_a_signature_without_the_segment_columns_is_refused(fitted, tmp_path):
    model, df, _ = fitted
    with pytest.raises(ValueError, match="signature has no segment column 'country'"):
        save_model(model, str(tmp_path / "m"), input_example=df[["a", "b", "tier"]][:5],
                   pip_requirements=REQS)
    assert not (tmp_path / "m").exists()


@pytest.fixture(scope="module")
def served(fitted, tmp_path_factory):
    from support.serving import LocalServer

    model, df, _ = fitted
    root = tmp_path_factory.mktemp("serve_segmented")
    path = root / "model"
    save_model(model, str(path), input_example=df[:3], pip_requirements=REQS)
    server = LocalServer(str(path), log_path=str(root / "server.log")).start()
    try:
        yield server.url
    finally:
        server.stop()


def test_served_predictions_read_the_segment_columns(fitted, served):
    from support.http import post

    model, df, _ = fitted
    rows = df[2000:2300].copy()
    rows.loc[rows.index[:5], "country"] = "PT"   # unseen: the shared map
    body = {"dataframe_split": {"columns": list(rows.columns),
                                "data": rows.astype(object).to_numpy().tolist()}}
    status, text = post(f"{served}/invocations", json.dumps(body))
    assert status == 200, text
    got = pd.DataFrame(json.loads(text)["predictions"])["p_calibrated"].to_numpy()
    local = model.predict_proba(rows)[:, 1]
    assert np.array_equal(got.view(np.int64), local.view(np.int64))
    shared = model.calibrator_.map_.inner(model.predict_uncalibrated(rows[:5]))
    assert np.array_equal(got[:5], shared)
    # the segment adjustment is real: a seen segment moves away from the shared map
    assert np.abs(got[5:] - model.calibrator_.map_.inner(
        model.predict_uncalibrated(rows[5:]))).max() > 0.02
    # a request without a segment column is the caller's error (400)
    status, text = post(f"{served}/invocations", json.dumps(
        {"dataframe_records": rows.drop(columns="country")[:2].to_dict(orient="records")}))
    assert status == 400 and "country" in text, text


def test_pyfunc_turns_an_unseen_segment_under_raise_into_a_named_client_error():
    from mlflow.exceptions import MlflowException

    from mlcal.mlflow.flavor import CalibratedPyfuncModel

    df, y = _data(seed=4)
    base = LogisticRegression().fit(df[["a", "b"]][:1000], y[:1000])
    model = mlcal.CalibratedModel(
        base, mlcal.SegmentedCalibrator("platt", unseen="raise"),
        segment_columns=["country"]).fit(df[1000:2000], y[1000:2000])
    rows = df[2000:2003].copy()
    rows["country"] = ["FR", "PT", "DE"]
    with pytest.raises(MlflowException, match=r"row 1: segment \['PT'\].*not seen") as info:
        CalibratedPyfuncModel(model).predict(rows)
    assert info.value.error_code == "INVALID_PARAMETER_VALUE"   # served as HTTP 400


def test_the_html_report_of_a_segmented_model_uses_its_segments(fitted):
    from mlcal.report.model import report_for_model

    model, df, y = fitted
    report = report_for_model(model, df[2000:2600], y[2000:2600], n_resamples=50)
    assert np.array_equal(report.p_after, model.predict_proba(df[2000:2600])[:, 1])
    assert report.summary["calibrator"]["method"] == "segmented"
    assert report.map_data is None   # no single curve over the score to draw
    from mlcal.report.html import render_html

    assert "segmented" in render_html(report)


def test_a_margin_base_model_gets_the_sigmoid_input_transform_on_the_shared_map():
    from sklearn.svm import LinearSVC

    df, y = _data(seed=5)
    base = LinearSVC().fit(df[["a", "b"]][:1000], y[:1000])   # decision_function only
    model = mlcal.CalibratedModel(base, "beta", segment_columns=["country"]).fit(
        df[1000:2000], y[1000:2000])
    assert model.score_source_ == "decision_function"
    assert model.calibrator_.map_.input_transform == "sigmoid"
    assert model.calibrator_.map_.inner.kind == "beta"
    p = model.predict_proba(df[2000:])[:, 1]
    assert np.all((p >= 0) & (p <= 1))
    with pytest.raises(ValueError, match=r"column\(s\) \['b'\] of the base model are missing"):
        model.predict_proba(df.drop(columns="b")[2000:])
