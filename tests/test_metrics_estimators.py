"""Debiased, smooth and adaptive ECE, Spiegelhalter's Z and bootstrap intervals, each against an
independent reference: the authors' packages (`uncertainty-calibration` for the debiased and
equal-mass estimators of Kumar et al., `relplot` for smooth ECE), direct numerical integration,
hand formulas and simulation with known calibration."""

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from mlcal import metrics
from mlcal.metrics.bootstrap import bootstrap_ci, paired_bootstrap_diff

calibration = pytest.importorskip("calibration")  # uncertainty-calibration (dev extra)
relplot = pytest.importorskip("relplot")


def sample(n, seed, power=1.0, ties=False):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, n)
    if ties:
        p = np.round(p, 1)
    y = (rng.uniform(size=n) < p ** power).astype(int)
    return y, p


def overconfident(n, seed):
    """Labels drawn from q, predictions pushed away from 1/2: p = expit(2.5 logit(q))."""
    from scipy.special import expit, logit

    rng = np.random.default_rng(seed)
    q = rng.uniform(0.05, 0.95, n)
    return (rng.uniform(size=n) < q).astype(int), expit(2.5 * logit(q))


CASES = [(171, 0, 1.0, False), (500, 1, 1.6, False), (2000, 2, 0.7, False),
         (300, 3, 1.3, True), (40, 4, 1.0, False)]


@pytest.mark.parametrize("n,seed,power,ties", CASES)
def test_debiased_ece_equals_the_authors_package(n, seed, power, ties):
    y, p = sample(n, seed, power, ties)
    for bins in (5, 10, 15):
        ref = calibration.lower_bound_scaling_ce(p, y, p=2, debias=True, num_bins=bins,
                                                 binning_scheme=calibration.get_equal_bins)
        assert metrics.debiased_ece(y, p, bins) == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("n,seed,power,ties", [c for c in CASES if not c[3]])
def test_adaptive_ece_equals_equal_mass_plugin_of_the_authors_package(n, seed, power, ties):
    y, p = sample(n, seed, power, ties)
    ref = calibration.lower_bound_scaling_ce(p, y, p=1, debias=False, num_bins=15,
                                             binning_scheme=calibration.get_equal_bins)
    assert metrics.adaptive_ece(y, p) == pytest.approx(ref, abs=1e-12)


def test_debiased_ece_removes_the_upward_bias_of_the_plugin_estimate():
    # calibrated data: the true L2 calibration error is 0
    plug, deb = [], []
    for seed in range(200):
        y, p = sample(200, 100 + seed)
        plug.append(calibration.lower_bound_scaling_ce(
            p, y, p=2, debias=False, num_bins=15, binning_scheme=calibration.get_equal_bins))
        deb.append(metrics.debiased_ece(y, p, 15))
    assert np.mean(deb) < 0.5 * np.mean(plug)


@pytest.mark.parametrize("n,seed,power", [(171, 0, 1.0), (800, 1, 1.8), (3000, 2, 0.6)])
def test_smooth_ece_matches_relplot(n, seed, power):
    y, p = sample(n, seed, power)
    value, sigma = metrics.smooth_ece(y, p, return_bandwidth=True)
    ref, ref_sigma = relplot.smECE(p, y.astype(float), return_width=True)
    # relplot discretises the kernel on a grid and stops its bisection at 2^-10
    assert value == pytest.approx(ref, abs=2e-3)
    assert sigma == pytest.approx(ref_sigma, abs=2e-3)
    # the fixed point of the bandwidth rule
    assert value == pytest.approx(sigma, abs=2e-4)


def test_smooth_ece_at_fixed_bandwidth_equals_direct_integration():
    y, p = sample(25, 7, 1.5)
    sigma = 0.08

    def residual(t):
        k = sum(norm.pdf(t, c, sigma) for c in (p, -p, 2 - p))
        return abs(np.sum(k * (p - y))) / p.size

    def density(t):
        return sum(norm.pdf(t, c, sigma) for c in (p, -p, 2 - p)).sum() / p.size

    num = integrate.quad(residual, 0, 1, limit=400)[0]
    den = integrate.quad(density, 0, 1, limit=400)[0]
    assert den == pytest.approx(1.0, abs=1e-9)   # the reflected kernel keeps its mass
    assert metrics.smooth_ece_at(y, p, sigma) == pytest.approx(num / den, rel=1e-4)


def test_spiegelhalter_z_by_hand_and_its_null_distribution():
    p = np.array([0.1, 0.2, 0.7, 0.9])
    y = np.array([0, 1, 1, 1])
    num = (0 - .1) * .8 + (1 - .2) * .6 + (1 - .7) * -.4 + (1 - .9) * -.8
    den = np.sqrt(.8 ** 2 * .1 * .9 + .6 ** 2 * .2 * .8 + .4 ** 2 * .7 * .3 + .8 ** 2 * .9 * .1)
    z, pv = metrics.spiegelhalter_z(y, p)
    assert z == pytest.approx(num / den, abs=1e-12)
    assert pv == pytest.approx(2 * norm.sf(abs(num / den)), abs=1e-12)
    # calibrated data: rejections at 5% near 5%; miscalibrated data: nearly always rejected
    null = [metrics.spiegelhalter_z(*sample(300, 500 + s))[1] < 0.05 for s in range(400)]
    alt = [metrics.spiegelhalter_z(*overconfident(300, 900 + s))[1] < 0.05 for s in range(100)]
    assert 0.025 <= np.mean(null) <= 0.08
    assert np.mean(alt) > 0.9
    with pytest.raises(ValueError, match="undefined"):
        metrics.spiegelhalter_z([0, 1], [0.5, 0.5])


def test_bootstrap_intervals_cover_the_true_value_at_the_nominal_rate():
    # p ~ U(0, 1) and y ~ Bernoulli(p): the expected Brier score is E[p(1-p)] = 1/6 and the
    # expected log loss E[-p log p - (1-p) log(1-p)] = 1/2, exactly
    rng = np.random.default_rng(2026)
    reps, n, conf = 300, 150, 0.90
    hits = {"brier": 0, "log_loss": 0}
    truth = {"brier": 1 / 6, "log_loss": 0.5}
    for r in range(reps):
        p = rng.uniform(0.0005, 0.9995, n)
        y = (rng.uniform(size=n) < p).astype(float)
        for name in hits:
            iv = bootstrap_ci(getattr(metrics, name), y, p, confidence=conf, n_resamples=200,
                              seed=r)
            assert iv.lower <= iv.estimate <= iv.upper
            hits[name] += iv.lower <= truth[name] <= iv.upper
    for name, h in hits.items():
        # binomial sd of the coverage over 300 replications is ~0.017
        assert abs(h / reps - conf) < 0.05, (name, h / reps)


def test_paired_bootstrap_of_identical_predictors_is_exactly_zero_and_seeded():
    y, p = sample(200, 1)
    iv = paired_bootstrap_diff(metrics.log_loss, y, p, p, n_resamples=50)
    assert (iv.estimate, iv.lower, iv.upper) == (0.0, 0.0, 0.0)
    q = np.clip(p + 0.05, 0, 1)
    a = paired_bootstrap_diff(metrics.brier, y, q, p, n_resamples=100, seed=4)
    b = paired_bootstrap_diff(metrics.brier, y, q, p, n_resamples=100, seed=4)
    assert a == b and a.lower < a.estimate < a.upper
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci(metrics.brier, y, p, confidence=95)


def test_calibration_diagnostics_has_every_estimator():
    y, p = sample(300, 5)
    d = metrics.calibration_diagnostics(y, p)
    assert set(d) == set(metrics.DIAGNOSTIC_NAMES)
    assert d["debiased_ece"] == metrics.debiased_ece(y, p)
    assert d["spiegelhalter_z"] == metrics.spiegelhalter_z(y, p)[0]
