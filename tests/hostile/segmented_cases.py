"""Tampered segmented calibrator documents: one edit each, with a phrase the refusal must
contain (Python's ``CalibratorFormatError`` and the Java evaluator's ``MapFormatException``).

Used by ``tests/test_java_segmented.py`` (each case refused by both, naming the problem) and by
the hostile corpus (``tests/hostile/make_documents.py``, every case refused by both loaders).
The edits assume the layout of :func:`segmented_document`: three columns ``country``
(string), ``tier`` (integer) and ``flag`` (boolean), a ``platt`` shared map and
``unseen="shared"``.
"""

from __future__ import annotations

import numpy as np


def segmented_document() -> dict:
    """A fitted ``SegmentedCalibrator`` document (platt shared map, three typed columns, 24
    segments, the larger ones with slopes)."""
    import pandas as pd

    import mlcal

    rng = np.random.default_rng(31)
    n = 1500
    seg = pd.DataFrame({"country": np.array(["FR", "DE", "IT", "ES"])[rng.integers(0, 4, n)],
                        "tier": rng.integers(-1, 2, n).astype(np.int64),
                        "flag": rng.random(n) < 0.5})
    s = rng.random(n)
    shift = seg["country"].map({"FR": 0.7, "DE": -0.6, "IT": 0.0, "ES": 0.3}).to_numpy(float)
    z = 1.8 * (np.log(s) - np.log1p(-s)) + shift + 0.3 * seg["tier"].to_numpy(float)
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(int)
    return mlcal.SegmentedCalibrator("platt", n_folds=None, min_rows_for_slope=60).fit(
        s, y, seg).to_dict()


TAMPERED = {
    "unknown map field": (lambda d: d["map"].update(extra=1), "unknown field"),
    "unknown top-level field": (lambda d: d.update(fit_info={}), "unknown top-level field"),
    "missing slopes": (lambda d: d["map"].pop("slopes"), "missing field 'slopes'"),
    "string key in an integer column": (lambda d: d["map"]["keys"][1].__setitem__(0, "0"),
                                        "key of a integer column must be"),
    "boolean key in an integer column": (lambda d: d["map"]["keys"][1].__setitem__(0, True),
                                         "key of a integer column must be"),
    "1.0 key in an integer column": (lambda d: d["map"]["keys"][1].__setitem__(0, 1.0),
                                     "key of a integer column must be"),
    "integer beyond 64 bits": (lambda d: d["map"]["keys"][1].__setitem__(0, 2 ** 63),
                               "in the signed 64-bit range"),
    "integer key in a string column": (lambda d: d["map"]["keys"][0].__setitem__(0, 5),
                                       "key of a string column must be"),
    "string key too long": (lambda d: d["map"]["keys"][0].__setitem__(0, "é" * 1001),
                            "key of a string column must be"),
    "duplicate key": (lambda d: [d["map"]["keys"][j].__setitem__(1, d["map"]["keys"][j][0])
                                 for j in range(3)], "appears twice"),
    "key lists differ in length": (lambda d: d["map"]["keys"][0].pop(), "differ in length"),
    "zero slope": (lambda d: d["map"]["slopes"].__setitem__(0, 0.0), "slopes must be > 0"),
    "negative slope": (lambda d: d["map"]["slopes"].__setitem__(1, -1.0),
                       "slopes must be > 0"),
    "an offset short": (lambda d: d["map"]["offsets"].pop(), "as many slopes and offsets"),
    "offset a string": (lambda d: d["map"]["offsets"].__setitem__(0, "0.1"),
                        "'offsets' must be a list of numbers"),
    "column type float": (lambda d: d["map"]["columns"][0].update(type="float"),
                          "has type 'float'"),
    "column names repeat": (lambda d: d["map"]["columns"][1].update(name="country"),
                            "column names repeat"),
    "empty column name": (lambda d: d["map"]["columns"][1].update(name=""),
                          "a column name must be a non-empty string"),
    "column extra field": (lambda d: d["map"]["columns"][0].update(extra=1),
                           "exactly the fields 'name' and 'type'"),
    "no columns": (lambda d: d["map"].update(columns=[], keys=[]), "'columns' must be a list"),
    "unseen policy unknown": (lambda d: d["map"].update(unseen="ignore"),
                              "unseen must be one of"),
    "params and map disagree": (lambda d: d["params"].update(unseen="raise"),
                                "params say unseen='raise'"),
    "shared method segmented": (lambda d: d["params"].update(method="segmented"),
                                "parameter 'method' has an invalid value"),
    "n_folds 1": (lambda d: d["params"].update(n_folds=1), "parameter 'n_folds'"),
    "unknown parameter": (lambda d: d["params"].update(colour="red"),
                          "params must be exactly"),
    "missing parameter": (lambda d: d["params"].pop("seed"), "params must be exactly"),
    "inner an offset": (lambda d: d["map"].update(inner={"type": "offset"}),
                        "field 'inner' must be a map of type"),
    "transform differs": (lambda d: d["map"].update(input_transform="sigmoid"),
                          "differ from the inner map's"),
    "domain differs": (lambda d: d["map"].update(domain=[0.0, 2.0]),
                       "differ from the inner map's"),
    "inner map a platt cannot fit": (
        lambda d: d["map"].update(inner={"type": "step", "format_version": 1, "thresholds": [],
                                         "values": [0.5], "input_transform": "identity",
                                         "domain": d["map"]["domain"]}),
        "shared map: a 'platt' calibrator fits 'sigmoid' maps, not a 'step' map"),
    "inner map invalid": (lambda d: d["map"]["inner"].update(a="x"), "field 'a' must be"),
    "format_version 2": (lambda d: d["map"].update(format_version=2),
                         "unsupported format_version 2"),
}
