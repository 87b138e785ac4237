"""The fast paths of the beta-family fits (the temperature anchor's refit): the total weight
without ``math.fsum``'s list when the weights are counts, the features handed to the solver as
columns, and each column standardised by fused numba passes that replay NumPy's pairwise sums.

Each is checked against the straightforward computation it replaces (``math.fsum``, NumPy's
``np.sum`` of the materialised terms, the stacked ``n x k`` array) to the bit, and the whole
temperature-centred fit on data large enough to take every fast path (counts as weights, more
than 2,000 points: the warm start) against scipy's minimisation of the documented penalised
objective."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_expit

from mlcal._solvers.beta_fit import fit_beta_points, identity_prior_targets, total_weight
from mlcal._solvers.logistic_newton import (_scale_columns, _scaled_sum, fit_logistic,
                                            fit_nonnegative)
from mlcal._solvers.ties import sort_and_collapse
from mlcal.maps.binary import data_clamp


def reference_sum(f, w, scale, m, mode):
    """``np.sum`` of the materialised terms of each mode, as the NumPy code wrote them."""
    fs = f * scale
    d = fs - m
    return float(np.sum([fs, w * fs, d * d, w * d * d][mode]))


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_fused_sums_are_numpys_pairwise_sums_to_the_bit(mode):
    rng = np.random.default_rng(mode)
    lengths = list(range(0, 300)) + [511, 512, 513, 1023, 2000, 8191, 8192, 8193, 65537,
                                     100_000] + list(rng.integers(300, 50_000, 20))
    for n in lengths:
        f = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
        w = rng.uniform(0.1, 3.0, n)
        scale, m = 2.0 ** -int(rng.integers(-4, 8)), float(rng.standard_normal())
        got = float(_scaled_sum(f, w, scale, m, mode))
        assert got == reference_sum(f, w, scale, m, mode), n
        # the sign of a zero sum as NumPy's (its reduction starts from the identity 0.0)
        z = np.full(n, -0.0)
        assert math.copysign(1.0, _scaled_sum(z, np.ones(n), 1.0, 0.0, mode)) == \
            math.copysign(1.0, reference_sum(z, np.ones(n), 1.0, 0.0, mode))


def reference_columns(x, w, intercept):
    """The standardised columns as the NumPy code computed them: weighted mean and standard
    deviation with an intercept (power-of-two prescaled), weighted root mean square without."""
    cols, shifts, scales = [], [], []
    wt = float(np.sum(w))
    unit = bool((w == 1.0).all())
    for j in range(x.shape[1]):
        f = x[:, j]
        top = float(np.max(np.abs(f)))
        e = math.frexp(top)[1] if 0.0 < top < math.inf else 0
        fs = np.ldexp(f, -e)
        if intercept:
            m = float(np.sum(fs if unit else w * fs)) / wt
            d = fs - m
            sd = math.sqrt(float(np.sum(d * d if unit else w * d * d)) / wt)
            if not sd > 0.0:
                sd = math.ldexp(1.0, -e)
            cols.append(d / sd)
            shifts.append(m / sd * math.ldexp(sd, e))
            scales.append(math.ldexp(sd, e))
        else:
            rms = math.sqrt(float(np.sum(fs * fs if unit else w * fs * fs)) / wt)
            rms = rms if rms > 0.0 else 1.0
            cols.append(fs / rms)
            shifts.append(0.0)
            scales.append(math.ldexp(rms, e))
    if intercept:
        cols.append(np.ones(x.shape[0]))
    return np.column_stack(cols), shifts, scales


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("weights", ["unit", "fractional"])
def test_fused_standardisation_is_the_numpy_one_to_the_bit(intercept, weights):
    rng = np.random.default_rng(7)
    for n, spread in [(1, 1.0), (7, 1.0), (300, 1e-9), (5000, 1.0), (100_000, 1e12)]:
        x = np.column_stack((np.log(rng.uniform(1e-6, 1.0, n)), rng.normal(0.0, spread, n),
                             np.full(n, 3.0)))   # (a constant column: sd 0)
        w = np.ones(n) if weights == "unit" else rng.uniform(0.5, 2.0, n)
        for k in (1, 2, 3):   # (one or two columns are written row by row)
            g, shifts, scales = _scale_columns([x[:, j] for j in range(k)], w, intercept)
            ref, ref_shifts, ref_scales = reference_columns(x[:, :k], w, intercept)
            assert g.flags.c_contiguous and np.array_equal(g, ref)
            assert np.array_equal(np.signbit(g), np.signbit(ref))
            assert shifts == ref_shifts and scales == ref_scales


def test_columns_and_stacked_arrays_give_the_same_bits():
    rng = np.random.default_rng(3)
    n = 4000
    x = np.column_stack((rng.normal(size=n), rng.normal(size=n)))
    t = (rng.random(n) < 1.0 / (1.0 + np.exp(-x[:, 0] + 0.5 * x[:, 1]))).astype(float)
    w = rng.integers(1, 5, n).astype(float)
    for fit in (fit_logistic, fit_nonnegative):
        for intercept in (True, False):
            a = fit(x, t, w, intercept=intercept)
            b = fit((x[:, 0].copy(), x[:, 1].copy()), t, w, intercept=intercept)
            assert np.array_equal(a[0], b[0]) and a[1:] == b[1:]
    with pytest.raises(ValueError, match="every feature column"):
        fit_logistic((x[:, 0], x[:-1, 1]), t, w, intercept=True)


def test_total_weight_is_the_correctly_rounded_sum():
    rng = np.random.default_rng(11)
    cases = [rng.integers(1, 50, 100_000).astype(float),          # counts: the fast path
             np.array([2.0 ** 52, 1.0, 1.0, 2.0 ** 52]),          # counts at max * n > 2**53
             rng.uniform(0.1, 3.0, 10_000),                       # fractional: fsum
             np.array([1e16, 1.0, -1e16, 1.0]),                   # cancellation: fsum
             np.array([0.1] * 10), np.array([3.0]), np.array([])]
    for w in cases:
        assert total_weight(w) == math.fsum(w.tolist())
    with pytest.raises(OverflowError):
        total_weight(np.array([1.7e308, 1.7e308]))
    # the prior then leaves the targets as they are
    t = np.array([0.0, 1.0])
    assert identity_prior_targets(t, np.array([1.7e308, 1.7e308]), t, 300.0) is t


def penalised_optimum(l1, l2, y, w, prior, q, x0):
    """argmin over (a, b >= 0, c) of sum_i w_i CE(y_i, eta_i) + prior / W sum_i w_i
    CE(q_i, eta_i), eta = a l1 + b l2 + c (scipy's L-BFGS-B), and for ``l2=None`` the slope
    k >= 0 of eta = k l1 (temperature scaling)."""
    total = math.fsum(w.tolist())

    def ce(t, eta):
        return -(t * log_expit(eta) + (1 - t) * log_expit(-eta))

    def f(v):
        eta = v[0] * l1 if l2 is None else v[0] * l1 + v[1] * l2 + v[2]
        return (np.sum(w * ce(y, eta)) + prior / total * np.sum(w * ce(q, eta))) / total

    bounds = [(0, None)] if l2 is None else [(0, None), (0, None), (None, None)]
    return minimize(f, x0, method="L-BFGS-B", bounds=bounds,
                    options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000}).x


@pytest.mark.parametrize("prior", [30.0, 300.0])
def test_temperature_centred_fit_on_counts_matches_scipy(prior):
    """The anchor's fit (0/1 labels, ``prior_center="temperature"``) on 5,000 tied scores with
    count weights: the fast total, the column path and the warm start are all taken. Its
    temperature step and its beta fit are the optima of the documented objectives."""
    rng = np.random.default_rng(21)
    n = 20_000
    s = np.round(rng.beta(2.0, 3.0, n), 4)
    y = (rng.random(n) < s ** 1.6).astype(float)
    w = rng.integers(1, 4, n).astype(float)
    order = np.argsort(s, kind="stable")
    x, ybar, wsum = sort_and_collapse(s[order], y[order], w[order])
    assert x.size > 2000 and bool((wsum == np.rint(wsum)).all())
    clamp = data_clamp(x, "identity")
    a, b, c = fit_beta_points(x, ybar, wsum, "abm", False, clamp, prior, "temperature")
    sc = np.clip(x, *clamp)
    l1, l2 = np.log(sc), -np.log1p(-sc)
    k = penalised_optimum(l1 + l2, None, ybar, wsum, prior, sc, [1.0])[0]
    q = 1.0 / (1.0 + np.exp(-k * (l1 + l2)))
    expected = penalised_optimum(l1, l2, ybar, wsum, prior, q, [k, k, 0.0])
    assert (a, b, c) == pytest.approx(tuple(expected), rel=1e-5, abs=1e-6)
    # the temperature centre is not the identity: the data are far from calibrated
    assert abs(k - 1.0) > 0.05
