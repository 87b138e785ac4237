"""The mlcal MLflow flavour against a real sqlite tracking store in a temp dir (no mocks)."""

import contextlib
import io
import json
import os
import warnings

import mlflow
import mlflow.sklearn
import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow.exceptions import MlflowException
from sklearn.linear_model import LogisticRegression

import mlcal
from mlcal.calibrators.base import CalibratorFormatError
from mlcal.calibrators.isotonic import Isotonic
from mlcal.cli import main as cli_main
from mlcal.datasets import make_circular
from mlcal.mlflow import (ModelIntegrityError, PyfuncScorer, UnsafeModelFormatError,
                          get_default_pip_requirements, load_model, log_calibration, log_model,
                          save_model)
from mlcal.model import CalibratedModel
from support.mlflow_store import sqlite_store
from support.tamper import reseal

FAST_REQS = ["scikit-learn", "numpy", "pandas"]  # explicit: skips slow requirement inference


def _frame(X):
    return pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])


@pytest.fixture(scope="module")
def data():
    X, y = make_circular(1800, seed=11)
    order = np.random.default_rng(5).permutation(len(y))  # the generator lists class 0 first
    X, y = X[order], y[order]
    X = np.column_stack([X, (X ** 2).sum(1)])
    df = _frame(X)
    base = LogisticRegression(C=0.3).fit(df[:600], y[:600])  # deliberately miscalibrated
    model = CalibratedModel(base, Isotonic()).fit(df[600:1200], y[600:1200])
    return {"df": df, "y": y, "base": base, "model": model,
            "X_cal": df[600:1200], "y_cal": y[600:1200], "X_test": df[1200:], "y_test": y[1200:]}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow_store")
    with sqlite_store(root, "mlcal-flavor-tests", artifacts="artifacts") as uri:
        yield {"uri": uri, "root": root}


@pytest.fixture(scope="module")
def logged(store, data):
    with mlflow.start_run() as run:
        info = log_model(data["model"], name="calibrated", input_example=data["X_cal"][:4],
                         pip_requirements=FAST_REQS, registered_model_name="mlcal-test-model")
    return {"info": info, "run_id": run.info.run_id}


def test_log_then_load_gives_identical_probabilities(data, logged):
    info = logged["info"]
    assert info.registered_model_version == 1
    uris = (info.model_uri, f"runs:/{logged['run_id']}/calibrated", "models:/mlcal-test-model/1")
    for uri in uris:
        loaded = load_model(uri)
        assert isinstance(loaded, CalibratedModel)
        np.testing.assert_array_equal(loaded.predict_proba(data["X_test"]),
                                      data["model"].predict_proba(data["X_test"]))
    assert loaded.calibrator_.map_ == data["model"].calibrator_.map_
    assert loaded.classes_.tolist() == [0, 1] and loaded.threshold == 0.5
    assert loaded.score_source_ == "predict_proba"
    # the base model came back as the native scikit-learn estimator
    assert isinstance(loaded.base_estimator, LogisticRegression)
    np.testing.assert_array_equal(loaded.base_estimator.coef_, data["base"].coef_)


def test_pyfunc_load_predicts_probability_and_label(data, logged):
    pf = mlflow.pyfunc.load_model(logged["info"].model_uri)
    out = pf.predict(data["X_test"])
    assert list(out.columns) == ["p_calibrated", "label"]
    # independent oracle: an Isotonic fitted directly on the base model's probabilities
    s_cal = data["base"].predict_proba(data["X_cal"])[:, 1]
    s_test = data["base"].predict_proba(data["X_test"])[:, 1]
    expected = Isotonic().fit(s_cal, data["y_cal"]).predict(s_test)
    np.testing.assert_array_equal(out["p_calibrated"].to_numpy(), expected)
    np.testing.assert_array_equal(out["label"].to_numpy(), (expected >= 0.5).astype(int))
    with_raw = pf.predict(data["X_test"], params={"return_uncalibrated": True})
    np.testing.assert_array_equal(with_raw["score_uncalibrated"].to_numpy(), s_test)
    assert pf.metadata.get_params_schema().params[0].name == "return_uncalibrated"


def test_mlmodel_lists_both_flavours_and_stores_no_pickled_calibrator(logged, tmp_path):
    local = mlflow.artifacts.download_artifacts(logged["info"].model_uri, dst_path=str(tmp_path))
    with open(os.path.join(local, "MLmodel")) as fh:
        mlmodel = yaml.safe_load(fh)
    assert set(mlmodel["flavors"]) == {"mlcal", "python_function"}
    conf = mlmodel["flavors"]["mlcal"]
    assert mlmodel["flavors"]["python_function"]["loader_module"] == "mlcal.mlflow"
    assert conf["calibration_method"] == "isotonic" and conf["map_type"] == "linear"
    assert conf["base_flavor"] == "sklearn" and conf["mlcal_version"] == mlcal.__version__
    with open(os.path.join(local, conf["calibrator"])) as fh:
        doc = json.load(fh)
    assert doc["format"] == "mlcal-calibrator" and doc["method"] == "isotonic"
    with open(os.path.join(local, "base_model", "MLmodel")) as fh:
        assert "sklearn" in yaml.safe_load(fh)["flavors"]
    top_level = set(os.listdir(local))
    assert not any(f.endswith((".pkl", ".pickle")) for f in top_level)
    assert {"input_example.json", "serving_input_example.json", "requirements.txt"} <= top_level


def test_default_requirements_pin_mlcal():
    reqs = get_default_pip_requirements()
    assert f"mlcal=={mlcal.__version__}" in reqs
    assert any(r.startswith("scikit-learn==") for r in reqs)


def _installed(*names):
    from importlib.metadata import version

    return {f"{n}=={mlflow.__version__ if n == 'mlflow' else version(n)}" for n in names}


def _environment_files(path):
    """requirements.txt lines, conda.yaml's pip list and python_env.yaml's dependencies."""
    reqs = (path / "requirements.txt").read_text().split()
    conda = yaml.safe_load((path / "conda.yaml").read_text())
    conda_pip = [d for d in conda["dependencies"] if isinstance(d, dict)][0]["pip"]
    python_env = yaml.safe_load((path / "python_env.yaml").read_text())
    return reqs, conda_pip, python_env


def test_default_save_pins_every_needed_package_without_inference(data, tmp_path, monkeypatch):
    """No pip_requirements: the environment files name mlcal (bundled wheel or pin), mlflow,
    mlcal's runtime dependencies and the base flavour's packages at the installed versions,
    and MLflow's requirement inference (a subprocess loading the model) never runs."""
    import mlflow.models

    def no_inference(*args, **kwargs):
        raise AssertionError("requirement inference ran")

    monkeypatch.setattr(mlflow.models, "infer_pip_requirements", no_inference)
    monkeypatch.setattr("mlflow.utils.environment._infer_requirements", no_inference)
    expected = _installed("mlflow", "numpy", "scipy", "scikit-learn", "numba", "pandas",
                          "matplotlib", "skops")
    wheel = f"wheels/mlcal-{mlcal.__version__}-py3-none-any.whl"
    for bundle, own in ((True, wheel), (False, f"mlcal=={mlcal.__version__}")):
        path = tmp_path / f"bundle_{bundle}"
        save_model(data["model"], str(path), input_example=data["X_cal"][:3],
                   bundle_mlcal=bundle)
        reqs, conda_pip, python_env = _environment_files(path)
        assert own in reqs and expected <= set(reqs), reqs
        assert own in conda_pip and expected <= set(conda_pip), conda_pip
        assert python_env["dependencies"] == ["-r requirements.txt"]
        assert python_env["python"] == ".".join(map(str, __import__("sys").version_info[:3]))
        assert not any(r.startswith("pytest") for r in reqs)
        # the model's own environment (this one) satisfies every pin
        loaded = mlflow.pyfunc.load_model(str(path)).predict(data["X_test"][:5])
        np.testing.assert_array_equal(loaded["p_calibrated"].to_numpy(),
                                      data["model"].predict_proba(data["X_test"][:5])[:, 1])


def test_bundled_wheel_holds_the_sources_and_no_compiled_cache(tmp_path):
    """The wheel bundled into models holds every source file of the package and none of its
    compiled caches: bytecode, and numba's kernel cache (mlcal/_numba_cache/, present in a
    source tree that has fitted and in a wheel install; it was most of the bundled wheel)."""
    import zipfile
    from pathlib import Path

    from mlcal._kernel_cache import CACHE_ROOT
    from mlcal.mlflow.bundle import build_wheel

    pkg = Path(mlcal.__file__).resolve().parent
    Isotonic().fit(np.linspace(0.01, 0.99, 50), np.arange(50) % 2)   # this tree's cache exists
    compiled = {"__pycache__", CACHE_ROOT.name}
    sources = {f"mlcal/{f.relative_to(pkg).as_posix()}" for f in pkg.rglob("*.py")
               if not compiled & set(f.relative_to(pkg).parts)}
    names = set(zipfile.ZipFile(build_wheel(str(tmp_path))).namelist())
    assert sources <= names and "mlcal/__init__.py" in sources
    assert not [n for n in names if compiled & set(n.split("/")) or n.endswith((".pyc", ".pyo"))]


def test_third_party_classes_inside_the_base_are_required(data, tmp_path):
    """A pipeline is nested with mlflow.sklearn, yet its XGBoost step needs xgboost: the walk
    through the estimator's parameters finds it."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from xgboost import XGBClassifier

    from mlcal.mlflow.requirements import estimator_modules

    pipe = make_pipeline(StandardScaler(), XGBClassifier(n_estimators=5, max_depth=2))
    assert estimator_modules(pipe) == {"sklearn", "xgboost"}
    pipe.fit(data["df"][:600], data["y"][:600])
    model = CalibratedModel(pipe, "platt").fit(data["X_cal"], data["y_cal"])
    save_model(model, str(tmp_path / "m"), base_format="cloudpickle")
    reqs, conda_pip, _ = _environment_files(tmp_path / "m")
    assert _installed("xgboost", "scikit-learn", "cloudpickle") <= set(reqs) & set(conda_pip)


def test_slow_steps_say_what_they_do(data, tmp_path, monkeypatch, capsys):
    import mlcal._progress

    save_model(data["model"], str(tmp_path / "quiet"), pip_requirements=FAST_REQS)
    assert capsys.readouterr().err == ""          # fast steps print nothing
    monkeypatch.setattr(mlcal._progress, "AFTER_SECONDS", 0.0)
    save_model(data["model"], str(tmp_path / "loud"), pip_requirements=FAST_REQS)
    err = capsys.readouterr().err
    assert "mlcal: saving the base model (LogisticRegression) ..." in err
    assert "mlcal: saving the base model (LogisticRegression) done in" in err
    assert "mlcal: bundling the mlcal wheel done in" in err


def _values_out_of_range(text):
    doc = json.loads(text)
    doc["map"]["values"] = [2.0] * len(doc["map"]["values"])
    return json.dumps(doc)


def _other_method(text):
    # a valid Platt document where the MLmodel file names an isotonic calibrator
    doc = json.loads(text)
    # (with a sigmoid map: the loader refuses a platt document carrying the isotonic map)
    doc.update(method="platt", params={"smooth_targets": doc["params"]["interpolate"]},
               map={"type": "sigmoid", "format_version": 1, "input_transform": "identity",
                    "domain": doc["map"]["domain"], "a": -4.0, "b": 2.0})
    return json.dumps(doc)


@pytest.mark.parametrize("damage, message", [
    (lambda text: text[: len(text) // 2], "not valid JSON"),
    (lambda text: text.replace('"mlcal-calibrator"', '"other"'), "not an mlcal calibrator"),
    (_values_out_of_range, "values must lie in"),
    (_other_method, "MLmodel file says"),
])
def test_corrupted_calibrator_json_fails_with_a_clear_message(data, tmp_path, damage, message):
    path = tmp_path / "model"
    save_model(data["model"], str(path), pip_requirements=FAST_REQS)
    cal_file = path / "calibrator.json"
    cal_file.write_text(damage(cal_file.read_text()))
    for loader in (load_model, mlflow.pyfunc.load_model):   # the digest check comes first
        with pytest.raises(ModelIntegrityError, match="calibrator.json was changed"):
            loader(str(path))
    reseal(path)    # digests recomputed: the calibrator's own validation still refuses it
    for loader in (load_model, mlflow.pyfunc.load_model):
        with pytest.raises(CalibratorFormatError, match=message) as err:
            loader(str(path))
        assert "calibrator.json" in str(err.value)


def test_missing_calibrator_file_is_reported(data, tmp_path):
    path = tmp_path / "model"
    save_model(data["model"], str(path), pip_requirements=FAST_REQS)
    (path / "calibrator.json").unlink()
    with pytest.raises(ModelIntegrityError, match="calibrator.json is missing"):
        load_model(str(path))
    reseal(path)
    with pytest.raises(CalibratorFormatError, match="cannot load the calibrator"):
        load_model(str(path))


def test_save_refuses_to_overwrite_unless_asked(data, tmp_path):
    path = tmp_path / "model"
    save_model(data["model"], str(path), pip_requirements=FAST_REQS)
    before = (path / "MLmodel").read_text()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_model(data["model"], str(path), threshold=0.8, pip_requirements=FAST_REQS)
    assert (path / "MLmodel").read_text() == before  # untouched
    save_model(data["model"], str(path), threshold=0.8, overwrite=True, pip_requirements=FAST_REQS)
    assert load_model(str(path)).threshold == 0.8
    # overwrite=True never deletes something that is not a saved model
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("precious")
    with pytest.raises(FileExistsError, match="not an MLflow model directory"):
        save_model(data["model"], str(other), overwrite=True, pip_requirements=FAST_REQS)
    assert (other / "keep.txt").read_text() == "precious"


def test_threshold_set_at_save_time_drives_the_label(data, tmp_path):
    path = tmp_path / "model"
    save_model(data["model"], str(path), threshold=0.7, input_example=data["X_cal"][:3],
               pip_requirements=FAST_REQS)
    out = mlflow.pyfunc.load_model(str(path)).predict(data["X_test"])
    p = data["model"].predict_proba(data["X_test"])[:, 1]
    np.testing.assert_array_equal(out["label"].to_numpy(), (p >= 0.7).astype(int))
    assert (out["label"].to_numpy() != (p >= 0.5)).any()  # the threshold matters here
    with pytest.raises(ValueError, match="threshold"):
        save_model(data["model"], str(tmp_path / "bad"), threshold=1.5, pip_requirements=FAST_REQS)


def test_unfitted_model_and_bad_rows_are_rejected(data, tmp_path):
    with pytest.raises(ValueError, match="not fitted"):
        save_model(CalibratedModel(data["base"]), str(tmp_path / "m"))
    save_model(data["model"], str(tmp_path / "m"), pip_requirements=FAST_REQS)
    pf = mlflow.pyfunc.load_model(str(tmp_path / "m"))
    bad = data["X_test"][:3].copy()
    bad.iloc[1, 0] = np.nan
    with pytest.raises(MlflowException, match="mlcal model: .*NaN"):
        pf.predict(bad)


def test_generic_pyfunc_base_model_via_output_column(data, tmp_path):
    """A base that is only a pyfunc (here an sklearn model whose pyfunc returns predict_proba)."""
    base_dir = tmp_path / "base"
    mlflow.sklearn.save_model(data["base"], str(base_dir), pyfunc_predict_fn="predict_proba",
                              pip_requirements=FAST_REQS)
    scorer = PyfuncScorer(str(base_dir), kind="probability")
    model = CalibratedModel(scorer, "platt").fit(data["X_cal"], data["y_cal"])
    path = tmp_path / "cal"
    save_model(model, str(path), pip_requirements=FAST_REQS)
    conf = yaml.safe_load((path / "MLmodel").read_text())["flavors"]["mlcal"]
    assert conf["base_flavor"] == "python_function"
    # an arbitrary MLflow model is loaded by its own flavour, which may unpickle: opt-in only
    with pytest.raises(UnsafeModelFormatError, match="PyfuncScorer.*allow_pickle=True"):
        load_model(str(path))
    loaded = load_model(str(path), allow_pickle=True)
    assert isinstance(loaded.base_estimator, PyfuncScorer)
    # oracle: Platt's sigmoid on the sklearn probabilities, with the fitted (a, b)
    s = data["base"].predict_proba(data["X_test"])[:, 1]
    m = model.calibrator_.map_
    expected = 1.0 / (1.0 + np.exp(m.a * s + m.b))
    np.testing.assert_allclose(loaded.predict_proba(data["X_test"])[:, 1], expected,
                               rtol=0, atol=1e-14)
    np.testing.assert_array_equal(loaded.predict_proba(data["X_test"]),
                                  model.predict_proba(data["X_test"]))


def test_array_fitted_base_gets_arrays_without_feature_name_warnings(data, tmp_path):
    X = data["df"].to_numpy()
    y = data["y"]
    base = LogisticRegression().fit(X[:600], y[:600])
    model = CalibratedModel(base, "isotonic").fit(X[600:1200], y[600:1200])
    save_model(model, str(tmp_path / "m"), input_example=_frame(X[:3]), pip_requirements=FAST_REQS)
    pf = mlflow.pyfunc.load_model(str(tmp_path / "m"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        out = pf.predict(_frame(X[1200:]))
    np.testing.assert_array_equal(out["p_calibrated"].to_numpy(),
                                  model.predict_proba(X[1200:])[:, 1])


def _ece_brute_force(y, p, n_bins=10):
    total = 0.0
    for k in range(n_bins):
        lo, hi = k / n_bins, (k + 1) / n_bins
        inside = [(yi, pi) for yi, pi in zip(y, p)
                  if lo <= pi < hi or (k == n_bins - 1 and pi == 1.0)]
        if inside:
            ys, ps = zip(*inside)
            total += len(inside) / len(y) * abs(np.mean(ys) - np.mean(ps))
    return total


def test_log_calibration_records_metrics_plots_report_and_tags(data, store):
    model = data["model"]
    y = data["y_test"]
    p_before = data["base"].predict_proba(data["X_test"])[:, 1]
    p_after = model.predict_proba(data["X_test"])[:, 1]
    with pytest.raises(ValueError, match="no active MLflow run"):
        log_calibration(y, p_before, p_after)
    with mlflow.start_run() as run:
        log_calibration(y, p_before, p_after, prefix="iso_", calibrator=model.calibrator_,
                        map_data=(model.predict_uncalibrated(data["X_cal"]), data["y_cal"]))
    client = mlflow.MlflowClient()
    r = client.get_run(run.info.run_id)
    m = r.data.metrics
    for name in ("ece", "mce", "brier", "log_loss", "auc", "accuracy"):
        assert {f"iso_{name}_before", f"iso_{name}_after", f"iso_{name}_improvement"} <= set(m)
    assert m["iso_ece_before"] == pytest.approx(_ece_brute_force(y, p_before), abs=1e-12)
    assert m["iso_ece_after"] == pytest.approx(_ece_brute_force(y, p_after), abs=1e-12)
    assert m["iso_ece_improvement"] == pytest.approx(m["iso_ece_before"] - m["iso_ece_after"])
    assert m["iso_brier_before"] == pytest.approx(np.mean((y - p_before) ** 2), abs=1e-12)
    assert m["iso_auc_improvement"] == pytest.approx(m["iso_auc_after"] - m["iso_auc_before"])
    assert m["iso_ece_after"] < m["iso_ece_before"]  # the C=0.3 model is miscalibrated
    assert r.data.tags["mlcal.iso_method"] == "isotonic"
    assert r.data.tags["mlcal.iso_map_type"] == "linear"
    files = {a.path for a in client.list_artifacts(run.info.run_id, "calibration")}
    assert files == {f"calibration/iso_{f}" for f in
                     ("reliability_diagram.png", "calibration_map.png", "calibration_report.json",
                      "reliability_corp.png", "calibration_report.html")}
    local = client.download_artifacts(run.info.run_id, "calibration")
    with open(os.path.join(local, "iso_reliability_diagram.png"), "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(os.path.join(local, "iso_calibration_report.json")) as fh:
        report = json.load(fh)
    assert report["after"]["ece"] == pytest.approx(m["iso_ece_after"])
    assert report["calibrator"]["method"] == "isotonic"


def test_log_calibration_of_auto_records_its_choice(data, store):
    model = CalibratedModel(data["base"], "auto").fit(data["X_cal"], data["y_cal"])
    y = data["y_test"]
    p_before = data["base"].predict_proba(data["X_test"])[:, 1]
    with mlflow.start_run() as run:
        # (auto's section of the HTML report: test_report.py)
        report = log_calibration(y, p_before, model.predict_proba(data["X_test"])[:, 1],
                                 calibrator=model.calibrator_, html_report=False)
    chosen = model.calibrator_.chosen_
    assert mlflow.MlflowClient().get_run(run.info.run_id).data.tags["mlcal.auto_chosen"] == chosen
    assert report["calibrator"]["fit_info"]["chosen"] == chosen


def test_cli_calibrate_logs_registers_and_bundles_mlcal(data, store, tmp_path):
    """`mlcal calibrate` end to end; this model uses default requirement inference (slow)."""
    with mlflow.start_run():
        base_info = mlflow.sklearn.log_model(data["base"], name="base", pip_requirements=FAST_REQS)
    # created here so its artifacts go to the temp dir, not ./mlruns of the working directory
    mlflow.MlflowClient().create_experiment(
        "mlcal-cli-tests", artifact_location=(store["root"] / "cli-artifacts").as_uri())
    cal_csv = tmp_path / "cal.csv"
    data["X_cal"].assign(y=data["y_cal"]).to_csv(cal_csv, index=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(["calibrate", "--model-uri", base_info.model_uri, "--data", str(cal_csv),
                         "--label-column", "y", "--method", "platt", "--register", "mlcal-cli",
                         "--tracking-uri", store["uri"], "--experiment", "mlcal-cli-tests"])
    assert code == 0
    text = out.getvalue()
    run_id = text.split("run id: ")[1].split()[0]
    model_uri = text.split("model URI: ")[1].split()[0]
    run = mlflow.MlflowClient().get_run(run_id)
    assert run.data.params["mlcal.method"] == "platt"
    assert run.data.params["mlcal.calibrator.smooth_targets"] == "True"
    # no --eval-data: 25 % of the rows held out (stratified, seed 0) for the metrics; the
    # logged model is the calibrator fitted on the other rows
    from mlcal.holdout import holdout_split
    from mlcal.metrics import ece

    fit_rows, held = holdout_split(data["y_cal"], 0.25, 0)
    assert run.data.params["mlcal.evaluated_on"] == "held-out 25% of the calibration rows"
    assert run.data.tags["mlcal.metrics_source"] == "held-out"
    assert run.data.tags["mlcal.eval_rows"] == str(len(held))
    assert run.data.params["mlcal.n_calibration"] == str(len(fit_rows)) == str(600 - len(held))
    assert f"{len(held)} of the 600 rows" in text and "held out" in text
    assert run.data.tags["mlcal.method"] == "platt"
    assert "ece_improvement" in run.data.metrics
    # by default the CLI logs the CORP diagram and the HTML report (--no-html-report skips
    # them: test_honest_metrics.py)
    arts = {a.path for a in mlflow.MlflowClient().list_artifacts(run_id, "calibration")}
    assert {"calibration/calibration_report.html", "calibration/reliability_corp.png"} <= arts
    loaded = load_model(model_uri)
    expected = CalibratedModel(data["base"], "platt").fit(data["X_cal"].iloc[fit_rows],
                                                          data["y_cal"][fit_rows])
    X_held, y_held = data["X_cal"].iloc[held], data["y_cal"][held]
    assert run.data.metrics["ece_after"] == pytest.approx(
        ece(y_held, expected.predict_proba(X_held)[:, 1]), abs=1e-12)
    np.testing.assert_array_equal(loaded.predict_proba(data["X_test"]),
                                  expected.predict_proba(data["X_test"]))
    np.testing.assert_array_equal(load_model("models:/mlcal-cli/1").predict_proba(data["X_test"]),
                                  expected.predict_proba(data["X_test"]))
    local = mlflow.artifacts.download_artifacts(model_uri, dst_path=str(tmp_path / "dl"))
    reqs = open(os.path.join(local, "requirements.txt")).read().split()
    # the loader's own package is never inferred; it is required as the bundled wheel
    assert f"wheels/mlcal-{mlcal.__version__}-py3-none-any.whl" in reqs
    assert os.path.isfile(os.path.join(local, "wheels", f"mlcal-{mlcal.__version__}-py3-none-any.whl"))
    assert not any(r.startswith("mlcal==") for r in reqs)
    assert any(r.startswith("scikit-learn==") for r in reqs)
    assert not any(r.startswith("pytest") for r in reqs)


def test_user_signature_gets_the_params_schema(data, tmp_path):
    from mlflow.models import infer_signature

    sig = infer_signature(data["X_cal"][:5], pd.DataFrame({"p_calibrated": [0.5] * 5}))
    assert sig.params is None
    save_model(data["model"], str(tmp_path / "m"), signature=sig, pip_requirements=FAST_REQS)
    pf = mlflow.pyfunc.load_model(str(tmp_path / "m"))
    assert [p.name for p in pf.metadata.get_params_schema().params] == ["return_uncalibrated"]
    out = pf.predict(data["X_test"][:4], params={"return_uncalibrated": True})
    assert "score_uncalibrated" in out.columns


def test_extract_scores_reads_the_named_score_column():
    from mlcal.mlflow.base_models import extract_scores

    frame = pd.DataFrame({"label": [0, 1], "p": [0.2, 0.9]})
    np.testing.assert_array_equal(extract_scores(frame, "p"), [0.2, 0.9])
    np.testing.assert_array_equal(extract_scores(frame[["p"]], None), [0.2, 0.9])
    onnx_like = {"probabilities": np.array([[0.8, 0.2], [0.1, 0.9]]), "label": np.array([0, 1])}
    np.testing.assert_array_equal(extract_scores(onnx_like, "probabilities"), [0.2, 0.9])
    np.testing.assert_array_equal(extract_scores(np.array([[0.7, 0.3]]), None), [0.3])
    np.testing.assert_array_equal(extract_scores(np.array([[1.0, 2.0, 3.0]]), 2), [3.0])
    with pytest.raises(ValueError, match="say which holds the score"):
        extract_scores(frame, None)
    with pytest.raises(ValueError, match="no column 'q'"):
        extract_scores(frame, "q")
    with pytest.raises(ValueError, match="give output_column"):
        extract_scores(np.zeros((2, 3)), None)


def test_cli_calibrate_reports_bad_input_without_a_traceback(tmp_path, capsys):
    csv = tmp_path / "cal.csv"
    pd.DataFrame({"f0": [0.1, 0.2], "target": [0, 1]}).to_csv(csv, index=False)
    code = cli_main(["calibrate", "--model-uri", str(tmp_path / "nowhere"), "--data", str(csv),
                     "--label-column", "y", "--method", "isotonic"])
    assert code == 2
    assert "no label column 'y'" in capsys.readouterr().err
