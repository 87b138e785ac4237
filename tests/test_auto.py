"""``auto``: method selection by cross-validated log loss with the one-standard-error rule."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import log_loss

import mlcal
from mlcal.calibrators import catalog
from mlcal.calibrators._params import InvalidParameterError
from mlcal.calibrators.auto import (CANDIDATE_PARAMS, DEFAULT_CANDIDATES,
                                    DEFAULT_BETA_PRIOR, DEFAULT_QUADRATIC_PRIOR, EPS, REPEAT_MAX_POINTS,
                                    assign_folds, coarsen, row_folds)
from mlcal.calibrators.base import BaseCalibrator, CalibratorFormatError
from support.synthetic import calibration_set


def logistic_data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=n)
    return s, (rng.random(n) < 1.0 / (1.0 + np.exp(-2.0 * s))).astype(int)


def step_data(n=4000, seed=1):
    """P(y=1|s) jumps from 0.05 to 0.95 at s = 0.5: a sigmoid in s fits it badly."""
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    return s, (rng.random(n) < np.where(s < 0.5, 0.05, 0.95)).astype(int)


def test_cv_log_loss_matches_a_brute_force_cross_validation():
    # no ties, unit weights: the collapsed points are the rows; refit every fold by hand
    s, y = logistic_data(800, seed=3)
    cal = mlcal.get_calibrator("auto", candidates=["platt", "isotonic"], n_folds=4,
                               seed=7, bound_smoothing=None).fit(s, y)
    order = np.argsort(s)
    folds = np.empty(s.size, dtype=int)
    folds[order] = assign_folds(s.size, 4, 7)
    rows = {r["method"]: r for r in cal.selection_["candidates"]}
    for name in ["platt", "isotonic"]:
        p = np.empty(s.size)
        for f in range(4):
            fitted = mlcal.get_calibrator(name).fit(s[folds != f], y[folds != f])
            p[folds == f] = fitted.predict(s[folds == f])
        expected = log_loss(y, np.clip(p, EPS, 1 - EPS))
        assert rows[name]["cv_log_loss"] == pytest.approx(expected, rel=1e-12)


def _out_of_fold_row_losses(cal, name, s, y, order, k, seed):
    """Each row's log loss under ``cal``'s candidate ``name`` refitted by hand on the other
    folds of :func:`assign_folds`' partition ``seed`` (``order``: the rows' sort order)."""
    folds = np.empty(s.size, dtype=int)
    folds[order] = assign_folds(s.size, k, seed)
    p = np.empty(s.size)
    for f in range(k):
        p[folds == f] = cal.candidate(name).fit(
            s[folds != f], y[folds != f]).predict(s[folds == f])
    q = np.clip(p, EPS, 1 - EPS)
    return -(y * np.log(q) + (1 - y) * np.log(1 - q))


def test_standard_error_is_that_of_the_paired_row_differences():
    s, y = logistic_data(600, seed=4)
    cal = mlcal.get_calibrator("auto", candidates=["platt", "histogram", "isotonic"],
                               n_folds=3, seed=1).fit(s, y)
    order = np.argsort(s)
    losses = {n: _out_of_fold_row_losses(cal, n, s, y, order, 3, 1)
              for n in ["platt", "histogram", "isotonic"]}
    best = min(losses, key=lambda n: losses[n].mean())
    assert cal.selection_["best"] == best
    for row in cal.selection_["candidates"]:
        d = losses[row["method"]] - losses[best]
        assert row["se"] == pytest.approx(d.std() / np.sqrt(d.size), rel=1e-9, abs=1e-15)


def test_simple_map_chosen_when_the_truth_is_a_sigmoid():
    s, y = logistic_data()
    cal = mlcal.get_calibrator("auto", candidates=["isotonic", "enir", "platt"]).fit(s, y)
    assert cal.chosen_ == "platt" and isinstance(cal.map_, mlcal.SigmoidMap)
    # the refit is the chosen method on all the data
    assert cal.map_ == mlcal.Platt().fit(s, y).map_


def test_flexible_map_chosen_when_a_sigmoid_cannot_fit():
    s, y = step_data()
    cal = mlcal.get_calibrator("auto", candidates=["platt", "isotonic"]).fit(s, y)
    rows = {r["method"]: r for r in cal.selection_["candidates"]}
    assert rows["platt"]["cv_log_loss"] - rows["isotonic"]["cv_log_loss"] > 2 * rows["platt"]["se"]
    assert cal.chosen_ == "isotonic"
    assert cal.map_ == mlcal.Isotonic(bound_smoothing=0.5).fit(s, y).map_


def test_one_se_rule_and_its_limits():
    s, y = calibration_set(3000, 2, beta=(2.0, 5.0), link_power=0.7)
    names = ["platt", "histogram", "isotonic", "enir"]
    exact = mlcal.get_calibrator("auto", candidates=names, se_rule=0.0, anchor=None).fit(s, y)
    rows = exact.selection_["candidates"]
    assert exact.chosen_ == min(rows, key=lambda r: r["cv_log_loss"])["method"]
    lenient = mlcal.get_calibrator("auto", candidates=names, se_rule=1e9,
                                   prefer="simplest", anchor=None).fit(s, y)
    assert lenient.chosen_ == min(rows, key=lambda r: r["complexity"])["method"] == "platt"
    assert lenient.selection_["rule"] == "one-se"
    listed = mlcal.get_calibrator("auto", candidates=names[::-1], se_rule=1e9,
                                  anchor=None).fit(s, y)
    assert listed.chosen_ == "enir" and listed.selection_["rule"] == "first-listed-within-se"
    best = min(rows, key=lambda r: r["cv_log_loss"])
    for rule, prefer in ((None, "listed"), (1.0, "listed"), (0.5, "simplest")):
        params = {"prefer": prefer} if rule is None else {"se_rule": rule, "prefer": prefer}
        one = mlcal.get_calibrator("auto", candidates=names, **params).fit(s, y).selection_
        assert one["se_rule"] == (0.25 if rule is None else rule)   # the default: 0.25
        within = [r for r in one["candidates"]
                  if r["cv_log_loss"] - best["cv_log_loss"] <= one["se_rule"] * r["se"]]
        if prefer == "simplest":
            assert one["chosen"] == min(within, key=lambda r: r["complexity"])["method"]
        else:
            assert one["chosen"] == within[0]["method"]


def test_listed_rule_on_constructed_cv_losses():
    # four candidates' per-point losses built so that the lowest mean is "c", "b" is 0.1 paired
    # SE above it and "a" 0.4 paired SE: listed a, b, c, d the rule picks "a" for se_rule 0.5,
    # "b" for 0.25 and "c" for 0; the SEs checked against a direct computation
    from mlcal.calibrators.auto import select_preferred

    rng = np.random.default_rng(0)
    n = 4000
    base = rng.exponential(0.5, size=n)
    noise = rng.normal(size=(3, n))
    noise -= noise.mean(axis=1, keepdims=True)
    noise /= noise.std(axis=1, keepdims=True)
    se_unit = 1.0 / np.sqrt(n)   # SE of the mean of a unit-variance difference
    losses = {"c": base, "b": base + 0.1 * se_unit + noise[0], "a": base + 0.4 * se_unit
              + noise[1], "d": base + 5 * se_unit + noise[2]}
    w = np.ones(n)
    results = {k: ((v, np.zeros(n)), 2.0) for k, v in losses.items()}
    names = ["a", "b", "c", "d"]
    for rule, expected in ((0.5, "a"), (0.25, "b"), (0.05, "c"), (0.0, "c")):
        record = select_preferred(names, results, (w, np.zeros(n)), rule)
        assert record["best"] == "c" and record["chosen"] == expected
        for row in record["candidates"]:
            d = losses[row["method"]] - losses["c"]
            assert row["se"] == pytest.approx(d.std() / np.sqrt(n), rel=1e-9, abs=1e-15)
    # a failed candidate is skipped, and the choice is the same however often it is asked
    results["a"] = "ValueError: separable"
    for _ in range(3):
        record = select_preferred(names, results, (w, np.zeros(n)), 0.5)
        assert record["chosen"] == "b" and record["candidates"][0]["status"].startswith("failed")


def test_default_rule_is_deterministic_and_row_order_free():
    s, y = calibration_set(1500, 4, beta=(2.0, 5.0), link_power=0.7)
    docs = set()
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(s.size)
        docs.add(mlcal.AutoCalibrator().fit(s[order], y[order]).to_json())
    assert len(docs) == 1


def test_failed_refit_falls_back_to_the_next_candidate():
    # six separable rows: no CV possible, the first candidate (temperature scaling on 0/1
    # labels) has no finite fit, so the next one (Platt on the log-odds with its identity
    # prior, always finite) is refitted, and the record says why
    s = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    y = np.array([0, 0, 0, 1, 1, 1])
    with pytest.warns(UserWarning, match="no 5-fold cross-validation"):
        cal = mlcal.AutoCalibrator().fit(s, y)
    assert cal.chosen_ == "platt-logit" == cal.selection_["chosen"]
    assert "refitting temperature on all rows failed" in cal.selection_["reason"]
    assert cal.selection_["chosen_params"] == CANDIDATE_PARAMS["platt-logit"]
    assert cal.map_ == mlcal.get_calibrator("platt-logit", **CANDIDATE_PARAMS["platt-logit"]
                                            ).fit(s, y).map_
    back = mlcal.load_calibrator(cal.to_json())
    assert back.chosen_ == "platt-logit" and back.map_ == cal.map_


def test_candidates_get_bound_smoothing_where_they_have_it():
    auto = mlcal.AutoCalibrator(bound_smoothing=2.0)
    assert auto.candidate("isotonic").bound_smoothing == 2.0
    assert auto.candidate("platt").get_params() == mlcal.Platt().get_params()
    assert mlcal.AutoCalibrator(bound_smoothing=None).candidate("enir").bound_smoothing is None
    s, y = step_data(2000)
    cal = mlcal.AutoCalibrator(candidates=["isotonic"]).fit(s, y)
    p = cal.predict(np.linspace(-1, 2, 301))
    assert p.min() > 0 and p.max() < 1


def test_folds_hold_each_fold_once_per_block_and_depend_on_the_seed():
    f = assign_folds(103, 5, 0)
    assert f.size == 103
    for b in range(20):
        assert sorted(f[5 * b:5 * b + 5]) == [0, 1, 2, 3, 4]
    assert not np.array_equal(f, assign_folds(103, 5, 1))
    assert np.array_equal(f, assign_folds(103, 5, 0))


def test_same_json_under_row_permutation_and_weights_as_repeated_rows():
    s, y, w = calibration_set(1500, 9, beta=(2.0, 3.0), decimals=2, weights="integer")
    docs = set()
    for k in range(3):
        p = np.random.default_rng(k).permutation(s.size) if k else np.arange(s.size)
        docs.add(mlcal.AutoCalibrator(candidates=["platt", "isotonic"]).fit(
            s[p], y[p], sample_weight=w[p]).to_json())
    assert len(docs) == 1
    rep = np.repeat(np.arange(s.size), w.astype(int))
    repeated = mlcal.AutoCalibrator(candidates=["platt", "isotonic"]).fit(s[rep], y[rep])
    a, b = json.loads(docs.pop())["fit_info"], json.loads(repeated.to_json())["fit_info"]
    assert a["chosen"] == b["chosen"]
    for ra, rb in zip(a["candidates"], b["candidates"]):
        assert ra["cv_log_loss"] == pytest.approx(rb["cv_log_loss"], rel=1e-12)


def test_repeated_cv_averages_the_partitions_losses():
    # three partitions (seeds 5, 6, 7): each candidate's CV log loss is the mean of the three
    # single-partition CV log losses, and its SE is that of the row-wise mean differences,
    # both recomputed here by refitting every fold of every partition by hand
    s, y = logistic_data(600, seed=4)
    names = ["platt", "histogram", "isotonic"]
    cal = mlcal.get_calibrator("auto", candidates=names, n_folds=3, seed=5,
                               cv_repeats=3).fit(s, y)
    assert cal.selection_["cv_repeats"] == 3
    singles = [mlcal.get_calibrator("auto", candidates=names, n_folds=3, seed=seed).fit(s, y)
               for seed in (5, 6, 7)]
    assert all(c.selection_["cv_repeats"] == 1 for c in singles)
    order = np.argsort(s)
    losses = {n: np.mean([_out_of_fold_row_losses(cal, n, s, y, order, 3, seed)
                          for seed in (5, 6, 7)], axis=0) for n in names}
    best = min(losses, key=lambda n: losses[n].mean())
    assert cal.selection_["best"] == best
    for row in cal.selection_["candidates"]:
        n = row["method"]
        single = [{r["method"]: r for r in c.selection_["candidates"]}[n]["cv_log_loss"]
                  for c in singles]
        assert row["cv_log_loss"] == pytest.approx(np.mean(single), rel=1e-12)
        assert row["cv_log_loss"] == pytest.approx(losses[n].mean(), rel=1e-12)
        d = losses[n] - losses[best]
        assert row["se"] == pytest.approx(d.std() / np.sqrt(d.size), rel=1e-9, abs=1e-15)


def test_repeated_cv_is_row_order_free():
    s, y, w = calibration_set(1500, 9, beta=(2.0, 3.0), decimals=2, weights="integer")
    docs = set()
    for k in range(3):
        p = np.random.default_rng(k).permutation(s.size) if k else np.arange(s.size)
        docs.add(mlcal.AutoCalibrator(candidates=["platt", "isotonic", "beta"],
                                      cv_repeats=4).fit(s[p], y[p], sample_weight=w[p]).to_json())
    assert len(docs) == 1
    info = json.loads(docs.pop())["fit_info"]
    assert info["cv_repeats"] == 4 and info["fold_unit"] == "points"


def test_repeated_cv_only_up_to_the_point_threshold():
    # exactly REPEAT_MAX_POINTS unique scores: repeated; one more: one partition, and the
    # selection is then the single-partition one (same document as cv_repeats=1)
    names = ["platt", "isotonic"]
    for n, repeats in [(REPEAT_MAX_POINTS, 3), (REPEAT_MAX_POINTS + 1, 1)]:
        s, y = logistic_data(n, seed=2)
        assert np.unique(s).size == n
        cal = mlcal.AutoCalibrator(candidates=names, cv_repeats=3).fit(s, y)
        assert cal.selection_["cv_repeats"] == repeats
        if repeats == 1:
            one = mlcal.AutoCalibrator(candidates=names).fit(s, y)
            assert cal.to_json().replace('"cv_repeats": 3', '"cv_repeats": 1') == one.to_json()
    # cells (above cv_max_points) and row folds (few distinct scores): one partition
    s, y = logistic_data(3000, seed=2)
    cal = mlcal.AutoCalibrator(candidates=names, cv_max_points=500, cv_repeats=3).fit(s, y)
    assert cal.selection_["fold_unit"] == "cells" and cal.selection_["cv_repeats"] == 1
    rng = np.random.default_rng(0)
    s = rng.choice([0.1, 0.2, 0.3, 0.9], size=2000)
    y = (rng.random(2000) < s).astype(int)
    cal = mlcal.AutoCalibrator(candidates=names, cv_repeats=3).fit(s, y)
    assert cal.selection_["fold_unit"] == "rows" and cal.selection_["cv_repeats"] == 1


@pytest.mark.parametrize("value", [0, 101, 2.5, True])
def test_bad_cv_repeats_is_named(value):
    with pytest.raises(InvalidParameterError, match="cv_repeats"):
        mlcal.AutoCalibrator(cv_repeats=value).fit(*logistic_data(100))


def points(s, y, w):
    """Sorted unique scores with the correctly rounded positive and negative weight of each."""
    x = np.unique(s)
    return (x, np.array([math.fsum(w[(s == v) & (y == 1)]) for v in x]),
            np.array([math.fsum(w[(s == v) & (y == 0)]) for v in x]))


def brute_force_cells(x, pos, neg, n_cells):
    """Cells built by hand: point i goes to the last cell j whose start j * M // n_cells is
    <= i; a cell sits at its middle point's score with the fsum of its points' weights."""
    m = x.size
    cell = [max(j for j in range(n_cells) if j * m // n_cells <= i) for i in range(m)]
    sizes = np.bincount(cell, minlength=n_cells)
    assert sizes.max() - sizes.min() <= 1
    edges = np.concatenate(([0], np.cumsum(sizes)))
    return (np.array([x[lo + (hi - lo - 1) // 2] for lo, hi in zip(edges[:-1], edges[1:])]),
            np.array([math.fsum(pos[lo:hi]) for lo, hi in zip(edges[:-1], edges[1:])]),
            np.array([math.fsum(neg[lo:hi]) for lo, hi in zip(edges[:-1], edges[1:])]))


@pytest.mark.parametrize("n_cells", [1, 7, 100, 999])
def test_coarsen_matches_cells_built_by_hand(n_cells):
    rng = np.random.default_rng(n_cells)
    s = np.round(rng.random(3000), 3)                     # ties
    y = (rng.random(3000) < s).astype(int)
    w = np.exp(rng.normal(0.0, 8.0, 3000))                # weights over many decades
    x, pos, neg = points(s, y, w)
    got = coarsen(x, pos, neg, n_cells)
    want = brute_force_cells(x, pos, neg, n_cells)
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g, e)               # correctly rounded sums: bit-exact
    assert math.fsum(got[1]) == pytest.approx(math.fsum(w[y == 1]), rel=1e-15)


def test_cv_on_cells_above_cv_max_points():
    s, y = logistic_data(5000, seed=5)
    cal = mlcal.AutoCalibrator(candidates=["platt", "isotonic"], cv_max_points=1000).fit(s, y)
    info = cal.selection_
    assert info["n_unique"] == 5000 and info["n_points"] == 1000
    # n_folds=None: 3 folds on cells, 5 on all the points
    assert info["n_folds"] == 3
    # the same comparison run directly on the hand-built cells as weighted rows (3 folds):
    # same losses and standard errors (every row is in a cell, so no rescaling)
    mid, pos, neg = brute_force_cells(*points(s, y, np.ones(s.size)), 1000)
    rows_s = np.concatenate((mid, mid))
    rows_y = np.repeat([1, 0], mid.size)
    rows_w = np.concatenate((pos, neg))
    keep = rows_w > 0
    direct = mlcal.AutoCalibrator(candidates=["platt", "isotonic"], n_folds=3).fit(
        rows_s[keep], rows_y[keep], sample_weight=rows_w[keep])
    assert direct.selection_["n_points"] == 1000
    for a, b in zip(info["candidates"], direct.selection_["candidates"]):
        assert a["cv_log_loss"] == pytest.approx(b["cv_log_loss"], rel=1e-12)
        assert a["se"] == pytest.approx(b["se"], rel=1e-9)
    # the refit still uses every row
    assert cal.map_ == cal.candidate(cal.chosen_).fit(s, y).map_


def test_cells_keep_the_power_of_all_rows_for_flexible_methods():
    # a step in P(y|s) that a sigmoid fits badly, 200,000 rows, 2,000 cells of 100 rows: the
    # fold fits on cells see all the data's weight, so isotonic regression's CV log loss is
    # that of a fit on ~133,000 rows, close to the loss of the true probabilities
    rng = np.random.default_rng(4)
    s = rng.random(200_000)
    p_true = np.where(s < 0.5, 0.05, 0.95)
    y = (rng.random(s.size) < p_true).astype(int)
    cal = mlcal.AutoCalibrator(candidates=["platt", "isotonic"], cv_max_points=2000).fit(s, y)
    rows = {r["method"]: r for r in cal.selection_["candidates"]}
    entropy = log_loss(y, p_true)
    assert cal.chosen_ == "isotonic"
    assert rows["isotonic"]["cv_log_loss"] - entropy < 0.003
    assert rows["platt"]["cv_log_loss"] - entropy > 0.02


def test_json_round_trip_keeps_the_selection():
    s, y = step_data(1500)
    cal = mlcal.AutoCalibrator(candidates=["platt", "isotonic", "histogram"]).fit(s, y)
    back = mlcal.load_calibrator(cal.to_json())
    assert isinstance(back, mlcal.AutoCalibrator)
    assert back.selection_ == cal.selection_ and back.chosen_ == cal.chosen_
    assert back.to_json() == cal.to_json()
    np.testing.assert_array_equal(back.predict(s), cal.predict(s))


@pytest.mark.parametrize("tamper", [
    lambda d: d["fit_info"].update(chosen="kde"),
    lambda d: d["fit_info"].update(surprise=1),
    lambda d: d["fit_info"].pop("reason"),
    lambda d: d["fit_info"].update(n_folds="5"),
    lambda d: d["fit_info"]["candidates"][0].update(cv_log_loss="low"),
    lambda d: d["fit_info"].update(candidates=[1, 2]),
    lambda d: d.update(fit_info=[]),
    lambda d: d["fit_info"].update(chosen_params=[1]),
    lambda d: d["fit_info"].update(chosen_params={"thin_tol": [1]}),
])
def test_bad_fit_info_is_rejected(tamper):
    s, y = step_data(600)
    doc = mlcal.AutoCalibrator(candidates=["platt", "isotonic"]).fit(s, y).to_dict()
    tamper(doc)
    with pytest.raises(CalibratorFormatError, match="fit_info"):
        mlcal.load_calibrator(doc)


def test_auto_documents_refuse_other_methods_extra_fields():
    s, y = step_data(600)
    doc = mlcal.AutoCalibrator(candidates=["platt", "isotonic"]).fit(s, y).to_dict()
    doc["interval"] = {}
    with pytest.raises(CalibratorFormatError, match="AutoCalibrator documents have no 'interval'"):
        mlcal.load_calibrator(doc)
    va = mlcal.get_calibrator("venn-abers").fit(s, y).to_dict()
    va["fit_info"] = doc["fit_info"]
    with pytest.raises(CalibratorFormatError, match="no 'fit_info'"):
        mlcal.load_calibrator(va)


def test_other_methods_reject_fit_info():
    s, y = step_data(300)
    doc = mlcal.Isotonic().fit(s, y).to_dict()
    assert "fit_info" not in doc
    doc["fit_info"] = {}
    with pytest.raises(CalibratorFormatError, match="fit_info"):
        BaseCalibrator.from_dict(doc)


@pytest.mark.parametrize("candidates, match", [(["isotonic", "nope"], "registered"),
                                               (["auto"], "registered"),
                                               ([], "non-empty"),
                                               (["platt", "platt"], "twice")])
def test_bad_candidates_are_named(candidates, match):
    s, y = step_data(300)
    with pytest.raises(InvalidParameterError, match=f"candidates.*{match}"):
        mlcal.AutoCalibrator(candidates=candidates).fit(s, y)


def test_default_candidates_are_the_registered_defaults():
    registered = set(mlcal.available_calibrators())
    names = mlcal.AutoCalibrator().candidate_names()
    assert names == [c for c in DEFAULT_CANDIDATES if c in registered]
    assert {"platt", "isotonic", "elite"} <= set(names)
    s, y = step_data(1000)
    info = mlcal.AutoCalibrator().fit(s, y).selection_
    # the anchor (the default, anchor="beta-temperature") is cross-validated first
    assert [r["method"] for r in info["candidates"]] == ["beta-temperature"] + names
    info = mlcal.AutoCalibrator(anchor=None).fit(s, y).selection_
    assert [r["method"] for r in info["candidates"]] == names


def test_candidates_get_their_auto_parameters_and_the_refit_records_them():
    auto = mlcal.AutoCalibrator()
    assert auto.candidate("elite").get_params()["thin_tol"] == CANDIDATE_PARAMS["elite"]["thin_tol"]
    assert auto.candidate("elite").bound_smoothing == 0.5
    s, y = step_data(3000)
    cal = mlcal.AutoCalibrator(candidates=["elite"]).fit(s, y)
    assert cal.selection_["chosen_params"] == {"thin_tol": 1e-3, "bound_smoothing": 0.5}
    assert cal.calibrator_.get_params()["thin_tol"] == 1e-3
    assert cal.map_ == mlcal.ELiTE(thin_tol=1e-3, bound_smoothing=0.5).fit(s, y).map_
    assert auto.candidate("spline").cv == 3


def test_documents_without_the_newer_fields_still_load():
    s, y = step_data(1500)
    doc = json.loads(mlcal.AutoCalibrator(candidates=["platt", "isotonic"]).fit(s, y).to_json())
    del doc["fit_info"]["chosen_params"], doc["fit_info"]["fold_unit"]
    del doc["fit_info"]["cv_repeats"]
    back = mlcal.load_calibrator(json.dumps(doc))
    assert back.chosen_ == doc["fit_info"]["chosen"]


def test_too_few_unique_scores_and_fractional_weights_fall_back_to_the_first_candidate():
    s = np.repeat([0.1, 0.4, 0.6, 0.9], 50)
    y = (np.arange(200) % 3 == 0).astype(int)
    w = np.full(200, 0.5)
    with pytest.warns(UserWarning, match="no 5-fold cross-validation possible on 100 rows"):
        cal = mlcal.AutoCalibrator(candidates=["isotonic", "platt"]).fit(s, y, sample_weight=w)
    assert cal.chosen_ == "isotonic" and cal.selection_["best"] is None
    assert "no 5-fold cross-validation" in cal.selection_["reason"]


def few_scores_data(n=20_000, seed=3):
    """Four distinct scores (a depth-2 tree, say) whose label rates no sigmoid can follow."""
    rng = np.random.default_rng(seed)
    s = rng.choice([0.1, 0.2, 0.3, 0.9], size=n)
    p = np.select([s == 0.1, s == 0.2, s == 0.3], [0.1, 0.15, 0.7], 0.75)
    return s, (rng.random(n) < p).astype(int)


def test_few_unique_scores_cross_validate_on_rows():
    s, y = few_scores_data()
    cal = mlcal.AutoCalibrator().fit(s, y)
    info = cal.selection_
    assert info["fold_unit"] == "rows" and info["n_points"] == 4
    rows = {r["method"]: r for r in info["candidates"]}
    assert rows["isotonic"]["cv_log_loss"] < rows["platt"]["cv_log_loss"] - 0.01
    assert cal.chosen_ not in ("platt", "platt-logit", "temperature", "beta")
    # the chosen map reproduces the label rate of each score
    for v in (0.1, 0.2, 0.3, 0.9):
        assert cal.predict([v])[0] == pytest.approx(y[s == v].mean(), abs=0.01)


def test_row_folds_match_a_brute_force_cross_validation():
    s, y = few_scores_data(n=3000, seed=5)
    x, pos, neg, folds = row_folds(np.array([0.1, 0.2, 0.3, 0.9]),
                                   np.array([np.sum(y[s == v]) for v in (0.1, 0.2, 0.3, 0.9)],
                                            dtype=float),
                                   np.array([np.sum(1 - y[s == v]) for v in (0.1, 0.2, 0.3, 0.9)],
                                            dtype=float), 5, 0)
    # every row dealt exactly once, units in score order
    assert np.all(np.diff(x) >= 0)
    for v in (0.1, 0.2, 0.3, 0.9):
        assert pos[x == v].sum() == y[s == v].sum() and neg[x == v].sum() == (1 - y[s == v]).sum()
    cal = mlcal.AutoCalibrator(candidates=["isotonic", "platt"], bound_smoothing=None).fit(s, y)
    # isotonic by hand: scikit-learn's weighted fit on the training counts of each fold
    total = 0.0
    for f in range(5):
        tr, te = folds != f, folds == f
        xs = np.concatenate((x[tr], x[tr]))
        ys = np.concatenate((np.ones(tr.sum()), np.zeros(tr.sum())))
        ws = np.concatenate((pos[tr], neg[tr]))
        keep = ws > 0
        p = IsotonicRegression(out_of_bounds="clip").fit(xs[keep], ys[keep], ws[keep]) \
            .predict(x[te])
        p = np.clip(p, EPS, 1 - EPS)
        total += float(np.sum(pos[te] * -np.log(p) + neg[te] * -np.log1p(-p)))
    iso = {r["method"]: r for r in cal.selection_["candidates"]}["isotonic"]
    assert iso["cv_log_loss"] == pytest.approx(total / len(y), rel=1e-12)


def test_row_folds_do_not_depend_on_row_order():
    s, y = few_scores_data(n=5000, seed=9)
    docs = set()
    for k in range(3):
        p = np.random.default_rng(k).permutation(s.size) if k else np.arange(s.size)
        docs.add(mlcal.AutoCalibrator().fit(s[p], y[p]).to_json())
    assert len(docs) == 1


@pytest.fixture()
def failing_method():
    class AlwaysFails(BaseCalibrator):
        def _fit(self, scores, y, w):
            raise ValueError("this method cannot fit")

    catalog.register_calibrator("test-always-fails")(AlwaysFails)
    yield "test-always-fails"
    del catalog._CATALOG["test-always-fails"]


def test_a_failing_candidate_is_recorded_and_skipped(failing_method):
    s, y = step_data(800)
    cal = mlcal.AutoCalibrator(candidates=[failing_method, "isotonic"], anchor=None).fit(s, y)
    rows = {r["method"]: r for r in cal.selection_["candidates"]}
    assert rows[failing_method]["status"].startswith("failed: ValueError")
    assert cal.chosen_ == "isotonic"
    with pytest.raises(ValueError, match="every candidate failed"):
        mlcal.AutoCalibrator(candidates=[failing_method], anchor=None).fit(s, y)


@pytest.mark.parametrize("n_folds", [1, 0, 2.5, "3"])
def test_bad_n_folds_is_named(n_folds):
    s, y = step_data(300)
    with pytest.raises(InvalidParameterError, match="n_folds"):
        mlcal.AutoCalibrator(n_folds=n_folds).fit(s, y)


def test_smooth_candidates_fit_their_folds_on_at_most_2000_cells():
    # which methods: by map kind (sigmoid, beta) and the spline by name; flexible maps not
    from mlcal.calibrators.auto import SMOOTH_FOLD_POINTS

    auto = mlcal.AutoCalibrator()
    assert SMOOTH_FOLD_POINTS == 2000
    for name in ["platt", "platt-logit", "temperature", "beta", "spline"]:
        assert auto.fold_fit_points(name) == SMOOTH_FOLD_POINTS
    for name in ["isotonic", "elite", "histogram", "venn-abers"]:
        assert auto.fold_fit_points(name) is None
    # on cells: the recorded CV log loss is that of fold fits on the training cells merged
    # into 2,000 cells (by hand), and within 1e-5 of fold fits on every training cell
    rng = np.random.default_rng(5)
    s = rng.beta(2.0, 5.0, size=30_000)
    y = (rng.random(s.size) < s ** 0.6).astype(float)
    cal = mlcal.AutoCalibrator(candidates=["beta", "isotonic"], cv_max_points=6000).fit(s, y)
    assert cal.selection_["fold_unit"] == "cells"
    o = np.argsort(s)
    x, pos, neg, folds, k, unit, _ = cal.cv_units(s[o], y[o], np.ones(s.size), 0)
    assert unit == "cells" and k == 3
    total = float(pos.sum() + neg.sum())
    by_hand, full = np.empty(x.size), np.empty(x.size)
    for f in range(k):
        tr, te = folds != f, folds == f
        for merged, p in ((True, by_hand), (False, full)):
            xt, pt, nt = x[tr], pos[tr], neg[tr]
            if merged:
                xt, pt, nt = coarsen(xt, pt, nt, 2000)
            rows = np.repeat(xt, 2), np.tile([1.0, 0.0], xt.size), np.column_stack(
                (pt, nt)).ravel()
            keep = rows[2] > 0
            fitted = cal.candidate("beta").fit(rows[0][keep], rows[1][keep],
                                               sample_weight=rows[2][keep])
            p[te] = fitted.predict(x[te])

    def cv_loss(p):
        q = np.clip(p, EPS, 1 - EPS)
        return float(np.sum(-pos * np.log(q) - neg * np.log(1 - q)) / total)

    row = {r["method"]: r for r in cal.selection_["candidates"]}["beta"]
    assert row["cv_log_loss"] == pytest.approx(cv_loss(by_hand), rel=1e-12)
    assert abs(cv_loss(by_hand) - cv_loss(full)) < 1e-5
    # still independent of the row order
    perm = rng.permutation(s.size)
    again = mlcal.AutoCalibrator(candidates=["beta", "isotonic"], cv_max_points=6000).fit(
        s[perm], y[perm])
    assert again.to_json() == cal.to_json()


def bent_data(n=600, seed=5):
    """Log-odds scores whose calibration curve bends (quadratic in the log-odds)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 2.0, n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(0.3 + 0.7 * z - 0.1 * z * z)))).astype(int)
    return 1.0 / (1.0 + np.exp(-z)), y


#: the candidates whose identity prior is an auto parameter, with its default
PRIORS = [("quadratic", "quadratic_prior", DEFAULT_QUADRATIC_PRIOR),
          ("beta", "beta_prior", DEFAULT_BETA_PRIOR)]


@pytest.mark.parametrize("method,parameter,default", PRIORS)
@pytest.mark.parametrize("prior", ["default", 3.0, None])
def test_prior_candidate_cv_matches_hand_fitted_out_of_fold_probabilities(method, parameter,
                                                                         default, prior):
    # no ties, unit weights: every fold refitted by hand with the parameters the rule states
    prior = default if prior == "default" else prior
    s, y = bent_data()
    cal = mlcal.AutoCalibrator(candidates=[method, "platt"], n_folds=4, seed=7,
                               **{parameter: prior}).fit(s, y)   # the anchor too: not asked
    params = {} if prior is None else {"smooth_targets": False, "identity_prior": prior}
    folds = np.empty(s.size, dtype=int)
    folds[np.argsort(s)] = assign_folds(s.size, 4, 7)
    p = np.empty(s.size)
    for f in range(4):
        fitted = mlcal.get_calibrator(method, **params).fit(s[folds != f], y[folds != f])
        p[folds == f] = fitted.predict(s[folds == f])
    row = next(r for r in cal.selection_["candidates"] if r["method"] == method)
    assert row["cv_log_loss"] == pytest.approx(log_loss(y, np.clip(p, EPS, 1 - EPS)),
                                               rel=1e-9)
    only = mlcal.AutoCalibrator(candidates=[method], anchor=None, **{parameter: prior}).fit(s, y)
    assert only.selection_["chosen_params"] == params
    assert only.map_ == mlcal.get_calibrator(method, **params).fit(s, y).map_


def test_the_default_quadratic_candidate_fits_the_labels_not_smoothed_targets():
    s, y = bent_data(seed=6)
    auto = mlcal.AutoCalibrator()
    assert auto.quadratic_prior == DEFAULT_QUADRATIC_PRIOR == 10.0
    assert auto.candidate_params("quadratic") == {"smooth_targets": False,
                                                  "identity_prior": 10.0}
    assert mlcal.AutoCalibrator(quadratic_prior=None).candidate_params("quadratic") == {}
    assert auto.beta_prior == DEFAULT_BETA_PRIOR == 100.0
    # beta's prior is Platt on the log-odds' (both shrink toward the identity map by 100 rows)
    assert auto.candidate_params("beta") == auto.candidate_params("platt-logit") == {
        "smooth_targets": False, "identity_prior": 100.0}
    assert mlcal.AutoCalibrator(beta_prior=None).candidate_params("beta") == {}
    # smoothed targets pull the fit toward 1/2: the label fit is sharper here
    sharp = auto.candidate("quadratic").fit(s, y).predict(np.array([0.999]))[0]
    soft = mlcal.Quadratic().fit(s, y).predict(np.array([0.999]))[0]
    assert sharp > soft


@pytest.mark.parametrize("method,parameter,default", PRIORS)
def test_prior_candidate_stays_finite_on_separable_folds_with_the_prior(method, parameter,
                                                                        default):
    s = np.linspace(0.05, 0.95, 60)
    y = (s > 0.5).astype(int)
    with_prior = mlcal.AutoCalibrator(candidates=[method, "platt"]).fit(s, y)
    rows = {r["method"]: r for r in with_prior.selection_["candidates"]}
    assert rows[method]["status"] == "ok"
    assert np.isfinite(rows[method]["cv_log_loss"])
    # no prior on the 0/1 labels: the maximum-likelihood fit is at infinity in every fold
    bare = mlcal.AutoCalibrator(candidates=[method, "platt"], **{parameter: 0.0}).fit(s, y)
    rows = {r["method"]: r for r in bare.selection_["candidates"]}
    assert rows[method]["status"].startswith("failed") and bare.chosen_ == "platt"


@pytest.mark.parametrize("method,parameter,default", PRIORS)
def test_documents_without_a_prior_parameter_load_as_the_smoothed_candidate(method, parameter,
                                                                            default):
    s, y = bent_data(300, seed=8)
    cal = mlcal.AutoCalibrator(candidates=[method, "platt"]).fit(s, y)
    back = mlcal.load_calibrator(cal.to_json())
    assert getattr(back, parameter) == default and back.get_params() == cal.get_params()
    doc = json.loads(cal.to_json())
    del doc["params"][parameter]
    old = mlcal.load_calibrator(json.dumps(doc))
    assert getattr(old, parameter) is None and old.candidate_params(method) == {}
    others = [p for _, p, _ in PRIORS if p != parameter]     # the other one keeps its value
    assert [getattr(old, p) for p in others] == [getattr(cal, p) for p in others]
    assert np.array_equal(old.predict(s), cal.predict(s))


@pytest.mark.parametrize("parameter", [p for _, p, _ in PRIORS])
@pytest.mark.parametrize("value", [-1.0, "10", float("nan")])
def test_bad_prior_is_named(parameter, value):
    with pytest.raises(InvalidParameterError, match=parameter):
        mlcal.AutoCalibrator(**{parameter: value}).fit(*logistic_data(100))
