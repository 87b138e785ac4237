"""The core works without the optional integrations; a missing one names the extra to install.

"Not installed" is simulated for real in a subprocess: ``sys.modules[name] = None`` makes every
``import name`` there raise ImportError, exactly as when the package is absent.
"""

import json
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest

import mlcal
from mlcal._atomic import check_new_path, write_json
from mlcal._optional import MissingExtraError
from mlcal._safe_json import dumps_safe, loads_strict
from mlcal.labels import positive_indicator

ROOT = Path(__file__).resolve().parents[1]
INTEGRATIONS = ("mlflow", "onnx", "skl2onnx", "onnxruntime", "pyspark")

_WITHOUT_INTEGRATIONS = r"""
import sys
for name in %(blocked)r:
    sys.modules[name] = None          # `import name` now raises ImportError
import json
import numpy as np
from sklearn.linear_model import LogisticRegression

import mlcal
from mlcal.calibrators.base import load_calibrator, save_calibrator
from mlcal.cli import main

rng = np.random.default_rng(0)
X = rng.standard_normal((600, 3))
y = (rng.random(600) < 1 / (1 + np.exp(-X[:, 0]))).astype(int)
base = LogisticRegression().fit(X[:300], y[:300])
model = mlcal.CalibratedModel(base, "isotonic").fit(X[300:], y[300:])
p = model.predict_proba(X[:5])[:, 1]
cal = mlcal.Platt().fit(rng.random(200), (rng.random(200) < 0.5).astype(float))
save_calibrator(cal, sys.argv[1])
same = np.array_equal(load_calibrator(sys.argv[1]).predict([0.1, 0.7]), cal.predict([0.1, 0.7]))
errors = {}
for module in ("mlcal.mlflow", "mlcal.onnx", "mlcal.mlflow.gate", "mlcal.spark"):
    try:
        __import__(module)
    except ImportError as exc:
        errors[module] = [type(exc).__name__, str(exc)]
codes = {"help": None, "export-onnx": main(["export-onnx", "--calibrator", sys.argv[1],
                                            "--out", sys.argv[1] + ".onnx"]),
         "promote": main(["promote", "--model-name", "m", "--max-ece", "0.1"])}
try:
    main(["--help"])
except SystemExit as exc:
    codes["help"] = exc.code
loaded = sorted(m for m, v in sys.modules.items()
                if v is not None and m.split(".")[0] in %(blocked)r)
print(json.dumps({"p": p.tolist(), "same": same, "errors": errors, "codes": codes,
                  "loaded": loaded}))
"""


@pytest.fixture(scope="module")
def without_integrations(tmp_path_factory):
    path = tmp_path_factory.mktemp("core") / "platt.json"
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT_INTEGRATIONS % {"blocked": INTEGRATIONS}, str(path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_core_fits_predicts_and_saves_without_mlflow_or_onnx(without_integrations):
    out, _ = without_integrations
    p = np.asarray(out["p"])
    assert p.shape == (5,) and np.all((p >= 0) & (p <= 1))
    assert out["same"] is True
    assert out["loaded"] == []   # nothing of the integrations was even partly imported


@pytest.mark.parametrize("module,extra", [("mlcal.mlflow", "mlflow"), ("mlcal.onnx", "onnx"),
                                          ("mlcal.mlflow.gate", "mlflow"),
                                          ("mlcal.spark", "spark")])
def test_using_a_missing_integration_names_the_extra(without_integrations, module, extra):
    out, _ = without_integrations
    kind, message = out["errors"][module]
    assert kind == "MissingExtraError"   # an ImportError subclass (checked below)
    assert f"pip install 'mlcal[{extra}]'" in message
    assert issubclass(MissingExtraError, ImportError)


def test_cli_lists_every_command_and_names_the_missing_extra(without_integrations):
    out, stderr = without_integrations
    assert out["codes"] == {"help": 0, "export-onnx": 2, "promote": 2}
    assert "mlcal export-onnx: error:" in stderr and "mlcal[onnx]" in stderr
    assert "mlcal promote: error:" in stderr and "mlcal[mlflow]" in stderr


def test_core_dependencies_leave_the_integrations_to_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("<")[0].split("=")[0].strip()
             for d in project["dependencies"]}
    assert names.isdisjoint(INTEGRATIONS), names
    extras = project["optional-dependencies"]
    assert any(d.startswith("mlflow") for d in extras["mlflow"])
    assert {d.split(">")[0] for d in extras["onnx"]} == {"onnx", "skl2onnx", "onnxruntime",
                                                         "onnxmltools"}
    assert extras["spark"] == ["pyspark>=3.5"]
    assert "mlcal[mlflow,onnx,spark]" in extras["dev"]
    # the two command lines of README.md's first code block (.ci/run runs the second)
    readme = (ROOT / "README.md").read_text().split("```")[1].splitlines()[1:]
    # the first is a regular install (the wheel carries the compiled kernels), the second editable
    assert '".[mlflow,onnx]"' in readme[0] and '-e ".[dev]"' in readme[1]


def test_the_decorator_has_a_name_of_its_own_and_the_old_one_warns():
    from mlcal.calibrators.catalog import calibrator_class

    assert mlcal.register_calibrator("isotonic")(mlcal.Isotonic) is mlcal.Isotonic
    with pytest.warns(DeprecationWarning, match="register_calibrator"):
        assert mlcal.register("isotonic")(mlcal.Isotonic) is mlcal.Isotonic
    with pytest.raises(ValueError, match="already taken by Isotonic"):
        mlcal.register_calibrator("isotonic")(mlcal.Platt)
    assert calibrator_class("isotonic") is mlcal.Isotonic
    assert "register" not in mlcal.__all__


def test_json_writer_turns_non_finite_numbers_into_null(tmp_path):
    doc = {"auc": float("nan"), "x": [np.float32("inf"), -np.inf, np.float64(0.25)],
           "n": np.int64(3), "ok": np.bool_(True), "arr": np.array([1.5, np.nan])}
    path = write_json(tmp_path / "report.json", doc)
    text = Path(path).read_text()
    assert "NaN" not in text and "Infinity" not in text and text.endswith("\n")
    assert loads_strict(text) == {"auc": None, "x": [None, None, 0.25], "n": 3, "ok": True,
                                  "arr": [1.5, None]}
    assert json.loads(text) == loads_strict(text)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_json(path, {"a": 1})
    assert loads_strict(Path(path).read_text())["n"] == 3      # untouched
    write_json(path, {"a": 1}, overwrite=True)
    assert loads_strict(Path(path).read_text()) == {"a": 1}


def test_strict_documents_refuse_non_finite_numbers_naming_where(tmp_path):
    with pytest.raises(ValueError, match=r"map\.values\[1\] is nan"):
        dumps_safe({"map": {"values": [0.1, float("nan")]}}, nonfinite="error")
    with pytest.raises(ValueError, match="map.a is inf"):
        write_json(tmp_path / "cal.json", {"map": {"a": np.inf}}, nonfinite="error")
    assert not (tmp_path / "cal.json").exists()
    with pytest.raises(ValueError, match="nonfinite must be one of"):
        dumps_safe({}, nonfinite="string")


def test_saved_calibrator_json_is_byte_identical_to_to_json(tmp_path):
    rng = np.random.default_rng(3)
    s = rng.random(300)
    cal = mlcal.Isotonic().fit(s, (rng.random(300) < s).astype(float))
    path = mlcal.save_calibrator(cal, tmp_path / "iso.json")
    assert Path(path).read_text() == cal.to_json(indent=1) + "\n"


def test_exists_guard(tmp_path):
    target = tmp_path / "a.onnx"
    check_new_path(target)                      # absent: fine
    target.write_bytes(b"x")
    with pytest.raises(FileExistsError, match="already exists"):
        check_new_path(target)
    check_new_path(target, overwrite=True)
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError):        # a dangling link is still something saved
        check_new_path(link)


def test_positive_indicator_matches_a_brute_force_mapping():
    rng = np.random.default_rng(0)
    for classes in ([0, 1], [3, 7], ["no", "yes"], [False, True], [-1.0, 1.0]):
        y = [classes[i] for i in rng.integers(0, 2, 50)]
        expected = [1.0 if v == classes[1] else 0.0 for v in y]
        assert positive_indicator(y, np.asarray(classes)).tolist() == expected
    with pytest.raises(ValueError, match=r"labels \[2\] that are not among"):
        positive_indicator([0, 1, 2], [0, 1])
    with pytest.raises(ValueError, match="not among"):
        positive_indicator(["1", "0"], [0, 1])          # strings are not the integer classes
    with pytest.raises(ValueError, match="not among"):
        positive_indicator([0.0, np.nan], [0, 1])
    with pytest.raises(ValueError, match="two distinct classes"):
        positive_indicator([0, 0], [0, 0])


def test_naive_probability_is_the_maps_own_sigmoid():
    from mlcal.base_models.scores import naive_probability
    from mlcal.maps import apply_input_transform

    s = np.linspace(-30, 30, 101)
    assert np.array_equal(naive_probability(s, "margin"), apply_input_transform(s, "sigmoid"))
    np.testing.assert_allclose(naive_probability(s, "decision_function"),
                               1 / (1 + np.exp(-s)), rtol=1e-15, atol=0)
    assert np.array_equal(naive_probability(s[50:60] / 31 + 0.5, "predict_proba"),
                          s[50:60] / 31 + 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        naive_probability(np.array([-1e308, 1e308]), "margin")


@pytest.mark.parametrize("old", ["mlcal.registry", "mlcal.gate"])
def test_removed_gate_shims_do_not_import(old):
    # the 0.x shims were removed (issue 27): the gate lives in mlcal.mlflow.gate and
    # mlcal.mlflow.gate_policy, and the old names must not linger half-working
    # (checked on the source tree: a developer venv's editable install of another checkout
    # can still resolve the old names)
    package = Path(mlcal.__file__).resolve().parent
    assert not (package / (old.split(".")[1] + ".py")).exists()
    assert not [p for p in package.rglob("*.py") if f"import {old}" in p.read_text("utf-8")]
