"""The segmented calibrator in the Java evaluator (``jvm/``): predictions bit-identical to
Python's ``SegmentedCalibrator.predict`` on random rows (unseen and missing keys included),
the same typed-key rules and unseen policy, the documents Python refuses refused, and the
command line reading segment columns by name from JSON lines and CSV."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest

import mlcal
from mlcal.maps import BetaMap, SigmoidMap, StepMap
from mlcal.maps.segment_keys import SegmentKeyError
from mlcal.maps.segmented import SegmentedMap, UnseenSegmentError
from tests.hostile.segmented_cases import TAMPERED
from tests.test_java_evaluator import _python_rejects, assert_bits_equal, java, run_batch

COUNTRIES = np.array(["FR", "DE", "IT", "ES", "é\u00fc \"q\", x"])


def _segments(rng, n, *, unseen=True):
    """Three typed segment columns; with ``unseen``, some rows hold keys never fitted and
    missing values."""
    seg = pd.DataFrame({"country": COUNTRIES[rng.integers(0, 4, n)].astype(object),
                        "tier": rng.integers(-1, 2, n).astype(object),
                        "flag": (rng.random(n) < 0.5).astype(object)})
    if unseen:
        rows = rng.choice(n, n // 5, replace=False)
        seg.loc[rows[0::4], "country"] = "PT"
        seg.loc[rows[1::4], "tier"] = 7
        seg.loc[rows[2::4], "country"] = None
        seg.loc[rows[3::4], "country"] = COUNTRIES[4]   # quotes, comma, non-ASCII: unseen
    return seg


def _fit(method, seed, **params):
    rng = np.random.default_rng(seed)
    n = 1500
    seg = _segments(rng, n, unseen=False)
    s = rng.random(n)
    shift = seg["country"].map({"FR": 0.7, "DE": -0.6, "IT": 0.0, "ES": 0.3}).to_numpy(float)
    z = 1.8 * (np.log(s) - np.log1p(-s)) + shift + 0.3 * seg["tier"].to_numpy(float)
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(int)
    return mlcal.SegmentedCalibrator(method, n_folds=None, **params).fit(s, y, seg)


def _jsonl(scores, seg) -> str:
    rows = []
    for i, x in enumerate(scores):
        row = {"score": float(x)}
        for c in seg.columns:
            v = seg[c].iloc[i]
            row[c] = None if v is None or (isinstance(v, float) and np.isnan(v)) else \
                v.item() if hasattr(v, "item") else v
        rows.append(json.dumps(row))
    return "\n".join(rows) + "\n"


def _batch(jar, tmp_path, cases):
    """run_batch with JSON-lines inputs (the evaluator's batch mode reads a segmented
    calibrator's rows as JSON lines)."""
    out = []
    for i, (doc, scores, seg) in enumerate(cases):
        path = tmp_path / f"rows{i}.jsonl"
        path.write_text(_jsonl(scores, seg), encoding="utf-8")
        out.append((doc, path))
    lines = []
    for i, (doc, path) in enumerate(out):
        text = doc if isinstance(doc, str) else json.dumps(doc)
        (tmp_path / f"c{i}.json").write_text(text, encoding="utf-8")
        lines.append(f"{tmp_path / f'c{i}.json'}\t{path}\t{tmp_path / f'o{i}.bin'}")
    (tmp_path / "jobs.txt").write_text("\n".join(lines) + "\n")
    proc = java(jar, "--batch", tmp_path / "jobs.txt")
    assert proc.returncode == 0, proc.stderr
    results = []
    for i in range(len(cases)):
        err = tmp_path / f"o{i}.bin.err"
        results.append(err.read_text() if err.exists()
                       else np.fromfile(tmp_path / f"o{i}.bin", dtype="<f8"))
    return results


def _edge_scores(rng, n):
    fixed = np.array([0.0, 1.0, -0.0, 5e-324, 1e-300, 0.5, 1 - 1e-16, 1e-12, 40.0, -40.0,
                      1e300, -1e300])
    return np.concatenate([fixed, rng.random(n - fixed.size)])


def test_fitted_segmented_calibrators_are_bit_identical(jar, tmp_path):
    rng = np.random.default_rng(5)
    cases, expected, names = [], [], []
    off = {"min_rows_for_slope": None}
    for i, (method, params) in enumerate([
            ("platt", off), ("isotonic", off), ("beta", off),
            ("histogram", {"min_rows_for_slope": 40, "slope_alpha": None}),
            ("spline", {"min_rows_for_slope": 30, "slope_alpha": None})]):
        cal = _fit(method, seed=i, **params)
        n = 700
        x = _edge_scores(rng, n)
        seg = _segments(rng, n)
        cases.append((cal.to_json(), x, seg))
        expected.append(cal.predict(x, seg))
        names.append(f"{method} {params}")
        # per-segment slopes only with min_rows_for_slope (untested here); otherwise every
        # segment has the common within-segment slope (shared_slope="within", the default)
        assert (cal.map_.slopes != cal.common_slope_).any() == (params is not off)
    # hand-built: 64-bit integer keys beyond 2**53 (a double cannot hold them), the sigmoid
    # input transform, exact 0 and 1 from a step map
    big = 2 ** 62 + 1
    m = SegmentedMap(BetaMap(1.3, 0.7, -0.2, input_transform="sigmoid"),
                     (("id", "integer"),), ((big,), (big + 2,), (-2 ** 63,), (2 ** 63 - 1,)),
                     [1.0, 0.5, 2.0, 1.0], [0.3, -1.0, 0.0, 2.5])
    ids = np.array([big, big + 2, big + 1, -2 ** 63, 2 ** 63 - 1, 2 ** 53, 0] * 30,
                   dtype=object)
    x = rng.normal(0, 3, ids.size)
    cases.append((_doc(m), x, pd.DataFrame({"id": ids})))
    expected.append(m(x, pd.DataFrame({"id": ids})))
    names.append("64-bit integer keys")
    step = SegmentedMap(StepMap([0.3, 0.6], [0.0, 0.4, 1.0]), (("b", "boolean"),),
                        ((True,), (False,)), [1.5, 1.0], [2.0, -1.0])
    x = rng.random(200)
    flags = pd.DataFrame({"b": (rng.random(200) < 0.5).astype(object)})
    cases.append((_doc(step, "isotonic"), x, flags))
    expected.append(step(x, flags))
    names.append("step map, boolean keys")
    results = _batch(jar, tmp_path, cases)
    for got, py, name in zip(results, expected, names):
        assert_bits_equal(got, py, name)
    assert ((expected[-1] == 0.0).any() and (expected[-1] == 1.0).any())
    # unseen rows got the shared map bit for bit, and segment rows differ from it
    x, seg = cases[0][1], cases[0][2]
    q = mlcal.load_calibrator(cases[0][0]).map_.inner(x)
    unseen = ~seg["country"].isin(["FR", "DE", "IT", "ES"]).to_numpy() | \
        seg["tier"].isin([7]).to_numpy()
    assert unseen.sum() > 50
    assert np.array_equal(results[0][unseen], q[unseen])
    assert (results[0][~unseen] != q[~unseen]).mean() > 0.9


def _doc(m, method="beta", unseen=None):
    return {"format": "mlcal-calibrator", "format_version": 1, "mlcal_version": "0.1.0",
            "method": "segmented",
            "params": {"method": method, "unseen": unseen or m.unseen, "n_folds": None,
                       "min_rows_for_slope": None, "weak_prior_sd": 10.0, "seed": 0},
            "map": m.to_dict()}


def test_unseen_raise_and_typed_keys_raise_as_in_python(jar, tmp_path):
    cal = _fit("platt", seed=3, unseen="raise")
    x = np.array([0.2, 0.4, 0.6])
    ok = pd.DataFrame({"country": ["FR", "DE", "IT"], "tier": [0, 1, -1],
                       "flag": [True, False, True]})
    cases = {
        "seen": (ok, None),
        "unseen key": (ok.assign(country=["FR", "PT", "IT"]), UnseenSegmentError),
        "missing value": (ok.assign(tier=[0, None, 1]), UnseenSegmentError),
        "string in an integer column": (ok.assign(tier=["0", "1", "1"]), SegmentKeyError),
        "boolean in an integer column": (ok.assign(tier=[True, 1, 1]), SegmentKeyError),
        "1.5 in an integer column": (ok.assign(tier=[1.5, 1, 1]), SegmentKeyError),
        "1.0 in an integer column": (ok.assign(tier=[1.0, 0.0, -1.0]), None),
        "integer in a string column": (ok.assign(country=[1, 2, 3]), SegmentKeyError),
        "integer in a boolean column": (ok.assign(flag=[1, 0, 1]), SegmentKeyError),
    }
    results = _batch(jar, tmp_path, [(cal.to_json(), x, seg) for seg, _ in cases.values()])
    java_names = {UnseenSegmentError: "UnseenSegmentException: ",
                  SegmentKeyError: "SegmentKeyException: "}
    for (name, (seg, exc)), got in zip(cases.items(), results):
        if exc is None:
            assert_bits_equal(got, cal.predict(x, seg), name)
            continue
        with pytest.raises(exc):
            cal.predict(x, seg)
        assert isinstance(got, str) and got.startswith(java_names[exc]), (name, got)
    assert "row 1: segment ['PT', 1, False]" in results[1] and "not seen" in results[1]
    assert "with a missing value" in results[2]
    assert "'tier': a integer segment column got String '0'" in results[3]


def _tampered(cal, change):
    doc = copy.deepcopy(cal.to_dict())
    change(doc)
    return json.dumps(doc)


def test_tampered_documents_python_refuses_java_refuses(jar, tmp_path):
    cal = _fit("platt", seed=4)
    texts = {name: _tampered(cal, change) for name, (change, _) in TAMPERED.items()}
    texts["duplicate JSON key"] = cal.to_json().replace(
        '"unseen": "shared"}', '"unseen": "shared", "unseen": "raise"}', 1)
    texts["bare segmented map"] = json.dumps(cal.map_.to_dict())
    phrases = {**{k: p for k, (_, p) in TAMPERED.items()},
               "duplicate JSON key": "duplicate key 'unseen'",
               "bare segmented map": "unknown map type 'segmented'"}
    x = np.array([0.5])
    seg = pd.DataFrame({"country": ["FR"], "tier": [0], "flag": [True]})
    results = _batch(jar, tmp_path, [(t, x, seg) for t in texts.values()])
    for (name, text), got in zip(texts.items(), results):
        assert _python_rejects(text), f"{name}: Python accepts the document"
        assert isinstance(got, str) and got.startswith("MapFormatException: "), (name, got)
        assert phrases[name] in got, (name, got)
    # and the untampered document loads in both, as do ones written before `select`, `tau`,
    # `fold_shared`, `shrinkage`, `shared_slope`, `heterogeneity_alpha` and `slope_alpha` existed
    (tmp_path / "ok").mkdir()
    assert not isinstance(_batch(jar, tmp_path / "ok", [(cal.to_json(), x, seg)])[0], str)
    for gone in (["slope_alpha"], ["heterogeneity_alpha"], ["shared_slope"], ["shrinkage"],
                 ["fold_shared"], ["tau"], ["select", "tau", "fold_shared", "shrinkage",
                                            "shared_slope", "heterogeneity_alpha",
                                            "slope_alpha"]):
        legacy = cal.to_dict()
        for name in gone:
            del legacy["params"][name]
        folder = tmp_path / ("legacy-" + "-".join(gone))
        folder.mkdir()
        got = _batch(jar, folder, [(json.dumps(legacy), x, seg)])[0]
        assert not isinstance(got, str), got
        assert np.array_equal(got, mlcal.load_calibrator(legacy).predict(x, seg))
    # a value added to a parameter later (shrinkage="regression", eighth round) loads too
    reg = _fit("platt", seed=4, tau="plugin", shrinkage="regression")
    assert reg.offset_centre_slope_ != 0.0
    (tmp_path / "regression").mkdir()
    got = _batch(jar, tmp_path / "regression", [(reg.to_json(), x, seg)])[0]
    assert not isinstance(got, str), got
    assert_bits_equal(got, reg.predict(x, seg), "shrinkage regression")
    # and the ninth round's parameters: a common within-segment slope (stored as the segments'
    # slopes) and a test of the segment effect
    within = _fit("platt", seed=4, tau="plugin", shared_slope="within",
                  heterogeneity_alpha=0.05)
    assert within.common_slope_ != 1.0 and not within.no_effect_detected_
    (tmp_path / "within").mkdir()
    got = _batch(jar, tmp_path / "within", [(within.to_json(), x, seg)])[0]
    assert not isinstance(got, str), got
    assert_bits_equal(got, within.predict(x, seg), "shared slope within")
    # the eleventh round's test of the slopes: a document carrying slope_alpha loads too
    sloped = _fit("platt", seed=4, tau="plugin", min_rows_for_slope=2, slope_alpha=0.5)
    assert sloped.slope_pvalue_ is not None
    (tmp_path / "slope-alpha").mkdir()
    got = _batch(jar, tmp_path / "slope-alpha", [(sloped.to_json(), x, seg)])[0]
    assert not isinstance(got, str), got
    assert_bits_equal(got, sloped.predict(x, seg), "slope_alpha")


def test_command_line_reads_csv_and_json_lines_by_column_name(jar, tmp_path):
    cal = _fit("beta", seed=6)
    rng = np.random.default_rng(8)
    x = _edge_scores(rng, 60)
    seg = _segments(rng, 60)
    path = mlcal.save_calibrator(cal, tmp_path / "seg.json")
    expected = cal.predict(x, seg).view(np.uint64).tolist()
    (tmp_path / "rows.jsonl").write_text(_jsonl(x, seg), encoding="utf-8")
    proc = java(jar, path, tmp_path / "rows.jsonl", "--input", "jsonl", "--output", "hex")
    assert proc.returncode == 0, proc.stderr
    assert [int(h, 16) for h in proc.stdout.split()] == expected
    # CSV: columns in another order plus an ignored one, the score under another name,
    # RFC 4180 quoting, an empty field for a missing value
    frame = seg.assign(extra="z", p=[repr(float(v)) for v in x])[
        ["flag", "p", "extra", "country", "tier"]]
    frame.to_csv(tmp_path / "rows.csv", index=False)
    assert '"' in (tmp_path / "rows.csv").read_text(encoding="utf-8")   # the quoted key
    proc = java(jar, path, tmp_path / "rows.csv", "--input", "csv", "--score-column", "p",
                "--output", "hex")
    assert proc.returncode == 0, proc.stderr
    assert [int(h, 16) for h in proc.stdout.split()] == expected
    # a segmented calibrator needs named columns; a plain one refuses them
    proc = java(jar, path, tmp_path / "rows.jsonl")
    assert proc.returncode == 1 and "--input csv or --input jsonl" in proc.stderr
    (tmp_path / "bad.csv").write_text("score,country,tier,flag\n0.5,FR,one,true\n")
    proc = java(jar, path, tmp_path / "bad.csv", "--input", "csv")
    assert proc.returncode == 1 and "SegmentKeyException" in proc.stderr \
        and "'one' is not a integer" in proc.stderr
