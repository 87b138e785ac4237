"""Multiclass ``auto``: cross-validated choice among temperature, ts-mix, SVS, SMS (vector,
matrix scaling by name) and one-vs-rest auto; reachable as "auto" wherever the binary one is; fit_info in the JSON."""

import json
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp, softmax

import mlcal
from mlcal import (CalibratedModel, MatrixScaling, MulticlassAuto, OneVsRest,
                   TemperatureScaling, VectorScaling)
from mlcal.calibrators.base import CalibratorFormatError
from mlcal.calibrators.multiclass import multiclass_calibrator
from mlcal.calibrators.multiclass_auto import stratified_folds
from mlcal.cli import main


def _held_out_nll(p, y):
    return float(np.mean(-np.log(np.clip(p[np.arange(len(y)), y], 1e-15, 1.0))))


def _distorted(n, seed, K=4):
    """Per-class miscalibration: labels drawn from softmax(z), scores are z scaled and shifted
    differently per class, which one temperature cannot undo and vector scaling can."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, K)) * 1.5
    u = rng.uniform(size=(n, 1))
    y = np.minimum((u > np.cumsum(softmax(z, axis=1), axis=1)).sum(axis=1), K - 1)
    return z * np.array([0.3, 1.0, 2.5, 1.0]) + np.array([1.0, 0.0, -1.0, 0.5]), y


def test_per_class_miscalibration_picks_a_richer_map_that_wins_on_held_out_rows():
    s, y = _distorted(1500, seed=0)
    s_test, y_test = _distorted(20000, seed=1)
    auto = MulticlassAuto().fit(s, y)
    temperature = TemperatureScaling().fit(s, y)
    assert auto.chosen_ != "temperature" and auto.complexity() > 1
    rows = {r["method"]: r for r in auto.selection_["candidates"]}
    assert rows["temperature"]["cv_log_loss"] > rows[auto.chosen_]["cv_log_loss"]
    assert _held_out_nll(auto.predict_proba(s_test), y_test) < \
        _held_out_nll(temperature.predict_proba(s_test), y_test) - 0.02


def _digits_naive_bayes(n_cal=100):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.naive_bayes import GaussianNB

    X, y = load_digits(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, train_size=200, stratify=y,
                                                  random_state=0)
    X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, train_size=n_cal,
                                                stratify=y_rest, random_state=0)
    nb = GaussianNB().fit(X_tr, y_tr)
    return nb.predict_log_proba(X_cal), y_cal, nb.predict_log_proba(X_te), y_te


def test_where_vector_and_matrix_scaling_overfit_auto_is_no_worse_than_temperature():
    # Gaussian naive Bayes on digits, 10 calibration rows per class: the former unpenalised
    # per-class maps separated the calibration rows and failed to converge; since issue 26
    # vector and matrix scaling are penalised towards temperature scaling and converge
    s, y, s_te, y_te = _digits_naive_bayes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # one-vs-rest auto's classes with too few rows
        auto = MulticlassAuto(candidates=["temperature", "vector", "matrix",
                                          "one-vs-rest:auto"], input_kind="logits").fit(s, y)
    status = {r["method"]: r["status"] for r in auto.selection_["candidates"]}
    assert not status["vector"].startswith("failed")
    assert not status["matrix"].startswith("failed")
    temperature = TemperatureScaling(input_kind="logits").fit(s, y)
    assert _held_out_nll(auto.predict_proba(s_te), y_te) <= \
        _held_out_nll(temperature.predict_proba(s_te), y_te)


def test_cv_log_losses_match_an_independent_recomputation_and_the_one_se_rule():
    s, y = _distorted(600, seed=2)
    auto = MulticlassAuto(candidates=["temperature", "vector", "matrix"], se_rule=1.0,
                          prefer="simplest").fit(s, y)
    folds = stratified_folds(s, y, np.ones(len(y)), 5, 0)
    # stratified: each class's rows are spread evenly over the folds
    for k in range(4):
        counts = np.bincount(folds[y == k], minlength=5)
        assert counts.max() - counts.min() <= 1
    losses = {}
    for name, cls in (("temperature", TemperatureScaling), ("vector", VectorScaling),
                      ("matrix", MatrixScaling)):
        loss = np.empty(len(y))
        for f in range(5):
            cal = cls(input_kind="logits").fit(s[folds != f], y[folds != f])
            logits = np.log(cal.predict_proba(s[folds == f]))
            loss[folds == f] = logsumexp(logits, axis=1) - logits[np.arange(logits.shape[0]),
                                                                  y[folds == f]]
        losses[name] = loss
    rows = {r["method"]: r for r in auto.selection_["candidates"]}
    for name, loss in losses.items():
        assert rows[name]["cv_log_loss"] == pytest.approx(loss.mean(), rel=1e-9)
    best = min(losses, key=lambda n: losses[n].mean())
    se = {n: np.std(losses[n] - losses[best]) / np.sqrt(len(y)) for n in losses}
    within = [n for n in ("temperature", "vector", "matrix")
              if losses[n].mean() - losses[best].mean() <= se[n]]
    assert auto.chosen_ == within[0]   # listed simplest first: 1, 2K-1, K^2+K-1 parameters
    # criterion="log-loss" (the default rule before issue 26's Brier ranking): the first
    # listed candidate within 2 SE of the lowest CV log loss
    for listed in (["matrix", "vector", "temperature"], ["temperature", "vector", "matrix"]):
        preferred = MulticlassAuto(candidates=listed, criterion="log-loss").fit(s, y)
        assert preferred.selection_["rule"] == "first-listed-within-se"
        assert all("cv_brier" not in r for r in preferred.selection_["candidates"])
        assert preferred.chosen_ == next(n for n in listed
                                         if losses[n].mean() - losses[best].mean() <= 2 * se[n])
        assert preferred.selection_["best"] == best


def _hand_oof(s, y, w, names, n_folds=5):
    """Out-of-fold probabilities of each candidate, fitted class by class on the folds of
    stratified_folds (independently of MulticlassAuto's shared fold fits)."""
    from mlcal.calibrators.structured_scaling import StructuredVectorScaling
    classes = {"matrix": MatrixScaling, "vector": VectorScaling,
               "svs": StructuredVectorScaling, "temperature": TemperatureScaling}
    folds = stratified_folds(s, y, w, n_folds, 0)
    out = {}
    for name in names:
        p = np.empty(s.shape)
        for f in range(n_folds):
            cal = classes[name](input_kind="logits").fit(s[folds != f], y[folds != f],
                                                         sample_weight=w[folds != f])
            p[folds == f] = cal.predict_proba(s[folds == f])
        out[name] = p
    return out


def _within(loss, w, c):
    """Candidates within ``c`` weighted paired SE of the lowest weighted mean loss."""
    mean = {n: np.average(v, weights=w) for n, v in loss.items()}
    best = min(mean, key=mean.get)
    within = set()
    for n, v in loss.items():
        d = v - loss[best]
        se = np.sqrt(np.average((d - np.average(d, weights=w)) ** 2, weights=w) / w.sum())
        if mean[n] - mean[best] <= c * se:
            within.add(n)
    return mean, best, within


@pytest.mark.parametrize("weighted", [False, True])
def test_the_both_rule_matches_an_independent_computation_from_out_of_fold_probabilities(
        weighted):
    # n=200, seed 3: the two rules differ (matrix is within 2 SE on CV Brier, not on log loss)
    s, y = _distorted(200, seed=3)
    w = (np.random.default_rng(1).integers(1, 4, size=len(y)).astype(float) if weighted
         else np.ones(len(y)))
    listed = ["matrix", "vector", "svs", "temperature"]
    oof = _hand_oof(s, y, w, listed)
    ll = {n: -np.log(np.clip(p[np.arange(len(y)), y], 1e-15, 1.0)) for n, p in oof.items()}
    onehot = np.eye(4)[y]
    brier = {n: np.sum((p - onehot) ** 2, axis=1) for n, p in oof.items()}
    ll_mean, ll_best, ll_within = _within(ll, w, 2.0)
    br_mean, _, br_within = _within(brier, w, 2.0)
    auto = MulticlassAuto(candidates=listed).fit(s, y, sample_weight=w)
    info = auto.selection_
    assert info["rule"] == "first-listed-within-se-log-loss-or-brier"
    assert info["best"] == ll_best
    rows = {r["method"]: r for r in info["candidates"]}
    for n in listed:
        assert rows[n]["cv_log_loss"] == pytest.approx(ll_mean[n], rel=1e-7)
        assert rows[n]["cv_brier"] == pytest.approx(br_mean[n], rel=1e-7)
    assert auto.chosen_ == next(n for n in listed if n in ll_within | br_within)
    old = MulticlassAuto(candidates=listed, criterion="log-loss").fit(s, y, sample_weight=w)
    assert old.chosen_ == next(n for n in listed if n in ll_within)
    if not weighted:
        assert (auto.chosen_, old.chosen_) == ("matrix", "vector")
    # prefer="simplest" is the one-SE rule on CV log loss whatever the criterion
    simplest = [MulticlassAuto(candidates=listed, prefer="simplest", criterion=c).fit(
        s, y, sample_weight=w).selection_ for c in ("both", "log-loss")]
    assert simplest[0] == simplest[1] and simplest[0]["rule"] == "one-se"


def test_documents_written_before_the_brier_criterion_load_as_the_log_loss_rule():
    s, y = _distorted(300, seed=3)
    new = MulticlassAuto(candidates=["matrix", "vector", "temperature"]).fit(s, y)
    doc = json.loads(new.to_json())
    assert doc["params"]["criterion"] == "both"
    # the document as the previous release wrote it: no criterion, no CV Brier, the old rule
    del doc["params"]["criterion"]
    doc["fit_info"]["rule"] = "first-listed-within-se"
    for row in doc["fit_info"]["candidates"]:
        del row["cv_brier"], row["brier_se"]
    old = mlcal.load_calibrator(json.dumps(doc))
    assert isinstance(old, MulticlassAuto) and old.criterion == "log-loss"
    assert old.chosen_ == new.chosen_ and old.selection_ == doc["fit_info"]
    np.testing.assert_array_equal(old.predict_proba(s), new.predict_proba(s))
    again = mlcal.load_calibrator(old.to_json())
    assert again.criterion == "log-loss" and again.selection_ == doc["fit_info"]
    bad = json.loads(new.to_json())
    bad["fit_info"]["candidates"][0]["cv_brier"] = "low"
    with pytest.raises(CalibratorFormatError, match="cv_brier"):
        mlcal.load_calibrator(json.dumps(bad))
    bad["params"]["criterion"] = "brier"
    with pytest.raises(CalibratorFormatError, match="criterion"):
        mlcal.load_calibrator(json.dumps(bad))


def test_the_choice_does_not_depend_on_row_order_and_round_trips_through_json():
    s, y = _distorted(400, seed=3)
    perm = np.random.default_rng(0).permutation(len(y))
    a = MulticlassAuto(candidates=["temperature", "vector", "one-vs-rest:platt"]).fit(s, y)
    b = MulticlassAuto(candidates=["temperature", "vector", "one-vs-rest:platt"]).fit(s[perm],
                                                                                      y[perm])
    assert a.to_json() == b.to_json()
    back = mlcal.load_calibrator(a.to_json())
    assert isinstance(back, MulticlassAuto) and back.chosen_ == a.chosen_
    assert back.selection_ == a.selection_
    np.testing.assert_array_equal(back.predict_proba(s), a.predict_proba(s))
    assert back.to_json() == a.to_json()


def test_one_vs_rest_auto_choice_keeps_each_class_fit_info():
    s, y = _distorted(300, seed=4)
    auto = MulticlassAuto(candidates=["one-vs-rest:auto"]).fit(s, y)
    doc = json.loads(auto.to_json())
    assert doc["method"] == "multiclass-auto" and doc["map"]["type"] == "multiclass-ovr"
    assert len(doc["class_extras"]) == 4 and "fit_info" in doc["class_extras"][0]
    back = mlcal.load_calibrator(json.dumps(doc))
    assert back.calibrator_.calibrators_[0].chosen_ == auto.calibrator_.calibrators_[0].chosen_


@pytest.mark.parametrize("tamper", [
    lambda d: d.pop("fit_info"),
    lambda d: d["fit_info"].update(chosen="isotonic"),
    lambda d: d["fit_info"]["candidates"][0].update(method="nope"),
    lambda d: d["fit_info"].update(input_kind="auto"),
    lambda d: d["fit_info"].update(extra=1),
    # a candidate of the other map family than the one chosen: the map is not its map
    lambda d: d["fit_info"].update(
        chosen="vector" if d["fit_info"]["chosen"].startswith("one-vs-rest")
        else "one-vs-rest:isotonic"),
])
def test_malformed_fit_info_is_refused_on_load(tamper):
    s, y = _distorted(300, seed=5)
    doc = json.loads(MulticlassAuto(candidates=["temperature", "vector",
                                                "one-vs-rest:isotonic"]).fit(s, y).to_json())
    assert doc["fit_info"]["chosen"] in ("temperature", "vector", "one-vs-rest:isotonic")
    tamper(doc)
    with pytest.raises(CalibratorFormatError):
        mlcal.load_calibrator(json.dumps(doc))


def test_documents_of_other_methods_refuse_fit_info_and_old_one_vs_rest_auto_loads():
    s, y = _distorted(300, seed=6)
    doc = json.loads(TemperatureScaling().fit(s, y).to_json())
    doc["fit_info"] = {}
    with pytest.raises(CalibratorFormatError, match="fit_info"):
        mlcal.load_calibrator(json.dumps(doc))
    old = OneVsRest("auto").fit(s, y)   # what "auto" meant for multiclass before
    back = mlcal.load_calibrator(old.to_json())
    assert isinstance(back, OneVsRest)
    np.testing.assert_array_equal(back.predict_proba(s), old.predict_proba(s))


def test_auto_is_the_multiclass_default_everywhere(tmp_path, capsys):
    from sklearn.linear_model import LogisticRegression

    assert isinstance(multiclass_calibrator("auto"), MulticlassAuto)
    rng = np.random.default_rng(7)
    X = rng.normal(size=(900, 3))
    y = (X[:, 0] > 0.4).astype(int) + (X[:, 1] > 0).astype(int)
    base = LogisticRegression().fit(X[:300], y[:300])
    model = CalibratedModel(base).fit(X[300:], y[300:])
    assert isinstance(model.calibrator_, MulticlassAuto)
    assert model.calibrator_.selection_["input_kind"] == "probabilities"
    P = base.predict_proba(X[300:])
    path = tmp_path / "cal.csv"
    path.write_text("a,b,c,y\n" + "".join(",".join(repr(float(v)) for v in p) + f",{t}\n"
                                          for p, t in zip(P, y[300:])))
    out = tmp_path / "auto.json"
    assert main(["fit", "--data", str(path), "--score-columns", "a,b,c",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["method"] == "multiclass-auto"
    assert f"auto chose {doc['fit_info']['chosen']}" in printed
    assert doc["map"] == model.calibrator_.to_dict()["map"]


def test_too_few_rows_per_class_fall_back_to_the_first_candidate_with_a_warning():
    s, y = _distorted(200, seed=8)
    keep = (y != 2) | (np.cumsum(y == 2) <= 1)   # class 2 on a single row
    with pytest.warns(UserWarning, match="no 2-fold cross-validation possible"):
        auto = MulticlassAuto().fit(s[keep], y[keep])
    assert auto.chosen_ == MulticlassAuto().candidate_names(4)[0] == "matrix"
    assert auto.selection_["best"] is None
    assert "rows per class" in auto.selection_["reason"]


@pytest.mark.parametrize("candidates,match", [
    (["vector", "vector"], "lists a method twice"),
    (["isotonic"], "one-vs-rest:<binary method>"),
    (["auto"], "one-vs-rest:<binary method>"),
    (["one-vs-rest:nope"], "one-vs-rest:<binary method>"),
])
def test_bad_candidates_are_named_errors(candidates, match):
    from mlcal.calibrators._params import InvalidParameterError

    s, y = _distorted(100, seed=9)
    with pytest.raises(InvalidParameterError, match=match):
        MulticlassAuto(candidates=candidates).fit(s, y)


def test_the_defaults_are_the_regularised_family_without_sms_at_many_classes():
    from mlcal.calibrators.multiclass_auto import (MAX_OVR_CLASSES, MAX_SMS_CLASSES,
                                                   default_candidates)

    assert MAX_OVR_CLASSES < MAX_SMS_CLASSES

    assert MulticlassAuto().candidate_names(3) == ["matrix", "sms", "svs", "ts-mix",
                                                   "temperature", "one-vs-rest:auto"]
    assert default_candidates(MAX_OVR_CLASSES + 1) == ("matrix", "sms", "svs", "ts-mix",
                                                       "temperature")
    assert default_candidates(MAX_SMS_CLASSES + 1) == ("svs", "ts-mix", "temperature")
    s, y = _distorted(400, seed=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = MulticlassAuto().fit(s, y)
    rows = {r["method"]: r for r in auto.selection_["candidates"]}
    assert list(rows) == MulticlassAuto().candidate_names(4)
    # simplicity: temperature's one parameter < SVS's 2K + 1 < SMS's K^2 + K + 1
    assert rows["ts-mix"]["complexity"] == rows["temperature"]["complexity"] == 1
    assert rows["svs"]["complexity"] == 2 * 4 + 1 and rows["sms"]["complexity"] == 16 + 4 + 1


def test_on_an_overfitting_case_auto_beats_uncalibrated_and_is_no_worse_than_temperature():
    # Gaussian naive Bayes on digits (far too confident), 300 calibration rows
    # given as predict_proba's rows (its log-probabilities reach -1e10)
    s, y, s_te, y_te = _digits_naive_bayes(n_cal=300)
    p, p_te = softmax(s, axis=1), softmax(s_te, axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = MulticlassAuto(input_kind="probabilities").fit(p, y)
    temperature = TemperatureScaling(input_kind="probabilities").fit(p, y)
    auto_nll = _held_out_nll(auto.predict_proba(p_te), y_te)
    assert auto_nll <= _held_out_nll(temperature.predict_proba(p_te), y_te)
    assert auto_nll < 0.5 * _held_out_nll(p_te, y_te)


@pytest.mark.parametrize("n,K", [(30, 3), (12, 3), (7, 3), (40, 10)])
def test_tiny_calibration_sets_fit_with_fewer_folds_and_no_error(n, K):
    rng = np.random.default_rng(n)
    y = np.arange(n) % K
    s = rng.normal(size=(n, K)) + 1.5 * np.eye(K)[y]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # one-vs-rest auto's classes with few rows
        auto = MulticlassAuto().fit(s, y)
    rarest = np.bincount(y).min()
    assert auto.selection_["n_folds"] == min(5, rarest)
    assert auto.selection_["best"] is not None   # cross-validated, not the fallback
    p = auto.predict_proba(s)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)


def test_one_row_per_class_falls_back_and_a_failing_refit_moves_to_the_next_candidate():
    # labels against the scores: the fallback, temperature, cannot fit (inverse temperature
    # <= 0), nor can ts-mix
    s = np.eye(3)[[1, 2, 0]] * 3.0
    y = np.arange(3)
    with pytest.raises(ValueError, match="not positive"):
        TemperatureScaling(input_kind="logits").fit(s, y)
    with pytest.warns(UserWarning, match="no 2-fold cross-validation possible"):
        auto = MulticlassAuto(input_kind="logits").fit(s, y)
    assert auto.selection_["best"] is None
    assert auto.chosen_ not in ("temperature", "ts-mix")
    assert "temperature: ValueError" in auto.selection_["reason"]
    assert auto.selection_["chosen"] == auto.chosen_
    back = mlcal.load_calibrator(auto.to_json())
    np.testing.assert_array_equal(back.predict_proba(s), auto.predict_proba(s))


def test_candidates_that_differ_by_the_uniform_mixture_share_their_fold_fits():
    """ts-mix/temperature, SVS/vector and SMS/matrix are fitted once per fold; the shared
    out-of-fold losses are bit-identical to fitting each candidate on its own."""
    from mlcal.calibrators.multiclass_auto import shared_fit, stratified_folds

    assert [shared_fit(n) for n in ("temperature", "ts-mix", "svs", "vector", "sms", "matrix",
                                    "one-vs-rest:auto")] == [
        "temperature", "temperature", "svs", "svs", "sms", "sms", None]
    s, y = _distorted(300, seed=11)
    w = np.ones(len(y))
    folds = stratified_folds(s, y, w, 3, 0)
    names = ["sms", "matrix", "ts-mix", "temperature", "svs", "vector"]
    shared: dict = {}
    together = {n: MulticlassAuto._out_of_fold(n, "logits", s, y, w, folds, 3, shared)
                for n in names}
    assert len(shared) == 3 * 3
    for n in names:
        alone = MulticlassAuto._out_of_fold(n, "logits", s, y, w, folds, 3)
        assert np.array_equal(together[n][0][0], alone[0][0]), n
        assert together[n][1] == alone[1]
