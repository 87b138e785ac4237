"""Issue #24, the flavour side: a saved mlcal model loads only if every file is what was saved,
its base model comes from a format that cannot run code, and its MLmodel agrees with the base
model. Each tampering below loaded (or ran planted code) before the fix."""

import os
import pickle
import shutil

import numpy as np
import pytest
import yaml

mlflow = pytest.importorskip("mlflow")

from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from mlcal import CalibratedModel  # noqa: E402
from mlcal.calibrators.base import CalibratorFormatError  # noqa: E402
from mlcal.cli import main as cli_main  # noqa: E402
from mlcal.mlflow import (ModelIntegrityError, UnsafeModelFormatError,  # noqa: E402
                          check_registered_version, load_model, log_model, save_model)
from support.tamper import edit_mlmodel, reseal  # noqa: E402

REQS = ["scikit-learn", "numpy"]


class _Planted:
    """Unpickling this writes the marker file: the proof that loading ran planted code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def _plant_pickle(path, marker):
    path.write_bytes(pickle.dumps(_Planted(marker)))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=600) > 0).astype(int)
    return X, y


@pytest.fixture(scope="module")
def saved(data, tmp_path_factory):
    X, y = data
    model = CalibratedModel(LogisticRegression().fit(X[:300], y[:300]), "isotonic")
    model.fit(X[300:], y[300:])
    path = tmp_path_factory.mktemp("integrity") / "model"
    save_model(model, str(path), pip_requirements=REQS, bundle_mlcal=False)
    return path, model


def _copy(saved, tmp_path, name="m"):
    dst = tmp_path / name
    shutil.copytree(saved[0], dst)
    return dst


def _loaders():
    return (load_model, mlflow.pyfunc.load_model)


# -- finding 1: the base model's declared format is not followed into pickle -------------------
@pytest.mark.parametrize("sealed", [False, True])
def test_planted_pickle_is_never_unpickled(saved, tmp_path, sealed):
    model_dir = _copy(saved, tmp_path)
    marker = tmp_path / "marker"
    base = model_dir / "base_model"
    _plant_pickle(base / "model.pkl", marker)
    (base / "model.skops").unlink()

    def to_pickle(doc):
        doc["flavors"]["sklearn"].update(serialization_format="pickle", pickled_model="model.pkl")
        doc["flavors"]["python_function"]["model_path"] = "model.pkl"
    edit_mlmodel(base / "MLmodel", to_pickle)
    if sealed:   # an attacker who also recomputes every digest
        reseal(model_dir)
    for loader in _loaders():
        with pytest.raises(UnsafeModelFormatError if sealed else ModelIntegrityError,
                           match="model.pkl" if sealed else "base_model/MLmodel was changed"):
            loader(str(model_dir))
    assert not marker.exists()


def test_pickle_bytes_under_the_skops_name_are_refused(saved, tmp_path):
    model_dir = _copy(saved, tmp_path)
    marker = tmp_path / "marker"
    _plant_pickle(model_dir / "base_model" / "model.skops", marker)
    reseal(model_dir)
    for loader in _loaders():
        with pytest.raises(UnsafeModelFormatError, match="not a skops archive"):
            loader(str(model_dir))
    assert not marker.exists()


def test_allow_pickle_is_the_explicit_opt_in(data, tmp_path):
    X, y = data
    model = CalibratedModel(LogisticRegression().fit(X[:300], y[:300]), "platt").fit(X[300:],
                                                                                    y[300:])
    path = tmp_path / "pickled"
    save_model(model, str(path), base_format="pickle", pip_requirements=REQS,
               bundle_mlcal=False)
    for loader in _loaders():
        with pytest.raises(UnsafeModelFormatError, match="allow_pickle=True"):
            loader(str(path))
    loaded = load_model(str(path), allow_pickle=True)
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    os.environ["MLCAL_ALLOW_PICKLE"] = "1"
    try:
        out = mlflow.pyfunc.load_model(str(path)).predict(X)
    finally:
        del os.environ["MLCAL_ALLOW_PICKLE"]
    np.testing.assert_array_equal(out["p_calibrated"], model.predict_proba(X)[:, 1])


def test_skops_types_outside_the_recorded_list_are_refused(data, tmp_path):
    X, y = data
    model = CalibratedModel(HistGradientBoostingClassifier(max_iter=5).fit(X[:300], y[:300]),
                            "isotonic").fit(X[300:], y[300:])
    path = tmp_path / "hgb"
    save_model(model, str(path), pip_requirements=REQS, bundle_mlcal=False)
    conf = yaml.safe_load((path / "MLmodel").read_text())["flavors"]["mlcal"]
    assert conf["base_trusted_types"] == [
        "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor"]
    np.testing.assert_array_equal(load_model(str(path)).predict_proba(X), model.predict_proba(X))
    for types, message in [([], "not recorded"), (["builtins.exec"], "builtins.exec"),
                           (["os.system"], "os.system"), ("x", "must be a list")]:
        bad = tmp_path / f"bad{len(str(types))}"
        shutil.copytree(path, bad)
        edit_mlmodel(bad / "MLmodel",
                     lambda d: d["flavors"]["mlcal"].update(base_trusted_types=types))
        reseal(bad)
        with pytest.raises(UnsafeModelFormatError, match=message):
            load_model(str(bad))


def test_pyfunc_base_models_are_refused_without_the_opt_in(saved, tmp_path):
    model_dir = _copy(saved, tmp_path)
    edit_mlmodel(model_dir / "MLmodel",
                 lambda d: d["flavors"]["mlcal"].update(base_flavor="python_function"))
    reseal(model_dir)
    with pytest.raises(UnsafeModelFormatError, match="PyfuncScorer"):
        load_model(str(model_dir))


def test_code_paths_are_not_imported_without_the_opt_in(saved, data, tmp_path):
    code = tmp_path / "helper.py"
    marker = tmp_path / "marker"
    code.write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    path = tmp_path / "with_code"
    save_model(saved[1], str(path), code_paths=[str(code)], pip_requirements=REQS,
               bundle_mlcal=False)
    with pytest.raises(UnsafeModelFormatError, match="ships Python code"):
        load_model(str(path))
    loaded = load_model(str(path), allow_pickle=True)
    np.testing.assert_array_equal(loaded.predict_proba(data[0]), saved[1].predict_proba(data[0]))


# -- finding 5: classes must be the base model's classes_ --------------------------------------
@pytest.mark.parametrize("classes", [[1, 0], [0, 2], ["0", "1"]])
def test_swapped_classes_are_refused(saved, tmp_path, classes):
    model_dir = _copy(saved, tmp_path)
    edit_mlmodel(model_dir / "MLmodel", lambda d: d["flavors"]["mlcal"].update(classes=classes))
    for loader in _loaders():   # unsealed: the MLmodel digest no longer matches
        with pytest.raises(ModelIntegrityError, match="MLmodel flavour sections were edited"):
            loader(str(model_dir))
    reseal(model_dir)
    for loader in _loaders():
        with pytest.raises(CalibratorFormatError, match="'classes'.*classes_ are"):
            loader(str(model_dir))


# -- finding 8: symlinks, special files, a malformed flavour section ----------------------------
def test_symlinks_inside_the_model_directory_are_refused(saved, tmp_path):
    outside = tmp_path / "outside.skops"
    shutil.copy(saved[0] / "base_model" / "model.skops", outside)
    for target in (outside, saved[0] / "base_model" / "model.skops"):
        model_dir = _copy(saved, tmp_path, name=f"m{len(str(target))}")
        (model_dir / "base_model" / "model.skops").unlink()
        (model_dir / "base_model" / "model.skops").symlink_to(target)
        for loader in _loaders():
            with pytest.raises(ModelIntegrityError, match="base_model/model.skops is a symlink"):
                loader(str(model_dir))


def test_fifo_in_the_model_directory_is_refused_without_blocking(saved, tmp_path):
    model_dir = _copy(saved, tmp_path)
    os.mkfifo(model_dir / "base_model" / "pipe")
    with pytest.raises(ModelIntegrityError, match="base_model/pipe is not a regular file"):
        load_model(str(model_dir))


@pytest.mark.parametrize("section", [["calibrator.json"], "mlcal", None, 7])
def test_flavour_section_must_be_a_mapping(saved, tmp_path, section):
    model_dir = _copy(saved, tmp_path)
    edit_mlmodel(model_dir / "MLmodel", lambda d: d["flavors"].update(mlcal=section))
    with pytest.raises(CalibratorFormatError, match="must be a mapping"):
        load_model(str(model_dir))


@pytest.mark.parametrize("change, message", [
    (lambda m: (m / "calibrator.json").write_text((m / "calibrator.json").read_text() + " "),
     "calibrator.json was changed"),
    (lambda m: (m / "requirements.txt").unlink(), "requirements.txt is missing"),
    (lambda m: (m / "base_model" / "extra.py").write_text("x = 1"),
     "base_model/extra.py was added"),
    (lambda m: edit_mlmodel(m / "MLmodel",
                            lambda d: d["flavors"]["mlcal"].pop("files")), "no file digests"),
    (lambda m: edit_mlmodel(m / "MLmodel",
                            lambda d: d["flavors"]["mlcal"].update(digest=7)), "hex digest"),
    (lambda m: edit_mlmodel(m / "MLmodel", lambda d: d["flavors"]["python_function"].update(
        loader_module="mlflow.sklearn")), "MLmodel flavour sections were edited"),
])
def test_changed_missing_and_extra_files_are_named(saved, tmp_path, change, message):
    model_dir = _copy(saved, tmp_path)
    change(model_dir)
    with pytest.raises(ModelIntegrityError, match=message):
        load_model(str(model_dir))


def test_verify_cli_lists_each_file(saved, tmp_path, capsys):
    assert cli_main(["verify", str(saved[0])]) == 0
    out = capsys.readouterr().out
    assert "OK      calibrator.json" in out and "OK      base_model/model.skops" in out
    model_dir = _copy(saved, tmp_path)
    (model_dir / "calibrator.json").write_text("{}")
    (model_dir / "conda.yaml").unlink()
    (model_dir / "new.txt").write_text("x")
    assert cli_main(["verify", str(model_dir)]) == 1
    out = capsys.readouterr().out
    assert "CHANGED calibrator.json" in out and "MISSING conda.yaml" in out
    assert "EXTRA   new.txt" in out and "OK      base_model/model.skops" in out
    assert cli_main(["verify", str(tmp_path / "nowhere")]) == 2


# -- the registry tag --------------------------------------------------------------------------
def test_registered_version_carries_its_digest_and_rewrites_are_caught(saved, data,
                                                                       sqlite_tracking,
                                                                       capsys):
    from mlflow import MlflowClient

    from mlcal.mlflow.gate import positive_probability

    with mlflow.start_run():
        info = log_model(saved[1], name="model", registered_model_name="guarded",
                         pip_requirements=REQS, bundle_mlcal=False)
    client = MlflowClient()
    version = client.get_model_version("guarded", "1")
    assert version.tags["mlcal.digest"] == info.flavors["mlcal"]["digest"]
    uri = "models:/guarded/1"
    assert check_registered_version(uri) == info.flavors["mlcal"]["digest"]
    np.testing.assert_array_equal(positive_probability(uri, data[0]),
                                  saved[1].predict_proba(data[0])[:, 1])
    assert cli_main(["verify", uri, "--tracking-uri", sqlite_tracking]) == 0
    assert "OK      registry tag mlcal.digest" in capsys.readouterr().out

    # rewrite the registered artifacts in place, MLmodel digests included
    stored = mlflow.get_logged_model(info.model_id).artifact_location
    stored = stored[len("file://"):] if stored.startswith("file://") else stored
    cal = os.path.join(stored, "calibrator.json")
    doc = open(cal).read()
    with open(cal, "w") as fh:
        fh.write(doc.replace('"interpolate"', ' "interpolate"'))
    reseal(stored)
    assert load_model(uri) is not None    # self-consistent again, so only the tag can tell
    with pytest.raises(ModelIntegrityError, match="changed after it was registered"):
        check_registered_version(uri)
    with pytest.raises(ModelIntegrityError, match="changed after it was registered"):
        positive_probability(uri, data[0])
    assert cli_main(["verify", uri, "--tracking-uri", sqlite_tracking]) == 1
    assert "CHANGED registry tag" in capsys.readouterr().out
