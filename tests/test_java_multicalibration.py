"""The multicalibration map in the Java evaluator (``jvm/``): predictions bit-identical to
Python's ``Multicalibration.predict`` on fitted maps (numeric and categorical features, several
early-stopped trees) at every routing edge (scores and features exactly at the thresholds and
their neighbouring doubles, unseen categories, scores 0 and 1, extreme features); categorical
values read as Python's ``str`` writes them (floats by their shortest repr); the documents
Python refuses refused; the command line reading feature columns from JSON lines and CSV."""

from __future__ import annotations

import copy
import json
import subprocess
from csv import QUOTE_NONNUMERIC

import numpy as np
import pandas as pd
import pytest

import mlcal
from mlcal.maps import BETA_EPS
from mlcal.multicalibration import Multicalibration, MulticalibrationMap
from mlcal.multicalibration.map import FeatureSpec, Tree
from tests.test_java_evaluator import _python_rejects, assert_bits_equal, java

REGIONS = np.array(["north", "south", "east", "west", "é\u00fc \"q\", x"], dtype=object)
FEATURES = ("region", "age", "tier", "flag", "income")


def _frame(rng, n):
    """Two numeric and three categorical features (text, integers, booleans)."""
    return pd.DataFrame({"region": REGIONS[rng.integers(0, 5, n)],
                         "age": rng.normal(size=n),
                         "tier": rng.integers(0, 4, n).astype(object),
                         "flag": (rng.random(n) < 0.4).astype(object),
                         "income": rng.lognormal(0.0, 1.0, n)})


def _fit(seed, n=6000):
    """Scores miscalibrated by shifts in log-odds that depend on every feature; early stopping
    on held-out log loss chooses the number of trees."""
    rng = np.random.default_rng(seed)
    frame = _frame(rng, n)
    t = rng.normal(scale=1.5, size=n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-t))).astype(float)
    region_shift = {"north": 0.0, "south": 0.8, "east": -0.8, "west": 0.3, REGIONS[4]: -0.4}
    shift = (frame["region"].map(region_shift).to_numpy(float)
             + 0.6 * (frame["age"].to_numpy() > 0.8) + 0.5 * (frame["tier"] == 2).to_numpy()
             - 0.4 * frame["flag"].to_numpy(bool) + 0.3 * np.log(frame["income"].to_numpy()))
    s = 1.0 / (1.0 + np.exp(-(t + shift)))
    cal = Multicalibration(max_iter=400, learning_rate=0.3, max_depth=3, n_iter_no_change=4,
                           min_hessian_leaf=5.0, random_state=seed).fit(s, y, frame)
    return cal


def _thresholds(m: MulticalibrationMap) -> dict[int, np.ndarray]:
    """Per numeric feature index (0 is the score), every threshold the trees compare with."""
    out: dict[int, list[float]] = {}
    for tree in m.trees:
        for k, f in enumerate(tree.feature):
            if f >= 0 and m.features[f].kind != "categorical":
                out.setdefault(int(f), []).append(float(tree.threshold[k]))
    return {f: np.unique(v) for f, v in out.items()}


def _probe(m: MulticalibrationMap, rng, n_random=500):
    """Random rows (some with unseen categories, some typed differently), then rows putting
    each numeric feature exactly at each threshold, just below and just above it (neighbouring
    doubles, the rest of the row shared), then fixed edge scores and extreme feature values.
    Returns the scores, the frame and the edge blocks ``(start, n_thresholds)``."""
    frame = _frame(rng, n_random)
    s = rng.random(n_random)
    rows = rng.choice(n_random, n_random // 4, replace=False)
    frame.loc[rows[0::6], "region"] = "unseen"
    frame.loc[rows[1::6], "tier"] = 7                                   # unseen integer
    frame.loc[rows[2::6], "tier"] = "2"                                 # str(2): code of 2
    frame.loc[rows[3::6], "tier"] = 2.0                                 # "2.0": other
    frame.loc[rows[4::6], "flag"] = "True"                              # str(True)
    frame.loc[rows[5::6], "region"] = "?"                               # unseen text
    names = [f.name for f in m.features]
    parts_s, parts_f, blocks, start = [s], [frame], [], n_random
    for f, thr in _thresholds(m).items():
        values = np.concatenate([thr, np.nextafter(thr, -np.inf), np.nextafter(thr, np.inf)])
        edge = pd.concat([_frame(rng, thr.size)] * 3, ignore_index=True)
        if f == 0:
            parts_s.append(np.clip(values, 0.0, 1.0))
        else:
            edge[names[f]] = values
            parts_s.append(np.tile(rng.random(thr.size), 3))
        parts_f.append(edge)
        blocks.append((start, thr.size))
        start += values.size
    fixed_s = np.array([0.0, 1.0, -0.0, 5e-324, BETA_EPS, np.nextafter(BETA_EPS, 0),
                        np.nextafter(BETA_EPS, 1), 1 - BETA_EPS, np.nextafter(1 - BETA_EPS, 0),
                        np.nextafter(1.0, 0), 0.5, 1e-300, 2.0 ** -60])
    extreme = [1.7976931348623157e308, -1.7976931348623157e308, 5e-324, -5e-324, -0.0, 0.0,
               1e300, -1e300, 2.2250738585072014e-308]
    fixed_f = _frame(rng, fixed_s.size)
    fixed_f["age"] = np.resize(extreme, fixed_s.size)
    fixed_f["income"] = np.resize(extreme[::-1], fixed_s.size)
    parts_s.append(fixed_s)
    parts_f.append(fixed_f)
    frame = pd.concat(parts_f, ignore_index=True)
    for c in ("region", "tier", "flag"):
        frame[c] = frame[c].astype(object)
    for c in ("age", "income"):
        frame[c] = frame[c].astype(float)
    return np.concatenate(parts_s), frame, blocks


def _value(v):
    return v.item() if hasattr(v, "item") else v


def _jsonl(scores, frame) -> str:
    cols = list(frame.columns)
    data = [frame[c].tolist() for c in cols]
    rows = []
    for i, x in enumerate(scores.tolist()):
        row = {"score": x}
        for c, col in zip(cols, data):
            v = _value(col[i])
            row[c] = None if isinstance(v, float) and v != v else v
        rows.append(json.dumps(row, allow_nan=False))
    return "\n".join(rows) + "\n"


def _batch(jar, tmp_path, cases):
    """Score (document text, scores, frame) cases in one JVM (the batch mode reads a
    multicalibration calibrator's rows as JSON lines); each result is the float64 output or
    the error text."""
    lines = []
    for i, (doc, scores, frame) in enumerate(cases):
        (tmp_path / f"c{i}.json").write_text(doc if isinstance(doc, str) else json.dumps(doc),
                                             encoding="utf-8")
        (tmp_path / f"r{i}.jsonl").write_text(_jsonl(scores, frame), encoding="utf-8")
        lines.append(f"{tmp_path / f'c{i}.json'}\t{tmp_path / f'r{i}.jsonl'}\t"
                     f"{tmp_path / f'o{i}.bin'}")
    (tmp_path / "jobs.txt").write_text("\n".join(lines) + "\n")
    proc = java(jar, "--batch", tmp_path / "jobs.txt")
    assert proc.returncode == 0, proc.stderr
    out = []
    for i in range(len(cases)):
        err = tmp_path / f"o{i}.bin.err"
        out.append(err.read_text() if err.exists()
                   else np.fromfile(tmp_path / f"o{i}.bin", dtype="<f8"))
    return out


def test_fitted_maps_are_bit_identical_at_every_routing_edge(jar, tmp_path):
    cases, expected, names, crossings = [], [], [], 0
    for seed in (1, 2, 3):
        cal = _fit(seed)
        m = cal.map_
        assert 2 <= cal.n_iter_ < 400, cal.n_iter_   # several trees, early-stopped
        kinds = {f.kind for f in m.features}
        assert kinds == {"score", "numeric", "categorical"}
        used = {int(f) for t in m.trees for f in t.feature if f >= 0}
        assert len(used) >= 4, used   # the trees split on the score and several features
        rng = np.random.default_rng(100 + seed)
        s, frame, blocks = _probe(m, rng)
        assert s.size >= 500
        p = cal.predict(s, frame)
        # the threshold rows matter: a row at a threshold and the same row one double above
        # it often route differently
        for start, k in blocks:
            crossings += int((p[start:start + k] != p[start + 2 * k:start + 3 * k]).sum())
        cases.append((cal.to_json(), s, frame))
        expected.append(p)
        names.append(f"seed {seed}: {cal.n_iter_} trees, {m.size} nodes, {s.size} rows")
    assert crossings >= 30, crossings
    results = _batch(jar, tmp_path, cases)
    for got, py, name in zip(results, expected, names):
        assert_bits_equal(got, py, name)


def _float_category_map(floats):
    """A map whose categorical feature's categories are Python reprs of floats: tree 1 sends the
    even codes left, tree 2 every known code (so any misread value changes the output)."""
    cats = [repr(float(v)) for v in floats]
    k = len(cats)
    feats = (FeatureSpec("score", "score"), FeatureSpec("v", "categorical", tuple(cats)))

    def tree(codes, lo, hi):
        return Tree(np.array([1, -1, -1]), np.zeros(3), (tuple(codes), (), ()),
                    np.array([1, -1, -1]), np.array([2, -1, -1]), np.array([0.0, lo, hi]))
    m = MulticalibrationMap(1.0, 0.0, feats, (tree(range(0, k, 2), 0.5, -0.5),
                                              tree(range(k), 0.25, -0.25)))
    return MulticalibrationMap.from_dict(m.to_dict())


def _special_floats(rng):
    powers = 2.0 ** np.arange(-1074, 1024, 7)
    return np.concatenate([
        [0.1, 0.2, 0.30000000000000004, 1.0, 3.0, 1e-4, 1e-5, 9.999999999999999e-05,
         1e15, 1e16, 1e17, 123456789012345680.0, 1234567890123456.0, 5e-324,
         1.7976931348623157e308, 2.2250738585072014e-308, 0.5, 100.0, 1e22, 1e23,
         9007199254740993.0, 4.35, 2.675, -0.0, -1.5, -1e-7],
        powers, -powers[::5], np.nextafter(powers, np.inf), np.nextafter(powers, 0),
        rng.normal(size=300) * 10.0 ** rng.integers(-320, 300, 300),
        rng.random(200), np.round(rng.random(200) * 1000, 2)])


def test_float_categories_are_read_as_python_repr(jar, tmp_path):
    rng = np.random.default_rng(9)
    floats = np.unique(_special_floats(rng))
    known, unknown = floats[0::2], floats[1::2]
    m = _float_category_map(known)
    doc = {"format": "mlcal-calibrator", "format_version": 1, "mlcal_version": "0.1.0",
           "method": "multicalibration", "params": {}, "map": m.to_dict()}
    with np.errstate(over="ignore"):   # the largest double's neighbour is inf: dropped
        above = np.nextafter(known, np.inf)
    values = np.concatenate([known, unknown, above[np.isfinite(above)]]).astype(object)
    # integers and booleans in the same column: "3" and "True" are not the floats' texts
    values = np.concatenate([values, np.array([3, 0, True, False, -7, 10 ** 20], dtype=object)])
    s = rng.random(values.size)
    frame = pd.DataFrame({"v": values})
    p = mlcal.load_calibrator(doc).predict(s, frame)
    got = _batch(jar, tmp_path, [(doc, s, frame)])[0]
    assert_bits_equal(got, p, "float categories")
    # independently: known float i (code i) goes left in tree 2 and, for even i, in tree 1;
    # every other value (unknown floats, their neighbours, integers, booleans) takes "other"
    shift = np.full(values.size, -0.75)
    shift[:known.size] = np.where(np.arange(known.size) % 2 == 0, 0.75, -0.25)
    sc = np.clip(s, BETA_EPS, 1 - BETA_EPS)
    np.testing.assert_allclose(got, 1.0 / (1.0 + np.exp(-(np.log(sc) - np.log1p(-sc) + shift))),
                               rtol=1e-13, atol=0)
    texts = [repr(float(v)) for v in known]
    assert any("e-" in t for t in texts) and any("e+" in t for t in texts) and known.size > 500


def _doc(seed=13):
    rng = np.random.default_rng(seed)
    n = 3000
    frame = _frame(rng, n)
    s = rng.uniform(0.02, 0.98, n)
    y = (rng.random(n) < np.clip(s + 0.2 * (frame["region"] == "east").to_numpy(), 0, 1)
         ).astype(float)
    return json.loads(Multicalibration(max_iter=5, validation_fraction=None, max_depth=3,
                                       min_hessian_leaf=5.0).fit(s, y, frame).to_json())


def _node(doc, pick):
    """(tree, node index) of the first internal node whose feature satisfies ``pick``."""
    feats = doc["map"]["features"]
    for t in doc["map"]["trees"]:
        for k, f in enumerate(t["feature"]):
            if f >= 0 and pick(feats[f]):
                return t, k
    raise AssertionError("no such node")


def _cat(doc):
    return _node(doc, lambda f: f["kind"] == "categorical")


def _num(doc):
    return _node(doc, lambda f: f["kind"] != "categorical")


def _set(seq, i, v):
    seq[i] = v


def _two_parents(d):
    """Internal nodes a < b with left[a] > b: b's left child becomes a's (a node with two
    parents, one with none), every child still after its parent."""
    t = next(t for t in d["map"]["trees"] if sum(f >= 0 for f in t["feature"]) >= 3)
    internal = [k for k, f in enumerate(t["feature"]) if f >= 0]
    a, b = next((a, b) for a in internal for b in internal if a < b < t["left"][a])
    t["left"][b] = t["left"][a]


def _cycle(d):
    t = d["map"]["trees"][0]
    k = [k for k, f in enumerate(t["feature"]) if f >= 0][1]
    t["left"][k] = 0


def _leaf(d):
    t = d["map"]["trees"][0]
    return t, t["feature"].index(-1)


LEAF_TREE = {"feature": [-1], "threshold": [0.0], "category_set": [[]], "left": [-1],
             "right": [-1], "value": [0.125]}

TAMPERED = {
    "root's left child itself": (lambda d: _set(d["map"]["trees"][0]["left"], 0, 0),
                                 "after their parent"),
    "a child before its parent (cycle)": (_cycle, "after their parent"),
    "two parents": (_two_parents, "exactly one parent"),
    "split feature out of range": (lambda d: _set(d["map"]["trees"][0]["feature"], 0, 9),
                                   "not one of the"),
    "split feature -2": (lambda d: _set(d["map"]["trees"][0]["feature"], 0, -2),
                         "not one of the"),
    "internal node value": (lambda d: _set(d["map"]["trees"][0]["value"], 0, 1.0),
                            "must have value 0"),
    "same child twice": (lambda d: _set(d["map"]["trees"][0]["right"], 0,
                                        d["map"]["trees"][0]["left"][0]), "two distinct nodes"),
    "a value short": (lambda d: d["map"]["trees"][0]["value"].pop(), "all have"),
    "category_set short": (lambda d: d["map"]["trees"][0]["category_set"].pop(), "all have"),
    "score feature numeric": (lambda d: _set(d["map"]["features"], 0,
                                             {"name": "score", "kind": "numeric"}),
                              "not allowed here"),
    "score feature second": (lambda d: d["map"]["features"][1].update(kind="score"),
                             "not allowed here"),
    "feature kind ordinal": (lambda d: d["map"]["features"][2].update(kind="ordinal"),
                             "not allowed here"),
    "duplicate categories": (lambda d: d["map"]["features"][1].update(categories=["a", "a"]),
                             "distinct strings"),
    "integer category": (lambda d: d["map"]["features"][1]["categories"].append(5),
                         "distinct strings"),
    "categories on a numeric feature": (lambda d: d["map"]["features"][2].update(
        categories=["x"]), "has no categories"),
    "feature name repeated": (lambda d: d["map"]["features"][2].update(name="region"),
                              "name must be a new non-empty string"),
    "feature name too long": (lambda d: d["map"]["features"][2].update(name="é" * 257),
                              "name must be a new non-empty string"),
    "feature extra field": (lambda d: d["map"]["features"][2].update(weight=1),
                            "must be an object with name, kind"),
    "no features": (lambda d: d["map"].update(features=[]), "'features' must be a list of 1"),
    "slope a string": (lambda d: d["map"].update(slope="1"), "finite number"),
    "slope a boolean": (lambda d: d["map"].update(slope=True), "finite number"),
    "intercept missing": (lambda d: d["map"].pop("intercept"), "'intercept' must be a finite"),
    "unknown map field": (lambda d: d["map"].update(extra=1), "unknown field"),
    "format_version 2": (lambda d: d["map"].update(format_version=2),
                         "unsupported format_version 2"),
    "format_version true": (lambda d: d["map"].update(format_version=True),
                            "unsupported format_version True"),
    "tree without fields": (lambda d: d["map"].update(trees=[{}]), "exactly the fields"),
    "tree extra field": (lambda d: d["map"]["trees"][0].update(depth=3), "exactly the fields"),
    "trees an object": (lambda d: d["map"].update(trees={}), "'trees' must be a list"),
    "too many trees": (lambda d: d["map"].update(trees=[LEAF_TREE] * 10_001),
                       "at most 10000 trees"),
    "empty tree": (lambda d: d["map"]["trees"][0].update(feature=[]), "1 to 65536 nodes"),
    "too many nodes": (lambda d: d["map"]["trees"][0].update(feature=[-1] * 65_537),
                       "1 to 65536 nodes"),
    "float child index": (lambda d: _set(d["map"]["trees"][0]["left"], 0, 1.0),
                          "'left' must be a list of integers"),
    "boolean feature index": (lambda d: _set(d["map"]["trees"][0]["feature"], 0, True),
                              "'feature' must be a list of integers"),
    "huge child index": (lambda d: _set(d["map"]["trees"][0]["right"], 0, 10 ** 30),
                         "out-of-range index"),
    "threshold a string": (lambda d: _set(d["map"]["trees"][0]["threshold"], 0, "0.5"),
                           "'threshold' must be a list of numbers"),
    "value a boolean": (lambda d: _set(d["map"]["trees"][0]["value"], -1, False),
                        "'value' must be a list of numbers"),
    "category_set of numbers": (lambda d: d["map"]["trees"][0].update(
        category_set=[0] * len(d["map"]["trees"][0]["feature"])), "list of lists"),
    "category code out of range": (lambda d: (lambda t, k: _set(t["category_set"], k, [99]))(
        *_cat(d)), "codes in [0,"),
    "category codes repeat": (lambda d: (lambda t, k: _set(t["category_set"], k, [0, 0]))(
        *_cat(d)), "increasing set of codes"),
    "category code negative": (lambda d: (lambda t, k: _set(t["category_set"], k, [-1]))(
        *_cat(d)), "increasing set of codes"),
    "category code a float": (lambda d: (lambda t, k: _set(t["category_set"], k, [0.0]))(
        *_cat(d)), "increasing set of codes"),
    "empty category set": (lambda d: (lambda t, k: _set(t["category_set"], k, []))(
        *_cat(d)), "increasing set of codes"),
    "categorical node threshold": (lambda d: (lambda t, k: _set(t["threshold"], k, 0.5))(
        *_cat(d)), "needs threshold 0"),
    "numeric node with a set": (lambda d: (lambda t, k: _set(t["category_set"], k, [0]))(
        *_num(d)), "has a category set"),
    "leaf with a threshold": (lambda d: (lambda t, k: _set(t["threshold"], k, 0.5))(*_leaf(d)),
                              "must have left = right = -1"),
    "leaf with a child": (lambda d: (lambda t, k: _set(t["left"], k, k + 1))(*_leaf(d)),
                          "must have left = right = -1"),
    "map of another type": (lambda d: d["map"].update(type="step"),
                            "holds a 'multicalibration' map"),
    "unknown top-level field": (lambda d: d.update(fit_info={}), "unknown top-level field"),
    "unknown parameter": (lambda d: d["params"].update(colour="red"), "has no parameter"),
    "parameter out of range": (lambda d: d["params"].update(max_depth=0), "max_depth"),
    "parameter mistyped": (lambda d: d["params"].update(refit="yes"), "refit"),
}


def _python_message(text: str) -> str:
    with pytest.raises(mlcal.CalibratorFormatError) as info:
        mlcal.load_calibrator(text)
    return str(info.value)


def test_tampered_documents_python_refuses_java_refuses(jar, tmp_path):
    base = _doc()
    assert [f["kind"] for f in base["map"]["features"]] == \
        ["score", "categorical", "numeric", "categorical", "categorical", "numeric"]
    texts, phrases = {}, {}
    for name, (change, phrase) in TAMPERED.items():
        d = copy.deepcopy(base)
        change(d)
        texts[name], phrases[name] = json.dumps(d), phrase
    # room in the element budget (16 bytes a container) for 10001 trees: trailing blanks
    texts["too many trees"] += " " * (2 << 20)
    good = json.dumps(base)
    texts["huge float threshold"] = good.replace('"threshold": [', '"threshold": [1e400, ', 1)
    texts["duplicate JSON key"] = good.replace('"slope": ', '"slope": 1.0, "slope": ', 1)
    platt = json.loads(mlcal.get_calibrator("platt").fit([0.1, 0.4, 0.6, 0.9],
                                                         [0, 0, 1, 1]).to_json())
    texts["a platt document holding it"] = json.dumps({**platt, "map": base["map"]})
    texts["bare multicalibration map"] = json.dumps(base["map"])
    phrases.update({"huge float threshold": None, "duplicate JSON key": "duplicate key 'slope'",
                    "a platt document holding it": "unknown map type 'multicalibration'",
                    "bare multicalibration map": "unknown map type 'multicalibration'"})
    assert len(texts) >= 50
    s = np.array([0.5])
    frame = pd.DataFrame({"region": ["north"], "age": [0.0], "tier": [1], "flag": [True],
                          "income": [1.0]})
    results = _batch(jar, tmp_path, [(t, s, frame) for t in texts.values()])
    for (name, text), got in zip(texts.items(), results):
        assert _python_rejects(text), f"{name}: Python accepts the document"
        assert isinstance(got, str) and got.startswith("MapFormatException: "), (name, got)
        phrase = phrases[name]
        if phrase is not None:
            assert phrase in got, (name, got)
            if name != "bare multicalibration map":   # Python: not a calibrator document
                assert phrase in _python_message(text), (name, _python_message(text))
    # and the untampered document loads and scores in both
    (tmp_path / "ok").mkdir()
    got = _batch(jar, tmp_path / "ok", [(good, s, frame)])[0]
    assert_bits_equal(got, mlcal.load_calibrator(good).predict(s, frame), "untampered")


def test_command_line_reads_features_from_csv_and_json_lines(jar, tmp_path):
    cal = _fit(4, n=4000)
    rng = np.random.default_rng(8)
    s, frame, _ = _probe(cal.map_, rng, n_random=80)
    frame = frame.iloc[:200].copy()
    s = s[:200]
    path = mlcal.save_calibrator(cal, tmp_path / "mc.json")
    expected = cal.predict(s, frame).view(np.uint64).tolist()
    (tmp_path / "rows.jsonl").write_text(_jsonl(s, frame), encoding="utf-8")
    proc = java(jar, path, tmp_path / "rows.jsonl", "--input", "jsonl", "--output", "hex")
    assert proc.returncode == 0, proc.stderr
    assert [int(h, 16) for h in proc.stdout.split()] == expected
    # CSV: another column order, an ignored column, the score under another name, quoted
    # text; categorical fields are read as their text, numeric fields as decimal numbers
    csv = frame.assign(extra="z", p=[repr(float(v)) for v in s],
                       age=[repr(float(v)) for v in frame["age"]],
                       income=[repr(float(v)) for v in frame["income"]])[
        ["flag", "income", "p", "extra", "region", "tier", "age"]]
    csv.to_csv(tmp_path / "rows.csv", index=False, quoting=QUOTE_NONNUMERIC)
    assert '"' in (tmp_path / "rows.csv").read_text(encoding="utf-8")
    proc = java(jar, path, tmp_path / "rows.csv", "--input", "csv", "--score-column", "p",
                "--output", "hex")
    assert proc.returncode == 0, proc.stderr
    assert [int(h, 16) for h in proc.stdout.split()] == expected
    # what Python refuses, Java refuses with the same reason
    bad = {
        "missing categorical value": (frame.assign(region=[None] + list(frame["region"][1:])),
                                      s, "InvalidFeaturesException", "missing values"),
        "missing numeric value": (frame.assign(age=[None] + list(frame["age"][1:])), s,
                                  "InvalidFeaturesException", "'age' has 1 non-finite"),
        "score above 1": (frame, np.r_[1.5, s[1:]], "InvalidScoresException",
                          "probabilities in [0, 1]"),
        "score below 0": (frame, np.r_[-1e-300, s[1:]], "InvalidScoresException",
                          "probabilities in [0, 1]"),
    }
    for name, (f, x, exc, phrase) in bad.items():
        with pytest.raises(ValueError, match=phrase.replace("[", "\\[").replace("]", "\\]")):
            cal.predict(x, f.astype({"age": object}) if "numeric" in name else f)
        (tmp_path / "bad.jsonl").write_text(_jsonl(x, f), encoding="utf-8")
        proc = java(jar, path, tmp_path / "bad.jsonl", "--input", "jsonl")
        assert proc.returncode == 1 and exc in proc.stderr and phrase in proc.stderr, \
            (name, proc.stderr)
    (tmp_path / "short.csv").write_text("score,region,tier,flag,income\n0.5,north,1,True,2.0\n")
    proc = java(jar, path, tmp_path / "short.csv", "--input", "csv")
    assert proc.returncode == 1 and "InvalidFeaturesException" in proc.stderr \
        and "'age' is missing from the CSV header" in proc.stderr
    (tmp_path / "nan.csv").write_text("score,region,tier,flag,income,age\n"
                                      "0.5,north,1,True,2.0,NaN\n")
    proc = java(jar, path, tmp_path / "nan.csv", "--input", "csv")
    assert proc.returncode == 1 and "'NaN' is not a number" in proc.stderr
    # rows with named columns only
    proc = java(jar, path, "-", stdin="0.5\n")
    assert proc.returncode == 1 and "--input csv or --input jsonl" in proc.stderr


def test_a_map_of_the_score_alone_reads_plain_scores(jar, tmp_path):
    rng = np.random.default_rng(31)
    n = 5000
    s = rng.random(n)
    y = (rng.random(n) < s ** 1.6).astype(float)
    cal = Multicalibration(max_iter=30, validation_fraction=None, max_depth=2).fit(s, y)
    assert cal.map_.feature_names == [] and len(cal.map_.trees) >= 2
    path = mlcal.save_calibrator(cal, tmp_path / "score-only.json")
    x = np.concatenate([[0.0, 1.0, 5e-324], _thresholds(cal.map_)[0],
                        np.nextafter(_thresholds(cal.map_)[0], 0), rng.random(300)])
    proc = java(jar, path, "-", "--output", "hex", stdin="\n".join(map(repr, x.tolist())))
    assert proc.returncode == 0, proc.stderr
    assert [int(h, 16) for h in proc.stdout.split()] == cal.predict(x).view(np.uint64).tolist()
    proc = java(jar, path, "-", stdin="1.5\n")
    assert proc.returncode == 1 and "probabilities in [0, 1]" in proc.stderr


HARNESS = r"""
import io.mlcal.Calibrator;
import java.math.BigInteger;
import java.nio.file.Path;

public class Harness {
    static String hex(double v) {
        return Long.toHexString(Double.doubleToRawLongBits(v));
    }

    static void attempt(String name, Runnable r) {
        try {
            r.run();
            System.out.println(name + " ok");
        } catch (RuntimeException e) {
            System.out.println(name + " " + e.getClass().getSimpleName() + ": " + e.getMessage());
        }
    }

    public static void main(String[] args) {
        Calibrator cal = Calibrator.load(Path.of(args[0]));
        System.out.println(String.join(",", cal.columnNames()));
        double[] s = {0.3, 0.0, 1.0, 0.77, 5e-324};
        Object[][] cols = {
            {"north", "east", "west", "south", "x"},
            {0.5, -1, true, 0.1, 2.5f},
            {2L, 2, new BigInteger("2"), 2.0, new BigInteger("100000000000000000000")},
            {true, false, "False", "True", true},
            {1, 3.5f, BigInteger.ONE.shiftLeft(70), 1e16, (short) 7}};
        double[] p = cal.predict(s, cols);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < s.length; i++) {
            Object[] row = new Object[cols.length];
            for (int j = 0; j < cols.length; j++) {
                row[j] = cols[j][i];
            }
            sb.append(hex(p[i])).append(i + 1 < s.length ? "," : "");
            if (cal.predict(s[i], row) != p[i]) {
                throw new AssertionError("row " + i + ": one-row predict differs");
            }
        }
        System.out.println(sb);
        attempt("string-in-numeric", () -> cal.predict(0.5, "north", "1.5", 2L, true, 1.0));
        attempt("null-category", () -> cal.predict(0.5, null, 0.5, 2L, true, 1.0));
        attempt("nan-numeric", () -> cal.predict(0.5, "north", 0.5, 2L, true, Double.NaN));
        attempt("four-columns", () -> cal.predict(0.5, "north", 0.5, 2L, true));
        attempt("score-above-1", () -> cal.predict(1.5, "north", 0.5, 2L, true, 1.0));
        attempt("score-nan", () -> cal.predict(Double.NaN, "north", 0.5, 2L, true, 1.0));
        attempt("score-only-call", () -> cal.predict(0.5));
    }
}
"""


def test_java_api_reads_typed_values_as_python_does(jar, tmp_path):
    """The library call with Java-typed values (Long, Integer, Short, BigInteger, Float,
    Double, Boolean, String) equals Python's predict on the same Python values, row by row and
    as a batch; bad values throw where Python raises."""
    doc = _doc(seed=17)
    cal = mlcal.load_calibrator(json.dumps(doc))
    (tmp_path / "mc.json").write_text(json.dumps(doc))
    (tmp_path / "Harness.java").write_text(HARNESS)
    # single-file source launch: the harness is compiled in memory against the jar
    proc = subprocess.run(["java", "-cp", str(jar), str(tmp_path / "Harness.java"),
                           str(tmp_path / "mc.json")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == ",".join(FEATURES)
    frame = pd.DataFrame({
        "region": np.array(["north", "east", "west", "south", "x"], dtype=object),
        "age": np.array([0.5, -1, True, 0.1, 2.5], dtype=object),
        "tier": np.array([2, 2, 2, 2.0, 10 ** 20], dtype=object),
        "flag": np.array([True, False, "False", "True", True], dtype=object),
        "income": np.array([1, 3.5, 2 ** 70, 1e16, 7], dtype=object)})
    s = np.array([0.3, 0.0, 1.0, 0.77, 5e-324])
    p = cal.predict(s, frame)
    assert [int(h, 16) for h in lines[1].split(",")] == p.view(np.uint64).tolist()
    # the typed values matter: 2, "2" and BigInteger 2 share a code, 2.0 and 10**20 take
    # "other"; "False" is the code of False
    x = cal.map_.feature_matrix(s, frame)
    tier = cal.map_.features[3]
    assert tier.name == "tier" and x[0, 3] == x[1, 3] == x[2, 3] == tier.categories.index("2")
    assert x[3, 3] == x[4, 3] == len(tier.categories)
    assert x[1, 4] == x[2, 4] != x[0, 4]
    results = dict(line.split(" ", 1) for line in lines[2:])
    assert results["string-in-numeric"].startswith("InvalidFeaturesException: numeric "
                                                   "feature 'age' is not numeric")
    python_refuses = {
        "null-category": (frame.assign(region=[None] * 5), "missing values"),
        "nan-numeric": (frame.assign(income=[np.nan] * 5), "non-finite"),
        "four-columns": (frame.drop(columns="income"), None),
    }
    for name, (f, phrase) in python_refuses.items():
        with pytest.raises(ValueError):
            cal.predict(s, f)
        assert results[name].startswith("InvalidFeaturesException: "), results[name]
        assert phrase is None or phrase in results[name], results[name]
    for name, x in (("score-above-1", 1.5), ("score-nan", np.nan)):
        with pytest.raises(ValueError):
            cal.predict(np.full(5, x), frame)
        assert results[name].startswith("InvalidScoresException: "), results[name]
    assert results["score-only-call"].startswith("IllegalStateException: "), results


def test_mlcal_evaluate_scores_a_score_only_map_and_names_missing_features(tmp_path, capsys):
    """The command line the hostile corpus runs on every valid document: a multicalibration map
    of the score alone is evaluated; one with features names the columns it lacks."""
    from mlcal.cli import main

    rng = np.random.default_rng(41)
    n = 3000
    s = rng.random(n)
    y = (rng.random(n) < s ** 1.4).astype(int)
    pd.DataFrame({"score": s, "y": y}).to_csv(tmp_path / "data.csv", index=False)
    score_only = Multicalibration(max_iter=5, validation_fraction=None).fit(s, y)
    mlcal.save_calibrator(score_only, tmp_path / "a.json")
    assert main(["evaluate", "--calibrator", str(tmp_path / "a.json"), "--data",
                 str(tmp_path / "data.csv")]) == 0
    assert "multicalibration map" in capsys.readouterr().out
    with_features = Multicalibration(max_iter=5, validation_fraction=None).fit(
        s, y, {"g": rng.choice(["a", "b"], n)})
    mlcal.save_calibrator(with_features, tmp_path / "b.json")
    assert main(["evaluate", "--calibrator", str(tmp_path / "b.json"), "--data",
                 str(tmp_path / "data.csv")]) == 2
    assert "missing column(s) ['g']" in capsys.readouterr().err
