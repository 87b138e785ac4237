"""``identity_prior`` of beta calibration: ``m`` rows of pseudo-data labelled with the base
model's own (clamped) probabilities, i.e. the cross-entropy plus ``m`` times the mean KL
divergence from the base probabilities to the fitted ones. Checked against a direct
minimisation of that objective with scipy, against the bits of the fit before the parameter
existed (prior 0), and against its limit (a huge prior: the identity map)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_expit

import mlcal
from mlcal.calibrators._params import InvalidParameterError
from mlcal.maps import BetaMap
from support.synthetic import calibration_set

LN2 = np.log(2.0)


def unpack(v, parameters):
    """(a, b, c) of a parameter vector of each variant."""
    if parameters == "abm":
        return v[0], v[1], v[2]
    if parameters == "am":
        return v[0], v[0], v[1]
    return v[0], v[1], (v[0] - v[1]) * LN2


def direct(s, y, w, prior, parameters, clamp, smooth=False, pseudo=None):
    """argmin over (a, b >= 0, c) of sum_i w_i CE(t_i, eta_i) + prior / W * sum_i w_i
    CE(q_i, eta_i), ``eta = a ln s - b ln(1 - s) + c`` on the clamped scores, ``t`` the labels
    (or Platt's smoothed targets), ``q`` the pseudo-rows' labels (``pseudo``; by default the
    clamped scores themselves), ``W`` the total weight (scipy's L-BFGS-B)."""
    sc = np.clip(s, *clamp)
    l1, l2 = np.log(sc), -np.log1p(-sc)
    if smooth:
        n_pos = np.sum(w * y)
        n_neg = np.sum(w) - n_pos
        y = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    total = np.sum(w)

    def f(v):
        a, b, c = unpack(v, parameters)
        eta = a * l1 + b * l2 + c
        ce = lambda t: -(t * log_expit(eta) + (1 - t) * log_expit(-eta))   # noqa: E731
        return np.sum(w * ce(y)) + prior / total * np.sum(w * ce(q))

    q = sc if pseudo is None else pseudo
    x0 = np.array([1.0, 1.0, 0.0]) if parameters == "abm" else np.array([1.0, 0.0 if
                                                                         parameters == "am"
                                                                         else 1.0])
    bounds = {"abm": [(0, None), (0, None), (None, None)], "am": [(0, None), (None, None)],
              "ab": [(0, None), (0, None)]}[parameters]
    res = minimize(f, x0, method="L-BFGS-B", bounds=bounds,
                   options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 10_000})
    return unpack(res.x, parameters)


def data(n=400, seed=0, weights=None):
    return calibration_set(n, seed, beta=(2.0, 3.0), link_power=1.6, weights=weights)


@pytest.mark.parametrize("parameters", ["abm", "am", "ab"])
@pytest.mark.parametrize("prior", [5.0, 100.0])
@pytest.mark.parametrize("smooth", [False, True])
def test_matches_the_penalised_objective_minimised_by_scipy(parameters, prior, smooth):
    s, y, w = data(300, seed=1, weights="fractional")
    m = mlcal.get_calibrator("beta", parameters=parameters, identity_prior=prior,
                             smooth_targets=smooth).fit(s, y, sample_weight=w).map_
    a, b, c = direct(s, y, w, prior, parameters, m.clamp, smooth)
    assert m.a == pytest.approx(a, rel=1e-5, abs=1e-7)
    assert m.b == pytest.approx(b, rel=1e-5, abs=1e-7)
    assert m.c == pytest.approx(c, rel=1e-5, abs=1e-7)


def test_prior_zero_is_the_fit_before_the_parameter_bit_for_bit():
    """The maps below were written by mlcal before ``identity_prior`` existed (same data,
    extreme scores widening the clamp included): prior 0, given or not, gives the same bits."""
    s, y, w = calibration_set(500, 11, beta=(0.6, 0.8), link_power=1.7, weights="fractional")
    s = np.concatenate([s, [1e-14, 1 - 2 ** -45]])
    y = np.concatenate([y, [0.0, 1.0]])
    w = np.concatenate([w, [1.0, 2.0]])
    before = {
        ("abm", True): ("0x1.9b8a261363acep+0", "0x1.1698b5943012cp+0", "-0x1.9af131ccf1c98p-2"),
        ("abm", False): ("0x1.aef120fdcf72bp+0", "0x1.1825be1753ac3p+0", "-0x1.6ceea288d6408p-2"),
        ("ab", True): ("0x1.403a9436fe39ap+1", "0x1.287650e632645p-2", "0x1.888ef57e5da8ep+0"),
        ("ab", False): ("0x1.4b34b4f8a3262p+1", "0x1.2266fefaa0656p-2", "0x1.98d3725f68f7fp+0"),
        ("am", True): ("0x1.522219134419ap+0", "0x1.522219134419ap+0", "-0x1.a5b9aa3f4aa5dp-1"),
        ("am", False): ("0x1.5b535d3d715cfp+0", "0x1.5b535d3d715cfp+0", "-0x1.aa4e61ba0d549p-1"),
    }
    for (parameters, smooth), bits in before.items():
        for extra in ({}, {"identity_prior": 0.0}, {"identity_prior": 0}):
            m = mlcal.get_calibrator("beta", parameters=parameters, smooth_targets=smooth,
                                     **extra).fit(s, y, sample_weight=w).map_
            assert tuple(float(v).hex() for v in (m.a, m.b, m.c)) == bits
            assert m.clamp == (1e-14, 1 - 2 ** -45)


@pytest.mark.parametrize("parameters", ["abm", "am", "ab"])
def test_a_huge_prior_gives_the_identity_map_and_the_fit_moves_toward_it(parameters):
    s, y = data(seed=2)
    big = mlcal.get_calibrator("beta", parameters=parameters, identity_prior=1e12,
                               smooth_targets=False).fit(s, y)
    assert (big.map_.a, big.map_.b, big.map_.c) == pytest.approx((1.0, 1.0, 0.0), abs=1e-6)
    np.testing.assert_allclose(big.predict(s), s, rtol=0, atol=1e-6)
    # the penalty (mean KL divergence from the base probabilities to the fitted ones) of a
    # penalised optimum never grows with the penalty's weight
    kl = []
    for m in (0.0, 10.0, 100.0, 1000.0, 1e5):
        p = mlcal.get_calibrator("beta", parameters=parameters, identity_prior=m,
                                 smooth_targets=False).fit(s, y).predict(s)
        kl.append(np.mean(s * np.log(s / p) + (1 - s) * np.log((1 - s) / (1 - p))))
    assert all(a > b for a, b in zip(kl, kl[1:])) and kl[-1] < 1e-4 * kl[0]


def test_separable_labels_get_a_finite_monotone_fit_with_the_prior():
    s = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    y = np.array([0, 0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="separable"):
        mlcal.get_calibrator("beta", smooth_targets=False).fit(s, y)
    cal = mlcal.get_calibrator("beta", identity_prior=10.0, smooth_targets=False).fit(s, y)
    m = cal.map_
    assert all(np.isfinite(v) for v in (m.a, m.b, m.c)) and m.a >= 0 and m.b >= 0
    a, b, c = direct(s, y.astype(float), np.ones(6), 10.0, "abm", m.clamp)
    assert (m.a, m.b, m.c) == pytest.approx((a, b, c), rel=1e-5, abs=1e-6)
    p = cal.predict(np.linspace(0.0, 1.0, 101))
    assert np.all(np.diff(p) >= 0) and p[0] > 0 and p[-1] < 1


def test_row_order_and_weights_as_counts():
    s, y = data(300, seed=3)
    s = np.round(s, 2)   # ties: merged into weighted points first
    ref = mlcal.get_calibrator("beta", identity_prior=30.0, smooth_targets=False).fit(s, y)
    for seed in range(3):
        o = np.random.default_rng(seed).permutation(s.size)
        again = mlcal.get_calibrator("beta", identity_prior=30.0,
                                     smooth_targets=False).fit(s[o], y[o])
        assert again.to_json() == ref.to_json()
    # the prior is in rows of weight: weight 2 everywhere is every row twice
    w2 = mlcal.get_calibrator("beta", identity_prior=60.0, smooth_targets=False).fit(
        s, y, sample_weight=np.full(s.size, 2.0))
    rep = mlcal.get_calibrator("beta", identity_prior=60.0, smooth_targets=False).fit(
        np.repeat(s, 2), np.repeat(y, 2))
    assert (w2.map_.a, w2.map_.b, w2.map_.c) == pytest.approx(
        (rep.map_.a, rep.map_.b, rep.map_.c), rel=1e-9, abs=1e-12)


def test_bad_values_are_refused_and_documents_round_trip():
    s, y = data(200, seed=4)
    for bad in (-1.0, float("inf"), float("nan"), "10", None):
        with pytest.raises(InvalidParameterError, match="identity_prior"):
            mlcal.get_calibrator("beta", identity_prior=bad).fit(s, y)
    cal = mlcal.get_calibrator("beta", identity_prior=20.0, smooth_targets=False).fit(s, y)
    assert isinstance(cal.map_, BetaMap)
    back = mlcal.load_calibrator(cal.to_json())
    assert back.get_params()["identity_prior"] == 20.0 and back.map_ == cal.map_
    np.testing.assert_array_equal(back.predict(s), cal.predict(s))
    # a document written before the parameter existed loads with the default, prior 0
    old = cal.to_json().replace('"identity_prior": 20.0, ', "")
    assert '"identity_prior"' not in old
    assert mlcal.load_calibrator(old).get_params()["identity_prior"] == 0.0


def temperature_center(s, y, w, prior, clamp):
    """The temperature-scaling slope ``k >= 0`` minimising sum_i w_i CE(y_i, k l_i) + prior /
    W * sum_i w_i CE(s_i, k l_i) on the clamped log-odds ``l`` (scipy), and its probabilities."""
    sc = np.clip(s, *clamp)
    lo = np.log(sc) - np.log1p(-sc)
    total = np.sum(w)

    def f(v):
        eta = v[0] * lo
        ce = lambda t: -(t * log_expit(eta) + (1 - t) * log_expit(-eta))   # noqa: E731
        return np.sum(w * ce(y)) + prior / total * np.sum(w * ce(sc))

    k = minimize(f, [1.0], method="L-BFGS-B", bounds=[(0, None)],
                 options={"ftol": 1e-15, "gtol": 1e-11}).x[0]
    return k, 1.0 / (1.0 + np.exp(-k * lo))


@pytest.mark.parametrize("parameters", ["abm", "am", "ab"])
@pytest.mark.parametrize("prior", [5.0, 100.0])
def test_prior_toward_temperature_scaling_matches_scipy(parameters, prior):
    """``prior_center="temperature"``: the pseudo-rows are labelled with the temperature fit's
    probabilities (that fit shrunk toward the identity by the same prior), so the objective is
    the cross-entropy plus ``prior / W`` times the cross-entropy against those probabilities."""
    s, y, w = data(300, seed=5, weights="fractional")
    m = mlcal.get_calibrator("beta", parameters=parameters, identity_prior=prior,
                             smooth_targets=False, prior_center="temperature"
                             ).fit(s, y, sample_weight=w).map_
    k, q = temperature_center(s, y, w, prior, m.clamp)
    expected = direct(s, y, w, prior, parameters, m.clamp, pseudo=q)
    assert (m.a, m.b, m.c) == pytest.approx(expected, rel=1e-5, abs=1e-7)
    # not the identity-centred fit: the data are far from calibrated (k is not 1)
    assert abs(k - 1.0) > 0.05
    ident = mlcal.get_calibrator("beta", parameters=parameters, identity_prior=prior,
                                 smooth_targets=False).fit(s, y, sample_weight=w).map_
    assert abs(ident.a - m.a) + abs(ident.b - m.b) + abs(ident.c - m.c) > 1e-3


def test_prior_center_is_validated_and_documents_round_trip():
    s, y = data(200, seed=6)
    with pytest.raises(InvalidParameterError, match="prior_center"):
        mlcal.get_calibrator("beta", prior_center="platt").fit(s, y)
    # without a prior the centre does not matter: the plain fit, bit for bit
    plain = mlcal.get_calibrator("beta", smooth_targets=False).fit(s, y).map_
    other = mlcal.get_calibrator("beta", smooth_targets=False,
                                 prior_center="temperature").fit(s, y).map_
    assert (plain.a, plain.b, plain.c) == (other.a, other.b, other.c)
    cal = mlcal.get_calibrator("beta", identity_prior=20.0, smooth_targets=False,
                               prior_center="temperature").fit(s, y)
    back = mlcal.load_calibrator(cal.to_json())
    assert back.get_params()["prior_center"] == "temperature" and back.map_ == cal.map_
    old = cal.to_json().replace('"prior_center": "temperature", ', "")
    assert '"prior_center"' not in old
    assert mlcal.load_calibrator(old).get_params()["prior_center"] == "identity"
