"""auto's temperature anchor (``anchor="beta-temperature"``, the default since issue 26): the
choice against an independent recomputation from hand-fitted out-of-fold predictions, the
guard, ``anchor=None`` (the rule without it), documents (JSON, old documents, the Java
evaluator)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mlcal
from mlcal.calibrators._params import InvalidParameterError
from mlcal.calibrators.auto import EPS, assign_folds
from mlcal.calibrators.base import CalibratorFormatError

ANCHOR = "beta-temperature"
#: the anchor as the rule states it, written out (not taken from auto)
ANCHOR_PARAMS = {"smooth_targets": False, "identity_prior": 300.0,
                 "prior_center": "temperature"}
#: the candidates of the hand recomputation and the parameters auto fits them with
HAND = {"temperature": {"smooth_targets": False}, "platt": {},
        "isotonic": {"bound_smoothing": 0.5}}


def tree_like(n: int, seed: int, bend: float = 0.0):
    """Probability scores of a slightly overconfident model (temperature ~1.3); ``bend``
    adds a non-monotone-in-log-odds distortion that the flexible maps can fit."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 2.0, n)
    truth = z / 1.3 + bend * np.sin(2.0 * z)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-truth))).astype(int)
    return 1.0 / (1.0 + np.exp(-z)), y


def hand_choice(s, y, se_anchor=1.0, se_rule=0.25, k=5, seed=0):
    """The guarded anchor's rule recomputed from scratch: each candidate fitted by hand on
    the folds, per-row out-of-fold log losses, paired SEs (population variance over n), the
    anchor if within ``se_anchor`` SE of the lowest of all, else the first listed candidate
    within ``se_rule`` SE of the lowest among the candidates."""
    folds = np.empty(s.size, dtype=int)
    folds[np.argsort(s)] = assign_folds(s.size, k, seed)
    specs = {ANCHOR: ("beta", ANCHOR_PARAMS), **{n: (n, p) for n, p in HAND.items()}}
    loss = {}
    for name, (method, params) in specs.items():
        p = np.empty(s.size)
        for f in range(k):
            fitted = mlcal.get_calibrator(method, **params).fit(s[folds != f], y[folds != f])
            p[folds == f] = fitted.predict(s[folds == f])
        p = np.clip(p, EPS, 1 - EPS)
        loss[name] = np.where(y == 1, -np.log(p), -np.log(1 - p))

    def first_within(names, m):
        best = min(names, key=lambda n: (loss[n].mean(), names.index(n)))
        for n in names:
            d = loss[n] - loss[best]
            if loss[n].mean() - loss[best].mean() <= m * np.sqrt(d.var() / d.size):
                return n, best

    names = [ANCHOR, *HAND]
    pick, best = first_within(names, se_anchor)
    default, _ = first_within(list(HAND), se_rule)
    return (ANCHOR if pick == ANCHOR else default), default, loss


@pytest.mark.parametrize("seed,bend", [(1, 0.0), (2, 0.0), (3, 0.6), (4, 1.0), (5, 0.3)])
def test_anchor_choice_matches_hand_fitted_out_of_fold_recomputation(seed, bend):
    s, y = tree_like(400, seed, bend)
    cal = mlcal.AutoCalibrator(candidates=list(HAND), anchor=ANCHOR).fit(s, y)
    chosen, default, loss = hand_choice(s, y)
    rows = {r["method"]: r for r in cal.selection_["candidates"]}
    assert [r["method"] for r in cal.selection_["candidates"]] == [ANCHOR, *HAND]
    for name, per_row in loss.items():
        assert rows[name]["cv_log_loss"] == pytest.approx(per_row.mean(), rel=1e-9)
    assert cal.chosen_ == chosen
    info = cal.selection_["anchor"]
    assert info == {"method": ANCHOR, "se_rule": 1.0, "guard": None,
                    "chosen": chosen == ANCHOR, "default_choice": default}
    # the default choice is what auto without the anchor chooses
    plain = mlcal.AutoCalibrator(candidates=list(HAND), anchor=None).fit(s, y)
    assert plain.chosen_ == default
    if chosen != ANCHOR:
        assert cal.map_ == plain.map_


def test_hand_cases_cover_both_outcomes():
    # the parametrised cases above exercise the anchor chosen and passed over
    outcomes = {hand_choice(*tree_like(400, seed, bend))[0] == ANCHOR
                for seed, bend in [(1, 0.0), (2, 0.0), (3, 0.6), (4, 1.0), (5, 0.3)]}
    assert outcomes == {True, False}


def test_chosen_anchor_refits_as_the_stated_beta_and_round_trips():
    s, y = tree_like(1500, 11)
    cal = mlcal.AutoCalibrator(anchor=ANCHOR).fit(s, y)
    assert cal.chosen_ == ANCHOR and cal.selection_["anchor"]["chosen"]
    direct = mlcal.get_calibrator("beta", **ANCHOR_PARAMS).fit(s, y)
    assert cal.map_ == direct.map_ and cal.map_.kind == "beta"
    assert cal.candidate(cal.chosen_).fit(s, y).map_ == direct.map_
    assert cal.selection_["chosen_params"] == ANCHOR_PARAMS
    back = mlcal.load_calibrator(cal.to_json())
    assert back.chosen_ == ANCHOR and back.get_params() == cal.get_params()
    assert back.selection_ == cal.selection_
    x = np.linspace(0.0, 1.0, 1001)
    assert np.array_equal(back.predict(x), cal.predict(x))
    assert back.to_json() == cal.to_json()


@pytest.mark.parametrize("kind", ["margins", "saturated"])
def test_guard_gives_the_default_choice(kind):
    s, y = tree_like(800, 21, 0.3)
    if kind == "margins":
        s = np.log(s / (1 - s))                         # log-odds: outside [0, 1]
        why = "margins"
    else:
        s = s.copy()
        s[np.argmin(s)] = 1e-30                         # one score beyond the default clamp
        why = "saturated"
    plain = mlcal.AutoCalibrator(anchor=None).fit(s, y)
    cal = mlcal.AutoCalibrator().fit(s, y)   # the anchor is the default
    info = cal.selection_.pop("anchor")
    assert info["guard"].startswith(why) and not info["chosen"]
    assert info["default_choice"] == plain.chosen_ == cal.chosen_
    assert ANCHOR not in [r["method"] for r in cal.selection_["candidates"]]
    assert cal.selection_ == plain.selection_ and cal.map_ == plain.map_


def test_no_cross_validation_keeps_the_first_candidate():
    s = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.9])
    y = np.array([0, 0, 1, 0, 1, 1])
    with pytest.warns(UserWarning, match="no 5-fold"):
        cal = mlcal.AutoCalibrator(anchor=ANCHOR, n_folds=5).fit(s, y, np.full(6, 0.5))
    assert cal.chosen_ == "temperature"
    assert cal.selection_["anchor"]["guard"] == "no cross-validation possible"


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_anchor_none_is_the_rule_without_an_anchor(seed):
    s, y = tree_like(600, seed, 0.4)
    plain = mlcal.AutoCalibrator(anchor=None).fit(s, y)
    off = mlcal.AutoCalibrator(anchor=None, anchor_se=3.0, anchor_prior=5.0).fit(s, y)
    assert "anchor" not in off.selection_
    assert off.selection_ == plain.selection_ and off.map_ == plain.map_
    assert ANCHOR not in [r["method"] for r in off.selection_["candidates"]]
    # the default (with the anchor) records that choice as its default_choice, and makes it
    # whenever the anchor is passed over
    anchored = mlcal.AutoCalibrator().fit(s, y)
    assert anchored.anchor == ANCHOR
    info = anchored.selection_["anchor"]
    assert info["default_choice"] == off.chosen_
    if not info["chosen"]:
        assert anchored.chosen_ == off.chosen_ and anchored.map_ == off.map_


def test_documents_without_the_anchor_parameters_load_without_an_anchor():
    s, y = tree_like(500, 41)
    cal = mlcal.AutoCalibrator(anchor=None).fit(s, y)   # as auto fitted before the anchor
    doc = json.loads(cal.to_json())
    assert doc["params"]["anchor"] is None
    assert json.loads(mlcal.AutoCalibrator().fit(s, y).to_json())["params"]["anchor"] == ANCHOR
    for p in ("anchor", "anchor_se", "anchor_prior"):
        del doc["params"][p]
    # a document written before the anchor existed: the rule it was fitted with, not today's
    # default, so refitting its parameters reproduces it
    old = mlcal.load_calibrator(json.dumps(doc))
    assert old.anchor is None and old.anchor_se == 1.0 and old.anchor_prior == 300.0
    assert np.array_equal(old.predict(s), cal.predict(s))
    again = mlcal.AutoCalibrator(**old.get_params()).fit(s, y)
    assert again.to_json() == cal.to_json()


def test_bad_anchor_parameters_and_documents_raise():
    s, y = tree_like(300, 51)
    with pytest.raises(InvalidParameterError, match="anchor"):
        mlcal.AutoCalibrator(anchor="temperature").fit(s, y)
    with pytest.raises(InvalidParameterError, match="anchor_se"):
        mlcal.AutoCalibrator(anchor=ANCHOR, anchor_se=-1.0).fit(s, y)
    doc = json.loads(mlcal.AutoCalibrator(anchor=ANCHOR).fit(s, y).to_json())
    bad = json.loads(json.dumps(doc))
    bad["fit_info"]["anchor"]["method"] = "platt"
    with pytest.raises(CalibratorFormatError, match="anchor"):
        mlcal.load_calibrator(json.dumps(bad))
    bad = json.loads(json.dumps(doc))
    del bad["fit_info"]["anchor"]["guard"]
    with pytest.raises(CalibratorFormatError, match="anchor"):
        mlcal.load_calibrator(json.dumps(bad))


def test_java_evaluator_reads_anchor_documents(jar, tmp_path):
    from tests.test_java_evaluator import assert_bits_equal, run_batch

    s, y = tree_like(1500, 11)
    chosen = mlcal.AutoCalibrator(anchor=ANCHOR).fit(s, y)
    guarded = mlcal.AutoCalibrator(anchor=ANCHOR).fit(np.log(s / (1 - s)), y)
    assert chosen.chosen_ == ANCHOR and guarded.selection_["anchor"]["guard"] is not None
    x = np.concatenate([np.linspace(0.0, 1.0, 2001), [1e-300, 1 - 1e-16]])
    xm = np.linspace(-30.0, 30.0, 2001)
    out = run_batch(jar, tmp_path, [(chosen.to_json(), x), (guarded.to_json(), xm)])
    assert_bits_equal(out[0], chosen.predict(x), "auto chose the anchor")
    assert_bits_equal(out[1], guarded.predict(xm), "auto guarded")
    # a document whose chosen anchor map is not a beta-family map is refused by both
    doc = json.loads(chosen.to_json())
    doc["map"] = json.loads(mlcal.Isotonic().fit(s, y).to_json())["map"]
    with pytest.raises(CalibratorFormatError):
        mlcal.load_calibrator(json.dumps(doc))
    res = run_batch(jar, tmp_path, [(json.dumps(doc), x)])
    assert isinstance(res[0], str) and "beta-temperature" in res[0]


def test_spark_fit_passes_the_anchor_through(spark):
    # mlcal.spark.fit builds the calibrator from its params and fits the aggregated rows in
    # memory: the anchor (chosen, and guarded on saturated scores) is the in-memory fit's
    import pandas as pd

    import mlcal.spark

    s, y = tree_like(1500, 11)
    sat = s.copy()
    sat[np.argmin(sat)] = 1e-30
    for scores in (s, sat):
        df = spark.createDataFrame(pd.DataFrame({"s": scores, "y": y})).repartition(3)
        cal = mlcal.spark.fit(df, "s", "y", "auto", anchor=ANCHOR)
        mem = mlcal.AutoCalibrator(anchor=ANCHOR).fit(scores, y)
        assert cal.to_json() == mem.to_json()
    assert mem.selection_["anchor"]["guard"].startswith("saturated")
    assert json.loads(cal.to_json())["params"]["anchor"] == ANCHOR
