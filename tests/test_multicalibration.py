"""Multicalibration (#30 item 2): the tree learner against brute force, the Newton leaf value by
hand, segment miscalibration corrected on simulated data, early stopping, weights as
duplication, the JSON map (round trip, tampered documents refused)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from mlcal.calibrators.base import CalibratorFormatError, load_calibrator
from mlcal.maps import MapFormatError
from mlcal.multicalibration import Multicalibration, MulticalibrationMap
from mlcal.multicalibration._trees import bin_numeric, grow_tree, numeric_cuts


def _segment_data(n: int, seed: int):
    """Scores miscalibrated by a shift in log-odds that depends on a categorical segment and on
    a numeric feature; the true probability is ``expit(t)``."""
    rng = np.random.default_rng(seed)
    seg = rng.integers(0, 4, n)
    age = rng.normal(size=n)
    t = rng.normal(scale=1.5, size=n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-t))).astype(float)
    shift = np.array([0.0, 0.8, -0.8, 0.3])[seg] + 0.6 * (age > 0.8)
    s = 1.0 / (1.0 + np.exp(-(t + shift)))
    frame = pd.DataFrame({"region": np.array(["north", "south", "east", "west"])[seg],
                          "age": age})
    return s, y, frame, seg * 2 + (age > 0.8)


def _gain(g, h, left, lam):
    score = lambda gs, hs: gs * gs / (hs + lam)   # noqa: E731
    return score(g[left].sum(), h[left].sum()) + score(g[~left].sum(), h[~left].sum()) - \
        score(g.sum(), h.sum())


@pytest.mark.parametrize("seed", range(6))
def test_best_split_is_the_exhaustive_best(seed):
    """Every two-way partition the tree may use (each numeric threshold, each subset of the
    categories) is scored by the gain formula; the learner's root split is the best of them."""
    rng = np.random.default_rng(seed)
    n, lam, min_h = 40, 0.0, 0.5   # lam = 0: the sorted-prefix categorical search is exact
    num = [np.round(rng.normal(size=n), 1), rng.integers(0, 6, n).astype(float)]
    cat = rng.integers(0, 5, n)
    g, h = rng.normal(size=n), rng.uniform(0.05, 0.3, n)
    xb = np.empty((n, 3), dtype=np.uint8)
    for j, col in enumerate(num):
        xb[:, j] = bin_numeric(col, numeric_cuts(col, np.ones(n), 255))
    xb[:, 2] = cat
    n_bins = np.array([xb[:, 0].max() + 1, xb[:, 1].max() + 1, 5])
    is_cat = np.array([False, False, True])
    feat, split_bin, cat_left, left, right, value, leaf_of = grow_tree(
        xb, g, h, n_bins, is_cat, 1, lam, min_h, 0.0)

    candidates = []
    for j, col in enumerate(num):
        for thr in np.unique(col)[:-1]:
            candidates.append(col <= thr)
    for k in range(1, 5):
        for subset in itertools.combinations(range(5), k):
            candidates.append(np.isin(cat, subset))
    ok = [m for m in candidates if h[m].sum() >= min_h and h[~m].sum() >= min_h]
    best = max(_gain(g, h, m, lam) for m in ok)
    assert feat[0] >= 0
    went_left = leaf_of == left[0]
    assert _gain(g, h, went_left, lam) == pytest.approx(best, rel=1e-10)
    # the leaves hold the Newton values -G / (H + lam) of their rows
    for leaf in (left[0], right[0]):
        rows = leaf_of == leaf
        assert value[leaf] == pytest.approx(-g[rows].sum() / (h[rows].sum() + lam), rel=1e-12)


def test_newton_leaf_values_by_hand():
    """One depth-1 tree on logit(s): each leaf is learning_rate * -sum w (p - y) / (sum w p (1 -
    p) + lam), with p the score itself (initial='logit')."""
    rng = np.random.default_rng(3)
    n = 400
    s = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < np.where(s > 0.5, 0.9, 0.2)).astype(float)
    w = rng.uniform(0.5, 2.0, n)
    cal = Multicalibration(max_iter=1, max_depth=1, learning_rate=0.3, l2_regularization=2.0,
                           min_hessian_leaf=1.0, initial="logit", validation_fraction=None)
    cal.fit(s, y, sample_weight=w)
    (tree,) = cal.map_.trees
    assert tree.feature.tolist() == [0, -1, -1]
    left = s <= tree.threshold[0]
    p = s
    for leaf, rows in ((1, left), (2, ~left)):
        G = np.sum(w[rows] * (p[rows] - y[rows]))
        H = np.sum(w[rows] * p[rows] * (1 - p[rows]))
        assert tree.value[leaf] == pytest.approx(-0.3 * G / (H + 2.0), rel=1e-9)
    # the threshold is a data value, and no other threshold gains more (brute force)
    assert tree.threshold[0] in set(s.tolist())


def _segment_ece(p, y, groups):
    return max(abs(p[groups == k].mean() - y[groups == k].mean()) for k in np.unique(groups))


def test_corrects_segment_miscalibration_without_losing_global_log_loss():
    from mlcal.calibrators.auto import AutoCalibrator
    from mlcal.metrics import log_loss

    s, y, frame, groups = _segment_data(30_000, seed=1)
    s_te, y_te, frame_te, groups_te = _segment_data(30_000, seed=2)
    glob = AutoCalibrator().fit(s, y)
    multi = Multicalibration().fit(s, y, frame)
    p_glob, p_multi = glob.predict(s_te), multi.predict(s_te, frame_te)
    worst_glob = _segment_ece(p_glob, y_te, groups_te)
    worst_multi = _segment_ece(p_multi, y_te, groups_te)
    assert worst_glob > 0.05            # the global map cannot fix segment shifts
    assert worst_multi < worst_glob / 3
    assert log_loss(y_te, p_multi) <= log_loss(y_te, p_glob)
    assert 0 < multi.n_iter_ < multi.max_iter


def test_early_stopping_stops_at_the_best_held_out_loss():
    """Calibrated scores and a pure-noise feature: nothing to learn, so the held-out loss
    stops improving, fitting stops n_iter_no_change trees after the best, and only the trees
    up to the best are kept."""
    rng = np.random.default_rng(5)
    n = 4000
    s = rng.uniform(0.02, 0.98, n)
    y = (rng.random(n) < s).astype(float)
    noise = rng.normal(size=n)
    cal = Multicalibration(max_iter=500, learning_rate=0.5, min_hessian_leaf=1.0,
                           n_iter_no_change=5).fit(s, y, {"noise": noise})
    losses = cal.validation_loss_
    assert len(losses) < 500
    assert cal.n_iter_ == int(np.argmin(losses))   # argmin: the first of equal minima
    assert len(losses) - 1 - cal.n_iter_ == 5      # stopped 5 trees after the best


def test_weights_equal_duplication():
    s, y, frame, _ = _segment_data(3000, seed=7)
    w = np.random.default_rng(8).integers(1, 3, s.size).astype(float)
    rep = np.repeat(np.arange(s.size), w.astype(int))
    params = dict(max_iter=15, validation_fraction=None, max_bins=32)
    a = Multicalibration(**params).fit(s, y, frame, sample_weight=w).map_
    b = Multicalibration(**params).fit(s[rep], y[rep], frame.iloc[rep]).map_
    assert a.features == b.features and len(a.trees) == len(b.trees) == 15
    for ta, tb in zip(a.trees, b.trees):
        for field in ("feature", "threshold", "left", "right"):
            assert getattr(ta, field).tolist() == getattr(tb, field).tolist()
        assert ta.category_set == tb.category_set
        np.testing.assert_allclose(ta.value, tb.value, rtol=1e-9, atol=1e-15)
    assert a.slope == pytest.approx(b.slope, rel=1e-9)


def test_json_round_trip_scores_bit_identically():
    s, y, frame, _ = _segment_data(5000, seed=11)
    cal = Multicalibration(max_iter=40).fit(s, y, frame)
    back = load_calibrator(cal.to_json())
    assert isinstance(back, Multicalibration) and back.get_params() == cal.get_params()
    assert back.map_ == cal.map_
    s2, _, frame2, _ = _segment_data(2000, seed=12)
    frame2.loc[:5, "region"] = "unseen"   # the "other" code
    np.testing.assert_array_equal(back.predict(s2, frame2).view(np.uint64),
                                  cal.predict(s2, frame2).view(np.uint64))
    # the fitted model's own predictions on its training rows are the map's (same arithmetic)
    assert np.array_equal(cal.predict(s, frame), cal.map_(s, frame))


def _doc():
    s, y, frame, _ = _segment_data(3000, seed=13)
    return json.loads(Multicalibration(max_iter=5, validation_fraction=None).fit(
        s, y, frame).to_json())


def _first_split(tree, kind_of):
    return next(k for k, f in enumerate(tree["feature"]) if f >= 0 and kind_of(f))


@pytest.mark.parametrize("tamper, message", [
    (lambda d: d["map"]["trees"][0]["left"].__setitem__(0, 0), "after their parent"),
    (lambda d: d["map"]["trees"][0]["feature"].__setitem__(0, 9), "not one of the"),
    (lambda d: d["map"]["trees"][0]["value"].__setitem__(0, 1.0), "must have value 0"),
    (lambda d: d["map"]["trees"][0]["right"].__setitem__(0, d["map"]["trees"][0]["left"][0]),
     "two distinct nodes"),
    (lambda d: d["map"]["trees"][0]["value"].pop(), "all have"),
    (lambda d: d["map"]["features"].__setitem__(0, {"name": "score", "kind": "numeric"}),
     "not allowed here"),
    (lambda d: d["map"]["features"][1].__setitem__("categories", ["a", "a"]), "distinct"),
    (lambda d: d["map"].__setitem__("slope", "1"), "finite number"),
    (lambda d: d["map"].__setitem__("extra", 1), "unknown field"),
    (lambda d: d["map"].__setitem__("trees", [{}]), "exactly the fields"),
    (lambda d: d.__setitem__("params", {"max_depth": 0}), "max_depth"),
    (lambda d: d["map"].__setitem__("type", "step"), "holds a 'multicalibration' map"),
])
def test_tampered_documents_are_refused(tamper, message):
    doc = _doc()
    tamper(doc)
    with pytest.raises(CalibratorFormatError, match=message):
        load_calibrator(doc)


def test_tampered_category_sets_and_parents_are_refused():
    doc = _doc()
    cat_index = [f["kind"] for f in doc["map"]["features"]].index("categorical")
    trees = doc["map"]["trees"]
    t, k = next((t, k) for t in trees for k, f in enumerate(t["feature"]) if f == cat_index)
    t["category_set"][k] = [99]
    with pytest.raises(CalibratorFormatError, match="codes in"):
        load_calibrator(doc)
    doc = _doc()
    tree = doc["map"]["trees"][0]
    # a node reached from two parents (a DAG, not a tree): node 1's right child reused
    internal = [k for k, f in enumerate(tree["feature"]) if f >= 0]
    a, b = internal[1], internal[2]
    tree["left"][b] = tree["left"][a]
    with pytest.raises(CalibratorFormatError, match="exactly one parent"):
        load_calibrator(doc)
    with pytest.raises(CalibratorFormatError, match="number"):
        load_calibrator(json.dumps(_doc()).replace('"slope": ', '"slope": 1e400, "x": '))


def test_bad_inputs_are_named():
    s, y, frame, _ = _segment_data(2000, seed=17)
    cal = Multicalibration(max_iter=3).fit(s, y, frame)
    with pytest.raises(ValueError, match="missing column"):
        cal.predict(s, frame[["age"]])
    bad = frame.copy()
    bad.loc[3, "age"] = np.nan
    with pytest.raises(ValueError, match="'age' has 1 non-finite"):
        cal.predict(s, bad)
    with pytest.raises(ValueError, match="probabilities in \\[0, 1\\]"):
        cal.predict(s * 2, frame)
    with pytest.raises(MapFormatError):
        MulticalibrationMap.from_dict({"type": "multicalibration"})


def _walk(tree, row, features):
    """The leaf one row reaches, by a plain Python walk of the tree arrays."""
    k = 0
    while tree.feature[k] >= 0:
        f = int(tree.feature[k])
        v = row[f]
        if features[f].kind == "categorical":
            code = features[f].categories.index(v) if v in features[f].categories else \
                len(features[f].categories)
            k = int(tree.left[k] if code in tree.category_set[k] else tree.right[k])
        else:
            k = int(tree.left[k] if v <= tree.threshold[k] else tree.right[k])
    return k


def test_onnx_graph_routes_exactly_and_agrees_within_the_bound():
    ort = pytest.importorskip("onnxruntime")
    from mlcal.multicalibration.onnx_export import error_bound, to_onnx

    s, y, frame, _ = _segment_data(6000, seed=21)
    cal = Multicalibration(max_iter=60, learning_rate=0.3).fit(s, y, frame)
    m = cal.map_
    # random rows, plus every numeric threshold and its float neighbours (the routing edge)
    rng = np.random.default_rng(22)
    thr = {f: [] for f in range(len(m.features))}
    for tree in m.trees:
        for k, f in enumerate(tree.feature):
            if f >= 0 and m.features[f].kind != "categorical":
                thr[int(f)].append(tree.threshold[k])
    n = 3000
    s2 = rng.uniform(0, 1, n)
    age = rng.normal(size=n)
    edge_s = np.concatenate([np.nextafter(thr[0], -1), thr[0], np.nextafter(thr[0], 2)])
    edge_a = np.concatenate([np.nextafter(thr[2], -np.inf), thr[2],
                             np.nextafter(thr[2], np.inf)]) if thr[2] else np.empty(0)
    s2[:edge_s.size] = np.clip(edge_s, 0, 1)
    age[-edge_a.size:] = edge_a if edge_a.size else age[-1:]
    s2[-3:] = [0.0, 1.0, 2.0 ** -60]
    region = rng.choice(["north", "south", "east", "west", "unseen"], n)
    frame2 = pd.DataFrame({"region": region, "age": age})

    model = to_onnx(cal)
    from mlcal.onnx import to_onnx as general_to_onnx   # the general exporter hands it over
    assert general_to_onnx(load_calibrator(cal.to_json())) == model
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    p, leaves = sess.run(None, {"scores": s2, "region": region.astype(object), "age": age})
    rows = list(zip(s2.tolist(), region.tolist(), age.tolist()))
    expected = np.array([[_walk(t, r, m.features) for t in m.trees] for r in rows])
    np.testing.assert_array_equal(leaves, expected)
    q = cal.predict(s2, frame2)
    bound = error_bound(cal, s2, frame2)
    assert (np.abs(p - q) <= bound).all()
    assert bound.max() < 1e-12



def test_cli_exports_a_saved_multicalibration_document(tmp_path):
    import subprocess
    import sys

    pytest.importorskip("onnx")
    import onnx

    s, y, frame, _ = _segment_data(3000, seed=41)
    cal = Multicalibration(max_iter=4, validation_fraction=None).fit(s, y, frame)
    (tmp_path / "mc.json").write_text(cal.to_json())
    out = tmp_path / "mc.onnx"
    proc = subprocess.run([sys.executable, "-m", "mlcal", "export-onnx", "--calibrator",
                           str(tmp_path / "mc.json"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "region, age" in proc.stdout and "4 trees" in proc.stdout
    from mlcal.multicalibration.onnx_export import to_onnx
    assert onnx.load(str(out)) == to_onnx(cal)


def test_rare_categories_share_the_other_code_and_unfitted_use_is_named():
    from sklearn.exceptions import NotFittedError

    rng = np.random.default_rng(51)
    n = 6000
    s = rng.uniform(0.05, 0.95, n)
    y = (rng.random(n) < s).astype(float)
    city = rng.choice([f"c{k}" for k in range(10)], n, p=[0.3, 0.3, 0.2, 0.1] + [0.1 / 6] * 6)
    cal = Multicalibration(max_iter=5, max_categories=4, validation_fraction=None).fit(
        s, y, {"city": city})
    spec = cal.map_.features[1]
    assert spec.categories == ("c0", "c1", "c2", "c3")   # the four of largest weight
    # a rare training category and a never-seen one take the same code, so the same output
    rare = cal.predict(s[:50], {"city": np.full(50, "c7")})
    unseen = cal.predict(s[:50], {"city": np.full(50, "elsewhere")})
    np.testing.assert_array_equal(rare, unseen)
    with pytest.raises(NotFittedError, match="not fitted"):
        Multicalibration().predict(s, {"city": city})
    with pytest.raises(ValueError, match="validation_fraction"):
        Multicalibration(validation_fraction=0.5).fit(s[:1], y[:1])
