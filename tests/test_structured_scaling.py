"""Structured vector/matrix scaling, ts-mix and the measured probability floor.

Checked against independent expectations: the floor against a brute-force loop over its
definition; the fits' stationarity against a numpy/scipy gradient of the documented objective;
held-out log loss against doing nothing and against temperature scaling on data with known
truth and on real base models (random forest and naive Bayes, which output exact zeros)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp, softmax
from sklearn.datasets import load_digits, make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB

import mlcal
from mlcal._solvers.probability_floor import (FLOOR_GRID_SIZE, likelihood_floor,
                                               probability_floor)
from mlcal.calibrators.multiclass import (MULTICLASS_METHODS, MatrixScaling,
                                          MulticlassCalibrator, TemperatureScaling,
                                          multiclass_calibrator)
from mlcal.calibrators.structured_scaling import (StructuredMatrixScaling,
                                                  StructuredVectorScaling, TemperatureMixScaling,
                                                  VectorScaling)
from mlcal.maps import MapFormatError, map_from_dict
from mlcal.maps.multiclass import PROBABILITY_FLOOR, SoftmaxAffineMap
from mlcal.metrics.multiclass import top_label_ece

STRUCTURED = [TemperatureMixScaling, StructuredVectorScaling, StructuredMatrixScaling]


def _mean_nll(p, y):
    return float(-np.mean(np.log(p[np.arange(len(y)), y])))


def _brute_force_floor(s, y, w):
    """The floor's definition, step by step: pool the numerical zeros, then add the next
    input level while it is below the pooled Laplace rate."""
    n, K = s.shape
    rw = w * (np.count_nonzero(w) / w.sum())
    eps = 2.0 ** -52
    if not np.any(s < eps):
        return eps

    def rate_at_or_below(f):
        N = M = 0.0
        for i in range(n):
            for k in range(K):
                if s[i, k] <= f:
                    N += rw[i]
                    M += rw[i] * (y[i] == k)
        return (M + 1.0) / (N + 2.0)

    top = s[s < eps].max()
    for level in np.unique(s[s >= eps]):
        r = rate_at_or_below(top)
        if level >= r:
            return max(eps, r)
        top = level
    return max(eps, min(1.0, rate_at_or_below(top)))


def _simulated(n, K, seed, power=1.0, zero_below=0.0):
    """Rows p_true ~ softmax(N(0, 2)), labels drawn from them; scores p_true^power renormalised,
    with entries below ``zero_below`` set to 0 (as random forests and naive Bayes do)."""
    rng = np.random.default_rng(seed)
    p = softmax(rng.normal(0.0, 2.0, (n, K)), axis=1)
    y = np.minimum((np.cumsum(p, axis=1) < rng.random(n)[:, None]).sum(axis=1), K - 1)
    y[:K] = np.arange(K)
    s = p ** power
    s[s < zero_below * s.max(axis=1, keepdims=True)] = 0.0
    return s / s.sum(axis=1, keepdims=True), y, p


@pytest.mark.parametrize("seed", range(6))
def test_probability_floor_matches_its_definition(seed):
    rng = np.random.default_rng(seed)
    n, K = 40, 4
    s = softmax(rng.normal(0, 3, (n, K)), axis=1)
    s[rng.random((n, K)) < 0.3] = 0.0          # exact zeros, as a random forest gives
    s[np.arange(n), rng.integers(0, K, n)] += 0.05   # no all-zero row
    s = np.round(s / s.sum(axis=1, keepdims=True), 2)   # ties
    s /= s.sum(axis=1, keepdims=True)
    y = rng.integers(0, K, n)
    w = np.ones(n) if seed % 2 else rng.integers(1, 4, n).astype(float)
    assert probability_floor(s, y, w) == pytest.approx(_brute_force_floor(s, y, w), rel=1e-12)


def test_probability_floor_uses_the_zeros_truth_rate():
    # 100 rows, K = 2; class 1 gets probability 0 (or an underflowed 1e-20) in every row and is
    # true in 9 of them: the zero cells' rate is (9 + 1) / (100 + 2), below the next level (1)
    s = np.tile([1.0, 0.0], (100, 1))
    s[::2] = [1.0 - 1e-20, 1e-20]
    y = np.zeros(100, dtype=int)
    y[:9] = 1
    assert probability_floor(s, y, np.ones(100)) == 10.0 / 102.0
    # no numerical zeros: the floor is 2**-52 and binds nowhere
    s = np.tile([0.9, 0.1], (100, 1))
    assert probability_floor(s, y, np.ones(100)) == 2.0 ** -52


def test_likelihood_floor_is_the_grid_point_where_temperature_scaling_fits_best():
    s, y, _ = _simulated(500, 4, seed=9, power=1.5, zero_below=0.02)
    w = np.ones(len(y))
    upper = probability_floor(s, y, w)
    grid = np.exp(np.linspace(np.log(2.0 ** -52), np.log(upper), FLOOR_GRID_SIZE))
    grid[0], grid[-1] = 2.0 ** -52, upper

    def ts_nll(floor):   # temperature scaling's optimum by scipy, independently of mlcal
        x = np.log(np.maximum(s, floor))
        res = minimize_scalar(lambda b: np.mean(logsumexp(b * x, axis=1)
                                                - b * x[np.arange(len(y)), y]),
                              bounds=(1e-3, 50.0), method="bounded",
                              options={"xatol": 1e-10})
        return res.fun

    nll = np.array([ts_nll(f) for f in grid])
    assert 2.0 ** -52 < upper < 0.1
    assert likelihood_floor(s, y, w) == grid[int(np.argmin(nll))]
    assert np.sort(nll)[1] - nll.min() > 1e-6   # a clear winner: no rounding-level decision


@pytest.mark.parametrize("make", STRUCTURED + [TemperatureScaling])
def test_fitted_json_does_not_depend_on_row_order_or_weights_scale(make):
    s, y, _ = _simulated(600, 5, seed=1, power=2.0, zero_below=0.01)
    w = np.random.default_rng(2).integers(1, 4, len(y)).astype(float)
    perm = np.random.default_rng(3).permutation(len(y))
    a = make().fit(s, y, sample_weight=w)
    b = make().fit(s[perm], y[perm], sample_weight=w[perm])
    assert a.map_.probability_floor > PROBABILITY_FLOOR
    assert json.dumps(a.map_.to_dict()) == json.dumps(b.map_.to_dict())


def _penalised_objective(cal, s, y):
    """The documented objective (module docstring of structured_scaling) in numpy, at the
    fitted map, and its gradient in (W, b) with the temperature held fixed."""
    m = cal.map_
    K = m.n_classes
    n = len(y)
    x = np.log(np.maximum(s, m.probability_floor)) / m.temperature
    W, b = m.full_weights(), m.bias
    z = x @ W.T + b
    q = softmax(z, axis=1)
    onehot = np.eye(K)[y]
    f = float(np.mean(logsumexp(z, axis=1) - z[np.arange(n), y]))
    gW = (q - onehot).T @ x / n
    gb = (q - onehot).mean(axis=0)
    lam_d = cal.penalty * K ** cal.class_exponent / n ** cal.size_exponent
    V = W - np.eye(K)
    diag = np.eye(K, dtype=bool)
    if isinstance(cal, StructuredMatrixScaling):
        lam_o = cal.off_diagonal_penalty * (K * (K - 1)) ** cal.class_exponent \
            / n ** cal.size_exponent
    else:
        lam_o = 0.0
        gW = gW * diag   # SVS has no off-diagonal parameters
    f += lam_d * (np.sum(V[diag] ** 2) + np.sum(b ** 2)) + lam_o * np.sum(V[~diag] ** 2)
    gW = gW + 2 * np.where(diag, lam_d, lam_o) * V
    return f, np.concatenate([gW.ravel(), gb + 2 * lam_d * b])


@pytest.mark.parametrize("make, K", [(StructuredVectorScaling, 6), (StructuredMatrixScaling, 6),
                                     (StructuredVectorScaling, 40),    # L-BFGS above K = 32
                                     (StructuredMatrixScaling, 23)])   # L-BFGS above K = 22
def test_structured_fits_are_stationary_points_of_the_documented_objective(make, K):
    s, y, _ = _simulated(1500, K, seed=K, power=1.7, zero_below=0.001)
    cal = make(penalty=0.05, class_exponent=0.5, size_exponent=0.5).fit(s, y)
    # the temperature is the temperature-scaling optimum (the pre-step)
    ts = TemperatureScaling().fit(s, y)
    assert cal.map_.temperature == pytest.approx(ts.map_.temperature, rel=1e-12)
    f, g = _penalised_objective(cal, s, y)
    assert cal.objective_ == pytest.approx(f, rel=1e-9)
    assert np.max(np.abs(g)) <= (1e-8 if K < 23 else 1e-6)   # Newton / L-BFGS
    assert cal.map_.uniform_weight == 1.0 / (len(y) + 1)


@pytest.mark.parametrize("make", STRUCTURED)
def test_no_probability_is_ever_zero_or_one(make):
    s, y, _ = _simulated(400, 4, seed=4, power=3.0)
    cal = make(input_kind="probabilities").fit(s, y)
    extreme = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1e-300, 0.0, 0.5, 0.5]])
    p = cal.predict_proba(np.vstack([s, extreme]))
    eps = cal.map_.uniform_weight
    assert eps == 1.0 / 401
    assert p.min() >= eps / 4 * (1 - 1e-12) and p.max() < 1.0
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    logits = make(input_kind="logits").fit(np.log(s + 1e-3), y)
    q = logits.predict_proba(np.array([[1e4, -1e4, 0.0, 0.0]]))
    assert q.min() > 0.0 and q.max() < 1.0


@pytest.mark.parametrize("make", STRUCTURED)
def test_json_round_trip_and_registration(make):
    s, y, _ = _simulated(300, 3, seed=5, power=2.0)
    cal = make().fit(s, y)
    back = MulticlassCalibrator.from_json(cal.to_json())
    assert type(back) is make
    np.testing.assert_array_equal(back.predict_proba(s), cal.predict_proba(s))
    name = {TemperatureMixScaling: "ts-mix", StructuredVectorScaling: "svs",
            StructuredMatrixScaling: "sms"}[make]
    assert MULTICLASS_METHODS[name] is make and type(multiclass_calibrator(name)) is make
    assert type(mlcal.load_calibrator(cal.to_json())) is make


def test_map_fields_are_validated_and_optional():
    base = SoftmaxAffineMap([1.0, 2.0], [0.0, 0.5], 1.5, "log-probabilities").to_dict()
    assert "uniform_weight" not in base and "probability_floor" not in base   # old documents
    assert map_from_dict(base).uniform_weight == 0.0
    assert map_from_dict(base).probability_floor == PROBABILITY_FLOOR
    for field, value, phrase in [("uniform_weight", 1.0, "uniform_weight must be in [0, 1)"),
                                 ("uniform_weight", -0.1, "uniform_weight must be in [0, 1)"),
                                 ("probability_floor", 0.0, "probability_floor must be in"),
                                 ("probability_floor", 1.5, "probability_floor must be in"),
                                 ("probability_floor", "x", "must be a finite number")]:
        with pytest.raises(MapFormatError, match=phrase.replace("[", r"\[").replace(")", r"\)")):
            map_from_dict({**base, field: value})
    with pytest.raises(MapFormatError, match="'log-probabilities' only"):
        SoftmaxAffineMap([1.0, 1.0], [0.0, 0.0], probability_floor=0.1)
    m = SoftmaxAffineMap([1.0, 1.0], [0.0, 0.0], 1.0, "log-probabilities", uniform_weight=0.2,
                         probability_floor=0.1)
    # floor: 0 and 0.05 both read as 0.1; mixture: 0.8 p + 0.1
    p = m(np.array([[0.0, 1.0], [0.05, 0.95], [0.5, 0.5]]))
    expected = 0.8 * softmax(np.log(np.array([[0.1, 1.0], [0.1, 0.95], [0.5, 0.5]])),
                             axis=1) + 0.1
    np.testing.assert_allclose(p, expected, rtol=1e-14)
    assert map_from_dict(json.loads(json.dumps(m.to_dict()))).to_dict() == m.to_dict()


def _digits_outputs(base, seed=0):
    X, y = load_digits(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, train_size=0.5, stratify=y,
                                                  random_state=seed)
    X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, train_size=0.5,
                                                stratify=y_rest, random_state=seed)
    base.fit(X_tr, y_tr)
    return base.predict_proba(X_cal), y_cal, base.predict_proba(X_te), y_te


def _forest_outputs():
    """A 50-tree random forest on 10 simulated classes: exact zeros, some on the true class."""
    X, y = make_classification(3000, n_features=20, n_informative=10, n_classes=10,
                               n_clusters_per_class=1, random_state=0)
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, train_size=1 / 3, stratify=y,
                                                  random_state=0)
    X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, train_size=0.5,
                                                stratify=y_rest, random_state=0)
    base = RandomForestClassifier(50, random_state=0).fit(X_tr, y_tr)
    return base.predict_proba(X_cal), y_cal, base.predict_proba(X_te), y_te


@pytest.mark.parametrize("outputs", [lambda: _digits_outputs(GaussianNB()), _forest_outputs],
                         ids=["naive-bayes-digits", "random-forest-simulated"])
def test_exact_zero_inputs_get_a_measured_floor_and_beat_a_fixed_tiny_floor(outputs):
    s_cal, y_cal, s_te, y_te = outputs()
    assert np.mean(s_cal == 0.0) > 0.1    # the base model outputs exact zeros
    ts = TemperatureScaling().fit(s_cal, y_cal)
    floor = ts.map_.probability_floor
    assert 2.0 ** -52 <= floor <= probability_floor(s_cal, y_cal, np.ones(len(y_cal)))
    # the same fit on the old fixed floor 1e-300 (the logits of log(max(p, 1e-300)))
    x = lambda s: np.log(np.maximum(s, 1e-300))   # noqa: E731
    old = TemperatureScaling(input_kind="logits").fit(x(s_cal), y_cal)
    new_loss = _mean_nll(ts.predict_proba(s_te), y_te)
    old_loss = _mean_nll(old.predict_proba(x(s_te)), y_te)
    assert new_loss < 0.9 * old_loss
    assert top_label_ece(y_te, ts.predict_proba(s_te)) < 0.5 * top_label_ece(
        y_te, old.predict_proba(x(s_te)))
    for make in STRUCTURED:   # and none of the structured fits is worse than ts-mix by > 2 %
        p = make().fit(s_cal, y_cal).predict_proba(s_te)
        assert _mean_nll(p, y_te) <= 1.02 * _mean_nll(
            TemperatureMixScaling().fit(s_cal, y_cal).predict_proba(s_te), y_te)


@pytest.mark.parametrize("n_cal", [200, 1000])
@pytest.mark.parametrize("K", [5, 20])
def test_structured_scaling_is_not_worse_than_doing_nothing_on_calibrated_scores(K, n_cal):
    """Scores that are the true probabilities: any fit can only add estimation noise (the
    fitted temperature alone costs up to ~2 % of held-out log loss at 200 rows). The penalties
    keep SVS and SMS within 1 % of ts-mix, and within 3 % (200 rows) / 1 % (1000 rows) of
    doing nothing; unregularised matrix scaling loses several times more."""
    s, y, p = _simulated(n_cal + 20000, K, seed=100 + K + n_cal)
    cal, te = slice(0, n_cal), slice(n_cal, None)
    ref = _mean_nll(s[te], y[te])
    ts_mix = _mean_nll(TemperatureMixScaling().fit(s[cal], y[cal]).predict_proba(s[te]), y[te])
    for make in (StructuredVectorScaling, StructuredMatrixScaling, VectorScaling,
                 MatrixScaling):   # plain vector / matrix: the same fits without the mixture
        loss = _mean_nll(make().fit(s[cal], y[cal]).predict_proba(s[te]), y[te])
        assert loss <= ts_mix + 0.01 * ref, make.__name__
        assert loss <= (1.03 if n_cal == 200 else 1.01) * ref, make.__name__


@pytest.mark.parametrize("K", [5, 20])
def test_structured_scaling_fixes_miscalibration_where_unregularised_overfits(K):
    n_cal = 300
    s, y, p = _simulated(n_cal + 20000, K, seed=200 + K, power=2.0)
    cal, te = slice(0, n_cal), slice(n_cal, None)
    unc = _mean_nll(s[te], y[te])
    truth = _mean_nll(p[te], y[te])
    svs = _mean_nll(StructuredVectorScaling().fit(s[cal], y[cal]).predict_proba(s[te]), y[te])
    sms = _mean_nll(StructuredMatrixScaling().fit(s[cal], y[cal]).predict_proba(s[te]), y[te])
    assert svs < unc and sms < unc
    # most of the gap to the truth is closed
    assert svs - truth < 0.25 * (unc - truth) and sms - truth < 0.25 * (unc - truth)
    for make in (VectorScaling, MatrixScaling):   # issue 26: formerly overfitted here
        plain = _mean_nll(make().fit(s[cal], y[cal]).predict_proba(s[te]), y[te])
        assert plain - truth < 0.25 * (unc - truth), make.__name__


def test_letter_like_naive_bayes_26_classes_converges_and_beats_temperature():
    """Regression: on naive-Bayes outputs for 26 classes with underflowed probabilities (the
    letter / naive Bayes case; letter itself is not shipped offline), matrix scaling with a
    free diagonal stops after 10000 L-BFGS iterations without converging (separable rows).
    The structured fits have a strictly convex objective and converge."""
    X, y = make_classification(6000, n_features=16, n_informative=14, n_redundant=0,
                               n_classes=26, n_clusters_per_class=1, class_sep=3,
                               random_state=0)
    X[:, :8] *= 5
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, train_size=0.5, stratify=y,
                                                  random_state=0)
    X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, train_size=0.5,
                                                stratify=y_rest, random_state=0)
    nb = GaussianNB(var_smoothing=1e-12).fit(X_tr, y_tr)
    s_cal, s_te = nb.predict_proba(X_cal), nb.predict_proba(X_te)
    assert np.mean(s_cal < 2.0 ** -52) > 0.1
    ts_mix = _mean_nll(TemperatureMixScaling().fit(s_cal, y_cal).predict_proba(s_te), y_te)
    ts = _mean_nll(TemperatureScaling().fit(s_cal, y_cal).predict_proba(s_te), y_te)
    # issue 26: letter / NB is also the plain (unmixed) scalings' regression test; they are
    # compared with temperature scaling, which has no mixture either
    for make, reference in ((StructuredVectorScaling, ts_mix), (StructuredMatrixScaling, ts_mix),
                            (VectorScaling, ts), (MatrixScaling, ts)):
        cal = make().fit(s_cal, y_cal)
        assert cal.n_iter_ < 1000
        assert _mean_nll(cal.predict_proba(s_te), y_te) <= reference, make.__name__


def test_naive_bayes_log_probabilities_down_to_minus_1e16_fit_as_logits():
    """Issue 26: GaussianNB's log-probabilities reach -1e16 here; from 1/T = 1 Newton's first
    step was so far off that the temperature fit (and the pre-step of every scaling) failed.
    Every scaling now fits, and the temperature is the NLL's minimiser (checked with numpy)."""
    X, y = load_digits(return_X_y=True)
    X_tr, X_cal, y_tr, y_cal = train_test_split(X, y, train_size=0.4, stratify=y,
                                                random_state=0)
    logp = GaussianNB(var_smoothing=1e-15).fit(X_tr, y_tr).predict_log_proba(X_cal)
    assert logp.min() < -1e15
    for name in ("temperature", "ts-mix", "vector", "matrix", "svs", "sms"):
        cal = MULTICLASS_METHODS[name](input_kind="logits").fit(logp, y_cal)
        assert np.all(np.isfinite(cal.predict_proba(logp))), name
    beta = 1.0 / TemperatureScaling(input_kind="logits").fit(logp, y_cal).map_.temperature

    def nll(b):
        z = b * logp
        return float(np.mean(logsumexp(z, axis=1) - z[np.arange(len(y_cal)), y_cal]))

    assert nll(beta) <= min(nll(beta * 0.99), nll(beta * 1.01))


@pytest.mark.parametrize("make, large_k", [
    (StructuredMatrixScaling, True), (MatrixScaling, True), (StructuredVectorScaling, True),
    (StructuredMatrixScaling, False), (StructuredVectorScaling, False),
    (TemperatureScaling, False)])
def test_subsample_warm_start_and_preconditioned_lbfgs_reach_the_newton_optimum(make, large_k,
                                                                               monkeypatch):
    """The large-N routes (a fit on every 8th row first; then on all rows, for many classes
    L-BFGS preconditioned by the Hessian diagonal, for few classes L-BFGS preconditioned by
    the subsample's exact Hessian) end at the optimum Newton's method finds with the exact
    Hessian on all rows, and at one scipy's minimiser of the documented objective cannot
    improve; the JSON does not depend on the row order. The full-data stage stops at a
    predicted decrease of 1e-9 relative (FINE_DECREASE: the objective within ~1e-10 of the
    tight optimum), so "cannot improve" is to that level (scipy's run is tight), and the
    gradient there is ~sqrt(gap * curvature), up to ~1e-5."""
    import dataclasses

    import mlcal._solvers.softmax_affine as softmax_affine
    import mlcal.calibrators.structured_scaling as structured
    from scipy.optimize import minimize

    s, y, _ = _simulated(3000, 6, seed=12, power=1.7, zero_below=0.001)
    newton = make().fit(s, y)   # 3000 rows, at most 42 parameters: Newton on all rows
    monkeypatch.setattr(softmax_affine, "COARSE_ROWS", 400)   # every 8th row first
    if large_k:
        monkeypatch.setattr(structured, "MAX_NEWTON_PARAMETERS", 0)
        monkeypatch.setattr(structured, "MAX_NEWTON_CLASSES_SVS", 0)
    fast = make().fit(s, y)
    assert softmax_affine.coarse_rows(len(y)) is not None
    assert fast.objective_ == pytest.approx(newton.objective_, rel=1e-9, abs=0.0)
    perm = np.random.default_rng(0).permutation(len(y))
    assert make().fit(s[perm], y[perm]).to_json() == fast.to_json()
    if make is TemperatureScaling:
        # the objective is flat at its optimum: a gap of 1e-14 in it (the stopping rule)
        # leaves the parameter uncertain at about its square root
        assert fast.map_.temperature == pytest.approx(newton.map_.temperature, rel=1e-6)
        return
    f, g = _penalised_objective(fast, s, y)
    assert f == pytest.approx(fast.objective_, rel=1e-12)
    assert np.max(np.abs(g)) <= 3e-5
    K = s.shape[1]
    full = make is not StructuredVectorScaling

    def objective(theta):
        m = fast.map_
        W = theta[:K * K].reshape(K, K) if full else theta[:K]
        cal = type(fast)(**fast.get_params())
        cal.map_ = dataclasses.replace(m, weights=W, bias=theta[-K:])
        f, g = _penalised_objective(cal, s, y)   # gradient in (full W, b)
        return f, g if full else np.concatenate([np.diag(g[:K * K].reshape(K, K)), g[-K:]])

    theta0 = np.concatenate([fast.map_.weights.ravel(), fast.map_.bias])
    res = minimize(objective, theta0 + 0.01, jac=True, method="BFGS",
                   options={"gtol": 1e-10, "maxiter": 2000})
    assert fast.objective_ <= res.fun * (1 + 1e-9)
    assert fast.objective_ == pytest.approx(res.fun, rel=1e-9, abs=0.0)


@pytest.mark.parametrize("n, K", [(1003, 7), (402, 30), (7, 3)])
def test_four_row_gradient_kernel_is_bit_identical_to_the_row_kernel(n, K):
    """The four-rows-at-a-time objective and gradient (the large-K L-BFGS pass) adds the same
    terms in the same order as the row-at-a-time kernel: equal bits, remainder rows included."""
    from mlcal._solvers.softmax_affine import nll_and_gradient, nll_and_gradient_full

    rng = np.random.default_rng(n)
    x = np.log(rng.dirichlet(np.full(K, 0.3), n) + 1e-12)
    y, w = rng.integers(0, K, n), rng.random(n)
    W, b = np.eye(K) + 0.1 * rng.normal(size=(K, K)), rng.normal(size=K)
    f1, dW1, db1 = nll_and_gradient(x, y, w, W, b, True)
    f2, dW2, db2 = nll_and_gradient_full(x, y, w, W, b)
    assert f1 == f2 and np.array_equal(dW1, dW2) and np.array_equal(db1, db2)
    # and it is the gradient: numpy's own computation agrees to rounding
    z = x @ W.T + b
    q = softmax(z, axis=1) - np.eye(K)[y]
    np.testing.assert_allclose(dW2, (w[:, None] * q).T @ x / w.sum(), rtol=1e-9, atol=1e-12)
    assert f2 == pytest.approx(float(np.sum(w * (logsumexp(z, axis=1) - z[np.arange(n), y]))
                                     / w.sum()), rel=1e-12)


def test_matrix_hessian_diagonal_matches_numpy():
    """The L-BFGS preconditioner of matrix scaling is the exact diagonal of the Hessian of the
    weighted mean NLL: ``mean(p_k (1 - p_k) x_j^2)`` per ``W[k, j]``, ``mean(p_k (1 - p_k))``
    per bias (numpy, from the softmax of ``x W^T + b``)."""
    from mlcal._solvers.softmax_derivatives import matrix_hessian_diagonal

    rng = np.random.default_rng(3)
    n, K = 203, 7
    x = rng.normal(0.0, 2.0, (n, K))
    y = rng.integers(0, K, n)
    w = rng.uniform(0.2, 3.0, n)
    for W, b in [(np.eye(K), np.zeros(K)),
                 (np.eye(K) + 0.3 * rng.normal(size=(K, K)), rng.normal(size=K))]:
        p = softmax(x @ W.T + b, axis=1)
        q = w[:, None] * p * (1.0 - p)
        expected = np.concatenate([(q.T @ (x * x)).ravel(), q.sum(axis=0)]) / w.sum()
        got = matrix_hessian_diagonal(x, y, w, np.ascontiguousarray(W), b)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0.0)


def test_large_n_temperature_pre_step_is_the_optimum_with_an_unevaluated_last_step(
        monkeypatch):
    """Above 2 * COARSE_ROWS rows the pre-step of SMS ends with Newton's step on all rows
    taken unevaluated: no pass at the returned inverse temperature, two or three passes over
    all rows in all (two at N = 1e5, K = 100, where the subsample's optimum is closer than on
    this 375-row subsample), and the temperature is the root of the temperature objective's
    derivative (scipy's brentq on numpy's derivative) to 1e-8 relative (3.6e-9 here: Newton's
    error after the step is about the square of the one before; the checked rule it replaces
    stopped on the objective's 1e-14 gap, which leaves the parameter at up to ~1e-7, 8.5e-8
    at N = 1e5, K = 100)."""
    import mlcal._solvers.softmax_affine as softmax_affine
    import mlcal.calibrators.multiclass as multiclass
    from scipy.optimize import brentq

    s, y, _ = _simulated(3000, 6, seed=5, power=1.7, zero_below=0.001)
    monkeypatch.setattr(softmax_affine, "COARSE_ROWS", 400)
    passes = []
    kernel = multiclass.temperature_derivatives

    def counted(x, yy, w, beta):
        passes.append((x.shape[0], beta))
        return kernel(x, yy, w, beta)

    monkeypatch.setattr(multiclass, "temperature_derivatives", counted)
    cal = StructuredMatrixScaling().fit(s, y)
    full = [beta for rows, beta in passes if rows == len(y)]
    assert len(full) in (2, 3) and len(passes) > len(full)
    assert 1.0 / cal.map_.temperature not in full
    x = cal.map_.transform_input(s)

    def derivative(beta):
        z = beta * x
        p = softmax(z, axis=1)
        return float(np.mean(np.sum(p * x, axis=1) - x[np.arange(len(y)), y]))

    beta = brentq(derivative, 0.05, 5.0, xtol=1e-15, rtol=1e-15)
    assert cal.map_.temperature == pytest.approx(1.0 / beta, rel=1e-8)
