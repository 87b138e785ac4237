"""Real XGBoost, LightGBM, CatBoost and HistGradientBoosting models through calibrate, log
(real sqlite store), load, the CLI, MLflow's default evaluator and the bundled mlcal wheel.

Small models (30 trees, a few thousand rows) shared per module keep this file fast.
"""

import contextlib
import io
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.special import expit
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.tree import DecisionTreeClassifier

mlflow = pytest.importorskip("mlflow")
xgboost = pytest.importorskip("xgboost")
lightgbm = pytest.importorskip("lightgbm")

import mlcal  # noqa: E402
import mlcal.mlflow  # noqa: E402
from mlcal.base_models.scores import HardLabelError, NotBinaryError  # noqa: E402
from mlcal.calibrators.multiclass import MissingClassError  # noqa: E402
from mlcal.base_models.boosters import BoosterClassifier  # noqa: E402
from mlcal.cli import main as cli_main  # noqa: E402
from mlcal.model import CalibratedModel  # noqa: E402

COLS = [f"c{i}" for i in range(6)]


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(6000, 6, n_informative=4, weights=[0.85], flip_y=0.05,
                               random_state=3)
    df = pd.DataFrame(X, columns=COLS)
    return {"X_tr": df[:3000], "y_tr": y[:3000], "X_cal": df[3000:4500], "y_cal": y[3000:4500],
            "X_te": df[4500:], "y_te": y[4500:]}


def _catboost_model():
    catboost = pytest.importorskip("catboost")
    return catboost.CatBoostClassifier(iterations=30, depth=4, verbose=0, random_seed=0,
                                       thread_count=1, allow_writing_files=False)


MAKERS = {
    "xgboost": lambda: xgboost.XGBClassifier(n_estimators=30, max_depth=3, n_jobs=1),
    "lightgbm": lambda: lightgbm.LGBMClassifier(n_estimators=30, num_leaves=15, verbose=-1,
                                                n_jobs=1),
    "catboost": _catboost_model,
    "hgb": lambda: HistGradientBoostingClassifier(max_iter=30, random_state=0),
}
# the MLflow flavour each base is nested in by default
NESTED_FLAVOR = {"xgboost": "xgboost", "lightgbm": "lightgbm", "catboost": "catboost",
                 "hgb": "sklearn"}


@pytest.fixture(scope="module")
def bases(data):
    out = {}
    for name, make in MAKERS.items():
        try:
            out[name] = make().fit(data["X_tr"], data["y_tr"])
        except pytest.skip.Exception:
            continue
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from support.mlflow_store import new_sqlite_db

    root = tmp_path_factory.mktemp("boosted-store")
    uri = new_sqlite_db(root / "mlflow.db")   # MLflow's empty store, copied (not migrated again)
    old = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = uri
    mlflow.set_tracking_uri(uri)
    mlflow.create_experiment("boosted", artifact_location=(root / "artifacts").as_uri())
    mlflow.set_experiment("boosted")
    yield {"uri": uri, "root": root}
    mlflow.set_tracking_uri(None)
    if old is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = old


@pytest.mark.parametrize("name", list(MAKERS))
def test_auto_reads_the_positive_probability_and_margin_the_log_odds(data, bases, name):
    if name not in bases:
        pytest.skip(f"{name} is not installed")
    base = bases[name]
    auto = CalibratedModel(base, "isotonic").fit(data["X_cal"], data["y_cal"])
    proba = base.predict_proba(data["X_te"])[:, 1]
    assert auto.score_source_ == "predict_proba"
    np.testing.assert_array_equal(auto.predict_uncalibrated(data["X_te"]), proba)
    margin = CalibratedModel(base, "platt", score="margin").fit(data["X_cal"], data["y_cal"])
    raw = margin.predict_uncalibrated(data["X_te"])
    assert margin.score_source_ == "margin"
    # independent check: the library's probability is the sigmoid of its raw margin
    np.testing.assert_allclose(expit(raw), proba, rtol=0, atol=2e-6)
    assert raw.min() < -1 and raw.max() > 1  # log-odds, not probabilities
    # a unit-interval method squashes margins with the sigmoid (recorded on the map)
    bbq = CalibratedModel(base, "histogram", score="margin").fit(data["X_cal"], data["y_cal"])
    assert bbq.calibrator_.map_.input_transform in ("sigmoid", "identity")


def test_native_boosters_read_like_their_sklearn_wrappers(data):
    d_tr = xgboost.DMatrix(data["X_tr"], data["y_tr"])
    xb = xgboost.train({"objective": "binary:logistic", "max_depth": 3, "nthread": 1}, d_tr, 20)
    lb = lightgbm.train({"objective": "binary", "verbose": -1, "num_threads": 1},
                        lightgbm.Dataset(data["X_tr"], data["y_tr"]), 20)
    for booster, p in ((xb, xb.predict(xgboost.DMatrix(data["X_te"]))),
                       (lb, lb.predict(data["X_te"]))):
        wrapped = BoosterClassifier(booster)
        m = CalibratedModel(wrapped, "isotonic").fit(data["X_cal"], data["y_cal"])
        np.testing.assert_allclose(m.predict_uncalibrated(data["X_te"]), p, rtol=0, atol=0)
        mm = CalibratedModel(wrapped, "platt", score="margin").fit(data["X_cal"], data["y_cal"])
        np.testing.assert_allclose(expit(mm.predict_uncalibrated(data["X_te"])), p, atol=2e-6)
    reg = xgboost.train({"objective": "reg:squarederror", "nthread": 1}, d_tr, 5)
    with pytest.raises(NotBinaryError, match="objective 'reg:squarederror'"):
        BoosterClassifier(reg)


def test_multiclass_bases_are_calibrated_and_label_only_bases_refused(data):
    y3 = np.arange(len(data["y_tr"])) % 3
    multi = xgboost.XGBClassifier(n_estimators=5, n_jobs=1).fit(data["X_tr"], y3)
    # binary calibration labels lack class 2 of the three-class model: a named error
    with pytest.raises(MissingClassError, match=r"class\(es\) \[2\]"):
        CalibratedModel(multi, "isotonic").fit(data["X_cal"], data["y_cal"] % 3)
    first_tr, first_cal = (np.asarray(data[k])[:, 0] for k in ("X_tr", "X_cal"))
    cuts = np.quantile(first_tr, [1 / 3, 2 / 3])   # learnable three-class labels
    multi = xgboost.XGBClassifier(n_estimators=5, n_jobs=1).fit(data["X_tr"],
                                                                np.digitize(first_tr, cuts))
    y3_cal = np.digitize(first_cal, cuts)
    m = CalibratedModel(multi, "temperature", score="margin").fit(data["X_cal"], y3_cal)
    np.testing.assert_array_equal(m.predict_uncalibrated(data["X_te"]),
                                  multi.predict(data["X_te"], output_margin=True))
    assert np.all(np.abs(m.predict_proba(data["X_te"]).sum(axis=1) - 1.0) <= 1e-12)
    # a fully grown tree scored on its own training rows: every probability is 0 or 1
    tree = DecisionTreeClassifier(random_state=0).fit(data["X_cal"], data["y_cal"])
    with pytest.raises(HardLabelError, match="hard class labels"):
        CalibratedModel(tree, "isotonic").fit(data["X_cal"], data["y_cal"])


@pytest.mark.parametrize("name", list(MAKERS))
def test_log_model_with_default_arguments_round_trips(data, bases, store, name):
    if name not in bases:
        pytest.skip(f"{name} is not installed")
    model = CalibratedModel(bases[name], "isotonic").fit(data["X_cal"], data["y_cal"])
    with mlflow.start_run():
        info = mlcal.mlflow.log_model(model, input_example=data["X_cal"][:3],
                                      registered_model_name=f"boosted-{name}")
    expected = model.predict_proba(data["X_te"])
    native = mlcal.mlflow.load_model(f"models:/boosted-{name}/1")
    assert type(native.base_estimator) is type(bases[name])
    np.testing.assert_array_equal(native.predict_proba(data["X_te"]), expected)
    out = mlflow.pyfunc.load_model(info.model_uri).predict(data["X_te"])
    np.testing.assert_array_equal(out["p_calibrated"].to_numpy(), expected[:, 1])
    local = mlflow.artifacts.download_artifacts(info.model_uri)
    with open(os.path.join(local, "MLmodel")) as fh:
        conf = yaml.safe_load(fh)["flavors"]["mlcal"]
    assert conf["base_flavor"] == NESTED_FLAVOR[name]
    with open(os.path.join(local, "base_model", "MLmodel")) as fh:
        assert NESTED_FLAVOR[name] in yaml.safe_load(fh)["flavors"]


def test_base_format_is_a_named_choice(data, bases, tmp_path):
    xgb = CalibratedModel(bases["xgboost"], "platt").fit(data["X_cal"], data["y_cal"])
    mlcal.mlflow.save_model(xgb, str(tmp_path / "skops"), base_format="skops")
    with open(tmp_path / "skops" / "MLmodel") as fh:
        assert yaml.safe_load(fh)["flavors"]["mlcal"]["base_flavor"] == "sklearn"
    np.testing.assert_array_equal(
        mlcal.mlflow.load_model(str(tmp_path / "skops")).predict_proba(data["X_te"]),
        xgb.predict_proba(data["X_te"]))
    hgb = CalibratedModel(bases["hgb"], "platt").fit(data["X_cal"], data["y_cal"])
    # MLflow's own advice for untrusted types is accepted as a named argument
    trusted = mlcal.mlflow.base_models.trusted_types(bases["hgb"])
    assert any("TreePredictor" in t for t in trusted)
    mlcal.mlflow.save_model(hgb, str(tmp_path / "trusted"), skops_trusted_types=trusted)
    np.testing.assert_array_equal(
        mlcal.mlflow.load_model(str(tmp_path / "trusted")).predict_proba(data["X_te"]),
        hgb.predict_proba(data["X_te"]))
    with pytest.raises(ValueError, match="base_format='native' needs"):
        mlcal.mlflow.save_model(hgb, str(tmp_path / "native"), base_format="native")
    assert not (tmp_path / "native").exists()
    with pytest.raises(ValueError, match="base_format must be one of"):
        mlcal.mlflow.save_model(hgb, str(tmp_path / "bad"), base_format="json")


def _calibrate_cli(args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["calibrate", *args])
    return code, out.getvalue(), err.getvalue()


def test_cli_calibrates_native_probabilities_of_flavour_logged_models(data, bases, store,
                                                                      tmp_path):
    """The issue's case: a model logged with mlflow.xgboost / mlflow.lightgbm, whose pyfunc
    predicts 0/1 labels, is calibrated on its probabilities (many map values, AUC kept)."""
    cal_csv, ev_csv = tmp_path / "cal.csv", tmp_path / "ev.csv"
    data["X_cal"].assign(y=data["y_cal"]).to_csv(cal_csv, index=False)
    data["X_te"].assign(y=data["y_te"]).to_csv(ev_csv, index=False)
    lb = lightgbm.train({"objective": "binary", "verbose": -1, "num_threads": 1},
                        lightgbm.Dataset(data["X_tr"], data["y_tr"]), 30)
    with mlflow.start_run():
        xgb_uri = mlflow.xgboost.log_model(bases["xgboost"], name="xgb").model_uri
        lgb_uri = mlflow.lightgbm.log_model(lb, name="lgb").model_uri
    labels = mlflow.pyfunc.load_model(xgb_uri).predict(data["X_te"])
    assert set(np.unique(np.asarray(labels))) <= {0, 1}  # what used to be calibrated
    for uri, proba in ((xgb_uri, bases["xgboost"].predict_proba(data["X_te"])[:, 1]),
                       (lgb_uri, lb.predict(data["X_te"]))):
        code, out, err = _calibrate_cli(["--model-uri", uri, "--data", str(cal_csv),
                                         "--eval-data", str(ev_csv), "--method", "isotonic",
                                         "--tracking-uri", store["uri"], "--no-html-report"])
        assert code == 0, err
        model = mlcal.mlflow.load_model(out.split("model URI: ")[1].split()[0])
        assert model.calibrator_.map_.size > 5
        p = model.predict_proba(data["X_te"])[:, 1]
        auc_native = roc_auc_score(data["y_te"], proba)
        auc_labels = roc_auc_score(data["y_te"], np.asarray(labels))
        assert roc_auc_score(data["y_te"], p) > auc_labels + 0.02
        assert abs(roc_auc_score(data["y_te"], p) - auc_native) < 0.01
        # the Python adapter reads the same native probabilities (or margins) of that model
        scorer = mlcal.mlflow.PyfuncScorer(uri)
        np.testing.assert_array_equal(scorer.predict_proba(data["X_te"])[:, 1], proba)
        margin = mlcal.mlflow.PyfuncScorer(uri, kind="score").decision_function(data["X_te"])
        np.testing.assert_allclose(expit(margin), proba, rtol=0, atol=2e-6)


def test_cli_refuses_a_label_only_model_and_registers_nothing(data, store, tmp_path):
    class Labels(mlflow.pyfunc.PythonModel):
        def predict(self, context, model_input, params=None):
            return (model_input["c0"] > 0).astype(int)

    path = tmp_path / "labels"
    mlflow.pyfunc.save_model(str(path), python_model=Labels())
    cal_csv = tmp_path / "cal.csv"
    data["X_cal"].assign(y=data["y_cal"]).to_csv(cal_csv, index=False)
    client = mlflow.MlflowClient()
    runs_before = len(client.search_runs([mlflow.get_experiment_by_name("boosted")
                                          .experiment_id]))
    code, out, err = _calibrate_cli(["--model-uri", str(path), "--data", str(cal_csv),
                                     "--method", "isotonic", "--register", "labels-model",
                                     "--tracking-uri", store["uri"]])
    assert code == 2
    assert "class labels" in err and "Traceback" not in err
    assert client.search_registered_models("name='labels-model'") == []
    assert len(client.search_runs([mlflow.get_experiment_by_name("boosted")
                                   .experiment_id])) == runs_before
    # a three-class model whose calibration labels hold only two of its classes: refused by
    # name (multiclass calibration needs every class), nothing registered
    y3 = np.arange(len(data["y_tr"])) % 3
    with mlflow.start_run():
        multi_uri = mlflow.xgboost.log_model(
            xgboost.XGBClassifier(n_estimators=3, n_jobs=1).fit(data["X_tr"], y3),
            name="multi").model_uri
    code, out, err = _calibrate_cli(["--model-uri", multi_uri, "--data", str(cal_csv),
                                     "--method", "isotonic", "--register", "multi-model",
                                     "--tracking-uri", store["uri"]])
    assert code == 2 and "class(es) [2] of the base model never occur in y" in err
    assert "Traceback" not in err
    assert client.search_registered_models("name='multi-model'") == []
    # a float column that only holds 0/1 is refused the same way
    scorer = mlcal.mlflow.PyfuncScorer(str(path), kind="score")
    with pytest.raises(HardLabelError):
        CalibratedModel(scorer, "platt").fit(data["X_cal"], data["y_cal"])


def test_default_evaluator_and_calibration_plugin_run_on_an_mlcal_model(data, bases, store):
    model = CalibratedModel(bases["hgb"], "isotonic").fit(data["X_cal"], data["y_cal"])
    ev = data["X_te"].assign(y=data["y_te"])
    with mlflow.start_run():
        info = mlcal.mlflow.log_model(model, input_example=data["X_cal"][:3])
        result = mlflow.models.evaluate(info.model_uri, ev, targets="y",
                                        model_type="classifier",
                                        evaluators=["default", "calibration"],
                                        model_config={"output": "label"})
    labels = model.predict(data["X_te"])
    assert result.metrics["accuracy_score"] == pytest.approx(accuracy_score(data["y_te"],
                                                                            labels))
    p = model.predict_proba(data["X_te"])[:, 1]
    assert result.metrics["calibration_brier"] == pytest.approx(
        np.mean((p - data["y_te"]) ** 2), rel=1e-9)
    # without the config the full frame comes back (the serving contract is unchanged)
    frame = mlflow.pyfunc.load_model(info.model_uri).predict(data["X_te"][:4])
    assert list(frame.columns) == ["p_calibrated", "label"]
    with pytest.raises(ValueError, match="output"):
        mlflow.pyfunc.load_model(info.model_uri, model_config={"output": "proba"})


def test_bundled_mlcal_wheel_installs_and_serves_the_model_without_the_source(data, bases,
                                                                             tmp_path):
    """The logged environment names mlcal by the wheel inside the model, not an unresolvable
    pin; that wheel alone (installed into an empty target, not this checkout) loads the model."""
    model = CalibratedModel(bases["xgboost"], "isotonic").fit(data["X_cal"], data["y_cal"])
    path = tmp_path / "model"
    mlcal.mlflow.save_model(model, str(path), input_example=data["X_cal"][:3])
    reqs = (path / "requirements.txt").read_text().split()
    wheel = f"wheels/mlcal-{mlcal.__version__}-py3-none-any.whl"
    assert reqs[0] == wheel and not any(r.startswith("mlcal") for r in reqs)
    with open(path / "conda.yaml") as fh:
        pip_deps = [d for d in yaml.safe_load(fh)["dependencies"] if isinstance(d, dict)][0]
    assert wheel in pip_deps["pip"]
    target = tmp_path / "site"
    # the requirement line resolves relative to the model directory, as MLflow installs it
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(target), wheel], cwd=path, check=True)
    data["X_te"][:50].to_csv(tmp_path / "x.csv", index=False)
    rows_csv = str(tmp_path / "x.csv")
    code = ("import sys, mlcal, mlflow, pandas as pd; "
            f"assert mlcal.__file__.startswith({str(target)!r}), mlcal.__file__; "
            f"p = mlflow.pyfunc.load_model({str(path)!r}).predict(pd.read_csv({rows_csv!r})); "
            "print(repr(p['p_calibrated'].tolist()))")
    env = {**os.environ, "PYTHONPATH": str(target)}
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True)
    got = np.array(eval(res.stdout.strip().splitlines()[-1]))  # noqa: S307 (our own output)
    np.testing.assert_array_equal(got, model.predict_proba(data["X_te"][:50])[:, 1])
    assert (target / "bin" / "mlcal").exists()  # the console script comes along


@pytest.mark.skipif(os.environ.get("MLCAL_SLOW_TESTS") != "1",
                    reason="rebuilds a virtualenv from the package index (minutes); set "
                           "MLCAL_SLOW_TESTS=1")
def test_virtualenv_env_manager_rebuilds_the_logged_environment_and_serves(data, bases,
                                                                          tmp_path):
    """`mlflow models serve --env-manager virtualenv` (pyenv + pip, fresh env root) installs
    requirements.txt - the bundled mlcal wheel included - and serves the model."""
    import json
    import shutil
    import signal
    import time
    import urllib.request

    from support.serving import free_port

    if shutil.which("pyenv") is None:
        pytest.skip("MLflow's virtualenv env manager needs pyenv")
    model = CalibratedModel(bases["hgb"], "isotonic").fit(data["X_cal"], data["y_cal"])
    path = tmp_path / "model"
    mlcal.mlflow.save_model(model, str(path), input_example=data["X_cal"][:3])
    port = free_port()
    bin_dir = os.path.dirname(os.path.abspath(sys.executable))
    env = {**os.environ, "MLFLOW_ENV_ROOT": str(tmp_path / "envs"),
           "PATH": f"/usr/bin:/bin:{os.path.dirname(shutil.which('pyenv'))}"}
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen([os.path.join(bin_dir, "mlflow"), "models", "serve", "-m",
                                 str(path), "--env-manager", "virtualenv", "--host", "127.0.0.1",
                                 "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 900
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(2)
        rows = data["X_te"][:5]
        body = json.dumps({"dataframe_split": {"columns": list(rows.columns),
                                               "data": rows.to_numpy().tolist()}}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            served = [r["p_calibrated"] for r in json.load(resp)["predictions"]]
        np.testing.assert_array_equal(served, model.predict_proba(rows)[:, 1])
        envs = list((tmp_path / "envs").glob("mlflow-*/lib/python*/site-packages/mlcal"))
        assert envs, "mlcal was not installed into the rebuilt environment"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
