"""The re-offset stage in the Java evaluator: bit-identical to Python's predict for every
registered method's map under several offsets, and the documents Python refuses refused too."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mlcal
from mlcal.maps import BetaMap, LinearMap, SigmoidMap, StepMap
from mlcal.maps.offset import OffsetMap
from mlcal.maps.reoffset import reoffset
from tests.support.synthetic import calibration_set
from tests.test_java_evaluator import (_python_rejects, assert_bits_equal, probe_scores,
                                       run_batch)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")   # huge probe scores
def test_offset_calibrators_are_bit_identical(jar, tmp_path):
    rng = np.random.default_rng(11)
    s, y = calibration_set(400, seed=4, link_power=2.0)
    cases, expected, names = [], [], []
    for i, method in enumerate(mlcal.available_calibrators()):
        cal = mlcal.get_calibrator(method).fit(s, y)
        delta = (0.0, 1.75, -3.2, 38.0)[i % 4]
        shifted = reoffset(cal, delta)
        x = probe_scores(cal.map_, rng, n_random=400)
        cases.append((shifted.to_json(), x))
        expected.append(shifted.predict(x))
        names.append(f"{method} ({cal.map_.kind}) delta={delta}")
    # hand-built: probabilities of exactly 0 and 1, subnormal p, the sigmoid input transform
    maps = [OffsetMap(StepMap([0.3, 0.6], [0.0, 0.4, 1.0]), 2.0),
            OffsetMap(LinearMap([0.1, 0.9], [0.0, 1.0], input_transform="sigmoid"), -1.5),
            OffsetMap(SigmoidMap(-700.0, 300.0), 30.0),
            OffsetMap(BetaMap(1.3, 0.7, -0.2, input_transform="sigmoid"), -0.7)]
    for m in maps:
        x = probe_scores(m, rng, n_random=300)
        cases.append((m.to_dict(), x))
        expected.append(m(x))
        names.append(f"hand-built {m.inner.kind}")
    results = run_batch(jar, tmp_path, cases)
    for got, py, name in zip(results, expected, names):
        assert_bits_equal(got, py, name)
    assert any((e == 0.0).any() and (e == 1.0).any() for e in expected)


def test_offset_documents_python_refuses_java_refuses(jar, tmp_path):
    inner = SigmoidMap(-2.0, 0.1).to_dict()
    good = OffsetMap(SigmoidMap(-2.0, 0.1), 0.5).to_dict()
    s, y = calibration_set(200, seed=8)
    iso = mlcal.get_calibrator("isotonic").fit(s, y)
    decreasing = reoffset(iso, 1.0).to_dict()
    decreasing["map"]["inner"]["values"] = decreasing["map"]["inner"]["values"][::-1]
    platt_doc = reoffset(mlcal.get_calibrator("platt").fit(s, y), 1.0).to_dict()
    platt_doc["map"]["inner"] = StepMap([0.5], [0.2, 0.8],
                                        domain=tuple(platt_doc["map"]["domain"])).to_dict()
    bad = {
        "offset of an offset": ({**good, "inner": good}, "cannot wrap another offset"),
        "inner multiclass": ({**good, "inner": {"type": "multiclass-ovr", "format_version": 1}},
                             "inner map must be one of"),
        "inner missing": ({k: v for k, v in good.items() if k != "inner"},
                          "field 'inner' must be a map object"),
        "delta string": ({**good, "delta": "1"}, "field 'delta' must be a finite number"),
        "delta missing": ({k: v for k, v in good.items() if k != "delta"},
                          "field 'delta' must be a finite number"),
        "transform differs": ({**good, "input_transform": "sigmoid"}, "differ from the inner"),
        "inner invalid": ({**good, "inner": {**inner, "a": "x"}}, "field 'a' must be"),
        "isotonic decreasing inner": (decreasing, "non-decreasing"),
        "platt with a step inner": (platt_doc, "not a 'step' map"),
    }
    texts = {k: json.dumps(d) for k, (d, _) in bad.items()}
    results = run_batch(jar, tmp_path, [(t, np.array([0.5])) for t in texts.values()])
    for (name, (_, phrase)), got in zip(bad.items(), results):
        assert _python_rejects(texts[name]), f"{name}: Python accepts the document"
        assert isinstance(got, str) and got.startswith("MapFormatException: "), (name, got)
        assert phrase in got, (name, got)
