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


# -- issue #24: bounded parsing, regular files, consistent documents ---------------------------
def _structure_reference(raw: bytes) -> tuple[int, int, int]:
    """Containers, strings and depth by a regex that strips strings, then a plain loop."""
    import re

    stripped, strings = re.subn(rb'"(?:[^"\\]|\\.)*"', b"", raw, flags=re.DOTALL)
    level = deepest = 0
    for ch in stripped:
        if ch in b"[{":
            level += 1
            deepest = max(deepest, level)
        elif ch in b"]}":
            level -= 1
    return stripped.count(b"[") + stripped.count(b"{"), strings, deepest


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 18])
def test_exact_structure_count_matches_a_reference(chunk, monkeypatch):
    import random

    import mlcal._safe_json as sj

    monkeypatch.setattr(sj, "_CHUNK", chunk)
    rng = random.Random(chunk)
    tricky = ["a[{\\\"]}\\\\", "", "\\", 'x"y', "[[[", "\\\\\\\"", "}}"]

    def value(depth):
        r = rng.random()
        if depth > 4 or r < 0.3:
            return rng.choice([1, 2.5, None, True] + tricky)
        if r < 0.65:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {rng.choice(tricky) + str(i): value(depth + 1) for i in range(rng.randint(0, 3))}

    for _ in range(150):
        raw = json.dumps(value(0)).encode()
        assert sj._structure(raw) == _structure_reference(raw), raw


@pytest.mark.parametrize("item", [b"[]", b"{}", b'""', b"[[0]]"])
def test_element_bomb_within_the_size_cap_is_refused_before_parsing(item):
    import tracemalloc

    from mlcal._safe_json import element_limits

    n = 1_000_000   # ~3-6 MB: far under the 64 MiB cap
    text = b'{"format": "mlcal-calibrator", "junk": [' + b",".join([item] * n) + b"]}"
    tracemalloc.start()
    try:
        with pytest.raises(CalibratorFormatError, match="more than a valid document"):
            load_calibrator(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # parsing first (the old loader) took ~20x the text; the exact count before parsing
    # holds it to the text's size plus fixed chunk buffers
    assert peak < 2 * len(text) + 8 * 2 ** 20, peak / len(text)
    containers, strings = element_limits(len(text))
    assert containers < n and strings < n


def test_a_valid_document_is_far_within_the_element_budget(fitted):
    from mlcal._safe_json import _structure, element_limits

    for doc in (fitted.to_json(), get_calibrator("auto").fit(
            np.linspace(0, 1, 200), np.arange(200) % 3 == 0).to_json()):
        raw = doc.encode()
        containers, strings, _ = _structure(raw)
        max_containers, max_strings = element_limits(len(raw))
        assert containers <= max_containers and strings <= max_strings


def test_unknown_top_level_fields_are_refused_by_name(fitted):
    doc = _doc(fitted)
    doc["junk"] = [[]] * 3
    with pytest.raises(CalibratorFormatError, match="unknown top-level field.*'junk'"):
        load_calibrator(doc)


_NOT_REGULAR = ("fifo", "dev-zero", "directory", "symlink-to-fifo")


@pytest.fixture(scope="module")
def not_regular_loads(tmp_path_factory):
    """Each kind of non-regular path loaded in one subprocess (one interpreter start for the
    four; the old loader blocked forever on a FIFO and streamed /dev/zero, so a hang on any of
    them times the subprocess out): {kind: the loader's message}."""
    import json
    import os
    import subprocess
    import sys

    tmp = tmp_path_factory.mktemp("not-regular")
    os.mkfifo(tmp / "cal.json")
    (tmp / "link.json").symlink_to(tmp / "cal.json")
    (tmp / "dir").mkdir()
    paths = {"fifo": tmp / "cal.json", "dev-zero": Path("/dev/zero"), "directory": tmp / "dir",
             "symlink-to-fifo": tmp / "link.json"}
    assert set(paths) == set(_NOT_REGULAR)
    code = ("import json, pathlib, sys, mlcal\nout = {}\n"
            "for kind, path in json.loads(sys.argv[1]).items():\n"
            "    try:\n        mlcal.load_calibrator(pathlib.Path(path))\n"
            "        out[kind] = 'loaded'\n"
            "    except mlcal.CalibratorFormatError as e:\n        out[kind] = str(e)\n"
            "    print(kind, 'done', file=sys.stderr, flush=True)\n"
            "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", code,
                           json.dumps({k: str(v) for k, v in paths.items()})],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("kind", _NOT_REGULAR)
def test_only_regular_files_are_read_and_nothing_blocks(kind, not_regular_loads):
    expected = {"fifo": "is a FIFO", "symlink-to-fifo": "is a FIFO",
                "dev-zero": "is a character device", "directory": "is a directory"}[kind]
    message = not_regular_loads[kind]
    assert expected in message and "not a regular file" in message, message


@pytest.mark.parametrize("method, edit, message", [
    ("platt", lambda d: d.update(map={"type": "step", "format_version": 1,
                                      "thresholds": [0.5], "values": [0.1, 0.9]}),
     "'platt' calibrator fits 'sigmoid' maps, not a 'step' map"),
    ("histogram", lambda d: d.update(map={"type": "multiclass-ovr", "format_version": 1,
                                          "normalisation": "sum", "maps": [d["map"]] * 2}),
     "not a 'multiclass-ovr' map"),
    ("isotonic", lambda d: d["map"].update(values=d["map"]["values"][::-1]),
     "'isotonic' map is non-decreasing, this one is not"),
    ("beta", lambda d: d["map"].update(a=-1.0), "'beta' map is non-decreasing"),
    ("temperature", lambda d: d["map"].update(a=-2.0, b=-2.0),
     "'temperature' map is non-decreasing"),
    ("platt", lambda d: d["map"].update(input_transform="sigmoid"), "input transform"),
    ("histogram", lambda d: d["params"].update(n_bins=10 ** 300), "parameter 'n_bins'"),
    ("auto", lambda d: d["params"].update(seed=2 ** 53), "parameter 'seed'"),
])
def test_documents_must_be_consistent(method, edit, message):
    rng = np.random.default_rng(5)
    s = rng.random(300)
    y = (rng.random(300) < s).astype(int)
    doc = _doc(get_calibrator(method).fit(s, y))
    edit(doc)
    with pytest.raises(CalibratorFormatError, match=message):
        load_calibrator(doc)


def test_multiclass_maps_must_be_what_the_method_fits():
    from mlcal.calibrators.multiclass import OneVsRest, TemperatureScaling

    rng = np.random.default_rng(2)
    z = rng.normal(size=(300, 3))
    y = np.argmax(z + rng.gumbel(size=(300, 3)), axis=1)
    doc = _doc(TemperatureScaling().fit(z, y))
    doc["map"]["bias"] = [0.5, 0.0, 0.0]
    with pytest.raises(CalibratorFormatError, match="weights of ones and a zero bias"):
        load_calibrator(doc)
    doc = _doc(OneVsRest("isotonic").fit(z, y))
    doc["map"]["maps"][1]["values"] = doc["map"]["maps"][1]["values"][::-1]
    with pytest.raises(CalibratorFormatError, match="class map 1: a 'isotonic' map is non-dec"):
        load_calibrator(doc)


def test_cli_evaluate_and_export_refuse_a_decreasing_monotone_map(fitted, tmp_path, capsys):
    doc = _doc(fitted)
    doc["map"]["values"] = doc["map"]["values"][::-1]
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    data = tmp_path / "d.csv"
    data.write_text("score,y\n0.1,0\n0.9,1\n")
    assert main(["evaluate", "--calibrator", str(path), "--data", str(data)]) == 2
    assert "non-decreasing" in capsys.readouterr().err
    pytest.importorskip("onnx")
    out = tmp_path / "m.onnx"
    assert main(["export-onnx", "--calibrator", str(path), "--out", str(out)]) == 2
    assert "non-decreasing" in capsys.readouterr().err and not out.exists()


def test_java_method_table_is_mlcal_s():
    from mlcal.calibrators.document_rules import table_json

    resource = Path(__file__).resolve().parents[1] / "jvm/src/main/resources/io/mlcal/methods.json"
    assert resource.read_text(encoding="utf-8") == table_json(), (
        "regenerate with: python -m mlcal.calibrators.document_rules")


@pytest.mark.parametrize("weight", [5e-324, 1e-310, 1e-200])
def test_auto_fitted_with_tiny_weights_saves_and_loads_bit_identically(weight, tmp_path):
    rng = np.random.default_rng(0)
    s = rng.random(200)
    y = (rng.random(200) < s).astype(int)
    cal = get_calibrator("auto").fit(s, y, np.full(200, weight))
    path = save_calibrator(cal, tmp_path / "auto.json")   # was "se is inf"
    again = load_calibrator(Path(path))
    assert again.to_json() == cal.to_json()
    probe = np.linspace(-1, 2, 31)
    assert np.array_equal(again.predict(probe).view(np.uint64), cal.predict(probe).view(np.uint64))
    assert all(np.isfinite(r["se"]) for r in cal.selection_["candidates"] if "se" in r)


def test_auto_statistics_are_exact_for_tiny_weights():
    """CV statistics on weights scaled by powers of two: identical means, se scaled by
    exactly 2**(k/2), and for subnormal weights the value of an exact rational computation."""
    from fractions import Fraction

    from mlcal.calibrators.auto import cv_statistics

    rng = np.random.default_rng(3)
    pos, neg = rng.integers(0, 4, 50).astype(float), rng.integers(0, 4, 50).astype(float)
    losses = {n: (rng.random(50), rng.random(50)) for n in ("a", "b", "c")}
    mean0, se0, best0 = cv_statistics(losses, (pos, neg), ["a", "b", "c"])
    for k in (20, 1000, 1070):
        mean, se, best = cv_statistics(losses, (np.ldexp(pos, -k), np.ldexp(neg, -k)),
                                       ["a", "b", "c"])
        assert mean == mean0 and best == best0
        assert all(np.isfinite(v) for v in se.values())
        if k % 2 == 0:
            assert {n: np.ldexp(v, -k // 2) for n, v in se.items()} == se0
    # against exact arithmetic at the subnormal weights themselves
    wp, wn = np.ldexp(pos, -1070), np.ldexp(neg, -1070)
    mean, se, best = cv_statistics(losses, (wp, wn), ["a", "b", "c"])
    W = [Fraction(float(v)) for v in np.concatenate((wp, wn))]
    total = sum(W)
    for n, (lp, ln) in losses.items():
        L = [Fraction(float(v)) for v in np.concatenate((lp, ln))]
        B = [Fraction(float(v)) for v in np.concatenate(losses[best])]
        exact_mean = sum(w * x for w, x in zip(W, L)) / total
        assert abs(mean[n] - float(exact_mean)) <= 1e-15 * abs(float(exact_mean))
        d = [x - b for x, b in zip(L, B)]
        dm = sum(w * x for w, x in zip(W, d)) / total
        var = sum(w * (x - dm) ** 2 for w, x in zip(W, d)) / total
        exact_se = float(var / total) ** 0.5 if var / total < 2 ** 1000 else \
            float(var) ** 0.5 / float(total * 2 ** 1074) ** 0.5 * 2.0 ** 537
        assert abs(se[n] - exact_se) <= 1e-12 * max(exact_se, 1e-300)


def test_write_errors_name_the_target_not_the_temporary_file(fitted, tmp_path):
    import subprocess
    import sys

    target = tmp_path / "cal.json"
    # a file-size limit makes the write itself fail (EFBIG), as a full disk would
    code = (f"import resource, signal, mlcal, numpy as np\n"
            f"signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            f"cal = mlcal.load_calibrator({fitted.to_json()!r})\n"
            f"resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))\n"
            f"try:\n    mlcal.save_calibrator(cal, {str(target)!r})\n"
            f"except OSError as e:\n    print(repr(e)); print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert "File too large" in proc.stdout and str(target) in proc.stdout, proc
    assert ".tmp" not in proc.stdout
    assert list(tmp_path.iterdir()) == []   # nothing half-written left behind
